//! OpenAI Chat Completions, spoken by OpenAI and the OpenAI-compatible family.

use serde_json::{json, Map, Value};

use super::{u64_at, ChatRequest, ChatResponse, ProviderConfig, Usage};

/// The endpoint path, the body and the wire's own headers.
type Parts = (String, Value, Vec<(String, String)>);

pub(super) fn build(provider: &ProviderConfig, model: &str, request: &ChatRequest) -> Parts {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = &request.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    messages.extend(request.messages.iter().cloned());
    let mut body = Map::new();
    body.insert("model".into(), Value::from(model));
    body.insert("messages".into(), Value::Array(messages));
    if let Some(max) = request.max_tokens {
        body.insert(provider.max_tokens_field.clone(), Value::from(max));
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), Value::from(t));
    }
    ("/chat/completions".into(), Value::Object(body), Vec::new())
}

/// The header that carries the key.
pub(super) fn key_header(key: &str) -> (String, String) {
    ("authorization".to_string(), format!("Bearer {key}"))
}

pub(super) fn parse(json: &Map<String, Value>) -> Result<ChatResponse, String> {
    let choice = json
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or("no choices in the response")?;
    let message = choice
        .get("message")
        .ok_or("no message in the first choice")?;
    let text = match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        // A refusal or a tool call carries no text.
        Some(Value::Null) | None => String::new(),
        Some(other) => return Err(format!("message content is not text: {other}")),
    };
    let usage = json.get("usage").cloned().unwrap_or(Value::Null);
    Ok(ChatResponse {
        text,
        model: json
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_string),
        finish_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_string),
        usage: Usage {
            input_tokens: u64_at(&usage, &["prompt_tokens"]),
            output_tokens: u64_at(&usage, &["completion_tokens"]),
            cache_read_tokens: u64_at(&usage, &["prompt_tokens_details", "cached_tokens"]),
            // OpenRouter reports cache writes here; OpenAI itself does not.
            cache_write_tokens: u64_at(&usage, &["prompt_tokens_details", "cache_write_tokens"]),
            reasoning_tokens: u64_at(&usage, &["completion_tokens_details", "reasoning_tokens"]),
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
    fn request_body_and_auth() {
        let mut p = provider(Wire::OpenAI);
        p.max_tokens_field = "max_completion_tokens".into();
        let req = ChatRequest {
            messages: vec![json!({"role": "user", "content": "Hi"})],
            system: Some("Be brief".into()),
            max_tokens: Some(50),
            temperature: Some(0.2),
            model: None,
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
        let r = parse_response(
            &p,
            &super::super::tests::sent(&p),
            HttpResponse {
                status: 200,
                headers: Headers::new(),
                body: body.to_vec(),
            },
        )
        .unwrap();
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
}
