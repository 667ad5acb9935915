"""Bad input from a provider ends in a typed FailoverError: never a panic, a
hang or a wrong answer."""

from __future__ import annotations

from typing import Any

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

from conftest import SINGLE_TRY, anthropic, gemini, ollama, openai


@pytest.mark.parametrize(
    "body",
    [
        b'{"choices": [{"message": {"content": "Hel',
        b"<html>502 Bad Gateway</html>",
        b"",
        b"[]",
        b"\xff\xfe\x00garbage",
        b'{"choices": [{"message": {"content": "\xff\xfe"}}]}',
        b'{"choices": []}',
        b'{"choices": [{"message": {"content": {"nested": 1}}}]}',
        b"null",
    ],
    ids=[
        "truncated-json",
        "html",
        "empty",
        "array",
        "invalid-utf8",
        "invalid-utf8-in-string",
        "no-choices",
        "content-not-text",
        "null",
    ],
)
def test_a_malformed_success_is_a_server_error(mock_server, call, body):
    mock_server.push(200, headers={"content-type": "application/json"}, body=body)
    client = failover.Client({"a": openai(mock_server)}, retry=SINGLE_TRY)
    with pytest.raises(failover.ServerError, match="malformed response body"):
        call(client)


def test_a_malformed_success_is_retried_and_failed_over(mock_server, backup_server, call):
    mock_server.push(200, body=b"{not json")
    mock_server.push(200, body=b"{not json")
    backup_server.push_text("clean")
    sleeper = FakeSleeper()
    client = failover.Client(
        {"a": openai(mock_server), "b": openai(backup_server)}, sleeper=sleeper
    )
    assert call(client).text == "clean"
    assert len(sleeper.sleeps) == 1


WIRES = {"openai": openai, "ollama": ollama, "anthropic": anthropic, "gemini": gemini}


@pytest.mark.parametrize(
    ("wire", "body"),
    [
        ("openai", {"choices": [{"index": 0, "message": 3, "finish_reason": "stop"}]}),
        ("openai", {"choices": [{"index": 0, "message": {"role": "assistant"}}]}),
        ("ollama", {"message": 3, "done": True}),
        ("ollama", {"message": {"role": "assistant"}}),
        ("anthropic", {"content": [3], "stop_reason": "end_turn"}),
        ("gemini", {"candidates": [3]}),
        ("gemini", {"candidates": [{"content": {"role": "model", "parts": []}}]}),
    ],
    ids=[
        "openai-message-not-an-object",
        "openai-no-content-no-finish",
        "ollama-message-not-an-object",
        "ollama-no-content-not-done",
        "anthropic-block-not-an-object",
        "gemini-candidate-not-an-object",
        "gemini-no-content-no-finish",
    ],
)
def test_a_200_whose_fields_break_the_wire_is_no_answer(
    mock_server, backup_server, wire: str, body: Any
) -> None:
    mock_server.push(json=body)
    mock_server.push(json=body)
    backup_server.push_text("real answer")
    single = failover.Client({"a": WIRES[wire](mock_server)}, retry=SINGLE_TRY)
    with pytest.raises(failover.ServerError, match=r"(from a: |^a: )") as info:
        single.prompt("Hi")
    assert info.value.status == 200
    client = failover.Client(
        {"a": WIRES[wire](mock_server), "b": openai(backup_server)},
        retry=failover.RetryPolicy(max_retries=0),
    )
    r = client.prompt("Hi")
    assert (r.provider, r.text) == ("b", "real answer")
    assert [(a.status, a.kind) for a in r.attempts] == [(200, "server_error"), (200, None)]


def test_a_body_cut_short_is_a_server_error(mock_server, call):
    mock_server.push(200, json={"choices": [{"message": {"content": "x" * 500}}]}, fault="cut:40")
    client = failover.Client({"a": openai(mock_server)}, retry=SINGLE_TRY)
    with pytest.raises(failover.ServerError, match="cut short"):
        call(client)


def _failed_over_without_sleeping(
    mock_server: MockServer, backup_server: MockServer, call: Any
) -> failover.FailedOver:
    """Calls a -> b once a's scripted 429 is pushed; returns the FailedOver event."""
    backup_server.push_text("backup")
    sleeper = FakeSleeper()
    events: list[object] = []
    client = failover.Client(
        {"a": openai(mock_server), "b": openai(backup_server)},
        sleeper=sleeper,
        on_event=events.append,
    )
    assert call(client).provider == "b"
    sleeper.assert_never_slept()
    [left] = [e for e in events if isinstance(e, failover.FailedOver)]
    return left


@pytest.mark.parametrize(
    "value", ["1e308", "-5", "inf", "nan", "Thu, 99 Foo 9999 99:99:99 GMT", "1_000", "0x10"]
)
def test_malformed_retry_after_values_are_no_hint(mock_server, backup_server, call, value):
    mock_server.push(429, headers={"retry-after": value, "retry-after-ms": value})
    left = _failed_over_without_sleeping(mock_server, backup_server, call)
    # Read as no hint at all, not as a hint over the cap.
    assert left.error.retry_after is None
    assert left.reason == "no wait hint; rate_limited fails over at once"


@pytest.mark.parametrize(
    "value",
    ["99999999999999999999", "9" * 400, "1" * 5000, "1000000001", "Fri, 31 Dec 9999 23:59:59 GMT"],
)
def test_an_absurdly_long_wait_counts_as_1e9_seconds_and_fails_over(
    mock_server, backup_server, call, value
):
    # Read as "no hint" before, so the provider asking for the longest wait
    # was backed off 0.5 s and hit again: the soonest retry of all.
    mock_server.push(429, headers={"retry-after": value})
    left = _failed_over_without_sleeping(mock_server, backup_server, call)
    assert left.error.retry_after == 1e9
    assert "over the 10s cap" in left.reason
    assert failover.retry_after({"retry-after": value}) == 1e9


def test_a_huge_hint_on_the_last_provider_is_raised_not_slept(mock_server, call):
    mock_server.push(429, headers={"retry-after": "99999999999999999999"})
    sleeper = FakeSleeper()
    client = failover.Client({"a": openai(mock_server)}, sleeper=sleeper)
    with pytest.raises(failover.RateLimited) as info:
        call(client)
    assert info.value.retry_after == 1e9
    assert len(mock_server.requests) == 1, "never retried"
    sleeper.assert_never_slept()


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (500, b"\xff\xfe not utf8", failover.ServerError),
        (429, b'{"error": "a string, not an object"}', failover.RateLimited),
        (400, b'{"error": {"code": null, "message": null}}', failover.BadRequest),
        (400, b'{"error": {"code": 1300}}', failover.BadRequest),
        (418, b"", failover.BadRequest),
        (599, b"{", failover.ServerError),
    ],
)
def test_odd_error_bodies_are_classified(mock_server, call, status, body, expected):
    mock_server.push(status, body=body)
    client = failover.Client({"a": anthropic(mock_server)}, retry=SINGLE_TRY, sleeper=FakeSleeper())
    with pytest.raises(expected) as info:
        call(client)
    assert type(info.value) is expected
    assert info.value.status == status


def test_an_unscripted_request_gets_a_500_that_says_so(mock_server, call):
    client = failover.Client({"a": openai(mock_server)}, retry=SINGLE_TRY)
    with pytest.raises(failover.ServerError, match="no scripted response"):
        call(client)


def test_messages_that_cannot_be_json_are_refused(mock_server):
    client = failover.Client({"a": openai(mock_server)})
    bad = [
        [{"role": "user", "content": object()}],
        [{"role": "user", "content": float("nan")}],
        [{"role": "user", "content": "\ud800 lone surrogate"}],
        [{"role": "user", "content": 2**70}],
        [{1: "non-str key", "role": "user"}],
        ["not a dict"],
    ]
    for messages in bad:
        with pytest.raises(failover.ConfigurationError):
            client.prompt(messages)  # type: ignore[arg-type]
    assert mock_server.requests == []


def test_absurd_hints_are_none_for_the_caller_too(mock_server):
    """Found in review."""
    for value in ["1e308", "-5", "inf", "nan", "Thu, 99 Foo 9999 99:99:99 GMT"]:
        assert failover.retry_after({"retry-after": value, "retry-after-ms": value}) is None
        mock_server.push(429, headers={"retry-after": value})
        client = failover.Client(
            {"a": openai(mock_server)}, retry=failover.RetryPolicy(max_retries_last=0)
        )
        with pytest.raises(failover.RateLimited) as info:
            client.prompt("Hi")
        assert info.value.retry_after is None, value
