//! Retry policies: the default one and exact reproductions of
//! laravel/ai, ruby_llm and openai-python.
//!
//! Every policy number lives here, in the `Default` impls and the presets.

use std::time::{Duration, SystemTime};

use super::classify::{ErrorKind, Failure, KindSet};
use super::hints::{self, secs};
use super::state::RetryBudget;

/// Exponential backoff with jitter:
/// `min(initial * multiplier**n, max) * (1 - jitter * U[0,1))`.
#[derive(Clone, Debug, PartialEq)]
pub struct Backoff {
    pub initial: f64,
    pub multiplier: f64,
    pub max: f64,
    pub jitter: f64,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: 0.5,
            multiplier: 2.0,
            max: 8.0,
            jitter: 0.25,
        }
    }
}

impl Backoff {
    /// `min(initial * multiplier**n, max)`, in seconds.
    pub fn base(&self, n: u32) -> f64 {
        (self.initial * self.multiplier.powi(n.min(1000) as i32)).min(self.max)
    }

    /// The wait before retry number `n` (0-based), with `unit` drawn from U[0,1).
    pub fn delay(&self, n: u32, unit: f64) -> Duration {
        let jittered = self.base(n) * (1.0 - self.jitter * unit.clamp(0.0, 1.0));
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

/// The cooldown after a provider failed with no usable wait hint: this,
/// doubling with each failure in a row, up to the policy's `max_cooldown`.
pub const COOLDOWN_SHORT: Duration = Duration::from_secs(5);
/// The cooldown after an auth, not-found or credits failure: a revoked key
/// or a missing model does not come back in a second.
pub const COOLDOWN_LONG: Duration = Duration::from_secs(300);

impl RetryPolicy {
    /// How long a provider given up on cools down, and why: its hinted wait
    /// when it asked for one (taken or not), up to `max_hinted_cooldown`;
    /// else by the kind of failure, the short one doubling up to
    /// `max_cooldown`. `None`: the failure says nothing about the provider
    /// (a bad request).
    pub fn cooldown(
        &self,
        kind: ErrorKind,
        hint: Option<Duration>,
        failures_in_a_row: u32,
    ) -> Option<(Duration, String)> {
        use ErrorKind::*;
        if let Some(hint) = hint.filter(|h| !h.is_zero()) {
            let why = format!("it asked for {}s", hint.as_secs_f64());
            return Some(self.hinted_cooldown(hint, why));
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
    /// any) is tried; otherwise the error is raised. `cooldown` is how long
    /// the provider asked to be left alone, when it said so (it cools for
    /// that long up to [`RetryPolicy::max_hinted_cooldown`]).
    GiveUp {
        fail_over: bool,
        cooldown: Option<Duration>,
    },
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

    /// The wait the provider asked for, as the caller reads it (§3.2):
    /// `None` when it said `x-should-retry: false`.
    pub fn retry_after(&self) -> Option<Duration> {
        self.hint
            .filter(|_| hints::should_retry(&self.failure.headers) != Some(false))
    }
}

impl RetryPolicy {
    pub fn laravel() -> Self {
        use ErrorKind::*;
        Self {
            max_retries: 1,
            max_retries_last: 1,
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

    pub fn ruby_llm(max_interval: Option<Duration>) -> Self {
        let backoff = Backoff {
            initial: 0.1,
            multiplier: 2.0,
            max: max_interval.map_or(f64::INFINITY, |d| d.as_secs_f64()),
            jitter: 0.5,
        };
        Self {
            max_retries: 3,
            max_retries_last: 3,
            backoff,
            preset: Preset::RubyLlm,
            budget: None,
            ..Self::default()
        }
    }

    pub fn openai() -> Self {
        Self {
            max_retries: 2,
            max_retries_last: 2,
            preset: Preset::OpenAI,
            budget: None,
            ..Self::default()
        }
    }

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
            Preset::OpenAI => s.hint.or_else(|| {
                super::openai_python::wait(&s.failure.headers, s.now)
                    .filter(|v| *v > 0.0 && v.is_finite())
                    .and_then(super::hints::wait_secs)
            }),
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
        if self.preset != Preset::Laravel {
            return self.fails_over(f.kind);
        }
        // laravel/ai fails over on a 429 (whatever its body says), an
        // overloaded status, insufficient credits and a lost connection; a
        // 408 or a 413 is a status it raises.
        let status = f.status.unwrap_or(0);
        let busy = status == 429 || overloaded_statuses.contains(&status);
        let no_response =
            f.status.is_none() && matches!(f.kind, ErrorKind::Connection | ErrorKind::Timeout);
        busy || no_response || f.kind == ErrorKind::InsufficientCredits
    }

    fn retry_limit(&self, is_last: bool) -> u32 {
        if is_last {
            self.max_retries_last
        } else {
            self.max_retries
        }
    }

    fn decide_default(&self, s: &Situation<'_>, unit: f64) -> Verdict {
        let f = s.failure;
        let hint = s.hint;
        if self.stop_on.contains(f.kind) {
            let reason = format!("{} is in stop_on", f.kind.as_str());
            return Verdict::give_up(false, hint, reason);
        }
        let give_up = |cooldown, reason: String| Verdict::give_up(true, cooldown, reason);
        if !f.kind.retryable() {
            return give_up(hint, format!("{} is not retried", f.kind.as_str()));
        }
        if hints::should_retry(&f.headers) == Some(false) {
            return give_up(hint, "the provider sent x-should-retry: false".into());
        }
        let limit = self.retry_limit(s.is_last);
        if s.retries_done >= limit {
            return give_up(
                hint,
                format!("the retry limit on this provider ({limit}) is reached"),
            );
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
                give_up(
                    Some(wait),
                    format!("the provider asked for {secs:.3}s, over the {cap_secs}s cap"),
                )
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
            kind => give_up(
                None,
                format!("no wait hint; {} fails over at once", kind.as_str()),
            ),
        }
    }

    /// laravel/ai 1.2.1 `withErrorHandling`: two attempts per provider; the
    /// retry needs a 429 or overloaded status and a `Retry-After` of plain
    /// integer seconds no larger than 10.
    fn decide_laravel(&self, s: &Situation<'_>) -> Verdict {
        const MAX_WAIT_SECS: u64 = 10;
        let f = s.failure;
        let status = f.status.unwrap_or(0);
        let busy = status == 429 || s.overloaded_statuses.contains(&status);
        if busy && s.retries_done < self.max_retries {
            let plain_int = f
                .headers
                .get("retry-after")
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse::<u64>().ok());
            if let Some(wait) = plain_int.filter(|w| *w <= MAX_WAIT_SECS) {
                let reason =
                    format!("laravel: Retry-After {wait} is a plain integer <= {MAX_WAIT_SECS}");
                return Verdict::retry(Duration::from_secs(wait), reason);
            }
        }
        let fail_over = self.fails_over_after(f, s.overloaded_statuses);
        let reason = if !busy {
            "laravel: only a 429 or an overloaded status is retried"
        } else if s.retries_done >= self.max_retries {
            "laravel: two attempts per provider"
        } else {
            "laravel: Retry-After is not a plain integer <= 10"
        };
        Verdict::give_up(fail_over, None, reason.into())
    }

    /// ruby_llm 1.16 over faraday-retry 2.4.
    fn decide_ruby_llm(&self, s: &Situation<'_>, unit: f64) -> Verdict {
        const RETRY_STATUSES: [u16; 6] = [429, 500, 502, 503, 504, 529];
        let f = s.failure;
        let give_up = |reason: &str| {
            Verdict::give_up(self.fails_over(f.kind), None, format!("ruby_llm: {reason}"))
        };
        // Faraday retries its own timeout and connection exceptions, and
        // these statuses: a 408 answer is neither.
        let no_response =
            f.status.is_none() && matches!(f.kind, ErrorKind::Timeout | ErrorKind::Connection);
        let retried_kind = no_response || f.status.is_some_and(|st| RETRY_STATUSES.contains(&st));
        if !retried_kind {
            return give_up("this failure is not retried");
        }
        if s.retries_done >= self.max_retries {
            return give_up("3 retries used");
        }
        // faraday-retry: interval * factor**n capped at max_interval, plus
        // rand * interval_randomness * interval.
        let b = &self.backoff;
        let interval = b.base(s.retries_done) + unit * b.jitter * b.initial;
        let header = [
            ruby_header_wait(&f.headers, "retry-after", s.now),
            ruby_header_wait(&f.headers, "ratelimit-reset", s.now),
        ]
        .into_iter()
        .flatten()
        .reduce(f64::max);
        let max = b.max;
        let wait = match header {
            Some(h) if h > max => return give_up("the header wait is over max_interval"),
            Some(h) if h >= interval => h,
            _ => interval,
        };
        match secs(wait) {
            Some(wait) => Verdict::retry(
                wait,
                "ruby_llm: the larger of the header wait and the backoff".into(),
            ),
            None => give_up("the wait cannot be slept"),
        }
    }

    /// openai-python: 2 retries on 408, 409, 429, >=500, timeouts and
    /// connection errors; `x-should-retry` overrides the status.
    fn decide_openai(&self, s: &Situation<'_>, unit: f64) -> Verdict {
        const MAX_HINT_SECS: f64 = 120.0;
        let f = s.failure;
        let give_up = |reason: &str| {
            Verdict::give_up(self.fails_over(f.kind), None, format!("openai: {reason}"))
        };
        if s.retries_done >= self.max_retries {
            return give_up("2 retries used");
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
        match super::openai_python::wait(&f.headers, s.now) {
            Some(v) if v.is_finite() && v > MAX_HINT_SECS => {
                give_up("the server wait is over 120s")
            }
            Some(v) if v > 0.0 && v <= MAX_HINT_SECS => match secs(v) {
                Some(wait) => Verdict::retry(wait, "openai: the server wait, within 120s".into()),
                None => backoff(),
            },
            _ => backoff(),
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

    fn give_up(fail_over: bool, cooldown: Option<Duration>, reason: String) -> Self {
        Self {
            decision: Decision::GiveUp {
                fail_over,
                cooldown,
            },
            reason,
        }
    }
}

/// Seconds from `now` until `at`, negative when `at` is past (as both
/// libraries compute it before comparing).
pub(super) fn signed_secs(at: SystemTime, now: SystemTime) -> f64 {
    match at.duration_since(now) {
        Ok(ahead) => ahead.as_secs_f64(),
        Err(behind) => -behind.duration().as_secs_f64(),
    }
}

/// faraday-retry's `parse_retry_header`: an RFC 2822 date minus now, else
/// Ruby's `String#to_f` (the leading number, or 0.0).
fn ruby_header_wait(headers: &hints::Headers, name: &str, now: SystemTime) -> Option<f64> {
    let value = headers.get(name)?;
    if let Some(at) = hints::rfc2822(value) {
        return Some(signed_secs(at, now));
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
    use super::*;
    use crate::engine::classify::DEFAULT_OVERLOADED_STATUSES;
    use crate::engine::hints::Headers;
    use std::time::UNIX_EPOCH;

    const NOW: u64 = 1_750_000_000;

    fn failure(kind: ErrorKind, status: Option<u16>, headers: &[(&str, &str)]) -> Failure {
        Failure {
            kind,
            status,
            headers: headers.iter().copied().collect::<Headers>(),
            body: None,
            message: String::new(),
            request_id: None,
            out_of_time: false,
            cut_short: false,
        }
    }

    fn decide(
        p: &RetryPolicy,
        f: &Failure,
        retries_done: u32,
        is_last: bool,
        unit: f64,
    ) -> Decision {
        let mut overloaded = DEFAULT_OVERLOADED_STATUSES.to_vec();
        overloaded.push(529);
        let now = UNIX_EPOCH + Duration::from_secs(NOW);
        p.decide(
            &Situation::new(f, retries_done, is_last, now, &overloaded),
            unit,
        )
    }

    fn retry(ms: u64) -> Decision {
        Decision::Retry(Duration::from_millis(ms))
    }

    fn fail_over() -> Decision {
        Decision::GiveUp {
            fail_over: true,
            cooldown: None,
        }
    }

    fn raise() -> Decision {
        Decision::GiveUp {
            fail_over: false,
            cooldown: None,
        }
    }

    use ErrorKind::*;

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
    fn default_hint_within_cap_is_slept_then_fails_over() {
        let p = RetryPolicy::default();
        let f = failure(RateLimited, Some(429), &[("retry-after", "1")]);
        assert_eq!(decide(&p, &f, 0, false, 0.0), retry(1000));
        // The second 429 on a non-last provider fails over.
        assert_eq!(
            decide(&p, &f, 1, false, 0.0),
            Decision::GiveUp {
                fail_over: true,
                cooldown: Some(Duration::from_secs(1))
            }
        );
    }

    #[test]
    fn default_caps_differ_on_the_last_provider() {
        let p = RetryPolicy::default();
        let at_cap = failure(RateLimited, Some(429), &[("retry-after", "10")]);
        assert_eq!(decide(&p, &at_cap, 0, false, 0.0), retry(10_000));
        let over = failure(RateLimited, Some(429), &[("retry-after", "10.001")]);
        assert_eq!(
            decide(&p, &over, 0, false, 0.0),
            Decision::GiveUp {
                fail_over: true,
                cooldown: Some(Duration::from_millis(10_001))
            }
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
            decide(
                &p,
                &failure(BadRequest, Some(400), &[("retry-after", "1")]),
                0,
                false,
                0.0
            ),
            Decision::GiveUp {
                fail_over: false,
                cooldown: Some(Duration::from_secs(1))
            }
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
        assert!(matches!(
            decide(&p, &no, 0, true, 0.0),
            Decision::GiveUp {
                fail_over: true,
                ..
            }
        ));
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
            decide(&no_rate_limits, &f, 0, true, 0.0),
            Decision::GiveUp {
                fail_over: false,
                cooldown: Some(Duration::from_secs(1))
            }
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
    fn review_fixes_for_presets_and_the_longest_wait() {
        // ruby_llm: a 408 answer is not one of faraday's retried statuses.
        let ruby = RetryPolicy::ruby_llm(None);
        assert_eq!(
            decide(&ruby, &failure(Timeout, Some(408), &[]), 0, false, 0.0),
            fail_over()
        );
        assert_eq!(
            decide(&ruby, &failure(Timeout, None, &[]), 0, false, 0.0),
            retry(100)
        );
        // laravel: a 429 fails over whatever its body says, a 413 raises.
        let laravel = RetryPolicy::laravel();
        let too_large_429 = failure(TooLarge, Some(429), &[]);
        assert!(laravel.fails_over_after(&too_large_429, &[503]));
        assert!(!laravel.fails_over_after(&failure(TooLarge, Some(413), &[]), &[503]));
        assert!(!laravel.fails_over_after(&failure(Timeout, Some(408), &[]), &[503]));
        assert!(laravel.fails_over_after(&failure(Timeout, None, &[]), &[503]));
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
            decide(&huge_caps, &f, 0, true, 0.0),
            Decision::GiveUp {
                fail_over: true,
                cooldown: Some(hints::MAX_WAIT)
            }
        );
    }

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
