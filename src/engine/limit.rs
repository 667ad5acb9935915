//! Client-side limits: how many calls may be in flight at a provider, how
//! many requests and tokens it may be sent per rolling minute. A
//! [`Limiter`] holds one [`Bucket`] per limit a client was given (a
//! provider's, a pool's, a quota's); a call's attempt takes a [`Permit`]
//! from every bucket its provider draws on, or learns when it could
//! ([`Blocked`]). Waiting calls are served in arrival order ([`Queued`]):
//! a waiting call is in line on each bucket that has no room for it, and
//! only the first in a line is woken when that bucket may have room, so a
//! thousand waiters cost one wake-up per slot freed, not a thousand.
//! Time is the wall time of the call's clock, as for cooldowns.
//!
//! With a fleet-wide store ([`FleetLimits`], Redis), the buckets are the
//! fleet's: a take that this process's own buckets allow is then asked of
//! the fleet (every bucket at once, all or nothing), and undone here if
//! the fleet has no room. This process's buckets stay the first check (a
//! take they refuse costs no round trip), the fallback while the fleet
//! cannot be asked, and the place of the queue: calls wait in arrival
//! order within their process only. A process's own releases wake its
//! waiters; another process's are seen by asking again
//! ([`Blocked::recheck`]).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use tokio::sync::Notify;

use super::clock::{Clock, ManualClock, TimeHold};
use super::hints::Headroom;

/// The rolling window of `rpm` and `tpm`.
pub const WINDOW: Duration = Duration::from_secs(60);

/// How long a call waiting for a slot that another process holds waits
/// before it asks the fleet again (its own process's releases wake it at
/// once): real time, through [`super::Clock::pause`].
pub const FLEET_RECHECK: Duration = Duration::from_millis(100);

/// A future a fleet-wide store answers with.
pub type FleetAnswer<'a> = Pin<Box<dyn Future<Output = Option<Result<u64, Blocked>>> + Send + 'a>>;

/// The client's limits shared with other processes (Redis, in
/// `crate::fleet`): the limiter asks it once per take, after its own
/// buckets said yes.
pub trait FleetLimits: Send + Sync + std::fmt::Debug {
    /// One request of about `tokens` tokens on every bucket of `buckets`
    /// (the fleet's name of each, and its limit), at `now` (the call's wall
    /// clock), all or nothing, waiting at most `within` for the answer.
    /// `Some(Ok(charge))`: taken, and `charge` names it to
    /// [`FleetLimits::correct`], [`FleetLimits::unused`] and
    /// [`FleetLimits::release`]. `Some(Err(..))`: a bucket of the fleet has
    /// no room. `None`: the fleet could not be asked (away, slow, or no time
    /// to spare): this process's buckets decide alone.
    fn take(
        &self,
        buckets: Vec<(String, Limit)>,
        now: SystemTime,
        tokens: u64,
        within: Option<Duration>,
    ) -> FleetAnswer<'_>;
    /// The request's tokens are now known to be `tokens` (as
    /// [`Permit::correct`]).
    fn correct(&self, charge: u64, tokens: u64);
    /// The request was never sent: its start and tokens leave the window.
    fn unused(&self, charge: u64);
    /// The request's slot is given back (its permit dropped).
    fn release(&self, charge: u64);
}

/// What one limit allows; `None`: no bound of that kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limit {
    /// Calls in flight at once (a stream's until it ends or is closed).
    pub concurrency: Option<u32>,
    /// Requests started per rolling minute.
    pub rpm: Option<u32>,
    /// Tokens per rolling minute: an estimate charged at the start,
    /// corrected to the reported usage.
    pub tpm: Option<u64>,
}

/// Why an attempt cannot start now, and when it could.
#[derive(Clone, Debug, PartialEq)]
pub struct Blocked {
    /// In words, for `.attempts` and the log ("at its concurrency limit (8
    /// in flight)").
    pub why: String,
    /// When the bucket that blocks it has room again, when that is known
    /// (a window or a reset); `None`: when a call in flight ends, or a call
    /// waiting before it is served.
    pub at: Option<SystemTime>,
    /// Room is held in another process (the fleet's concurrency): its
    /// release goes unheard here, so ask again after this long in real
    /// time ([`super::Clock::pause`]). `None`: this process hears it.
    pub recheck: Option<Duration>,
}

impl Blocked {
    /// The wait until `at` from `now`, when known.
    pub fn wait(&self, now: SystemTime) -> Option<Duration> {
        self.at.map(|at| at.duration_since(now).unwrap_or_default())
    }
}

/// A limit's state: what is in flight and what the window holds.
#[derive(Debug)]
struct Bucket {
    name: String,
    limit: Limit,
    in_flight: u32,
    /// When each request of the window started, oldest first: (charge id,
    /// when).
    starts: VecDeque<(u64, SystemTime)>,
    /// Each request's tokens in the window: (charge id, when, tokens).
    tokens: VecDeque<(u64, SystemTime, u64)>,
    /// Nothing starts before this (a 429's hint), and why.
    closed_until: Option<(SystemTime, String)>,
    /// What the provider's headers last said is left, until their resets.
    requests_left: Option<(u64, SystemTime)>,
    tokens_left: Option<(u64, SystemTime)>,
    /// The calls waiting for room on this bucket, in arrival order: each
    /// one's ticket and how to wake it.
    queue: VecDeque<(u64, Arc<Waker>)>,
}

impl Bucket {
    fn prune(&mut self, now: SystemTime) {
        let horizon = now.checked_sub(WINDOW).unwrap_or(SystemTime::UNIX_EPOCH);
        while self.starts.front().is_some_and(|&(_, t)| t <= horizon) {
            self.starts.pop_front();
        }
        while self.tokens.front().is_some_and(|&(_, t, _)| t <= horizon) {
            self.tokens.pop_front();
        }
        if self.closed_until.as_ref().is_some_and(|(t, _)| *t <= now) {
            self.closed_until = None;
        }
        if self.requests_left.is_some_and(|(_, t)| t <= now) {
            self.requests_left = None;
        }
        if self.tokens_left.is_some_and(|(_, t)| t <= now) {
            self.tokens_left = None;
        }
    }

    fn used_tokens(&self) -> u64 {
        self.tokens.iter().map(|&(_, _, n)| n).sum()
    }

    /// Why a request of `need` tokens cannot start at `now` (pruned), for a
    /// call holding `ticket` (`None`: one that has not waited): the calls
    /// in line before it, else the bucket's own room.
    fn blocked(&self, now: SystemTime, need: u64, ticket: Option<u64>) -> Option<Blocked> {
        let ahead = match ticket {
            None => self.queue.len(),
            Some(mine) => self.queue.iter().take_while(|(t, _)| *t < mine).count(),
        };
        if ahead > 0 {
            return Some(Blocked {
                why: format!("calls waiting for its capacity go first ({ahead} waiting)"),
                at: None,
                recheck: None,
            });
        }
        self.lacks_room(now, need)
    }

    /// Whose limit a shared bucket is, in words ("pool gpt's", "quota
    /// org-a's": the names `failover._limits.ClientLimits` gives them);
    /// `None` for a provider's own.
    fn whose(&self) -> Option<&str> {
        let shared = ["pool ", "quota "]
            .iter()
            .any(|kind| self.name.starts_with(kind));
        shared.then_some(self.name.as_str())
    }

    /// A shared bucket's owner before the name of its limit.
    fn of(&self) -> String {
        self.whose()
            .map_or_else(String::new, |name| format!("{name}'s "))
    }

    /// Why the bucket itself has no room for `need` tokens at `now`.
    fn lacks_room(&self, now: SystemTime, need: u64) -> Option<Blocked> {
        let after = |at: SystemTime| at.duration_since(now).unwrap_or_default().as_secs_f64();
        if let Some((until, why)) = &self.closed_until {
            return Some(Blocked {
                why: format!("{why}: capacity in {:.1}s", after(*until)),
                at: Some(*until),
                recheck: None,
            });
        }
        if let Some(most) = self.limit.concurrency {
            if self.in_flight >= most {
                return Some(Blocked {
                    why: format!(
                        "at {} concurrency limit ({most} in flight)",
                        self.whose()
                            .map_or("its".to_string(), |name| format!("{name}'s"))
                    ),
                    at: None,
                    recheck: None,
                });
            }
        }
        if let Some((0, reset)) = self.requests_left {
            return Some(Blocked {
                why: format!(
                    "its rate-limit headers say no request is left: capacity in {:.1}s",
                    after(reset)
                ),
                at: Some(reset),
                recheck: None,
            });
        }
        if let Some(rpm) = self.limit.rpm {
            if self.starts.len() >= rpm as usize {
                // Room again when enough of the oldest leave the window.
                let nth = self.starts.len() + 1 - rpm as usize;
                let at = self.starts[nth - 1].1 + WINDOW;
                return Some(Blocked {
                    why: format!("{}rpm limit: capacity in {:.1}s", self.of(), after(at)),
                    at: Some(at),
                    recheck: None,
                });
            }
        }
        if let Some((left, reset)) = self.tokens_left {
            if left < need {
                return Some(Blocked {
                    why: format!(
                        "its rate-limit headers say {left} tokens are left, {need} needed: \
                         capacity in {:.1}s",
                        after(reset)
                    ),
                    at: Some(reset),
                    recheck: None,
                });
            }
        }
        if let Some(tpm) = self.limit.tpm {
            let used = self.used_tokens();
            // A request bigger than the whole limit goes when nothing else
            // is in the window, rather than never.
            if used > 0 && used + need > tpm {
                let mut freed = 0;
                let mut at = now;
                for &(_, t, n) in &self.tokens {
                    freed += n;
                    at = t + WINDOW;
                    if used - freed + need <= tpm {
                        break;
                    }
                }
                return Some(Blocked {
                    why: format!(
                        "{}tpm limit ({used} of {tpm} used, {need} needed): capacity in {:.1}s",
                        self.of(),
                        after(at)
                    ),
                    at: Some(at),
                    recheck: None,
                });
            }
        }
        None
    }
}

impl Bucket {
    /// Puts `ticket` in line, in arrival order, unless it is there.
    fn join(&mut self, ticket: u64, wake: &Arc<Waker>) {
        let at = self.queue.partition_point(|(t, _)| *t < ticket);
        if self.queue.get(at).is_none_or(|(t, _)| *t != ticket) {
            self.queue.insert(at, (ticket, Arc::clone(wake)));
        }
    }

    /// Takes the request of `charge` out of the windows (it was not sent).
    fn uncharge(&mut self, charge: u64) {
        self.starts.retain(|e| e.0 != charge);
        self.tokens.retain(|e| e.0 != charge);
    }

    /// Takes `ticket` out of line; the new first is woken when it was first.
    fn leave(&mut self, ticket: u64) {
        let Some(at) = self.queue.iter().position(|(t, _)| *t == ticket) else {
            return;
        };
        self.queue.remove(at);
        if at == 0 {
            self.wake_first();
        }
    }

    /// Room may have been made: the first in line looks (it is the only one
    /// that could take it; the others wait behind it).
    fn wake_first(&self) {
        if let Some((_, wake)) = self.queue.front() {
            wake.wake();
        }
    }
}

#[derive(Debug, Default)]
struct Buckets {
    buckets: Vec<Bucket>,
    next_id: u64,
}

/// The limits of one client, shared by its calls (sync threads and asyncio
/// tasks alike).
#[derive(Debug, Default)]
pub struct Limiter {
    state: Mutex<Buckets>,
    /// The fleet the buckets are shared with, if any.
    fleet: Option<Arc<dyn FleetLimits>>,
}

impl Limiter {
    /// A limiter with one bucket per `(name, limit)`, in that order: a
    /// slot's limits are indexes into it.
    pub fn new(limits: Vec<(String, Limit)>) -> Arc<Self> {
        Self::shared(limits, None)
    }

    /// A limiter whose buckets are shared with the fleet's of the same
    /// names (with `None`, [`Limiter::new`]).
    pub fn shared(limits: Vec<(String, Limit)>, fleet: Option<Arc<dyn FleetLimits>>) -> Arc<Self> {
        let buckets = limits
            .into_iter()
            .map(|(name, limit)| Bucket {
                name,
                limit,
                in_flight: 0,
                starts: VecDeque::new(),
                tokens: VecDeque::new(),
                closed_until: None,
                requests_left: None,
                tokens_left: None,
                queue: VecDeque::new(),
            })
            .collect();
        Arc::new(Self {
            state: Mutex::new(Buckets {
                buckets,
                next_id: 1,
            }),
            fleet,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Buckets> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A permit for one request of about `tokens` tokens on every bucket of
    /// `limits`, at `now`, for a call holding `queued` (see [`Limiter::take_here`]); or why not. In this
    /// process first ([`Limiter::take_here`]), then in the fleet, if there
    /// is one, waiting at most `within` for it (with no answer in time,
    /// this process's permit stands).
    pub async fn take(
        self: &Arc<Self>,
        limits: &[usize],
        now: SystemTime,
        tokens: u64,
        queued: Option<&Queued>,
        within: Option<Duration>,
    ) -> Result<Permit, Blocked> {
        let Some(fleet) = &self.fleet else {
            return self.take_here(limits, now, tokens, queued);
        };
        // A call waiting here for a slot looks again after a recheck too: the
        // room a fleet-refused take gives back here wakes no one (a wake
        // would send each waiter to the fleet in vain), and with Redis gone
        // a call in line must still find the room its own process has.
        let mut permit = self
            .take_here(limits, now, tokens, queued)
            .map_err(|blocked| match blocked {
                Blocked {
                    at: None,
                    recheck: None,
                    why,
                } => Blocked {
                    why,
                    at: None,
                    recheck: Some(FLEET_RECHECK),
                },
                blocked => blocked,
            })?;
        let buckets = {
            let state = self.lock();
            limits
                .iter()
                .map(|&index| {
                    let bucket = &state.buckets[index];
                    (bucket.name.clone(), bucket.limit)
                })
                .collect()
        };
        match fleet.take(buckets, now, tokens, within).await {
            Some(Ok(charge)) => {
                permit.fleet = Some(charge);
                Ok(permit)
            }
            Some(Err(blocked)) => {
                permit.forget();
                Err(blocked)
            }
            None => Ok(permit),
        }
    }

    /// A permit for one request of about `tokens` tokens on every bucket of
    /// `limits`, at `now`, in this process only; or why not, from the
    /// bucket that will take longest to have room. A waiting call
    /// (`queued`) is then in line on each of these buckets that has no room
    /// for it (or calls before it), and out of line on the others; served,
    /// it leaves every line of them.
    pub fn take_here(
        self: &Arc<Self>,
        limits: &[usize],
        now: SystemTime,
        tokens: u64,
        queued: Option<&Queued>,
    ) -> Result<Permit, Blocked> {
        let ticket = queued.map(|q| q.ticket);
        let mut state = self.lock();
        let mut worst: Option<Blocked> = None;
        for &index in limits {
            let bucket = &mut state.buckets[index];
            bucket.prune(now);
            let blocked = bucket.blocked(now, tokens, ticket);
            if let Some(queued) = queued {
                match blocked {
                    Some(_) => bucket.join(queued.ticket, &queued.wake),
                    None => bucket.leave(queued.ticket),
                }
            }
            if let Some(blocked) = blocked {
                let worse = match (&worst, blocked.at) {
                    (None, _) | (Some(_), None) => true,
                    (Some(w), Some(at)) => w.at.is_some_and(|w| at > w),
                };
                if worse {
                    worst = Some(blocked);
                }
            }
        }
        if let Some(blocked) = worst {
            return Err(blocked);
        }
        let charge = state.next_id;
        state.next_id += 1;
        let mut holds_slot = false;
        for &index in limits {
            let bucket = &mut state.buckets[index];
            if bucket.limit.concurrency.is_some() {
                bucket.in_flight += 1;
                holds_slot = true;
            }
            if bucket.limit.rpm.is_some() {
                bucket.starts.push_back((charge, now));
            }
            if let Some((left, _)) = &mut bucket.requests_left {
                *left = left.saturating_sub(1);
            }
            if let Some((left, _)) = &mut bucket.tokens_left {
                *left = left.saturating_sub(tokens);
            }
            if bucket.limit.tpm.is_some() {
                bucket.tokens.push_back((charge, now, tokens));
            }
        }
        Ok(Permit {
            limiter: Arc::clone(self),
            limits: limits.to_vec(),
            charge,
            holds_slot,
            fleet: None,
        })
    }

    /// A ticket for a call about to wait for room, on `clock`: in no line
    /// until `take` finds no room for it; out of every line when dropped.
    pub fn queue(self: &Arc<Self>, clock: &dyn Clock) -> Queued {
        let mut state = self.lock();
        let ticket = state.next_id;
        state.next_id += 1;
        let wake = Waker {
            notify: Notify::new(),
            virtual_time: clock.virtual_time(),
            held: Mutex::new(None),
        };
        Queued {
            limiter: Arc::clone(self),
            ticket,
            wake: Arc::new(wake),
        }
    }

    /// A rate limit the provider said it hit with a wait: nothing starts on
    /// these buckets until `until` (its window is as good as full).
    pub fn close(&self, limits: &[usize], until: SystemTime, why: &str) {
        let mut state = self.lock();
        for &index in limits {
            let bucket = &mut state.buckets[index];
            let later = bucket.closed_until.as_ref().is_none_or(|(t, _)| *t < until);
            if later {
                bucket.closed_until = Some((until, why.to_string()));
            }
        }
    }

    /// What a provider's rate-limit headers say is left, until its resets:
    /// the buckets let no more through until then.
    pub fn saw_headroom(&self, limits: &[usize], now: SystemTime, headroom: &Headroom) {
        let mut state = self.lock();
        for &index in limits {
            let bucket = &mut state.buckets[index];
            if let (Some(left), Some(reset)) = (headroom.requests, headroom.requests_reset) {
                if reset > now {
                    bucket.requests_left = Some((left, reset));
                }
            }
            if let (Some(left), Some(reset)) = (headroom.tokens, headroom.tokens_reset) {
                if reset > now {
                    bucket.tokens_left = Some((left, reset));
                }
            }
        }
    }

    /// Calls in flight on bucket `index`.
    pub fn in_flight(&self, index: usize) -> u32 {
        self.lock().buckets[index].in_flight
    }
}

/// One request's share of its buckets: its slot (given back when dropped)
/// and its tokens in the window (corrected once the usage is known), here
/// and, with a fleet, in the fleet.
#[derive(Debug)]
pub struct Permit {
    limiter: Arc<Limiter>,
    limits: Vec<usize>,
    charge: u64,
    holds_slot: bool,
    /// Its charge in the fleet (`None`: taken in this process only).
    fleet: Option<u64>,
}

impl Permit {
    /// The request's tokens are now known to be `tokens` (its reported
    /// usage; zero for a request refused unbilled): its estimate in the
    /// window is replaced, never added to.
    pub fn correct(&self, tokens: u64) {
        let mut state = self.limiter.lock();
        for &index in &self.limits {
            let bucket = &mut state.buckets[index];
            if let Some(entry) = bucket.tokens.iter_mut().find(|e| e.0 == self.charge) {
                entry.2 = tokens;
                bucket.wake_first();
            }
        }
        drop(state);
        if let (Some(fleet), Some(charge)) = (&self.limiter.fleet, self.fleet) {
            fleet.correct(charge, tokens);
        }
    }

    /// Takes back what [`Limiter::take_here`] charged, without waking the
    /// waiters: no room was made (the fleet refused it), and a wake would
    /// send each of them to ask the fleet in vain.
    fn forget(mut self) {
        let mut state = self.limiter.lock();
        for &index in &self.limits {
            let bucket = &mut state.buckets[index];
            bucket.uncharge(self.charge);
            if self.holds_slot && bucket.limit.concurrency.is_some() {
                bucket.in_flight = bucket.in_flight.saturating_sub(1);
            }
        }
        drop(state);
        self.holds_slot = false;
        self.fleet = None;
    }

    /// The request was never sent (the call went elsewhere after all, or
    /// ran out of time first): its start and tokens leave the window, its
    /// slot is given back.
    pub fn unused(self) {
        let mut state = self.limiter.lock();
        for &index in &self.limits {
            let bucket = &mut state.buckets[index];
            bucket.uncharge(self.charge);
            bucket.wake_first();
        }
        // (Given back before `self` drops and gives its slot back.)
        drop(state);
        if let (Some(fleet), Some(charge)) = (&self.limiter.fleet, self.fleet) {
            fleet.unused(charge);
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let (Some(fleet), Some(charge)) = (&self.limiter.fleet, self.fleet.take()) {
            fleet.release(charge);
        }
        if !self.holds_slot {
            return;
        }
        let mut state = self.limiter.lock();
        for &index in &self.limits {
            let bucket = &mut state.buckets[index];
            if bucket.limit.concurrency.is_some() {
                bucket.in_flight = bucket.in_flight.saturating_sub(1);
                bucket.wake_first();
            }
        }
    }
}

/// How a waiting call is woken: told, and, on a virtual clock, its time kept
/// still until it has looked (else the waker's end could let the time jump
/// to the waiter's deadline first).
#[derive(Debug)]
struct Waker {
    notify: Notify,
    virtual_time: Option<ManualClock>,
    held: Mutex<Option<TimeHold>>,
}

impl Waker {
    fn wake(&self) {
        if let Some(clock) = &self.virtual_time {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            if held.is_none() {
                *held = Some(clock.hold());
            }
        }
        self.notify.notify_one();
    }

    /// It has looked: the time may move again.
    fn looked(&self) {
        let hold = self.held.lock().unwrap_or_else(|e| e.into_inner()).take();
        drop(hold);
    }
}

/// A waiting call's place in line on the buckets that had no room for it:
/// calls that came later are not let past it there; dropped (served,
/// failed, cancelled), it gives every place up.
#[derive(Debug)]
pub struct Queued {
    limiter: Arc<Limiter>,
    ticket: u64,
    /// Told when it is first in a line whose bucket may have room.
    wake: Arc<Waker>,
}

impl Queued {
    /// Resolves when room may have been made for it (at once when that
    /// happened since it last looked).
    pub fn woken(&self) -> tokio::sync::futures::Notified<'_> {
        self.wake.notify.notified()
    }

    /// It has looked for room since it was last woken.
    pub fn looked(&self) {
        self.wake.looked();
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        let mut state = self.limiter.lock();
        for bucket in &mut state.buckets {
            bucket.leave(self.ticket);
        }
        drop(state);
        self.wake.looked();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fleet that answers as told and records what it was told.
    #[derive(Debug, Default)]
    struct FakeFleet {
        /// The next answers, in order (none left: taken).
        answers: Mutex<VecDeque<Option<Result<u64, Blocked>>>>,
        seen: Mutex<Vec<String>>,
    }

    impl FakeFleet {
        fn answering(answers: Vec<Option<Result<u64, Blocked>>>) -> Arc<Self> {
            Arc::new(Self {
                answers: Mutex::new(answers.into()),
                seen: Mutex::default(),
            })
        }

        fn seen(&self) -> Vec<String> {
            self.seen.lock().unwrap().clone()
        }
    }

    impl FleetLimits for FakeFleet {
        fn take(
            &self,
            buckets: Vec<(String, Limit)>,
            _now: SystemTime,
            tokens: u64,
            _within: Option<Duration>,
        ) -> FleetAnswer<'_> {
            let names: Vec<String> = buckets.into_iter().map(|(name, _)| name).collect();
            self.seen
                .lock()
                .unwrap()
                .push(format!("take {} {tokens}", names.join(",")));
            let answer = self
                .answers
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or(Some(Ok(1)));
            Box::pin(std::future::ready(answer))
        }
        fn correct(&self, charge: u64, tokens: u64) {
            self.seen
                .lock()
                .unwrap()
                .push(format!("correct {charge} {tokens}"));
        }
        fn unused(&self, charge: u64) {
            self.seen.lock().unwrap().push(format!("unused {charge}"));
        }
        fn release(&self, charge: u64) {
            self.seen.lock().unwrap().push(format!("release {charge}"));
        }
    }

    fn block_on<F: Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
            .block_on(future)
    }

    fn fleet_limiter(fleet: &Arc<FakeFleet>) -> Arc<Limiter> {
        let limit = Limit {
            concurrency: Some(1),
            ..Limit::default()
        };
        let shared = Arc::clone(fleet) as Arc<dyn FleetLimits>;
        Limiter::shared(vec![("a|m".into(), limit)], Some(shared))
    }

    #[test]
    fn a_take_this_process_allows_is_asked_of_the_fleet_once_and_given_back_there() {
        let fleet = FakeFleet::answering(vec![Some(Ok(7))]);
        let l = fleet_limiter(&fleet);
        let permit = block_on(l.take(&[0], at(0), 40, None, None)).unwrap();
        permit.correct(12);
        // Refused here (this process holds the slot): the fleet is not asked.
        assert!(block_on(l.take(&[0], at(0), 1, None, None)).is_err());
        drop(permit);
        assert_eq!(fleet.seen(), ["take a|m 40", "correct 7 12", "release 7"]);
        let unsent = block_on(l.take(&[0], at(0), 5, None, None)).unwrap();
        unsent.unused();
        assert_eq!(&fleet.seen()[3..], ["take a|m 5", "unused 1", "release 1"]);
    }

    #[test]
    fn the_fleets_refusal_undoes_the_take_here_without_waking_waiters() {
        let held = Blocked {
            why: "at its concurrency limit in the fleet (1 in flight)".into(),
            at: None,
            recheck: Some(FLEET_RECHECK),
        };
        let fleet = FakeFleet::answering(vec![Some(Err(held.clone()))]);
        let l = fleet_limiter(&fleet);
        // A call in line here (the slot held), first when the slot frees.
        let clock = TokioClock::new();
        let held_here = l.take_here(&[0], at(0), 0, None).unwrap();
        let waiter = l.queue(&clock);
        assert!(l.take_here(&[0], at(0), 0, Some(&waiter)).is_err());
        drop(held_here);
        assert!(futures_util::FutureExt::now_or_never(waiter.woken()).is_some());
        drop(waiter);
        assert_eq!(
            block_on(l.take(&[0], at(0), 0, None, None)).unwrap_err(),
            held
        );
        assert_eq!(l.in_flight(0), 0);
        // Nothing to give back in the fleet either.
        assert_eq!(fleet.seen(), ["take a|m 0"]);
    }

    #[test]
    fn a_call_in_line_here_looks_again_after_a_recheck_when_the_buckets_are_the_fleets() {
        // Found by a trial: the room a fleet-refused take gives back wakes no
        // one, so a call in line here for a slot must look again on its own
        // (with Redis gone it would otherwise wait for ever).
        let fleet = FakeFleet::answering(vec![]);
        let l = fleet_limiter(&fleet);
        let clock = TokioClock::new();
        let held = l.take_here(&[0], at(0), 0, None).unwrap();
        let waiter = l.queue(&clock);
        let blocked = block_on(l.take(&[0], at(0), 0, Some(&waiter), None)).unwrap_err();
        assert_eq!(blocked.recheck, Some(FLEET_RECHECK));
        // A window's known time stays a wait to that time.
        drop(held);
        drop(waiter);
        let local = limiter(Limit {
            concurrency: Some(1),
            ..Limit::default()
        });
        let _held = local.take_here(&[0], at(0), 0, None).unwrap();
        let blocked = block_on(local.take(&[0], at(0), 0, None, None)).unwrap_err();
        assert_eq!(blocked.recheck, None);
    }

    #[test]
    fn with_the_fleet_unasked_the_processs_own_buckets_decide() {
        let fleet = FakeFleet::answering(vec![None]);
        let l = fleet_limiter(&fleet);
        let permit = block_on(l.take(&[0], at(0), 0, None, None)).unwrap();
        assert_eq!(l.in_flight(0), 1);
        permit.correct(3);
        drop(permit);
        // Only the take reached the fleet: the permit has no charge there.
        assert_eq!(fleet.seen(), ["take a|m 0"]);
        assert_eq!(l.in_flight(0), 0);
    }

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + secs)
    }

    use crate::engine::clock::TokioClock;

    fn limiter(limit: Limit) -> Arc<Limiter> {
        Limiter::new(vec![("p".into(), limit)])
    }

    #[test]
    fn concurrency_counts_permits_until_they_are_dropped() {
        let l = limiter(Limit {
            concurrency: Some(2),
            ..Limit::default()
        });
        let a = l.take_here(&[0], at(0), 0, None).unwrap();
        let _b = l.take_here(&[0], at(0), 0, None).unwrap();
        let blocked = l.take_here(&[0], at(0), 0, None).unwrap_err();
        assert_eq!(blocked.why, "at its concurrency limit (2 in flight)");
        assert_eq!(blocked.at, None);
        drop(a);
        assert!(l.take_here(&[0], at(0), 0, None).is_ok());
    }

    #[test]
    fn rpm_is_a_rolling_minute() {
        let l = limiter(Limit {
            rpm: Some(2),
            ..Limit::default()
        });
        drop(l.take_here(&[0], at(0), 0, None).unwrap());
        drop(l.take_here(&[0], at(10), 0, None).unwrap());
        let blocked = l.take_here(&[0], at(30), 0, None).unwrap_err();
        assert_eq!(blocked.at, Some(at(60)));
        assert_eq!(blocked.why, "rpm limit: capacity in 30.0s");
        assert!(l.take_here(&[0], at(60), 0, None).is_ok());
        assert!(l.take_here(&[0], at(61), 0, None).is_err());
        assert!(l.take_here(&[0], at(70), 0, None).is_ok());
    }

    #[test]
    fn tpm_charges_the_estimate_then_the_reported_usage_once() {
        let l = limiter(Limit {
            tpm: Some(1000),
            ..Limit::default()
        });
        let first = l.take_here(&[0], at(0), 800, None).unwrap();
        let blocked = l.take_here(&[0], at(1), 300, None).unwrap_err();
        assert_eq!(blocked.at, Some(at(60)));
        // The answer used 100 tokens: the estimate is replaced, not added to.
        first.correct(100);
        first.correct(100);
        let _second = l.take_here(&[0], at(2), 900, None).unwrap();
        assert!(l.take_here(&[0], at(3), 1, None).is_err());
        // A request bigger than the limit goes once the window is empty.
        let l = limiter(Limit {
            tpm: Some(10),
            ..Limit::default()
        });
        assert!(l.take_here(&[0], at(0), 50, None).is_ok());
    }

    #[test]
    fn waiting_calls_are_served_in_arrival_order_and_only_the_first_is_woken() {
        let clock = TokioClock::new();
        let l = limiter(Limit {
            concurrency: Some(1),
            ..Limit::default()
        });
        let held = l.take_here(&[0], at(0), 0, None).unwrap();
        let first = l.queue(&clock);
        let second = l.queue(&clock);
        // Each finds no room and gets in line, in the order of its ticket.
        assert!(l.take_here(&[0], at(0), 0, Some(&second)).is_err());
        assert!(l.take_here(&[0], at(0), 0, Some(&first)).is_err());
        drop(held);
        // A newcomer and the second in line wait behind the first.
        let blocked = l.take_here(&[0], at(0), 0, None).unwrap_err();
        assert_eq!(
            blocked.why,
            "calls waiting for its capacity go first (2 waiting)"
        );
        let blocked = l.take_here(&[0], at(0), 0, Some(&second)).unwrap_err();
        assert_eq!(
            blocked.why,
            "calls waiting for its capacity go first (1 waiting)"
        );
        // Only the first was woken by the freed slot.
        assert!(futures_util::FutureExt::now_or_never(first.woken()).is_some());
        assert!(futures_util::FutureExt::now_or_never(second.woken()).is_none());
        let served = l.take_here(&[0], at(0), 0, Some(&first)).unwrap();
        // Served, the first left the line: the second is first now, and is
        // woken when the slot is given back.
        drop(served);
        assert!(futures_util::FutureExt::now_or_never(second.woken()).is_some());
        assert!(l.take_here(&[0], at(0), 0, Some(&second)).is_ok());
    }

    #[test]
    fn a_cancelled_waiter_gives_up_its_place() {
        let clock = TokioClock::new();
        let l = limiter(Limit {
            concurrency: Some(1),
            ..Limit::default()
        });
        let held = l.take_here(&[0], at(0), 0, None).unwrap();
        let waiter = l.queue(&clock);
        assert!(l.take_here(&[0], at(0), 0, Some(&waiter)).is_err());
        drop(held);
        assert!(l.take_here(&[0], at(0), 0, None).is_err());
        drop(waiter);
        assert!(l.take_here(&[0], at(0), 0, None).is_ok());
    }

    #[test]
    fn a_waiter_is_in_line_only_where_it_has_no_room() {
        let clock = TokioClock::new();
        let l = Limiter::new(vec![
            (
                "chat".into(),
                Limit {
                    concurrency: Some(1),
                    ..Limit::default()
                },
            ),
            (
                "quota".into(),
                Limit {
                    concurrency: Some(10),
                    ..Limit::default()
                },
            ),
        ]);
        let held = l.take_here(&[0], at(0), 0, None).unwrap();
        let waiter = l.queue(&clock);
        assert!(l.take_here(&[0, 1], at(0), 0, Some(&waiter)).is_err());
        // The quota has room: a call needing only it is not held back.
        assert!(l.take_here(&[1], at(0), 0, None).is_ok());
        // In line where it has no room: a newcomer waits behind it there.
        drop(held);
        assert!(l.take_here(&[0], at(0), 0, None).is_err());
        drop(waiter);
        assert!(l.take_here(&[0], at(0), 0, None).is_ok());
    }

    #[test]
    fn a_hinted_429_closes_the_bucket_and_headroom_lowers_it() {
        let l = limiter(Limit {
            rpm: Some(100),
            ..Limit::default()
        });
        l.close(&[0], at(5), "rate limited");
        let blocked = l.take_here(&[0], at(1), 0, None).unwrap_err();
        assert_eq!(blocked.at, Some(at(5)));
        assert!(l.take_here(&[0], at(5), 0, None).is_ok());
        let headroom = Headroom {
            requests: Some(1),
            tokens: None,
            requests_reset: Some(at(20)),
            tokens_reset: None,
        };
        l.saw_headroom(&[0], at(6), &headroom);
        assert!(l.take_here(&[0], at(7), 0, None).is_ok());
        let blocked = l.take_here(&[0], at(8), 0, None).unwrap_err();
        assert_eq!(blocked.at, Some(at(20)));
        assert!(l.take_here(&[0], at(20), 0, None).is_ok());
    }

    #[test]
    fn every_bucket_must_have_room_and_the_longest_wait_is_told() {
        let l = Limiter::new(vec![
            (
                "p".into(),
                Limit {
                    rpm: Some(1),
                    ..Limit::default()
                },
            ),
            (
                "quota".into(),
                Limit {
                    rpm: Some(1),
                    ..Limit::default()
                },
            ),
        ]);
        drop(l.take_here(&[1], at(0), 0, None).unwrap());
        drop(l.take_here(&[0], at(10), 0, None).unwrap());
        let blocked = l.take_here(&[0, 1], at(20), 0, None).unwrap_err();
        assert_eq!(blocked.at, Some(at(70)));
        // Nothing was taken from the bucket that had room.
        let blocked = l.take_here(&[1], at(61), 0, None);
        assert!(blocked.is_ok());
    }
}
