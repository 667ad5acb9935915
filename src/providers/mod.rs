//! Wire formats: build a request, parse a response, classify an error body.
//! One module per format, each a [`WireFormat`], found by its [`Wire`] in
//! [`format()`] (`wires.rs`); what every wire shares is written once, by job.
//! Nothing here decides about retries.

mod answer;
mod anthropic;
mod azure;
mod exchange;
mod gemini;
mod json;
mod media;
mod ollama;
mod openai;
mod openai_media;
mod request;
mod secrets;
#[cfg(test)]
mod secrets_props;
pub mod streaming;
#[cfg(test)]
mod tests;
mod types;
mod wire_format;
#[cfg(test)]
mod wire_props;
mod wires;

pub use answer::{name_failure, parse_embed_response, parse_response};
pub use exchange::{exchange, Reply};
pub use media::{build_media_request, parse_media_response, unable_media};
pub use request::{
    authorize, build, build_embed_request, build_request, build_stream_request, config_secrets,
    dropped_hints, endpoint_url, estimated_tokens, key_header_for, key_header_given,
    key_header_name, unable, unable_for, unable_to_embed,
};
pub use secrets::{
    add_secrets, is_credential_header, merge_secrets, redact, redacted_body, secret_values,
    url_secrets,
};
pub use types::{
    job_model, ChatRequest, ChatResponse, EmbedRequest, EmbedResponse, GeneratedImage, Job, Media,
    MediaContent, MediaKind, MediaRequest, MediaResponse, ProviderConfig, Segment, Usage, Voice,
    Wire,
};
pub use wire_format::WireFormat;
pub use wires::format;
