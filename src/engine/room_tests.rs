//! A call under the client's limits, through `run_from` on a manual clock:
//! a provider without room passed over, a wait for the first to have it,
//! the deadline and the policy's cap on that wait, a retry's room, a
//! hinted 429 closing the limits and cooling the quota, a slot held in
//! another process asked for again after pauses of real time, a hedge's
//! race settling each request's tokens.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use super::classify::{ErrorKind, Failure};
use super::clock::{Clock, ManualClock};
use super::failover::*;
use super::limit::{Blocked, FleetAnswer, FleetLimits, Limit, Limiter, Permit, FLEET_RECHECK};
use super::policy::RetryPolicy;
use super::state::{FleetState, LocalState};

const OVERLOADED: &[u16] = &[502, 503, 529];

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn rate_limited(retry_after: &str) -> Result<&'static str, Failure> {
    Err(Failure {
        status: Some(429),
        headers: [("retry-after", retry_after)].into_iter().collect(),
        billed: Some(false),
        ..Failure::without_response(ErrorKind::RateLimited, "429")
    })
}

/// Providers `p0..pN`, each drawing on the buckets given for it (indexes
/// into `limits`), and on a quota when named.
struct Setup {
    clock: ManualClock,
    state: LocalState,
    limiter: Arc<Limiter>,
    keys: Vec<String>,
    draws: Vec<Vec<usize>>,
    /// Each provider's own bucket (default: the first it draws on).
    own: Vec<Option<usize>>,
    quotas: Vec<Option<String>>,
    deadline: Option<Duration>,
}

struct Run {
    called: Vec<usize>,
    result: Result<Success<&'static str>, CallFailure>,
}

impl Run {
    fn skipped(&self) -> Vec<(usize, String)> {
        let attempts = match &self.result {
            Ok(success) => &success.attempts,
            Err(failure) => &failure.attempts,
        };
        attempts
            .iter()
            .filter_map(|a| Some((a.provider, a.skipped.clone()?)))
            .collect()
    }
}

impl Setup {
    fn new(limits: Vec<Limit>, draws: Vec<Vec<usize>>) -> Self {
        let named = limits
            .into_iter()
            .enumerate()
            .map(|(i, l)| (format!("b{i}"), l))
            .collect();
        Self {
            clock: ManualClock::new(),
            state: LocalState::new(),
            limiter: Limiter::new(named),
            keys: (0..draws.len()).map(|i| format!("p{i}")).collect(),
            quotas: vec![None; draws.len()],
            own: draws.iter().map(|d| d.first().copied()).collect(),
            draws,
            deadline: None,
        }
    }

    fn call(&self, script: Vec<Result<&'static str, Failure>>) -> Run {
        futures_util::FutureExt::now_or_never(self.run(script))
            .expect("only the manual clock is waited on")
    }

    /// Each provider's slot: an estimate of 10 tokens a request.
    fn slots(&self) -> Vec<ProviderSlot<'_>> {
        (0..self.keys.len())
            .map(|i| ProviderSlot {
                overloaded_statuses: OVERLOADED,
                state_key: &self.keys[i],
                name: &self.keys[i],
                unable: None,
                limits: &self.draws[i],
                own_limit: self.own[i],
                tokens: 10,
                quota_key: self.quotas[i].as_deref(),
            })
            .collect()
    }

    async fn run(&self, script: Vec<Result<&'static str, Failure>>) -> Run {
        let slots = self.slots();
        let policy = RetryPolicy::default();
        let spec = CallSpec {
            call_id: "c",
            providers: &slots,
            policy: &policy,
            attempt_timeout: secs(60.0),
            deadline: self.deadline,
            spent: Duration::ZERO,
            state: Some(&self.state),
            limiter: Some(&self.limiter),
            hedge: None,
        };
        let script = Mutex::new(VecDeque::from(script));
        let called = Mutex::new(Vec::new());
        let result = run_from(
            &spec,
            None,
            &self.clock,
            &mut || 0.0,
            &mut |_| {},
            |provider, _| {
                called.lock().unwrap().push(provider);
                let next = script.lock().unwrap().pop_front().expect("script ran out");
                async move { next }
            },
        )
        .await;
        Run {
            called: called.into_inner().unwrap(),
            result,
        }
    }

    fn now(&self) -> SystemTime {
        self.clock.wall()
    }

    /// Fills bucket `index`'s rpm window now.
    fn spend_rpm(&self, index: usize, requests: u32) {
        for _ in 0..requests {
            drop(
                self.limiter
                    .take_here(&[index], self.now(), 0, None)
                    .unwrap(),
            );
        }
    }
}

fn rpm(n: u32) -> Limit {
    Limit {
        rpm: Some(n),
        ..Limit::default()
    }
}

fn concurrency(n: u32) -> Limit {
    Limit {
        concurrency: Some(n),
        ..Limit::default()
    }
}

#[test]
fn a_provider_without_room_is_passed_over_for_the_next_with_it() {
    let setup = Setup::new(vec![concurrency(1)], vec![vec![0], vec![]]);
    let held = setup.limiter.take_here(&[0], setup.now(), 0, None).unwrap();
    let run = setup.call(vec![Ok("b")]);
    assert_eq!(run.called, [1]);
    assert_eq!(
        run.skipped(),
        [(0, "at its concurrency limit (1 in flight)".to_string())]
    );
    assert!(setup.clock.sleeps().is_empty());
    drop(held);
    // With room again, the first provider takes the call.
    assert_eq!(setup.call(vec![Ok("a")]).called, [0]);
}

#[test]
fn with_no_room_anywhere_the_call_waits_for_the_first_to_have_it() {
    let setup = Setup::new(vec![rpm(1), rpm(1)], vec![vec![0], vec![1]]);
    setup.spend_rpm(0, 1);
    setup.clock.advance(secs(5.0));
    setup.spend_rpm(1, 1);
    setup.clock.advance(secs(52.0));
    // p0 has room in 3 s, p1 in 8 s: the call waits 3 s and goes to p0.
    let run = setup.call(vec![Ok("a")]);
    assert_eq!(run.called, [0]);
    assert!(run.skipped().is_empty());
    assert_eq!(run.result.unwrap().attempts[0].waited, secs(3.0));
    // Next, p0's window is full again (for 60 s) and p1 has room in 5 s:
    // the call passes p0 over and waits for p1.
    let run = setup.call(vec![Ok("b")]);
    assert_eq!(run.called, [1]);
    let attempts = &run.result.as_ref().unwrap().attempts;
    assert_eq!(attempts.last().unwrap().waited, secs(5.0));
    assert_eq!(run.skipped().len(), 1);
    // (What was left of p0's wait when p1 had room.)
    assert_eq!(run.skipped()[0], (0, "rpm limit: capacity in 55.0s".into()));
}

#[test]
fn a_wait_for_room_past_the_deadline_is_not_slept() {
    let mut setup = Setup::new(vec![rpm(1)], vec![vec![0]]);
    setup.spend_rpm(0, 1);
    setup.deadline = Some(secs(10.0));
    let run = setup.call(vec![]);
    assert!(run.called.is_empty());
    assert!(setup.clock.sleeps().is_empty());
    let failure = run.result.unwrap_err();
    match failure.error {
        CallError::Deadline {
            waiting: Some((0, why)),
            ..
        } => assert_eq!(why, "rpm limit: capacity in 60.0s"),
        other => panic!("{other:?}"),
    }
    assert_eq!(failure.attempts.len(), 1);
    assert!(failure.attempts[0].skipped.is_some());
}

#[test]
fn room_later_than_the_policy_waits_on_the_last_provider_ends_the_call() {
    let setup = Setup::new(
        vec![Limit {
            tpm: Some(10),
            ..Limit::default()
        }],
        vec![vec![0]],
    );
    // 10 tokens charged now; the window frees in 60 s; the last provider's
    // cap is 60 s: waited. At 61 s it would not be.
    drop(
        setup
            .limiter
            .take_here(&[0], setup.now(), 10, None)
            .unwrap(),
    );
    let run = setup.call(vec![Ok("a")]);
    assert_eq!(run.called, [0]);
    assert_eq!(run.result.unwrap().attempts[0].waited, secs(60.0));
    setup
        .limiter
        .close(&[0], setup.now() + secs(61.0), "rate limited");
    let run = setup.call(vec![]);
    assert!(run.called.is_empty());
    match run.result.unwrap_err().error {
        CallError::Provider(failed) => {
            assert_eq!(failed.failure.kind, ErrorKind::RateLimited);
            assert_eq!(failed.failure.billed, Some(false));
            assert_eq!(failed.retry_after, Some(secs(61.0)));
            assert!(failed.failure.message.contains("longer than the 60s"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_hinted_429_closes_the_providers_limits_until_the_hint_runs_out() {
    let setup = Setup::new(vec![rpm(100)], vec![vec![0], vec![]]);
    // p0 says 429 with 30 s: the call fails over to p1 (30 s is longer than
    // the policy waits with another provider left).
    let run = setup.call(vec![rate_limited("30"), Ok("b")]);
    assert_eq!(run.called, [0, 1]);
    // p0 cools; and its limits let nothing through for those 30 s either.
    let blocked = setup
        .limiter
        .take_here(&[0], setup.now(), 0, None)
        .unwrap_err();
    assert_eq!(blocked.why, "rate limited: capacity in 30.0s");
}

#[test]
fn a_retry_on_the_last_provider_waits_for_room_as_for_a_retry_after() {
    let setup = Setup::new(vec![rpm(1)], vec![vec![0]]);
    // The first attempt takes the only request of the minute; its 429 asks
    // for 2 s; the retry then waits for the window, 58 s more (within the
    // 60 s the policy waits on the last provider), in the attempt's wait.
    let run = setup.call(vec![rate_limited("2"), Ok("a")]);
    assert_eq!(run.called, [0, 0]);
    // (A `ManualClock` lists its waits among its sleeps.)
    assert_eq!(setup.clock.sleeps(), [secs(2.0), secs(58.0)]);
    let attempts = run.result.unwrap().attempts;
    assert_eq!(attempts[1].waited, secs(60.0));
}

#[test]
fn a_retry_without_room_soon_enough_fails_over_when_it_can() {
    // p0's window has room in 58 s after its 429's 2 s: longer than the
    // 10 s the policy waits with another provider left.
    let setup = Setup::new(vec![rpm(1)], vec![vec![0], vec![]]);
    let run = setup.call(vec![rate_limited("2"), Ok("p1")]);
    assert_eq!(
        (run.called.clone(), setup.clock.sleeps()),
        (vec![0, 1], vec![secs(2.0)])
    );
    assert!(run.skipped()[0].1.starts_with("retry skipped: rpm limit"));
}

#[test]
fn a_429_at_one_pool_member_does_not_close_the_other_members() {
    // b0: the pool's limit, drawn on by p0 and p1; neither has its own.
    let mut setup = Setup::new(vec![rpm(100)], vec![vec![0], vec![0], vec![]]);
    setup.own = vec![None, None, None];
    let run = setup.call(vec![rate_limited("30"), Ok("p1")]);
    assert_eq!(run.called, [0, 1], "skipped: {:?}", run.skipped());
}

#[test]
fn a_provider_whose_quota_cooled_during_the_call_is_no_candidate_for_room() {
    // p0 and p2 share quota q; p1 is at its concurrency limit; p3 has none.
    let mut setup = Setup::new(
        vec![concurrency(1), rpm(100)],
        vec![vec![], vec![0], vec![1], vec![]],
    );
    setup.quotas = vec![Some("quota q".into()), None, Some("quota q".into()), None];
    let _held = setup.limiter.take_here(&[0], setup.now(), 0, None).unwrap();
    let run = setup.call(vec![rate_limited("30"), Ok("p3")]);
    assert_eq!(run.called, [0, 3], "{:?}", run.skipped());
    // p2 was never charged: its window is empty.
    for _ in 0..100 {
        drop(setup.limiter.take_here(&[1], setup.now(), 0, None).unwrap());
    }
}

#[test]
fn with_every_provider_far_off_the_call_waits_for_the_soonest_within_the_last_cap() {
    let setup = Setup::new(vec![rpm(1), rpm(100)], vec![vec![0], vec![1]]);
    setup.spend_rpm(0, 1);
    setup.clock.advance(secs(20.0));
    // p0 has room in 40 s, p1 is closed for 70 s: 40 s is within the 60 s
    // the policy waits on the last provider, so the call waits for p0.
    setup
        .limiter
        .close(&[1], setup.now() + secs(70.0), "rate limited");
    let run = setup.call(vec![Ok("p0")]);
    assert_eq!(run.called, [0]);
    assert_eq!(run.result.unwrap().attempts[0].waited, secs(40.0));
}

#[test]
fn a_charge_taken_for_a_call_out_of_time_is_given_back() {
    let mut setup = Setup::new(vec![rpm(1)], vec![vec![0]]);
    setup.deadline = Some(Duration::ZERO);
    let run = setup.call(vec![]);
    assert!(run.called.is_empty());
    assert!(setup.limiter.take_here(&[0], setup.now(), 0, None).is_ok());
}

#[test]
fn a_rate_limit_cools_every_provider_of_its_quota_and_an_overload_does_not() {
    let mut setup = Setup::new(vec![], vec![vec![], vec![], vec![]]);
    setup.quotas = vec![Some("quota org".into()), Some("quota org".into()), None];
    let run = setup.call(vec![rate_limited("30"), Ok("c")]);
    // p1 shares p0's quota: passed over, cooling with it.
    assert_eq!(run.called, [0, 2]);
    assert_eq!(run.skipped().len(), 1);
    assert_eq!(run.skipped()[0].0, 1);
    assert!(run.skipped()[0]
        .1
        .contains("its quota org was rate limited"));
    let cooling: Vec<String> = setup
        .state
        .cooldowns(setup.now())
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert!(cooling.contains(&"quota org".to_string()), "{cooling:?}");

    let mut setup = Setup::new(vec![], vec![vec![], vec![], vec![]]);
    setup.quotas = vec![Some("quota org".into()), Some("quota org".into()), None];
    let overloaded = Err(Failure {
        status: Some(529),
        headers: [("retry-after", "30")].into_iter().collect(),
        ..Failure::without_response(ErrorKind::Overloaded, "529")
    });
    let run = setup.call(vec![overloaded, Ok("b")]);
    assert_eq!(run.called, [0, 1]);
}

#[test]
fn a_success_gives_its_permit_to_the_caller_who_holds_the_slot() {
    let setup = Setup::new(vec![concurrency(1)], vec![vec![0]]);
    let run = setup.call(vec![Ok("a")]);
    let success = run.result.unwrap();
    assert!(success.permit.is_some());
    assert_eq!(setup.limiter.in_flight(0), 1);
    drop(success);
    assert_eq!(setup.limiter.in_flight(0), 0);
}

/// A fleet where another process holds the only slot for `held` asks.
#[derive(Debug)]
struct HeldElsewhere {
    held: Mutex<u32>,
    asked: Mutex<u32>,
}

impl FleetLimits for HeldElsewhere {
    fn take(
        &self,
        _buckets: Vec<(String, Limit)>,
        _now: SystemTime,
        _tokens: u64,
        _within: Option<Duration>,
    ) -> FleetAnswer<'_> {
        *self.asked.lock().unwrap() += 1;
        let mut held = self.held.lock().unwrap();
        let answer = if *held > 0 {
            *held -= 1;
            Err(Blocked {
                why: "at its concurrency limit in the fleet (1 in flight)".into(),
                at: None,
                recheck: Some(FLEET_RECHECK),
            })
        } else {
            Ok(1)
        };
        Box::pin(std::future::ready(Some(answer)))
    }
    fn correct(&self, _: u64, _: u64) {}
    fn unused(&self, _: u64) {}
    fn release(&self, _: u64) {}
}

// Tokio's paused clock: the real-time pauses pass at once, exactly.
#[tokio::test(start_paused = true)]
async fn a_slot_held_in_another_process_is_asked_for_again_in_real_time() {
    let fleet = Arc::new(HeldElsewhere {
        held: Mutex::new(3),
        asked: Mutex::new(0),
    });
    let mut setup = Setup::new(vec![], vec![vec![0]]);
    let shared = Arc::clone(&fleet) as Arc<dyn FleetLimits>;
    setup.limiter = Limiter::shared(vec![("b0".into(), concurrency(1))], Some(shared));
    setup.deadline = Some(secs(1.0));
    let virtual_start = setup.clock.now();
    let real_start = tokio::time::Instant::now();
    let run = setup.run(vec![Ok("a")]).await;
    assert_eq!(run.called, [0]);
    assert_eq!(*fleet.asked.lock().unwrap(), 4);
    assert_eq!(real_start.elapsed(), FLEET_RECHECK * 3);
    // The manual clock neither recorded the pauses nor moved for them: the
    // deadline (1 s, of the manual clock) is not what they spend.
    assert!(setup.clock.sleeps().is_empty());
    assert_eq!(setup.clock.now(), virtual_start);
    // On a clock that does move (real time), the deadline ends the wait.
    drop(run);
    *fleet.held.lock().unwrap() = u32::MAX;
    setup.deadline = Some(secs(0.25));
    let clock = super::clock::TokioClock::new();
    let slots = [ProviderSlot {
        overloaded_statuses: OVERLOADED,
        state_key: "p0",
        name: "p0",
        unable: None,
        limits: &[0],
        own_limit: Some(0),
        tokens: 10,
        quota_key: None,
    }];
    let policy = RetryPolicy::default();
    let spec = CallSpec {
        call_id: "c",
        providers: &slots,
        policy: &policy,
        attempt_timeout: secs(60.0),
        deadline: setup.deadline,
        spent: Duration::ZERO,
        state: None,
        limiter: Some(&setup.limiter),
        hedge: None,
    };
    let result = run_from(
        &spec,
        None,
        &clock,
        &mut || 0.0,
        &mut |_| {},
        |_, _| async { Ok::<_, Failure>("never") },
    )
    .await;
    let Err(failure) = result else {
        panic!("the deadline came first");
    };
    assert!(
        failure
            .reason
            .contains("at its concurrency limit in the fleet"),
        "{}",
        failure.reason
    );
}

fn tpm(n: u64) -> Limit {
    Limit {
        tpm: Some(n),
        ..Limit::default()
    }
}

/// A hedged call under limits: provider 0 answers `first` after its delay,
/// provider 1 `second` after its own; the hedge goes after 20 ms.
async fn hedged(
    setup: &Setup,
    first: (u64, Result<&'static str, Failure>),
    second: (u64, Result<&'static str, Failure>),
) -> Result<Success<&'static str>, CallFailure> {
    let slots = setup.slots();
    let policy = RetryPolicy::default();
    let hedge = super::hedge::Hedge::new(secs(0.02), 1.0);
    let spec = CallSpec {
        call_id: "c",
        providers: &slots,
        policy: &policy,
        attempt_timeout: secs(60.0),
        deadline: None,
        spent: Duration::ZERO,
        state: Some(&setup.state),
        limiter: Some(&setup.limiter),
        hedge: Some(&hedge),
    };
    let script = Mutex::new(vec![Some(first), Some(second)]);
    run_from(
        &spec,
        None,
        &setup.clock,
        &mut || 0.0,
        &mut |_| {},
        |provider, _| {
            let (delay, outcome) = script.lock().unwrap()[provider].take().unwrap();
            async move {
                tokio::time::sleep(Duration::from_millis(delay)).await;
                outcome
            }
        },
    )
    .await
}

/// Whether `bucket` has room for one more request's estimate now.
fn has_room(setup: &Setup, bucket: usize) -> bool {
    setup
        .limiter
        .take_here(&[bucket], setup.now(), 10, None)
        .map(Permit::unused)
        .is_ok()
}

fn refused_unbilled() -> Result<&'static str, Failure> {
    Err(Failure {
        status: Some(503),
        billed: Some(false),
        ..Failure::without_response(ErrorKind::ServerError, "503")
    })
}

// Tokio's paused clock: the hedge's real-time `after` and the answers'
// delays pass at once, exactly.
#[tokio::test(start_paused = true)]
async fn a_failed_request_in_a_hedges_race_gives_back_its_estimated_tokens() {
    // Room for one request's estimate (10) in each provider's minute, not two.
    let setup = Setup::new(vec![tpm(15), tpm(15)], vec![vec![0], vec![1]]);
    // The hedge is refused unbilled; the first attempt then answers.
    let ok = hedged(&setup, (80, Ok("first")), (0, refused_unbilled()))
        .await
        .unwrap();
    assert_eq!(ok.provider, 0);
    drop(ok);
    assert!(has_room(&setup, 1), "the failed hedge's estimate was kept");
    assert!(
        !has_room(&setup, 0),
        "the answer's estimate stands (no usage reported)"
    );

    // The first attempt is refused unbilled after the hedge went; the hedge answers.
    let setup = Setup::new(vec![tpm(15), tpm(15)], vec![vec![0], vec![1]]);
    let ok = hedged(&setup, (40, refused_unbilled()), (60, Ok("backup")))
        .await
        .unwrap();
    assert_eq!(ok.provider, 1);
    drop(ok);
    assert!(
        has_room(&setup, 0),
        "the failed first attempt's estimate was kept"
    );
    assert!(!has_room(&setup, 1));
}
