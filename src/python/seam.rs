//! The typed seam between `failover._client` and the engine: what Python
//! hands over, read by attribute into named structs (the Python half is
//! `failover/_seam.py`), and what comes back, as frozen classes with named
//! fields. Adding a field touches one definition on each side; a provider
//! field is read in one place, [`ProviderSpec`]'s conversion.

use std::time::Duration;

use pyo3::conversion::FromPyObjectOwned;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyList, PyString};

use super::errors::{configuration_error, seconds};
use super::json::json_from;
use crate::call::RecentKeys;
use std::sync::Arc;

use crate::engine::policy::{Backoff, Preset};
use crate::engine::{AttemptRecord, ErrorKind, KindSet, RetryBudget, RetryPolicy, Usage};
use crate::http::{TransportOptions, Verify};
use crate::providers::{
    ChatResponse, EmbedResponse, Media, MediaContent, MediaKind, MediaResponse, ProviderConfig,
    Voice, Wire,
};

/// Where a provider's key comes from.
pub enum KeySource {
    /// Fixed when the client was built (or no key at all).
    Fixed,
    /// A Python callable, called for each attempt (rotating tokens), and
    /// the keys it gave lately: a provider may echo an expired one.
    Callable(Py<PyAny>, RecentKeys),
}

/// One configured provider (`failover._seam.ProviderSpec`), read by
/// attribute straight into the engine's [`ProviderConfig`], with where its
/// key comes from. This is the one place a provider field crosses the seam:
/// a new one is a `ProviderConfig` field, a line here and, on the Python
/// side, a name in `ProviderSpec.COPIED` (with the provider's attribute).
pub struct ProviderSpec {
    pub config: ProviderConfig,
    pub key: KeySource,
    /// The client's limits it draws on (its own, its pool's, its quota's)
    /// and its quota.
    pub limits: crate::call::ProviderLimits,
}

impl<'a, 'py> FromPyObject<'a, 'py> for ProviderSpec {
    type Error = PyErr;

    fn extract(spec: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let spec = &*spec;
        let name: String = field(spec, "name")?;
        let wire: String = field(spec, "wire")?;
        let wire = Wire::parse(&wire)
            .ok_or_else(|| configuration_error(format!("unknown wire format {wire:?}")))?;
        // A `str`, a callable returning one (called for each attempt), or `None`.
        let api_key: Option<Bound<'py, PyAny>> = field(spec, "api_key")?;
        let (api_key, key) = match api_key {
            None => (None, KeySource::Fixed),
            Some(key) => match key.cast::<PyString>() {
                Ok(text) => (Some(text.to_cow()?.into_owned()), KeySource::Fixed),
                Err(_) if key.is_callable() => {
                    (None, KeySource::Callable(key.unbind(), Default::default()))
                }
                Err(_) => {
                    return Err(configuration_error(format!(
                        "provider {name:?}: api_key must be a str or a callable returning one"
                    )))
                }
            },
        };
        // A dict merged into every request body for this provider, or `None`.
        let params: Option<Bound<'py, PyAny>> = field(spec, "params")?;
        let params = match params {
            None => None,
            Some(params) => match json_from(&format!("provider {name:?}: params"), &params)? {
                value @ serde_json::Value::Object(_) => Some(value),
                _ => {
                    return Err(configuration_error(format!(
                        "provider {name:?}: params must be a dict of body fields"
                    )))
                }
            },
        };
        let config = ProviderConfig {
            wire,
            model: field(spec, "model")?,
            base_url: field(spec, "base_url")?,
            api_key,
            headers: field(spec, "headers")?,
            overloaded_statuses: field(spec, "overloaded_statuses")?,
            max_tokens_field: field(spec, "max_tokens_field")?,
            params,
            embedding_model: field(spec, "embedding_model")?,
            embeds: field(spec, "can_embed")?,
            dimensions_field: field(spec, "dimensions_field")?,
            embed_base64: field(spec, "embed_base64")?,
            stream_usage: field(spec, "stream_usage")?,
            entra_token: field(spec, "entra_token")?,
            seed_field: field(spec, "seed_field")?,
            mistral_rules: field(spec, "mistral_rules")?,
            image_model: field(spec, "image_model")?,
            speech_model: field(spec, "speech_model")?,
            transcription_model: field(spec, "transcription_model")?,
            media: media_kinds(&field::<Vec<String>>(spec, "media")?)?,
            name,
        };
        let limits = crate::call::ProviderLimits {
            chat: field(spec, "limits")?,
            embed: field(spec, "embedding_limits")?,
            own_chat: field(spec, "own_limit")?,
            own_embed: field(spec, "own_embedding_limit")?,
            quota: field(spec, "quota")?,
        };
        Ok(Self {
            config,
            key,
            limits,
        })
    }
}

/// The attribute `name` of a `ProviderSpec`, naming it when it is not what
/// the engine reads.
fn field<'py, T: FromPyObjectOwned<'py>>(spec: &Bound<'py, PyAny>, name: &str) -> PyResult<T> {
    let value = spec.getattr(PyString::intern(spec.py(), name))?;
    value.extract::<T>().map_err(|e| {
        let err = PyTypeError::new_err(format!("ProviderSpec.{name} cannot be read"));
        err.set_cause(spec.py(), Some(e.into()));
        err
    })
}

/// How the client reaches providers (`failover._seam.TransportSpec`).
#[derive(FromPyObject)]
pub struct TransportSpec<'py> {
    pub connect_timeout: f64,
    pub proxy: Option<String>,
    /// `True`, `False` or the path of a PEM CA bundle.
    pub verify: Bound<'py, PyAny>,
    pub http2: bool,
    pub max_idle_connections: Option<usize>,
}

impl TransportSpec<'_> {
    pub fn options(&self) -> PyResult<TransportOptions> {
        let verify = if let Ok(flag) = self.verify.cast::<PyBool>() {
            if flag.is_true() {
                Verify::System
            } else {
                Verify::Off
            }
        } else if let Ok(path) = self.verify.cast::<PyString>() {
            let path = path.to_cow()?;
            let pem = std::fs::read(path.as_ref()).map_err(|e| {
                configuration_error(format!("verify: cannot read the CA bundle {path:?}: {e}"))
            })?;
            Verify::CaBundle(pem)
        } else {
            return Err(configuration_error(
                "verify must be True, False or the path of a PEM CA bundle",
            ));
        };
        Ok(TransportOptions {
            connect_timeout: seconds("connect_timeout", self.connect_timeout)?,
            proxy: self.proxy.clone(),
            verify,
            http2: self.http2,
            max_idle_connections: self.max_idle_connections,
        })
    }
}

/// One call's arguments (`failover._seam.CallArgs`).
#[derive(FromPyObject)]
pub struct CallArgs<'py> {
    /// A list of message dicts, converted to JSON and checked here.
    pub messages: Bound<'py, PyAny>,
    /// Hedged requests for this call, or `None`.
    pub hedge: Option<PyRef<'py, NativeHedge>>,
    /// Where its attempts are logged as they go.
    pub journal: Option<PyRef<'py, Journal>>,
    /// Indexes into the client's providers, in the order to try them.
    pub chain: Vec<usize>,
    pub policy: PyRef<'py, NativePolicy>,
    pub timeout: f64,
    pub deadline: Option<f64>,
    /// `None` (real sleep), a `VirtualClock`, or a callable taking seconds.
    pub sleeper: Option<Bound<'py, PyAny>>,
    pub model: Option<Bound<'py, PyAny>>,
    pub system: Option<Bound<'py, PyAny>>,
    pub max_tokens: Option<u64>,
    pub temperature: Option<f64>,
    /// A list of tool dicts (`{"name", "description", "parameters"}` or
    /// OpenAI's `{"type": "function", "function": {...}}`), or `None`.
    pub tools: Option<Bound<'py, PyAny>>,
    pub tool_choice: Option<String>,
    /// OpenAI's `response_format` dict, or `None`.
    pub response_format: Option<Bound<'py, PyAny>>,
    pub stop: Option<Vec<String>>,
    pub top_p: Option<f64>,
    pub seed: Option<i64>,
    /// Extra request headers for this call, checked by Python.
    pub headers: Option<Vec<(String, String)>>,
    /// The caller's `Idempotency-Key`, sent to every provider.
    pub idempotency_key: Option<String>,
    /// The events emitter of a `with_options()` client; `None`: the client's.
    pub emit: Option<Py<PyAny>>,
    /// The pools in the chain: each one's strategy and members' indexes (in
    /// its order); the native side orders them.
    pub pools: Option<Vec<(String, Vec<usize>)>>,
}

/// The call types a provider has an API for, by name (`_seam.ProviderSpec.media`).
fn media_kinds(names: &[String]) -> PyResult<Vec<MediaKind>> {
    names
        .iter()
        .map(|name| match name.as_str() {
            "image" => Ok(MediaKind::Image),
            "speech" => Ok(MediaKind::Speech),
            "transcription" => Ok(MediaKind::Transcription),
            other => Err(pyo3::exceptions::PyValueError::new_err(format!(
                "unknown media kind {other:?}"
            ))),
        })
        .collect()
}

/// One embeddings call's arguments (`failover._seam.EmbedArgs`).
#[derive(FromPyObject)]
pub struct EmbedArgs<'py> {
    /// The texts, checked by Python (a list of str).
    pub texts: Vec<String>,
    pub chain: Vec<usize>,
    pub policy: PyRef<'py, NativePolicy>,
    pub timeout: f64,
    pub deadline: Option<f64>,
    pub sleeper: Option<Bound<'py, PyAny>>,
    pub model: Option<Bound<'py, PyAny>>,
    pub dimensions: Option<u64>,
    pub headers: Option<Vec<(String, String)>>,
    pub idempotency_key: Option<String>,
    pub emit: Option<Py<PyAny>>,
    pub pools: Option<Vec<(String, Vec<usize>)>>,
    pub journal: Option<PyRef<'py, Journal>>,
}

/// One image, speech or transcription call's arguments
/// (`failover._seam.MediaArgs`): `kind` names which, and the fields of the
/// others are `None`.
#[derive(FromPyObject)]
pub struct MediaArgs<'py> {
    pub kind: String,
    pub prompt: Option<String>,
    pub size: Option<String>,
    pub n: u32,
    pub quality: Option<String>,
    pub urls: bool,
    pub text: Option<String>,
    pub voice: Option<VoiceArg>,
    pub format: Option<String>,
    pub speed: Option<f64>,
    pub instructions: Option<String>,
    pub audio: Option<Vec<u8>>,
    pub filename: Option<String>,
    pub language: Option<String>,
    pub response_format: Option<String>,
    pub chain: Vec<usize>,
    pub policy: PyRef<'py, NativePolicy>,
    pub timeout: f64,
    pub deadline: Option<f64>,
    pub sleeper: Option<Bound<'py, PyAny>>,
    pub model: Option<Bound<'py, PyAny>>,
    pub headers: Option<Vec<(String, String)>>,
    pub idempotency_key: Option<String>,
    pub emit: Option<Py<PyAny>>,
    pub pools: Option<Vec<(String, Vec<usize>)>>,
    pub journal: Option<PyRef<'py, Journal>>,
}

/// `voice=`: one name, or each provider's (by its name, a pool's expanded
/// to its members by Python).
#[derive(FromPyObject)]
pub enum VoiceArg {
    Every(String),
    ByProvider(Vec<(String, String)>),
}

impl MediaArgs<'_> {
    /// What the call asks for; Python checked each field.
    pub fn media(&mut self) -> PyResult<Media> {
        let missing = |what: &str| {
            pyo3::exceptions::PyValueError::new_err(format!("a {} call without {what}", self.kind))
        };
        Ok(match self.kind.as_str() {
            "image" => Media::Image {
                prompt: self.prompt.take().ok_or_else(|| missing("prompt"))?,
                size: self.size.take(),
                n: self.n,
                quality: self.quality.take(),
                urls: self.urls,
            },
            "speech" => Media::Speech {
                text: self.text.take().ok_or_else(|| missing("text"))?,
                voice: match self.voice.take().ok_or_else(|| missing("voice"))? {
                    VoiceArg::Every(voice) => Voice::Every(voice),
                    VoiceArg::ByProvider(voices) => Voice::ByProvider(voices),
                },
                format: self.format.take().ok_or_else(|| missing("format"))?,
                speed: self.speed,
                instructions: self.instructions.take(),
            },
            "transcription" => Media::Transcription {
                audio: self.audio.take().ok_or_else(|| missing("audio"))?.into(),
                filename: self.filename.take().ok_or_else(|| missing("filename"))?,
                language: self.language.take(),
                prompt: self.prompt.take(),
                response_format: self
                    .response_format
                    .take()
                    .ok_or_else(|| missing("response_format"))?,
            },
            other => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "unknown media call {other:?}"
                )))
            }
        })
    }
}

/// A `failover.Hedge`: its numbers, checked by Python, and its budget,
/// shared by every call given the same `Hedge`.
#[pyclass(frozen, module = "failover._native")]
pub struct NativeHedge {
    pub hedge: Arc<crate::engine::Hedge>,
}

#[pymethods]
impl NativeHedge {
    /// `after` in seconds, or `quantile` (0.95 for "p95") to learn it.
    #[new]
    #[pyo3(signature = (*, after, max_extra, quantile=None))]
    fn new(after: f64, max_extra: f64, quantile: Option<f64>) -> PyResult<Self> {
        let hedge = match quantile {
            Some(quantile) => crate::engine::Hedge::learned(quantile, max_extra),
            None => {
                let after = std::time::Duration::try_from_secs_f64(after)
                    .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
                crate::engine::Hedge::new(after, max_extra)
            }
        };
        Ok(Self {
            hedge: Arc::new(hedge),
        })
    }
}

/// A `RetryPolicy`, checked once when it is made and reused by every call.
/// Its getters are what `failover.RetryPolicy` shows of a preset: the
/// numbers the engine decides with, never a copy.
#[pyclass(frozen, module = "failover._native")]
pub struct NativePolicy {
    pub policy: RetryPolicy,
}

#[pymethods]
impl NativePolicy {
    /// Failover's own policy, with the caller's numbers.
    #[new]
    #[pyo3(signature = (
        *, max_retries, max_retries_last, max_retry_after, max_retry_after_last,
        backoff_initial, backoff_multiplier, backoff_max, backoff_jitter, backoff_spread, stop_on,
        budget, max_cooldown, max_hinted_cooldown
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        max_retries: u32,
        max_retries_last: u32,
        max_retry_after: f64,
        max_retry_after_last: f64,
        backoff_initial: f64,
        backoff_multiplier: f64,
        backoff_max: f64,
        backoff_jitter: f64,
        backoff_spread: f64,
        stop_on: Vec<String>,
        budget: Option<(f64, f64, f64)>,
        max_cooldown: f64,
        max_hinted_cooldown: f64,
    ) -> PyResult<Self> {
        let stop_on = stop_on
            .iter()
            .map(|name| {
                ErrorKind::parse(name).ok_or_else(|| {
                    configuration_error(format!("stop_on: unknown error kind {name:?}"))
                })
            })
            .collect::<PyResult<KindSet>>()?;
        Ok(Self {
            policy: RetryPolicy {
                max_retries,
                max_retries_last,
                max_retry_after: seconds("max_retry_after", max_retry_after)?,
                max_retry_after_last: seconds("max_retry_after_last", max_retry_after_last)?,
                backoff: Backoff {
                    initial: backoff_initial,
                    multiplier: backoff_multiplier,
                    max: backoff_max,
                    jitter: backoff_jitter,
                    spread: backoff_spread,
                },
                stop_on,
                preset: Preset::Default,
                budget: budget
                    .map(|(ratio, min_retries_per_second, window)| {
                        Ok::<_, PyErr>(RetryBudget {
                            ratio,
                            min_retries_per_second,
                            window: seconds("window", window)?,
                        })
                    })
                    .transpose()?,
                max_cooldown: seconds("max_cooldown", max_cooldown)?,
                max_hinted_cooldown: seconds("max_hinted_cooldown", max_hinted_cooldown)?,
            },
        })
    }

    /// A preset, with the engine's numbers: presets are exact reproductions,
    /// not tunable (ruby_llm's `max_interval` aside). `"default"` is
    /// failover's own policy with its default numbers.
    #[staticmethod]
    #[pyo3(signature = (name, max_interval=None))]
    fn preset(name: &str, max_interval: Option<f64>) -> PyResult<Self> {
        let max_interval = optional_seconds("max_interval", max_interval)?;
        let policy = match name {
            "default" => RetryPolicy::default(),
            "laravel" => RetryPolicy::laravel(),
            "ruby_llm" => RetryPolicy::ruby_llm(max_interval),
            "openai" => RetryPolicy::openai(),
            other => {
                return Err(configuration_error(format!(
                    "unknown retry preset {other:?}"
                )))
            }
        };
        Ok(Self { policy })
    }

    #[getter]
    fn max_retries(&self) -> u32 {
        self.policy.max_retries
    }

    #[getter]
    fn max_retries_last(&self) -> u32 {
        self.policy.max_retries_last
    }

    /// In seconds; infinite where nothing bounds it (`ruby_llm()`).
    #[getter]
    fn max_retry_after(&self) -> f64 {
        self.policy.max_retry_after_secs(false)
    }

    #[getter]
    fn max_retry_after_last(&self) -> f64 {
        self.policy.max_retry_after_secs(true)
    }

    /// `(initial, multiplier, max, jitter, spread)`; `max` infinite where
    /// nothing bounds it.
    #[getter]
    fn backoff(&self) -> (f64, f64, f64, f64, f64) {
        let b = &self.policy.backoff;
        (b.initial, b.multiplier, b.max, b.jitter, b.spread)
    }

    /// The kinds that end a call at once, as the engine holds them.
    #[getter]
    fn stop_on(&self) -> Vec<&'static str> {
        self.policy.stop_on.iter().map(ErrorKind::as_str).collect()
    }

    /// `(ratio, min_retries_per_second, window)`, or `None`.
    #[getter]
    fn budget(&self) -> Option<(f64, f64, f64)> {
        self.policy
            .budget
            .as_ref()
            .map(|b| (b.ratio, b.min_retries_per_second, b.window.as_secs_f64()))
    }

    #[getter]
    fn max_cooldown(&self) -> f64 {
        self.policy.max_cooldown.as_secs_f64()
    }

    #[getter]
    fn max_hinted_cooldown(&self) -> f64 {
        self.policy.max_hinted_cooldown.as_secs_f64()
    }

    /// The longest wait before each retry on one provider (`is_last`: no
    /// other remains), in seconds, infinite where unbounded: what
    /// `worst_case()` adds up.
    fn longest_waits(&self, is_last: bool) -> Vec<f64> {
        self.policy.longest_waits(is_last)
    }
}

/// One HTTP attempt, or one provider skipped (`failover.Attempt` is built
/// from it). Its strings are Python strings made once, read without copies.
#[pyclass(frozen, get_all, module = "failover._native")]
pub struct AttemptData {
    pub provider: Py<PyString>,
    pub status: Option<u16>,
    pub kind: Option<Py<PyString>>,
    pub waited: f64,
    pub duration: f64,
    pub skipped: Option<String>,
    /// The model the request was sent with (or would have been, if skipped).
    pub model: Py<PyString>,
    /// `(input, output, cache_read, cache_write, reasoning)` tokens, as
    /// `failover.Usage` takes them, when the provider reported any.
    pub usage: Option<UsageFigures>,
    pub billed: Option<bool>,
    /// When it was sent, Unix seconds on the real clock.
    pub started: f64,
    /// It lost a hedge's race and was cancelled.
    pub hedged: bool,
}

/// A `Usage`'s figures, in `failover.Usage`'s order.
pub type UsageFigures = (
    Option<u64>,
    Option<u64>,
    Option<u64>,
    Option<u64>,
    Option<u64>,
);

pub fn usage_figures(u: &Usage) -> UsageFigures {
    (
        u.input_tokens,
        u.output_tokens,
        u.cache_read_tokens,
        u.cache_write_tokens,
        u.reasoning_tokens,
    )
}

pub fn attempts_list(
    py: Python<'_>,
    attempts: &[AttemptRecord],
    configs: &[&ProviderConfig],
) -> PyResult<Py<PyList>> {
    let items = attempts.iter().map(|a| {
        let config = configs[a.provider];
        attempt_data(py, a, &config.name, &config.model)
    });
    Ok(PyList::new(py, items.collect::<Vec<_>>())?.unbind())
}

/// One attempt at the provider `name`, asked for `model`.
fn attempt_data(py: Python<'_>, a: &AttemptRecord, name: &str, model: &str) -> AttemptData {
    AttemptData {
        provider: PyString::new(py, name).unbind(),
        status: a.status,
        kind: a.kind.map(|k| PyString::intern(py, k.as_str()).unbind()),
        waited: a.waited.as_secs_f64(),
        duration: a.duration.as_secs_f64(),
        skipped: a.skipped.clone(),
        model: PyString::new(py, model).unbind(),
        usage: a.usage.as_ref().map(usage_figures),
        billed: a.billed,
        started: a
            .started
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
        hedged: a.hedged,
    }
}

/// A call's journal (`failover._native.Journal`), made by the client for
/// each call: what its attempts did as they went, which it reads when the
/// call is cut short (cancelled, interrupted, ended by a `ConfigurationError`
/// partway) to count what was sent.
#[pyclass(frozen, module = "failover._native")]
pub struct Journal {
    pub journal: crate::call::Journal,
}

#[pymethods]
impl Journal {
    #[new]
    fn new() -> Self {
        Self {
            journal: crate::call::Journal::default(),
        }
    }

    /// The attempts the cut run sent, as `AttemptData`, those in flight
    /// with no status and `billed` unknown; once (later: an empty list).
    fn take(&self, py: Python<'_>) -> PyResult<Py<PyList>> {
        let logged = self.journal.take();
        let items = logged
            .iter()
            .map(|l| attempt_data(py, &l.record, &l.name, &l.model));
        Ok(PyList::new(py, items.collect::<Vec<_>>())?.unbind())
    }
}

/// A `Headroom` as Python reads it: `(seen, requests, tokens, requests_reset,
/// tokens_reset)`, times in Unix seconds (`failover.Headroom` is built from it).
pub type HeadroomData = (f64, Option<u64>, Option<u64>, Option<f64>, Option<f64>);

/// What the state knows of one provider (`failover.ProviderHealth` is built
/// from it), its times Unix seconds of the clock `health()` was asked on.
#[pyclass(frozen, get_all, module = "failover._native")]
pub struct HealthData {
    pub cooling: bool,
    pub until: Option<f64>,
    pub seconds_left: Option<f64>,
    pub half_open: bool,
    pub reason: Option<String>,
    pub kind: Option<&'static str>,
    pub status: Option<u16>,
    pub retry_after: Option<f64>,
    pub failures_in_a_row: u32,
    pub headroom: Option<HeadroomData>,
    pub probing: bool,
}

impl HealthData {
    pub fn new(health: crate::engine::Health, now: std::time::SystemTime) -> Self {
        let unix = |t: std::time::SystemTime| {
            t.duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64())
        };
        let open = health.open.as_ref();
        let left = open.and_then(|c| crate::engine::state::time_left(c, now));
        let cause = open.map(|c| &c.cause);
        Self {
            cooling: left.is_some(),
            until: left.and(open).map(|c| unix(c.until)),
            seconds_left: left.map(|l| l.as_secs_f64()),
            half_open: open.is_some() && left.is_none(),
            reason: cause.map(|c| c.reason.clone()),
            kind: cause.and_then(|c| c.kind).map(ErrorKind::as_str),
            status: cause.and_then(|c| c.status),
            retry_after: cause.and_then(|c| c.retry_after).map(|d| d.as_secs_f64()),
            failures_in_a_row: health.failures_in_a_row,
            headroom: health.headroom.map(|(seen, h)| {
                (
                    unix(seen),
                    h.requests,
                    h.tokens,
                    h.requests_reset.map(unix),
                    h.tokens_reset.map(unix),
                )
            }),
            probing: health.probing,
        }
    }
}

/// A tool call the model made (`failover.ToolCall` is built from it).
#[pyclass(frozen, get_all, module = "failover._native")]
pub struct ToolCallData {
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them (JSON text, not always valid).
    pub arguments_json: String,
}

/// A successful call's answer (`failover.Response` is built from it). The
/// text and the body are Python strings made once: a getter hands out a
/// reference, never a copy of a long answer.
#[pyclass(frozen, get_all, module = "failover._native")]
pub struct ResponseData {
    pub text: Py<PyString>,
    pub provider: String,
    pub model: Option<String>,
    pub finish_reason: Option<String>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_read_tokens: Option<u64>,
    pub cache_write_tokens: Option<u64>,
    pub reasoning_tokens: Option<u64>,
    pub attempts: Py<PyList>,
    pub tool_calls: Py<PyList>,
    /// JSON text of the wire's opaque extras, when there are any.
    pub provider_data: Option<String>,
    pub request_id: Option<String>,
    /// The response body as received.
    pub raw: Py<PyString>,
    pub call_id: String,
}

impl ResponseData {
    pub fn new(
        py: Python<'_>,
        r: ChatResponse,
        provider: &str,
        attempts: Py<PyList>,
        call_id: &str,
    ) -> PyResult<Self> {
        let u = r.usage;
        let tool_calls = r.tool_calls.into_iter().map(|c| ToolCallData {
            id: c.id,
            name: c.name,
            arguments_json: c.arguments_json,
        });
        Ok(Self {
            text: PyString::new(py, &r.text).unbind(),
            provider: provider.to_string(),
            model: r.model,
            finish_reason: r.finish_reason,
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cache_read_tokens: u.cache_read_tokens,
            cache_write_tokens: u.cache_write_tokens,
            reasoning_tokens: u.reasoning_tokens,
            attempts,
            tool_calls: PyList::new(py, tool_calls.collect::<Vec<_>>())?.unbind(),
            provider_data: r.provider_data.map(|d| d.to_string()),
            request_id: r.request_id,
            raw: PyString::new(py, &r.raw).unbind(),
            call_id: call_id.to_string(),
        })
    }
}

/// A successful embeddings call (`failover.Embeddings` is built from it).
/// The vectors are one list of lists, built here at once.
#[pyclass(frozen, get_all, module = "failover._native")]
pub struct EmbeddingsData {
    pub vectors: Py<PyList>,
    pub provider: String,
    pub model: Option<String>,
    pub input_tokens: Option<u64>,
    pub attempts: Py<PyList>,
    pub request_id: Option<String>,
    pub call_id: String,
}

impl EmbeddingsData {
    pub fn new(
        py: Python<'_>,
        r: EmbedResponse,
        provider: &str,
        attempts: Py<PyList>,
        call_id: &str,
    ) -> PyResult<Self> {
        let rows = r
            .vectors
            .iter()
            .map(|v| PyList::new(py, v))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(Self {
            vectors: PyList::new(py, rows)?.unbind(),
            provider: provider.to_string(),
            model: r.model,
            input_tokens: r.usage.input_tokens,
            attempts,
            request_id: r.request_id,
            call_id: call_id.to_string(),
        })
    }
}

/// Seconds as an optional `Duration`.
pub fn optional_seconds(name: &str, value: Option<f64>) -> PyResult<Option<Duration>> {
    value.map(|v| seconds(name, v)).transpose()
}

/// A successful image, speech or transcription call (`failover.ImageResponse`,
/// `SpeechResponse` or `Transcription` is built from it): the fields of
/// the other kinds are `None`.
#[pyclass(frozen, get_all, module = "failover._native")]
pub struct MediaData {
    /// `(data, url, media_type, revised_prompt)` of each image.
    #[allow(clippy::type_complexity)]
    pub images: Option<
        Vec<(
            Option<Py<PyBytes>>,
            Option<String>,
            Option<String>,
            Option<String>,
        )>,
    >,
    pub audio: Option<Py<PyBytes>>,
    pub media_type: Option<String>,
    pub text: Option<String>,
    pub language: Option<String>,
    pub duration: Option<f64>,
    /// `(start, end, text)` of each segment.
    pub segments: Vec<(f64, f64, String)>,
    pub provider: String,
    pub model: Option<String>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub attempts: Py<PyList>,
    pub request_id: Option<String>,
    pub call_id: String,
}

impl MediaData {
    pub fn new(
        py: Python<'_>,
        r: MediaResponse,
        provider: &str,
        attempts: Py<PyList>,
        call_id: &str,
    ) -> PyResult<Self> {
        let mut data = Self {
            images: None,
            audio: None,
            media_type: None,
            text: None,
            language: None,
            duration: None,
            segments: Vec::new(),
            provider: provider.to_string(),
            model: r.model,
            input_tokens: r.usage.input_tokens,
            output_tokens: r.usage.output_tokens,
            attempts,
            request_id: r.request_id,
            call_id: call_id.to_string(),
        };
        match r.content {
            MediaContent::Images(images) => {
                data.images = Some(
                    images
                        .into_iter()
                        .map(|image| {
                            let bytes = image.data.map(|d| PyBytes::new(py, &d).unbind());
                            (bytes, image.url, image.media_type, image.revised_prompt)
                        })
                        .collect(),
                );
            }
            MediaContent::Audio {
                data: audio,
                media_type,
            } => {
                data.audio = Some(PyBytes::new(py, &audio).unbind());
                data.media_type = Some(media_type);
            }
            MediaContent::Transcript {
                text,
                language,
                duration,
                segments,
            } => {
                data.text = Some(text);
                data.language = language;
                data.duration = duration;
                data.segments = segments
                    .into_iter()
                    .map(|s| (s.start, s.end, s.text))
                    .collect();
            }
        }
        Ok(data)
    }
}
