//! The native half of `failover.Client`: one engine future per call, awaited
//! by asyncio or driven to completion with the GIL released.

use std::future::Future;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;

use super::clock::CallClock;
use super::convert::{
    attempts_list, call_error, configuration_error, internal_error, messages_from,
    policy_from_tuple, response_tuple, seconds, PolicyTuple,
};
use super::events::EventTarget;
use crate::engine::{self, CallSpec, Clock, Event, ProviderSlot, RetryPolicy};
use crate::http::{ReqwestTransport, Transport};
use crate::providers::{self, ChatRequest, ProviderConfig, Wire};

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

struct Inner {
    providers: Vec<ProviderConfig>,
    transport: ReqwestTransport,
    /// `failover._events._emitter(on_event)`.
    emit: Py<PyAny>,
}

#[pyclass(frozen, module = "failover._native")]
pub struct NativeClient {
    inner: Arc<Inner>,
}

/// One call, resolved by the Python side and checked here.
struct Call {
    request: ChatRequest,
    chain: Vec<usize>,
    policy: RetryPolicy,
    timeout: Duration,
    deadline: Option<Duration>,
    clock: CallClock,
    events: EventTarget,
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
                        configuration_error(format!("unknown wire format {wire:?}"))
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
            .map_err(configuration_error)?;
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
        let call = self.call(py, request, chain, policy, timeout, deadline, sleeper, None)?;
        block_on_interruptibly(py, chat(Arc::clone(&self.inner), call))?
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
        // Looked up once: the engine future and the event target share them.
        let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
        let call = self.call(
            py,
            request,
            chain,
            policy,
            timeout,
            deadline,
            sleeper,
            Some(locals.clone()),
        )?;
        pyo3_async_runtimes::tokio::future_into_py_with_locals(
            py,
            locals,
            chat(Arc::clone(&self.inner), call),
        )
    }
}

impl NativeClient {
    #[allow(clippy::too_many_arguments)]
    fn call(
        &self,
        py: Python<'_>,
        request: ChatRequest,
        chain: Vec<usize>,
        policy: PolicyTuple,
        timeout: f64,
        deadline: Option<f64>,
        sleeper: Option<&Bound<'_, PyAny>>,
        locals: Option<pyo3_async_runtimes::TaskLocals>,
    ) -> PyResult<Call> {
        if chain.is_empty() || chain.iter().any(|&i| i >= self.inner.providers.len()) {
            return Err(configuration_error(
                "the provider chain must name configured providers",
            ));
        }
        let in_asyncio = locals.is_some();
        Ok(Call {
            request,
            chain,
            policy: policy_from_tuple(policy)?,
            timeout: seconds("timeout", timeout)?,
            deadline: deadline.map(|d| seconds("deadline", d)).transpose()?,
            clock: CallClock::from_sleeper(sleeper, in_asyncio)?,
            events: EventTarget::new(self.inner.emit.clone_ref(py), locals),
        })
    }
}

/// Drives `future` to completion for a synchronous caller, with the GIL
/// released, checking for Ctrl-C between slices. From a thread that is
/// already inside the runtime (an event hook making a sync call), the future
/// is spawned instead, since such a thread cannot block on the runtime.
fn block_on_interruptibly<T: Send + 'static>(
    py: Python<'_>,
    future: impl Future<Output = T> + Send + 'static,
) -> PyResult<T> {
    let runtime = pyo3_async_runtimes::tokio::get_runtime();
    if tokio::runtime::Handle::try_current().is_ok() {
        let task = runtime.spawn(future);
        let cancel = task.abort_handle();
        let (tx, rx) = std::sync::mpsc::channel();
        runtime.spawn(async move {
            let _ = tx.send(task.await);
        });
        let mut rx = rx;
        loop {
            let (back, received) = py.detach(move || {
                let received = rx.recv_timeout(SIGNAL_CHECK_INTERVAL);
                (rx, received)
            });
            rx = back;
            match received {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(join_error)) => return Err(internal_error(join_error)),
                Err(RecvTimeoutError::Timeout) => {
                    if let Err(interrupt) = py.check_signals() {
                        // Aborting the task drops the engine future and its request.
                        cancel.abort();
                        return Err(interrupt);
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(internal_error("the call was dropped"))
                }
            }
        }
    }
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
async fn chat(inner: Arc<Inner>, call: Call) -> PyResult<Py<PyAny>> {
    use futures_util::FutureExt;
    match std::panic::AssertUnwindSafe(chat_inner(inner, call))
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
            Err(internal_error(what))
        }
    }
}

/// One chat call through the engine. The only place the engine is run.
async fn chat_inner(inner: Arc<Inner>, call: Call) -> PyResult<Py<PyAny>> {
    let Call {
        request,
        chain,
        policy,
        timeout,
        deadline,
        mut clock,
        events,
    } = call;
    let slots: Vec<ProviderSlot> = chain
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
        policy: &policy,
        attempt_timeout: timeout,
        deadline,
    };
    let names: Vec<&str> = slots.iter().map(|s| s.name.as_str()).collect();
    let configs: Vec<&ProviderConfig> = chain.iter().map(|&i| &inner.providers[i]).collect();
    // A sleeper interrupted by KeyboardInterrupt (or any BaseException) ends the call.
    let interrupted = clock.interruption();
    let clock = clock;
    let mut on_event = |event: Event| {
        if !matches!(event, Event::CallFailed { .. }) {
            Python::attach(|py| {
                events.send_engine_event(py, &event, &names, &configs, clock.wall())
            });
        }
    };
    let transport = &inner.transport;
    let mut unit = || rand::random::<f64>();
    let run = engine::run(&spec, &clock, &mut unit, &mut on_event, |index, timeout| {
        let provider = configs[index];
        let http_request = providers::build_request(provider, &request);
        async move {
            let response = transport.send(&http_request, timeout).await?;
            providers::parse_response(provider, response)
        }
    });
    let result = match interrupted {
        None => run.await,
        Some(mut interrupted) => {
            tokio::pin!(run);
            tokio::select! {
                result = &mut run => result,
                Ok(error) = &mut interrupted => return Err(error),
            }
        }
    };
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
            let payload = (
                call_id.as_str(),
                error.clone_ref(py),
                attempts,
                failure.reason.as_str(),
            );
            events.send(py, "CallFailed", payload.into_pyobject(py)?.into_any());
            Err(PyErr::from_value(error.into_bound(py)))
        }
    })
}
