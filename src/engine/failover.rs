//! The loop over providers x attempts: written once, run by both the sync and
//! the async face, bounded by the caller's deadline.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::classify::{ErrorKind, Failure};
use super::clock::Clock;
use super::hints::Headroom;
use super::limit::{Blocked, Limiter, Permit};
use super::policy::{Decision, RetryPolicy, Situation, Verdict};
use super::state::{Cause, Cooling, EngineState};
use super::usage::Usage;

/// A provider taking part in one call: what the engine needs of it.
#[derive(Clone, Copy, Debug)]
pub struct ProviderSlot<'a> {
    pub overloaded_statuses: &'a [u16],
    /// Its key in the shared state (cooldowns, budget): provider, model and
    /// call kind.
    pub state_key: &'a str,
    /// Its configured name, for the messages the engine writes itself (no
    /// room under the client's limits).
    pub name: &'a str,
    /// Why this provider cannot serve the call (its wire cannot express a
    /// feature the call uses): skipped, recorded in the attempts, never
    /// called, and not counted as a provider left to fail over to.
    pub unable: Option<&'a str>,
    /// The client's limits it draws on (indexes into
    /// [`CallSpec::limiter`]'s buckets: its own, its pool's, its quota's).
    pub limits: &'a [usize],
    /// Which of `limits` is its own (not its pool's or its quota's): what
    /// its rate-limit headers and 429s tell of is its own capacity.
    pub own_limit: Option<usize>,
    /// About how many tokens a request of this call uses (for `tpm`).
    pub tokens: u64,
    /// The shared quota it draws on, as a state key: a rate limit at any
    /// provider of the quota cools them all.
    pub quota_key: Option<&'a str>,
}

/// Everything the loop needs to know about one call.
#[derive(Clone, Debug)]
pub struct CallSpec<'a> {
    pub call_id: &'a str,
    /// The providers to try, in order.
    pub providers: &'a [ProviderSlot<'a>],
    pub policy: &'a RetryPolicy,
    /// The longest one attempt may take.
    pub attempt_timeout: Duration,
    /// The longest the whole call may take: attempts, waits and failovers.
    pub deadline: Option<Duration>,
    /// Time the call spent before this run began (a fleet-wide state's
    /// first read), counted against the deadline.
    pub spent: Duration,
    /// What calls share (cooldowns, the retry budget); `None`: nothing.
    pub state: Option<&'a dyn EngineState>,
    /// The client's limits; `None`: none is set.
    pub limiter: Option<&'a Arc<Limiter>>,
    /// Hedged requests; `None`: none.
    pub hedge: Option<&'a super::hedge::Hedge>,
}

/// The bounds of one attempt, as the engine hands them to it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttemptBounds {
    /// Each wait of the attempt (a whole answer; a stream's head and each
    /// of its events before the first content): the call's timeout, cut to
    /// the time left.
    pub timeout: Duration,
    /// The time left before the deadline, when the call has one: the whole
    /// attempt (a stream up to its first content, whatever arrives before
    /// it) must end within it, with a [`Failure::out_of_time`]. Keep-alives
    /// reset the wait for the next event, never this.
    pub left: Option<Duration>,
}

impl AttemptBounds {
    /// The bounds left once `spent` has gone by (on the attempt's own
    /// preparation, such as fetching its key).
    pub fn after(self, spent: Duration) -> Self {
        match self.left {
            Some(left) => {
                let left = left.saturating_sub(spent);
                Self {
                    timeout: self.timeout.min(left),
                    left: Some(left),
                }
            }
            None => self,
        }
    }
}

/// One HTTP attempt (or one provider skipped), for `.attempts`.
#[derive(Clone, Debug, PartialEq)]
pub struct AttemptRecord {
    /// Index into [`CallSpec::providers`].
    pub provider: usize,
    pub status: Option<u16>,
    /// `None` for a success.
    pub kind: Option<ErrorKind>,
    /// The wait slept before this attempt.
    pub waited: Duration,
    /// Wall time the attempt took (reporting only; no decision uses it).
    pub duration: Duration,
    /// Why the provider was skipped instead of called (no HTTP attempt).
    pub skipped: Option<String>,
    /// What the provider reported the attempt used, when it did.
    pub usage: Option<Usage>,
    /// Whether the provider may charge for it (see [`Failure::billed`];
    /// `Some(true)` for an answer, `Some(false)` for a skip).
    pub billed: Option<bool>,
    /// When it was sent (or skipped), on the real wall clock (reporting
    /// only: spans are drawn with it).
    pub started: SystemTime,
    /// It lost a hedge's race and was cancelled: no answer, no error.
    pub hedged: bool,
}

impl AttemptRecord {
    /// An attempt sent with no outcome known: no status, billed unknown
    /// (what the others refine).
    fn sent(provider: usize, waited: Duration, duration: Duration, started: SystemTime) -> Self {
        Self {
            provider,
            status: None,
            kind: None,
            waited,
            duration,
            skipped: None,
            usage: None,
            billed: None,
            started,
            hedged: false,
        }
    }

    fn skipped(provider: usize, why: &str) -> Self {
        Self {
            skipped: Some(why.to_string()),
            billed: Some(false),
            ..Self::sent(provider, Duration::ZERO, Duration::ZERO, SystemTime::now())
        }
    }

    /// A failed attempt, as its failure describes it.
    pub fn failed(
        provider: usize,
        failure: &Failure,
        waited: Duration,
        duration: Duration,
        started: SystemTime,
    ) -> Self {
        Self {
            status: failure.status,
            kind: Some(failure.kind),
            usage: failure.usage.as_deref().cloned(),
            billed: failure.billed,
            ..Self::sent(provider, waited, duration, started)
        }
    }

    /// An answer, as it describes itself.
    pub fn answered(
        provider: usize,
        answer: &impl Answer,
        waited: Duration,
        duration: Duration,
        started: SystemTime,
    ) -> Self {
        Self {
            status: Some(answer.status()),
            usage: answer.usage(),
            billed: Some(true),
            ..Self::sent(provider, waited, duration, started)
        }
    }

    /// An attempt in flight when its call was cut short (cancelled,
    /// interrupted): whether it is billed is not known.
    pub fn cut(provider: usize, duration: Duration, started: SystemTime) -> Self {
        Self::sent(provider, Duration::ZERO, duration, started)
    }

    /// An attempt cancelled when the other of a hedge's race delivered
    /// first: whether it is billed is not known (the provider may have
    /// generated before the connection closed).
    fn lost_race(provider: usize, waited: Duration, began: (Instant, SystemTime)) -> Self {
        Self {
            hedged: true,
            ..Self::sent(provider, waited, began.0.elapsed(), began.1)
        }
    }
}

/// A provider passed over (never called), recorded where it stands in the
/// chain and logged.
fn record_skip(
    spec: &CallSpec<'_>,
    attempts: &mut Vec<AttemptRecord>,
    on_event: &mut (dyn FnMut(Event) + Send),
    index: usize,
    why: String,
) {
    attempts.push(AttemptRecord::skipped(index, &why));
    on_event(Event::Skipped {
        call_id: spec.call_id.to_string(),
        provider: index,
        reason: why,
    });
}

/// Why a call passes a provider over (from the shared state).
enum Passed {
    Cooling(Cooling),
    /// Its cooldown has ended and another call is probing it.
    Probed(Cooling),
}

impl Passed {
    /// When it stops (or stopped) cooling: the first to recover is tried
    /// when every provider left is passed over.
    fn until(&self) -> SystemTime {
        match self {
            Passed::Cooling(c) | Passed::Probed(c) => c.until,
        }
    }

    /// Why, in words, for `.attempts` and the log.
    fn why(&self, now: SystemTime) -> String {
        match self {
            Passed::Cooling(c) => {
                let left = c.until.duration_since(now).unwrap_or_default();
                format!(
                    "cooling down for {:.1}s more: {}",
                    left.as_secs_f64(),
                    c.cause.reason
                )
            }
            Passed::Probed(c) => format!(
                "being probed by another call since its cooldown ended ({})",
                c.cause.reason
            ),
        }
    }
}

/// Why a call starting at `now` passes the provider of `key` over, if it
/// does: it cools, or the quota it draws on does, or it is being probed.
fn passed(
    state: &dyn EngineState,
    key: &str,
    quota: Option<&str>,
    now: SystemTime,
) -> Option<Passed> {
    let cooling = state
        .cooling(key, now)
        .or_else(|| quota.and_then(|quota| state.cooling(quota, now)));
    cooling.map(Passed::Cooling).or_else(|| {
        state
            .half_open(key, now)
            .filter(|_| state.probed(key, now))
            .map(Passed::Probed)
    })
}

/// Whether a call starting at `now` would pass the provider of `key` over
/// (cooling, or being probed by another call), unless every provider left
/// is: a pool puts such members after the others.
pub fn passed_over(
    state: &dyn EngineState,
    key: &str,
    quota: Option<&str>,
    now: SystemTime,
) -> bool {
    passed(state, key, quota, now).is_some()
}

/// The probe of a half-open provider, held by the call trying it: given
/// back however the call leaves the provider (an answer, a failure, a
/// cancelled or dropped call), after the outcome is recorded.
struct Probe<'a> {
    state: &'a dyn EngineState,
    key: &'a str,
    token: u64,
}

impl Probe<'_> {
    fn keep(&self, now: SystemTime, lease: Duration) {
        self.state.keep_probe(self.key, self.token, now, lease);
    }
}

impl Drop for Probe<'_> {
    fn drop(&mut self) {
        self.state.release_probe(self.key, self.token);
    }
}

/// The failure of a call no provider of the chain can serve (each one's
/// reason in `unable`), or `None` when one can: known before anything is
/// sent, so a stream can say it when it is made.
pub fn unserved(unable: &[Option<&str>]) -> Option<CallFailure> {
    if unable.is_empty() || unable.iter().any(Option::is_none) {
        return None;
    }
    let attempts = unable
        .iter()
        .enumerate()
        .map(|(index, why)| AttemptRecord::skipped(index, why.unwrap_or_default()))
        .collect();
    Some(CallFailure {
        error: CallError::Unserved,
        attempts,
        reason: "no provider in the chain can serve the call".to_string(),
    })
}

/// What a successful attempt reports about itself.
pub trait Answer {
    /// The HTTP status it came with.
    fn status(&self) -> u16;
    /// How long until a rate limit its headers say is exhausted resets: the
    /// provider has no headroom left until then.
    fn exhausted_for(&self, _now: SystemTime) -> Option<Duration> {
        None
    }
    /// What the provider reported the attempt used, when it did.
    fn usage(&self) -> Option<Usage> {
        None
    }
    /// What it used in all, once known: an answer's usage; `None` for a
    /// stream, whose usage so far (Anthropic's `message_start`) is not its
    /// bill until it ends.
    fn settled_usage(&self) -> Option<Usage> {
        self.usage()
    }
    /// The rate-limit headroom its headers report, for `health()`.
    fn headroom(&self, _now: SystemTime) -> Option<Headroom> {
        None
    }
}

#[derive(Debug)]
pub struct Success<T> {
    pub value: T,
    /// Its share of the client's limits, held while the answer lives (a
    /// stream's until it ends or is closed); its tokens corrected to the
    /// usage once known.
    pub permit: Option<Permit>,
    pub provider: usize,
    pub attempts: Vec<AttemptRecord>,
}

/// A provider's failed attempt, with the wait it asked for.
#[derive(Clone, Debug, PartialEq)]
pub struct ProviderFailure {
    /// Index into [`CallSpec::providers`].
    pub provider: usize,
    pub failure: Failure,
    /// The wait the provider asked for, if any.
    pub retry_after: Option<Duration>,
}

/// Why a call failed.
#[derive(Clone, Debug, PartialEq)]
pub enum CallError {
    /// The error of the provider the call ended on.
    Provider(ProviderFailure),
    /// No provider in the chain can serve the call (see
    /// [`ProviderSlot::unable`]); nothing was sent.
    Unserved,
    /// The deadline left no time to start an attempt, or cut one short.
    /// `last` is the provider error seen before it, if any.
    Deadline {
        deadline: Duration,
        last: Option<ProviderFailure>,
        /// The provider the call was waiting for room at under the
        /// client's limits, and why it had none, when that is what the
        /// deadline cut short.
        waiting: Option<(usize, String)>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct CallFailure {
    pub error: CallError,
    pub attempts: Vec<AttemptRecord>,
    /// Why the call ended, in words, for the log.
    pub reason: String,
}

/// What the loop reports while it runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    RetryScheduled {
        call_id: String,
        provider: usize,
        /// Which attempt at this provider failed (1 = the first).
        attempt: u32,
        delay: Duration,
        kind: ErrorKind,
        status: Option<u16>,
        /// Why the engine waits, in words, for the log.
        reason: String,
    },
    FailedOver {
        call_id: String,
        /// The provider left behind, and its error.
        left: ProviderFailure,
        to_provider: usize,
        /// Why the engine left the provider, in words, for the log.
        reason: String,
    },
    /// A provider skipped while cooling down, or a retry the budget refused:
    /// for the log only (no event reaches `on_event` for a skip).
    Skipped {
        call_id: String,
        provider: usize,
        reason: String,
    },
    /// `provider` had not delivered after `after`: the same request went to
    /// `to_provider` too.
    HedgeStarted {
        call_id: String,
        provider: usize,
        to_provider: usize,
        after: Duration,
    },
    /// `winner` delivered first; `loser`'s request was cancelled.
    HedgeWon {
        call_id: String,
        winner: usize,
        loser: usize,
    },
    /// One request of a hedge failed while the other (at `other`) went on,
    /// or after it had failed too (`other_failed`): for the log only.
    HedgeFailed {
        call_id: String,
        left: ProviderFailure,
        other: usize,
        other_failed: bool,
    },
}

/// Where a call picks up again after an answer it already handed out broke
/// off (a stream cut after its first words, when the caller asked for a
/// restart): the failure counts as that provider's latest attempt, and the
/// policy decides from there as after any other (retry it, or fail over).
#[derive(Clone, Debug)]
pub struct Resume {
    /// Index into [`CallSpec::providers`].
    pub provider: usize,
    pub failure: Failure,
    /// Retries already spent at this provider.
    pub retries_done: u32,
    /// The wait slept before the broken attempt (its record keeps it).
    pub waited: Duration,
    /// How long the broken attempt ran.
    pub duration: Duration,
    /// When the broken attempt was sent.
    pub started: SystemTime,
}

/// Why a call found no room under the client's limits.
enum NoRoom {
    /// The deadline comes before any provider has room (or came while the
    /// call waited): at `provider`, for `why`.
    Deadline { provider: usize, why: String },
    /// Every provider's room comes later than the policy waits for.
    TooLong {
        provider: usize,
        wait: Duration,
        why: String,
    },
    /// A retry's provider has no room soon enough, and another provider is
    /// left: the call fails over to it.
    Elsewhere { provider: usize },
}

impl NoRoom {
    fn failure(
        self,
        spec: &CallSpec<'_>,
        deadline: Duration,
        last: Option<ProviderFailure>,
        attempts: Vec<AttemptRecord>,
    ) -> CallFailure {
        match self {
            NoRoom::Deadline { provider, why } => CallFailure {
                error: CallError::Deadline {
                    deadline,
                    last,
                    waiting: Some((provider, why.clone())),
                },
                attempts,
                reason: format!("the deadline came while the call waited for room: {why}"),
            },
            NoRoom::Elsewhere { provider } => NoRoom::TooLong {
                provider,
                wait: Duration::ZERO,
                why: "no room soon enough".to_string(),
            }
            .failure(spec, deadline, last, attempts),
            NoRoom::TooLong {
                provider,
                wait,
                why,
            } => {
                let name = spec.providers[provider].name;
                let message = format!("{name}: no room under the client's limits: {why}");
                let failure = Failure {
                    billed: Some(false),
                    ..Failure::without_response(ErrorKind::RateLimited, message.clone())
                };
                CallFailure {
                    error: CallError::Provider(ProviderFailure {
                        provider,
                        failure,
                        retry_after: Some(wait),
                    }),
                    attempts,
                    reason: message,
                }
            }
        }
    }
}

/// Why the quota of `quota` (its state key, `"quota NAME"`) cools: a rate
/// limit at one of its providers, for `cause`.
fn quota_cause(quota: &str, cause: &Cause) -> Cause {
    Cause {
        reason: format!("its {quota} was rate limited ({})", cause.reason),
        ..cause.clone()
    }
}

/// How long a call may wait for room, besides its deadline.
#[derive(Clone, Copy)]
enum RoomFor {
    /// A provider's first attempt, `candidates` being every provider left:
    /// the call waits for whichever has room first, unless every one's room
    /// is further off than the policy waits on the last provider.
    First,
    /// A retry on its provider: no longer than the policy waits for a
    /// `Retry-After` there; with another provider left, not for a slot.
    Retry { is_last: bool },
}

/// The first of `candidates` (chain positions, in order) with room under
/// the client's limits now, and its permit (`None` for a provider without
/// limits); else the call waits, in line behind the calls already waiting,
/// for the first to have room: woken when room may have been made, or at
/// the time a window has room again, through the clock's `wait` (it may end
/// early, so it is not one of the sleeps a test asserts), never past the
/// deadline, and never for longer than `room_for` allows. `reasons` gets
/// why each had no room.
async fn find_room(
    spec: &CallSpec<'_>,
    limiter: &Arc<Limiter>,
    clock: &dyn Clock,
    candidates: &[usize],
    room_for: RoomFor,
    remaining: &(dyn Fn(&dyn Clock) -> Option<Duration> + Sync),
    reasons: &mut [Option<String>],
) -> Result<(usize, Option<Permit>), NoRoom> {
    let mut queued = None;
    loop {
        let now = clock.wall();
        let mut blocked_all: Vec<(usize, Blocked)> = Vec::new();
        for &candidate in candidates {
            let slot = &spec.providers[candidate];
            if slot.limits.is_empty() {
                return Ok((candidate, None));
            }
            // A fleet's answer is waited for as a retry's budget is: never
            // with more than the call can spare.
            let within = super::state::spare(remaining(clock));
            let taken = limiter
                .take(slot.limits, now, slot.tokens, queued.as_ref(), within)
                .await;
            match taken {
                Ok(permit) => return Ok((candidate, Some(permit))),
                Err(blocked) => {
                    reasons[candidate] = Some(blocked.why.clone());
                    blocked_all.push((candidate, blocked));
                }
            }
        }
        if let Some(in_line) = &queued {
            in_line.looked();
        }
        let Some((first, _)) = blocked_all.first() else {
            unreachable!("a provider looks for room among at least itself");
        };
        let first = *first;
        let soonest = blocked_all
            .iter()
            .filter_map(|(candidate, blocked)| Some((*candidate, blocked.wait(now)?)))
            .min_by_key(|&(_, wait)| wait);
        // When room comes for each is known, or one waits for a slot (or
        // behind calls in line: their turn comes when they are served).
        let unknown = blocked_all.iter().any(|(_, blocked)| blocked.at.is_none());
        let policy = spec.policy;
        let too_long =
            |provider: usize, wait: Duration, cap: Duration, reasons: &[Option<String>]| {
                NoRoom::TooLong {
                    provider,
                    wait,
                    why: format!(
                        "{}, longer than the {}s the policy waits",
                        reasons[provider].clone().unwrap_or_default(),
                        cap.as_secs_f64()
                    ),
                }
            };
        match (room_for, soonest) {
            (RoomFor::First, Some((provider, wait)))
                if !unknown && wait > policy.max_retry_after_last =>
            {
                return Err(too_long(
                    provider,
                    wait,
                    policy.max_retry_after_last,
                    reasons,
                ));
            }
            (RoomFor::Retry { is_last: false }, _) if unknown => {
                return Err(NoRoom::Elsewhere { provider: first });
            }
            (RoomFor::Retry { is_last }, Some((provider, wait))) if !unknown => {
                let cap = if is_last {
                    policy.max_retry_after_last
                } else {
                    policy.max_retry_after
                };
                if wait > cap {
                    return Err(match is_last {
                        true => too_long(provider, wait, cap, reasons),
                        false => NoRoom::Elsewhere { provider },
                    });
                }
            }
            _ => {}
        }
        let left = remaining(clock);
        let out_of_time = |provider: usize, reasons: &[Option<String>]| NoRoom::Deadline {
            provider,
            why: reasons[provider].clone().unwrap_or_default(),
        };
        if left == Some(Duration::ZERO) {
            return Err(out_of_time(soonest.map_or(first, |(p, _)| p), reasons));
        }
        if let (false, Some((provider, wait)), Some(left)) = (unknown, soonest, left) {
            if wait >= left {
                return Err(match room_for {
                    RoomFor::Retry { is_last: false } => NoRoom::Elsewhere { provider },
                    _ => out_of_time(provider, reasons),
                });
            }
        }
        // Room held in another process is freed unheard: asked again after
        // a pause of real time (or when a call of this process makes room),
        // bounded by the deadline. No virtual clock moves for it (nor to a
        // known time another candidate has room at): that call is in
        // flight, as a request would be.
        let recheck = blocked_all
            .iter()
            .filter_map(|(_, blocked)| blocked.recheck)
            .min();
        // In line from the first wait on: later calls are not let past it
        // where it has no room; it looks again at once, in line (unless
        // only the fleet refused it: its lines here do not matter then).
        if queued.is_none() {
            queued = Some(limiter.queue(clock));
            if recheck.is_none() {
                continue;
            }
        }
        let Some(in_line) = &queued else {
            unreachable!("in line from here on");
        };
        if let Some(recheck) = recheck {
            let pause = left.map_or(recheck, |left| left.min(recheck));
            tokio::select! {
                () = in_line.woken() => {}
                () = clock.pause(pause) => {}
            }
            continue;
        }
        let bound = [soonest.map(|(_, wait)| wait), left]
            .into_iter()
            .flatten()
            .min();
        let timer = async {
            match bound {
                Some(bound) => clock.wait(bound).await,
                None => std::future::pending().await,
            }
        };
        // Woken when room may have been made, or at the time it comes, or
        // at the deadline: then it looks again.
        tokio::select! {
            () = in_line.woken() => {}
            () = timer => {}
        }
    }
}

/// Who delivered first in a hedge's race.
enum Won<T> {
    /// The first attempt: its outcome (an answer before the hedge's, or its
    /// end after the hedge failed) and how long it took.
    First(Result<T, Failure>, Duration),
    /// The hedge: its answer, the first attempt's record (cancelled, or
    /// failed before), how long the hedge took and when it began.
    Second(T, AttemptRecord, Duration, SystemTime),
}

/// A hedge's race, run out.
struct Raced<T> {
    outcome: Won<T>,
    /// The hedge's record when the first attempt's outcome is the call's
    /// (cancelled, or failed).
    second_record: Option<AttemptRecord>,
    /// The hedge's failure, when it failed.
    second_failed: Option<Failure>,
    /// The first attempt's failure, when it failed and the hedge answered.
    first_failed: Option<Failure>,
}

/// Runs a late first attempt (at `first.0`) and its hedge (at `second.0`)
/// side by side until one delivers or both fail; a failure of one leaves
/// the call to the other (logged: a `HedgeFailed` event). What is dropped
/// here (the loser) is cancelled, its connection closed.
async fn race<T, P, B>(
    spec: &CallSpec<'_>,
    first: (
        usize,
        std::pin::Pin<&mut P>,
        (Instant, SystemTime),
        Duration,
    ),
    second: (usize, B),
    on_event: &mut (dyn FnMut(Event) + Send),
) -> Raced<T>
where
    P: Future<Output = Result<T, Failure>>,
    B: Future<Output = Result<T, Failure>>,
{
    let (index, mut primary, began, waited) = first;
    let (to, backup) = second;
    let hedge_began = (Instant::now(), SystemTime::now());
    tokio::pin!(backup);
    // A request that failed in the race lost it.
    let failed_record = |provider, failure: &Failure, waited, took, started| AttemptRecord {
        hedged: true,
        ..AttemptRecord::failed(provider, failure, waited, took, started)
    };
    let mut primary_failed: Option<(Failure, Duration)> = None;
    let mut second_record = None;
    let mut second_failed = None;
    let report = |provider: usize,
                  failure: &Failure,
                  other_failed: bool,
                  on_event: &mut (dyn FnMut(Event) + Send)| {
        if failure.out_of_time {
            return; // the deadline's doing, reported as the call's end
        }
        on_event(Event::HedgeFailed {
            call_id: spec.call_id.to_string(),
            left: ProviderFailure {
                provider,
                failure: failure.clone(),
                retry_after: None,
            },
            other: if provider == index { to } else { index },
            other_failed,
        });
    };
    loop {
        tokio::select! {
            biased;
            outcome = &mut primary, if primary_failed.is_none() => {
                let took = began.0.elapsed();
                match outcome {
                    Ok(value) => {
                        if second_record.is_none() {
                            // The hedge was still in flight: cancelled.
                            second_record =
                                Some(AttemptRecord::lost_race(to, Duration::ZERO, hedge_began));
                        }
                        on_event(Event::HedgeWon {
                            call_id: spec.call_id.to_string(),
                            winner: index,
                            loser: to,
                        });
                        return Raced {
                            outcome: Won::First(Ok(value), took),
                            second_record,
                            second_failed,
                            first_failed: None,
                        };
                    }
                    Err(failure) if second_record.is_some() => {
                        return Raced {
                            outcome: Won::First(Err(failure), took),
                            second_record,
                            second_failed,
                            first_failed: None,
                        };
                    }
                    Err(failure) => {
                        report(index, &failure, false, on_event);
                        primary_failed = Some((failure, took));
                    }
                }
            }
            outcome = &mut backup, if second_record.is_none() => {
                let took = hedge_began.0.elapsed();
                match outcome {
                    Ok(value) => {
                        let (first_record, first_failed) = match primary_failed.take() {
                            Some((failure, took_first)) => (
                                failed_record(index, &failure, waited, took_first, began.1),
                                Some(failure),
                            ),
                            None => (AttemptRecord::lost_race(index, waited, began), None),
                        };
                        on_event(Event::HedgeWon {
                            call_id: spec.call_id.to_string(),
                            winner: to,
                            loser: index,
                        });
                        return Raced {
                            outcome: Won::Second(value, first_record, took, hedge_began.1),
                            second_record: None,
                            second_failed: None,
                            first_failed,
                        };
                    }
                    Err(failure) => {
                        second_record = Some(failed_record(
                            to,
                            &failure,
                            Duration::ZERO,
                            took,
                            hedge_began.1,
                        ));
                        report(to, &failure, primary_failed.is_some(), on_event);
                        if let Some((first, took_first)) = primary_failed.take() {
                            return Raced {
                                outcome: Won::First(Err(first), took_first),
                                second_record,
                                second_failed: Some(failure),
                                first_failed: None,
                            };
                        }
                        second_failed = Some(failure);
                    }
                }
            }
        }
    }
}

/// A hedge that failed, as its provider's first attempt: what the call does
/// there if it moves on to it, as it would without a hedge.
enum FailedHedge {
    /// The policy retries such a failure: picked up from as a resume.
    Retried(Resume),
    /// The policy gives up on it at once (it cools now, if the policy cools
    /// it): passed over, its failure the call's latest.
    GivenUp {
        cooling: Option<Cooling>,
        failed: ProviderFailure,
    },
}

impl FailedHedge {
    fn after(
        spec: &CallSpec<'_>,
        clock: &dyn Clock,
        provider: usize,
        lost: &Failure,
        record: &AttemptRecord,
        is_last: bool,
        unit: f64,
    ) -> Self {
        let now = clock.wall();
        let slot = &spec.providers[provider];
        let first_try = Situation::new(lost, 0, is_last, now, slot.overloaded_statuses);
        if let Decision::Retry(_) = spec.policy.decide_explained(&first_try, unit).decision {
            return Self::Retried(Resume {
                provider,
                failure: lost.clone(),
                retries_done: 0,
                waited: Duration::ZERO,
                duration: record.duration,
                started: record.started,
            });
        }
        let hinted = spec.policy.server_wait(&first_try);
        cool_given_up(spec, clock, slot, lost, hinted);
        Self::GivenUp {
            cooling: spec
                .state
                .and_then(|state| state.cooling(slot.state_key, now)),
            failed: ProviderFailure {
                provider,
                failure: lost.clone(),
                retry_after: hinted,
            },
        }
    }

    fn provider(&self) -> usize {
        match self {
            Self::Retried(broken) => broken.provider,
            Self::GivenUp { failed, .. } => failed.provider,
        }
    }
}

/// The first attempt of a race the hedge won, failed: given up on (the call
/// answered elsewhere), it cools as a provider failed over from does.
fn cool_failed(spec: &CallSpec<'_>, clock: &dyn Clock, provider: usize, failure: &Failure) {
    if failure.out_of_time {
        return;
    }
    let slot = &spec.providers[provider];
    let situation = Situation::new(failure, 0, false, clock.wall(), slot.overloaded_statuses);
    cool_given_up(
        spec,
        clock,
        slot,
        failure,
        spec.policy.server_wait(&situation),
    );
}

/// A failed request's share of the limits: its tokens are what it reported,
/// none if it was refused unbilled (else its estimate stands); its slot is
/// free for the next request as the permit drops.
fn settle_failed(permit: Permit, failure: &Failure) {
    match (
        failure.usage.as_deref().and_then(Usage::total),
        failure.billed,
    ) {
        (Some(tokens), _) => permit.correct(tokens),
        (None, Some(false)) => permit.correct(0),
        (None, _) => {}
    }
}

/// Where a late attempt at `index` is hedged, with its permit, if the hedge
/// budget allows one; what is passed over, and a budget that refuses, are
/// recorded in `late`.
#[allow(clippy::too_many_arguments)]
async fn hedge_target(
    spec: &CallSpec<'_>,
    clock: &dyn Clock,
    hedge: &super::hedge::Hedge,
    index: usize,
    passed_at_start: &[Option<Passed>],
    left: Option<Duration>,
    late: &mut Vec<AttemptRecord>,
    on_event: &mut (dyn FnMut(Event) + Send),
) -> Option<(usize, Option<Permit>)> {
    let now = clock.wall();
    // The first after it that can serve the call, is not passed over (as
    // the call passes providers over: cooling, or probed by another call)
    // and has room (its permit taken); then the budget's leave: a hedge
    // with nowhere to go spends none of it. What it passes over is said
    // only if a hedge goes, or for want of room.
    let mut chosen = None;
    let mut cooling = Vec::new();
    let mut no_room = Vec::new();
    for (to, slot) in spec.providers.iter().enumerate().skip(index + 1) {
        if slot.unable.is_some() {
            continue;
        }
        let over = passed_at_start[to]
            .as_ref()
            .map(|p| p.why(now))
            .or_else(|| {
                let state = spec.state?;
                Some(passed(state, slot.state_key, slot.quota_key, now)?.why(now))
            });
        if let Some(why) = over {
            cooling.push((to, format!("hedge not sent: {why}")));
            continue;
        }
        let Some(limiter) = spec.limiter.filter(|_| !slot.limits.is_empty()) else {
            chosen = Some((to, None));
            break;
        };
        let within = super::state::spare(left);
        match limiter
            .take(slot.limits, now, slot.tokens, None, within)
            .await
        {
            Ok(permit) => {
                chosen = Some((to, Some(permit)));
                break;
            }
            Err(blocked) => no_room.push((to, format!("hedge not sent: {}", blocked.why))),
        }
    }
    let mut say = |skips: Vec<(usize, String)>| {
        for (to, why) in skips {
            record_skip(spec, late, on_event, to, why);
        }
    };
    let Some((to, permit)) = chosen else {
        say(no_room);
        return None;
    };
    let granted = spec.state.is_none_or(|state| {
        let within = super::state::spare(left);
        state.spend_retry(super::hedge::BUDGET_KEY, now, &hedge.window(), within)
    });
    if !granted {
        if let Some(unsent) = permit {
            unsent.unused();
        }
        say(vec![(
            to,
            "hedge not sent: the hedge budget is spent".to_string(),
        )]);
        return None;
    }
    let mut skips = [cooling, no_room].concat();
    skips.sort_by_key(|(at, _)| *at);
    say(skips);
    Some((to, permit))
}

/// A provider given up on after `failure` (the wait it asked for:
/// `hinted`) cools down in the shared state, so later calls go elsewhere.
fn cool_given_up(
    spec: &CallSpec<'_>,
    clock: &dyn Clock,
    slot: &ProviderSlot<'_>,
    failure: &Failure,
    hinted: Option<Duration>,
) {
    let Some(state) = spec.state else { return };
    // Calls in flight when it began cooling fail together: one failure, not
    // one doubling each.
    let failures = state.failures_in_a_row(slot.state_key);
    let streak = match state.cooling(slot.state_key, clock.wall()) {
        Some(_) => failures.saturating_sub(1),
        None => failures,
    };
    if let Some((cool_for, why)) = spec.policy.cooldown(failure.kind, hinted, streak) {
        let now = clock.wall();
        let until = now.checked_add(cool_for).unwrap_or(now);
        let cause = Cause {
            reason: why,
            kind: Some(failure.kind),
            status: failure.status,
            retry_after: hinted,
        };
        // A rate limit is the quota's: every provider drawing on it cools
        // with this one; an overload stays with it.
        if let (ErrorKind::RateLimited, Some(quota)) = (failure.kind, slot.quota_key) {
            state.cool(quota, now, until, &quota_cause(quota, &cause));
        }
        state.cool(slot.state_key, now, until, &cause);
    }
}

/// Runs one call: tries each provider in order, retrying and sleeping as the
/// policy decides, never past the deadline; with `resume`, it picks up after
/// an answer already handed out broke off: from its provider on, with its
/// failure as that provider's latest attempt (the deadline counts from now:
/// a restart is a new start). `None` is a call from its start.
///
/// `attempt(provider, bounds)` makes one attempt at `spec.providers[provider]`:
/// each of its waits ends after `bounds.timeout`, and the whole attempt after
/// `bounds.left` (the deadline) with a [`Failure::out_of_time`].
/// `unit` draws from U[0,1) for jitter; `on_event` sees every retry and
/// failover. A failed call is the `Err`, for the caller to report.
pub async fn run_from<T, F, Fut>(
    spec: &CallSpec<'_>,
    resume: Option<Resume>,
    clock: &dyn Clock,
    unit: &mut (dyn FnMut() -> f64 + Send),
    on_event: &mut (dyn FnMut(Event) + Send),
    mut attempt: F,
) -> Result<Success<T>, CallFailure>
where
    T: Answer,
    F: FnMut(usize, AttemptBounds) -> Fut,
    Fut: Future<Output = Result<T, Failure>>,
{
    let start = clock.now();
    let first = resume.as_ref().map_or(0, |r| r.provider);
    let mut resume = resume;
    let remaining = |clock: &dyn Clock| {
        spec.deadline
            .map(|d| d.saturating_sub(clock.now().saturating_sub(start) + spec.spent))
    };
    let mut attempts = Vec::new();
    let mut last: Option<ProviderFailure> = None;
    let count = spec.providers.len();

    let fail = |error, attempts, reason| CallFailure {
        error,
        attempts,
        reason,
    };
    let deadline = spec.deadline.unwrap_or_default();
    let unable: Vec<Option<&str>> = spec.providers.iter().map(|slot| slot.unable).collect();
    if let Some(failure) = unserved(&unable) {
        return Err(failure);
    }

    // Providers cooling down (from earlier calls), or being probed by
    // another call after their cooldown ended, are passed over, unless every
    // one left is: then the one that recovers first is tried (a probed one
    // has already reached its time). A stream being restarted goes back to
    // its provider whatever the state says.
    let started_at = clock.wall();
    let mut passed: Vec<Option<Passed>> = spec
        .providers
        .iter()
        .map(|slot| match (spec.state, slot.unable) {
            (Some(state), None) => passed(state, slot.state_key, slot.quota_key, started_at),
            _ => None,
        })
        .collect();
    let able: Vec<usize> = (first..count)
        .filter(|&i| spec.providers[i].unable.is_none())
        .collect();
    if able.iter().all(|&i| passed[i].is_some()) {
        if let Some(&soonest) = able
            .iter()
            .min_by_key(|&&i| passed[i].as_ref().map(Passed::until))
        {
            passed[soonest] = None;
        }
    }
    if let Some(broken) = &resume {
        passed[broken.provider] = None;
    }
    let next_able = |from: usize| {
        (from..count).find(|&i| spec.providers[i].unable.is_none() && passed[i].is_none())
    };
    // A provider passed over is recorded where it stands in the chain, and
    // logged.
    let pass_over =
        |attempts: &mut Vec<AttemptRecord>,
         on_event: &mut (dyn FnMut(Event) + Send),
         index: usize,
         why: String| record_skip(spec, attempts, on_event, index, why);

    // Room under the client's limits: the provider chosen further down the
    // chain (and its permit) when those before it had none, and why each
    // of them had none.
    // (And how long the call waited for it: the chosen one's first
    // attempt's wait.)
    let mut room: Option<(usize, Option<Permit>, Duration)> = None;
    // At most one hedge a call; a restart of a stream sends none.
    let mut hedged = resume.is_some();
    // A hedge that failed: what the call does at its provider if it moves
    // on to it, as without a hedge.
    let mut failed_hedge: Option<FailedHedge> = None;
    // (A hedge that never hedges, `max_extra=0`, keeps no budget.)
    let hedges = spec.hedge.filter(|hedge| hedge.hedges());
    if let (Some(hedge), Some(state), false) = (hedges, spec.state, hedged) {
        state.note_call(super::hedge::BUDGET_KEY, clock.wall(), &hedge.window());
    }
    // (Made only for a client with limits; boxed below, the wait for room
    // is no part of a call without them.)
    let mut no_room: Vec<Option<String>> = match spec.limiter {
        Some(_) => vec![None; count],
        None => Vec::new(),
    };

    for (index, slot) in spec.providers.iter().enumerate().skip(first) {
        if let Some(why) = slot.unable {
            attempts.push(AttemptRecord::skipped(index, why));
            continue;
        }
        if let Some(passed) = &passed[index] {
            pass_over(&mut attempts, on_event, index, passed.why(clock.wall()));
            continue;
        }
        let replaying_hedge = match failed_hedge.take_if(|hedge| hedge.provider() == index) {
            Some(FailedHedge::GivenUp { cooling, failed }) => {
                let why = match cooling {
                    Some(cooling) => Passed::Cooling(cooling).why(clock.wall()),
                    None => format!("its hedge failed ({})", failed.failure.kind.as_str()),
                };
                pass_over(&mut attempts, on_event, index, why);
                if next_able(index + 1).is_none() {
                    let reason =
                        "its hedge failed and was given up on; no provider left to fail over to";
                    let error = CallError::Provider(failed);
                    return Err(fail(error, attempts, reason.to_string()));
                }
                last = Some(failed);
                continue;
            }
            Some(FailedHedge::Retried(broken)) => {
                resume = Some(broken);
                true
            }
            None => false,
        };
        // (Its record is in `attempts` already, from the race.)
        let mut recorded = replaying_hedge;
        let resuming_here = resume.as_ref().is_some_and(|r| r.provider == index);
        // A provider whose quota began cooling during this call (a rate
        // limit at another provider drawing on it) is passed over too.
        let quota_cooling = |i: usize| {
            let state = spec.state?;
            let quota = spec.providers[i].quota_key.filter(|_| last.is_some())?;
            state.cooling(quota, clock.wall())
        };
        if let (Some(cooling), Some(failed)) = (quota_cooling(index), &last) {
            let why = Passed::Cooling(cooling).why(clock.wall());
            pass_over(&mut attempts, on_event, index, why);
            if next_able(index + 1).is_none() {
                let reason = "its quota is rate limited; no provider left to fail over to";
                let error = CallError::Provider(failed.clone());
                return Err(fail(error, attempts, reason.to_string()));
            }
            continue;
        }
        // A provider at its limits is passed over for the next with room;
        // with none, the call waits for the first to have it.
        let mut permit = None;
        let mut room_waited = Duration::ZERO;
        if let (Some(limiter), false) = (spec.limiter, resuming_here) {
            let chosen = match room.take() {
                Some(chosen) => Some(chosen),
                None if !slot.limits.is_empty() => {
                    let candidates: Vec<usize> = (index..count)
                        .filter(|&i| {
                            spec.providers[i].unable.is_none()
                                && passed[i].is_none()
                                && (i == index || quota_cooling(i).is_none())
                        })
                        .collect();
                    let looked = clock.now();
                    let found = Box::pin(find_room(
                        spec,
                        limiter,
                        clock,
                        &candidates,
                        RoomFor::First,
                        &remaining,
                        &mut no_room,
                    ))
                    .await;
                    let waited = clock.now().saturating_sub(looked);
                    match found {
                        Ok((chosen, held)) => Some((chosen, held, waited)),
                        Err(no) => {
                            for &i in &candidates {
                                let why = no_room[i].take().unwrap_or_default();
                                pass_over(&mut attempts, on_event, i, why);
                            }
                            return Err(no.failure(spec, deadline, last, attempts));
                        }
                    }
                }
                None => None,
            };
            match chosen {
                Some((chosen, held, waited)) if chosen == index => {
                    permit = held;
                    room_waited = waited;
                }
                Some(later) => {
                    room = Some(later);
                    let why = no_room[index].take().unwrap_or_default();
                    pass_over(&mut attempts, on_event, index, why);
                    continue;
                }
                None => {}
            }
        }
        // Half-open (its cooldown ended, no success since): this call probes
        // it, unless another call does; then this one keeps to the next
        // provider, or with none left tries this one all the same.
        let half_open = spec
            .state
            .filter(|_| !resuming_here)
            .and_then(|state| Some((state, state.half_open(slot.state_key, clock.wall())?)));
        let probe = match half_open {
            Some((state, ended)) => {
                let within = super::state::spare(remaining(clock));
                match state.take_probe(slot.state_key, clock.wall(), spec.attempt_timeout, within) {
                    Some(token) => Some(Probe {
                        state,
                        key: slot.state_key,
                        token,
                    }),
                    None if next_able(index + 1).is_some() => {
                        if let Some(unsent) = permit.take() {
                            unsent.unused();
                        }
                        let why = Passed::Probed(ended).why(clock.wall());
                        pass_over(&mut attempts, on_event, index, why);
                        continue;
                    }
                    None => None,
                }
            }
            None => None,
        };
        let is_last = next_able(index + 1).is_none();
        let mut retries_done = resume
            .as_ref()
            .filter(|r| r.provider == index)
            .map_or(0, |r| r.retries_done);
        let budget = spec.state.zip(spec.policy.budget.as_ref());
        // (A resume's call was noted when it began; a hedge's has not been
        // at this provider.)
        if let (Some((state, budget)), true) = (budget, resume.is_none() || replaying_hedge) {
            state.note_call(slot.state_key, clock.wall(), budget);
        }
        let mut waited = resume
            .as_ref()
            .filter(|r| r.provider == index)
            .map_or(room_waited, |r| r.waited);
        loop {
            // A retry needs room too: as a wait like its `Retry-After`; with
            // another provider left, one that has no room soon enough is
            // left for it.
            if let (Some(limiter), None, None, false) =
                (spec.limiter, &permit, &resume, slot.limits.is_empty())
            {
                let looked = clock.now();
                let found = Box::pin(find_room(
                    spec,
                    limiter,
                    clock,
                    &[index],
                    RoomFor::Retry { is_last },
                    &remaining,
                    &mut no_room,
                ))
                .await;
                waited += clock.now().saturating_sub(looked);
                match (found, &last) {
                    (Ok((_, held)), _) => permit = held,
                    (Err(NoRoom::Elsewhere { .. }), Some(failed)) => {
                        let why = no_room[index].take().unwrap_or_default();
                        pass_over(
                            &mut attempts,
                            on_event,
                            index,
                            format!("retry skipped: {why}"),
                        );
                        on_event(Event::FailedOver {
                            call_id: spec.call_id.to_string(),
                            left: failed.clone(),
                            to_provider: next_able(index + 1).unwrap_or(index + 1),
                            reason: format!("no room for a retry: {why}"),
                        });
                        break;
                    }
                    (Err(no), _) => return Err(no.failure(spec, deadline, last, attempts)),
                }
            }
            let left = remaining(clock);
            if left == Some(Duration::ZERO) {
                if let Some(unsent) = permit.take() {
                    unsent.unused();
                }
                let reason = "no time is left to start an attempt".to_string();
                let error = CallError::Deadline {
                    deadline,
                    last,
                    waiting: None,
                };
                return Err(fail(error, attempts, reason));
            }
            let bounds = AttemptBounds {
                timeout: left.map_or(spec.attempt_timeout, |l| l.min(spec.attempt_timeout)),
                left,
            };
            let sent_at = spec.state.map_or(0, |state| state.epoch());
            // What a hedge passed over and the hedge's record, written after
            // the first attempt's (in the order they began).
            let mut held_back: Vec<AttemptRecord> = Vec::new();
            // Whether this attempt ran in a hedge's race.
            let mut raced_now = false;
            // (The provider the outcome is from: a hedge's may be the next.)
            let mut at = index;
            let (outcome, duration, started) = match resume.take() {
                Some(broken) => (Err(broken.failure), broken.duration, broken.started),
                None => {
                    let began = (Instant::now(), SystemTime::now());
                    let primary = attempt(index, bounds);
                    let hedge_after = spec
                        .hedge
                        .filter(|hedge| !hedged && hedge.hedges())
                        .and_then(|hedge| Some((hedge, hedge.after_for(slot.state_key)?)));
                    match hedge_after {
                        None => {
                            let outcome = primary.await;
                            (outcome, began.0.elapsed(), began.1)
                        }
                        Some((hedge, after)) => {
                            tokio::pin!(primary);
                            let due = tokio::select! {
                                biased;
                                outcome = &mut primary => Err(outcome),
                                () = clock.pause(after) => Ok(()),
                            };
                            let target = match due {
                                Err(_) => None,
                                Ok(()) => {
                                    let left = remaining(clock);
                                    // (Boxed, as the race below: a call that
                                    // does not hedge carries neither in its
                                    // future.)
                                    Box::pin(hedge_target(
                                        spec,
                                        clock,
                                        hedge,
                                        index,
                                        &passed,
                                        left,
                                        &mut held_back,
                                        on_event,
                                    ))
                                    .await
                                }
                            };
                            match (due, target) {
                                (Err(outcome), _) => (outcome, began.0.elapsed(), began.1),
                                (Ok(()), None) => {
                                    let outcome = primary.await;
                                    (outcome, began.0.elapsed(), began.1)
                                }
                                (Ok(()), Some((to, held))) => {
                                    hedged = true;
                                    raced_now = true;
                                    on_event(Event::HedgeStarted {
                                        call_id: spec.call_id.to_string(),
                                        provider: index,
                                        to_provider: to,
                                        after,
                                    });
                                    // The call's deadline, as the first attempt
                                    // counts it (real time passed during
                                    // `after`, which a virtual clock does not
                                    // count).
                                    let left = match (remaining(clock), bounds.left) {
                                        (Some(now), Some(first)) => {
                                            Some(now.min(first.saturating_sub(began.0.elapsed())))
                                        }
                                        (now, _) => now,
                                    };
                                    let hedge_bounds = AttemptBounds {
                                        timeout: left.map_or(spec.attempt_timeout, |l| {
                                            l.min(spec.attempt_timeout)
                                        }),
                                        left,
                                    };
                                    let raced = Box::pin(race(
                                        spec,
                                        (index, primary, began, waited),
                                        (to, attempt(to, hedge_bounds)),
                                        on_event,
                                    ))
                                    .await;
                                    // The hedge's own record comes after the
                                    // first's (in the order they began); a
                                    // failed one is its provider's first
                                    // attempt. (A request the deadline cut
                                    // short says nothing of its provider.)
                                    if let (Some(lost), Some(record)) =
                                        (&raced.second_failed, &raced.second_record)
                                    {
                                        if !lost.out_of_time {
                                            let is_last = next_able(to + 1).is_none();
                                            failed_hedge = Some(FailedHedge::after(
                                                spec,
                                                clock,
                                                to,
                                                lost,
                                                record,
                                                is_last,
                                                unit(),
                                            ));
                                        }
                                    }
                                    if let Some(lost) = &raced.first_failed {
                                        cool_failed(spec, clock, index, lost);
                                    }
                                    held_back.extend(raced.second_record);
                                    match raced.outcome {
                                        Won::First(outcome, took) => {
                                            if let (Some(lost), Some(unsent)) =
                                                (&raced.second_failed, held)
                                            {
                                                settle_failed(unsent, lost);
                                            }
                                            (outcome, took, began.1)
                                        }
                                        Won::Second(value, first_record, took, started) => {
                                            // In the order they began: the first
                                            // attempt, what the hedge passed over,
                                            // then the hedge's answer.
                                            attempts.push(first_record);
                                            attempts.append(&mut held_back);
                                            // The winner's share of the limits is the
                                            // call's now; the loser's slot is free.
                                            let lost = std::mem::replace(&mut permit, held);
                                            if let (Some(failed), Some(lost)) =
                                                (&raced.first_failed, lost)
                                            {
                                                settle_failed(lost, failed);
                                            }
                                            at = to;
                                            waited = Duration::ZERO;
                                            (Ok(value), took, started)
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            };
            let slot = &spec.providers[at];
            let failure = match outcome {
                Ok(value) => {
                    // How long it took to deliver: what a learned `after` reads
                    // (from attempts that ran alone: a race's winner says
                    // nothing of the loser's time, which would skew it low).
                    if let (Some(hedge), false) = (spec.hedge, raced_now) {
                        hedge.observe(slot.state_key, duration);
                    }
                    if let Some(state) = spec.state {
                        let now = clock.wall();
                        state.recover(slot.state_key, sent_at);
                        if let Some(quota) = slot.quota_key {
                            state.recover(quota, sent_at);
                        }
                        if let Some(headroom) = value.headroom(now) {
                            if let (Some(limiter), Some(own)) = (spec.limiter, slot.own_limit) {
                                limiter.saw_headroom(&[own], now, &headroom);
                            }
                            state.saw_headroom(slot.state_key, now, headroom);
                        }
                        // No headroom left: the next call goes elsewhere
                        // rather than spend a request on a 429.
                        if let Some(reset) = value.exhausted_for(now) {
                            let why = format!(
                                "its rate limit is exhausted for {:.3}s",
                                reset.as_secs_f64()
                            );
                            let (cool_for, why) = spec.policy.hinted_cooldown(reset, why);
                            let until = now.checked_add(cool_for).unwrap_or(now);
                            state.cool(slot.state_key, now, until, &Cause::because(why));
                        }
                    }
                    attempts.push(AttemptRecord::answered(
                        at, &value, waited, duration, started,
                    ));
                    attempts.append(&mut held_back);
                    if let (Some(permit), Some(used)) = (&permit, value.settled_usage()) {
                        if let Some(tokens) = used.total() {
                            permit.correct(tokens);
                        }
                    }
                    return Ok(Success {
                        value,
                        permit,
                        provider: at,
                        attempts,
                    });
                }
                Err(failure) => failure,
            };
            if !std::mem::take(&mut recorded) {
                attempts.push(AttemptRecord::failed(
                    index, &failure, waited, duration, started,
                ));
            }
            attempts.append(&mut held_back);
            let situation = Situation::new(
                &failure,
                retries_done,
                is_last,
                clock.wall(),
                slot.overloaded_statuses,
            );
            // The wait it asked for, even under `x-should-retry: false`
            // (which forbids the retry, not the hint): the error's
            // `.retry_after`, and the cooldown if it is given up on.
            let hinted = spec.policy.server_wait(&situation);
            let retry_after = hinted;
            if let Some(permit) = permit.take() {
                settle_failed(permit, &failure);
            }
            // A rate limit with a wait: nothing more is sent on its limits,
            // nor at any provider of its quota, until the wait is over.
            if let (ErrorKind::RateLimited, Some(wait)) = (failure.kind, hinted) {
                let now = clock.wall();
                let (cool_for, why) = spec
                    .policy
                    .hinted_cooldown(wait, format!("it asked for {}s", wait.as_secs_f64()));
                let until = now.checked_add(cool_for).unwrap_or(now);
                if let (Some(limiter), Some(own), false) =
                    (spec.limiter, slot.own_limit, wait.is_zero())
                {
                    limiter.close(&[own], until, "rate limited");
                }
                if let (Some(state), Some(quota), false) =
                    (spec.state, slot.quota_key, wait.is_zero())
                {
                    let cause = Cause {
                        reason: why,
                        kind: Some(failure.kind),
                        status: failure.status,
                        retry_after: hinted,
                    };
                    state.cool(quota, now, until, &quota_cause(quota, &cause));
                }
            }
            let left = |failure| ProviderFailure {
                provider: index,
                failure,
                retry_after,
            };
            // Only the deadline's bound gives `out_of_time`: a provider that
            // is merely slow (its own timeout ran out) fails over instead.
            if failure.out_of_time && spec.deadline.is_some() {
                let reason = "the deadline cut the attempt short".to_string();
                let error = CallError::Deadline {
                    deadline,
                    last: Some(left(failure)),
                    waiting: None,
                };
                return Err(fail(error, attempts, reason));
            }
            let Verdict { decision, reason } = spec.policy.decide_explained(&situation, unit());
            // The budget's round trip comes before the wait: it may take part
            // of what the wait leaves.
            let within_budget = |state: &dyn EngineState, budget, wait: Duration| {
                let within = super::state::spare(remaining(clock).map(|l| l.saturating_sub(wait)));
                state.spend_retry(slot.state_key, clock.wall(), budget, within)
            };
            let (fail_over, reason) = match decision {
                // (Checked only for a wait the deadline allows: the budget
                // counts the retries it grants.)
                Decision::Retry(wait)
                    if remaining(clock).is_none_or(|l| wait < l)
                        && budget
                            .is_some_and(|(state, budget)| !within_budget(state, budget, wait)) =>
                {
                    let why = "retry skipped: the retry budget is spent";
                    attempts.push(AttemptRecord::skipped(index, why));
                    on_event(Event::Skipped {
                        call_id: spec.call_id.to_string(),
                        provider: index,
                        reason: why.to_string(),
                    });
                    let fail_over = spec
                        .policy
                        .fails_over_after(&failure, slot.overloaded_statuses);
                    (fail_over, why.to_string())
                }
                Decision::Retry(wait) if remaining(clock).is_none_or(|l| wait < l) => {
                    retries_done += 1;
                    on_event(Event::RetryScheduled {
                        call_id: spec.call_id.to_string(),
                        provider: index,
                        attempt: retries_done,
                        delay: wait,
                        kind: failure.kind,
                        status: failure.status,
                        reason,
                    });
                    if let Some(probe) = &probe {
                        probe.keep(clock.wall(), wait.saturating_add(spec.attempt_timeout));
                    }
                    clock.sleep(wait).await;
                    waited = wait;
                    last = Some(left(failure));
                    continue;
                }
                // A wait that would end past the deadline is not slept.
                Decision::Retry(wait) => {
                    let why = format!(
                        "a {:.3}s wait would end past the deadline",
                        wait.as_secs_f64()
                    );
                    let fail_over = spec
                        .policy
                        .fails_over_after(&failure, slot.overloaded_statuses);
                    (fail_over, why)
                }
                Decision::GiveUp { fail_over } => (fail_over, reason),
            };
            // Given up on: it cools down, so later calls go elsewhere.
            cool_given_up(spec, clock, slot, &failure, hinted);
            if fail_over && !is_last {
                let left = left(failure);
                on_event(Event::FailedOver {
                    call_id: spec.call_id.to_string(),
                    left: left.clone(),
                    to_provider: next_able(index + 1).unwrap_or(index + 1),
                    reason,
                });
                last = Some(left);
                break;
            }
            let reason = if fail_over {
                // Those after it the call could not use were passed over.
                for later in index + 1..count {
                    if let Some(why) = spec.providers[later].unable {
                        attempts.push(AttemptRecord::skipped(later, why));
                    } else if let Some(passed) = &passed[later] {
                        pass_over(&mut attempts, on_event, later, passed.why(clock.wall()));
                    }
                }
                format!("{reason}; no provider left to fail over to")
            } else {
                format!("{reason}; the call ends without failing over")
            };
            return Err(fail(CallError::Provider(left(failure)), attempts, reason));
        }
    }
    // Only reached with no providers at all; the bindings refuse that earlier.
    let reason = "no provider to call".to_string();
    Err(fail(
        CallError::Deadline {
            deadline,
            last,
            waiting: None,
        },
        attempts,
        reason,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::clock::ManualClock;
    use crate::engine::policy::Backoff;
    use crate::engine::state::FleetState;
    use std::collections::VecDeque;
    use std::sync::Mutex;
    use ErrorKind::*;

    impl Answer for &'static str {
        fn status(&self) -> u16 {
            200
        }
    }

    const OVERLOADED: &[u16] = &[502, 503, 504, 529];

    fn slots(n: usize) -> Vec<ProviderSlot<'static>> {
        (0..n)
            .map(|_| ProviderSlot {
                overloaded_statuses: OVERLOADED,
                state_key: "",
                name: "",
                unable: None,
                limits: &[],
                own_limit: None,
                tokens: 0,
                quota_key: None,
            })
            .collect()
    }

    fn err(
        kind: ErrorKind,
        status: Option<u16>,
        headers: &[(&str, &str)],
    ) -> Result<&'static str, Failure> {
        Err(Failure {
            kind,
            status,
            headers: headers.iter().copied().collect(),
            body: None,
            message: format!("{kind:?}"),
            request_id: None,
            out_of_time: false,
            cut_short: false,
            usage: None,
            billed: None,
        })
    }

    fn rate_limited(retry_after: &str) -> Result<&'static str, Failure> {
        err(RateLimited, Some(429), &[("retry-after", retry_after)])
    }

    struct Outcome {
        result: Result<Success<&'static str>, CallFailure>,
        sleeps: Vec<Duration>,
        events: Vec<Event>,
        /// (provider, bounds) of every attempt made.
        calls: Vec<(usize, AttemptBounds)>,
    }

    fn run_script(
        providers: usize,
        policy: RetryPolicy,
        deadline: Option<Duration>,
        script: Vec<Result<&'static str, Failure>>,
    ) -> Outcome {
        let clock = ManualClock::new();
        let script = Mutex::new(VecDeque::from(script));
        let calls = Mutex::new(Vec::new());
        let mut events = Vec::new();
        let slots = slots(providers);
        let spec = CallSpec {
            call_id: "call-1",
            deadline,
            ..spec(&slots, &policy)
        };
        let result = futures_util::FutureExt::now_or_never(run_from(
            &spec,
            None,
            &clock,
            &mut || 0.0,
            &mut |e| events.push(e),
            |provider, bounds| {
                calls.lock().unwrap().push((provider, bounds));
                let next = script.lock().unwrap().pop_front().expect("script ran out");
                async move { next }
            },
        ))
        .expect("the engine never waits on anything but the clock here");
        Outcome {
            result,
            sleeps: clock.sleeps(),
            events,
            calls: calls.into_inner().unwrap(),
        }
    }

    /// A call's spec with the tests' usual values: call id "c", a 60 s
    /// attempt timeout, no deadline, nothing spent before, no shared state.
    fn spec<'a>(providers: &'a [ProviderSlot<'a>], policy: &'a RetryPolicy) -> CallSpec<'a> {
        CallSpec {
            call_id: "c",
            providers,
            policy,
            attempt_timeout: Duration::from_secs(60),
            deadline: None,
            spent: Duration::ZERO,
            state: None,
            limiter: None,
            hedge: None,
        }
    }

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    fn failed_over(events: &[Event]) -> Vec<(usize, usize)> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::FailedOver {
                    left, to_provider, ..
                } => Some((left.provider, *to_provider)),
                _ => None,
            })
            .collect()
    }

    /// A hedged call: provider 0 answers `first` after its delay (never,
    /// with none), provider 1 at once with `second`; the hedge goes after
    /// 20 ms of real time.
    fn hedged(
        first: (Option<u64>, Result<&'static str, Failure>),
        second: Result<&'static str, Failure>,
        max_extra: f64,
    ) -> Hedged {
        let policy = RetryPolicy::default();
        let slots = slots(2);
        let hedge = super::super::hedge::Hedge::new(Duration::from_millis(20), max_extra);
        let spec = CallSpec {
            hedge: Some(&hedge),
            ..spec(&slots, &policy)
        };
        let scripts = vec![
            VecDeque::from([(first.0, first.1)]),
            VecDeque::from([(Some(0), second)]),
        ];
        run_hedged(&spec, &ManualClock::new(), scripts)
    }

    /// One attempt's answer: after how many ms (never, with none), and what.
    type Scripted = (Option<u64>, Result<&'static str, Failure>);

    type Hedged = (
        Result<Success<&'static str>, CallFailure>,
        Vec<Event>,
        Vec<usize>,
    );

    /// A call under `spec` (with a hedge), on tokio's paused clock: each
    /// provider's attempts answer from its script in turn, each after its
    /// delay (never, with none). Its result, events and the providers called.
    fn run_hedged(
        spec: &CallSpec<'_>,
        clock: &ManualClock,
        scripts: Vec<VecDeque<Scripted>>,
    ) -> Hedged {
        // Tokio's paused clock: the hedge's real-time `after` and the
        // answers' delays pass at once, exactly.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let mut events = Vec::new();
        let calls = Mutex::new(Vec::new());
        let scripts = Mutex::new(scripts);
        let result = runtime.block_on(run_from(
            spec,
            None,
            clock,
            &mut || 0.0,
            &mut |e| events.push(e),
            |provider, _| {
                calls.lock().unwrap().push(provider);
                let (delay, outcome) = scripts.lock().unwrap()[provider].pop_front().unwrap();
                async move {
                    match delay {
                        Some(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                        None => std::future::pending().await,
                    }
                    outcome
                }
            },
        ));
        (result, events, calls.into_inner().unwrap())
    }

    #[test]
    fn a_late_attempt_is_hedged_and_the_first_to_deliver_wins() {
        let (result, events, calls) = hedged((None, Ok("late")), Ok("backup"), 1.0);
        let ok = result.unwrap();
        assert_eq!((ok.value, ok.provider), ("backup", 1));
        assert_eq!(calls, vec![0, 1]);
        // The loser is recorded as cancelled by the hedge; the winner as an answer.
        assert!(ok.attempts[0].hedged && ok.attempts[0].provider == 0);
        assert_eq!(ok.attempts[0].billed, None);
        let winner = &ok.attempts[1];
        assert_eq!(
            (winner.provider, winner.status, winner.hedged),
            (1, Some(200), false)
        );
        assert!(matches!(
            events[..],
            [
                Event::HedgeStarted {
                    provider: 0,
                    to_provider: 1,
                    ..
                },
                Event::HedgeWon {
                    winner: 1,
                    loser: 0,
                    ..
                }
            ]
        ));
    }

    #[test]
    fn a_prompt_attempt_is_never_hedged() {
        let (result, events, calls) = hedged((Some(0), Ok("first")), Ok("backup"), 1.0);
        assert_eq!(result.unwrap().provider, 0);
        assert_eq!(calls, vec![0]);
        assert!(events.is_empty());
    }

    #[test]
    fn a_hedge_that_fails_leaves_the_call_to_the_first_attempt() {
        let server = err(ServerError, Some(500), &[]);
        let (result, events, calls) = hedged((Some(80), Ok("first")), server, 1.0);
        let ok = result.unwrap();
        assert_eq!((ok.value, ok.provider), ("first", 0));
        assert_eq!(calls, vec![0, 1]);
        // In the order they began; the failed hedge marked as the race's loser.
        let seen: Vec<_> = ok
            .attempts
            .iter()
            .map(|a| (a.provider, a.status, a.hedged))
            .collect();
        assert_eq!(seen, vec![(0, Some(200), false), (1, Some(500), true)]);
        // The hedge failed first (logged); the first attempt then won.
        assert!(matches!(
            events[..],
            [
                Event::HedgeStarted { .. },
                Event::HedgeFailed { other: 0, .. },
                Event::HedgeWon {
                    winner: 0,
                    loser: 1,
                    ..
                }
            ]
        ));
    }

    #[test]
    fn a_max_extra_of_0_never_hedges_nor_says_so() {
        let (result, events, calls) = hedged((Some(80), Ok("first")), Ok("backup"), 0.0);
        let ok = result.unwrap();
        assert_eq!((ok.provider, ok.attempts.len()), (0, 1));
        assert_eq!(calls, vec![0]);
        assert!(events.is_empty());
    }

    #[test]
    fn when_both_requests_of_a_race_fail_the_call_goes_on_as_without_a_hedge() {
        // Provider 0 times out after 80 ms; its hedge at 1 (sent at 20 ms)
        // times out after it, then 1 answers: without a hedge, 0 fails over
        // to 1, which is retried after its timeout (the last provider) and
        // answers.
        let policy = RetryPolicy::default();
        let keys = ["p0", "p1"];
        let slots: Vec<ProviderSlot> = slots(2)
            .into_iter()
            .zip(keys)
            .map(|(slot, key)| ProviderSlot {
                state_key: key,
                name: key,
                ..slot
            })
            .collect();
        let state = crate::engine::LocalState::new();
        let hedge = super::super::hedge::Hedge::new(Duration::from_millis(20), 1.0);
        let spec = CallSpec {
            hedge: Some(&hedge),
            state: Some(&state),
            ..spec(&slots, &policy)
        };
        let clock = ManualClock::new();
        let timeout = || err(Timeout, None, &[]);
        let scripts = vec![
            VecDeque::from([(Some(80), timeout())]),
            VecDeque::from([(Some(100), timeout()), (Some(0), Ok("backup"))]),
        ];
        let (result, events, _) = run_hedged(&spec, &clock, scripts);
        let ok = result.unwrap();
        assert_eq!((ok.value, ok.provider), ("backup", 1));
        let seen: Vec<_> = ok
            .attempts
            .iter()
            .map(|a| (a.provider, a.kind, a.hedged, a.skipped.is_some()))
            .collect();
        // The hedge's failure is 1's first attempt (recorded once), and 1 is
        // retried after the wait its timeout calls for, not passed over.
        assert_eq!(
            seen,
            [
                (0, Some(Timeout), false, false),
                (1, Some(Timeout), true, false),
                (1, None, false, false),
            ]
        );
        assert_eq!(clock.sleeps().len(), 1, "{:?}", clock.sleeps());
        let retried: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                Event::RetryScheduled {
                    provider, attempt, ..
                } => Some((*provider, *attempt)),
                _ => None,
            })
            .collect();
        assert_eq!(retried, [(1, 1)]);
        assert!(events.iter().any(|e| matches!(
            e,
            Event::HedgeFailed {
                other_failed: true,
                ..
            }
        )));
        // 1 answered: it is not cooling.
        assert!(state.cooling("p1", clock.wall()).is_none());
    }

    #[test]
    fn short_rate_limit_is_waited_out_on_the_same_provider() {
        let o = run_script(
            2,
            RetryPolicy::default(),
            None,
            vec![rate_limited("1"), Ok("hi")],
        );
        let ok = o.result.unwrap();
        assert_eq!((ok.value, ok.provider), ("hi", 0));
        assert_eq!(o.sleeps, vec![secs(1.0)]);
        assert!(failed_over(&o.events).is_empty());
        assert_eq!(ok.attempts.len(), 2);
        assert_eq!(ok.attempts[1].waited, secs(1.0));
        assert_eq!(ok.attempts[0].status, Some(429));
        assert!(matches!(
            o.events[0],
            Event::RetryScheduled {
                provider: 0,
                attempt: 1,
                kind: RateLimited,
                status: Some(429),
                ..
            }
        ));
    }

    #[test]
    fn second_rate_limit_fails_over() {
        let o = run_script(
            2,
            RetryPolicy::default(),
            None,
            vec![rate_limited("1"), rate_limited("1"), Ok("b")],
        );
        let ok = o.result.unwrap();
        assert_eq!(ok.provider, 1);
        assert_eq!(o.sleeps, vec![secs(1.0)]);
        assert_eq!(failed_over(&o.events), vec![(0, 1)]);
        assert_eq!(
            o.calls.iter().map(|c| c.0).collect::<Vec<_>>(),
            vec![0, 0, 1]
        );
    }

    #[test]
    fn long_retry_after_fails_over_without_sleeping() {
        let o = run_script(
            2,
            RetryPolicy::default(),
            None,
            vec![rate_limited("300"), Ok("b")],
        );
        assert_eq!(o.result.unwrap().provider, 1);
        assert!(o.sleeps.is_empty());
    }

    #[test]
    fn non_failover_error_is_raised_at_once() {
        let o = run_script(
            3,
            RetryPolicy::default(),
            None,
            vec![err(BadRequest, Some(400), &[])],
        );
        let e = o.result.unwrap_err();
        assert!(matches!(&e.error, CallError::Provider(p) if p.provider == 0));
        assert_eq!(
            e.reason,
            "bad_request is in stop_on; the call ends without failing over"
        );
        assert_eq!(o.calls.len(), 1);
        assert!(o.events.is_empty());
    }

    #[test]
    fn auth_and_not_found_fail_over_unless_named_in_stop_on() {
        for (kind, status) in [(Auth, 401), (NotFound, 404)] {
            let o = run_script(
                2,
                RetryPolicy::default(),
                None,
                vec![err(kind, Some(status), &[]), Ok("b")],
            );
            assert_eq!(o.result.unwrap().provider, 1, "{kind:?}");
            assert_eq!(failed_over(&o.events), vec![(0, 1)]);
            let strict = RetryPolicy {
                stop_on: crate::engine::KindSet::of(&[BadRequest, Auth, NotFound]),
                ..RetryPolicy::default()
            };
            let o = run_script(2, strict, None, vec![err(kind, Some(status), &[])]);
            assert!(
                matches!(o.result.unwrap_err().error, CallError::Provider(p) if p.provider == 0)
            );
            assert_eq!(o.calls.len(), 1, "the second provider is never called");
        }
    }

    #[test]
    fn a_provider_that_cannot_serve_the_call_is_skipped_not_called() {
        let clock = ManualClock::new();
        let mut three = slots(3);
        three[1].unable = Some("its wire takes no image here");
        let policy = RetryPolicy::default();
        let spec = CallSpec {
            ..spec(&three, &policy)
        };
        let mut called = Vec::new();
        let mut events = Vec::new();
        let result = futures_util::FutureExt::now_or_never(run_from(
            &spec,
            None,
            &clock,
            &mut || 0.0,
            &mut |e| events.push(e),
            |provider, _| {
                called.push(provider);
                let out = if provider == 0 {
                    rate_limited("300")
                } else {
                    Ok("c")
                };
                async move { out }
            },
        ))
        .unwrap();
        let ok = result.unwrap();
        assert_eq!((ok.provider, called), (2, vec![0, 2]));
        assert_eq!(
            ok.attempts[1].skipped.as_deref(),
            Some("its wire takes no image here")
        );
        assert_eq!(
            failed_over(&events),
            vec![(0, 2)],
            "FailedOver names the next able one"
        );
        // When only unable providers remain, the one before them is the last.
        let mut two = slots(2);
        two[1].unable = Some("no");
        let spec = CallSpec {
            providers: &two,
            ..spec.clone()
        };
        let result = futures_util::FutureExt::now_or_never(run_from(
            &spec,
            None,
            &clock,
            &mut || 0.0,
            &mut |_| {},
            |_, _| async { rate_limited("300") },
        ))
        .unwrap();
        assert!(matches!(result.unwrap_err().error, CallError::Provider(p) if p.provider == 0));
        // None able: nothing is sent.
        let mut one = slots(1);
        one[0].unable = Some("no");
        let spec = CallSpec {
            providers: &one,
            ..spec
        };
        let result = futures_util::FutureExt::now_or_never(run_from(
            &spec,
            None,
            &clock,
            &mut || 0.0,
            &mut |_| {},
            |_, _| async { Ok("never") },
        ))
        .unwrap();
        let e = result.unwrap_err();
        assert_eq!(e.error, CallError::Unserved);
        assert_eq!(e.attempts[0].skipped.as_deref(), Some("no"));
    }

    #[test]
    fn every_provider_failing_raises_the_last_error() {
        let script = vec![
            err(Overloaded, Some(503), &[]),
            err(InsufficientCredits, Some(402), &[]),
            rate_limited("120"),
        ];
        let o = run_script(3, RetryPolicy::default(), None, script);
        let e = o.result.unwrap_err();
        match &e.error {
            CallError::Provider(p) => {
                assert_eq!(p.provider, 2);
                assert_eq!(p.failure.status, Some(429));
                assert_eq!(p.retry_after, Some(secs(120.0)));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(failed_over(&o.events), vec![(0, 1), (1, 2)]);
        assert_eq!(e.attempts.len(), 3);
        assert!(o.sleeps.is_empty());
        assert!(
            e.reason.ends_with("no provider left to fail over to"),
            "{}",
            e.reason
        );
        match &o.events[0] {
            Event::FailedOver { call_id, left, .. } => {
                assert_eq!(call_id, "call-1");
                assert_eq!((left.failure.status, left.retry_after), (Some(503), None));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn last_provider_backs_off_with_jitter_source() {
        let script = vec![
            err(Overloaded, Some(529), &[]),
            err(Overloaded, Some(529), &[]),
            err(Overloaded, Some(529), &[]),
        ];
        let o = run_script(1, RetryPolicy::default(), None, script);
        assert!(o.result.is_err());
        assert_eq!(o.sleeps, vec![secs(0.5), secs(1.0)]);
    }

    #[test]
    fn server_error_gets_one_quick_retry_before_failing_over() {
        let script = vec![
            err(ServerError, Some(500), &[]),
            err(ServerError, Some(500), &[]),
            Ok("b"),
        ];
        let o = run_script(2, RetryPolicy::default(), None, script);
        assert_eq!(o.result.unwrap().provider, 1);
        assert_eq!(o.sleeps, vec![secs(0.5)]);
    }

    #[test]
    fn deadline_refuses_a_wait_that_ends_past_it() {
        // 5 s of deadline: a 6 s hint on the last provider raises with the hint.
        let o = run_script(
            1,
            RetryPolicy::default(),
            Some(secs(5.0)),
            vec![rate_limited("6")],
        );
        let e = o.result.unwrap_err();
        assert!(o.sleeps.is_empty());
        match e.error {
            CallError::Provider(p) => assert_eq!(p.retry_after, Some(secs(6.0))),
            other => panic!("{other:?}"),
        }
        // With another provider: fail over instead.
        let o = run_script(
            2,
            RetryPolicy::default(),
            Some(secs(5.0)),
            vec![rate_limited("6"), Ok("b")],
        );
        assert_eq!(o.result.unwrap().provider, 1);
        assert!(o.sleeps.is_empty());
    }

    #[test]
    fn deadline_cuts_attempt_timeouts_and_counts_sleeps() {
        let o = run_script(
            1,
            RetryPolicy::default(),
            Some(secs(5.0)),
            vec![rate_limited("3"), Ok("x")],
        );
        assert!(o.result.is_ok());
        let cut = |left: f64| AttemptBounds {
            timeout: secs(left),
            left: Some(secs(left)),
        };
        assert_eq!(o.calls, vec![(0, cut(5.0)), (0, cut(2.0))]);
        // A deadline beyond the timeout still bounds the whole attempt: a
        // stream's start, whatever keeps its waits short, ends by it.
        let o = run_script(
            1,
            RetryPolicy::default(),
            Some(secs(100.0)),
            vec![rate_limited("3"), Ok("x")],
        );
        let bounds = |left: f64| AttemptBounds {
            timeout: secs(60.0),
            left: Some(secs(left)),
        };
        assert_eq!(o.calls, vec![(0, bounds(100.0)), (0, bounds(97.0))]);
        // A wait that would end exactly at the deadline leaves no time: not slept.
        let o = run_script(
            1,
            RetryPolicy::default(),
            Some(secs(3.0)),
            vec![rate_limited("3")],
        );
        assert!(o.sleeps.is_empty());
        assert!(matches!(
            o.result.unwrap_err().error,
            CallError::Provider(_)
        ));
    }

    #[test]
    fn a_timeout_cut_short_by_the_deadline_is_deadline_exceeded() {
        let o = run_script(
            2,
            RetryPolicy::default(),
            Some(secs(5.0)),
            vec![Err(Failure::out_of_time("no response within 5s"))],
        );
        let e = o.result.unwrap_err();
        match e.error {
            CallError::Deadline {
                deadline,
                last: Some(last),
                ..
            } => {
                assert_eq!(deadline, secs(5.0));
                assert_eq!((last.provider, last.failure.kind), (0, Timeout));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(o.calls.len(), 1);
        assert_eq!(e.reason, "the deadline cut the attempt short");
        // Without a deadline, a timeout fails over.
        let o = run_script(
            2,
            RetryPolicy::default(),
            None,
            vec![Err(Failure::out_of_time("no response")), Ok("b")],
        );
        assert_eq!(o.result.unwrap().provider, 1);
    }

    #[test]
    fn a_408_or_a_connect_timeout_under_a_deadline_still_fails_over() {
        // The attempt's timeout is cut to the 30 s deadline (under 60 s), but
        // the provider failed by itself: that is no deadline cutting it short.
        for failure in [err(Timeout, Some(408), &[]), err(Timeout, None, &[])] {
            let o = run_script(
                2,
                RetryPolicy::default(),
                Some(secs(30.0)),
                vec![failure, Ok("b")],
            );
            assert_eq!(o.result.unwrap().provider, 1);
            assert_eq!(failed_over(&o.events), vec![(0, 1)]);
        }
    }

    #[test]
    fn an_attempts_preparation_comes_out_of_its_bounds() {
        let bounds = AttemptBounds {
            timeout: secs(2.0),
            left: Some(secs(3.0)),
        };
        let after = |spent| bounds.after(secs(spent));
        assert_eq!(
            after(0.5),
            AttemptBounds {
                timeout: secs(2.0),
                left: Some(secs(2.5))
            }
        );
        assert_eq!(
            after(2.0),
            AttemptBounds {
                timeout: secs(1.0),
                left: Some(secs(1.0))
            }
        );
        assert_eq!(
            after(9.0),
            AttemptBounds {
                timeout: secs(0.0),
                left: Some(secs(0.0))
            }
        );
        // Without a deadline, only the provider's own timeout bounds it.
        let free = AttemptBounds {
            timeout: secs(2.0),
            left: None,
        };
        assert_eq!(free.after(secs(9.0)), free);
    }

    #[test]
    fn time_spent_before_the_run_counts_against_the_deadline() {
        let clock = ManualClock::new();
        let slots = slots(1);
        let policy = RetryPolicy::default();
        let spec = CallSpec {
            deadline: Some(secs(5.0)),
            spent: secs(4.0),
            ..spec(&slots, &policy)
        };
        let mut seen = Vec::new();
        let result = futures_util::FutureExt::now_or_never(run_from(
            &spec,
            None,
            &clock,
            &mut || 0.0,
            &mut |_| {},
            |_, bounds| {
                seen.push(bounds);
                async { Ok("x") }
            },
        ))
        .unwrap();
        assert!(result.is_ok());
        let left = Some(secs(1.0));
        assert_eq!(
            seen,
            vec![AttemptBounds {
                timeout: secs(1.0),
                left
            }]
        );
    }

    #[test]
    fn no_time_left_to_start_an_attempt() {
        let clock = ManualClock::new();
        let slots = slots(2);
        let policy = RetryPolicy::default();
        let spec = CallSpec {
            deadline: Some(secs(1.0)),
            ..spec(&slots, &policy)
        };
        let mut calls = 0;
        // The first attempt itself uses up the deadline (the clock moves during it).
        let result = futures_util::FutureExt::now_or_never(run_from(
            &spec,
            None,
            &clock,
            &mut || 0.0,
            &mut |_| {},
            |_, _| {
                calls += 1;
                clock.advance(secs(1.0));
                async { err(Overloaded, Some(529), &[]) }
            },
        ))
        .unwrap();
        assert_eq!(calls, 1, "the second provider is never started");
        match result.unwrap_err().error {
            CallError::Deadline {
                last: Some(last), ..
            } => assert_eq!((last.provider, last.failure.status), (0, Some(529))),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn should_retry_false_fails_over_at_once() {
        let o = run_script(
            2,
            RetryPolicy::default(),
            None,
            vec![
                err(
                    RateLimited,
                    Some(429),
                    &[("x-should-retry", "false"), ("retry-after", "1")],
                ),
                Ok("b"),
            ],
        );
        assert_eq!(o.result.unwrap().provider, 1);
        assert!(o.sleeps.is_empty());
    }

    #[test]
    fn presets_run_through_the_loop() {
        // laravel: 1.5 is not a plain integer: fail over without waiting.
        let o = run_script(
            2,
            RetryPolicy::laravel(),
            None,
            vec![rate_limited("1.5"), Ok("b")],
        );
        assert_eq!(o.result.unwrap().provider, 1);
        assert!(o.sleeps.is_empty());
        // openai: two backoff retries then give up (single provider).
        let o = run_script(
            1,
            RetryPolicy::openai(),
            None,
            vec![err(ServerError, Some(500), &[]); 3],
        );
        assert!(o.result.is_err());
        assert_eq!(o.sleeps, vec![secs(0.5), secs(1.0)]);
        // ruby_llm: three retries at 0.1, 0.2, 0.4.
        let o = run_script(
            1,
            RetryPolicy::ruby_llm(None),
            None,
            vec![err(Timeout, None, &[]); 4],
        );
        assert!(o.result.is_err());
        assert_eq!(o.sleeps, vec![secs(0.1), secs(0.2), secs(0.4)]);
    }

    #[test]
    fn custom_backoff_and_limits() {
        let policy = RetryPolicy {
            max_retries_last: 3,
            backoff: Backoff {
                initial: 1.0,
                multiplier: 3.0,
                max: 5.0,
                jitter: 0.0,
                spread: 0.0,
            },
            ..RetryPolicy::default()
        };
        let o = run_script(1, policy, None, vec![err(Connection, None, &[]); 4]);
        assert_eq!(o.sleeps, vec![secs(1.0), secs(3.0), secs(5.0)]);
        assert_eq!(o.result.unwrap_err().attempts.len(), 4);
    }

    #[test]
    fn a_resumed_call_decides_from_the_broken_attempt() {
        let clock = ManualClock::new();
        let slots = slots(2);
        let policy = RetryPolicy::default();
        let spec = CallSpec {
            ..spec(&slots, &policy)
        };
        let broken = |kind, retries_done| Resume {
            started: SystemTime::now(),
            provider: 0,
            failure: err(kind, Some(200), &[]).unwrap_err(),
            retries_done,
            waited: Duration::from_secs(2),
            duration: Duration::from_secs(3),
        };
        // A cut stream (a connection failure) is retried at once on the same provider.
        let mut called = Vec::new();
        let result = futures_util::FutureExt::now_or_never(run_from(
            &spec,
            Some(broken(Connection, 0)),
            &clock,
            &mut || 0.0,
            &mut |_| {},
            |index, _| {
                called.push(index);
                async { Ok::<_, Failure>("again") }
            },
        ))
        .unwrap()
        .unwrap();
        assert_eq!(called, vec![0]);
        assert_eq!(
            result
                .attempts
                .iter()
                .map(|a| (a.provider, a.kind))
                .collect::<Vec<_>>(),
            vec![(0, Some(Connection)), (0, None)]
        );
        // The broken attempt keeps the wait slept before it, and its time.
        assert_eq!(
            (result.attempts[0].waited, result.attempts[0].duration),
            (Duration::from_secs(2), Duration::from_secs(3))
        );
        // With its retries spent, it fails over to the next provider.
        let mut called = Vec::new();
        let spent = policy.max_retries;
        let result = futures_util::FutureExt::now_or_never(run_from(
            &spec,
            Some(broken(Connection, spent)),
            &clock,
            &mut || 0.0,
            &mut |_| {},
            |index, _| {
                called.push(index);
                async { Ok::<_, Failure>("next") }
            },
        ))
        .unwrap()
        .unwrap();
        assert_eq!((called, result.provider), (vec![1], 1));
    }

    /// Calls made one after another against shared state, on one manual
    /// clock: (the providers called, the attempts recorded) for each.
    struct Shared {
        clock: ManualClock,
        state: crate::engine::LocalState,
        keys: Vec<String>,
    }

    impl Shared {
        fn new(providers: usize) -> Self {
            Self {
                clock: ManualClock::new(),
                state: crate::engine::LocalState::new(),
                keys: (0..providers).map(|i| format!("p{i}")).collect(),
            }
        }

        /// How long `key` still cools, if it does.
        fn cooling_left(&self, key: &str) -> Option<Duration> {
            self.state
                .cooldowns(self.clock.wall())
                .into_iter()
                .find(|(k, _)| k == key)
                .map(|(_, d)| d)
        }

        fn call(
            &self,
            policy: &RetryPolicy,
            script: Vec<Result<&'static str, Failure>>,
        ) -> (Vec<usize>, Result<Success<&'static str>, CallFailure>) {
            let slots: Vec<ProviderSlot> = self
                .keys
                .iter()
                .map(|k| ProviderSlot {
                    overloaded_statuses: OVERLOADED,
                    state_key: k,
                    name: k,
                    unable: None,
                    limits: &[],
                    own_limit: None,
                    tokens: 0,
                    quota_key: None,
                })
                .collect();
            let spec = CallSpec {
                call_id: "c",
                providers: &slots,
                policy,
                attempt_timeout: Duration::from_secs(60),
                deadline: None,
                spent: Duration::ZERO,
                state: Some(&self.state),
                limiter: None,
                hedge: None,
            };
            let script = Mutex::new(VecDeque::from(script));
            let called = Mutex::new(Vec::new());
            let result = futures_util::FutureExt::now_or_never(run_from(
                &spec,
                None,
                &self.clock,
                &mut || 0.0,
                &mut |_| {},
                |provider, _| {
                    called.lock().unwrap().push(provider);
                    let next = script.lock().unwrap().pop_front().expect("script ran out");
                    async move { next }
                },
            ))
            .unwrap();
            (called.into_inner().unwrap(), result)
        }
    }

    #[test]
    fn a_provider_that_asked_for_quiet_is_skipped_until_its_time() {
        let shared = Shared::new(2);
        let policy = RetryPolicy::default();
        // 60 s is over the 10 s cap: fail over, and p0 cools for 60 s.
        let (called, result) = shared.call(&policy, vec![rate_limited("60"), Ok("b")]);
        assert_eq!((called, result.unwrap().provider), (vec![0, 1], 1));
        // The next call goes straight to p1, p0 recorded as skipped.
        let (called, result) = shared.call(&policy, vec![Ok("b")]);
        let result = result.unwrap();
        assert_eq!(called, vec![1]);
        assert!(result.attempts[0]
            .skipped
            .as_deref()
            .unwrap()
            .contains("cooling down"));
        // Once its time has passed, p0 is called again; a success ends the cooldown.
        shared.clock.advance(Duration::from_secs(60));
        let (called, _) = shared.call(&policy, vec![Ok("a")]);
        assert_eq!(called, vec![0]);
        assert!(shared.state.cooldowns(shared.clock.wall()).is_empty());
    }

    #[test]
    fn every_provider_cooling_still_makes_a_request_to_the_first_to_recover() {
        let shared = Shared::new(2);
        let policy = RetryPolicy {
            max_retries_last: 0,
            ..RetryPolicy::default()
        };
        let now = shared.clock.wall();
        shared.state.cool(
            "p0",
            now,
            now + Duration::from_secs(30),
            &Cause::because("x"),
        );
        shared.state.cool(
            "p1",
            now,
            now + Duration::from_secs(10),
            &Cause::because("y"),
        );
        let (called, result) = shared.call(&policy, vec![Ok("b")]);
        assert_eq!((called, result.unwrap().provider), (vec![1], 1));
    }

    #[test]
    fn failures_without_hints_cool_briefly_then_longer_and_auth_for_long() {
        let shared = Shared::new(2);
        let policy = RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        };
        let left = |key: &str| shared.cooling_left(key);
        let _ = shared.call(&policy, vec![err(Overloaded, Some(503), &[]), Ok("b")]);
        assert_eq!(left("p0"), Some(Duration::from_secs(5)));
        shared.clock.advance(Duration::from_secs(5));
        let _ = shared.call(&policy, vec![err(Overloaded, Some(503), &[]), Ok("b")]);
        assert_eq!(
            left("p0"),
            Some(Duration::from_secs(10)),
            "doubles while it keeps failing"
        );
        shared.clock.advance(Duration::from_secs(10));
        let _ = shared.call(&policy, vec![err(Auth, Some(401), &[]), Ok("b")]);
        assert_eq!(left("p0"), Some(Duration::from_secs(300)));
        // A bad request is the request's fault, not the provider's.
        let shared = Shared::new(1);
        let _ = shared.call(&policy, vec![err(BadRequest, Some(400), &[])]);
        assert!(shared.state.cooldowns(shared.clock.wall()).is_empty());
    }

    #[test]
    fn a_spent_budget_means_no_retry() {
        let shared = Shared::new(2);
        let policy = RetryPolicy {
            max_retries: 3,
            budget: Some(crate::engine::RetryBudget {
                ratio: 0.0,
                min_retries_per_second: 0.1,
                window: Duration::from_secs(10),
            }),
            ..RetryPolicy::default()
        };
        // A reserve of one retry in the window: the first call gets it...
        let (called, _) = shared.call(&policy, vec![err(ServerError, Some(500), &[]), Ok("a")]);
        assert_eq!(called, vec![0, 0]);
        shared.state.recover("p0", shared.state.epoch());
        // ...the second fails over at once, the refused retry recorded.
        let (called, result) =
            shared.call(&policy, vec![err(ServerError, Some(500), &[]), Ok("b")]);
        assert_eq!(called, vec![0, 1]);
        let attempts = result.unwrap().attempts;
        assert!(attempts[1]
            .skipped
            .as_deref()
            .unwrap()
            .contains("retry budget"));
    }

    fn skips(attempts: &[AttemptRecord]) -> Vec<(usize, Option<&str>)> {
        attempts
            .iter()
            .map(|a| (a.provider, a.skipped.as_deref()))
            .collect()
    }

    #[test]
    fn a_cooling_provider_after_the_last_one_tried_is_recorded_as_passed_over() {
        let policy = RetryPolicy::default();
        let shared = Shared::new(2);
        let now = shared.clock.wall();
        shared.state.cool(
            "p1",
            now,
            now + Duration::from_secs(120),
            &Cause::because("it asked for 120s"),
        );
        // p0 is the last provider left: its normal retries, then the error,
        // with p1 recorded after p0's attempts, where it stands in the chain.
        let (called, result) = shared.call(
            &policy,
            vec![
                err(ServerError, Some(500), &[]),
                err(ServerError, Some(500), &[]),
                err(ServerError, Some(500), &[]),
            ],
        );
        assert_eq!(called, vec![0, 0, 0]);
        let attempts = result.unwrap_err().attempts;
        let recorded = skips(&attempts);
        assert_eq!(recorded.len(), 4);
        assert_eq!(&recorded[..3], &[(0, None), (0, None), (0, None)]);
        assert_eq!(recorded[3].0, 1);
        // Its time left as the call ended, after p0's backoffs (0.5 s, 1 s).
        assert_eq!(
            recorded[3].1,
            Some("cooling down for 118.5s more: it asked for 120s")
        );
        // A provider after the one that answered was not passed over.
        let (_, result) = shared.call(&policy, vec![Ok("a")]);
        assert_eq!(skips(&result.unwrap().attempts), vec![(0, None)]);
        // Nor after a failure that ends the call without failing over.
        let (_, result) = shared.call(&policy, vec![err(BadRequest, Some(400), &[])]);
        assert_eq!(skips(&result.unwrap_err().attempts), vec![(0, None)]);
    }

    #[test]
    fn unhinted_cooldowns_double_up_to_the_cap_and_hinted_ones_to_theirs() {
        let shared = Shared::new(2);
        let policy = RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        };
        let left = |key: &str| shared.cooling_left(key);
        let mut seen = Vec::new();
        for _ in 0..5 {
            let _ = shared.call(&policy, vec![err(Overloaded, Some(503), &[]), Ok("b")]);
            let cooled = left("p0").unwrap();
            seen.push(cooled.as_secs());
            shared.clock.advance(cooled);
        }
        assert_eq!(seen, vec![5, 10, 20, 30, 30]);
        // A cap of the caller's.
        let tight = RetryPolicy {
            max_cooldown: Duration::from_secs(12),
            ..policy.clone()
        };
        let _ = shared.call(&tight, vec![err(Overloaded, Some(503), &[]), Ok("b")]);
        assert_eq!(left("p0"), Some(Duration::from_secs(12)));
        // A hint keeps its number, up to an hour; the error still shows the hint.
        let shared = Shared::new(1);
        let lone = RetryPolicy {
            max_retries_last: 0,
            ..RetryPolicy::default()
        };
        let (_, result) = shared.call(&lone, vec![rate_limited("7200")]);
        match result.unwrap_err().error {
            CallError::Provider(p) => assert_eq!(p.retry_after, Some(secs(7200.0))),
            other => panic!("{other:?}"),
        }
        let now = shared.clock.wall();
        assert_eq!(
            shared.state.cooldowns(now),
            vec![("p0".to_string(), Duration::from_secs(3600))]
        );
        // The cause beside the reason: the failure that set it, its hint uncut.
        assert_eq!(
            shared.state.cooling("p0", now).unwrap().cause,
            Cause {
                reason: "it asked for 7200s, cut to the 3600s cap".to_string(),
                kind: Some(RateLimited),
                status: Some(429),
                retry_after: Some(secs(7200.0)),
            }
        );
        let shared = Shared::new(1);
        let (_, _) = shared.call(&lone, vec![rate_limited("120")]);
        assert_eq!(
            shared.state.cooldowns(shared.clock.wall()),
            vec![("p0".to_string(), Duration::from_secs(120))]
        );
    }

    #[test]
    fn a_half_open_provider_is_probed_by_one_call_at_a_time() {
        let shared = Shared::new(2);
        let policy = RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        };
        let _ = shared.call(&policy, vec![err(Overloaded, Some(503), &[]), Ok("b")]);
        shared.clock.advance(Duration::from_secs(5));
        let now = shared.clock.wall();
        assert!(shared.state.half_open("p0", now).is_some());
        // Another call holds the probe: this one keeps to p1.
        let token = shared
            .state
            .take_probe("p0", now, Duration::from_secs(60), None)
            .unwrap();
        let (called, result) = shared.call(&policy, vec![Ok("b")]);
        assert_eq!(called, vec![1]);
        let attempts = result.unwrap().attempts;
        assert!(attempts[0]
            .skipped
            .as_deref()
            .unwrap()
            .starts_with("being probed by another call"));
        // With no other provider, the probed one is tried all the same.
        let alone = Shared {
            clock: ManualClock::new(),
            state: crate::engine::LocalState::new(),
            keys: vec!["p0".to_string()],
        };
        let t0 = alone.clock.wall();
        alone.state.cool("p0", t0, t0, &Cause::because("x"));
        let _held = alone
            .state
            .take_probe("p0", t0, Duration::from_secs(60), None);
        let (called, _) = alone.call(&policy, vec![Ok("a")]);
        assert_eq!(called, vec![0]);
        // Given back, the next call probes p0; a failure starts the next
        // (doubled) cooldown and gives the probe back.
        shared.state.release_probe("p0", token);
        let (called, _) = shared.call(&policy, vec![err(Overloaded, Some(503), &[]), Ok("b")]);
        assert_eq!(called, vec![0, 1]);
        assert!(!shared.state.probed("p0", shared.clock.wall()));
        assert_eq!(
            shared.state.cooldowns(shared.clock.wall()),
            vec![("p0".to_string(), Duration::from_secs(10))]
        );
        // A good answer closes the circuit.
        shared.clock.advance(Duration::from_secs(10));
        let (called, _) = shared.call(&policy, vec![Ok("a")]);
        assert_eq!(called, vec![0]);
        let now = shared.clock.wall();
        assert!(shared.state.half_open("p0", now).is_none());
        assert!(!shared.state.probed("p0", now));
        assert_eq!(shared.state.failures_in_a_row("p0"), 0);
    }

    #[test]
    fn a_probing_call_that_is_dropped_gives_the_probe_back() {
        let shared = Shared::new(2);
        let now = shared.clock.wall();
        shared.state.cool("p0", now, now, &Cause::because("x"));
        let slots: Vec<ProviderSlot> = shared
            .keys
            .iter()
            .map(|k| ProviderSlot {
                overloaded_statuses: OVERLOADED,
                state_key: k,
                name: k,
                unable: None,
                limits: &[],
                own_limit: None,
                tokens: 0,
                quota_key: None,
            })
            .collect();
        let policy = RetryPolicy::default();
        let spec = CallSpec {
            state: Some(&shared.state),
            ..spec(&slots, &policy)
        };
        let (mut unit, mut on_event) = (|| 0.0, |_| {});
        let mut future = Box::pin(run_from(
            &spec,
            None,
            &shared.clock,
            &mut unit,
            &mut on_event,
            |_, _| std::future::pending::<Result<&'static str, Failure>>(),
        ));
        // In flight at p0, holding its probe; then cancelled.
        assert!(futures_util::FutureExt::now_or_never(&mut future).is_none());
        assert!(shared.state.probed("p0", now));
        drop(future);
        assert!(!shared.state.probed("p0", now));
        assert!(shared.state.half_open("p0", now).is_some());
    }
}
