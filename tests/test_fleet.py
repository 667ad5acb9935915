"""Fleet-wide state on a real Redis (started by the `redis_url` fixture): cooldowns
and the retry budget shared across clients and processes, keys that expire on their
own, and a Redis that dies and comes back without a failed call."""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

from conftest import openai

SLOW = {"error": {"message": "slow down"}}
NO_RETRIES = failover.RetryPolicy(max_retries=0, max_retries_last=0)


def prefix() -> str:
    """A prefix of its own for each test: tests share the suite's Redis."""
    return f"t{uuid.uuid4().hex[:8]}"


def fleet_client(url: str, pfx: str, *servers: MockServer, **kwargs: Any) -> failover.Client:
    names = ["a", "b", "c"][: len(servers)]
    return failover.Client(
        {n: openai(s) for n, s in zip(names, servers)},
        state=failover.RedisState(url, prefix=pfx),
        **kwargs,
    )


def wait_for(check: Any, within: float = 2.0) -> float:
    """Seconds until ``check()`` is true (fails after ``within``)."""
    start = time.perf_counter()
    while not check():
        if time.perf_counter() - start > within:
            raise AssertionError("not seen in time")
        time.sleep(0.005)
    return time.perf_counter() - start


def redis_cli(url: str, *args: str) -> str:
    port = url.rsplit(":", 1)[1]
    cli = shutil.which("redis-cli")
    if cli is None:
        pytest.skip("no redis-cli")
    return subprocess.run(
        [cli, "-p", port, *args], capture_output=True, text=True, check=True
    ).stdout.strip()


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
    seen_after = wait_for(lambda: "a" in second.cooldowns())
    assert seen_after < 0.1, f"seen {seen_after * 1000:.0f} ms late"
    r = second.prompt("Hi")
    assert r.provider == "b" and r.attempts[0].skipped is not None
    assert len(mock_server.requests) == 1
    # The key carries the wait as its expiry, in Redis itself.
    assert 28_000 < int(redis_cli(redis_url, "PTTL", f"{pfx}:cool:a")) <= 30_000


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
            {{"a": failover.OpenAICompatible("m", base_url={mock_server.url!r}),
              "b": failover.OpenAICompatible("m", base_url={backup_server.url!r})}},
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


@pytest.fixture
def own_redis() -> Iterator[tuple[str, Any]]:
    """A redis-server of this test's own, which it may kill and restart."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("no redis-server on this machine")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    running: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        running.append(
            subprocess.Popen(
                [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        wait_for(lambda: _accepts(port), within=5)

    def stop() -> None:
        process = running.pop()
        process.kill()
        process.wait(5)

    start()
    yield f"redis://127.0.0.1:{port}", (start, stop)
    while running:
        stop()


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.1):
            return True
    except OSError:
        return False


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
    wait_for(lambda: redis_cli(redis_url, "EXISTS", f"{pfx}:cool:a") == "1", within=2)
    wait_for(lambda: redis_cli(redis_url, "EXISTS", f"{pfx}:cool:a") == "0", within=3)


def test_redis_state_options_are_checked_and_its_repr_hides_the_password() -> None:
    with pytest.raises(failover.ConfigurationError, match="redis://"):
        failover.RedisState("http://localhost:6379")
    with pytest.raises(failover.ConfigurationError, match="prefix"):
        failover.RedisState("redis://localhost", prefix="a b")
    with pytest.raises(failover.ConfigurationError):
        failover.RedisState("redis://localhost", timeout=0)
    state = failover.RedisState("redis://user:s3cret-pass@localhost:1/0")
    assert "s3cret" not in repr(state)
