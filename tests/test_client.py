"""The Client: request and response fields, provider selection, events and their hooks,
logging, sleepers, reprs, pickling and the two faces."""

from __future__ import annotations

import asyncio
import contextvars
import copy
import logging
import pickle
import sys
import threading

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

from conftest import KEY, anthropic, openai


def test_request_shapes_and_response_fields(mock_server, backup_server, call):
    mock_server.push_text("Hello from Claude", wire="anthropic", headers={"request-id": "req_1"})
    client = failover.Client({"claude": anthropic(mock_server), "gpt": openai(backup_server)})

    r = call(
        client,
        [{"role": "system", "content": "Be brief"}, {"role": "user", "content": "Hi"}],
        provider="claude",
        model="claude-sonnet-4-5",
        max_tokens=50,
        temperature=0.3,
    )

    assert (r.text, r.provider, r.finish_reason, r.request_id) == (
        "Hello from Claude",
        "claude",
        "stop",  # end_turn, in one vocabulary
        "req_1",
    )
    assert r.usage == failover.Usage(12, 3, 0, 0, None)
    assert r.raw["id"] == "msg_mock"
    sent = mock_server.requests[0]
    assert sent.path == "/messages"
    assert sent.headers["x-api-key"] == KEY and sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.json == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 50,
        "system": "Be brief",
        "messages": [{"role": "user", "content": "Hi"}],
        "temperature": 0.3,
    }
    assert backup_server.requests == []


def test_openai_request_shape(mock_server, call):
    mock_server.push_text("4", headers={"x-request-id": "req_abc"})
    client = failover.Client(
        {"gpt": failover.OpenAI(model="gpt-4.1-mini", api_key=KEY, base_url=mock_server.url)}
    )

    r = call(client, "2+2?", system="Answer with a number", max_tokens=5)

    assert (r.text, r.request_id, r.model) == ("4", "req_abc", "gpt-4.1-mini-2025-04-14")
    sent = mock_server.requests[0]
    assert sent.path == "/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.json == {
        "model": "gpt-4.1-mini",
        "messages": [
            {"role": "system", "content": "Answer with a number"},
            {"role": "user", "content": "2+2?"},
        ],
        "max_completion_tokens": 5,
    }


def test_provider_selection_and_duplicate_drivers(mock_server, backup_server):
    backup_server.push_text("second")
    client = failover.Client(
        {"a": openai(mock_server), "b": openai(backup_server, headers={"X-Team": "ml"})}
    )
    r = client.prompt("Hi", provider=["b"])
    assert r.provider == "b"
    assert backup_server.requests[0].headers["x-team"] == "ml"
    assert mock_server.requests == []
    with pytest.raises(failover.ConfigurationError, match="unknown provider"):
        client.prompt("Hi", provider="nope")
    with pytest.raises(failover.ConfigurationError, match="single provider"):
        client.prompt("Hi", model="x")


def test_model_with_a_pool_says_the_pool_has_several_providers(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    """One name was given, and the message said model= needs "a single provider named". Found
    by the new-user trial of 2026-12-02."""
    pool = failover.Pool("gpt", [openai(mock_server), openai(backup_server)])
    client = failover.Client({"gpt": pool, "solo": openai(backup_server)})
    with pytest.raises(failover.ConfigurationError) as info:
        client.prompt("Hi", provider="gpt", model="x")
    assert "pool 'gpt' has 2: ['gpt/0', 'gpt/1']" in str(info.value)
    # No advice that leads nowhere: a pool's members cannot be named with provider=.
    assert "provider=" not in str(info.value)
    with pytest.raises(failover.ConfigurationError) as info:
        client.prompt("Hi", model="x")
    assert "this call's has 3: ['gpt/0', 'gpt/1', 'solo']" in str(info.value)
    assert mock_server.requests == backup_server.requests == []


def test_events_share_a_call_id_and_are_logged(mock_server, backup_server, caplog):
    mock_server.push(429, headers={"retry-after": "1"}, json={"error": {"message": "slow"}})
    mock_server.push(429, headers={"retry-after": "1"}, json={"error": {"message": "slow"}})
    backup_server.push_text("ok")
    events: list[object] = []
    caplog.set_level(logging.INFO, logger="failover")
    client = failover.Client(
        {"a": openai(mock_server), "b": openai(backup_server)},
        sleeper=FakeSleeper(),
        on_event=events.append,
    )

    r = client.prompt("Hi")

    assert [type(e).__name__ for e in events] == ["RetryScheduled", "FailedOver"]
    assert {e.call_id for e in events} == {r.call_id}
    messages = [rec.getMessage() for rec in caplog.records if rec.levelno == logging.INFO]
    assert any("retrying a in 1.000s" in m for m in messages), messages
    assert any("failing over from a to b" in m for m in messages), messages


def test_a_failed_calls_log_line_counts_the_requests_sent(mock_server, backup_server, caplog):
    """Found by a new-user trial: it counted a provider passed over as an attempt."""
    refused = {"error": {"message": "Incorrect API key", "type": "invalid_api_key"}}
    backup_server.push(401, json=refused)
    mock_server.push(401, json=refused)
    client = failover.Client({"a": openai(mock_server), "b": openai(backup_server)})
    with pytest.raises(failover.AuthenticationError):
        client.prompt("Hi", provider="b")  # b now cools
    caplog.set_level(logging.INFO, logger="failover")
    with pytest.raises(failover.AuthenticationError) as info:
        client.prompt("Hi")
    assert [(a.provider, a.skipped is None) for a in info.value.attempts] == [
        ("a", True),
        ("b", False),
    ]
    messages = [rec.getMessage() for rec in caplog.records if "call failed" in rec.getMessage()]
    assert messages and messages[0].startswith("call failed after 1 attempt(s)"), messages


LOG_EXTRAS = (
    "failover_call_id",
    "failover_provider",
    "failover_kind",
    "failover_status",
    "failover_wait",
)


def _extras(record: logging.LogRecord) -> tuple[object, ...]:
    return tuple(getattr(record, name) for name in LOG_EXTRAS)


def test_log_records_carry_fields_a_json_formatter_can_index(
    mock_server, backup_server, caplog, call
):
    """Issue 18 section 4: every record of the `failover` logger carries the
    call id, provider, kind, status and wait as attributes (None where one does
    not apply), at INFO and DEBUG, and never the key."""
    mock_server.push(429, headers={"retry-after": "2"}, json={"error": {"message": "slow"}})
    mock_server.push(529, json={"error": {"message": "busy"}})
    backup_server.push(401, json={"error": {"message": f"bad key {KEY}"}})
    caplog.set_level(logging.DEBUG, logger="failover")
    events: list[failover.CallFailed] = []
    client = failover.Client(
        {"a": openai(mock_server, overloaded_statuses=(529,)), "b": openai(backup_server)},
        sleeper=FakeSleeper(),
        on_event=events.append,
    )
    with pytest.raises(failover.AuthenticationError) as caught:
        call(client)
    call_id = events[-1].call_id
    # The error names its call, as its events and log records do.
    assert caught.value.call_id == call_id
    records = [r for r in caplog.records if r.name == "failover"]
    info = [
        (r.getMessage().split(" ")[0], _extras(r)) for r in records if r.levelno >= logging.INFO
    ]
    assert info == [
        ("retrying", (call_id, "a", "rate_limited", 429, 2.0)),
        ("failing", (call_id, "a", "overloaded", 529, None)),
        ("call", (call_id, "b", "auth", 401, None)),
    ]
    # Each DEBUG record (the why) carries the same fields as its INFO record.
    debug = [_extras(r) for r in records if r.levelno == logging.DEBUG]
    assert debug == [extras for _, extras in info]
    for record in records:
        assert KEY not in repr(vars(record)), record


def test_a_failing_event_hook_does_not_break_the_call(mock_server, caplog):
    mock_server.push(503, headers={"retry-after": "1"})
    mock_server.push_text("ok")

    def hook(event: object) -> None:
        raise RuntimeError("hook broke")

    client = failover.Client({"a": openai(mock_server)}, sleeper=FakeSleeper(), on_event=hook)
    assert client.prompt("Hi").text == "ok"
    [record] = [r for r in caplog.records if "on_event hook raised" in r.getMessage()]
    # The hook's failure is indexed as the event it was given.
    assert record.failover_provider == "a"
    assert record.failover_wait == 1.0


def test_per_call_retry_policy_and_timeout(mock_server, call):
    mock_server.push(500)
    mock_server.push(500)
    mock_server.push(500)
    sleeper = FakeSleeper()
    client = failover.Client({"a": openai(mock_server)}, sleeper=sleeper)

    with pytest.raises(failover.ServerError):
        call(client, retry=failover.RetryPolicy.openai())
    assert len(sleeper.sleeps) == 2 and len(mock_server.requests) == 3


def test_callable_sleepers(mock_server):
    slept: list[float] = []
    mock_server.push(503, headers={"retry-after": "2"})
    mock_server.push_text("ok")
    client = failover.Client({"a": openai(mock_server)}, sleeper=slept.append)
    assert client.prompt("Hi").text == "ok"
    assert slept == [2.0]

    awaited: list[float] = []

    async def async_sleeper(seconds: float) -> None:
        await asyncio.sleep(0)
        awaited.append(seconds)

    mock_server.push(503, headers={"retry-after": "3"})
    mock_server.push_text("ok")
    client = failover.Client({"a": openai(mock_server)}, sleeper=async_sleeper)
    assert asyncio.run(client.prompt_async("Hi")).text == "ok"
    assert awaited == [3.0]


def test_the_gil_is_released_while_rust_waits(mock_server):
    mock_server.push_text("slow", delay=0.5)
    client = failover.Client({"a": openai(mock_server)})
    result: list[str] = []
    worker = threading.Thread(target=lambda: result.append(client.prompt("Hi").text))
    worker.start()
    spins = 0
    while worker.is_alive():
        spins += 1
    worker.join()
    assert result == ["slow"]
    # Had the call held the GIL, this thread could not have run meanwhile.
    assert spins > 10_000


def test_reprs_are_readable():
    p = failover.Anthropic(model="claude-haiku-4-5", api_key=KEY)
    assert repr(p) == "Anthropic(model='claude-haiku-4-5', base_url='https://api.anthropic.com/v1')"
    assert repr(failover.RetryPolicy.laravel()) == "RetryPolicy.laravel()"
    assert "max_retry_after=10.0" in repr(failover.RetryPolicy())
    assert repr(FakeSleeper()) == "FakeSleeper(sleeps=[])"


def test_a_sync_call_inside_an_event_hook_works(mock_server, backup_server, call):
    """Found in review."""
    backup_server.push_text("inner")
    inner_client = failover.Client({"b": openai(backup_server)})
    seen: list[str] = []

    def hook(event: object) -> None:
        if isinstance(event, failover.RetryScheduled):
            seen.append(inner_client.prompt("from the hook").text)

    mock_server.push(503, headers={"retry-after": "1"})
    mock_server.push_text("outer")
    client = failover.Client({"a": openai(mock_server)}, sleeper=FakeSleeper(), on_event=hook)
    assert call(client).text == "outer"
    assert seen == ["inner"]


def test_a_sleeper_raising_an_ordinary_error_does_not_end_the_call(mock_server, monkeypatch):
    """Found in review."""

    def sleeper(seconds: float) -> None:
        raise RuntimeError("broken sleeper")

    mock_server.push(503, headers={"retry-after": "3"})
    mock_server.push_text("still answered")
    client = failover.Client({"a": openai(mock_server)}, sleeper=sleeper)
    reported: list[BaseException | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u.exc_value))
    assert client.prompt("Hi").text == "still answered"
    assert [str(e) for e in reported] == ["broken sleeper"]


def test_results_and_errors_pickle_and_copy(mock_server):
    """Found in review."""
    mock_server.push(429, headers={"retry-after": "120"}, json={"error": {"message": "slow"}})
    client = failover.Client({"a": openai(mock_server)}, sleeper=FakeSleeper())
    with pytest.raises(failover.RateLimited) as info:
        client.prompt("Hi")
    error = pickle.loads(pickle.dumps(info.value))
    assert type(error) is failover.RateLimited
    assert (error.status, error.retry_after, error.provider) == (429, 120.0, "a")
    assert error.attempts == info.value.attempts
    usage = failover.Usage(1, 2)
    assert copy.deepcopy(usage) == usage and pickle.loads(pickle.dumps(usage)) == usage
    deadline = failover.DeadlineExceeded("late", deadline=1.0)
    assert pickle.loads(pickle.dumps(deadline)).deadline == 1.0
    with pytest.raises(AttributeError):
        usage.input_tokens = 5  # type: ignore[misc]


def test_async_events_run_on_the_loop_in_the_callers_context(mock_server):
    """Found in review."""
    request_id = contextvars.ContextVar("request_id", default="unset")
    seen: list[tuple[int, bool, str]] = []

    def hook(event: object) -> None:
        try:
            running = asyncio.get_running_loop() is not None
        except RuntimeError:
            running = False
        seen.append((threading.get_ident(), running, request_id.get()))

    mock_server.push(503, headers={"retry-after": "1"})
    mock_server.push(503, headers={"retry-after": "1"})
    mock_server.push(503, headers={"retry-after": "1"})
    client = failover.Client({"a": openai(mock_server)}, sleeper=FakeSleeper(), on_event=hook)

    async def main() -> int:
        request_id.set("req-42")
        with pytest.raises(failover.ProviderOverloaded):
            await client.prompt_async("Hi")
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert [e for e in seen] == [(loop_thread, True, "req-42")] * 3  # 2 retries + CallFailed


def test_a_201_success_reports_its_status(mock_server):
    """Found in review."""
    body = {"choices": [{"message": {"content": "made"}, "finish_reason": "stop"}]}
    mock_server.push(201, json=body)
    r = failover.Client({"a": openai(mock_server)}).prompt("Hi")
    assert [a.status for a in r.attempts] == [201]


def test_every_decision_is_explained_at_debug(mock_server, backup_server, caplog):
    """Found in review."""
    mock_server.push(429, headers={"retry-after": "1"})
    mock_server.push(429, headers={"retry-after": "3"})
    backup_server.push(401)
    events: list[object] = []
    caplog.set_level(logging.DEBUG, logger="failover")
    client = failover.Client(
        {"a": openai(mock_server), "b": openai(backup_server)},
        sleeper=FakeSleeper(),
        on_event=events.append,
    )
    with pytest.raises(failover.AuthenticationError):
        client.prompt("Hi")
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert debug == [
        "retrying a because the provider asked for 1.000s, within the 10s cap",
        "leaving a because the retry limit on this provider (1) is reached: a returned 429",
        "raising AuthenticationError because auth is not retried; no provider left to fail over to",
    ]
    assert [getattr(e, "reason", None) for e in events] == [
        "the provider asked for 1.000s, within the 10s cap",
        "the retry limit on this provider (1) is reached",
        "auth is not retried; no provider left to fail over to",
    ]


def _finishes(target: object, seconds: float = 20) -> bool:
    """Runs ``target`` in a thread; False if it is still running after ``seconds``
    (a deadlock must fail the test, not hang the suite)."""
    worker = threading.Thread(target=target, daemon=True)  # type: ignore[arg-type]
    worker.start()
    worker.join(seconds)
    return not worker.is_alive()


def test_sync_calls_nested_two_hooks_deep_do_not_deadlock():
    """Found in the second review."""
    servers = [MockServer() for _ in range(3)]
    answers: list[str] = []

    def client_for(i: int, hook: object = None) -> failover.Client:
        return failover.Client(
            {"p": openai(servers[i])},
            sleeper=FakeSleeper(),
            on_event=hook,  # type: ignore[arg-type]
        )

    innermost = client_for(2)

    def hook_middle(event: object) -> None:
        if isinstance(event, failover.RetryScheduled):
            answers.append(innermost.prompt("3").text)

    middle = client_for(1, hook_middle)

    def hook_outer(event: object) -> None:
        if isinstance(event, failover.RetryScheduled):
            answers.append(middle.prompt("2").text)

    outer = client_for(0, hook_outer)
    for i, server in enumerate(servers):
        if i < 2:
            server.push(503, headers={"retry-after": "1"})
        server.push_text(f"answer {i}")

    assert _finishes(lambda: answers.append(outer.prompt("1").text))
    assert answers == ["answer 2", "answer 1", "answer 0"]
    for server in servers:
        server.close()


def test_client_repr_shows_every_bound():
    """Found hardening the first slice."""
    client = failover.Client(
        {"a": failover.OpenAI(model="m", api_key="k")}, deadline=30.0, connect_timeout=2.5
    )
    text = repr(client)
    assert "deadline=30.0" in text and "connect_timeout=2.5" in text, text


def test_an_event_of_an_unknown_kind_is_an_error_not_another_event():
    from failover._events import _emitter

    seen = []
    emit = _emitter(seen.append)
    with pytest.raises(failover.FailoverError, match="unknown kind 'Retried'"):
        emit("Retried", {"call_id": "c1"})
    emit("Debug", {"call_id": "c1", "text": "seed= is not sent"})  # logged only
    assert seen == []
