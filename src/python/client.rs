//! The native half of `failover.Client`: one engine future per call, awaited
//! by asyncio or driven to completion with the GIL released.

use std::sync::Arc;

use pyo3::prelude::*;

use super::call::{run_call, Call, Face, Inner};
use super::clock::CallClock;
use super::errors::{configuration_error, internal_error, seconds};
use super::events::EventTarget;
use super::json::{json_from, list_from, text_arg};
use super::runtime::{self, runtime, Interrupt, Pools, SyncDriver};
use super::seam::{
    optional_seconds, CallArgs, EmbedArgs, HealthData, MediaArgs, ProviderSpec, TransportSpec,
};
use super::stream::NativeStream;
use crate::call::{self, Plan, Pool, Strategy};
use crate::conversation;
use crate::engine::{self, Clock, LocalState, RetryPolicy, SharedState};
use crate::http::ReqwestTransport;
use crate::providers::{ChatRequest, EmbedRequest, Job, MediaRequest};

/// One of a client's limits as Python gives it: its name, concurrency, rpm
/// and tpm.
type LimitSpec = (String, Option<u32>, Option<u32>, Option<u64>);

#[pyclass(frozen, module = "failover._native")]
pub struct NativeClient {
    inner: Arc<Inner>,
}

#[pymethods]
impl NativeClient {
    #[new]
    /// `limits`: the client's limits, `(name, concurrency, rpm, tpm)`, in
    /// the order each provider's `limits` index them.
    #[pyo3(signature = (*, providers, transport, emit, state=None, limits=Vec::new()))]
    fn new(
        providers: Vec<ProviderSpec>,
        transport: TransportSpec<'_>,
        emit: Py<PyAny>,
        state: Option<PyRef<'_, super::fleet::NativeRedisState>>,
        limits: Vec<LimitSpec>,
    ) -> PyResult<Self> {
        let buckets: Vec<(String, engine::Limit)> = limits
            .into_iter()
            .map(|(name, concurrency, rpm, tpm)| {
                let limit = engine::Limit {
                    concurrency,
                    rpm,
                    tpm,
                };
                (name, limit)
            })
            .collect();
        let mut configs = Vec::new();
        let mut keys = Vec::new();
        let mut drawn = Vec::new();
        for spec in providers {
            let out_of_range = spec.limits.chat.iter().chain(&spec.limits.embed);
            if let Some(index) = out_of_range.copied().find(|&i| i >= buckets.len()) {
                return Err(internal_error(format!(
                    "provider {:?} draws on limit {index}, which is not given",
                    spec.config.name
                )));
            }
            configs.push(spec.config);
            keys.push(spec.key);
            drawn.push(spec.limits);
        }
        // A fleet-wide state shares the limits too.
        let fleet_limits = state
            .as_ref()
            .map(|fleet| Arc::clone(&fleet.state) as Arc<dyn engine::FleetLimits>);
        let limits = call::Limits::new(buckets, drawn, fleet_limits);
        let options = transport.options()?;
        let proxies = options.proxy_urls();
        let pools = Pools::new(options).map_err(configuration_error)?;
        let fleet = state.is_some();
        let state: Arc<dyn SharedState> = match state {
            Some(fleet) => fleet.shared(),
            None => Arc::new(LocalState::new()),
        };
        Ok(Self {
            inner: Arc::new(Inner {
                core: Arc::new(call::Client::new(configs, &proxies, state, limits)),
                keys,
                pools: Arc::new(pools),
                fleet,
                emit,
            }),
        })
    }

    /// Blocking chat call: the engine future runs with the GIL released, on
    /// this thread's own runtime (or the shared one: `SyncDriver`), waking
    /// every 50 ms so Ctrl-C raises promptly.
    fn prompt(&self, py: Python<'_>, args: CallArgs<'_>) -> PyResult<Py<PyAny>> {
        self.run_sync(py, |transport| self.call(py, args, None, false, transport))
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
        let transport = self.inner.pools.shared()?;
        let call = self.call(py, args, Some(locals.clone()), false, transport)?;
        self.run_async(py, locals, call)
    }

    /// A chat answer as it streams: nothing is sent until it is first read.
    /// `restart`: after a failure past the first content, start again
    /// (`on_interrupt="restart"`) instead of raising `StreamInterrupted`.
    fn stream(&self, py: Python<'_>, args: CallArgs<'_>, restart: bool) -> PyResult<NativeStream> {
        // A stream may be read on another thread than the one that made it:
        // it keeps to the shared runtime, whose connections any thread can drive.
        let transport = self.inner.pools.shared()?;
        let mut call = self.call(py, args, None, true, transport)?;
        call.refuse_if_unserved(py)?;
        Ok(NativeStream::new(Arc::clone(&self.inner), call, restart))
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
        let transport = self.inner.pools.shared()?;
        let mut call = self.call(py, args, Some(locals.clone()), true, transport)?;
        call.refuse_if_unserved(py)?;
        Ok(NativeStream::with_locals(
            Arc::clone(&self.inner),
            call,
            restart,
            locals,
        ))
    }

    /// Blocking embeddings call: the same engine future as `prompt`.
    fn embed(&self, py: Python<'_>, args: EmbedArgs<'_>) -> PyResult<Py<PyAny>> {
        self.run_sync(py, |transport| self.embed_call(py, args, None, transport))
    }

    fn embed_async<'py>(
        &self,
        py: Python<'py>,
        args: EmbedArgs<'py>,
    ) -> PyResult<Bound<'py, PyAny>> {
        runtime()?;
        let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
        let transport = self.inner.pools.shared()?;
        let call = self.embed_call(py, args, Some(locals.clone()), transport)?;
        self.run_async(py, locals, call)
    }

    /// Blocking image, speech or transcription call: the same engine future.
    fn media(&self, py: Python<'_>, args: MediaArgs<'_>) -> PyResult<Py<PyAny>> {
        self.run_sync(py, |transport| {
            self.media_call(py, args, None, transport, false)
        })
    }

    fn media_async<'py>(
        &self,
        py: Python<'py>,
        args: MediaArgs<'py>,
    ) -> PyResult<Bound<'py, PyAny>> {
        runtime()?;
        let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
        let transport = self.inner.pools.shared()?;
        let call = self.media_call(py, args, Some(locals.clone()), transport, false)?;
        self.run_async(py, locals, call)
    }

    /// A speech stream: the audio's bytes as they arrive, through the
    /// stream driver (no replay once bytes were handed out).
    fn speak_stream(&self, py: Python<'_>, args: MediaArgs<'_>) -> PyResult<NativeStream> {
        let transport = self.inner.pools.shared()?;
        let mut call = self.media_call(py, args, None, transport, true)?;
        call.refuse_if_unserved(py)?;
        Ok(NativeStream::new(Arc::clone(&self.inner), call, false))
    }

    /// `speak_stream` for asyncio: called on the event loop that will iterate it.
    fn speak_stream_async(&self, py: Python<'_>, args: MediaArgs<'_>) -> PyResult<NativeStream> {
        runtime()?;
        let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
        let transport = self.inner.pools.shared()?;
        let mut call = self.media_call(py, args, Some(locals.clone()), transport, true)?;
        call.refuse_if_unserved(py)?;
        Ok(NativeStream::with_locals(
            Arc::clone(&self.inner),
            call,
            false,
            locals,
        ))
    }

    /// The providers cooling down, `(key, seconds left)`, at `now` (Unix
    /// seconds of the client's sleeper clock; `None`: the system clock).
    #[pyo3(signature = (now=None))]
    fn cooldowns(&self, now: Option<f64>) -> PyResult<Vec<(String, f64)>> {
        Ok(self
            .inner
            .core
            .cooldowns(wall_time(now)?)
            .into_iter()
            .map(|(key, left)| (key, left.as_secs_f64()))
            .collect())
    }

    /// What the state knows of each of this client's providers at `now`
    /// (as for `cooldowns`), by the same keys; healthy ones too.
    #[pyo3(signature = (now=None))]
    fn health(&self, now: Option<f64>) -> PyResult<Vec<(String, HealthData)>> {
        let now = wall_time(now)?;
        Ok(self
            .inner
            .core
            .health(now)
            .into_iter()
            .map(|(key, health)| (key, HealthData::new(health, now)))
            .collect())
    }

    /// Releases the connection pool. Calls in flight finish; later calls
    /// raise `FailoverError`.
    fn close(&self) {
        self.inner.pools.close();
    }

    #[getter]
    fn is_closed(&self) -> bool {
        self.inner.pools.is_closed()
    }
}

/// `now` as Python gives it: Unix seconds of the client's sleeper clock, or
/// `None` for the system clock.
fn wall_time(now: Option<f64>) -> PyResult<std::time::SystemTime> {
    Ok(match now {
        Some(secs) => {
            std::time::UNIX_EPOCH
                + engine::hints::secs(secs).ok_or_else(|| {
                    configuration_error("now must be Unix seconds (a finite number >= 0)")
                })?
        }
        None => std::time::SystemTime::now(),
    })
}

impl NativeClient {
    /// The sync face of a whole call: where it runs decides its pool, so the
    /// call is made (`make`) with that pool's transport.
    fn run_sync(
        &self,
        py: Python<'_>,
        make: impl FnOnce(ReqwestTransport) -> PyResult<Call>,
    ) -> PyResult<Py<PyAny>> {
        let driver = SyncDriver::for_call(&self.inner.pools, self.inner.fleet)?;
        let call = make(driver.transport())?;
        let finish = driver.run(py, run_call(Arc::clone(&self.inner), call))?;
        runtime::finish_safely(py, finish)
    }

    fn run_async<'py>(
        &self,
        py: Python<'py>,
        locals: pyo3_async_runtimes::TaskLocals,
        call: Call,
    ) -> PyResult<Bound<'py, PyAny>> {
        runtime::awaitable(py, locals, run_call(Arc::clone(&self.inner), call))
    }

    fn check_chain(&self, chain: &[usize]) -> PyResult<()> {
        if chain.is_empty() || chain.iter().any(|&i| i >= self.inner.core.providers.len()) {
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
        stream: bool,
        transport: ReqwestTransport,
    ) -> PyResult<Call> {
        self.check_chain(&args.chain)?;
        let messages = list_from("messages", &args.messages)?;
        let messages = conversation::parse_messages(&messages).map_err(configuration_error)?;
        let tools = match &args.tools {
            Some(tools) => conversation::parse_tools(&list_from("tools", tools)?)
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
            Some(format) => {
                conversation::parse_response_format(&json_from("response_format", format)?)
                    .map_err(configuration_error)?
            }
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
        let job = if stream {
            Job::Stream(request)
        } else {
            Job::Chat(request)
        };
        let plan = Plan::new(Arc::clone(&self.inner.core), &args.chain, &job);
        let common = CommonArgs {
            hedge: args.hedge.as_ref().map(|h| Arc::clone(&h.hedge)),
            journal: args.journal.as_ref().map(|j| j.journal.clone()),
            idempotency_key: args.idempotency_key,
            pools: pools(args.pools)?,
            emit: args.emit,
            plan,
            policy: &args.policy.policy,
            timeout: args.timeout,
            deadline: args.deadline,
            sleeper: args.sleeper.as_ref(),
        };
        self.finish_call(py, job, transport, common, locals)
    }

    fn embed_call(
        &self,
        py: Python<'_>,
        args: EmbedArgs<'_>,
        locals: Option<pyo3_async_runtimes::TaskLocals>,
        transport: ReqwestTransport,
    ) -> PyResult<Call> {
        self.check_chain(&args.chain)?;
        let request = EmbedRequest {
            inputs: args.texts,
            dimensions: args.dimensions,
            model: text_arg("model", args.model.as_ref())?,
            headers: args.headers.unwrap_or_default(),
        };
        let job = Job::Embed(request);
        let plan = Plan::new(Arc::clone(&self.inner.core), &args.chain, &job);
        if let Some(why) = plan.none_can_serve(&job) {
            return Err(configuration_error(why));
        }
        let common = CommonArgs {
            hedge: None,
            journal: args.journal.as_ref().map(|j| j.journal.clone()),
            idempotency_key: args.idempotency_key,
            pools: pools(args.pools)?,
            emit: args.emit,
            plan,
            policy: &args.policy.policy,
            timeout: args.timeout,
            deadline: args.deadline,
            sleeper: args.sleeper.as_ref(),
        };
        self.finish_call(py, job, transport, common, locals)
    }

    fn media_call(
        &self,
        py: Python<'_>,
        mut args: MediaArgs<'_>,
        locals: Option<pyo3_async_runtimes::TaskLocals>,
        transport: ReqwestTransport,
        stream: bool,
    ) -> PyResult<Call> {
        self.check_chain(&args.chain)?;
        let request = MediaRequest {
            media: args.media()?,
            model: text_arg("model", args.model.as_ref())?,
            headers: args.headers.take().unwrap_or_default(),
        };
        let job = if stream {
            Job::MediaStream(request)
        } else {
            Job::Media(request)
        };
        let plan = Plan::new(Arc::clone(&self.inner.core), &args.chain, &job);
        if let Some(why) = plan.none_can_serve(&job) {
            return Err(configuration_error(why));
        }
        let common = CommonArgs {
            hedge: None,
            journal: args.journal.as_ref().map(|j| j.journal.clone()),
            idempotency_key: args.idempotency_key,
            pools: pools(args.pools)?,
            emit: args.emit,
            plan,
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
        let clock = CallClock::from_sleeper(args.sleeper, locals.as_ref(), &interrupt)?;
        let mut plan = args.plan;
        // Cooldowns are measured on the call's clock (a FakeSleeper's time).
        let reservations = plan.order_pools(&args.pools, clock.wall());
        let core = call::Call {
            call_id: call::new_call_id(),
            job,
            plan,
            policy: args.policy.clone(),
            timeout: seconds("timeout", args.timeout)?,
            deadline: optional_seconds("deadline", args.deadline)?,
            transport,
            clock,
            idempotency_key: args.idempotency_key,
            interrupted,
            reservations,
            hedge: args.hedge,
            journal: args.journal.unwrap_or_default(),
        };
        let face = Face {
            events: EventTarget::new(
                args.emit.unwrap_or_else(|| self.inner.emit.clone_ref(py)),
                locals,
                interrupt.clone(),
            ),
            interrupt,
            key_errors: Default::default(),
        };
        Ok(Call { core, face })
    }
}

/// The pools of a call's chain, as Python gives them.
fn pools(given: Option<Vec<(String, Vec<usize>)>>) -> PyResult<Vec<Pool>> {
    given
        .unwrap_or_default()
        .into_iter()
        .map(|(strategy, members)| {
            let strategy = Strategy::from_name(&strategy)
                .ok_or_else(|| internal_error(format!("no pool strategy {strategy:?}")))?;
            Ok(Pool { strategy, members })
        })
        .collect()
}

/// What every call has, whatever it asks.
struct CommonArgs<'a, 'py> {
    hedge: Option<Arc<engine::Hedge>>,
    journal: Option<call::Journal>,
    idempotency_key: Option<String>,
    pools: Vec<Pool>,
    emit: Option<Py<PyAny>>,
    plan: Plan,
    policy: &'a RetryPolicy,
    timeout: f64,
    deadline: Option<f64>,
    sleeper: Option<&'a Bound<'py, PyAny>>,
}
