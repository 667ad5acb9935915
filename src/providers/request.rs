//! Building a request: what a provider is asked for a job (and whether it
//! can do it), the body through its wire with the provider's `params`, the
//! URL, headers and secrets every wire sends, and the key put in per
//! attempt.

use serde_json::{Map, Value};

use super::secrets::{add_secrets, is_credential_header, secret_values, url_secrets, MIN_KEY_LEN};
use super::types::{embedding_model, ChatRequest, EmbedRequest, Job, ProviderConfig, Wire};
use super::wire_format::Parts;
use super::wires::format;
use crate::http::HttpRequest;
use crate::stream::Framing;

/// The request for one job to `provider`, without its key.
pub fn build(provider: &ProviderConfig, job: &Job) -> HttpRequest {
    match job {
        Job::Chat(request) => build_request(provider, request),
        Job::Embed(request) => build_embed_request(provider, request),
        Job::Stream(request) => build_stream_request(provider, request),
        Job::Media(request) | Job::MediaStream(request) => {
            super::media::build_media_request(provider, request)
        }
    }
}

/// Why `provider` cannot do `job`, if it cannot.
pub fn unable_for(provider: &ProviderConfig, job: &Job) -> Option<String> {
    match job {
        Job::Chat(request) | Job::Stream(request) => unable(provider, request),
        Job::Embed(request) => unable_to_embed(provider).or_else(|| {
            let limit = format(provider.wire).max_embed_batch()?;
            (request.inputs.len() > limit).then(|| {
                format!(
                    "{} cannot embed {} texts in one call (at most {limit})",
                    provider.name,
                    request.inputs.len()
                )
            })
        }),
        Job::Media(request) | Job::MediaStream(request) => {
            super::media::unable_media(provider, request)
        }
    }
}

/// The call's hints `provider` is not sent although its wire has them (a
/// combination it refuses), said for the DEBUG log: `None` when none is
/// dropped. A hint the wire lacks altogether (`seed` on Anthropic) is
/// noted by the Python client when the call is made.
pub fn dropped_hints(provider: &ProviderConfig, job: &Job) -> Option<String> {
    let why = match job {
        Job::Chat(request) | Job::Stream(request) => {
            format(provider.wire).dropped_hints(provider, request)
        }
        Job::Embed(_) | Job::Media(_) | Job::MediaStream(_) => None,
    }?;
    Some(format!("{}: {why}", provider.name))
}

/// The request for one call to `provider`, without its key: built once per
/// call, then [`authorize`]d for each attempt (a key may rotate between them).
pub fn build_request(provider: &ProviderConfig, request: &ChatRequest) -> HttpRequest {
    let (path, mut body, headers) = chat_parts(provider, request);
    if let Value::Object(fields) = &mut body {
        // A stream's options from `params`: refused on a request that
        // does not stream.
        fields.remove("stream_options");
    }
    finish_request(provider, &path, &body, headers, &request.headers)
}

/// The streaming request for one call to `provider`, without its key: the
/// chat request, asking for a stream in the wire's way.
pub fn build_stream_request(provider: &ProviderConfig, request: &ChatRequest) -> HttpRequest {
    let wire = format(provider.wire);
    let (mut path, mut body, headers) = chat_parts(provider, request);
    if let Value::Object(fields) = &mut body {
        wire.ask_to_stream(provider, &mut path, fields);
    }
    let mut request = finish_request(provider, &path, &body, headers, &request.headers);
    for (name, value) in &mut request.headers {
        if name.eq_ignore_ascii_case("accept") {
            *value = match wire.framing() {
                Framing::Ndjson => "application/x-ndjson".into(),
                Framing::Sse => "text/event-stream".into(),
            };
        }
    }
    request
}

/// A chat request's path, body (with the provider's `params`) and the
/// wire's own headers.
fn chat_parts(provider: &ProviderConfig, request: &ChatRequest) -> Parts {
    let model = request.model.as_deref().unwrap_or(&provider.model);
    let wire = format(provider.wire);
    let (path, mut body, headers) = wire.build_chat(provider, model, request);
    if let (Some(Value::Object(params)), Value::Object(fields)) = (&provider.params, &mut body) {
        merge_params(fields, params);
        wire.after_params(provider, request, fields);
    }
    (path, body, headers)
}

/// The embeddings request for one call to `provider`, without its key.
/// `params` are not merged: they are chat fields (`reasoning_effort`) an
/// embeddings endpoint would refuse.
pub fn build_embed_request(provider: &ProviderConfig, request: &EmbedRequest) -> HttpRequest {
    let model = embedding_model(provider, request);
    let (path, body) = format(provider.wire).build_embed(provider, model, request);
    finish_request(provider, &path, &body, Vec::new(), &request.headers)
}

/// Why `provider` cannot embed, if it cannot.
pub fn unable_to_embed(provider: &ProviderConfig) -> Option<String> {
    let why = match format(provider.wire).no_embeddings() {
        Some(why) => why,
        None if !provider.embeds => "it has no embeddings API",
        None => return None,
    };
    Some(format!("{} cannot embed: {why}", provider.name))
}

/// What `provider`'s configuration holds secret: its key, its credential
/// headers' values, its URL's credentials. A client removes every
/// provider's from every answer: a key one provider echoes back may be
/// another's (a gateway in front of several, a key pasted in the wrong
/// place).
pub fn config_secrets(provider: &ProviderConfig) -> Vec<String> {
    let credentials: Vec<(String, String)> = provider
        .headers
        .iter()
        .filter(|(name, _)| is_credential_header(name))
        .cloned()
        .collect();
    let mut secrets = Vec::new();
    add_secrets(&mut secrets, &secret_values(&credentials));
    add_secrets(&mut secrets, &url_secrets(&provider.base_url));
    if let Some(key) = provider.api_key.as_deref() {
        if key.len() >= MIN_KEY_LEN {
            add_secrets(&mut secrets, &[key.to_string()]);
        }
    }
    secrets
}

/// The request every wire sends: its body as JSON, the provider's and the
/// call's headers (credential ones kept apart, to be redacted), the secrets
/// the URL carries.
pub(super) fn finish_request(
    provider: &ProviderConfig,
    path: &str,
    body: &Value,
    mut headers: Vec<(String, String)>,
    call_headers: &[(String, String)],
) -> HttpRequest {
    headers.push(("content-type".into(), "application/json".into()));
    headers.push(("accept".into(), "application/json".into()));
    let mut secret_headers = Vec::new();
    // A call's header replaces the provider's of the same name: each goes
    // out once.
    for (name, value) in provider.headers.iter().chain(call_headers) {
        let list = if is_credential_header(name) {
            &mut secret_headers
        } else {
            &mut headers
        };
        list.retain(|(n, _): &(String, String)| !n.eq_ignore_ascii_case(name));
        list.push((name.clone(), value.clone()));
    }
    let mut secrets = Vec::new();
    add_secrets(&mut secrets, &secret_values(&secret_headers));
    if provider.base_url.contains('@') || provider.base_url.contains('?') {
        // Only a user part or a query can hold a credential (checked only
        // then: parsing the URL for every call would cost more than the rest).
        add_secrets(&mut secrets, &url_secrets(&provider.base_url));
    }
    HttpRequest {
        url: endpoint_url(&provider.base_url, path),
        headers,
        secrets,
        secret_headers,
        body: serde_json::to_vec(body).unwrap_or_default().into(),
        form: None,
    }
}

/// Fields that carry the conversation and the mode: `params` never
/// overrides them.
const PROTECTED_FIELDS: [&str; 6] = [
    "model",
    "messages",
    "contents",
    "system",
    "systemInstruction",
    "stream",
];

/// Deep-merges a provider's `params` into a request body: objects key by
/// key, anything else replaced; the conversation and mode fields kept.
fn merge_params(body: &mut Map<String, Value>, params: &Map<String, Value>) {
    /// `from`'s fields into `into`, objects merged key by key.
    fn merge_fields<'a>(
        into: &mut Map<String, Value>,
        from: impl IntoIterator<Item = (&'a String, &'a Value)>,
    ) {
        for (key, value) in from {
            match (into.get_mut(key), value) {
                (Some(Value::Object(existing)), Value::Object(fields)) => {
                    merge_fields(existing, fields)
                }
                _ => {
                    into.insert(key.clone(), value.clone());
                }
            }
        }
    }
    let allowed = params
        .iter()
        .filter(|(key, _)| !PROTECTED_FIELDS.contains(&key.as_str()));
    merge_fields(body, allowed);
}

/// Why `provider`'s wire cannot express `request` (a feature it lacks), if
/// it cannot: the provider is skipped rather than sent a request it would
/// refuse.
pub fn unable(provider: &ProviderConfig, request: &ChatRequest) -> Option<String> {
    let why = format(provider.wire).unable(provider, request)?;
    Some(format!("{} cannot serve this call: {why}", provider.name))
}

/// The header `provider`'s key travels in.
pub fn key_header_name(provider: &ProviderConfig) -> &'static str {
    key_header_for(provider.wire, provider.entra_token)
}

/// The header a key travels in on `wire` (`entra_token`: an Azure key that
/// is an Entra ID token).
pub fn key_header_for(wire: Wire, entra_token: bool) -> &'static str {
    format(wire).key_header(entra_token)
}

/// Whether the caller set a credential header under the name the key
/// travels in (a gateway's token in `Authorization`): that one is sent,
/// and the key (or its callable) is not needed.
pub fn key_header_given(provider: &ProviderConfig, request: &HttpRequest) -> bool {
    let name = key_header_name(provider);
    request
        .secret_headers
        .iter()
        .any(|(given, _)| given.eq_ignore_ascii_case(name))
}

/// `request` with `key` in the header the wire carries it in.
pub fn authorize(
    provider: &ProviderConfig,
    request: &HttpRequest,
    key: Option<&str>,
) -> HttpRequest {
    let mut request = request.clone();
    if let Some(key) = key {
        if !key_header_given(provider, &request) {
            let name = key_header_name(provider);
            let value = match name {
                "authorization" => format!("Bearer {key}"),
                _ => key.to_string(),
            };
            request.secret_headers.insert(0, (name.to_string(), value));
        }
        // The key itself is searched for down to MIN_KEY_LEN: a key is never
        // an ordinary word, whatever its length.
        if key.len() >= MIN_KEY_LEN {
            add_secrets(&mut request.secrets, &[key.to_string()]);
        }
    }
    request
}

/// `base_url` + `path`, the path going before any query (Azure's
/// `?api-version=...` rides on the base URL).
pub fn endpoint_url(base_url: &str, path: &str) -> String {
    let (base, query) = match base_url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (base_url, None),
    };
    let (path, path_query) = match path.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (path, None),
    };
    let mut url = format!("{}{path}", base.trim_end_matches('/'));
    let queries: Vec<&str> = path_query.into_iter().chain(query).collect();
    if !queries.is_empty() {
        url.push('?');
        url.push_str(&queries.join("&"));
    }
    url
}

/// About how many tokens one request of `job` to `provider` uses, as a
/// `tpm` limit charges it before the answer tells: its text's characters
/// over four, plus the most it asks the model to write (`max_tokens` as
/// the wire sends it). Images and tool schemas are not counted; the
/// answer's usage corrects it.
pub fn estimated_tokens(provider: &ProviderConfig, job: &Job) -> u64 {
    let chars = |text: &str| text.chars().count() as u64;
    match job {
        Job::Chat(request) | Job::Stream(request) => {
            let mut input = request.system.as_deref().map_or(0, chars);
            for message in &request.messages {
                for part in &message.parts {
                    if let crate::conversation::Part::Text(text) = part {
                        input += chars(text);
                    }
                }
                for call in &message.tool_calls {
                    input += chars(&call.arguments_json);
                }
            }
            let output = format(provider.wire).max_tokens_sent(provider, request);
            input.div_ceil(4) + output.unwrap_or(0)
        }
        Job::Embed(request) => {
            let input: u64 = request.inputs.iter().map(|text| chars(text)).sum();
            input.div_ceil(4)
        }
        Job::Media(request) | Job::MediaStream(request) => match &request.media {
            crate::providers::Media::Speech { text, .. } => chars(text).div_ceil(4),
            _ => 0,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{messages, provider, sent};
    use super::*;

    #[test]
    fn url_and_headers() {
        let p = provider(Wire::OpenAI);
        let r = sent(&p);
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

    #[test]
    fn the_path_goes_before_the_query() {
        let u = |base: &str| endpoint_url(base, "/chat/completions");
        assert_eq!(
            u("https://r.openai.azure.com/openai/deployments/d?api-version=2024-10-21"),
            "https://r.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-10-21"
        );
        assert_eq!(u("https://h/v1/"), "https://h/v1/chat/completions");
        assert_eq!(
            u("https://h/v1/?a=1&b=2"),
            "https://h/v1/chat/completions?a=1&b=2"
        );
        assert_eq!(
            endpoint_url(
                "https://h/v1beta?x=1",
                "/models/m:streamGenerateContent?alt=sse"
            ),
            "https://h/v1beta/models/m:streamGenerateContent?alt=sse&x=1"
        );
    }

    #[test]
    fn params_are_deep_merged_but_never_replace_the_conversation() {
        let mut p = provider(Wire::Anthropic);
        p.params = Some(serde_json::json!({
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "max_tokens": 9000,
            "model": "not-this",
            "messages": [],
            "metadata": {"user_id": "u1"},
        }));
        let mut req = ChatRequest {
            messages: messages(serde_json::json!([{"role": "user", "content": "Hi"}])),
            ..ChatRequest::default()
        };
        req.stop = vec!["END".into()];
        req.seed = Some(7);
        req.top_p = Some(0.97);
        let body: Value = serde_json::from_slice(&build_request(&p, &req).body).unwrap();
        assert_eq!(body["thinking"]["budget_tokens"], 1024);
        assert_eq!(
            body["max_tokens"], 9000,
            "params win over what the library set"
        );
        assert_eq!(body["model"], "m-1");
        assert_eq!(body["messages"][0]["content"], "Hi");
        assert_eq!(body["stop_sequences"], serde_json::json!(["END"]));
        assert_eq!(body["top_p"], 0.97, "thinking takes a top_p from 0.95 to 1");
        assert!(
            body.get("seed").is_none(),
            "Anthropic has no seed: dropped, never renamed"
        );
    }
}
