//! The shared tokio runtime, and the two ways Python code can end a call
//! from inside it.

use std::sync::{Arc, Mutex, OnceLock};

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use tokio::runtime::Runtime;
use tokio::sync::oneshot;

use super::errors::failover_error;

/// The runtime pyo3-async-runtimes owns, for this process only: its worker
/// threads do not survive `fork()`, and a call in a forked child would wait
/// forever on them.
pub fn runtime() -> PyResult<&'static Runtime> {
    static OWNER: OnceLock<u32> = OnceLock::new();
    let pid = std::process::id();
    if *OWNER.get_or_init(|| pid) != pid {
        return Err(failover_error(
            "this process was forked after failover had started its runtime in the parent \
             (a client's first call, or a MockServer), and that runtime's threads do not \
             survive fork(): start failover only after forking, in each worker process \
             (or use the 'spawn' start method)",
        ));
    }
    Ok(pyo3_async_runtimes::tokio::get_runtime())
}

/// Ends a call from inside it. Python code the call runs (a sleeper, an event
/// hook) may raise a BaseException such as KeyboardInterrupt or SystemExit:
/// that is not the engine's to swallow, so it ends the call and is raised.
#[derive(Clone)]
pub struct Interrupt(Arc<Mutex<Option<oneshot::Sender<PyErr>>>>);

impl Interrupt {
    pub fn new() -> (Self, oneshot::Receiver<PyErr>) {
        let (sender, receiver) = oneshot::channel();
        (Self(Arc::new(Mutex::new(Some(sender)))), receiver)
    }

    /// Ends the call with `error` (the first one wins).
    pub fn raise(&self, error: PyErr) {
        let sender = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(sender) = sender {
            let _ = sender.send(error);
        }
    }

    /// An error from user code: an ordinary exception is reported to
    /// `sys.unraisablehook` and the call goes on (`false`); anything else
    /// ends the call (`true`).
    pub fn report(&self, py: Python<'_>, error: PyErr) -> bool {
        if error.is_instance_of::<PyException>(py) {
            error.write_unraisable(py, None);
            false
        } else {
            self.raise(error);
            true
        }
    }
}
