//! Python exceptions raised from Rust, and the argument checks that raise
//! them: every failure crosses as a `failover` exception, never a bare
//! PyO3 or Rust error.

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use crate::engine::hints;

/// A function or class of `failover._exceptions`, looked up once.
pub fn exceptions_attr<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    static MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    let module = MODULE.get_or_try_init(py, || {
        PyModule::import(py, "failover._exceptions").map(Bound::unbind)
    })?;
    module.bind(py).getattr(name)
}

/// A `failover.ConfigurationError` (also a `ValueError`).
pub fn configuration_error(message: impl Into<String>) -> PyErr {
    failover_exception("ConfigurationError", message.into())
}

/// A bare `failover.FailoverError` for what should never happen (a panic,
/// a lost task): typed like every other failure, never a PanicException.
pub fn internal_error(what: impl std::fmt::Display) -> PyErr {
    failover_error(format!("internal error in failover: {what}"))
}

/// A bare `failover.FailoverError` (a closed client, a forked process).
pub fn failover_error(message: impl Into<String>) -> PyErr {
    failover_exception("FailoverError", message.into())
}

/// An instance of a `failover._exceptions` class, as a `PyErr`.
fn failover_exception(class: &str, message: String) -> PyErr {
    Python::attach(
        |py| match exceptions_attr(py, class).and_then(|c| c.call1((&message,))) {
            Ok(error) => PyErr::from_value(error),
            Err(e) => e,
        },
    )
}

/// Seconds from Python as a `Duration`, refusing what no clock can hold.
pub fn seconds(name: &str, value: f64) -> PyResult<Duration> {
    hints::secs(value).ok_or_else(|| {
        configuration_error(format!(
            "{name} must be a finite number of seconds >= 0, got {value}"
        ))
    })
}
