//! Wire formats: build a request, parse a response, classify an error body.
//! One module per format; nothing here decides about retries.

mod anthropic;
mod openai;

use serde_json::{Map, Value};

use crate::engine::classify::{classify_status, ErrorBody};
use crate::engine::{ErrorKind, Failure, Headers};
use crate::http::{HttpRequest, HttpResponse};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    /// Chat Completions: OpenAI and the OpenAI-compatible family.
    OpenAI,
    /// Anthropic Messages.
    Anthropic,
}

impl Wire {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "openai" => Some(Self::OpenAI),
            "anthropic" => Some(Self::Anthropic),
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
    /// `{"role": ..., "content": ...}` objects; content passes through as given.
    pub messages: Vec<Value>,
    pub system: Option<String>,
    pub max_tokens: Option<u64>,
    pub temperature: Option<f64>,
    /// Overrides the provider's model for this call.
    pub model: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_read_tokens: Option<u64>,
    pub cache_write_tokens: Option<u64>,
    pub reasoning_tokens: Option<u64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ChatResponse {
    pub text: String,
    pub model: Option<String>,
    pub finish_reason: Option<String>,
    pub usage: Usage,
    pub request_id: Option<String>,
    /// The response body as received (valid UTF-8 JSON).
    pub raw: String,
    pub status: u16,
}

impl crate::engine::Answer for ChatResponse {
    fn status(&self) -> u16 {
        self.status
    }
}

pub fn build_request(provider: &ProviderConfig, request: &ChatRequest) -> HttpRequest {
    let model = request.model.as_deref().unwrap_or(&provider.model);
    let (path, body, mut secret_headers, mut headers) = match provider.wire {
        Wire::OpenAI => openai::build(provider, model, request),
        Wire::Anthropic => anthropic::build(provider, model, request),
    };
    headers.push(("content-type".into(), "application/json".into()));
    headers.push(("accept".into(), "application/json".into()));
    for (name, value) in &provider.headers {
        if is_credential_header(name) {
            secret_headers.push((name.clone(), value.clone()));
        } else {
            headers.push((name.clone(), value.clone()));
        }
    }
    HttpRequest {
        url: format!("{}{}", provider.base_url.trim_end_matches('/'), path),
        headers,
        secret_headers,
        body: serde_json::to_vec(&body).unwrap_or_default().into(),
    }
}

/// A response -> the answer, or the failure it describes.
pub fn parse_response(
    provider: &ProviderConfig,
    response: HttpResponse,
) -> Result<ChatResponse, Failure> {
    let request_id = request_id(provider.wire, &response.headers);
    if !(200..300).contains(&response.status) {
        return Err(error_failure(provider, response, request_id));
    }
    let malformed = |why: String, response: &HttpResponse| Failure {
        kind: ErrorKind::ServerError,
        status: Some(response.status),
        headers: response.headers.clone(),
        body: Some(redacted_body(provider, &response.body).0),
        message: format!("malformed response body from {}: {why}", provider.name),
        request_id: request_id.clone(),
    };
    let json: Map<String, Value> = match serde_json::from_slice(&response.body) {
        Ok(Value::Object(map)) => map,
        Ok(_) => return Err(malformed("expected a JSON object".into(), &response)),
        Err(e) => return Err(malformed(e.to_string(), &response)),
    };
    let parsed = match provider.wire {
        Wire::OpenAI => openai::parse(&json),
        Wire::Anthropic => anthropic::parse(&json),
    };
    match parsed {
        Ok(mut answer) => {
            answer.request_id = request_id;
            answer.status = response.status;
            // from_slice succeeded, so the body is valid UTF-8.
            answer.raw = String::from_utf8(response.body).unwrap_or_default();
            Ok(answer)
        }
        Err(why) => Err(malformed(why, &response)),
    }
}

fn request_id(wire: Wire, headers: &Headers) -> Option<String> {
    let name = match wire {
        Wire::OpenAI => "x-request-id",
        Wire::Anthropic => "request-id",
    };
    headers
        .get(name)
        .or_else(|| headers.get("x-request-id"))
        .map(str::to_string)
}

fn error_failure(
    provider: &ProviderConfig,
    response: HttpResponse,
    request_id: Option<String>,
) -> Failure {
    let (text, json) = redacted_body(provider, &response.body);
    let parsed = json
        .as_ref()
        .map_or_else(|| ErrorBody::from_text(&text), ErrorBody::from_json);
    let kind = classify_status(response.status, &parsed, &provider.overloaded_statuses);
    // Anthropic repeats its request id in error bodies; proxies may strip the header.
    let request_id = request_id.or_else(|| {
        json.as_ref()?
            .get("request_id")?
            .as_str()
            .map(str::to_string)
    });
    let message = match (parsed.message, response.headers.get("location")) {
        (Some(m), _) => format!("{} returned {}: {m}", provider.name, response.status),
        (None, Some(_)) if (300..400).contains(&response.status) => format!(
            "{} returned {} (a redirect, which failover does not follow: check base_url)",
            provider.name, response.status
        ),
        (None, _) => format!("{} returned {}", provider.name, response.status),
    };
    Failure {
        kind,
        status: Some(response.status),
        headers: response.headers,
        body: Some(text),
        message,
        request_id,
    }
}

/// A user header that looks like a credential is treated as one: sent
/// marked sensitive and removed from anything a provider echoes back.
pub fn is_credential_header(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    ["key", "auth", "token", "secret", "cookie"]
        .iter()
        .any(|w| lower.contains(w))
}

/// Shorter values are not treated as secrets: redacting them would mangle
/// ordinary words, and no provider issues keys that short.
const MIN_SECRET_LEN: usize = 4;

/// The provider's credentials, as they could be echoed back.
fn secrets(provider: &ProviderConfig) -> Vec<&str> {
    let header_secrets = provider
        .headers
        .iter()
        .filter(|(name, _)| is_credential_header(name))
        .map(|(_, value)| value.as_str());
    provider
        .api_key
        .as_deref()
        .into_iter()
        .chain(header_secrets)
        .filter(|s| s.len() >= MIN_SECRET_LEN)
        .collect()
}

/// A body a provider sent back, as text with the provider's credentials
/// removed, and parsed when it is JSON. JSON may escape any character of a
/// key (`\/`, `\u002f`), so the decoded strings are searched too, and the
/// body re-serialised when one held a key.
fn redacted_body(provider: &ProviderConfig, body: &[u8]) -> (String, Option<Value>) {
    let raw = String::from_utf8_lossy(body);
    let secrets = secrets(provider);
    match serde_json::from_str::<Value>(&raw) {
        Ok(mut json) => {
            let text = if !secrets.is_empty() && redact_json(&mut json, &secrets) {
                json.to_string()
            } else {
                replace_secrets(&raw, &secrets)
            };
            (text, Some(json))
        }
        Err(_) => (replace_secrets(&raw, &secrets), None),
    }
}

fn replace_secrets(text: &str, secrets: &[&str]) -> String {
    let mut out = text.to_string();
    for secret in secrets {
        if out.contains(secret) {
            out = out.replace(secret, "<redacted>");
        }
    }
    out
}

fn redact_json(value: &mut Value, secrets: &[&str]) -> bool {
    match value {
        Value::String(s) if secrets.iter().any(|k| s.contains(k)) => {
            *s = replace_secrets(s, secrets);
            true
        }
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |hit, v| redact_json(v, secrets) | hit),
        Value::Object(map) => map
            .values_mut()
            .fold(false, |hit, v| redact_json(v, secrets) | hit),
        _ => false,
    }
}

fn u64_at(value: &Value, path: &[&str]) -> Option<u64> {
    path.iter().try_fold(value, |v, key| v.get(key))?.as_u64()
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
        }
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
            let f = parse_response(&p, response(200, body)).unwrap_err();
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
        let f = parse_response(&p, response(529, b"")).unwrap_err();
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
        let f = parse_response(&p, response(401, body)).unwrap_err();
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
        let f = parse_response(&provider(Wire::OpenAI), r).unwrap_err();
        assert_eq!(f.kind, ErrorKind::BadRequest);
        assert!(f.message.contains("check base_url"), "{}", f.message);
    }

    #[test]
    fn url_and_headers() {
        let p = provider(Wire::OpenAI);
        let r = build_request(&p, &ChatRequest::default());
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
}
