//! Anthropic Messages.

use serde_json::{json, Map, Value};

use super::json::{event_json, stable_digest, string_at, u64_at};
use super::types::{ChatRequest, ChatResponse, EmbedRequest, EmbedResponse, ProviderConfig, Usage};
use super::wire_format::{Parts, WireFormat};
use crate::conversation::{
    self, data_url, Message, Part, ResponseFormat, Role, ToolCall, ToolChoice,
};
use crate::stream::{Delta, Frame, StreamError};

/// Messages, at `/messages`, the key in `x-api-key`.
pub struct Messages;

/// Why every embeddings call skips Anthropic.
const NO_EMBEDDINGS: &str = "Anthropic has no embeddings API";

impl WireFormat for Messages {
    fn max_tokens_sent(&self, provider: &ProviderConfig, request: &ChatRequest) -> Option<u64> {
        Some(max_tokens_sent(provider.params.as_ref(), request))
    }

    fn error_usage(&self, json: &Value) -> Option<Usage> {
        json.get("usage")
            .filter(|u| u.is_object())
            .map(usage_of)
            .filter(Usage::is_known)
    }

    fn build_chat(&self, provider: &ProviderConfig, model: &str, request: &ChatRequest) -> Parts {
        build(model, request, provider.params.as_ref())
    }

    fn after_params(
        &self,
        provider: &ProviderConfig,
        request: &ChatRequest,
        body: &mut Map<String, Value>,
    ) {
        reconcile_thinking(body, request, provider.params.as_ref());
    }

    fn no_embeddings(&self) -> Option<&'static str> {
        Some(NO_EMBEDDINGS)
    }

    // Never asked (see `no_embeddings`): an empty request, and no answer.
    fn build_embed(&self, _: &ProviderConfig, _: &str, _: &EmbedRequest) -> (String, Value) {
        (String::new(), Value::Null)
    }

    fn parse_embed(&self, _json: &Map<String, Value>) -> Result<EmbedResponse, String> {
        Err(NO_EMBEDDINGS.into())
    }

    fn unable(&self, provider: &ProviderConfig, request: &ChatRequest) -> Option<String> {
        unable(request, provider.params.as_ref())
    }

    fn dropped_hints(&self, provider: &ProviderConfig, request: &ChatRequest) -> Option<String> {
        // A hint Anthropic lacks is dropped, never sent under another name.
        let seed = request
            .seed
            .map(|seed| format!("seed={seed} not sent: the Anthropic API has no seed"));
        let notes: Vec<String> = unsent_sampling_hints(request, provider.params.as_ref())
            .into_iter()
            .chain(seed)
            .collect();
        (!notes.is_empty()).then(|| notes.join("; "))
    }

    fn key_header(&self, _entra_token: bool) -> &'static str {
        "x-api-key"
    }

    fn parse(&self, json: &Map<String, Value>) -> Result<ChatResponse, String> {
        parse(json)
    }

    fn request_id_header(&self) -> &'static str {
        "request-id"
    }

    fn stream_event(
        &self,
        frame: &Frame,
        out: &mut Vec<Delta>,
        extras: &mut Map<String, Value>,
    ) -> Result<(), String> {
        stream_event(frame, out, extras)
    }

    fn stream_provider_data(&self, extras: &Map<String, Value>) -> Option<Value> {
        stream_provider_data(extras)
    }
}

/// Anthropic requires `max_tokens`; this is used when the caller gives none.
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The `max_tokens` a request is sent with: the caller's, else the usual
/// room plus any thinking budget (Anthropic takes no `max_tokens` at or
/// below the budget).
fn max_tokens_sent(params: Option<&Value>, request: &ChatRequest) -> u64 {
    let budget = thinking_budget(params, request).unwrap_or(0);
    request
        .max_tokens
        .unwrap_or(DEFAULT_MAX_TOKENS.saturating_add(budget))
}
pub const API_VERSION: &str = "2023-06-01";

/// `params`: the provider's, where thinking may be turned on (see [`thinking`]).
fn build(model: &str, request: &ChatRequest, params: Option<&Value>) -> Parts {
    // System prompts travel beside the messages, not among them.
    let mut system: Vec<String> = request.system.iter().cloned().collect();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::with_capacity(request.messages.len());
    for m in &request.messages {
        let (role, blocks) = match m.role {
            Role::System | Role::Developer => {
                system.push(m.text());
                continue;
            }
            Role::User => ("user", parts(&m.parts)),
            Role::Assistant => {
                // Signed thinking blocks go back first, as Anthropic wrote them.
                let mut blocks: Vec<Value> = m
                    .provider_data
                    .as_ref()
                    .and_then(|d| d.pointer("/anthropic/blocks"))
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                blocks.extend(parts(&m.parts));
                blocks.extend(m.tool_calls.iter().map(|c| {
                    let input = c.arguments_value();
                    json!({"type": "tool_use", "id": tool_id(&c.id), "name": c.name, "input": input})
                }));
                ("assistant", blocks)
            }
            Role::Tool => {
                let id = tool_id(m.tool_call_id.as_deref().unwrap_or(""));
                let mut result = json!({"type": "tool_result", "tool_use_id": id});
                if m.is_error {
                    result["is_error"] = Value::Bool(true);
                }
                // A command with no output is a result without content: an
                // empty text block is refused.
                let content = parts(&m.parts);
                if !content.is_empty() {
                    result["content"] = Value::Array(content);
                }
                ("user", vec![result])
            }
        };
        if blocks.is_empty() {
            continue; // an empty turn is refused (an empty answer sent back)
        }
        // Anthropic needs the roles to alternate: consecutive tool results
        // and a user message after them share one user turn.
        match turns.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    // A final assistant turn is a prefill, which may not end in whitespace.
    if let Some(("assistant", blocks)) = turns.last_mut() {
        if let Some(text) = blocks
            .last_mut()
            .filter(|b| b["type"] == "text")
            .and_then(|b| b.get_mut("text"))
        {
            *text = Value::from(text.as_str().unwrap_or("").trim_end());
        }
    }
    // Anthropic refuses tool_use/tool_result blocks in a request without
    // tools (a closing summary call): declare the tools the history used,
    // and forbid calling them.
    let history_tools: Vec<&str> = request
        .messages
        .iter()
        .flat_map(|m| m.tool_calls.iter().map(|c| c.name.as_str()))
        .collect();
    let stub_tools = request.tools.is_empty() && !history_tools.is_empty();
    let messages = turns
        .into_iter()
        .map(|(role, content)| match content.as_slice() {
            // One text block travels as plain text, as most callers write it.
            [block] if block["type"] == "text" => {
                json!({"role": role, "content": block["text"]})
            }
            _ => json!({"role": role, "content": content}),
        })
        .collect();
    let thinking = thinking(params, request);
    // Anthropic takes no `max_tokens` at or below a thinking budget: when
    // the caller names none, the budget comes on top of the usual room (one
    // named at or below it skips Anthropic, see [`unable`]).
    let mut body = Map::new();
    body.insert("model".into(), Value::from(model));
    body.insert(
        "max_tokens".into(),
        Value::from(max_tokens_sent(params, request)),
    );
    // Whitespace-only system text is refused there, as any text block is.
    system.retain(|s| !s.trim().is_empty());
    if !system.is_empty() {
        body.insert("system".into(), Value::from(system.join("\n\n")));
    }
    body.insert("messages".into(), Value::Array(messages));
    let hints = sampling_hints(request, thinking);
    if let Some(t) = hints.temperature {
        body.insert("temperature".into(), Value::from(t));
    }
    if stub_tools {
        let mut names: Vec<&str> = history_tools.clone();
        names.sort_unstable();
        names.dedup();
        let tools: Vec<Value> = names
            .iter()
            .map(|n| json!({"name": n, "input_schema": {"type": "object"}}))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        body.insert("tool_choice".into(), json!({"type": "none"}));
    }
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|t| Value::Object(t.fields("input_schema")))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(choice) = request
        .tool_choice
        .as_ref()
        .filter(|_| !request.tools.is_empty())
    {
        let choice = match choice {
            ToolChoice::Auto => json!({"type": "auto"}),
            ToolChoice::None => json!({"type": "none"}),
            ToolChoice::Required => json!({"type": "any"}),
            ToolChoice::Named(name) => json!({"type": "tool", "name": name}),
        };
        body.insert("tool_choice".into(), choice);
    }
    if let Some(format) = &request.response_format {
        // Anthropic's native structured output: a JSON schema to follow
        // (plain JSON is the schema of any object).
        let schema = match format {
            ResponseFormat::JsonObject => json!({"type": "object"}),
            ResponseFormat::JsonSchema { schema, .. } => closed_objects(schema.clone()),
        };
        body.insert(
            "output_config".into(),
            json!({"format": {"type": "json_schema", "schema": schema}}),
        );
    }
    if !request.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(request.stop));
    }
    if let Some(top_p) = hints.top_p {
        body.insert("top_p".into(), Value::from(top_p));
    }
    // `seed`: Anthropic has none, and a hint is never sent under another name.
    let headers = vec![("anthropic-version".to_string(), API_VERSION.to_string())];
    ("/messages".into(), Value::Object(body), headers)
}

/// Why the Messages API cannot take this call, if it cannot (`params`:
/// the provider's).
fn unable(request: &ChatRequest, params: Option<&Value>) -> Option<String> {
    let first = request
        .messages
        .iter()
        .find(|m| !matches!(m.role, Role::System | Role::Developer));
    match first.map(|m| m.role) {
        None => Some("Anthropic needs a user message, not only system messages".into()),
        Some(Role::User)
            if thinking(params, request) == Thinking::On && ends_in_prefill(request) =>
        {
            Some(
                "Anthropic takes no final assistant message to continue (a prefill) while \
                 thinking is on (its params)"
                    .into(),
            )
        }
        Some(Role::User) => match (thinking_budget(params, request), request.max_tokens) {
            (Some(budget), Some(max)) if max <= budget => Some(format!(
                "Anthropic takes no max_tokens ({max}) at or below thinking's budget_tokens \
                 ({budget}, its params)"
            )),
            _ => None,
        },
        Some(_) => Some("Anthropic needs the conversation to start with a user message".into()),
    }
}

/// The `budget_tokens` of thinking, when it is on for this request.
fn thinking_budget(params: Option<&Value>, request: &ChatRequest) -> Option<u64> {
    params
        .filter(|_| thinking(params, request) == Thinking::On)
        .and_then(|p| p.pointer("/thinking/budget_tokens"))
        .and_then(Value::as_u64)
}

/// What the provider's `params` make of thinking for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Thinking {
    /// Not asked for (no `thinking`, or `{"type": "disabled"}`).
    Off,
    /// Asked for, but left off for this request (see [`thinking`]).
    LeftOff,
    /// On: what Anthropic refuses beside it is not sent (see [`sampling_hints`]).
    On,
}

/// Anthropic's rules for thinking, in one place. Thinking is asked for by
/// `params` (`{"type": "enabled", ...}` or `{"type": "adaptive"}`). It is
/// left off for a request where Anthropic would refuse it: beside a
/// `tool_choice` that forces a tool (the caller's explicit choice for this
/// call wins over the provider's standing params), and after a tool turn
/// without its signed thinking block (Anthropic requires the last assistant
/// turn that called tools to start with one; a turn another provider wrote,
/// as after a failover mid-loop, has none). Where it stays on, the sampling
/// hints it refuses are dropped ([`sampling_hints`]) and a prefill cannot
/// be sent ([`unable`] skips the provider).
fn thinking(params: Option<&Value>, request: &ChatRequest) -> Thinking {
    let asked = params
        .and_then(|p| p.pointer("/thinking/type"))
        .and_then(Value::as_str)
        .is_some_and(|kind| matches!(kind, "enabled" | "adaptive"));
    if !asked {
        return Thinking::Off;
    }
    let forced_tool = matches!(
        request.tool_choice,
        Some(ToolChoice::Required | ToolChoice::Named(_))
    ) && !request.tools.is_empty();
    let last_tool_turn = request
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant && !m.tool_calls.is_empty());
    let unsigned = last_tool_turn.is_some_and(|m| !has_thinking_blocks(m));
    if forced_tool || unsigned {
        Thinking::LeftOff
    } else {
        Thinking::On
    }
}

/// The sampling hints a request carries to Anthropic.
#[derive(Clone, Copy, Debug, PartialEq)]
struct SamplingHints {
    temperature: Option<f64>,
    top_p: Option<f64>,
}

/// The call's `temperature` and `top_p` as Anthropic takes them. Newer
/// Claude models refuse the two together: `top_p` is a droppable hint,
/// `temperature` the caller's explicit choice. With thinking on, what it
/// refuses ([`thinking_takes`]) is dropped, and a `top_p` it takes then
/// goes alone.
fn sampling_hints(request: &ChatRequest, thinking: Thinking) -> SamplingHints {
    let on = thinking == Thinking::On;
    let temperature =
        anthropic_temperature(request).filter(|&t| !on || thinking_takes("temperature", t));
    let top_p = request
        .top_p
        .filter(|&p| !on || thinking_takes("top_p", p))
        .filter(|_| temperature.is_none());
    SamplingHints { temperature, top_p }
}

/// Anthropic's highest temperature: its range is 0 to 1 where OpenAI's and
/// Gemini's is 0 to 2, and it refuses more with a 400 (which would end the
/// call under the default `stop_on`).
const MAX_TEMPERATURE: f64 = 1.0;

/// The call's temperature as Anthropic is to read it: one above its range
/// is its maximum.
fn anthropic_temperature(request: &ChatRequest) -> Option<f64> {
    request.temperature.map(|t| t.min(MAX_TEMPERATURE))
}

/// Whether Anthropic takes this value of a sampling hint while thinking:
/// a temperature of 1 only, a `top_p` from 0.95 to 1 (its documented
/// feature compatibility; `top_k`, which no call sets, not at all).
fn thinking_takes(hint: &str, value: f64) -> bool {
    match hint {
        "temperature" => value == 1.0,
        "top_p" => value >= 0.95,
        _ => false,
    }
}

/// The call's sampling hints Anthropic is not sent, and why, said for the
/// DEBUG log (`None` when all go): those thinking refuses, and a `top_p`
/// left out beside a `temperature` ([`sampling_hints`]).
fn unsent_sampling_hints(request: &ChatRequest, params: Option<&Value>) -> Option<String> {
    let thinking = thinking(params, request);
    let sent = sampling_hints(request, thinking);
    let mut notes = Vec::new();
    if let (Some(asked), Some(_)) = (request.temperature, sent.temperature) {
        if asked > MAX_TEMPERATURE {
            notes.push(format!(
                "temperature={asked} sent as {MAX_TEMPERATURE}: Anthropic's range is 0 to 1"
            ));
        }
    }
    if thinking == Thinking::On {
        let refused: Vec<String> = [
            ("temperature", anthropic_temperature(request)),
            ("top_p", request.top_p),
        ]
        .into_iter()
        .filter_map(|(hint, value)| Some((hint, value?)))
        .filter(|&(hint, value)| !thinking_takes(hint, value))
        .map(|(hint, value)| format!("{hint}={value}"))
        .collect();
        if !refused.is_empty() {
            notes.push(format!(
                "{} not sent: Anthropic takes only temperature=1 and top_p from 0.95 to 1 \
                 while thinking is on (its params)",
                refused.join(" and ")
            ));
        }
    }
    if let (Some(top_p), Some(_)) = (request.top_p, sent.temperature) {
        if thinking != Thinking::On || thinking_takes("top_p", top_p) {
            notes.push(format!(
                "top_p={top_p} not sent: newer Claude models refuse temperature and top_p \
                 together, and temperature is sent"
            ));
        }
    }
    (!notes.is_empty()).then(|| notes.join("; "))
}

/// Whether the conversation ends in an assistant turn Anthropic is to
/// continue (a prefill): its last message with something to send.
fn ends_in_prefill(request: &ChatRequest) -> bool {
    let sends_something = |m: &&Message| {
        m.role == Role::Tool
            || !m.tool_calls.is_empty()
            || !parts(&m.parts).is_empty()
            || has_thinking_blocks(m)
    };
    request
        .messages
        .iter()
        .rev()
        .filter(|m| !matches!(m.role, Role::System | Role::Developer))
        .find(sends_something)
        .is_some_and(|m| m.role == Role::Assistant)
}

/// Whether an assistant message carries the signed thinking blocks
/// Anthropic wrote (its `provider_data`).
fn has_thinking_blocks(m: &Message) -> bool {
    m.provider_data
        .as_ref()
        .and_then(|d| d.pointer("/anthropic/blocks"))
        .and_then(Value::as_array)
        .is_some_and(|b| !b.is_empty())
}

/// After `params` are merged: thinking left off for this request (see
/// [`thinking`]) is taken out of the body.
fn reconcile_thinking(
    body: &mut Map<String, Value>,
    request: &ChatRequest,
    params: Option<&Value>,
) {
    if thinking(params, request) == Thinking::LeftOff {
        body.remove("thinking");
    }
}

/// Content parts as Anthropic blocks; text that is empty or only
/// whitespace is refused there, so it is left out.
fn parts(parts: &[Part]) -> Vec<Value> {
    parts
        .iter()
        .filter(|p| !matches!(p, Part::Text(t) if t.trim().is_empty()))
        .map(part)
        .collect()
}

/// A tool-call id as Anthropic accepts it (`^[a-zA-Z0-9_-]+$`): other
/// servers' ids (`functions.f:0`) are mapped the same way in the call and
/// its result, so they still pair up. A mapped id carries a digest of the
/// original, so two ids that differ only outside the alphabet (`a.b`,
/// `a/b`) stay two.
fn tool_id(id: &str) -> String {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if !id.is_empty() && id.chars().all(allowed) {
        return id.to_string();
    }
    let mapped: String = id
        .chars()
        .map(|c| if allowed(c) { c } else { '_' })
        .collect();
    format!("{mapped}_{:016x}", stable_digest(id))
}

/// A JSON schema as Anthropic's structured output takes it: every object
/// closed (`additionalProperties: false`) unless the schema says otherwise.
fn closed_objects(mut schema: Value) -> Value {
    fn close(value: &mut Value) {
        match value {
            Value::Object(map) => {
                if map.get("type").and_then(Value::as_str) == Some("object")
                    && !map.contains_key("additionalProperties")
                {
                    map.insert("additionalProperties".into(), Value::Bool(false));
                }
                map.values_mut().for_each(close);
            }
            Value::Array(items) => items.iter_mut().for_each(close),
            _ => {}
        }
    }
    close(&mut schema);
    schema
}

/// A content part as an Anthropic block.
fn part(p: &Part) -> Value {
    match p {
        Part::Text(text) => json!({"type": "text", "text": text}),
        Part::Image { url, .. } => match data_url(url) {
            Some((media_type, data)) => json!({"type": "image",
                "source": {"type": "base64", "media_type": media_type, "data": data}}),
            None => json!({"type": "image", "source": {"type": "url", "url": url}}),
        },
    }
}

/// An Anthropic usage object, in the one meaning (OpenAI's): every input
/// token, cache reads and writes included; the cache figures are parts.
fn usage_of(usage: &Value) -> Usage {
    Usage {
        input_tokens: u64_at(usage, &["input_tokens"]).map(|fresh| {
            fresh
                .saturating_add(u64_at(usage, &["cache_read_input_tokens"]).unwrap_or(0))
                .saturating_add(u64_at(usage, &["cache_creation_input_tokens"]).unwrap_or(0))
        }),
        output_tokens: u64_at(usage, &["output_tokens"]),
        cache_read_tokens: u64_at(usage, &["cache_read_input_tokens"]),
        cache_write_tokens: u64_at(usage, &["cache_creation_input_tokens"]),
        reasoning_tokens: None,
    }
}

/// A stream's usage so far: each raw figure reported replaces the one
/// before, field by field (`message_delta` may repeat some of
/// `message_start`'s), and the one meaning is computed from all of them.
fn merged_usage(extras: &mut Map<String, Value>, usage: &Value) -> Usage {
    let raw = extras.entry("usage").or_insert_with(|| json!({}));
    if let (Value::Object(raw), Value::Object(patch)) = (raw, usage) {
        for (key, value) in patch {
            if value.is_u64() {
                raw.insert(key.clone(), value.clone());
            }
        }
    }
    usage_of(&extras["usage"])
}

/// The thinking blocks a stream gathered, as `provider_data` (in order: the
/// keys are zero-padded indexes).
fn stream_provider_data(extras: &Map<String, Value>) -> Option<Value> {
    let blocks: Vec<&Value> = extras
        .iter()
        .filter(|(key, _)| key.starts_with("block:"))
        .map(|(_, block)| block)
        .collect();
    (!blocks.is_empty()).then(|| json!({"anthropic": {"blocks": blocks}}))
}

/// One Messages stream event -> its pieces (`message_start` carries the
/// input counts, `message_delta` the output count and the stop reason).
///
/// `extras` gathers the thinking blocks (with their signatures) by index, to
/// go back whole in a tool loop ([`stream_provider_data`]).
fn stream_event(
    frame: &Frame,
    out: &mut Vec<Delta>,
    extras: &mut Map<String, Value>,
) -> Result<(), String> {
    let Frame::Event { event, data } = frame else {
        return Ok(());
    };
    let json: Map<String, Value> = event_json(data)?;
    let kind = json
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or(event.as_str());
    let index = || json.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_string();
    match kind {
        "message_start" => {
            let message = json
                .get("message")
                .ok_or("message_start without a message")?;
            if let Some(model) = message.get("model").and_then(Value::as_str) {
                out.push(Delta::Model(model.to_string()));
            }
            if let Some(usage) = message.get("usage") {
                out.push(Delta::Usage(merged_usage(extras, usage)));
            }
        }
        "content_block_start" => {
            let block = json
                .get("content_block")
                .ok_or("content_block_start without a block")?;
            let kind = block.get("type").and_then(Value::as_str);
            if matches!(kind, Some("thinking" | "redacted_thinking")) {
                extras.insert(format!("block:{:08}", index()), block.clone());
            }
            if kind == Some("tool_use") {
                // Only a client tool's input is a call's arguments: a server
                // tool's (`server_tool_use`: web search, code execution)
                // streams the same deltas and is Anthropic's own business.
                extras.insert(format!("tool:{:08}", index()), Value::Bool(true));
            }
            match kind {
                Some("text") => out.push(Delta::Text(text(block, "text"))),
                Some("thinking") => out.push(Delta::Reasoning(text(block, "thinking"))),
                Some("tool_use") => out.push(Delta::ToolCallPart {
                    index: index(),
                    id: Some(text(block, "id")),
                    name: Some(text(block, "name")),
                    // The input streams in deltas; a start that carries it
                    // whole (and no deltas) is taken as it is.
                    arguments: match block.get("input") {
                        Some(Value::Object(input)) if !input.is_empty() => {
                            Value::Object(input.clone()).to_string()
                        }
                        _ => String::new(),
                    },
                }),
                _ => {}
            }
        }
        "content_block_delta" => {
            let delta = json
                .get("delta")
                .ok_or("content_block_delta without a delta")?;
            let kind = delta.get("type").and_then(Value::as_str);
            if let (Some(key @ ("thinking" | "signature")), Some(block)) = (
                kind.and_then(|k| k.strip_suffix("_delta")),
                extras.get_mut(&format!("block:{:08}", index())),
            ) {
                let piece = text(delta, key);
                if let Some(Value::String(so_far)) = block.get_mut(key) {
                    so_far.push_str(&piece);
                } else {
                    block[key] = Value::from(piece);
                }
            }
            match kind {
                Some("text_delta") => out.push(Delta::Text(text(delta, "text"))),
                Some("thinking_delta") => out.push(Delta::Reasoning(text(delta, "thinking"))),
                Some("input_json_delta")
                    if extras.contains_key(&format!("tool:{:08}", index())) =>
                {
                    out.push(Delta::ToolCallPart {
                        index: index(),
                        id: None,
                        name: None,
                        arguments: text(delta, "partial_json"),
                    })
                }
                _ => {} // signatures, citations
            }
        }
        "content_block_stop" => out.push(Delta::ToolCallDone { index: index() }),
        "message_delta" => {
            if let Some(usage) = json.get("usage") {
                out.push(Delta::Usage(merged_usage(extras, usage)));
            }
            if let Some(reason) = json
                .get("delta")
                .and_then(|d| d.get("stop_reason"))
                .and_then(Value::as_str)
            {
                out.push(Delta::Finish(conversation::finish_reason(reason)));
            }
        }
        "message_stop" => out.push(Delta::End),
        "error" => out.push(Delta::Error(StreamError {
            error: json
                .get("error")
                .cloned()
                .unwrap_or(Value::Object(json.clone())),
        })),
        _ => {} // ping, and event types added later
    }
    Ok(())
}

fn parse(json: &Map<String, Value>) -> Result<ChatResponse, String> {
    let content = json
        .get("content")
        .and_then(Value::as_array)
        .ok_or("no content in the response")?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    let mut thinking = Vec::new();
    for block in content {
        let kind = block
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("a content block without a type: {block}"))?;
        match kind {
            // Kept whole: Anthropic checks their signatures when a tool loop
            // sends them back.
            "thinking" | "redacted_thinking" => thinking.push(block.clone()),
            "text" => text.push_str(
                block
                    .get("text")
                    .and_then(Value::as_str)
                    .ok_or("a text block without text")?,
            ),
            "tool_use" => tool_calls.push(ToolCall {
                id: block
                    .get("id")
                    .and_then(Value::as_str)
                    .ok_or("a tool_use block without an id")?
                    .to_string(),
                name: block
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or("a tool_use block without a name")?
                    .to_string(),
                arguments_json: block.get("input").unwrap_or(&json!({})).to_string(),
            }),
            _ => {}
        }
    }
    let usage = json.get("usage").cloned().unwrap_or(Value::Null);
    let provider_data = (!thinking.is_empty()).then(|| json!({"anthropic": {"blocks": thinking}}));
    Ok(ChatResponse {
        text,
        tool_calls,
        provider_data,
        model: string_at(json, "model"),
        finish_reason: json
            .get("stop_reason")
            .and_then(Value::as_str)
            .map(conversation::finish_reason),
        usage: usage_of(&usage),
        request_id: None,
        raw: String::new(),
        status: 200,
        headers: crate::engine::Headers::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::answer::parse_response;
    use super::super::request::{authorize, build_request, dropped_hints, unable};
    use super::super::tests::provider;
    use super::super::types::{Job, Wire};
    use super::*;
    use crate::engine::Headers;
    use crate::http::HttpResponse;
    use serde_json::json;

    #[test]
    fn a_seed_is_never_sent_and_said_beside_the_other_dropped_hints() {
        let p = provider(Wire::Anthropic);
        let req = ChatRequest {
            messages: super::super::tests::messages(json!([{"role": "user", "content": "Hi"}])),
            seed: Some(7),
            temperature: Some(0.2),
            top_p: Some(0.9),
            ..ChatRequest::default()
        };
        let body: Value = serde_json::from_slice(&build_request(&p, &req).body).unwrap();
        assert!(body.get("seed").is_none() && body.get("random_seed").is_none());
        let note = dropped_hints(&p, &Job::Chat(req)).unwrap();
        assert!(note.starts_with("p: top_p=0.9 not sent"), "{note}");
        assert!(
            note.ends_with("; seed=7 not sent: the Anthropic API has no seed"),
            "{note}"
        );
    }

    #[test]
    fn thinking_drops_the_hints_it_refuses_and_skips_a_prefill() {
        let sent = |kind: &str, temperature: Option<f64>, top_p: Option<f64>| {
            let mut p = provider(Wire::Anthropic);
            p.params = Some(json!({"thinking": {"type": kind, "budget_tokens": 2048}}));
            let req = ChatRequest {
                messages: super::super::tests::messages(json!([{"role": "user", "content": "Hi"}])),
                temperature,
                top_p,
                ..ChatRequest::default()
            };
            let body: Value = serde_json::from_slice(&build_request(&p, &req).body).unwrap();
            let hints = (body.get("temperature").cloned(), body.get("top_p").cloned());
            (hints, dropped_hints(&p, &Job::Chat(req)))
        };
        for kind in ["enabled", "adaptive"] {
            let ((t, p), note) = sent(kind, Some(0.2), Some(0.5));
            assert_eq!((t, p), (None, None), "{kind}");
            let note = note.unwrap();
            assert!(
                note.starts_with("p: temperature=0.2 and top_p=0.5 not sent"),
                "{note}"
            );
            let ((t, p), note) = sent(kind, Some(0.2), Some(0.97));
            assert_eq!(
                (t, p),
                (None, Some(json!(0.97))),
                "a top_p it takes goes alone"
            );
            assert!(note.unwrap().contains("temperature=0.2 not sent"));
            let ((t, p), note) = sent(kind, Some(1.0), None);
            assert_eq!((t, p, note), (Some(json!(1.0)), None, None), "1 is allowed");
            let ((t, p), note) = sent(kind, None, Some(0.95));
            assert_eq!((t, p, note), (None, Some(json!(0.95)), None));
        }
        let ((t, p), note) = sent("disabled", Some(0.2), None);
        assert_eq!((t, p, note), (Some(json!(0.2)), None, None));
        let ((t, p), note) = sent("disabled", Some(0.2), Some(0.9));
        assert_eq!(
            (t, p),
            (Some(json!(0.2)), None),
            "top_p never goes beside temperature"
        );
        assert_eq!(
            note.as_deref(),
            Some(
                "p: top_p=0.9 not sent: newer Claude models refuse temperature and top_p \
                 together, and temperature is sent"
            )
        );
        let ((t, p), note) = sent("enabled", Some(1.0), Some(0.97));
        assert_eq!((t, p), (Some(json!(1.0)), None));
        assert!(note
            .unwrap()
            .starts_with("p: top_p=0.97 not sent: newer Claude"));

        // Above Anthropic's range (OpenAI's and Gemini's go to 2): its
        // maximum, said at DEBUG; thinking takes that 1.
        for kind in ["disabled", "enabled"] {
            let ((t, p), note) = sent(kind, Some(1.5), None);
            assert_eq!((t, p), (Some(json!(1.0)), None), "{kind}");
            assert_eq!(
                note.as_deref(),
                Some("p: temperature=1.5 sent as 1: Anthropic's range is 0 to 1"),
                "{kind}"
            );
        }

        let mut p = provider(Wire::Anthropic);
        p.params = Some(json!({"thinking": {"type": "adaptive"}}));
        let prefill = ChatRequest {
            messages: super::super::tests::messages(json!([
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello"},
            ])),
            ..ChatRequest::default()
        };
        let why = unable(&p, &prefill).unwrap();
        assert!(
            why.starts_with("p cannot serve this call: Anthropic takes no final assistant message"),
            "{why}"
        );
        let mut empty_end = prefill.clone();
        empty_end.messages = super::super::tests::messages(json!([
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": " "},
        ]));
        assert_eq!(
            unable(&p, &empty_end),
            None,
            "a blank turn is not sent: no prefill"
        );
        p.params = None;
        assert_eq!(unable(&p, &prefill), None);
    }

    #[test]
    fn request_body_headers_and_system() {
        let p = provider(Wire::Anthropic);
        let req = ChatRequest {
            messages: super::super::tests::messages(json!([
                {"role": "system", "content": "Be brief"},
                {"role": "user", "content": "Hi"},
            ])),
            ..ChatRequest::default()
        };
        let r = authorize(&p, &build_request(&p, &req), p.api_key.as_deref());
        assert_eq!(r.url, "http://127.0.0.1:9/v1/messages");
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(
            body,
            json!({"model": "m-1", "max_tokens": 4096, "system": "Be brief", "messages": [{"role": "user", "content": "Hi"}]})
        );
        assert!(r
            .headers
            .contains(&("anthropic-version".into(), "2023-06-01".into())));
        assert!(r
            .secret_headers
            .contains(&("x-api-key".into(), "sk-secret-123".into())));
    }

    #[test]
    fn parses_text_blocks_and_usage() {
        let body = br#"{"id":"msg_1","model":"claude-haiku-4-5-20251001","content":[{"type":"thinking","thinking":"x"},{"type":"text","text":"Hello"},{"type":"text","text":" there"}],
            "stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":1,"cache_creation_input_tokens":0}}"#;
        let mut headers = Headers::new();
        headers.push("request-id", "req_abc");
        let p = provider(Wire::Anthropic);
        let response = HttpResponse {
            status: 200,
            headers,
            body: body.to_vec(),
        };
        let r = parse_response(&p, &super::super::tests::sent(&p), response).unwrap();
        assert_eq!(r.text, "Hello there");
        assert_eq!(
            r.finish_reason.as_deref(),
            Some("stop"),
            "end_turn, in one vocabulary"
        );
        assert_eq!(r.request_id.as_deref(), Some("req_abc"));
        assert_eq!(r.usage.cache_write_tokens, Some(0));
        assert_eq!(
            r.usage.input_tokens,
            Some(11),
            "10 fresh + 1 read from the cache"
        );
        assert_eq!(r.usage.reasoning_tokens, None);
    }

    #[test]
    fn a_tool_loop_in_openai_shape_becomes_anthropic_blocks() {
        let p = provider(Wire::Anthropic);
        let req = ChatRequest {
            messages: super::super::tests::messages(json!([
                {"role": "developer", "content": "Use tools."},
                {"role": "user", "content": [{"type": "text", "text": "Weather in Paris and Rome?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
                {"role": "assistant", "content": "Checking.", "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
                    {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Rome\"}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
                {"role": "tool", "tool_call_id": "call_2", "content": "rain"},
                {"role": "user", "content": "Summarise."},
            ])),
            tools: crate::conversation::parse_tools(&[json!({"name": "weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}})])
            .unwrap(),
            tool_choice: Some(crate::conversation::ToolChoice::Required),
            ..ChatRequest::default()
        };
        let body: Value = serde_json::from_slice(&build_request(&p, &req).body).unwrap();
        assert_eq!(body["system"], "Use tools.");
        assert_eq!(body["tool_choice"], json!({"type": "any"}));
        assert_eq!(
            body["tools"][0]["input_schema"]["properties"]["city"]["type"],
            "string"
        );
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(
            messages.len(),
            3,
            "user, assistant, one merged user turn: {body}"
        );
        assert_eq!(
            messages[0]["content"][1],
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}})
        );
        assert_eq!(
            messages[1]["content"],
            json!([{"type": "text", "text": "Checking."},
                   {"type": "tool_use", "id": "call_1", "name": "weather", "input": {"city": "Paris"}},
                   {"type": "tool_use", "id": "call_2", "name": "weather", "input": {"city": "Rome"}}])
        );
        assert_eq!(
            messages[2],
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": [{"type": "text", "text": "sunny"}]},
                {"type": "tool_result", "tool_use_id": "call_2", "content": [{"type": "text", "text": "rain"}]},
                {"type": "text", "text": "Summarise."}]})
        );
    }

    #[test]
    fn tool_use_blocks_are_tool_calls() {
        let body =
            br#"{"id":"msg_1","model":"claude-haiku-4-5","stop_reason":"tool_use","content":[
            {"type":"text","text":"Let me check."},
            {"type":"tool_use","id":"toolu_1","name":"weather","input":{"city":"Paris"}}],
            "usage":{"input_tokens":10,"output_tokens":5}}"#;
        let p = provider(Wire::Anthropic);
        let sent = super::super::tests::sent(&p);
        let r = parse_response(
            &p,
            &sent,
            HttpResponse {
                status: 200,
                headers: Headers::new(),
                body: body.to_vec(),
            },
        )
        .unwrap();
        assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(r.text, "Let me check.");
        assert_eq!(
            r.tool_calls,
            vec![crate::conversation::ToolCall {
                id: "toolu_1".into(),
                name: "weather".into(),
                arguments_json: "{\"city\":\"Paris\"}".into()
            }]
        );
    }
}
