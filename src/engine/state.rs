//! What calls share: cooldowns (with the probe of a provider whose cooldown
//! ended) and the retry budget, behind a trait (kept in process by
//! default; a fleet-wide store implements the same trait).
//!
//! Times are wall-clock times of the call's clock (`Clock::wall`): a
//! FakeSleeper's virtual time in tests, the system's otherwise, so a
//! cooldown set by one call is seen by the next on the same timeline.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use super::classify::ErrorKind;
use super::hints::Headroom;

/// How much retrying a provider may add to its traffic (Finagle's retry
/// budget): same-provider retries within `window` may be at most `ratio` of
/// the first attempts in it, plus a reserve of `min_retries_per_second ×
/// window`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetryBudget {
    pub ratio: f64,
    pub min_retries_per_second: f64,
    pub window: Duration,
}

impl Default for RetryBudget {
    fn default() -> Self {
        Self {
            ratio: 0.2,
            min_retries_per_second: 10.0,
            window: Duration::from_secs(10),
        }
    }
}

/// What share of the time a call has left it spares for a wait on a
/// fleet-wide store (its first read, a retry's budget, a probe's lease):
/// half, so a slow store never takes the time a provider could answer in
/// (the store then answers from its local mirror, as when it is down).
pub const SPARE: f64 = 0.5;

/// The longest a call with `left` before its deadline waits on a
/// fleet-wide store; `None` (no deadline): the store's own timeout.
pub fn spare(left: Option<Duration>) -> Option<Duration> {
    left.map(|l| l.mul_f64(SPARE))
}

/// Why a provider cools down: in words, and for a failure, what it was
/// (its kind, its status, the wait it asked for); a cooldown for exhausted
/// headroom has no kind.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cause {
    pub reason: String,
    pub kind: Option<ErrorKind>,
    pub status: Option<u16>,
    pub retry_after: Option<Duration>,
}

impl Cause {
    /// A cause known only in words.
    pub fn because(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            ..Self::default()
        }
    }
}

/// A provider cooling down: since and until when, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Cooling {
    /// The state's epoch when it began: a success of a request sent
    /// before that ends nothing.
    pub epoch: u64,
    pub since: SystemTime,
    pub until: SystemTime,
    pub cause: Cause,
}

/// What the state knows of one key, for `health()`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Health {
    /// The last cooldown no success has ended: running, or ended with the
    /// circuit half-open.
    pub open: Option<Cooling>,
    pub failures_in_a_row: u32,
    /// The headroom the last success reported, and when it was read.
    pub headroom: Option<(SystemTime, Headroom)>,
    /// A call of this process holds the probe of its half-open circuit.
    pub probing: bool,
}

/// What the engine asks of the state calls share, during a call. Keys name
/// a provider, model and call kind (`call::StateKey` renders them).
pub trait EngineState: Send + Sync + std::fmt::Debug {
    /// The cooldown `key` is in at `now`, if any.
    fn cooling(&self, key: &str, now: SystemTime) -> Option<Cooling>;
    /// Cools `key` from `now` until `until`, for `cause` (a later cooldown
    /// already set stands, with its cause). A cause with a kind is a
    /// failure, counted in a row; not while it is already cooling (calls
    /// that were in flight when it began fail together), and not a
    /// cooldown for exhausted headroom (a success).
    fn cool(&self, key: &str, now: SystemTime, until: SystemTime, cause: &Cause);
    /// The rate-limit headroom a success from `key` reported at `now`.
    fn saw_headroom(&self, key: &str, now: SystemTime, headroom: Headroom);
    /// How many times in a row `key` has been cooled for failing, since its
    /// last success (the short cooldown doubles with it).
    fn failures_in_a_row(&self, key: &str) -> u32;
    /// The current epoch: it moves on with every cooldown that begins. An
    /// attempt notes it when it is sent.
    fn epoch(&self) -> u64;
    /// A success of a request sent at epoch `sent`: the cooldown ends, the
    /// count of failures too; unless the cooldown began after it was sent (a
    /// slow answer to an earlier request says nothing about the wait asked
    /// for).
    fn recover(&self, key: &str, sent: u64);
    /// A first attempt to `key` at `now`, for the budget.
    fn note_call(&self, key: &str, now: SystemTime, budget: &RetryBudget);
    /// Whether a retry to `key` fits the budget at `now`; if it does, it is
    /// counted. `within`: the longest the call can spare waiting on a
    /// fleet-wide store (see [`SPARE`]); `None`, its own timeout.
    fn spend_retry(
        &self,
        key: &str,
        now: SystemTime,
        budget: &RetryBudget,
        within: Option<Duration>,
    ) -> bool;
    /// The cooldown of `key` that has ended by `now` with no success since
    /// (the circuit is half-open: one call at a time probes it), if any.
    fn half_open(&self, key: &str, now: SystemTime) -> Option<Cooling>;
    /// Takes the probe of half-open `key` for a call, for `lease` at most
    /// (a call that never gives it back does not hold it for ever): a token
    /// to give back, or `None` while another call holds it (with a
    /// fleet-wide store, a call anywhere in the fleet). `within` as for
    /// [`EngineState::spend_retry`].
    fn take_probe(
        &self,
        key: &str,
        now: SystemTime,
        lease: Duration,
        within: Option<Duration>,
    ) -> Option<u64>;
    /// Whether a call of this process holds the probe of `key` at `now`.
    fn probed(&self, key: &str, now: SystemTime) -> bool;
    /// Extends the probe `token` of `key` to `lease` from `now` (a probing
    /// call about to wait and try again); nothing if it is no longer held.
    fn keep_probe(&self, key: &str, token: u64, now: SystemTime, lease: Duration);
    /// Gives the probe `token` of `key` back (a probe taken since by
    /// another call, after the lease ran out, is left alone).
    fn release_probe(&self, key: &str, token: u64);
}

/// What a client and its pools ask of the state calls share, around the
/// engine's run: a fleet-wide store's first read and notices, the
/// cooldowns shown to the caller, the calls busy at each pool member.
pub trait FleetState: Send + Sync {
    /// Every cooldown still running at `now`, by key.
    fn cooldowns(&self, now: SystemTime) -> Vec<(String, Duration)>;
    /// What the state knows of every key it has seen, at `now` (a
    /// snapshot: one lock, no wait on a fleet-wide store).
    fn health(&self, now: SystemTime) -> Vec<(String, Health)>;
    /// Waits (briefly) until the state is current, before a call reads it:
    /// a fleet-wide store's first read. In process: at once.
    fn settle(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(std::future::ready(()))
    }
    /// Something to tell the caller once (a fleet-wide store lost or back).
    fn take_notice(&self) -> Option<String> {
        None
    }
    /// A call of this process started (`+1`) or ended (`-1`) at `key`, a pool
    /// member it chose first: for a fleet-wide store to tell the others.
    fn note_busy(&self, _key: &str, _delta: i64) {}
    /// Calls of other processes busy at `key` (a fleet-wide store's last
    /// count); in process, none.
    fn busy_elsewhere(&self, _key: &str) -> u64 {
        0
    }
}

/// The state calls share: what the engine asks and what the client asks.
/// Every type that is both is one.
pub trait SharedState: EngineState + FleetState {
    /// The part the engine reads, for [`crate::engine::CallSpec::state`].
    fn engine(&self) -> &dyn EngineState;
}

impl<T: EngineState + FleetState> SharedState for T {
    fn engine(&self) -> &dyn EngineState {
        self
    }
}

#[derive(Debug, Default)]
struct Entry {
    /// The last cooldown, until a success ends it: past its `until`, the
    /// circuit is half-open.
    cooling: Option<Cooling>,
    /// The probe of a half-open circuit: its token and when its lease ends.
    probe: Option<(u64, SystemTime)>,
    failures: u32,
    /// The headroom the last success reported, and when.
    headroom: Option<(SystemTime, Headroom)>,
    /// First attempts and retries in the budget's window, oldest first.
    calls: VecDeque<SystemTime>,
    retries: VecDeque<SystemTime>,
}

/// The in-process state: one per `Client`, behind a mutex held only for a
/// lookup or an update.
#[derive(Debug, Default)]
pub struct LocalState {
    entries: Mutex<HashMap<String, Entry>>,
    epoch: std::sync::atomic::AtomicU64,
    /// The last probe token handed out.
    probes: std::sync::atomic::AtomicU64,
}

impl LocalState {
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, key: &str, f: impl FnOnce(&mut Entry) -> T) -> T {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        // The key is copied only the first time it is seen.
        if let Some(entry) = entries.get_mut(key) {
            return f(entry);
        }
        f(entries.entry(key.to_string()).or_default())
    }

    /// The last cooldown of `key` that no success has ended yet, running or
    /// not (the circuit is open or half-open).
    pub fn open(&self, key: &str) -> Option<Cooling> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.get(key)?.cooling.clone()
    }
}

/// Drops the times older than `window` before `now`.
fn prune(times: &mut VecDeque<SystemTime>, now: SystemTime, window: Duration) {
    while times
        .front()
        .is_some_and(|&t| now.duration_since(t).unwrap_or_default() >= window)
    {
        times.pop_front();
    }
}

impl EngineState for LocalState {
    fn cooling(&self, key: &str, now: SystemTime) -> Option<Cooling> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.get(key)?.cooling.clone().filter(|c| c.until > now)
    }

    fn cool(&self, key: &str, now: SystemTime, until: SystemTime, cause: &Cause) {
        self.with(key, |entry| {
            let cooling = entry.cooling.as_ref().filter(|c| c.until > now);
            if cooling.is_none() && cause.kind.is_some() {
                entry.failures = entry.failures.saturating_add(1);
            }
            if cooling.is_some_and(|c| c.until >= until) {
                return;
            }
            let epoch = self.epoch.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            entry.cooling = Some(Cooling {
                epoch: cooling.map_or(epoch, |c| c.epoch),
                since: cooling.map_or(now, |c| c.since),
                until,
                cause: cause.clone(),
            });
        });
    }

    fn saw_headroom(&self, key: &str, now: SystemTime, headroom: Headroom) {
        self.with(key, |entry| entry.headroom = Some((now, headroom)));
    }

    fn failures_in_a_row(&self, key: &str) -> u32 {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.get(key).map_or(0, |e| e.failures)
    }

    fn epoch(&self) -> u64 {
        self.epoch.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn recover(&self, key: &str, sent: u64) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = entries.get_mut(key) {
            if entry.cooling.as_ref().is_some_and(|c| c.epoch > sent) {
                return;
            }
            entry.cooling = None;
            entry.failures = 0;
        }
    }

    fn note_call(&self, key: &str, now: SystemTime, budget: &RetryBudget) {
        self.with(key, |entry| {
            prune(&mut entry.calls, now, budget.window);
            entry.calls.push_back(now);
        });
    }

    fn spend_retry(
        &self,
        key: &str,
        now: SystemTime,
        budget: &RetryBudget,
        _within: Option<Duration>,
    ) -> bool {
        self.with(key, |entry| {
            prune(&mut entry.calls, now, budget.window);
            prune(&mut entry.retries, now, budget.window);
            let reserve = budget.min_retries_per_second * budget.window.as_secs_f64();
            let allowed = budget.ratio * entry.calls.len() as f64 + reserve;
            if (entry.retries.len() as f64) + 1.0 > allowed {
                return false;
            }
            entry.retries.push_back(now);
            true
        })
    }

    fn half_open(&self, key: &str, now: SystemTime) -> Option<Cooling> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.get(key)?.cooling.clone().filter(|c| c.until <= now)
    }

    fn take_probe(
        &self,
        key: &str,
        now: SystemTime,
        lease: Duration,
        _within: Option<Duration>,
    ) -> Option<u64> {
        self.with(key, |entry| {
            if entry.probe.is_some_and(|(_, ends)| ends > now) {
                return None;
            }
            let token = self
                .probes
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
                + 1;
            entry.probe = Some((token, now.checked_add(lease).unwrap_or(now)));
            Some(token)
        })
    }

    fn probed(&self, key: &str, now: SystemTime) -> bool {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(key)
            .and_then(|e| e.probe)
            .is_some_and(|(_, ends)| ends > now)
    }

    fn keep_probe(&self, key: &str, token: u64, now: SystemTime, lease: Duration) {
        self.with(key, |entry| {
            if let Some((held, ends)) = &mut entry.probe {
                if *held == token {
                    *ends = now.checked_add(lease).unwrap_or(now).max(*ends);
                }
            }
        });
    }

    fn release_probe(&self, key: &str, token: u64) {
        self.with(key, |entry| {
            if entry.probe.is_some_and(|(held, _)| held == token) {
                entry.probe = None;
            }
        });
    }
}

/// How long a cooldown has left at `now`, in whole microseconds (a
/// jittered virtual sleep leaves nanoseconds of float rounding that no one
/// asked for); `None` once it has ended.
pub fn time_left(cooling: &Cooling, now: SystemTime) -> Option<Duration> {
    let left = cooling.until.duration_since(now).ok()?;
    let left = Duration::from_micros((left.as_nanos() as f64 / 1e3).round() as u64);
    (!left.is_zero()).then_some(left)
}

impl FleetState for LocalState {
    fn cooldowns(&self, now: SystemTime) -> Vec<(String, Duration)> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<(String, Duration)> = entries
            .iter()
            .filter_map(|(key, entry)| {
                Some((key.clone(), time_left(entry.cooling.as_ref()?, now)?))
            })
            .collect();
        out.sort();
        out
    }

    fn health(&self, now: SystemTime) -> Vec<(String, Health)> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<(String, Health)> = entries
            .iter()
            .map(|(key, entry)| {
                let health = Health {
                    open: entry.cooling.clone(),
                    failures_in_a_row: entry.failures,
                    headroom: entry.headroom,
                    probing: entry.probe.is_some_and(|(_, ends)| ends > now),
                };
                (key.clone(), health)
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + secs)
    }

    #[test]
    fn cooldowns_end_at_their_time_or_on_success() {
        let state = LocalState::new();
        let asked = Cause {
            kind: Some(ErrorKind::RateLimited),
            ..Cause::because("asked for 60s")
        };
        state.cool("a", at(0), at(60), &asked);
        assert!(state.cooling("a", at(59)).is_some());
        assert!(state.cooling("a", at(60)).is_none());
        // A shorter cooldown does not cut a longer one short, and a failure
        // while cooling (a call already in flight) is not failing again.
        state.cool("a", at(1), at(10), &Cause::because("short"));
        assert_eq!(state.cooling("a", at(30)).unwrap().cause, asked);
        assert_eq!(state.failures_in_a_row("a"), 1);
        // A cooldown for exhausted headroom (no kind) is no failure.
        state.cool("h", at(0), at(1), &Cause::because("exhausted"));
        assert_eq!(state.failures_in_a_row("h"), 0);
        assert_eq!(
            state.cooldowns(at(30)),
            vec![("a".to_string(), Duration::from_secs(30))]
        );
        // A slow success of a request sent before the cooldown began ends nothing.
        state.recover("a", 0);
        assert!(state.cooling("a", at(30)).is_some());
        state.recover("a", state.epoch());
        assert!(state.cooling("a", at(30)).is_none());
        assert_eq!(state.failures_in_a_row("a"), 0);
    }

    #[test]
    fn health_is_a_snapshot_of_every_key_under_the_callers_clock() {
        let state = LocalState::new();
        let limited = Cause {
            reason: "it asked for 30s".to_string(),
            kind: Some(ErrorKind::RateLimited),
            status: Some(429),
            retry_after: Some(Duration::from_secs(30)),
        };
        state.cool("a", at(0), at(30), &limited);
        // A shorter cooldown while it cools keeps the first one's cause.
        state.cool("a", at(1), at(5), &Cause::because("short"));
        let seen = Headroom {
            requests: Some(0),
            tokens: None,
            requests_reset: Some(at(62)),
            tokens_reset: None,
        };
        state.saw_headroom("b", at(2), seen);
        state.note_call("c", at(0), &RetryBudget::default());
        let health = state.health(at(10));
        let keys: Vec<&str> = health.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["a", "b", "c"]);
        let a = &health[0].1;
        assert_eq!(a.open.as_ref().unwrap().cause, limited);
        assert_eq!(a.open.as_ref().unwrap().until, at(30));
        assert_eq!(
            time_left(a.open.as_ref().unwrap(), at(10)),
            Some(Duration::from_secs(20))
        );
        assert_eq!(
            (a.failures_in_a_row, a.probing, a.headroom),
            (1, false, None)
        );
        assert_eq!(health[1].1.headroom, Some((at(2), seen)));
        assert_eq!(health[2].1, Health::default());
        // Past its end the circuit is half-open: still open, with its cause,
        // and probing while a call holds the probe's lease.
        let token = state
            .take_probe("a", at(30), Duration::from_secs(5), None)
            .unwrap();
        let a = &state.health(at(31))[0].1;
        assert!(a.probing && a.open.is_some());
        assert!(!state.health(at(36))[0].1.probing, "the lease ran out");
        state.release_probe("a", token);
        // A success ends it and the count; the headroom seen stays.
        state.recover("a", state.epoch());
        state.recover("b", state.epoch());
        let health = state.health(at(40));
        assert_eq!(health[0].1, Health::default());
        assert_eq!(health[1].1.headroom, Some((at(2), seen)));
    }

    #[test]
    fn the_budget_is_a_ratio_of_calls_plus_a_reserve() {
        let state = LocalState::new();
        let budget = RetryBudget {
            ratio: 0.1,
            min_retries_per_second: 0.5,
            window: Duration::from_secs(10),
        };
        for _ in 0..100 {
            state.note_call("p", at(0), &budget);
        }
        // 10% of 100 calls, plus 0.5/s x 10 s.
        let granted = (0..100)
            .filter(|_| state.spend_retry("p", at(1), &budget, None))
            .count();
        assert_eq!(granted, 15);
        // The window moves on: the old calls and retries no longer count.
        assert_eq!(
            (0..100)
                .filter(|_| state.spend_retry("p", at(20), &budget, None))
                .count(),
            5
        );
    }

    #[test]
    fn an_ended_cooldown_is_half_open_with_one_probe_under_a_lease() {
        let state = LocalState::new();
        let lease = Duration::from_secs(30);
        assert!(
            state.half_open("a", at(0)).is_none(),
            "never cooled: closed"
        );
        state.cool("a", at(0), at(10), &Cause::because("failed"));
        assert!(state.half_open("a", at(9)).is_none(), "still cooling");
        assert!(state.half_open("a", at(10)).is_some());
        let first = state.take_probe("a", at(10), lease, None).unwrap();
        assert!(state.probed("a", at(11)));
        assert_eq!(state.take_probe("a", at(11), lease, None), None);
        // Kept for longer by its holder; a lease that runs out frees it.
        state.keep_probe("a", first, at(20), lease);
        assert_eq!(state.take_probe("a", at(45), lease, None), None);
        let second = state.take_probe("a", at(50), lease, None).unwrap();
        // The first holder's late release leaves the second's probe alone.
        state.release_probe("a", first);
        assert!(state.probed("a", at(51)));
        state.release_probe("a", second);
        assert!(!state.probed("a", at(51)));
        // A success closes the circuit.
        state.recover("a", state.epoch());
        assert!(state.half_open("a", at(60)).is_none());
    }
}
