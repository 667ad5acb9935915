//! Reading an answer: a 2xx through its wire into the neutral answer, or
//! the failure a response describes (its status and error body classified,
//! in words that name the provider, every secret it echoes redacted).

use serde_json::{Map, Value};

use super::openai::{error_detail, error_in_answer};
use super::secrets::{redact, redact_owned, redacted_body};
use super::types::{embedding_model, ChatResponse, EmbedRequest, EmbedResponse, ProviderConfig};
use super::wires::format;
use crate::engine::classify::{classify_status, ErrorBody};
use crate::engine::{ErrorKind, Failure, Headers};
use crate::http::{HttpRequest, HttpResponse};

/// A response -> the answer, or the failure it describes.
/// `sent` is the request it answers: whatever secret it carried is removed
/// from anything the provider echoes back.
pub fn parse_response(
    provider: &ProviderConfig,
    sent: &HttpRequest,
    response: HttpResponse,
) -> Result<ChatResponse, Failure> {
    let answer = read_answer(provider, sent, response)?;
    let mut chat = match format(provider.wire).parse(&answer.json) {
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
    // (What it says of itself reaches the response, spans and OUT.)
    chat.finish_reason = chat
        .finish_reason
        .map(|reason| redact_owned(reason, &sent.secrets));
    chat.model = chat.model.map(|model| redact_owned(model, &sent.secrets));
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
    let parsed = format(provider.wire)
        .parse_embed(&answer.json)
        .and_then(|embed| {
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
            embed.model = match embed.model {
                Some(model) => Some(redact_owned(model, &sent.secrets)),
                None => Some(embedding_model(provider, request).to_string()),
            };
            embed.request_id = answer.request_id;
            embed.status = answer.response.status;
            embed.headers = answer.response.headers;
            Ok(embed)
        }
        Err(why) => Err(malformed(provider, sent, answer, why)),
    }
}

/// A 2xx response read as a JSON object, with its request id.
pub(super) struct JsonAnswer {
    pub(super) json: Map<String, Value>,
    pub(super) request_id: Option<String>,
    pub(super) response: HttpResponse,
}

impl JsonAnswer {
    /// A 2xx that is no JSON (audio), for what is said of it.
    pub(super) fn of_bytes(response: HttpResponse, request_id: Option<String>) -> Self {
        Self {
            json: Map::new(),
            request_id,
            response,
        }
    }
}

/// The JSON object a 2xx response carries, or the failure the response
/// describes: an error status, a body that is not a JSON object, or an
/// error object inside a 2xx (OpenRouter), classified by its `code` as if
/// that were the status.
pub(super) fn read_answer(
    provider: &ProviderConfig,
    sent: &HttpRequest,
    response: HttpResponse,
) -> Result<JsonAnswer, Failure> {
    let secrets = &sent.secrets;
    // A header value can echo a key too.
    let request_id = request_id(provider, &response.headers).map(|id| redact_owned(id, secrets));
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
    if let Some(error) = error_in_answer(&json) {
        // An error in a 200: the status the error names (its code, or its
        // type's status: Anthropic's `overloaded_error` is a 529), else a
        // server error; what is classified and quoted is the error object.
        let named = error
            .get("code")
            .and_then(Value::as_u64)
            .and_then(|code| u16::try_from(code).ok())
            .filter(|code| (400..600).contains(code))
            .or_else(|| {
                let kind = error.get("type").and_then(Value::as_str)?;
                status_of_type(kind)
            });
        let body = match json.get("error") {
            Some(_) => response.body,
            None => serde_json::to_vec(&serde_json::json!({ "error": error })).unwrap_or_default(),
        };
        // An error naming no status (Ollama's `{"error": "..."}`) is
        // classified as a 500, and reported as the status that came.
        let came = named.is_none().then_some(response.status);
        let response = HttpResponse {
            status: named.unwrap_or(500),
            body,
            headers: response.headers,
        };
        return Err(classified_failure(
            provider, secrets, response, request_id, came,
        ));
    }
    Ok(JsonAnswer {
        json,
        request_id,
        response,
    })
}

/// A 2xx whose body is not what the wire promises: a server error (another
/// attempt, or another provider, may well answer properly).
pub(super) fn malformed(
    provider: &ProviderConfig,
    sent: &HttpRequest,
    answer: JsonAnswer,
    why: String,
) -> Failure {
    let message = format!("malformed response body from {}: {why}", provider.name);
    answered_failure(sent, answer, message)
}

/// A 2xx in which the provider declined to make what was asked (its safety
/// filters): a bad request, as its content-policy 400 would be.
pub(super) fn refused(
    provider: &ProviderConfig,
    sent: &HttpRequest,
    answer: JsonAnswer,
    why: String,
) -> Failure {
    let message = format!("{} refused the request: {why}", provider.name);
    Failure {
        kind: ErrorKind::BadRequest,
        ..answered_failure(sent, answer, message)
    }
}

/// A 2xx that is no answer, as a server error saying `message` (which may
/// quote the answer: a finish reason, what it said instead).
fn answered_failure(sent: &HttpRequest, answer: JsonAnswer, message: String) -> Failure {
    let response = answer.response;
    Failure {
        kind: ErrorKind::ServerError,
        status: Some(response.status),
        body: Some(redacted_body(&sent.secrets, &response.body).0),
        headers: response.headers,
        message: redact(&message, &sent.secrets),
        request_id: answer.request_id,
        out_of_time: false,
        cut_short: false,
        usage: None,
        // A 2xx: the provider generated something, readable or not.
        billed: Some(true),
    }
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

/// The id the provider gave the request, from its response headers.
pub(super) fn request_id(provider: &ProviderConfig, headers: &Headers) -> Option<String> {
    let name = format(provider.wire).request_id_header();
    // Mistral's gateway names its ids otherwise.
    headers
        .get(name)
        .or_else(|| headers.get("x-request-id"))
        .or_else(|| headers.get("mistral-correlation-id"))
        .or_else(|| headers.get("x-kong-request-id"))
        .map(str::to_string)
}

/// A response that is an error, as the failure it describes: classified by
/// its status and body, in words that name the provider and where to look.
pub(super) fn error_failure(
    provider: &ProviderConfig,
    secrets: &[String],
    response: HttpResponse,
    request_id: Option<String>,
) -> Failure {
    classified_failure(provider, secrets, response, request_id, None)
}

/// [`error_failure`], for an error that came inside a 2xx of status `came`
/// when given: classified by `response.status`, reported as what came.
fn classified_failure(
    provider: &ProviderConfig,
    secrets: &[String],
    response: HttpResponse,
    request_id: Option<String>,
    came: Option<u16>,
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
        404 if json.is_none() || bare_not_found(parsed.message.as_deref()) => {
            format(provider.wire).not_found_hint()
        }
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
    let said = match came {
        Some(came) => format!("answered {came} with an error"),
        None => format!("returned {status}"),
    };
    // What a wire says beyond its message: the upstream's own error behind
    // a router (OpenRouter), a content filter's verdict (Azure).
    let detail = json.as_ref().and_then(error_detail);
    let message = match (parsed.message, detail) {
        (Some(m), Some(detail)) => format!("{name} {said}{hint}: {m} ({detail})"),
        (Some(m), None) => format!("{name} {said}{hint}: {m}"),
        (None, Some(detail)) => format!("{name} {said}{hint}: {detail}"),
        (None, None) => format!("{name} {said}{hint}"),
    };
    // An error is not billed, unless its body reports usage: a refusal (a
    // 4xx, an overload's 503 or 529) comes before generating; another 5xx
    // (a gateway's 502, 504 or 524 timing out on the model) may come after,
    // which cannot be known.
    let usage = json
        .as_ref()
        .and_then(|j| format(provider.wire).error_usage(j));
    Failure {
        kind,
        status: Some(came.unwrap_or(response.status)),
        headers: response.headers,
        body: Some(text),
        message,
        request_id,
        out_of_time: false,
        cut_short: false,
        billed: match (&usage, came.unwrap_or(response.status)) {
            (Some(_), _) => Some(true),
            (None, status) if status < 500 || status == 503 || status == 529 => Some(false),
            (None, _) => None,
        },
        usage: usage.map(Box::new),
    }
}

/// Whether an error message is only a router's "Not Found" (no model named).
fn bare_not_found(message: Option<&str>) -> bool {
    let message = message.unwrap_or("").trim().trim_end_matches('.');
    message.is_empty() || message.eq_ignore_ascii_case("not found")
}

/// The HTTP status an error type stands for (Anthropic's `error.type`
/// names, which its stream error events carry without a status).
pub(super) fn status_of_type(name: &str) -> Option<u16> {
    Some(match name {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "billing_error" => 402,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "api_error" => 500,
        "overloaded_error" => 529,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::secrets::secret_values;
    use super::super::tests::{answer, provider, sent};
    use super::super::types::Wire;
    use super::*;
    use serde_json::json;

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
    fn fields_that_are_not_what_the_wire_promises_are_no_answer() {
        let cases: [(Wire, serde_json::Value); 12] = [
            (
                Wire::OpenAI,
                json!({"choices": [{"message": 3, "finish_reason": "stop"}]}),
            ),
            (
                Wire::OpenAI,
                json!({"choices": [{"message": {"role": "assistant"}}]}),
            ),
            (
                Wire::OpenAI,
                json!({"choices": [{"message": {"content": "", "tool_calls": 3},
                                    "finish_reason": "stop"}]}),
            ),
            (Wire::Ollama, json!({"message": 3, "done": true})),
            (Wire::Ollama, json!({"message": {"role": "assistant"}})),
            (
                Wire::Ollama,
                json!({"message": {"content": "", "tool_calls": {}}, "done": true}),
            ),
            (
                Wire::Anthropic,
                json!({"content": 3, "stop_reason": "end_turn"}),
            ),
            (
                Wire::Anthropic,
                json!({"content": [3], "stop_reason": "end_turn"}),
            ),
            (
                Wire::Gemini,
                json!({"candidates": {"content": {"parts": [{"text": "x"}]}}}),
            ),
            (Wire::Gemini, json!({"candidates": [3]})),
            (
                Wire::Gemini,
                json!({"candidates": [{"content": 3, "finishReason": "STOP"}]}),
            ),
            (
                Wire::Gemini,
                json!({"candidates": [{"content": {"parts": []}}]}),
            ),
        ];
        for (wire, body) in cases {
            let p = provider(wire);
            let f = answer(&p, body.to_string().as_bytes()).unwrap_err();
            assert_eq!(
                (f.kind, f.status),
                (ErrorKind::ServerError, Some(200)),
                "{body}"
            );
            assert!(
                f.message.starts_with("malformed response body from p: ")
                    || f.message.starts_with("p: "),
                "names its provider: {}",
                f.message
            );
        }
        // An empty answer that ended as the vocabulary says is the model's.
        let p = provider(Wire::Ollama);
        let body = br#"{"message": {"role": "assistant", "content": ""}, "done": true}"#;
        assert_eq!(
            answer(&p, body).unwrap().finish_reason.as_deref(),
            Some("stop")
        );
    }

    #[test]
    fn an_error_naming_no_status_in_a_200_is_reported_as_what_came() {
        let p = provider(Wire::Ollama);
        let f = answer(&p, br#"{"error": "model 'x' not found"}"#).unwrap_err();
        assert_eq!(
            (f.kind, f.status, f.message.as_str()),
            (
                ErrorKind::ServerError,
                Some(200),
                "p answered 200 with an error: model 'x' not found"
            )
        );
        // One that names its status (OpenRouter's code) is reported as it.
        let p = provider(Wire::OpenAI);
        let body = br#"{"error": {"code": 429, "message": "upstream busy"}}"#;
        let f = answer(&p, body).unwrap_err();
        assert_eq!(
            (f.kind, f.status, f.message.as_str()),
            (
                ErrorKind::RateLimited,
                Some(429),
                "p returned 429: upstream busy"
            )
        );
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
}
