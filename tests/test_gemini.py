"""Gemini's wire: how its answers, streams and errors are read."""

from __future__ import annotations

import json

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

from conftest import gemini, openai


@pytest.mark.mock_server(assert_all_used=False)
@pytest.mark.parametrize("finish", ["OTHER", "TOO_MANY_TOOL_CALLS"])
def test_a_gemini_answer_that_ended_abnormally_with_nothing_fails_over(
    mock_server: MockServer, backup_server: MockServer, finish: str
) -> None:
    """Found by the new-user trials of 2026-11-30."""
    empty = {"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": finish}]}
    for _ in range(3):
        mock_server.push(200, json=empty)
    backup_server.push_text("ok")
    client = failover.Client(
        {"gem": gemini(mock_server), "g": openai(backup_server)}, sleeper=FakeSleeper()
    )
    r = client.prompt("Hi")
    assert (r.provider, r.text) == ("g", "ok")
    assert r.attempts[0].kind == "server_error"


@pytest.mark.mock_server(assert_all_used=False)
def test_a_gemini_stream_that_ended_abnormally_with_nothing_fails_over(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    """Found by the new-user trials of 2026-11-30."""
    empty = {"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "OTHER"}]}
    for _ in range(3):
        mock_server.push(sse=[f"data: {json.dumps(empty)}"])
    stop = 'data: {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}'
    backup_server.push(sse=[stop, "data: [DONE]"])
    client = failover.Client(
        {"gem": gemini(mock_server), "g": openai(backup_server)}, sleeper=FakeSleeper()
    )
    with client.stream("Hi") as stream:
        assert "".join(c.text for c in stream) == "ok"
    assert stream.response is not None and stream.response.provider == "g"


def test_gemini_calls_then_other_in_a_later_chunk_are_tool_calls(mock_server: MockServer) -> None:
    """Found by the new-user trials of 2026-11-30."""
    call = {"functionCall": {"name": "weather", "args": {}}}
    chunks = [
        {"candidates": [{"content": {"role": "model", "parts": [call]}}]},
        {"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "OTHER"}]},
    ]
    mock_server.push(sse=[f"data: {json.dumps(c)}" for c in chunks])
    with failover.Client({"gem": gemini(mock_server)}).stream("Hi") as stream:
        list(stream)
    assert stream.response is not None and stream.response.finish_reason == "tool_calls"


def test_gemini_list_wrapped_errors_are_read_like_the_plain_ones(mock_server, backup_server):
    """Found by trying the first slice as a new user."""
    mock_server.push(
        400,
        json=[
            {
                "error": {
                    "code": 400,
                    "status": "INVALID_ARGUMENT",
                    "message": "API key not valid. Please pass a valid API key.",
                }
            }
        ],
    )
    backup_server.push_text("fine")
    client = failover.Client(
        {"gemini": openai(mock_server), "gpt": openai(backup_server)}, sleeper=FakeSleeper()
    )
    r = client.prompt("Hi")
    assert r.provider == "gpt" and r.attempts[0].kind == "auth"
    body = [
        {
            "error": {
                "code": 429,
                "status": "RESOURCE_EXHAUSTED",
                "details": [
                    {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "4s"}
                ],
            }
        }
    ]
    assert failover.retry_after({}, body) == 4.0
