//! OpenAI Chat Completions, spoken by OpenAI and the OpenAI-compatible family.
//! The neutral conversation is OpenAI-shaped, so this translation is close
//! to the identity, but it is written out: what is sent is what was checked.

use serde_json::{json, Map, Value};

use super::json::{calls_of, event_json, floats, function_call, stable_digest, string_at, u64_at};
use super::types::{ChatRequest, ChatResponse, EmbedRequest, EmbedResponse, ProviderConfig, Usage};
use super::types::{MediaKind, MediaRequest, MediaResponse};
use super::wire_format::{MediaAnswer, MediaBody, MediaProblem, Parts, WireFormat};
use crate::conversation::{self, Message, Part, ResponseFormat, Role, ToolChoice};
use crate::stream::{Delta, Frame, StreamError};

/// Chat Completions, at the paths the family shares (Azure's are its own:
/// `azure.rs`).
pub struct ChatCompletions;

impl WireFormat for ChatCompletions {
    fn error_usage(&self, json: &Value) -> Option<Usage> {
        json.get("usage")
            .filter(|u| u.is_object())
            .map(usage)
            .filter(Usage::is_known)
    }

    fn build_chat(&self, provider: &ProviderConfig, model: &str, request: &ChatRequest) -> Parts {
        let body = chat_body(provider, model, request);
        ("/chat/completions".into(), body, Vec::new())
    }

    fn ask_to_stream(
        &self,
        provider: &ProviderConfig,
        _path: &mut String,
        body: &mut Map<String, Value>,
    ) {
        ask_to_stream(provider, body);
    }

    fn build_embed(
        &self,
        provider: &ProviderConfig,
        model: &str,
        request: &EmbedRequest,
    ) -> (String, Value) {
        ("/embeddings".into(), embed_body(provider, model, request))
    }

    fn unable(&self, provider: &ProviderConfig, request: &ChatRequest) -> Option<String> {
        unable(provider, request)
    }

    fn parse(&self, json: &Map<String, Value>) -> Result<ChatResponse, String> {
        parse(json)
    }

    fn parse_embed(&self, json: &Map<String, Value>) -> Result<EmbedResponse, String> {
        parse_embed(json)
    }

    fn no_media(&self, _kind: MediaKind) -> Option<&'static str> {
        None
    }

    fn media_unable(
        &self,
        provider: &ProviderConfig,
        model: &str,
        request: &MediaRequest,
    ) -> Option<String> {
        super::openai_media::unable(model, request, provider.mistral_rules)
    }

    fn build_media(
        &self,
        provider: &ProviderConfig,
        model: &str,
        request: &MediaRequest,
    ) -> (String, MediaBody) {
        let (endpoint, body) = super::openai_media::build(provider, model, request);
        (endpoint.to_string(), body)
    }

    fn parse_media(
        &self,
        request: &MediaRequest,
        answer: MediaAnswer<'_>,
    ) -> Result<MediaResponse, MediaProblem> {
        super::openai_media::parse(request, answer)
    }

    fn stream_event(
        &self,
        frame: &Frame,
        out: &mut Vec<Delta>,
        _extras: &mut Map<String, Value>,
    ) -> Result<(), String> {
        stream_event(frame, out)
    }
}

/// A Chat Completions body for `model`.
pub(super) fn chat_body(provider: &ProviderConfig, model: &str, request: &ChatRequest) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = &request.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    if provider.mistral_rules {
        messages.extend(chat_messages(&rewrite_ids(&request.messages, mistral_id)));
    } else if request.messages.iter().any(has_long_id) {
        messages.extend(chat_messages(&rewrite_ids(&request.messages, short_id)));
    } else {
        messages.extend(chat_messages(&request.messages));
    }
    let mut body = Map::new();
    body.insert("model".into(), Value::from(model));
    body.insert("messages".into(), Value::Array(messages));
    if let Some(max) = request.max_tokens {
        body.insert(provider.max_tokens_field.clone(), Value::from(max));
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), Value::from(t));
    }
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": t.fields("parameters")}))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    // A tool_choice without tools is refused by the API.
    if let Some(choice) = request
        .tool_choice
        .as_ref()
        .filter(|_| !request.tools.is_empty())
    {
        let choice = match choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Named(name) => json!({"type": "function", "function": {"name": name}}),
        };
        body.insert("tool_choice".into(), choice);
    }
    if let Some(format) = &request.response_format {
        let format = match format {
            ResponseFormat::JsonObject => json!({"type": "json_object"}),
            ResponseFormat::JsonSchema {
                name,
                description,
                schema,
                strict,
            } => {
                let mut spec = json!({"name": name, "schema": schema});
                if let Some(description) = description {
                    spec["description"] = Value::from(description.as_str());
                }
                if let Some(strict) = strict {
                    spec["strict"] = Value::from(*strict);
                }
                json!({"type": "json_schema", "json_schema": spec})
            }
        };
        body.insert("response_format".into(), format);
    }
    if !request.stop.is_empty() {
        body.insert("stop".into(), json!(request.stop));
    }
    if let Some(top_p) = request.top_p {
        body.insert("top_p".into(), Value::from(top_p));
    }
    if let Some(seed) = request.seed {
        body.insert(provider.seed_field.clone(), Value::from(seed));
    }
    Value::Object(body)
}

/// A chat body asking for a stream, and (where the provider reports it in
/// a stream) for its usage.
pub(super) fn ask_to_stream(provider: &ProviderConfig, body: &mut Map<String, Value>) {
    body.insert("stream".into(), Value::Bool(true));
    if provider.stream_usage {
        // Usage comes in a last chunk only when asked for; `params` may
        // say otherwise (they win, key by key).
        let options = body.entry("stream_options").or_insert_with(|| json!({}));
        if let Value::Object(options) = options {
            options.entry("include_usage").or_insert(Value::Bool(true));
        }
    }
}

/// Why Chat Completions cannot take this call, if it cannot. Mistral
/// refuses a user message right after tool results: one the conversation
/// has, or the one that would carry a tool result's images (see
/// `chat_messages`); and a final assistant message, unless sent as a
/// `prefix`, whose answer then repeats it (Anthropic's continues it).
pub(super) fn unable(provider: &ProviderConfig, request: &ChatRequest) -> Option<String> {
    if !provider.mistral_rules {
        return None;
    }
    if request
        .messages
        .last()
        .is_some_and(|m| m.role == Role::Assistant && m.tool_calls.is_empty())
    {
        return Some("it takes no final assistant message to continue".into());
    }
    let image_in_result = request
        .messages
        .iter()
        .any(|m| m.role == Role::Tool && m.parts.iter().any(|p| matches!(p, Part::Image { .. })));
    let user_after_tool = request
        .messages
        .windows(2)
        .any(|pair| pair[0].role == Role::Tool && pair[1].role == Role::User);
    (image_in_result || user_after_tool).then(|| {
        let why = if image_in_result {
            "a tool result's image would need one"
        } else {
            "the conversation has one"
        };
        format!("it refuses a user message right after tool results, and {why}")
    })
}

/// The longest tool-call id Chat Completions takes (OpenAI refuses more:
/// "string too long", as ids from the Responses API are).
const MAX_ID_LEN: usize = 40;

fn has_long_id(m: &Message) -> bool {
    m.tool_calls.iter().any(|c| c.id.len() > MAX_ID_LEN)
        || m.tool_call_id
            .as_ref()
            .is_some_and(|id| id.len() > MAX_ID_LEN)
}

/// An id Chat Completions takes: as it is, or `call_` and its digest.
fn short_id(id: &str) -> String {
    if id.len() <= MAX_ID_LEN {
        return id.to_string();
    }
    format!("call_{:016x}", stable_digest(id))
}

/// An id as Mistral takes it: 9 letters or digits. An id already so stays;
/// another becomes 9 base-62 digits of its digest.
fn mistral_id(id: &str) -> String {
    if id.len() == 9 && id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return id.to_string();
    }
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let mut n = stable_digest(id);
    (0..9)
        .map(|_| {
            let digit = DIGITS[(n % 62) as usize] as char;
            n /= 62;
            digit
        })
        .collect()
}

/// The conversation with every tool-call id rewritten by `id`, the same way
/// in a call and in its result, so they still pair up.
fn rewrite_ids(messages: &[Message], id: fn(&str) -> String) -> Vec<Message> {
    let mut out = messages.to_vec();
    for m in &mut out {
        for call in &mut m.tool_calls {
            call.id = id(&call.id);
        }
        if let Some(result) = &mut m.tool_call_id {
            *result = id(result);
        }
    }
    out
}

/// The conversation as Chat Completions messages. A `tool` message takes
/// text only there, and a tool that returned an image (a screenshot, a
/// chart) is common in agent loops that fail over from Claude or Gemini:
/// each image stays where it was as a text marker, and the images of a run
/// of tool results follow it in one user message (a user message may not
/// come between the results of one assistant turn): the user message that
/// comes next, when one does, so that roles still alternate for servers
/// whose templates want that.
fn chat_messages(messages: &[Message]) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len());
    let mut moved: Vec<Value> = Vec::new();
    for m in messages {
        if m.role != Role::Tool && !moved.is_empty() {
            let mut parts = std::mem::take(&mut moved);
            if m.role == Role::User {
                let mut next = message(m);
                match next["content"].take() {
                    Value::Array(own) => parts.extend(own),
                    Value::String(text) => parts.push(json!({"type": "text", "text": text})),
                    _ => {}
                }
                next["content"] = Value::Array(parts);
                out.push(next);
                continue;
            }
            out.push(json!({"role": "user", "content": parts}));
        }
        let has_image = m.parts.iter().any(|p| matches!(p, Part::Image { .. }));
        if m.role != Role::Tool || !has_image {
            out.push(message(m));
            continue;
        }
        let id = m.tool_call_id.as_deref().unwrap_or("");
        let mut text = Message {
            parts: Vec::with_capacity(m.parts.len()),
            ..m.clone()
        };
        let mut images = 0;
        for part in &m.parts {
            match part {
                Part::Text(t) => text.parts.push(Part::Text(t.clone())),
                Part::Image { url, detail } => {
                    images += 1;
                    text.parts.push(Part::Text(format!(
                        "[image {images} of this result: in the next user message]"
                    )));
                    if images == 1 {
                        moved.push(json!({"type": "text",
                            "text": format!("The images returned by tool call {id}:")}));
                    }
                    moved.push(image_part(url, detail.as_deref()));
                }
            }
        }
        out.push(message(&text));
    }
    if !moved.is_empty() {
        out.push(json!({"role": "user", "content": moved}));
    }
    out
}

/// An image content part, with its `detail` when the caller gave one.
fn image_part(url: &str, detail: Option<&str>) -> Value {
    let mut image = json!({"url": url});
    if let Some(detail) = detail {
        image["detail"] = Value::from(detail);
    }
    json!({"type": "image_url", "image_url": image})
}

fn message(m: &Message) -> Value {
    let role = match m.role {
        Role::System => "system",
        Role::Developer => "developer",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let mut out = Map::new();
    out.insert("role".into(), Value::from(role));
    let content = match m.parts.as_slice() {
        [] => Value::Null,
        [Part::Text(text)] => Value::from(text.as_str()),
        // A tool result is text only here; some servers of the family take
        // it only as a string.
        parts if m.role == Role::Tool => Value::from(
            parts
                .iter()
                .filter_map(|p| match p {
                    Part::Text(text) => Some(text.as_str()),
                    Part::Image { .. } => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        parts => Value::Array(
            parts
                .iter()
                .map(|p| match p {
                    Part::Text(text) => json!({"type": "text", "text": text}),
                    Part::Image { url, detail } => image_part(url, detail.as_deref()),
                })
                .collect(),
        ),
    };
    out.insert("content".into(), content);
    if !m.tool_calls.is_empty() {
        let calls = m
            .tool_calls
            .iter()
            .map(|c| {
                json!({"id": c.id, "type": "function",
                       "function": {"name": c.name, "arguments": c.arguments_json}})
            })
            .collect();
        out.insert("tool_calls".into(), Value::Array(calls));
    }
    if let Some(id) = &m.tool_call_id {
        out.insert("tool_call_id".into(), Value::from(id.as_str()));
    }
    if let Some(name) = &m.name {
        out.insert("name".into(), Value::from(name.as_str()));
    }
    Value::Object(out)
}

pub(super) fn parse(json: &Map<String, Value>) -> Result<ChatResponse, String> {
    let choice = json
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or("no choices in the response")?;
    let message = match choice.get("message") {
        Some(Value::Object(message)) => message,
        Some(other) => {
            return Err(format!(
                "the first choice's message is not an object: {other}"
            ))
        }
        None => return Err("no message in the first choice".into()),
    };
    let text = match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        // A refusal or a tool call carries no text.
        Some(Value::Null) | None => String::new(),
        // Blocks (Mistral's reasoning models): the text ones are the answer.
        Some(Value::Array(blocks)) => {
            let mut text = String::new();
            for block in blocks {
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => text.push_str(
                        block
                            .get("text")
                            .and_then(Value::as_str)
                            .ok_or("a text block without text")?,
                    ),
                    Some(_) => {} // thinking, references: not the answer
                    None => return Err(format!("a content block without a type: {block}")),
                }
            }
            text
        }
        Some(other) => return Err(format!("message content is not text: {other}")),
    };
    // A refusal is the answer's text (the model's words), and the answer
    // ends as a content filter's.
    let refusal = message
        .get("refusal")
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty() && text.is_empty());
    let refused = refusal.is_some();
    let text = refusal.map_or(text, str::to_string);
    let mut tool_calls = Vec::new();
    for call in calls_of(message)? {
        tool_calls.push(function_call(call, None)?);
    }
    let has_calls = !tool_calls.is_empty();
    // Groq has reported usage under `x_groq` as well as (or instead of) `usage`.
    Ok(ChatResponse {
        text,
        tool_calls,
        provider_data: None,
        model: string_at(json, "model"),
        // A refusal is a content filter's answer, whatever finish_reason
        // says; calls and a "stop" (some servers of the family): the answer
        // is the calls, as in a stream.
        finish_reason: if refused {
            Some("content_filter".to_string())
        } else {
            choice
                .get("finish_reason")
                .and_then(Value::as_str)
                .filter(|r| given_reason(r))
                .map(conversation::finish_reason)
                .map(|reason| match reason.as_str() {
                    "stop" if has_calls => "tool_calls".to_string(),
                    _ => reason,
                })
        },
        usage: answer_usage(json).map(usage).unwrap_or_default(),
        request_id: None,
        raw: String::new(),
        status: 200,
        headers: crate::engine::Headers::new(),
    })
}

/// An error a 2xx answer carries instead of an answer: a top-level
/// `error` (OpenRouter, any wire), an error on the choice (OpenRouter's
/// `finish_reason: "error"`), or DeepSeek's "insufficient_system_resource"
/// finish, a server out of capacity cutting the answer short.
pub(super) fn error_in_answer(json: &Map<String, Value>) -> Option<Value> {
    if let Some(error) = json.get("error").filter(|e| !e.is_null()) {
        return Some(error.clone());
    }
    let choice = json.get("choices")?.get(0)?;
    if let Some(error) = choice.get("error").filter(|e| !e.is_null()) {
        return Some(error.clone());
    }
    match choice.get("finish_reason").and_then(Value::as_str)? {
        "insufficient_system_resource" => Some(json!({
            "code": 503,
            "message": "the server ran out of resources and cut the answer short \
                        (finish_reason insufficient_system_resource)",
        })),
        "error" => Some(json!({"message": "the answer ended in an error (finish_reason error)"})),
        _ => None,
    }
}

/// The usage object of an answer or a chunk: `usage`, or Groq's
/// `x_groq.usage`.
fn answer_usage(json: &Map<String, Value>) -> Option<&Value> {
    json.get("usage")
        .filter(|u| u.is_object())
        .or_else(|| json.get("x_groq")?.get("usage").filter(|u| u.is_object()))
}

/// A Chat Completions usage object, in the one meaning.
fn usage(usage: &Value) -> Usage {
    Usage {
        input_tokens: u64_at(usage, &["prompt_tokens"]),
        output_tokens: output_tokens(usage),
        cache_read_tokens: u64_at(usage, &["prompt_tokens_details", "cached_tokens"])
            // DeepSeek's own name for them.
            .or_else(|| u64_at(usage, &["prompt_cache_hit_tokens"])),
        // OpenRouter reports cache writes here; OpenAI itself does not.
        cache_write_tokens: u64_at(usage, &["prompt_tokens_details", "cache_write_tokens"]),
        reasoning_tokens: u64_at(usage, &["completion_tokens_details", "reasoning_tokens"]),
    }
}

/// One Chat Completions stream event -> its pieces. `[DONE]` ends the
/// stream; an `error` object wins over anything else in the chunk.
pub(super) fn stream_event(frame: &Frame, out: &mut Vec<Delta>) -> Result<(), String> {
    let Frame::Event { data, .. } = frame else {
        return Ok(());
    };
    if data.trim() == "[DONE]" {
        out.push(Delta::End);
        return Ok(());
    }
    let json: Map<String, Value> = event_json(data)?;
    if let Some(error) = error_in_answer(&json) {
        out.push(Delta::Error(StreamError { error }));
        return Ok(());
    }
    if let Some(model) = string_at(&json, "model") {
        out.push(Delta::Model(model));
    }
    let choices = match json.get("choices") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(choices)) => choices.as_slice(),
        Some(other) => return Err(format!("choices that are not a list: {other}")),
    };
    // The first choice only (n > 1 is not a stream failover can join).
    let first = choices
        .iter()
        .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0);
    if let Some(choice) = first {
        let delta = match choice.get("delta") {
            Some(Value::Object(delta)) => Some(delta),
            None | Some(Value::Null) => None,
            Some(other) => return Err(format!("a delta that is not an object: {other}")),
        };
        if let Some(delta) = delta {
            let text = |key: &str| match delta.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(text)) => Ok(Some(text.to_string())),
                Some(other) => Err(format!("a delta whose {key} is not text: {other}")),
            };
            if let Some(Value::Array(blocks)) = delta.get("content") {
                // Blocks (Mistral's reasoning models), as in a whole answer.
                for block in blocks {
                    match block.get("type").and_then(Value::as_str) {
                        Some("text") => out.push(Delta::Text(
                            block
                                .get("text")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .into(),
                        )),
                        Some("thinking") => out.push(Delta::Reasoning(thinking_text(block))),
                        _ => {}
                    }
                }
            } else if let Some(text) = text("content")? {
                out.push(Delta::Text(text));
            }
            if let Some(text) = text("refusal")?.filter(|t| !t.is_empty()) {
                out.push(Delta::Refusal(text));
            }
            // DeepSeek and vLLM say reasoning_content; OpenRouter and Groq reasoning.
            for key in ["reasoning_content", "reasoning"] {
                if let Some(text) = text(key)? {
                    out.push(Delta::Reasoning(text));
                }
            }
            for (position, call) in calls_of(delta)?.iter().enumerate() {
                let index = call
                    .get("index")
                    .and_then(Value::as_u64)
                    .map_or(position, |i| i as usize);
                let function = call.get("function");
                let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
                out.push(Delta::ToolCallPart {
                    index,
                    id: text(call.get("id")).filter(|id| !id.is_empty()),
                    name: text(function.and_then(|f| f.get("name"))).filter(|n| !n.is_empty()),
                    arguments: match function.and_then(|f| f.get("arguments")) {
                        Some(Value::String(text)) => text.clone(),
                        None | Some(Value::Null) => String::new(),
                        Some(other) => other.to_string(),
                    },
                });
            }
        }
        if let Some(reason) = choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .filter(|r| given_reason(r))
        {
            out.push(Delta::Finish(conversation::finish_reason(reason)));
        }
    }
    if let Some(found) = answer_usage(&json) {
        out.push(Delta::Usage(usage(found)));
    }
    Ok(())
}

/// The text of a thinking block: a string, or (Mistral) a list of text
/// blocks.
fn thinking_text(block: &Value) -> String {
    match block.get("thinking") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

/// Whether a `finish_reason` says anything: some servers of the family
/// (SGLang, Ollama's `/v1`, KoboldCpp) send `""` or `"null"` on chunks that
/// end nothing.
fn given_reason(reason: &str) -> bool {
    !reason.is_empty() && reason != "null"
}

/// Every output token, reasoning included. OpenAI counts reasoning inside
/// `completion_tokens`; xAI counts it beside them, which its
/// `total_tokens` shows (prompt + completion + reasoning): then it is added.
fn output_tokens(usage: &Value) -> Option<u64> {
    let completion = u64_at(usage, &["completion_tokens"])?;
    let reasoning = u64_at(usage, &["completion_tokens_details", "reasoning_tokens"]);
    let prompt = u64_at(usage, &["prompt_tokens"]);
    let total = u64_at(usage, &["total_tokens"]);
    match (reasoning, prompt, total) {
        (Some(reasoning), Some(prompt), Some(total))
            if reasoning > 0
                && prompt
                    .checked_add(completion)
                    .and_then(|s| s.checked_add(reasoning))
                    == Some(total) =>
        {
            Some(completion + reasoning)
        }
        _ => Some(completion),
    }
}

/// The embeddings body: `{"model", "input": [...]}`, and the dimensions
/// under the provider's own field name.
pub(super) fn embed_body(provider: &ProviderConfig, model: &str, request: &EmbedRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), Value::from(model));
    body.insert("input".into(), json!(request.inputs));
    if let Some(dimensions) = request.dimensions {
        body.insert(provider.dimensions_field.clone(), Value::from(dimensions));
    }
    // Floats as JSON numbers: every OpenAI-compatible server speaks them,
    // not all of them speak base64 (OpenAI and Azure do).
    let encoding = if provider.embed_base64 {
        "base64"
    } else {
        "float"
    };
    body.insert("encoding_format".into(), Value::from(encoding));
    Value::Object(body)
}

/// `{"data": [{"index", "embedding": [...]}], "model", "usage"}`: vectors
/// put back in input order by their `index`.
pub(super) fn parse_embed(json: &Map<String, Value>) -> Result<EmbedResponse, String> {
    let data = json
        .get("data")
        .and_then(Value::as_array)
        .ok_or("no data in the response")?;
    let mut vectors: Vec<Option<Vec<f64>>> = vec![None; data.len()];
    for (position, item) in data.iter().enumerate() {
        let index = match item.get("index") {
            None => position,
            Some(index) => index
                .as_u64()
                .and_then(|i| usize::try_from(i).ok())
                .filter(|&i| i < data.len())
                .ok_or("an embedding index out of range")?,
        };
        let vector = match item.get("embedding") {
            Some(Value::String(packed)) => base64_floats(packed)?,
            Some(list) => floats(list)?,
            None => return Err("an item without an embedding".into()),
        };
        if vectors[index].replace(vector).is_some() {
            return Err("two embeddings with one index".into());
        }
    }
    let usage = json.get("usage").cloned().unwrap_or(Value::Null);
    Ok(EmbedResponse {
        vectors: vectors.into_iter().map(Option::unwrap_or_default).collect(),
        model: string_at(json, "model"),
        usage: Usage {
            input_tokens: u64_at(&usage, &["prompt_tokens"]),
            ..Usage::default()
        },
        request_id: None,
        status: 200,
        headers: crate::engine::Headers::new(),
    })
}

/// A base64 embedding: little-endian float32 values.
fn base64_floats(packed: &str) -> Result<Vec<f64>, String> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(packed)
        .map_err(|e| format!("an embedding that is not base64: {e}"))?;
    if bytes.len() % 4 != 0 {
        return Err("a base64 embedding that is not whole float32 values".into());
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|b| f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
        .collect())
}

/// What an error body says beyond its message: the upstream provider's own
/// error behind a router (OpenRouter's `metadata.raw`), and which content
/// filters fired (Azure's `content_filter_result`).
pub(super) fn error_detail(json: &Value) -> Option<String> {
    let error = json.get("error")?;
    if let Some(raw) = error.pointer("/metadata/raw").filter(|r| !r.is_null()) {
        let upstream = error
            .pointer("/metadata/provider_name")
            .and_then(Value::as_str)
            .unwrap_or("upstream");
        // The upstream's body: JSON text, or JSON itself, with a message inside.
        let parsed = match raw {
            Value::String(text) => serde_json::from_str::<Value>(text).ok(),
            other => Some(other.clone()),
        };
        let said = parsed
            .map(|v| crate::engine::classify::ErrorBody::from_json(&v))
            .and_then(|b| b.message)
            .unwrap_or_else(|| match raw {
                Value::String(text) => text.chars().take(300).collect(),
                other => other.to_string().chars().take(300).collect(),
            });
        return Some(format!("{upstream} said: {said}"));
    }
    let result = error
        .pointer("/innererror/content_filter_result")
        .or_else(|| error.get("content_filter_result"))?
        .as_object()?;
    let fired: Vec<String> = result
        .iter()
        .filter(|(_, verdict)| {
            verdict.get("filtered") == Some(&Value::Bool(true))
                || verdict.get("detected") == Some(&Value::Bool(true))
        })
        .map(
            |(category, verdict)| match verdict.get("severity").and_then(Value::as_str) {
                Some(severity) => format!("{category} ({severity})"),
                None => category.clone(),
            },
        )
        .collect();
    Some(if fired.is_empty() {
        "content filter".to_string()
    } else {
        format!("content filter: {}", fired.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::super::request::{authorize, build_request};
    use super::super::tests::provider;
    use super::super::types::Wire;
    use super::*;
    use serde_json::json;

    #[test]
    fn request_body_and_auth() {
        let mut p = provider(Wire::OpenAI);
        p.max_tokens_field = "max_completion_tokens".into();
        let req = ChatRequest {
            messages: super::super::tests::messages(json!([{"role": "user", "content": "Hi"}])),
            system: Some("Be brief".into()),
            max_tokens: Some(50),
            temperature: Some(0.2),
            ..ChatRequest::default()
        };
        let r = authorize(&p, &build_request(&p, &req), p.api_key.as_deref());
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(
            body,
            json!({"model": "m-1", "messages": [{"role": "system", "content": "Be brief"}, {"role": "user", "content": "Hi"}],
                   "max_completion_tokens": 50, "temperature": 0.2})
        );
    }

    #[test]
    fn parses_text_usage_and_finish() {
        let body = br#"{"id":"chatcmpl-1","model":"gpt-4.1-nano-2025-04-14","choices":[{"message":{"role":"assistant","content":"4"},"finish_reason":"stop"}],
            "usage":{"prompt_tokens":14,"completion_tokens":8,"prompt_tokens_details":{"cached_tokens":3,"cache_write_tokens":1},"completion_tokens_details":{"reasoning_tokens":2}}}"#;
        let p = provider(Wire::OpenAI);
        let r = super::super::tests::answer(&p, body).unwrap();
        assert_eq!(r.text, "4");
        assert_eq!(r.finish_reason.as_deref(), Some("stop"));
        assert_eq!(r.model.as_deref(), Some("gpt-4.1-nano-2025-04-14"));
        assert_eq!(
            r.request_id, None,
            "the body's id names the completion, not the request"
        );
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: Some(14),
                output_tokens: Some(8),
                cache_read_tokens: Some(3),
                cache_write_tokens: Some(1),
                reasoning_tokens: Some(2)
            }
        );
    }

    #[test]
    fn tools_choices_and_tool_calls() {
        let p = provider(Wire::OpenAI);
        let req = ChatRequest {
            messages: super::super::tests::messages(json!([{"role": "user", "content": "Hi"}])),
            tools: crate::conversation::parse_tools(&[
                json!({"name": "weather", "description": "W"}),
            ])
            .unwrap(),
            tool_choice: Some(crate::conversation::ToolChoice::Named("weather".into())),
            ..ChatRequest::default()
        };
        let body: Value = serde_json::from_slice(&build_request(&p, &req).body).unwrap();
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "function": {"name": "weather", "description": "W",
                    "parameters": {"type": "object", "properties": {}}}}])
        );
        assert_eq!(
            body["tool_choice"],
            json!({"type": "function", "function": {"name": "weather"}})
        );
        let answer = br#"{"model":"gpt-4.1","choices":[{"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
            "tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\": \"Paris\"}"}}]}}]}"#;
        let r = super::super::tests::answer(&p, answer).unwrap();
        assert_eq!(
            (r.text.as_str(), r.finish_reason.as_deref()),
            ("", Some("tool_calls"))
        );
        assert_eq!(r.tool_calls[0].arguments_json, "{\"city\": \"Paris\"}");
    }

    #[test]
    fn reasoning_counted_beside_completion_is_added_to_the_output() {
        let p = provider(Wire::OpenAI);
        let usage = |u: &str| {
            let body = format!(r#"{{"choices":[{{"message":{{"content":"4"}}}}],"usage":{u}}}"#);
            super::super::tests::answer(&p, body.as_bytes())
                .unwrap()
                .usage
        };
        // xAI: total = prompt + completion + reasoning.
        let xai = usage(
            r#"{"prompt_tokens":137,"completion_tokens":1,"total_tokens":254,"completion_tokens_details":{"reasoning_tokens":116}}"#,
        );
        assert_eq!(
            (xai.output_tokens, xai.reasoning_tokens),
            (Some(117), Some(116))
        );
        // OpenAI: reasoning is already inside completion_tokens.
        let openai = usage(
            r#"{"prompt_tokens":10,"completion_tokens":50,"total_tokens":60,"completion_tokens_details":{"reasoning_tokens":40}}"#,
        );
        assert_eq!(
            (openai.output_tokens, openai.reasoning_tokens),
            (Some(50), Some(40))
        );
    }
}
