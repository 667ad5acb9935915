"""Options are checked when given: every bad option is a ConfigurationError naming what is wrong."""

from __future__ import annotations

import asyncio

import pytest

import failover
from failover.testing import MockServer

from conftest import (
    KEY,
    clear_proxy_variables,
    openai,
)


def test_a_calls_header_replaces_the_providers_of_the_same_name(mock_server: MockServer) -> None:
    """Found by the new-user trials of 2026-11-30."""
    mock_server.push_text("ok")
    provider = openai(mock_server, headers={"X-Team": "ml", "Authorization": "Bearer a-123456789"})
    failover.Client({"g": provider}).prompt(
        "Hi", headers={"x-team": "search", "authorization": "Bearer b-123456789"}
    )
    headers = mock_server.requests[0].header_list
    assert [v for n, v in headers if n == "x-team"] == ["search"]
    assert [v for n, v in headers if n == "authorization"] == ["Bearer b-123456789"]


def test_pool_and_member_names_are_checked_when_given() -> None:
    """Found by the new-user trials of 2026-11-30."""
    member = failover.OpenAI(model="m", api_key=KEY)
    with pytest.raises(failover.ConfigurationError, match="Pool name 'a/b'"):
        failover.Pool("a/b", [member])
    for bad in ("x/y", "x:y"):
        with pytest.raises(failover.ConfigurationError, match="member name"):
            failover.Pool("g", {bad: member})
    failover.Pool("g", [member, member])  # numbered members are named g/0, g/1


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("unix://tmp/redis.sock", "absolute path"),
        ("", "not a redis://"),
        ("localhost:6379", "not a redis://"),
    ],
)
def test_a_redis_url_that_cannot_work_is_refused_in_the_usual_words(url: str, why: str) -> None:
    """Found by the new-user trials of 2026-11-30."""
    with pytest.raises(failover.ConfigurationError, match="RedisState needs a Redis URL") as info:
        failover.RedisState(url)
    assert why in str(info.value) and "'://'" not in str(info.value)


def test_values_json_cannot_carry_are_refused_when_given() -> None:
    """Found by the new-user trials of 2026-11-30."""
    import math

    with pytest.raises(failover.ConfigurationError, match="OpenAI params cannot be sent as JSON"):
        failover.OpenAI(model="m", api_key=KEY, params={"x": object()})
    with pytest.raises(failover.ConfigurationError, match="'t': parameters cannot be sent"):
        failover.Tool("t", parameters={"x": math.nan})
    client = failover.Client({"g": failover.OpenAI(model="m", api_key=KEY)})
    with pytest.raises(failover.ConfigurationError, match="response_format cannot be sent"):
        client.prompt("Hi", response_format={"type": "json_object", "x": object()})


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
        lambda s: failover.Client({"a": openai(s)}).prompt("Hi", temperature=2.5),
        lambda s: failover.Client({"a": openai(s)}).prompt("Hi", provider=["a", "a"]),
    ],
)
def test_odd_arguments_are_configuration_errors(mock_server, build):
    """Found in review."""
    with pytest.raises(failover.ConfigurationError):
        build(mock_server)
    assert mock_server.requests == []


@pytest.mark.mock_server(assert_all_used=False)  # the retry never comes
def test_an_async_sleeper_on_a_sync_call_is_a_configuration_error(mock_server):
    """Found in the second review."""

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
    """Found in the second review."""
    with pytest.raises(failover.ConfigurationError):
        build(mock_server)
    assert mock_server.requests == []


@pytest.mark.parametrize(
    "build",
    [
        lambda: failover.Client(
            {"a": failover.OpenAI(model="m", api_key="k")},
            on_event="oops",  # type: ignore[arg-type]
        ),
        lambda: failover.OpenAICompatible(model="m", base_url="http://exa mple.com/v1"),
        lambda: failover.OpenAICompatible(model="m", base_url="ftp://example.com/v1"),
        lambda: failover.OpenAICompatible(model="m", base_url="https://example.com/v1#frag"),
        lambda: failover.OpenAICompatible(model="m", base_url="https://:443/v1"),
        lambda: failover.OpenAI(model="m", api_key="k", headers={"bad name": "x"}),
        lambda: failover.OpenAI(model="m", api_key="k", headers={"x-team": "a\x7fb"}),
        lambda: failover.OpenAI(model="m", api_key=b"bytes-key"),  # type: ignore[arg-type]
    ],
)
def test_bad_options_are_configuration_errors_when_given(build):
    """Found hardening the first slice."""
    with pytest.raises(failover.ConfigurationError):
        build()


def test_an_async_on_event_hook_is_refused():
    """Found hardening the first slice."""

    async def hook(event: object) -> None:
        pass

    with pytest.raises(failover.ConfigurationError, match="plain function"):
        failover.Client({"a": failover.OpenAI(model="m", api_key="k")}, on_event=hook)


def test_allow_insecure_must_be_a_real_bool():
    """Found by trying the first slice as a new user."""
    for value in ("no", "false", 0, 1, None):
        with pytest.raises(failover.ConfigurationError, match="allow_insecure"):
            failover.OpenAICompatible(
                model="m",
                base_url="http://gw.example.com/v1",
                allow_insecure=value,  # type: ignore[arg-type]
            )


@pytest.mark.parametrize(
    "build",
    [
        lambda s: failover.Client({"a": openai(s)}, sleeper=lambda: None),
        lambda s: failover.Client({"a": openai(s)}, on_event=lambda: None),
        lambda s: failover.Client(
            {"a": failover.OpenAICompatible(model="m", base_url=s.url, api_key=lambda x: x)}
        ),
        lambda s: openai(s, overloaded_statuses=529),
        lambda s: openai(s, overloaded_statuses=[200]),
        lambda s: openai(s, overloaded_statuses=[429]),
        lambda s: openai(s, overloaded_statuses=[401]),
        lambda s: openai(s, headers={"Content-Length": "5"}),
        lambda s: openai(s, headers={"Transfer-Encoding": "chunked"}),
        lambda s: failover.Client({"a": openai(s)}).prompt("Hi", model=""),
    ],
)
def test_more_options_are_checked_when_given(mock_server, build):
    """Found by trying the first slice as a new user."""
    with pytest.raises(failover.ConfigurationError):
        build(mock_server)
    assert mock_server.requests == []


def test_odd_text_in_urls_is_a_configuration_error(monkeypatch):
    """Found by the second review of the first slice."""
    clear_proxy_variables(monkeypatch)
    monkeypatch.setitem(__import__("os").environb, b"HTTP_PROXY", b"http://u:p\xff@proxy:3128")
    failover.Client(
        {"a": failover.OpenAI(model="m", api_key="k")}
    )  # skipped, as the transport does
    with pytest.raises(failover.ConfigurationError):
        failover.OpenAICompatible(model="m", base_url="https://host\udc80/v1")
    with pytest.raises(failover.ConfigurationError):
        failover.Client({"a": failover.OpenAI(model="m", api_key="k")}, proxy="http://p\udc80:1")


def test_bad_configuration_is_a_configuration_error():
    with pytest.raises(failover.ConfigurationError):
        failover.Client({})
    with pytest.raises(failover.ConfigurationError):
        failover.RetryPolicy(max_retry_after=-1)
    with pytest.raises(ValueError):
        failover.Backoff(jitter=2)
    with pytest.raises(failover.ConfigurationError):
        failover.Client(
            {"a": failover.OpenAICompatible(model="m", base_url="http://127.0.0.1:1")}, timeout=0
        )
