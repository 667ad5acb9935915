//! `failover.RedisState`'s native half: a fleet-wide state a client is
//! built with (`Client(state=...)`).

use std::sync::Arc;

use pyo3::prelude::*;

use super::errors::{configuration_error, seconds};
use super::runtime::runtime;
use crate::engine::SharedState;
use crate::fleet::RedisState;

#[pyclass(frozen, module = "failover._native")]
pub struct NativeRedisState {
    pub state: Arc<RedisState>,
}

#[pymethods]
impl NativeRedisState {
    /// Connects in the background: building it never waits on Redis.
    #[new]
    #[pyo3(signature = (*, url, prefix, timeout))]
    fn new(url: &str, prefix: &str, timeout: f64) -> PyResult<Self> {
        let timeout = seconds("timeout", timeout)?;
        // rediss:// speaks TLS with the provider the HTTP transport uses.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let state = RedisState::new(url, prefix, timeout, runtime()?.handle().clone())
            .map_err(configuration_error)?;
        Ok(Self { state })
    }
}

impl NativeRedisState {
    pub fn shared(&self) -> Arc<dyn SharedState> {
        Arc::clone(&self.state) as Arc<dyn SharedState>
    }
}
