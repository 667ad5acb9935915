//! One call run over the engine, with no pyo3: what a client holds for its
//! calls ([`Client`]), one call ([`Call`]) and its [`Plan`] (made once per
//! call), the one place the engine is run ([`Call::run`]) and a stream's
//! driver ([`StreamDriver`]: start, restart, final answer).
//!
//! A face (the Python bindings) converts its values into these, adapts its
//! key callables ([`KeySource`]), sleepers (an engine `Clock`) and event
//! callbacks ([`CallEvents`]) behind small traits, ends a call through an
//! [`Interrupter`], and raises exceptions from the values that come back.

mod interrupt;
mod keys;
mod plan;
mod pool;
mod run;
mod state_key;
mod stream;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

pub use interrupt::{interrupt, Interrupted, Interrupter};
pub use keys::{FixedKeys, KeyAsk, KeyErrors, KeySource, NoKey, RecentKeys};
pub use plan::Plan;
pub use pool::Reservation;
pub use run::{CallEvents, Outcome};
pub use state_key::StateKey;
pub use stream::{Interruption, Step, StreamDriver, StreamEnd, StreamResponse};

use crate::engine::{RetryPolicy, SharedState};
use crate::http::ReqwestTransport;
use crate::providers::{Job, ProviderConfig};

/// What a client holds for its calls, whatever face made it.
pub struct Client {
    pub providers: Vec<ProviderConfig>,
    /// What a proxy's URL holds of credentials: removed from every answer,
    /// as keys are.
    pub proxy_secrets: Vec<String>,
    /// What calls share: cooldowns, the retry budget, pools' busy counts.
    pub state: Arc<dyn SharedState>,
    busy: pool::Busy,
}

impl Client {
    pub fn new(
        providers: Vec<ProviderConfig>,
        proxy_secrets: Vec<String>,
        state: Arc<dyn SharedState>,
    ) -> Self {
        let busy = pool::Busy::new(&providers);
        Self {
            providers,
            proxy_secrets,
            state,
            busy,
        }
    }

    /// The cooldowns of this client's providers running at `now`, by the
    /// part of their state key a caller is shown (a fleet's state holds
    /// every app's: these are its providers', for their models or a call's
    /// own `model=`).
    pub fn cooldowns(&self, now: SystemTime) -> Vec<(String, Duration)> {
        self.state
            .cooldowns(now)
            .into_iter()
            .filter_map(|(key, left)| {
                let key = StateKey::parse(&key)?;
                let mine = self.providers.iter().any(|config| key.is_of(config));
                mine.then_some((key.shown, left))
            })
            .collect()
    }
}

/// One call, resolved by its face: what it asks, of whom, within what.
pub struct Call<C, E> {
    pub call_id: String,
    pub job: Job,
    /// The chain as this call uses it (made once, ordered, reserved).
    pub plan: Plan,
    pub policy: RetryPolicy,
    /// The longest one attempt may take (and a stream's idle wait).
    pub timeout: Duration,
    pub deadline: Option<Duration>,
    pub transport: ReqwestTransport,
    pub clock: C,
    /// The caller's idempotency key, sent to every provider.
    pub idempotency_key: Option<String>,
    /// Resolves when code the call runs (a sleeper, a hook, a key source)
    /// ends it.
    pub interrupted: Interrupted<E>,
    /// The pool members this call counts as busy at, while it lives.
    pub reservations: Vec<Reservation>,
}

/// A new call's id: 16 hex digits.
pub fn new_call_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}
