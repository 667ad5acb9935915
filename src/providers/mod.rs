//! Wire formats: build a request, parse a response, classify an error body.
//! One module per format; nothing here decides about retries.

mod anthropic;
mod gemini;
mod ollama;
mod openai;
mod secrets;
pub mod streaming;

use secrets::MIN_KEY_LEN;
pub use secrets::{
    add_secrets, is_credential_header, redact, redacted_body, secret_values, url_secrets,
};

use serde_json::{Map, Value};

use crate::conversation::{Message, ResponseFormat, Tool, ToolCall, ToolChoice};
use crate::engine::classify::{classify_status, ErrorBody};
use crate::engine::{ErrorKind, Failure, Headers};
use crate::http::{HttpRequest, HttpResponse};

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
}

/// A provider's answer to a [`Job`].
#[derive(Debug)]
pub enum Reply {
    Chat(ChatResponse),
    Embed(EmbedResponse),
    /// A stream whose first content is in hand (boxed: it carries a whole
    /// decoder and accumulator).
    Stream(Box<streaming::StartedStream>),
}

impl crate::engine::Answer for Reply {
    fn status(&self) -> u16 {
        match self {
            Self::Chat(chat) => chat.status,
            Self::Embed(embed) => embed.status,
            Self::Stream(stream) => crate::engine::Answer::status(stream.as_ref()),
        }
    }

    fn exhausted_for(&self, now: std::time::SystemTime) -> Option<std::time::Duration> {
        let headers = match self {
            Self::Chat(chat) => &chat.headers,
            Self::Embed(embed) => &embed.headers,
            Self::Stream(stream) => stream.live.headers(),
        };
        crate::engine::hints::exhausted_reset(headers, now)
    }
}

/// The request for one job to `provider`, without its key.
pub fn build(provider: &ProviderConfig, job: &Job) -> HttpRequest {
    match job {
        Job::Chat(request) => build_request(provider, request),
        Job::Embed(request) => build_embed_request(provider, request),
        Job::Stream(request) => build_stream_request(provider, request),
    }
}

/// Why `provider` cannot do `job`, if it cannot.
pub fn unable_for(provider: &ProviderConfig, job: &Job) -> Option<String> {
    match job {
        Job::Chat(request) | Job::Stream(request) => unable(provider, request),
        Job::Embed(request) => unable_to_embed(provider).or_else(|| {
            let limit = match provider.wire {
                Wire::Gemini => gemini::MAX_EMBED_BATCH,
                _ => return None,
            };
            (request.inputs.len() > limit).then(|| {
                format!(
                    "{} cannot embed {} texts in one call (at most {limit})",
                    provider.name,
                    request.inputs.len()
                )
            })
        }),
    }
}

/// The call's hints `provider` is not sent although its wire has them (a
/// combination it refuses), said for the DEBUG log: `None` when none is
/// dropped. A hint the wire lacks altogether (`seed` on Anthropic) is
/// noted by the Python client when the call is made.
pub fn dropped_hints(provider: &ProviderConfig, job: &Job) -> Option<String> {
    let why = match (provider.wire, job) {
        (Wire::Anthropic, Job::Chat(request) | Job::Stream(request)) => {
            anthropic::refused_with_thinking(request, provider.params.as_ref())
        }
        _ => None,
    }?;
    Some(format!("{}: {why}", provider.name))
}

/// The model `job` asks `provider` for (what an error about it names).
pub fn job_model<'a>(provider: &'a ProviderConfig, job: &'a Job) -> &'a str {
    match job {
        Job::Chat(request) | Job::Stream(request) => {
            request.model.as_deref().unwrap_or(&provider.model)
        }
        Job::Embed(request) => embedding_model(provider, request),
    }
}

/// One attempt at `job`: sends `sent` and reads the answer, whole or (for
/// a stream) up to its first content. Each wait ends after
/// `bounds.timeout`; the whole attempt, whatever arrives before its answer
/// (keep-alives, pings, empty deltas), by `bounds.left`, the deadline.
pub async fn exchange(
    provider: &ProviderConfig,
    job: &Job,
    transport: &crate::http::ReqwestTransport,
    sent: &HttpRequest,
    bounds: crate::engine::AttemptBounds,
) -> Result<Reply, Failure> {
    use crate::http::Transport;
    let attempt = async {
        match job {
            Job::Stream(_) => streaming::start(provider, transport, sent, bounds.timeout)
                .await
                .map(|started| Reply::Stream(Box::new(started))),
            Job::Chat(_) | Job::Embed(_) => {
                let response = transport
                    .send(sent, bounds.timeout)
                    .await
                    .map_err(|failure| name_failure(provider, sent, failure))?;
                match job {
                    Job::Embed(request) => {
                        parse_embed_response(provider, request, sent, response).map(Reply::Embed)
                    }
                    _ => parse_response(provider, sent, response).map(Reply::Chat),
                }
            }
        }
    };
    let Some(left) = bounds.left else {
        return attempt.await;
    };
    let out_of_time = || {
        let what = match job {
            Job::Stream(_) => "the stream did not start",
            Job::Chat(_) | Job::Embed(_) => "no answer came",
        };
        Failure::out_of_time(format!(
            "{}: {what} within the {:.3}s left before the deadline",
            provider.name,
            left.as_secs_f64()
        ))
    };
    if left.is_zero() {
        // Nothing is sent once the time is gone (a key callable used it up):
        // a fast server must not answer a call past its deadline.
        return Err(out_of_time());
    }
    let started = tokio::time::Instant::now();
    match tokio::time::timeout(left, attempt).await {
        // A wait inside the attempt was cut to the time left too, and may
        // end first: the deadline, not the provider, ended it (a connect
        // timeout ends sooner; a 408 has a body).
        Ok(Err(failure))
            if failure.kind == ErrorKind::Timeout
                && failure.body.is_none()
                && started.elapsed() >= left =>
        {
            Err(out_of_time())
        }
        Ok(result) => result,
        Err(_) => Err(out_of_time()),
    }
}

/// The request for one call to `provider`, without its key: built once per
/// call, then [`authorize`]d for each attempt (a key may rotate between them).
pub fn build_request(provider: &ProviderConfig, request: &ChatRequest) -> HttpRequest {
    let (path, mut body, headers) = chat_parts(provider, request);
    if let Value::Object(fields) = &mut body {
        // A stream's options from `params`: refused on a request that
        // does not stream.
        fields.remove("stream_options");
    }
    finish_request(provider, &path, &body, headers, &request.headers)
}

/// The streaming request for one call to `provider`, without its key: the
/// chat request, asking for a stream in the wire's way.
pub fn build_stream_request(provider: &ProviderConfig, request: &ChatRequest) -> HttpRequest {
    let (mut path, mut body, headers) = chat_parts(provider, request);
    if let Value::Object(fields) = &mut body {
        match provider.wire {
            Wire::Gemini => {
                path = path.replace(":generateContent", ":streamGenerateContent?alt=sse");
            }
            _ => {
                fields.insert("stream".into(), Value::Bool(true));
            }
        }
        if matches!(provider.wire, Wire::OpenAI | Wire::Azure) && provider.stream_usage {
            // Usage comes in a last chunk only when asked for; `params` may
            // say otherwise (they win, key by key).
            let options = fields
                .entry("stream_options")
                .or_insert_with(|| serde_json::json!({}));
            if let Value::Object(options) = options {
                options.entry("include_usage").or_insert(Value::Bool(true));
            }
        }
    }
    let mut request = finish_request(provider, &path, &body, headers, &request.headers);
    for (name, value) in &mut request.headers {
        if name.eq_ignore_ascii_case("accept") {
            *value = match provider.wire {
                Wire::Ollama => "application/x-ndjson".into(),
                _ => "text/event-stream".into(),
            };
        }
    }
    request
}

/// A chat request's path, body (with the provider's `params`) and the
/// wire's own headers.
fn chat_parts(
    provider: &ProviderConfig,
    request: &ChatRequest,
) -> (String, Value, Vec<(String, String)>) {
    let model = request.model.as_deref().unwrap_or(&provider.model);
    let (path, mut body, headers) = match provider.wire {
        Wire::OpenAI | Wire::Azure => openai::build(provider, model, request),
        Wire::Anthropic => anthropic::build(model, request, provider.params.as_ref()),
        Wire::Gemini => gemini::build(model, request),
        Wire::Ollama => ollama::build(model, request),
    };
    if let (Some(Value::Object(params)), Value::Object(fields)) = (&provider.params, &mut body) {
        merge_params(fields, params);
        if provider.wire == Wire::Anthropic {
            anthropic::reconcile_thinking(fields, request, provider.params.as_ref());
        }
    }
    (path, body, headers)
}

/// The embeddings request for one call to `provider`, without its key.
/// `params` are not merged: they are chat fields (`reasoning_effort`) an
/// embeddings endpoint would refuse.
pub fn build_embed_request(provider: &ProviderConfig, request: &EmbedRequest) -> HttpRequest {
    let model = embedding_model(provider, request);
    let (path, body) = match provider.wire {
        Wire::Gemini => gemini::build_embed(model, request),
        Wire::Ollama => ollama::build_embed(model, request),
        // Anthropic never gets here: `unable_to_embed` skips it.
        _ => openai::build_embed(provider, model, request),
    };
    finish_request(provider, &path, &body, Vec::new(), &request.headers)
}

/// The model an embeddings call asks `provider` for: the call's, else the
/// provider's embedding model, else its model.
fn embedding_model<'a>(provider: &'a ProviderConfig, request: &'a EmbedRequest) -> &'a str {
    request
        .model
        .as_deref()
        .or(provider.embedding_model.as_deref())
        .unwrap_or(&provider.model)
}

/// Why `provider` cannot embed, if it cannot.
pub fn unable_to_embed(provider: &ProviderConfig) -> Option<String> {
    let why = if provider.wire == Wire::Anthropic {
        "Anthropic has no embeddings API"
    } else if !provider.embeds {
        "it has no embeddings API"
    } else {
        return None;
    };
    Some(format!("{} cannot embed: {why}", provider.name))
}

/// The request every wire sends: its body as JSON, the provider's and the
/// call's headers (credential ones kept apart, to be redacted), the secrets
/// the URL carries.
fn finish_request(
    provider: &ProviderConfig,
    path: &str,
    body: &Value,
    mut headers: Vec<(String, String)>,
    call_headers: &[(String, String)],
) -> HttpRequest {
    headers.push(("content-type".into(), "application/json".into()));
    headers.push(("accept".into(), "application/json".into()));
    let mut secret_headers = Vec::new();
    // A call's header replaces the provider's of the same name: each goes
    // out once.
    for (name, value) in provider.headers.iter().chain(call_headers) {
        let list = if is_credential_header(name) {
            &mut secret_headers
        } else {
            &mut headers
        };
        list.retain(|(n, _): &(String, String)| !n.eq_ignore_ascii_case(name));
        list.push((name.clone(), value.clone()));
    }
    let mut secrets = secret_values(&secret_headers);
    if provider.base_url.contains('@') || provider.base_url.contains('?') {
        // Only a user part or a query can hold a credential (checked only
        // then: parsing the URL for every call would cost more than the rest).
        add_secrets(&mut secrets, &url_secrets(&provider.base_url));
    }
    HttpRequest {
        url: endpoint_url(&provider.base_url, path),
        headers,
        secrets,
        secret_headers,
        body: serde_json::to_vec(body).unwrap_or_default().into(),
    }
}

/// Fields that carry the conversation and the mode: `params` never
/// overrides them.
const PROTECTED_FIELDS: [&str; 6] = [
    "model",
    "messages",
    "contents",
    "system",
    "systemInstruction",
    "stream",
];

/// Deep-merges a provider's `params` into a request body: objects key by
/// key, anything else replaced; the conversation and mode fields kept.
fn merge_params(body: &mut Map<String, Value>, params: &Map<String, Value>) {
    /// `from`'s fields into `into`, objects merged key by key.
    fn merge_fields<'a>(
        into: &mut Map<String, Value>,
        from: impl IntoIterator<Item = (&'a String, &'a Value)>,
    ) {
        for (key, value) in from {
            match (into.get_mut(key), value) {
                (Some(Value::Object(existing)), Value::Object(fields)) => {
                    merge_fields(existing, fields)
                }
                _ => {
                    into.insert(key.clone(), value.clone());
                }
            }
        }
    }
    let allowed = params
        .iter()
        .filter(|(key, _)| !PROTECTED_FIELDS.contains(&key.as_str()));
    merge_fields(body, allowed);
}

/// Why `provider`'s wire cannot express `request` (a feature it lacks), if
/// it cannot: the provider is skipped rather than sent a request it would
/// refuse.
pub fn unable(provider: &ProviderConfig, request: &ChatRequest) -> Option<String> {
    let why = match provider.wire {
        Wire::OpenAI | Wire::Azure => openai::unable(provider, request),
        Wire::Anthropic => anthropic::unable(request, provider.params.as_ref()),
        Wire::Gemini => gemini::unable(request),
        Wire::Ollama => ollama::unable(request),
    }?;
    Some(format!("{} cannot serve this call: {why}", provider.name))
}

/// The header `provider`'s key travels in.
pub fn key_header_name(provider: &ProviderConfig) -> &'static str {
    key_header_for(provider.wire, provider.entra_token)
}

/// The header a key travels in on `wire` (`entra_token`: an Azure key that
/// is an Entra ID token).
pub fn key_header_for(wire: Wire, entra_token: bool) -> &'static str {
    match wire {
        // An Entra ID token (a callable key) is a bearer token; a resource
        // key goes in `api-key`.
        Wire::Azure if !entra_token => "api-key",
        Wire::OpenAI | Wire::Azure | Wire::Ollama => "authorization",
        Wire::Anthropic => "x-api-key",
        Wire::Gemini => "x-goog-api-key",
    }
}

/// Whether the caller set a credential header under the name the key
/// travels in (a gateway's token in `Authorization`): that one is sent,
/// and the key (or its callable) is not needed.
pub fn key_header_given(provider: &ProviderConfig, request: &HttpRequest) -> bool {
    let name = key_header_name(provider);
    request
        .secret_headers
        .iter()
        .any(|(given, _)| given.eq_ignore_ascii_case(name))
}

/// `request` with `key` in the header the wire carries it in.
pub fn authorize(
    provider: &ProviderConfig,
    request: &HttpRequest,
    key: Option<&str>,
) -> HttpRequest {
    let mut request = request.clone();
    if let Some(key) = key {
        if !key_header_given(provider, &request) {
            let name = key_header_name(provider);
            let value = match name {
                "authorization" => format!("Bearer {key}"),
                _ => key.to_string(),
            };
            request.secret_headers.insert(0, (name.to_string(), value));
        }
        // The key itself is searched for down to MIN_KEY_LEN: a key is never
        // an ordinary word, whatever its length.
        if key.len() >= MIN_KEY_LEN {
            add_secrets(&mut request.secrets, &[key.to_string()]);
        }
    }
    request
}

/// `base_url` + `path`, the path going before any query (Azure's
/// `?api-version=...` rides on the base URL).
pub fn endpoint_url(base_url: &str, path: &str) -> String {
    let (base, query) = match base_url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (base_url, None),
    };
    let (path, path_query) = match path.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (path, None),
    };
    let mut url = format!("{}{path}", base.trim_end_matches('/'));
    let queries: Vec<&str> = path_query.into_iter().chain(query).collect();
    if !queries.is_empty() {
        url.push('?');
        url.push_str(&queries.join("&"));
    }
    url
}

/// A response -> the answer, or the failure it describes.
/// `sent` is the request it answers: whatever secret it carried is removed
/// from anything the provider echoes back.
pub fn parse_response(
    provider: &ProviderConfig,
    sent: &HttpRequest,
    response: HttpResponse,
) -> Result<ChatResponse, Failure> {
    let answer = read_answer(provider, sent, response)?;
    let parsed = match provider.wire {
        Wire::OpenAI | Wire::Azure => openai::parse(&answer.json),
        Wire::Anthropic => anthropic::parse(&answer.json),
        Wire::Gemini => gemini::parse(&answer.json),
        Wire::Ollama => ollama::parse(&answer.json),
    };
    let mut chat = match parsed {
        Ok(chat) => chat,
        Err(why) => return Err(malformed(provider, sent, answer, why)),
    };
    let reason = chat.finish_reason.as_deref();
    let has_calls = !chat.tool_calls.is_empty();
    if let Some(why) =
        crate::conversation::abnormal_end_without_content(&chat.text, has_calls, reason)
    {
        let message = format!("{}: {why}", provider.name);
        return Err(answered_failure(sent, answer, message));
    }
    chat.request_id = answer.request_id;
    chat.status = answer.response.status;
    chat.headers = answer.response.headers;
    // from_slice succeeded, so the body is valid UTF-8.
    chat.raw = String::from_utf8(answer.response.body).unwrap_or_default();
    Ok(chat)
}

/// An embeddings response -> the vectors, one per input, or the failure it
/// describes (a count that does not match the inputs is a malformed body).
pub fn parse_embed_response(
    provider: &ProviderConfig,
    request: &EmbedRequest,
    sent: &HttpRequest,
    response: HttpResponse,
) -> Result<EmbedResponse, Failure> {
    let answer = read_answer(provider, sent, response)?;
    let parsed = match provider.wire {
        Wire::Gemini => gemini::parse_embed(&answer.json),
        Wire::Ollama => ollama::parse_embed(&answer.json),
        _ => openai::parse_embed(&answer.json),
    };
    let parsed = parsed.and_then(|embed| {
        let width = embed.vectors.first().map_or(0, Vec::len);
        if embed.vectors.len() != request.inputs.len() {
            Err(format!(
                "{} vectors for {} inputs",
                embed.vectors.len(),
                request.inputs.len()
            ))
        } else if width == 0 || embed.vectors.iter().any(|v| v.len() != width) {
            Err("vectors that are empty or of different lengths".into())
        } else {
            Ok(embed)
        }
    });
    match parsed {
        Ok(mut embed) => {
            if embed.model.is_none() {
                embed.model = Some(embedding_model(provider, request).to_string());
            }
            embed.request_id = answer.request_id;
            embed.status = answer.response.status;
            embed.headers = answer.response.headers;
            Ok(embed)
        }
        Err(why) => Err(malformed(provider, sent, answer, why)),
    }
}

/// A 2xx response read as a JSON object, with its request id.
struct JsonAnswer {
    json: Map<String, Value>,
    request_id: Option<String>,
    response: HttpResponse,
}

/// The JSON object a 2xx response carries, or the failure the response
/// describes: an error status, a body that is not a JSON object, or an
/// error object inside a 2xx (OpenRouter), classified by its `code` as if
/// that were the status.
fn read_answer(
    provider: &ProviderConfig,
    sent: &HttpRequest,
    response: HttpResponse,
) -> Result<JsonAnswer, Failure> {
    let secrets = &sent.secrets;
    // A header value can echo a key too.
    let request_id = request_id(provider.wire, &response.headers).map(|id| redact(&id, secrets));
    if !(200..300).contains(&response.status) {
        return Err(error_failure(provider, secrets, response, request_id));
    }
    let json = match serde_json::from_slice(&response.body) {
        Ok(Value::Object(map)) => map,
        not_an_object => {
            let why = match not_an_object {
                Err(e) => e.to_string(),
                Ok(_) => "expected a JSON object".into(),
            };
            let answer = JsonAnswer {
                json: Map::new(),
                request_id,
                response,
            };
            return Err(malformed(provider, sent, answer, why));
        }
    };
    if let Some(error) = openai::error_in_answer(&json) {
        // An error in a 200: the status the error names (its code, or its
        // type's status: Anthropic's `overloaded_error` is a 529), else a
        // server error; what is classified and quoted is the error object.
        let status = error
            .get("code")
            .and_then(Value::as_u64)
            .and_then(|code| u16::try_from(code).ok())
            .filter(|code| (400..600).contains(code))
            .or_else(|| {
                let kind = error.get("type").and_then(Value::as_str)?;
                streaming::status_of_type(kind)
            })
            .unwrap_or(500);
        let body = match json.get("error") {
            Some(_) => response.body,
            None => serde_json::to_vec(&serde_json::json!({ "error": error })).unwrap_or_default(),
        };
        let response = HttpResponse {
            status,
            body,
            headers: response.headers,
        };
        return Err(error_failure(provider, secrets, response, request_id));
    }
    Ok(JsonAnswer {
        json,
        request_id,
        response,
    })
}

/// A 2xx whose body is not what the wire promises: a server error (another
/// attempt, or another provider, may well answer properly).
fn malformed(
    provider: &ProviderConfig,
    sent: &HttpRequest,
    answer: JsonAnswer,
    why: String,
) -> Failure {
    let message = format!("malformed response body from {}: {why}", provider.name);
    answered_failure(sent, answer, message)
}

/// A 2xx that is no answer, as a server error saying `message`.
fn answered_failure(sent: &HttpRequest, answer: JsonAnswer, message: String) -> Failure {
    let response = answer.response;
    Failure {
        kind: ErrorKind::ServerError,
        status: Some(response.status),
        body: Some(redacted_body(&sent.secrets, &response.body).0),
        headers: response.headers,
        message,
        request_id: answer.request_id,
        out_of_time: false,
        cut_short: false,
    }
}

/// A 64-bit FNV-1a digest of `text`: the same in every process and
/// release, for ids a wire needs rewritten (Anthropic's, Mistral's).
fn stable_digest(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A failure that got no response, in words that name the provider, with
/// whatever secret `sent` carried removed (a proxy may quote its URL).
pub fn name_failure(
    provider: &ProviderConfig,
    sent: &HttpRequest,
    mut failure: Failure,
) -> Failure {
    failure.message = redact(
        &format!("{}: {}", provider.name, failure.message),
        &sent.secrets,
    );
    failure
}

fn request_id(wire: Wire, headers: &Headers) -> Option<String> {
    let name = match wire {
        Wire::Anthropic => "request-id",
        Wire::Azure => "apim-request-id",
        _ => "x-request-id",
    };
    // Mistral's gateway names its ids otherwise.
    headers
        .get(name)
        .or_else(|| headers.get("x-request-id"))
        .or_else(|| headers.get("mistral-correlation-id"))
        .or_else(|| headers.get("x-kong-request-id"))
        .map(str::to_string)
}

fn error_failure(
    provider: &ProviderConfig,
    secrets: &[String],
    response: HttpResponse,
    request_id: Option<String>,
) -> Failure {
    let (text, json) = redacted_body(secrets, &response.body);
    let parsed = json
        .as_ref()
        .map_or_else(|| ErrorBody::from_text(&text), ErrorBody::from_json);
    let kind = classify_status(response.status, &parsed, &provider.overloaded_statuses);
    // Anthropic repeats its request id in error bodies; proxies may strip the header.
    let request_id = request_id.or_else(|| {
        json.as_ref()?
            .get("request_id")?
            .as_str()
            .map(|id| redact(id, secrets))
    });
    let name = &provider.name;
    let status = response.status;
    let hint = match status {
        300..=399 if response.headers.get("location").is_some() => {
            " (a redirect, which failover does not follow: check base_url)"
        }
        // A 407 comes from a proxy, not the provider: every provider behind
        // it would get the same answer.
        407 => " (from a proxy: check proxy= or the HTTPS_PROXY/HTTP_PROXY/ALL_PROXY variables)",
        // A wrong path answers 404 as surely as a wrong model does: a page,
        // or a bare "Not Found" (FastAPI servers, Anthropic's own router).
        404 if json.is_none() || bare_not_found(parsed.message.as_deref()) => match provider.wire {
            Wire::OpenAI | Wire::Anthropic => {
                " (check base_url: it includes the version segment, e.g. .../v1; and the model name)"
            }
            Wire::Gemini => {
                " (check base_url, e.g. https://generativelanguage.googleapis.com/v1beta; \
                 and the model name)"
            }
            Wire::Ollama => {
                " (check base_url: the server's root, e.g. http://localhost:11434; \
                 and that the model is pulled)"
            }
            Wire::Azure => {
                " (check endpoint: the resource URL, https://NAME.openai.azure.com; \
                 and the deployment name)"
            }
        },
        _ => "",
    };
    // A timeout names the host, as one with no response does.
    let timed_out = match kind {
        ErrorKind::Timeout => format!(
            " (a timeout at {})",
            crate::http::host_of(&provider.base_url)
        ),
        _ => String::new(),
    };
    let hint = format!("{hint}{timed_out}");
    // What a wire says beyond its message: the upstream's own error behind
    // a router (OpenRouter), a content filter's verdict (Azure).
    let detail = json.as_ref().and_then(openai::error_detail);
    let message = match (parsed.message, detail) {
        (Some(m), Some(detail)) => format!("{name} returned {status}{hint}: {m} ({detail})"),
        (Some(m), None) => format!("{name} returned {status}{hint}: {m}"),
        (None, Some(detail)) => format!("{name} returned {status}{hint}: {detail}"),
        (None, None) => format!("{name} returned {status}{hint}"),
    };
    Failure {
        kind,
        status: Some(response.status),
        headers: response.headers,
        body: Some(text),
        message,
        request_id,
        out_of_time: false,
        cut_short: false,
    }
}

/// Whether an error message is only a router's "Not Found" (no model named).
fn bare_not_found(message: Option<&str>) -> bool {
    let message = message.unwrap_or("").trim().trim_end_matches('.');
    message.is_empty() || message.eq_ignore_ascii_case("not found")
}

fn u64_at(value: &Value, path: &[&str]) -> Option<u64> {
    path.iter().try_fold(value, |v, key| v.get(key))?.as_u64()
}

/// A tool-call id for a call its wire made without one (Gemini, Ollama):
/// unique, so the history's results pair with their calls on every wire.
fn new_call_id() -> String {
    format!("call_{:016x}", rand::random::<u64>())
}

/// A `{"id"?, "function": {"name", "arguments"}}` tool call, as Chat
/// Completions and Ollama write them; `id` is what to use when it has none
/// (`None`: an id is required).
fn function_call(call: &Value, id: Option<fn() -> String>) -> Result<ToolCall, String> {
    let function = call
        .get("function")
        .ok_or("a tool call without a function")?;
    let given = call
        .get("id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty());
    let id = match (given, id) {
        (Some(id), _) => id.to_string(),
        (None, Some(make)) => make(),
        (None, None) => return Err("a tool call without an id".into()),
    };
    Ok(ToolCall {
        id,
        name: function
            .get("name")
            .and_then(Value::as_str)
            .ok_or("a tool call without a name")?
            .to_string(),
        // As the model wrote them: not always valid JSON (Ollama sends an object).
        arguments_json: match function.get("arguments") {
            Some(Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
            None => "{}".to_string(),
        },
    })
}

/// A stream event's data as a JSON object: anything else is an event that
/// cannot be decoded, a failure of the stream.
fn event_json(data: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_str(data) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("a stream event that is not a JSON object".into()),
        Err(e) => Err(format!("a stream event that is not JSON: {e}")),
    }
}

/// A string field of an answer, owned.
fn string_at(json: &Map<String, Value>, key: &str) -> Option<String> {
    json.get(key).and_then(Value::as_str).map(str::to_string)
}

/// A JSON array of numbers as a vector.
fn floats(value: &Value) -> Result<Vec<f64>, String> {
    let items = value.as_array().ok_or("an embedding that is not a list")?;
    items
        .iter()
        .map(|x| {
            x.as_f64()
                .ok_or_else(|| format!("an embedding value that is not a number: {x}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn response(status: u16, body: &[u8]) -> HttpResponse {
        let mut headers = Headers::new();
        headers.push("x-request-id", "req-1");
        HttpResponse {
            status,
            headers,
            body: body.to_vec(),
        }
    }

    #[test]
    fn malformed_bodies_are_server_errors() {
        let p = provider(Wire::OpenAI);
        for body in [
            &b"{\"choices\": ["[..],
            b"not json",
            b"[]",
            b"\xff\xfe{}",
            b"{}",
            b"{\"choices\":[{\"message\":{\"content\":5}}]}",
        ] {
            let f = parse_response(&p, &sent(&p), response(200, body)).unwrap_err();
            assert_eq!(f.kind, ErrorKind::ServerError, "{body:?}");
            assert!(
                f.message.contains("malformed response body"),
                "{}",
                f.message
            );
        }
    }

    #[test]
    fn error_bodies_are_classified_and_keys_redacted() {
        let p = provider(Wire::OpenAI);
        let f = parse_response(
            &p,
            &sent(&p),
            response(
                401,
                br#"{"error":{"message":"Incorrect API key provided: sk-secret-123"}}"#,
            ),
        )
        .unwrap_err();
        assert_eq!(f.kind, ErrorKind::Auth);
        assert!(
            !f.message.contains("sk-secret-123")
                && !f.body.as_deref().unwrap().contains("sk-secret-123")
        );
        assert_eq!(f.request_id.as_deref(), Some("req-1"));
        let f = parse_response(&p, &sent(&p), response(529, b"")).unwrap_err();
        assert_eq!(
            (f.kind, f.message.as_str()),
            (ErrorKind::Overloaded, "p returned 529")
        );
    }

    #[test]
    fn escaped_and_header_secrets_are_redacted() {
        let mut p = provider(Wire::OpenAI);
        p.api_key = Some("sk-ab/cd+ef-123".into());
        p.headers.push(("api-key".into(), "AZ-SECRET-9999".into()));
        let body = br#"{"error":{"message":"bad key sk-ab\/cd+ef-123 and AZ-SECRET-9999","detail":"sk\u002dab/cd+ef-123"}}"#;
        let f = parse_response(&p, &sent(&p), response(401, body)).unwrap_err();
        for text in [f.message.as_str(), f.body.as_deref().unwrap()] {
            assert!(
                !text.contains("sk-ab") && !text.contains("AZ-SECRET"),
                "{text}"
            );
            assert!(text.contains("<redacted>"), "{text}");
        }
    }

    #[test]
    fn a_redirect_is_a_bad_request_that_names_base_url() {
        let mut r = response(307, b"");
        r.headers
            .push("location", "https://elsewhere.example/v1/chat/completions");
        let p = provider(Wire::OpenAI);
        let f = parse_response(&p, &sent(&p), r).unwrap_err();
        assert_eq!(f.kind, ErrorKind::BadRequest);
        assert!(f.message.contains("check base_url"), "{}", f.message);
    }

    #[test]
    fn url_and_headers() {
        let p = provider(Wire::OpenAI);
        let r = sent(&p);
        assert_eq!(r.url, "http://127.0.0.1:9/v1/chat/completions");
        assert!(r.headers.iter().any(|(n, v)| n == "X-Trace" && v == "t"));
        assert!(r.secret_headers.iter().any(|(n, _)| n == "X-Custom-Key"));
        assert!(r
            .secret_headers
            .iter()
            .any(|(n, v)| n == "authorization" && v == "Bearer sk-secret-123"));
        assert!(!r.headers.iter().any(|(_, v)| v.contains("sk-secret")));
        let dbg = format!("{p:?}");
        assert!(!dbg.contains("sk-secret"), "{dbg}");
    }

    #[test]
    fn the_path_goes_before_the_query() {
        let u = |base: &str| endpoint_url(base, "/chat/completions");
        assert_eq!(
            u("https://r.openai.azure.com/openai/deployments/d?api-version=2024-10-21"),
            "https://r.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-10-21"
        );
        assert_eq!(u("https://h/v1/"), "https://h/v1/chat/completions");
        assert_eq!(
            u("https://h/v1/?a=1&b=2"),
            "https://h/v1/chat/completions?a=1&b=2"
        );
        assert_eq!(
            endpoint_url(
                "https://h/v1beta?x=1",
                "/models/m:streamGenerateContent?alt=sse"
            ),
            "https://h/v1beta/models/m:streamGenerateContent?alt=sse&x=1"
        );
    }

    #[test]
    fn secret_parts_of_credential_headers_are_redacted() {
        let mut p = provider(Wire::OpenAI);
        p.api_key = None;
        p.headers = vec![
            ("Authorization".into(), "Bearer gw-tok-ABC123".into()),
            (
                "Proxy-Authorization".into(),
                "Basic dXNlcjpwYXNzd29yZA==".into(),
            ),
            (
                "Cookie".into(),
                "session=SESSION-XYZ-789; theme=dark".into(),
            ),
            ("X-Short-Key".into(), "abc".into()),
        ];
        let body = br#"{"error":{"message":"token gw-tok-ABC123 refused; auth dXNlcjpwYXNzd29yZA==; cookie SESSION-XYZ-789; theme dark; abc"}}"#;
        let f = parse_response(&p, &sent(&p), response(401, body)).unwrap_err();
        for text in [f.message.as_str(), f.body.as_deref().unwrap()] {
            for secret in ["gw-tok-ABC123", "dXNlcjpwYXNzd29yZA==", "SESSION-XYZ-789"] {
                assert!(!text.contains(secret), "{secret} in {text}");
            }
            // Values under 8 characters are ordinary words: left alone.
            assert!(text.contains("theme dark; abc"), "{text}");
        }
        assert_eq!(
            secret_values(&[("authorization".into(), "Bearer gw-tok-ABC123".into())]),
            vec![
                "Bearer gw-tok-ABC123".to_string(),
                "gw-tok-ABC123".to_string()
            ]
        );
    }

    #[test]
    fn a_short_key_is_still_redacted() {
        let mut p = provider(Wire::Anthropic);
        p.api_key = Some("abc1234".into());
        let body = br#"{"error":{"message":"Incorrect API key provided: abc1234"}}"#;
        let f = parse_response(&p, &sent(&p), response(401, body)).unwrap_err();
        assert!(!f.message.contains("abc1234") && !f.body.unwrap().contains("abc1234"));
    }

    #[test]
    fn a_404_or_407_says_where_to_look() {
        let p = provider(Wire::OpenAI);
        let f = parse_response(
            &p,
            &sent(&p),
            response(404, b"Cannot POST /chat/completions"),
        )
        .unwrap_err();
        assert!(f.message.contains("check base_url"), "{}", f.message);
        let f = parse_response(&p, &sent(&p), response(407, b"")).unwrap_err();
        assert!(f.message.contains("proxy"), "{}", f.message);
    }

    #[test]
    fn params_are_deep_merged_but_never_replace_the_conversation() {
        let mut p = provider(Wire::Anthropic);
        p.params = Some(serde_json::json!({
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "max_tokens": 9000,
            "model": "not-this",
            "messages": [],
            "metadata": {"user_id": "u1"},
        }));
        let mut req = ChatRequest {
            messages: messages(serde_json::json!([{"role": "user", "content": "Hi"}])),
            ..ChatRequest::default()
        };
        req.stop = vec!["END".into()];
        req.seed = Some(7);
        req.top_p = Some(0.97);
        let body: Value = serde_json::from_slice(&build_request(&p, &req).body).unwrap();
        assert_eq!(body["thinking"]["budget_tokens"], 1024);
        assert_eq!(
            body["max_tokens"], 9000,
            "params win over what the library set"
        );
        assert_eq!(body["model"], "m-1");
        assert_eq!(body["messages"][0]["content"], "Hi");
        assert_eq!(body["stop_sequences"], serde_json::json!(["END"]));
        assert_eq!(body["top_p"], 0.97, "thinking takes a top_p from 0.95 to 1");
        assert!(
            body.get("seed").is_none(),
            "Anthropic has no seed: dropped, never renamed"
        );
    }
}
