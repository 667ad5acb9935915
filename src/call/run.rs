//! One call ([`Call`]) and the one place the engine is run ([`Call::run`]):
//! the call's state settled first, each provider's request built once per
//! run, its key, idempotency and retry-count headers added per attempt, the
//! interrupt raced.

use std::sync::OnceLock;
use std::time::Duration;

use super::client::Reservation;
use super::interrupt::Interrupted;
use super::journal::Journal;
use super::keys::{KeyAsk, KeySource, NoKey};
use super::plan::Plan;
use crate::engine::{self, CallFailure, CallSpec, Clock, Event, Resume, RetryPolicy, Success};
use crate::http::{HttpRequest, ReqwestTransport};
use crate::providers::{self, Job, Reply};

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
    /// Hedged requests (its budget the client's); `None`: none.
    pub hedge: Option<std::sync::Arc<engine::Hedge>>,
    /// What its attempts did as they went, for a face to read when the
    /// call is cut short.
    pub journal: Journal,
}

/// A new call's id: 16 hex digits.
pub fn new_call_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// What one run of the engine ends in, when nothing ended the call first.
pub type Outcome = Result<Success<Reply>, CallFailure>;

/// Where a call's events go (a face's callbacks and log).
pub trait CallEvents: Sync {
    /// A retry, a failover or a skip, as the engine reports it (provider
    /// indexes are positions in `plan`).
    fn engine(&self, event: &Event, plan: &Plan);
    /// A note for the DEBUG log only (a hint a provider is not sent).
    fn debug(&self, call_id: &str, text: &str);
    /// A notice for the log only (a fleet-wide state lost or back).
    fn notice(&self, text: &str);
}

/// The headers every attempt carries unless the caller set them (on the
/// provider or the call): one idempotency key per call and provider, the
/// same on every retry to it, and the attempt's number among them.
const IDEMPOTENCY_KEY: &str = "idempotency-key";
const RETRY_COUNT: &str = "x-retry-count";

#[cfg(test)]
thread_local! {
    /// Requests built on this thread (a test's runtime is its own thread).
    pub(super) static BUILT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl<C: Clock, E> Call<C, E> {
    /// The call is over though it lives on (a stream read to its end,
    /// failed or closed, still referenced): it is busy at no pool member and
    /// holds no shared time any more. Whole calls end as they are dropped.
    pub fn end(&mut self) {
        self.reservations.clear();
        self.clock.end();
    }

    /// One run of the engine (picking up after `resume` when given). `Err`
    /// is the error the call was ended with through its interrupter: it wins
    /// even when the engine finished in the same poll.
    pub async fn run(
        &mut self,
        keys: &dyn KeySource,
        events: &dyn CallEvents,
        resume: Option<Resume>,
    ) -> Result<Outcome, E> {
        let Self {
            call_id,
            job,
            plan,
            policy,
            timeout,
            deadline,
            transport,
            clock,
            idempotency_key,
            interrupted,
            hedge,
            journal,
            ..
        } = self;
        journal.clear();
        let journal = &*journal;
        let client = plan.client();
        // A fleet-wide state's first read, bounded by its timeout and by what
        // the call can spare of its deadline, which counts it: the call began
        // before it.
        let began = clock.now();
        match engine::state::spare(*deadline) {
            Some(within) => drop(tokio::time::timeout(within, client.state.settle()).await),
            None => client.state.settle().await,
        }
        let spent = clock.now().saturating_sub(began);
        for position in (0..plan.len()).filter(|&i| plan.unable(i).is_none()) {
            if let Some(note) = providers::dropped_hints(plan.config(position), job) {
                events.debug(call_id, &note);
            }
        }
        let slots = plan.slots();
        let spec = CallSpec {
            call_id,
            providers: &slots,
            policy,
            attempt_timeout: *timeout,
            deadline: *deadline,
            spent,
            state: Some(client.state.engine()),
            limiter: client.limits.limiter.as_ref(),
            hedge: hedge.as_deref(),
        };
        let plan = &*plan;
        let job = &*job;
        let transport = &*transport;
        let mut on_event = |event: Event| events.engine(&event, plan);
        // Each provider's request is built once per run, on its first attempt;
        // a fixed key goes in then, a source's key on every attempt.
        let requests: Vec<OnceLock<HttpRequest>> =
            (0..plan.len()).map(|_| OnceLock::new()).collect();
        let mut unit = || rand::random::<f64>();
        let idempotency = |position: usize| match &idempotency_key {
            Some(key) => key.clone(),
            // Made at the attempt: providers never tried cost nothing.
            None => format!("failover-{call_id}-{position}"),
        };
        let mut tries = vec![0u32; plan.len()];
        if let Some(broken) = &resume {
            // A restart is a retry: the broken attempt and those before it count.
            tries[broken.provider] = broken.retries_done + 1;
        }
        let run = engine::run_from(
            &spec,
            resume,
            &*clock,
            &mut unit,
            &mut on_event,
            |position, bounds| {
                let asked = std::time::Instant::now();
                let provider = plan.config(position);
                let recent = keys.asked(plan.provider(position));
                let built = requests[position].get_or_init(|| {
                    #[cfg(test)]
                    BUILT.with(|built| built.set(built.get() + 1));
                    let mut base = providers::build(provider, job);
                    providers::merge_secrets(&mut base.secrets, &client.secrets);
                    match recent {
                        None => providers::authorize(provider, &base, provider.api_key.as_deref()),
                        Some(_) => base,
                    }
                });
                // The caller's own header under the key's name: the key is
                // not sent, so its source is not asked.
                let recent = recent.filter(|_| !providers::key_header_given(provider, built));
                let asks_key = recent.is_some();
                let sent = match recent {
                    None => Ok(built.clone()),
                    Some(recent) => keys
                        .key(KeyAsk {
                            position,
                            provider: plan.provider(position),
                            config: provider,
                            secrets: &built.secrets,
                        })
                        .map(|key| {
                            let mut sent = providers::authorize(provider, built, Some(&key));
                            providers::add_secrets(&mut sent.secrets, &recent.remember(&key));
                            sent
                        }),
                };
                let retry_count = tries[position];
                tries[position] += 1;
                let sent = sent.map(|mut sent| {
                    let given = |headers: &[(String, String)], name: &str| {
                        headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name))
                    };
                    if !given(&sent.headers, IDEMPOTENCY_KEY) {
                        sent.headers
                            .push((IDEMPOTENCY_KEY.into(), idempotency(position)));
                    }
                    if !given(&sent.headers, RETRY_COUNT) {
                        sent.headers
                            .push((RETRY_COUNT.into(), retry_count.to_string()));
                    }
                    sent
                });
                // A key source runs before the attempt and cannot be cut
                // short: the time it took is the attempt's.
                let had = bounds.left;
                let bounds = bounds.after(asked.elapsed());
                // When it took all that was left, nothing is sent, and the
                // error says what used the time (not the provider's silence).
                let key_took_the_time = match (had, bounds.left) {
                    (Some(had), Some(left)) if asks_key && left.is_zero() && !had.is_zero() => {
                        Some(had)
                    }
                    _ => None,
                };
                async move {
                    let sent = match sent {
                        Ok(sent) => sent,
                        // No key, nothing sent: nothing billed.
                        Err(NoKey::Failed(failure)) => {
                            return Err(engine::Failure {
                                billed: Some(false),
                                ..failure
                            })
                        }
                        // The call is being ended by its interrupt: never report
                        // an outcome the engine could act on (fail over, call the
                        // next).
                        Err(NoKey::Ended) => std::future::pending().await,
                    };
                    if let Some(had) = key_took_the_time {
                        return Err(engine::Failure {
                            billed: Some(false),
                            ..engine::Failure::out_of_time(format!(
                                "{}: its api_key callable took the {:.3}s left before the \
                                 deadline; nothing was sent",
                                provider.name,
                                had.as_secs_f64()
                            ))
                        });
                    }
                    let entry = journal.sent(position, &provider.name, &provider.model);
                    let outcome =
                        providers::exchange(provider, job, transport, &sent, bounds).await;
                    journal.ended(entry, &outcome);
                    outcome
                }
            },
        );
        let mut result = tokio::select! {
            biased;
            error = interrupted.ended() => return Err(error),
            result = run => result,
        };
        // A whole answer is in: its slot is free now, while the call's clock
        // still counts it (under a FakeSleeper, a call waiting for the slot
        // must see it freed before time moves on for want of this call).
        // A stream keeps its slot until it ends.
        if let (Ok(success), false) = (
            &mut result,
            matches!(job, Job::Stream(_) | Job::MediaStream(_)),
        ) {
            drop(success.permit.take());
        }
        // The engine may finish in the same poll in which a hook or a sleeper
        // asked to end the call (a sleep that returns at once does not yield):
        // the interrupt wins.
        if let Some(error) = interrupted.take() {
            return Err(error);
        }
        // Its records are the engine's: the journal is for runs cut short.
        journal.discard();
        if let Some(notice) = client.state.take_notice() {
            events.notice(&notice);
        }
        Ok(result)
    }
}
