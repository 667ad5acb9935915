//! Hedged requests ("The Tail at Scale"): when an attempt has not delivered
//! within `after`, the same request goes to the next provider the chain
//! would fail over to, and the first to deliver wins. What bounds them: at
//! most one a call, and a budget of `max_extra` hedges a call.

use std::sync::Mutex;
use std::time::Duration;

/// A client's hedging: when, and how many.
#[derive(Debug)]
pub struct Hedge {
    /// How long an attempt may go without delivering (a whole answer; a
    /// stream's first content) before the hedge is sent. Real time on every
    /// clock: it measures a provider's latency, and no virtual time passes
    /// while a request is in flight.
    pub after: Duration,
    pub budget: HedgeBudget,
}

impl Hedge {
    pub fn new(after: Duration, max_extra: f64) -> Self {
        Self {
            after,
            budget: HedgeBudget::new(max_extra),
        }
    }
}

/// A token bucket: each call adds `max_extra`, a hedge takes one, it
/// holds at most `1 + 10 * max_extra` and starts with one (none when
/// `max_extra` is 0). Over `n` calls at most `1 + max_extra * n` hedges are
/// sent.
#[derive(Debug)]
pub struct HedgeBudget {
    max_extra: f64,
    tokens: Mutex<f64>,
}

impl HedgeBudget {
    pub fn new(max_extra: f64) -> Self {
        Self {
            max_extra,
            tokens: Mutex::new(if max_extra > 0.0 { 1.0 } else { 0.0 }),
        }
    }

    fn capacity(&self) -> f64 {
        1.0 + 10.0 * self.max_extra
    }

    /// A call began: its share of hedges is added.
    pub fn note_call(&self) {
        let mut tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        *tokens = (*tokens + self.max_extra).min(self.capacity());
    }

    /// Takes a hedge from the budget, if one is left.
    pub fn spend(&self) -> bool {
        let mut tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Gives back a hedge taken but not sent (no room for it).
    pub fn refund(&self) {
        let mut tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        *tokens = (*tokens + 1.0).min(self.capacity());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_allows_one_hedge_plus_max_extra_a_call() {
        let budget = HedgeBudget::new(0.25);
        let mut hedges = 0;
        for _ in 0..8 {
            budget.note_call();
            if budget.spend() {
                hedges += 1;
            }
        }
        // 1 + 0.25 * 8.
        assert_eq!(hedges, 3);
        let none = HedgeBudget::new(0.0);
        none.note_call();
        assert!(!none.spend());
    }
}
