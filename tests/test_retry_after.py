"""laravel/ai's Retry-After cases, through the public API against MockServer,
sync and async (the ``call`` fixture runs each test through both faces)."""

from __future__ import annotations

import email.utils

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

from conftest import anthropic, openai

RATE_LIMIT = {"error": {"type": "rate_limit_error", "message": "Rate limit reached"}}
OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


def two_providers(primary: MockServer, backup: MockServer, **kwargs: object) -> tuple:
    events: list[object] = []
    sleeper = FakeSleeper()
    client = failover.Client(
        {"primary": anthropic(primary), "backup": openai(backup)},
        sleeper=sleeper,
        on_event=events.append,
        **kwargs,  # type: ignore[arg-type]
    )
    return client, sleeper, events


def failed_over(events: list[object]) -> list[tuple[str, str]]:
    return [(e.from_provider, e.to_provider) for e in events if isinstance(e, failover.FailedOver)]


def test_429_with_retry_after_1_is_retried_once_after_exactly_1s(mock_server, backup_server, call):
    mock_server.push(429, headers={"retry-after": "1"}, json=RATE_LIMIT)
    mock_server.push_text("recovered", wire="anthropic")
    client, sleeper, events = two_providers(mock_server, backup_server)

    r = call(client)

    assert (r.text, r.provider) == ("recovered", "primary")
    sleeper.assert_sequence([1.0])
    assert failed_over(events) == []
    assert len(mock_server.requests) == 2 and backup_server.requests == []
    assert [(a.provider, a.status, a.waited) for a in r.attempts] == [
        ("primary", 429, 0.0),
        ("primary", 200, 1.0),
    ]
    retries = [e for e in events if isinstance(e, failover.RetryScheduled)]
    assert [(e.provider, e.delay, e.kind, e.status) for e in retries] == [
        ("primary", 1.0, "rate_limited", 429)
    ]


def test_overloaded_with_retry_after_5_is_retried_once_after_exactly_5s(
    mock_server, backup_server, call
):
    mock_server.push(529, headers={"retry-after": "5"}, json=OVERLOADED)
    mock_server.push_text("ok", wire="anthropic")
    client, sleeper, events = two_providers(mock_server, backup_server)

    assert call(client).provider == "primary"
    sleeper.assert_sequence([5.0])
    assert failed_over(events) == []


def test_a_second_429_fails_over(mock_server, backup_server, call):
    mock_server.push(429, headers={"retry-after": "1"}, json=RATE_LIMIT)
    mock_server.push(429, headers={"retry-after": "1"}, json=RATE_LIMIT)
    backup_server.push_text("from backup")
    client, sleeper, events = two_providers(mock_server, backup_server)

    r = call(client)

    assert (r.text, r.provider) == ("from backup", "backup")
    sleeper.assert_sequence([1.0])
    assert failed_over(events) == [("primary", "backup")]
    event = next(e for e in events if isinstance(e, failover.FailedOver))
    assert isinstance(event.error, failover.RateLimited) and event.error.retry_after == 1.0
    assert [a.provider for a in r.attempts] == ["primary", "primary", "backup"]


def test_a_429_without_a_hint_fails_over_at_once(mock_server, backup_server, call):
    mock_server.push(429, json=RATE_LIMIT)
    backup_server.push_text("from backup")
    client, sleeper, events = two_providers(mock_server, backup_server)

    assert call(client).provider == "backup"
    sleeper.assert_never_slept()
    assert failed_over(events) == [("primary", "backup")]


def test_a_500_without_a_hint_gets_one_quick_retry_then_fails_over(
    mock_server, backup_server, call
):
    mock_server.push(500, json={"error": {"message": "boom"}})
    mock_server.push(500, json={"error": {"message": "boom"}})
    backup_server.push_text("from backup")
    client, sleeper, _ = two_providers(mock_server, backup_server)

    assert call(client).provider == "backup"
    # The first backoff step: 0.5 s less up to 25 % jitter.
    assert len(sleeper.sleeps) == 1 and 0.375 <= sleeper.sleeps[0] <= 0.5


def test_a_wait_above_the_cap_fails_over_without_sleeping(mock_server, backup_server, call):
    mock_server.push(429, headers={"retry-after": "300"}, json=RATE_LIMIT)
    backup_server.push_text("from backup")
    client, sleeper, events = two_providers(mock_server, backup_server)

    assert call(client).provider == "backup"
    sleeper.assert_never_slept()
    assert failed_over(events)[0] == ("primary", "backup")


def test_a_400_is_raised_at_once_and_the_backup_is_never_called(mock_server, backup_server, call):
    mock_server.push(400, json={"error": {"type": "invalid_request_error", "message": "bad"}})
    client, sleeper, events = two_providers(mock_server, backup_server)

    with pytest.raises(failover.BadRequest) as info:
        call(client)

    assert info.value.status == 400 and info.value.provider == "primary"
    assert backup_server.requests == []
    sleeper.assert_never_slept()
    assert failed_over(events) == []
    assert [type(e) for e in events] == [failover.CallFailed]


def test_the_last_provider_waits_up_to_60s(mock_server, call):
    mock_server.push(429, headers={"retry-after": "45"}, json=RATE_LIMIT)
    mock_server.push_text("ok", wire="anthropic")
    sleeper = FakeSleeper()
    client = failover.Client({"only": anthropic(mock_server)}, sleeper=sleeper)

    assert call(client).text == "ok"
    sleeper.assert_sequence([45.0])


@pytest.mark.parametrize(
    "retry_after", ["1.5", "http-date 3 s ahead"], ids=["fraction", "http-date"]
)
def test_laravel_preset_fails_over_on_non_integer_retry_after(
    mock_server, backup_server, call, retry_after
):
    client, sleeper, events = two_providers(
        mock_server, backup_server, retry=failover.RetryPolicy.laravel()
    )
    if retry_after.startswith("http-date"):
        # Short enough that any other policy would wait for it.
        retry_after = email.utils.formatdate(sleeper.time() + 3, usegmt=True)
    mock_server.push(429, headers={"retry-after": retry_after}, json=RATE_LIMIT)
    backup_server.push_text("from backup")

    assert call(client).provider == "backup"
    sleeper.assert_never_slept()
    assert failed_over(events) == [("primary", "backup")]


def test_laravel_preset_retries_integer_retry_after(mock_server, backup_server, call):
    mock_server.push(503, headers={"retry-after": "2"}, json=OVERLOADED)
    mock_server.push_text("ok", wire="anthropic")
    client, sleeper, _ = two_providers(
        mock_server, backup_server, retry=failover.RetryPolicy.laravel()
    )

    assert call(client).provider == "primary"
    sleeper.assert_sequence([2.0])


def test_when_every_provider_fails_the_last_error_is_raised(mock_server, backup_server, call):
    third = MockServer()
    mock_server.push(529, json=OVERLOADED)
    backup_server.push(402, json={"error": {"message": "Payment required"}})
    third.push(429, headers={"retry-after": "120"}, json=RATE_LIMIT)
    events: list[object] = []
    sleeper = FakeSleeper()
    client = failover.Client(
        {"a": anthropic(mock_server), "b": openai(backup_server), "c": openai(third)},
        sleeper=sleeper,
        on_event=events.append,
    )

    with pytest.raises(failover.RateLimited) as info:
        call(client)

    error = info.value
    assert (error.provider, error.status, error.retry_after) == ("c", 429, 120.0)
    assert [(a.provider, a.status, a.kind) for a in error.attempts] == [
        ("a", 529, "overloaded"),
        ("b", 402, "insufficient_credits"),
        ("c", 429, "rate_limited"),
    ]
    assert failed_over(events) == [("a", "b"), ("b", "c")]
    call_failed = [e for e in events if isinstance(e, failover.CallFailed)]
    assert len(call_failed) == 1 and call_failed[0].error is error
    assert len(call_failed[0].attempts) == 3
    assert len({e.call_id for e in events}) == 1
    sleeper.assert_never_slept()
    third.close()


def test_an_http_date_is_measured_on_the_fake_clock(mock_server, call):
    sleeper = FakeSleeper()
    when = email.utils.formatdate(sleeper.time() + 7, usegmt=True)
    mock_server.push(503, headers={"retry-after": when}, json=OVERLOADED)
    mock_server.push_text("ok", wire="anthropic")
    client = failover.Client({"only": anthropic(mock_server)}, sleeper=sleeper)

    call(client)
    sleeper.assert_sequence([7.0])


def test_retry_after_ms_and_should_retry(mock_server, backup_server, call):
    mock_server.push(429, headers={"retry-after-ms": "250", "retry-after": "9"}, json=RATE_LIMIT)
    mock_server.push(429, headers={"retry-after": "1", "x-should-retry": "false"}, json=RATE_LIMIT)
    backup_server.push_text("from backup")
    client, sleeper, _ = two_providers(mock_server, backup_server)

    assert call(client).provider == "backup"
    sleeper.assert_sequence([0.25])


def test_deadline_refuses_a_wait_and_raises_with_the_hint(mock_server, call):
    mock_server.push(429, headers={"retry-after": "5"}, json=RATE_LIMIT)
    sleeper = FakeSleeper()
    client = failover.Client({"only": anthropic(mock_server)}, sleeper=sleeper, deadline=3.0)

    with pytest.raises(failover.RateLimited) as info:
        call(client)
    assert info.value.retry_after == 5.0
    sleeper.assert_never_slept()


def test_deadline_counts_fake_sleeps(mock_server, call):
    for _ in range(3):
        mock_server.push(503, headers={"retry-after": "2"}, json=OVERLOADED)
    sleeper = FakeSleeper()
    client = failover.Client(
        {"only": anthropic(mock_server)},
        sleeper=sleeper,
        retry=failover.RetryPolicy(max_retries_last=5),
    )

    with pytest.raises(failover.ProviderOverloaded):
        call(client, deadline=5.0)
    # 2 + 2 fit in 5 s; a third 2 s wait would end past it.
    sleeper.assert_sequence([2.0, 2.0])


def test_laravel_fails_over_on_an_http_date_even_a_short_one(mock_server, backup_server):
    """Found in review."""
    import email.utils

    sleeper = FakeSleeper()
    soon = email.utils.formatdate(sleeper.time() + 3, usegmt=True)
    mock_server.push(429, headers={"retry-after": soon})
    backup_server.push_text("backup")
    client = failover.Client(
        {"a": openai(mock_server), "b": openai(backup_server)},
        sleeper=sleeper,
        retry=failover.RetryPolicy.laravel(),
    )
    assert client.prompt("Hi").provider == "b"
    sleeper.assert_never_slept()
    # The default policy does honour the same 3 s date.
    mock_server.push(429, headers={"retry-after": soon})
    mock_server.push_text("waited")
    default = failover.Client({"a": openai(mock_server)}, sleeper=sleeper)
    assert default.prompt("Hi").text == "waited"
    sleeper.assert_sequence([3.0])
