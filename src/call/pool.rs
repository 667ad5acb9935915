//! The calls busy at each pool member (a pool's `least_busy`), here and,
//! with a fleet-wide state, in the other processes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::{Client, StateKey};
use crate::engine::FleetState;
use crate::providers::ProviderConfig;

pub(super) struct Busy {
    /// Calls of this process busy at each provider.
    counts: Vec<AtomicUsize>,
    /// Turns taken, to break ties between equally busy members in rotation.
    turn: AtomicUsize,
    /// Each provider's key in the fleet's busy counts.
    keys: Vec<String>,
}

impl Busy {
    pub(super) fn new(providers: &[ProviderConfig]) -> Self {
        Self {
            counts: providers.iter().map(|_| AtomicUsize::new(0)).collect(),
            turn: AtomicUsize::new(0),
            keys: providers
                .iter()
                .map(|c| StateKey::member(c).render())
                .collect(),
        }
    }

    /// The next turn among `n` members.
    pub(super) fn next_turn(&self, n: usize) -> usize {
        self.turn.fetch_add(1, Ordering::Relaxed) % n.max(1)
    }

    /// Calls busy at `provider`, here and elsewhere in the fleet. Noting a
    /// zero says this process orders this pool, so the fleet's counts are
    /// read from now on.
    pub(super) fn load(&self, state: &(impl FleetState + ?Sized), provider: usize) -> u64 {
        let key = &self.keys[provider];
        state.note_busy(key, 0);
        let here = self.counts[provider].load(Ordering::Relaxed) as u64;
        here + state.busy_elsewhere(key)
    }
}

/// A call that chose a pool member first, counted as busy at it while the
/// call lives (a stream: until it is closed).
pub struct Reservation {
    client: Arc<Client>,
    provider: usize,
}

impl Reservation {
    pub(super) fn take(client: &Arc<Client>, provider: usize) -> Self {
        client.busy.counts[provider].fetch_add(1, Ordering::Relaxed);
        client.state.note_busy(&client.busy.keys[provider], 1);
        Self {
            client: Arc::clone(client),
            provider,
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let busy = &self.client.busy;
        busy.counts[self.provider].fetch_sub(1, Ordering::Relaxed);
        self.client.state.note_busy(&busy.keys[self.provider], -1);
    }
}
