//! What the tests of every wire share: a provider, a conversation, the
//! request it sends and its answer read.

use serde_json::Value;

use super::answer::parse_response;
use super::request::{authorize, build_request};
use super::types::{ChatRequest, ChatResponse, ProviderConfig, Wire};
use crate::conversation::Message;
use crate::engine::{Failure, Headers};
use crate::http::{HttpRequest, HttpResponse};

/// A provider on `wire` with a key and two headers (one a credential by
/// its name), `params` and the rest as most presets leave them.
pub(super) fn provider(wire: Wire) -> ProviderConfig {
    ProviderConfig {
        name: "p".into(),
        wire,
        model: "m-1".into(),
        base_url: "http://127.0.0.1:9/v1/".into(),
        api_key: Some("sk-secret-123".into()),
        headers: vec![
            ("X-Trace".into(), "t".into()),
            ("X-Custom-Key".into(), "k".into()),
        ],
        overloaded_statuses: vec![503, 529],
        max_tokens_field: "max_tokens".into(),
        params: None,
        embedding_model: None,
        embeds: true,
        dimensions_field: "dimensions".into(),
        embed_base64: false,
        stream_usage: true,
        entra_token: false,
        seed_field: "seed".into(),
        mistral_rules: false,
        image_model: None,
        speech_model: None,
        transcription_model: None,
        media: Vec::new(),
    }
}

/// A conversation from OpenAI-style JSON, read as the bindings read it.
pub(crate) fn messages(json: Value) -> Vec<Message> {
    crate::conversation::parse_messages(json.as_array().unwrap()).unwrap()
}

/// The request `p` sends, with its key.
pub(super) fn sent(p: &ProviderConfig) -> HttpRequest {
    authorize(
        p,
        &build_request(p, &ChatRequest::default()),
        p.api_key.as_deref(),
    )
}

/// `p`'s parse of a 200 with `body`, as an answer to its usual request.
pub(super) fn answer(p: &ProviderConfig, body: &[u8]) -> Result<ChatResponse, Failure> {
    let response = HttpResponse {
        status: 200,
        headers: Headers::new(),
        body: body.to_vec(),
    };
    parse_response(p, &sent(p), response)
}
