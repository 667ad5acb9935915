//! Fleet-wide state on Redis: the engine's [`SharedState`] shared by every
//! client with the same URL and prefix, from any process or machine.
//!
//! The engine asks synchronously (`cooling`, `spend_retry`, ...), so reads
//! come from a local mirror that Redis keeps fresh: a subscription hears
//! every cooldown set or ended anywhere in the fleet (within a round trip,
//! well under 100 ms), and a full read of the cooldown keys after each
//! (re)connection catches up. Writes go to the mirror at once and to Redis
//! in the background. Only a retry's budget check waits on Redis (one
//! script, bounded by the state timeout): a shared budget cannot be decided
//! locally. Whenever Redis is down, slow or gone, the mirror is the
//! in-process state: no call fails or waits longer for it, the client says
//! so once, and reconnects in the background.
//!
//! Times in Redis are wall-clock (TTLs); the sleeper clock governs only the
//! in-process mirror.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::engine::{Cooling, LocalState, RetryBudget, SharedState};

/// Extends a cooldown key to `ARGV[1]` ms (never shortens it), and tells the
/// fleet.
const COOL: &str = r#"
local left = redis.call('PTTL', KEYS[1])
if left < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[1])
end
redis.call('PUBLISH', KEYS[2], ARGV[3])
return 1
"#;

/// One retry, if the shared budget allows it: the calls and retries of the
/// last `ARGV[1]` seconds (one counter per second), `ARGV[2]` the ratio,
/// `ARGV[3]` the reserve, `ARGV[4]` this second.
const SPEND_RETRY: &str = r#"
local window = tonumber(ARGV[1])
local now = tonumber(ARGV[4])
local calls, retries = 0, 0
for s = now - window + 1, now do
  calls = calls + tonumber(redis.call('GET', KEYS[1] .. ':' .. s) or '0')
  retries = retries + tonumber(redis.call('GET', KEYS[2] .. ':' .. s) or '0')
end
if retries + 1 > tonumber(ARGV[2]) * calls + tonumber(ARGV[3]) then
  return 0
end
local key = KEYS[2] .. ':' .. now
redis.call('INCR', key)
redis.call('EXPIRE', key, window + 1)
return 1
"#;

/// What a client shares through Redis.
pub struct RedisState {
    mirror: LocalState,
    prefix: String,
    timeout: Duration,
    manager: ConnectionManager,
    handle: tokio::runtime::Handle,
    /// Redis failed the last time it was asked.
    down: AtomicBool,
    /// What to tell the caller once (Redis lost, or back).
    notice: Mutex<Option<String>>,
    /// The mirror has read the fleet's cooldowns since the last connection.
    synced: Arc<tokio::sync::watch::Sender<bool>>,
    /// Itself, for background work that outlives a call.
    this: std::sync::Weak<Self>,
}

impl std::fmt::Debug for RedisState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisState")
            .field("prefix", &self.prefix)
            .finish()
    }
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl RedisState {
    /// Builds the state without waiting for Redis: the connection, the
    /// subscription and the first read happen in the background on
    /// `handle`'s runtime.
    pub fn new(
        url: &str,
        prefix: &str,
        timeout: Duration,
        handle: tokio::runtime::Handle,
    ) -> Result<Arc<Self>, String> {
        let client = redis::Client::open(url).map_err(|e| format!("not a Redis URL: {e}"))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(1).max(timeout)))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_secs(1));
        let manager = {
            let _entered = handle.enter();
            ConnectionManager::new_lazy_with_config(client.clone(), config)
                .map_err(|e| format!("cannot use Redis: {e}"))?
        };
        let (synced, _) = tokio::sync::watch::channel(false);
        let state = Arc::new_cyclic(|this| Self {
            mirror: LocalState::new(),
            prefix: prefix.to_string(),
            timeout,
            manager,
            handle: handle.clone(),
            down: AtomicBool::new(false),
            notice: Mutex::new(None),
            synced: Arc::new(synced),
            this: this.clone(),
        });
        let weak = Arc::downgrade(&state);
        handle.spawn(listen(weak, client));
        Ok(state)
    }

    fn key(&self, what: &str, key: &str) -> String {
        format!("{}:{what}:{key}", self.prefix)
    }

    fn channel(&self) -> String {
        format!("{}:events", self.prefix)
    }

    /// Notes how the last exchange with Redis went: a change is said once.
    fn went(&self, ok: bool) {
        let was_down = self.down.swap(!ok, Ordering::SeqCst);
        if was_down == ok {
            let text = if ok {
                "Redis state is back: cooldowns and the retry budget are shared again"
            } else {
                "Redis state is unavailable: this client uses its in-process state until Redis \
                 answers again"
            };
            *self.notice.lock().unwrap_or_else(|e| e.into_inner()) = Some(text.to_string());
        }
        if !ok {
            self.synced.send_replace(false);
        }
    }

    /// Runs `work` on Redis in the background, bounded by the timeout.
    fn later<F>(self: &Arc<Self>, work: F)
    where
        F: FnOnce(
                ConnectionManager,
            ) -> Pin<Box<dyn Future<Output = redis::RedisResult<()>> + Send>>
            + Send
            + 'static,
    {
        let state = Arc::clone(self);
        let conn = self.manager.clone();
        let timeout = self.timeout;
        self.handle.spawn(async move {
            let ok = matches!(tokio::time::timeout(timeout, work(conn)).await, Ok(Ok(())));
            state.went(ok);
        });
    }

    /// A cooldown heard from the fleet (or read at a (re)connection).
    fn heard(&self, line: &str) {
        let mut parts = line.splitn(4, '\t');
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some("cool"), Some(key), Some(until), reason) => {
                let Ok(until) = until.parse::<u64>() else {
                    return;
                };
                let until = UNIX_EPOCH + Duration::from_millis(until);
                let now = SystemTime::now();
                if until > now {
                    self.mirror
                        .cool(key, now, until, reason.unwrap_or("cooling in the fleet"));
                }
            }
            (Some("recover"), Some(key), _, _) => self.mirror.recover(key, u64::MAX),
            _ => {}
        }
    }
}

/// Keeps the mirror fresh: subscribes, reads every cooldown key, then
/// applies what the fleet says; reconnects at least every second after a
/// loss. Ends when the state is dropped.
async fn listen(state: std::sync::Weak<RedisState>, client: redis::Client) {
    loop {
        let Some(strong) = state.upgrade() else {
            return;
        };
        let channel = strong.channel();
        let pattern = format!("{}:cool:*", strong.prefix);
        let timeout = strong.timeout.max(Duration::from_millis(500));
        drop(strong);
        let subscribed = async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(&channel).await?;
            Ok::<_, redis::RedisError>(pubsub)
        };
        let pubsub = match tokio::time::timeout(timeout, subscribed).await {
            Ok(Ok(pubsub)) => pubsub,
            _ => {
                if let Some(strong) = state.upgrade() {
                    strong.went(false);
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        // Subscribed first, then read: nothing said in between is lost.
        if let Some(strong) = state.upgrade() {
            let mut conn = strong.manager.clone();
            let read = async {
                // SCAN, not KEYS: a fleet's Redis must not stall on a read.
                let mut keys: Vec<String> = Vec::new();
                let mut cursor: u64 = 0;
                loop {
                    let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(&pattern)
                        .arg("COUNT")
                        .arg(500)
                        .query_async(&mut conn)
                        .await?;
                    keys.extend(batch);
                    if next == 0 {
                        break;
                    }
                    cursor = next;
                }
                let mut found = Vec::new();
                for key in keys {
                    let (left, reason): (i64, Option<String>) = redis::pipe()
                        .cmd("PTTL")
                        .arg(&key)
                        .cmd("GET")
                        .arg(&key)
                        .query_async(&mut conn)
                        .await?;
                    found.push((key, left, reason));
                }
                Ok::<_, redis::RedisError>(found)
            };
            match tokio::time::timeout(timeout, read).await {
                Ok(Ok(found)) => {
                    let cut = format!("{}:cool:", strong.prefix);
                    let now = unix_ms(SystemTime::now());
                    for (key, left, reason) in found {
                        if left > 0 {
                            let name = key.strip_prefix(&cut).unwrap_or(&key);
                            let line = format!(
                                "cool\t{name}\t{}\t{}",
                                now + left as u64,
                                reason.unwrap_or_default()
                            );
                            strong.heard(&line);
                        }
                    }
                    strong.went(true);
                    strong.synced.send_replace(true);
                }
                _ => strong.went(false),
            }
        }
        let mut messages = pubsub.into_on_message();
        while let Some(message) = messages.next().await {
            let Some(strong) = state.upgrade() else {
                return;
            };
            if let Ok(line) = message.get_payload::<String>() {
                strong.heard(&line);
            }
        }
        // The subscription ended: Redis is gone, or the connection was lost.
        if let Some(strong) = state.upgrade() {
            strong.went(false);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

impl SharedState for RedisState {
    fn cooling(&self, key: &str, now: SystemTime) -> Option<Cooling> {
        self.mirror.cooling(key, now)
    }

    fn cool(&self, key: &str, now: SystemTime, until: SystemTime, reason: &str) {
        self.mirror.cool(key, now, until, reason);
        // The fleet keeps it for as long, in real time.
        let left = until.duration_since(now).unwrap_or_default();
        let ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX).max(1);
        let real_until = unix_ms(SystemTime::now()).saturating_add(ms);
        let line = format!("cool\t{key}\t{real_until}\t{reason}");
        let keys = (self.key("cool", key), self.channel());
        let reason = reason.to_string();
        if let Some(this) = self.arc() {
            this.later(move |mut conn| {
                Box::pin(async move {
                    redis::Script::new(COOL)
                        .key(keys.0)
                        .key(keys.1)
                        .arg(ms)
                        .arg(reason)
                        .arg(line)
                        .invoke_async::<i64>(&mut conn)
                        .await
                        .map(|_| ())
                })
            });
        }
    }

    fn failures_in_a_row(&self, key: &str) -> u32 {
        self.mirror.failures_in_a_row(key)
    }

    fn epoch(&self) -> u64 {
        self.mirror.epoch()
    }

    fn recover(&self, key: &str, sent: u64) {
        let newer = self
            .mirror
            .cooling(key, SystemTime::now())
            .is_some_and(|c| c.epoch > sent);
        self.mirror.recover(key, sent);
        if newer {
            return; // a cooldown that began after this request: it stands
        }
        let cool_key = self.key("cool", key);
        let channel = self.channel();
        let line = format!("recover\t{key}");
        if let Some(this) = self.arc() {
            this.later(move |mut conn| {
                Box::pin(async move {
                    redis::pipe()
                        .cmd("DEL")
                        .arg(cool_key)
                        .ignore()
                        .cmd("PUBLISH")
                        .arg(channel)
                        .arg(line)
                        .ignore()
                        .query_async::<()>(&mut conn)
                        .await
                })
            });
        }
    }

    fn note_call(&self, key: &str, now: SystemTime, budget: &RetryBudget) {
        self.mirror.note_call(key, now, budget);
        let second = unix_ms(SystemTime::now()) / 1000;
        let bucket = format!("{}:{second}", self.key("calls", key));
        let window = budget.window.as_secs().max(1) + 1;
        if let Some(this) = self.arc() {
            this.later(move |mut conn| {
                Box::pin(async move {
                    redis::pipe()
                        .cmd("INCR")
                        .arg(&bucket)
                        .ignore()
                        .cmd("EXPIRE")
                        .arg(&bucket)
                        .arg(window)
                        .ignore()
                        .query_async::<()>(&mut conn)
                        .await
                })
            });
        }
    }

    fn spend_retry(&self, key: &str, now: SystemTime, budget: &RetryBudget) -> bool {
        if self.down.load(Ordering::SeqCst) {
            return self.mirror.spend_retry(key, now, budget);
        }
        let mut conn = self.manager.clone();
        let window = budget.window.as_secs().max(1);
        let reserve = budget.min_retries_per_second * budget.window.as_secs_f64();
        let second = unix_ms(SystemTime::now()) / 1000;
        let script = redis::Script::new(SPEND_RETRY);
        let mut invocation = script.key(self.key("calls", key));
        invocation
            .key(self.key("retries", key))
            .arg(window)
            .arg(budget.ratio)
            .arg(reserve)
            .arg(second);
        let asked = tokio::task::block_in_place(|| {
            self.handle.block_on(async {
                tokio::time::timeout(self.timeout, invocation.invoke_async::<i64>(&mut conn)).await
            })
        });
        match asked {
            Ok(Ok(granted)) => {
                self.went(true);
                if granted == 1 {
                    // Counted in the mirror too, for a fall back to start near the truth.
                    self.mirror.spend_retry(key, now, budget);
                }
                granted == 1
            }
            _ => {
                self.went(false);
                self.mirror.spend_retry(key, now, budget)
            }
        }
    }

    fn cooldowns(&self, now: SystemTime) -> Vec<(String, Duration)> {
        self.mirror.cooldowns(now)
    }

    fn settle(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        let mut synced = self.synced.subscribe();
        let timeout = self.timeout;
        Box::pin(async move {
            if *synced.borrow() || self.down.load(Ordering::SeqCst) {
                return;
            }
            // A fresh client's first call sees the fleet's cooldowns, within the timeout.
            let _ = tokio::time::timeout(timeout, synced.wait_for(|s| *s)).await;
        })
    }

    fn take_notice(&self) -> Option<String> {
        self.notice.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl RedisState {
    /// `self` as an `Arc`, for work that outlives the call (the state is
    /// always held in one).
    fn arc(&self) -> Option<Arc<Self>> {
        self.this.upgrade()
    }
}
