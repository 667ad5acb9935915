//! The shared tokio runtime, and the two ways Python code can end a call
//! from inside it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use tokio::runtime::Runtime;

use super::errors::failover_error;
use crate::call::{Interrupted, Interrupter};

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
pub struct Interrupt(Interrupter<PyErr>);

impl Interrupt {
    pub fn new() -> (Self, Interrupted<PyErr>) {
        let (interrupter, interrupted) = crate::call::interrupt();
        (Self(interrupter), interrupted)
    }

    /// Ends the call with `error` (the first one wins).
    pub fn raise(&self, error: PyErr) {
        self.0.raise(error);
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

/// Async calls whose engine future has not ended yet.
static ASYNC_IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
/// When the last async call's engine future ended.
static LAST_ASYNC_END: Mutex<Option<Instant>> = Mutex::new(None);

/// Held by an async call's future while it runs (dropped when it ends or
/// is cancelled).
pub struct AsyncCallGuard(());

impl AsyncCallGuard {
    pub fn new() -> Self {
        ASYNC_IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
        Self(())
    }
}

impl Drop for AsyncCallGuard {
    fn drop(&mut self) {
        *LAST_ASYNC_END.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        ASYNC_IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Registered with `atexit` on the first async call. After an async call's
/// future ends, a runtime thread still hands the result to the event loop
/// (`call_soon_threadsafe`, which briefly releases the GIL); if the
/// interpreter finalizes meanwhile, that thread is stopped inside Rust code
/// and the process aborts. Waiting here, with the GIL released, until no
/// call is in flight and the last hand-over has had time to finish keeps
/// the exit clean. Bounded: never more than about a second.
#[pyfunction]
pub fn quiesce(py: Python<'_>) {
    const HAND_OVER: Duration = Duration::from_millis(100);
    const LONGEST: Duration = Duration::from_secs(1);
    py.detach(|| {
        let started = Instant::now();
        while ASYNC_IN_FLIGHT.load(Ordering::SeqCst) > 0 && started.elapsed() < LONGEST {
            std::thread::sleep(Duration::from_millis(5));
        }
        let last = *LAST_ASYNC_END.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(wait) = last.and_then(|end| HAND_OVER.checked_sub(end.elapsed())) {
            std::thread::sleep(wait);
        }
    });
}
