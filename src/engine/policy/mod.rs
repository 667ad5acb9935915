//! Retry policies: the types every policy decides with, and the dispatch
//! to the one that decides. Failover's own rules are in `default.rs`; each
//! exact reproduction of another client is one file (`laravel.rs`,
//! `ruby_llm.rs`, `openai.rs`), holding its numbers, its decision and how
//! it reads a wait hint.
//!
//! Every policy number lives in these files: in the `Default` impls, the
//! preset constructors and the constants below. Each preset's constructor
//! holds the numbers its decision reads, and [`RetryPolicy::longest_waits`]
//! says what each policy can sleep: `failover.RetryPolicy` shows those and
//! computes `worst_case()` from them (`src/python/seam.rs` `NativePolicy`).

use std::time::{Duration, SystemTime};

use super::classify::{ErrorKind, Failure, KindSet};
use super::hints::{self, secs};
use super::state::RetryBudget;

mod default;
mod laravel;
mod openai;
mod ruby_llm;

pub use default::DEFAULT_STOP_ON;

/// The most retries a policy may make on one provider in one call: more
/// than any policy should make, and the bound of a backoff's exponent.
/// `RetryPolicy(max_retries=...)` is checked against it
/// (`_native.MAX_RETRIES`).
pub const MAX_RETRIES: u32 = 1000;

/// Exponential backoff with jitter:
/// `min(initial * multiplier**n, max) * (1 - jitter * U) + spread * U`,
/// U drawn from [0,1). `jitter` takes a fraction off (failover's, openai's);
/// `spread` adds seconds (faraday-retry's `interval_randomness * interval`,
/// for ruby_llm).
#[derive(Clone, Debug, PartialEq)]
pub struct Backoff {
    pub initial: f64,
    pub multiplier: f64,
    pub max: f64,
    pub jitter: f64,
    pub spread: f64,
}

impl Backoff {
    /// `min(initial * multiplier**n, max)`, in seconds.
    pub fn base(&self, n: u32) -> f64 {
        (self.initial * self.multiplier.powi(n.min(MAX_RETRIES) as i32)).min(self.max)
    }

    /// The wait before retry number `n` (0-based) in seconds, with `unit`
    /// drawn from U[0,1); infinite when nothing bounds the backoff and it
    /// overflows.
    pub fn delay_secs(&self, n: u32, unit: f64) -> f64 {
        let unit = unit.clamp(0.0, 1.0);
        self.base(n) * (1.0 - self.jitter * unit) + self.spread * unit
    }

    /// The longest wait before retry number `n`: no jitter taken off, the
    /// whole spread added.
    pub fn longest(&self, n: u32) -> f64 {
        self.base(n) + self.spread
    }

    /// The wait before retry number `n` (0-based), with `unit` drawn from U[0,1).
    pub fn delay(&self, n: u32, unit: f64) -> Duration {
        let jittered = self.delay_secs(n, unit);
        // A wait too long for a Duration is as good as forever; the caps and
        // the deadline decide whether it is slept.
        secs(jittered).unwrap_or(if jittered > 0.0 {
            Duration::MAX
        } else {
            Duration::ZERO
        })
    }
}

/// Which rule set decides; `Default` is failover's own.
#[derive(Clone, Debug, PartialEq)]
pub enum Preset {
    Default,
    Laravel,
    /// faraday-retry's `max_interval` is `backoff.max` (infinite: unbounded).
    RubyLlm,
    OpenAI,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Same-provider retries while another provider remains.
    pub max_retries: u32,
    /// Same-provider retries on the last provider.
    pub max_retries_last: u32,
    /// The longest server-hinted wait worth sleeping while another provider remains.
    pub max_retry_after: Duration,
    /// The longest server-hinted wait worth sleeping on the last provider.
    pub max_retry_after_last: Duration,
    pub backoff: Backoff,
    /// The kinds that end a call at once: no retry, no failover. Every
    /// other kind fails over once this provider is given up on.
    pub stop_on: KindSet,
    pub preset: Preset,
    /// How much retrying may add to a provider's traffic; `None`: no limit.
    pub budget: Option<RetryBudget>,
    /// The longest a provider cools down for failing with no usable hint:
    /// the doubling stops here, so a provider that recovers is back soon.
    pub max_cooldown: Duration,
    /// The longest a provider cools down for the wait it asked for (a hint
    /// or a rate-limit reset): past it, the provider is tried again, so one
    /// absurd header cannot remove it for good.
    pub max_hinted_cooldown: Duration,
}

/// The cooldown after a provider failed with no usable wait hint: this,
/// doubling with each failure in a row, up to the policy's `max_cooldown`.
pub const COOLDOWN_SHORT: Duration = Duration::from_secs(5);
/// The cooldown after an auth, not-found or credits failure: a revoked key
/// or a missing model does not come back in a second.
pub const COOLDOWN_LONG: Duration = Duration::from_secs(300);

impl RetryPolicy {
    /// The longest server-hinted wait slept (`is_last`: no other provider
    /// remains), in seconds; `Duration::MAX` (ruby_llm's unbounded
    /// `max_interval`) is infinite.
    pub fn max_retry_after_secs(&self, is_last: bool) -> f64 {
        let cap = if is_last {
            self.max_retry_after_last
        } else {
            self.max_retry_after
        };
        if cap == Duration::MAX {
            f64::INFINITY
        } else {
            cap.as_secs_f64()
        }
    }

    /// The longest wait this policy can sleep before each retry it may make
    /// on one provider (`is_last`: no other remains), in seconds, infinite
    /// where nothing bounds it: one entry per retry, so a call's worst case
    /// is these plus one timeout per attempt.
    pub fn longest_waits(&self, is_last: bool) -> Vec<f64> {
        match self.preset {
            Preset::Default => self.longest_waits_default(is_last),
            Preset::Laravel => self.longest_waits_laravel(),
            Preset::RubyLlm => self.longest_waits_ruby_llm(),
            Preset::OpenAI => self.longest_waits_openai(),
        }
    }
}

impl RetryPolicy {
    /// How long a provider given up on cools down, and why: its hinted wait
    /// when it asked for one (taken or not), up to `max_hinted_cooldown`;
    /// else by the kind of failure, the short one doubling up to
    /// `max_cooldown`. `None`: the failure says nothing about the provider
    /// (a bad request), or it asked to be called again at once (a hint of
    /// zero, a reset time already past: DESIGN §3.8 cools a provider until
    /// its last hinted time, which is now).
    pub fn cooldown(
        &self,
        kind: ErrorKind,
        hint: Option<Duration>,
        failures_in_a_row: u32,
    ) -> Option<(Duration, String)> {
        use ErrorKind::*;
        match hint {
            Some(hint) if hint.is_zero() => return None,
            Some(hint) => {
                let why = format!("it asked for {}s", hint.as_secs_f64());
                return Some(self.hinted_cooldown(hint, why));
            }
            None => {}
        }
        match kind {
            RateLimited | Overloaded | ServerError | Timeout | Connection => {
                let doubled = COOLDOWN_SHORT
                    .checked_mul(
                        1u32.checked_shl(failures_in_a_row.min(16))
                            .unwrap_or(u32::MAX),
                    )
                    .unwrap_or(Duration::MAX)
                    .min(self.max_cooldown);
                Some((doubled, format!("failed ({})", kind.as_str())))
            }
            Auth | NotFound | InsufficientCredits => {
                Some((COOLDOWN_LONG, format!("failed ({})", kind.as_str())))
            }
            BadRequest | TooLarge => None,
        }
    }

    /// A cooldown the provider asked for (`why` says how), at most
    /// `max_hinted_cooldown`: the reason tells when it was cut.
    pub fn hinted_cooldown(&self, wait: Duration, why: String) -> (Duration, String) {
        if wait <= self.max_hinted_cooldown {
            return (wait, why);
        }
        let cap = self.max_hinted_cooldown.as_secs_f64();
        (
            self.max_hinted_cooldown,
            format!("{why}, cut to the {cap}s cap"),
        )
    }
}

/// What to do after a failed attempt.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Sleep this long, then try the same provider again.
    Retry(Duration),
    /// Stop trying this provider. With `fail_over`, the next provider (if
    /// any) is tried; otherwise the error is raised. How long it cools down
    /// is not the decision's: [`RetryPolicy::server_wait`] and
    /// [`RetryPolicy::cooldown`] say, whatever was decided.
    GiveUp { fail_over: bool },
}

/// The facts a decision is made from.
#[derive(Clone, Copy, Debug)]
pub struct Situation<'a> {
    pub failure: &'a Failure,
    /// The wait the response asks for, `x-should-retry` aside.
    pub hint: Option<Duration>,
    /// Retries already made on this provider in this call.
    pub retries_done: u32,
    /// No other provider remains to fail over to.
    pub is_last: bool,
    pub now: SystemTime,
    pub overloaded_statuses: &'a [u16],
}

impl<'a> Situation<'a> {
    /// The situation after `failure`, with its wait hint read once.
    pub fn new(
        failure: &'a Failure,
        retries_done: u32,
        is_last: bool,
        now: SystemTime,
        overloaded_statuses: &'a [u16],
    ) -> Self {
        let hint = hints::server_wait(&failure.headers, failure.body.as_deref(), now);
        Self {
            failure,
            hint,
            retries_done,
            is_last,
            now,
            overloaded_statuses,
        }
    }
}

impl RetryPolicy {
    /// Decides after a failed attempt; `unit` is a draw from U[0,1) for jitter.
    pub fn decide(&self, s: &Situation<'_>, unit: f64) -> Decision {
        self.decide_explained(s, unit).decision
    }

    /// [`decide`](Self::decide), with the reason in words for the log.
    pub fn decide_explained(&self, s: &Situation<'_>, unit: f64) -> Verdict {
        match &self.preset {
            Preset::Default => self.decide_default(s, unit),
            Preset::Laravel => self.decide_laravel(s),
            Preset::RubyLlm => self.decide_ruby_llm(s, unit),
            Preset::OpenAI => self.decide_openai(s, unit),
        }
    }

    /// The wait the response asked for, as this policy reads it: the
    /// situation's hint, or under the openai preset what openai-python
    /// reads where failover's own reader reads nothing (`1.5e2`, `1_50`), so
    /// a wait it refused as too long still sets `.retry_after` and the
    /// cooldown.
    pub fn server_wait(&self, s: &Situation<'_>) -> Option<Duration> {
        match self.preset {
            Preset::OpenAI => s.hint.or_else(|| openai::server_wait(s)),
            _ => s.hint,
        }
    }

    /// Whether a failure of `kind` moves the call to the next provider once
    /// this one is given up on (laravel decides by status: see
    /// [`fails_over_after`](Self::fails_over_after)).
    pub fn fails_over(&self, kind: ErrorKind) -> bool {
        !self.stop_on.contains(kind)
    }

    /// Whether the call moves on to the next provider after `f`, once this
    /// provider is given up on: `stop_on` decides, except under laravel,
    /// whose own rule reads the status.
    pub fn fails_over_after(&self, f: &Failure, overloaded_statuses: &[u16]) -> bool {
        match self.preset {
            Preset::Laravel => laravel::fails_over_after(f, overloaded_statuses),
            _ => self.fails_over(f.kind),
        }
    }
}

/// A decision with its reason, for the DEBUG log.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub decision: Decision,
    pub reason: String,
}

impl Verdict {
    fn retry(wait: Duration, reason: String) -> Self {
        Self {
            decision: Decision::Retry(wait),
            reason,
        }
    }

    fn give_up(fail_over: bool, reason: String) -> Self {
        Self {
            decision: Decision::GiveUp { fail_over },
            reason,
        }
    }
}

/// What every policy's tests decide with: one failed attempt at a fixed
/// time, the default overloaded statuses plus 529.
#[cfg(test)]
mod testing {
    pub(super) use super::*;
    pub(super) use crate::engine::classify::DEFAULT_OVERLOADED_STATUSES;
    pub(super) use crate::engine::hints::Headers;
    pub(super) use std::time::UNIX_EPOCH;
    pub(super) use ErrorKind::*;

    pub(super) const NOW: u64 = 1_750_000_000;

    pub(super) fn failure(
        kind: ErrorKind,
        status: Option<u16>,
        headers: &[(&str, &str)],
    ) -> Failure {
        Failure {
            kind,
            status,
            headers: headers.iter().copied().collect::<Headers>(),
            body: None,
            message: String::new(),
            request_id: None,
            out_of_time: false,
            cut_short: false,
            usage: None,
            billed: None,
        }
    }

    fn situation<'a>(
        f: &'a Failure,
        retries_done: u32,
        is_last: bool,
        overloaded: &'a [u16],
    ) -> Situation<'a> {
        let now = UNIX_EPOCH + Duration::from_secs(NOW);
        Situation::new(f, retries_done, is_last, now, overloaded)
    }

    fn overloaded() -> Vec<u16> {
        let mut overloaded = DEFAULT_OVERLOADED_STATUSES.to_vec();
        overloaded.push(529);
        overloaded
    }

    pub(super) fn decide(
        p: &RetryPolicy,
        f: &Failure,
        retries_done: u32,
        is_last: bool,
        unit: f64,
    ) -> Decision {
        let overloaded = overloaded();
        p.decide(&situation(f, retries_done, is_last, &overloaded), unit)
    }

    /// The decision, and the wait the engine takes the provider to have
    /// asked for (its `.retry_after` and cooldown) in that situation.
    pub(super) fn decide_and_wait(
        p: &RetryPolicy,
        f: &Failure,
        retries_done: u32,
        is_last: bool,
        unit: f64,
    ) -> (Decision, Option<Duration>) {
        let overloaded = overloaded();
        let s = situation(f, retries_done, is_last, &overloaded);
        (p.decide(&s, unit), p.server_wait(&s))
    }

    pub(super) fn retry(ms: u64) -> Decision {
        Decision::Retry(Duration::from_millis(ms))
    }

    pub(super) fn fail_over() -> Decision {
        Decision::GiveUp { fail_over: true }
    }

    pub(super) fn raise() -> Decision {
        Decision::GiveUp { fail_over: false }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;

    #[test]
    fn a_provider_that_asked_to_be_called_at_once_does_not_cool() {
        // DESIGN §3.8: retries run out on hints it accepted cool it until the
        // last hinted time; a hint of zero (or a reset already past) is now.
        use crate::engine::ErrorKind;
        use std::time::Duration;
        let policy = super::RetryPolicy::default();
        let zero = policy.cooldown(ErrorKind::RateLimited, Some(Duration::ZERO), 0);
        assert_eq!(zero, None);
        let unhinted = policy.cooldown(ErrorKind::RateLimited, None, 0).unwrap();
        assert_eq!(unhinted.0, Duration::from_secs(5));
    }

    #[test]
    fn backoff_formula() {
        let b = Backoff::default();
        assert_eq!(b.delay(0, 0.0), Duration::from_millis(500));
        assert_eq!(b.delay(1, 0.0), Duration::from_millis(1000));
        assert_eq!(b.delay(5, 0.0), Duration::from_secs(8));
        assert_eq!(
            b.delay(0, 0.5),
            Duration::from_millis(437) + Duration::from_micros(500)
        );
        assert_eq!(b.delay(4000, 0.0), Duration::from_secs(8));
        let huge = Backoff {
            max: 1e30,
            ..Backoff::default()
        };
        assert_eq!(
            huge.delay(200, 0.0),
            Duration::MAX,
            "too long is forever, never 0"
        );
    }

    #[test]
    fn longest_waits_are_the_longest_each_policy_sleeps() {
        let default = RetryPolicy::default();
        assert_eq!(default.longest_waits(false), vec![10.0]);
        assert_eq!(default.longest_waits(true), vec![60.0, 60.0]);
        // A cap under the backoff: the backoff's own step is the longest.
        let short_caps = RetryPolicy {
            max_retries: 2,
            max_retry_after: Duration::ZERO,
            max_retry_after_last: Duration::ZERO,
            ..RetryPolicy::default()
        };
        assert_eq!(short_caps.longest_waits(false), vec![0.5, 0.0]);
        assert_eq!(short_caps.longest_waits(true), vec![0.5, 1.0]);
        assert_eq!(RetryPolicy::laravel().longest_waits(true), vec![10.0]);
        assert_eq!(RetryPolicy::openai().longest_waits(false), vec![120.0; 2]);
        let bounded = RetryPolicy::ruby_llm(Some(Duration::from_secs(30)));
        assert_eq!(bounded.longest_waits(true), vec![30.0; 3]);
        // faraday adds the jitter past a cap the backoff has reached.
        let tight = RetryPolicy::ruby_llm(Some(Duration::from_millis(100)));
        assert_eq!(tight.longest_waits(true), vec![0.1 + 0.05; 3]);
        let unbounded = RetryPolicy::ruby_llm(None).longest_waits(false);
        assert_eq!(unbounded, vec![f64::INFINITY; 3]);
    }

    #[test]
    fn presets_hold_the_numbers_they_decide_with() {
        let at = |p: &RetryPolicy, header: &str, retries_done| {
            let f = failure(RateLimited, Some(429), &[("retry-after", header)]);
            decide(p, &f, retries_done, true, 0.0)
        };
        // Each cap is slept, and a whole second past it is not.
        let laravel = RetryPolicy::laravel();
        assert_eq!(laravel.max_retry_after_secs(true), 10.0);
        assert_eq!(at(&laravel, "10", 0), retry(10_000));
        assert!(matches!(at(&laravel, "11", 0), Decision::GiveUp { .. }));
        let openai = RetryPolicy::openai();
        assert_eq!(openai.max_retry_after_secs(false), 120.0);
        assert_eq!(at(&openai, "120", 1), retry(120_000));
        assert!(matches!(at(&openai, "121", 0), Decision::GiveUp { .. }));
        let ruby = RetryPolicy::ruby_llm(Some(Duration::from_secs(30)));
        assert_eq!(at(&ruby, "30", 2), retry(30_000));
        assert!(matches!(at(&ruby, "31", 0), Decision::GiveUp { .. }));
        assert!(matches!(at(&ruby, "1", 3), Decision::GiveUp { .. }));
        let unbounded = RetryPolicy::ruby_llm(None);
        assert_eq!(unbounded.max_retry_after_secs(true), f64::INFINITY);
        assert_eq!(unbounded.backoff.max, f64::INFINITY);
        assert_eq!(at(&unbounded, "3600", 0), retry(3_600_000));
    }

    #[test]
    fn presets_read_rfc2822_dates_with_numeric_zones() {
        // 30 s after NOW, written the way email.utils / DateTime.rfc2822 accept.
        let date = "15 Jun 2025 17:07:10 +0200";
        let f = failure(RateLimited, Some(429), &[("retry-after", date)]);
        assert_eq!(
            decide(&RetryPolicy::openai(), &f, 0, false, 0.0),
            retry(30_000)
        );
        assert_eq!(
            decide(&RetryPolicy::ruby_llm(None), &f, 0, false, 0.0),
            retry(30_000)
        );
        // The default policy reads only HTTP-dates (RFC 9110): no hint, fail over.
        assert_eq!(
            decide(&RetryPolicy::default(), &f, 0, false, 0.0),
            fail_over()
        );
    }

    #[test]
    fn cooldowns_are_capped_by_the_policy() {
        let p = RetryPolicy::default();
        let unhinted: Vec<u64> = (0..6)
            .map(|n| p.cooldown(Overloaded, None, n).unwrap().0.as_secs())
            .collect();
        assert_eq!(unhinted, vec![5, 10, 20, 30, 30, 30]);
        assert_eq!(
            p.cooldown(ServerError, None, u32::MAX).unwrap().0,
            Duration::from_secs(30)
        );
        // Auth and credits keep their long cooldown; a bad request none.
        assert_eq!(p.cooldown(Auth, None, 0).unwrap().0, COOLDOWN_LONG);
        assert_eq!(p.cooldown(BadRequest, None, 0), None);
        // A hint keeps its number up to an hour, then is cut, saying so.
        let hinted = |secs| p.cooldown(RateLimited, Some(Duration::from_secs(secs)), 0);
        assert_eq!(
            hinted(120),
            Some((Duration::from_secs(120), "it asked for 120s".to_string()))
        );
        assert_eq!(
            hinted(1_000_000_000),
            Some((
                Duration::from_secs(3600),
                "it asked for 1000000000s, cut to the 3600s cap".to_string()
            ))
        );
        // Every preset has the same caps: cooldowns are the client's memory.
        for preset in [
            RetryPolicy::laravel(),
            RetryPolicy::openai(),
            RetryPolicy::ruby_llm(None),
        ] {
            assert_eq!(
                (preset.max_cooldown, preset.max_hinted_cooldown),
                (p.max_cooldown, p.max_hinted_cooldown)
            );
        }
    }
}
