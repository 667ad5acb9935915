//! A failed attempt -> [`ErrorKind`].
//!
//! Error bodies differ per provider: `error` may be an object or a string,
//! `code` a string, an int or null; the message is at `error.message`,
//! `error`, `message` or `detail`.

use serde_json::Value;

use super::hints::Headers;
use super::usage::Usage;

/// Why an attempt failed. Decides whether it is retried; whether the call
/// may fail over is the policy's `stop_on`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    RateLimited,
    Overloaded,
    ServerError,
    Timeout,
    Connection,
    InsufficientCredits,
    Auth,
    NotFound,
    TooLarge,
    BadRequest,
}

impl ErrorKind {
    /// Every kind, in the order of the classification table.
    pub const ALL: [ErrorKind; 10] = [
        Self::RateLimited,
        Self::Overloaded,
        Self::ServerError,
        Self::Timeout,
        Self::Connection,
        Self::InsufficientCredits,
        Self::Auth,
        Self::NotFound,
        Self::TooLarge,
        Self::BadRequest,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::RateLimited => "rate_limited",
            Self::Overloaded => "overloaded",
            Self::ServerError => "server_error",
            Self::Timeout => "timeout",
            Self::Connection => "connection",
            Self::InsufficientCredits => "insufficient_credits",
            Self::Auth => "auth",
            Self::NotFound => "not_found",
            Self::TooLarge => "too_large",
            Self::BadRequest => "bad_request",
        }
    }

    /// The kind named `name` (as [`as_str`](Self::as_str) spells it).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Transient: worth another attempt at the same provider.
    pub const fn retryable(self) -> bool {
        matches!(
            self,
            Self::RateLimited
                | Self::Overloaded
                | Self::ServerError
                | Self::Timeout
                | Self::Connection
        )
    }

    const fn bit(self) -> u16 {
        1 << self as u16
    }
}

/// A set of [`ErrorKind`]s: the policy's `stop_on`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct KindSet(u16);

impl KindSet {
    pub const EMPTY: KindSet = KindSet(0);

    pub const fn of(kinds: &[ErrorKind]) -> Self {
        let mut bits = 0;
        let mut i = 0;
        while i < kinds.len() {
            bits |= kinds[i].bit();
            i += 1;
        }
        Self(bits)
    }

    pub const fn contains(self, kind: ErrorKind) -> bool {
        self.0 & kind.bit() != 0
    }

    pub fn iter(self) -> impl Iterator<Item = ErrorKind> {
        ErrorKind::ALL
            .into_iter()
            .filter(move |k| self.contains(*k))
    }
}

impl FromIterator<ErrorKind> for KindSet {
    fn from_iter<I: IntoIterator<Item = ErrorKind>>(iter: I) -> Self {
        Self(iter.into_iter().fold(0, |bits, k| bits | k.bit()))
    }
}

/// One failed attempt, as the transport and the wire format saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    pub kind: ErrorKind,
    /// The HTTP status, when a response arrived.
    pub status: Option<u16>,
    pub headers: Headers,
    /// The response body as text (lossy), when there was one.
    pub body: Option<String>,
    pub message: String,
    pub request_id: Option<String>,
    /// The deadline ended the attempt: the time left ran out before the
    /// attempt did (whatever it was waiting for). Only this is the deadline
    /// cutting an attempt short; a timeout of the attempt's own (a 408, a
    /// connect timeout, no response within `timeout`) is the provider's
    /// failure.
    pub out_of_time: bool,
    /// The body broke off after the status line arrived. The default policy
    /// treats it as a server error of that status; the openai preset, as a
    /// connection failure with no response (as httpx reports it).
    pub cut_short: bool,
    /// What the provider reported it used before failing (an error body or
    /// a stream's events that carry usage), when it did.
    /// (Boxed: a failure travels in every `Result` of an attempt.)
    pub usage: Option<Box<Usage>>,
    /// Whether the provider may charge for the attempt: `Some(false)` when it
    /// refused before generating (an error status, a connection never made),
    /// `Some(true)` when it reported usage, `None` when it cannot be known
    /// (a timeout or a cut after the request was sent).
    pub billed: Option<bool>,
}

impl Failure {
    /// A failure with no response (timeout, connection, local error).
    pub fn without_response(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            status: None,
            headers: Headers::new(),
            body: None,
            message: message.into(),
            request_id: None,
            out_of_time: false,
            cut_short: false,
            usage: None,
            billed: None,
        }
    }

    /// The deadline ended the attempt.
    pub fn out_of_time(message: impl Into<String>) -> Self {
        Self {
            out_of_time: true,
            cut_short: false,
            ..Self::without_response(ErrorKind::Timeout, message)
        }
    }
}

/// The statuses that mean "overloaded" when a provider does not say otherwise
/// (`failover.Provider.overloaded_statuses` starts from these, read as
/// `_native.DEFAULT_OVERLOADED_STATUSES`).
pub const DEFAULT_OVERLOADED_STATUSES: &[u16] = &[502, 503, 504, 520, 522, 524];

/// What an error body says, read leniently.
#[derive(Debug, Default, PartialEq)]
pub struct ErrorBody {
    pub message: Option<String>,
    /// `error.code`, `error.type`, `error.status` and `details[].reason`, lower-cased.
    pub codes: Vec<String>,
}

pub fn parse_error_body(body: &str) -> ErrorBody {
    match serde_json::from_str::<Value>(body) {
        Ok(json) => ErrorBody::from_json(&json),
        Err(_) => ErrorBody::from_text(body),
    }
}

impl ErrorBody {
    /// A body that is not JSON: its text is the message.
    pub fn from_text(body: &str) -> Self {
        let text = body.trim();
        let message = (!text.is_empty()).then(|| truncate(text, 500));
        Self {
            message,
            codes: Vec::new(),
        }
    }

    pub fn from_json(json: &Value) -> Self {
        // Gemini's OpenAI-compatible endpoint wraps its error in a list.
        if let Some(first) = json.as_array().and_then(|items| items.first()) {
            return Self::from_json(first);
        }
        let mut out = ErrorBody::default();
        let error = json.get("error");
        let mut add_code = |v: Option<&Value>| match v {
            Some(Value::String(s)) => out.codes.push(s.to_ascii_lowercase()),
            Some(Value::Number(n)) => out.codes.push(n.to_string()),
            _ => {}
        };
        for source in [error, Some(json)].into_iter().flatten() {
            add_code(source.get("code"));
            add_code(source.get("type"));
            add_code(source.get("status"));
            if let Some(details) = source.get("details").and_then(Value::as_array) {
                for d in details {
                    add_code(d.get("reason"));
                }
            }
        }
        let message = [
            error.and_then(|e| e.get("message")),
            error,
            json.get("message"),
            json.get("detail"),
        ]
        .into_iter()
        .flatten()
        .find_map(|v| v.as_str().filter(|s| !s.is_empty()));
        out.message = message.map(|m| truncate(m, 2000));
        out
    }
}

fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// Classifies an HTTP error status with its parsed body.
pub fn classify_status(status: u16, body: &ErrorBody, overloaded: &[u16]) -> ErrorKind {
    let has_code = |c: &str| body.codes.iter().any(|x| x == c);
    let message = body.message.as_deref().unwrap_or("").to_ascii_lowercase();
    let says = |needle: &str| message.contains(needle);

    if status == 402
        || has_code("insufficient_quota")
        || says("credit balance")
        || says("insufficient credits")
        // xAI: "doesn't have any credits yet" (403), "used all available credits" (429).
        || (matches!(status, 403 | 429) && (says("any credits") || says("available credits")))
    {
        return ErrorKind::InsufficientCredits;
    }
    // A moderation verdict (OpenRouter's 403 "flagged") is about the input, not the key.
    if status == 403 && (says("flagged") || says("moderation")) {
        return ErrorKind::BadRequest;
    }
    if status == 401 || status == 403 {
        return ErrorKind::Auth;
    }
    if status == 413
        || has_code("context_length_exceeded")
        || has_code("request_too_large")
        || says("context length")
        || says("context window")
        || says("prompt is too long")
        // Gemini: "The input token count (1200000) exceeds the maximum number of tokens allowed".
        || (says("token count") && says("exceeds the maximum"))
        // xAI: "This model's maximum prompt length is 131072 but the request contains ...".
        || says("maximum prompt length")
        || (status == 429 && says("request too large"))
    {
        return ErrorKind::TooLarge;
    }
    if status == 400
        && (has_code("api_key_invalid")
            || has_code("invalid_api_key")
            || says("incorrect api key")
            || says("api key not valid")
            || says("invalid api key"))
    {
        return ErrorKind::Auth;
    }
    // A rate limit named by code (an error inside a 200 carries no 429).
    if status == 429
        || has_code("resource_exhausted")
        || has_code("rate_limit_exceeded")
        || has_code("rate_limit_error")
        || has_code("rate_limited")
    {
        return ErrorKind::RateLimited;
    }
    if overloaded.contains(&status) {
        return ErrorKind::Overloaded;
    }
    match status {
        404 => ErrorKind::NotFound,
        // A 408 is the server saying it gave up waiting for the request.
        408 => ErrorKind::Timeout,
        // 409 (retried by openai-python) and 425 Too Early (RFC 8470) are
        // transient: another attempt may well succeed.
        409 | 425 => ErrorKind::ServerError,
        // 3xx: failover never follows redirects (a key must not travel to
        // another host), so a redirect is a misconfigured base_url.
        300..=499 => ErrorKind::BadRequest,
        _ => ErrorKind::ServerError,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ErrorKind::*;

    fn kind(status: u16, body: &str) -> ErrorKind {
        let mut overloaded = DEFAULT_OVERLOADED_STATUSES.to_vec();
        overloaded.push(529);
        classify_status(status, &parse_error_body(body), &overloaded)
    }

    #[test]
    fn every_row_of_the_table() {
        assert_eq!(
            kind(
                400,
                r#"{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}"#
            ),
            TooLarge
        );
        assert_eq!(
            kind(
                400,
                r#"{"code":"x","error":"This model's maximum prompt length is 131072 but the request contains 200000 tokens."}"#
            ),
            TooLarge
        );
        assert_eq!(
            kind(
                403,
                r#"{"error":{"code":403,"message":"Input flagged by moderation"}}"#
            ),
            BadRequest
        );
        assert_eq!(
            kind(
                403,
                r#"{"code":"x","error":"Your team doesn't have any credits yet."}"#
            ),
            InsufficientCredits
        );
        assert_eq!(
            kind(
                429,
                r#"{"code":"x","error":"You have used all available credits."}"#
            ),
            InsufficientCredits
        );
        assert_eq!(
            kind(
                500,
                r#"{"error":{"code":"rate_limit_exceeded","message":"slow"}}"#
            ),
            RateLimited
        );
        assert_eq!(
            kind(
                429,
                r#"{"error":{"type":"rate_limit_error","message":"slow down"}}"#
            ),
            RateLimited
        );
        assert_eq!(
            kind(
                400,
                r#"{"error":{"code":400,"status":"RESOURCE_EXHAUSTED"}}"#
            ),
            RateLimited
        );
        for s in [502, 503, 504, 520, 522, 524, 529] {
            assert_eq!(kind(s, ""), Overloaded, "{s}");
        }
        assert_eq!(
            kind(500, r#"{"error":{"message":"boom","type":"server_error"}}"#),
            ServerError
        );
        assert_eq!(kind(501, "oops"), ServerError);
        // The server gave up waiting for the request: a timeout, retried.
        assert_eq!(kind(408, ""), Timeout);
        assert_eq!(kind(409, ""), ServerError);
        assert_eq!(kind(425, ""), ServerError);
        assert_eq!(kind(600, ""), ServerError);
        assert_eq!(kind(999, ""), ServerError);
        assert_eq!(
            kind(
                404,
                r#"{"error":{"message":"The model `gpt-9` does not exist"}}"#
            ),
            NotFound
        );
        assert_eq!(
            kind(413, "<html>413 Request Entity Too Large</html>"),
            TooLarge
        );
        assert_eq!(
            kind(
                413,
                r#"{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}"#
            ),
            TooLarge
        );
        assert_eq!(kind(307, ""), BadRequest);
        assert_eq!(kind(402, ""), InsufficientCredits);
        assert_eq!(
            kind(
                429,
                r#"{"error":{"code":"insufficient_quota","message":"You exceeded your current quota"}}"#
            ),
            InsufficientCredits
        );
        assert_eq!(
            kind(
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}"#
            ),
            InsufficientCredits
        );
        assert_eq!(kind(401, r#"{"error":{"code":"invalid_api_key"}}"#), Auth);
        assert_eq!(kind(403, "forbidden"), Auth);
        assert_eq!(
            kind(
                400,
                r#"{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"reason":"API_KEY_INVALID"}]}}"#
            ),
            Auth
        );
        assert_eq!(
            kind(
                400,
                r#"{"code":"Client specified an invalid argument","error":"Incorrect API key provided: xai-****."}"#
            ),
            Auth
        );
        assert_eq!(
            kind(
                400,
                r#"{"error":{"code":"context_length_exceeded","message":"This model's maximum context length is 128000 tokens"}}"#
            ),
            TooLarge
        );
        assert_eq!(
            kind(
                429,
                r#"{"error":{"code":"rate_limit_exceeded","message":"Request too large for gpt-4.1-nano on tokens per min (TPM): Limit 200000, Requested 1000000."}}"#
            ),
            TooLarge
        );
        assert_eq!(
            kind(
                400,
                r#"{"error":{"type":"invalid_request_error","message":"prompt is too long: 250000 tokens > 200000 maximum"}}"#
            ),
            TooLarge
        );
        for s in [400, 405, 410, 422, 451] {
            assert_eq!(kind(s, r#"{"error":"nope"}"#), BadRequest, "{s}");
        }
    }

    #[test]
    fn groq_overloaded_statuses_are_per_provider() {
        let groq = [498, 502, 503];
        assert_eq!(
            classify_status(498, &parse_error_body(""), &groq),
            Overloaded
        );
        assert_eq!(
            classify_status(504, &parse_error_body(""), &groq),
            ServerError
        );
        assert_eq!(
            classify_status(529, &parse_error_body(""), DEFAULT_OVERLOADED_STATUSES),
            ServerError
        );
    }

    #[test]
    fn messages_found_in_every_shape() {
        let m = |b: &str| parse_error_body(b).message;
        assert_eq!(
            m(r#"{"error":{"message":"a","code":null}}"#).as_deref(),
            Some("a")
        );
        assert_eq!(m(r#"{"error":"b"}"#).as_deref(), Some("b"));
        assert_eq!(m(r#"{"message":"c","code":1300}"#).as_deref(), Some("c"));
        assert_eq!(m(r#"{"detail":"d"}"#).as_deref(), Some("d"));
        assert_eq!(
            m("<html>bad gateway</html>").as_deref(),
            Some("<html>bad gateway</html>")
        );
        assert_eq!(m(""), None);
        // Gemini's OpenAI-compatible endpoint: the same error, in a list.
        let listed = r#"[{"error":{"code":400,"status":"INVALID_ARGUMENT","message":"API key not valid. Please pass a valid API key."}}]"#;
        assert_eq!(
            m(listed).as_deref(),
            Some("API key not valid. Please pass a valid API key.")
        );
        assert_eq!(kind(400, listed), Auth);
        assert_eq!(
            parse_error_body(r#"{"code":1300}"#).codes,
            vec!["1300".to_string()]
        );
        let long = "x".repeat(5000);
        assert!(m(&long).unwrap().chars().count() <= 501);
    }

    #[test]
    fn retryable_column_and_kind_names() {
        for k in [RateLimited, Overloaded, ServerError, Timeout, Connection] {
            assert!(k.retryable(), "{k:?}");
        }
        for k in [InsufficientCredits, Auth, NotFound, TooLarge, BadRequest] {
            assert!(!k.retryable(), "{k:?}");
        }
        for k in ErrorKind::ALL {
            assert_eq!(ErrorKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(ErrorKind::parse("Auth"), None);
        let set = KindSet::of(&[Auth, BadRequest]);
        assert!(set.contains(Auth) && set.contains(BadRequest) && !set.contains(NotFound));
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![Auth, BadRequest]);
        assert_eq!(
            [NotFound].into_iter().collect::<KindSet>(),
            KindSet::of(&[NotFound])
        );
    }
}
