//! One call's machinery, shared by `NativeClient` (prompt, embed) and
//! `NativeStream`: what a client holds (`Inner`), one call (`Call`), and the
//! one place the engine is run (`run_engine`), with what an attempt needs
//! around it (keys from callables, idempotency headers, requests in flight).

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyString;
use tokio::sync::oneshot;

use super::clock::CallClock;
use super::convert::call_error;
use super::errors::{configuration_error, internal_error};
use super::events::EventTarget;
use super::runtime::{runtime, Interrupt};
use super::seam::{attempts_list, EmbeddingsData, ResponseData};
use crate::engine::{
    self, CallSpec, ErrorKind, Event, Failure, ProviderSlot, RetryPolicy, SharedState,
};
use crate::http::{HttpRequest, ReqwestTransport};
use crate::providers::{self, Job, ProviderConfig, Reply};

/// How often a blocking call wakes to let Python handle Ctrl-C.
const SIGNAL_CHECK_INTERVAL: Duration = Duration::from_millis(50);

/// Where a provider's key comes from.
pub(super) enum KeySource {
    /// Fixed when the client was built (or no key at all).
    Fixed,
    /// A Python callable, called for each attempt (rotating tokens), and
    /// the keys it gave lately: a provider may echo an expired one.
    Callable(Py<PyAny>, RecentKeys),
}

/// The last keys a key callable gave, redacted with the current one.
#[derive(Default)]
pub(super) struct RecentKeys(std::sync::Mutex<std::collections::VecDeque<String>>);

impl RecentKeys {
    /// How many keys are kept: enough for a token rotated while calls were
    /// in flight, few enough that every echo is searched for them cheaply.
    const KEPT: usize = 8;

    /// Notes `key` and returns the keys kept, it included.
    fn remember(&self, key: &str) -> Vec<String> {
        let mut keys = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if !keys.iter().any(|k| k == key) {
            if keys.len() == Self::KEPT {
                keys.pop_front();
            }
            keys.push_back(key.to_string());
        }
        keys.iter().cloned().collect()
    }
}

pub(super) struct Inner {
    pub(super) providers: Vec<ProviderConfig>,
    pub(super) keys: Vec<KeySource>,
    /// `None` once the client is closed; calls in flight keep their clone.
    pub(super) transport: RwLock<Option<ReqwestTransport>>,
    /// What a proxy's URL holds of credentials (`proxy=` or the proxy
    /// environment variables): removed from every answer, as keys are.
    pub(super) proxy_secrets: Vec<String>,
    /// `failover._events._emitter(on_event)`.
    pub(super) emit: Py<PyAny>,
    /// What calls share: cooldowns, the retry budget.
    pub(super) state: Arc<dyn SharedState>,
    /// Requests in flight to each provider (a pool's `least_busy`).
    pub(super) busy: Vec<AtomicUsize>,
    /// Turns taken, to break ties between equally busy members in rotation.
    pub(super) turn: AtomicUsize,
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
    /// The pool members this call counts as busy at, while it lives.
    pub(super) _reservations: Vec<Reservation>,
    /// Resolves when Python code run by the call (a sleeper, a hook, a key
    /// callable) raised something that must end it.
    pub(super) interrupted: oneshot::Receiver<PyErr>,
    pub(super) key_errors: KeyErrors,
}

/// What each provider's key callable raised at its latest attempt (nothing
/// once it gave a key), by the provider's place in the chain: the error the
/// call raises for that attempt carries it as `__cause__`. Its text is not
/// copied into the error, the log or events: the library cannot know what
/// it holds.
#[derive(Default)]
pub(super) struct KeyErrors(std::sync::Mutex<Vec<Option<PyErr>>>);

impl KeyErrors {
    fn set(&self, index: usize, error: Option<PyErr>) {
        let mut slots = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if slots.len() <= index {
            slots.resize_with(index + 1, || None);
        }
        slots[index] = error;
    }

    /// The exception behind `failure`'s error, when its last attempt failed
    /// in the key callable.
    fn cause_of(&self, py: Python<'_>, failure: &engine::CallFailure) -> Option<Py<PyAny>> {
        let failed = match &failure.error {
            engine::CallError::Provider(failed) => failed,
            engine::CallError::Deadline {
                last: Some(failed), ..
            } => failed,
            _ => return None,
        };
        let slots = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let error = slots.get(failed.provider)?.as_ref()?;
        Some(error.value(py).clone().into_any().unbind())
    }
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
pub(super) async fn run_call(inner: Arc<Inner>, call: Call) -> PyResult<Py<PyAny>> {
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
    key_error: impl FnOnce(Option<PyErr>),
) -> Result<String, Option<Failure>> {
    let name = &provider.name;
    tokio::task::block_in_place(|| {
        Python::attach(|py| {
            let value = match callable.call0(py) {
                Ok(value) => {
                    key_error(None);
                    value.into_bound(py)
                }
                Err(error) if error.is_instance_of::<pyo3::exceptions::PyException>(py) => {
                    // Its type only: its text may hold what the callable
                    // read (a token, a URL with a password).
                    let kind = error.get_type(py);
                    let type_name = match (kind.module(), kind.name()) {
                        (Ok(module), Ok(name)) if module != "builtins" => {
                            format!("{module}.{name}")
                        }
                        (_, Ok(name)) => name.to_string(),
                        _ => "an exception".to_string(),
                    };
                    let text = format!(
                        "{name}: the api_key callable raised {type_name} (its text is left \
                         out: it may hold a secret)"
                    );
                    let text = providers::redact(&text, secrets);
                    key_error(Some(error));
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

/// A call that chose a pool member first (`least_busy`), counted as busy
/// at it while the call lives (a stream: until it is closed).
pub(super) struct Reservation {
    inner: Arc<Inner>,
    provider: usize,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.inner.busy[self.provider].fetch_sub(1, Ordering::Relaxed);
        self.inner
            .state
            .note_busy(&busy_key(&self.inner.providers[self.provider]), -1);
    }
}

/// A pool member's name in the fleet's busy counts: its name and model.
fn busy_key(config: &ProviderConfig) -> String {
    format!("{}|{}", config.name, config.model)
}

/// Puts each `least_busy` pool's members (contiguous in `chain`) in order
/// of the calls busy at them, ties in rotation, and reserves the first.
pub(super) fn order_least_busy(
    inner: &Arc<Inner>,
    chain: &mut [usize],
    groups: &[Vec<usize>],
) -> Vec<Reservation> {
    let mut reservations = Vec::new();
    for group in groups {
        let Some(start) = chain.iter().position(|i| group.contains(i)) else {
            continue;
        };
        let end = (start + group.len()).min(chain.len());
        let members = &mut chain[start..end];
        let n = members.len().max(1);
        let turn = inner.turn.fetch_add(1, Ordering::Relaxed) % n;
        let mut ranked: Vec<(u64, usize, usize)> = members
            .iter()
            .enumerate()
            .map(|(pos, &i)| {
                // Busy here, and (with fleet-wide state) in the other processes:
                // a zero noted says this process orders this pool, so the
                // fleet's counts are read from now on.
                inner.state.note_busy(&busy_key(&inner.providers[i]), 0);
                let here = inner.busy[i].load(Ordering::Relaxed) as u64;
                let there = inner.state.busy_elsewhere(&busy_key(&inner.providers[i]));
                (here + there, (pos + n - turn) % n, i)
            })
            .collect();
        ranked.sort_unstable();
        for (slot, (_, _, i)) in members.iter_mut().zip(ranked) {
            *slot = i;
        }
        if let Some(&first) = members.first() {
            inner.busy[first].fetch_add(1, Ordering::Relaxed);
            inner.state.note_busy(&busy_key(&inner.providers[first]), 1);
            reservations.push(Reservation {
                inner: Arc::clone(inner),
                provider: first,
            });
        }
    }
    reservations
}

/// A provider's key in the shared state: its name, with the model when a
/// call names another (a typo cools only that model), and the call kind
/// (an embeddings 404 never stops chat).
/// It carries the model the call asks for after a `|` (what
/// `cooldowns()` shows is the part before it): apps sharing a fleet state
/// and a provider name but not its model do not cool each other.
fn state_key(config: &ProviderConfig, job: &Job) -> String {
    let model = providers::job_model(config, job);
    let shown = match job {
        Job::Embed(_) => format!("{}:embeddings", config.name),
        Job::Chat(request) | Job::Stream(request) => match &request.model {
            Some(model) if *model != config.model => format!("{}/{model}", config.name),
            _ => config.name.clone(),
        },
    };
    format!("{shown}|{model}")
}

/// One prompt or embeddings call: the engine, then its answer or error as
/// Python objects.
async fn run_inner(inner: Arc<Inner>, mut call: Call) -> PyResult<Py<PyAny>> {
    let call_id = new_call_id();
    let used = used_configs(&inner, &call.chain, &call.job);
    let configs: Vec<&ProviderConfig> = used.iter().map(AsRef::as_ref).collect();
    let result = run_engine(&inner, &mut call, &configs, &call_id, None).await?;
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
    /// A stream no provider of its chain can serve fails when it is made, as
    /// a whole call does, not on its first read: nothing is sent either way.
    pub(super) fn refuse_if_unserved(&mut self, py: Python<'_>, inner: &Inner) -> PyResult<()> {
        let used = used_configs(inner, &self.chain, &self.job);
        let configs: Vec<&ProviderConfig> = used.iter().map(AsRef::as_ref).collect();
        let unable: Vec<Option<String>> = configs
            .iter()
            .map(|c| providers::unable_for(c, &self.job))
            .collect();
        let unable: Vec<Option<&str>> = unable.iter().map(Option::as_deref).collect();
        match engine::unserved(&unable) {
            Some(failure) => Err(self.raise(py, &failure, &configs, &new_call_id())),
            None => Ok(()),
        }
    }

    /// The same call, read as a stream.
    pub(super) fn into_stream(mut self) -> Self {
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
        if let Some(cause) = self.key_errors.cause_of(py, failure) {
            // A deadline's error has the provider's as its own cause.
            let bound = error.bind(py);
            let target = match &failure.error {
                engine::CallError::Deadline { .. } => bound.getattr("__cause__").ok(),
                _ => Some(bound.clone()),
            };
            if let Some(target) = target.filter(|t| !t.is_none()) {
                if let Err(e) = target.setattr("__cause__", cause) {
                    return e;
                }
            }
        }
        self.events
            .send_call_failed(py, call_id, error.bind(py), &failure.reason);
        match self.interrupted.try_recv() {
            Ok(interrupt) => interrupt,
            Err(_) => PyErr::from_value(error.into_bound(py)),
        }
    }
}

/// One run of the engine for `call` (picking up after `resume` when given),
/// its chain's providers as `used_configs` gives them. The only place the
/// engine is run. `Err` is Python code run by the call (a sleeper, a hook,
/// a key callable) ending it.
pub(super) async fn run_engine(
    inner: &Inner,
    call: &mut Call,
    configs: &[&ProviderConfig],
    call_id: &str,
    resume: Option<engine::Resume>,
) -> PyResult<Result<engine::Success<Reply>, engine::CallFailure>> {
    // A fleet-wide state's first read, bounded by its timeout and by what
    // the call can spare of its deadline, which counts it: the call began
    // before it.
    let began = engine::Clock::now(&call.clock);
    match engine::state::spare(call.deadline) {
        Some(within) => drop(tokio::time::timeout(within, inner.state.settle()).await),
        None => inner.state.settle().await,
    }
    let spent = engine::Clock::now(&call.clock).saturating_sub(began);
    let job = &call.job;
    let unable: Vec<Option<String>> = configs
        .iter()
        .map(|c| providers::unable_for(c, job))
        .collect();
    for (config, _) in configs.iter().zip(&unable).filter(|(_, why)| why.is_none()) {
        if let Some(note) = providers::dropped_hints(config, job) {
            Python::attach(|py| call.events.send_debug(py, call_id, &note));
        }
    }
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
    let spec = CallSpec {
        call_id,
        providers: &slots,
        policy: &call.policy,
        attempt_timeout: call.timeout,
        deadline: call.deadline,
        spent,
        state: Some(&*inner.state),
    };
    let events = &call.events;
    let mut on_event =
        |event: Event| Python::attach(|py| events.send_engine_event(py, &event, configs));
    let transport = &call.transport;
    let interrupt = &call.interrupt;
    let key_errors = &call.key_errors;
    // Each provider's request is built once per run, on its first attempt;
    // a fixed key goes in then, a callable's key on every attempt.
    let requests: Vec<OnceLock<HttpRequest>> = configs.iter().map(|_| OnceLock::new()).collect();
    let mut unit = || rand::random::<f64>();
    // One idempotency key per call and provider, the same on every retry to
    // it (the caller's, when given), and the attempt's number among them;
    // made at the attempt, so providers never tried cost nothing.
    let idempotency_key = |index: usize| match &call.idempotency_key {
        Some(key) => key.clone(),
        None => format!("failover-{call_id}-{index}"),
    };
    let mut tries = vec![0u32; configs.len()];
    if let Some(broken) = &resume {
        // A restart is a retry: the broken attempt and those before it count.
        tries[broken.provider] = broken.retries_done + 1;
    }
    let run = engine::run_from(
        &spec,
        resume,
        &call.clock,
        &mut unit,
        &mut on_event,
        |index, bounds| {
            let asked = std::time::Instant::now();
            let provider = configs[index];
            let source = &inner.keys[call.chain[index]];
            let built = requests[index].get_or_init(|| {
                let mut base = providers::build(provider, job);
                providers::add_secrets(&mut base.secrets, &inner.proxy_secrets);
                match source {
                    KeySource::Fixed => {
                        providers::authorize(provider, &base, provider.api_key.as_deref())
                    }
                    KeySource::Callable(..) => base,
                }
            });
            let sent = match source {
                KeySource::Fixed => Ok(built.clone()),
                // The caller's own header under the key's name: the key is
                // not sent, so its callable is not asked.
                KeySource::Callable(..) if providers::key_header_given(provider, built) => {
                    Ok(built.clone())
                }
                KeySource::Callable(callable, recent) => {
                    let key_error = |error| key_errors.set(index, error);
                    callable_key(provider, callable, &built.secrets, interrupt, key_error).map(
                        |key| {
                            let mut sent = providers::authorize(provider, built, Some(&key));
                            providers::add_secrets(&mut sent.secrets, &recent.remember(&key));
                            sent
                        },
                    )
                }
            };
            let retry_count = tries[index];
            tries[index] += 1;
            let sent = sent.map(|mut sent| {
                // A header the caller set (on the provider or the call) wins.
                let given = |headers: &[(String, String)], name: &str| {
                    headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name))
                };
                if !given(&sent.headers, "idempotency-key") {
                    sent.headers
                        .push(("idempotency-key".into(), idempotency_key(index)));
                }
                if !given(&sent.headers, "x-retry-count") {
                    sent.headers
                        .push(("x-retry-count".into(), retry_count.to_string()));
                }
                sent
            });
            // A key callable runs before the attempt and cannot be cut
            // short: the time it took is the attempt's.
            let bounds = bounds.after(asked.elapsed());
            async move {
                let sent = match sent {
                    Ok(sent) => sent,
                    Err(Some(failure)) => return Err(failure),
                    // The call is being ended by the interrupt: never report an
                    // outcome the engine could act on (fail over, call the next).
                    Err(None) => std::future::pending().await,
                };
                providers::exchange(provider, job, transport, &sent, bounds).await
            }
        },
    );
    let interrupted = &mut call.interrupted;
    // A call ended by an error from Python code it ran (a key callable that
    // gave no key) fails like any call: its CallFailed event goes out. A
    // KeyboardInterrupt or SystemExit is not a failure of the call's.
    let ended = |error: PyErr| {
        Python::attach(|py| {
            if error.is_instance_of::<pyo3::exceptions::PyException>(py) {
                let reason = error.value(py).to_string();
                events.send_call_failed(py, call_id, error.value(py).as_any(), &reason);
            }
        });
        error
    };
    let result = tokio::select! {
        biased;
        Ok(error) = &mut *interrupted => return Err(ended(error)),
        result = run => result,
    };
    // The engine may finish in the same poll in which a hook or a sleeper
    // asked to end the call (a sleep that returns at once does not yield):
    // the interrupt wins.
    if let Ok(error) = interrupted.try_recv() {
        return Err(ended(error));
    }
    if let Some(notice) = inner.state.take_notice() {
        Python::attach(|py| events.send_notice(py, &notice));
    }
    Ok(result)
}
