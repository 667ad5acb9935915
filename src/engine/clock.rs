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
