//! What a client holds for its calls, whatever face made it: its
//! providers, the secrets of its proxy, the state calls share, each pool's
//! turns, and the calls busy at each pool member (a pool's `least_busy`),
//! here and, with a fleet-wide state, in the other processes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::state_key::StateKey;
use crate::engine::{FleetLimits, FleetState, Health, Limit, Limiter, SharedState};
use crate::providers::{self, ProviderConfig};

/// What a client holds for its calls, whatever face made it.
pub struct Client {
    pub providers: Vec<ProviderConfig>,
    /// What its proxies' URLs and its providers' configurations hold of
    /// credentials: removed from every answer, whichever provider gave it
    /// (a request's own are its provider's alone).
    pub secrets: Vec<String>,
    /// What calls share: cooldowns, the retry budget, pools' busy counts.
    pub state: Arc<dyn SharedState>,
    /// The client's limits and which of them each provider draws on.
    pub limits: Limits,
    busy: Busy,
}

/// A client's limits: one bucket per limit given (a provider's, a pool's, a
/// quota's), and which buckets each provider draws on for each call kind.
#[derive(Default)]
pub struct Limits {
    /// `None`: no limit is set, and calls pass by it at no cost.
    pub limiter: Option<Arc<Limiter>>,
    /// By the client's provider index; a provider past its end has none.
    pub providers: Vec<ProviderLimits>,
}

/// What one provider draws on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProviderLimits {
    /// Buckets a chat call or a stream takes room from.
    pub chat: Vec<usize>,
    /// Buckets an embeddings call takes room from.
    pub embed: Vec<usize>,
    /// Its own bucket among `chat`, and among `embed` (not its pool's or its
    /// quota's).
    pub own_chat: Option<usize>,
    pub own_embed: Option<usize>,
    /// The quota it shares a rate-limit cooldown with, by name.
    pub quota: Option<String>,
}

impl ProviderLimits {
    /// Its quota's key in the shared state: no provider's key (those have
    /// a `|`), and the same in every process naming the quota alike.
    pub fn quota_key(&self) -> Option<String> {
        self.quota.as_ref().map(|quota| format!("quota {quota}"))
    }
}

impl Limits {
    /// `buckets` (name and limit, in the order `providers` index them),
    /// shared with the fleet's buckets of the same names when `fleet` is
    /// given (the client's state is fleet-wide).
    pub fn new(
        buckets: Vec<(String, Limit)>,
        providers: Vec<ProviderLimits>,
        fleet: Option<Arc<dyn FleetLimits>>,
    ) -> Self {
        let limiter = (!buckets.is_empty()).then(|| Limiter::shared(buckets, fleet));
        Self { limiter, providers }
    }

    /// What provider `index` draws on.
    pub fn of(&self, index: usize) -> Option<&ProviderLimits> {
        self.providers.get(index)
    }
}

impl Client {
    pub fn new(
        providers: Vec<ProviderConfig>,
        proxy_urls: &[String],
        state: Arc<dyn SharedState>,
        limits: Limits,
    ) -> Self {
        let busy = Busy::new(&providers);
        let mut secrets = Vec::new();
        for url in proxy_urls {
            providers::add_secrets(&mut secrets, &providers::url_secrets(url));
        }
        for provider in &providers {
            providers::merge_secrets(&mut secrets, &providers::config_secrets(provider));
        }
        Self {
            providers,
            secrets,
            state,
            limits,
            busy,
        }
    }

    /// The cooldowns of this client's providers running at `now`, by the
    /// part of their state key a caller is shown (a fleet's state holds
    /// every app's: these are its providers', for their models or a call's
    /// own `model=`).
    /// A provider whose quota cools is shown cooling as long as it does.
    pub fn cooldowns(&self, now: SystemTime) -> Vec<(String, Duration)> {
        let all = self.state.cooldowns(now);
        let mut shown: Vec<(String, Duration)> = all
            .iter()
            .filter_map(|(key, left)| {
                let key = StateKey::parse(key)?;
                let mine = self.providers.iter().any(|config| key.is_of(config));
                mine.then_some((key.shown, *left))
            })
            .collect();
        for (index, config) in self.providers.iter().enumerate() {
            let Some(quota) = self.limits.of(index).and_then(ProviderLimits::quota_key) else {
                continue;
            };
            let Some(&(_, left)) = all.iter().find(|(key, _)| *key == quota) else {
                continue;
            };
            match shown.iter_mut().find(|(name, _)| *name == config.name) {
                Some(entry) => entry.1 = entry.1.max(left),
                None => shown.push((config.name.clone(), left)),
            }
        }
        shown
    }

    /// What the state knows of this client's providers at `now`, by the
    /// part of their state key a caller is shown (as [`Client::cooldowns`]):
    /// every provider under its name, one never seen as healthy, and its
    /// other keys (embeddings, a call's own `model=`) once the state has
    /// seen them.
    pub fn health(&self, now: SystemTime) -> Vec<(String, Health)> {
        let all = self.state.health(now);
        // A provider whose quota cools shows the quota's cooldown (its
        // own, when that ends later).
        let quota_open = |index: usize| {
            let quota = self.limits.of(index)?.quota_key()?;
            let (_, health) = all.iter().find(|(key, _)| *key == quota)?;
            let open = health.open.clone()?;
            (open.until > now).then_some(open)
        };
        let mut seen: Vec<(String, Health)> = all
            .iter()
            .cloned()
            .filter_map(|(key, health)| {
                let key = StateKey::parse(&key)?;
                let mine = self.providers.iter().any(|config| key.is_of(config));
                mine.then_some((key.shown, health))
            })
            .collect();
        for config in &self.providers {
            if !seen.iter().any(|(shown, _)| *shown == config.name) {
                seen.push((config.name.clone(), Health::default()));
            }
        }
        for (index, config) in self.providers.iter().enumerate() {
            let Some(open) = quota_open(index) else {
                continue;
            };
            if let Some((_, health)) = seen.iter_mut().find(|(shown, _)| *shown == config.name) {
                if health
                    .open
                    .as_ref()
                    .is_none_or(|own| own.until < open.until)
                {
                    health.open = Some(open);
                }
            }
        }
        seen.sort_by(|a, b| a.0.cmp(&b.0));
        seen
    }

    /// The next turn of the pool whose first member is `first` (a client
    /// index): each call to a pool takes one.
    pub(super) fn next_turn(&self, first: usize) -> usize {
        self.busy.turns[first].fetch_add(1, Ordering::Relaxed)
    }

    /// Calls busy at `provider`, here and elsewhere in the fleet.
    pub(super) fn busy_at(&self, provider: usize) -> u64 {
        self.busy.load(&*self.state, provider)
    }
}

struct Busy {
    /// Calls of this process busy at each provider.
    counts: Vec<AtomicUsize>,
    /// Turns taken at each pool, by its first member: the rotation that
    /// spreads its calls.
    turns: Vec<AtomicUsize>,
    /// Each provider's key in the fleet's busy counts.
    keys: Vec<String>,
}

impl Busy {
    fn new(providers: &[ProviderConfig]) -> Self {
        Self {
            counts: providers.iter().map(|_| AtomicUsize::new(0)).collect(),
            turns: providers.iter().map(|_| AtomicUsize::new(0)).collect(),
            keys: providers
                .iter()
                .map(|c| StateKey::member(c).render())
                .collect(),
        }
    }

    /// Calls busy at `provider`, here and elsewhere in the fleet. Noting a
    /// zero says this process orders this pool, so the fleet's counts are
    /// read from now on.
    fn load(&self, state: &(impl FleetState + ?Sized), provider: usize) -> u64 {
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
