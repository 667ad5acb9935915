"""Keys: variables, key headers, key callables (called per attempt, failing over, refused when they
cannot work)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

from conftest import KEY, openai


def test_a_credential_header_under_the_keys_name_is_sent_once_instead_of_the_key(
    mock_server: MockServer,
) -> None:
    """Found by the new-user trials of 2026-11-30."""
    gateway = "Bearer gateway-token-123456"
    mock_server.push_text("ok")
    provider = openai(mock_server, headers={"Authorization": gateway})
    failover.Client({"g": provider}).prompt("Hi")
    sent = [v for n, v in mock_server.requests[0].header_list if n == "authorization"]
    assert sent == [gateway]


def test_a_header_under_the_keys_name_stands_in_for_the_key(
    mock_server: MockServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the new-user trials of 2026-11-30."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    gateway = {"Authorization": "Bearer gateway-token-123456"}
    provider = failover.OpenAI(model="m", base_url=mock_server.url, headers=gateway)
    asked: list[int] = []

    def key() -> str:
        asked.append(1)
        raise RuntimeError("the vault is down")

    keyed = failover.OpenAI(model="m", base_url=mock_server.url, headers=gateway, api_key=key)
    for client_provider in (provider, keyed):
        mock_server.push_text("ok")
        failover.Client({"g": client_provider}).prompt("Hi")
    assert asked == [], "a key that would not be sent is not fetched"
    assert [r.headers["authorization"] for r in mock_server.requests] == [
        "Bearer gateway-token-123456"
    ] * 2


def test_a_blank_key_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the new-user trials of 2026-11-30."""
    monkeypatch.setenv("OPENAI_API_KEY", "  ")
    with pytest.raises(failover.ConfigurationError, match="OPENAI_API_KEY is blank"):
        failover.Client({"g": failover.OpenAI(model="m")})


def test_azure_with_an_entra_token_in_its_own_header_needs_no_key(
    mock_server: MockServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the new-user trials of 2026-11-30."""
    monkeypatch.delenv("AZURE_OPENAI_API_KEY", raising=False)
    mock_server.push_text("ok")
    azure = failover.Azure(
        deployment="gpt",
        endpoint=mock_server.url,
        api_version="2024-10-21",
        headers={"Authorization": "Bearer entra-token-123456"},
    )
    failover.Client({"a": azure}).prompt("Hi")
    headers = mock_server.requests[0].header_list
    assert [v for n, v in headers if n == "authorization"] == ["Bearer entra-token-123456"]
    assert not [n for n, _ in headers if n == "api-key"]


def test_a_blank_key_variable_gives_way_to_a_fallback_that_holds_one(
    mock_server: MockServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the new-user trials of 2026-11-30."""
    monkeypatch.setenv("GEMINI_API_KEY", " ")
    monkeypatch.setenv("GOOGLE_API_KEY", "AIza-fallback-123456")
    mock_server.push_text("ok", wire="gemini")
    gemini = failover.Gemini(model="gemini-2.5-flash", base_url=mock_server.url)
    failover.Client({"g": gemini}).prompt("Hi")
    assert mock_server.requests[0].headers["x-goog-api-key"] == "AIza-fallback-123456"


def test_a_call_ended_by_its_key_callable_sends_call_failed(mock_server: MockServer, call) -> None:
    """Found by the new-user trials of 2026-11-30."""
    events: list[Any] = []
    provider = failover.OpenAICompatible(
        model="m",
        base_url=mock_server.url,
        api_key=lambda: "",  # no key: ends the call
    )
    client = failover.Client({"a": provider}, on_event=events.append)
    with pytest.raises(failover.ConfigurationError) as info:
        call(client, "Hi")
    failed = [e for e in events if isinstance(e, failover.CallFailed)]
    assert len(failed) == 1 and failed[0].error is info.value
    assert mock_server.requests == []


def test_a_missing_gemini_key_names_both_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the new-user trials of 2026-11-30."""
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(failover.ConfigurationError, match="GEMINI_API_KEY or GOOGLE_API_KEY"):
        failover.Client({"g": failover.Gemini(model="gemini-2.5-flash")})


@pytest.mark.parametrize("key", ["", "   ", "abc\ndef"])
def test_a_key_headers_cannot_carry_is_refused_when_given(key: str) -> None:
    """Found by the new-user trials of 2026-11-30."""
    with pytest.raises(failover.ConfigurationError, match=r"OpenAI api_key (is blank|holds)"):
        failover.OpenAI(model="m", api_key=key)


def test_a_key_with_a_trailing_newline_is_trimmed(mock_server, monkeypatch):
    """Found in review."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-a-file\n")
    mock_server.push_text("ok")
    client = failover.Client({"a": failover.OpenAI(model="m", base_url=mock_server.url)})
    client.prompt("Hi")
    assert mock_server.requests[0].headers["authorization"] == "Bearer sk-from-a-file"


def test_a_key_callable_is_called_for_each_attempt(mock_server):
    """Found hardening the first slice."""
    keys = iter(["rotating-key-0001", "rotating-key-0002"])
    mock_server.push(429, headers={"retry-after": "1"})
    mock_server.push_text("ok")
    provider = failover.OpenAICompatible(
        model="m", base_url=mock_server.url, api_key=lambda: next(keys)
    )
    client = failover.Client({"a": provider}, sleeper=FakeSleeper())
    assert client.prompt("Hi").text == "ok"
    sent = [r.headers["authorization"] for r in mock_server.requests]
    assert sent == ["Bearer rotating-key-0001", "Bearer rotating-key-0002"]


def test_the_key_a_callable_returned_is_redacted_from_what_echoes_it(
    mock_server, backup_server, caplog
):
    """Found hardening the first slice."""
    mock_server.push(401, json={"error": {"message": "key rotating-key-0001 is revoked"}})
    backup_server.push(401, json={"error": {"message": "bad key"}})
    events: list[object] = []
    rotating = failover.OpenAICompatible(
        model="m", base_url=mock_server.url, api_key=lambda: "rotating-key-0001"
    )
    caplog.set_level(logging.DEBUG, logger="failover")
    client = failover.Client({"a": rotating, "b": openai(backup_server)}, on_event=events.append)
    with pytest.raises(failover.AuthenticationError):
        client.prompt("Hi")
    [moved] = [e for e in events if isinstance(e, failover.FailedOver)]
    assert "<redacted>" in str(moved.error)
    texts = [str(moved.error), moved.error.body or "", repr(moved)]
    texts += [repr(e) for e in events] + [r.getMessage() for r in caplog.records]
    for text in texts:
        assert "rotating-key-0001" not in text, text


def test_an_earlier_key_of_a_rotating_callable_is_redacted_too(mock_server, call, caplog):
    """A 401 that echoes the expired token, in a later call than the one that sent it (the
    README's rotating-token callable). Found by the last new-user trial of 2026-12-01."""
    keys = iter(["tokA-1111111111111111111111111111", "tokB-2222222222222222222222222222"])
    provider = failover.OpenAICompatible(
        model="m", base_url=mock_server.url, api_key=lambda: next(keys)
    )
    events: list[object] = []
    caplog.set_level(logging.DEBUG, logger="failover")
    client = failover.Client({"o": provider}, on_event=events.append)
    mock_server.push_text("ok")
    assert call(client).text == "ok"
    echo = "token tokA-1111111111111111111111111111 expired; "
    echo += "you sent tokB-2222222222222222222222222222"
    mock_server.push(401, json={"error": {"message": echo}})
    with pytest.raises(failover.AuthenticationError) as info:
        call(client)
    texts = [str(info.value), info.value.body or "", repr(info.value)]
    texts += [repr(e) for e in events] + [r.getMessage() for r in caplog.records]
    assert any("<redacted> expired" in t for t in texts)
    for text in texts:
        assert "tokA-1111" not in text and "tokB-2222" not in text, text


def test_a_key_callable_s_current_key_and_the_eight_before_it_are_redacted(mock_server):
    """README: "its last eight keys are redacted along with the current one". Only seven were
    kept besides the current one. Found by the new-user trial of 2026-12-02."""
    keys = [f"sk-rot-{i:02d}-abcdefghijklmnopqrstuvwxyz" for i in range(10)]
    given = iter(keys)
    provider = failover.OpenAICompatible(
        model="m", base_url=mock_server.url, api_key=lambda: next(given)
    )
    client = failover.Client({"o": provider})
    for _ in range(9):
        mock_server.push_text("ok")
        client.prompt("Hi")
    mock_server.push(401, json={"error": {"message": " ".join(keys)}})
    with pytest.raises(failover.AuthenticationError) as info:
        client.prompt("Hi")
    assert mock_server.requests[-1].headers["authorization"] == f"Bearer {keys[9]}"
    text = str(info.value) + (info.value.body or "")
    assert [k for k in keys if k in text] == keys[:1], "the ninth key before is no longer kept"


def test_a_key_callable_that_raises_fails_over(mock_server, backup_server, call):
    """Found hardening the first slice."""

    def broken() -> str:
        raise RuntimeError("token service down")

    backup_server.push_text("backup")
    provider = failover.OpenAICompatible(model="m", base_url=mock_server.url, api_key=broken)
    client = failover.Client({"a": provider, "b": openai(backup_server)})
    r = call(client)
    assert r.provider == "b" and r.attempts[0].kind == "auth"
    assert mock_server.requests == []
    with pytest.raises(failover.AuthenticationError, match="raised RuntimeError") as info:
        call(failover.Client({"a": provider}))
    assert str(info.value.__cause__) == "token service down"


def test_ctrl_c_in_a_key_callable_ends_the_call_before_any_failover(mock_server, backup_server):
    """Found hardening the first slice."""
    fetched: list[str] = []

    def interrupted() -> str:
        raise KeyboardInterrupt

    def backup_key() -> str:
        fetched.append("b")
        return "backup-key-0123"

    events: list[object] = []
    client = failover.Client(
        {
            "a": failover.OpenAICompatible(
                model="m", base_url=mock_server.url, api_key=interrupted
            ),
            "b": failover.OpenAICompatible(
                model="m", base_url=backup_server.url, api_key=backup_key
            ),
        },
        on_event=events.append,
    )
    with pytest.raises(KeyboardInterrupt):
        client.prompt("Hi")
    assert fetched == [] and backup_server.requests == []
    assert not [e for e in events if isinstance(e, failover.FailedOver)]


def test_a_key_callable_that_cannot_be_called_as_it_will_be_is_refused_when_given():
    """Found hardening the first slice."""

    async def token() -> str:
        return "k" * 20

    with pytest.raises(failover.ConfigurationError, match=r"OpenAI api_key.*never awaited"):
        failover.OpenAI(model="m", api_key=token)  # type: ignore[arg-type]
    with pytest.raises(failover.ConfigurationError, match=r"OpenAI api_key.*no arguments"):
        failover.OpenAI(model="m", api_key=lambda needed: "k" * 20)  # type: ignore[arg-type,misc]


def test_a_key_callable_that_returns_no_key_is_a_configuration_error(mock_server, call):
    """Found hardening the first slice."""
    provider = failover.OpenAICompatible(
        model="m",
        base_url=mock_server.url,
        api_key=lambda: None,  # type: ignore[arg-type,return-value]
    )
    with pytest.raises(failover.ConfigurationError, match="api_key callable"):
        call(failover.Client({"a": provider}))
    assert mock_server.requests == []


@pytest.mark.parametrize(("key", "named"), [(7, "got int"), (b"k" * 20, "got bytes")])
def test_a_key_callable_returning_another_type_is_named_in_plain_words(
    mock_server: MockServer, key: object, named: str
) -> None:
    """It said "got a int". Found by the new-user trial of 2026-12-02."""
    provider = failover.OpenAICompatible(
        model="m",
        base_url=mock_server.url,
        api_key=lambda: key,  # type: ignore[arg-type,return-value]
    )
    with pytest.raises(failover.ConfigurationError) as info:
        failover.Client({"a": provider}).prompt("Hi")
    assert str(info.value).endswith(named), str(info.value)


def test_a_key_callable_over_plain_http_to_a_remote_host_is_refused():
    """Found hardening the first slice."""
    with pytest.raises(failover.ConfigurationError, match="plain http"):
        failover.OpenAICompatible(
            model="m", base_url="http://gateway.example.com/v1", api_key=lambda: "k" * 20
        )


def test_a_key_function_whose_decorator_supplies_its_argument_is_accepted(mock_server):
    """Found by the second review of the first slice."""
    import functools

    def with_session(function):  # type: ignore[no-untyped-def]
        @functools.wraps(function)
        def wrapper() -> str:
            return function("session")  # type: ignore[no-any-return]

        return wrapper

    @with_session
    def get_token(session: str) -> str:
        return f"token-for-{session}-0123"

    mock_server.push_text("ok")
    provider = failover.OpenAICompatible(model="m", base_url=mock_server.url, api_key=get_token)
    assert failover.Client({"a": provider}).prompt("Hi").text == "ok"
    assert mock_server.requests[0].headers["authorization"] == "Bearer token-for-session-0123"


def test_a_key_callables_error_text_is_redacted(mock_server):
    """Found by the second review of the first slice."""
    base = mock_server.url.replace("http://", "http://u:BASEURLPW_12345@") + "/v1"

    def token() -> str:
        raise RuntimeError(f"cannot reach {base}")

    provider = failover.OpenAICompatible(model="m", base_url=base, api_key=token)
    with pytest.raises(failover.AuthenticationError) as info:
        failover.Client({"a": provider}).prompt("Hi")
    assert "BASEURLPW_12345" not in str(info.value), info.value


def test_missing_key_names_the_variable(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(failover.ConfigurationError, match="ANTHROPIC_API_KEY"):
        failover.Client({"c": failover.Anthropic(model="claude-haiku-4-5")})
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    client = failover.Client({"g": failover.OpenAI(model="gpt-4.1-mini")})
    assert client.providers["g"].base_url == "https://api.openai.com/v1"


def test_a_key_callables_exception_is_the_cause_and_its_text_is_never_copied(
    mock_server, caplog, call
):
    class TokenFetchError(Exception):
        pass

    def token() -> str:
        raise TokenFetchError("refresh failed for client secret HUNTER2-SECRET")

    events: list[object] = []
    provider = failover.OpenAICompatible(model="m", base_url=mock_server.url, api_key=token)
    client = failover.Client({"c": provider}, on_event=events.append)
    caplog.set_level(logging.DEBUG, logger="failover")

    with pytest.raises(failover.AuthenticationError) as info:
        call(client)

    assert isinstance(info.value.__cause__, TokenFetchError), "the exception, kept whole"
    assert "HUNTER2-SECRET" in str(info.value.__cause__)
    assert "raised test_keys.TokenFetchError" in str(info.value)
    [failed] = events
    assert isinstance(failed, failover.CallFailed) and failed.error is info.value
    texts = [str(info.value), repr(info.value), repr(failed), str(info.value.attempts)]
    texts += [r.getMessage() for r in caplog.records]
    assert any("call failed" in r.getMessage() for r in caplog.records)
    for text in texts:
        assert "HUNTER2-SECRET" not in text and "refresh failed" not in text, text
    assert mock_server.requests == []
