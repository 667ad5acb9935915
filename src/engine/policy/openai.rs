//! openai-python 3.57, reproduced: its numbers, which failures it
//! retries, and how it reads a wait hint: its `_parse_retry_after_header`
//! over Python's own `float()` and `email.utils.parsedate_tz`, ported rule
//! for rule (CPython 3.11's `email/_parseaddr.py`). Only this preset reads
//! hints this way; the default policy keeps its stricter reading
//! (`hints.rs`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{Backoff, Preset, RetryPolicy, Situation, Verdict};
use crate::engine::classify::ErrorKind;
use crate::engine::hints::{self, secs, Headers};

impl RetryPolicy {
    /// openai-python 3.57: 2 retries, a server wait of at most 120 s
    /// slept, its backoff (`INITIAL_RETRY_DELAY`, `MAX_RETRY_DELAY`, a
    /// quarter of jitter), no retry budget.
    pub fn openai() -> Self {
        Self {
            max_retries: 2,
            max_retries_last: 2,
            max_retry_after: MAX_HINT,
            max_retry_after_last: MAX_HINT,
            backoff: Backoff {
                initial: 0.5,
                multiplier: 2.0,
                max: 8.0,
                jitter: 0.25,
                spread: 0.0,
            },
            preset: Preset::OpenAI,
            budget: None,
            ..Self::default()
        }
    }

    /// openai-python: 2 retries on 408, 409, 429, >=500, timeouts and
    /// connection errors; `x-should-retry` overrides the status.
    pub(super) fn decide_openai(&self, s: &Situation<'_>, unit: f64) -> Verdict {
        let max_hint_secs = self.max_retry_after_secs(s.is_last);
        let f = s.failure;
        let give_up =
            |reason: &str| Verdict::give_up(self.fails_over(f.kind), format!("openai: {reason}"));
        if s.retries_done >= self.max_retries {
            return give_up(&format!("{} retries used", self.max_retries));
        }
        let wanted = match (hints::should_retry(&f.headers), f.status) {
            _ if f.cut_short => true,
            (Some(flag), Some(_)) => flag,
            (_, Some(st)) => matches!(st, 408 | 409 | 429) || st >= 500,
            (_, None) => matches!(f.kind, ErrorKind::Timeout | ErrorKind::Connection),
        };
        if !wanted {
            return give_up("this failure is not retried");
        }
        let backoff = || {
            let reason = "openai: backoff".to_string();
            Verdict::retry(self.backoff.delay(s.retries_done, unit), reason)
        };
        // httpx reports a body cut off after the headers as a protocol
        // error: no response, so no hint, and backed off like a lost
        // connection whatever the status was.
        if f.cut_short {
            return backoff();
        }
        match wait(&f.headers, s.now) {
            Some(Wait::Overflow) => give_up("the server wait overflows a float"),
            Some(Wait::Secs(v)) if v.is_finite() && v > max_hint_secs => {
                give_up(&format!("the server wait is over {max_hint_secs}s"))
            }
            Some(Wait::Secs(v)) if v > 0.0 && v <= max_hint_secs => match secs(v) {
                Some(wait) => Verdict::retry(
                    wait,
                    format!("openai: the server wait, within {max_hint_secs}s"),
                ),
                None => backoff(),
            },
            _ => backoff(),
        }
    }
}

impl RetryPolicy {
    /// A server wait up to the cap, or the unjittered backoff.
    pub(super) fn longest_waits_openai(&self) -> Vec<f64> {
        let cap = self.max_retry_after_secs(false);
        (0..self.max_retries)
            .map(|n| cap.max(self.backoff.longest(n)))
            .collect()
    }
}

/// The longest server wait openai-python sleeps (`0 < v <= 120`).
const MAX_HINT: Duration = Duration::from_secs(120);

/// What openai-python reads as a wait where failover's own reader reads
/// nothing (`1.5e2`, `1_50`): a positive, finite number of seconds, or one
/// too large for a float, which is what README says of any such wait:
/// 1e9 s (its `.retry_after`; the cooldown is capped at an hour).
pub(super) fn server_wait(s: &Situation<'_>) -> Option<Duration> {
    match wait(&s.failure.headers, s.now)? {
        Wait::Overflow => hints::wait_secs(f64::INFINITY),
        Wait::Secs(v) => Some(v)
            .filter(|v| *v > 0.0 && v.is_finite())
            .and_then(hints::wait_secs),
    }
}

/// What openai-python's `httpx` headers give for `name`: every value,
/// joined with `", "` (two `retry-after` headers become `"1, 2"`).
fn joined(headers: &Headers, name: &str) -> Option<String> {
    let values: Vec<&str> = headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v)
        .collect();
    (!values.is_empty()).then(|| values.join(", "))
}

/// Python's `float(text)`: surrounding whitespace, a sign, an underscore
/// only between two digits, `inf`/`infinity`/`nan` in any case. A decimal
/// too large for a float is `inf` in Python too; `overflowed` says it is
/// one that came to `+inf`.
fn python_float(text: &str) -> Option<(f64, bool)> {
    let t = text.trim();
    let bytes = t.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'_' {
            let before = i > 0 && bytes[i - 1].is_ascii_digit();
            let after = bytes.get(i + 1).is_some_and(u8::is_ascii_digit);
            if !(before && after) {
                return None;
            }
        }
    }
    let cleaned = t.replace('_', "");
    let value = cleaned.parse::<f64>().ok()?;
    let unsigned = cleaned.trim_start_matches(['+', '-']).to_ascii_lowercase();
    let literal = unsigned == "inf" || unsigned == "infinity";
    // Only `+inf` is taken for an overflow there (`value == math.inf`): a
    // `-1e400` is `-inf`, backed off like any wait that is not positive.
    Some((value, value == f64::INFINITY && !literal))
}

/// A wait hint as openai-python's `_parse_retry_after_header` reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Wait {
    /// Seconds: any float, `inf` and `nan` included (a literal `inf` is
    /// backed off there, like a wait that is not positive).
    Secs(f64),
    /// A number too large for a float: openai-python returns
    /// `MAX_RETRY_AFTER_DELAY + 1` for it, "an excessive server delay",
    /// so it is never retried.
    Overflow,
}

/// openai-python's `_parse_retry_after_header`: `retry-after-ms` / 1000,
/// else `retry-after` as seconds, else as an HTTP-date minus now.
fn wait(headers: &Headers, now: SystemTime) -> Option<Wait> {
    for (name, divisor) in [("retry-after-ms", 1000.0), ("retry-after", 1.0)] {
        if let Some((value, overflowed)) = joined(headers, name).as_deref().and_then(python_float) {
            return Some(if overflowed {
                Wait::Overflow
            } else {
                Wait::Secs(value / divisor)
            });
        }
    }
    let at = parsedate_tz(&joined(headers, "retry-after")?)?;
    Some(Wait::Secs(hints::signed_secs(at, now)))
}

const MONTHS: [&str; 24] = [
    "jan",
    "feb",
    "mar",
    "apr",
    "may",
    "jun",
    "jul",
    "aug",
    "sep",
    "oct",
    "nov",
    "dec",
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];
const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

fn zone(name: &str) -> Option<i64> {
    Some(match name {
        "UT" | "UTC" | "GMT" | "Z" => 0,
        "AST" => -400,
        "ADT" => -300,
        "EST" => -500,
        "EDT" => -400,
        "CST" => -600,
        "CDT" => -500,
        "MST" => -700,
        "MDT" => -600,
        "PST" => -800,
        "PDT" => -700,
        _ => return None,
    })
}

/// `email.utils.parsedate_tz` (then `mktime_tz`), as a time: lenient on
/// weekdays, month names and order, two-digit years, dots in the time and
/// zones; an unknown zone is UTC. `None` where Python gives `None`.
fn parsedate_tz(text: &str) -> Option<SystemTime> {
    let mut data: Vec<String> = text.split_whitespace().map(str::to_string).collect();
    if data.is_empty() {
        return None;
    }
    if data[0].ends_with(',') || DAYS.contains(&data[0].to_lowercase().as_str()) {
        data.remove(0);
    } else if let Some(i) = data[0].rfind(',') {
        data[0] = data[0][i + 1..].to_string();
    }
    if data.len() == 3 {
        let stuff: Vec<String> = data[0].split('-').map(str::to_string).collect();
        if stuff.len() == 3 {
            data = stuff.into_iter().chain(data[1..].iter().cloned()).collect();
        }
    }
    if data.len() == 4 {
        let s = data[3].clone();
        let i = s.find('+').or_else(|| s.find('-'));
        match i {
            Some(i) if i > 0 => {
                data.truncate(3);
                data.push(s[..i].to_string());
                data.push(s[i..].to_string());
            }
            _ => data.push(String::new()),
        }
    }
    if data.len() < 5 {
        return None;
    }
    let (mut dd, mut mm, mut yy, mut tm, mut tz) = (
        data[0].clone(),
        data[1].to_lowercase(),
        data[2].clone(),
        data[3].clone(),
        data[4].clone(),
    );
    if dd.is_empty() || mm.is_empty() || yy.is_empty() {
        return None;
    }
    if !MONTHS.contains(&mm.as_str()) {
        (dd, mm) = (mm, dd.to_lowercase());
        if !MONTHS.contains(&mm.as_str()) {
            return None;
        }
    }
    let mut month = MONTHS.iter().position(|m| *m == mm)? as u32 + 1;
    if month > 12 {
        month -= 12;
    }
    if dd.ends_with(',') {
        dd.pop();
    }
    if yy.find(':').is_some_and(|i| i > 0) {
        std::mem::swap(&mut yy, &mut tm);
    }
    if yy.ends_with(',') {
        yy.pop();
        if yy.is_empty() {
            return None;
        }
    }
    if !yy.chars().next()?.is_ascii_digit() {
        std::mem::swap(&mut yy, &mut tz);
    }
    if tm.ends_with(',') {
        tm.pop();
    }
    let mut parts: Vec<&str> = tm.split(':').collect();
    if parts.len() == 1 && tm.contains('.') {
        parts = tm.split('.').collect();
        if parts.len() != 2 && parts.len() != 3 {
            return None;
        }
    }
    let (thh, tmm, tss) = match parts.as_slice() {
        [h, m] => (*h, *m, "0"),
        [h, m, s] => (*h, *m, *s),
        _ => return None,
    };
    // Python's int(): whitespace, a sign, digits with underscores between them.
    let int = |s: &str| -> Option<i64> {
        let t = s.trim();
        let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
        let well_formed = !digits.is_empty()
            && digits
                .split('_')
                .all(|run| !run.is_empty() && run.bytes().all(|b| b.is_ascii_digit()));
        if !well_formed {
            return None;
        }
        t.replace('_', "").parse::<i64>().ok()
    };
    let (mut year, day, hour, minute, second) =
        (int(&yy)?, int(&dd)?, int(thh)?, int(tmm)?, int(tss)?);
    if year < 100 {
        year += if year > 68 { 1900 } else { 2000 };
    }
    let tz = tz.to_uppercase();
    let mut offset = zone(&tz).or_else(|| tz.parse::<i64>().ok());
    if offset == Some(0) && tz.starts_with('-') {
        offset = None;
    }
    // Python's integers never overflow; these may (`+99999999999999999`, a
    // year of twelve digits): a time no `SystemTime` holds is no date.
    let offset_secs = match offset {
        None => 0,
        Some(o) => {
            let abs = o.checked_abs()?;
            let secs = (abs / 100)
                .checked_mul(3600)?
                .checked_add((abs % 100) * 60)?;
            o.signum() * secs
        }
    };
    // mktime_tz: the fields as UTC, minus the offset (an unknown zone: UTC).
    let days = days_from_civil(year, month, day)?;
    let secs = days
        .checked_mul(86_400)?
        .checked_add(hour.checked_mul(3_600)?)?
        .checked_add(minute.checked_mul(60)?)?
        .checked_add(second)?
        .checked_sub(offset_secs)?;
    let secs = u64::try_from(secs).ok()?;
    UNIX_EPOCH.checked_add(Duration::from_secs(secs))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// algorithm); a day past the month's end rolls over, as `calendar.timegm`
/// does. `None` when they do not fit an `i64`.
fn days_from_civil(year: i64, month: u32, day: i64) -> Option<i64> {
    let (y, m) = if month <= 2 {
        (year.checked_sub(1)?, i64::from(month) + 9)
    } else {
        (year, i64::from(month) - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let doy = ((153 * m + 2) / 5).checked_add(day)?.checked_sub(1)?;
    let doe = (yoe * 365 + yoe / 4 - yoe / 100).checked_add(doy)?;
    era.checked_mul(146_097)?
        .checked_add(doe)?
        .checked_sub(719_468)
}

#[cfg(test)]
mod tests {
    use super::{parsedate_tz, python_float};
    use crate::engine::policy::testing::*;
    use std::time::SystemTime;

    #[test]
    fn openai_preset() {
        let p = RetryPolicy::openai();
        let hint = |v: &str| failure(RateLimited, Some(429), &[("retry-after", v)]);
        assert_eq!(decide(&p, &hint("120"), 0, false, 0.0), retry(120_000));
        assert_eq!(decide(&p, &hint("121"), 0, false, 0.0), fail_over());
        assert_eq!(decide(&p, &hint("1.5"), 0, false, 0.0), retry(1500));
        // 0, negative, inf and nan fall back to the backoff.
        for v in ["0", "-3", "inf", "nan", "soon"] {
            assert_eq!(decide(&p, &hint(v), 0, false, 0.0), retry(500), "{v}");
        }
        assert_eq!(decide(&p, &hint("0"), 1, false, 0.0), retry(1000));
        assert_eq!(decide(&p, &hint("0"), 2, false, 0.0), fail_over());
        // A finite value above 120 is never retried, even with x-should-retry: true.
        let forced = failure(
            RateLimited,
            Some(429),
            &[("retry-after", "121"), ("x-should-retry", "true")],
        );
        assert_eq!(decide(&p, &forced, 0, false, 0.0), fail_over());
        let ms = failure(
            RateLimited,
            Some(429),
            &[("retry-after-ms", "250"), ("retry-after", "9")],
        );
        assert_eq!(decide(&p, &ms, 0, false, 0.0), retry(250));
        // x-should-retry overrides the status both ways.
        assert_eq!(
            decide(
                &p,
                &failure(BadRequest, Some(400), &[("x-should-retry", "true")]),
                0,
                false,
                0.0
            ),
            retry(500)
        );
        assert_eq!(
            decide(
                &p,
                &failure(ServerError, Some(500), &[("x-should-retry", "false")]),
                0,
                false,
                0.0
            ),
            fail_over()
        );
        for status in [408, 409, 429, 500, 503, 529] {
            assert!(
                matches!(
                    decide(&p, &failure(BadRequest, Some(status), &[]), 0, false, 0.0),
                    Decision::Retry(_)
                ),
                "{status}"
            );
        }
        // Not retried; once openai gives up, a 404 fails over (default
        // stop_on) while a 400 ends the call.
        assert_eq!(
            decide(&p, &failure(NotFound, Some(404), &[]), 0, false, 0.0),
            fail_over()
        );
        assert_eq!(
            decide(&p, &failure(BadRequest, Some(400), &[]), 0, false, 0.0),
            raise()
        );
        assert_eq!(
            decide(&p, &failure(Connection, None, &[]), 0, false, 0.0),
            retry(500)
        );
        let date = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(NOW + 30));
        assert_eq!(decide(&p, &hint(&date), 0, false, 0.0), retry(30_000));
    }

    #[test]
    fn a_number_too_large_for_a_float_is_never_retried_and_asks_for_1e9_s() {
        // openai-python 3.57 refuses it as an excessive wait; failover reports
        // it as README says of any such wait: exactly 1e9 s (the error's
        // `.retry_after`, a cooldown capped at an hour).
        let p = RetryPolicy::openai();
        for header in ["retry-after", "retry-after-ms"] {
            let f = failure(RateLimited, Some(429), &[(header, "1e400")]);
            assert_eq!(
                decide_and_wait(&p, &f, 0, false, 0.0),
                (fail_over(), Some(Duration::from_secs(1_000_000_000))),
                "{header}"
            );
        }
        // A literal infinity is no hint there: backed off, no wait asked for.
        let f = failure(RateLimited, Some(429), &[("retry-after", "inf")]);
        assert_eq!(decide_and_wait(&p, &f, 0, false, 0.0), (retry(500), None));
    }

    fn unix(t: SystemTime) -> u64 {
        t.duration_since(UNIX_EPOCH).unwrap().as_secs()
    }

    #[test]
    fn floats_as_python_reads_them() {
        assert_eq!(python_float("1_5"), Some((15.0, false)));
        for not_a_number in ["1_", "_1", "1__5", "", "1,2", "0x10"] {
            assert_eq!(python_float(not_a_number), None, "{not_a_number}");
        }
        assert_eq!(python_float(" 2.5 "), Some((2.5, false)));
        assert_eq!(python_float("1e400"), Some((f64::INFINITY, true)));
        assert_eq!(python_float("-Infinity"), Some((f64::NEG_INFINITY, false)));
        assert!(python_float("nan").unwrap().0.is_nan());
    }

    #[test]
    fn dates_as_parsedate_tz_reads_them() {
        let at = |s: &str| parsedate_tz(s).map(unix);
        let noon = Some(1_750_075_200); // 2025-06-16 12:00:00 UTC
        for s in [
            "Mon, 16 Jun 2025 12:00:00 GMT",
            "Mon 16 Jun 2025 12:00:00 GMT",
            "16 June 2025 12:00:00 GMT",
            "Jun 16 2025 12:00:00 GMT",
            "16 Jun 2025 12.00.00 GMT",
            "16 Jun 2025 12:00:00 CET",
            "16 Jun 2025 12:00:00 +00:00",
            "16 Jun 25 12:00:00 GMT",
            "16 Jun 2025 12:00 GMT",
            "Monday, 16-Jun-2025 12:00:00 GMT",
        ] {
            assert_eq!(at(s), noon, "{s}");
        }
        assert_eq!(at("16 Jun 2025 9:00:00 -0300"), noon);
        assert_eq!(at("16 Jun 2025 14:00:00 +0200"), noon);
        assert_eq!(at("16 Jun 2025 07:00:00 EST"), noon);
        for s in ["", "soon", "16 Foo 2025 12:00:00 GMT", "16 Jun 2025"] {
            assert_eq!(at(s), None, "{s}");
        }
    }

    /// Found by `hints_props::every_preset_decides_on_any_hint`: fields
    /// whose seconds overflow an `i64` panicked (debug) or wrapped into
    /// another time (release); Python's integers hold them, no `SystemTime`
    /// does, so they are no date.
    #[test]
    fn dates_too_far_for_a_time_are_no_date() {
        for s in [
            "0 Jan 300000000000 0:0",
            "1 Jan 9223372036854775807 00:00:00 GMT",
            "1 Jan -9223372036854775807 00:00:00 GMT",
            "9223372036854775807 Jan 2025 00:00:00 GMT",
            "1 Jan 2025 9223372036854775807:00:00 GMT",
            "1 Jan 2025 00:9223372036854775807:00 GMT",
            "1 Jan 2025 00:00:00 +9223372036854775807",
            "1 Jan 2025 00:00:00 -9223372036854775808",
        ] {
            assert_eq!(parsedate_tz(s), None, "{s}");
        }
        // Large but representable fields still roll over as timegm does.
        assert_eq!(
            parsedate_tz("1 Jan 2025 48:00:00 GMT").map(unix),
            Some(1_735_689_600 + 2 * 86_400)
        );
    }
}
