//! Properties of redaction, over generated secrets and what wraps them: a
//! key a request carried never survives in what a provider's answer is
//! turned into (text, a JSON body, a failure's message), wherever it is
//! echoed: repeated, at either end, cut short, inside JSON strings however
//! escaped, inside URLs.
//!
//! `cargo test` runs each property on a few cases (`PROPTEST_CASES`, else
//! 64); `make fuzz` runs them on many more.

use proptest::prelude::*;
use serde_json::Value;

use super::answer::parse_response;
use super::request::{authorize, build_request};
use super::secrets::{redact, redacted_body, secret_values, url_secrets};
use super::tests::provider;
use super::types::{ChatRequest, Wire};
use crate::engine::Headers;
use crate::http::HttpResponse;

/// Few cases unless `PROPTEST_CASES` asks for more: the suite stays quick.
fn config() -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = 64;
    }
    config
}

/// A key as providers issue them: a prefix and letters, digits, `-`, `_`.
fn secret() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec!["", "sk-", "sk-proj-", "sk-ant-api03-", "AIza", "gsk_"]),
        "[A-Za-z0-9_-]{8,64}",
    )
        .prop_map(|(prefix, body)| format!("{prefix}{body}"))
}

/// What surrounds an echo: anything, or text close to an error message.
fn filler() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[ a-zA-Z0-9_:.,'\"{}<>-]{0,20}",
        Just(String::new()),
    ]
}

/// `text` with each of its characters, at random, written as a JSON escape
/// (`\u0041`, `\/`): JSON may escape any character, and the body is still
/// the same JSON.
fn json_string(text: &str, escapes: &[bool]) -> String {
    let mut out = String::from("\"");
    for (i, c) in text.chars().enumerate() {
        let escape = escapes
            .get(i % escapes.len().max(1))
            .copied()
            .unwrap_or(false);
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' if escape => out.push_str("\\/"),
            c if (c as u32) < 0x20 || escape => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Where a JSON body puts an echo of the secret.
#[derive(Clone, Debug)]
enum Echo {
    /// `{"error": {"message": "...secret..."}}`
    Message,
    /// As another string field's whole value.
    Field,
    /// In a list.
    Listed,
    /// As an object's key (a provider listing what it was sent).
    Key,
}

fn echo() -> impl Strategy<Value = Echo> {
    prop_oneof![
        Just(Echo::Message),
        Just(Echo::Field),
        Just(Echo::Listed),
        Just(Echo::Key),
    ]
}

/// A JSON error body echoing `secret` at each of `echoes`, every string
/// escaped at random.
fn json_body(secret: &str, echoes: &[Echo], before: &str, after: &str, escapes: &[bool]) -> String {
    let s = |text: &str| json_string(text, escapes);
    let mut fields = vec![format!("{}: {}", s("type"), s("invalid_request_error"))];
    let mut message = String::from("Incorrect API key");
    for (i, e) in echoes.iter().enumerate() {
        match e {
            Echo::Message => message.push_str(&format!(" {before}{secret}{after}")),
            Echo::Field => fields.push(format!("{}: {}", s(&format!("param{i}")), s(secret))),
            Echo::Listed => fields.push(format!(
                "{}: [{}, {}]",
                s(&format!("list{i}")),
                s(before),
                s(secret)
            )),
            Echo::Key => fields.push(format!("{}: {i}", s(&format!("{before}{secret}")))),
        }
    }
    fields.push(format!("{}: {}", s("message"), s(&message)));
    format!("{{{}: {{{}}}}}", s("error"), fields.join(", "))
}

/// Every string in `json`, keys included.
fn strings(json: &Value, out: &mut Vec<String>) {
    match json {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => {
            for (k, v) in map {
                out.push(k.clone());
                strings(v, out);
            }
        }
        _ => {}
    }
}

/// Neither `text`, nor any string it holds when read as JSON, holds `secret`.
fn assert_gone(text: &str, secret: &str) -> Result<(), TestCaseError> {
    prop_assert!(!text.contains(secret), "{secret:?} survives in {text:?}");
    if let Ok(json) = serde_json::from_str::<Value>(text) {
        let mut found = Vec::new();
        strings(&json, &mut found);
        for s in found {
            prop_assert!(!s.contains(secret), "{secret:?} survives in JSON {text:?}");
        }
    }
    Ok(())
}

/// The secrets a request with `key` carries, as the request path gathers them.
fn request_secrets(wire: Wire, key: &str) -> Vec<String> {
    let p = provider(wire);
    authorize(&p, &build_request(&p, &ChatRequest::default()), Some(key)).secrets
}

fn wire() -> impl Strategy<Value = Wire> {
    prop::sample::select(vec![
        Wire::OpenAI,
        Wire::Azure,
        Wire::Anthropic,
        Wire::Gemini,
        Wire::Ollama,
    ])
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_secret_never_survives_in_text(
        secret in secret(),
        pieces in prop::collection::vec(filler(), 1..6),
        wire in wire(),
    ) {
        // The secret between every two pieces, at both ends, and twice in a row.
        let text = format!("{secret}{}{secret}{secret}", pieces.join(&secret));
        let secrets = request_secrets(wire, &secret);
        assert_gone(&redact(&text, &secrets), &secret)?;
        assert_gone(&redacted_body(&secrets, text.as_bytes()).0, &secret)?;
    }

    /// An echo cut short (`sk-proj-abc…`): 16 or more leading characters of
    /// a longer key never survive.
    #[test]
    fn a_long_secrets_leading_characters_never_survive(
        secret in "[A-Za-z0-9_-]{17,64}",
        cut in 16usize..64,
        before in filler(),
        after in filler(),
    ) {
        let cut = cut.min(secret.len());
        let text = format!("{before}{}{after}", &secret[..cut]);
        assert_gone(&redact(&text, std::slice::from_ref(&secret)), &secret[..cut])?;
    }

    #[test]
    fn a_secret_never_survives_in_a_json_body(
        secret in secret(),
        echoes in prop::collection::vec(echo(), 1..4),
        before in filler(),
        after in filler(),
        escapes in prop::collection::vec(any::<bool>(), 1..8),
        wire in wire(),
    ) {
        let body = json_body(&secret, &echoes, &before, &after, &escapes);
        prop_assert!(serde_json::from_str::<Value>(&body).is_ok(), "not JSON: {}", body);
        let secrets = request_secrets(wire, &secret);
        let (text, json) = redacted_body(&secrets, body.as_bytes());
        assert_gone(&text, &secret)?;
        assert_gone(&json.unwrap().to_string(), &secret)?;
    }

    /// The whole answer path: an error status, or a 200 that is no answer,
    /// whose body and request id echo the key: nothing of the failure shows it.
    #[test]
    fn a_failure_never_shows_the_key(
        secret in secret(),
        echoes in prop::collection::vec(echo(), 1..3),
        before in filler(),
        escapes in prop::collection::vec(any::<bool>(), 1..8),
        status in prop::sample::select(vec![200u16, 400, 401, 404, 429, 500, 503]),
        wire in wire(),
    ) {
        let mut p = provider(wire);
        p.api_key = Some(secret.clone());
        let sent = authorize(&p, &build_request(&p, &ChatRequest::default()), Some(&secret));
        let body = json_body(&secret, &echoes, &before, "", &escapes);
        let mut headers = Headers::new();
        headers.push("x-request-id", &format!("req-{secret}"));
        headers.push("request-id", &format!("req-{secret}"));
        let response = HttpResponse { status, headers, body: body.into_bytes() };
        let failure = parse_response(&p, &sent, response).unwrap_err();
        assert_gone(&failure.message, &secret)?;
        assert_gone(failure.body.as_deref().unwrap_or(""), &secret)?;
        assert_gone(failure.request_id.as_deref().unwrap_or(""), &secret)?;
    }

    /// A key in a proxy's or a base URL's user part or query, echoed in an
    /// error as the URL or its parts.
    #[test]
    fn a_secret_in_a_url_never_survives(
        secret in secret(),
        user in "[a-z]{1,8}",
        form in 0usize..4,
        before in filler(),
    ) {
        let url = match form {
            0 => format!("https://{user}:{secret}@proxy.example:3128"),
            1 => format!("https://{secret}@gw.example/v1"),
            2 => format!("https://gw.example/v1?api-version=1&key={secret}"),
            _ => format!("https://gw.example/v1?access_token={secret}&alt=sse"),
        };
        let secrets = url_secrets(&url);
        let text = format!("{before} could not reach {url}: {secret}");
        assert_gone(&redact(&text, &secrets), &secret)?;
        assert_gone(&redacted_body(&secrets, text.as_bytes()).0, &secret)?;
    }

    /// A secret with characters a URL must escape, written escaped in the
    /// URL: echoed as written or as decoded, neither survives.
    #[test]
    fn an_escaped_secret_in_a_url_never_survives(
        secret in "[A-Za-z0-9_~.+/=@:!$-]{8,40}",
        form in 0usize..3,
        before in filler(),
    ) {
        let escaped: String = secret
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        let url = match form {
            0 => format!("https://user:{escaped}@proxy.example:3128"),
            1 => format!("https://{escaped}@gw.example/v1"),
            _ => format!("https://gw.example/v1?subscription-key={escaped}"),
        };
        let secrets = url_secrets(&url);
        for echoed in [&secret, &escaped] {
            let text = format!("{before} could not reach {url}: {echoed}");
            assert_gone(&redact(&text, &secrets), echoed)?;
        }
    }

    /// Credential headers: a bearer token, a cookie's values, a Basic pair's
    /// password, each echoed alone.
    #[test]
    fn a_credential_headers_secret_parts_never_survive(
        secret in secret(),
        other in "[A-Za-z0-9]{8,20}",
        before in filler(),
    ) {
        use base64::Engine as _;
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("user:{secret}"));
        let headers = vec![
            ("Authorization".to_string(), format!("Bearer {secret}")),
            ("Cookie".to_string(), format!("session={other}; token={secret}")),
            ("Proxy-Authorization".to_string(), format!("Basic {basic}")),
        ];
        let secrets = secret_values(&headers);
        for echoed in [&secret, &other, &basic] {
            let text = format!("{before}{echoed}{before}");
            assert_gone(&redact(&text, &secrets), echoed)?;
        }
    }
}
