//! A call's chain as the call uses it, made once per call: each provider
//! with the model the job asks for, its state key, and why it cannot serve
//! the job, if it cannot.

use std::sync::Arc;
use std::time::SystemTime;

use super::client::{Client, Reservation};
use super::state_key::StateKey;
use crate::engine::{self, CallFailure, ProviderSlot};
use crate::providers::{self, Job, ProviderConfig};

/// One call's providers, in the order it tries them.
pub struct Plan {
    client: Arc<Client>,
    members: Vec<Member>,
}

struct Member {
    /// Index into the client's providers.
    provider: usize,
    /// The provider with the model the job asks for (a per-call `model=`,
    /// an embedding model), which errors and events name; `None`: as
    /// configured.
    own_model: Option<ProviderConfig>,
    /// Its [`StateKey`], rendered.
    state_key: String,
    /// Why it cannot serve the job.
    unable: Option<String>,
    /// The client's limits it draws on for this job, and its own among them.
    limits: Vec<usize>,
    own_limit: Option<usize>,
    /// About how many tokens one request of the job to it uses, for `tpm`
    /// (made only when the client has limits).
    tokens: u64,
    /// Its quota's state key.
    quota_key: Option<String>,
}

impl Plan {
    /// `chain` (indexes into `client`'s providers) for `job`.
    pub fn new(client: Arc<Client>, chain: &[usize], job: &Job) -> Self {
        let members = chain
            .iter()
            .map(|&provider| {
                let config = &client.providers[provider];
                let model = providers::job_model(config, job);
                let own_model = (model != config.model).then(|| ProviderConfig {
                    model: model.to_string(),
                    ..config.clone()
                });
                let unable = providers::unable_for(own_model.as_ref().unwrap_or(config), job);
                let drawn = client.limits.of(provider);
                let (limits, own_limit) = match (drawn, job) {
                    (None, _) => (Vec::new(), None),
                    (Some(drawn), Job::Embed(_)) => (drawn.embed.clone(), drawn.own_embed),
                    (Some(drawn), Job::Chat(_) | Job::Stream(_)) => {
                        (drawn.chat.clone(), drawn.own_chat)
                    }
                    // Bounded by its pool's and quota's limits only: a
                    // provider's own limit= is its chat's.
                    (Some(drawn), Job::Media(_) | Job::MediaStream(_)) => {
                        let shared = drawn.chat.iter().copied();
                        let shared = shared.filter(|&b| Some(b) != drawn.own_chat).collect();
                        (shared, None)
                    }
                };
                let tokens = match client.limits.limiter {
                    Some(_) => {
                        providers::estimated_tokens(own_model.as_ref().unwrap_or(config), job)
                    }
                    None => 0,
                };
                Member {
                    provider,
                    tokens,
                    own_model,
                    state_key: StateKey::of(config, job).render(),
                    unable,
                    limits,
                    own_limit,
                    quota_key: drawn.and_then(|drawn| drawn.quota_key()),
                }
            })
            .collect();
        Self { client, members }
    }

    pub fn client(&self) -> &Arc<Client> {
        &self.client
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The client's index of chain member `position`.
    pub fn provider(&self, position: usize) -> usize {
        self.members[position].provider
    }

    /// Chain member `position` as the job uses it.
    pub fn config(&self, position: usize) -> &ProviderConfig {
        let member = &self.members[position];
        member
            .own_model
            .as_ref()
            .unwrap_or(&self.client.providers[member.provider])
    }

    /// Every member as the job uses it, in order.
    pub fn configs(&self) -> Vec<&ProviderConfig> {
        (0..self.len()).map(|i| self.config(i)).collect()
    }

    /// Why chain member `position` cannot serve the job, if it cannot.
    pub fn unable(&self, position: usize) -> Option<&str> {
        self.members[position].unable.as_deref()
    }

    /// Chain member `position`'s rendered state key.
    pub fn state_key(&self, position: usize) -> &str {
        &self.members[position].state_key
    }

    /// What the engine needs of each member.
    pub fn slots(&self) -> Vec<ProviderSlot<'_>> {
        (0..self.len())
            .map(|i| ProviderSlot {
                overloaded_statuses: &self.config(i).overloaded_statuses,
                state_key: self.state_key(i),
                name: &self.config(i).name,
                unable: self.unable(i),
                limits: &self.members[i].limits,
                own_limit: self.members[i].own_limit,
                tokens: self.members[i].tokens,
                quota_key: self.members[i].quota_key.as_deref(),
            })
            .collect()
    }

    /// The failure of a call no member can serve, known before anything is
    /// sent (a stream says it when it is made, as a whole call does).
    pub fn unserved(&self) -> Option<CallFailure> {
        let unable: Vec<Option<&str>> = (0..self.len()).map(|i| self.unable(i)).collect();
        engine::unserved(&unable)
    }

    /// For an embeddings or media call that no member can make, why each cannot: it
    /// would fail after no request at all, so it is the caller's
    /// configuration, said at once.
    pub fn none_can_serve(&self, job: &Job) -> Option<String> {
        let verb = match job {
            Job::Embed(_) => "embed",
            Job::Media(request) | Job::MediaStream(request) => request.kind().verb(),
            Job::Chat(_) | Job::Stream(_) => return None,
        };
        if self.members.iter().any(|m| m.unable.is_none()) {
            return None;
        }
        let reasons: Vec<&str> = self
            .members
            .iter()
            .filter_map(|m| m.unable.as_deref())
            .collect();
        Some(format!(
            "no provider in the chain can {verb}: {}",
            reasons.join("; ")
        ))
    }

    /// Puts each pool's members in the order this call tries them, and
    /// reserves the first of each `least_busy` pool. Members this call would
    /// pass over at `now` (cooling, being probed, unable to serve the job) go
    /// after the others; a `least_busy` pool's members with the fewest calls
    /// under way go first; and members alike on that take turns, each call
    /// starting at the next of them. So a member out of the running (or
    /// busy) hands its turns to all the others evenly, not all to the one
    /// after it.
    pub fn order_pools(&mut self, pools: &[Pool], now: SystemTime) -> Vec<Reservation> {
        let mut reservations = Vec::new();
        for pool in pools {
            let (Some(&first_member), Some(start)) = (
                pool.members.first(),
                self.members
                    .iter()
                    .position(|m| pool.members.contains(&m.provider)),
            ) else {
                continue;
            };
            let end = (start + pool.members.len()).min(self.members.len());
            let state = self.client.state.engine();
            let ranks: Vec<(bool, u64)> = self.members[start..end]
                .iter()
                .map(|m| {
                    let out = m.unable.is_some()
                        || engine::passed_over(state, &m.state_key, m.quota_key.as_deref(), now);
                    let busy = match pool.strategy {
                        Strategy::LeastBusy => self.client.busy_at(m.provider),
                        Strategy::RoundRobin => 0,
                    };
                    (out, busy)
                })
                .collect();
            let order = in_turn(&ranks, self.client.next_turn(first_member));
            let mut members: Vec<Option<Member>> =
                self.members.drain(start..end).map(Some).collect();
            let ordered: Vec<Member> = order.iter().filter_map(|&i| members[i].take()).collect();
            self.members.splice(start..start, ordered);
            if pool.strategy == Strategy::LeastBusy {
                let first = self.members[start].provider;
                reservations.push(Reservation::take(&self.client, first));
            }
        }
        reservations
    }
}

/// How a pool spreads its calls over its members.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Each call starts at the next member.
    RoundRobin,
    /// Each call starts at the member with the fewest calls under way (an
    /// open stream included), ties taken in turn.
    LeastBusy,
}

impl Strategy {
    /// The strategy named `name` as `failover.Pool` takes it.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "round_robin" => Some(Self::RoundRobin),
            "least_busy" => Some(Self::LeastBusy),
            _ => None,
        }
    }
}

/// A pool in a call's chain: its members (client indexes, contiguous in the
/// chain, in the pool's order) and how it spreads calls over them.
#[derive(Clone, Debug)]
pub struct Pool {
    pub strategy: Strategy,
    pub members: Vec<usize>,
}

/// Positions `0..ranks.len()` ordered by rank, lowest first; those of one
/// rank in their own order, rotated by `turn` among themselves (not among
/// all), so that consecutive turns spread evenly over the members that
/// share the best rank, however many others are ranked below them.
fn in_turn<R: Ord>(ranks: &[R], turn: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..ranks.len()).collect();
    order.sort_by(|&a, &b| ranks[a].cmp(&ranks[b]));
    for alike in order.chunk_by_mut(|&a, &b| ranks[a] == ranks[b]) {
        let len = alike.len();
        alike.rotate_left(turn % len);
    }
    order
}
