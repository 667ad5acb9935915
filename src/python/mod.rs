//! pyo3 bindings: the private `failover._native` module. No engine logic
//! lives here: this file converts between Python and Rust, and runs the one
//! engine future either blocking (GIL released, Ctrl-C checked) or as an
//! asyncio awaitable.

mod call;
mod client;
mod clock;
mod errors;
mod events;
mod failures;
mod fleet;
mod json;
mod mock;
mod runtime;
mod seam;
mod stream;

use pyo3::prelude::*;

use pyo3::types::PyTuple;

use crate::engine::classify::DEFAULT_OVERLOADED_STATUSES;
use crate::engine::hints::{self, Headers};
use crate::engine::policy::{DEFAULT_STOP_ON, MAX_RETRIES};
use crate::engine::ErrorKind;

/// `failover.retry_after()`, after the Python side normalised its arguments.
#[pyfunction]
#[pyo3(signature = (headers, body=None, now=None))]
fn retry_after(
    headers: Vec<(String, String)>,
    body: Option<String>,
    now: Option<f64>,
) -> Option<f64> {
    let headers: Headers = headers.into_iter().collect();
    let now = match now.and_then(hints::secs) {
        Some(since_epoch) => std::time::UNIX_EPOCH + since_epoch,
        None => std::time::SystemTime::now(),
    };
    hints::retry_after(&headers, body.as_deref(), now).map(|d| d.as_secs_f64())
}

/// Whether a header name carries a credential: such headers are sent marked
/// sensitive, redacted from echoes, and never sent over plain http.
#[pyfunction]
fn is_credential_header(name: &str) -> bool {
    crate::providers::is_credential_header(name)
}

/// The header a key travels in on the wire named `wire` (`entra_token`: an
/// Azure key that is an Entra ID token), for `headers=` that replace it.
#[pyfunction]
fn key_header_name(wire: &str, entra_token: bool) -> Option<&'static str> {
    let wire = crate::providers::Wire::parse(wire)?;
    Some(crate::providers::key_header_for(wire, entra_token))
}

/// Why `value` cannot be sent as JSON, or `None` (the rule every body
/// field follows, for options to check when given).
#[pyfunction]
fn json_problem(value: &Bound<'_, PyAny>) -> Option<String> {
    json::json_problem(value)
}

/// Why `name` cannot name a tool, or `None` (the rule the conversation
/// applies, for `Tool()` to check when given).
#[pyfunction]
fn tool_name_problem(name: &str) -> Option<String> {
    crate::conversation::tool_name_problem(name)
}

/// Checks a provider's `base_url` as the transport will read it; returns
/// why it cannot be used, or `None`.
#[pyfunction]
fn check_base_url(url: &str) -> Option<String> {
    match reqwest::Url::parse(url) {
        Err(e) => Some(e.to_string()),
        Ok(u) if !matches!(u.scheme(), "http" | "https") => Some(format!(
            "the scheme must be http or https, not {:?}",
            u.scheme()
        )),
        Ok(u) if u.host_str().is_none_or(str::is_empty) => Some("it has no host".into()),
        Ok(u) if u.fragment().is_some() => Some("it has a #fragment".into()),
        Ok(_) => None,
    }
}

/// A URL as the transport reads it: `(scheme, host, port, path, has a
/// query)`, or `None` when it does not parse. Python
/// decides what is safe and what to show from this, never from another
/// parser's reading of the same text.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn url_parts(url: &str) -> Option<(String, String, Option<u16>, String, bool)> {
    let u = reqwest::Url::parse(url).ok()?;
    // host_str brackets an IPv6 address: "[::1]".
    let host = u.host_str().filter(|h| !h.is_empty())?.to_string();
    Some((
        u.scheme().to_string(),
        host,
        u.port(),
        u.path().to_string(),
        u.query().is_some(),
    ))
}

/// Whether a URL carries credentials (a user part, a credential-named
/// query value): such a URL is never sent over plain http to a remote host.
#[pyfunction]
fn url_has_credentials(url: &str) -> bool {
    !crate::providers::url_secrets(url).is_empty()
        || reqwest::Url::parse(url)
            .is_ok_and(|u| !u.username().is_empty() || u.password().is_some())
}

/// Checks a header as the transport will send it; returns why it cannot be
/// sent, or `None`.
#[pyfunction]
fn check_header(name: &str, value: &str) -> Option<String> {
    if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
        return Some(format!("{name:?} is not a valid header name"));
    }
    if reqwest::header::HeaderValue::from_str(value).is_err() {
        return Some(format!(
            "the value of header {name:?} holds characters HTTP cannot carry"
        ));
    }
    None
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    runtime::watch_forks();
    runtime::configure_shared_runtime();
    m.add_function(wrap_pyfunction!(retry_after, m)?)?;
    m.add_function(wrap_pyfunction!(is_credential_header, m)?)?;
    m.add_function(wrap_pyfunction!(tool_name_problem, m)?)?;
    m.add_function(wrap_pyfunction!(json_problem, m)?)?;
    m.add_function(wrap_pyfunction!(key_header_name, m)?)?;
    m.add("MAX_SECONDS", hints::MAX_SECONDS)?;
    let kinds: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.as_str()).collect();
    m.add("ERROR_KINDS", PyTuple::new(m.py(), kinds)?)?;
    let stop_on: Vec<&str> = DEFAULT_STOP_ON.iter().map(ErrorKind::as_str).collect();
    m.add("DEFAULT_STOP_ON", PyTuple::new(m.py(), stop_on)?)?;
    m.add(
        "DEFAULT_OVERLOADED_STATUSES",
        PyTuple::new(m.py(), DEFAULT_OVERLOADED_STATUSES)?,
    )?;
    m.add("MAX_RETRIES", MAX_RETRIES)?;
    m.add(
        "PROXY_VARIABLES",
        PyTuple::new(m.py(), crate::http::PROXY_VARIABLES)?,
    )?;
    m.add_function(wrap_pyfunction!(check_base_url, m)?)?;
    m.add_function(wrap_pyfunction!(check_header, m)?)?;
    m.add_function(wrap_pyfunction!(url_parts, m)?)?;
    m.add_function(wrap_pyfunction!(url_has_credentials, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::quiesce, m)?)?;
    m.add_class::<client::NativeClient>()?;
    m.add_class::<seam::NativePolicy>()?;
    m.add_class::<seam::NativeHedge>()?;
    m.add_class::<seam::ResponseData>()?;
    m.add_class::<seam::EmbeddingsData>()?;
    m.add_class::<seam::MediaData>()?;
    m.add_class::<stream::NativeStream>()?;
    m.add_class::<fleet::NativeRedisState>()?;
    m.add_class::<stream::ChunkData>()?;
    m.add_class::<seam::AttemptData>()?;
    m.add_class::<seam::Journal>()?;
    m.add_class::<seam::HealthData>()?;
    m.add_class::<seam::ToolCallData>()?;
    m.add_class::<clock::VirtualClock>()?;
    m.add_class::<mock::NativeMockServer>()?;
    Ok(())
}
