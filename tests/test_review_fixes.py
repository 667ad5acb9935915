"""Defects found in review, each pinned by a test that fails without its fix."""

from __future__ import annotations

import asyncio
import contextvars
import copy
import logging
import pickle
import socket
import sys
import threading

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

from conftest import KEY, openai

SINGLE_TRY = failover.RetryPolicy(max_retries_last=0)


def test_redirects_are_not_followed_so_keys_stay_home(mock_server, backup_server, call):
    target = f"{backup_server.url}/chat/completions"
    mock_server.push(307, headers={"location": target})
    provider = failover.Anthropic(model="m", api_key=KEY, base_url=mock_server.url)
    client = failover.Client({"a": provider}, sleeper=FakeSleeper())
    with pytest.raises(failover.BadRequest, match="check base_url") as info:
        call(client)
    assert info.value.status == 307
    assert backup_server.requests == []


def test_a_sync_call_inside_an_event_hook_works(mock_server, backup_server, call):
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


# The second response is the retry's answer, and must stay unserved.
@pytest.mark.mock_server(assert_all_used=False)
@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
def test_a_sleeper_interrupted_by_a_base_exception_ends_the_call(mock_server, interrupt):
    def sleeper(seconds: float) -> None:
        raise interrupt()

    mock_server.push(503, headers={"retry-after": "3"})
    mock_server.push_text("never")
    client = failover.Client({"a": openai(mock_server)}, sleeper=sleeper)
    with pytest.raises(interrupt):
        client.prompt("Hi")
    assert len(mock_server.requests) == 1


def test_a_sleeper_raising_an_ordinary_error_does_not_end_the_call(mock_server, monkeypatch):
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


def test_408_is_a_timeout_retried_on_the_last_provider(mock_server, call):
    # DESIGN §3.1 revised: the server gave up waiting for the request.
    mock_server.push(408)
    mock_server.push_text("ok")
    sleeper = FakeSleeper()
    client = failover.Client({"a": openai(mock_server)}, sleeper=sleeper)
    assert call(client).text == "ok"
    assert len(sleeper.sleeps) == 1
    mock_server.push(408)
    client = failover.Client({"a": openai(mock_server)}, retry=SINGLE_TRY)
    with pytest.raises(failover.ProviderTimeout) as info:
        call(client)
    assert isinstance(info.value, TimeoutError) and info.value.status == 408


def test_keys_do_not_leak_escaped_in_headers_or_in_urls(mock_server, caplog):
    key = "sk-ab/cd+ef-0123456789"
    azure_key = "AZ-SECRET-0123456789"
    body = '{"error": {"message": "bad key sk-ab\\/cd+ef-0123456789 and AZ-SECRET-0123456789"}}'
    mock_server.push(401, body=body)
    provider = failover.OpenAICompatible(
        model="m", base_url=mock_server.url, api_key=key, headers={"api-key": azure_key}
    )
    client = failover.Client({"a": provider})
    caplog.set_level(logging.DEBUG, logger="failover")
    with pytest.raises(failover.AuthenticationError) as info:
        client.prompt("Hi")
    texts = [str(info.value), repr(info.value), info.value.body or ""]
    texts += [r.getMessage() for r in caplog.records]
    for text in texts:
        assert "sk-ab" not in text and "AZ-SECRET" not in text, text
    url_with_key = "https://user:hunter2-password@llm.example.com/v1?key=AIza-secret"
    remote = failover.OpenAICompatible(model="m", base_url=url_with_key)
    assert "hunter2" not in repr(remote) and "AIza" not in repr(remote)
    assert "hunter2" not in repr(failover.Client({"r": remote}))


def test_absurd_hints_are_none_for_the_caller_too(mock_server):
    for value in ["1e308", "-5", "inf", "nan", "Thu, 99 Foo 9999 99:99:99 GMT"]:
        assert failover.retry_after({"retry-after": value, "retry-after-ms": value}) is None
        mock_server.push(429, headers={"retry-after": value})
        client = failover.Client(
            {"a": openai(mock_server)}, retry=failover.RetryPolicy(max_retries_last=0)
        )
        with pytest.raises(failover.RateLimited) as info:
            client.prompt("Hi")
        assert info.value.retry_after is None, value


def test_laravel_fails_over_on_an_http_date_even_a_short_one(mock_server, backup_server):
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


def test_cancelling_a_task_closes_its_connection():
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    closed = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        conn.settimeout(10)
        while conn.recv(65536):  # read the request, then wait for the client to hang up
            pass
        closed.set()
        conn.close()

    threading.Thread(target=serve, daemon=True).start()
    client = failover.Client(
        {"a": failover.OpenAICompatible(model="m", base_url=f"http://127.0.0.1:{port}")},
        timeout=30,
    )

    async def main() -> None:
        task = asyncio.ensure_future(client.prompt_async("Hi"))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert closed.wait(5), "the HTTP connection stayed open after the task was cancelled"
    listener.close()


def test_a_201_success_reports_its_status(mock_server):
    body = {"choices": [{"message": {"content": "made"}, "finish_reason": "stop"}]}
    mock_server.push(201, json=body)
    r = failover.Client({"a": openai(mock_server)}).prompt("Hi")
    assert [a.status for a in r.attempts] == [201]


@pytest.mark.parametrize(
    "build",
    [
        lambda s: failover.Client({"a": openai(s)}, deadline=1e300),
        lambda s: failover.Client({"a": openai(s)}, timeout=float("inf")),
        lambda s: failover.Client({"a": openai(s)}, connect_timeout=1e300),
        lambda s: failover.RetryPolicy(max_retries=2**40),
        lambda s: failover.Backoff(jitter="x"),  # type: ignore[arg-type]
        lambda s: failover.Backoff(max=1e30),
        lambda s: failover.RetryPolicy(backoff=1),  # type: ignore[arg-type]
        lambda s: openai(s, headers={"X-Bad": "a\r\nInjected: yes"}),
        lambda s: failover.Client(
            {"a": failover.OpenAICompatible(model="m", base_url=s.url, api_key="k\x01ey")}
        ),
        lambda s: failover.OpenAICompatible(model="m", base_url="not a url"),
        lambda s: failover.OpenAICompatible(model="m", base_url="ftp://host/v1"),
        lambda s: failover.Client({"a": openai(s)}).prompt("Hi", max_tokens=-1),
        lambda s: failover.Client({"a": openai(s)}).prompt("Hi", temperature=float("nan")),
        lambda s: failover.Client({"a": openai(s)}).prompt("Hi", provider=["a", "a"]),
    ],
)
def test_odd_arguments_are_configuration_errors(mock_server, build):
    with pytest.raises(failover.ConfigurationError):
        build(mock_server)
    assert mock_server.requests == []


def test_a_key_with_a_trailing_newline_is_trimmed(mock_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-a-file\n")
    mock_server.push_text("ok")
    client = failover.Client({"a": failover.OpenAI(model="m", base_url=mock_server.url)})
    client.prompt("Hi")
    assert mock_server.requests[0].headers["authorization"] == "Bearer sk-from-a-file"


def test_every_decision_is_explained_at_debug(mock_server, backup_server, caplog):
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


def test_mock_server_still_closes_cleanly_after_a_hang():
    server = MockServer()
    server.push(fault="hang")
    client = failover.Client(
        {"a": failover.OpenAICompatible(model="m", base_url=server.url)},
        retry=failover.RetryPolicy(max_retries_last=0),
    )
    with pytest.raises(failover.ProviderTimeout):
        client.prompt("Hi", timeout=0.1)
    server.close()


# Second review.


def _finishes(target: object, seconds: float = 20) -> bool:
    """Runs ``target`` in a thread; False if it is still running after ``seconds``
    (a deadlock must fail the test, not hang the suite)."""
    worker = threading.Thread(target=target, daemon=True)  # type: ignore[arg-type]
    worker.start()
    worker.join(seconds)
    return not worker.is_alive()


def test_sync_calls_nested_two_hooks_deep_do_not_deadlock():
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


def test_a_forked_child_gets_an_error_not_a_hang(mock_server):
    import os
    import subprocess

    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    script = """
import os, sys, failover
from failover.testing import MockServer
server = MockServer()
server.push_text("parent")
server.push_text("child")
client = failover.Client({"p": failover.OpenAICompatible(model="m", base_url=server.url)})
assert client.prompt("Hi").text == "parent"
pid = os.fork()
if pid == 0:
    try:
        client.prompt("Hi", timeout=2)
    except failover.FailoverError as exc:
        ok = "forked" in str(exc) and "internal error" not in str(exc)
        os._exit(3 if ok else 4)
    os._exit(5)
_, status = os.waitpid(pid, 0)
sys.exit(os.WEXITSTATUS(status))
"""
    done = subprocess.run([sys.executable, "-c", script], timeout=60)
    assert done.returncode == 3


@pytest.mark.mock_server(assert_all_used=False)  # the retry never comes
def test_ctrl_c_in_an_event_hook_ends_a_sync_call(mock_server):
    def hook(event: object) -> None:
        raise KeyboardInterrupt

    mock_server.push(503, headers={"retry-after": "1"})
    mock_server.push_text("never reached")
    client = failover.Client({"a": openai(mock_server)}, sleeper=FakeSleeper(), on_event=hook)
    with pytest.raises(KeyboardInterrupt):
        client.prompt("Hi")


@pytest.mark.mock_server(assert_all_used=False)  # the retry never comes
def test_an_async_sleeper_on_a_sync_call_is_a_configuration_error(mock_server):
    async def sleeper(seconds: float) -> None:
        await asyncio.sleep(seconds)

    client = failover.Client({"a": openai(mock_server)}, sleeper=sleeper)
    with pytest.raises(failover.ConfigurationError, match="prompt_async"):
        client.prompt("Hi")
    # Found before any request is spent (DESIGN: checked when given).
    assert mock_server.requests == []
    # A callable object whose __call__ is async, and a partial of one, too.
    import functools

    class AsyncSleeper:
        async def __call__(self, seconds: float) -> None:
            await asyncio.sleep(seconds)

    for odd in (AsyncSleeper(), functools.partial(sleeper)):
        with pytest.raises(failover.ConfigurationError, match="prompt_async"):
            failover.Client({"a": openai(mock_server)}, sleeper=odd).prompt("Hi")
    assert mock_server.requests == []
    # A plain function that returns an awaitable is still caught after it runs.
    mock_server.push(503, headers={"retry-after": "2"})
    mock_server.push_text("too early")
    sneaky = failover.Client({"a": openai(mock_server)}, sleeper=lambda s: sleeper(s))
    with pytest.raises(failover.ConfigurationError, match="prompt_async"):
        sneaky.prompt("Hi")
    assert len(mock_server.requests) == 1, "no retry without the wait"


def test_credential_headers_are_never_sent_over_plain_http():
    remote = "http://gateway.example.com/v1"
    for headers in ({"Authorization": "Bearer sk-123456"}, {"api-key": "azure-123456"}):
        with pytest.raises(failover.ConfigurationError, match="plain http"):
            failover.OpenAICompatible(model="m", base_url=remote, headers=headers)
    harmless = failover.OpenAICompatible(model="m", base_url=remote, headers={"X-Team": "ml"})
    failover.Client({"g": harmless})


@pytest.mark.parametrize(
    "build",
    [
        lambda s: failover.OpenAI(model="m", api_key="k", overloaded_statuses=[70000]),
        lambda s: failover.OpenAI(model="m", api_key="k", overloaded_statuses=["x"]),  # type: ignore[list-item]
        lambda s: failover.OpenAI(model="m", base_url=123),  # type: ignore[arg-type]
        lambda s: failover.OpenAI(model="m", api_key=123),  # type: ignore[arg-type]
        lambda s: failover.OpenAI(model="m", headers="abc"),  # type: ignore[arg-type]
        lambda s: failover.OpenAICompatible(model="m", base_url=s.url, api_key_env=1),  # type: ignore[arg-type]
        lambda s: failover.Client([openai(s)]),  # type: ignore[arg-type]
        lambda s: failover.Client({"a": openai(s)}).prompt(123),  # type: ignore[arg-type]
        lambda s: failover.Client({"a": openai(s)}).prompt("Hi", provider=123),  # type: ignore[arg-type]
        lambda s: failover.Client({"a": openai(s)}).prompt("Hi", provider=[["a"]]),  # type: ignore[list-item]
        lambda s: failover.Client({"a": openai(s)}).prompt("Hi", system=5),  # type: ignore[arg-type]
        lambda s: failover.Client({"a": openai(s)}).prompt("Hi", system="\ud800"),
        lambda s: failover.Client({"a": openai(s)}).prompt("Hi", provider="a", model=7),  # type: ignore[arg-type]
    ],
)
def test_wrong_types_are_configuration_errors(mock_server, build):
    with pytest.raises(failover.ConfigurationError):
        build(mock_server)
    assert mock_server.requests == []


def test_policies_are_immutable_values():
    policy = failover.RetryPolicy(max_retries_last=3)
    with pytest.raises(AttributeError):
        policy.max_retries_last = -1  # type: ignore[misc]
    with pytest.raises(AttributeError):
        policy.backoff.initial = float("nan")  # type: ignore[misc]
    for p in (policy, failover.RetryPolicy.ruby_llm(30), failover.RetryPolicy.laravel()):
        assert pickle.loads(pickle.dumps(p)) == p
        assert copy.deepcopy(p) == p
    assert failover.RetryPolicy.ruby_llm(30) != failover.RetryPolicy.ruby_llm(None)


def test_presets_show_the_numbers_they_use():
    openai_preset = failover.RetryPolicy.openai()
    assert (openai_preset.max_retries, openai_preset.max_retry_after) == (2, 120.0)
    laravel = failover.RetryPolicy.laravel()
    assert (laravel.max_retries, laravel.max_retries_last, laravel.max_retry_after) == (1, 1, 10.0)
    ruby = failover.RetryPolicy.ruby_llm(30)
    assert (ruby.max_retries, ruby.backoff.initial, ruby.backoff.max) == (3, 0.1, 30.0)


def test_retry_after_takes_raw_byte_headers():
    assert failover.retry_after([(b"retry-after", b"5")]) == 5.0
    with pytest.raises(TypeError):
        failover.retry_after({}, now="soon")  # type: ignore[arg-type]


def test_cancelling_a_call_cancels_its_async_sleeper(mock_server):
    states: list[str] = []
    started = asyncio.Event()

    async def sleeper(seconds: float) -> None:
        states.append("sleeping")
        started.set()
        try:
            await asyncio.sleep(300)
        except asyncio.CancelledError:
            states.append("cancelled")
            raise

    mock_server.push(503, headers={"retry-after": "3"})
    client = failover.Client({"a": openai(mock_server)}, sleeper=sleeper)

    async def main() -> set[asyncio.Task[object]]:
        call = asyncio.ensure_future(client.prompt_async("Hi"))
        await asyncio.wait_for(started.wait(), 5)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        for _ in range(50):  # let the loop run the cancellation through
            if "cancelled" in states:
                break
            await asyncio.sleep(0.01)
        return asyncio.all_tasks() - {asyncio.current_task()}  # type: ignore[operator]

    leftover = asyncio.run(main())
    assert states == ["sleeping", "cancelled"]
    assert leftover == set()
