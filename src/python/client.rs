//! The native half of `failover.Client`: one engine future per call, awaited
//! by asyncio or driven to completion with the GIL released.

use std::future::Future;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyString;
use tokio::sync::oneshot;

use super::clock::CallClock;
use super::convert::{call_error, json_from, messages_from, text_arg};
use super::errors::{configuration_error, failover_error, internal_error, seconds};
use super::events::EventTarget;
use super::runtime::{self, runtime, Interrupt};
use super::seam::{
    attempts_list, optional_seconds, CallArgs, EmbedArgs, EmbeddingsData, ProviderSpec,
    ResponseData, TransportSpec,
};
use super::stream::NativeStream;
use crate::conversation;
use crate::engine::{
    self, CallSpec, ErrorKind, Event, Failure, LocalState, ProviderSlot, RetryPolicy, SharedState,
};
use crate::http::{HttpRequest, ReqwestTransport};
use crate::providers::{self, ChatRequest, EmbedRequest, Job, ProviderConfig, Reply, Wire};

/// The environment variables the transport reads a proxy from (Python
/// checks the same list when a client is built: `_native.PROXY_VARIABLES`).
pub const PROXY_VARIABLES: [&str; 6] = [
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
];

/// How often a blocking call wakes to let Python handle Ctrl-C.
const SIGNAL_CHECK_INTERVAL: Duration = Duration::from_millis(50);

/// Where a provider's key comes from.
enum KeySource {
    /// Fixed when the client was built (or no key at all).
    Fixed,
    /// A Python callable, called for each attempt (rotating tokens).
    Callable(Py<PyAny>),
}

pub(super) struct Inner {
    providers: Vec<ProviderConfig>,
    keys: Vec<KeySource>,
    /// `None` once the client is closed; calls in flight keep their clone.
    transport: RwLock<Option<ReqwestTransport>>,
    /// What a proxy's URL holds of credentials (`proxy=` or the proxy
    /// environment variables): removed from every answer, as keys are.
    proxy_secrets: Vec<String>,
    /// `failover._events._emitter(on_event)`.
    emit: Py<PyAny>,
    /// What calls share: cooldowns, the retry budget.
    state: Arc<dyn SharedState>,
    /// Requests in flight to each provider (a pool's `least_busy`).
    in_flight: Vec<std::sync::atomic::AtomicUsize>,
}

#[pyclass(frozen, module = "failover._native")]
pub struct NativeClient {
    inner: Arc<Inner>,
}

/// One call, resolved by the Python side and checked here.
pub(super) struct Call {
    pub(super) job: Job,
    pub(super) chain: Vec<usize>,
    pub(super) policy: RetryPolicy,
    pub(super) timeout: Duration,
    pub(super) deadline: Option<Duration>,
    pub(super) transport: ReqwestTransport,
    pub(super) clock: CallClock,
    pub(super) events: EventTarget,
    pub(super) interrupt: Interrupt,
    /// The caller's idempotency key, sent to every provider.
    pub(super) idempotency_key: Option<String>,
    /// Resolves when Python code run by the call (a sleeper, a hook, a key
    /// callable) raised something that must end it.
    pub(super) interrupted: oneshot::Receiver<PyErr>,
}

#[pymethods]
impl NativeClient {
    #[new]
    #[pyo3(signature = (*, providers, transport, emit))]
    fn new(
        py: Python<'_>,
        providers: Vec<ProviderSpec<'_>>,
        transport: TransportSpec<'_>,
        emit: Py<PyAny>,
    ) -> PyResult<Self> {
        let count = providers.len();
        let mut configs = Vec::with_capacity(providers.len());
        let mut keys = Vec::with_capacity(providers.len());
        for spec in providers {
            let wire = Wire::parse(&spec.wire).ok_or_else(|| {
                configuration_error(format!("unknown wire format {:?}", spec.wire))
            })?;
            let (api_key, source) = match spec.api_key {
                None => (None, KeySource::Fixed),
                Some(key) => match key.bind(py).cast::<PyString>() {
                    Ok(text) => (Some(text.to_cow()?.into_owned()), KeySource::Fixed),
                    Err(_) if key.bind(py).is_callable() => (None, KeySource::Callable(key)),
                    Err(_) => {
                        return Err(configuration_error(format!(
                            "provider {:?}: api_key must be a str or a callable returning one",
                            spec.name
                        )))
                    }
                },
            };
            let params = match &spec.params {
                None => None,
                Some(params) => match json_from(params)? {
                    value @ serde_json::Value::Object(_) => Some(value),
                    _ => {
                        return Err(configuration_error(format!(
                            "provider {:?}: params must be a dict of body fields",
                            spec.name
                        )))
                    }
                },
            };
            configs.push(ProviderConfig {
                name: spec.name,
                wire,
                model: spec.model,
                base_url: spec.base_url,
                api_key,
                headers: spec.headers,
                overloaded_statuses: spec.overloaded_statuses,
                max_tokens_field: spec.max_tokens_field,
                params,
                embedding_model: spec.embedding_model,
                embeds: spec.embeds,
                dimensions_field: spec.dimensions_field,
                embed_base64: spec.embed_base64,
                stream_usage: spec.stream_usage,
                entra_token: spec.entra_token,
            });
            keys.push(source);
        }
        let options = transport.options()?;
        let proxy_urls: Vec<String> = match &options.proxy {
            Some(url) => vec![url.clone()],
            None => PROXY_VARIABLES
                .iter()
                .filter_map(|name| std::env::var(name).ok())
                .collect(),
        };
        let mut proxy_secrets = Vec::new();
        for url in &proxy_urls {
            providers::add_secrets(&mut proxy_secrets, &providers::url_secrets(url));
        }
        let transport = ReqwestTransport::new(&options).map_err(configuration_error)?;
        Ok(Self {
            inner: Arc::new(Inner {
                providers: configs,
                keys,
                transport: RwLock::new(Some(transport)),
                proxy_secrets,
                emit,
                state: Arc::new(LocalState::new()),
                in_flight: (0..count).map(|_| Default::default()).collect(),
            }),
        })
    }

    /// Blocking chat call: the engine future runs on the shared runtime with
    /// the GIL released, waking every 50 ms so Ctrl-C raises promptly.
    fn prompt(&self, py: Python<'_>, args: CallArgs<'_>) -> PyResult<Py<PyAny>> {
        let call = self.call(py, args, None)?;
        block_on_interruptibly(py, run_call(Arc::clone(&self.inner), call))?
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
        self.run_async(py, locals, call)
    }

    /// A chat answer as it streams: nothing is sent until it is first read.
    /// `restart`: after a failure past the first content, start again
    /// (`on_interrupt="restart"`) instead of raising `StreamInterrupted`.
    fn stream(&self, py: Python<'_>, args: CallArgs<'_>, restart: bool) -> PyResult<NativeStream> {
        let call = self.call(py, args, None)?;
        Ok(NativeStream::new(
            Arc::clone(&self.inner),
            call.into_stream(),
            restart,
        ))
    }

    /// `stream` for asyncio: called on the event loop that will iterate it.
    fn stream_async(
        &self,
        py: Python<'_>,
        args: CallArgs<'_>,
        restart: bool,
    ) -> PyResult<NativeStream> {
        runtime()?;
        let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
        let call = self.call(py, args, Some(locals.clone()))?;
        Ok(NativeStream::with_locals(
            Arc::clone(&self.inner),
            call.into_stream(),
            restart,
            locals,
        ))
    }

    /// Blocking embeddings call: the same engine future as `prompt`.
    fn embed(&self, py: Python<'_>, args: EmbedArgs<'_>) -> PyResult<Py<PyAny>> {
        let call = self.embed_call(py, args, None)?;
        block_on_interruptibly(py, run_call(Arc::clone(&self.inner), call))?
    }

    fn embed_async<'py>(
        &self,
        py: Python<'py>,
        args: EmbedArgs<'py>,
    ) -> PyResult<Bound<'py, PyAny>> {
        runtime()?;
        let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
        let call = self.embed_call(py, args, Some(locals.clone()))?;
        self.run_async(py, locals, call)
    }

    /// Requests in flight to each provider, in configuration order.
    fn in_flight(&self) -> Vec<usize> {
        self.inner
            .in_flight
            .iter()
            .map(|n| n.load(std::sync::atomic::Ordering::Relaxed))
            .collect()
    }

    /// The providers cooling down, `(key, seconds left)`, at `now` (Unix
    /// seconds of the client's sleeper clock; `None`: the system clock).
    #[pyo3(signature = (now=None))]
    fn cooldowns(&self, now: Option<f64>) -> PyResult<Vec<(String, f64)>> {
        let now = match now {
            Some(secs) => {
                std::time::UNIX_EPOCH
                    + engine::hints::secs(secs).ok_or_else(|| {
                        configuration_error("now must be Unix seconds (a finite number >= 0)")
                    })?
            }
            None => std::time::SystemTime::now(),
        };
        Ok(self
            .inner
            .state
            .cooldowns(now)
            .into_iter()
            .map(|(key, left)| (key, left.as_secs_f64()))
            .collect())
    }

    /// Releases the connection pool. Calls in flight finish; later calls
    /// raise `FailoverError`.
    fn close(&self) {
        let mut transport = self
            .inner
            .transport
            .write()
            .unwrap_or_else(|e| e.into_inner());
        *transport = None;
    }

    #[getter]
    fn is_closed(&self) -> bool {
        let transport = self
            .inner
            .transport
            .read()
            .unwrap_or_else(|e| e.into_inner());
        transport.is_none()
    }
}

impl NativeClient {
    fn run_async<'py>(
        &self,
        py: Python<'py>,
        locals: pyo3_async_runtimes::TaskLocals,
        call: Call,
    ) -> PyResult<Bound<'py, PyAny>> {
        let inner = Arc::clone(&self.inner);
        let in_flight = runtime::AsyncCallGuard::new();
        pyo3_async_runtimes::tokio::future_into_py_with_locals(py, locals, async move {
            let _in_flight = in_flight;
            run_call(inner, call).await
        })
    }

    /// The pool to send with, unless the client is closed.
    fn transport(&self) -> PyResult<ReqwestTransport> {
        let guard = self
            .inner
            .transport
            .read()
            .unwrap_or_else(|e| e.into_inner());
        guard.clone().ok_or_else(|| {
            failover_error("this Client is closed: make a new one to call providers again")
        })
    }

    fn check_chain(&self, chain: &[usize]) -> PyResult<()> {
        if chain.is_empty() || chain.iter().any(|&i| i >= self.inner.providers.len()) {
            return Err(configuration_error(
                "the provider chain must name configured providers",
            ));
        }
        Ok(())
    }

    fn call(
        &self,
        py: Python<'_>,
        args: CallArgs<'_>,
        locals: Option<pyo3_async_runtimes::TaskLocals>,
    ) -> PyResult<Call> {
        let transport = self.transport()?;
        self.check_chain(&args.chain)?;
        let messages = messages_from(&args.messages)?;
        let messages = conversation::parse_messages(&messages).map_err(configuration_error)?;
        let tools = match &args.tools {
            Some(tools) => conversation::parse_tools(&messages_from(tools)?)
                .map_err(|why| configuration_error(format!("tools: {why}")))?,
            None => Vec::new(),
        };
        let tool_choice = args
            .tool_choice
            .as_deref()
            .map(|c| conversation::parse_tool_choice(c, &tools))
            .transpose()
            .map_err(configuration_error)?;
        let response_format = match &args.response_format {
            Some(format) => conversation::parse_response_format(&json_from(format)?)
                .map_err(configuration_error)?,
            None => None,
        };
        let request = ChatRequest {
            messages,
            tools,
            tool_choice,
            response_format,
            stop: args.stop.unwrap_or_default(),
            top_p: args.top_p,
            seed: args.seed,
            headers: args.headers.unwrap_or_default(),
            system: text_arg("system", args.system.as_ref())?,
            max_tokens: args.max_tokens,
            temperature: args.temperature,
            model: text_arg("model", args.model.as_ref())?,
        };
        let common = CommonArgs {
            idempotency_key: args.idempotency_key,
            emit: args.emit,
            chain: args.chain,
            policy: &args.policy.policy,
            timeout: args.timeout,
            deadline: args.deadline,
            sleeper: args.sleeper.as_ref(),
        };
        self.finish_call(py, Job::Chat(request), transport, common, locals)
    }

    fn embed_call(
        &self,
        py: Python<'_>,
        args: EmbedArgs<'_>,
        locals: Option<pyo3_async_runtimes::TaskLocals>,
    ) -> PyResult<Call> {
        let transport = self.transport()?;
        self.check_chain(&args.chain)?;
        let request = EmbedRequest {
            inputs: args.texts,
            dimensions: args.dimensions,
            model: text_arg("model", args.model.as_ref())?,
            headers: args.headers.unwrap_or_default(),
        };
        let job = Job::Embed(request);
        // A chain in which nobody can embed would fail after no request at
        // all: that is the caller's configuration, said at once.
        let reasons: Vec<String> = args
            .chain
            .iter()
            .filter_map(|&i| providers::unable_for(&self.inner.providers[i], &job))
            .collect();
        if reasons.len() == args.chain.len() {
            return Err(configuration_error(format!(
                "no provider in the chain can embed: {}",
                reasons.join("; ")
            )));
        }
        let common = CommonArgs {
            idempotency_key: args.idempotency_key,
            emit: args.emit,
            chain: args.chain,
            policy: &args.policy.policy,
            timeout: args.timeout,
            deadline: args.deadline,
            sleeper: args.sleeper.as_ref(),
        };
        self.finish_call(py, job, transport, common, locals)
    }

    fn finish_call(
        &self,
        py: Python<'_>,
        job: Job,
        transport: ReqwestTransport,
        args: CommonArgs<'_, '_>,
        locals: Option<pyo3_async_runtimes::TaskLocals>,
    ) -> PyResult<Call> {
        let (interrupt, interrupted) = Interrupt::new();
        Ok(Call {
            job,
            chain: args.chain,
            policy: args.policy.clone(),
            timeout: seconds("timeout", args.timeout)?,
            deadline: optional_seconds("deadline", args.deadline)?,
            transport,
            clock: CallClock::from_sleeper(args.sleeper, locals.as_ref(), &interrupt)?,
            events: EventTarget::new(
                args.emit.unwrap_or_else(|| self.inner.emit.clone_ref(py)),
                locals,
                interrupt.clone(),
            ),
            interrupt,
            interrupted,
            idempotency_key: args.idempotency_key,
        })
    }
}

/// What every call has, whatever it asks.
struct CommonArgs<'a, 'py> {
    idempotency_key: Option<String>,
    emit: Option<Py<PyAny>>,
    chain: Vec<usize>,
    policy: &'a RetryPolicy,
    timeout: f64,
    deadline: Option<f64>,
    sleeper: Option<&'a Bound<'py, PyAny>>,
}

/// Drives `future` to completion for a synchronous caller, with the GIL
/// released, checking for Ctrl-C between slices (dropping the future on an
/// interrupt cancels its HTTP request). `block_in_place` lets this work on a
/// thread that is already inside the runtime too: an event hook or a sleeper
/// making a sync call hands its worker's tasks to another thread first.
pub(super) fn block_on_interruptibly<T: Send>(
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

pub(super) fn new_call_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// One call, with a panic anywhere inside it turned into a
/// `FailoverError` instead of crossing into Python as a PanicException.
async fn run_call(inner: Arc<Inner>, call: Call) -> PyResult<Py<PyAny>> {
    use futures_util::FutureExt;
    match std::panic::AssertUnwindSafe(run_inner(inner, call))
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

/// The key from a provider's callable, for one attempt. A callable that
/// raises an ordinary exception fails this attempt as an auth failure of
/// this provider (another provider has its own key): `Err(Some(failure))`.
/// A BaseException, or a value that is not a key, ends the call through
/// `interrupt`: `Err(None)`, and the attempt must not go on.
///
/// It runs on the thread driving the call (a runtime worker on async calls),
/// outside the attempt's timeout: a slow token fetch delays the attempt.
fn callable_key(
    provider: &ProviderConfig,
    callable: &Py<PyAny>,
    secrets: &[String],
    interrupt: &Interrupt,
) -> Result<String, Option<Failure>> {
    let name = &provider.name;
    tokio::task::block_in_place(|| {
        Python::attach(|py| {
            let value = match callable.call0(py) {
                Ok(value) => value.into_bound(py),
                Err(error) if error.is_instance_of::<pyo3::exceptions::PyException>(py) => {
                    let text = format!("{name}: the api_key callable raised {error}");
                    let text = providers::redact(&text, secrets);
                    return Err(Some(Failure::without_response(ErrorKind::Auth, text)));
                }
                Err(error) => {
                    interrupt.raise(error);
                    return Err(None);
                }
            };
            let key = value
                .cast::<PyString>()
                .ok()
                .and_then(|s| s.to_cow().ok().map(|k| k.trim().to_string()))
                .filter(|k| !k.is_empty() && !k.chars().any(char::is_control));
            key.ok_or_else(|| {
                let type_name = value
                    .get_type()
                    .name()
                    .map_or_else(|_| "?".to_string(), |n| n.to_string());
                interrupt.raise(configuration_error(format!(
                    "provider {name:?}: the api_key callable must return a non-empty str \
                     without control characters, got a {type_name}"
                )));
                None
            })
        })
    })
}

/// Each provider of `chain` as `job` uses it: with the model the call asks
/// for (a per-call `model=`, an embedding model), which errors and events name.
pub(super) fn used_configs<'a>(
    inner: &'a Inner,
    chain: &[usize],
    job: &Job,
) -> Vec<std::borrow::Cow<'a, ProviderConfig>> {
    chain
        .iter()
        .map(|&i| {
            let config = &inner.providers[i];
            match providers::job_model(config, job) {
                model if model == config.model => std::borrow::Cow::Borrowed(config),
                model => std::borrow::Cow::Owned(ProviderConfig {
                    model: model.to_string(),
                    ..config.clone()
                }),
            }
        })
        .collect()
}

/// One request in flight to a provider, counted while it lives.
struct InFlight<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> InFlight<'a> {
    fn new(count: &'a std::sync::atomic::AtomicUsize) -> Self {
        count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self(count)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A provider's key in the shared state: its name, with the model when a
/// call names another (a typo cools only that model), and the call kind
/// (an embeddings 404 never stops chat).
fn state_key(config: &ProviderConfig, job: &Job) -> String {
    match job {
        Job::Embed(_) => format!("{}:embeddings", config.name),
        Job::Chat(request) | Job::Stream(request) => match &request.model {
            Some(model) if *model != config.model => format!("{}/{model}", config.name),
            _ => config.name.clone(),
        },
    }
}

/// One prompt or embeddings call: the engine, then its answer or error as
/// Python objects.
async fn run_inner(inner: Arc<Inner>, mut call: Call) -> PyResult<Py<PyAny>> {
    let call_id = new_call_id();
    let result = run_engine(&inner, &mut call, &call_id, None).await?;
    let used = used_configs(&inner, &call.chain, &call.job);
    let configs: Vec<&ProviderConfig> = used.iter().map(AsRef::as_ref).collect();
    Python::attach(|py| match result {
        Ok(success) => {
            let attempts = attempts_list(py, &success.attempts, &configs)?;
            let provider = &configs[success.provider].name;
            match success.value {
                Reply::Chat(chat) => {
                    let data = ResponseData::new(py, chat, provider, attempts, &call_id)?;
                    Ok(Py::new(py, data)?.into_any())
                }
                Reply::Embed(embed) => {
                    let data = EmbeddingsData::new(py, embed, provider, attempts, &call_id)?;
                    Ok(Py::new(py, data)?.into_any())
                }
                Reply::Stream(_) => Err(internal_error("a stream answered a whole call")),
            }
        }
        Err(failure) => Err(call.raise(py, &failure, &configs, &call_id)),
    })
}

impl Call {
    /// The same call, read as a stream.
    fn into_stream(mut self) -> Self {
        if let Job::Chat(request) = self.job {
            self.job = Job::Stream(request);
            return self;
        }
        self
    }

    /// The exception a failed call raises (after its `CallFailed` event),
    /// unless Python code run by the call asked to end it with its own.
    pub(super) fn raise(
        &mut self,
        py: Python<'_>,
        failure: &engine::CallFailure,
        configs: &[&ProviderConfig],
        call_id: &str,
    ) -> PyErr {
        let error = match call_error(py, failure, configs, call_id) {
            Ok(error) => error,
            Err(error) => return error,
        };
        self.events
            .send_call_failed(py, call_id, error.bind(py), &failure.reason);
        match self.interrupted.try_recv() {
            Ok(interrupt) => interrupt,
            Err(_) => PyErr::from_value(error.into_bound(py)),
        }
    }
}

/// One run of the engine for `call` (picking up after `resume` when given).
/// The only place the engine is run. `Err` is Python code run by the call
/// (a sleeper, a hook, a key callable) ending it.
pub(super) async fn run_engine(
    inner: &Inner,
    call: &mut Call,
    call_id: &str,
    resume: Option<engine::Resume>,
) -> PyResult<Result<engine::Success<Reply>, engine::CallFailure>> {
    let used = used_configs(inner, &call.chain, &call.job);
    let configs: Vec<&ProviderConfig> = used.iter().map(AsRef::as_ref).collect();
    let keys: Vec<&KeySource> = call.chain.iter().map(|&i| &inner.keys[i]).collect();
    let in_flight: Vec<&std::sync::atomic::AtomicUsize> =
        call.chain.iter().map(|&i| &inner.in_flight[i]).collect();
    let job = &call.job;
    let unable: Vec<Option<String>> = configs
        .iter()
        .map(|c| providers::unable_for(c, job))
        .collect();
    let state_keys: Vec<String> = call
        .chain
        .iter()
        .map(|&i| state_key(&inner.providers[i], job))
        .collect();
    let slots: Vec<ProviderSlot> = configs
        .iter()
        .zip(&unable)
        .zip(&state_keys)
        .map(|((c, why), key)| ProviderSlot {
            overloaded_statuses: &c.overloaded_statuses,
            state_key: key,
            unable: why.as_deref(),
        })
        .collect();
    let attempt_timeout = call.timeout;
    let spec = CallSpec {
        call_id,
        providers: &slots,
        policy: &call.policy,
        attempt_timeout,
        deadline: call.deadline,
        state: Some(&*inner.state),
    };
    let events = &call.events;
    let mut on_event =
        |event: Event| Python::attach(|py| events.send_engine_event(py, &event, &configs));
    let transport = &call.transport;
    let interrupt = &call.interrupt;
    // Each provider's request is built once per run, on its first attempt;
    // a fixed key goes in then, a callable's key on every attempt.
    let requests: Vec<OnceLock<HttpRequest>> = configs.iter().map(|_| OnceLock::new()).collect();
    let mut unit = || rand::random::<f64>();
    // One idempotency key per call and provider, the same on every retry to
    // it (the caller's, when given), and the attempt's number among them.
    let idempotency_keys: Vec<String> = (0..configs.len())
        .map(|i| match &call.idempotency_key {
            Some(key) => key.clone(),
            None => format!("failover-{call_id}-{i}"),
        })
        .collect();
    let mut tries = vec![0u32; configs.len()];
    let run = engine::run_from(
        &spec,
        resume,
        &call.clock,
        &mut unit,
        &mut on_event,
        |index, timeout| {
            let provider = configs[index];
            let source = keys[index];
            let built = requests[index].get_or_init(|| {
                let mut base = providers::build(provider, job);
                providers::add_secrets(&mut base.secrets, &inner.proxy_secrets);
                match source {
                    KeySource::Fixed => {
                        providers::authorize(provider, &base, provider.api_key.as_deref())
                    }
                    KeySource::Callable(_) => base,
                }
            });
            let sent = match source {
                KeySource::Fixed => Ok(built.clone()),
                KeySource::Callable(callable) => {
                    callable_key(provider, callable, &built.secrets, interrupt)
                        .map(|key| providers::authorize(provider, built, Some(&key)))
                }
            };
            let retry_count = tries[index];
            tries[index] += 1;
            let sent = sent.map(|mut sent| {
                sent.headers
                    .push(("idempotency-key".into(), idempotency_keys[index].clone()));
                sent.headers
                    .push(("x-retry-count".into(), retry_count.to_string()));
                sent
            });
            let counter = in_flight[index];
            async move {
                let sent = match sent {
                    Ok(sent) => sent,
                    Err(Some(failure)) => return Err(failure),
                    // The call is being ended by the interrupt: never report an
                    // outcome the engine could act on (fail over, call the next).
                    Err(None) => std::future::pending().await,
                };
                let _in_flight = InFlight::new(counter);
                providers::exchange(provider, job, transport, &sent, timeout, attempt_timeout).await
            }
        },
    );
    let interrupted = &mut call.interrupted;
    let result = tokio::select! {
        biased;
        Ok(error) = &mut *interrupted => return Err(error),
        result = run => result,
    };
    // The engine may finish in the same poll in which a hook or a sleeper
    // asked to end the call (a FakeSleeper never yields): the interrupt wins.
    if let Ok(error) = interrupted.try_recv() {
        return Err(error);
    }
    Ok(result)
}
