"""Non-streaming recordings through ``prompt`` / ``prompt_async`` (chat) and ``embed`` /
``embed_async`` (embeddings), against DESIGN §5:

- a 200 must give the recorded text, tool calls, usage (DESIGN §2's one meaning), finish reason
  (the one vocabulary) and model; an embeddings 200 the recorded vectors, exactly, with model and
  usage;
- an error must raise the class of DESIGN §3.1 (decided per recording by reading its body, in
  ``oracle.EXPECTED_ERRORS``), with the recorded status, the wait hint of DESIGN §3.2 (both as
  ``failover.retry_after`` computes it and as hard-coded from reading the headers and body), one
  attempt, and no API key anywhere in it;
- the request the client sends must match the recorded one: method, full path (the preset's
  default base path plus the endpoint), the auth header the recording used, and the body fields
  that carry the model and the conversation.
"""

from __future__ import annotations

import math
from urllib.parse import urlsplit

import pytest

import failover
from failover.testing import RecordedRequest

from .loader import EMBEDDINGS, ERRORS, RECORDINGS, SUCCESSES, Recording, params
from .oracle import (
    EXPECTED_ERRORS,
    assert_same_usage,
    expected_finish,
    expected_model,
    expected_text,
    expected_tool_calls,
    expected_usage,
    expected_vectors,
    recorded_request_id,
    user_text,
)
from .replay import API_KEY, FACES, chat_text, check_auth, embed_input, play

# The body fields that carry the model and the conversation, per (wire, kind): present in the
# recorded request and in the one sent. Gemini names the model in the path.
CONVERSATION_FIELDS = {
    ("openai", "chat"): ("model", "messages"),
    ("anthropic", "chat"): ("model", "messages", "max_tokens"),
    ("gemini", "chat"): ("contents",),
    ("ollama", "chat"): ("model", "messages", "stream"),
    ("openai", "embed"): ("model", "input"),
    ("gemini", "embed"): ("requests",),
    ("ollama", "embed"): ("model", "input"),
}


def _check_request(rec: Recording, request: RecordedRequest) -> None:
    assert request.method == rec.method
    # The full path: the provider class's default base path plus the endpoint suffix (e.g.
    # /v1beta/models/gemini-2.5-flash:generateContent, /api/chat, /openai/v1/chat/completions).
    sent_path, _, sent_query = request.path.partition("?")
    assert sent_path == rec.path
    if rec.folder == "azure":
        assert sent_query == urlsplit(rec.uri).query  # api-version after the endpoint path

    check_auth(rec, request)

    sent, recorded = request.json, rec.request_json
    fields = CONVERSATION_FIELDS[rec.wire, rec.kind]
    assert set(fields) <= set(recorded), sorted(recorded)
    assert set(fields) <= set(sent), sorted(sent)
    if "model" in fields:
        assert sent["model"] == recorded["model"] == rec.model
    if rec.wire == "gemini":
        assert "model" not in sent  # in the path, as recorded
    if rec.wire == "ollama":
        assert sent["stream"] is recorded["stream"] is False  # Ollama streams unless told not to

    if rec.kind == "chat":
        assert user_text(rec.wire, sent) == chat_text(rec)
    elif rec.wire == "gemini":
        # batchEmbedContents: the very body recorded (model, parts, outputDimensionality).
        assert sent == recorded
    else:
        texts = recorded["input"]
        assert sent["input"] in (texts, [texts] if isinstance(texts, str) else texts)
        assert sent.get("dimensions") == recorded.get("dimensions")


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("rec", params(RECORDINGS, "request"))
def test_recorded_request(rec: Recording, face: str) -> None:
    """The request sent matches the recorded one: method, path, auth header, body shape."""
    _check_request(rec, play(rec, face).request)


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("rec", params(SUCCESSES, "response"))
def test_recorded_success(rec: Recording, face: str) -> None:
    played = play(rec, face)
    r = played.result
    assert isinstance(r, failover.Response), f"expected a Response, got {r!r}"
    assert r.text == expected_text(rec)
    assert r.finish_reason == expected_finish(rec)
    assert r.model == expected_model(rec)
    assert r.provider == rec.folder
    assert r.raw == rec.body_json
    calls = expected_tool_calls(rec)
    assert [(c.name, c.arguments) for c in r.tool_calls] == [(n, a) for _, n, a in calls]
    for call, (expected_id, _, _) in zip(r.tool_calls, calls):
        assert call.id  # the recorded id, or one failover made where the wire has none
        if expected_id is not None:
            assert call.id == expected_id
    assert r.message["role"] == "assistant"
    if recorded_request_id(rec) is not None:
        assert r.request_id == recorded_request_id(rec)
    [attempt] = r.attempts
    assert (attempt.provider, attempt.status, attempt.kind) == (rec.folder, 200, None)
    assert API_KEY not in repr(r)
    played.sleeper.assert_never_slept()


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("rec", params(SUCCESSES, "usage"))
def test_recorded_usage(rec: Recording, face: str) -> None:
    """Every usage figure, with DESIGN §2's one meaning on every wire."""
    r = play(rec, face).result
    assert isinstance(r, failover.Response), f"expected a Response, got {r!r}"
    expected = expected_usage(rec)
    got = r.usage
    assert_same_usage(got, expected)
    # The answering attempt carries the same figures, and is billed.
    [attempt] = r.attempts
    assert attempt.billed is True
    assert_same_usage(attempt.usage or failover.Usage(), expected)
    assert_same_usage(r.total_usage, expected)


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("rec", params(EMBEDDINGS, "embeddings"))
def test_recorded_embeddings(rec: Recording, face: str) -> None:
    played = play(rec, face)
    e = played.result
    assert isinstance(e, failover.Embeddings), f"expected Embeddings, got {e!r}"
    body = rec.body_json
    vectors = expected_vectors(rec)
    if rec.wire == "gemini":
        # batchEmbedContents reports neither the model nor a token count.
        model, input_tokens = rec.model, None
    elif rec.wire == "ollama":
        model, input_tokens = body["model"], body.get("prompt_eval_count")
    else:
        model, input_tokens = body["model"], body["usage"]["prompt_tokens"]
    texts, dimensions = embed_input(rec)
    assert len(e.vectors) == len(vectors) == (1 if isinstance(texts, str) else len(texts))
    assert [len(v) for v in e.vectors] == [dimensions or len(v) for v in vectors]
    assert all(type(x) is float for v in e.vectors for x in v)
    for got, recorded in zip(e.vectors, vectors):  # exactness: test_recorded_embedding_values
        assert all(math.isclose(a, b, rel_tol=1e-12) for a, b in zip(got, recorded))
    assert e.model == model
    assert e.provider == rec.folder
    assert e.usage.input_tokens == input_tokens
    assert e.usage.output_tokens is None
    [attempt] = e.attempts
    assert (attempt.provider, attempt.status, attempt.kind) == (rec.folder, 200, None)
    assert API_KEY not in repr(e)
    played.sleeper.assert_never_slept()


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("rec", params(EMBEDDINGS, "vectors"))
def test_recorded_embedding_values(rec: Recording, face: str) -> None:
    """Every float exactly as the provider sent it (Python's json reads them correctly
    rounded; so must failover)."""
    e = play(rec, face).result
    assert isinstance(e, failover.Embeddings), f"expected Embeddings, got {e!r}"
    differ = [
        (i, j, got, recorded)
        for i, (vg, vr) in enumerate(zip(e.vectors, expected_vectors(rec)))
        for j, (got, recorded) in enumerate(zip(vg, vr))
        if got != recorded
    ]
    assert not differ, f"{len(differ)} floats differ (vector, index, got, recorded): {differ[:5]}"


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("rec", params(ERRORS, "error"))
def test_recorded_error(rec: Recording, face: str) -> None:
    assert rec.id in EXPECTED_ERRORS, (
        f"new error recording {rec.id} (status {rec.status}): read its body and add the class "
        "DESIGN §3.1 asks for to EXPECTED_ERRORS"
    )
    expected_cls, expected_wait, why = EXPECTED_ERRORS[rec.id]
    played = play(rec, face)
    exc = played.result

    assert type(exc) is expected_cls, f"expected {expected_cls.__name__} ({why}), got {exc!r}"
    assert isinstance(exc, failover.ProviderError)
    assert exc.kind == expected_cls.kind
    assert exc.status == rec.status
    assert exc.provider == rec.folder
    assert exc.model == rec.model
    assert exc.body == rec.body.decode("utf-8")
    # No recorded error reports usage: a refusal (4xx, 503, 529) is not billed, another 5xx
    # cannot be known.
    refused = rec.status < 500 or rec.status in (503, 529)
    assert [a.billed for a in exc.attempts][-1:] == [False if refused else None]
    assert exc.attempts[-1].usage is None
    if recorded_request_id(rec) is not None:
        assert exc.request_id == recorded_request_id(rec)

    # The wait hint: what the public parser reads from the recording (measured at the recorded
    # Date, and again now: none of these hints depends on the clock), what reading the headers
    # and body by hand gives, and what the engine attached to the error.
    assert failover.retry_after(list(rec.headers), rec.body, now=rec.date) == expected_wait
    assert failover.retry_after(list(rec.headers), rec.body) == expected_wait
    assert exc.retry_after == expected_wait
    if expected_wait is not None:
        assert isinstance(exc.retry_after, float)

    [attempt] = exc.attempts
    assert attempt.provider == rec.folder
    assert attempt.status == rec.status
    assert attempt.kind == expected_cls.kind
    assert attempt.skipped is None
    played.sleeper.assert_never_slept()

    for text in (str(exc), repr(exc), exc.body or ""):
        assert API_KEY not in text
