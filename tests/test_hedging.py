"""Hedged requests (``Client(hedge=failover.Hedge(after=, max_extra=))``): a
late attempt gets a twin at the next provider, the first to deliver wins and
the other is cancelled; a prompt provider is never hedged; the budget bounds
the extra requests; the deadline bounds both. ``after`` is real time, so
these tests wait it out for real: 0.2 s, where the failure they guard against
is seconds."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

import failover
from failover.testing import MockServer, fake_sleep

from conftest import collect, oa, oa_text, openai, wait_for

HEDGE = failover.Hedge(after=0.2, max_extra=1.0)


def chain(
    first: MockServer, second: MockServer, **kwargs: Any
) -> tuple[failover.Client, list[Any]]:
    events: list[Any] = []
    client = failover.Client(
        {"a": openai(first), "b": openai(second)}, on_event=events.append, **kwargs
    )
    return client, events


def test_a_late_answer_is_hedged_and_the_first_to_deliver_wins(
    call: Callable[..., failover.Response], mock_server: MockServer, backup_server: MockServer
) -> None:
    mock_server.push_text("slow", delay=5.0)
    backup_server.push_text("fast")
    client, events = chain(mock_server, backup_server, hedge=failover.Hedge(0.2, 1.0))
    started = time.monotonic()
    r = call(client)
    # About `after` and the backup's answer; never the slow provider's 5 s.
    assert time.monotonic() - started < 2.0
    assert (r.text, r.provider) == ("fast", "b")
    loser, winner = r.attempts
    assert (loser.provider, loser.hedged, loser.status, loser.kind) == ("a", True, None, None)
    # Whether the cancelled request is billed cannot be known.
    assert loser.billed is None
    assert (winner.provider, winner.status, winner.hedged) == ("b", 200, False)
    # The slow provider saw its client leave: the loser's connection was closed.
    wait_for(lambda: mock_server.left_early == 1, within=5)
    started_event, won = [
        e for e in events if isinstance(e, (failover.HedgeStarted, failover.HedgeWon))
    ]
    assert (started_event.provider, started_event.to_provider, started_event.after) == (
        "a",
        "b",
        0.2,
    )
    assert (won.winner, won.loser) == ("b", "a")
    assert "no answer from a after 0.200s" in started_event.reason
    client.close()


def test_a_prompt_provider_is_never_hedged(
    call: Callable[..., failover.Response], mock_server: MockServer, backup_server: MockServer
) -> None:
    mock_server.push_text("quick")
    client, events = chain(mock_server, backup_server, hedge=HEDGE)
    r = call(client)
    assert r.provider == "a"
    assert [a.provider for a in r.attempts] == ["a"]
    assert backup_server.requests == []
    assert events == []
    client.close()


def test_a_stream_is_hedged_until_its_first_content(
    face: str, mock_server: MockServer, backup_server: MockServer
) -> None:
    mock_server.push(sse=[oa_text("late")], delay=5.0)
    stop = oa({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    backup_server.push(sse=[oa_text("Hedged "), oa_text("stream"), stop])
    client, events = chain(mock_server, backup_server, hedge=failover.Hedge(0.2, 1.0))
    started = time.monotonic()
    chunks, response = collect(face, client)
    assert time.monotonic() - started < 2.0
    # Only the winner's text: a stream never mixes the two.
    assert "".join(c.text for c in chunks) == "Hedged stream"
    assert response.provider == "b"
    assert [(a.provider, a.hedged) for a in response.attempts] == [("a", True), ("b", False)]
    assert any(isinstance(e, failover.HedgeWon) for e in events)
    client.close()


def test_a_spent_budget_sends_no_hedge_and_records_why(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    # 0.01 of the minute's calls, plus one: the first late call is hedged,
    # the second finds the budget spent and waits on.
    mock_server.push_text("slow", delay=5.0)
    mock_server.push_text("slow but sure", delay=0.6)
    backup_server.push_text("fast")
    client, _ = chain(mock_server, backup_server, hedge=failover.Hedge(0.2, 0.01))
    assert client.prompt("Hi").provider == "b"
    r = client.prompt("Hi")
    assert r.provider == "a"
    skipped = [(a.provider, a.skipped) for a in r.attempts if a.skipped]
    assert skipped == [("b", "hedge not sent: the hedge budget is spent")]
    assert len(backup_server.requests) == 1
    client.close()


def test_max_extra_0_never_hedges_and_records_nothing(
    call: Callable[..., failover.Response], mock_server: MockServer, backup_server: MockServer
) -> None:
    mock_server.push_text("slow but sure", delay=0.5)
    client, events = chain(mock_server, backup_server, hedge=failover.Hedge(0.2, 0.0))
    r = call(client)
    assert [(a.provider, a.skipped) for a in r.attempts] == [("a", None)]
    assert events == [] and backup_server.requests == []
    client.close()


def test_the_budget_bounds_hedges_to_one_plus_max_extra_a_call(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    # 0.5 of 4 calls, plus 1 a minute: 3 hedges over 4 late calls.
    for _ in range(4):
        mock_server.push_text("slow", delay=0.5)
    for _ in range(3):
        backup_server.push_text("fast")
    client, _ = chain(mock_server, backup_server, hedge=failover.Hedge(0.2, 0.5))
    answered_by = [client.prompt("Hi").provider for _ in range(4)]
    assert answered_by.count("b") == 3
    assert len(backup_server.requests) == 3
    client.close()


def test_hedge_per_call_turns_it_on_or_off(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    mock_server.push_text("slow", delay=0.5)
    mock_server.push_text("slow", delay=5.0)
    backup_server.push_text("fast")
    client, _ = chain(mock_server, backup_server, hedge=HEDGE)
    assert client.prompt("Hi", hedge=False).provider == "a"
    assert backup_server.requests == []
    plain, _ = chain(mock_server, backup_server)
    assert plain.prompt("Hi", hedge=failover.Hedge(0.2, 1.0)).provider == "b"
    client.close()
    plain.close()


def test_the_deadline_bounds_both_requests(
    call: Callable[..., failover.Response], mock_server: MockServer, backup_server: MockServer
) -> None:
    mock_server.push_text("slow", delay=5.0)
    backup_server.push_text("also slow", delay=5.0)
    client, _ = chain(mock_server, backup_server, hedge=failover.Hedge(0.2, 1.0))
    started = time.monotonic()
    with pytest.raises(failover.DeadlineExceeded):
        call(client, deadline=0.8)
    # A wide margin: the failure this guards against is seconds past it.
    assert time.monotonic() - started < 2.5
    client.close()


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda: failover.Hedge(after=0), r"after=\) is seconds above 0"),
        (lambda: failover.Hedge(after=float("nan")), r"after=\) is seconds above 0"),
        (lambda: failover.Hedge(after="p100"), "a percentile of each provider's"),
        (lambda: failover.Hedge(after="fast"), "a percentile of each provider's"),
        (lambda: failover.Hedge(max_extra=1.5), r"max_extra=\) is a fraction of calls"),
        (lambda: failover.Client({"a": failover.Ollama("m")}, hedge=2.0), "hedge must be"),
    ],
)
def test_hedge_options_are_checked_when_given(make: Callable[[], Any], says: str) -> None:
    with pytest.raises(failover.ConfigurationError, match=says):
        make()


def test_a_per_call_hedge_is_checked_before_sending(mock_server: MockServer) -> None:
    with failover.Client({"a": openai(mock_server)}) as client:
        with pytest.raises(failover.ConfigurationError, match="hedge= takes"):
            client.prompt("Hi", hedge="yes")  # type: ignore[arg-type]
    assert mock_server.requests == []


def test_stats_count_a_hedge_as_no_failover(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    mock_server.push_text("slow", delay=5.0)
    backup_server.push_text("fast")
    client, _ = chain(mock_server, backup_server, hedge=failover.Hedge(0.2, 1.0))
    client.prompt("Hi")
    stats = client.stats()
    assert (stats.providers["a"].attempts, stats.providers["a"].failovers) == (1, 0)
    assert (stats.providers["b"].answered, stats.total.retries) == (1, 0)
    assert (stats.providers["a"].hedged, stats.total.hedged) == (1, 1)
    client.close()


def test_p95_learns_each_providers_latency_before_it_hedges(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    # Nothing learned yet: the first slow answer is waited for.
    mock_server.push_text("slow", delay=0.5)
    for _ in range(19):
        mock_server.push_text("quick")
    mock_server.push_text("late", delay=5.0)
    backup_server.push_text("fast")
    client, events = chain(mock_server, backup_server, hedge=failover.Hedge("p95", 1.0))
    assert client.prompt("Hi").provider == "a"
    assert events == [] and backup_server.requests == []
    for _ in range(19):
        client.prompt("Hi")
    # 20 seen: the 95th percentile is a quick answer's time, raised to the
    # 0.1 s floor; the late answer is hedged then.
    started = time.monotonic()
    r = client.prompt("Hi")
    assert time.monotonic() - started < 2.0
    assert r.provider == "b"
    hedge = next(e for e in events if isinstance(e, failover.HedgeStarted))
    assert hedge.after == pytest.approx(0.1)
    client.close()


def test_under_a_fake_sleeper_the_hedge_waits_real_time_and_records_no_sleep(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    mock_server.push_text("slow", delay=5.0)
    backup_server.push_text("fast")
    with fake_sleep() as sleeper:
        client, _ = chain(mock_server, backup_server, hedge=failover.Hedge(0.2, 1.0))
        started = time.monotonic()
        assert client.prompt("Hi").provider == "b"
        assert time.monotonic() - started < 2.0
        client.close()
    # `after` is a provider's latency, not a wait the engine chose: no sleep.
    assert sleeper.sleeps == []


RATE_LIMITED = {"error": {"message": "slow down", "type": "rate_limit"}}


def test_a_failed_hedge_cools_its_provider_and_is_logged(
    mock_server: MockServer, backup_server: MockServer, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    caplog.set_level(logging.INFO, logger="failover")
    for _ in range(2):
        mock_server.push_text("slow but sure", delay=0.5)
    backup_server.push(401, json={"error": {"message": "Incorrect API key", "type": "auth"}})
    client, _ = chain(mock_server, backup_server, hedge=failover.Hedge(0.2, 1.0))
    first = client.prompt("Hi")
    assert first.provider == "a"
    assert [(a.provider, a.status, a.hedged) for a in first.attempts] == [
        ("a", 200, False),
        ("b", 401, True),
    ]
    # As any auth failure: logged at WARNING, and b cools (300 s).
    warned = [
        r for r in caplog.records if r.levelname == "WARNING" and "hedge: b failed" in r.message
    ]
    assert warned and warned[0].failover_kind == "auth"
    assert client.cooldowns()["b"] > 250
    # The next late call has no one to hedge to.
    assert [a.provider for a in client.prompt("Hi").attempts] == ["a"]
    assert len(backup_server.requests) == 1
    stats = client.stats()
    assert stats.total.failovers == 0 and stats.providers["b"].hedged == 1
    client.close()


def test_a_first_attempt_failing_during_its_hedge_keeps_its_own_time(
    call: Callable[..., failover.Response], mock_server: MockServer, backup_server: MockServer
) -> None:
    mock_server.push(500, json={"error": {"message": "boom"}}, delay=0.5)
    backup_server.push_text("late but fine", delay=1.3)
    client, _ = chain(mock_server, backup_server, hedge=failover.Hedge(0.2, 1.0))
    r = call(client)
    assert r.provider == "b"
    first, second = r.attempts
    assert (first.provider, first.status, first.hedged) == ("a", 500, True)
    assert 0.4 < first.duration < 1.0  # its 500's time, not the hedge's
    assert first.started < second.started
    assert client.stats().total.failovers == 0
    client.close()


def test_a_hedge_goes_past_a_provider_without_room_to_one_with_it(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    with MockServer() as third:
        stop = oa({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        backup_server.push(sse=[oa_text("held"), stop])
        mock_server.push_text("slow", delay=3.0)
        third.push_text("from the third")
        client = failover.Client(
            {
                "a": openai(mock_server),
                "b": openai(backup_server, limit=failover.Limit(concurrency=1)),
                "c": openai(third),
            },
            hedge=failover.Hedge(0.2, 1.0),
        )
        with client.stream("Hi", provider="b") as held:
            next(iter(held))  # b's one slot is taken
            started = time.monotonic()
            r = client.prompt("Hi")
            assert time.monotonic() - started < 2.0
        assert r.provider == "c"
        assert ("b", "hedge not sent: at its concurrency limit (1 in flight)") in [
            (a.provider, a.skipped) for a in r.attempts
        ]
        client.close()


def test_when_both_fail_the_call_goes_on_as_without_a_hedge(
    call: Callable[..., failover.Response], mock_server: MockServer, backup_server: MockServer
) -> None:
    """Found by the new-user trial of 2026-12-06: a hedge's provider was passed
    over for its hedge's timeout, so a call that succeeds unhedged failed."""
    mock_server.push(fault="hang")
    backup_server.push(500, json={"error": {"message": "boom"}})
    backup_server.push_text("from b")
    client, _ = chain(mock_server, backup_server, hedge=failover.Hedge(0.3, 1.0), timeout=1.0)
    with fake_sleep() as sleeper:
        r = call(client)
    # b's hedge was its first attempt; when a timed out, b was retried after
    # the backoff its 500 calls for, as the last provider is without a hedge.
    assert r.provider == "b"
    assert [(a.provider, a.kind, a.hedged) for a in r.attempts] == [
        ("a", "timeout", False),
        ("b", "server_error", True),
        ("b", None, False),
    ]
    assert len(sleeper.sleeps) == 1
    assert "b" not in client.cooldowns()
    # Counted as without a hedge: the call left a for b, and retried b.
    stats = client.stats()
    assert (stats.providers["a"].failovers, stats.providers["b"].retries) == (1, 1)
    assert stats.providers["b"].hedged == 1
    client.close()


@pytest.mark.mock_server(assert_all_used=False)
def test_when_both_fail_a_hedge_provider_given_up_on_is_passed_over(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    mock_server.push(fault="hang")
    backup_server.push(401, json={"error": {"message": "Incorrect API key", "type": "auth"}})
    backup_server.push_text("never asked")
    client, _ = chain(mock_server, backup_server, hedge=failover.Hedge(0.3, 1.0), timeout=1.0)
    with fake_sleep(), pytest.raises(failover.AuthenticationError) as caught:
        client.prompt("Hi")
    # An auth failure is given up on at once: b cools, and when a times out
    # too, b is passed over, not sent the same request again; the call ends
    # in b's failure, the latest, as it would without a hedge.
    assert len(backup_server.requests) == 1
    assert caught.value.provider == "b"
    skipped = [(a.provider, a.skipped) for a in caught.value.attempts if a.skipped]
    assert skipped and skipped[-1][0] == "b" and "cooling down" in (skipped[-1][1] or "")
    # Counted as without a hedge: the call left a for b.
    assert client.stats().providers["a"].failovers == 1
    client.close()


@pytest.mark.parametrize("hedge", [None, failover.Hedge(0.2, 1.0)], ids=["unhedged", "hedged"])
def test_a_chain_of_three_counts_the_same_failovers_hedged_or_not(
    mock_server: MockServer, backup_server: MockServer, hedge: failover.Hedge | None
) -> None:
    """Found by the third new-user trial: a hedge's provider passed over after
    both failed was no failover in stats()."""
    with MockServer() as third:
        mock_server.push(503, json={"error": {"message": "busy"}}, delay=0.6)
        backup_server.push(401, json={"error": {"message": "Incorrect API key", "type": "auth"}})
        third.push_text("from c")
        client = failover.Client(
            {"a": openai(mock_server), "b": openai(backup_server), "c": openai(third)},
            hedge=hedge,
            retry=failover.RetryPolicy(max_retries=0),
        )
        with fake_sleep():
            r = client.prompt("Hi")
        assert r.provider == "c"
        stats = client.stats()
        assert (stats.providers["a"].failovers, stats.providers["b"].failovers) == (1, 1)
        assert stats.providers["b"].attempts == 1
        client.close()


def test_a_first_attempt_failing_during_its_hedge_cools_its_provider(
    call: Callable[..., failover.Response], mock_server: MockServer, backup_server: MockServer
) -> None:
    mock_server.push(401, json={"error": {"message": "bad key", "type": "auth"}}, delay=0.5)
    backup_server.push_text("from b", delay=0.6)
    client, events = chain(mock_server, backup_server, hedge=failover.Hedge(0.2, 1.0))
    assert call(client).provider == "b"
    assert client.cooldowns()["a"] > 250  # an auth failure's 300 s
    won = [e for e in events if isinstance(e, failover.HedgeWon)]
    assert [(e.winner, e.loser) for e in won] == [("b", "a")]
    client.close()


def test_what_a_hedge_passes_over_is_recorded_after_the_attempt_in_flight(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    with MockServer() as third:
        backup_server.push(429, headers={"retry-after": "100"}, json=RATE_LIMITED)
        client = failover.Client(
            {"a": openai(mock_server), "b": openai(backup_server), "c": openai(third)},
            hedge=failover.Hedge(0.2, 1.0),
        )
        with pytest.raises(failover.RateLimited):
            client.prompt("Hi", provider="b")  # b asks for 100 s: it cools
        mock_server.push_text("slow", delay=3.0)
        third.push_text("from c")
        r = client.prompt("Hi")
        assert r.provider == "c"
        seen = [(a.provider, a.hedged, a.skipped is not None) for a in r.attempts]
        assert seen == [("a", True, False), ("b", False, True), ("c", False, False)]
        assert "hedge not sent: cooling down" in (r.attempts[1].skipped or "")
        client.close()


def test_when_the_first_attempt_wins_its_stream_keeps_its_own_record(
    face: str, mock_server: MockServer, backup_server: MockServer
) -> None:
    # The hedge's cancelled request is recorded after the winner: the stream's
    # usage, billing and time still go to the winner, and r.cost is its own.
    stop = oa({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    usage = oa({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}})
    mock_server.push(sse=[oa_text("first "), oa_text("wins"), stop, usage], delay=0.4)
    backup_server.push_text("late", delay=5.0)
    client = failover.Client(
        {"a": openai(mock_server, price=failover.Price(1.0, 2.0)), "b": openai(backup_server)},
        hedge=failover.Hedge(0.2, 1.0),
    )
    chunks, response = collect(face, client)
    assert "".join(c.text for c in chunks) == "first wins"
    winner, loser = response.attempts
    assert (winner.provider, winner.hedged, winner.billed) == ("a", False, True)
    assert winner.usage is not None and winner.usage.input_tokens == 7
    assert (loser.provider, loser.hedged, loser.usage, loser.billed) == ("b", True, None, None)
    assert response.cost == pytest.approx((7 * 1.0 + 3 * 2.0) / 1e6)
    client.close()
