//! The call layer driven over the real HTTP path: a `ReqwestTransport`
//! against the scripted `testing::MockServer`, under a `ManualClock` (every
//! sleep moves it at once, and is recorded).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::engine::RetryPolicy;
use crate::engine::{Event, LocalState, ManualClock};
use crate::http::{ReqwestTransport, TransportOptions};
use crate::providers::{ChatRequest, EmbedRequest, Wire};
use crate::providers::{Job, ProviderConfig};
use crate::stream::Chunk;
use crate::testing::{Fault, MockServer, ScriptedResponse};

fn provider(name: &str, base_url: &str) -> ProviderConfig {
    ProviderConfig {
        name: name.into(),
        wire: Wire::OpenAI,
        model: "m-1".into(),
        base_url: base_url.into(),
        api_key: Some("sk-fixed".into()),
        headers: Vec::new(),
        overloaded_statuses: vec![503],
        max_tokens_field: "max_tokens".into(),
        params: None,
        embedding_model: Some("e-1".into()),
        embeds: true,
        dimensions_field: "dimensions".into(),
        embed_base64: false,
        stream_usage: false,
        entra_token: false,
        seed_field: "seed".into(),
        mistral_rules: false,
        image_model: None,
        speech_model: None,
        transcription_model: None,
        media: Vec::new(),
    }
}

fn client(providers: Vec<ProviderConfig>) -> Arc<Client> {
    Arc::new(Client::new(
        providers,
        &[],
        Arc::new(LocalState::new()),
        Limits::default(),
    ))
}

fn chat(model: Option<&str>) -> ChatRequest {
    ChatRequest {
        messages: crate::conversation::parse_messages(&[serde_json::json!({
            "role": "user", "content": "hi"
        })])
        .unwrap(),
        model: model.map(String::from),
        ..Default::default()
    }
}

fn call(client: &Arc<Client>, job: Job, chain: &[usize]) -> Call<ManualClock, String> {
    let (_, interrupted) = interrupt();
    call_with(client, job, chain, interrupted)
}

fn call_with(
    client: &Arc<Client>,
    job: Job,
    chain: &[usize],
    interrupted: Interrupted<String>,
) -> Call<ManualClock, String> {
    Call {
        call_id: "c0ffee".into(),
        plan: Plan::new(Arc::clone(client), chain, &job),
        job,
        policy: RetryPolicy::default(),
        timeout: Duration::from_secs(10),
        deadline: None,
        transport: ReqwestTransport::new(&TransportOptions::default()).unwrap(),
        clock: ManualClock::new(),
        idempotency_key: None,
        interrupted,
        reservations: Vec::new(),
        hedge: None,
        journal: Journal::default(),
    }
}

/// The events a call sent, as words.
#[derive(Default)]
struct Recorded(Mutex<Vec<String>>);

impl CallEvents for Recorded {
    fn engine(&self, event: &Event, plan: &Plan) {
        let what = match event {
            Event::RetryScheduled { provider, .. } => {
                format!("retry {}", plan.config(*provider).name)
            }
            Event::FailedOver { to_provider, .. } => {
                format!("failover to {}", plan.config(*to_provider).name)
            }
            Event::Skipped { provider, .. } => format!("skipped {}", plan.config(*provider).name),
            Event::HedgeStarted { to_provider, .. } => {
                format!("hedge to {}", plan.config(*to_provider).name)
            }
            Event::HedgeWon { winner, .. } => format!("hedge won by {}", plan.config(*winner).name),
            Event::HedgeFailed { left, .. } => {
                format!("hedge leg failed at {}", plan.config(left.provider).name)
            }
        };
        self.0.lock().unwrap().push(what);
    }

    fn debug(&self, _call_id: &str, text: &str) {
        self.0.lock().unwrap().push(format!("debug {text}"));
    }

    fn notice(&self, text: &str) {
        self.0.lock().unwrap().push(format!("notice {text}"));
    }
}

fn ok_chat(text: &str) -> ScriptedResponse {
    let mut response = ScriptedResponse::new(200);
    response.body = serde_json::to_vec(&serde_json::json!({
        "id": "r1", "model": "m-1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop"}],
    }))
    .unwrap();
    response
}

fn unauthorized() -> ScriptedResponse {
    let mut response = ScriptedResponse::new(401);
    response.body = br#"{"error": {"message": "Incorrect API key"}}"#.to_vec();
    response
}

fn rate_limited(seconds: &str) -> ScriptedResponse {
    let mut response = ScriptedResponse::new(429);
    response.headers = vec![("retry-after".into(), seconds.into())];
    response.body = br#"{"error": {"message": "slow down", "type": "rate_limit"}}"#.to_vec();
    response
}

fn sse(events: &[&str], fault: Option<Fault>) -> ScriptedResponse {
    let mut response = ScriptedResponse::new(200);
    response.sse = Some(events.iter().map(|e| e.to_string()).collect());
    response.fault = fault;
    response
}

fn delta(text: &str) -> String {
    format!(r#"data: {{"choices":[{{"index":0,"delta":{{"content":"{text}"}}}}]}}"#)
}

fn header<'a>(request: &'a crate::testing::RecordedRequest, name: &str) -> Option<&'a str> {
    request
        .headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// One header of each request, in the order they came.
fn each<'a>(requests: &'a [crate::testing::RecordedRequest], name: &str) -> Vec<Option<&'a str>> {
    requests.iter().map(|r| header(r, name)).collect()
}

fn server() -> MockServer {
    MockServer::start(&tokio::runtime::Handle::current()).unwrap()
}

#[test]
fn a_state_key_renders_and_parses_back() {
    let config = provider("openai", "http://127.0.0.1:9/v1");
    let plain = StateKey::of(&config, &Job::Chat(chat(None)));
    assert_eq!(plain.render(), "openai|m-1");
    let own = StateKey::of(&config, &Job::Stream(chat(Some("m-2"))));
    assert_eq!(own.render(), "openai/m-2|m-2");
    // The provider's own model named by the call is the provider's key.
    assert_eq!(StateKey::of(&config, &Job::Chat(chat(Some("m-1")))), plain);
    let embed = StateKey::of(&config, &Job::Embed(EmbedRequest::default()));
    assert_eq!(embed.render(), "openai:embeddings|e-1");
    let own_embed = |model: &str| {
        let request = EmbedRequest {
            model: Some(model.to_string()),
            ..EmbedRequest::default()
        };
        StateKey::of(&config, &Job::Embed(request))
    };
    // An embeddings call's own model= is shown as a chat call's is.
    assert_eq!(own_embed("e-2").render(), "openai:embeddings/e-2|e-2");
    assert_eq!(own_embed("e-1"), embed);
    for key in [&plain, &own, &embed, &own_embed("e-2")] {
        assert_eq!(StateKey::parse(&key.render()).as_ref(), Some(key));
        assert!(key.is_of(&config), "{key:?}");
    }
    assert_eq!(StateKey::parse("openai"), None);
    // Another app's provider of the same name but another model is not ours.
    let theirs = StateKey::parse("openai|m-9").unwrap();
    assert!(!theirs.is_of(&config));
    assert!(!StateKey::parse("openai:embeddings|m-1")
        .unwrap()
        .is_of(&config));
    assert!(!StateKey::parse("openaix/m-2|m-2").unwrap().is_of(&config));
    assert!(!StateKey::parse("openai:embeddingsx/e-2|e-2")
        .unwrap()
        .is_of(&config));
    assert_eq!(StateKey::member(&config).render(), "openai|m-1");
}

#[test]
fn cooldowns_show_only_this_clients_keys() {
    let client = client(vec![provider("a", "http://127.0.0.1:9/v1")]);
    let now = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
    let until = now + Duration::from_secs(30);
    client
        .state
        .engine()
        .cool("a|m-1", now, until, &crate::engine::Cause::because("x"));
    client
        .state
        .engine()
        .cool("a/m-2|m-2", now, until, &crate::engine::Cause::because("x"));
    client
        .state
        .engine()
        .cool("a|other", now, until, &crate::engine::Cause::because("x"));
    client
        .state
        .engine()
        .cool("b|m-1", now, until, &crate::engine::Cause::because("x"));
    let shown: Vec<String> = client.cooldowns(now).into_iter().map(|(k, _)| k).collect();
    assert_eq!(shown, ["a/m-2", "a"]);
}

#[test]
fn least_busy_orders_by_calls_in_flight_and_a_reservation_ends_with_its_call() {
    let url = "http://127.0.0.1:9/v1";
    let client = client(vec![
        provider("a", url),
        provider("b", url),
        provider("z", url),
    ]);
    let job = Job::Chat(chat(None));
    let order = |plan: &Plan| -> Vec<usize> { (0..plan.len()).map(|i| plan.provider(i)).collect() };
    let pool = [least_busy(&[0, 1])];
    let ordered = || {
        let mut plan = Plan::new(Arc::clone(&client), &[0, 1, 2], &job);
        let reservations = plan.order_pools(&pool, now());
        assert_eq!(reservations.len(), 1);
        (order(&plan), reservations, plan)
    };
    // Nobody busy: the rotation's turn decides (turn 0 of 2: the first).
    let (first, a, _) = ordered();
    assert_eq!(first, [0, 1, 2]);
    // Turn 1 puts the second first (and it is idle).
    let (second, b, _) = ordered();
    assert_eq!(second, [1, 0, 2]);
    drop(b);
    // Turn 0 would put the first first, but a call is still busy there and
    // none at the second any more: the second.
    let (third, c, plan) = ordered();
    assert_eq!(third, [1, 0, 2]);
    // Each member carries its own state key and config through the reorder.
    assert_eq!(plan.state_key(0), "b|m-1");
    assert_eq!(plan.config(0).name, "b");
    assert_eq!(plan.state_key(1), "a|m-1");
    drop(a);
    // Turn 1 would put the second first, but the third call is still busy
    // there: the first (whose call has ended).
    assert_eq!(ordered().0, [0, 1, 2]);
    drop(c);
    // Every call ended: the rotation alone again (turn 0, then turn 1).
    assert_eq!(ordered().0, [0, 1, 2]);
    assert_eq!(ordered().0, [1, 0, 2]);
}

fn least_busy(members: &[usize]) -> Pool {
    Pool {
        strategy: Strategy::LeastBusy,
        members: members.to_vec(),
    }
}

fn round_robin(members: &[usize]) -> Pool {
    Pool {
        strategy: Strategy::RoundRobin,
        members: members.to_vec(),
    }
}

fn now() -> std::time::SystemTime {
    std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000)
}

/// How many of `calls` plans of `chain` start at each provider, each plan's
/// pools ordered (and its reservations ended) before the next.
fn first_members(
    client: &Arc<Client>,
    chain: &[usize],
    pools: &[Pool],
    calls: usize,
) -> Vec<usize> {
    let job = Job::Chat(chat(None));
    let mut firsts = vec![0; client.providers.len()];
    for _ in 0..calls {
        let mut plan = Plan::new(Arc::clone(client), chain, &job);
        drop(plan.order_pools(pools, now()));
        firsts[plan.provider(0)] += 1;
    }
    firsts
}

#[test]
fn a_member_out_of_a_pools_running_hands_its_turns_to_every_other_evenly() {
    let url = "http://127.0.0.1:9/v1";
    let three = || {
        client(vec![
            provider("a", url),
            provider("b", url),
            provider("c", url),
            provider("z", url),
        ])
    };
    for pool in [[round_robin(&[0, 1, 2])], [least_busy(&[0, 1, 2])]] {
        let client = three();
        // Nobody out: each member in turn.
        assert_eq!(
            first_members(&client, &[0, 1, 2, 3], &pool, 12),
            [4, 4, 4, 0]
        );
        // The first cooling: its turns go to both others alike (not all to
        // the one after it), and it is tried last of the pool.
        let until = now() + Duration::from_secs(600);
        client
            .state
            .engine()
            .cool("a|m-1", now(), until, &crate::engine::Cause::because("x"));
        let firsts = first_members(&client, &[0, 1, 2, 3], &pool, 12);
        assert_eq!(firsts, [0, 6, 6, 0], "{:?}", pool[0].strategy);
        let mut plan = Plan::new(Arc::clone(&client), &[0, 1, 2, 3], &Job::Chat(chat(None)));
        drop(plan.order_pools(&pool, now()));
        let order: Vec<usize> = (0..plan.len()).map(|i| plan.provider(i)).collect();
        assert_eq!(&order[2..], [0, 3], "{:?}", pool[0].strategy);
        // Once its cooldown is over, it takes its turns again.
        let later = until + Duration::from_secs(1);
        let job = Job::Chat(chat(None));
        let firsts: Vec<usize> = (0..3)
            .map(|_| {
                let mut plan = Plan::new(Arc::clone(&client), &[0, 1, 2, 3], &job);
                drop(plan.order_pools(&pool, later));
                plan.provider(0)
            })
            .collect();
        let mut sorted = firsts.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, [0, 1, 2], "{:?}", pool[0].strategy);
    }
    // least_busy, the first busy with a call that is still under way: the
    // others take turns evenly.
    let client = three();
    let job = Job::Chat(chat(None));
    let pool = [least_busy(&[0, 1, 2])];
    let mut busy = Plan::new(Arc::clone(&client), &[0, 1, 2], &job);
    let held = busy.order_pools(&pool, now());
    assert_eq!(busy.provider(0), 0);
    assert_eq!(first_members(&client, &[0, 1, 2], &pool, 12), [0, 6, 6, 0]);
    drop(held);
    // Round-robin calls reserve nothing.
    let mut plan = Plan::new(Arc::clone(&client), &[0, 1, 2], &job);
    assert!(plan
        .order_pools(&[round_robin(&[0, 1, 2])], now())
        .is_empty());
}

#[tokio::test]
async fn a_streams_reservation_ends_when_it_ends_or_is_closed() {
    let server = server();
    let url = format!("{}/v1", server.url());
    let client = client(vec![provider("a", &url), provider("b", &url)]);
    let pool = [least_busy(&[0, 1])];
    let stream = || {
        let mut call = call(&client, Job::Stream(chat(None)), &[0, 1]);
        call.reservations = call.plan.order_pools(&pool, now());
        let reserved = call.plan.provider(0);
        (StreamDriver::new(call, false), reserved)
    };
    let events = Recorded::default();
    // Read to its end, the driver still alive.
    server
        .push(sse(&[&delta("a"), &delta("b"), "data: [DONE]"], None))
        .unwrap();
    let (mut driver, at) = stream();
    assert_eq!(client.busy_at(at), 1);
    while let Ok(Step::Chunks(_)) = driver.next(&FixedKeys, &events).await {}
    assert_eq!(client.busy_at(at), 0, "read to its end");
    // Closed after its first chunk.
    server
        .push(sse(&[&delta("a"), &delta("b"), "data: [DONE]"], None))
        .unwrap();
    let (mut closed, at) = stream();
    assert!(matches!(
        closed.next(&FixedKeys, &events).await,
        Ok(Step::Chunks(_))
    ));
    assert_eq!(client.busy_at(at), 1, "open, it counts");
    closed.close();
    assert_eq!(client.busy_at(at), 0, "closed");
    // Broken after its first content (not restarted).
    server
        .push(sse(
            &[&delta("a"), &delta("b")],
            Some(Fault::CutAfterEvents(1)),
        ))
        .unwrap();
    let (mut broken, at) = stream();
    assert!(matches!(
        broken.next(&FixedKeys, &events).await,
        Ok(Step::Chunks(_))
    ));
    assert!(matches!(
        broken.next(&FixedKeys, &events).await,
        Err(StreamEnd::Interrupted(_))
    ));
    assert_eq!(client.busy_at(at), 0, "interrupted");
    // Failed before its first content.
    let mut refused = ScriptedResponse::new(400);
    refused.body = br#"{"error": {"message": "bad"}}"#.to_vec();
    server.push(refused).unwrap();
    let (mut failed, at) = stream();
    assert!(matches!(
        failed.next(&FixedKeys, &events).await,
        Err(StreamEnd::Failed(_))
    ));
    assert_eq!(client.busy_at(at), 0, "failed");
    drop((driver, closed, broken, failed));
}

#[test]
fn an_embeddings_chain_nobody_can_embed_says_why() {
    let url = "http://127.0.0.1:9/v1";
    let mut none = provider("n", url);
    none.embeds = false;
    let client = client(vec![none.clone(), provider("y", url)]);
    let job = Job::Embed(EmbedRequest::default());
    let alone = Plan::new(Arc::clone(&client), &[0], &job);
    let why = alone.none_can_serve(&job).unwrap();
    assert!(
        why.starts_with("no provider in the chain can embed: "),
        "{why}"
    );
    assert!(why.contains('n'), "{why}");
    assert!(Plan::new(Arc::clone(&client), &[0, 1], &job)
        .none_can_serve(&job)
        .is_none());
    // A chat call is the engine's to refuse (Unserved), not this rule's.
    let chat_job = Job::Chat(chat(None));
    assert!(Plan::new(client, &[0], &chat_job)
        .none_can_serve(&chat_job)
        .is_none());
}

#[tokio::test]
async fn the_idempotency_key_is_the_same_on_every_retry_and_the_retry_count_counts_up() {
    let server = server();
    let client = client(vec![provider("a", &format!("{}/v1", server.url()))]);
    server.push(rate_limited("1")).unwrap();
    server.push(rate_limited("2")).unwrap();
    server.push(ok_chat("hello")).unwrap();
    let mut call = call(&client, Job::Chat(chat(None)), &[0]);
    let events = Recorded::default();
    let success = call.run(&FixedKeys, &events, None).await.unwrap().unwrap();
    assert_eq!(success.attempts.len(), 3);
    assert_eq!(
        call.clock.sleeps(),
        [Duration::from_secs(1), Duration::from_secs(2)]
    );
    let requests = server.requests();
    assert_eq!(
        each(&requests, "idempotency-key"),
        [Some("failover-c0ffee-0"); 3]
    );
    assert_eq!(
        each(&requests, "x-retry-count"),
        [Some("0"), Some("1"), Some("2")]
    );
    assert_eq!(
        header(&requests[0], "authorization"),
        Some("Bearer sk-fixed")
    );
    assert_eq!(*events.0.lock().unwrap(), ["retry a", "retry a"]);
}

#[tokio::test]
async fn a_header_the_caller_set_wins_over_the_calls_own() {
    let server = server();
    let mut config = provider("a", &format!("{}/v1", server.url()));
    config.headers = vec![("X-Retry-Count".into(), "mine".into())];
    let client = client(vec![config]);
    server.push(ok_chat("hello")).unwrap();
    let mut call = call(&client, Job::Chat(chat(None)), &[0]);
    call.idempotency_key = Some("caller-key".into());
    call.run(&FixedKeys, &Recorded::default(), None)
        .await
        .unwrap()
        .unwrap();
    let requests = server.requests();
    assert_eq!(header(&requests[0], "idempotency-key"), Some("caller-key"));
    assert_eq!(header(&requests[0], "x-retry-count"), Some("mine"));
}

/// A key source that hands out numbered keys and counts how often it was asked.
#[derive(Default)]
struct Rotating {
    recent: RecentKeys,
    asked: AtomicUsize,
}

impl KeySource for Rotating {
    fn asked(&self, _provider: usize) -> Option<&RecentKeys> {
        Some(&self.recent)
    }

    fn key(&self, _ask: KeyAsk<'_>) -> Result<String, NoKey> {
        let n = self.asked.fetch_add(1, Ordering::SeqCst);
        Ok(format!("sk-rotated-{n}"))
    }
}

#[tokio::test]
async fn each_request_is_built_once_per_run_and_a_key_source_is_asked_at_each_attempt() {
    let server = server();
    let client = client(vec![provider("a", &format!("{}/v1", server.url()))]);
    server.push(rate_limited("1")).unwrap();
    server.push(ok_chat("hello")).unwrap();
    let mut call = call(&client, Job::Chat(chat(None)), &[0]);
    let keys = Rotating::default();
    run::BUILT.with(|built| built.set(0));
    call.run(&keys, &Recorded::default(), None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run::BUILT.with(|built| built.get()), 1);
    assert_eq!(keys.asked.load(Ordering::SeqCst), 2);
    let requests = server.requests();
    let auth: Vec<_> = requests
        .iter()
        .map(|r| header(r, "authorization"))
        .collect();
    assert_eq!(
        auth,
        [Some("Bearer sk-rotated-0"), Some("Bearer sk-rotated-1")]
    );
    // The same bytes went out twice.
    assert_eq!(requests[0].body, requests[1].body);
}

/// A key source that ends the call through its interrupter.
struct Ending {
    interrupter: Interrupter<String>,
    /// What the attempt is told after the call is ended.
    then: fn() -> NoKey,
}

impl KeySource for Ending {
    fn asked(&self, _provider: usize) -> Option<&RecentKeys> {
        static RECENT: std::sync::OnceLock<RecentKeys> = std::sync::OnceLock::new();
        Some(RECENT.get_or_init(RecentKeys::default))
    }

    fn key(&self, _ask: KeyAsk<'_>) -> Result<String, NoKey> {
        self.interrupter.raise("ended by the key source".into());
        Err((self.then)())
    }
}

#[tokio::test]
async fn the_interrupt_wins_even_when_the_engine_finishes_in_the_same_poll() {
    let server = server();
    let client = client(vec![provider("a", &format!("{}/v1", server.url()))]);
    for then in [
        // The engine gives up at once (an auth failure on the only
        // provider, no await in between): the interrupt still wins.
        (|| {
            NoKey::Failed(crate::engine::Failure::without_response(
                crate::engine::ErrorKind::Auth,
                "no key".to_string(),
            ))
        }) as fn() -> NoKey,
        // The attempt never completes: the interrupt ends the run.
        || NoKey::Ended,
    ] {
        let (interrupter, interrupted) = interrupt();
        let mut call = call_with(&client, Job::Chat(chat(None)), &[0], interrupted);
        let keys = Ending { interrupter, then };
        let events = Recorded::default();
        let ended = call.run(&keys, &events, None).await;
        assert_eq!(ended.err().as_deref(), Some("ended by the key source"));
    }
    assert!(server.requests().is_empty(), "nothing is sent");
}

#[tokio::test]
async fn a_restart_counts_the_retries_before_the_cut_and_the_answer_has_every_attempt() {
    let server = server();
    let client = client(vec![provider("a", &format!("{}/v1", server.url()))]);
    server.push(rate_limited("1")).unwrap();
    server
        .push(sse(
            &[&delta("Hel"), &delta("lo")],
            Some(Fault::CutAfterEvents(1)),
        ))
        .unwrap();
    server
        .push(sse(&[&delta("Hello"), &delta("!"), "data: [DONE]"], None))
        .unwrap();
    let mut driver = StreamDriver::new(call(&client, Job::Stream(chat(None)), &[0]), true);
    let events = Recorded::default();
    let mut chunks = Vec::new();
    loop {
        match driver.next(&FixedKeys, &events).await {
            Ok(Step::Chunks(got)) => chunks.extend(got),
            Ok(Step::End) => break,
            Err(_) => panic!("the restart should have succeeded"),
        }
    }
    let texts: Vec<String> = chunks
        .iter()
        .map(|c| match c {
            Chunk::Text(t) => t.clone(),
            Chunk::Restart { discarded, .. } => format!("<restart: {discarded}>"),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(texts, ["Hel", "<restart: Hel>", "Hello", "!"]);
    let requests = server.requests();
    assert_eq!(
        each(&requests, "idempotency-key"),
        [Some("failover-c0ffee-0"); 3]
    );
    assert_eq!(
        each(&requests, "x-retry-count"),
        [Some("0"), Some("1"), Some("2")]
    );
    let response = driver.take_response().unwrap();
    assert_eq!(response.chat.text, "Hello!");
    assert_eq!(response.provider, 0);
    let attempts: Vec<_> = response
        .attempts
        .iter()
        .map(|a| (a.status, a.kind))
        .collect();
    assert_eq!(
        attempts,
        [
            (Some(429), Some(crate::engine::ErrorKind::RateLimited)),
            (Some(200), Some(crate::engine::ErrorKind::Connection)),
            (Some(200), None),
        ]
    );
    assert!(driver.time_to_first_token().is_some());
    assert!(driver.take_response().is_none(), "taken once");
}

/// Reads a stream to its end; panics on any other end.
async fn read_to_end(driver: &mut StreamDriver<ManualClock, String>) -> Vec<Chunk> {
    let events = Recorded::default();
    let mut chunks = Vec::new();
    loop {
        match driver.next(&FixedKeys, &events).await {
            Ok(Step::Chunks(got)) => chunks.extend(got),
            Ok(Step::End) => return chunks,
            Err(_) => panic!("the stream should have ended at its end"),
        }
    }
}

#[tokio::test]
async fn a_restarted_attempt_cut_again_keeps_the_wait_slept_before_it() {
    let server = server();
    let client = client(vec![provider("a", &format!("{}/v1", server.url()))]);
    for _ in 0..2 {
        server
            .push(sse(
                &[&delta("Hel"), &delta("lo")],
                Some(Fault::CutAfterEvents(1)),
            ))
            .unwrap();
    }
    server
        .push(sse(&[&delta("Hello"), "data: [DONE]"], None))
        .unwrap();
    let mut driver = StreamDriver::new(call(&client, Job::Stream(chat(None)), &[0]), true);
    read_to_end(&mut driver).await;
    let slept = driver.call.clock.sleeps();
    assert_eq!(slept.len(), 2, "a backoff before each restart");
    assert!(slept.iter().all(|wait| !wait.is_zero()));
    let response = driver.take_response().unwrap();
    let waited: Vec<_> = response.attempts.iter().map(|a| a.waited).collect();
    // Each attempt records what was slept before it: none before the first.
    assert_eq!(waited, [Duration::ZERO, slept[0], slept[1]]);
}

#[tokio::test]
async fn a_server_that_stalls_after_the_finish_ends_the_stream_with_what_came() {
    let server = server();
    let client = client(vec![provider("a", &format!("{}/v1", server.url()))]);
    let finish = r#"data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#;
    let usage = r#"data: {"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2}}"#;
    // The usage chunk that trails the finish is read; then nothing comes,
    // the connection open (no `[DONE]`).
    server
        .push(sse(
            &[&delta("Hi"), finish, usage, "data: [DONE]"],
            Some(Fault::StallAfterEvents(3)),
        ))
        .unwrap();
    let mut call = call(&client, Job::Stream(chat(None)), &[0]);
    call.timeout = Duration::from_secs(30);
    let mut driver = StreamDriver::new(call, false);
    let read = tokio::time::timeout(Duration::from_secs(5), read_to_end(&mut driver)).await;
    assert!(read.is_ok(), "not held for the 30 s idle timeout");
    let chat = driver.take_response().unwrap().chat;
    assert_eq!(
        (chat.text.as_str(), chat.finish_reason.as_deref()),
        ("Hi", Some("stop"))
    );
    assert_eq!(
        (chat.usage.input_tokens, chat.usage.output_tokens),
        (Some(4), Some(2))
    );
}

#[tokio::test]
async fn what_trails_the_finish_is_not_waited_for_past_the_deadline() {
    let server = server();
    let client = client(vec![provider("a", &format!("{}/v1", server.url()))]);
    let finish = r#"data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#;
    server
        .push(sse(
            &[&delta("Hi"), finish],
            Some(Fault::StallAfterEvents(2)),
        ))
        .unwrap();
    let mut call = call(&client, Job::Stream(chat(None)), &[0]);
    call.timeout = Duration::from_secs(30);
    call.deadline = Some(Duration::from_millis(100));
    let mut driver = StreamDriver::new(call, false);
    let began = std::time::Instant::now();
    read_to_end(&mut driver).await;
    // The deadline (0.1 s), well before the grace for trailers would end.
    assert!(
        began.elapsed() < Duration::from_millis(900),
        "{:?}",
        began.elapsed()
    );
    let chat = driver.take_response().unwrap().chat;
    assert_eq!(chat.finish_reason.as_deref(), Some("stop"));
}

#[tokio::test]
async fn a_cut_without_restart_is_an_interruption_with_the_broken_attempt_last() {
    let server = server();
    let client = client(vec![provider("a", &format!("{}/v1", server.url()))]);
    server
        .push(sse(
            &[&delta("Hel"), &delta("lo")],
            Some(Fault::CutAfterEvents(1)),
        ))
        .unwrap();
    let mut driver = StreamDriver::new(call(&client, Job::Stream(chat(None)), &[0]), false);
    let events = Recorded::default();
    let Ok(Step::Chunks(first)) = driver.next(&FixedKeys, &events).await else {
        panic!("the first chunk comes");
    };
    assert_eq!(first.len(), 1);
    let Err(StreamEnd::Interrupted(broken)) = driver.next(&FixedKeys, &events).await else {
        panic!("the cut is an interruption");
    };
    assert_eq!(broken.partial_text, "Hel");
    assert_eq!(broken.provider, 0);
    let attempts: Vec<_> = broken.attempts.iter().map(|a| (a.status, a.kind)).collect();
    assert_eq!(attempts, [(Some(200), Some(broken.failure.kind))]);
    assert_eq!(server.requests().len(), 1);
    assert!(matches!(
        driver.next(&FixedKeys, &events).await,
        Ok(Step::End)
    ));
}

#[tokio::test]
async fn a_failed_restart_keeps_every_attempt_and_the_restarts_failure() {
    let server = server();
    let client = client(vec![provider("a", &format!("{}/v1", server.url()))]);
    server
        .push(sse(
            &[&delta("Hel"), &delta("lo")],
            Some(Fault::CutAfterEvents(1)),
        ))
        .unwrap();
    let mut bad = ScriptedResponse::new(400);
    bad.body = br#"{"error": {"message": "no", "type": "invalid_request_error"}}"#.to_vec();
    server.push(bad).unwrap();
    let mut driver = StreamDriver::new(call(&client, Job::Stream(chat(None)), &[0]), true);
    let events = Recorded::default();
    assert!(matches!(
        driver.next(&FixedKeys, &events).await,
        Ok(Step::Chunks(_))
    ));
    let Err(StreamEnd::RestartFailed {
        interruption,
        restart,
    }) = driver.next(&FixedKeys, &events).await
    else {
        panic!("the restart fails");
    };
    assert_eq!(interruption.partial_text, "Hel");
    let statuses: Vec<_> = interruption.attempts.iter().map(|a| a.status).collect();
    assert_eq!(statuses.last(), Some(&Some(400)));
    assert_eq!(restart.attempts.last().map(|a| a.status), Some(Some(400)));
    let counts: Vec<_> = server
        .requests()
        .iter()
        .map(|r| header(r, "x-retry-count").map(String::from))
        .collect();
    assert_eq!(counts, [Some("0".to_string()), Some("1".to_string())]);
}

/// A shared state whose first read never ends (a fleet store that does not
/// answer) and that has a notice for the caller: in process otherwise.
#[derive(Debug, Default)]
struct Unanswering {
    local: LocalState,
    noticed: Mutex<bool>,
}

impl crate::engine::EngineState for Unanswering {
    fn cooling(&self, key: &str, now: std::time::SystemTime) -> Option<crate::engine::Cooling> {
        self.local.cooling(key, now)
    }
    fn cool(
        &self,
        key: &str,
        now: std::time::SystemTime,
        until: std::time::SystemTime,
        cause: &crate::engine::Cause,
    ) {
        self.local.cool(key, now, until, cause)
    }
    fn saw_headroom(
        &self,
        key: &str,
        now: std::time::SystemTime,
        headroom: crate::engine::Headroom,
    ) {
        self.local.saw_headroom(key, now, headroom)
    }
    fn failures_in_a_row(&self, key: &str) -> u32 {
        self.local.failures_in_a_row(key)
    }
    fn epoch(&self) -> u64 {
        self.local.epoch()
    }
    fn recover(&self, key: &str, sent: u64) {
        self.local.recover(key, sent)
    }
    fn note_call(
        &self,
        key: &str,
        now: std::time::SystemTime,
        budget: &crate::engine::RetryBudget,
    ) {
        self.local.note_call(key, now, budget)
    }
    fn spend_retry(
        &self,
        key: &str,
        now: std::time::SystemTime,
        budget: &crate::engine::RetryBudget,
        within: Option<Duration>,
    ) -> bool {
        self.local.spend_retry(key, now, budget, within)
    }
    fn half_open(&self, key: &str, now: std::time::SystemTime) -> Option<crate::engine::Cooling> {
        self.local.half_open(key, now)
    }
    fn take_probe(
        &self,
        key: &str,
        now: std::time::SystemTime,
        lease: Duration,
        within: Option<Duration>,
    ) -> Option<u64> {
        self.local.take_probe(key, now, lease, within)
    }
    fn probed(&self, key: &str, now: std::time::SystemTime) -> bool {
        self.local.probed(key, now)
    }
    fn keep_probe(&self, key: &str, token: u64, now: std::time::SystemTime, lease: Duration) {
        self.local.keep_probe(key, token, now, lease)
    }
    fn release_probe(&self, key: &str, token: u64) {
        self.local.release_probe(key, token)
    }
}

impl crate::engine::FleetState for Unanswering {
    fn cooldowns(&self, now: std::time::SystemTime) -> Vec<(String, Duration)> {
        self.local.cooldowns(now)
    }
    fn health(&self, now: std::time::SystemTime) -> Vec<(String, crate::engine::Health)> {
        self.local.health(now)
    }
    fn settle(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(std::future::pending())
    }
    fn take_notice(&self) -> Option<String> {
        let mut noticed = self.noticed.lock().unwrap();
        (!std::mem::replace(&mut *noticed, true)).then(|| "the store is away".to_string())
    }
}

#[tokio::test(start_paused = true)]
async fn a_state_that_does_not_settle_is_waited_for_half_the_deadline_then_its_notice_is_told() {
    let mut none = provider("n", "http://127.0.0.1:9/v1");
    none.embeds = false;
    let state = Arc::new(Unanswering::default());
    let client = Arc::new(Client::new(vec![none], &[], state, Limits::default()));
    // Nobody can serve it: nothing is sent, the run ends at once after the settle.
    let mut call = call(&client, Job::Embed(EmbedRequest::default()), &[0]);
    call.deadline = Some(Duration::from_secs(4));
    let events = Recorded::default();
    let began = tokio::time::Instant::now();
    let failure = call
        .run(&FixedKeys, &events, None)
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(began.elapsed(), Duration::from_secs(2));
    assert_eq!(failure.error, crate::engine::CallError::Unserved);
    assert_eq!(*events.0.lock().unwrap(), ["notice the store is away"]);
}

#[tokio::test]
async fn a_hint_a_provider_is_not_sent_is_noted_for_the_debug_log_before_the_run() {
    let server = server();
    let mut config = provider("claude", &format!("{}/v1", server.url()));
    config.wire = Wire::Anthropic;
    config.params =
        Some(serde_json::json!({"thinking": {"type": "enabled", "budget_tokens": 1024}}));
    let client = client(vec![config]);
    let mut bad = ScriptedResponse::new(400);
    bad.body = br#"{"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}"#
        .to_vec();
    server.push(bad).unwrap();
    let mut request = chat(None);
    request.temperature = Some(0.5);
    request.max_tokens = Some(4096);
    let mut call = call(&client, Job::Chat(request), &[0]);
    let events = Recorded::default();
    call.run(&FixedKeys, &events, None)
        .await
        .unwrap()
        .unwrap_err();
    let events = events.0.lock().unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(
        events[0].starts_with("debug claude: temperature=0.5 not sent: "),
        "{events:?}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn a_key_sources_error_is_the_cause_of_the_failure_at_its_provider_only() {
    use crate::engine::{CallError, CallFailure, ErrorKind, Failure, ProviderFailure};
    let errors = KeyErrors::<&str>::default();
    errors.set(1, Some("token service down"));
    let at = |provider| CallFailure {
        error: CallError::Provider(ProviderFailure {
            provider,
            failure: Failure::without_response(ErrorKind::Auth, "no key".to_string()),
            retry_after: None,
        }),
        attempts: Vec::new(),
        reason: String::new(),
    };
    assert_eq!(errors.cause_of(&at(1), |e| *e), Some("token service down"));
    assert_eq!(errors.cause_of(&at(0), |e| *e), None);
    let deadline = CallFailure {
        error: CallError::Deadline {
            deadline: Duration::from_secs(1),
            last: match at(1).error {
                CallError::Provider(failed) => Some(failed),
                _ => None,
            },
            waiting: None,
        },
        ..at(1)
    };
    assert_eq!(
        errors.cause_of(&deadline, |e| *e),
        Some("token service down")
    );
    // A key given since: nothing to blame.
    errors.set(1, None);
    assert_eq!(errors.cause_of(&at(1), |e| *e), None);
}

#[tokio::test(start_paused = true)]
async fn an_interrupt_is_taken_once_and_nothing_ends_a_call_whose_interrupters_are_gone() {
    let (interrupter, mut interrupted) = interrupt::<&str>();
    interrupter.clone().raise("first");
    interrupter.raise("second");
    assert_eq!(interrupted.ended().await, "first");
    assert_eq!(interrupted.take(), None);
    let (interrupter, mut interrupted) = interrupt::<&str>();
    drop(interrupter);
    let waited = tokio::time::timeout(Duration::from_secs(60), interrupted.ended()).await;
    assert!(waited.is_err(), "never ends");
    assert_eq!(interrupted.take(), None);
}

#[test]
fn a_proxys_credentials_are_among_the_secrets_every_request_carries() {
    let proxy = "http://me:pr0xy-pa55@proxy.internal:3128".to_string();
    let client = Client::new(
        Vec::new(),
        &[proxy],
        Arc::new(LocalState::new()),
        Limits::default(),
    );
    assert!(
        client.secrets.iter().any(|s| s == "pr0xy-pa55"),
        "{:?}",
        client.secrets
    );
}

#[tokio::test]
async fn a_key_of_another_provider_echoed_in_an_answer_is_redacted() {
    use crate::engine::CallError;
    let server = server();
    let mut other = provider("b", "https://b.example/v1?key=b-query-secret-0");
    other.api_key = Some("sk-bbbb-second-key".into());
    other.headers = vec![("x-gateway-token".into(), "gw-token-secret-1".into())];
    let client = client(vec![provider("a", &format!("{}/v1", server.url())), other]);
    let mut refused = ScriptedResponse::new(400);
    refused.body = serde_json::to_vec(&serde_json::json!({"error": {"message":
        "sk-bbbb-second-key, gw-token-secret-1 and b-query-secret-0 are not keys of this account"}}))
    .unwrap();
    server.push(refused).unwrap();
    let mut call = call(&client, Job::Chat(chat(None)), &[0]);
    let failure = call
        .run(&FixedKeys, &Recorded::default(), None)
        .await
        .unwrap()
        .unwrap_err();
    let CallError::Provider(failed) = &failure.error else {
        panic!("{:?}", failure.error);
    };
    let told = format!("{:?} {:?}", failed.failure, failure.attempts);
    assert!(told.contains("are not keys of this account"), "{told}");
    for secret in [
        "sk-bbbb-second-key",
        "gw-token-secret-1",
        "b-query-secret-0",
    ] {
        assert!(!told.contains(secret), "{secret} in {told}");
    }
}

#[tokio::test]
async fn each_attempt_records_what_it_used_and_whether_it_may_be_billed() {
    let server = server();
    // A port nothing listens on: the connection is never made.
    let refused = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let client = client(vec![
        provider("refused", &format!("http://127.0.0.1:{refused}/v1")),
        provider("a", &format!("{}/v1", server.url())),
    ]);
    server.push(rate_limited("1")).unwrap();
    let mut answer = ok_chat("hello");
    let mut body: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
    body["usage"] = serde_json::json!({"prompt_tokens": 30, "completion_tokens": 4});
    answer.body = serde_json::to_vec(&body).unwrap();
    server.push(answer).unwrap();
    let mut call = call(&client, Job::Chat(chat(None)), &[0, 1]);
    let success = call
        .run(&FixedKeys, &Recorded::default(), None)
        .await
        .unwrap()
        .unwrap();
    let seen: Vec<_> = success
        .attempts
        .iter()
        .map(|a| (a.provider, a.status, a.billed))
        .collect();
    assert_eq!(
        seen,
        [
            // Refused, retried once, refused again: never billed.
            (0, None, Some(false)),
            (0, None, Some(false)),
            (1, Some(429), Some(false)),
            (1, Some(200), Some(true)),
        ]
    );
    assert_eq!(success.attempts[2].usage, None);
    let usage = success.attempts[3].usage.clone().unwrap();
    assert_eq!(
        (usage.input_tokens, usage.output_tokens),
        (Some(30), Some(4))
    );
    assert!(success.attempts[2].started <= success.attempts[3].started);
}

/// A chain of `a`, which refuses the key (a failover), and `b`, which never
/// answers: its servers and the client.
fn refused_then_hang() -> (MockServer, MockServer, Arc<Client>) {
    let (refusing, hanging) = (server(), server());
    let client = client(vec![
        provider("a", &format!("{}/v1", refusing.url())),
        provider("b", &format!("{}/v1", hanging.url())),
    ]);
    refusing.push(unauthorized()).unwrap();
    let mut hang = ScriptedResponse::new(200);
    hang.fault = Some(Fault::Hang);
    hanging.push(hang).unwrap();
    (refusing, hanging, client)
}

#[tokio::test]
async fn a_call_cut_short_leaves_what_it_sent_in_its_journal() {
    use crate::engine::ErrorKind;
    let (refusing, _hanging, client) = refused_then_hang();
    let mut cut = call(&client, Job::Chat(chat(None)), &[0, 1]);
    let journal = cut.journal.clone();
    let events = Recorded::default();
    let run = cut.run(&FixedKeys, &events, None);
    // Cut short (a task cancelled): the run is dropped with its records.
    assert!(tokio::time::timeout(Duration::from_millis(300), run)
        .await
        .is_err());
    let logged = journal.take();
    let seen: Vec<_> = logged
        .iter()
        .map(|l| {
            let r = &l.record;
            (
                r.provider,
                l.name.as_str(),
                l.model.as_str(),
                r.status,
                r.kind,
                r.billed,
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (0, "a", "m-1", Some(401), Some(ErrorKind::Auth), Some(false)),
            // In flight when cut: whether it is billed is not known.
            (1, "b", "m-1", None, None, None),
        ]
    );
    assert!(journal.take().is_empty(), "taken once");

    // A call the engine finishes reports its own records: none are kept here.
    refusing.push(ok_chat("hello")).unwrap();
    let mut finished = call(&client, Job::Chat(chat(None)), &[0]);
    let journal = finished.journal.clone();
    finished
        .run(&FixedKeys, &Recorded::default(), None)
        .await
        .unwrap()
        .unwrap();
    assert!(journal.take().is_empty());
}

#[tokio::test]
async fn a_stream_closed_before_its_first_content_keeps_what_it_sent() {
    let (_refusing, _hanging, client) = refused_then_hang();
    let call = call(&client, Job::Stream(chat(None)), &[0, 1]);
    let mut driver = StreamDriver::new(call, false);
    // Never read: nothing was sent, and it is no call.
    driver.close();
    assert!(driver.closed_attempts().is_none());

    let call = super::tests::call(&client, Job::Stream(chat(None)), &[0, 1]);
    let mut driver = StreamDriver::new(call, false);
    let events = Recorded::default();
    let read = tokio::time::timeout(Duration::from_millis(300), driver.next(&FixedKeys, &events));
    assert!(read.await.is_err(), "the second provider hangs");
    driver.close();
    let seen: Vec<_> = driver
        .closed_attempts()
        .expect("what it sent")
        .iter()
        .map(|a| (a.provider, a.status, a.billed))
        .collect();
    // The one in flight when it was closed last, billed unknown.
    assert_eq!(seen, [(0, Some(401), Some(false)), (1, None, None)]);
}
