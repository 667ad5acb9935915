"""Streaming through the public API against MockServer streams (and a raw socket
where the test must see the connection close): each wire, retries and failover
before the first chunk, StreamInterrupted after it, restarts, ends and cuts."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from typing import Any

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

from conftest import KEY, ant, anthropic, collect, gemini, oa, oa_text, ollama, openai

OA_STOP = oa({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
OA_USAGE = oa({"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 3}})


def texts(chunks: list[failover.Chunk]) -> str:
    return "".join(c.text for c in chunks)


# --------------------------------------------------------------------------- each wire


def test_openai_text_tool_calls_and_usage(mock_server: MockServer, face: str) -> None:
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "weather"}}
    mock_server.push(
        sse=[
            oa_text("Let me "),
            oa_text("check."),
            oa(
                {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [
                                    {**call, "function": {"name": "weather", "arguments": '{"ci'}}
                                ]
                            },
                        }
                    ]
                }
            ),
            oa(
                {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [
                                    {"index": 0, "function": {"arguments": 'ty": "Oslo"}'}}
                                ]
                            },
                        }
                    ]
                }
            ),
            oa({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
            OA_USAGE,
            "data: [DONE]",
        ]
    )
    client = failover.Client({"o": openai(mock_server)})
    chunks, r = collect(face, client, tools=[failover.Tool("weather")])
    assert [c.kind for c in chunks] == ["text", "text", "tool_call"]
    assert texts(chunks) == "Let me check." == r.text
    assert chunks[2].tool_call is not None
    assert (chunks[2].tool_call.name, chunks[2].tool_call.arguments) == (
        "weather",
        {"city": "Oslo"},
    )
    assert r.tool_calls == (chunks[2].tool_call,)
    assert (r.finish_reason, r.model, r.provider) == ("tool_calls", "gpt-4.1", "o")
    assert (r.usage.input_tokens, r.usage.output_tokens) == (11, 3)
    assert r.time_to_first_token is not None and r.time_to_first_token >= 0
    [attempt] = r.attempts
    assert (attempt.status, attempt.kind) == (200, None)
    body = mock_server.requests[0].json
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert mock_server.requests[0].headers["accept"] == "text/event-stream"


def test_anthropic_events_thinking_tools_and_usage(mock_server: MockServer, face: str) -> None:
    mock_server.push(
        sse=[
            ant(
                "message_start",
                {
                    "message": {
                        "model": "claude-haiku-4-5",
                        "usage": {
                            "input_tokens": 10,
                            "cache_read_input_tokens": 5,
                            "output_tokens": 1,
                        },
                    }
                },
            ),
            ant("ping", {}),
            ant(
                "content_block_start",
                {"index": 0, "content_block": {"type": "thinking", "thinking": ""}},
            ),
            ant(
                "content_block_delta",
                {"index": 0, "delta": {"type": "thinking_delta", "thinking": "Hmm."}},
            ),
            ant(
                "content_block_delta",
                {"index": 0, "delta": {"type": "signature_delta", "signature": "c2ln"}},
            ),
            ant("content_block_stop", {"index": 0}),
            ant("content_block_start", {"index": 1, "content_block": {"type": "text", "text": ""}}),
            ant(
                "content_block_delta", {"index": 1, "delta": {"type": "text_delta", "text": "Sure"}}
            ),
            ant("content_block_stop", {"index": 1}),
            ant(
                "content_block_start",
                {
                    "index": 2,
                    "content_block": {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "weather",
                        "input": {},
                    },
                },
            ),
            ant(
                "content_block_delta",
                {"index": 2, "delta": {"type": "input_json_delta", "partial_json": '{"city":'}},
            ),
            ant(
                "content_block_delta",
                {"index": 2, "delta": {"type": "input_json_delta", "partial_json": ' "Rome"}'}},
            ),
            ant("content_block_stop", {"index": 2}),
            ant(
                "message_delta",
                {"delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 42}},
            ),
            ant("message_stop", {}),
        ]
    )
    client = failover.Client({"a": anthropic(mock_server)})
    chunks, r = collect(face, client, tools=[failover.Tool("weather")])
    assert [c.kind for c in chunks] == ["reasoning", "text", "tool_call"]
    assert chunks[0].reasoning == "Hmm." and chunks[0].text == ""
    assert chunks[2].tool_call is not None
    assert (chunks[2].tool_call.id, chunks[2].tool_call.arguments) == ("toolu_1", {"city": "Rome"})
    assert (r.text, r.finish_reason, r.model) == ("Sure", "tool_calls", "claude-haiku-4-5")
    # Input from message_start (cache reads included), output from message_delta.
    assert (r.usage.input_tokens, r.usage.cache_read_tokens, r.usage.output_tokens) == (15, 5, 42)
    assert mock_server.requests[0].json["stream"] is True
    # The signed thinking block goes back whole in a tool loop.
    assert r.message["provider_data"] == {
        "anthropic": {"blocks": [{"type": "thinking", "thinking": "Hmm.", "signature": "c2ln"}]}
    }


def test_gemini_sse_with_crlf_separators(mock_server: MockServer, face: str) -> None:
    def chunk(data: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps(data).encode() + b"\r\n\r\n"

    mock_server.push(
        chunks=[
            chunk(
                {
                    "candidates": [{"content": {"role": "model", "parts": [{"text": "Bon"}]}}],
                    "modelVersion": "gemini-2.5-flash",
                }
            ),
            chunk(
                {
                    "candidates": [
                        {
                            "content": {"role": "model", "parts": [{"text": "jour"}]},
                            "finishReason": "STOP",
                        }
                    ],
                    "usageMetadata": {
                        "promptTokenCount": 4,
                        "candidatesTokenCount": 2,
                        "thoughtsTokenCount": 7,
                    },
                }
            ),
        ]
    )
    client = failover.Client({"g": gemini(mock_server)})
    chunks, r = collect(face, client)
    assert texts(chunks) == "Bonjour" == r.text
    assert (r.finish_reason, r.usage.input_tokens, r.usage.output_tokens) == ("stop", 4, 9)
    assert mock_server.requests[0].path == "/models/gemini-2.5-flash:streamGenerateContent?alt=sse"


def test_ollama_ndjson_with_a_line_split_across_reads(mock_server: MockServer, face: str) -> None:
    lines = [
        {"model": "llama3.2", "message": {"role": "assistant", "content": "Ci"}, "done": False},
        {"model": "llama3.2", "message": {"role": "assistant", "content": "ao"}, "done": False},
        {
            "model": "llama3.2",
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": 8,
            "eval_count": 2,
        },
    ]
    raw = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    mock_server.push(
        chunks=[raw[:20], raw[20:70], raw[70:]], headers={"content-type": "application/x-ndjson"}
    )
    client = failover.Client({"local": ollama(mock_server)})
    chunks, r = collect(face, client)
    assert texts(chunks) == "Ciao"
    assert (r.finish_reason, r.usage.input_tokens, r.usage.output_tokens) == ("stop", 8, 2)
    assert mock_server.requests[0].json["stream"] is True


def test_a_chunk_boundary_inside_a_multibyte_character(mock_server: MockServer) -> None:
    event = (oa_text("héllo wörld 日本") + "\n\n").encode()
    cut = event.index("日".encode()) + 1  # inside the three bytes of 日
    mock_server.push(chunks=[event[:cut], event[cut:], (OA_STOP + "\n\n").encode()])
    client = failover.Client({"o": openai(mock_server)})
    _chunks, r = collect("sync", client)
    assert r.text == "héllo wörld 日本"


# --------------------------------------------------------------------------- before the first chunk


def test_a_429_before_the_stream_is_waited_out(mock_server: MockServer, face: str) -> None:
    mock_server.push(status=429, headers={"retry-after": "2"}, json={"error": {"message": "slow"}})
    mock_server.push(sse=[oa_text("ok"), OA_STOP])
    sleeper = FakeSleeper()
    client = failover.Client({"o": openai(mock_server)}, sleeper=sleeper)
    chunks, r = collect(face, client)
    assert texts(chunks) == "ok"
    sleeper.assert_sequence([2.0])
    assert [(a.status, a.kind) for a in r.attempts] == [(429, "rate_limited"), (200, None)]


def test_an_overloaded_error_inside_a_200_fails_over_before_any_text(
    mock_server: MockServer, backup_server: MockServer, face: str
) -> None:
    mock_server.push(
        sse=[
            ant("message_start", {"message": {"model": "claude", "usage": {"input_tokens": 3}}}),
            ant("error", {"error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ]
    )
    backup_server.push(sse=[oa_text("from gpt"), OA_STOP, "data: [DONE]"])
    events: list[Any] = []
    client = failover.Client(
        {"claude": anthropic(mock_server), "gpt": openai(backup_server)},
        retry=failover.RetryPolicy(max_retries=0),
        sleeper=FakeSleeper(),
        on_event=events.append,
    )
    chunks, r = collect(face, client)
    assert [c.kind for c in chunks] == ["text"] and texts(chunks) == "from gpt"
    assert r.provider == "gpt"
    assert [(a.provider, a.status, a.kind) for a in r.attempts] == [
        ("claude", 200, "overloaded"),
        ("gpt", 200, None),
    ]
    assert [type(e).__name__ for e in events] == ["FailedOver"]


def test_a_cut_before_any_content_is_retried(mock_server: MockServer) -> None:
    mock_server.push(sse=[oa({"choices": [], "model": "m"}), oa_text("never")], fault="cut:1")
    mock_server.push(sse=[oa_text("whole"), OA_STOP])
    client = failover.Client({"o": openai(mock_server)}, sleeper=FakeSleeper())
    chunks, r = collect("sync", client)
    assert texts(chunks) == "whole"
    assert [a.kind for a in r.attempts] == ["connection", None]


def test_an_error_status_before_the_stream_raises_its_class(
    mock_server: MockServer, face: str
) -> None:
    mock_server.push(status=401, json={"error": {"message": f"bad key {KEY}"}})
    client = failover.Client({"o": openai(mock_server)})
    with pytest.raises(failover.AuthenticationError) as info:
        collect(face, client)
    assert KEY not in str(info.value)


# --------------------------------------------------------------------------- after the first chunk


@pytest.mark.mock_server(assert_all_used=False)
def test_a_cut_after_text_raises_stream_interrupted_with_the_exact_partial_text(
    mock_server: MockServer, face: str
) -> None:
    mock_server.push(sse=[oa_text("The answer "), oa_text("is"), oa_text(" never")], fault="cut:2")
    mock_server.push_text("must not be requested")
    client = failover.Client({"o": openai(mock_server)}, sleeper=FakeSleeper())
    seen: list[str] = []
    with pytest.raises(failover.StreamInterrupted) as info:
        if face == "sync":
            for chunk in client.stream("Hi"):
                seen.append(chunk.text)
        else:

            async def run() -> None:
                async for chunk in client.stream_async("Hi"):
                    seen.append(chunk.text)

            asyncio.run(run())
    error = info.value
    assert "".join(seen) == error.partial_text == "The answer is"
    assert error.provider == "o"
    assert isinstance(error.__cause__, failover.ProviderConnectionError)
    assert [(a.status, a.kind) for a in error.attempts] == [(200, "connection")]
    assert len(mock_server.requests) == 1, "a stream past its first chunk is never retried silently"
    assert mock_server.pending == 1


def test_an_error_event_after_text_is_interrupted_with_its_usage(mock_server: MockServer) -> None:
    mock_server.push(
        sse=[
            ant("message_start", {"message": {"model": "c", "usage": {"input_tokens": 7}}}),
            ant("content_block_start", {"index": 0, "content_block": {"type": "text"}}),
            ant(
                "content_block_delta",
                {"index": 0, "delta": {"type": "text_delta", "text": "Half"}},
            ),
            ant("error", {"error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ]
    )
    client = failover.Client({"a": anthropic(mock_server)})
    stream = client.stream("Hi")
    assert next(stream).text == "Half"
    with pytest.raises(failover.StreamInterrupted) as info:
        next(stream)
    assert info.value.partial_text == "Half"
    assert info.value.usage is not None and info.value.usage.input_tokens == 7
    assert isinstance(info.value.__cause__, failover.ProviderOverloaded)


def test_restart_on_the_fallback_yields_one_restart_chunk_then_a_whole_answer(
    mock_server: MockServer, backup_server: MockServer, face: str
) -> None:
    mock_server.push(sse=[oa_text("Once upon "), oa_text("a")], fault="cut:2")
    backup_server.push(sse=[oa_text("Whole "), oa_text("story."), OA_STOP, OA_USAGE])
    client = failover.Client(
        {"first": openai(mock_server), "second": openai(backup_server)},
        retry=failover.RetryPolicy(max_retries=0),
        sleeper=FakeSleeper(),
    )
    chunks, r = collect(face, client, on_interrupt="restart")
    kinds = [c.kind for c in chunks]
    assert kinds == ["text", "text", "restart", "text", "text"]
    restart = chunks[2]
    assert restart.discarded == "Once upon a" and restart.text == ""
    # What a collector keeps: the text after the last restart.
    assert texts(chunks[3:]) == "Whole story." == r.text
    assert r.provider == "second"
    assert [(a.provider, a.status, a.kind) for a in r.attempts] == [
        ("first", 200, "connection"),
        ("second", 200, None),
    ]


def test_restart_on_the_same_provider_when_it_may_retry(mock_server: MockServer) -> None:
    mock_server.push(sse=[oa_text("abc")], fault="cut:1")
    mock_server.push(sse=[oa_text("xyz"), OA_STOP])
    sleeper = FakeSleeper()
    client = failover.Client({"o": openai(mock_server)}, sleeper=sleeper)
    chunks, r = collect("sync", client, on_interrupt="restart")
    assert [c.kind for c in chunks] == ["text", "restart", "text"]
    assert r.text == "xyz" and len(mock_server.requests) == 2
    assert len(sleeper.sleeps) == 1  # the policy's backoff before the retry


def test_each_attempt_of_a_restarted_stream_records_the_wait_before_it(
    mock_server: MockServer,
) -> None:
    mock_server.push(sse=[oa_text("a"), oa_text("b")], fault="cut:1")
    mock_server.push(sse=[oa_text("c"), oa_text("d")], fault="cut:1")  # the restart, cut too
    mock_server.push(sse=[oa_text("ok"), OA_STOP])
    sleeper = FakeSleeper()
    client = failover.Client({"o": openai(mock_server)}, sleeper=sleeper)
    _chunks, r = collect("sync", client, on_interrupt="restart")
    assert r.text == "ok" and len(sleeper.sleeps) == 2
    assert [a.waited for a in r.attempts] == [0.0, *sleeper.sleeps]


# --------------------------------------------------------------------------- ends and stalls


def test_complete_without_done(mock_server: MockServer) -> None:
    mock_server.push(sse=[oa_text("fine"), OA_STOP])
    client = failover.Client({"o": openai(mock_server)})
    _chunks, r = collect("sync", client)
    assert (r.text, r.finish_reason) == ("fine", "stop")


def test_a_stream_that_ends_before_its_end_marker_was_cut(mock_server: MockServer) -> None:
    mock_server.push(sse=[oa_text("partial")])  # closes cleanly, no finish_reason
    client = failover.Client({"o": openai(mock_server)})
    stream = client.stream("Hi")
    assert next(stream).text == "partial"
    with pytest.raises(failover.StreamInterrupted) as info:
        next(stream)
    assert "ended before the answer did" in str(info.value.__cause__)


def test_an_idle_stall_hits_the_timeout(mock_server: MockServer) -> None:
    mock_server.push(sse=[oa_text("slow"), oa_text("never")], fault="stall:1")
    client = failover.Client({"o": openai(mock_server)})
    stream = client.stream("Hi", timeout=0.3)
    assert next(stream).text == "slow"
    with pytest.raises(failover.StreamInterrupted) as info:
        next(stream)
    assert isinstance(info.value.__cause__, failover.ProviderTimeout)
    mock_server.close()


def test_a_stall_after_the_end_marker_is_no_failure(mock_server: MockServer) -> None:
    mock_server.push(sse=[oa_text("done"), OA_STOP, "data: never sent"], fault="stall:2")
    client = failover.Client({"o": openai(mock_server)})
    _chunks, r = collect("sync", client, timeout=0.3)
    assert (r.text, r.finish_reason) == ("done", "stop")
    mock_server.close()


ANT_ANSWER = [
    ant(
        "message_start",
        {
            "message": {
                "id": "m",
                "role": "assistant",
                "content": [],
                "usage": {"input_tokens": 5, "output_tokens": 1},
            }
        },
    ),
    ant("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
    ant("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "Hi"}}),
    ant("content_block_stop", {"index": 0}),
    ant("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}),
]
GEMINI_ANSWER = oa(
    {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "Hi"}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2},
    }
)
# After the finish, the server keeps the connection open and says nothing more: what
# came (the usage after OpenAI's finish; no message_stop, no [DONE], no end of body).
STALLS_AFTER_THE_FINISH = {
    "openai": (openai, [oa_text("Hi"), OA_STOP, OA_USAGE, "data: [DONE]"], "stall:3", (11, 3)),
    "anthropic": (anthropic, ANT_ANSWER, f"stall:{len(ANT_ANSWER)}", (5, 2)),
    "gemini": (gemini, [GEMINI_ANSWER], "stall:1", (5, 2)),
}


@pytest.mark.parametrize("wire", sorted(STALLS_AFTER_THE_FINISH))
def test_a_stall_after_the_finish_ends_the_stream_at_once_with_what_came(
    mock_server: MockServer, face: str, wire: str
) -> None:
    make, events, fault, (input_tokens, output_tokens) = STALLS_AFTER_THE_FINISH[wire]
    mock_server.push(sse=events, fault=fault)
    client = failover.Client({"p": make(mock_server)}, timeout=30.0)
    began = time.monotonic()
    _chunks, r = collect(face, client)
    # Not the 30 s idle timeout: only a short grace for what may trail the finish.
    assert time.monotonic() - began < 5.0
    assert (r.text, r.finish_reason) == ("Hi", "stop")
    assert (r.usage.input_tokens, r.usage.output_tokens) == (input_tokens, output_tokens)
    mock_server.close()


def test_what_trails_the_finish_is_not_waited_for_past_the_deadline(
    mock_server: MockServer,
) -> None:
    mock_server.push(sse=[oa_text("Hi"), OA_STOP], fault="stall:2")
    client = failover.Client({"p": openai(mock_server)}, timeout=30.0)
    began = time.monotonic()
    _chunks, r = collect("sync", client, deadline=0.1)
    assert time.monotonic() - began < 0.9  # the deadline, well before the grace ends
    assert (r.text, r.finish_reason) == ("Hi", "stop")
    mock_server.close()


@pytest.mark.parametrize(
    "trailer",
    ['data: {"error": {"message": "boom", "type": "server_error"}}', "data: {not json"],
    ids=["an error event", "an event that cannot be decoded"],
)
@pytest.mark.parametrize("on_interrupt", ["raise", "restart"])
def test_what_goes_wrong_after_the_finish_never_costs_the_answer(
    mock_server: MockServer, face: str, trailer: str, on_interrupt: str
) -> None:
    """Found by the new-user trial of 2026-12-02: a complete answer was raised as
    StreamInterrupted, and with on_interrupt="restart" generated (and billed) again."""
    mock_server.push(sse=[oa_text("Complete answer."), OA_STOP, trailer])
    client = failover.Client({"p": openai(mock_server)})
    chunks, r = collect(face, client, on_interrupt=on_interrupt)
    assert (r.text, r.finish_reason) == ("Complete answer.", "stop")
    assert [c.kind for c in chunks if c.kind != "text"] == []  # no restart
    assert len(mock_server.requests) == 1  # never asked again
    mock_server.close()


def test_a_keep_alive_comment_resets_the_idle_timeout(mock_server: MockServer) -> None:
    # Three comments 5 ms apart never let 0.3 s pass in silence... the events
    # themselves are what arrives, so this checks comments are no failure.
    mock_server.push(
        chunks=[
            b": OPENROUTER PROCESSING\n\n",
            (oa_text("ok") + "\n\n").encode(),
            (OA_STOP + "\n\n").encode(),
        ]
    )
    client = failover.Client({"o": openai(mock_server)})
    _chunks, r = collect("sync", client, timeout=5.0)
    assert r.text == "ok"


def test_response_before_the_end_says_so(mock_server: MockServer) -> None:
    mock_server.push(sse=[oa_text("a"), oa_text("b"), OA_STOP])
    client = failover.Client({"o": openai(mock_server)})
    with client.stream("Hi") as stream:
        next(stream)
        with pytest.raises(failover.FailoverError, match="has not ended"):
            _ = stream.response


def test_on_interrupt_is_checked_when_given(mock_server: MockServer) -> None:
    client = failover.Client({"o": openai(mock_server)})
    with pytest.raises(failover.ConfigurationError, match="on_interrupt"):
        client.stream("Hi", on_interrupt="retry")
    assert mock_server.requests == []


# --------------------------------------------------------------------------- closing


class RawServer:
    """A socket server that answers one request with a stream head and one
    event, then waits to see the client close the connection."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.closed_by_client = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        conn, _ = self.sock.accept()
        conn.settimeout(10)
        data = b""
        while b"\r\n\r\n" not in data:
            data += conn.recv(4096)
        conn.sendall(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        event = (oa_text("first") + "\n\n").encode()
        conn.sendall(f"{len(event):x}\r\n".encode() + event + b"\r\n")
        try:
            while conn.recv(4096):
                pass
            self.closed_by_client.set()
        except OSError:
            self.closed_by_client.set()
        conn.close()

    def close(self) -> None:
        self.sock.close()


def test_breaking_out_of_the_loop_closes_the_connection() -> None:
    server = RawServer()
    try:
        client = failover.Client({"o": failover.OpenAICompatible("m", base_url=server.url)})
        with client.stream("Hi") as stream:
            for chunk in stream:
                assert chunk.text == "first"
                break
        assert server.closed_by_client.wait(5), "the connection stayed open"
    finally:
        server.close()


def test_cancelling_the_task_closes_the_connection() -> None:
    server = RawServer()

    async def main() -> None:
        client = failover.Client({"o": failover.OpenAICompatible("m", base_url=server.url)})
        got_first = asyncio.Event()

        async def read() -> None:
            async for _chunk in client.stream_async("Hi"):
                got_first.set()

        task = asyncio.ensure_future(read())
        await asyncio.wait_for(got_first.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        asyncio.run(main())
        assert server.closed_by_client.wait(5), "the connection stayed open"
    finally:
        server.close()


def test_the_deadline_bounds_the_start(mock_server: MockServer) -> None:
    mock_server.push(fault="hang")
    client = failover.Client({"o": openai(mock_server)}, deadline=0.3)
    with pytest.raises(failover.DeadlineExceeded):
        list(client.stream("Hi"))
    mock_server.close()


def test_a_restart_discards_the_tool_calls_too(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    block = {"type": "tool_use", "id": "toolu_9", "name": "f", "input": {}}
    mock_server.push(
        sse=[
            ant("message_start", {"message": {"model": "c", "usage": {"input_tokens": 1}}}),
            ant("content_block_start", {"index": 0, "content_block": block}),
            ant("content_block_stop", {"index": 0}),
            ant("content_block_start", {"index": 1, "content_block": {**block, "id": "toolu_10"}}),
        ],
        fault="cut:4",
    )
    backup_server.push(sse=[oa_text("no tools after all"), OA_STOP])
    client = failover.Client(
        {"a": anthropic(mock_server), "b": openai(backup_server)},
        retry=failover.RetryPolicy(max_retries=0),
        sleeper=FakeSleeper(),
    )
    chunks, r = collect("sync", client, tools=[failover.Tool("f")], on_interrupt="restart")
    assert [c.kind for c in chunks] == ["tool_call", "restart", "text"]
    assert [c.id for c in chunks[1].discarded_tool_calls] == ["toolu_9"]
    assert (r.text, r.tool_calls) == ("no tools after all", ())


def test_interleaved_tool_calls_are_assembled_by_their_index(mock_server: MockServer) -> None:
    def part(index: int, **fields: Any) -> str:
        return oa(
            {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, **fields}]}}]}
        )

    mock_server.push(
        sse=[
            part(
                0, id="call_A", type="function", function={"name": "weather", "arguments": '{"ci'}
            ),
            part(1, id="call_B", type="function", function={"name": "time", "arguments": "{}"}),
            part(0, function={"arguments": 'ty": "Paris"}'}),
            oa({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        ]
    )
    client = failover.Client({"o": openai(mock_server)})
    chunks, r = collect("sync", client, tools=[failover.Tool("weather"), failover.Tool("time")])
    calls = [(c.id, c.name, c.arguments) for c in r.tool_calls]
    assert calls == [("call_A", "weather", {"city": "Paris"}), ("call_B", "time", {})]
    assert [c.tool_call for c in chunks] == list(r.tool_calls)


def test_a_whole_json_answer_to_a_stream_request_is_taken_as_the_stream(
    mock_server: MockServer,
) -> None:
    mock_server.push_text("not streamed")
    mock_server.push(json={"error": {"code": 429, "message": "slow"}})
    mock_server.push_text("after the error")
    client = failover.Client({"o": openai(mock_server)}, sleeper=FakeSleeper())
    chunks, r = collect("sync", client)
    assert texts(chunks) == "not streamed" and r.finish_reason == "stop"
    chunks, r = collect("sync", client)
    assert texts(chunks) == "after the error"
    assert [a.kind for a in r.attempts] == ["rate_limited", None]


def test_a_delta_that_is_not_text_is_a_failure_not_dropped(mock_server: MockServer) -> None:
    mock_server.push(
        sse=[oa_text("A"), oa({"choices": [{"index": 0, "delta": {"content": 5}}]}), OA_STOP]
    )
    client = failover.Client({"o": openai(mock_server)})
    stream = client.stream("Hi")
    assert next(stream).text == "A"
    with pytest.raises(failover.StreamInterrupted) as info:
        next(stream)
    assert "not text" in str(info.value.__cause__)


def test_anthropic_error_events_are_classified_like_their_status(mock_server: MockServer) -> None:
    for error_type, cls in [
        ("invalid_request_error", failover.BadRequest),
        ("authentication_error", failover.AuthenticationError),
        ("not_found_error", failover.ModelNotFound),
        ("billing_error", failover.InsufficientCredits),
    ]:
        mock_server.push(sse=[ant("error", {"error": {"type": error_type, "message": "no"}})])
        client = failover.Client({"a": anthropic(mock_server)}, sleeper=FakeSleeper())
        with pytest.raises(cls):
            list(client.stream("Hi"))


def test_gemini_resource_exhausted_in_a_stream_waits_its_retry_delay(
    mock_server: MockServer,
) -> None:
    error = {
        "error": {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "message": "quota",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}],
        }
    }
    mock_server.push(sse=["data: " + json.dumps(error)])
    mock_server.push(
        sse=[
            "data: "
            + json.dumps(
                {"candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}]}
            )
        ]
    )
    sleeper = FakeSleeper()
    client = failover.Client(
        {"g": gemini(mock_server)},
        sleeper=sleeper,
    )
    _chunks, r = collect("sync", client)
    assert r.text == "ok"
    sleeper.assert_sequence([7.0])


def test_a_broken_stream_sends_call_failed_and_keeps_every_attempt(
    mock_server: MockServer,
) -> None:
    events: list[Any] = []
    mock_server.push(status=429, headers={"retry-after": "1"}, json={"error": {"message": "x"}})
    mock_server.push(sse=[oa_text("half")], fault="cut:1")
    client = failover.Client(
        {"o": openai(mock_server)}, sleeper=FakeSleeper(), on_event=events.append
    )
    with pytest.raises(failover.StreamInterrupted) as info:
        list(client.stream("Hi"))
    assert [type(e).__name__ for e in events] == ["RetryScheduled", "CallFailed"]
    assert events[-1].error is info.value
    assert [a.kind for a in info.value.attempts] == ["rate_limited", "connection"]


def test_close_ends_the_stream_and_reads_after_it_stop(mock_server: MockServer) -> None:
    mock_server.push(sse=[oa_text("a"), oa_text("b"), OA_STOP])
    client = failover.Client({"o": openai(mock_server)})
    stream = client.stream("Hi")
    assert next(stream).text == "a"
    stream.close()
    assert list(stream) == []


def test_an_async_stream_read_in_another_event_loop_says_so(
    mock_server: MockServer, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    client = failover.Client({"o": openai(mock_server)})

    async def make() -> failover.AsyncStream:
        return client.stream_async("Hi")

    stream = asyncio.run(make())

    async def read() -> list[failover.Chunk]:
        return [c async for c in stream]

    with pytest.raises(failover.FailoverError, match="another event loop"):
        asyncio.run(read())
    assert mock_server.requests == [], "nothing was sent"
    import gc

    gc.collect()
    assert unraisable == []
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


@pytest.mark.mock_server(assert_all_used=False)
def test_a_stream_that_fails_before_its_first_chunk_names_its_provider(
    mock_server: MockServer,
) -> None:
    """Found by the new-user trials of 2026-11-30."""
    for _ in range(3):  # a first try and two retries
        mock_server.push(fault="reset")
    client = failover.Client({"gpt": openai(mock_server)}, sleeper=FakeSleeper())
    with pytest.raises(failover.ProviderConnectionError, match=r"^gpt: "):
        with client.stream("Hi") as stream:
            list(stream)


def test_a_cut_stream_names_its_provider_in_the_cause(mock_server: MockServer) -> None:
    """Found by the new-user trials of 2026-11-30."""
    text = 'data: {"choices": [{"index": 0, "delta": {"content": "Hel"}}]}'
    mock_server.push(sse=[text, text], fault="cut:1")
    client = failover.Client({"gpt": openai(mock_server)})
    with pytest.raises(failover.StreamInterrupted) as info:
        with client.stream("Hi") as stream:
            list(stream)
    assert str(info.value.__cause__).startswith("gpt: ")


def test_stream_options_in_params_win_in_a_stream_and_stay_off_other_calls(
    mock_server: MockServer,
) -> None:
    """Found by the new-user trials of 2026-11-30."""
    stop = 'data: {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}'
    mock_server.push(sse=[stop, "data: [DONE]"])
    mock_server.push_text("ok")
    provider = openai(mock_server, params={"stream_options": {"include_usage": False}})
    client = failover.Client({"g": provider})
    with client.stream("Hi") as stream:
        list(stream)
    client.prompt("Hi")
    streamed, plain = (r.json for r in mock_server.requests)
    assert streamed["stream_options"] == {"include_usage": False}
    assert "stream_options" not in plain and "stream" not in plain


def test_a_streams_accept_header_is_the_streams_whatever_its_case(
    mock_server: MockServer,
) -> None:
    """Found by the new-user trials of 2026-11-30."""
    stop = 'data: {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}'
    mock_server.push(sse=[stop, "data: [DONE]"])
    provider = openai(mock_server, headers={"Accept": "application/json"})
    with failover.Client({"g": provider}).stream("Hi") as stream:
        list(stream)
    accept = [v for n, v in mock_server.requests[0].header_list if n == "accept"]
    assert accept == ["text/event-stream"]


def test_a_streamed_server_tool_is_no_tool_call(mock_server: MockServer) -> None:
    # web_search runs on Anthropic's side: its input streams as the deltas a
    # client tool's does, and is not the caller's to run.
    """Found by the new-user trials of 2026-11-30."""
    ev = ant
    start = {"message": {"id": "m", "role": "assistant", "content": [], "usage": {}}}
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
    query = {"type": "input_json_delta", "partial_json": '{"query": "weather paris"}'}
    result = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}
    mock_server.push(
        sse=[
            ev("message_start", start),
            ev("content_block_start", {"index": 0, "content_block": search}),
            ev("content_block_delta", {"index": 0, "delta": query}),
            ev("content_block_stop", {"index": 0}),
            ev("content_block_start", {"index": 1, "content_block": result}),
            ev("content_block_stop", {"index": 1}),
            ev("content_block_start", {"index": 2, "content_block": {"type": "text", "text": ""}}),
            ev(
                "content_block_delta",
                {"index": 2, "delta": {"type": "text_delta", "text": "Sunny."}},
            ),
            ev("content_block_stop", {"index": 2}),
            ev(
                "message_delta",
                {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}},
            ),
            ev("message_stop", {}),
        ]
    )
    with failover.Client({"c": anthropic(mock_server)}).stream("Weather in Paris?") as stream:
        kinds = [c.kind for c in stream]
    r = stream.response
    assert r is not None and (r.text, r.finish_reason, r.tool_calls) == ("Sunny.", "stop", ())
    assert kinds == ["text"] and "tool_calls" not in r.message


@pytest.mark.mock_server(assert_all_used=False)
def test_a_stream_with_no_answer_fails_over(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    """Found by the new-user trials of 2026-11-30."""
    usage_only = 'data: {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 0}}'
    for _ in range(3):
        mock_server.push(sse=[usage_only, "data: [DONE]"])
    stop = 'data: {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}'
    backup_server.push(sse=[stop, "data: [DONE]"])
    client = failover.Client(
        {"a": openai(mock_server), "b": openai(backup_server)}, sleeper=FakeSleeper()
    )
    with client.stream("Hi") as stream:
        text = "".join(c.text for c in stream)
    assert text == "ok" and stream.response is not None and stream.response.provider == "b"
    assert stream.response.attempts[0].kind == "server_error"


def test_a_stream_of_tool_call_pieces_without_a_finish_reason_is_an_answer(
    mock_server: MockServer,
) -> None:
    """Found by the new-user trials of 2026-11-30."""
    name = 'data: {"choices": [{"index": 0, "delta": {"tool_calls": [%s]}}]}'
    mock_server.push(
        sse=[
            name % '{"index": 0, "id": "c1", "function": {"name": "weather", "arguments": ""}}',
            name % '{"index": 0, "function": {"arguments": "{}"}}',
            "data: [DONE]",
        ]
    )
    with failover.Client({"g": openai(mock_server)}).stream("Hi") as stream:
        kinds = [c.kind for c in stream]
    assert kinds == ["tool_call"]
    assert stream.response is not None and stream.response.tool_calls[0].name == "weather"


def test_an_empty_finish_reason_on_a_chunk_ends_nothing(mock_server: MockServer) -> None:
    """Found by the new-user trials of 2026-11-30."""
    first = (
        'data: {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, '
        '"finish_reason": ""}]}'
    )
    text = 'data: {"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": null}]}'
    stop = 'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}'
    mock_server.push(sse=[first, text, stop, "data: [DONE]"])
    with failover.Client({"g": openai(mock_server)}).stream("Hi") as stream:
        assert "".join(c.text for c in stream) == "Hi"
    assert stream.response is not None and stream.response.finish_reason == "stop"


def test_a_stream_no_provider_can_serve_fails_when_made(mock_server: MockServer) -> None:
    # An image by link: Ollama takes images as data: URLs only.
    """Found by the new-user trials of 2026-11-30."""
    image = {"type": "image_url", "image_url": {"url": "https://e.com/a.png"}}
    client = failover.Client({"o": ollama(mock_server)})
    messages = [{"role": "user", "content": [image]}]
    with pytest.raises(failover.ConfigurationError, match="no provider can serve") as info:
        client.stream(messages)
    assert info.value.attempts[0].skipped is not None

    async def make() -> None:
        client.stream_async(messages)

    with pytest.raises(failover.ConfigurationError, match="no provider can serve"):
        asyncio.run(make())
    assert mock_server.requests == []
