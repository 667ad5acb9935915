"""Anthropic's Messages wire: how its answers and errors are read."""

from __future__ import annotations

import logging

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

from conftest import (
    anthropic,
    openai,
)


@pytest.mark.mock_server(assert_all_used=False)
def test_anthropics_overloaded_error_inside_a_200_is_an_overload(mock_server: MockServer) -> None:
    """Found by the new-user trials of 2026-11-30."""
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    for _ in range(5):
        mock_server.push(200, json=body)
    client = failover.Client({"c": anthropic(mock_server)}, sleeper=FakeSleeper())
    with pytest.raises(failover.ProviderOverloaded):
        client.prompt("Hi")


def test_anthropics_context_window_stop_is_length(mock_server: MockServer) -> None:
    """Found by the new-user trials of 2026-11-30."""
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "Part"}],
        "stop_reason": "model_context_window_exceeded",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    mock_server.push(200, json=body)
    r = failover.Client({"c": anthropic(mock_server)}).prompt("Hi")
    assert r.finish_reason == "length"


def test_a_temperature_above_anthropics_range_goes_as_its_maximum(
    mock_server: MockServer, backup_server: MockServer, caplog: pytest.LogCaptureFixture
) -> None:
    """1.5 is valid on OpenAI and Gemini (0 to 2); Anthropic (0 to 1) answered 400, which under
    the default stop_on ended the call before the next provider. Found by the new-user trial of
    2026-12-02."""
    caplog.set_level(logging.DEBUG, logger="failover")
    mock_server.push_text("ok", wire="anthropic")
    backup_server.push_text("ok")
    client = failover.Client({"claude": anthropic(mock_server), "gpt": openai(backup_server)})
    assert client.prompt("Hi", temperature=1.5).provider == "claude"
    assert client.prompt("Hi", temperature=1.5, provider="gpt").provider == "gpt"
    assert mock_server.requests[0].json["temperature"] == 1.0
    assert backup_server.requests[0].json["temperature"] == 1.5
    [note] = [r for r in caplog.records if "sent as 1" in r.getMessage()]
    assert note.levelno == logging.DEBUG
    said = "claude: temperature=1.5 sent as 1: Anthropic's range is 0 to 1"
    assert note.getMessage().startswith(said)
