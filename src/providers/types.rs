//! The values a call is made of, on every wire: the configured provider,
//! its wire, the neutral requests and answers, and the job one call asks.

use serde_json::Value;

use crate::conversation::{Message, ResponseFormat, Tool, ToolCall, ToolChoice};
use crate::engine::Headers;

/// A wire format, by name; what it speaks is its module's
/// [`WireFormat`](super::WireFormat), found by `wires::format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    /// Chat Completions: OpenAI and the OpenAI-compatible family.
    OpenAI,
    /// Anthropic Messages.
    Anthropic,
    /// Gemini's native `generateContent`.
    Gemini,
    /// Ollama's native `/api/chat` and `/api/embed`.
    Ollama,
    /// Azure OpenAI: Chat Completions with the key in `api-key`.
    Azure,
}

impl Wire {
    /// The wire a provider's `wire` option names.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "openai" => Some(Self::OpenAI),
            "anthropic" => Some(Self::Anthropic),
            "gemini" => Some(Self::Gemini),
            "ollama" => Some(Self::Ollama),
            "azure" => Some(Self::Azure),
            _ => None,
        }
    }
}

/// One configured provider.
#[derive(Clone)]
pub struct ProviderConfig {
    pub name: String,
    pub wire: Wire,
    pub model: String,
    /// Includes the version segment: `https://api.openai.com/v1`.
    pub base_url: String,
    pub api_key: Option<String>,
    pub headers: Vec<(String, String)>,
    pub overloaded_statuses: Vec<u16>,
    /// `max_completion_tokens` for OpenAI itself, `max_tokens` for the rest.
    pub max_tokens_field: String,
    /// Body fields merged into every request to this provider (a JSON
    /// object), for what the neutral form lacks: `reasoning_effort`,
    /// Anthropic's `thinking`.
    pub params: Option<Value>,
    /// The model `embed()` asks for, when it is not `model`.
    pub embedding_model: Option<String>,
    /// Whether this provider has an embeddings endpoint (a preset of the
    /// OpenAI-compatible family may not, whatever its wire).
    pub embeds: bool,
    /// The body field that carries `dimensions` on this provider's
    /// embeddings endpoint (Mistral's `output_dimension`).
    pub dimensions_field: String,
    /// Ask for embeddings as base64 float32 (a quarter of the bytes, and no
    /// decimal parsing); only where the server is known to speak it.
    pub embed_base64: bool,
    /// Ask a Chat Completions stream for its usage
    /// (`stream_options.include_usage`); Mistral refuses the field.
    pub stream_usage: bool,
    /// Azure: the key is an Entra ID token (sent as a bearer token), not
    /// the resource's `api-key`.
    pub entra_token: bool,
    /// The body field that carries `seed` (Mistral's `random_seed`).
    pub seed_field: String,
    /// Mistral's rules for a conversation: tool-call ids of 9 letters or
    /// digits (others' are rewritten, the same way in a call and its
    /// result); no user message right after tool results and no final
    /// assistant message to continue (the provider is skipped).
    pub mistral_rules: bool,
    /// The models image, speech and transcription calls ask for, when not
    /// `model`.
    pub image_model: Option<String>,
    pub speech_model: Option<String>,
    pub transcription_model: Option<String>,
    /// Which of those call types this provider has an API for (a preset
    /// of the OpenAI-compatible family may lack some, whatever its wire).
    pub media: Vec<MediaKind>,
}

impl std::fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("name", &self.name)
            .field("wire", &self.wire)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// One chat call, independent of the wire format.
#[derive(Clone, Debug, Default)]
pub struct ChatRequest {
    /// The conversation, read and checked.
    pub messages: Vec<Message>,
    /// Tools the model may call, and how it must choose.
    pub tools: Vec<Tool>,
    pub tool_choice: Option<ToolChoice>,
    pub response_format: Option<ResponseFormat>,
    /// Sequences that end the answer.
    pub stop: Vec<String>,
    /// Sampling hints a wire may lack (then dropped, never renamed).
    pub top_p: Option<f64>,
    pub seed: Option<i64>,
    /// Extra request headers for this call.
    pub headers: Vec<(String, String)>,
    pub system: Option<String>,
    pub max_tokens: Option<u64>,
    pub temperature: Option<f64>,
    /// Overrides the provider's model for this call.
    pub model: Option<String>,
}

pub use crate::stream::Usage;

#[derive(Clone, Debug, PartialEq)]
pub struct ChatResponse {
    pub text: String,
    /// The calls the model made, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Opaque extras the same wire needs back in the history (see
    /// [`Message::provider_data`]).
    pub provider_data: Option<Value>,
    pub model: Option<String>,
    pub finish_reason: Option<String>,
    pub usage: Usage,
    pub request_id: Option<String>,
    /// The response body as received (valid UTF-8 JSON).
    pub raw: String,
    pub status: u16,
    /// The response headers (rate-limit headroom is read from them).
    pub headers: Headers,
}

impl crate::engine::Answer for ChatResponse {
    fn status(&self) -> u16 {
        self.status
    }
}

/// One embeddings call, independent of the wire format.
#[derive(Clone, Debug, Default)]
pub struct EmbedRequest {
    /// The texts, one vector each, in order.
    pub inputs: Vec<String>,
    /// The length of each vector, where the model can shorten them.
    pub dimensions: Option<u64>,
    /// Overrides the provider's embedding model for this call.
    pub model: Option<String>,
    /// Extra request headers for this call.
    pub headers: Vec<(String, String)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct EmbedResponse {
    /// One vector per input, in input order.
    pub vectors: Vec<Vec<f64>>,
    pub model: Option<String>,
    pub usage: Usage,
    pub request_id: Option<String>,
    pub status: u16,
    pub headers: Headers,
}

/// What one call asks of a provider.
// One per call, never in a collection: its size costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum Job {
    Chat(ChatRequest),
    Embed(EmbedRequest),
    /// A chat answer read as it streams.
    Stream(ChatRequest),
    /// An image, speech or transcription call.
    Media(MediaRequest),
    /// Speech read as it streams (the bytes as they arrive).
    MediaStream(MediaRequest),
}

/// The model `job` asks `provider` for (what an error about it names).
pub fn job_model<'a>(provider: &'a ProviderConfig, job: &'a Job) -> &'a str {
    match job {
        Job::Chat(request) | Job::Stream(request) => {
            request.model.as_deref().unwrap_or(&provider.model)
        }
        Job::Embed(request) => embedding_model(provider, request),
        Job::Media(request) | Job::MediaStream(request) => media_model(provider, request),
    }
}

/// The model an embeddings call asks `provider` for: the call's, else the
/// provider's embedding model, else its model.
pub(super) fn embedding_model<'a>(
    provider: &'a ProviderConfig,
    request: &'a EmbedRequest,
) -> &'a str {
    request
        .model
        .as_deref()
        .or(provider.embedding_model.as_deref())
        .unwrap_or(&provider.model)
}

/// What an image, speech or transcription call asks for.
#[derive(Clone, Debug)]
pub enum Media {
    /// Images from a prompt.
    Image {
        prompt: String,
        /// `WIDTHxHEIGHT` (or `auto`), as the provider names sizes.
        size: Option<String>,
        n: u32,
        quality: Option<String>,
        /// Ask for URLs (the caller fetches them) instead of the bytes.
        urls: bool,
    },
    /// Speech of a text.
    Speech {
        text: String,
        voice: Voice,
        /// `mp3`, `wav`, `opus`, `aac`, `flac` or `pcm`.
        format: String,
        speed: Option<f64>,
        instructions: Option<String>,
    },
    /// The text of a recording.
    Transcription {
        /// The recording, read once (resent from memory on a retry).
        audio: bytes::Bytes,
        /// With an extension: servers tell the format by it.
        filename: String,
        language: Option<String>,
        prompt: Option<String>,
        /// `json`, `text`, `verbose_json`, `srt` or `vtt`.
        response_format: String,
    },
}

/// The voice a speech call asks for. Voices are each provider's own names
/// (OpenAI's `alloy`, Gemini's `Kore`): a chain of both names one for each.
#[derive(Clone, Debug)]
pub enum Voice {
    /// The same name to every provider.
    Every(String),
    /// Each provider's, by its name; a provider without one cannot speak
    /// this call (it is skipped, and says why).
    ByProvider(Vec<(String, String)>),
}

impl Voice {
    /// The voice `provider` is asked for, if the call names one for it.
    pub fn for_provider(&self, provider: &str) -> Option<&str> {
        match self {
            Self::Every(voice) => Some(voice),
            Self::ByProvider(voices) => voices
                .iter()
                .find(|(name, _)| name == provider)
                .map(|(_, voice)| voice.as_str()),
        }
    }
}

/// The kind of a [`Media`] call, for what differs by kind only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MediaKind {
    Image,
    Speech,
    Transcription,
}

impl MediaKind {
    /// What a provider that cannot make the call cannot do, in words.
    pub fn verb(self) -> &'static str {
        match self {
            Self::Image => "generate images",
            Self::Speech => "speak",
            Self::Transcription => "transcribe",
        }
    }

    /// The provider option that names its model.
    pub fn model_option(self) -> &'static str {
        match self {
            Self::Image => "image_model",
            Self::Speech => "speech_model",
            Self::Transcription => "transcription_model",
        }
    }

    /// The suffix of its state key: its cooldowns are its own (an images
    /// 404 never stops chat).
    pub fn state_suffix(self) -> &'static str {
        match self {
            Self::Image => ":images",
            Self::Speech => ":speech",
            Self::Transcription => ":transcription",
        }
    }
}

/// One image, speech or transcription call, independent of the wire.
#[derive(Clone, Debug)]
pub struct MediaRequest {
    pub media: Media,
    /// Overrides the provider's model for this kind of call.
    pub model: Option<String>,
    /// Extra request headers for this call.
    pub headers: Vec<(String, String)>,
}

impl MediaRequest {
    pub fn kind(&self) -> MediaKind {
        match self.media {
            Media::Image { .. } => MediaKind::Image,
            Media::Speech { .. } => MediaKind::Speech,
            Media::Transcription { .. } => MediaKind::Transcription,
        }
    }
}

/// One generated image.
#[derive(Clone, Debug, PartialEq)]
pub struct GeneratedImage {
    /// The bytes, unless only a URL was asked for (or given).
    pub data: Option<Vec<u8>>,
    pub url: Option<String>,
    pub media_type: Option<String>,
    pub revised_prompt: Option<String>,
}

/// A piece of a transcript with its time span, in seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Segment {
    pub start: f64,
    pub end: f64,
    pub text: String,
}

/// What a media call answered.
#[derive(Clone, Debug, PartialEq)]
pub enum MediaContent {
    Images(Vec<GeneratedImage>),
    Audio {
        data: Vec<u8>,
        media_type: String,
    },
    Transcript {
        text: String,
        language: Option<String>,
        /// Seconds of audio.
        duration: Option<f64>,
        segments: Vec<Segment>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct MediaResponse {
    pub content: MediaContent,
    pub model: Option<String>,
    pub usage: Usage,
    pub request_id: Option<String>,
    pub status: u16,
    pub headers: Headers,
}

/// The model a media call asks `provider` for: the call's, else the
/// provider's model for the kind, else its model.
pub(crate) fn media_model<'a>(provider: &'a ProviderConfig, request: &'a MediaRequest) -> &'a str {
    let own = match request.kind() {
        MediaKind::Image => &provider.image_model,
        MediaKind::Speech => &provider.speech_model,
        MediaKind::Transcription => &provider.transcription_model,
    };
    request
        .model
        .as_deref()
        .or(own.as_deref())
        .unwrap_or(&provider.model)
}
