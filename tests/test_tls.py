"""``verify=`` against a real local TLS server whose certificate comes from a
CA generated for the test (trustme): never the system's roots, never the
internet."""

from __future__ import annotations

import json
import socket
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import failover

trustme = pytest.importorskip("trustme")

ANSWER = {
    "id": "chatcmpl-tls",
    "model": "m-tls",
    "choices": [{"message": {"role": "assistant", "content": "over TLS"}, "finish_reason": "stop"}],
}


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = json.dumps(ANSWER).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def tls_url(ca: trustme.CA) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost", "127.0.0.1").configure_cert(context)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://localhost:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.fixture
def ca_file(ca: trustme.CA, tmp_path: Path) -> str:
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


def _client(url: str, **options: object) -> failover.Client:
    provider = failover.OpenAICompatible(model="m", base_url=url, api_key="sk-tls-test-0123")
    return failover.Client(
        {"tls": provider}, retry=failover.RetryPolicy(max_retries_last=0), **options
    )


def test_a_ca_bundle_path_verifies_the_server(tls_url, ca_file, call):
    assert call(_client(tls_url, verify=ca_file)).text == "over TLS"


def test_the_system_roots_refuse_an_unknown_ca(tls_url, call):
    with pytest.raises(failover.ProviderConnectionError) as info:
        call(_client(tls_url))
    assert "certificate" in str(info.value).lower(), info.value
    assert "tls" in str(info.value) and "localhost" in str(info.value)


def test_verify_false_accepts_any_certificate(tls_url, call):
    assert call(_client(tls_url, verify=False)).text == "over TLS"


def test_a_bundle_without_the_servers_ca_refuses_it(tls_url, tmp_path, call):
    other = tmp_path / "other.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    with pytest.raises(failover.ProviderConnectionError):
        call(_client(tls_url, verify=str(other)))


def test_http2_off_still_speaks_tls(tls_url, ca_file):
    assert _client(tls_url, verify=ca_file, http2=False).prompt("Hi").text == "over TLS"


@pytest.mark.parametrize(("http2", "negotiated"), [(True, "h2"), (False, None)])
def test_http2_decides_what_the_client_offers(ca, ca_file, http2, negotiated):
    # A TLS server that speaks only h2 records what each handshake agreed on,
    # then hangs up: the call fails, the negotiation is what is checked.
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(context)
    context.set_alpn_protocols(["h2"])
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    agreed: list[object] = []

    def serve() -> None:
        conn, _ = listener.accept()
        try:
            with context.wrap_socket(conn, server_side=True) as tls:
                agreed.append(tls.selected_alpn_protocol())
        except (ssl.SSLError, OSError) as exc:
            agreed.append(exc)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    url = f"https://localhost:{listener.getsockname()[1]}/v1"
    try:
        with pytest.raises(failover.FailoverError):
            _client(url, verify=ca_file, http2=http2, timeout=5.0).prompt("Hi")
        thread.join(5)
    finally:
        listener.close()
    assert agreed == [negotiated]


def test_a_file_that_is_not_a_ca_bundle_is_refused(tmp_path):
    """Found hardening the first slice."""
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    with pytest.raises(failover.ConfigurationError, match="CA bundle"):
        failover.Client({"a": failover.OpenAI(model="m", api_key="k")}, verify=str(junk))
