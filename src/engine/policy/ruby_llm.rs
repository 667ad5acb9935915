//! ruby_llm 1.16 over faraday-retry 2.4, reproduced: its numbers, which
//! failures it retries, and how faraday reads a wait hint (an RFC 2822
//! date, else Ruby's `String#to_f`).

use std::time::{Duration, SystemTime};

use super::{Backoff, Preset, RetryPolicy, Situation, Verdict};
use crate::engine::classify::ErrorKind;
use crate::engine::hints::{self, secs, Headers, MAX_SECONDS};

impl RetryPolicy {
    /// ruby_llm 1.16 over faraday-retry 2.4: 3 retries, no retry budget;
    /// `max_interval` bounds header waits and backoff (`None`: faraday's
    /// unbounded default, up to `MAX_SECONDS` as every wait).
    pub fn ruby_llm(max_interval: Option<Duration>) -> Self {
        let backoff = Backoff {
            initial: 0.1,
            multiplier: 2.0,
            max: max_interval.map_or(f64::INFINITY, |d| d.as_secs_f64()),
            jitter: 0.0,
            // faraday-retry's interval_randomness 0.5, of its interval.
            spread: 0.05,
        };
        // faraday's max_interval bounds the header wait too.
        let max_header_wait = max_interval.unwrap_or(Duration::MAX);
        Self {
            max_retries: 3,
            max_retries_last: 3,
            max_retry_after: max_header_wait,
            max_retry_after_last: max_header_wait,
            backoff,
            preset: Preset::RubyLlm,
            budget: None,
            ..Self::default()
        }
    }

    /// ruby_llm 1.16 over faraday-retry 2.4.
    pub(super) fn decide_ruby_llm(&self, s: &Situation<'_>, unit: f64) -> Verdict {
        const RETRY_STATUSES: [u16; 6] = [429, 500, 502, 503, 504, 529];
        let f = s.failure;
        let give_up =
            |reason: &str| Verdict::give_up(self.fails_over(f.kind), format!("ruby_llm: {reason}"));
        // Faraday retries its own timeout and connection exceptions, and
        // these statuses: a 408 answer is neither.
        let no_response =
            f.status.is_none() && matches!(f.kind, ErrorKind::Timeout | ErrorKind::Connection);
        let retried_kind = no_response || f.status.is_some_and(|st| RETRY_STATUSES.contains(&st));
        if !retried_kind {
            return give_up("this failure is not retried");
        }
        if s.retries_done >= self.max_retries {
            return give_up(&format!("{} retries used", self.max_retries));
        }
        // faraday-retry: interval * factor**n capped at max_interval, plus
        // rand * interval_randomness * interval (the backoff's spread).
        let interval = self.backoff.delay_secs(s.retries_done, unit);
        let header = [
            ruby_header_wait(&f.headers, "retry-after", s.now),
            ruby_header_wait(&f.headers, "ratelimit-reset", s.now),
        ]
        .into_iter()
        .flatten()
        .reduce(f64::max)
        // As every hint (DESIGN 3.2): a longer one, even one too large to
        // represent (1e20, `1e999`), counts as exactly MAX_SECONDS, so a
        // larger hint is never the one retried soonest or given up on alone.
        .map(|h| h.min(MAX_SECONDS));
        let max = self.max_retry_after_secs(s.is_last);
        let wait = match header {
            Some(h) if h > max => return give_up("the header wait is over max_interval"),
            Some(h) if h >= interval => h,
            _ => interval,
        };
        // MAX_SECONDS bounds every wait, the uncapped backoff's too.
        match secs(wait.min(MAX_SECONDS)) {
            Some(wait) => Verdict::retry(
                wait,
                "ruby_llm: the larger of the header wait and the backoff".into(),
            ),
            None => give_up("the wait cannot be slept"),
        }
    }
}

impl RetryPolicy {
    /// A header wait up to `max_interval`, or the backoff with its whole
    /// jitter (faraday adds it past the cap).
    pub(super) fn longest_waits_ruby_llm(&self) -> Vec<f64> {
        let b = &self.backoff;
        let cap = self.max_retry_after_secs(false);
        (0..self.max_retries)
            .map(|n| cap.max(b.longest(n)))
            .collect()
    }
}

/// faraday-retry's `parse_retry_header`: an RFC 2822 date minus now, else
/// Ruby's `String#to_f` (the leading number, or 0.0).
fn ruby_header_wait(headers: &Headers, name: &str, now: SystemTime) -> Option<f64> {
    let value = headers.get(name)?;
    if let Some(at) = hints::rfc2822(value) {
        return Some(hints::signed_secs(at, now));
    }
    Some(ruby_to_f(value))
}

fn ruby_to_f(value: &str) -> f64 {
    let s = value.trim_start();
    let bytes = s.as_bytes();
    let mut end = 0;
    if matches!(bytes.first(), Some(b'+' | b'-')) {
        end = 1;
    }
    let digits_from = |mut i: usize| {
        while bytes.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        i
    };
    let int_end = digits_from(end);
    end = int_end;
    if bytes.get(end) == Some(&b'.') && bytes.get(end + 1).is_some_and(u8::is_ascii_digit) {
        end = digits_from(end + 1);
    }
    if matches!(bytes.get(end), Some(b'e' | b'E')) {
        let mut j = end + 1;
        if matches!(bytes.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        let exp_end = digits_from(j);
        if exp_end > j {
            end = exp_end;
        }
    }
    s[..end].parse::<f64>().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::ruby_to_f;
    use crate::engine::policy::testing::*;

    #[test]
    fn ruby_llm_preset() {
        let p = RetryPolicy::ruby_llm(None);
        let f = failure(ServerError, Some(500), &[]);
        assert_eq!(decide(&p, &f, 0, false, 0.0), retry(100));
        assert_eq!(decide(&p, &f, 2, false, 0.0), retry(400));
        assert_eq!(decide(&p, &f, 0, false, 0.5), retry(125));
        assert_eq!(decide(&p, &f, 3, false, 0.0), fail_over());
        // 501 and 400 are not retried.
        assert_eq!(
            decide(&p, &failure(ServerError, Some(501), &[]), 0, false, 0.0),
            fail_over()
        );
        assert_eq!(
            decide(&p, &failure(BadRequest, Some(400), &[]), 0, false, 0.0),
            raise()
        );
        // The larger of Retry-After and RateLimit-Reset, then of that and the backoff.
        let both = failure(
            RateLimited,
            Some(429),
            &[("retry-after", "2"), ("ratelimit-reset", "5")],
        );
        assert_eq!(decide(&p, &both, 0, false, 0.0), retry(5000));
        let tiny = failure(RateLimited, Some(429), &[("retry-after", "0.05")]);
        assert_eq!(decide(&p, &tiny, 0, false, 0.0), retry(100));
        // Ruby's to_f: "1.5abc" is 1.5, "abc" is 0.0.
        assert_eq!(
            decide(
                &p,
                &failure(RateLimited, Some(429), &[("retry-after", "1.5abc")]),
                0,
                false,
                0.0
            ),
            retry(1500)
        );
        assert_eq!(
            decide(
                &p,
                &failure(RateLimited, Some(429), &[("retry-after", "abc")]),
                0,
                false,
                0.0
            ),
            retry(100)
        );
        // Unbounded by default: a long Retry-After is slept (the deadline still applies).
        assert_eq!(
            decide(
                &p,
                &failure(RateLimited, Some(429), &[("retry-after", "300")]),
                0,
                false,
                0.0
            ),
            retry(300_000)
        );
        let date = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(NOW + 30));
        assert_eq!(
            decide(
                &p,
                &failure(Overloaded, Some(529), &[("retry-after", &date)]),
                0,
                false,
                0.0
            ),
            retry(30_000)
        );
        // With max_interval = 30: a header wait above it gives up at once; backoff is capped.
        let capped = RetryPolicy::ruby_llm(Some(Duration::from_secs(30)));
        assert_eq!(
            decide(
                &capped,
                &failure(RateLimited, Some(429), &[("retry-after", "31")]),
                0,
                false,
                0.0
            ),
            fail_over()
        );
        assert_eq!(
            decide(
                &capped,
                &failure(RateLimited, Some(429), &[("retry-after", "30")]),
                0,
                false,
                0.0
            ),
            retry(30_000)
        );
        assert_eq!(
            decide(&capped, &failure(Timeout, None, &[]), 10, false, 0.0),
            fail_over()
        );
        let tiny_cap = RetryPolicy::ruby_llm(Some(Duration::from_millis(150)));
        assert_eq!(decide(&tiny_cap, &f, 2, false, 0.0), retry(150));
    }

    #[test]
    fn ruby_llm_retries_no_408_answer() {
        // A 408 answer is not one of faraday's retried statuses.
        let ruby = RetryPolicy::ruby_llm(None);
        assert_eq!(
            decide(&ruby, &failure(Timeout, Some(408), &[]), 0, false, 0.0),
            fail_over()
        );
        assert_eq!(
            decide(&ruby, &failure(Timeout, None, &[]), 0, false, 0.0),
            retry(100)
        );
    }

    /// Found by `hints_props::every_preset_decides_on_any_hint`: unbounded,
    /// `Retry-After: 1000000010` (just past MAX_WAIT) was retried after
    /// itself, while `1e20` gave up ("the wait cannot be slept"). Both, and
    /// one too large for a float, now count as MAX_WAIT and are retried
    /// after it (the caller's deadline then decides, as for any long wait).
    #[test]
    fn ruby_llm_unbounded_clamps_huge_hints_to_max_wait() {
        use crate::engine::hints::MAX_WAIT;
        let unbounded = RetryPolicy::ruby_llm(None);
        for hint in ["1000000010", "1e20", "1e999", "99999999999999999999"] {
            for header in ["retry-after", "ratelimit-reset"] {
                let f = failure(RateLimited, Some(429), &[(header, hint)]);
                assert_eq!(
                    decide(&unbounded, &f, 0, false, 0.5),
                    Decision::Retry(MAX_WAIT),
                    "{header}: {hint}"
                );
            }
        }
        // Exactly MAX_WAIT is no longer than itself: the same retry.
        let at_max = failure(RateLimited, Some(429), &[("retry-after", "1000000000")]);
        assert_eq!(
            decide(&unbounded, &at_max, 0, false, 0.0),
            Decision::Retry(MAX_WAIT)
        );
        // A max_interval still gives up on any longer header wait, huge or not.
        let capped = RetryPolicy::ruby_llm(Some(Duration::from_secs(30)));
        for hint in ["31", "1000000010", "1e20"] {
            let f = failure(RateLimited, Some(429), &[("retry-after", hint)]);
            assert_eq!(decide(&capped, &f, 0, false, 0.0), fail_over(), "{hint}");
        }
    }

    #[test]
    fn ruby_to_f_matches_ruby() {
        assert_eq!(ruby_to_f("12abc"), 12.0);
        assert_eq!(ruby_to_f(" -3.5"), -3.5);
        assert_eq!(ruby_to_f("1e2"), 100.0);
        assert_eq!(ruby_to_f("1e"), 1.0);
        assert_eq!(ruby_to_f(""), 0.0);
        assert!(ruby_to_f("1e999").is_infinite());
    }
}
