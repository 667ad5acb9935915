//! Fleet-wide state on Redis: the engine's [`SharedState`] shared by every
//! client with the same URL (database included) and prefix, from any
//! process or machine.
//!
//! The engine asks synchronously (`cooling`, `spend_retry`, ...), so reads
//! come from a local mirror that Redis keeps fresh: a subscription hears
//! every cooldown set or ended anywhere in the fleet (within a round trip),
//! and an index of the fleet's cooldowns (one hash, read whole) is read at
//! each (re)connection, when the mirror also writes back what it learned
//! while Redis was away. Writes leave through one ordered queue, so a
//! cooldown's end and a new cooldown arrive in the order they happened; a
//! call's first attempts are counted locally and flushed every 100 ms. Only
//! a retry's budget check waits on Redis (one script, bounded by the state
//! timeout): a shared budget cannot be decided locally. Whenever Redis is
//! down, slow or gone, the mirror is the in-process state: no call fails or
//! waits longer for it, the client says so once, and reconnects in the
//! background.
//!
//! When a cooldown ends, one call in the fleet probes the provider: it
//! holds a lease key (`{prefix}:probe:{key}`, set only if absent, expiring
//! after the attempt timeout unless extended) until its outcome is known;
//! the others pass the provider over meanwhile.
//!
//! Pool usage (`least_busy`) is shared the same way, on a timer rather than
//! per call: each process reports its counts every 100 ms, each report
//! good for a second, and reads everyone's back.
//!
//! Client-side limits ([`FleetLimits`]) are the fleet's too: each bucket is
//! three keys, `{prefix}:limit:{bucket}:leases` (a sorted set of the calls
//! in flight, each scored by when its lease runs out), `:window` (the
//! requests of the rolling minute, scored by when they started) and
//! `:tokens` (each request's tokens, and their sum under `=`). A take that
//! this process's own buckets allow runs one script that checks every
//! bucket of the provider and charges them all or none (bounded by the
//! state timeout and what the call can spare); corrections, unused
//! requests and released slots go through the write queue. A lease runs
//! out [`LEASE`] after it was last kept, so a process that dies holds no
//! slot for longer; the writer keeps this process's live leases every
//! [`KEEP_LEASES_EVERY`], one round trip for all of them (a stream open
//! for minutes keeps its slot without a task of its own). With Redis away,
//! the limits are this process's alone. A take whose answer never comes
//! back (timed out, or its call cancelled meanwhile) may still have been
//! charged: its lease, never kept, runs out on its own, and its start
//! counts in the window (one too many, never one too few).
//!
//! Times in Redis are wall-clock (TTLs); the sleeper clock governs only the
//! in-process mirror. A limit's window is the exception: its requests are
//! scored by the call's clock, so a wait it tells is one the call's clock
//! keeps (exact under a FakeSleeper; a fleet's machines keep their clocks
//! in step). A lease's expiry is Redis's own time, as a TTL is.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::{mpsc, watch};

use crate::engine::{
    Blocked, Cause, Cooling, EngineState, ErrorKind, FleetAnswer, FleetLimits, FleetState,
    Headroom, Health, Limit, LocalState, RetryBudget, FLEET_RECHECK,
};

/// Sets a cooldown: its key's expiry extended to `ARGV[1]` ms (never
/// shortened), its entry in the index, and a word to the fleet.
const COOL: &str = r#"
local left = redis.call('PTTL', KEYS[1])
if left < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[1])
  redis.call('HSET', KEYS[2], ARGV[4], ARGV[5])
end
redis.call('PUBLISH', KEYS[3], ARGV[3])
return 1
"#;

/// One retry, if the shared budget allows it. Calls and retries are
/// counted per bucket of `ARGV[5]` seconds; the window is `ARGV[1]`
/// buckets ending at bucket `ARGV[4]`; `ARGV[2]` the ratio, `ARGV[3]` the
/// reserve.
const SPEND_RETRY: &str = r#"
local buckets = tonumber(ARGV[1])
local now = tonumber(ARGV[4])
local calls, retries = 0, 0
for b = now - buckets + 1, now do
  calls = calls + tonumber(redis.call('GET', KEYS[1] .. ':' .. b) or '0')
  retries = retries + tonumber(redis.call('GET', KEYS[2] .. ':' .. b) or '0')
end
if retries + 1 > tonumber(ARGV[2]) * calls + tonumber(ARGV[3]) then
  return 0
end
local key = KEYS[2] .. ':' .. now
redis.call('INCR', key)
redis.call('EXPIRE', key, (buckets + 1) * tonumber(ARGV[5]))
return 1
"#;

/// Extends a probe's lease to `ARGV[2]` ms, if `ARGV[1]` still holds it.
const KEEP_PROBE: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
"#;

/// Gives a probe back, if `ARGV[1]` still holds it (its lease may have run
/// out and another call taken it since).
const RELEASE_PROBE: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
end
return 1
"#;

/// One request on every bucket, all or nothing. KEYS: per bucket, its
/// leases, window and tokens. ARGV: the call's time (Unix ms), the
/// request's tokens, its member name, the lease (ms); then per bucket its
/// concurrency, rpm and tpm (0: none). Returns `{1}`, or the bucket that
/// blocks longest: `{0, bucket, what (1 concurrency, 2 rpm, 3 tpm), when
/// it has room (Unix ms, -1: when a call ends), in flight or used}`.
/// Leases are timed by Redis, windows by the call. (Writes after `TIME`
/// replicate as effects: the default since Redis 5, asked for before.)
const TAKE: &str = r#"
redis.replicate_commands()
local now = tonumber(ARGV[1])
local need = ARGV[2]
local member = ARGV[3]
local lease = tonumber(ARGV[4])
local t = redis.call('TIME')
local real = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local horizon = now - 60000
local worst = nil
for i = 0, #KEYS / 3 - 1 do
  local leases, window, tokens = KEYS[3 * i + 1], KEYS[3 * i + 2], KEYS[3 * i + 3]
  local most = tonumber(ARGV[5 + 3 * i])
  local rpm = tonumber(ARGV[6 + 3 * i])
  local tpm = tonumber(ARGV[7 + 3 * i])
  local blocked = nil
  if rpm > 0 or tpm > 0 then
    local gone = redis.call('ZRANGEBYSCORE', window, '-inf', horizon)
    if #gone > 0 then
      redis.call('ZREMRANGEBYSCORE', window, '-inf', horizon)
      for _, old in ipairs(gone) do
        local n = redis.call('HGET', tokens, old)
        if n then
          redis.call('HDEL', tokens, old)
          redis.call('HINCRBY', tokens, '=', string.format('%d', -tonumber(n)))
        end
      end
    end
  end
  if most > 0 then
    redis.call('ZREMRANGEBYSCORE', leases, '-inf', real)
    local held = redis.call('ZCARD', leases)
    if held >= most then blocked = {1, -1, held} end
  end
  if not blocked and rpm > 0 then
    local started = redis.call('ZCARD', window)
    if started >= rpm then
      local nth = redis.call('ZRANGE', window, started - rpm, started - rpm, 'WITHSCORES')
      blocked = {2, tonumber(nth[2]) + 60000, started}
    end
  end
  if not blocked and tpm > 0 then
    local used = tonumber(redis.call('HGET', tokens, '=') or '0')
    local wanted = tonumber(need)
    if used > 0 and used + wanted > tpm then
      local at, freed = now, 0
      local oldest = redis.call('ZRANGE', window, 0, -1, 'WITHSCORES')
      for j = 1, #oldest, 2 do
        freed = freed + tonumber(redis.call('HGET', tokens, oldest[j]) or '0')
        at = tonumber(oldest[j + 1]) + 60000
        if used - freed + wanted <= tpm then break end
      end
      blocked = {3, at, used}
    end
  end
  if blocked and (not worst or blocked[2] == -1 or (worst[4] ~= -1 and blocked[2] > worst[4])) then
    worst = {0, i, blocked[1], blocked[2], blocked[3]}
  end
end
if worst then return worst end
for i = 0, #KEYS / 3 - 1 do
  local leases, window, tokens = KEYS[3 * i + 1], KEYS[3 * i + 2], KEYS[3 * i + 3]
  if tonumber(ARGV[5 + 3 * i]) > 0 then
    redis.call('ZADD', leases, real + lease, member)
    redis.call('PEXPIRE', leases, lease + 1000)
  end
  if tonumber(ARGV[6 + 3 * i]) > 0 or tonumber(ARGV[7 + 3 * i]) > 0 then
    redis.call('ZADD', window, now, member)
    redis.call('PEXPIRE', window, 61000)
  end
  if tonumber(ARGV[7 + 3 * i]) > 0 then
    redis.call('HSET', tokens, member, need)
    redis.call('HINCRBY', tokens, '=', need)
    redis.call('PEXPIRE', tokens, 61000)
  end
end
return {1}
"#;

/// A request's tokens corrected to `ARGV[2]` in each bucket's tokens
/// (KEYS), if it is still in the window there (member `ARGV[1]`).
const CORRECT: &str = r#"
for i = 1, #KEYS do
  local old = redis.call('HGET', KEYS[i], ARGV[1])
  if old then
    redis.call('HSET', KEYS[i], ARGV[1], ARGV[2])
    redis.call('HINCRBY', KEYS[i], '=', string.format('%d', tonumber(ARGV[2]) - tonumber(old)))
  end
end
return 1
"#;

/// A request never sent leaves every bucket (KEYS: per bucket its leases,
/// window and tokens; member `ARGV[1]`).
const UNUSED: &str = r#"
for i = 1, #KEYS, 3 do
  redis.call('ZREM', KEYS[i], ARGV[1])
  redis.call('ZREM', KEYS[i + 1], ARGV[1])
  local old = redis.call('HGET', KEYS[i + 2], ARGV[1])
  if old then
    redis.call('HDEL', KEYS[i + 2], ARGV[1])
    redis.call('HINCRBY', KEYS[i + 2], '=', string.format('%d', -tonumber(old)))
  end
end
return 1
"#;

/// Live leases kept: each member `ARGV[i + 1]` of KEYS[i] runs out
/// `ARGV[1]` ms from now (Redis's time), added again if it had run out
/// (its call is still in flight).
const KEEP_LEASES: &str = r#"
redis.replicate_commands()
local t = redis.call('TIME')
local lease = tonumber(ARGV[1])
local until_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + lease
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], until_ms, ARGV[i + 1])
  redis.call('PEXPIRE', KEYS[i], lease + 1000)
end
return 1
"#;

/// The scripts, hashed once (a retry's budget check runs one on its path).
static COOL_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(COOL));
static SPEND_RETRY_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(SPEND_RETRY));
static KEEP_PROBE_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(KEEP_PROBE));
static RELEASE_PROBE_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(RELEASE_PROBE));
static TAKE_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(TAKE));
static CORRECT_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(CORRECT));
static UNUSED_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(UNUSED));
static KEEP_LEASES_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(KEEP_LEASES));

/// How long a call's slot in the fleet outlives the last time its process
/// kept it: what a process that dies holds at most.
pub const LEASE: Duration = Duration::from_secs(3);
/// How often a process keeps its live leases (three times a lease: two
/// missed in a row still hold the slot).
pub const KEEP_LEASES_EVERY: Duration = Duration::from_secs(1);

/// How often first attempts counted locally are flushed to the fleet.
const FLUSH_EVERY: Duration = Duration::from_millis(100);
/// The most buckets a budget window is counted in: a long window costs
/// no more per retry than a short one.
const MAX_BUCKETS: u64 = 10;
/// How long after a lost connection the next is tried, at most.
const RECONNECT_EVERY: Duration = Duration::from_secs(1);

/// A write to Redis, in the order it happened.
enum Write {
    Cool {
        key: String,
        ms: u64,
        cause: Cause,
        until_ms: u64,
    },
    Recover {
        key: String,
    },
    /// A probe's lease extended to `ms` (its holder waits to try again).
    KeepProbe {
        key: String,
        holder: String,
        ms: u64,
    },
    /// A probe given back.
    ReleaseProbe {
        key: String,
        holder: String,
    },
    /// A request's tokens corrected (`keys`: its buckets' tokens).
    Correct {
        keys: Vec<String>,
        member: String,
        tokens: u64,
    },
    /// A request never sent (`keys`: per bucket, leases, window, tokens).
    Unused {
        keys: Vec<String>,
        member: String,
    },
    /// A call's slots given back (`keys`: its buckets' leases).
    Release {
        keys: Vec<String>,
        member: String,
    },
}

/// A request this process charged in the fleet, until its permit drops.
struct Charge {
    /// Its name in the buckets' keys: this process and its number.
    member: String,
    /// Per bucket: leases, window and tokens keys.
    keys: Vec<String>,
    /// The leases it holds (of the buckets with a concurrency).
    leases: Vec<String>,
    /// The tokens keys it is charged in (of the buckets with a tpm).
    tokens: Vec<String>,
}

/// What a client shares through Redis.
pub struct RedisState {
    mirror: LocalState,
    prefix: String,
    /// `{prefix}:events:{db}`: pub/sub ignores the database, names do not.
    channel: String,
    /// `{prefix}:cooldowns`: every cooldown key and until when, read whole.
    index: String,
    timeout: Duration,
    manager: ConnectionManager,
    handle: tokio::runtime::Handle,
    /// Redis failed the last time it was asked.
    down: AtomicBool,
    /// What to tell the caller, in order (Redis lost, Redis back).
    notices: Mutex<Vec<String>>,
    /// The mirror has read the fleet's cooldowns once, or a call has waited
    /// its `timeout` for that in vain: a fresh client's first call waits
    /// (briefly) for it, never later calls.
    synced_once: watch::Sender<bool>,
    writes: mpsc::UnboundedSender<Write>,
    /// First attempts not flushed yet: (counter key, bucket) -> calls.
    calls: Mutex<HashMap<(String, u64), u64>>,
    /// This process's calls busy at each pool member, and its name in the
    /// fleet's count (`{prefix}:busy`, fields `{id}|{key}`).
    busy: Mutex<HashMap<String, i64>>,
    id: String,
    /// The other processes' calls busy at each member, as last read.
    busy_elsewhere: Mutex<HashMap<String, u64>>,
    /// The requests charged in the fleet's limits whose permits live, by
    /// charge number.
    charges: Mutex<HashMap<u64, Charge>>,
    next_charge: AtomicU64,
}

impl std::fmt::Debug for RedisState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisState")
            .field("prefix", &self.prefix)
            .finish()
    }
}

/// A cooldown as the fleet stores it (the index's value, and a `cool`
/// line after its key): `{until_ms}\t{reason}\t{kind}\t{status}\t{retry_after_us}`,
/// a part not known empty. The reason's own tabs and line breaks are
/// spaces, so the parts after it are found from the end.
fn encode_cooling(until_ms: u64, cause: &Cause) -> String {
    let reason: String = cause
        .reason
        .chars()
        .map(|c| {
            if matches!(c, '\t' | '\n' | '\r') {
                ' '
            } else {
                c
            }
        })
        .collect();
    let kind = cause.kind.map_or("", ErrorKind::as_str);
    let status = cause.status.map_or_else(String::new, |s| s.to_string());
    let retry_after = cause
        .retry_after
        .map_or_else(String::new, |d| d.as_micros().to_string());
    format!("{until_ms}\t{reason}\t{kind}\t{status}\t{retry_after}")
}

/// A stored cooldown read back: until when (Unix ms) and why. A value
/// written before the cause crossed (`{until_ms}\t{reason}`, or no reason)
/// is a cause in words only, as is one whose parts do not read.
fn decode_cooling(value: &str) -> Option<(u64, Cause)> {
    let (until, rest) = value.split_once('\t').unwrap_or((value, ""));
    let until = until.parse::<u64>().ok()?;
    let typed = || {
        let mut parts = rest.rsplitn(4, '\t');
        let (retry_after, status, kind, reason) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        fn known(part: &str) -> Option<&str> {
            (!part.is_empty()).then_some(part)
        }
        Some(Cause {
            reason: reason.to_string(),
            kind: match known(kind) {
                Some(kind) => Some(ErrorKind::parse(kind)?),
                None => None,
            },
            status: match known(status) {
                Some(status) => Some(status.parse().ok()?),
                None => None,
            },
            retry_after: match known(retry_after) {
                Some(us) => Some(Duration::from_micros(us.parse().ok()?)),
                None => None,
            },
        })
    };
    Some((until, typed().unwrap_or_else(|| Cause::because(rest))))
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A budget window as buckets: (bucket length in seconds, how many).
fn buckets(budget: &RetryBudget) -> (u64, u64) {
    let window = budget.window.as_secs().max(1);
    let size = window.div_ceil(MAX_BUCKETS).max(1);
    (size, window.div_ceil(size))
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
        let client =
            redis::Client::open(url).map_err(|e| format!("RedisState needs a Redis URL: {e}"))?;
        let db = client.get_connection_info().redis_settings().db();
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(1).max(timeout)))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1)
            .set_max_delay(RECONNECT_EVERY);
        let manager = {
            let _entered = handle.enter();
            ConnectionManager::new_lazy_with_config(client.clone(), config)
                .map_err(|e| format!("cannot use Redis: {e}"))?
        };
        let (synced_once, _) = watch::channel(false);
        let (writes, queue) = mpsc::unbounded_channel();
        let state = Arc::new(Self {
            mirror: LocalState::new(),
            prefix: prefix.to_string(),
            channel: format!("{prefix}:events:{db}"),
            index: format!("{prefix}:cooldowns"),
            timeout,
            manager,
            handle: handle.clone(),
            down: AtomicBool::new(false),
            notices: Mutex::new(Vec::new()),
            synced_once,
            writes,
            calls: Mutex::new(HashMap::new()),
            busy: Mutex::new(HashMap::new()),
            id: format!("{:016x}", rand::random::<u64>()),
            busy_elsewhere: Mutex::new(HashMap::new()),
            charges: Mutex::new(HashMap::new()),
            next_charge: AtomicU64::new(1),
        });
        handle.spawn(listen(Arc::downgrade(&state), client));
        handle.spawn(write(Arc::downgrade(&state), queue));
        Ok(state)
    }

    fn key(&self, what: &str, key: &str) -> String {
        format!("{}:{what}:{key}", self.prefix)
    }

    /// A probe's holder in the fleet: this process and its token.
    fn holder(&self, token: u64) -> String {
        format!("{}:{token}", self.id)
    }

    /// Asks Redis once, in place (the engine asks synchronously), waiting at
    /// most the state timeout, and at most `within` (what the call can
    /// spare before its deadline).
    fn ask<T>(
        &self,
        within: Option<Duration>,
        question: impl Future<Output = redis::RedisResult<T>>,
    ) -> Asked<T> {
        let bound = within.map_or(self.timeout, |w| w.min(self.timeout));
        let asked = tokio::task::block_in_place(|| {
            self.handle
                .block_on(async { tokio::time::timeout(bound, question).await })
        });
        match asked {
            Ok(answer) => Asked::Answer(answer),
            Err(_) if bound < self.timeout => Asked::NoTimeToSpare,
            Err(_) => Asked::TimedOut,
        }
    }

    /// [`RedisState::ask`] for a caller that can await: the same bounds.
    async fn ask_async<T>(
        &self,
        within: Option<Duration>,
        question: impl Future<Output = redis::RedisResult<T>>,
    ) -> Asked<T> {
        let bound = within.map_or(self.timeout, |w| w.min(self.timeout));
        match tokio::time::timeout(bound, question).await {
            Ok(answer) => Asked::Answer(answer),
            Err(_) if bound < self.timeout => Asked::NoTimeToSpare,
            Err(_) => Asked::TimedOut,
        }
    }

    fn charges(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Charge>> {
        self.charges.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes how the last exchange with Redis went: a change is said once.
    fn went(&self, ok: bool, why: &str) {
        let was_down = self.down.swap(!ok, Ordering::SeqCst);
        // One log line: a server that is not Redis can make the client's
        // parse errors span several.
        let why = why.split_whitespace().collect::<Vec<_>>().join(" ");
        let text = match (was_down, ok) {
            (false, false) => format!(
                "Redis state is unavailable ({why}): this client uses its in-process state \
                 until Redis answers again"
            ),
            (true, true) => {
                "Redis state is back: cooldowns, the retry budget and limits are shared again"
                    .to_string()
            }
            _ => return,
        };
        self.notices
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(text);
    }

    /// A cooldown heard from the fleet (or read from the index).
    fn heard(&self, line: &str) {
        let mut parts = line.splitn(3, '\t');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("cool"), Some(key), Some(cooling)) => {
                let Some((until, mut cause)) = decode_cooling(cooling) else {
                    return;
                };
                let until = UNIX_EPOCH + Duration::from_millis(until);
                let now = SystemTime::now();
                if until > now {
                    if cause.reason.is_empty() {
                        cause.reason = "cooling in the fleet".to_string();
                    }
                    self.mirror.cool(key, now, until, &cause);
                }
            }
            (Some("recover"), Some(key), _) => self.mirror.recover(key, u64::MAX),
            _ => {}
        }
    }
}

/// Writes in order, each bounded by the timeout; flushes counted calls.
async fn write(state: Weak<RedisState>, mut queue: mpsc::UnboundedReceiver<Write>) {
    let mut flush = tokio::time::interval(FLUSH_EVERY);
    let mut leases_kept = tokio::time::Instant::now();
    let mut pinged = tokio::time::Instant::now();
    loop {
        let next = tokio::select! {
            write = queue.recv() => match write {
                Some(write) => Some(write),
                None => return,
            },
            _ = flush.tick() => None,
        };
        let Some(this) = state.upgrade() else { return };
        let mut conn = this.manager.clone();
        let done = match next {
            Some(Write::Cool {
                key,
                ms,
                cause,
                until_ms,
            }) => {
                let cooling = encode_cooling(until_ms, &cause);
                let line = format!("cool\t{key}\t{cooling}");
                let mut call = COOL_SCRIPT.key(this.key("cool", &key));
                call.key(&this.index)
                    .key(&this.channel)
                    .arg(ms)
                    .arg(&cause.reason)
                    .arg(&line)
                    .arg(&key)
                    .arg(&cooling);
                tokio::time::timeout(this.timeout, call.invoke_async::<i64>(&mut conn))
                    .await
                    .map(|r| r.map(|_| ()))
            }
            Some(Write::Recover { key }) => {
                let mut pipe = redis::pipe();
                pipe.cmd("DEL")
                    .arg(this.key("cool", &key))
                    .ignore()
                    .cmd("HDEL")
                    .arg(&this.index)
                    .arg(&key)
                    .ignore()
                    .cmd("PUBLISH")
                    .arg(&this.channel)
                    .arg(format!("recover\t{key}"))
                    .ignore();
                tokio::time::timeout(this.timeout, pipe.query_async::<()>(&mut conn)).await
            }
            Some(Write::KeepProbe { key, holder, ms }) => {
                let mut call = KEEP_PROBE_SCRIPT.key(this.key("probe", &key));
                call.arg(&holder).arg(ms);
                tokio::time::timeout(this.timeout, call.invoke_async::<i64>(&mut conn))
                    .await
                    .map(|r| r.map(|_| ()))
            }
            Some(Write::ReleaseProbe { key, holder }) => {
                let mut call = RELEASE_PROBE_SCRIPT.key(this.key("probe", &key));
                call.arg(&holder);
                tokio::time::timeout(this.timeout, call.invoke_async::<i64>(&mut conn))
                    .await
                    .map(|r| r.map(|_| ()))
            }
            Some(Write::Correct {
                keys,
                member,
                tokens,
            }) => {
                let mut call = CORRECT_SCRIPT.prepare_invoke();
                for key in &keys {
                    call.key(key);
                }
                call.arg(&member).arg(tokens);
                tokio::time::timeout(this.timeout, call.invoke_async::<i64>(&mut conn))
                    .await
                    .map(|r| r.map(|_| ()))
            }
            Some(Write::Unused { keys, member }) => {
                let mut call = UNUSED_SCRIPT.prepare_invoke();
                for key in &keys {
                    call.key(key);
                }
                call.arg(&member);
                tokio::time::timeout(this.timeout, call.invoke_async::<i64>(&mut conn))
                    .await
                    .map(|r| r.map(|_| ()))
            }
            Some(Write::Release { keys, member }) => {
                let mut pipe = redis::pipe();
                for key in &keys {
                    pipe.cmd("ZREM").arg(key).arg(&member).ignore();
                }
                tokio::time::timeout(this.timeout, pipe.query_async::<()>(&mut conn)).await
            }
            None => {
                // Taken for down, Redis is asked nothing on a call's path
                // (limits, the budget): asked here whether it is back.
                if this.down.load(Ordering::SeqCst) && pinged.elapsed() >= RECONNECT_EVERY {
                    pinged = tokio::time::Instant::now();
                    let ping = redis::cmd("PING");
                    let pong = ping.query_async::<()>(&mut conn);
                    this.report(tokio::time::timeout(this.timeout, pong).await);
                }
                if leases_kept.elapsed() >= KEEP_LEASES_EVERY {
                    leases_kept = tokio::time::Instant::now();
                    if let Some(kept) = this.keep_leases(&mut conn).await {
                        this.report(kept);
                    }
                }
                let counted: Vec<((String, u64), u64)> = this
                    .calls
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .drain()
                    .collect();
                // A pool ordered here (even with nothing busy) reads the fleet's counts.
                let (busy, ordering): (Vec<(String, i64)>, bool) = {
                    let map = this.busy.lock().unwrap_or_else(|e| e.into_inner());
                    let busy = map
                        .iter()
                        .filter(|(_, n)| **n > 0)
                        .map(|(k, n)| (k.clone(), *n))
                        .collect();
                    (busy, !map.is_empty())
                };
                let pools = ordering;
                if counted.is_empty() && !pools {
                    continue;
                }
                let mut pipe = redis::pipe();
                for ((counter, bucket), n) in &counted {
                    let key = format!("{counter}:{bucket}");
                    pipe.cmd("INCRBY").arg(&key).arg(*n).ignore();
                    pipe.cmd("EXPIRE").arg(&key).arg(3600).ignore();
                }
                if !pools {
                    let flushed =
                        tokio::time::timeout(this.timeout, pipe.query_async::<()>(&mut conn)).await;
                    this.report(flushed);
                    continue;
                }
                // Pool usage: this process's counts, each good for a second (a
                // process that dies stops counting), and everyone's, read back.
                let until = unix_ms(SystemTime::now()) + 1_000;
                let table = format!("{}:busy", this.prefix);
                for (key, n) in &busy {
                    pipe.cmd("HSET")
                        .arg(&table)
                        .arg(format!("{}|{key}", this.id))
                        .arg(format!("{n}|{until}"))
                        .ignore();
                }
                pipe.cmd("EXPIRE").arg(&table).arg(60).ignore();
                pipe.cmd("HGETALL").arg(&table);
                let read = tokio::time::timeout(
                    this.timeout,
                    pipe.query_async::<(HashMap<String, String>,)>(&mut conn),
                )
                .await;
                if let Ok(Ok((fields,))) = &read {
                    this.count_busy(fields);
                }
                this.report(read.map(|r| r.map(|_| ())));
                continue;
            }
        };
        this.report(done);
    }
}

impl RedisState {
    /// Extends every live lease of this process by a [`LEASE`]: one script
    /// for all of them; `None` when none is live.
    async fn keep_leases(
        &self,
        conn: &mut ConnectionManager,
    ) -> Option<Result<redis::RedisResult<()>, tokio::time::error::Elapsed>> {
        let live: Vec<(String, String)> = self
            .charges()
            .values()
            .flat_map(|charge| {
                let member = &charge.member;
                charge
                    .leases
                    .iter()
                    .map(|key| (key.clone(), member.clone()))
            })
            .collect();
        if live.is_empty() {
            return None;
        }
        let mut call = KEEP_LEASES_SCRIPT.prepare_invoke();
        call.arg(u64::try_from(LEASE.as_millis()).unwrap_or(u64::MAX));
        for (key, member) in &live {
            call.key(key).arg(member);
        }
        let kept = tokio::time::timeout(self.timeout, call.invoke_async::<i64>(conn)).await;
        Some(kept.map(|r| r.map(|_| ())))
    }

    fn report(&self, done: Result<redis::RedisResult<()>, tokio::time::error::Elapsed>) {
        match done {
            Ok(Ok(())) => self.went(true, ""),
            Ok(Err(e)) => self.went(false, &e.to_string()),
            Err(_) => self.went(false, "no answer within the state timeout"),
        }
    }

    /// The others' counts from the fleet's table: live fields only.
    fn count_busy(&self, fields: &HashMap<String, String>) {
        let now = unix_ms(SystemTime::now());
        let mine = format!("{}|", self.id);
        let mut others: HashMap<String, u64> = HashMap::new();
        for (field, value) in fields {
            if field.starts_with(&mine) {
                continue;
            }
            let Some((_, key)) = field.split_once('|') else {
                continue;
            };
            let Some((n, until)) = value.split_once('|') else {
                continue;
            };
            if until.parse::<u64>().is_ok_and(|u| u > now) {
                *others.entry(key.to_string()).or_default() += n.parse::<u64>().unwrap_or(0);
            }
        }
        *self
            .busy_elsewhere
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = others;
    }
}

/// Keeps the mirror fresh: subscribes, reads the fleet's cooldowns (and
/// writes back its own), then applies what the fleet says; reconnects at
/// least every second after a loss. Ends when the state is dropped.
async fn listen(state: Weak<RedisState>, client: redis::Client) {
    loop {
        let Some(this) = state.upgrade() else { return };
        let wait = this.timeout.max(Duration::from_millis(500));
        let channel = this.channel.clone();
        drop(this);
        let subscribed = async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(&channel).await?;
            Ok::<_, redis::RedisError>(pubsub)
        };
        let pubsub = match tokio::time::timeout(wait, subscribed).await {
            Ok(Ok(pubsub)) => pubsub,
            outcome => {
                if let Some(this) = state.upgrade() {
                    let why = match outcome {
                        Ok(Err(e)) => e.to_string(),
                        _ => "no connection within the state timeout".to_string(),
                    };
                    this.went(false, &why);
                }
                tokio::time::sleep(RECONNECT_EVERY).await;
                continue;
            }
        };
        // Subscribed first, then read: nothing said in between is lost.
        // The read is retried until it succeeds or the subscription ends.
        let reader = tokio::spawn(read_index(state.clone(), wait));
        let mut messages = pubsub.into_on_message();
        while let Some(message) = messages.next().await {
            let Some(this) = state.upgrade() else { return };
            if let Ok(line) = message.get_payload::<String>() {
                this.heard(&line);
            }
        }
        reader.abort();
        // The subscription ended: Redis is gone, or the connection was lost.
        if let Some(this) = state.upgrade() {
            this.went(false, "the connection was lost");
        }
        tokio::time::sleep(RECONNECT_EVERY).await;
    }
}

/// Reads the index of the fleet's cooldowns into the mirror, drops the
/// ended ones from it, and writes back the mirror's own (learned while
/// Redis was away); retried until it succeeds.
async fn read_index(state: Weak<RedisState>, wait: Duration) {
    loop {
        let Some(this) = state.upgrade() else { return };
        let mut conn = this.manager.clone();
        let read = tokio::time::timeout(
            wait,
            redis::cmd("HGETALL")
                .arg(&this.index)
                .query_async::<HashMap<String, String>>(&mut conn),
        )
        .await;
        match read {
            Ok(Ok(entries)) => {
                let now = unix_ms(SystemTime::now());
                let mut ended = Vec::new();
                for (key, value) in &entries {
                    match decode_cooling(value) {
                        Some((until, _)) if until > now => {
                            this.heard(&format!("cool\t{key}\t{value}"))
                        }
                        _ => ended.push(key.clone()),
                    }
                }
                if !ended.is_empty() {
                    let _ = tokio::time::timeout(
                        wait,
                        redis::cmd("HDEL")
                            .arg(&this.index)
                            .arg(&ended)
                            .query_async::<()>(&mut conn),
                    )
                    .await;
                }
                // What this client learned while Redis was away, for the fleet.
                let wall = SystemTime::now();
                for (key, left) in this.mirror.cooldowns(wall) {
                    if !entries.contains_key(&key) {
                        let cause = this
                            .mirror
                            .cooling(&key, wall)
                            .map_or_else(Cause::default, |c| c.cause);
                        let ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX).max(1);
                        let _ = this.writes.send(Write::Cool {
                            until_ms: unix_ms(wall).saturating_add(ms),
                            key,
                            ms,
                            cause,
                        });
                    }
                }
                this.went(true, "");
                this.synced_once.send_replace(true);
                return;
            }
            Ok(Err(e)) => this.went(false, &e.to_string()),
            Err(_) => this.went(false, "no answer within the state timeout"),
        }
        drop(this);
        tokio::time::sleep(RECONNECT_EVERY).await;
    }
}

/// How a question to Redis went.
enum Asked<T> {
    Answer(redis::RedisResult<T>),
    /// No answer within the state timeout: Redis is taken for down.
    TimedOut,
    /// No answer within what the call could spare: this call goes on with
    /// the mirror, and says nothing of Redis.
    NoTimeToSpare,
}

impl EngineState for RedisState {
    fn cooling(&self, key: &str, now: SystemTime) -> Option<Cooling> {
        self.mirror.cooling(key, now)
    }

    fn cool(&self, key: &str, now: SystemTime, until: SystemTime, cause: &Cause) {
        self.mirror.cool(key, now, until, cause);
        // Redis keeps it for as long, in real time; the fleet is told the
        // same end as this mirror holds, so the echo changes nothing here
        // (under a FakeSleeper, whose clock is not the real one, too).
        let left = until.duration_since(now).unwrap_or_default();
        let ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX).max(1);
        let _ = self.writes.send(Write::Cool {
            key: key.to_string(),
            ms,
            cause: cause.clone(),
            until_ms: unix_ms(until),
        });
    }

    /// Kept in this process: headroom is what this client's own requests
    /// were told.
    fn saw_headroom(&self, key: &str, now: SystemTime, headroom: Headroom) {
        self.mirror.saw_headroom(key, now, headroom);
    }

    fn failures_in_a_row(&self, key: &str) -> u32 {
        self.mirror.failures_in_a_row(key)
    }

    fn epoch(&self) -> u64 {
        self.mirror.epoch()
    }

    fn recover(&self, key: &str, sent: u64) {
        // Only a cooldown the mirror knows of (running, or ended with its
        // circuit half-open) is the fleet's to end: a success with nothing
        // cooling says nothing to anyone.
        let Some(cooling) = self.mirror.open(key) else {
            self.mirror.recover(key, sent);
            return;
        };
        self.mirror.recover(key, sent);
        if cooling.epoch <= sent {
            let _ = self.writes.send(Write::Recover {
                key: key.to_string(),
            });
        }
    }

    fn note_call(&self, key: &str, now: SystemTime, budget: &RetryBudget) {
        self.mirror.note_call(key, now, budget);
        let (size, _) = buckets(budget);
        let bucket = unix_ms(SystemTime::now()) / 1000 / size;
        let counter = format!("{}:{size}", self.key("calls", key));
        *self
            .calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry((counter, bucket))
            .or_default() += 1;
    }

    fn spend_retry(
        &self,
        key: &str,
        now: SystemTime,
        budget: &RetryBudget,
        within: Option<Duration>,
    ) -> bool {
        if self.down.load(Ordering::SeqCst) {
            return self.mirror.spend_retry(key, now, budget, None);
        }
        let mut conn = self.manager.clone();
        let (size, count) = buckets(budget);
        let reserve = budget.min_retries_per_second * budget.window.as_secs_f64();
        let bucket = unix_ms(SystemTime::now()) / 1000 / size;
        let mut invocation = SPEND_RETRY_SCRIPT.key(format!("{}:{size}", self.key("calls", key)));
        invocation
            .key(format!("{}:{size}", self.key("retries", key)))
            .arg(count)
            .arg(budget.ratio)
            .arg(reserve)
            .arg(bucket)
            .arg(size);
        let asked = self.ask(within, invocation.invoke_async::<i64>(&mut conn));
        match asked {
            Asked::Answer(Ok(granted)) => {
                self.went(true, "");
                if granted == 1 {
                    // Counted in the mirror too, for a fall back to start near the truth.
                    self.mirror.spend_retry(key, now, budget, None);
                }
                granted == 1
            }
            Asked::Answer(Err(e)) => {
                self.went(false, &e.to_string());
                self.mirror.spend_retry(key, now, budget, None)
            }
            Asked::TimedOut => {
                self.went(false, "no answer within the state timeout");
                self.mirror.spend_retry(key, now, budget, None)
            }
            Asked::NoTimeToSpare => self.mirror.spend_retry(key, now, budget, None),
        }
    }

    fn half_open(&self, key: &str, now: SystemTime) -> Option<Cooling> {
        self.mirror.half_open(key, now)
    }

    /// One probe per process (the mirror's), then one in the fleet: a lease
    /// key set only if absent, expiring on its own (a prober that crashed
    /// holds nothing for longer than its lease). With Redis down, the
    /// process's own probe.
    fn take_probe(
        &self,
        key: &str,
        now: SystemTime,
        lease: Duration,
        within: Option<Duration>,
    ) -> Option<u64> {
        let token = self.mirror.take_probe(key, now, lease, None)?;
        if self.down.load(Ordering::SeqCst) {
            return Some(token);
        }
        let mut conn = self.manager.clone();
        let ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX).max(1);
        let mut set = redis::cmd("SET");
        set.arg(self.key("probe", key))
            .arg(self.holder(token))
            .arg("NX")
            .arg("PX")
            .arg(ms);
        let asked = self.ask(within, set.query_async::<Option<String>>(&mut conn));
        match asked {
            Asked::Answer(Ok(Some(_))) => {
                self.went(true, "");
                Some(token)
            }
            Asked::Answer(Ok(None)) => {
                self.went(true, "");
                self.mirror.release_probe(key, token);
                None
            }
            Asked::Answer(Err(e)) => {
                self.went(false, &e.to_string());
                Some(token)
            }
            Asked::TimedOut => {
                self.went(false, "no answer within the state timeout");
                Some(token)
            }
            Asked::NoTimeToSpare => Some(token),
        }
    }

    fn probed(&self, key: &str, now: SystemTime) -> bool {
        self.mirror.probed(key, now)
    }

    fn keep_probe(&self, key: &str, token: u64, now: SystemTime, lease: Duration) {
        self.mirror.keep_probe(key, token, now, lease);
        let _ = self.writes.send(Write::KeepProbe {
            key: key.to_string(),
            holder: self.holder(token),
            ms: u64::try_from(lease.as_millis()).unwrap_or(u64::MAX).max(1),
        });
    }

    fn release_probe(&self, key: &str, token: u64) {
        self.mirror.release_probe(key, token);
        // In the same queue as the probe's outcome, after it: Redis holds
        // the cooldown's end (or the next cooldown) before the lease goes.
        let _ = self.writes.send(Write::ReleaseProbe {
            key: key.to_string(),
            holder: self.holder(token),
        });
    }
}

/// Why the fleet's bucket `limit` refused a request of `need` tokens at
/// `now`, from the take script's answer (`what`, `at_ms`, `count`).
fn fleet_blocked(
    limit: Limit,
    need: u64,
    now: SystemTime,
    what: i64,
    at_ms: i64,
    count: i64,
) -> Blocked {
    let at = u64::try_from(at_ms)
        .ok()
        .map(|ms| UNIX_EPOCH + Duration::from_millis(ms));
    let after = at.map_or(0.0, |at| {
        at.duration_since(now).unwrap_or_default().as_secs_f64()
    });
    let why = match what {
        1 => format!(
            "at its concurrency limit in the fleet ({} in flight)",
            limit
                .concurrency
                .unwrap_or_default()
                .max(u32::try_from(count).unwrap_or(0))
        ),
        2 => format!("rpm limit in the fleet: capacity in {after:.1}s"),
        _ => format!(
            "tpm limit in the fleet ({count} of {} used, {need} needed): capacity in {after:.1}s",
            limit.tpm.unwrap_or_default()
        ),
    };
    // A slot held elsewhere frees unheard here: the waiter asks again.
    let recheck = (what == 1).then_some(FLEET_RECHECK);
    Blocked { why, at, recheck }
}

/// The limits are the fleet's: one script per take (see the module's doc).
impl FleetLimits for RedisState {
    fn take(
        &self,
        buckets: Vec<(String, Limit)>,
        now: SystemTime,
        tokens: u64,
        within: Option<Duration>,
    ) -> FleetAnswer<'_> {
        Box::pin(async move {
            if self.down.load(Ordering::SeqCst) {
                return None;
            }
            let charge = self.next_charge.fetch_add(1, Ordering::Relaxed);
            let member = self.holder(charge);
            let mut keys = Vec::with_capacity(buckets.len() * 3);
            let mut leases = Vec::new();
            let mut charged = Vec::new();
            let mut call = TAKE_SCRIPT.prepare_invoke();
            call.arg(unix_ms(now))
                .arg(tokens)
                .arg(&member)
                .arg(u64::try_from(LEASE.as_millis()).unwrap_or(u64::MAX));
            for (name, limit) in &buckets {
                let base = self.key("limit", name);
                let (lease, window, tokens) = (
                    format!("{base}:leases"),
                    format!("{base}:window"),
                    format!("{base}:tokens"),
                );
                call.key(&lease).key(&window).key(&tokens);
                call.arg(limit.concurrency.unwrap_or(0))
                    .arg(limit.rpm.unwrap_or(0))
                    .arg(limit.tpm.unwrap_or(0));
                if limit.concurrency.is_some() {
                    leases.push(lease.clone());
                }
                if limit.tpm.is_some() {
                    charged.push(tokens.clone());
                }
                keys.extend([lease, window, tokens]);
            }
            let mut conn = self.manager.clone();
            let asked = self
                .ask_async(within, call.invoke_async::<Vec<i64>>(&mut conn))
                .await;
            match asked {
                Asked::Answer(Ok(reply)) => {
                    self.went(true, "");
                    if let [0, bucket, what, at_ms, count] = reply[..] {
                        let limit = usize::try_from(bucket)
                            .ok()
                            .and_then(|b| buckets.get(b))
                            .map_or_else(Limit::default, |(_, limit)| *limit);
                        return Some(Err(fleet_blocked(limit, tokens, now, what, at_ms, count)));
                    }
                    self.charges().insert(
                        charge,
                        Charge {
                            member,
                            keys,
                            leases,
                            tokens: charged,
                        },
                    );
                    Some(Ok(charge))
                }
                Asked::Answer(Err(e)) => {
                    self.went(false, &e.to_string());
                    None
                }
                Asked::TimedOut => {
                    self.went(false, "no answer within the state timeout");
                    None
                }
                Asked::NoTimeToSpare => None,
            }
        })
    }

    fn correct(&self, charge: u64, tokens: u64) {
        let write = match self.charges().get(&charge) {
            Some(charged) if !charged.tokens.is_empty() => Write::Correct {
                keys: charged.tokens.clone(),
                member: charged.member.clone(),
                tokens,
            },
            _ => return,
        };
        let _ = self.writes.send(write);
    }

    fn unused(&self, charge: u64) {
        if let Some(charged) = self.charges().remove(&charge) {
            let _ = self.writes.send(Write::Unused {
                keys: charged.keys,
                member: charged.member,
            });
        }
    }

    fn release(&self, charge: u64) {
        let Some(charged) = self.charges().remove(&charge) else {
            return;
        };
        if !charged.leases.is_empty() {
            let _ = self.writes.send(Write::Release {
                keys: charged.leases,
                member: charged.member,
            });
        }
    }
}

impl FleetState for RedisState {
    fn cooldowns(&self, now: SystemTime) -> Vec<(String, Duration)> {
        self.mirror.cooldowns(now)
    }

    /// The mirror's: the fleet's cooldowns with their causes, this
    /// process's headroom and probes.
    fn health(&self, now: SystemTime) -> Vec<(String, Health)> {
        self.mirror.health(now)
    }

    fn settle(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        let mut synced = self.synced_once.subscribe();
        let timeout = self.timeout;
        Box::pin(async move {
            if *synced.borrow() || self.down.load(Ordering::SeqCst) {
                return;
            }
            // A fresh client's first call sees the fleet's cooldowns, within the
            // timeout; a wait in vain is not waited again by the next call
            // (which may have a budget round trip of its own to wait for).
            let _ = tokio::time::timeout(timeout, synced.wait_for(|s| *s)).await;
            self.synced_once.send_replace(true);
        })
    }

    fn note_busy(&self, key: &str, delta: i64) {
        let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        let n = busy.entry(key.to_string()).or_default();
        *n = (*n + delta).max(0);
    }

    fn busy_elsewhere(&self, key: &str) -> u64 {
        self.busy_elsewhere
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .copied()
            .unwrap_or(0)
    }

    fn take_notice(&self) -> Option<String> {
        let mut notices = self.notices.lock().unwrap_or_else(|e| e.into_inner());
        (!notices.is_empty())
            .then(|| notices.join("; then "))
            .inspect(|_| notices.clear())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_take_scripts_refusal_reads_as_the_limiters_own() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        let limit = Limit {
            concurrency: Some(4),
            rpm: Some(60),
            tpm: Some(1_000),
        };
        let held = fleet_blocked(limit, 10, now, 1, -1, 4);
        assert_eq!(
            held.why,
            "at its concurrency limit in the fleet (4 in flight)"
        );
        assert_eq!((held.at, held.recheck), (None, Some(FLEET_RECHECK)));
        let full = fleet_blocked(limit, 10, now, 2, 1_030_000, 60);
        assert_eq!(full.why, "rpm limit in the fleet: capacity in 30.0s");
        assert_eq!(full.at, Some(now + Duration::from_secs(30)));
        assert_eq!(full.recheck, None);
        let spent = fleet_blocked(limit, 10, now, 3, 1_002_500, 995);
        assert_eq!(
            spent.why,
            "tpm limit in the fleet (995 of 1000 used, 10 needed): capacity in 2.5s"
        );
        assert_eq!(spent.wait(now), Some(Duration::from_millis(2_500)));
    }

    #[test]
    fn a_long_window_is_counted_in_few_buckets() {
        let budget = |secs| RetryBudget {
            window: Duration::from_secs(secs),
            ..RetryBudget::default()
        };
        assert_eq!(buckets(&budget(10)), (1, 10));
        assert_eq!(buckets(&budget(86_400)), (8_640, 10));
        assert_eq!(buckets(&budget(25)), (3, 9));
    }

    #[test]
    fn a_stored_cooldown_carries_its_cause_and_old_values_still_read() {
        let cause = Cause {
            reason: "it asked\tfor 30s".to_string(),
            kind: Some(ErrorKind::RateLimited),
            status: Some(429),
            retry_after: Some(Duration::from_micros(30_000_500)),
        };
        let stored = encode_cooling(1_700_000_000_000, &cause);
        let (until, read) = decode_cooling(&stored).unwrap();
        assert_eq!(until, 1_700_000_000_000);
        assert_eq!(
            read,
            Cause {
                reason: "it asked for 30s".to_string(),
                ..cause
            }
        );
        // A headroom cooldown: no kind, status or hint.
        let words = Cause::because("its rate limit is exhausted for 2.000s");
        assert_eq!(decode_cooling(&encode_cooling(5, &words)), Some((5, words)));
        // Written before the cause crossed: the reason alone, or nothing.
        assert_eq!(
            decode_cooling("7\tit asked for 60s"),
            Some((7, Cause::because("it asked for 60s")))
        );
        assert_eq!(decode_cooling("7"), Some((7, Cause::because(""))));
        // Parts that do not read leave the whole rest as the reason.
        assert_eq!(
            decode_cooling("7\ta\tnot_a_kind\t429\t1"),
            Some((7, Cause::because("a\tnot_a_kind\t429\t1")))
        );
        assert_eq!(decode_cooling("soon\tx"), None);
    }
}
