"""Streamed recordings (SSE, and Ollama's NDJSON) through ``stream`` / ``stream_async``, the
recorded body played back as raw pieces (one network read per recorded event or line, and again
cut in awkward places) with its recorded content type (DESIGN §3.6):

- a complete stream must yield the text, reasoning and tool calls the oracle decodes from the
  recorded body itself (never through failover), and ``stream.response`` must carry that text,
  the tool calls, usage (DESIGN §2's one meaning; the last figure wins, field by field), the
  finish reason and the model, with one attempt;
- an error event before any content is a failure of the attempt (the ProviderError of DESIGN
  §3.6's in-stream classification, one attempt with status 200), retried and failed over like any
  other (checked by playing the next recording after it); after content it is
  ``StreamInterrupted`` with the exact text delivered and the ProviderError as its cause;
- the request must go to the streaming endpoint (Gemini's ``:streamGenerateContent?alt=sse``)
  and ask for a stream as each wire does (``stream: true``; ``stream_options.include_usage`` on
  the OpenAI family but Mistral), with the recorded auth header.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest

import failover
from failover.testing import RecordedRequest

from .loader import STREAMS, Recording, params
from .oracle import (
    EXPECTED_STREAM_ERRORS,
    STREAM_ERRORS,
    STREAM_SUCCESSES,
    assert_same_usage,
    expected_stream,
    expected_stream_finish,
    recorded_request_id,
    tool_names,
    usage_of,
    user_text,
)
from .replay import (
    API_KEY,
    FACES,
    awkward_pieces,
    chat_text,
    check_auth,
    event_pieces,
    play_stream,
    run_stream,
)


def _content(chunks: list[failover.Chunk]) -> tuple[str, str, list[tuple[str, str, Any]]]:
    """The text, reasoning and tool calls (id, name, arguments) the chunks carried."""
    calls = [c.tool_call for c in chunks if c.kind == "tool_call" and c.tool_call is not None]
    return (
        "".join(c.text for c in chunks),
        "".join(c.reasoning for c in chunks),
        [(c.id, c.name, c.arguments) for c in calls],
    )


def _check_chunks(rec: Recording, chunks: list[failover.Chunk]) -> None:
    """DESIGN §3.6's shapes, and the content the recording carries (up to its end or error)."""
    exp = expected_stream(rec)
    for chunk in chunks:
        assert chunk.kind in ("text", "reasoning", "tool_call"), chunk  # no restart asked for
        if chunk.kind != "text":
            assert chunk.text == "", chunk
        if chunk.kind == "reasoning":
            assert chunk.reasoning, chunk
        if chunk.kind == "tool_call":
            assert chunk.tool_call is not None, chunk
    text, reasoning, calls = _content(chunks)
    assert text == exp.text
    assert reasoning == exp.reasoning
    assert [(name, args) for _, name, args in calls] == [(n, a) for _, n, a in exp.tool_calls]
    for (call_id, _, _), (expected_id, _, _) in zip(calls, exp.tool_calls):
        assert call_id  # the recorded id, or one failover made where the wire has none
        if expected_id is not None:
            assert call_id == expected_id


def _check_stream_request(rec: Recording, request: RecordedRequest) -> None:
    assert request.method == rec.method == "POST"
    # The streaming endpoint, under the provider class's default base path.
    sent_path, _, sent_query = request.path.partition("?")
    assert sent_path == rec.path
    assert sent_query == urlsplit(rec.uri).query
    if rec.wire == "gemini":
        assert sent_path.endswith(":streamGenerateContent") and sent_query == "alt=sse"
    check_auth(rec, request)

    sent, recorded = request.json, rec.request_json
    assert user_text(rec.wire, sent) == chat_text(rec)
    assert tool_names(rec.wire, sent) == tool_names(rec.wire, recorded)
    if rec.wire == "gemini":
        assert "model" not in sent and "stream" not in sent  # both in the URL, as recorded
        return
    assert sent["model"] == recorded["model"] == rec.model
    assert sent["stream"] is True
    assert recorded["stream"] is True
    if rec.wire == "openai" and rec.folder != "mistral":
        # Usage comes only when asked for (DESIGN §3.6's usage chunk); Mistral sends it
        # unasked, and its recorded request has no stream_options.
        assert sent["stream_options"]["include_usage"] is True
        if "stream_options" in recorded:
            assert recorded["stream_options"]["include_usage"] is True
    else:
        assert "stream_options" not in sent
        assert "stream_options" not in recorded


def test_recorded_streams_found() -> None:
    assert STREAM_SUCCESSES and STREAM_ERRORS
    assert any(expected_stream(r).content_before_error for r in STREAM_ERRORS)
    assert any(not expected_stream(r).content_before_error for r in STREAM_ERRORS)
    for rec in STREAMS:
        assert rec.status == 200
        assert len(awkward_pieces(rec)) == len(event_pieces(rec)) + 1


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("rec", params(STREAMS, "stream-request"))
def test_streamed_request(rec: Recording, face: str) -> None:
    """The request asks for a stream at the streaming endpoint, as recorded."""
    played = play_stream(rec, face)
    [request] = played.requests
    _check_stream_request(rec, request)


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("rec", params(STREAM_SUCCESSES, "stream-response"))
def test_streamed_success(rec: Recording, face: str) -> None:
    played = play_stream(rec, face)
    assert played.error is None, f"expected a complete stream, got {played.error!r}"
    _check_chunks(rec, played.chunks)
    exp = expected_stream(rec)
    r = played.response
    assert isinstance(r, failover.Response), f"expected a Response, got {r!r}"
    assert r.text == exp.text
    _, _, calls = _content(played.chunks)
    assert [(c.id, c.name, c.arguments) for c in r.tool_calls] == calls
    assert r.finish_reason == expected_stream_finish(rec, exp)
    assert r.model == exp.model
    assert r.provider == rec.folder
    assert r.message["role"] == "assistant"
    assert len(r.message.get("tool_calls") or []) == len(calls)
    if recorded_request_id(rec) is not None:
        assert r.request_id == recorded_request_id(rec)
    [attempt] = r.attempts
    assert (attempt.provider, attempt.status, attempt.kind) == (rec.folder, 200, None)
    assert isinstance(r.time_to_first_token, float)
    assert 0.0 < r.time_to_first_token < 5.0
    assert API_KEY not in repr(r)
    played.sleeper.assert_never_slept()


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("rec", params(STREAM_SUCCESSES, "stream-usage"))
def test_streamed_usage(rec: Recording, face: str) -> None:
    """Every usage figure the stream reported, the last one winning field by field, with
    DESIGN §2's one meaning (Anthropic's input from message_start, output from
    message_delta; Groq's x_groq.usage; Gemini's last usageMetadata)."""
    r = play_stream(rec, face).response
    assert isinstance(r, failover.Response), f"expected a Response, got {r!r}"
    _check_stream_usage(rec, r.usage)
    # The streaming attempt carries the same figures, and is billed.
    attempt = r.attempts[-1]
    assert attempt.billed is True
    _check_stream_usage(rec, attempt.usage or failover.Usage())


def _check_stream_usage(rec: Recording, got: failover.Usage) -> None:
    expected = usage_of(rec.wire, expected_stream(rec).usage)
    assert_same_usage(got, expected)


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("rec", params(STREAM_ERRORS, "stream-error"))
def test_streamed_error(rec: Recording, face: str) -> None:
    """An in-stream error event: before any content a failure of the attempt (the stream
    never starts); after content StreamInterrupted with the exact text delivered."""
    played = play_stream(rec, face)
    exp = expected_stream(rec)
    exc = played.error
    assert exc is not None, f"expected an error, got {played.response!r}"
    assert played.response is None
    _check_chunks(rec, played.chunks)  # the content before the error event, and only that
    if exp.content_before_error:
        assert isinstance(exc, failover.StreamInterrupted), f"got {exc!r}"
        assert exc.partial_text == exp.text
        assert exc.provider == rec.folder
        cause = exc.__cause__
        assert isinstance(cause, failover.ProviderError), f"cause: {cause!r}"
        # The usage reported before the error, where there was some (DESIGN: "where known").
        expected = usage_of(rec.wire, exp.usage)
        if exp.usage:
            assert exc.usage is not None
            assert (exc.usage.input_tokens, exc.usage.output_tokens) == (
                expected.input_tokens,
                expected.output_tokens,
            )
        else:
            assert exc.usage is None, exc.usage
    else:
        assert isinstance(exc, failover.ProviderError), f"got {exc!r}"
        assert played.chunks == []
        cause = exc
        [attempt] = exc.attempts
        assert (attempt.provider, attempt.status, attempt.kind) == (rec.folder, 200, exc.kind)
        assert attempt.skipped is None
        # No wait hint: the event has none, and the 200's rate-limit families all have room.
        assert failover.retry_after(list(rec.headers), None) is None
        assert exc.retry_after is None
        played.sleeper.assert_never_slept()
    assert cause.provider == rec.folder
    assert cause.model == rec.model
    assert exp.error is not None and exp.error["message"] in str(cause)
    for text in (str(exc), repr(exc), str(cause), repr(cause), cause.body or ""):
        assert API_KEY not in text


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("rec", params(STREAM_ERRORS, "stream-error-class"))
def test_streamed_error_class(rec: Recording, face: str) -> None:
    """The in-stream error's class, by DESIGN §3.6's reading of its code."""
    assert rec.id in EXPECTED_STREAM_ERRORS, (
        f"new in-stream error {rec.id}: read its event and add the class DESIGN §3.6 asks for "
        "to EXPECTED_STREAM_ERRORS"
    )
    expected_cls, why = EXPECTED_STREAM_ERRORS[rec.id]
    exc = play_stream(rec, face).error
    error = exc.__cause__ if isinstance(exc, failover.StreamInterrupted) else exc
    assert type(error) is expected_cls, f"expected {expected_cls.__name__} ({why}), got {error!r}"
    assert isinstance(error, failover.ProviderError)
    assert error.kind == expected_cls.kind
    if not isinstance(exc, failover.StreamInterrupted):
        assert [a.kind for a in exc.attempts] == [expected_cls.kind]


@pytest.mark.parametrize("rec", params(STREAMS, "stream-framing"))
def test_streamed_framing(rec: Recording) -> None:
    """The same body read in pieces that never end where an event does (cut inside the JSON
    and inside the blank line, CRLF split): the same content and the same end."""
    played = play_stream(rec, "sync", split="awkward")
    exp = expected_stream(rec)
    _check_chunks(rec, played.chunks)
    if exp.error is None:
        assert played.response is not None, f"expected a Response, got {played.error!r}"
        assert played.response.text == exp.text
        assert played.response.finish_reason == expected_stream_finish(rec, exp)
        _check_stream_usage(rec, played.response.usage)
    elif exp.content_before_error:
        assert isinstance(played.error, failover.StreamInterrupted), repr(played.error)
        assert played.error.partial_text == exp.text
    else:
        assert isinstance(played.error, failover.ProviderError), repr(played.error)
        assert played.chunks == []


def _next_stream(folder: str) -> Recording:
    return next(r for r in STREAM_SUCCESSES if r.folder == folder)


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("route", ["retry", "failover"])
@pytest.mark.parametrize(
    "rec",
    [
        pytest.param(r, id=r.id)
        for r in STREAM_ERRORS
        if not expected_stream(r).content_before_error
    ],
)
def test_streamed_error_before_content_is_retried(rec: Recording, route: str, face: str) -> None:
    """DESIGN §3.6: an error event inside a 200 before any content is retried (the same
    provider, after the backoff of a hint-less overload on the last provider) or failed over
    (at once: another provider remains), like prompt()'s failures; the caller only sees the
    stream start later. The next answer is the folder's own recorded stream, or OpenAI's."""
    after = _next_stream(rec.folder) if route == "retry" else _next_stream("openai")
    chain = [rec] if route == "retry" else [rec, after]
    played = run_stream(
        [(rec, event_pieces(rec)), (after, event_pieces(after))],
        chain,
        face,
        failover.RetryPolicy(),
    )
    assert played.error is None, f"expected the next stream, got {played.error!r}"
    _check_chunks(after, played.chunks)
    r = played.response
    assert r is not None
    assert r.text == expected_stream(after).text
    assert r.provider == after.folder
    kind = EXPECTED_STREAM_ERRORS[rec.id][0].kind
    assert [(a.provider, a.status, a.kind) for a in r.attempts] == [
        (rec.folder, 200, kind),
        (after.folder, 200, None),
    ]
    first, second = played.requests
    _check_stream_request(rec, first)
    assert second.json["stream"] is True
    if route == "retry":
        [delay] = played.sleeper.sleeps
        assert 0.375 <= delay <= 0.5  # Backoff(initial=0.5, jitter=0.25), first step
        [event] = played.events
        assert isinstance(event, failover.RetryScheduled)
        assert (event.provider, event.kind, event.status) == (rec.folder, kind, 200)
    else:
        played.sleeper.assert_never_slept()
        [event] = played.events
        assert isinstance(event, failover.FailedOver)
        assert (event.from_provider, event.to_provider) == (rec.folder, after.folder)
        assert event.error.kind == kind
