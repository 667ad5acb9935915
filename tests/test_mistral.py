"""Mistral's dialect of Chat Completions: ids, seeds, what it refuses (and is skipped for), its
answers and streams."""

from __future__ import annotations

import pytest

import failover
from failover.testing import MockServer

from conftest import mistral, oa, openai, tool_loop


def test_mistral_gets_nine_character_ids_and_random_seed(mock_server: MockServer) -> None:
    """Found by the new-user trials of 2026-11-30."""
    mock_server.push_text("Sunny.")
    failover.Client({"m": mistral(mock_server)}).prompt(
        tool_loop("toolu_01A09q90qw90", "abcDEF123"), seed=7
    )
    sent = mock_server.requests[0].json
    calls = [c["id"] for c in sent["messages"][1]["tool_calls"]]
    results = [m["tool_call_id"] for m in sent["messages"][2:]]
    assert calls == results and calls[1] == "abcDEF123"
    assert all(len(i) == 9 and i.isalnum() for i in calls), calls
    assert sent["random_seed"] == 7 and "seed" not in sent


def test_other_openai_compatible_servers_keep_their_ids_and_seed(mock_server: MockServer) -> None:
    """Found by the new-user trials of 2026-11-30."""
    mock_server.push_text("Sunny.")
    failover.Client({"g": openai(mock_server)}).prompt(tool_loop("toolu_01A09q90qw90"), seed=7)
    sent = mock_server.requests[0].json
    assert sent["messages"][1]["tool_calls"][0]["id"] == "toolu_01A09q90qw90"
    assert sent["seed"] == 7


def test_mistral_is_skipped_for_an_image_in_a_tool_result(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    # Mistral refuses a user message after tool messages, which is where the
    # image would go: the next provider takes the call.
    """Found by the new-user trials of 2026-11-30."""
    history = tool_loop("t1")
    history[2]["content"] = [{"type": "image_url", "image_url": {"url": "https://e.com/a.png"}}]
    backup_server.push_text("A chart.")
    r = failover.Client({"m": mistral(mock_server), "g": openai(backup_server)}).prompt(history)
    assert r.provider == "g" and mock_server.requests == []
    assert "right after tool results" in (r.attempts[0].skipped or "")
    sent = backup_server.requests[0].json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[3]["content"][1]["image_url"]["url"] == "https://e.com/a.png"


def test_mistral_is_skipped_for_a_user_message_right_after_tool_results(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    """Found by the new-user trials of 2026-11-30."""
    history = [*tool_loop("t1"), {"role": "user", "content": "And tomorrow?"}]
    backup_server.push_text("Rain.")
    r = failover.Client({"m": mistral(mock_server), "g": openai(backup_server)}).prompt(history)
    assert r.provider == "g" and mock_server.requests == []
    assert "the conversation has one" in (r.attempts[0].skipped or "")


def test_mistral_is_skipped_for_a_final_assistant_message(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    # Mistral's answer to a prefix repeats it; Anthropic's continues it.
    """Found by the new-user trials of 2026-11-30."""
    backup_server.push_text(" Paris.")
    r = failover.Client({"m": mistral(mock_server), "g": openai(backup_server)}).prompt(
        [
            {"role": "user", "content": "Capital of France?"},
            {"role": "assistant", "content": "It is"},
        ]
    )
    assert r.provider == "g" and mock_server.requests == []
    assert "final assistant message" in (r.attempts[0].skipped or "")


def test_mistrals_request_id_is_read(mock_server: MockServer) -> None:
    """Found by the new-user trials of 2026-11-30."""
    mock_server.push(
        400,
        headers={"mistral-correlation-id": "019a-corr-id"},
        json={"object": "error", "message": "bad", "type": "invalid_request_error"},
    )
    with pytest.raises(failover.BadRequest) as info:
        failover.Client({"m": mistral(mock_server)}).prompt("Hi")
    assert info.value.request_id == "019a-corr-id"


def test_mistrals_model_length_is_length(mock_server: MockServer) -> None:
    """Found by the new-user trials of 2026-11-30."""
    message = {"role": "assistant", "content": ""}
    mock_server.push(200, json={"choices": [{"message": message, "finish_reason": "model_length"}]})
    r = failover.Client({"m": mistral(mock_server)}).prompt("Hi")
    assert (r.text, r.finish_reason) == ("", "length")


def test_magistral_streams_blocks_of_thinking_and_text(mock_server: MockServer) -> None:
    """Found by the new-user trials of 2026-11-30."""
    thinking = {"type": "thinking", "thinking": [{"type": "text", "text": "Hmm."}]}
    blocks = [thinking, {"type": "text", "text": "Paris."}]
    chunk = {"choices": [{"index": 0, "delta": {"content": blocks}, "finish_reason": "stop"}]}
    mock_server.push(sse=[oa(chunk), "data: [DONE]"])
    with failover.Client({"m": mistral(mock_server, "magistral-small")}).stream(
        "Capital?"
    ) as stream:
        pieces = [(c.kind, c.text or c.reasoning) for c in stream]
    assert pieces == [("reasoning", "Hmm."), ("text", "Paris.")]
