//! One call's Python half, shared by `NativeClient` (prompt, embed) and
//! `NativeStream`: what a client holds (`Inner`), one call (`Call`: the
//! core call and its `Face`), key callables behind the core's `KeySource`,
//! and a failed call's exception.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyString;

use super::clock::CallClock;
use super::errors::{configuration_error, internal_error};
use super::events::EventTarget;
use super::failures::call_error;
use super::runtime::{blocking, Finish, Interrupt, Pools};
use super::seam::{attempts_list, EmbeddingsData, KeySource, MediaData, ResponseData};
use crate::call::{self, KeyAsk, NoKey, RecentKeys};
use crate::engine::{self, ErrorKind, Failure};
use crate::providers::{self, Reply};

pub(super) struct Inner {
    /// Providers, proxy secrets, the shared state, pools' busy counts.
    pub(super) core: Arc<call::Client>,
    pub(super) keys: Vec<KeySource>,
    /// Its connection pools; closed with the client.
    pub(super) pools: Arc<Pools>,
    /// Its state lives on Redis, whose connection is the shared runtime's:
    /// its sync calls run there too.
    pub(super) fleet: bool,
    /// `failover._events._emitter(on_event)`.
    pub(super) emit: Py<PyAny>,
}

/// The core of one Python call.
pub(super) type CoreCall = call::Call<CallClock, PyErr>;

/// One call, resolved by the Python side and checked here.
pub(super) struct Call {
    pub(super) core: CoreCall,
    pub(super) face: Face,
}

/// What a call has of Python: where its events go, how Python code it runs
/// ends it, and what its key callables raised.
pub(super) struct Face {
    pub(super) events: EventTarget,
    pub(super) interrupt: Interrupt,
    /// What each provider's key callable raised at its latest attempt, by
    /// its place in the chain: the error the call raises for that attempt
    /// carries it as `__cause__`. Its text is not copied into the error, the
    /// log or events: the library cannot know what it holds.
    pub(super) key_errors: call::KeyErrors<PyErr>,
}

/// One call, with a panic anywhere inside it turned into a
/// `FailoverError` instead of crossing into Python as a PanicException. It
/// ends with how to make its answer or exception ([`Finish`]), made by
/// whoever holds the GIL next: the sync face at once, the async face in the
/// hold that hands it to the event loop.
pub(super) async fn run_call(inner: Arc<Inner>, call: Call) -> Finish {
    use futures_util::FutureExt;
    match std::panic::AssertUnwindSafe(run_inner(inner, call))
        .catch_unwind()
        .await
    {
        Ok(finish) => finish,
        Err(panic) => {
            let what = super::runtime::panic_text(&*panic);
            Box::new(move |_| Err(internal_error(what)))
        }
    }
}

/// One prompt or embeddings call: the engine, then how to make its answer
/// or error as Python objects.
async fn run_inner(inner: Arc<Inner>, call: Call) -> Finish {
    let Call { mut core, face } = call;
    let keys = face.keys(&inner);
    let outcome = match core.run(&keys, &face.events, None).await {
        Ok(outcome) => outcome,
        Err(error) => {
            let error = face.ended(error, &core.call_id);
            return Box::new(move |_| Err(error));
        }
    };
    Box::new(move |py| {
        let success = match outcome {
            Ok(success) => success,
            Err(failure) => return Err(face.raise(py, &failure, &mut core)),
        };
        let configs = core.plan.configs();
        let attempts = attempts_list(py, &success.attempts, &configs)?;
        let provider = &configs[success.provider].name;
        let call_id = &core.call_id;
        match success.value {
            Reply::Chat(chat) => {
                let data = ResponseData::new(py, chat, provider, attempts, call_id)?;
                Ok(Py::new(py, data)?.into_any())
            }
            Reply::Embed(embed) => {
                let data = EmbeddingsData::new(py, embed, provider, attempts, call_id)?;
                Ok(Py::new(py, data)?.into_any())
            }
            Reply::Media(media) => {
                let data = MediaData::new(py, *media, provider, attempts, call_id)?;
                Ok(Py::new(py, data)?.into_any())
            }
            Reply::Stream(_) => Err(internal_error("a stream answered a whole call")),
        }
    })
}

impl Call {
    /// A stream no provider of its chain can serve fails when it is made, as
    /// a whole call does, not on its first read: nothing is sent either way.
    pub(super) fn refuse_if_unserved(&mut self, py: Python<'_>) -> PyResult<()> {
        match self.core.plan.unserved() {
            Some(failure) => Err(self.face.raise(py, &failure, &mut self.core)),
            None => Ok(()),
        }
    }
}

/// A client's key callables, for one call.
pub(super) struct CallKeys<'a> {
    inner: &'a Inner,
    face: &'a Face,
}

impl call::KeySource for CallKeys<'_> {
    fn asked(&self, provider: usize) -> Option<&RecentKeys> {
        match &self.inner.keys[provider] {
            KeySource::Fixed => None,
            KeySource::Callable(_, recent) => Some(recent),
        }
    }

    fn key(&self, ask: KeyAsk<'_>) -> Result<String, NoKey> {
        let KeySource::Callable(callable, _) = &self.inner.keys[ask.provider] else {
            return Ok(ask.config.api_key.clone().unwrap_or_default());
        };
        let key_error = |error| self.face.key_errors.set(ask.position, error);
        callable_key(
            ask.config,
            callable,
            ask.secrets,
            &self.face.interrupt,
            key_error,
        )
    }
}

impl Face {
    pub(super) fn keys<'a>(&'a self, inner: &'a Inner) -> CallKeys<'a> {
        CallKeys { inner, face: self }
    }

    /// A call ended by an error from Python code it ran (a key callable that
    /// gave no key) fails like any call: its CallFailed event goes out. A
    /// KeyboardInterrupt or SystemExit is not a failure of the call's.
    pub(super) fn ended(&self, error: PyErr, call_id: &str) -> PyErr {
        Python::attach(|py| {
            if error.is_instance_of::<pyo3::exceptions::PyException>(py) {
                let reason = error.value(py).to_string();
                self.events
                    .send_call_failed(py, call_id, error.value(py).as_any(), &reason);
            }
        });
        error
    }

    /// The exception a failed call raises (after its `CallFailed` event),
    /// unless Python code run by the call asked to end it with its own.
    pub(super) fn raise(
        &self,
        py: Python<'_>,
        failure: &engine::CallFailure,
        call: &mut CoreCall,
    ) -> PyErr {
        let error = match call_error(py, failure, &call.plan.configs(), &call.call_id) {
            Ok(error) => error,
            Err(error) => return error,
        };
        let cause = self
            .key_errors
            .cause_of(failure, |error| error.value(py).clone().into_any().unbind());
        if let Some(cause) = cause {
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
            .send_call_failed(py, &call.call_id, error.bind(py), &failure.reason);
        match call.interrupted.take() {
            Some(interrupt) => interrupt,
            None => PyErr::from_value(error.into_bound(py)),
        }
    }
}

/// The key from a provider's callable, for one attempt. A callable that
/// raises an ordinary exception fails this attempt as an auth failure of
/// this provider (another provider has its own key): `NoKey::Failed`.
/// A BaseException, or a value that is not a key, ends the call through
/// `interrupt`: `NoKey::Ended`, and the attempt must not go on.
///
/// It runs on the thread driving the call (a runtime worker on async calls),
/// outside the attempt's timeout: a slow token fetch delays the attempt.
fn callable_key(
    provider: &providers::ProviderConfig,
    callable: &Py<PyAny>,
    secrets: &[String],
    interrupt: &Interrupt,
    key_error: impl FnOnce(Option<PyErr>),
) -> Result<String, NoKey> {
    let name = &provider.name;
    blocking(|| {
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
                    return Err(NoKey::Failed(Failure::without_response(
                        ErrorKind::Auth,
                        text,
                    )));
                }
                Err(error) => {
                    interrupt.raise(error);
                    return Err(NoKey::Ended);
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
                     without control characters, got {type_name}"
                )));
                NoKey::Ended
            })
        })
    })
}
