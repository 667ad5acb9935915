//! Server wait hints: response headers and bodies -> `Option<Duration>`.
//!
//! Every parser here is total: malformed, negative, infinite or NaN input
//! is "no hint" (`None`), never a panic. A well-formed wait longer than
//! [`MAX_WAIT`] — however long, even too long to represent — counts as
//! exactly [`MAX_WAIT`]: the provider asking for the longest wait must never
//! be retried soonest.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Response headers with lower-cased names, in arrival order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Headers(Vec<(String, String)>);

impl Headers {
    pub fn new() -> Self {
        Self(Vec::new())
    }

    pub fn push(&mut self, name: &str, value: &str) {
        self.0.push((name.to_ascii_lowercase(), value.to_string()));
    }

    /// The first value of `name` (which must be given in lower case).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<N: AsRef<str>, V: AsRef<str>> FromIterator<(N, V)> for Headers {
    fn from_iter<I: IntoIterator<Item = (N, V)>>(iter: I) -> Self {
        let mut headers = Headers::new();
        for (n, v) in iter {
            headers.push(n.as_ref(), v.as_ref());
        }
        headers
    }
}

/// The longest wait any hint or option means: 1e9 s (about 31 years). Over
/// every cap, and well inside what a `Duration` and an `f64` hold exactly.
pub const MAX_SECONDS: f64 = 1e9;
pub const MAX_WAIT: Duration = Duration::from_secs(1_000_000_000);

/// `x-should-retry`: `Some(true)` / `Some(false)` for the exact words, else `None`.
pub fn should_retry(headers: &Headers) -> Option<bool> {
    match headers.get("x-should-retry").map(str::trim) {
        Some("true") => Some(true),
        Some("false") => Some(false),
        _ => None,
    }
}

/// The wait a response asks for under the default policy:
/// `retry-after-ms`, then `retry-after` (seconds or HTTP-date), then the
/// provider hints. `None` when there is none or `x-should-retry: false`.
pub fn retry_after(headers: &Headers, body: Option<&str>, now: SystemTime) -> Option<Duration> {
    if should_retry(headers) == Some(false) {
        return None;
    }
    server_wait(headers, body, now)
}

/// The hinted wait, ignoring `x-should-retry`; at most [`MAX_WAIT`].
pub fn server_wait(headers: &Headers, body: Option<&str>, now: SystemTime) -> Option<Duration> {
    let wait = headers
        .get("retry-after-ms")
        .and_then(decimal_millis)
        .or_else(|| {
            let value = headers.get("retry-after")?;
            decimal_seconds(value).or_else(|| http_date_wait(value, now))
        })
        .or_else(|| body.and_then(gemini_retry_delay))
        .or_else(|| openai_reset(headers))
        .or_else(|| anthropic_reset(headers, now))?;
    Some(wait.min(MAX_WAIT))
}

/// A non-negative decimal: digits, optionally a fraction (`1`, `1.5`, `.5`).
/// Signs, exponents, `inf` and `nan` are rejected; so many digits that the
/// value overflows an `f64` read as infinity (a wait, capped later).
fn plain_decimal(value: &str) -> Option<f64> {
    let value = value.trim();
    let (int, frac) = value.split_once('.').unwrap_or((value, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() && frac.is_empty() || !digits(int) || !digits(frac) {
        return None;
    }
    value.parse::<f64>().ok().filter(|v| !v.is_nan())
}

/// A well-formed wait in seconds, at most [`MAX_WAIT`]; `None` when negative
/// or NaN.
pub fn wait_secs(value: f64) -> Option<Duration> {
    if value.is_nan() || value < 0.0 {
        return None;
    }
    Some(secs(value.min(MAX_SECONDS)).unwrap_or(MAX_WAIT))
}

/// Seconds as a `Duration`, or `None` when negative, not finite or too large.
pub fn secs(value: f64) -> Option<Duration> {
    if value < 0.0 {
        return None;
    }
    Duration::try_from_secs_f64(value).ok()
}

pub fn decimal_seconds(value: &str) -> Option<Duration> {
    plain_decimal(value).and_then(wait_secs)
}

pub fn decimal_millis(value: &str) -> Option<Duration> {
    plain_decimal(value).and_then(|ms| wait_secs(ms / 1000.0))
}

/// Seconds from `now` until `at`, negative when `at` is past: how the
/// reproduced clients compute a date's wait before comparing it (the
/// default policy's own readers clamp a past date to 0 instead).
pub fn signed_secs(at: SystemTime, now: SystemTime) -> f64 {
    match at.duration_since(now) {
        Ok(ahead) => ahead.as_secs_f64(),
        Err(behind) => -behind.duration().as_secs_f64(),
    }
}

/// An HTTP-date (IMF-fixdate, RFC 850 or asctime): the time until it, 0 if past.
pub fn http_date_wait(value: &str, now: SystemTime) -> Option<Duration> {
    let at = httpdate::parse_http_date(value.trim()).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Gemini: `error.details[]` entry of type `RetryInfo` with `retryDelay` ("48s", "1.5s").
pub fn gemini_retry_delay(body: &str) -> Option<Duration> {
    if !body.contains("retryDelay") {
        return None;
    }
    let json: serde_json::Value = serde_json::from_str(body).ok()?;
    // Gemini's OpenAI-compatible endpoint wraps its error in a list.
    let json = json
        .as_array()
        .and_then(|items| items.first())
        .unwrap_or(&json);
    let details = json.get("error")?.get("details")?.as_array()?;
    details.iter().find_map(|d| {
        let delay = d.get("retryDelay")?.as_str()?;
        decimal_seconds(delay.trim().strip_suffix('s')?)
    })
}

/// How long until an exhausted rate limit resets, from a success's headers
/// (OpenAI's or Anthropic's): the headroom is gone until then.
/// At most [`MAX_WAIT`], as every wait read from a response.
pub fn exhausted_reset(headers: &Headers, now: SystemTime) -> Option<Duration> {
    let reset = match (openai_reset(headers), anthropic_reset(headers, now)) {
        (Some(a), Some(b)) => a.max(b),
        (a, b) => a.or(b)?,
    };
    Some(reset.min(MAX_WAIT))
}

/// OpenAI: `x-ratelimit-reset-{requests,tokens}` Go durations, for a limit
/// whose `x-ratelimit-remaining-*` is 0. The longer one wins.
pub fn openai_reset(headers: &Headers) -> Option<Duration> {
    ["requests", "tokens"]
        .iter()
        .filter(|family| exhausted(headers.get(&format!("x-ratelimit-remaining-{family}"))))
        .filter_map(|family| go_duration(headers.get(&format!("x-ratelimit-reset-{family}"))?))
        .max()
}

/// Anthropic: `anthropic-ratelimit-*-reset` RFC 3339 times for a family whose
/// `-remaining` is 0. The `1970-01-01T00:00:00Z` placeholder is not a hint.
pub fn anthropic_reset(headers: &Headers, now: SystemTime) -> Option<Duration> {
    const FAMILIES: [&str; 4] = ["requests", "tokens", "input-tokens", "output-tokens"];
    FAMILIES
        .iter()
        .filter(|f| exhausted(headers.get(&format!("anthropic-ratelimit-{f}-remaining"))))
        .filter_map(|f| {
            let at = rfc3339(headers.get(&format!("anthropic-ratelimit-{f}-reset"))?)?;
            if at == UNIX_EPOCH {
                return None;
            }
            Some(at.duration_since(now).unwrap_or(Duration::ZERO))
        })
        .max()
}

/// The rate-limit headroom a response reported: what is left of its
/// request and token limits and when each resets (a time on the clock the
/// headers were read at). Fields a response does not carry are `None`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Headroom {
    pub requests: Option<u64>,
    pub tokens: Option<u64>,
    pub requests_reset: Option<SystemTime>,
    pub tokens_reset: Option<SystemTime>,
}

/// The headroom in a response's headers (the ones [`exhausted_reset`]
/// reads: OpenAI's `x-ratelimit-*`, Anthropic's `anthropic-ratelimit-*`),
/// or `None` when they say nothing of it. Anthropic's tokens are its
/// `tokens` limit, else the tighter of its input and output token limits.
pub fn headroom(headers: &Headers, now: SystemTime) -> Option<Headroom> {
    // Read on every success: header names are literals, nothing allocated
    // for a response that carries none of them.
    let count = |name: &str| headers.get(name)?.trim().parse::<u64>().ok();
    let openai = |remaining: &str, reset: &str| {
        let left = count(remaining)?;
        let wait = headers.get(reset).and_then(go_duration);
        Some((left, wait.and_then(|w| now.checked_add(w.min(MAX_WAIT)))))
    };
    let anthropic = |remaining: &str, reset: &str| {
        let left = count(remaining)?;
        let reset = headers
            .get(reset)
            .and_then(rfc3339)
            .filter(|at| *at != UNIX_EPOCH)
            .map(|at| at.max(now));
        Some((left, reset))
    };
    let requests = openai(
        "x-ratelimit-remaining-requests",
        "x-ratelimit-reset-requests",
    )
    .or_else(|| {
        anthropic(
            "anthropic-ratelimit-requests-remaining",
            "anthropic-ratelimit-requests-reset",
        )
    });
    let tokens = openai("x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens").or_else(|| {
        anthropic(
            "anthropic-ratelimit-tokens-remaining",
            "anthropic-ratelimit-tokens-reset",
        )
        .or_else(|| {
            let input = anthropic(
                "anthropic-ratelimit-input-tokens-remaining",
                "anthropic-ratelimit-input-tokens-reset",
            );
            let output = anthropic(
                "anthropic-ratelimit-output-tokens-remaining",
                "anthropic-ratelimit-output-tokens-reset",
            );
            match (input, output) {
                (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
                (a, b) => a.or(b),
            }
        })
    });
    if requests.is_none() && tokens.is_none() {
        return None;
    }
    Some(Headroom {
        requests: requests.map(|(left, _)| left),
        tokens: tokens.map(|(left, _)| left),
        requests_reset: requests.and_then(|(_, reset)| reset),
        tokens_reset: tokens.and_then(|(_, reset)| reset),
    })
}

fn exhausted(remaining: Option<&str>) -> bool {
    remaining.map(str::trim) == Some("0")
}

/// A Go `time.Duration` string without sign: "6m0s", "76ms", "1h2m3.5s", "0".
pub fn go_duration(value: &str) -> Option<Duration> {
    let value = value.trim();
    if value == "0" {
        return Some(Duration::ZERO);
    }
    let mut total = 0.0_f64;
    let mut rest = value;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = plain_decimal(&rest[..num_len])?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += number * scale;
    }
    wait_secs(total)
}

/// An RFC 3339 timestamp: `2025-06-01T12:00:30Z`, `...30.5+02:00`.
pub fn rfc3339(value: &str) -> Option<SystemTime> {
    let v = value.trim().as_bytes();
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = v.get(range)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(part).ok()?.parse().ok()
    };
    let sep = |i: usize, c: &[u8]| v.get(i).is_some_and(|b| c.contains(b));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt ") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    if second > 60 {
        return None;
    }
    let mut i = 19;
    let mut nanos = 0u32;
    if sep(i, b".") {
        let start = i + 1;
        i = start;
        while v.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        let digits = std::str::from_utf8(&v[start..i]).ok()?;
        if digits.is_empty() {
            return None;
        }
        let padded: String = digits.chars().chain("000000000".chars()).take(9).collect();
        nanos = padded.parse().ok()?;
    }
    let offset = match v.get(i..)? {
        b"Z" | b"z" => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            if ![h1, h2, m1, m2].iter().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let hh = i64::from((h1 - b'0') * 10 + (h2 - b'0'));
            let mm = i64::from((m1 - b'0') * 10 + (m2 - b'0'));
            if hh > 23 || mm > 59 {
                return None;
            }
            let total = hh * 3600 + mm * 60;
            if *sign == b'+' {
                total
            } else {
                -total
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let unix = days * 86_400 + hour * 3600 + minute * 60 + second - offset;
    let unix = u64::try_from(unix).ok()?;
    UNIX_EPOCH.checked_add(Duration::new(unix, nanos))
}

/// A lenient RFC 2822 date, as Python's `email.utils.parsedate_tz` and Ruby's
/// `DateTime.rfc2822` read them: `[Www, ]D Mon YYYY HH:MM[:SS] [zone]`, the
/// zone `GMT`, `UT`, `UTC`, `Z`, a US zone or `+hhmm`/`-hhmm` (none: UTC).
pub fn rfc2822(value: &str) -> Option<SystemTime> {
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let mut value = value.trim();
    if let Some((day_name, rest)) = value.split_once(',') {
        if !day_name.trim().chars().all(|c| c.is_ascii_alphabetic()) {
            return None;
        }
        value = rest;
    }
    let mut parts = value.split_ascii_whitespace();
    let day: i64 = parts
        .next()?
        .parse()
        .ok()
        .filter(|d| (1..=31).contains(d))?;
    let month_name = parts.next()?.to_ascii_lowercase();
    let month = MONTHS.iter().position(|m| *m == month_name)? as i64 + 1;
    let year_text = parts.next()?;
    let mut year: i64 = year_text.parse().ok()?;
    if year_text.len() == 2 {
        year += if year < 50 { 2000 } else { 1900 };
    }
    let mut clock = parts.next()?.split(':');
    let mut field = |max: i64| -> Option<i64> {
        let part = clock.next()?;
        (part.len() == 2).then_some(())?;
        part.parse().ok().filter(|v| (0..=max).contains(v))
    };
    let (hour, minute) = (field(23)?, field(59)?);
    let second = field(60).unwrap_or(0);
    let offset_minutes = match parts.next().map(str::to_ascii_uppercase).as_deref() {
        None | Some("GMT" | "UT" | "UTC" | "Z") => 0,
        Some("EDT") => -4 * 60,
        Some("EST" | "CDT") => -5 * 60,
        Some("CST" | "MDT") => -6 * 60,
        Some("MST" | "PDT") => -7 * 60,
        Some("PST") => -8 * 60,
        Some(zone) => {
            let (sign, digits) = match zone.as_bytes().first()? {
                b'+' => (1, &zone[1..]),
                b'-' => (-1, &zone[1..]),
                _ => return None,
            };
            if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let hhmm: i64 = digits.parse().ok()?;
            sign * ((hhmm / 100) * 60 + hhmm % 100)
        }
    };
    if parts.next().is_some() {
        return None;
    }
    // The year has as many digits as it likes: a time no `SystemTime` holds
    // is no date.
    let unix = days_from_civil(year, month, day)
        .checked_mul(86_400)?
        .checked_add(hour * 3600 + minute * 60 + second - offset_minutes * 60)?;
    UNIX_EPOCH.checked_add(Duration::from_secs(u64::try_from(unix).ok()?))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// algorithm), for any `i64` year (saturated where the days do not fit).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 {
        year.saturating_sub(1)
    } else {
        year
    };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era.saturating_mul(146_097).saturating_add(doe - 719_468)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Headers {
        pairs.iter().copied().collect()
    }

    fn at(unix: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(unix)
    }

    const NOW: u64 = 1_750_000_000; // 2025-06-15T15:06:40Z

    fn wait(pairs: &[(&str, &str)]) -> Option<Duration> {
        retry_after(&h(pairs), None, at(NOW))
    }

    fn ms(n: u64) -> Option<Duration> {
        Some(Duration::from_millis(n))
    }

    #[test]
    fn retry_after_seconds_forms() {
        assert_eq!(wait(&[("Retry-After", "1")]), ms(1000));
        assert_eq!(wait(&[("retry-after", "1.5")]), ms(1500));
        assert_eq!(wait(&[("retry-after", " 41 ")]), ms(41_000));
        assert_eq!(wait(&[("retry-after", "0")]), ms(0));
        assert_eq!(wait(&[("retry-after", ".25")]), ms(250));
    }

    #[test]
    fn retry_after_malformed_values_are_no_hint() {
        for bad in [
            "", " ", "-1", "+1", "inf", "nan", "NaN", "1e3", "abc", "1.2.3", "1,5", "0x10",
        ] {
            assert_eq!(wait(&[("retry-after", bad)]), None, "{bad:?}");
            assert_eq!(wait(&[("retry-after-ms", bad)]), None, "{bad:?}");
        }
    }

    #[test]
    fn absurdly_long_waits_count_as_max_wait() {
        let max = Some(MAX_WAIT);
        assert_eq!(MAX_WAIT.as_secs_f64(), MAX_SECONDS);
        // Too large for a Duration, or even for an f64: still the longest wait.
        for huge in [
            "99999999999999999999",
            "99999999999999999999999999999",
            "1000000001",
        ] {
            assert_eq!(wait(&[("retry-after", huge)]), max, "{huge:?}");
        }
        assert_eq!(wait(&[("retry-after", &"9".repeat(400))]), max);
        assert_eq!(wait(&[("retry-after-ms", &"9".repeat(400))]), max);
        assert_eq!(wait(&[("retry-after", "1000000000")]), max);
        assert_eq!(
            wait(&[("retry-after", "999999999")]),
            Some(Duration::from_secs(999_999_999))
        );
        // A date far in the future, a Go duration and a Gemini delay alike.
        let far = [("retry-after", "Fri, 31 Dec 9999 23:59:59 GMT")];
        assert_eq!(server_wait(&h(&far), None, at(1_750_000_000)), max);
        let go = [
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", "99999999999999999999h"),
        ];
        assert_eq!(wait(&go), max);
        let body = r#"{"error":{"details":[{"retryDelay":"99999999999999999999999s"}]}}"#;
        assert_eq!(server_wait(&Headers::new(), Some(body), at(0)), max);
    }

    #[test]
    fn retry_after_ms_wins_and_zero_is_real() {
        assert_eq!(
            wait(&[("retry-after-ms", "76.5"), ("retry-after", "3")]),
            Some(Duration::from_micros(76_500))
        );
        // Azure AI Foundry sends both: Retry-After: 1 and Retry-After-Ms: 0.
        assert_eq!(
            wait(&[("Retry-After", "1"), ("Retry-After-Ms", "0")]),
            ms(0)
        );
        // A malformed ms value falls through to retry-after.
        assert_eq!(
            wait(&[("retry-after-ms", "soon"), ("retry-after", "2")]),
            ms(2000)
        );
    }

    #[test]
    fn http_dates_all_three_forms() {
        let now = at(NOW);
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(http_date_wait(&later, now), Some(Duration::from_secs(30)));
        // 2025-06-15T15:07:10Z in RFC 850 and asctime forms.
        assert_eq!(
            http_date_wait("Sunday, 15-Jun-25 15:07:10 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            http_date_wait("Sun Jun 15 15:07:10 2025", now),
            Some(Duration::from_secs(30))
        );
        // A past date is 0.
        assert_eq!(
            wait(&[("retry-after", "Sun, 06 Nov 1994 08:49:37 GMT")]),
            ms(0)
        );
        assert_eq!(
            wait(&[("retry-after", "Sun, 99 Nov 1994 08:49:37 GMT")]),
            None
        );
    }

    #[test]
    fn should_retry_false_means_no_hint() {
        assert_eq!(
            wait(&[("retry-after", "1"), ("x-should-retry", "false")]),
            None
        );
        assert_eq!(
            wait(&[("retry-after", "1"), ("x-should-retry", "true")]),
            ms(1000)
        );
        assert_eq!(should_retry(&h(&[("x-should-retry", "maybe")])), None);
    }

    #[test]
    fn gemini_retry_delay_from_body() {
        let body = r#"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[
            {"@type":"type.googleapis.com/google.rpc.QuotaFailure"},
            {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"48s"}]}}"#;
        assert_eq!(
            retry_after(&Headers::new(), Some(body), at(NOW)),
            ms(48_000)
        );
        let frac = r#"{"error":{"details":[{"retryDelay":"1.5s"}]}}"#;
        assert_eq!(gemini_retry_delay(frac), ms(1500));
        for bad in ["-1s", "48", "s", "infs", "not json retryDelay"] {
            let body = format!(r#"{{"error":{{"details":[{{"retryDelay":"{bad}"}}]}}}}"#);
            assert_eq!(gemini_retry_delay(&body), None, "{bad}");
        }
        assert_eq!(gemini_retry_delay("retryDelay {"), None);
        // Headers win over the body.
        assert_eq!(
            retry_after(&h(&[("retry-after", "2")]), Some(body), at(NOW)),
            ms(2000)
        );
    }

    #[test]
    fn gemini_retry_delay_in_a_list() {
        let body = r#"[{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"4s"}]}}]"#;
        assert_eq!(gemini_retry_delay(body), Some(Duration::from_secs(4)));
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration("6m0s"), ms(360_000));
        assert_eq!(go_duration("76ms"), ms(76));
        assert_eq!(go_duration("1h2m3.5s"), ms(3_723_500));
        assert_eq!(go_duration("0"), ms(0));
        assert_eq!(go_duration("20us"), Some(Duration::from_micros(20)));
        for bad in ["", "6", "-1s", "1x", "s", "1..2s", "ms"] {
            assert_eq!(go_duration(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn openai_reset_only_for_exhausted_limits() {
        let base = [
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", "6m0s"),
            ("x-ratelimit-remaining-tokens", "1000"),
            ("x-ratelimit-reset-tokens", "76ms"),
        ];
        assert_eq!(wait(&base), ms(360_000));
        let tokens_only = [
            ("x-ratelimit-remaining-requests", "10"),
            ("x-ratelimit-reset-requests", "6m0s"),
            ("x-ratelimit-remaining-tokens", "0"),
            ("x-ratelimit-reset-tokens", "76ms"),
        ];
        assert_eq!(wait(&tokens_only), ms(76));
        assert_eq!(wait(&[("x-ratelimit-reset-requests", "6m0s")]), None);
    }

    #[test]
    fn anthropic_reset_for_exhausted_family() {
        let hdrs = [
            ("anthropic-ratelimit-input-tokens-remaining", "0"),
            (
                "anthropic-ratelimit-input-tokens-reset",
                "2025-06-15T15:07:05Z",
            ),
            ("anthropic-ratelimit-requests-remaining", "49"),
            ("anthropic-ratelimit-requests-reset", "2025-06-15T15:10:00Z"),
        ];
        assert_eq!(wait(&hdrs), ms(25_000));
        let placeholder = [
            ("anthropic-ratelimit-tokens-remaining", "0"),
            ("anthropic-ratelimit-tokens-reset", "1970-01-01T00:00:00Z"),
        ];
        assert_eq!(wait(&placeholder), None);
        let past = [
            ("anthropic-ratelimit-tokens-remaining", "0"),
            ("anthropic-ratelimit-tokens-reset", "2020-01-01T00:00:00Z"),
        ];
        assert_eq!(wait(&past), ms(0));
    }

    #[test]
    fn headroom_reads_what_is_left_and_when_it_resets() {
        let openai = h(&[
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", "6m0s"),
            ("x-ratelimit-remaining-tokens", "1000"),
            ("x-ratelimit-reset-tokens", "76ms"),
        ]);
        assert_eq!(
            headroom(&openai, at(NOW)),
            Some(Headroom {
                requests: Some(0),
                tokens: Some(1000),
                requests_reset: Some(at(NOW + 360)),
                tokens_reset: Some(at(NOW) + Duration::from_millis(76)),
            })
        );
        // Anthropic: the tighter of input and output tokens without a
        // `tokens` limit; a placeholder reset is no reset.
        let anthropic = h(&[
            ("anthropic-ratelimit-requests-remaining", "49"),
            ("anthropic-ratelimit-requests-reset", "1970-01-01T00:00:00Z"),
            ("anthropic-ratelimit-input-tokens-remaining", "800"),
            (
                "anthropic-ratelimit-input-tokens-reset",
                "2025-06-15T15:07:05Z",
            ),
            ("anthropic-ratelimit-output-tokens-remaining", "90"),
            (
                "anthropic-ratelimit-output-tokens-reset",
                "2025-06-15T15:06:50Z",
            ),
        ]);
        assert_eq!(
            headroom(&anthropic, at(NOW)),
            Some(Headroom {
                requests: Some(49),
                tokens: Some(90),
                requests_reset: None,
                tokens_reset: Some(at(NOW + 10)),
            })
        );
        // Only a reset, or a count that is not one: nothing seen.
        assert_eq!(
            headroom(&h(&[("x-ratelimit-reset-requests", "6m0s")]), at(NOW)),
            None
        );
        assert_eq!(
            headroom(&h(&[("x-ratelimit-remaining-requests", "-1")]), at(NOW)),
            None
        );
    }

    #[test]
    fn lenient_rfc2822_dates() {
        let at_now = Some(at(NOW));
        assert_eq!(rfc2822("Sun, 15 Jun 2025 15:06:40 GMT"), at_now);
        assert_eq!(rfc2822("15 Jun 2025 15:06:40 +0000"), at_now);
        assert_eq!(rfc2822("Sun, 15 Jun 2025 17:06:40 +0200"), at_now);
        assert_eq!(rfc2822("Sun, 15 Jun 2025 08:06:40 PDT"), at_now);
        assert_eq!(rfc2822("15 Jun 25 15:06:40"), at_now);
        assert_eq!(
            rfc2822("Sun, 5 Jan 2025 00:00 GMT"),
            Some(at(1_736_035_200))
        );
        for bad in [
            "",
            "soon",
            // Years whose seconds overflow an i64 (they panicked).
            "1 Jan 300000000000 00:00 GMT",
            "1 Jan 9223372036854775807 00:00 GMT",
            "1 Jan -9223372036854775808 00:00 GMT",
            "32 Jun 2025 15:06:40 GMT",
            "15 Foo 2025 15:06:40",
            "15 Jun 2025 25:00:00",
            "15 Jun 2025 15:06:40 +02",
            "15 Jun 2025 15:06:40 GMT extra",
            "1, 15 Jun 2025 15:06:40",
        ] {
            assert_eq!(rfc2822(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn rfc3339_forms() {
        assert_eq!(rfc3339("1970-01-01T00:00:00Z"), Some(UNIX_EPOCH));
        assert_eq!(rfc3339("2025-06-15T15:06:40Z"), Some(at(NOW)));
        assert_eq!(rfc3339("2025-06-15T17:06:40+02:00"), Some(at(NOW)));
        assert_eq!(
            rfc3339("2025-06-15T15:06:40.25Z"),
            Some(at(NOW) + Duration::from_millis(250))
        );
        for bad in [
            "",
            "2025-06-15",
            "2025-13-01T00:00:00Z",
            "2025-06-15T15:06:40",
            "1969-12-31T23:59:59Z",
            "2025-06-15T15:06:40+2:00",
            "2025-06-15T15:06:40.Z",
        ] {
            assert_eq!(rfc3339(bad), None, "{bad:?}");
        }
    }
}
