"""`client.health()`: each provider's cooldown and what set it, its failures in a row, the
rate-limit headroom it last reported and its probe, through the public API; times on the
sleeper's clock (FakeSleeper-exact), and with `RedisState`, the fleet's cooldowns."""

from __future__ import annotations

import asyncio
import pickle
import threading
import time
from typing import Any

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

from conftest import fleet_client, openai, prefix, redis_cli, wait_for

SLOW = {"error": {"message": "slow down"}}
HEALTHY = failover.ProviderHealth()


def two(mock_server: MockServer, backup_server: MockServer, **kwargs: Any) -> failover.Client:
    kwargs.setdefault("sleeper", FakeSleeper())
    return failover.Client({"a": openai(mock_server), "b": openai(backup_server)}, **kwargs)


def test_a_429_shows_until_when_and_why_exactly_under_the_fake_clock(
    mock_server: MockServer, backup_server: MockServer, call: Any
) -> None:
    sleeper = FakeSleeper()
    client = two(mock_server, backup_server, sleeper=sleeper)
    assert client.health() == {"a": HEALTHY, "b": HEALTHY}, "every provider, healthy too"
    mock_server.push(429, headers={"retry-after": "60"}, json=SLOW)
    backup_server.push_text("b")
    start = sleeper.time()
    assert call(client).provider == "b"
    health = client.health()
    assert health["a"] == failover.ProviderHealth(
        cooling=True,
        until=start + 60,
        seconds_left=60.0,
        reason="it asked for 60s",
        kind="rate_limited",
        status=429,
        retry_after=60.0,
        failures_in_a_row=1,
    )
    assert health["b"] == HEALTHY and health["b"].cooling is False
    # The time left follows the sleeper's clock; until stays.
    sleeper.advance(20)
    a = client.health()["a"]
    assert (a.until, a.seconds_left) == (start + 60, 40.0)
    # Ended with no success since: half-open, still saying why.
    sleeper.advance(40)
    a = client.health()["a"]
    assert (a.cooling, a.until, a.seconds_left, a.half_open) == (False, None, None, True)
    assert (a.kind, a.status, a.retry_after) == ("rate_limited", 429, 60.0)
    # A success closes it.
    mock_server.push_text("a is back")
    assert call(client).provider == "a"
    assert client.health()["a"] == HEALTHY


def test_failures_in_a_row_count_and_a_success_resets_them(
    mock_server: MockServer, call: Any
) -> None:
    sleeper = FakeSleeper()
    client = failover.Client(
        {"a": openai(mock_server)},
        sleeper=sleeper,
        retry=failover.RetryPolicy(max_retries_last=0),
    )
    for failures, cooled in [(1, 5.0), (2, 10.0), (3, 20.0)]:
        mock_server.push(503, json=SLOW)
        with pytest.raises(failover.ProviderOverloaded):
            call(client)
        a = client.health()["a"]
        assert (a.failures_in_a_row, a.seconds_left) == (failures, cooled)
        assert (a.kind, a.status, a.retry_after) == ("overloaded", 503, None)
        assert a.reason == "failed (overloaded)"
        sleeper.advance(cooled)
    mock_server.push_text("ok")
    call(client)
    assert client.health()["a"].failures_in_a_row == 0


def test_a_success_shows_its_headroom_and_exhausted_headroom_cools_with_no_kind(
    mock_server: MockServer, backup_server: MockServer, call: Any
) -> None:
    sleeper = FakeSleeper()
    client = two(mock_server, backup_server, sleeper=sleeper)
    now = sleeper.time()
    mock_server.push_text(
        "last request of the window",
        headers={
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "20s",
            "x-ratelimit-remaining-tokens": "1000",
            "x-ratelimit-reset-tokens": "1.5s",
        },
    )
    assert call(client).provider == "a"
    a = client.health()["a"]
    assert a.headroom == failover.Headroom(
        requests=0, tokens=1000, requests_reset=now + 20, tokens_reset=now + 1.5, seen=now
    )
    assert (a.cooling, a.until, a.seconds_left) == (True, now + 20, 20.0)
    assert (a.kind, a.status, a.retry_after) == (None, None, None)
    assert a.reason == "its rate limit is exhausted for 20.000s"
    assert a.failures_in_a_row == 0, "a success is no failure"
    # Headroom left: shown, nothing cooling; a provider without the headers shows none.
    backup_server.push_text("b", headers={"x-ratelimit-remaining-requests": "99"})
    assert call(client).provider == "b"
    b = client.health()["b"]
    assert b.headroom == failover.Headroom(99, None, None, None, now)
    assert not b.cooling and b.kind is None
    assert client.health()["a"].headroom is not None


def test_probing_is_true_while_a_probe_is_in_flight(
    mock_server: MockServer, backup_server: MockServer, face: str
) -> None:
    sleeper = FakeSleeper()
    client = two(
        mock_server, backup_server, sleeper=sleeper, retry=failover.RetryPolicy(max_retries=0)
    )
    mock_server.push(503, json=SLOW)
    backup_server.push_text("b")
    client.prompt("Hi")
    sleeper.advance(5)
    assert not client.health()["a"].probing
    # The cooldown has ended: the next call probes a, which answers slowly.
    mock_server.push_text("a is back", delay=0.5)

    def while_in_flight() -> failover.ProviderHealth:
        deadline = time.monotonic() + 5
        while not mock_server.requests[1:] and time.monotonic() < deadline:
            time.sleep(0.005)
        return client.health()["a"]

    if face == "sync":
        answers: list[failover.Response] = []
        probe = threading.Thread(target=lambda: answers.append(client.prompt("Hi")))
        probe.start()
        seen = while_in_flight()
        probe.join()
        answer = answers[0]
    else:

        async def probed() -> tuple[failover.ProviderHealth, failover.Response]:
            task = asyncio.ensure_future(client.prompt_async("Hi"))
            seen = await asyncio.to_thread(while_in_flight)
            return seen, await task

        seen, answer = asyncio.run(probed())
    assert (seen.probing, seen.half_open, seen.cooling) == (True, True, False)
    assert answer.provider == "a"
    assert client.health()["a"] == HEALTHY


def test_every_member_and_key_of_a_client_appears_and_with_options_shares_them(
    mock_server: MockServer, backup_server: MockServer, call: Any
) -> None:
    sleeper = FakeSleeper()
    pool = failover.Pool("p", [openai(mock_server), openai(mock_server)])
    client = failover.Client(
        {"p": pool, "b": openai(backup_server)},
        sleeper=sleeper,
        retry=failover.RetryPolicy(max_retries=0),
    )
    assert list(client.health()) == ["b", "p/0", "p/1"]
    # A call's own model= is a key of its own, shown once it has been used.
    backup_server.push(404, json={"error": {"message": "no such model"}})
    with pytest.raises(failover.ModelNotFound):
        call(client, provider="b", model="gpt-typo")
    health = client.with_options(timeout=5).health()
    assert list(health) == ["b", "b/gpt-typo", "p/0", "p/1"]
    assert health["b/gpt-typo"].kind == "not_found" and health["b"] == HEALTHY
    assert health == client.health()


def test_health_values_read_well_and_pickle() -> None:
    headroom = failover.Headroom(0, 10, 1.5, None, 1.0)
    health = failover.ProviderHealth(cooling=True, kind="rate_limited", headroom=headroom)
    assert repr(health).startswith("ProviderHealth(cooling=True, until=None, seconds_left=None")
    assert "kind='rate_limited'" in repr(health)
    assert "headroom=Headroom(requests=0, tokens=10, requests_reset=1.5" in repr(health)
    assert pickle.loads(pickle.dumps(health)) == health
    with pytest.raises(AttributeError):
        health.cooling = False  # type: ignore[misc]


def test_with_redis_state_health_shows_another_clients_cooldown_and_its_cause(
    redis_url: str, mock_server: MockServer, backup_server: MockServer
) -> None:
    pfx = prefix()
    first = fleet_client(redis_url, pfx, mock_server, backup_server)
    second = fleet_client(redis_url, pfx, mock_server, backup_server)
    mock_server.push(429, headers={"retry-after": "30"}, json=SLOW)
    backup_server.push_text("b")
    assert first.prompt("Hi").provider == "b"
    wait_for(lambda: second.health()["a"].cooling, within=5)
    a = second.health()["a"]
    assert (a.kind, a.status, a.retry_after, a.reason) == (
        "rate_limited",
        429,
        30.0,
        "it asked for 30s",
    )
    assert a.seconds_left is not None and 25 < a.seconds_left <= 30
    assert a.until == pytest.approx(time.time() + a.seconds_left, abs=1)
    assert second.health()["b"] == HEALTHY
    # A fresh client reads the same from the fleet's index.
    third = fleet_client(redis_url, pfx, mock_server, backup_server)
    backup_server.push_text("b")
    third.prompt("Hi")
    assert third.health()["a"].kind == "rate_limited"


def test_with_redis_state_a_cooldown_stored_before_causes_crossed_still_reads(
    redis_url: str, mock_server: MockServer, backup_server: MockServer
) -> None:
    pfx = prefix()
    until_ms = int((time.time() + 60) * 1000)
    index = f"{pfx}:cooldowns"
    redis_cli(redis_url, "HSET", index, "a|gpt-4.1-mini", f"{until_ms}\tit asked for 60s")
    client = fleet_client(redis_url, pfx, mock_server, backup_server)
    backup_server.push_text("b")
    assert client.prompt("Hi").provider == "b"
    a = client.health()["a"]
    assert (a.cooling, a.reason, a.kind, a.status, a.retry_after) == (
        True,
        "it asked for 60s",
        None,
        None,
        None,
    )
