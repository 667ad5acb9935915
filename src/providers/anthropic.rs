//! Anthropic Messages.

use serde_json::{Map, Value};

use super::{u64_at, ChatRequest, ChatResponse, Usage};

/// Anthropic requires `max_tokens`; this is used when the caller gives none.
pub const DEFAULT_MAX_TOKENS: u64 = 4096;
pub const API_VERSION: &str = "2023-06-01";

/// The endpoint path, the body and the wire's own headers.
type Parts = (String, Value, Vec<(String, String)>);

pub(super) fn build(model: &str, request: &ChatRequest) -> Parts {
    // System prompts travel beside the messages, not among them.
    let mut system: Vec<String> = request.system.iter().cloned().collect();
    let mut messages = Vec::with_capacity(request.messages.len());
    for m in &request.messages {
        match (m.get("role").and_then(Value::as_str), m.get("content")) {
            (Some("system" | "developer"), Some(Value::String(s))) => system.push(s.clone()),
            _ => messages.push(m.clone()),
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), Value::from(model));
    body.insert(
        "max_tokens".into(),
        Value::from(request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    if !system.is_empty() {
        body.insert("system".into(), Value::from(system.join("\n\n")));
    }
    body.insert("messages".into(), Value::Array(messages));
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), Value::from(t));
    }
    let headers = vec![("anthropic-version".to_string(), API_VERSION.to_string())];
    ("/messages".into(), Value::Object(body), headers)
}

/// The header that carries the key.
pub(super) fn key_header(key: &str) -> (String, String) {
    ("x-api-key".to_string(), key.to_string())
}

pub(super) fn parse(json: &Map<String, Value>) -> Result<ChatResponse, String> {
    let content = json
        .get("content")
        .and_then(Value::as_array)
        .ok_or("no content in the response")?;
    let mut text = String::new();
    for block in content {
        if block.get("type").and_then(Value::as_str) == Some("text") {
            text.push_str(
                block
                    .get("text")
                    .and_then(Value::as_str)
                    .ok_or("a text block without text")?,
            );
        }
    }
    let usage = json.get("usage").cloned().unwrap_or(Value::Null);
    Ok(ChatResponse {
        text,
        model: json
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_string),
        finish_reason: json
            .get("stop_reason")
            .and_then(Value::as_str)
            .map(str::to_string),
        usage: Usage {
            input_tokens: u64_at(&usage, &["input_tokens"]),
            output_tokens: u64_at(&usage, &["output_tokens"]),
            cache_read_tokens: u64_at(&usage, &["cache_read_input_tokens"]),
            cache_write_tokens: u64_at(&usage, &["cache_creation_input_tokens"]),
            reasoning_tokens: None,
        },
        request_id: None,
        raw: String::new(),
        status: 200,
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::provider;
    use super::super::*;
    use serde_json::json;

    #[test]
    fn request_body_headers_and_system() {
        let p = provider(Wire::Anthropic);
        let req = ChatRequest {
            messages: vec![
                json!({"role": "system", "content": "Be brief"}),
                json!({"role": "user", "content": "Hi"}),
            ],
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
        let r = parse_response(
            &p,
            &super::super::tests::sent(&p),
            HttpResponse {
                status: 200,
                headers,
                body: body.to_vec(),
            },
        )
        .unwrap();
        assert_eq!(r.text, "Hello there");
        assert_eq!(r.finish_reason.as_deref(), Some("end_turn"));
        assert_eq!(r.request_id.as_deref(), Some("req_abc"));
        assert_eq!(r.usage.cache_write_tokens, Some(0));
        assert_eq!(r.usage.reasoning_tokens, None);
    }
}
