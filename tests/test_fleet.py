"""Fleet-wide state on a real Redis (started by the `redis_url` fixture): cooldowns
and the retry budget shared across clients and processes, keys that expire on their
own, and a Redis that dies and comes back without a failed call."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

from conftest import fleet_client, openai, prefix, redis_cli, wait_for

SLOW = {"error": {"message": "slow down"}}
NO_RETRIES = failover.RetryPolicy(max_retries=0, max_retries_last=0)


def test_a_cooldown_set_by_one_client_is_honoured_by_another(
    redis_url: str, mock_server: MockServer, backup_server: MockServer
) -> None:
    pfx = prefix()
    first = fleet_client(redis_url, pfx, mock_server, backup_server)
    second = fleet_client(redis_url, pfx, mock_server, backup_server)
    mock_server.push(429, headers={"retry-after": "30"}, json=SLOW)
    backup_server.push_text("b1")
    backup_server.push_text("b2")
    assert first.prompt("Hi").provider == "b"
    # Heard through pub/sub (a few ms on loopback; no time bound asserted here).
    wait_for(lambda: "a" in second.cooldowns(), within=5)
    r = second.prompt("Hi")
    assert r.provider == "b" and r.attempts[0].skipped is not None
    assert len(mock_server.requests) == 1
    # The key carries the wait as its expiry, in Redis itself.
    key = f"{pfx}:cool:a|gpt-4.1-mini"  # a provider is its name and its model
    assert 28_000 < int(redis_cli(redis_url, "PTTL", key)) <= 30_000


def test_another_process_sees_the_fleets_cooldowns(
    redis_url: str, mock_server: MockServer, backup_server: MockServer
) -> None:
    pfx = prefix()
    mock_server.push(429, headers={"retry-after": "30"}, json=SLOW)
    backup_server.push_text("b")
    script = textwrap.dedent(
        f"""
        import failover
        client = failover.Client(
            {{"a": failover.OpenAICompatible("gpt-4.1-mini", base_url={mock_server.url!r}),
              "b": failover.OpenAICompatible("gpt-4.1-mini", base_url={backup_server.url!r})}},
            state=failover.RedisState({redis_url!r}, prefix={pfx!r}),
        )
        print(client.prompt("Hi").provider)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "b"
    # A fresh client in this process: its first call already sees the fleet's cooldown.
    backup_server.push_text("b again")
    client = fleet_client(redis_url, pfx, mock_server, backup_server)
    r = client.prompt("Hi")
    assert r.provider == "b" and r.attempts[0].skipped is not None


@pytest.mark.mock_server(assert_all_used=False)
def test_the_shared_budget_caps_the_fleets_combined_retries(
    redis_url: str, mock_server: MockServer
) -> None:
    pfx = prefix()
    budget = failover.RetryBudget(ratio=0.0, min_retries_per_second=0.2, window=10.0)
    policy = failover.RetryPolicy(max_retries_last=3, budget=budget)
    clients = [
        fleet_client(redis_url, pfx, mock_server, retry=policy, sleeper=FakeSleeper())
        for _ in range(2)
    ]
    for _ in range(20):
        mock_server.push(500, json=SLOW)
    for client in clients * 2:
        with pytest.raises(failover.ServerError):
            client.prompt("Hi")
    # The reserve is 0.2/s x 10 s = 2 retries for the whole fleet in the window.
    assert len(mock_server.requests) == 4 + 2


@pytest.mark.mock_server(assert_all_used=False)
def test_redis_dying_degrades_to_local_state_and_comes_back(
    own_redis: tuple[str, Any],
    mock_server: MockServer,
    backup_server: MockServer,
    caplog: Any,
) -> None:
    url, (start, stop) = own_redis
    caplog.set_level(logging.WARNING, logger="failover")
    pfx = prefix()
    client = fleet_client(url, pfx, mock_server, backup_server)
    other = fleet_client(url, pfx, mock_server, backup_server)
    for _ in range(6):
        mock_server.push_text("a")
    client.prompt("Hi")
    stop()
    # No failed call, no call slowed past the state timeout, while Redis is gone.
    for _ in range(5):
        started = time.perf_counter()
        assert client.prompt("Hi").provider == "a"
        assert time.perf_counter() - started < 1.0
    # A cooldown still works in process.
    mock_server.push(429, headers={"retry-after": "30"}, json=SLOW)
    backup_server.push_text("b")
    client.prompt("Hi")
    assert "a" in client.cooldowns()
    wait_for(
        lambda: any("Redis state is unavailable" in r.getMessage() for r in caplog.records),
        within=5,
    )
    # Redis comes back: the clients reconnect, and cooldowns are shared again (each probe
    # a model of its own, so that each sets a new cooldown).
    start()
    # What it learned while Redis was away reaches the fleet once Redis is back.
    wait_for(lambda: "a" in other.cooldowns(), within=10)
    probes = iter(range(1000))
    wait_for(lambda: _shared(client, other, mock_server, next(probes)), within=10)


def _shared(
    client: failover.Client, other: failover.Client, mock_server: MockServer, n: int
) -> bool:
    """Whether a fresh cooldown set through ``client`` now reaches ``other``."""
    mock_server.push(429, headers={"retry-after": "120"}, json=SLOW)
    with pytest.raises(failover.RateLimited):
        client.prompt("Hi", provider="a", model=f"probe-{n}", retry=NO_RETRIES)
    deadline = time.perf_counter() + 0.5
    while time.perf_counter() < deadline:
        if f"a/probe-{n}" in other.cooldowns():
            return True
        time.sleep(0.01)
    return False


def test_keys_expire_on_their_own(
    redis_url: str, mock_server: MockServer, backup_server: MockServer
) -> None:
    pfx = prefix()
    client = fleet_client(redis_url, pfx, mock_server, backup_server)
    mock_server.push(429, headers={"retry-after-ms": "300"}, json=SLOW)
    backup_server.push_text("b")
    client.prompt("Hi", retry=failover.RetryPolicy(max_retry_after=0.1))
    key = f"{pfx}:cool:a|gpt-4.1-mini"
    wait_for(lambda: redis_cli(redis_url, "EXISTS", key) == "1", within=2)
    wait_for(lambda: redis_cli(redis_url, "EXISTS", key) == "0", within=3)


def test_redis_state_options_are_checked_and_its_repr_hides_the_password() -> None:
    with pytest.raises(failover.ConfigurationError, match="redis://"):
        failover.RedisState("http://localhost:6379")
    with pytest.raises(failover.ConfigurationError, match="prefix"):
        failover.RedisState("redis://localhost", prefix="a b")
    with pytest.raises(failover.ConfigurationError):
        failover.RedisState("redis://localhost", timeout=0)
    state = failover.RedisState("redis://user:s3cret-pass@localhost:1/0")
    assert "s3cret" not in repr(state)


def test_a_brief_redis_stall_does_not_slow_later_calls(
    redis_url: str, mock_server: MockServer, backup_server: MockServer
) -> None:
    pfx = prefix()
    client = failover.Client(
        {"a": openai(mock_server)},
        state=failover.RedisState(redis_url, prefix=pfx, timeout=0.2),
    )
    for _ in range(25):
        mock_server.push_text("a")
    client.prompt("Hi")
    stall = subprocess.Popen(
        ["redis-cli", "-p", redis_url.rsplit(":", 1)[1], "debug", "sleep", "0.3"]
    )
    for _ in range(4):
        client.prompt("Hi")
    stall.wait(5)
    time.sleep(0.3)
    took = []
    for _ in range(20):
        started = time.perf_counter()
        client.prompt("Hi")
        took.append(time.perf_counter() - started)
    # A call slowed by the stall's aftermath waits the state timeout (0.2 s) at
    # least; none of the later calls should have (a bound from below, not a speed).
    assert [t for t in took if t >= 0.2] == [], took


@contextmanager
def frozen(redis_url: str, seconds: float = 3.5) -> Iterator[None]:
    """Redis answers nothing for ``seconds`` (DEBUG SLEEP), then the block waits for it back."""
    stall = subprocess.Popen(
        ["redis-cli", "-p", redis_url.rsplit(":", 1)[1], "debug", "sleep", str(seconds)]
    )
    try:
        time.sleep(0.2)  # the stall has begun
        yield
    finally:
        stall.wait(10)


def redis_client(redis_url: str, *servers: MockServer) -> failover.Client:
    """A client whose state timeout (3 s) is far beyond the calls' deadline (1 s)."""
    return failover.Client(
        {n: openai(s) for n, s in zip("ab", servers)},
        state=failover.RedisState(redis_url, prefix=prefix(), timeout=3.0),
    )


# A frozen Redis must not carry a call past its deadline, nor fail it: a wait on the fleet's
# state takes at most half the time the call has left, then the local state answers. Each
# call below has a 1 s deadline against a 3 s state timeout, and its provider answers at once:
# it succeeds, and ends well before the 3 s the state timeout would have taken (a bound with
# a wide margin).


def test_a_fresh_clients_first_read_of_a_frozen_redis_spares_the_deadline(
    redis_url: str, mock_server: MockServer
) -> None:
    with frozen(redis_url):
        client = redis_client(redis_url, mock_server)
        mock_server.push_text("a")
        started = time.perf_counter()
        assert client.prompt("Hi", deadline=1.0).text == "a"
        assert time.perf_counter() - started < 2.0


def test_a_retrys_budget_asked_of_a_frozen_redis_spares_the_deadline(
    redis_url: str, mock_server: MockServer
) -> None:
    client = redis_client(redis_url, mock_server)
    mock_server.push_text("warm")
    client.prompt("Hi")  # the first read is done
    with frozen(redis_url):
        mock_server.push(503, headers={"retry-after": "0"}, json=SLOW)
        mock_server.push_text("a")
        started = time.perf_counter()
        r = client.prompt("Hi", deadline=1.0)
        assert (r.text, [a.status for a in r.attempts]) == ("a", [503, 200])
        assert time.perf_counter() - started < 2.0


def test_a_probe_taken_of_a_frozen_redis_spares_the_deadline(
    redis_url: str, mock_server: MockServer, backup_server: MockServer
) -> None:
    client = redis_client(redis_url, mock_server, backup_server)
    cool_briefly(mock_server, backup_server, client)
    with frozen(redis_url):
        mock_server.push_text("a")
        started = time.perf_counter()
        r = client.prompt("Hi", deadline=1.0)
        assert r.provider == "a"  # the probe, taken locally
        assert time.perf_counter() - started < 2.0


def test_databases_do_not_share_cooldowns(
    redis_url: str, mock_server: MockServer, backup_server: MockServer
) -> None:
    pfx = prefix()
    one = fleet_client(f"{redis_url}/1", pfx, mock_server, backup_server)
    two = fleet_client(f"{redis_url}/2", pfx, mock_server, backup_server)
    mock_server.push(429, headers={"retry-after": "30"}, json=SLOW)
    backup_server.push_text("b")
    one.prompt("Hi")
    time.sleep(0.2)
    assert "a" in one.cooldowns() and two.cooldowns() == {}


def test_same_name_other_model_is_another_provider(
    redis_url: str, mock_server: MockServer, backup_server: MockServer
) -> None:
    pfx = prefix()
    mini = failover.Client(
        {"gpt": failover.OpenAICompatible("gpt-4.1-mini", base_url=mock_server.url)},
        state=failover.RedisState(redis_url, prefix=pfx),
        retry=NO_RETRIES,
    )
    big = failover.Client(
        {"gpt": failover.OpenAICompatible("gpt-4o", base_url=backup_server.url)},
        state=failover.RedisState(redis_url, prefix=pfx),
    )
    mock_server.push(429, headers={"retry-after": "120"}, json=SLOW)
    with pytest.raises(failover.RateLimited):
        mini.prompt("Hi")
    time.sleep(0.2)
    assert big.cooldowns() == {}
    backup_server.push_text("4o")
    assert big.prompt("Hi").attempts[0].skipped is None


def test_headroom_from_a_success_is_shared_every_time(
    redis_url: str, mock_server: MockServer, backup_server: MockServer
) -> None:
    headroom = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "30s"}
    for _ in range(20):
        pfx = prefix()
        client = fleet_client(redis_url, pfx, mock_server, backup_server)
        other = fleet_client(redis_url, pfx, mock_server, backup_server)
        mock_server.push_text("a", headers=headroom)
        assert client.prompt("Hi").provider == "a"
        assert "a" in client.cooldowns()
        wait_for(lambda other=other: "a" in other.cooldowns(), within=1)


def test_redis_state_options_are_checked_when_given() -> None:
    for url in ["redis://host:0", "redis://host/-1", "redis://host/99999999999", "redis://h\n"]:
        with pytest.raises(failover.ConfigurationError, match="Redis URL"):
            failover.RedisState(url)
    for pfx in ["app?", "a*", "a[b]", "a\x00"]:
        with pytest.raises(failover.ConfigurationError, match="prefix"):
            failover.RedisState("redis://localhost", prefix=pfx)
    with pytest.raises(failover.ConfigurationError, match="timeout"):
        failover.RedisState("redis://localhost", timeout=1e-9)
    failover.RedisState("REDIS://localhost:6379/0")
    assert "/tmp/redis.sock" in repr(failover.RedisState("unix:///tmp/redis.sock"))


def _worker(redis_url: str, pfx: str, *urls: str, calls: int = 1, policy: str = "") -> str:
    """A worker process's script: a client on the fleet state, `calls` prompts, and the
    time (Unix seconds) each ended, one per line, errors as their class name."""
    providers = ", ".join(
        f"{name!r}: failover.OpenAICompatible('gpt-4.1-mini', base_url={url!r})"
        for name, url in zip("abc", urls)
    )
    return textwrap.dedent(
        f"""
        import time, failover
        from failover.testing import FakeSleeper
        client = failover.Client(
            {{{providers}}},
            state=failover.RedisState({redis_url!r}, prefix={pfx!r}),
            sleeper=FakeSleeper(),
            {policy}
        )
        for _ in range({calls}):
            try:
                client.prompt("Hi")
                print("ok", time.time(), flush=True)
            except failover.FailoverError as exc:
                print(type(exc).__name__, time.time(), flush=True)
        """
    )


def test_a_cooldown_reaches_another_process(
    redis_url: str, mock_server: MockServer, backup_server: MockServer
) -> None:
    pfx = prefix()
    watcher = fleet_client(redis_url, pfx, mock_server, backup_server)
    watcher.cooldowns()
    time.sleep(0.3)  # subscribed, and its first read done
    mock_server.push(429, headers={"retry-after": "30"}, json=SLOW)
    backup_server.push_text("b")
    worker = subprocess.Popen(
        [sys.executable, "-c", _worker(redis_url, pfx, mock_server.url, backup_server.url)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert worker.stdout is not None
    line = worker.stdout.readline().split()
    assert line[0] == "ok", line
    # Heard through pub/sub (about 5 ms on loopback; no time bound asserted here).
    wait_for(lambda: "a" in watcher.cooldowns(), within=5)
    worker.communicate(timeout=30)  # reaps it and closes its stdout pipe


@pytest.mark.mock_server(assert_all_used=False)
def test_the_budget_is_shared_across_processes(redis_url: str, mock_server: MockServer) -> None:
    pfx = prefix()
    for _ in range(30):
        mock_server.push(500, json=SLOW)
    policy = (
        "retry=failover.RetryPolicy(max_retries_last=3, budget=failover.RetryBudget("
        "ratio=0.0, min_retries_per_second=0.2, window=10.0)),"
    )
    script = _worker(redis_url, pfx, mock_server.url, calls=3, policy=policy)
    workers = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [w.communicate(timeout=60)[0] for w in workers]
    assert all(line.startswith("ServerError") for out in outputs for line in out.splitlines())
    # Six calls, and 0.2/s x 10 s = 2 retries for the whole fleet (each process alone
    # would have had 2).
    assert len(mock_server.requests) == 6 + 2


def test_least_busy_counts_the_fleets_calls(redis_url: str) -> None:
    pfx = prefix()
    servers = [MockServer() for _ in range(2)]
    try:

        def worker_client() -> failover.Client:
            members = [openai(s) for s in servers]
            return failover.Client(
                {"p": failover.Pool("p", members, strategy="least_busy")},
                state=failover.RedisState(redis_url, prefix=pfx),
            )

        here, there = worker_client(), worker_client()
        # This client orders the pool once (from then on it reads the fleet's counts).
        servers[0].push_text("warm")
        assert here.prompt("Hi").provider == "p/0"
        # A stream open at p/0 through one client (another process, for the fleet)...
        servers[0].push(
            sse=['data: {"choices":[{"index":0,"delta":{"content":"x"}}]}'], fault="stall:1"
        )
        stream = there.stream("Hi")
        next(stream)
        time.sleep(0.3)  # its count reaches Redis, and this client reads it back
        # ...so this client, with nothing busy of its own, goes to p/1 first (its turn
        # would have been p/1 anyway after the warm-up: the next call is the test).
        servers[1].push_text("free")
        assert here.prompt("Hi").attempts[0].provider == "p/1"
        servers[1].push_text("free again")
        r = here.prompt("Hi")
        assert [a.provider for a in r.attempts] == ["p/1"], "p/0 is still busy in the fleet"
        stream.close()
    finally:
        for server in servers:
            server.close()


@pytest.mark.mock_server(assert_all_used=False)
def test_the_shared_budget_from_asyncio(redis_url: str, mock_server: MockServer) -> None:
    import asyncio

    pfx = prefix()
    budget = failover.RetryBudget(ratio=0.0, min_retries_per_second=0.1, window=10.0)
    client = fleet_client(
        redis_url,
        pfx,
        mock_server,
        retry=failover.RetryPolicy(max_retries_last=3, budget=budget),
        sleeper=FakeSleeper(),
    )
    for _ in range(10):
        mock_server.push(500, json=SLOW)

    async def twice() -> None:
        for _ in range(2):
            with pytest.raises(failover.ServerError):
                await client.prompt_async("Hi")

    asyncio.run(twice())
    # Two calls, one retry for the whole window (0.1/s x 10 s), asked of Redis from a
    # runtime worker.
    assert len(mock_server.requests) == 2 + 1


def test_a_cooldown_under_a_fake_sleeper_is_the_wait_asked_for(
    redis_url: str, mock_server: MockServer, backup_server: MockServer
) -> None:
    # The fleet's echo of this client's own cooldown ends when the mirror's
    # does: under a FakeSleeper (a clock on the whole second) it changes nothing.
    fake = FakeSleeper()
    client = fleet_client(redis_url, prefix(), mock_server, backup_server, sleeper=fake)
    mock_server.push(429, headers={"retry-after": "100"}, json=SLOW)
    backup_server.push_text("b")
    client.prompt("Hi")
    for _ in range(20):  # the echo comes back within a few ms
        assert client.cooldowns() == {"a": 100.0}
        time.sleep(0.01)
    fake.advance(60)
    assert client.cooldowns() == {"a": 40.0}


def cool_briefly(
    mock_server: MockServer, backup_server: MockServer, *clients: failover.Client
) -> None:
    """Cools `a` for 0.8 s (a hint over the cap) through the first client, and
    waits until every client has heard it and seen it end."""
    mock_server.push(429, headers={"retry-after-ms": "800"}, json=SLOW)
    backup_server.push_text("b")
    retry = failover.RetryPolicy(max_retry_after=0.1)
    assert clients[0].prompt("Hi", retry=retry).provider == "b"
    for client in clients:
        wait_for(lambda client=client: "a" in client.cooldowns(), within=0.7)
    for client in clients:
        wait_for(lambda client=client: client.cooldowns() == {}, within=3)


def test_one_call_in_the_fleet_probes_a_provider_whose_cooldown_ended(
    redis_url: str, mock_server: MockServer, backup_server: MockServer
) -> None:
    pfx = prefix()
    first = fleet_client(redis_url, pfx, mock_server, backup_server, timeout=5)
    second = fleet_client(redis_url, pfx, mock_server, backup_server, timeout=5)
    cool_briefly(mock_server, backup_server, first, second)
    # The cooldown has ended in both clients (second heard it from the fleet):
    # first probes a, slowly; meanwhile second keeps to b.
    mock_server.push_text("a, slowly", delay=1.0)
    probes: list[failover.Response] = []
    prober = threading.Thread(target=lambda: probes.append(first.prompt("Hi")))
    prober.start()
    lease = f"{pfx}:probe:a|gpt-4.1-mini"
    wait_for(lambda: redis_cli(redis_url, "EXISTS", lease) == "1")
    # The lease is the attempt timeout: a prober that dies holds it no longer.
    assert 0 < int(redis_cli(redis_url, "PTTL", lease)) <= 5_000
    backup_server.push_text("b")
    r = second.prompt("Hi")
    assert r.provider == "b"
    assert r.attempts[0].skipped is not None
    assert r.attempts[0].skipped.startswith("being probed by another call")
    prober.join(10)
    assert probes[0].provider == "a"
    assert len(mock_server.requests) == 2, "the 429 and one probe"
    # Given back once the probe answered; the circuit is closed.
    wait_for(lambda: redis_cli(redis_url, "EXISTS", lease) == "0")
    mock_server.push_text("a")
    r = second.prompt("Hi")
    assert r.provider == "a" and r.attempts[0].skipped is None


def test_a_probe_lease_left_by_a_prober_that_died_runs_out(
    redis_url: str, mock_server: MockServer, backup_server: MockServer
) -> None:
    pfx = prefix()
    client = fleet_client(redis_url, pfx, mock_server, backup_server)
    cool_briefly(mock_server, backup_server, client)
    # Another process took the probe and died: its lease runs out on its own.
    lease = f"{pfx}:probe:a|gpt-4.1-mini"
    redis_cli(redis_url, "SET", lease, "gone:1", "PX", "400")
    backup_server.push_text("b")
    r = client.prompt("Hi")
    assert r.provider == "b" and r.attempts[0].skipped is not None
    assert r.attempts[0].skipped.startswith("being probed by another call")
    wait_for(lambda: redis_cli(redis_url, "EXISTS", lease) == "0", within=3)
    mock_server.push_text("a")
    assert client.prompt("Hi").provider == "a"


@pytest.mark.mock_server(assert_all_used=False)
def test_the_hedge_budget_is_the_fleets(
    redis_url: str, mock_server: MockServer, backup_server: MockServer
) -> None:
    # max_extra 0.5: half the fleet's calls of the minute, plus one. Client one
    # makes two late calls and hedges both (1.5, then 2 allowed); client two,
    # on its own, could hedge its first call (1.5 allowed) but the fleet has
    # spent its 2 of 3 calls' 2.5.
    pfx = prefix()
    hedge = failover.Hedge(0.2, 0.5)
    for _ in range(3):
        mock_server.push_text("slow", delay=3.0)
        backup_server.push_text("fast")
    one = fleet_client(redis_url, pfx, mock_server, backup_server, hedge=hedge)
    two = fleet_client(redis_url, pfx, mock_server, backup_server, hedge=hedge)
    assert [one.prompt("Hi").provider for _ in range(2)] == ["b", "b"]

    # The calls counted so far reach Redis through the write queue.
    def counted() -> int:
        keys = redis_cli(redis_url, "KEYS", f"{pfx}:calls:hedges|*").split()
        return sum(int(redis_cli(redis_url, "GET", key) or 0) for key in keys)

    wait_for(lambda: counted() == 2, within=5)
    r = two.prompt("Hi", deadline=10)
    assert r.provider == "a"
    skipped = [a.skipped for a in r.attempts if a.skipped]
    assert skipped == ["hedge not sent: the hedge budget is spent"]
    one.close()
    two.close()
