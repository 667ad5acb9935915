"""No secret in any text: keys, credential headers, URL and proxy passwords are redacted
everywhere and never sent over plain HTTP."""

from __future__ import annotations

import logging
import urllib.parse

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

from conftest import KEY, anthropic, clear_proxy_variables, openai


def test_a_gateways_auth_header_is_redacted(mock_server: MockServer) -> None:
    """Found by the new-user trials of 2026-11-30."""
    token = "Bearer sk-helicone-abcdef123456"
    mock_server.push(401, json={"error": {"message": f"bad Helicone-Auth: {token}"}})
    provider = openai(mock_server, headers={"Helicone-Auth": token})
    with pytest.raises(failover.AuthenticationError) as info:
        failover.Client({"g": provider}).prompt("Hi")
    assert "sk-helicone-abcdef123456" not in str(info.value)
    assert "<redacted>" in str(info.value)


def test_a_redis_states_repr_shows_its_database_but_no_password() -> None:
    """Found by the new-user trials of 2026-11-30."""
    state = failover.RedisState("redis://:hunter2-pw@localhost:6379/3")
    assert repr(state).startswith("RedisState('redis://localhost:6379/3'")
    assert "hunter2" not in repr(state)


def test_keys_do_not_leak_escaped_in_headers_or_in_urls(mock_server, caplog):
    """Found in review."""
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


def test_credential_headers_are_never_sent_over_plain_http():
    """Found in the second review."""
    remote = "http://gateway.example.com/v1"
    for headers in ({"Authorization": "Bearer sk-123456"}, {"api-key": "azure-123456"}):
        with pytest.raises(failover.ConfigurationError, match="plain http"):
            failover.OpenAICompatible(model="m", base_url=remote, headers=headers)
    harmless = failover.OpenAICompatible(model="m", base_url=remote, headers={"X-Team": "ml"})
    failover.Client({"g": harmless})


@pytest.mark.parametrize(
    ("header", "value", "echoed"),
    [
        ("Authorization", "Bearer gw-tok-ABC123", "gw-tok-ABC123"),
        ("Proxy-Authorization", "Basic dXNlcjpodW50ZXIy", "dXNlcjpodW50ZXIy"),
        ("Cookie", "theme=dark; session=SESSION-XYZ-789", "SESSION-XYZ-789"),
        ("X-Gateway-Token", "gwt_0123456789", "gwt_0123456789"),
    ],
)
def test_the_secret_part_of_a_credential_header_is_redacted_everywhere(
    mock_server, caplog, header, value, echoed
):
    """Found hardening the first slice."""
    mock_server.push(401, json={"error": {"message": f"token {echoed} is revoked"}})
    events: list[object] = []
    provider = failover.OpenAICompatible(
        model="m", base_url=mock_server.url, headers={header: value}
    )
    client = failover.Client({"gw": provider}, on_event=events.append)
    caplog.set_level(logging.DEBUG, logger="failover")
    with pytest.raises(failover.AuthenticationError) as info:
        client.prompt("Hi")
    error = info.value
    texts = [str(error), repr(error), error.body or "", repr(client), repr(provider)]
    texts += [r.getMessage() for r in caplog.records]
    texts += [repr(e) for e in events] + [str(getattr(e, "error", "")) for e in events]
    for text in texts:
        assert echoed not in text, text
    assert "<redacted>" in str(error)
    # The header really was sent.
    assert mock_server.requests[0].headers[header.lower()] == value


def test_short_values_are_not_searched_for_in_text(mock_server):
    """Found hardening the first slice."""
    mock_server.push(401, json={"error": {"message": "the word dark stays"}})
    provider = failover.OpenAICompatible(
        model="m", base_url=mock_server.url, headers={"Cookie": "theme=dark"}
    )
    with pytest.raises(failover.AuthenticationError, match="the word dark stays"):
        failover.Client({"a": provider}).prompt("Hi")


def test_credentials_in_a_base_url_are_credentials():
    # Over plain http to a remote host: refused like a key.
    """Found by trying the first slice as a new user."""
    with pytest.raises(failover.ConfigurationError, match="plain http"):
        failover.OpenAICompatible(model="m", base_url="http://u:s3cret-pw-99@gw.example.com/v1")


@pytest.mark.parametrize(
    ("url_part", "echoed"),
    [
        ("u:USERINFO-pw-999@", "USERINFO-pw-999"),
        ("u:USERINFO-pw-999@", "dTpVU0VSSU5GTy1wdy05OTk="),  # base64("u:USERINFO-pw-999")
    ],
)
def test_a_base_url_password_echoed_back_is_redacted(mock_server, url_part, echoed):
    """Found by trying the first slice as a new user."""
    mock_server.push(401, body=f"bad credentials {echoed} for user u")
    base = mock_server.url.replace("http://", f"http://{url_part}") + "/v1"
    client = failover.Client({"a": failover.OpenAICompatible(model="m", base_url=base)})
    with pytest.raises(failover.AuthenticationError) as info:
        client.prompt("Hi")
    for text in (str(info.value), repr(info.value), info.value.body or ""):
        assert echoed not in text, text


def test_a_key_in_a_base_url_query_is_redacted_but_the_api_version_is_not(mock_server):
    """Found by trying the first slice as a new user."""
    mock_server.push(
        404, body="Cannot POST /v1/chat/completions?key=QUERYKEY_abc123456&api-version=2024-10-21"
    )
    base = f"{mock_server.url}/v1?key=QUERYKEY_abc123456&api-version=2024-10-21"
    client = failover.Client({"a": failover.OpenAICompatible(model="m", base_url=base)})
    with pytest.raises(failover.ModelNotFound) as info:
        client.prompt("Hi")
    text = str(info.value)
    assert "QUERYKEY_abc123456" not in text and "2024-10-21" in text, text
    assert "check base_url" in text, text


def test_a_proxy_password_echoed_by_the_proxy_is_redacted(mock_server):
    """Found by trying the first slice as a new user."""
    mock_server.push(407, body="Proxy auth failed for pu:PROXYPASSWORD_xyz123")
    target = failover.OpenAICompatible(model="m", base_url="http://upstream.invalid/v1")
    proxy = mock_server.url.replace("http://", "http://pu:PROXYPASSWORD_xyz123@")
    client = failover.Client({"a": target}, proxy=proxy)
    with pytest.raises(failover.BadRequest) as info:
        client.prompt("Hi")
    for text in (str(info.value), repr(info.value), info.value.body or ""):
        assert "PROXYPASSWORD_xyz123" not in text, text
    assert "from a proxy" in str(info.value)


@pytest.mark.parametrize(
    "proxy",
    [
        "user:Hunter2Secret@proxy.corp:3128",
        "http//user:Hunter2Secret@proxy.corp:3128",
        "http://user:Hunt/er2Secret@proxy.corp:3128",
    ],
)
def test_a_malformed_proxy_url_never_shows_its_password(proxy):
    """Found by trying the first slice as a new user."""
    with pytest.raises(failover.ConfigurationError) as info:
        failover.Client({"a": failover.OpenAI(model="m", api_key="k")}, proxy=proxy)
    assert "Hunter2" not in str(info.value) and "er2Secret" not in str(info.value)


def test_a_proxy_password_from_the_environment_is_redacted(mock_server, monkeypatch):
    """Found by trying the first slice as a new user."""
    clear_proxy_variables(monkeypatch)
    monkeypatch.setenv(
        "HTTP_PROXY", mock_server.url.replace("http://", "http://pu:ENVPROXYPW_123456@")
    )
    mock_server.push(407, body="no entry for pu:ENVPROXYPW_123456")
    target = failover.OpenAICompatible(model="m", base_url="http://upstream.invalid/v1")
    with pytest.raises(failover.BadRequest) as info:
        failover.Client({"a": target}).prompt("Hi")
    assert "ENVPROXYPW_123456" not in str(info.value)


def test_a_schemeless_proxy_variable_password_is_redacted(mock_server, monkeypatch):
    """Found by the second review of the first slice."""
    clear_proxy_variables(monkeypatch)
    host = mock_server.url.removeprefix("http://")
    monkeypatch.setenv("HTTP_PROXY", f"pu:SCHEMELESSPW_123@{host}")
    mock_server.push(407, body="no entry for pu:SCHEMELESSPW_123")
    target = failover.OpenAICompatible(model="m", base_url="http://upstream.invalid/v1")
    with pytest.raises(failover.BadRequest) as info:
        failover.Client({"a": target}).prompt("Hi")
    for text in (str(info.value), repr(info.value), info.value.body or ""):
        assert "SCHEMELESSPW_123" not in text, text


def test_a_token_given_as_the_user_name_is_redacted(mock_server):
    # base64("USERONLYTOKEN_abc123:") is what the transport sends as Basic.
    """Found by the second review of the first slice."""
    mock_server.push(401, body="token USERONLYTOKEN_abc123 (VVNFUk9OTFlUT0tFTl9hYmMxMjM6) revoked")
    base = mock_server.url.replace("http://", "http://USERONLYTOKEN_abc123@") + "/v1"
    with pytest.raises(failover.AuthenticationError) as info:
        failover.Client({"a": failover.OpenAICompatible(model="m", base_url=base)}).prompt("Hi")
    assert "USERONLYTOKEN" not in str(info.value) and "VVNFUk9O" not in str(info.value)


@pytest.mark.parametrize(
    "url",
    [
        "http:/u:pw-secret-99@gw.example.com/v1",
        "http:\\\\u:pw-secret-99@gw.example.com/v1",
        "http:u:pw-secret-99@gw.example.com/v1",
        "http://TOKEN-only-123@gw.example.com/v1",
    ],
)
def test_a_user_part_however_written_is_never_sent_over_plain_http(url):
    """Found by the second review of the first slice."""
    with pytest.raises(failover.ConfigurationError, match="plain http") as info:
        failover.OpenAICompatible(model="m", base_url=url)
    assert "pw-secret" not in str(info.value) and "TOKEN-only" not in str(info.value)


@pytest.mark.parametrize(
    ("url", "hidden", "shown"),
    [
        ("http://user:Hunt/er?2@proxy.corp:3128", "er", "does not parse"),
        ("http://gw.example.com/v1/@org", "", "gw.example.com/v1/@org"),
    ],
)
def test_urls_are_shown_as_the_transport_reads_them(url, hidden, shown):
    """Found by the second review of the first slice."""
    from failover._providers import _display_url

    text = _display_url(url)
    assert shown in text and (not hidden or hidden not in text), text


def test_ordinary_query_parameters_are_not_redacted(mock_server):
    """Found by the second review of the first slice."""
    mock_server.push(400, json={"error": {"message": "gpt-4o is not available in eastus"}})
    base = f"{mock_server.url}/v1?token_region=eastus&design=gpt-4o"
    with pytest.raises(failover.BadRequest, match="gpt-4o is not available in eastus"):
        failover.Client({"a": failover.OpenAICompatible(model="m", base_url=base)}).prompt("Hi")


def test_credentials_in_a_query_are_never_sent_over_plain_http():
    """Found by the second trial of the first slice."""
    for query in ("key=abcd1234secret", "subscription-key=abcd1234", "sig=abcd1234"):
        with pytest.raises(failover.ConfigurationError, match="plain http"):
            failover.OpenAICompatible(model="m", base_url=f"http://remote.example/v1?{query}")
    harmless = failover.OpenAICompatible(
        model="m", base_url="http://remote.example/v1?api-version=2024-10-21"
    )
    failover.Client({"a": harmless})


def test_all_caps_credential_query_names_are_redacted(mock_server):
    """Found by the second trial of the first slice."""
    mock_server.push(401, body="denied: /v1/chat/completions?API_KEY=querykey1234")
    base = f"{mock_server.url}/v1?API_KEY=querykey1234"
    with pytest.raises(failover.AuthenticationError) as info:
        failover.Client({"a": failover.OpenAICompatible(model="m", base_url=base)}).prompt("Hi")
    assert "querykey1234" not in str(info.value) and "querykey1234" not in (info.value.body or "")


def test_a_request_id_that_echoes_the_key_is_redacted(mock_server):
    """Found by the second trial of the first slice."""
    mock_server.push(401, headers={"x-request-id": "req sekret-key-1234"})
    provider = failover.OpenAICompatible(
        model="m", base_url=mock_server.url, api_key="sekret-key-1234"
    )
    with pytest.raises(failover.AuthenticationError) as info:
        failover.Client({"p": provider}).prompt("Hi")
    assert info.value.request_id == "req <redacted>"


def test_a_key_is_never_sent_over_plain_http_to_a_remote_host():
    # Refused when given, before there is a client.
    with pytest.raises(failover.ConfigurationError, match="allow_insecure") as info:
        failover.OpenAICompatible(model="m", base_url="http://llm.example.com/v1", api_key=KEY)
    assert KEY not in str(info.value)
    allowed = failover.OpenAICompatible(
        model="m", base_url="http://llm.example.com/v1", api_key=KEY, allow_insecure=True
    )
    failover.Client({"r": allowed})
    # Loopback is fine, and so is a keyless server.
    failover.Client({"l": failover.OpenAICompatible(model="m", base_url="http://[::1]:8000")})


def test_keys_never_leak_into_reprs_errors_events_or_logs(mock_server, caplog):
    echo = {"error": {"message": f"Incorrect API key provided: {KEY}", "code": "invalid_api_key"}}
    mock_server.push(401, json=echo)
    events: list[object] = []
    provider = anthropic(mock_server)
    client = failover.Client({"c": provider}, on_event=events.append)
    caplog.set_level(logging.DEBUG, logger="failover")

    with pytest.raises(failover.AuthenticationError) as info:
        client.prompt("Hi")

    texts = [repr(provider), repr(client), str(info.value), repr(info.value), info.value.body]
    texts += [repr(e) for e in events] + [r.getMessage() for r in caplog.records]
    assert caplog.records, "the failure is logged"
    for text in texts:
        assert KEY not in (text or ""), text


def test_an_echo_of_the_key_cut_short_is_redacted_too(mock_server, caplog):
    key = "sk-proj-cut-short-echo-0123456789x"  # 34 characters
    echo = {"error": {"message": f"Incorrect API key provided: {key[:30]}", "code": "bad_key"}}
    mock_server.push(401, json=echo)
    events: list[object] = []
    provider = failover.OpenAICompatible(model="m", base_url=mock_server.url, api_key=key)
    client = failover.Client({"c": provider}, on_event=events.append)
    caplog.set_level(logging.DEBUG, logger="failover")

    with pytest.raises(failover.AuthenticationError) as info:
        client.prompt("Hi")

    texts = [str(info.value), repr(info.value), info.value.body]
    texts += [repr(e) for e in events] + [r.getMessage() for r in caplog.records]
    assert [type(e).__name__ for e in events] == ["CallFailed"]
    assert "Incorrect API key provided: <redacted>" in str(info.value)
    for text in texts:
        # No run of 16 or more of the key's leading characters is left.
        assert key[:16] not in (text or ""), text


def test_a_key_of_another_provider_echoed_back_is_redacted(mock_server, caplog):
    """A gateway in front of several providers may echo any of their keys."""
    other_key = "sk-ant-other-provider-0123456789"
    mock_server.push(401, json={"error": {"message": f"{other_key} is not a key of this account"}})
    mock_server.push(503, json={"error": {"message": "down"}})
    claude = failover.Anthropic("claude-x", base_url=mock_server.url, api_key=other_key)
    client = failover.Client(
        {"gateway": openai(mock_server), "claude": claude}, sleeper=FakeSleeper()
    )
    caplog.set_level(logging.DEBUG, logger="failover")
    with pytest.raises(failover.FailoverError) as info:
        client.prompt("Hi")
    texts = [str(info.value), repr(info.value)]
    texts += [str(a) for a in info.value.attempts] + [r.getMessage() for r in caplog.records]
    assert any("<redacted> is not a key of this account" in text for text in texts), texts
    for text in texts:
        assert other_key not in text and "other-provider" not in text, text


@pytest.mark.parametrize("wire", ["openai", "anthropic", "gemini"])
def test_a_key_quoted_from_a_200_that_is_no_answer_is_redacted(mock_server, caplog, wire):
    """Found by the new-user trial of 2026-12-06: a finish reason echoing the
    key reached the error's message, the log and the events."""
    key = "sk-live-0123456789abcdefSECRET"
    reason = "echo " + key
    answer = {
        "openai": {
            "choices": [{"index": 0, "message": {"role": "assistant"}, "finish_reason": reason}]
        },
        "anthropic": {"type": "message", "role": "assistant", "content": [], "stop_reason": reason},
        "gemini": {"candidates": [{"content": {"parts": []}, "finishReason": reason}]},
    }[wire]
    for _ in range(3):
        mock_server.push(json=answer)
    provider = {
        "openai": lambda: failover.OpenAICompatible("m", base_url=mock_server.url, api_key=key),
        "anthropic": lambda: failover.Anthropic("c", base_url=mock_server.url, api_key=key),
        "gemini": lambda: failover.Gemini(
            "gemini-2.5-flash", base_url=mock_server.url, api_key=key
        ),
    }[wire]()
    events: list[object] = []
    client = failover.Client({"p": provider}, sleeper=FakeSleeper(), on_event=events.append)
    caplog.set_level(logging.DEBUG, logger="failover")
    with pytest.raises(failover.FailoverError) as info:
        client.prompt("Hi")
    texts = [str(info.value), repr(info.value), info.value.body or "", repr(events)]
    texts += [r.getMessage() for r in caplog.records]
    assert "<redacted>" in str(info.value)
    for text in texts:
        assert "0123456789abcdef" not in text, text


@pytest.mark.parametrize(
    "echo",
    [
        lambda key: urllib.parse.quote(key, safe=""),  # every + / = escaped
        lambda key: urllib.parse.quote(key),  # "/" kept, as in a path
        lambda key: urllib.parse.quote(key, safe="").lower(),
        str.lower,
    ],
    ids=["encoded", "path-encoded", "encoded-lowercase", "lowercased"],
)
def test_a_key_echoed_encoded_or_lowercased_is_redacted(mock_server, echo):
    """Found by the new-user trials of 2026-12-06."""
    key = "sk-AAAA+secret/KEYaaaa=0123456789"
    mock_server.push(401, json={"error": {"message": f"see https://x.example/?key={echo(key)}"}})
    with pytest.raises(failover.AuthenticationError) as info:
        provider = failover.OpenAICompatible("m", base_url=mock_server.url, api_key=key)
        failover.Client({"p": provider}).prompt("Hi")
    for text in (str(info.value), info.value.body or ""):
        assert "secret" not in text.lower() and "<redacted>" in text, text


def test_a_key_whose_forms_part_after_sixteen_characters_is_redacted_whole(mock_server):
    """Found by the third new-user trial: its encoded form's run cut the raw echo short."""
    key = "abcdefghijklmnop+qrstuvwxyz0123456789/ABC="
    for echoed in (key, key.lower(), urllib.parse.quote(key, safe="")):
        mock_server.push(500, body=f"echo key={echoed}".encode(), content_type="text/plain")
    provider = failover.OpenAICompatible("m", base_url=mock_server.url, api_key=key)
    once = failover.RetryPolicy(max_retries=0, max_retries_last=0)
    client = failover.Client({"p": provider}, retry=once, sleeper=FakeSleeper())
    for _ in range(3):
        with pytest.raises(failover.ServerError) as info:
            client.prompt("Hi")
        assert str(info.value).endswith("echo key=<redacted>"), str(info.value)


def test_a_key_echoed_in_an_answers_finish_reason_or_model_is_redacted(mock_server):
    """Found by new-user trials: both reach the response, spans and batch OUT."""
    key = "sk-live-0123456789abcdefSECRET"
    answer = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}}]}
    answer["choices"][0]["finish_reason"] = f"stop ({key})"
    answer["model"] = f"gpt-{key}"
    mock_server.push(json=answer)
    mock_server.push(json={"model": f"e-{key}", "data": [{"index": 0, "embedding": [0.5]}]})
    provider = failover.OpenAICompatible("m", base_url=mock_server.url, api_key=key)
    client = failover.Client({"p": provider})
    r = client.prompt("Hi")
    assert (r.finish_reason, r.model) == ("stop (<redacted>)", "gpt-<redacted>")
    assert key not in repr(r)
    e = client.embed("Hi")
    assert e.model == "e-<redacted>"
