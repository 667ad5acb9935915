//! A failed call as its typed `failover` exception (the engine's
//! `CallFailure` and `ProviderFailure`, with their attempts).

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::errors::exceptions_attr;
use super::seam::attempts_list;
use crate::engine::{CallError, CallFailure, ProviderFailure};
use crate::providers::ProviderConfig;

/// The typed Python exception for a provider's failure.
pub fn provider_error(
    py: Python<'_>,
    failed: &ProviderFailure,
    configs: &[&ProviderConfig],
    attempts: Option<Py<PyList>>,
    call_id: Option<&str>,
) -> PyResult<Py<PyAny>> {
    let (failure, config) = (&failed.failure, configs[failed.provider]);
    let info = PyDict::new(py);
    info.set_item("call_id", call_id)?;
    info.set_item("provider", &config.name)?;
    info.set_item("model", &config.model)?;
    info.set_item("status", failure.status)?;
    info.set_item("request_id", failure.request_id.as_deref())?;
    info.set_item("retry_after", failed.retry_after.map(|d| d.as_secs_f64()))?;
    info.set_item("body", failure.body.as_deref())?;
    info.set_item("attempts", attempts)?;
    info.set_item("kind", failure.kind.as_str())?;
    info.set_item("message", &failure.message)?;
    let build = exceptions_attr(py, "_provider_error")?;
    Ok(build.call((), Some(&info))?.unbind())
}

/// The exception a failed call raises, carrying its attempts.
pub fn call_error(
    py: Python<'_>,
    failure: &CallFailure,
    configs: &[&ProviderConfig],
    call_id: &str,
) -> PyResult<Py<PyAny>> {
    let attempts = attempts_list(py, &failure.attempts, configs)?;
    match &failure.error {
        CallError::Provider(failed) => {
            provider_error(py, failed, configs, Some(attempts), Some(call_id))
        }
        CallError::Unserved => {
            let reasons: Vec<&str> = failure
                .attempts
                .iter()
                .filter_map(|a| a.skipped.as_deref())
                .collect();
            let message = format!("no provider can serve this call: {}", reasons.join("; "));
            let build = exceptions_attr(py, "_unserved_error")?;
            Ok(build.call1((message, attempts))?.unbind())
        }
        CallError::Deadline {
            deadline,
            last,
            waiting,
        } => {
            let cause = last
                .as_ref()
                .map(|failed| provider_error(py, failed, configs, None, None))
                .transpose()?;
            let fields = PyDict::new(py);
            fields.set_item("deadline", deadline.as_secs_f64())?;
            fields.set_item("attempts", attempts)?;
            fields.set_item("cause", cause)?;
            fields.set_item("call_id", call_id)?;
            // Where the call waited for room under the client's limits.
            let waiting = waiting
                .as_ref()
                .map(|(provider, why)| format!("{}: {why}", configs[*provider].name));
            fields.set_item("waiting_for", waiting)?;
            let build = exceptions_attr(py, "_deadline_error")?;
            Ok(build.call((), Some(&fields))?.unbind())
        }
    }
}
