//! The native half of `failover.Client`: one engine future per call, awaited
//! by asyncio or driven to completion with the GIL released.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use pyo3::prelude::*;
use tokio::sync::oneshot;

use super::clock::CallClock;
use super::convert::{
    attempts_list, call_error, configuration_error, internal_error, messages_from,
    policy_from_tuple, response_tuple, seconds, text_arg, PolicyTuple,
};
use super::events::EventTarget;
use super::runtime::{runtime, Interrupt};
use crate::engine::{self, CallSpec, Event, ProviderSlot, RetryPolicy};
use crate::http::{HttpRequest, ReqwestTransport, Transport};
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
    /// Resolves when Python code run by the call (a sleeper, a hook) raised
    /// something that must end it.
    interrupted: oneshot::Receiver<PyErr>,
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
    fn prompt(&self, py: Python<'_>, args: CallArgs<'_>) -> PyResult<Py<PyAny>> {
        let call = self.call(py, args, None)?;
        block_on_interruptibly(py, chat(Arc::clone(&self.inner), call))?
    }

    /// The same call as an awaitable; cancelling it drops the engine future
    /// and with it the HTTP request.
    fn prompt_async<'py>(
        &self,
        py: Python<'py>,
        args: CallArgs<'py>,
    ) -> PyResult<Bound<'py, PyAny>> {
        runtime()?;
        // Looked up once: the engine future, its events and its sleeper share them.
        let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
        let call = self.call(py, args, Some(locals.clone()))?;
        pyo3_async_runtimes::tokio::future_into_py_with_locals(
            py,
            locals,
            chat(Arc::clone(&self.inner), call),
        )
    }
}

/// One call's arguments, as `failover._client` passes them: `(messages,
/// chain, policy, timeout, deadline, sleeper, model, system, max_tokens,
/// temperature)`.
type CallArgs<'py> = (
    Bound<'py, PyAny>,
    Vec<usize>,
    PolicyTuple,
    f64,
    Option<f64>,
    Option<Bound<'py, PyAny>>,
    Option<Bound<'py, PyAny>>,
    Option<Bound<'py, PyAny>>,
    Option<u64>,
    Option<f64>,
);

impl NativeClient {
    fn call(
        &self,
        py: Python<'_>,
        args: CallArgs<'_>,
        locals: Option<pyo3_async_runtimes::TaskLocals>,
    ) -> PyResult<Call> {
        let (
            messages,
            chain,
            policy,
            timeout,
            deadline,
            sleeper,
            model,
            system,
            max_tokens,
            temperature,
        ) = args;
        if chain.is_empty() || chain.iter().any(|&i| i >= self.inner.providers.len()) {
            return Err(configuration_error(
                "the provider chain must name configured providers",
            ));
        }
        let request = ChatRequest {
            messages: messages_from(&messages)?,
            system: text_arg("system", system.as_ref())?,
            max_tokens,
            temperature,
            model: text_arg("model", model.as_ref())?,
        };
        let (interrupt, interrupted) = Interrupt::new();
        Ok(Call {
            request,
            chain,
            policy: policy_from_tuple(policy)?,
            timeout: seconds("timeout", timeout)?,
            deadline: deadline.map(|d| seconds("deadline", d)).transpose()?,
            clock: CallClock::from_sleeper(sleeper.as_ref(), locals.as_ref(), &interrupt)?,
            events: EventTarget::new(self.inner.emit.clone_ref(py), locals, interrupt),
            interrupted,
        })
    }
}

/// Drives `future` to completion for a synchronous caller, with the GIL
/// released, checking for Ctrl-C between slices (dropping the future on an
/// interrupt cancels its HTTP request). `block_in_place` lets this work on a
/// thread that is already inside the runtime too: an event hook or a sleeper
/// making a sync call hands its worker's tasks to another thread first.
fn block_on_interruptibly<T: Send>(
    py: Python<'_>,
    future: impl Future<Output = T> + Send,
) -> PyResult<T> {
    let runtime = runtime()?;
    let mut future = Box::pin(future);
    loop {
        let slice = py.detach(|| {
            tokio::task::block_in_place(|| {
                runtime.block_on(async {
                    tokio::time::timeout(SIGNAL_CHECK_INTERVAL, &mut future).await
                })
            })
        });
        match slice {
            Ok(value) => return Ok(value),
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
        clock,
        events,
        mut interrupted,
    } = call;
    let configs: Vec<&ProviderConfig> = chain.iter().map(|&i| &inner.providers[i]).collect();
    let slots: Vec<ProviderSlot> = configs
        .iter()
        .map(|c| ProviderSlot {
            overloaded_statuses: &c.overloaded_statuses,
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
    let mut on_event =
        |event: Event| Python::attach(|py| events.send_engine_event(py, &event, &configs));
    let transport = &inner.transport;
    // Each provider's request is built once per call, on its first attempt.
    let requests: Vec<OnceLock<HttpRequest>> = configs.iter().map(|_| OnceLock::new()).collect();
    let mut unit = || rand::random::<f64>();
    let run = engine::run(&spec, &clock, &mut unit, &mut on_event, |index, timeout| {
        let provider = configs[index];
        let http_request =
            requests[index].get_or_init(|| providers::build_request(provider, &request));
        async move {
            let response = transport.send(http_request, timeout).await?;
            providers::parse_response(provider, response)
        }
    });
    let result = tokio::select! {
        biased;
        Ok(error) = &mut interrupted => return Err(error),
        result = run => result,
    };
    // The engine may finish in the same poll in which a hook or a sleeper
    // asked to end the call (a FakeSleeper never yields): the interrupt wins.
    if let Ok(error) = interrupted.try_recv() {
        return Err(error);
    }
    Python::attach(|py| match result {
        Ok(success) => {
            let attempts = attempts_list(py, &success.attempts, &configs)?;
            response_tuple(
                py,
                success.value,
                &configs[success.provider].name,
                attempts,
                &call_id,
            )
        }
        Err(failure) => {
            let error = call_error(py, &failure, &configs, &call_id)?;
            let payload = (
                call_id.as_str(),
                error.clone_ref(py),
                failure.reason.as_str(),
            );
            events.send(py, "CallFailed", payload.into_pyobject(py)?.into_any());
            match interrupted.try_recv() {
                Ok(interrupt) => Err(interrupt),
                Err(_) => Err(PyErr::from_value(error.into_bound(py))),
            }
        }
    })
}
