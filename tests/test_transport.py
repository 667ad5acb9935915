"""The transport: proxies, redirects, connections, timeouts, URLs and the headers the
transport owns."""

from __future__ import annotations

import logging
import socket
import threading

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

from conftest import (
    KEY,
    SINGLE_TRY,
    clear_proxy_variables,
    openai,
)


@pytest.mark.mock_server(assert_all_used=False)
def test_a_408_names_the_host(mock_server: MockServer) -> None:
    """Found by the new-user trials of 2026-11-30."""
    for _ in range(5):
        mock_server.push(408, json={"error": {"message": "request timeout"}})
    client = failover.Client({"p": openai(mock_server)}, sleeper=FakeSleeper())
    with pytest.raises(failover.ProviderTimeout) as info:
        client.prompt("Hi")
    host = mock_server.url.removeprefix("http://")
    assert "p returned 408" in str(info.value) and host in str(info.value)


def test_redirects_are_not_followed_so_keys_stay_home(mock_server, backup_server, call):
    """Found in review."""
    target = f"{backup_server.url}/chat/completions"
    mock_server.push(307, headers={"location": target})
    provider = failover.Anthropic(model="m", api_key=KEY, base_url=mock_server.url)
    client = failover.Client({"a": provider}, sleeper=FakeSleeper())
    with pytest.raises(failover.BadRequest, match="check base_url") as info:
        call(client)
    assert info.value.status == 307
    assert backup_server.requests == []


def test_the_endpoint_path_goes_before_the_query(mock_server):
    """Found hardening the first slice."""
    mock_server.push_text("ok")
    base = f"{mock_server.url}/openai/deployments/gpt4?api-version=2024-10-21"
    provider = failover.OpenAICompatible(model="m", base_url=base, api_key=KEY)
    assert failover.Client({"az": provider}).prompt("Hi").text == "ok"
    assert mock_server.requests[0].path == (
        "/openai/deployments/gpt4/chat/completions?api-version=2024-10-21"
    )
    # The query is never shown: it may carry a key.
    assert "api-version" not in repr(provider)


@pytest.mark.parametrize(
    "options",
    [
        {"proxy": "not a url"},
        {"proxy": "socks5://127.0.0.1:1080"},
        {"proxy": 8080},
        {"verify": "/no/such/ca.pem"},
        {"verify": 1},
        {"http2": "yes"},
        {"max_idle_connections": -1},
        {"max_idle_connections": 1.5},
    ],
)
def test_bad_transport_options_are_configuration_errors_when_given(options):
    """Found hardening the first slice."""
    with pytest.raises(failover.ConfigurationError):
        failover.Client({"a": failover.OpenAI(model="m", api_key="k")}, **options)


def test_a_refused_connection_names_the_provider_and_host(call):
    """Found hardening the first slice."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    provider = failover.OpenAICompatible(model="m", base_url=f"http://127.0.0.1:{port}/v1")
    client = failover.Client({"local-vllm": provider}, retry=SINGLE_TRY)
    with pytest.raises(failover.ProviderConnectionError) as info:
        call(client)
    text = str(info.value)
    assert "local-vllm" in text and f"127.0.0.1:{port}" in text, text
    assert not isinstance(info.value, failover.ProviderTimeout)


def test_a_connect_timeout_is_a_provider_timeout_that_says_so(call):
    # A listening socket whose accept queue is full drops new SYNs: connecting
    # to it hangs until the connect timeout (loopback only).
    """Found hardening the first slice."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(8):
        filler = socket.socket()
        filler.setblocking(False)
        try:
            filler.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fillers.append(filler)
    try:
        provider = failover.OpenAICompatible(model="m", base_url=f"http://127.0.0.1:{port}/v1")
        client = failover.Client({"p": provider}, connect_timeout=0.3, retry=SINGLE_TRY)
        with pytest.raises(failover.ProviderTimeout) as info:
            call(client)
    finally:
        for s in [*fillers, listener]:
            s.close()
    text = str(info.value)
    assert "deadline has elapsed" not in text, text
    assert "connect_timeout" in text and f"127.0.0.1:{port}" in text and "p:" in text, text
    assert isinstance(info.value, TimeoutError) and info.value.kind == "timeout"


def test_a_read_timeout_names_the_host(mock_server, call):
    """Found hardening the first slice."""
    mock_server.push(fault="hang")
    client = failover.Client({"slow": openai(mock_server)}, timeout=0.2, retry=SINGLE_TRY)
    with pytest.raises(failover.ProviderTimeout, match=r"slow: no response from 127\.0\.0\.1"):
        call(client)


def test_a_proxy_carries_every_request(mock_server):
    # A MockServer as the proxy: a request sent through a proxy names the
    # whole target URL in its request line.
    """Found hardening the first slice."""
    mock_server.push_text("via proxy")
    target = failover.OpenAICompatible(model="m", base_url="http://upstream.invalid/v1")
    client = failover.Client({"a": target}, proxy=mock_server.url)
    assert client.prompt("Hi").text == "via proxy"
    assert mock_server.requests[0].path == "http://upstream.invalid/v1/chat/completions"


def test_the_proxy_environment_variables_are_honoured(mock_server, monkeypatch):
    """Found hardening the first slice."""
    mock_server.push_text("via env proxy")
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", mock_server.url)
    target = failover.OpenAICompatible(model="m", base_url="http://upstream.invalid/v1")
    assert failover.Client({"a": target}).prompt("Hi").text == "via env proxy"
    assert mock_server.requests[0].path.startswith("http://upstream.invalid/")


def test_a_client_keeps_the_proxy_environment_it_was_made_under(mock_server, monkeypatch):
    """Found reviewing issue 17: a thread's own pool is made at its second sync call, and reqwest
    reads the proxy variables then. A client must send every call through the proxies it was
    made with (and whose credentials it redacts), not through ones set afterwards."""
    for name in (*failover._native.PROXY_VARIABLES, "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for _ in range(6):
        mock_server.push_text("direct")
    client = failover.Client({"a": openai(mock_server)}, retry=SINGLE_TRY)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        nowhere = s.getsockname()[1]  # nothing listens there
    monkeypatch.setenv("HTTP_PROXY", f"http://user:pw-later@127.0.0.1:{nowhere}")
    monkeypatch.setenv("ALL_PROXY", f"http://user:pw-later@127.0.0.1:{nowhere}")
    answers = [client.prompt("Hi").text for _ in range(3)]
    worker = threading.Thread(
        target=lambda: answers.extend(client.prompt("Hi").text for _ in "abc")
    )
    worker.start()
    worker.join()
    assert answers == ["direct"] * 6
    assert all(not r.path.startswith("http://") for r in mock_server.requests)
    client.close()


def test_a_proxy_that_refuses_is_named_and_its_password_never_shows(caplog):
    """Found hardening the first slice."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there
    target = failover.OpenAICompatible(model="m", base_url="http://upstream.invalid/v1")
    client = failover.Client(
        {"a": target},
        proxy=f"http://user:hunter2-secret@127.0.0.1:{port}",
        retry=SINGLE_TRY,
    )
    caplog.set_level(logging.DEBUG, logger="failover")
    with pytest.raises(failover.ProviderConnectionError) as info:
        client.prompt("Hi")
    assert f"via the proxy 127.0.0.1:{port}" in str(info.value), info.value
    texts = [str(info.value), repr(info.value), repr(client)]
    texts += [r.getMessage() for r in caplog.records]
    for text in texts:
        assert "hunter2" not in text, text


def test_max_idle_connections_decides_whether_connections_are_reused():
    """Found hardening the first slice."""
    import itertools
    import json
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    # Which connection served each request, numbered by the server as it
    # accepts them (a client port could come round again).
    served: list[int] = []
    numbers = itertools.count()
    answer = json.dumps({"choices": [{"message": {"content": "ok"}}]}).encode()

    class KeepAlive(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            self.number = next(numbers)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            served.append(self.number)
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            pass

    def connections_for(client: failover.Client, calls: int = 10) -> list[int]:
        served.clear()
        for _ in range(calls):
            client.prompt("Hi")
        return list(served)

    server = ThreadingHTTPServer(("127.0.0.1", 0), KeepAlive)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        provider = failover.OpenAICompatible(model="m", base_url=url)
        # A connection goes back to the pool a moment after its answer is
        # read (on the HTTP client's own task): a call made within that
        # moment opens another. So reuse is asserted over a run of calls,
        # not of one pair, which that moment decided now and then.
        pooled = connections_for(failover.Client({"a": provider}))
        assert len(set(pooled)) < len(pooled), f"idle connections are reused: {pooled}"
        unpooled = connections_for(failover.Client({"a": provider}, max_idle_connections=0))
        assert len(set(unpooled)) == len(unpooled), f"no idle connection is kept: {unpooled}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_proxy_environment_variables_are_checked_when_the_client_is_built(monkeypatch):
    """Found by trying the first slice as a new user."""
    clear_proxy_variables(monkeypatch)
    monkeypatch.setenv("ALL_PROXY", "socks5://127.0.0.1:1080")
    with pytest.raises(failover.ConfigurationError, match="ALL_PROXY"):
        failover.Client({"a": failover.OpenAI(model="m", api_key="k")})
    # An explicit proxy= wins over the variables.
    failover.Client({"a": failover.OpenAI(model="m", api_key="k")}, proxy="http://127.0.0.1:1")


def test_only_the_proxy_variables_the_transport_uses_are_checked(monkeypatch):
    """Found by the second review of the first slice."""
    provider = failover.OpenAI(model="m", api_key="k")
    clear_proxy_variables(monkeypatch)
    # Clash/V2Ray style: ALL_PROXY is not used when both others are set.
    monkeypatch.setenv("https_proxy", "http://127.0.0.1:7890")
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:7890")
    monkeypatch.setenv("all_proxy", "socks5://127.0.0.1:7890")
    failover.Client({"a": provider})
    # A lowercase variable shadowed by its uppercase twin is not read.
    clear_proxy_variables(monkeypatch)
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:7890")
    monkeypatch.setenv("https_proxy", "socks5://127.0.0.1:1")
    failover.Client({"a": provider})
    # Under CGI no proxy variable is read at all.
    clear_proxy_variables(monkeypatch)
    monkeypatch.setenv("REQUEST_METHOD", "GET")
    monkeypatch.setenv("HTTP_PROXY", "socks5://127.0.0.1:1")
    failover.Client({"a": provider})
    # But one that is used and unusable is refused, naming it.
    monkeypatch.delenv("REQUEST_METHOD")
    with pytest.raises(failover.ConfigurationError, match="HTTP_PROXY"):
        failover.Client({"a": provider})


def test_a_407_from_a_proxy_to_an_https_target_ends_the_call_naming_the_proxy(
    mock_server, backup_server
):
    """Found by the second review of the first slice."""
    mock_server.push(407)
    backup_server.push(407)
    client = failover.Client(
        {
            "a": failover.OpenAI(model="m", api_key="sk-test-1234567890"),
            "b": failover.Anthropic(model="m", api_key="sk-test-1234567890"),
        },
        proxy=mock_server.url,
        sleeper=FakeSleeper(),
    )
    with pytest.raises(failover.BadRequest, match="proxy asked for credentials"):
        client.prompt("Hi")
    assert len(mock_server.requests) == 1, "not retried, not failed over"
    assert mock_server.requests[0].method == "CONNECT"


def test_a_host_header_is_allowed(mock_server):
    """Found by the second review of the first slice."""
    mock_server.push_text("routed")
    provider = openai(mock_server, headers={"Host": "llm.internal.example"})
    assert failover.Client({"a": provider}).prompt("Hi").text == "routed"
    assert mock_server.requests[0].headers["host"] == "llm.internal.example"


def test_accept_encoding_is_the_transports_to_set():
    """Found by the second trial of the first slice."""
    with pytest.raises(failover.ConfigurationError, match="transport"):
        failover.OpenAI(model="m", api_key="k", headers={"Accept-Encoding": "gzip"})


def test_timeout_raises_provider_timeout(mock_server, call):
    mock_server.push(fault="hang")
    client = failover.Client(
        {"a": openai(mock_server)},
        retry=failover.RetryPolicy(max_retries_last=0),
        sleeper=FakeSleeper(),
    )
    with pytest.raises(failover.ProviderTimeout) as info:
        call(client, timeout=0.2)
    assert isinstance(info.value, TimeoutError)
    assert info.value.attempts[0].kind == "timeout"


def test_a_reset_connection_is_retried_once_then_fails_over(mock_server, backup_server, call):
    mock_server.push(fault="reset")
    mock_server.push(fault="reset")
    backup_server.push_text("ok")
    sleeper = FakeSleeper()
    client = failover.Client(
        {"a": openai(mock_server), "b": openai(backup_server)}, sleeper=sleeper
    )
    r = call(client)
    assert r.provider == "b"
    assert [a.kind for a in r.attempts] == ["connection", "connection", None]
    assert len(sleeper.sleeps) == 1


def test_refused_connection_is_a_connection_error(call):
    with MockServer() as server:
        url = server.url
    client = failover.Client(
        {"a": failover.OpenAICompatible(model="m", base_url=url)},
        retry=failover.RetryPolicy(max_retries_last=0),
    )
    with pytest.raises(failover.ProviderConnectionError) as info:
        call(client)
    assert not isinstance(info.value, failover.ProviderTimeout)
