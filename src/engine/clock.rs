//! Time, injected: every wait the engine makes goes through a [`Clock`].

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::Notify;
use tokio::time::Instant;

pub type SleepFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

pub trait Clock: Send + Sync {
    /// Monotonic time since an arbitrary origin; the deadline is measured on it.
    fn now(&self) -> Duration;
    /// Wall-clock time; HTTP-dates and reset times are measured against it.
    fn wall(&self) -> SystemTime;
    fn sleep(&self, duration: Duration) -> SleepFuture;
    /// A wait for something other than time (a limit's slot, freed when
    /// another call ends), at most `bound`: its caller races it with what it
    /// waits for and drops it when that comes, so it is not one of the
    /// sleeps a test asserts. A clock whose sleeps cannot be cut short waits
    /// on real time instead.
    fn wait(&self, bound: Duration) -> SleepFuture {
        self.sleep(bound)
    }
    /// The shared virtual clock this clock is a call's view of, if any: a
    /// call that wakes another (a slot freed) keeps its time still until
    /// the woken call has looked, so the time does not jump past a wait
    /// that was about to end.
    fn virtual_time(&self) -> Option<ManualClock> {
        None
    }
    /// A pause of real time, whatever the clock: for what no virtual clock
    /// knows of (a slot held in another process, whose release is heard by
    /// asking again). Not recorded, and no virtual time passes for it: the
    /// call is busy as it is during a request, holding the time no longer
    /// than any such call does.
    fn pause(&self, duration: Duration) -> SleepFuture {
        Box::pin(tokio::time::sleep(duration))
    }
    /// The call this clock is of has ended while the clock lives on (a
    /// stream read to its end, failed or closed, still referenced): from now
    /// on it holds nothing others wait for. A clock of its own has nothing
    /// to give up.
    fn end(&self) {}
}

/// Real time: tokio's timer, which must run inside a tokio runtime.
#[derive(Clone, Debug)]
pub struct TokioClock {
    origin: std::time::Instant,
}

impl TokioClock {
    pub fn new() -> Self {
        Self {
            origin: std::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn wall(&self) -> SystemTime {
        SystemTime::now()
    }

    fn sleep(&self, duration: Duration) -> SleepFuture {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// Virtual time: a sleep is recorded and returns at once, moving the clock
/// forward by exactly that much. Time stands still otherwise, so the waits a
/// test asserts are exact. Cheap to clone: clones share one timeline.
///
/// Calls that run side by side take their view of it with
/// [`ManualClock::for_call`], whose sleeps wait for each other instead.
#[derive(Clone, Debug)]
pub struct ManualClock {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<ManualState>,
    /// Told whenever the time moves, a call ends or gives up a sleep, or a
    /// hold ends, so the calls' sleeps look again at whether they are due or
    /// may move it.
    changed: Notify,
}

#[derive(Debug)]
struct ManualState {
    start_wall: SystemTime,
    elapsed: Duration,
    sleeps: Vec<Duration>,
    /// Calls that hold a [`ManualCallClock`] of this clock.
    in_flight: usize,
    next_id: u64,
    /// The sleeps of calls in flight that have not come due.
    waiting: Vec<Waiter>,
    /// Until when the calls that started last hold the time: their settle.
    settled_at: Instant,
    /// [`TimeHold`]s alive: while any is, the time stays put too.
    holds: usize,
    /// When anything last happened here (a call started or ended, a sleep
    /// began or was given up, the time moved): the grace counts from it.
    last_change: Instant,
}

#[derive(Debug)]
struct Waiter {
    call: u64,
    sleep: u64,
    wake: Duration,
}

/// How long, in real time, a call doing something other than sleeping (an
/// HTTP request, an event hook, a stream its caller is not reading) holds
/// the virtual time while others sleep, when nothing else happens. Long
/// enough for a request to the local mock server on a busy machine; short
/// enough that a call blocked outside the library only slows the others.
pub const GRACE: Duration = Duration::from_millis(250);

impl ManualClock {
    /// A clock whose wall time starts at `start_wall`.
    pub fn starting_at(start_wall: SystemTime) -> Self {
        let state = ManualState {
            start_wall,
            elapsed: Duration::ZERO,
            sleeps: Vec::new(),
            in_flight: 0,
            next_id: 0,
            waiting: Vec::new(),
            settled_at: Instant::now(),
            holds: 0,
            last_change: Instant::now(),
        };
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(state),
                changed: Notify::new(),
            }),
        }
    }

    /// A clock whose wall time starts now, truncated to the whole second so
    /// that HTTP-date hints (whole seconds) give whole-second waits.
    pub fn new() -> Self {
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Self::starting_at(UNIX_EPOCH + Duration::from_secs(since_epoch.as_secs()))
    }

    pub fn sleeps(&self) -> Vec<Duration> {
        self.lock().sleeps.clone()
    }

    /// Moves the clock at once, without recording a sleep; calls whose
    /// sleeps are due by then wake.
    pub fn advance(&self, by: Duration) {
        let mut state = self.lock();
        let to = state.elapsed.saturating_add(by);
        state.move_to(to);
        drop(state);
        self.shared.changed.notify_waiters();
    }

    pub fn clear(&self) {
        self.lock().sleeps.clear();
    }

    /// One call's view of this clock, for calls that run side by side; the
    /// call is in flight until it is dropped. For `settle` of real time from
    /// now, the time stays put, so that calls started together with this one
    /// (a few threads, tasks gathered) join it before any sleep moves it.
    pub fn for_call(&self, settle: Duration) -> ManualCallClock {
        let mut state = self.lock();
        let id = state.new_id();
        state.in_flight += 1;
        let now = Instant::now();
        state.settled_at = state.settled_at.max(now + settle);
        state.last_change = now;
        drop(state);
        ManualCallClock {
            shared: self.clone(),
            id,
            ended: AtomicBool::new(false),
        }
    }

    /// Keeps the time where it is until the hold is dropped, or for the
    /// grace if nothing else happens: for a settle that ends on an event
    /// rather than after a time (an event loop's turn).
    pub fn hold(&self) -> TimeHold {
        let mut state = self.lock();
        state.holds += 1;
        state.last_change = Instant::now();
        TimeHold {
            clock: self.clone(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ManualState> {
        // A panic elsewhere cannot leave this state half-written: recover it.
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl ManualState {
    fn new_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Moves the time to `to` (never back) and takes the sleeps due by then
    /// off the waiting list, in one step, so no one counts them as still
    /// waiting and moves the time past a call that has yet to run.
    fn move_to(&mut self, to: Duration) {
        self.elapsed = self.elapsed.max(to);
        let elapsed = self.elapsed;
        self.waiting.retain(|w| w.wake > elapsed);
        self.last_change = Instant::now();
    }

    /// How many calls in flight are waiting in a sleep.
    fn calls_waiting(&self) -> usize {
        let mut calls: Vec<u64> = self.waiting.iter().map(|w| w.call).collect();
        calls.sort_unstable();
        calls.dedup();
        calls.len()
    }

    /// One look at the sleep `sleep`: `None` once it is due, else the real
    /// time at which to look again (sooner if told of a change). Moves the
    /// time to the earliest wake-up when the rule allows; returns whether it
    /// did, so the caller tells the others.
    fn look(&mut self, sleep: u64, now: Instant) -> (Option<Instant>, bool) {
        let mut moved = false;
        loop {
            if !self.waiting.iter().any(|w| w.sleep == sleep) {
                return (None, moved);
            }
            let settled = self.settled_at;
            let may_move_at = if self.holds == 0 && self.calls_waiting() >= self.in_flight {
                settled
            } else {
                // A call doing something else (or a hold) keeps the time,
                // for a while.
                settled.max(self.last_change + GRACE)
            };
            if now < may_move_at {
                return (Some(may_move_at), moved);
            }
            let earliest = self.waiting.iter().map(|w| w.wake).min();
            if let Some(earliest) = earliest {
                self.move_to(earliest);
                moved = true;
            }
        }
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        self.lock().elapsed
    }

    fn wall(&self) -> SystemTime {
        let state = self.lock();
        state
            .start_wall
            .checked_add(state.elapsed)
            .unwrap_or(state.start_wall)
    }

    fn sleep(&self, duration: Duration) -> SleepFuture {
        let mut state = self.lock();
        state.sleeps.push(duration);
        let to = state.elapsed.saturating_add(duration);
        state.move_to(to);
        drop(state);
        self.shared.changed.notify_waiters();
        Box::pin(std::future::ready(()))
    }
}

/// One call's time on a shared [`ManualClock`], for calls that run side by
/// side (threads or tasks), as under real sleeping: the rule tokio's paused
/// clock follows. The virtual time moves only when every call in flight is
/// waiting in a sleep and the settle of every call started is over, and then
/// jumps to the earliest wake-up, waking every call due then; a call doing
/// anything else holds it, for up to [`GRACE`] in which nothing happens.
/// So ten calls that each wait 3 s all end at +3 s and each fits a 10 s
/// deadline, and calls made one after another add up. `now` and `wall` are
/// the shared clock's, so every call agrees on what time it is (HTTP-dates,
/// reset times, cooldowns).
#[derive(Debug)]
pub struct ManualCallClock {
    shared: ManualClock,
    id: u64,
    /// Whether its call has left the calls in flight (once: at its end, or
    /// when it is dropped).
    ended: AtomicBool,
}

impl Drop for ManualCallClock {
    fn drop(&mut self) {
        self.end();
    }
}

impl Clock for ManualCallClock {
    fn now(&self) -> Duration {
        self.shared.now()
    }

    fn wall(&self) -> SystemTime {
        self.shared.wall()
    }

    /// Its call leaves the calls in flight: the others no longer wait for it.
    fn end(&self) {
        if self.ended.swap(true, Ordering::AcqRel) {
            return;
        }
        let mut state = self.shared.lock();
        state.in_flight = state.in_flight.saturating_sub(1);
        state.last_change = Instant::now();
        drop(state);
        // The calls left may all be waiting now.
        self.shared.shared.changed.notify_waiters();
    }

    fn sleep(&self, duration: Duration) -> SleepFuture {
        self.shared.lock().sleeps.push(duration);
        self.wait(duration)
    }

    fn virtual_time(&self) -> Option<ManualClock> {
        Some(self.shared.clone())
    }

    /// As a sleep, unrecorded: the virtual time moves past it only when
    /// every call in flight waits, so a slot freed by a call doing anything
    /// else ends it first.
    fn wait(&self, duration: Duration) -> SleepFuture {
        let mut state = self.shared.lock();
        if duration.is_zero() {
            return Box::pin(std::future::ready(()));
        }
        let sleep = state.new_id();
        let wake = state.elapsed.saturating_add(duration);
        state.waiting.push(Waiter {
            call: self.id,
            sleep,
            wake,
        });
        state.last_change = Instant::now();
        drop(state);
        // Made here, not on the first poll, so a sleep dropped unpolled
        // still leaves the waiting list.
        let waiting = Waiting {
            clock: self.shared.clone(),
            sleep,
        };
        Box::pin(waiting.until_due())
    }
}

/// See [`ManualClock::hold`].
#[derive(Debug)]
pub struct TimeHold {
    clock: ManualClock,
}

impl Drop for TimeHold {
    fn drop(&mut self) {
        let mut state = self.clock.lock();
        state.holds = state.holds.saturating_sub(1);
        state.last_change = Instant::now();
        drop(state);
        self.clock.shared.changed.notify_waiters();
    }
}

/// A call's sleep on the waiting list; dropping it (the call was cancelled)
/// takes it off, so it no longer holds the others back.
struct Waiting {
    clock: ManualClock,
    sleep: u64,
}

impl Waiting {
    async fn until_due(self) {
        let shared = &self.clock.shared;
        loop {
            // Listening before looking: a change in between is not missed.
            let changed = shared.changed.notified();
            let (again_at, moved) = self.clock.lock().look(self.sleep, Instant::now());
            if moved {
                shared.changed.notify_waiters();
            }
            let Some(again_at) = again_at else { return };
            tokio::select! {
                () = changed => {}
                () = tokio::time::sleep_until(again_at) => {}
            }
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut state = self.clock.lock();
        let before = state.waiting.len();
        state.waiting.retain(|w| w.sleep != self.sleep);
        if state.waiting.len() != before {
            state.last_change = Instant::now();
            drop(state);
            self.clock.shared.changed.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SETTLE: Duration = Duration::from_millis(10);

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// Calls that each sleep `secs` at once, on tasks; their end times.
    async fn side_by_side(shared: &ManualClock, waits: &[u64]) -> Vec<Duration> {
        let tasks: Vec<_> = waits
            .iter()
            .map(|&wait| {
                let call = shared.for_call(SETTLE);
                tokio::spawn(async move {
                    call.sleep(secs(wait)).await;
                    call.now()
                })
            })
            .collect();
        let mut ends = Vec::new();
        for task in tasks {
            ends.push(task.await.unwrap());
        }
        ends
    }

    // Real time is tokio's paused clock here: the settle and the grace pass
    // as soon as nothing else can run, so these tests are instant and exact.

    #[tokio::test(start_paused = true)]
    async fn calls_side_by_side_wake_together_and_calls_in_turn_add_up() {
        let shared = ManualClock::starting_at(UNIX_EPOCH + secs(1_000));
        // Ten calls that each wait 3 s end at +3 s, as under real sleeping.
        assert_eq!(side_by_side(&shared, &[3; 10]).await, vec![secs(3); 10]);
        assert_eq!(shared.sleeps(), vec![secs(3); 10]);
        assert_eq!(shared.now(), secs(3));
        assert_eq!(shared.wall(), UNIX_EPOCH + secs(1_003));
        // Different waits: each wakes at its own time, in order.
        assert_eq!(
            side_by_side(&shared, &[2, 1, 4]).await,
            vec![secs(5), secs(4), secs(7)]
        );
        // A call after those starts where they left the clock and adds up.
        let late = shared.for_call(SETTLE);
        assert_eq!(late.now(), secs(7));
        late.sleep(secs(1)).await;
        late.sleep(secs(1)).await;
        assert_eq!((late.now(), shared.now()), (secs(9), secs(9)));
        assert_eq!(late.wall(), UNIX_EPOCH + secs(1_009));
    }

    #[tokio::test(start_paused = true)]
    async fn a_single_call_waits_at_most_the_settle() {
        let shared = ManualClock::new();
        let call = shared.for_call(SETTLE);
        let started = Instant::now();
        call.sleep(secs(30)).await;
        assert_eq!(started.elapsed(), SETTLE);
        // Its later sleeps come long after it started: no wait at all.
        let again = Instant::now();
        call.sleep(secs(30)).await;
        assert_eq!(again.elapsed(), Duration::ZERO);
        assert_eq!(shared.now(), secs(60));
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_without_a_settle_sleeps_at_once_unless_another_settles() {
        let shared = ManualClock::new();
        let started = Instant::now();
        let alone = shared.for_call(Duration::ZERO);
        alone.sleep(secs(3)).await;
        assert_eq!(started.elapsed(), Duration::ZERO);
        drop(alone);
        // A call with a settle, then one without: the first one's still holds.
        let first = shared.for_call(SETTLE);
        let second = shared.for_call(Duration::ZERO);
        drop(first);
        second.sleep(secs(3)).await;
        assert_eq!(started.elapsed(), SETTLE);
        assert_eq!(shared.now(), secs(6));
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_started_within_the_settle_joins_the_others() {
        let shared = ManualClock::new();
        let first = shared.for_call(SETTLE);
        let first = tokio::spawn(async move {
            first.sleep(secs(3)).await;
            first.now()
        });
        tokio::time::sleep(SETTLE / 2).await;
        let second = shared.for_call(SETTLE);
        second.sleep(secs(3)).await;
        assert_eq!((first.await.unwrap(), second.now()), (secs(3), secs(3)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_doing_something_else_holds_the_time_for_the_grace() {
        let shared = ManualClock::new();
        let busy = shared.for_call(SETTLE);
        let sleeper = shared.for_call(SETTLE);
        let started = Instant::now();
        sleeper.sleep(secs(3)).await;
        // Nothing else happened: after the grace the sleeper goes on.
        assert_eq!(started.elapsed(), GRACE);
        assert_eq!(shared.now(), secs(3));
        // While the busy call keeps doing things, the grace starts again.
        let sleeper = tokio::spawn(async move {
            sleeper.sleep(secs(3)).await;
            sleeper.now()
        });
        tokio::time::sleep(GRACE / 2).await;
        busy.sleep(secs(1)).await;
        assert_eq!(busy.now(), secs(4), "the busy call woke first");
        drop(busy); // it ends: the sleeper is the only call left
        assert_eq!(sleeper.await.unwrap(), secs(6));
    }

    #[tokio::test(start_paused = true)]
    async fn a_hold_keeps_the_time_until_dropped_or_for_the_grace() {
        let shared = ManualClock::new();
        let call = shared.for_call(Duration::ZERO);
        let hold = shared.hold();
        let waiting = tokio::spawn(async move {
            call.sleep(secs(3)).await;
            call.now()
        });
        tokio::time::sleep(GRACE / 2).await;
        assert_eq!(shared.now(), Duration::ZERO);
        drop(hold);
        let released = Instant::now();
        assert_eq!(waiting.await.unwrap(), secs(3));
        assert_eq!(released.elapsed(), Duration::ZERO);
        // A hold never dropped keeps it only for the grace.
        let _forgotten = shared.hold();
        let call = shared.for_call(Duration::ZERO);
        let started = Instant::now();
        call.sleep(secs(3)).await;
        assert_eq!((started.elapsed(), shared.now()), (GRACE, secs(6)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_sleep_and_an_ended_call_hold_no_one() {
        let shared = ManualClock::new();
        let cancelled = shared.for_call(SETTLE);
        let waiting = shared.for_call(SETTLE);
        let waiting = tokio::spawn(async move {
            waiting.sleep(secs(5)).await;
            waiting.now()
        });
        tokio::task::yield_now().await;
        // The other call's shorter sleep is dropped before it is due: that
        // call is doing something else now, and holds the time...
        let sleep = cancelled.sleep(secs(1));
        tokio::task::yield_now().await;
        drop(sleep);
        tokio::time::sleep(GRACE / 2).await;
        assert_eq!(
            shared.now(),
            Duration::ZERO,
            "the time never stopped at +1 s"
        );
        // ...until it ends: then the waiting call goes on at once.
        drop(cancelled);
        let ended = Instant::now();
        assert_eq!(waiting.await.unwrap(), secs(5));
        assert_eq!(ended.elapsed(), Duration::ZERO);
        assert_eq!(shared.sleeps(), vec![secs(5), secs(1)]);
    }

    #[tokio::test(start_paused = true)]
    async fn an_ended_call_holds_no_one_while_its_clock_lives_on() {
        let shared = ManualClock::new();
        let ended = shared.for_call(Duration::ZERO);
        ended.end();
        ended.end(); // ending twice leaves once
        let call = shared.for_call(Duration::ZERO);
        let started = Instant::now();
        call.sleep(secs(3)).await;
        assert_eq!((started.elapsed(), shared.now()), (Duration::ZERO, secs(3)));
        // Dropped after its end, it does not leave again: a call still in
        // flight goes on holding the others.
        drop(ended);
        let other = shared.for_call(Duration::ZERO);
        let started = Instant::now();
        other.sleep(secs(1)).await;
        assert_eq!((started.elapsed(), shared.now()), (GRACE, secs(4)));
        drop(call);
    }

    #[tokio::test(start_paused = true)]
    async fn advancing_or_sleeping_the_shared_clock_wakes_calls_due() {
        let shared = ManualClock::new();
        let busy = shared.for_call(SETTLE);
        let call = shared.for_call(SETTLE);
        let call = tokio::spawn(async move {
            call.sleep(secs(10)).await;
            call.now()
        });
        tokio::task::yield_now().await;
        // Moved from outside the calls (a test's advance, or its own sleep
        // on the FakeSleeper): at once, and past the call's wake-up.
        shared.advance(secs(4));
        assert_eq!(shared.now(), secs(4));
        drop(shared.sleep(secs(8)));
        assert_eq!(call.await.unwrap(), secs(12));
        drop(busy);
    }

    #[test]
    fn a_manual_clock_sleeps_at_once() {
        let clock = ManualClock::starting_at(UNIX_EPOCH + secs(1_000));
        drop(clock.sleep(secs(3)));
        drop(clock.sleep(secs(2)));
        assert_eq!(clock.now(), secs(5));
        assert_eq!(clock.wall(), UNIX_EPOCH + secs(1_005));
        assert_eq!(clock.sleeps(), vec![secs(3), secs(2)]);
    }
}
