//! `failover.testing.MockServer`'s native half.

use std::time::Duration;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::testing::{Fault, MockServer, ScriptedResponse};

#[pyclass(frozen, module = "failover._native")]
pub struct NativeMockServer {
    server: MockServer,
}

fn parse_fault(fault: Option<&str>) -> PyResult<Option<Fault>> {
    let Some(fault) = fault else { return Ok(None) };
    match fault {
        "reset" => Ok(Some(Fault::Reset)),
        "hang" => Ok(Some(Fault::Hang)),
        other => {
            let count = |prefix: &str| other.strip_prefix(prefix).and_then(|n| n.parse().ok());
            match (count("cut:"), count("stall:")) {
                (Some(n), _) => Ok(Some(Fault::CutAfterEvents(n))),
                (_, Some(n)) => Ok(Some(Fault::StallAfterEvents(n))),
                _ => Err(PyValueError::new_err(format!(
                    "unknown fault {other:?}: use \"reset\", \"hang\", \"cut:N\" or \"stall:N\""
                ))),
            }
        }
    }
}

/// An HTTP status from any Python object, as a `ValueError` (never an
/// `OverflowError` or `TypeError`) when it is not an int from 100 to 599:
/// `MockServer::push` checks the range, this only keeps huge, negative and
/// non-int values from failing differently.
fn status_code(status: &Bound<'_, PyAny>) -> PyResult<u16> {
    match status.extract::<i64>().ok().map(u16::try_from) {
        Some(Ok(code)) => Ok(code),
        _ => Err(PyValueError::new_err(format!(
            "status must be an HTTP status code from 100 to 599, got {}",
            status.repr()?
        ))),
    }
}

#[pymethods]
impl NativeMockServer {
    #[new]
    fn new() -> PyResult<Self> {
        let runtime = super::runtime::runtime()?;
        let server = MockServer::start(runtime.handle())
            .map_err(|e| PyRuntimeError::new_err(format!("MockServer could not start: {e}")))?;
        Ok(Self { server })
    }

    #[getter]
    fn url(&self) -> String {
        self.server.url()
    }

    #[pyo3(signature = (status, headers, body, sse, delay, fault, chunks=None, interval=0.0))]
    #[allow(clippy::too_many_arguments)] // the keyword arguments of MockServer.push
    fn push(
        &self,
        status: &Bound<'_, PyAny>,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
        sse: Option<Vec<String>>,
        delay: f64,
        fault: Option<&str>,
        chunks: Option<Vec<Vec<u8>>>,
        interval: f64,
    ) -> PyResult<()> {
        let delay = crate::engine::hints::secs(delay).ok_or_else(|| {
            PyValueError::new_err("delay must be a finite number of seconds >= 0")
        })?;
        let interval = crate::engine::hints::secs(interval).ok_or_else(|| {
            PyValueError::new_err("interval must be a finite number of seconds >= 0")
        })?;
        let mut response = ScriptedResponse::new(status_code(status)?);
        response.headers = headers;
        response.body = body;
        response.sse = sse;
        response.chunks = chunks;
        response.delay = delay.min(Duration::from_secs(3600));
        response.interval = interval.min(Duration::from_secs(3600));
        response.fault = parse_fault(fault)?;
        self.server
            .push(response)
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// `(method, path, headers, body)` of every request so far.
    #[allow(clippy::type_complexity)]
    fn requests<'py>(
        &self,
        py: Python<'py>,
    ) -> Vec<(String, String, Vec<(String, String)>, Bound<'py, PyBytes>)> {
        self.server
            .requests()
            .into_iter()
            .map(|r| (r.method, r.path, r.headers, PyBytes::new(py, &r.body)))
            .collect()
    }

    #[getter]
    fn max_in_flight(&self) -> usize {
        self.server.max_in_flight()
    }

    #[getter]
    fn left_early(&self) -> usize {
        self.server.left_early()
    }

    #[getter]
    fn pending(&self) -> usize {
        self.server.pending()
    }

    /// The status of each scripted response not served yet, in order.
    fn pending_statuses(&self) -> Vec<u16> {
        self.server.pending_statuses()
    }

    fn close(&self) {
        self.server.close();
    }
}
