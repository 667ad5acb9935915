//! The native half of `failover.Client`: one engine future per call, awaited
//! by asyncio or driven to completion with the GIL released.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::Value;

use super::clock::CallClock;
use crate::engine::hints;
use crate::engine::policy::{Backoff, Preset};
use crate::engine::{
    self, CallError, CallFailure, CallSpec, Clock, Event, Failure, ProviderSlot, RetryPolicy,
};
use crate::http::{ReqwestTransport, Transport};
use crate::providers::{self, ChatRequest, ChatResponse, ProviderConfig, Wire};

/// How often a blocking call wakes to let Python handle Ctrl-C.
const SIGNAL_CHECK_INTERVAL: Duration = Duration::from_millis(50);

type ProviderTuple = (
    String,
    String,
    String,
    String,
    Option<String>,
    Vec<(String, String)>,
    Vec<u16>,
    String,
);
type PolicyTuple = (
    String,
    u32,
    u32,
    f64,
    f64,
    (f64, f64, f64, f64),
    Option<f64>,
);

struct Inner {
    providers: Vec<ProviderConfig>,
    transport: ReqwestTransport,
    /// `failover._client._emit`-style callable: `emit(kind, payload)`.
    emit: Py<PyAny>,
}

#[pyclass(frozen, module = "failover._native")]
pub struct NativeClient {
    inner: Arc<Inner>,
}

/// Options resolved by the Python side for one call.
struct CallOptions {
    chain: Vec<usize>,
    policy: RetryPolicy,
    timeout: Duration,
    deadline: Option<Duration>,
}

fn seconds(name: &str, value: f64) -> PyResult<Duration> {
    crate::engine::hints::secs(value).ok_or_else(|| {
        PyValueError::new_err(format!(
            "{name} must be a finite number of seconds >= 0, got {value}"
        ))
    })
}

pub fn policy_from_tuple(t: PolicyTuple) -> PyResult<RetryPolicy> {
    let (
        preset,
        max_retries,
        max_retries_last,
        cap,
        cap_last,
        (initial, multiplier, max, jitter),
        max_interval,
    ) = t;
    let max_interval = max_interval
        .map(|v| seconds("max_interval", v))
        .transpose()?;
    let base = match preset.as_str() {
        "default" => RetryPolicy::default(),
        "laravel" => RetryPolicy::laravel(),
        "ruby_llm" => RetryPolicy::ruby_llm(max_interval),
        "openai" => RetryPolicy::openai(),
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown retry preset {other:?}"
            )))
        }
    };
    if base.preset != Preset::Default {
        // Presets are exact reproductions; their numbers are not tunable.
        return Ok(base);
    }
    Ok(RetryPolicy {
        max_retries,
        max_retries_last,
        max_retry_after: seconds("max_retry_after", cap)?,
        max_retry_after_last: seconds("max_retry_after_last", cap_last)?,
        backoff: Backoff {
            initial,
            multiplier,
            max,
            jitter,
        },
        preset: Preset::Default,
    })
}

/// A Python message list (dicts, lists, str, numbers, bools, None) -> JSON.
fn to_json(obj: &Bound<'_, PyAny>, depth: usize) -> PyResult<Value> {
    if depth > 64 {
        return Err(PyValueError::new_err("messages are nested too deeply"));
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.to_cow()?.into_owned()));
    }
    if obj.is_instance_of::<PyBool>() {
        return Ok(Value::Bool(obj.extract()?));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::from(i));
        }
        return Ok(Value::from(obj.extract::<u64>()?));
    }
    if obj.is_instance_of::<PyFloat>() {
        let f: f64 = obj.extract()?;
        return serde_json::Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| PyValueError::new_err("messages cannot hold NaN or infinity"));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = serde_json::Map::with_capacity(d.len());
        for (k, v) in d.iter() {
            let key = k
                .cast::<PyString>()
                .map_err(|_| PyTypeError::new_err("message keys must be str"))?
                .to_cow()?
                .into_owned();
            map.insert(key, to_json(&v, depth + 1)?);
        }
        return Ok(Value::Object(map));
    }
    if let Ok(l) = obj.cast::<PyList>() {
        return l
            .iter()
            .map(|v| to_json(&v, depth + 1))
            .collect::<PyResult<_>>()
            .map(Value::Array);
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        return t
            .iter()
            .map(|v| to_json(&v, depth + 1))
            .collect::<PyResult<_>>()
            .map(Value::Array);
    }
    Err(PyTypeError::new_err(format!(
        "messages may hold dict, list, str, int, float, bool and None, not {}",
        obj.get_type().name()?
    )))
}

#[pymethods]
impl NativeClient {
    #[new]
    fn new(providers: Vec<ProviderTuple>, connect_timeout: f64, emit: Py<PyAny>) -> PyResult<Self> {
        let providers = providers
            .into_iter()
            .map(
                |(
                    name,
                    wire,
                    model,
                    base_url,
                    api_key,
                    headers,
                    overloaded_statuses,
                    max_tokens_field,
                )| {
                    let wire = Wire::parse(&wire).ok_or_else(|| {
                        PyValueError::new_err(format!("unknown wire format {wire:?}"))
                    })?;
                    Ok(ProviderConfig {
                        name,
                        wire,
                        model,
                        base_url,
                        api_key,
                        headers,
                        overloaded_statuses,
                        max_tokens_field,
                    })
                },
            )
            .collect::<PyResult<Vec<_>>>()?;
        let transport = ReqwestTransport::new(seconds("connect_timeout", connect_timeout)?)
            .map_err(PyRuntimeError::new_err)?;
        Ok(Self {
            inner: Arc::new(Inner {
                providers,
                transport,
                emit,
            }),
        })
    }

    /// Blocking chat call: the engine future runs on the shared runtime with
    /// the GIL released, waking every 50 ms so Ctrl-C raises promptly.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (messages, chain, policy, timeout, deadline, sleeper, model=None, system=None, max_tokens=None, temperature=None))]
    fn prompt(
        &self,
        py: Python<'_>,
        messages: &Bound<'_, PyAny>,
        chain: Vec<usize>,
        policy: PolicyTuple,
        timeout: f64,
        deadline: Option<f64>,
        sleeper: Option<&Bound<'_, PyAny>>,
        model: Option<String>,
        system: Option<String>,
        max_tokens: Option<u64>,
        temperature: Option<f64>,
    ) -> PyResult<Py<PyAny>> {
        let request = ChatRequest {
            messages: messages_from(messages)?,
            system,
            max_tokens,
            temperature,
            model,
        };
        let options = self.options(chain, policy, timeout, deadline)?;
        let clock = CallClock::from_sleeper(sleeper, false)?;
        let future = chat(Arc::clone(&self.inner), request, options, clock);
        block_on_interruptibly(py, future)?
    }

    /// The same call as an awaitable; cancelling it drops the engine future
    /// and with it the HTTP request.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (messages, chain, policy, timeout, deadline, sleeper, model=None, system=None, max_tokens=None, temperature=None))]
    fn prompt_async<'py>(
        &self,
        py: Python<'py>,
        messages: &Bound<'py, PyAny>,
        chain: Vec<usize>,
        policy: PolicyTuple,
        timeout: f64,
        deadline: Option<f64>,
        sleeper: Option<&Bound<'py, PyAny>>,
        model: Option<String>,
        system: Option<String>,
        max_tokens: Option<u64>,
        temperature: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let request = ChatRequest {
            messages: messages_from(messages)?,
            system,
            max_tokens,
            temperature,
            model,
        };
        let options = self.options(chain, policy, timeout, deadline)?;
        let clock = CallClock::from_sleeper(sleeper, true)?;
        pyo3_async_runtimes::tokio::future_into_py(
            py,
            chat(Arc::clone(&self.inner), request, options, clock),
        )
    }
}

impl NativeClient {
    fn options(
        &self,
        chain: Vec<usize>,
        policy: PolicyTuple,
        timeout: f64,
        deadline: Option<f64>,
    ) -> PyResult<CallOptions> {
        if chain.is_empty() || chain.iter().any(|&i| i >= self.inner.providers.len()) {
            return Err(PyValueError::new_err(
                "the provider chain must name configured providers",
            ));
        }
        Ok(CallOptions {
            chain,
            policy: policy_from_tuple(policy)?,
            timeout: seconds("timeout", timeout)?,
            deadline: deadline.map(|d| seconds("deadline", d)).transpose()?,
        })
    }
}

fn messages_from(messages: &Bound<'_, PyAny>) -> PyResult<Vec<Value>> {
    match to_json(messages, 0)? {
        Value::Array(items) => Ok(items),
        _ => Err(PyTypeError::new_err("messages must be a list of dicts")),
    }
}

/// Drives `future` on the shared runtime from a synchronous caller.
fn block_on_interruptibly<T: Send>(
    py: Python<'_>,
    future: impl Future<Output = T> + Send,
) -> PyResult<T> {
    let runtime = pyo3_async_runtimes::tokio::get_runtime();
    let mut future = Box::pin(future);
    loop {
        let slice = py.detach(|| {
            runtime
                .block_on(async { tokio::time::timeout(SIGNAL_CHECK_INTERVAL, &mut future).await })
        });
        match slice {
            Ok(value) => return Ok(value),
            // Dropping `future` on KeyboardInterrupt cancels its HTTP request.
            Err(_) => py.check_signals()?,
        }
    }
}

fn new_call_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// One chat call, with a panic anywhere inside it turned into a
/// `FailoverError` instead of crossing into Python as a PanicException.
async fn chat(
    inner: Arc<Inner>,
    request: ChatRequest,
    options: CallOptions,
    clock: CallClock,
) -> PyResult<Py<PyAny>> {
    use futures_util::FutureExt;
    match std::panic::AssertUnwindSafe(chat_inner(inner, request, options, clock))
        .catch_unwind()
        .await
    {
        Ok(result) => result,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Python::attach(|py| {
                let class = exceptions_fn(py, "FailoverError")?;
                Err(PyErr::from_value(
                    class.call1((format!("internal error in failover: {what}"),))?,
                ))
            })
        }
    }
}

/// One chat call through the engine. The only place the engine is run.
async fn chat_inner(
    inner: Arc<Inner>,
    request: ChatRequest,
    options: CallOptions,
    clock: CallClock,
) -> PyResult<Py<PyAny>> {
    let slots: Vec<ProviderSlot> = options
        .chain
        .iter()
        .map(|&i| ProviderSlot {
            name: inner.providers[i].name.clone(),
            overloaded_statuses: inner.providers[i].overloaded_statuses.clone(),
        })
        .collect();
    let call_id = new_call_id();
    let spec = CallSpec {
        call_id: &call_id,
        providers: &slots,
        policy: &options.policy,
        attempt_timeout: options.timeout,
        deadline: options.deadline,
    };
    let names: Vec<&str> = slots.iter().map(|s| s.name.as_str()).collect();
    let configs: Vec<&ProviderConfig> =
        options.chain.iter().map(|&i| &inner.providers[i]).collect();
    let mut on_event = |event: Event| {
        // CallFailed is emitted below, with the very exception that is raised.
        if !matches!(event, Event::CallFailed { .. }) {
            Python::attach(|py| {
                emit_event(py, &inner.emit, &event, &names, &configs, clock.wall())
            });
        }
    };
    let transport = &inner.transport;
    let result = engine::run(
        &spec,
        &clock,
        &mut || rand::random::<f64>(),
        &mut on_event,
        |index, timeout| {
            let provider = configs[index];
            let http_request = providers::build_request(provider, &request);
            async move {
                let response = transport.send(&http_request, timeout).await?;
                providers::parse_response(provider, response)
            }
        },
    )
    .await;
    Python::attach(|py| match result {
        Ok(success) => {
            let attempts = attempts_list(py, &success.attempts, &names)?;
            response_tuple(
                py,
                success.value,
                names[success.provider],
                attempts,
                &call_id,
            )
        }
        Err(failure) => {
            let error = call_error(py, &failure, &names, &configs, &call_id, clock.wall())?;
            let attempts = attempts_list(py, &failure.attempts, &names)?;
            emit(
                py,
                &inner.emit,
                "CallFailed",
                (call_id.as_str(), error.clone_ref(py), attempts),
            );
            Err(PyErr::from_value(error.into_bound(py)))
        }
    })
}

fn response_tuple(
    py: Python<'_>,
    r: ChatResponse,
    provider: &str,
    attempts: Py<PyAny>,
    call_id: &str,
) -> PyResult<Py<PyAny>> {
    let u = r.usage;
    let usage = (
        u.input_tokens,
        u.output_tokens,
        u.cache_read_tokens,
        u.cache_write_tokens,
        u.reasoning_tokens,
    );
    let tuple = (
        r.text,
        provider,
        r.model,
        r.finish_reason,
        usage,
        attempts,
        r.request_id,
        r.raw,
        call_id,
    );
    Ok(tuple.into_pyobject(py)?.into_any().unbind())
}

fn attempts_list(
    py: Python<'_>,
    attempts: &[engine::AttemptRecord],
    names: &[&str],
) -> PyResult<Py<PyAny>> {
    let items: Vec<_> = attempts
        .iter()
        .map(|a| {
            (
                names[a.provider],
                a.status,
                a.kind.map(|k| k.as_str()),
                a.waited.as_secs_f64(),
                a.duration.as_secs_f64(),
            )
        })
        .collect();
    Ok(PyList::new(py, items)?.into_any().unbind())
}

/// `failover._exceptions` functions, looked up once.
fn exceptions_fn<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    static MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    let module = MODULE.get_or_try_init(py, || {
        PyModule::import(py, "failover._exceptions").map(Bound::unbind)
    })?;
    module.bind(py).getattr(name)
}

/// Builds the typed Python exception for a provider failure.
fn provider_error(
    py: Python<'_>,
    failure: &Failure,
    provider: &str,
    config: &ProviderConfig,
    retry_after: Option<Duration>,
    attempts: Option<Py<PyAny>>,
) -> PyResult<Py<PyAny>> {
    let info = PyDict::new(py);
    info.set_item("provider", provider)?;
    info.set_item("model", &config.model)?;
    info.set_item("status", failure.status)?;
    info.set_item("request_id", failure.request_id.as_deref())?;
    info.set_item("retry_after", retry_after.map(|d| d.as_secs_f64()))?;
    info.set_item("body", failure.body.as_deref())?;
    info.set_item("attempts", attempts)?;
    let build = exceptions_fn(py, "_provider_error")?;
    Ok(build
        .call1((failure.kind.as_str(), &failure.message, info))?
        .unbind())
}

fn call_error(
    py: Python<'_>,
    failure: &CallFailure,
    names: &[&str],
    configs: &[&ProviderConfig],
    call_id: &str,
    now: SystemTime,
) -> PyResult<Py<PyAny>> {
    let attempts = attempts_list(py, &failure.attempts, names)?;
    match &failure.error {
        CallError::Provider {
            provider,
            failure: f,
            retry_after,
        } => provider_error(
            py,
            f,
            names[*provider],
            configs[*provider],
            *retry_after,
            Some(attempts),
        ),
        CallError::Deadline { deadline, last } => {
            let cause = match last {
                Some((p, f)) => {
                    let hint = hints::retry_after(&f.headers, f.body.as_deref(), now);
                    Some(provider_error(py, f, names[*p], configs[*p], hint, None)?)
                }
                None => None,
            };
            let build = exceptions_fn(py, "_deadline_error")?;
            Ok(build
                .call1((deadline.as_secs_f64(), attempts, cause, call_id))?
                .unbind())
        }
    }
}

fn emit(py: Python<'_>, emit: &Py<PyAny>, kind: &str, payload: impl for<'py> IntoPyObject<'py>) {
    if let Err(e) = emit.call1(py, (kind, payload)) {
        e.write_unraisable(py, None);
    }
}

fn emit_event(
    py: Python<'_>,
    sink: &Py<PyAny>,
    event: &Event,
    names: &[&str],
    configs: &[&ProviderConfig],
    now: SystemTime,
) {
    match event {
        Event::RetryScheduled {
            call_id,
            provider,
            attempt,
            delay,
            kind,
            status,
        } => {
            let payload = (
                call_id.as_str(),
                names[*provider],
                *attempt,
                delay.as_secs_f64(),
                kind.as_str(),
                *status,
            );
            emit(py, sink, "RetryScheduled", payload);
        }
        Event::FailedOver {
            call_id,
            from_provider,
            to_provider,
            failure,
        } => {
            let hint = hints::retry_after(&failure.headers, failure.body.as_deref(), now);
            match provider_error(
                py,
                failure,
                names[*from_provider],
                configs[*from_provider],
                hint,
                None,
            ) {
                Ok(error) => {
                    emit(
                        py,
                        sink,
                        "FailedOver",
                        (
                            call_id.as_str(),
                            names[*from_provider],
                            names[*to_provider],
                            error,
                        ),
                    );
                }
                Err(e) => e.write_unraisable(py, None),
            }
        }
        Event::CallFailed { .. } => {}
    }
}
