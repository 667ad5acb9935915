"""FakeSleeper, fake_sleep(), MockServer, the pytest fixtures and retry_after()."""

from __future__ import annotations

import asyncio
import email.utils
import http.client
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from typing import Any

import pytest

import failover
from failover.testing import FakeSleeper, MockServer, fake_sleep

from conftest import openai


def test_fake_sleep_applies_to_clients_without_a_sleeper(mock_server):
    mock_server.push(503, headers={"retry-after": "4"})
    mock_server.push_text("ok")
    client = failover.Client({"a": openai(mock_server)})
    with fake_sleep() as sleeper:
        client.prompt("Hi")
    sleeper.assert_sequence([4.0])


def test_an_explicit_sleeper_wins_over_fake_sleep(mock_server):
    mine = FakeSleeper()
    mock_server.push(503, headers={"retry-after": "4"})
    mock_server.push_text("ok")
    client = failover.Client({"a": openai(mock_server)}, sleeper=mine)
    with fake_sleep() as block:
        client.prompt("Hi")
    mine.assert_sequence([4.0])
    block.assert_never_slept()


def test_the_fake_sleep_fixture(fake_sleep, mock_server):
    mock_server.push(429, headers={"retry-after": "2"})
    mock_server.push_text("ok")
    failover.Client({"a": openai(mock_server)}).prompt("Hi")
    assert fake_sleep.sleeps == [2.0]


def test_fake_sleeper_assertions_and_clock():
    sleeper = FakeSleeper()
    start = sleeper.time()
    assert start == int(start)
    sleeper(1.5)
    sleeper(0.25)
    sleeper.assert_sequence([1.5, 0.25])
    assert sleeper.time() == start + 1.75
    with pytest.raises(AssertionError, match="expected sleeps"):
        sleeper.assert_sequence([1.5])
    with pytest.raises(AssertionError, match="expected no sleep"):
        sleeper.assert_never_slept()
    sleeper.clear()
    sleeper.assert_never_slept()


# Calls side by side under one FakeSleeper, as under real sleeping -----------


def _side_by_side(n: int, way: str, work: Callable[[int], Any]) -> list[Any]:
    """``work(i)`` for i in range(n), all at once: in a thread pool or in
    plain threads; an exception is returned as the result."""

    def guarded(i: int) -> Any:
        try:
            return work(i)
        except Exception as exc:
            return exc

    if way == "pool":
        with ThreadPoolExecutor(n) as pool:
            return list(pool.map(guarded, range(n)))
    results: list[Any] = [None] * n

    def run(i: int) -> None:
        results[i] = guarded(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


def _rate_limited_then_ok(n: int) -> MockServer:
    """A server whose first n requests get 429 retry-after 3, the next n an answer."""
    server = MockServer()
    for _ in range(n):
        server.push(429, headers={"retry-after": "3"})
    for _ in range(n):
        server.push_text("waited")
    return server


@pytest.mark.parametrize("way", ["pool", "threads"])
@pytest.mark.parametrize("n", [10, 16, 40])
def test_threads_that_each_wait_3_s_all_end_at_plus_3_s(n, way):
    server = _rate_limited_then_ok(n)
    sleeper = FakeSleeper()
    client = failover.Client({"a": openai(server)}, sleeper=sleeper)
    start = sleeper.time()
    answers = _side_by_side(n, way, lambda _: client.prompt("Hi").text)
    server.close()
    assert answers == ["waited"] * n
    assert sleeper.sleeps == [3.0] * n
    # Each call's first request came before any retry (the server served
    # its 429s first), and the clock moved by one wait, not by many.
    assert sleeper.time() == start + 3.0


@pytest.mark.parametrize("n", [10, 16, 40])
def test_tasks_that_each_wait_3_s_all_end_at_plus_3_s(n):
    server = _rate_limited_then_ok(n)
    sleeper = FakeSleeper()
    client = failover.Client({"a": openai(server)}, sleeper=sleeper)
    start = sleeper.time()

    async def main() -> list[str]:
        answers = await asyncio.gather(*(client.prompt_async("Hi") for _ in range(n)))
        return [r.text for r in answers]

    answers = asyncio.run(main())
    server.close()
    assert answers == ["waited"] * n
    assert sleeper.sleeps == [3.0] * n
    assert sleeper.time() == start + 3.0


def test_calls_one_after_another_add_up(mock_server):
    for _ in range(2):
        mock_server.push(429, headers={"retry-after": "3"})
        mock_server.push_text("waited")
    sleeper = FakeSleeper()
    client = failover.Client({"a": openai(mock_server)}, sleeper=sleeper)
    start = sleeper.time()
    client.prompt("Hi")
    client.prompt("Hi")
    assert (sleeper.sleeps, sleeper.time()) == ([3.0, 3.0], start + 6.0)


@pytest.mark.parametrize("how", ["read to its end", "closed"])
def test_a_stream_over_but_still_referenced_holds_the_time_no_more(mock_server, how):
    sleeper = FakeSleeper()
    client = failover.Client({"a": openai(mock_server)}, sleeper=sleeper)
    mock_server.push(
        sse=[
            'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}',
            'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
            "data: [DONE]",
        ]
    )
    stream = client.stream("Hi")
    if how == "read to its end":
        assert "".join(c.text for c in stream) == "x"
    else:
        next(stream)
        stream.close()
    for _ in range(8):
        mock_server.push(429, headers={"retry-after": "3"})
    mock_server.push_text("waited")
    start, started = sleeper.time(), time.monotonic()
    client.prompt("Hi", retry=failover.RetryPolicy(max_retries_last=8))
    took = time.monotonic() - started
    assert (sleeper.sleeps, sleeper.time()) == ([3.0] * 8, start + 24.0)
    # A stream still in flight would hold each sleep for the 250 ms grace (2 s
    # in all); this call, alone in flight, waits no real time.
    assert took < 1.0, f"eight fake sleeps took {took:.2f}s of real time"
    assert stream is not None


@pytest.mark.parametrize("way", ["pool", "threads"])
def test_threads_calling_one_after_another_add_up(way):
    servers = [MockServer() for _ in range(10)]
    for server in servers:
        for _ in range(2):
            server.push(429, headers={"retry-after": "3"})
            server.push_text("waited")
    sleeper = FakeSleeper()
    clients = [failover.Client({"a": openai(s)}, sleeper=sleeper) for s in servers]
    start = sleeper.time()
    answers = _side_by_side(
        10, way, lambda i: [clients[i].prompt("Hi").text, clients[i].prompt("Hi").text]
    )
    for server in servers:
        server.close()
    assert answers == [["waited", "waited"]] * 10
    assert sleeper.sleeps == [3.0] * 20
    assert sleeper.time() == start + 6.0


@pytest.mark.parametrize("way", ["pool", "threads"])
def test_each_threads_deadline_counts_only_its_own_sleeps(way):
    # Ten threads that each wait 3 s three times fit a 10 s deadline each
    # (90 s slept in all)...
    fit = [MockServer() for _ in range(10)]
    for server in fit:
        for _ in range(3):
            server.push(429, headers={"retry-after": "3"})
        server.push_text("in time")
    sleeper = FakeSleeper()
    clients = [
        failover.Client({"a": openai(s)}, sleeper=sleeper, deadline=10.0, retry=RETRY_5)
        for s in fit
    ]
    start = sleeper.time()
    assert _side_by_side(10, way, lambda i: clients[i].prompt("Hi").text) == ["in time"] * 10
    assert (sleeper.sleeps, sleeper.time()) == ([3.0] * 30, start + 9.0)
    # ...and waits of 4 s do not: 8 s each, and a third would end past it.
    late = [MockServer() for _ in range(10)]
    for server in late:
        for _ in range(3):
            server.push(429, headers={"retry-after": "4"})
    sleeper = FakeSleeper()
    clients = [
        failover.Client({"a": openai(s)}, sleeper=sleeper, deadline=10.0, retry=RETRY_5)
        for s in late
    ]
    start = sleeper.time()
    failures = _side_by_side(10, way, lambda i: clients[i].prompt("Hi"))
    assert all(isinstance(f, failover.RateLimited) for f in failures), failures
    assert [len(s.requests) for s in late] == [3] * 10
    assert (sleeper.sleeps, sleeper.time()) == ([4.0] * 20, start + 8.0)
    for server in fit + late:
        server.close()


RETRY_5 = failover.RetryPolicy(max_retries_last=5)


@pytest.mark.parametrize("way", ["pool", "threads"])
def test_a_cooldown_one_thread_set_runs_on_the_time_all_threads_share(way):
    cooling, backup, waited = MockServer(), MockServer(), _rate_limited_then_ok(10)
    sleeper = FakeSleeper()
    cooled = failover.Client({"a": openai(cooling), "b": openai(backup)}, sleeper=sleeper)
    waits = failover.Client({"c": openai(waited)}, sleeper=sleeper)
    # One thread's call is told to keep off a for 60 s: a cools, b answers.
    cooling.push(429, headers={"retry-after": "60"}, json={"error": {"message": "quiet"}})
    for _ in range(11):
        backup.push_text("from b")
    assert _side_by_side(1, way, lambda _: cooled.prompt("Hi").provider) == ["b"]

    def wait_then_ask(_: int) -> tuple[float, str]:
        waits.prompt("Hi")
        # 3 s later for every thread: a is still cooling, for 57 s more.
        return cooled.cooldowns()["a"], cooled.prompt("Hi").provider

    results = _side_by_side(10, way, wait_then_ask)
    assert results == [(pytest.approx(57.0), "b")] * 10
    assert len(cooling.requests) == 1
    # Once the cooldown's time has passed, a is called again.
    sleeper.advance(57)
    cooling.push_text("from a")
    assert cooled.prompt("Hi").provider == "a"
    for server in (cooling, backup, waited):
        server.close()


def test_mock_server_records_and_scripts():
    with MockServer() as server:
        server.push(201, headers=[("x-a", "1")], body="plain")
        server.push_text("hi", wire="anthropic")
        assert server.pending == 2
        client = failover.Client(
            {"a": failover.Anthropic(model="m", api_key="k", base_url=server.url)},
            retry=failover.RetryPolicy(max_retries_last=0),
        )
        with pytest.raises(failover.ServerError):  # 201 with a non-JSON body
            client.prompt("one")
        assert client.prompt("two").text == "hi"
        assert [r.json["messages"][0]["content"] for r in server.requests] == ["one", "two"]
        assert server.requests[0].method == "POST"
        assert server.pending == 0
        with pytest.raises(ValueError, match="unknown fault"):
            server.push(fault="explode")
        with pytest.raises(ValueError):
            server.push_text("x", wire="carrier-pigeon")
    assert "MockServer(url='http://127.0.0.1:" in repr(server)


def _request(server: MockServer) -> int:
    """One plain GET to ``server``; its status."""
    url = urllib.parse.urlsplit(server.url)
    conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=5)
    try:
        conn.request("GET", "/")
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


@pytest.mark.parametrize("status", [42, 99, 600, 70000, -1, 10**30, 200.0, "200", None])
def test_a_status_outside_100_to_599_is_a_value_error_at_once(status):
    with MockServer() as server:
        with pytest.raises(ValueError, match=rf"100 to 599, got {re.escape(repr(status))}$"):
            server.push(status)
        assert server.pending == 0


def test_statuses_from_100_to_599_are_accepted():
    with MockServer() as server:
        for status in (599, HTTPStatus.TOO_MANY_REQUESTS, 100):
            server.push(status)
        message = "3 scripted responses were never requested: [599, 429, 100]"
        with pytest.raises(AssertionError, match=re.escape(message)):
            server.assert_all_used()
        assert [_request(server) for _ in range(2)] == [599, 429]
        assert repr(server).endswith("pending=1)")


def test_a_push_after_close_is_a_value_error():
    with MockServer() as server:
        server.push(503)
    with pytest.raises(ValueError, match="MockServer is closed"):
        server.push(200)
    with pytest.raises(ValueError, match="MockServer is closed"):
        server.push_text("too late")
    assert server.pending == 1


def test_assert_all_used_names_what_was_never_requested():
    with MockServer() as server:
        server.push(429, headers={"retry-after": "1"})
        server.push_text("ok")
        message = "2 scripted responses were never requested: [429, 200]"
        with pytest.raises(AssertionError, match=re.escape(message)):
            server.assert_all_used()
        assert _request(server) == 429
        with pytest.raises(AssertionError, match=re.escape("1 scripted response was never")):
            server.assert_all_used()
        assert _request(server) == 200
        server.assert_all_used()


def test_the_mock_server_fixture_checks_at_teardown_unless_marked(pytester):
    pytester.makepyfile(
        """
        import http.client
        import urllib.parse

        import pytest

        servers = []

        def test_leaves_two(mock_server):
            servers.append(mock_server)
            mock_server.push(429)
            mock_server.push_text("unused")

        def test_a_failed_check_still_closes_the_server():
            with pytest.raises(ValueError, match="closed"):
                servers[0].push(200)

        @pytest.mark.mock_server(assert_all_used=False)
        def test_opts_out(mock_server):
            mock_server.push(503)

        def test_uses_all(mock_server):
            mock_server.push(204)
            url = urllib.parse.urlsplit(mock_server.url)
            conn = http.client.HTTPConnection(url.hostname, url.port, timeout=5)
            conn.request("GET", "/")
            assert conn.getresponse().status == 204
            conn.close()

        @pytest.mark.mock_server(assert_all_usd=False)
        def test_a_misspelt_option(mock_server):
            pass
        """
    )
    result = pytester.runpytest("--strict-markers", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, errors=2)
    result.stdout.re_match_lines(
        [
            r".*ERROR at teardown of test_leaves_two.*",
            r"E +AssertionError: 2 scripted responses were never requested: \[429, 200\]",
        ]
    )
    result.stdout.re_match_lines([r".*ERROR at setup of test_a_misspelt_option.*"])
    result.stdout.no_re_match_line(r".*ERROR at teardown of test_(opts_out|uses_all).*")


def test_retry_after_function():
    ra = failover.retry_after
    assert ra({"Retry-After": "3"}) == 3.0
    assert ra([("RETRY-AFTER-MS", "250"), ("retry-after", "9")]) == 0.25
    assert ra({"retry-after": "3", "x-should-retry": "false"}) is None
    assert ra({}) is None
    assert ra({"retry-after": "soon"}) is None
    now = 1_750_000_000.0
    assert ra({"retry-after": email.utils.formatdate(now + 30, usegmt=True)}, now=now) == 30.0
    gemini = {"error": {"details": [{"@type": "google.rpc.RetryInfo", "retryDelay": "48s"}]}}
    assert ra({}, gemini) == 48.0
    assert ra({}, json.dumps(gemini)) == 48.0
    assert ra({}, json.dumps(gemini).encode()) == 48.0
    openai_headers = {"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "6m0s"}
    assert ra(openai_headers) == 360.0
    anthropic_headers = {
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": "2025-06-15T15:07:10Z",
    }
    assert ra(anthropic_headers, now=now) == 30.0


def test_recorded_requests_do_not_show_keys_in_their_repr(mock_server):
    mock_server.push_text("ok")
    secret = "sk-recorded-secret-42"
    provider = failover.OpenAICompatible(
        model="m",
        base_url=mock_server.url,
        api_key=secret,
        headers={"X-Portkey-Token": "tok-very-secret-123"},
    )
    failover.Client({"a": provider}).prompt("Hi")
    request = mock_server.requests[0]
    assert request.headers["authorization"] == f"Bearer {secret}"
    assert secret not in repr(request) and "<redacted>" in repr(request)
    assert "tok-very-secret" not in repr(request)


def test_mockserver_refuses_a_bad_header_name_and_events_that_are_not_str() -> None:
    """Found by the new-user trials of 2026-11-30."""
    with MockServer() as server:
        with pytest.raises(ValueError, match="not an HTTP token"):
            server.push(headers={"bad name": "v"})
        with pytest.raises(ValueError, match="events are str"):
            server.push(sse=[{"data": "x"}])  # type: ignore[list-item]
        assert server.pending == 0


def test_retry_after_reads_a_list_of_values_as_http_joins_them() -> None:
    """Found by the new-user trials of 2026-11-30."""
    assert failover.retry_after({"Retry-After": ["41"]}) == 41.0  # type: ignore[dict-item]
    assert failover.retry_after({"Retry-After": ["1", "2"]}) is None  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="str or bytes"):
        failover.retry_after({"Retry-After": {"v": 1}})  # type: ignore[dict-item]


def test_mock_server_still_closes_cleanly_after_a_hang():
    """Found in review."""
    server = MockServer()
    server.push(fault="hang")
    client = failover.Client(
        {"a": failover.OpenAICompatible(model="m", base_url=server.url)},
        retry=failover.RetryPolicy(max_retries_last=0),
    )
    with pytest.raises(failover.ProviderTimeout):
        client.prompt("Hi", timeout=0.1)
    server.close()


def test_retry_after_takes_raw_byte_headers():
    """Found in the second review."""
    assert failover.retry_after([(b"retry-after", b"5")]) == 5.0
    with pytest.raises(TypeError):
        failover.retry_after({}, now="soon")  # type: ignore[arg-type]


@pytest.fixture
def ten_servers() -> Iterator[list[MockServer]]:
    servers = [MockServer() for _ in range(10)]
    for server in servers:
        # The short real delay makes every call start before any of them
        # sleeps: with one clock for all, the later ones would find their
        # deadline spent by the others' sleeps.
        server.push(429, headers={"retry-after": "3"}, delay=0.2)
        server.push_text("waited")
    yield servers
    for server in servers:
        server.close()


def _clients(servers: list[MockServer], sleeper: FakeSleeper) -> list[failover.Client]:
    return [failover.Client({"a": openai(s)}, sleeper=sleeper, deadline=10.0) for s in servers]


def test_concurrent_async_calls_each_count_only_their_own_sleeps(ten_servers):
    """Found hardening the first slice."""
    sleeper = FakeSleeper()
    start = sleeper.time()
    clients = _clients(ten_servers, sleeper)

    async def main() -> list[failover.Response]:
        return await asyncio.gather(*(c.prompt_async("Hi") for c in clients))

    answers = asyncio.run(main())
    assert [r.text for r in answers] == ["waited"] * 10
    sleeper.assert_sequence([3.0] * 10)
    # The shared clock shows the latest time any call reached, not their sum.
    assert sleeper.time() == start + 3.0


def test_concurrent_threads_each_count_only_their_own_sleeps(ten_servers):
    """Found hardening the first slice."""
    sleeper = FakeSleeper()
    clients = _clients(ten_servers, sleeper)
    with ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(lambda c: c.prompt("Hi"), clients))
    assert [r.text for r in answers] == ["waited"] * 10
    assert sleeper.sleeps == [3.0] * 10


def test_one_call_still_counts_all_of_its_own_sleeps(mock_server):
    """Found hardening the first slice."""
    for _ in range(3):
        mock_server.push(429, headers={"retry-after": "4"})
    client = failover.Client(
        {"a": openai(mock_server)},
        sleeper=FakeSleeper(),
        deadline=10.0,
        retry=failover.RetryPolicy(max_retries_last=5),
    )
    # 4 + 4 = 8 s slept; a third 4 s wait would end past the deadline.
    with pytest.raises(failover.RateLimited):
        client.prompt("Hi")
    assert len(mock_server.requests) == 3


@pytest.mark.parametrize("headers", [None, 5, "retry-after: 1", [("a",)]])
def test_retry_after_says_what_headers_must_be(headers):
    """Found hardening the first slice."""
    with pytest.raises(TypeError, match="headers must be"):
        failover.retry_after(headers)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "push",
    [
        lambda s: s.push(200, json={"a": 1}, sse=["data: {}"]),
        lambda s: s.push(200, sse="data: {}"),
        lambda s: s.push(200, headers={"x-a": "b\r\nx-evil: 1"}),
    ],
)
def test_mock_server_refuses_scripts_it_could_not_serve(mock_server, push):
    """Found by trying the first slice as a new user."""
    with pytest.raises(ValueError):
        push(mock_server)


def test_retry_after_on_odd_python_values_is_no_hint():
    """Found by the second trial of the first slice."""
    assert failover.retry_after({"retry-after": "\udc80"}) is None
    deep: list[object] = []
    node = deep
    for _ in range(100_000):
        node.append([])
        node = node[0]  # type: ignore[assignment]
    assert failover.retry_after({}, deep) is None


@pytest.mark.parametrize("option", ["delay", "interval"])
@pytest.mark.parametrize("bad", [True, False, "0.1", None])
def test_mock_server_seconds_are_numbers(option: str, bad: object) -> None:
    """Found by the last new-user trial of 2026-12-01: True was taken as one second."""
    with MockServer() as server:
        with pytest.raises(ValueError, match=option):
            server.push(sse=["data: 1"], **{option: bad})
