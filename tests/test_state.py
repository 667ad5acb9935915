"""What calls share, through the public API: cooldowns, headroom, the retry budget,
idempotency keys, with_options() and the worst case. Waits go through a FakeSleeper,
whose clock the cooldowns follow."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

from conftest import anthropic, openai

SLOW = {"error": {"message": "slow down"}}
DELTA_X = 'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}'
FINISH = 'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}'


def two(mock_server: MockServer, backup_server: MockServer, **kwargs: Any) -> failover.Client:
    kwargs.setdefault("sleeper", FakeSleeper())
    return failover.Client({"a": openai(mock_server), "b": openai(backup_server)}, **kwargs)


def test_a_provider_that_asked_for_quiet_is_skipped_until_its_time(
    mock_server: MockServer, backup_server: MockServer, call: Any, caplog: Any
) -> None:
    caplog.set_level(logging.INFO, logger="failover")
    sleeper = FakeSleeper()
    client = two(mock_server, backup_server, sleeper=sleeper)
    mock_server.push(429, headers={"retry-after": "60"}, json=SLOW)
    backup_server.push_text("b1")
    assert call(client).provider == "b"
    assert client.cooldowns() == {"a": pytest.approx(60.0)}
    # The next call goes straight to b; a is recorded as skipped, with the reason.
    backup_server.push_text("b2")
    r = call(client)
    assert r.provider == "b" and len(mock_server.requests) == 1
    skip = r.attempts[0]
    assert (skip.provider, skip.status) == ("a", None)
    assert skip.skipped is not None and "cooling down for 60.0s more" in skip.skipped
    assert any("skipping a: cooling down" in r.getMessage() for r in caplog.records)
    sleeper.assert_never_slept()
    # Once its time has passed, a is called again, and a success ends the cooldown.
    sleeper.advance(60)
    mock_server.push_text("a again")
    assert call(client).provider == "a"
    assert client.cooldowns() == {}


def test_a_chain_where_everyone_cools_still_makes_one_request(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    client = two(mock_server, backup_server, retry=failover.RetryPolicy(max_retries_last=0))
    mock_server.push(429, headers={"retry-after": "120"}, json=SLOW)
    backup_server.push(429, headers={"retry-after": "90"}, json=SLOW)
    with pytest.raises(failover.RateLimited):
        client.prompt("Hi")
    assert client.cooldowns() == {"a": pytest.approx(120.0), "b": pytest.approx(90.0)}
    # Both cooling: b recovers first, and is tried with its normal retries.
    backup_server.push_text("b is back")
    r = client.prompt("Hi")
    assert (r.provider, r.text) == ("b", "b is back")
    assert r.attempts[0].skipped is not None


def test_failures_cool_briefly_auth_for_long_and_bad_requests_not_at_all(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    client = two(mock_server, backup_server, retry=failover.RetryPolicy(max_retries=0))
    mock_server.push(503, json=SLOW)
    backup_server.push_text("b")
    client.prompt("Hi")
    assert client.cooldowns() == {"a": pytest.approx(5.0)}
    client = two(mock_server, backup_server)
    mock_server.push(401, json={"error": {"message": "bad key"}})
    backup_server.push_text("b")
    client.prompt("Hi")
    assert client.cooldowns() == {"a": pytest.approx(300.0)}
    client = two(mock_server, backup_server)
    mock_server.push(400, json={"error": {"message": "bad request"}})
    with pytest.raises(failover.BadRequest):
        client.prompt("Hi")
    assert client.cooldowns() == {}


def test_cooldowns_are_per_model_and_call_kind(mock_server: MockServer) -> None:
    client = failover.Client(
        {"a": openai(mock_server, embedding_model="te")},
        sleeper=FakeSleeper(),
        retry=failover.RetryPolicy(max_retries_last=0),
    )
    mock_server.push(404, json={"error": {"message": "no such model"}})
    with pytest.raises(failover.ModelNotFound):
        client.prompt("Hi", model="gpt-typo")
    mock_server.push(404, json={"error": {"message": "no such model"}})
    with pytest.raises(failover.ModelNotFound):
        client.embed("x")
    assert set(client.cooldowns()) == {"a/gpt-typo", "a:embeddings"}
    # Chat with the configured model is not cooling.
    mock_server.push_text("fine")
    assert client.prompt("Hi").attempts[0].skipped is None


def test_an_embed_calls_own_model_cools_and_shows_as_a_chat_calls_does(
    mock_server: MockServer,
) -> None:
    """embed(model=) cooled unseen: cooldowns() showed {} where prompt(model=) showed its
    'a/x'. Found by the new-user trial of 2026-12-02."""
    client = failover.Client(
        {"a": openai(mock_server, embedding_model="te")},
        sleeper=FakeSleeper(),
        retry=failover.RetryPolicy(max_retries_last=0),
    )
    mock_server.push(404, json={"error": {"message": "no such model"}})
    with pytest.raises(failover.ModelNotFound):
        client.embed("x", model="te-typo")
    assert list(client.cooldowns()) == ["a:embeddings/te-typo"]
    # Neither the provider's embedding model nor chat is cooling.
    mock_server.push_embeddings([[0.5]])
    assert client.embed("x").vectors == [[0.5]]
    mock_server.push_text("fine")
    assert client.prompt("Hi").attempts[0].skipped is None


def test_headroom_from_a_200_routes_the_next_call_away(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    client = two(mock_server, backup_server)
    mock_server.push_text(
        "last request of the window",
        headers={"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "20s"},
    )
    assert client.prompt("Hi").provider == "a"
    assert client.cooldowns() == {"a": pytest.approx(20.0)}
    backup_server.push_text("b")
    assert client.prompt("Hi").provider == "b"
    assert len(mock_server.requests) == 1, "no request spent on a certain 429"


@pytest.mark.mock_server(assert_all_used=False)
def test_a_budget_keeps_retries_within_its_ratio_under_a_full_outage(
    mock_server: MockServer,
) -> None:
    budget = failover.RetryBudget(ratio=0.1, min_retries_per_second=0.2, window=10.0)
    policy = failover.RetryPolicy(max_retries_last=3, budget=budget)
    sleeper = FakeSleeper()
    client = failover.Client({"a": openai(mock_server)}, retry=policy, sleeper=sleeper)
    calls = 100
    for _ in range(calls * 4):
        mock_server.push(503, json=SLOW)
    refused = 0
    for _ in range(calls):
        with pytest.raises(failover.ProviderOverloaded) as info:
            client.prompt("Hi")
        refused += sum(1 for a in info.value.attempts if a.skipped and "budget" in a.skipped)
        sleeper.advance(300)  # past the cooldown, inside no other call's window
        sleeper.clear()
    retries = len(mock_server.requests) - calls
    # Every call's window holds only itself (300 s apart): the reserve (2 retries per window)
    # allows at most 2 retries of a call's 3.
    assert retries <= 2 * calls and refused >= calls
    mock_server.close()


@pytest.mark.mock_server(assert_all_used=False)
def test_the_budget_counts_calls_in_its_window(mock_server: MockServer) -> None:
    budget = failover.RetryBudget(ratio=0.1, min_retries_per_second=0.0, window=60.0)
    policy = failover.RetryPolicy(max_retries_last=1, budget=budget)
    client = failover.Client({"a": openai(mock_server)}, retry=policy, sleeper=FakeSleeper())
    for _ in range(50):
        mock_server.push_text("ok")
    for _ in range(50):
        client.prompt("Hi")
    before = len(mock_server.requests)
    for _ in range(20):
        mock_server.push(500, json=SLOW)
    for _ in range(10):
        with pytest.raises(failover.ServerError):
            client.prompt("Hi")
    # The k-th failing call makes 50 + k calls in the window; a retry is granted while
    # the retries, it included, are at most 10 % of them: 6 of the 10 calls retry.
    assert len(mock_server.requests) - before == 10 + 6


def test_idempotency_keys_per_call_and_provider_and_the_retry_count(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    client = two(mock_server, backup_server, retry=failover.RetryPolicy(max_retries=1))
    mock_server.push(500, json=SLOW)
    mock_server.push(500, json=SLOW)
    backup_server.push_text("b")
    client.prompt("Hi")
    first, retry = mock_server.requests
    [other] = backup_server.requests
    key = first.headers["idempotency-key"]
    assert retry.headers["idempotency-key"] == key, "the same key on every retry"
    assert other.headers["idempotency-key"] != key, "another provider, another key"
    assert [first.headers["x-retry-count"], retry.headers["x-retry-count"]] == ["0", "1"]
    assert other.headers["x-retry-count"] == "0"
    client = two(mock_server, backup_server)
    mock_server.push_text("a")
    client.prompt("Hi")
    assert mock_server.requests[-1].headers["idempotency-key"] != key, "another call"
    mock_server.push_text("a")
    client.prompt("Hi", idempotency_key="order-42")
    assert mock_server.requests[-1].headers["idempotency-key"] == "order-42"
    with pytest.raises(failover.ConfigurationError, match="idempotency_key"):
        client.prompt("Hi", idempotency_key="bad\nkey")


def test_with_options_shares_the_pool_and_cooldowns(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    events: list[Any] = []
    client = two(mock_server, backup_server)
    quick = client.with_options(timeout=5.0, deadline=30.0, on_event=events.append)
    mock_server.push(429, headers={"retry-after": "60"}, json=SLOW)
    backup_server.push_text("b")
    assert quick.prompt("Hi").provider == "b"
    assert [type(e).__name__ for e in events] == ["FailedOver"]
    assert "a" in client.cooldowns(), "one client's cooldown is the other's"
    quick.close()
    assert not client.is_closed, "closing a with_options() client closes nothing shared"
    backup_server.push_text("b")
    client.prompt("Hi")
    client.close()
    assert quick.is_closed
    with pytest.raises(failover.ConfigurationError):
        client.with_options(timeout=-1)


def test_worst_case() -> None:
    assert failover.RetryPolicy().worst_case(10, providers=2) == 180.0
    assert failover.RetryPolicy().worst_case(60) == 300.0
    assert failover.RetryPolicy.openai().worst_case(600) == 3 * 600 + 2 * 120
    assert failover.RetryPolicy.ruby_llm().worst_case(60) == float("inf")
    assert failover.RetryPolicy.ruby_llm(max_interval=30).worst_case(60) == 4 * 60 + 3 * 30


@pytest.mark.mock_server(assert_all_used=False)
def test_concurrent_calls_while_a_provider_flaps(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    calls = 200
    for i in range(calls * 2):
        if i % 3 == 0:
            mock_server.push(503, json=SLOW)
        else:
            mock_server.push_text("a")
        backup_server.push_text("b")
    client = two(mock_server, backup_server)

    async def many() -> list[Any]:
        async def one() -> Any:
            try:
                return (await client.prompt_async("Hi")).provider
            except failover.FailoverError as exc:
                return exc

        return await asyncio.gather(*(one() for _ in range(calls)))

    results = asyncio.run(many())
    thread_results: list[Any] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(5):
            try:
                out: Any = client.prompt("Hi").provider
            except failover.FailoverError as exc:
                out = exc
            with lock:
                thread_results.append(out)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    everything = results + thread_results
    assert len(everything) == calls + 80
    # The backup answers every call the first provider fails.
    for outcome in everything:
        assert outcome in ("a", "b"), outcome
    mock_server.close()
    backup_server.close()


def test_a_pool_spreads_calls_and_skips_a_cooling_member(backup_server: MockServer) -> None:
    # (Each member's script is exact: MockServer serves in order.)
    servers = [MockServer() for _ in range(3)]
    try:
        members = [openai(s) for s in servers]
        client = failover.Client(
            {"gpt": failover.Pool("gpt", members), "backup": openai(backup_server)},
            sleeper=FakeSleeper(),
        )
        for server in servers:
            for _ in range(33):
                server.push_text("ok")
        answered = [client.prompt("Hi").provider for _ in range(99)]
        assert {name: answered.count(name) for name in set(answered)} == {
            "gpt/0": 33,
            "gpt/1": 33,
            "gpt/2": 33,
        }
        # gpt/1 asks for quiet: once it has, later calls skip it.
        servers[1].push(429, headers={"retry-after": "60"}, json=SLOW)
        for _ in range(6):
            servers[0].push_text("ok")
            servers[2].push_text("ok")
        results = [client.prompt("Hi") for _ in range(6)]
        asked = next(
            i
            for i, r in enumerate(results)
            if any(a.provider == "gpt/1" and a.status == 429 for a in r.attempts)
        )
        later = results[asked + 1 :]
        assert later and all(r.provider in {"gpt/0", "gpt/2"} for r in later)
        called = [a.provider for r in later for a in r.attempts if a.skipped is None]
        assert "gpt/1" not in called
        assert "gpt/1" in client.cooldowns()
    finally:
        for server in servers:
            server.close()


def test_a_pool_fails_over_member_by_member_then_to_the_chain(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    events: list[Any] = []
    third = MockServer()
    try:
        client = failover.Client(
            {
                "pool": failover.Pool(
                    "pool", {"east": openai(mock_server), "west": openai(backup_server)}
                ),
                "local": openai(third),
            },
            retry=failover.RetryPolicy(max_retries=0),
            sleeper=FakeSleeper(),
            on_event=events.append,
        )
        mock_server.push(503, json=SLOW)
        backup_server.push(503, json=SLOW)
        third.push_text("local")
        r = client.prompt("Hi")
        assert r.provider == "local"
        assert [a.provider for a in r.attempts] == ["east", "west", "local"]
        assert [(e.from_provider, e.to_provider) for e in events] == [
            ("east", "west"),
            ("west", "local"),
        ]
        with pytest.raises(failover.ConfigurationError, match="pools, not their members"):
            client.prompt("Hi", provider="east")
        with pytest.raises(failover.ConfigurationError, match="its key"):
            failover.Client({"p": failover.Pool("q", [openai(mock_server)])})
        with pytest.raises(failover.ConfigurationError, match="strategy"):
            failover.Pool("p", [openai(mock_server)], strategy="random")
    finally:
        third.close()


def test_least_busy_prefers_the_member_with_fewer_requests_in_flight() -> None:
    slow, fast = MockServer(), MockServer()
    try:
        slow.push_text("slow", delay=0.5)
        fast.push_text("fast")
        fast.push_text("fast")
        client = failover.Client(
            {"p": failover.Pool("p", [openai(slow), openai(fast)], strategy="least_busy")}
        )

        async def main() -> list[str]:
            first = asyncio.ensure_future(client.prompt_async("Hi"))
            await asyncio.sleep(0.2)  # the first call is in flight at p/0
            second = await client.prompt_async("Hi")
            return [(await first).provider, second.provider]

        assert asyncio.run(main()) == ["p/0", "p/1"]
    finally:
        slow.close()
        fast.close()


def test_a_burst_of_failures_from_one_blip_cools_once(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    for _ in range(8):
        mock_server.push(503, json=SLOW, delay=0.2)
        backup_server.push_text("b")
    client = two(mock_server, backup_server, retry=failover.RetryPolicy(max_retries=0))

    async def burst() -> None:
        await asyncio.gather(*(client.prompt_async("Hi") for _ in range(8)))

    asyncio.run(burst())
    assert client.cooldowns() == {"a": 5.0}, "eight calls in flight are one failure, not eight"


def test_a_slow_success_sent_before_a_cooldown_does_not_end_it(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    mock_server.push_text("slow", delay=0.4)
    mock_server.push(429, headers={"retry-after": "100"}, json=SLOW)
    backup_server.push_text("b")
    client = two(mock_server, backup_server)

    async def both() -> None:
        slow = asyncio.ensure_future(client.prompt_async("Hi"))
        await asyncio.sleep(0.1)
        await client.prompt_async("Hi")  # the 429, while the slow one is in flight
        await slow

    asyncio.run(both())
    assert client.cooldowns() == {"a": 100.0}


def test_x_should_retry_false_keeps_the_hint_on_the_error(mock_server: MockServer) -> None:
    mock_server.push(503, headers={"x-should-retry": "false", "retry-after": "7"}, json=SLOW)
    client = failover.Client({"a": openai(mock_server)}, sleeper=FakeSleeper())
    with pytest.raises(failover.ProviderOverloaded) as info:
        client.prompt("Hi")
    assert info.value.retry_after == 7.0
    assert client.cooldowns() == {"a": 7.0}


def test_least_busy_spreads_a_burst_and_counts_open_streams() -> None:
    servers = [MockServer() for _ in range(3)]
    try:
        for server in servers:
            for _ in range(3):
                server.push_text("ok", delay=0.3)
        client = failover.Client(
            {"p": failover.Pool("p", [openai(s) for s in servers], strategy="least_busy")}
        )

        async def burst() -> list[str]:
            results = await asyncio.gather(*(client.prompt_async("Hi") for _ in range(6)))
            return [r.provider for r in results]

        answered = asyncio.run(burst())
        assert sorted(answered) == ["p/0", "p/0", "p/1", "p/1", "p/2", "p/2"]
        # An open stream keeps its member busy.
        servers[0].push(
            sse=['data: {"choices":[{"index":0,"delta":{"content":"x"}}]}'], fault="stall:1"
        )
        stream = client.stream("Hi")
        next(stream)
        busy_member = next(i for i, s in enumerate(servers) if len(s.requests) == 3)
        for s in servers:
            s.push_text("ok")
        r = client.prompt("Hi")
        assert r.provider != f"p/{busy_member}"
        stream.close()
    finally:
        for server in servers:
            server.close()


@pytest.mark.parametrize("strategy", ["round_robin", "least_busy"])
def test_a_cooling_members_turns_spread_evenly_over_the_other_members(strategy: str) -> None:
    servers = [MockServer() for _ in range(3)]
    try:
        servers[0].push(429, headers={"retry-after": "600"}, json=SLOW)
        for server in servers[1:]:
            for _ in range(13):
                server.push_text("ok")
        client = failover.Client(
            {"gpt": failover.Pool("gpt", [openai(s) for s in servers], strategy=strategy)},
            sleeper=FakeSleeper(),
        )
        client.prompt("Hi")  # gpt/0's turn: it asks for quiet, gpt/1 answers
        assert "gpt/0" in client.cooldowns()
        answered = [client.prompt("Hi").provider for _ in range(12)]
        assert {name: answered.count(name) for name in set(answered)} == {"gpt/1": 6, "gpt/2": 6}
        assert answered[:2] in (["gpt/1", "gpt/2"], ["gpt/2", "gpt/1"]), "taken in turn"
        assert len(servers[0].requests) == 1
    finally:
        for server in servers:
            server.close()


def test_least_busy_spreads_evenly_past_a_member_an_open_stream_holds() -> None:
    servers = [MockServer() for _ in range(3)]
    try:
        servers[0].push(sse=[DELTA_X], fault="stall:1")
        for server in servers[1:]:
            for _ in range(12):  # enough for every call: no member fails over for want of one
                server.push_text("ok")
        client = failover.Client(
            {"p": failover.Pool("p", [openai(s) for s in servers], strategy="least_busy")}
        )
        with client.stream("Hi") as stream:
            next(stream)  # open at p/0, the first in turn
            answered = [client.prompt("Hi").provider for _ in range(12)]
        assert {name: answered.count(name) for name in set(answered)} == {"p/1": 6, "p/2": 6}
        assert answered[:2] in (["p/1", "p/2"], ["p/2", "p/1"]), "taken in turn"
    finally:
        for server in servers:
            server.close()


@pytest.mark.parametrize("how", ["read to its end", "closed", "broken"])
def test_least_busy_counts_a_stream_no_longer_once_it_is_over(how: str) -> None:
    # The Stream object stays referenced: its end (not its garbage collection)
    # ends its call.
    servers = [MockServer(), MockServer()]
    try:
        if how == "broken":
            servers[0].push(sse=[DELTA_X, DELTA_X], fault="cut:1")
        else:
            servers[0].push(sse=[DELTA_X, DELTA_X, FINISH, "data: [DONE]"])
        for server in servers:
            for _ in range(2):
                server.push_text("ok")
        client = failover.Client(
            {"p": failover.Pool("p", [openai(s) for s in servers], strategy="least_busy")}
        )
        stream = client.stream("Hi")
        next(stream)  # open at p/0, the first in turn
        assert servers[0].requests and not servers[1].requests
        if how == "read to its end":
            assert [c.text for c in stream] == ["x"]
        elif how == "closed":
            stream.close()
        else:
            with pytest.raises(failover.StreamInterrupted):
                list(stream)
        # The rotation's next turns: p/1, then p/0 again (were p/0 still busy: p/1).
        assert [client.prompt("Hi").provider for _ in range(2)] == ["p/1", "p/0"]
        assert stream is not None
    finally:
        for server in servers:
            server.close()


def test_the_callers_idempotency_header_wins_and_restarts_count_as_retries(
    mock_server: MockServer,
) -> None:
    client = failover.Client({"a": openai(mock_server)}, sleeper=FakeSleeper())
    mock_server.push_text("a")
    client.prompt("Hi", headers={"Idempotency-Key": "order-7"})
    assert mock_server.requests[-1].headers["idempotency-key"] == "order-7"
    mock_server.push(sse=['data: {"choices":[{"index":0,"delta":{"content":"x"}}]}'], fault="cut:1")
    mock_server.push(
        sse=[
            'data: {"choices":[{"index":0,"delta":{"content":"y"}}]}',
            'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
        ]
    )
    list(client.stream("Hi", on_interrupt="restart"))
    first, restart = mock_server.requests[-2:]
    assert first.headers["idempotency-key"] == restart.headers["idempotency-key"]
    assert (first.headers["x-retry-count"], restart.headers["x-retry-count"]) == ("0", "1")


def test_a_with_options_client_closed_on_its_own_refuses_calls(mock_server: MockServer) -> None:
    client = failover.Client({"a": openai(mock_server)})
    other = client.with_options(timeout=5.0)
    with other:
        pass
    assert other.is_closed and not client.is_closed
    with pytest.raises(failover.FailoverError, match="closed"):
        other.prompt("Hi")
    assert mock_server.requests == []


def test_provider_names_may_not_hold_the_key_separators(mock_server: MockServer) -> None:
    for name in ("a/b", "a:b"):
        with pytest.raises(failover.ConfigurationError, match="may not hold"):
            failover.Client({name: openai(mock_server)})
        with pytest.raises(failover.ConfigurationError, match="may not hold"):
            failover.Client({"p": failover.Pool("p", {name: openai(mock_server)})})


def test_a_cooling_provider_after_the_last_one_tried_is_recorded_as_skipped(
    mock_server: MockServer, backup_server: MockServer, call: Any
) -> None:
    client = two(mock_server, backup_server)
    backup_server.push(429, headers={"retry-after": "120"}, json=SLOW)
    with pytest.raises(failover.RateLimited):
        client.prompt("Hi", provider="b", retry=failover.RetryPolicy(max_retries_last=0))
    # a is the last provider left: its normal retries, then its error, with b
    # recorded where it stands in the chain, after a's attempts.
    for _ in range(3):
        mock_server.push(500, json={"error": {"message": "down"}})
    with pytest.raises(failover.ServerError) as info:
        call(client)
    attempts = info.value.attempts
    assert [(a.provider, a.status) for a in attempts] == [("a", 500)] * 3 + [("b", None)]
    # Its time left as the call ended, after a's two backoffs.
    waited = sum(a.waited for a in attempts)
    assert attempts[3].skipped == f"cooling down for {120 - waited:.1f}s more: it asked for 120s"
    # A provider after the one that answered was not passed over: not recorded.
    mock_server.push_text("a")
    assert [a.provider for a in call(client).attempts] == ["a"]


@pytest.mark.mock_server(assert_all_used=False)
def test_a_provider_back_from_an_outage_is_used_again_within_the_cooldown_cap(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    # The primary is down for the first 60 s (nothing scripted: MockServer's
    # unscripted answer is a 500), healthy after; a call every 4 s; no
    # same-provider retry, so each try is one request.
    sleeper = FakeSleeper()
    client = two(
        mock_server, backup_server, sleeper=sleeper, retry=failover.RetryPolicy(max_retries=0)
    )
    tried, answered_by = [], []
    for step in range(30):
        now = 4 * step
        if now >= 60 and mock_server.pending == 0:
            mock_server.push_text("a")
        if backup_server.pending == 0:
            backup_server.push_text("b")
        before = len(mock_server.requests)
        answered_by.append(client.prompt("Hi").provider)
        if len(mock_server.requests) > before:
            tried.append(now)
        sleeper.advance(4)
    sleeper.assert_never_slept()
    # Cooldowns of 5, 10, 20 s, then capped at 30 s: tried at 0, 8, 20, 40,
    # then at 72, healthy: the circuit closes, and every later call is a's.
    assert tried[:5] == [0, 8, 20, 40, 72]
    back = next(t for t in tried if t >= 60)
    assert back - 60 <= 30
    assert answered_by[back // 4 :] == ["a"] * (30 - back // 4)
    assert set(answered_by[: back // 4]) == {"b"}


def test_one_call_at_a_time_probes_a_provider_whose_cooldown_ended(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    sleeper = FakeSleeper()
    client = two(
        mock_server, backup_server, sleeper=sleeper, retry=failover.RetryPolicy(max_retries=0)
    )
    mock_server.push(503, json=SLOW)
    backup_server.push_text("b")
    assert client.prompt("Hi").provider == "b"
    assert client.cooldowns() == {"a": 5.0}

    async def burst(others: int) -> tuple[Any, list[Any]]:
        sent = len(mock_server.requests)
        probe = asyncio.ensure_future(client.prompt_async("Hi"))
        while len(mock_server.requests) == sent:  # until the probe's slow answer is under way
            await asyncio.sleep(0.005)
        rest = await asyncio.gather(*(client.prompt_async("Hi") for _ in range(others)))
        return await probe, rest

    def probed_elsewhere(responses: list[Any]) -> bool:
        return all(
            r.provider == "b"
            and r.attempts[0].skipped is not None
            and r.attempts[0].skipped.startswith("being probed by another call")
            for r in responses
        )

    # The cooldown ends: one call probes a (slowly, and it fails again); the
    # calls made meanwhile keep to b; the failure starts the next cooldown.
    sleeper.advance(5)
    mock_server.push(503, json=SLOW, delay=1.0)
    for _ in range(9):
        backup_server.push_text("b")
    probe, rest = asyncio.run(burst(8))
    assert probe.attempts[0].provider == "a" and probe.provider == "b"
    assert len(mock_server.requests) == 2, "one probe, not nine"
    assert probed_elsewhere(rest)
    assert client.cooldowns() == {"a": 10.0}
    # Again, and this time the probe answers: the circuit closes.
    sleeper.advance(10)
    mock_server.push_text("a is back", delay=1.0)
    for _ in range(8):
        backup_server.push_text("b")
    probe, rest = asyncio.run(burst(8))
    assert probe.provider == "a" and len(mock_server.requests) == 3
    assert probed_elsewhere(rest)
    mock_server.push_text("a again")
    r = client.prompt("Hi")
    assert r.provider == "a" and r.attempts[0].skipped is None


def test_a_hinted_cooldown_keeps_its_number_up_to_the_hinted_cap(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    client = two(mock_server, backup_server, retry=failover.RetryPolicy(max_retries_last=0))
    mock_server.push(429, headers={"retry-after": "7200"}, json=SLOW)
    backup_server.push_text("b")
    assert client.prompt("Hi").provider == "b"
    assert client.cooldowns() == {"a": 3600.0}
    # The error still says what the provider asked for.
    mock_server.push(429, headers={"retry-after": "7200"}, json=SLOW)
    lone = failover.Client({"a": openai(mock_server)}, sleeper=FakeSleeper())
    with pytest.raises(failover.RateLimited) as info:
        lone.prompt("Hi", retry=failover.RetryPolicy(max_hinted_cooldown=600))
    assert info.value.retry_after == 7200.0
    assert lone.cooldowns() == {"a": 600.0}
    # Under the cap, the number the provider gave.
    mock_server.push(429, headers={"retry-after": "90"}, json=SLOW)
    backup_server.push_text("b")
    other = two(mock_server, backup_server)
    other.prompt("Hi")
    assert other.cooldowns() == {"a": 90.0}


def test_a_headroom_reset_in_the_far_future_cools_for_at_most_the_hinted_cap(
    mock_server: MockServer,
) -> None:
    headers = {
        "anthropic-ratelimit-tokens-remaining": "0",
        "anthropic-ratelimit-tokens-reset": "2099-01-01T00:00:00Z",
    }
    mock_server.push_text("ok", wire="anthropic", headers=headers)
    client = failover.Client({"c": anthropic(mock_server)}, sleeper=FakeSleeper())
    client.prompt("Hi")
    assert client.cooldowns() == {"c": 3600.0}
    # The only provider, so tried all the same: its success ends that
    # cooldown, and its headers start one of the policy's cap.
    mock_server.push_text("ok", wire="anthropic", headers=headers)
    client.prompt("Hi", retry=failover.RetryPolicy(max_hinted_cooldown=60))
    assert client.cooldowns() == {"c": 60.0}


def test_the_cooldown_caps_are_checked_and_shown() -> None:
    for name in ["max_cooldown", "max_hinted_cooldown"]:
        for bad in [-1, float("inf"), "30", True, 2e9]:
            with pytest.raises(failover.ConfigurationError, match=name):
                failover.RetryPolicy(**{name: bad})
    policy = failover.RetryPolicy(max_cooldown=12, max_hinted_cooldown=600)
    assert "max_cooldown=12.0, max_hinted_cooldown=600.0" in repr(policy)
    assert policy != failover.RetryPolicy()
    # Cooldowns are the client's memory: every preset has the defaults.
    for preset in [
        failover.RetryPolicy.laravel(),
        failover.RetryPolicy.openai(),
        failover.RetryPolicy.ruby_llm(),
    ]:
        assert (preset.max_cooldown, preset.max_hinted_cooldown) == (30.0, 3600.0)


def test_a_cancelled_probe_gives_the_probe_back(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    sleeper = FakeSleeper()
    client = two(
        mock_server, backup_server, sleeper=sleeper, retry=failover.RetryPolicy(max_retries=0)
    )
    mock_server.push(503, json=SLOW)
    backup_server.push_text("b")
    client.prompt("Hi")
    sleeper.advance(5)
    # The probe never gets an answer, and its task is cancelled.
    mock_server.push(fault="hang")

    async def cancelled() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(client.prompt_async("Hi"), 0.3)
        # The runtime drops the cancelled call's future on its own threads,
        # within microseconds: a wide margin for that, not a wait on a retry.
        await asyncio.sleep(0.3)

    asyncio.run(cancelled())
    # The next call probes a itself, instead of finding it "being probed".
    mock_server.push_text("a")
    r = client.prompt("Hi")
    assert r.provider == "a" and [a.skipped for a in r.attempts] == [None]
