//! laravel/ai 1.2.1's `withErrorHandling`, reproduced: its numbers, when
//! it retries, and its own rule for failing over, which reads the status
//! rather than the kind.

use std::time::Duration;

use super::{Backoff, Preset, RetryPolicy, Situation, Verdict};
use crate::engine::classify::{ErrorKind, Failure, KindSet};

impl RetryPolicy {
    /// laravel/ai 1.2.1: two attempts per provider, a plain-integer
    /// `Retry-After` of at most 10 s slept, no backoff (it never waits
    /// without one), no retry budget.
    pub fn laravel() -> Self {
        use ErrorKind::*;
        Self {
            max_retries: 1,
            max_retries_last: 1,
            max_retry_after: Duration::from_secs(10),
            max_retry_after_last: Duration::from_secs(10),
            backoff: Backoff {
                initial: 0.0,
                multiplier: 1.0,
                max: 0.0,
                jitter: 0.0,
                spread: 0.0,
            },
            // The kinds laravel/ai never fails over on. Its real rule reads
            // the status (`fails_over_after`): a 408 (timeout) and a 413
            // (too_large) raise, while a lost connection and a 429 "request
            // too large" fail over.
            stop_on: KindSet::of(&[ServerError, Auth, NotFound, BadRequest]),
            preset: Preset::Laravel,
            budget: None,
            ..Self::default()
        }
    }

    /// laravel/ai 1.2.1 `withErrorHandling`: two attempts per provider; the
    /// retry needs a 429 or overloaded status and a `Retry-After` of plain
    /// integer seconds no larger than 10.
    pub(super) fn decide_laravel(&self, s: &Situation<'_>) -> Verdict {
        let max_wait_secs = self.max_retry_after.as_secs();
        let f = s.failure;
        let status = f.status.unwrap_or(0);
        let busy = status == 429 || s.overloaded_statuses.contains(&status);
        if busy && s.retries_done < self.max_retries {
            let plain_int = f
                .headers
                .get("retry-after")
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse::<u64>().ok());
            if let Some(wait) = plain_int.filter(|w| *w <= max_wait_secs) {
                let reason =
                    format!("laravel: Retry-After {wait} is a plain integer <= {max_wait_secs}");
                return Verdict::retry(Duration::from_secs(wait), reason);
            }
        }
        let fail_over = self.fails_over_after(f, s.overloaded_statuses);
        let reason = if !busy {
            "laravel: only a 429 or an overloaded status is retried".to_string()
        } else if s.retries_done >= self.max_retries {
            format!("laravel: {} attempts per provider", self.max_retries + 1)
        } else {
            format!("laravel: Retry-After is not a plain integer <= {max_wait_secs}")
        };
        Verdict::give_up(fail_over, reason)
    }

    /// Only a hinted wait is slept, up to the cap.
    pub(super) fn longest_waits_laravel(&self) -> Vec<f64> {
        let cap = self.max_retry_after_secs(false);
        (0..self.max_retries).map(|_| cap).collect()
    }
}

/// Whether laravel/ai moves on to the next provider after `f`: on a 429
/// (whatever its body says), an overloaded status, insufficient credits
/// and a lost connection; a 408 or a 413 is a status it raises.
pub(super) fn fails_over_after(f: &Failure, overloaded_statuses: &[u16]) -> bool {
    let status = f.status.unwrap_or(0);
    let busy = status == 429 || overloaded_statuses.contains(&status);
    let no_response =
        f.status.is_none() && matches!(f.kind, ErrorKind::Connection | ErrorKind::Timeout);
    busy || no_response || f.kind == ErrorKind::InsufficientCredits
}

#[cfg(test)]
mod tests {
    use crate::engine::policy::testing::*;

    #[test]
    fn laravel_preset() {
        let p = RetryPolicy::laravel();
        let ok = failure(RateLimited, Some(429), &[("retry-after", "1")]);
        assert_eq!(decide(&p, &ok, 0, false, 0.0), retry(1000));
        assert_eq!(decide(&p, &ok, 1, false, 0.0), fail_over());
        assert_eq!(
            decide(
                &p,
                &failure(Overloaded, Some(503), &[("retry-after", "10")]),
                0,
                true,
                0.0
            ),
            retry(10_000)
        );
        for value in [
            "1.5",
            "11",
            &httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(NOW + 3)),
            "",
            " 1",
            "-1",
        ] {
            let f = failure(RateLimited, Some(429), &[("retry-after", value)]);
            assert_eq!(decide(&p, &f, 0, false, 0.0), fail_over(), "{value:?}");
        }
        assert_eq!(
            decide(
                &p,
                &failure(RateLimited, Some(429), &[("retry-after-ms", "5")]),
                0,
                false,
                0.0
            ),
            fail_over()
        );
        assert_eq!(
            decide(
                &p,
                &failure(InsufficientCredits, Some(402), &[]),
                0,
                false,
                0.0
            ),
            fail_over()
        );
        assert_eq!(
            decide(&p, &failure(Connection, None, &[]), 0, false, 0.0),
            fail_over()
        );
        assert_eq!(
            decide(
                &p,
                &failure(ServerError, Some(500), &[("retry-after", "1")]),
                0,
                false,
                0.0
            ),
            raise()
        );
        assert_eq!(
            decide(&p, &failure(TooLarge, Some(400), &[]), 0, false, 0.0),
            raise()
        );
        // A 408 answer is a status laravel raises; a silent provider fails over.
        assert_eq!(
            decide(&p, &failure(Timeout, Some(408), &[]), 0, false, 0.0),
            raise()
        );
        assert_eq!(
            decide(&p, &failure(Timeout, None, &[]), 0, false, 0.0),
            fail_over()
        );
        assert_eq!(
            decide(&p, &failure(Auth, Some(401), &[]), 0, false, 0.0),
            raise()
        );
    }

    #[test]
    fn laravel_fails_over_by_status() {
        // A 429 fails over whatever its body says, a 413 raises.
        let laravel = RetryPolicy::laravel();
        let too_large_429 = failure(TooLarge, Some(429), &[]);
        assert!(laravel.fails_over_after(&too_large_429, &[503]));
        assert!(!laravel.fails_over_after(&failure(TooLarge, Some(413), &[]), &[503]));
        assert!(!laravel.fails_over_after(&failure(Timeout, Some(408), &[]), &[503]));
        assert!(laravel.fails_over_after(&failure(Timeout, None, &[]), &[503]));
    }
}
