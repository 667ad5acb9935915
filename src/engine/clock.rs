//! Time, injected: every wait the engine makes goes through a [`Clock`].

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub type SleepFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

pub trait Clock: Send + Sync {
    /// Monotonic time since an arbitrary origin; the deadline is measured on it.
    fn now(&self) -> Duration;
    /// Wall-clock time; HTTP-dates and reset times are measured against it.
    fn wall(&self) -> SystemTime;
    fn sleep(&self, duration: Duration) -> SleepFuture;
}

/// Real time: tokio's timer, which must run inside a tokio runtime.
#[derive(Clone, Debug)]
pub struct TokioClock {
    origin: Instant,
}

impl TokioClock {
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
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
#[derive(Clone, Debug)]
pub struct ManualClock {
    state: Arc<Mutex<ManualState>>,
}

#[derive(Debug)]
struct ManualState {
    start_wall: SystemTime,
    elapsed: Duration,
    sleeps: Vec<Duration>,
}

impl ManualClock {
    /// A clock whose wall time starts at `start_wall`.
    pub fn starting_at(start_wall: SystemTime) -> Self {
        let state = ManualState {
            start_wall,
            elapsed: Duration::ZERO,
            sleeps: Vec::new(),
        };
        Self {
            state: Arc::new(Mutex::new(state)),
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

    pub fn advance(&self, by: Duration) {
        let mut state = self.lock();
        state.elapsed = state.elapsed.saturating_add(by);
    }

    pub fn clear(&self) {
        self.lock().sleeps.clear();
    }

    /// One call's view of this clock, for calls that run side by side.
    pub fn for_call(&self) -> ManualCallClock {
        let start = self.now();
        ManualCallClock {
            shared: self.clone(),
            own: Mutex::new(start),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ManualState> {
        // A panic elsewhere cannot leave this state half-written: recover it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
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
        state.elapsed = state.elapsed.saturating_add(duration);
        Box::pin(std::future::ready(()))
    }
}

/// One call's time on a shared [`ManualClock`]. Concurrent calls sleep side
/// by side under real time, so each call's deadline counts only its own
/// sleeps (ten calls that each wait 3 s fit a 10 s deadline), while the
/// shared clock shows the latest time any call has reached. Wall time (for
/// HTTP-dates and reset times, and later cooldowns, which calls share) is
/// read on the shared clock, so every call agrees on what time it is.
#[derive(Debug)]
pub struct ManualCallClock {
    shared: ManualClock,
    /// Where this call's own timeline is: the shared time when it started,
    /// plus its own sleeps.
    own: Mutex<Duration>,
}

impl Clock for ManualCallClock {
    fn now(&self) -> Duration {
        *self.own.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wall(&self) -> SystemTime {
        self.shared.wall()
    }

    fn sleep(&self, duration: Duration) -> SleepFuture {
        let reached = {
            let mut own = self.own.lock().unwrap_or_else(|e| e.into_inner());
            *own = own.saturating_add(duration);
            *own
        };
        let mut state = self.shared.lock();
        state.sleeps.push(duration);
        state.elapsed = state.elapsed.max(reached);
        Box::pin(std::future::ready(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn calls_side_by_side_count_only_their_own_sleeps() {
        let shared = ManualClock::starting_at(UNIX_EPOCH + secs(1_000));
        let calls: Vec<_> = (0..10).map(|_| shared.for_call()).collect();
        for call in &calls {
            assert_eq!(call.now(), Duration::ZERO);
            drop(call.sleep(secs(3)));
            assert_eq!(call.now(), secs(3), "a call sees only its own sleeps");
        }
        // Ten sleeps recorded; the shared clock is at the latest time reached.
        assert_eq!(shared.sleeps(), vec![secs(3); 10]);
        assert_eq!(shared.now(), secs(3));
        assert_eq!(calls[0].wall(), UNIX_EPOCH + secs(1_003));
        drop(calls[1].sleep(secs(2)));
        assert_eq!(shared.now(), secs(5));
        // Wall time is the shared clock's, even for a call that is behind it.
        assert_eq!(calls[0].now(), secs(3));
        assert_eq!(calls[0].wall(), UNIX_EPOCH + secs(1_005));
        // A call that starts later starts at the shared clock's time.
        let late = shared.for_call();
        assert_eq!(late.now(), secs(5));
        drop(late.sleep(secs(1)));
        assert_eq!((late.now(), shared.now()), (secs(6), secs(6)));
    }
}
