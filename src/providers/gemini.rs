//! Gemini's native API: `models/{model}:generateContent` and
//! `:batchEmbedContents`, the key in `x-goog-api-key`; its image, speech
//! and transcription calls (also `generateContent`) in `gemini/media.rs`.

mod media;

use serde_json::{json, Map, Value};

use super::json::{event_json, floats, new_call_id, string_at, u64_at};
use super::types::{
    ChatRequest, ChatResponse, EmbedRequest, EmbedResponse, MediaKind, MediaRequest, MediaResponse,
    ProviderConfig, Usage,
};
use super::wire_format::{MediaAnswer, MediaBody, MediaProblem, Parts, WireFormat};
use crate::conversation::{self, data_url, Part, ResponseFormat, Role, ToolCall, ToolChoice};
use crate::stream::{Delta, Frame, StreamError};

/// `generateContent`, streamed as `streamGenerateContent` in SSE.
pub struct GenerateContent;

impl WireFormat for GenerateContent {
    fn no_media(&self, _kind: MediaKind) -> Option<&'static str> {
        None
    }

    fn streams_audio_bytes(&self) -> bool {
        false
    }

    fn media_unable(
        &self,
        provider: &ProviderConfig,
        _model: &str,
        request: &MediaRequest,
    ) -> Option<String> {
        media::unable(&provider.name, request)
    }

    fn build_media(
        &self,
        provider: &ProviderConfig,
        model: &str,
        request: &MediaRequest,
    ) -> (String, MediaBody) {
        media::build(&provider.name, model, request)
    }

    fn parse_media(
        &self,
        request: &MediaRequest,
        answer: MediaAnswer<'_>,
    ) -> Result<MediaResponse, MediaProblem> {
        media::parse(request, answer)
    }

    fn error_usage(&self, json: &Value) -> Option<Usage> {
        json.get("usageMetadata")
            .filter(|u| u.is_object())
            .map(usage_of)
            .filter(Usage::is_known)
    }

    fn build_chat(&self, _provider: &ProviderConfig, model: &str, request: &ChatRequest) -> Parts {
        build(model, request)
    }

    fn ask_to_stream(
        &self,
        _provider: &ProviderConfig,
        path: &mut String,
        _body: &mut Map<String, Value>,
    ) {
        // The stream is another method, not a body field.
        *path = path.replace(":generateContent", ":streamGenerateContent?alt=sse");
    }

    fn max_embed_batch(&self) -> Option<usize> {
        Some(MAX_EMBED_BATCH)
    }

    fn build_embed(
        &self,
        _: &ProviderConfig,
        model: &str,
        request: &EmbedRequest,
    ) -> (String, Value) {
        build_embed(model, request)
    }

    fn unable(&self, _provider: &ProviderConfig, request: &ChatRequest) -> Option<String> {
        unable(request)
    }

    fn key_header(&self, _entra_token: bool) -> &'static str {
        "x-goog-api-key"
    }

    fn parse(&self, json: &Map<String, Value>) -> Result<ChatResponse, String> {
        parse(json)
    }

    fn parse_embed(&self, json: &Map<String, Value>) -> Result<EmbedResponse, String> {
        parse_embed(json)
    }

    fn not_found_hint(&self) -> &'static str {
        " (check base_url, e.g. https://generativelanguage.googleapis.com/v1beta; \
         and the model name)"
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

/// The thought signature Google documents for function calls in a history
/// that another model wrote.
const FOREIGN_SIGNATURE: &str = "skip_thought_signature_validator";

/// `gemini-2.5-flash` -> `models/gemini-2.5-flash`; a full resource name
/// (`tunedModels/...`) as given.
pub(super) fn resource(model: &str) -> String {
    if model.contains('/') {
        model.to_string()
    } else {
        format!("models/{model}")
    }
}

fn build(model: &str, request: &ChatRequest) -> Parts {
    let mut system: Vec<String> = request.system.iter().cloned().collect();
    // A functionResponse names the function it answers; the history's
    // calls say which one each id was.
    let names = conversation::call_names(&request.messages);
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::with_capacity(request.messages.len());
    for m in &request.messages {
        let (role, parts) = match m.role {
            Role::System | Role::Developer => {
                system.push(m.text());
                continue;
            }
            Role::User => ("user", content_parts(&m.parts)),
            Role::Assistant => {
                // Gemini checks the thought signatures of its own turns when
                // a tool loop sends them back: each goes back on its part.
                let signatures = m.provider_data.as_ref().and_then(|d| d.get("gemini"));
                let signature =
                    |key: &str| signatures.and_then(|s| s.get(key)).and_then(Value::as_str);
                let mut parts = content_parts(&m.parts);
                if let (Some(sig), Some(last)) = (signature("text"), parts.last_mut()) {
                    last["thoughtSignature"] = Value::from(sig);
                }
                parts.extend(m.tool_calls.iter().enumerate().map(|(i, c)| {
                    let args = c.arguments_value();
                    let mut part = json!({"functionCall": {"name": c.name, "args": args}});
                    let own = signatures
                        .and_then(|s| s.get("calls"))
                        .and_then(|calls| calls.get(&c.id))
                        .and_then(Value::as_str);
                    match own {
                        Some(sig) => part["thoughtSignature"] = Value::from(sig),
                        // A call another model made: Gemini 3 refuses an
                        // unsigned call in the current turn, and documents
                        // this value for history it did not write.
                        None if i == 0 => part["thoughtSignature"] = Value::from(FOREIGN_SIGNATURE),
                        None => {}
                    }
                    part
                }));
                ("model", parts)
            }
            Role::Tool => {
                let id = m.tool_call_id.as_deref().unwrap_or("");
                let name = names.get(id).copied().or(m.name.as_deref()).unwrap_or(id);
                let text = m.text();
                // The response is an object: a JSON object result as it is,
                // anything else under "output" (or "error"), as Google's SDKs do.
                let response = match serde_json::from_str::<Value>(&text) {
                    Ok(object @ Value::Object(_)) if !m.is_error => object,
                    _ if m.is_error => json!({ "error": text }),
                    _ => json!({ "output": text }),
                };
                let mut parts =
                    vec![json!({"functionResponse": {"name": name, "response": response}})];
                // Images a tool returned travel beside its response.
                parts.extend(
                    m.parts
                        .iter()
                        .filter(|p| matches!(p, Part::Image { .. }))
                        .map(part),
                );
                ("user", parts)
            }
        };
        if parts.is_empty() {
            continue;
        }
        // Consecutive results (and a user message after them) share a turn:
        // Gemini pairs a turn of calls with one turn of responses.
        match turns.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(parts),
            _ => turns.push((role, parts)),
        }
    }
    let contents: Vec<Value> = turns
        .into_iter()
        .map(|(role, parts)| json!({"role": role, "parts": parts}))
        .collect();
    let mut body = Map::new();
    body.insert("contents".into(), Value::Array(contents));
    system.retain(|s| !s.trim().is_empty());
    if !system.is_empty() {
        body.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": system.join("\n\n")}]}),
        );
    }
    let mut config = Map::new();
    if let Some(max) = request.max_tokens {
        config.insert("maxOutputTokens".into(), Value::from(max));
    }
    if let Some(t) = request.temperature {
        config.insert("temperature".into(), Value::from(t));
    }
    if let Some(top_p) = request.top_p {
        config.insert("topP".into(), Value::from(top_p));
    }
    if let Some(seed) = request.seed {
        config.insert("seed".into(), Value::from(seed));
    }
    if !request.stop.is_empty() {
        config.insert("stopSequences".into(), json!(request.stop));
    }
    match &request.response_format {
        Some(ResponseFormat::JsonObject) => {
            config.insert("responseMimeType".into(), Value::from("application/json"));
        }
        Some(ResponseFormat::JsonSchema { schema, .. }) => {
            config.insert("responseMimeType".into(), Value::from("application/json"));
            config.insert("responseJsonSchema".into(), schema.clone());
        }
        None => {}
    }
    if !config.is_empty() {
        body.insert("generationConfig".into(), Value::Object(config));
    }
    let history_tools: Vec<&str> = {
        let mut names: Vec<&str> = names.values().copied().collect();
        names.sort_unstable();
        names.dedup();
        names
    };
    if !request.tools.is_empty() {
        let declarations: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                let mut fields = t.fields("parametersJsonSchema");
                // Gemini has no strict mode: its schemas are always followed.
                fields.remove("strict");
                Value::Object(fields)
            })
            .collect();
        body.insert(
            "tools".into(),
            json!([{ "functionDeclarations": declarations }]),
        );
        if let Some(choice) = &request.tool_choice {
            let config = match choice {
                ToolChoice::Auto => json!({"mode": "AUTO"}),
                ToolChoice::None => json!({"mode": "NONE"}),
                ToolChoice::Required => json!({"mode": "ANY"}),
                ToolChoice::Named(name) => json!({"mode": "ANY", "allowedFunctionNames": [name]}),
            };
            body.insert(
                "toolConfig".into(),
                json!({ "functionCallingConfig": config }),
            );
        }
    } else if !history_tools.is_empty() {
        // Calls in the history of a call without tools (a closing summary):
        // declare the functions they used, and forbid calling them.
        let declarations: Vec<Value> = history_tools
            .iter()
            .map(|n| json!({"name": n, "parametersJsonSchema": {"type": "object"}}))
            .collect();
        body.insert(
            "tools".into(),
            json!([{ "functionDeclarations": declarations }]),
        );
        body.insert(
            "toolConfig".into(),
            json!({"functionCallingConfig": {"mode": "NONE"}}),
        );
    }
    let path = format!("/{}:generateContent", resource(model));
    (path, Value::Object(body), Vec::new())
}

/// Everything the neutral conversation says, Gemini can take.
fn unable(request: &ChatRequest) -> Option<String> {
    let no_user_turn = !request
        .messages
        .iter()
        .any(|m| matches!(m.role, Role::User | Role::Tool));
    no_user_turn.then(|| "Gemini needs a user turn, and the conversation has none".into())
}

fn content_parts(parts: &[Part]) -> Vec<Value> {
    parts
        .iter()
        .filter(|p| !matches!(p, Part::Text(t) if t.is_empty()))
        .map(part)
        .collect()
}

/// A content part as a Gemini part: an image inline (`data:` URLs) or by
/// reference (`fileData`).
fn part(p: &Part) -> Value {
    match p {
        Part::Text(text) => json!({ "text": text }),
        Part::Image { url, .. } => match data_url(url) {
            Some((mime_type, data)) => {
                json!({"inlineData": {"mimeType": mime_type, "data": data}})
            }
            None => {
                let mut file = json!({ "fileUri": url });
                if let Some(mime_type) = image_type(url) {
                    file["mimeType"] = Value::from(mime_type);
                }
                json!({ "fileData": file })
            }
        },
    }
}

/// The image type a URL's extension names, if it names one.
fn image_type(url: &str) -> Option<&'static str> {
    let path = url
        .split(['?', '#'])
        .next()
        .unwrap_or(url)
        .to_ascii_lowercase();
    let extension = path.rsplit_once('.')?.1.to_string();
    Some(match extension.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "webp" => "image/webp",
        "gif" => "image/gif",
        "heic" => "image/heic",
        "heif" => "image/heif",
        _ => return None,
    })
}

/// A candidate and its content parts.
pub(super) type Candidate<'a> = (&'a Map<String, Value>, &'a [Value]);

/// The first candidate of an answer or a stream chunk (`None`: there is
/// none) with its content parts (none: an answer that spent its whole
/// budget thinking has no content). Fields that are not what the wire
/// promises are malformed, never an empty answer.
pub(super) fn first_candidate(json: &Map<String, Value>) -> Result<Option<Candidate<'_>>, String> {
    let candidates = match json.get("candidates") {
        Some(Value::Array(candidates)) => candidates.as_slice(),
        None | Some(Value::Null) => &[],
        Some(other) => return Err(format!("candidates that are not a list: {other}")),
    };
    let candidate = match candidates.first() {
        Some(Value::Object(candidate)) => candidate,
        Some(other) => return Err(format!("a candidate that is not an object: {other}")),
        None => return Ok(None),
    };
    let parts = match candidate.get("content") {
        Some(Value::Object(content)) => match content.get("parts") {
            Some(Value::Array(parts)) => parts.as_slice(),
            None | Some(Value::Null) => &[],
            Some(other) => return Err(format!("content parts that are not a list: {other}")),
        },
        None | Some(Value::Null) => &[],
        Some(other) => {
            return Err(format!(
                "a candidate's content that is not an object: {other}"
            ))
        }
    };
    if let Some(part) = parts.iter().find(|p| !p.is_object()) {
        return Err(format!("a content part that is not an object: {part}"));
    }
    Ok(Some((candidate, parts)))
}

fn parse(json: &Map<String, Value>) -> Result<ChatResponse, String> {
    let usage = json.get("usageMetadata").cloned().unwrap_or(Value::Null);
    let model = string_at(json, "modelVersion");
    let Some((candidate, parts)) = first_candidate(json)? else {
        // A prompt the safety filters blocked has no candidate at all.
        if json
            .get("promptFeedback")
            .and_then(|f| f.get("blockReason"))
            .is_some()
        {
            return Ok(answer(
                String::new(),
                Vec::new(),
                None,
                model,
                Some("content_filter".into()),
                &usage,
            ));
        }
        return Err("no candidates in the response".into());
    };
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    // Thought signatures, by the tool call or the text they came on.
    let mut call_signatures = Map::new();
    let mut text_signature = None;
    for p in parts {
        let signature = p.get("thoughtSignature").filter(|s| s.is_string());
        if let Some(call) = p.get("functionCall") {
            let call = function_call(call)?;
            if let Some(signature) = signature {
                call_signatures.insert(call.id.clone(), signature.clone());
            }
            tool_calls.push(call);
        } else if p.get("thought") == Some(&Value::Bool(true)) {
            continue; // a thought summary, not the answer
        } else if let Some(t) = p.get("text") {
            text.push_str(t.as_str().ok_or("a text part that is not text")?);
            text_signature = signature.cloned().or(text_signature);
        }
    }
    // Content without a reason ended as a STOP would; with no content
    // either, nothing says there is an answer (no answer, as the rule for
    // every wire says).
    let has_content = !text.is_empty() || !tool_calls.is_empty();
    let finish = match candidate.get("finishReason").and_then(Value::as_str) {
        Some(raw) => Some(finish_reason(raw, !tool_calls.is_empty())?),
        None if has_content => Some(finish_reason("STOP", !tool_calls.is_empty())?),
        None => None,
    };
    // Signatures go back on their parts when the history returns here.
    let provider_data = (!call_signatures.is_empty() || text_signature.is_some()).then(|| {
        let mut signatures = Map::new();
        if !call_signatures.is_empty() {
            signatures.insert("calls".into(), Value::Object(call_signatures));
        }
        if let Some(signature) = text_signature {
            signatures.insert("text".into(), signature);
        }
        json!({ "gemini": signatures })
    });
    Ok(answer(
        text,
        tool_calls,
        provider_data,
        model,
        finish,
        &usage,
    ))
}

/// A `functionCall` part's call; Gemini may give no id, then one is made.
fn function_call(call: &Value) -> Result<ToolCall, String> {
    let name = call
        .get("name")
        .and_then(Value::as_str)
        .ok_or("a function call without a name")?;
    Ok(ToolCall {
        id: call
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .map_or_else(new_call_id, str::to_string),
        name: name.to_string(),
        arguments_json: call
            .get("args")
            .cloned()
            .unwrap_or_else(|| json!({}))
            .to_string(),
    })
}

/// Whether a `finishReason` says the provider's filters stopped the answer.
pub(super) fn filtered(reason: &str) -> bool {
    matches!(
        reason,
        "SAFETY"
            | "RECITATION"
            | "BLOCKLIST"
            | "PROHIBITED_CONTENT"
            | "SPII"
            | "IMAGE_SAFETY"
            | "IMAGE_PROHIBITED_CONTENT"
            | "IMAGE_RECITATION"
            | "LANGUAGE"
    )
}

/// A `finishReason` in the one vocabulary; a malformed call is no answer
/// (the model wrote a call it could not make: another attempt may well do
/// better).
fn finish_reason(raw: &str, has_calls: bool) -> Result<String, String> {
    Ok(match raw {
        "STOP" | "OTHER" | "FINISH_REASON_UNSPECIFIED" | "TOO_MANY_TOOL_CALLS" if has_calls => {
            "tool_calls".to_string()
        }
        "STOP" | "FINISH_REASON_UNSPECIFIED" => "stop".to_string(),
        // No end a caller can act on: as it is (with no content, no answer).
        "OTHER" | "TOO_MANY_TOOL_CALLS" => raw.to_string(),
        reason if filtered(reason) => "content_filter".to_string(),
        "MALFORMED_FUNCTION_CALL" | "UNEXPECTED_TOOL_CALL" => {
            return Err(format!("the model wrote an unusable function call ({raw})"));
        }
        other => conversation::finish_reason(other),
    })
}

/// A `usageMetadata` object, in the one meaning: output counts the thinking.
pub(super) fn usage_of(usage: &Value) -> Usage {
    let prompt = u64_at(usage, &["promptTokenCount"]);
    let tool_prompt = u64_at(usage, &["toolUsePromptTokenCount"]);
    let candidates = u64_at(usage, &["candidatesTokenCount"]);
    let thoughts = u64_at(usage, &["thoughtsTokenCount"]);
    let output = match (candidates, thoughts) {
        (None, None) => None,
        (c, t) => Some(c.unwrap_or(0).saturating_add(t.unwrap_or(0))),
    };
    Usage {
        input_tokens: prompt.map(|p| p.saturating_add(tool_prompt.unwrap_or(0))),
        output_tokens: output,
        cache_read_tokens: u64_at(usage, &["cachedContentTokenCount"]),
        cache_write_tokens: None,
        reasoning_tokens: thoughts,
    }
}

/// One `streamGenerateContent` event (a whole response chunk) -> its pieces.
/// `extras` gathers the thought signatures, by call id and for the text.
fn stream_event(
    frame: &Frame,
    out: &mut Vec<Delta>,
    extras: &mut Map<String, Value>,
) -> Result<(), String> {
    let Frame::Event { data, .. } = frame else {
        return Ok(());
    };
    let json: Map<String, Value> = event_json(data)?;
    if let Some(error) = json.get("error").filter(|e| !e.is_null()) {
        out.push(Delta::Error(StreamError {
            error: error.clone(),
        }));
        return Ok(());
    }
    if let Some(model) = string_at(&json, "modelVersion") {
        out.push(Delta::Model(model));
    }
    if let Some(usage) = json.get("usageMetadata") {
        out.push(Delta::Usage(usage_of(usage)));
    }
    let Some((candidate, parts)) = first_candidate(&json)? else {
        if json
            .get("promptFeedback")
            .and_then(|f| f.get("blockReason"))
            .is_some()
        {
            out.push(Delta::Finish("content_filter".into()));
        }
        return Ok(());
    };
    let mut has_calls = false;
    for p in parts {
        let signature = p.get("thoughtSignature").filter(|s| s.is_string());
        if let Some(call) = p.get("functionCall") {
            has_calls = true;
            let call = function_call(call)?;
            if let Some(signature) = signature {
                let calls = extras.entry("calls").or_insert_with(|| json!({}));
                calls[call.id.as_str()] = signature.clone();
            }
            out.push(Delta::ToolCall(call));
        } else if let Some(text) = p.get("text") {
            if let Some(signature) = signature {
                extras.insert("text".into(), signature.clone());
            }
            let text = text
                .as_str()
                .ok_or("a text part that is not text")?
                .to_string();
            if p.get("thought") == Some(&Value::Bool(true)) {
                out.push(Delta::Reasoning(text));
            } else {
                out.push(Delta::Text(text));
            }
        }
    }
    if let Some(raw) = candidate.get("finishReason").and_then(Value::as_str) {
        match finish_reason(raw, has_calls) {
            Ok(reason) => out.push(Delta::Finish(reason)),
            Err(why) => out.push(Delta::Error(StreamError {
                error: json!({ "message": why }),
            })),
        }
    }
    Ok(())
}

/// The thought signatures a stream gathered, as `provider_data`.
fn stream_provider_data(extras: &Map<String, Value>) -> Option<Value> {
    (!extras.is_empty()).then(|| json!({ "gemini": extras }))
}

fn answer(
    text: String,
    tool_calls: Vec<ToolCall>,
    provider_data: Option<Value>,
    model: Option<String>,
    finish: Option<String>,
    usage: &Value,
) -> ChatResponse {
    ChatResponse {
        text,
        tool_calls,
        provider_data,
        model,
        finish_reason: finish,
        usage: usage_of(usage),
        request_id: None,
        raw: String::new(),
        status: 200,
        headers: crate::engine::Headers::new(),
    }
}

/// The most texts one `:batchEmbedContents` takes.
const MAX_EMBED_BATCH: usize = 100;

/// `:batchEmbedContents`, one request per text.
fn build_embed(model: &str, request: &EmbedRequest) -> (String, Value) {
    let name = resource(model);
    let requests: Vec<Value> = request
        .inputs
        .iter()
        .map(|text| {
            let mut one = json!({"model": name, "content": {"parts": [{"text": text}]}});
            if let Some(dimensions) = request.dimensions {
                one["outputDimensionality"] = Value::from(dimensions);
            }
            one
        })
        .collect();
    (
        format!("/{name}:batchEmbedContents"),
        json!({ "requests": requests }),
    )
}

/// `{"embeddings": [{"values": [...]}]}`, in request order.
fn parse_embed(json: &Map<String, Value>) -> Result<EmbedResponse, String> {
    let embeddings = json
        .get("embeddings")
        .and_then(Value::as_array)
        .ok_or("no embeddings in the response")?;
    let vectors = embeddings
        .iter()
        .map(|e| {
            e.get("values")
                .ok_or_else(|| "an embedding without values".to_string())
                .and_then(floats)
        })
        .collect::<Result<_, _>>()?;
    Ok(EmbedResponse {
        vectors,
        model: None,
        usage: Usage::default(),
        request_id: None,
        status: 200,
        headers: crate::engine::Headers::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::request::{authorize, build_embed_request, build_request};
    use super::super::tests::{answer, messages, provider};
    use super::super::types::Wire;
    use super::*;
    use serde_json::json;

    fn body(req: &ChatRequest) -> (String, Value) {
        let p = provider(Wire::Gemini);
        let r = build_request(&p, req);
        (r.url, serde_json::from_slice(&r.body).unwrap())
    }

    #[test]
    fn a_conversation_with_tools_and_images() {
        let req = ChatRequest {
            messages: messages(json!([
                {"role": "system", "content": "Be brief"},
                {"role": "user", "content": [
                    {"type": "text", "text": "Weather here?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                    {"type": "image_url", "image_url": {"url": "https://x.test/a.JPG?s=1"}}]},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
                    {"id": "call_2", "type": "function", "function": {"name": "time", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"},
                {"role": "tool", "tool_call_id": "call_2", "content": "noon"},
                {"role": "user", "content": "Thanks"},
            ])),
            tools: crate::conversation::parse_tools(&[
                json!({"name": "weather", "description": "W", "parameters": {"type": "object"}, "strict": true}),
            ])
            .unwrap(),
            tool_choice: Some(ToolChoice::Named("weather".into())),
            max_tokens: Some(100),
            stop: vec!["END".into()],
            seed: Some(3),
            response_format: Some(ResponseFormat::JsonObject),
            ..ChatRequest::default()
        };
        let (url, b) = body(&req);
        assert_eq!(url, "http://127.0.0.1:9/v1/models/m-1:generateContent");
        assert_eq!(
            b["systemInstruction"],
            json!({"parts": [{"text": "Be brief"}]})
        );
        assert_eq!(
            b["contents"],
            json!([
                {"role": "user", "parts": [{"text": "Weather here?"},
                    {"inlineData": {"mimeType": "image/png", "data": "AAAA"}},
                    {"fileData": {"fileUri": "https://x.test/a.JPG?s=1", "mimeType": "image/jpeg"}}]},
                {"role": "model", "parts": [
                    {"functionCall": {"name": "weather", "args": {"city": "Paris"}},
                     "thoughtSignature": "skip_thought_signature_validator"},
                    {"functionCall": {"name": "time", "args": {}}}]},
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "weather", "response": {"temp": 21}}},
                    {"functionResponse": {"name": "time", "response": {"output": "noon"}}},
                    {"text": "Thanks"}]},
            ])
        );
        assert_eq!(
            b["tools"],
            json!([{"functionDeclarations": [{"name": "weather", "description": "W",
                    "parametersJsonSchema": {"type": "object"}}]}])
        );
        assert_eq!(
            b["toolConfig"],
            json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["weather"]}})
        );
        assert_eq!(
            b["generationConfig"],
            json!({"maxOutputTokens": 100, "seed": 3, "stopSequences": ["END"],
                   "responseMimeType": "application/json"})
        );
    }

    #[test]
    fn history_calls_without_tools_are_declared_and_forbidden() {
        let req = ChatRequest {
            messages: messages(json!([
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c", "content": "boom", "is_error": true},
            ])),
            ..ChatRequest::default()
        };
        let (_, b) = body(&req);
        assert_eq!(b["toolConfig"]["functionCallingConfig"]["mode"], "NONE");
        assert_eq!(b["tools"][0]["functionDeclarations"][0]["name"], "f");
        assert_eq!(
            b["contents"][2]["parts"][0]["functionResponse"]["response"],
            json!({"error": "boom"})
        );
    }

    #[test]
    fn parses_text_calls_usage_and_signatures() {
        let p = provider(Wire::Gemini);
        let r = answer(&p, br#"{"candidates":[{"content":{"role":"model","parts":[
            {"text":"thinking...","thought":true},{"text":"Let me check. "},
            {"functionCall":{"name":"weather","args":{"city":"Paris"}},"thoughtSignature":"sig"}]},
            "finishReason":"STOP"}],
            "usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":8,"thoughtsTokenCount":23,"cachedContentTokenCount":4},
            "modelVersion":"gemini-2.5-flash"}"#).unwrap();
        assert_eq!(r.text, "Let me check. ");
        assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(r.tool_calls[0].name, "weather");
        assert_eq!(r.tool_calls[0].arguments_json, r#"{"city":"Paris"}"#);
        assert!(r.tool_calls[0].id.starts_with("call_"));
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: Some(10),
                output_tokens: Some(31),
                cache_read_tokens: Some(4),
                cache_write_tokens: None,
                reasoning_tokens: Some(23)
            }
        );
        assert_eq!(r.model.as_deref(), Some("gemini-2.5-flash"));
        let id = r.tool_calls[0].id.clone();
        assert_eq!(
            r.provider_data.unwrap(),
            json!({"gemini": {"calls": {id: "sig"}}})
        );
    }

    #[test]
    fn thinking_out_of_budget_and_blocked_prompts_are_answers() {
        let p = provider(Wire::Gemini);
        let r = answer(
            &p,
            br#"{"candidates":[{"content":{"role":"model"},"finishReason":"MAX_TOKENS"}],
            "usageMetadata":{"promptTokenCount":5,"thoughtsTokenCount":100}}"#,
        )
        .unwrap();
        assert_eq!(
            (r.text.as_str(), r.finish_reason.as_deref()),
            ("", Some("length"))
        );
        assert_eq!(r.usage.output_tokens, Some(100));
        let r = answer(&p, br#"{"promptFeedback":{"blockReason":"SAFETY"}}"#).unwrap();
        assert_eq!(r.finish_reason.as_deref(), Some("content_filter"));
        let f = answer(&p, br#"{"candidates":[]}"#).unwrap_err();
        assert!(f.message.contains("no candidates"), "{}", f.message);
    }

    #[test]
    fn embeddings() {
        let p = provider(Wire::Gemini);
        let req = EmbedRequest {
            inputs: vec!["a".into(), "b".into()],
            dimensions: Some(8),
            ..EmbedRequest::default()
        };
        let r = build_embed_request(&p, &req);
        assert_eq!(r.url, "http://127.0.0.1:9/v1/models/m-1:batchEmbedContents");
        let b: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(
            b["requests"][1],
            json!({"model": "models/m-1", "content": {"parts": [{"text": "b"}]}, "outputDimensionality": 8})
        );
        let r = authorize(&p, &r, Some("AIza-key-123"));
        assert!(r
            .secret_headers
            .iter()
            .any(|(n, v)| n == "x-goog-api-key" && v == "AIza-key-123"));
    }
}
