//! The interface every wire format implements: what differs from one wire
//! to the next, and nothing else. What is common (the URL, headers and
//! secrets of a request, authorisation, reading a status and an error body,
//! a stream's life) is written once, in `request.rs`, `answer.rs` and
//! `streaming.rs`, which ask a wire only what this trait says.

use serde_json::{Map, Value};

use super::types::{
    ChatRequest, ChatResponse, EmbedRequest, EmbedResponse, MediaKind, MediaRequest, MediaResponse,
    ProviderConfig,
};
use crate::http::FormPart;
use crate::stream::{Delta, Frame, Framing, Usage};

/// A chat request's endpoint path, its body, and the wire's own headers.
pub type Parts = (String, Value, Vec<(String, String)>);

/// A media request's body: JSON, or a `multipart/form-data` form.
pub enum MediaBody {
    Json(Value),
    Form(Vec<FormPart>),
}

/// A 2xx answer to a media request, as it came.
pub enum MediaAnswer<'a> {
    /// A JSON object (an error inside it already read as one).
    Json(&'a Map<String, Value>),
    /// Anything else: audio, or a transcript as text.
    Bytes {
        content_type: &'a str,
        body: &'a [u8],
    },
}

/// Why a 2xx media answer gives the caller nothing.
#[derive(Debug, PartialEq)]
pub enum MediaProblem {
    /// Not what the wire promises: a server error (another attempt, or
    /// another provider, may well answer properly).
    Malformed(String),
    /// The provider declined to make it (its safety filters blocked the
    /// prompt or the result): a bad request, as a content-policy 400 is.
    Refused(String),
}

impl MediaProblem {
    /// What is wrong, in words.
    pub fn why(&self) -> &str {
        match self {
            Self::Malformed(why) | Self::Refused(why) => why,
        }
    }
}

impl From<String> for MediaProblem {
    fn from(why: String) -> Self {
        Self::Malformed(why)
    }
}

impl From<&str> for MediaProblem {
    fn from(why: &str) -> Self {
        Self::Malformed(why.to_string())
    }
}

/// One wire format. Each wire module implements it on a unit struct, and
/// `wires::format` is the one place a [`Wire`](super::Wire) finds its
/// module.
pub trait WireFormat: Sync {
    // Requests.

    /// The chat request for `model`: path, body (before the provider's
    /// `params` are merged in) and the wire's own headers.
    fn build_chat(&self, provider: &ProviderConfig, model: &str, request: &ChatRequest) -> Parts;

    /// Mends a chat body after the provider's `params` were merged into it
    /// (a combination the wire refuses that `params` brought back).
    fn after_params(
        &self,
        _provider: &ProviderConfig,
        _request: &ChatRequest,
        _body: &mut Map<String, Value>,
    ) {
    }

    /// Turns a chat request into a streaming one: `"stream": true`, unless
    /// the wire asks otherwise (another path).
    fn ask_to_stream(
        &self,
        _provider: &ProviderConfig,
        _path: &mut String,
        body: &mut Map<String, Value>,
    ) {
        body.insert("stream".into(), Value::Bool(true));
    }

    /// Why the wire has no embeddings API, if it has none: every
    /// embeddings call skips it, so `build_embed` and `parse_embed` are
    /// never asked.
    /// The most a chat request asks the model to write, as sent (a wire
    /// that always sends one fills in its default): what a `tpm` limit
    /// charges for the answer before it is known.
    fn max_tokens_sent(&self, _provider: &ProviderConfig, request: &ChatRequest) -> Option<u64> {
        request.max_tokens
    }

    fn no_embeddings(&self) -> Option<&'static str> {
        None
    }

    /// The most texts one embeddings call takes, where the wire has a limit.
    fn max_embed_batch(&self) -> Option<usize> {
        None
    }

    /// The embeddings request for `model`: path and body.
    fn build_embed(
        &self,
        provider: &ProviderConfig,
        model: &str,
        request: &EmbedRequest,
    ) -> (String, Value);

    /// Why the wire cannot express `request` (a feature it lacks), if it
    /// cannot.
    fn unable(&self, _provider: &ProviderConfig, _request: &ChatRequest) -> Option<String> {
        None
    }

    /// The hints of `request` the wire has but is not sent (a combination
    /// it refuses), in words for the DEBUG log.
    fn dropped_hints(&self, _provider: &ProviderConfig, _request: &ChatRequest) -> Option<String> {
        None
    }

    /// The header a key travels in (`entra_token`: an Azure key that is an
    /// Entra ID token). `authorization` carries it as a bearer token.
    fn key_header(&self, _entra_token: bool) -> &'static str {
        "authorization"
    }

    /// Why the wire has no API for `kind` calls, if it has none: every such
    /// call skips it, so `build_media` and `parse_media` are never asked.
    fn no_media(&self, _kind: MediaKind) -> Option<&'static str> {
        Some("its API has none")
    }

    /// Why the wire cannot take `request` for `model` (a limit its API
    /// documents), if it cannot: it is refused before anything is sent.
    fn media_unable(
        &self,
        _provider: &ProviderConfig,
        _model: &str,
        _request: &MediaRequest,
    ) -> Option<String> {
        None
    }

    /// The media request for `model`: path and body.
    fn build_media(
        &self,
        _provider: &ProviderConfig,
        _model: &str,
        _request: &MediaRequest,
    ) -> (String, MediaBody) {
        (String::new(), MediaBody::Json(Value::Null))
    }

    /// Whether a speech answer's body is the audio itself, which a speech
    /// stream hands on as it arrives; else it is read whole (Gemini's audio
    /// comes inside JSON).
    fn streams_audio_bytes(&self) -> bool {
        true
    }

    /// A 2xx media answer -> its content (status, headers and request id
    /// are filled in by the caller).
    fn parse_media(
        &self,
        _request: &MediaRequest,
        _answer: MediaAnswer<'_>,
    ) -> Result<MediaResponse, MediaProblem> {
        Err("the wire has no media API".into())
    }

    // Answers.

    /// A 2xx chat answer's JSON -> the answer (its status, headers, request
    /// id and raw body are filled in by the caller).
    fn parse(&self, json: &Map<String, Value>) -> Result<ChatResponse, String>;

    /// A 2xx embeddings answer's JSON -> the vectors.
    fn parse_embed(&self, json: &Map<String, Value>) -> Result<EmbedResponse, String>;

    /// The usage an error body reports, if it carries any (it then says the
    /// provider generated, and may bill, before it failed).
    fn error_usage(&self, _json: &Value) -> Option<Usage> {
        None
    }

    /// The response header that names the request (others are tried after
    /// it: a gateway may name it otherwise).
    fn request_id_header(&self) -> &'static str {
        "x-request-id"
    }

    /// What a 404 that names no model suggests checking: by default, a
    /// base URL that includes the wire's version segment.
    fn not_found_hint(&self) -> &'static str {
        " (check base_url: it includes the version segment, e.g. .../v1; and the model name)"
    }

    // Streams.

    /// How the wire frames a stream.
    fn framing(&self) -> Framing {
        Framing::Sse
    }

    /// One stream frame -> its pieces, in order; `extras` is what the wire
    /// gathers across frames for `provider_data`.
    fn stream_event(
        &self,
        frame: &Frame,
        out: &mut Vec<Delta>,
        extras: &mut Map<String, Value>,
    ) -> Result<(), String>;

    /// A streamed answer's `provider_data`, from what `stream_event` gathered.
    fn stream_provider_data(&self, _extras: &Map<String, Value>) -> Option<Value> {
        None
    }
}
