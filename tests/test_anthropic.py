"""Anthropic's Messages wire: how its answers and errors are read."""

from __future__ import annotations

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

from conftest import (
    anthropic,
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
