//! Ollama's native API: `/api/chat` and `/api/embed`, no key needed (a key,
//! for ollama.com, is a bearer token).

use serde_json::{json, Map, Value};

use super::json::{calls_of, event_json, floats, function_call, new_call_id, string_at};
use super::types::{ChatRequest, ChatResponse, EmbedRequest, EmbedResponse, ProviderConfig, Usage};
use super::wire_format::{Parts, WireFormat};
use crate::conversation::{self, data_url, Part, ResponseFormat, Role, ToolChoice};
use crate::stream::{Delta, Frame, Framing, StreamError};

/// `/api/chat`, streamed as NDJSON lines.
pub struct Ollama;

impl WireFormat for Ollama {
    fn build_chat(&self, _provider: &ProviderConfig, model: &str, request: &ChatRequest) -> Parts {
        build(model, request)
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

    fn parse(&self, json: &Map<String, Value>) -> Result<ChatResponse, String> {
        parse(json)
    }

    fn parse_embed(&self, json: &Map<String, Value>) -> Result<EmbedResponse, String> {
        parse_embed(json)
    }

    fn not_found_hint(&self) -> &'static str {
        " (check base_url: the server's root, e.g. http://localhost:11434; \
         and that the model is pulled)"
    }

    fn framing(&self) -> Framing {
        Framing::Ndjson
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

fn build(model: &str, request: &ChatRequest) -> Parts {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = &request.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    let names = conversation::call_names(&request.messages);
    for m in &request.messages {
        let role = match m.role {
            // Ollama's templates know no developer role.
            Role::System | Role::Developer => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        };
        let mut out = Map::new();
        out.insert("role".into(), Value::from(role));
        out.insert("content".into(), Value::from(m.text()));
        // Checked by `unable`: every image here is a data URL.
        let images: Vec<Value> = m
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::Image { url, .. } => data_url(url).map(|(_, data)| Value::from(data)),
                Part::Text(_) => None,
            })
            .collect();
        if !images.is_empty() {
            out.insert("images".into(), Value::Array(images));
        }
        if !m.tool_calls.is_empty() {
            let calls = m
                .tool_calls
                .iter()
                .map(|c| {
                    let arguments = c.arguments_value();
                    json!({"function": {"name": c.name, "arguments": arguments}})
                })
                .collect();
            out.insert("tool_calls".into(), Value::Array(calls));
        }
        if let Some(id) = &m.tool_call_id {
            if let Some(name) = names.get(id.as_str()) {
                out.insert("tool_name".into(), Value::from(*name));
            }
        }
        messages.push(Value::Object(out));
    }
    let mut body = Map::new();
    body.insert("model".into(), Value::from(model));
    body.insert("messages".into(), Value::Array(messages));
    body.insert("stream".into(), Value::Bool(false));
    // "none" means no tool may be called: the same as offering none.
    if !request.tools.is_empty() && request.tool_choice != Some(ToolChoice::None) {
        let tools = request
            .tools
            .iter()
            .map(|t| {
                let mut fields = t.fields("parameters");
                fields.remove("strict");
                json!({"type": "function", "function": fields})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    match &request.response_format {
        Some(ResponseFormat::JsonObject) => {
            body.insert("format".into(), Value::from("json"));
        }
        Some(ResponseFormat::JsonSchema { schema, .. }) => {
            body.insert("format".into(), schema.clone());
        }
        None => {}
    }
    let mut options = Map::new();
    if let Some(max) = request.max_tokens {
        options.insert("num_predict".into(), Value::from(max));
    }
    if let Some(t) = request.temperature {
        options.insert("temperature".into(), Value::from(t));
    }
    if let Some(top_p) = request.top_p {
        options.insert("top_p".into(), Value::from(top_p));
    }
    if let Some(seed) = request.seed {
        options.insert("seed".into(), Value::from(seed));
    }
    if !request.stop.is_empty() {
        options.insert("stop".into(), json!(request.stop));
    }
    if !options.is_empty() {
        body.insert("options".into(), Value::Object(options));
    }
    ("/api/chat".into(), Value::Object(body), Vec::new())
}

/// Why Ollama cannot take this call, if it cannot.
fn unable(request: &ChatRequest) -> Option<String> {
    let by_url = request
        .messages
        .iter()
        .flat_map(|m| &m.parts)
        .any(|p| matches!(p, Part::Image { url, .. } if data_url(url).is_none()));
    if by_url {
        return Some("Ollama takes images as data: URLs (base64) only, and one is a link".into());
    }
    match &request.tool_choice {
        Some(ToolChoice::Required | ToolChoice::Named(_)) if !request.tools.is_empty() => {
            Some("Ollama cannot be made to call a tool (tool_choice)".into())
        }
        _ => None,
    }
}

fn parse(json: &Map<String, Value>) -> Result<ChatResponse, String> {
    let message = match json.get("message") {
        Some(Value::Object(message)) => message,
        Some(other) => return Err(format!("the message is not an object: {other}")),
        None => return Err("no message in the response".into()),
    };
    let text = match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => return Err(format!("message content is not text: {other}")),
    };
    let mut tool_calls = Vec::new();
    for call in calls_of(message)? {
        tool_calls.push(function_call(call, Some(new_call_id))?);
    }
    // `done: true` ends an answer; older servers give it without a reason.
    let done = json.get("done") == Some(&Value::Bool(true));
    let finish = match json.get("done_reason").and_then(Value::as_str) {
        Some("stop") | None if !tool_calls.is_empty() => Some("tool_calls".to_string()),
        // A model loaded or unloaded without a prompt: nothing was cut.
        Some("load" | "unload") => Some("stop".to_string()),
        None if done => Some("stop".to_string()),
        // Nothing says the answer ended.
        None => None,
        Some(reason) => Some(conversation::finish_reason(reason)),
    };
    Ok(ChatResponse {
        text,
        tool_calls,
        provider_data: None,
        model: string_at(json, "model"),
        finish_reason: finish,
        usage: Usage {
            input_tokens: json.get("prompt_eval_count").and_then(Value::as_u64),
            output_tokens: json.get("eval_count").and_then(Value::as_u64),
            ..Usage::default()
        },
        request_id: None,
        raw: String::new(),
        status: 200,
        headers: crate::engine::Headers::new(),
    })
}

/// One `/api/chat` stream line -> its pieces; `done: true` ends it with the
/// counts and the reason.
fn stream_event(frame: &Frame, out: &mut Vec<Delta>) -> Result<(), String> {
    let Frame::Line(line) = frame else {
        return Ok(());
    };
    let json: Map<String, Value> = event_json(line)?;
    if let Some(error) = json.get("error").filter(|e| !e.is_null()) {
        out.push(Delta::Error(StreamError {
            error: error.clone(),
        }));
        return Ok(());
    }
    if let Some(model) = string_at(&json, "model") {
        out.push(Delta::Model(model));
    }
    match json.get("message") {
        Some(Value::Object(message)) => {
            for (field, delta) in [
                ("thinking", Delta::Reasoning as fn(String) -> Delta),
                ("content", Delta::Text),
            ] {
                match message.get(field) {
                    Some(Value::String(text)) => out.push(delta(text.clone())),
                    None | Some(Value::Null) => {}
                    Some(other) => return Err(format!("message {field} is not text: {other}")),
                }
            }
            for call in calls_of(message)? {
                out.push(Delta::ToolCall(function_call(call, Some(new_call_id))?));
            }
        }
        None | Some(Value::Null) => {}
        Some(other) => return Err(format!("the message is not an object: {other}")),
    }
    if json.get("done") == Some(&Value::Bool(true)) {
        out.push(Delta::Usage(Usage {
            input_tokens: json.get("prompt_eval_count").and_then(Value::as_u64),
            output_tokens: json.get("eval_count").and_then(Value::as_u64),
            ..Usage::default()
        }));
        let reason = match json.get("done_reason").and_then(Value::as_str) {
            Some("load" | "unload") | None => "stop".to_string(),
            Some(reason) => conversation::finish_reason(reason),
        };
        out.push(Delta::Finish(reason));
        out.push(Delta::End);
    }
    Ok(())
}

fn build_embed(model: &str, request: &EmbedRequest) -> (String, Value) {
    let mut body = json!({"model": model, "input": request.inputs});
    if let Some(dimensions) = request.dimensions {
        body["dimensions"] = Value::from(dimensions);
    }
    ("/api/embed".into(), body)
}

/// `{"model", "embeddings": [[...]], "prompt_eval_count"}`.
fn parse_embed(json: &Map<String, Value>) -> Result<EmbedResponse, String> {
    let vectors = json
        .get("embeddings")
        .and_then(Value::as_array)
        .ok_or("no embeddings in the response")?
        .iter()
        .map(floats)
        .collect::<Result<_, _>>()?;
    Ok(EmbedResponse {
        vectors,
        model: string_at(json, "model"),
        usage: Usage {
            input_tokens: json.get("prompt_eval_count").and_then(Value::as_u64),
            ..Usage::default()
        },
        request_id: None,
        status: 200,
        headers: crate::engine::Headers::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::request::{build_request, unable};
    use super::super::tests::{answer, messages, provider};
    use super::super::types::Wire;
    use super::*;
    use serde_json::json;

    #[test]
    fn request_in_ollama_form() {
        let p = provider(Wire::Ollama);
        let req = ChatRequest {
            messages: messages(json!([
                {"role": "developer", "content": "Be brief"},
                {"role": "user", "content": [{"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "look", "arguments": "{\"x\":1}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "a cat"},
            ])),
            tools: crate::conversation::parse_tools(&[json!({"name": "look"})]).unwrap(),
            max_tokens: Some(9),
            seed: Some(1),
            stop: vec!["x".into()],
            response_format: Some(ResponseFormat::JsonObject),
            ..ChatRequest::default()
        };
        let r = build_request(&p, &req);
        assert_eq!(r.url, "http://127.0.0.1:9/v1/api/chat");
        let b: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(
            b["messages"],
            json!([
                {"role": "system", "content": "Be brief"},
                {"role": "user", "content": "What is this?", "images": ["AAAA"]},
                {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "look", "arguments": {"x": 1}}}]},
                {"role": "tool", "content": "a cat", "tool_name": "look"},
            ])
        );
        assert_eq!(b["stream"], false);
        assert_eq!(b["format"], "json");
        assert_eq!(
            b["options"],
            json!({"num_predict": 9, "seed": 1, "stop": ["x"]})
        );
        assert_eq!(b["tools"][0]["function"]["name"], "look");
    }

    #[test]
    fn what_ollama_cannot_take() {
        let p = provider(Wire::Ollama);
        let linked = ChatRequest {
            messages: messages(json!([{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}]}])),
            ..ChatRequest::default()
        };
        assert!(unable(&p, &linked).unwrap().contains("data: URLs"));
        let forced = ChatRequest {
            messages: messages(json!([{"role": "user", "content": "Hi"}])),
            tools: crate::conversation::parse_tools(&[json!({"name": "look"})]).unwrap(),
            tool_choice: Some(ToolChoice::Required),
            ..ChatRequest::default()
        };
        assert!(unable(&p, &forced).unwrap().contains("tool_choice"));
    }

    #[test]
    fn parses_answer_calls_and_counts() {
        let p = provider(Wire::Ollama);
        let r = answer(
            &p,
            br#"{"model":"llama3","message":{"role":"assistant","content":"",
            "tool_calls":[{"function":{"name":"look","arguments":{"x":1}}}]},
            "done_reason":"stop","done":true,"prompt_eval_count":17,"eval_count":66}"#,
        )
        .unwrap();
        assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(r.tool_calls[0].arguments_json, r#"{"x":1}"#);
        assert_eq!(
            (r.usage.input_tokens, r.usage.output_tokens),
            (Some(17), Some(66))
        );
        let r = answer(&p, br#"{"model":"llama3","message":{"role":"assistant","content":"Hi"},"done_reason":"length","done":true}"#).unwrap();
        assert_eq!(
            (r.text.as_str(), r.finish_reason.as_deref()),
            ("Hi", Some("length"))
        );
    }
}
