//! Properties of the wait-hint readers (DESIGN §3.2), over generated input:
//! every reader is total (any text is a wait or `None`, never a panic), no
//! wait is ever longer than `MAX_WAIT`, and the forms a provider sends are
//! read back as the wait they were written from.
//!
//! `cargo test` runs each property on a few cases (`PROPTEST_CASES`, else
//! 64); `make fuzz` runs them on many more.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use proptest::prelude::*;

use super::classify::{ErrorKind, Failure};
use super::hints::*;
use super::policy::{RetryPolicy, Situation};

/// Few cases unless `PROPTEST_CASES` asks for more: the suite stays quick.
fn config() -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = 64;
    }
    config
}

const NOW: u64 = 1_750_000_000; // 2025-06-15T15:06:40Z

fn at(unix: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(unix)
}

/// Header values as a provider, a proxy or a broken server might send them:
/// any text, and text close to each form a reader accepts (so a generated
/// value often gets deep into a reader before it goes wrong).
fn header_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[ 0-9.+eE-]{0,24}",
        "[0-9]{1,400}(\\.[0-9]{0,30})?",
        "([0-9.]{0,6}(ns|us|µs|ms|s|m|h|x)?){0,4}",
        "[0-9]{1,20}-[0-9]{1,3}-[0-9]{1,3}[Tt ][0-9]{1,3}:[0-9]{1,3}:[0-9]{1,3}(\\.[0-9]{0,12})?(Z|z|[+-][0-9]{2}:[0-9]{2}|)",
        "((Mon|Sun|1), )?[0-9]{1,3} (Jan|Feb|Dec|Foo) [0-9]{1,30} [0-9+-]{1,3}:[0-9+-]{1,3}(:[0-9]{1,3})?( GMT| UT| PST| [+-][0-9]{1,5}| Z)?",
        "(Sun|Sunday), [0-9]{2}[ -](Nov|Jun)[ -][0-9]{2,4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT",
    ]
}

/// The headers a hint is read from, with generated values.
fn hint_headers() -> impl Strategy<Value = Headers> {
    const NAMES: [&str; 12] = [
        "retry-after",
        "retry-after-ms",
        "x-should-retry",
        "x-ratelimit-remaining-requests",
        "x-ratelimit-reset-requests",
        "x-ratelimit-remaining-tokens",
        "x-ratelimit-reset-tokens",
        "anthropic-ratelimit-requests-remaining",
        "anthropic-ratelimit-requests-reset",
        "anthropic-ratelimit-output-tokens-remaining",
        "anthropic-ratelimit-output-tokens-reset",
        "x-other",
    ];
    let remaining = prop_oneof![Just("0".to_string()), header_value()];
    let pair = (0..NAMES.len(), remaining, header_value()).prop_map(|(i, zero, value)| {
        // A `-remaining` header is most often the 0 that makes its reset count.
        let name = NAMES[i];
        let value = if name.ends_with("remaining") || name.contains("-remaining-") {
            zero
        } else {
            value
        };
        (name.to_string(), value)
    });
    prop::collection::vec(pair, 0..8).prop_map(|pairs| pairs.into_iter().collect())
}

/// Gemini error bodies with a generated `retryDelay`, and any text.
fn error_body() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        any::<String>().prop_map(Some),
        header_value().prop_map(|delay| {
            let body = serde_json::json!({"error": {"code": 429, "details": [
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}
            ]}});
            Some(body.to_string())
        }),
    ]
}

fn at_most_max(wait: Option<Duration>) -> Result<(), TestCaseError> {
    if let Some(wait) = wait {
        prop_assert!(wait <= MAX_WAIT, "a wait of {wait:?}");
    }
    Ok(())
}

/// An IMF-fixdate's fields: `Sun, 06 Nov 1994 08:49:37 GMT`.
fn fixdate_fields(date: &str) -> (i64, &'static str, i64, &str) {
    let parts: Vec<&str> = date.split(' ').collect();
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| *m == parts[2]).unwrap();
    (
        parts[3].parse().unwrap(),
        [
            "01", "02", "03", "04", "05", "06", "07", "08", "09", "10", "11", "12",
        ][month],
        parts[1].parse().unwrap(),
        parts[4],
    )
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn every_reader_is_total_and_bounded(value in header_value(), now in 0u64..4_000_000_000) {
        let now = at(now);
        at_most_max(decimal_seconds(&value))?;
        at_most_max(decimal_millis(&value))?;
        at_most_max(go_duration(&value))?;
        at_most_max(gemini_retry_delay(&value))?;
        // A date's wait is clamped where the readers meet (`server_wait`).
        let _ = http_date_wait(&value, now);
        let _ = rfc3339(&value);
        let _ = rfc2822(&value);
    }

    #[test]
    fn a_response_asks_for_no_wait_longer_than_max_wait(
        headers in hint_headers(),
        body in error_body(),
        now in 0u64..4_000_000_000,
    ) {
        let now = at(now);
        let wait = retry_after(&headers, body.as_deref(), now);
        at_most_max(wait)?;
        at_most_max(server_wait(&headers, body.as_deref(), now))?;
        at_most_max(exhausted_reset(&headers, now))?;
        if should_retry(&headers) == Some(false) {
            prop_assert_eq!(wait, None);
        }
    }

    /// Every preset reads the hints its own way; whatever it reads, it
    /// decides without a panic and retries after a finite wait.
    #[test]
    fn every_preset_decides_on_any_hint(
        headers in hint_headers(),
        body in error_body(),
        status in prop::sample::select(vec![429u16, 500, 503, 529]),
        retries_done in 0u32..4,
        is_last: bool,
        unit in 0.0f64..1.0,
    ) {
        let failure = Failure {
            kind: ErrorKind::RateLimited,
            status: Some(status),
            headers,
            body,
            message: String::new(),
            request_id: None,
            out_of_time: false,
            cut_short: false,
            usage: None,
            billed: None,
        };
        let situation = Situation::new(&failure, retries_done, is_last, at(NOW), &[503, 529]);
        for (policy, bounded) in [
            (RetryPolicy::default(), true),
            (RetryPolicy::laravel(), true),
            // faraday's unbounded default sleeps whatever a header asks, up
            // to MAX_WAIT as every wait (`ruby_llm_unbounded_waits_at_most_max_wait`).
            (RetryPolicy::ruby_llm(None), true),
            (RetryPolicy::ruby_llm(Some(Duration::from_secs(30))), true),
            (RetryPolicy::openai(), true),
        ] {
            at_most_max(policy.server_wait(&situation))?;
            if let super::policy::Decision::Retry(wait) = policy.decide(&situation, unit) {
                prop_assert!(
                    !bounded || wait <= MAX_WAIT,
                    "{:?} retries after {wait:?}",
                    policy.preset
                );
            }
        }
    }

    #[test]
    fn decimal_seconds_and_millis_read_back(whole in 0u64..1_000_000_000, millis in 0u64..1000, pad in " {0,3}") {
        let expected = Duration::from_secs(whole) + Duration::from_millis(millis);
        let written = format!("{pad}{whole}.{millis:03}{pad}");
        let read = decimal_seconds(&written).unwrap();
        prop_assert!(read.abs_diff(expected) < Duration::from_micros(1), "{written:?} read as {read:?}");
        let headers: Headers = [("Retry-After", written.as_str())].into_iter().collect();
        prop_assert_eq!(retry_after(&headers, None, at(NOW)), Some(read));
        // retry-after-ms: whole milliseconds, and `retry-after-ms` wins.
        let ms = whole * 1000 + millis;
        let headers: Headers = [("retry-after", "7"), ("Retry-After-Ms", &ms.to_string())]
            .into_iter()
            .collect();
        let read = retry_after(&headers, None, at(NOW)).unwrap();
        prop_assert!(read.abs_diff(Duration::from_millis(ms)) < Duration::from_micros(1));
    }

    /// DESIGN §3.2: a well-formed wait over 1e9 s, however long, is 1e9 s.
    #[test]
    fn huge_waits_clamp_to_max_wait(digits in "[1-9][0-9]{9,400}", fraction in "(\\.[0-9]{0,20})?") {
        let value = format!("{digits}{fraction}");
        let max = Some(MAX_WAIT);
        // Ten digits or more, the first not 0: at least 1e9 seconds.
        prop_assert_eq!(decimal_seconds(&value), max);
        let headers: Headers = [("retry-after", value.as_str())].into_iter().collect();
        prop_assert_eq!(retry_after(&headers, None, at(NOW)), max);
        let ms = format!("{digits}000{fraction}");
        prop_assert_eq!(decimal_millis(&ms), max);
        prop_assert_eq!(go_duration(&format!("{value}s")), max);
        prop_assert_eq!(go_duration(&format!("{digits}h")), max);
        let body = format!(r#"{{"error":{{"details":[{{"retryDelay":"{value}s"}}]}}}}"#);
        prop_assert_eq!(gemini_retry_delay(&body), max);
    }

    #[test]
    fn signed_and_malformed_numbers_are_no_hint(
        number in "[0-9]{1,30}(\\.[0-9]{1,5})?",
        form in prop::sample::select(vec!["-{}", "+{}", "{}e3", "{}-", "0x{}", "{} {}", "{},5"]),
    ) {
        let value = form.replace("{}", &number);
        prop_assert_eq!(decimal_seconds(&value), None, "{:?}", value);
        prop_assert_eq!(decimal_millis(&value), None, "{:?}", value);
    }

    /// An HTTP-date in each of RFC 9110's forms waits until that time (0 when
    /// past), and the same instant in RFC 3339 or RFC 2822 reads as the
    /// same time.
    #[test]
    fn dates_read_back_in_every_form(offset in -1_500_000_000i64..1_500_000_000) {
        let now = at(NOW);
        let instant = at(NOW.checked_add_signed(offset).unwrap());
        let expected = Duration::from_secs(offset.max(0).unsigned_abs());
        let fixdate = httpdate::fmt_http_date(instant);
        prop_assert_eq!(http_date_wait(&fixdate, now), Some(expected));
        let headers: Headers = [("Retry-After", fixdate.as_str())].into_iter().collect();
        prop_assert_eq!(retry_after(&headers, None, now), Some(expected.min(MAX_WAIT)));

        let (year, month, day, clock) = fixdate_fields(&fixdate);
        let weekday = &fixdate[..3];
        let asctime = format!("{weekday} {} {day:>2} {clock} {year}", &fixdate[8..11]);
        prop_assert_eq!(http_date_wait(&asctime, now), Some(expected), "{}", asctime);
        prop_assert_eq!(rfc2822(&fixdate), Some(instant));
        prop_assert_eq!(rfc2822(&format!("{day} {} {year} {clock} +0000", &fixdate[8..11])), Some(instant));
        let iso = format!("{year:04}-{month}-{day:02}T{clock}Z");
        prop_assert_eq!(rfc3339(&iso), Some(instant), "{}", iso);
        let east = instant + Duration::from_secs(2 * 3600 + 30 * 60);
        let east = httpdate::fmt_http_date(east);
        let (y, m, d, c) = fixdate_fields(&east);
        let shifted = format!("{y:04}-{m}-{d:02}T{c}+02:30");
        prop_assert_eq!(rfc3339(&shifted), Some(instant), "{}", shifted);
    }

    #[test]
    fn go_durations_read_back(h in 0u64..10_000, m in 0u64..60, s in 0u64..60, ms in 0u64..1000) {
        let expected = Duration::from_secs(h * 3600 + m * 60 + s) + Duration::from_millis(ms);
        let written = format!("{h}h{m}m{s}.{ms:03}s");
        let read = go_duration(&written).unwrap();
        prop_assert!(read.abs_diff(expected) < Duration::from_micros(1), "{written:?} read as {read:?}");
        prop_assert_eq!(go_duration(&format!("{ms}ms")), Some(Duration::from_millis(ms)));
        let headers: Headers = [
            ("x-ratelimit-remaining-tokens", "0"),
            ("x-ratelimit-reset-tokens", written.as_str()),
        ]
        .into_iter()
        .collect();
        prop_assert_eq!(retry_after(&headers, None, at(NOW)), Some(read));
    }
}

/// Found by `every_preset_decides_on_any_hint`: `ruby_llm(None)` retried
/// after a `Retry-After` of 1000000010 s, past `MAX_WAIT`, while one of 1e20
/// s gave up ("cannot be slept"). Decided: `MAX_SECONDS` bounds every wait
/// (ARCHITECTURE.md), faraday's unbounded default included; a longer hint
/// counts as exactly `MAX_WAIT`, as DESIGN 3.2 says of every hint.
#[test]
fn ruby_llm_unbounded_waits_at_most_max_wait() {
    let failure = Failure {
        kind: ErrorKind::RateLimited,
        status: Some(429),
        headers: [("retry-after", "1000000010")].into_iter().collect(),
        body: None,
        message: String::new(),
        request_id: None,
        out_of_time: false,
        cut_short: false,
        usage: None,
        billed: None,
    };
    let situation = Situation::new(&failure, 0, true, at(NOW), &[]);
    let decision = RetryPolicy::ruby_llm(None).decide(&situation, 0.5);
    match decision {
        super::policy::Decision::Retry(wait) => assert!(wait <= MAX_WAIT, "retries after {wait:?}"),
        other => panic!("no retry: {other:?}"),
    }
}
