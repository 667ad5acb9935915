"""FakeSleeper, fake_sleep(), MockServer, the pytest fixtures and retry_after()."""

from __future__ import annotations

import email.utils
import http.client
import json
import re
import urllib.parse
from http import HTTPStatus

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
