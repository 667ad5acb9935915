//! Hedged requests ("The Tail at Scale"): when an attempt has not delivered
//! within `after`, the same request goes to the next provider the chain
//! would fail over to, and the first to deliver wins. What bounds them: at
//! most one a call, and a budget of `max_extra` hedges a call, kept in the
//! client's state as the retry budget is.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

/// How many recent deliveries a learned `after` is read from, per provider,
/// model and call kind.
pub const WINDOW: usize = 200;
/// How many it needs before it hedges at all.
pub const MIN_SEEN: usize = 20;
/// The bounds of a learned `after`: never hedge sooner, nor wait longer.
pub const FLOOR: Duration = Duration::from_millis(100);
pub const CAP: Duration = Duration::from_secs(60);

/// When a hedge is sent.
#[derive(Debug)]
pub enum After {
    /// After this long without a delivery.
    Fixed(Duration),
    /// After the quantile (0.95 for "p95") of the provider's recent times to
    /// deliver, learned from its successful attempts; none until
    /// [`MIN_SEEN`] are known.
    Learned {
        quantile: f64,
        seen: Mutex<HashMap<String, VecDeque<Duration>>>,
    },
}

/// The key a client's state counts its calls and hedges under (no
/// provider's key ends in `|`).
pub const BUDGET_KEY: &str = "hedges|";

/// A client's hedging: when, and how many.
#[derive(Debug)]
pub struct Hedge {
    /// How long an attempt may go without delivering (a whole answer; a
    /// stream's first content) before the hedge is sent. Real time on every
    /// clock: it measures a provider's latency, and no virtual time passes
    /// while a request is in flight.
    pub after: After,
    /// The extra requests it may send, as a share of calls (see
    /// [`Hedge::window`]).
    pub max_extra: f64,
}

impl Hedge {
    pub fn new(after: Duration, max_extra: f64) -> Self {
        Self {
            after: After::Fixed(after),
            max_extra,
        }
    }

    /// Hedging after the `quantile` of each provider's recent times to
    /// deliver.
    pub fn learned(quantile: f64, max_extra: f64) -> Self {
        Self {
            after: After::Learned {
                quantile,
                seen: Mutex::new(HashMap::new()),
            },
            max_extra,
        }
    }

    /// When to hedge an attempt at `key` (its provider, model and call
    /// kind); `None`: not yet known.
    pub fn after_for(&self, key: &str) -> Option<Duration> {
        match &self.after {
            After::Fixed(after) => Some(*after),
            After::Learned { quantile, seen } => {
                let seen = seen.lock().unwrap_or_else(|e| e.into_inner());
                let times = seen.get(key).filter(|t| t.len() >= MIN_SEEN)?;
                let mut sorted: Vec<Duration> = times.iter().copied().collect();
                sorted.sort_unstable();
                let rank = ((sorted.len() as f64) * quantile).ceil() as usize;
                let at = sorted[rank.clamp(1, sorted.len()) - 1];
                Some(at.clamp(FLOOR, CAP))
            }
        }
    }

    /// Whether it ever hedges (a `max_extra` of 0 never does: no hedge is
    /// looked for, nor a refusal recorded).
    pub fn hedges(&self) -> bool {
        self.max_extra > 0.0
    }

    /// The budget as a client's state keeps it (shared across the fleet
    /// with a fleet-wide state): `max_extra` of the calls of the last
    /// minute, plus one hedge a minute (none when `max_extra` is 0).
    pub fn window(&self) -> super::state::RetryBudget {
        let max_extra = self.max_extra;
        super::state::RetryBudget {
            ratio: max_extra,
            min_retries_per_second: if max_extra > 0.0 { 1.0 / 60.0 } else { 0.0 },
            window: Duration::from_secs(60),
        }
    }

    /// An attempt at `key` delivered after `took`: learned from, when
    /// `after` is.
    pub fn observe(&self, key: &str, took: Duration) {
        if let After::Learned { seen, .. } = &self.after {
            let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
            let times = seen.entry(key.to_string()).or_default();
            if times.len() == WINDOW {
                times.pop_front();
            }
            times.push_back(took);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_learned_after_is_the_quantile_of_recent_deliveries_within_its_bounds() {
        let hedge = Hedge::learned(0.95, 0.05);
        for ms in 1..=(MIN_SEEN as u64 - 1) {
            hedge.observe("a", Duration::from_millis(100 * ms));
        }
        // Not enough seen yet: no hedging.
        assert_eq!(hedge.after_for("a"), None);
        hedge.observe("a", Duration::from_millis(2000));
        // 20 times of 0.1 s to 2.0 s: the 95th percentile is the 19th.
        assert_eq!(hedge.after_for("a"), Some(Duration::from_millis(1900)));
        assert_eq!(hedge.after_for("b"), None);
        for _ in 0..WINDOW {
            hedge.observe("a", Duration::from_millis(1));
        }
        // The window moved on; the floor bounds it.
        assert_eq!(hedge.after_for("a"), Some(FLOOR));
    }

    #[test]
    fn the_budget_allows_max_extra_of_the_calls_plus_one_a_minute() {
        use crate::engine::{EngineState, LocalState};
        let (state, now) = (LocalState::new(), std::time::SystemTime::now());
        let spend = |hedge: &Hedge| {
            state.note_call(BUDGET_KEY, now, &hedge.window());
            state.spend_retry(BUDGET_KEY, now, &hedge.window(), None)
        };
        let hedge = Hedge::new(Duration::from_millis(20), 0.25);
        let hedges = (0..8).filter(|_| spend(&hedge)).count();
        // 0.25 of 8 calls, plus one a minute.
        assert_eq!(hedges, 3);
        assert!(!Hedge::new(Duration::from_millis(20), 0.0).hedges());
    }
}
