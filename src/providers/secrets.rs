//! Secrets a provider might echo back: which headers are credentials, what
//! of a header value or a URL is secret, and redaction of text and JSON.

use serde_json::Value;

/// Whether a header carries a credential: sent marked sensitive, redacted
/// from anything a provider echoes back, and never sent over plain http to
/// a remote host. `Idempotency-Key` is an identifier, not a secret.
pub fn is_credential_header(name: &str) -> bool {
    let lower = name.trim().to_ascii_lowercase();
    const NAMES: [&str; 6] = [
        "authorization",
        "proxy-authorization",
        "cookie",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
    ];
    if lower == "idempotency-key" {
        return false;
    }
    NAMES.contains(&lower.as_str())
        || ["-key", "-token", "-secret", "-auth", "-authorization"]
            .iter()
            .any(|suffix| lower.ends_with(suffix))
}

/// Shorter header values (and parts) are not searched for in text:
/// redacting them would mangle ordinary words (`theme=dark`).
const MIN_SECRET_LEN: usize = 8;
/// An API key is searched for down to this length: shorter ones (`"k"` in a
/// test) would redact single letters.
pub(super) const MIN_KEY_LEN: usize = 4;

/// What a provider could echo of these credential headers: each value whole
/// and its secret parts — the token after an auth scheme (`Bearer `,
/// `Basic `), each cookie's value. Longest first, so a whole value is
/// replaced before any part of it.
pub fn secret_values(headers: &[(String, String)]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |s: &str| {
        let s = s.trim();
        if s.len() >= MIN_SECRET_LEN && !out.iter().any(|o| o == s) {
            out.push(s.to_string());
        }
    };
    for (name, value) in headers {
        add(value);
        let lower = name.to_ascii_lowercase();
        if lower == "cookie" {
            for pair in value.split(';') {
                add(pair.split_once('=').map_or(pair, |(_, v)| v));
            }
        } else if let Some((scheme, token)) = value.trim().split_once(' ') {
            // `Bearer X`, `Basic X`, `Token X`: the credential is X.
            if !scheme.is_empty()
                && scheme
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            {
                add(token);
            }
            // `Basic base64(user:password)`: the password, decoded, too.
            if scheme.eq_ignore_ascii_case("basic") {
                use base64::Engine as _;
                let decoded = base64::engine::general_purpose::STANDARD.decode(token.trim());
                if let Some(pair) = decoded.ok().and_then(|b| String::from_utf8(b).ok()) {
                    add(&pair);
                    add(pair.split_once(':').map_or("", |(_, p)| p));
                }
            }
        }
    }
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out
}

/// Adds `more` to `secrets`, keeping them unique and longest first (so a
/// whole value is replaced before any part of it). Each is added as a
/// provider may echo it too: lowercased; percent-encoded as a link carries
/// a key with `+`, `/` or `=` (every such character escaped, or all but
/// `/`, as Python's `quote` does; upper- and lowercase hex); with `\/` for
/// `/`, as text quoting JSON may have it.
pub fn add_secrets(secrets: &mut Vec<String>, more: &[String]) {
    let mut forms = Vec::with_capacity(more.len() * 2);
    for secret in more {
        forms.push(secret.clone());
        forms.push(secret.to_lowercase());
        if secret.contains('/') {
            forms.push(secret.replace('/', "\\/"));
        }
        // (One with a `%` is taken for encoded already: not encoded again.)
        if secret.contains('%') {
            continue;
        }
        for escaped in [URL_ESCAPED, PATH_ESCAPED] {
            let encoded = percent_encoding::utf8_percent_encode(secret, escaped).to_string();
            if encoded != *secret {
                forms.push(lowercase_hex(&encoded));
                forms.push(encoded.to_lowercase());
                forms.push(encoded);
            }
        }
    }
    merge_secrets(secrets, &forms);
}

/// Adds secrets already in all their forms (another list [`add_secrets`]
/// made), keeping them unique and longest first.
pub fn merge_secrets(secrets: &mut Vec<String>, more: &[String]) {
    if more.is_empty() {
        return;
    }
    for secret in more {
        if !secret.is_empty() && !secrets.contains(secret) {
            secrets.push(secret.clone());
        }
    }
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
}

/// What a URL's query escapes in full: all but letters, digits and `-._~`.
const URL_ESCAPED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// What a path escapes (Python's `quote`, JavaScript's `encodeURI` for
/// these): as [`URL_ESCAPED`], but `/` left as it is.
const PATH_ESCAPED: &percent_encoding::AsciiSet = &URL_ESCAPED.remove(b'/');

/// `encoded` with the hex digits of its escapes lowercased (`%2f`).
fn lowercase_hex(encoded: &str) -> String {
    let mut out = String::with_capacity(encoded.len());
    let mut escape_left = 0;
    for c in encoded.chars() {
        if c == '%' {
            escape_left = 2;
            out.push(c);
        } else if escape_left > 0 {
            escape_left -= 1;
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The credentials a URL carries: its user part (a password, or a token
/// given as the user name, and the `Basic` token an HTTP client builds from
/// them), and the values of query parameters whose names say they are
/// credentials (`?key=`, `?subscription-key=`, `?access_token=`, `?sig=`,
/// `?code=`). A URL without a scheme is read as `http://`, as proxy
/// variables are.
pub fn url_secrets(url: &str) -> Vec<String> {
    use base64::Engine as _;
    let url = url.trim();
    let with_scheme;
    let url = if url.contains("://") {
        url
    } else {
        with_scheme = format!("http://{url}");
        &with_scheme
    };
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let user = parsed.username();
    let password = parsed.password().unwrap_or("");
    if !user.is_empty() || !password.is_empty() {
        let users = [user.to_string(), percent_decoded(user)];
        let passwords = [password.to_string(), percent_decoded(password)];
        for user in &users {
            for pass in &passwords {
                let pair = format!("{user}:{pass}");
                out.push(base64::engine::general_purpose::STANDARD.encode(pair));
            }
        }
        if password.is_empty() {
            // A token given as the user name (`https://TOKEN@host`).
            out.extend(users);
        } else {
            out.extend(passwords);
        }
    }
    // Query values, both as decoded and as written in the URL.
    for pair in parsed.query().unwrap_or("").split('&') {
        let Some((name, raw)) = pair.split_once('=') else {
            continue;
        };
        if is_credential_parameter(&percent_decoded(name)) {
            out.push(percent_decoded(&raw.replace('+', " ")));
            out.push(raw.to_string());
        }
    }
    out.retain(|s| s.len() >= MIN_KEY_LEN);
    out
}

/// Whether a query parameter's name says it carries a credential, by whole
/// words (`subscription-key`, `access_token`, `apiKey`, `code`), so that
/// `token_region` or `author` are not.
fn is_credential_parameter(name: &str) -> bool {
    const WORDS: [&str; 14] = [
        "key",
        "apikey",
        "token",
        "secret",
        "sig",
        "signature",
        "password",
        "pwd",
        "pass",
        "code",
        "auth",
        "jwt",
        "credential",
        "credentials",
    ];
    const SUFFIXES: [&str; 3] = ["token", "secret", "password"];
    let mut words: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.' | ' ') {
            words.push(std::mem::take(&mut current));
        } else if c.is_ascii_uppercase() && previous_lower {
            // camelCase: `apiKey` is `api` + `key`; `KEY` and `API_KEY` stay whole.
            let word = c.to_ascii_lowercase().to_string();
            words.push(std::mem::replace(&mut current, word));
        } else {
            current.push(c.to_ascii_lowercase());
        }
        previous_lower = c.is_ascii_lowercase();
    }
    words.push(current);
    let words: Vec<&str> = words
        .iter()
        .map(String::as_str)
        .filter(|w| !w.is_empty())
        .collect();
    match words.as_slice() {
        // `token_region` names a region, not a token: the credential word
        // must end the name (`access_token`, `subscription-key`) or be it.
        [.., last] => WORDS.contains(last) || SUFFIXES.iter().any(|s| last.ends_with(s)),
        [] => false,
    }
}

/// `%XX` escapes decoded (lossy on invalid UTF-8).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |at: usize| bytes.get(at).and_then(|b| (*b as char).to_digit(16));
        if bytes[i] == b'%' {
            if let (Some(high), Some(low)) = (hex(i + 1), hex(i + 2)) {
                out.push((high * 16 + low) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A body a provider sent back, as text with the secrets removed, and
/// parsed when it is JSON. JSON may escape any character of a secret (`\/`,
/// `\u002f`), so the decoded strings are searched too, and the body
/// re-serialised when one held a secret.
pub fn redacted_body(secrets: &[String], body: &[u8]) -> (String, Option<Value>) {
    let raw = String::from_utf8_lossy(body);
    match serde_json::from_str::<Value>(&raw) {
        Ok(mut json) => {
            let text = if !secrets.is_empty() && redact_json(&mut json, secrets) {
                json.to_string()
            } else {
                redact(&raw, secrets)
            };
            (text, Some(json))
        }
        Err(_) => (redact(&raw, secrets), None),
    }
}

/// A run of at least this many leading characters of a secret is redacted
/// too: an echo cut short (`Incorrect API key provided: sk-proj-abc…`).
/// Shorter runs could be ordinary text (`sk-proj-` alone is no secret), so
/// only a secret longer than this has its prefixes searched for.
const MIN_PREFIX_LEN: usize = 16;

/// `text` with every secret, and every run of at least [`MIN_PREFIX_LEN`]
/// of its leading characters, replaced by `<redacted>`.
pub fn redact(text: &str, secrets: &[String]) -> String {
    redacted(text, secrets).unwrap_or_else(|| text.to_string())
}

/// [`redact`] for a string already owned: kept as it is, uncopied, when it
/// holds no secret (a request id, a finish reason: every response has one).
pub fn redact_owned(text: String, secrets: &[String]) -> String {
    redacted(&text, secrets).unwrap_or(text)
}

/// `text` redacted, or `None` when it holds no secret (nothing copied).
fn redacted(text: &str, secrets: &[String]) -> Option<String> {
    // Every span of `text` that echoes a secret, found in `text` as it
    // came: where forms of one secret overlap (its raw and its encoded form
    // agree on their first characters, then part), their spans join, so
    // the longest echo goes whole whichever form is tried first.
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for secret in secrets {
        spans.extend(echoes(text, secret));
    }
    if spans.is_empty() {
        return None;
    }
    spans.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut rest = 0;
    let mut spans = spans.into_iter().peekable();
    while let Some((start, mut end)) = spans.next() {
        while let Some(&(next, next_end)) = spans.peek() {
            // (Back to back, two echoes stay two.)
            if next >= end {
                break;
            }
            end = end.max(next_end);
            spans.next();
        }
        out.push_str(&text[rest..start]);
        out.push_str("<redacted>");
        rest = end;
    }
    out.push_str(&text[rest..]);
    Some(out)
}

/// Where `text` echoes `secret`: each occurrence of its first
/// [`MIN_PREFIX_LEN`] characters (the whole secret, when it is no longer),
/// with as much of the rest of the secret as follows it. One substring
/// search per secret, as for a whole match.
fn echoes(text: &str, secret: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    if secret.is_empty() {
        return spans;
    }
    let needle = match secret.char_indices().nth(MIN_PREFIX_LEN) {
        Some((end, _)) => &secret[..end],
        None => secret,
    };
    let mut from = 0;
    while let Some(at) = text[from..].find(needle) {
        let found = from + at;
        let mut len = text.as_bytes()[found..]
            .iter()
            .zip(secret.as_bytes())
            .take_while(|(a, b)| a == b)
            .count();
        while !text.is_char_boundary(found + len) {
            len -= 1; // agreed only up to the middle of a character
        }
        // (At least the needle, which ends where a character does.)
        spans.push((found, found + len));
        from = found + len;
    }
    spans
}

fn redact_json(value: &mut Value, secrets: &[String]) -> bool {
    match value {
        Value::String(s) => match redacted(s, secrets) {
            Some(replaced) => {
                *s = replaced;
                true
            }
            None => false,
        },
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |hit, v| redact_json(v, secrets) | hit),
        Value::Object(map) => {
            // A key can echo a secret too (a provider listing what it was
            // sent); keys redacted alike keep one of their values.
            let keys_hit = map.keys().any(|k| redacted(k, secrets).is_some());
            if keys_hit {
                for (key, v) in std::mem::take(map) {
                    map.insert(redacted(&key, secrets).unwrap_or(key), v);
                }
            }
            map.values_mut()
                .fold(keys_hit, |hit, v| redact_json(v, secrets) | hit)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_whose_forms_part_after_sixteen_characters_is_redacted_whole() {
        // Its raw and encoded forms agree on their first 16 characters: the
        // one tried first must not leave the rest of the other's echo.
        let key = "abcdefghijklmnop+qrstuvwxyz0123456789/ABC=".to_string();
        let mut secrets = Vec::new();
        add_secrets(&mut secrets, std::slice::from_ref(&key));
        let encoded = "abcdefghijklmnop%2Bqrstuvwxyz0123456789%2FABC%3D";
        for echoed in [key.clone(), key.to_lowercase(), encoded.to_string()] {
            let text = redact(&format!("echo key={echoed}!"), &secrets);
            assert_eq!(text, "echo key=<redacted>!");
        }
    }

    #[test]
    fn a_secret_echoed_encoded_or_lowercased_is_redacted() {
        let mut secrets = Vec::new();
        add_secrets(&mut secrets, &["sk-AAAA+secret/KEY=".to_string()]);
        for echoed in [
            "https://x.example/?k=sk-AAAA%2Bsecret%2FKEY%3D",
            "https://x.example/?k=sk-AAAA%2bsecret%2fKEY%3d",
            "https://x.example/?k=sk-AAAA%2Bsecret/KEY%3D",
            "plain sk-AAAA+secret/KEY=",
            "lowered sk-aaaa+secret/key=",
            r#"quoted JSON {"key": "sk-AAAA+secret\/KEY="}"#,
        ] {
            let text = redact(echoed, &secrets);
            assert!(!text.contains("secret"), "{text}");
        }
        // Merged into another list, its forms are not multiplied.
        let mut merged = vec!["other-secret-0123".to_string()];
        merge_secrets(&mut merged, &secrets);
        assert_eq!(merged.len(), secrets.len() + 1);
        // A secret URLs and case leave alone gets no other form.
        let mut plain = Vec::new();
        add_secrets(&mut plain, &["sk-proj-abc_def-123.x~y".to_string()]);
        assert_eq!(plain.len(), 1);
    }

    #[test]
    fn a_secrets_leading_characters_are_redacted_when_sixteen_or_more() {
        let key = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ".to_string(); // 34 characters
        let secrets = [key.clone(), "short-12".to_string()];
        let cut = &key[..30];
        assert_eq!(
            redact(&format!("bad key {cut}... and {key}!"), &secrets),
            "bad key <redacted>... and <redacted>!"
        );
        // Sixteen leading characters are enough; fifteen are not.
        assert_eq!(
            redact(&format!("[{}]", &key[..16]), &secrets),
            "[<redacted>]"
        );
        assert_eq!(redact(&key[..15], &secrets), key[..15]);
        // Twice, back to back, and a run that leaves the secret part-way.
        let twice = format!("{}{}", &key[..20], &key[..17]);
        assert_eq!(redact(&twice, &secrets), "<redacted><redacted>");
        assert_eq!(
            redact(&format!("{}xyz", &key[..18]), &secrets),
            "<redacted>xyz"
        );
        // A secret of 16 or fewer characters is found whole only.
        assert_eq!(redact("short-12 short-1", &secrets), "<redacted> short-1");
        // A non-ASCII secret whose echo differs inside a character.
        let wide = vec!["ключ-секрет-длинный-é".to_string()];
        assert_eq!(redact("ключ-секрет-длинный-è", &wide), "<redacted>è");
    }

    /// Found by `secrets_props`: a key echoed as an object's key survived
    /// re-serialisation (when a value held it too, or escaped, when none did).
    #[test]
    fn a_secret_in_a_json_key_is_redacted() {
        let secrets = vec!["sk-0a00A0_A".to_string()];
        for body in [
            r#"{"error":{"sk-0a00A0_A":0,"message":"bad key sk-0a00A0_A"}}"#,
            r#"{"error":{"\u0073k-0a00A0_A":0}}"#,
        ] {
            let (text, json) = redacted_body(&secrets, body.as_bytes());
            // The text as JSON, its escapes read: no key or value holds it.
            let shown: Value = serde_json::from_str(&text).unwrap();
            assert!(!shown.to_string().contains("sk-0a00A0_A"), "{text}");
            let json = json.unwrap().to_string();
            assert!(!json.contains("sk-0a00A0_A"), "{json}");
        }
    }

    #[test]
    fn credential_headers_are_the_documented_ones() {
        for name in [
            "Authorization",
            "proxy-authorization",
            "Cookie",
            "x-api-key",
            "api-key",
            "X-Goog-Api-Key",
            "X-Custom-Key",
            "x-gateway-token",
            "x-client-secret",
        ] {
            assert!(is_credential_header(name), "{name}");
        }
        for name in ["Idempotency-Key", "x-trace", "content-type", "keyboard"] {
            assert!(!is_credential_header(name), "{name}");
        }
    }

    #[test]
    fn secrets_in_urls_are_found() {
        let found = url_secrets(
            "https://u:p%40ss-word-99@gw.example/v1?api-version=2024-10-21&subscription-key=SUB-KEY-123&sig=a%2Bb%3Dcc",
        );
        for secret in [
            "p%40ss-word-99",
            "p@ss-word-99",
            "SUB-KEY-123",
            "a+b=cc",
            "a%2Bb%3Dcc",
        ] {
            assert!(
                found.iter().any(|s| s == secret),
                "{secret} not in {found:?}"
            );
        }
        // base64("u:p@ss-word-99"), the Basic token a client builds.
        assert!(
            found.iter().any(|s| s == "dTpwQHNzLXdvcmQtOTk="),
            "{found:?}"
        );
        assert!(
            !found.iter().any(|s| s.contains("2024")),
            "api-version is no secret"
        );
        assert!(url_secrets("https://api.openai.com/v1").is_empty());
    }

    #[test]
    fn a_basic_headers_decoded_password_is_a_secret() {
        // base64("user:hunter2-password")
        let found = secret_values(&[(
            "Authorization".into(),
            "Basic dXNlcjpodW50ZXIyLXBhc3N3b3Jk".into(),
        )]);
        assert!(found.iter().any(|s| s == "hunter2-password"), "{found:?}");
    }

    #[test]
    fn user_names_used_as_tokens_and_schemeless_urls() {
        let found = url_secrets("http://USERONLYTOKEN_abc123@gw.example:8080/v1");
        assert!(
            found.iter().any(|s| s == "USERONLYTOKEN_abc123"),
            "{found:?}"
        );
        // base64("USERONLYTOKEN_abc123:")
        assert!(
            found.iter().any(|s| s == "VVNFUk9OTFlUT0tFTl9hYmMxMjM6"),
            "{found:?}"
        );
        let found = url_secrets("pu:SCHEMELESSPW_123@proxy.corp:3128");
        assert!(found.iter().any(|s| s == "SCHEMELESSPW_123"), "{found:?}");
    }

    #[test]
    fn credential_parameters_are_named_by_whole_words() {
        for name in [
            "key",
            "api-key",
            "api_key",
            "apiKey",
            "subscription-key",
            "access_token",
            "code",
            "sig",
            "X-Amz-Signature",
            "client_secret",
            "pwd",
        ] {
            assert!(is_credential_parameter(name), "{name}");
        }
        for name in ["KEY", "API_KEY", "TOKEN", "Api-Key"] {
            assert!(is_credential_parameter(name), "{name}");
        }
        for name in [
            "token_region",
            "design",
            "author",
            "monkey",
            "api-version",
            "keyboard",
        ] {
            assert!(!is_credential_parameter(name), "{name}");
        }
    }
}
