//! Failover's own policy: its numbers (the `Default` impls and
//! `DEFAULT_STOP_ON`) and how it decides. Its wait hints are the strict
//! reading of `hints.rs` (dates as HTTP-dates only).

use std::time::Duration;

use super::{Backoff, Preset, RetryPolicy, Situation, Verdict};
use crate::engine::classify::{ErrorKind, KindSet};
use crate::engine::hints;
use crate::engine::state::RetryBudget;

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: 0.5,
            multiplier: 2.0,
            max: 8.0,
            jitter: 0.25,
            spread: 0.0,
        }
    }
}

/// Only a request that is wrong in itself ends a call by default: a bad key
/// or a missing model belongs to one provider, and the next has its own.
pub const DEFAULT_STOP_ON: KindSet = KindSet::of(&[ErrorKind::BadRequest]);

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 1,
            max_retries_last: 2,
            max_retry_after: Duration::from_secs(10),
            max_retry_after_last: Duration::from_secs(60),
            backoff: Backoff::default(),
            stop_on: DEFAULT_STOP_ON,
            preset: Preset::Default,
            budget: Some(RetryBudget::default()),
            max_cooldown: Duration::from_secs(30),
            max_hinted_cooldown: Duration::from_secs(3600),
        }
    }
}

impl RetryPolicy {
    fn retry_limit(&self, is_last: bool) -> u32 {
        if is_last {
            self.max_retries_last
        } else {
            self.max_retries
        }
    }

    /// A hint up to the cap is slept; without one, the backoff on the last
    /// provider, and one quick retry (after a server error or a lost
    /// connection) elsewhere: the unjittered backoff is its longest.
    pub(super) fn longest_waits_default(&self, is_last: bool) -> Vec<f64> {
        let cap = self.max_retry_after_secs(is_last);
        (0..self.retry_limit(is_last))
            .map(|n| {
                let backoff = if is_last || n == 0 {
                    self.backoff.longest(n)
                } else {
                    0.0
                };
                cap.max(backoff)
            })
            .collect()
    }

    pub(super) fn decide_default(&self, s: &Situation<'_>, unit: f64) -> Verdict {
        let f = s.failure;
        let hint = s.hint;
        if self.stop_on.contains(f.kind) {
            let reason = format!("{} is in stop_on", f.kind.as_str());
            return Verdict::give_up(false, reason);
        }
        let give_up = |reason: String| Verdict::give_up(true, reason);
        if !f.kind.retryable() {
            return give_up(format!("{} is not retried", f.kind.as_str()));
        }
        if hints::should_retry(&f.headers) == Some(false) {
            return give_up("the provider sent x-should-retry: false".into());
        }
        let limit = self.retry_limit(s.is_last);
        if s.retries_done >= limit {
            return give_up(format!(
                "the retry limit on this provider ({limit}) is reached"
            ));
        }
        if let Some(wait) = hint {
            let cap = if s.is_last {
                self.max_retry_after_last
            } else {
                self.max_retry_after
            };
            let (secs, cap_secs) = (wait.as_secs_f64(), cap.as_secs_f64());
            // MAX_WAIT stands for "longer than anyone means": over every cap,
            // even a cap of MAX_WAIT itself.
            return if wait <= cap && wait < hints::MAX_WAIT {
                Verdict::retry(
                    wait,
                    format!("the provider asked for {secs:.3}s, within the {cap_secs}s cap"),
                )
            } else {
                give_up(format!(
                    "the provider asked for {secs:.3}s, over the {cap_secs}s cap"
                ))
            };
        }
        if s.is_last {
            let step = s.retries_done + 1;
            let reason = format!("no wait hint; backoff step {step} on the last provider");
            return Verdict::retry(self.backoff.delay(s.retries_done, unit), reason);
        }
        // Blips (a 5xx, a dropped connection) are usually gone a moment later:
        // one quick retry keeps the caller on the model it chose. A rate limit,
        // an overload or a silent provider will not clear in half a second.
        match f.kind {
            ErrorKind::ServerError | ErrorKind::Connection if s.retries_done == 0 => {
                let reason = format!(
                    "no wait hint; one quick retry after a {} blip",
                    f.kind.as_str()
                );
                Verdict::retry(self.backoff.delay(0, unit), reason)
            }
            kind => give_up(format!(
                "no wait hint; {} fails over at once",
                kind.as_str()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::policy::testing::*;

    #[test]
    fn default_hint_within_cap_is_slept_then_fails_over() {
        let p = RetryPolicy::default();
        let f = failure(RateLimited, Some(429), &[("retry-after", "1")]);
        assert_eq!(decide(&p, &f, 0, false, 0.0), retry(1000));
        // The second 429 on a non-last provider fails over.
        assert_eq!(
            decide_and_wait(&p, &f, 1, false, 0.0),
            (fail_over(), Some(Duration::from_secs(1)))
        );
    }

    #[test]
    fn default_caps_differ_on_the_last_provider() {
        let p = RetryPolicy::default();
        let at_cap = failure(RateLimited, Some(429), &[("retry-after", "10")]);
        assert_eq!(decide(&p, &at_cap, 0, false, 0.0), retry(10_000));
        let over = failure(RateLimited, Some(429), &[("retry-after", "10.001")]);
        assert_eq!(
            decide_and_wait(&p, &over, 0, false, 0.0),
            (fail_over(), Some(Duration::from_millis(10_001)))
        );
        let on_last = failure(RateLimited, Some(429), &[("retry-after", "60")]);
        assert_eq!(decide(&p, &on_last, 0, true, 0.0), retry(60_000));
        assert_eq!(decide(&p, &on_last, 1, true, 0.0), retry(60_000));
        assert!(matches!(
            decide(&p, &on_last, 2, true, 0.0),
            Decision::GiveUp { .. }
        ));
        let long = failure(RateLimited, Some(429), &[("retry-after", "300")]);
        assert!(matches!(
            decide(&p, &long, 0, true, 0.0),
            Decision::GiveUp { .. }
        ));
    }

    #[test]
    fn default_without_hint() {
        let p = RetryPolicy::default();
        // Server errors and dropped connections get one quick retry, then fail over.
        for (kind, status) in [(ServerError, Some(500)), (Connection, None)] {
            let f = failure(kind, status, &[]);
            assert_eq!(decide(&p, &f, 0, false, 0.0), retry(500), "{kind:?}");
            assert_eq!(decide(&p, &f, 1, false, 0.0), fail_over(), "{kind:?}");
        }
        // Rate limits, overloads and timeouts fail over at once.
        for (kind, status) in [
            (RateLimited, Some(429)),
            (Overloaded, Some(503)),
            (Timeout, None),
        ] {
            assert_eq!(
                decide(&p, &failure(kind, status, &[]), 0, false, 0.0),
                fail_over(),
                "{kind:?}"
            );
        }
        // On the last provider: backoff with jitter, up to max_retries_last.
        let f = failure(Overloaded, Some(529), &[]);
        assert_eq!(decide(&p, &f, 0, true, 0.0), retry(500));
        assert_eq!(
            decide(&p, &f, 1, true, 0.999_999),
            Decision::Retry(Backoff::default().delay(1, 0.999_999))
        );
        assert_eq!(decide(&p, &f, 1, true, 0.5), retry(875));
        assert_eq!(decide(&p, &f, 2, true, 0.0), fail_over());
    }

    #[test]
    fn default_non_retryable_and_should_retry_false() {
        let p = RetryPolicy::default();
        assert_eq!(
            decide_and_wait(
                &p,
                &failure(BadRequest, Some(400), &[("retry-after", "1")]),
                0,
                false,
                0.0
            ),
            (raise(), Some(Duration::from_secs(1)))
        );
        // Auth and not-found belong to one provider: they fail over by default.
        for (kind, status) in [(Auth, 401), (NotFound, 404)] {
            assert_eq!(
                decide(&p, &failure(kind, Some(status), &[]), 0, false, 0.0),
                fail_over(),
                "{kind:?}"
            );
        }
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
            decide(&p, &failure(TooLarge, Some(400), &[]), 0, true, 0.0),
            fail_over()
        );
        let no = failure(
            RateLimited,
            Some(429),
            &[("retry-after", "1"), ("x-should-retry", "false")],
        );
        // No retry, but the wait it asked for still counts (its
        // `.retry_after` and cooldown).
        assert_eq!(
            decide_and_wait(&p, &no, 0, true, 0.0),
            (fail_over(), Some(Duration::from_secs(1)))
        );
    }

    #[test]
    fn stop_on_ends_the_call_without_retry_or_failover() {
        let strict = RetryPolicy {
            stop_on: KindSet::of(&[BadRequest, Auth, NotFound]),
            ..RetryPolicy::default()
        };
        for (kind, status) in [(Auth, 401), (NotFound, 404), (BadRequest, 400)] {
            assert_eq!(
                decide(&strict, &failure(kind, Some(status), &[]), 0, false, 0.0),
                raise(),
                "{kind:?}"
            );
        }
        // Even a retryable kind is neither retried nor failed over when named.
        let no_rate_limits = RetryPolicy {
            stop_on: KindSet::of(&[RateLimited]),
            ..RetryPolicy::default()
        };
        let f = failure(RateLimited, Some(429), &[("retry-after", "1")]);
        assert_eq!(
            decide_and_wait(&no_rate_limits, &f, 0, true, 0.0),
            (raise(), Some(Duration::from_secs(1)))
        );
        // An empty set lets even a 400 fail over.
        let lenient = RetryPolicy {
            stop_on: KindSet::EMPTY,
            ..RetryPolicy::default()
        };
        assert_eq!(
            decide(
                &lenient,
                &failure(BadRequest, Some(400), &[]),
                0,
                false,
                0.0
            ),
            fail_over()
        );
        assert!(lenient.fails_over(BadRequest));
        assert!(RetryPolicy::default().fails_over(Auth));
        assert!(!RetryPolicy::default().fails_over(BadRequest));
    }

    #[test]
    fn a_wait_of_max_wait_is_over_every_cap() {
        // A wait of MAX_WAIT is over every cap, even a cap of MAX_WAIT.
        let huge_caps = RetryPolicy {
            max_retry_after: hints::MAX_WAIT,
            max_retry_after_last: hints::MAX_WAIT,
            ..RetryPolicy::default()
        };
        let f = failure(
            RateLimited,
            Some(429),
            &[("retry-after", "99999999999999999999")],
        );
        assert_eq!(
            decide_and_wait(&huge_caps, &f, 0, true, 0.0),
            (fail_over(), Some(hints::MAX_WAIT))
        );
    }

    #[test]
    fn every_decision_has_a_reason() {
        let p = RetryPolicy::default();
        let s = |f: &Failure, is_last| {
            let situation =
                Situation::new(f, 0, is_last, UNIX_EPOCH + Duration::from_secs(NOW), &[503]);
            p.decide_explained(&situation, 0.0).reason
        };
        assert_eq!(
            s(
                &failure(RateLimited, Some(429), &[("retry-after", "300")]),
                false
            ),
            "the provider asked for 300.000s, over the 10s cap"
        );
        assert_eq!(
            s(
                &failure(RateLimited, Some(429), &[("retry-after", "1")]),
                false
            ),
            "the provider asked for 1.000s, within the 10s cap"
        );
        assert_eq!(
            s(&failure(Overloaded, Some(503), &[]), false),
            "no wait hint; overloaded fails over at once"
        );
        assert_eq!(
            s(&failure(Auth, Some(401), &[]), false),
            "auth is not retried"
        );
    }
}
