"""Every recorded interaction is accounted for: replayed by the chat or stream suite, or
skipped with the reason it is not (an API the contract does not cover, such as OpenAI's
Responses API, DESIGN §5; a call that is not a model call, such as Gemini File Search store
management; image generation, speech or transcription, replayed by test_media.py); and each
provider class's default base URL is where its recordings were made.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

import failover

from .loader import (
    ASPECTS,
    EMBEDDINGS,
    ERRORS,
    FOLDERS,
    KNOWN_DISCREPANCIES,
    MEDIA,
    NOT_REPLAYED,
    RECORDINGS,
    RESPONSES_API,
    STREAMS,
    SUCCESSES,
    UNRECOGNISED,
    Recording,
    params,
)
from .oracle import EXPECTED_ERRORS, EXPECTED_STREAM_ERRORS, STREAM_ERRORS
from .replay import API_KEY, default_base_url, is_loopback, is_ollama_cloud_v1

# How many interactions of each folder are replayed: a loader that silently drops one fails.
REPLAYED_PER_FOLDER = {
    "anthropic": 7,  # 2 x 200, 401, 529, 3 x 429
    "azure": 1,  # 429 (AI Foundry)
    "deepseek": 2,  # 200, 400
    "gemini": 6,  # generateContent 200, 400, 429, 503, 500; batchEmbedContents 200
    "groq": 5,  # 2 x 200, 2 x 429, 404
    "mistral": 3,  # 200, 429, 500
    "ollama": 1,  # native /api/chat 200
    "openai": 3,  # chat 200, chat 429, embeddings 200
    "openrouter": 4,  # 200, 3 x 429
    "xai": 3,  # 2 x 200, 503
}
# And how many streamed interactions (OpenAI's Responses API streams stay skipped).
STREAMED_PER_FOLDER = {
    "anthropic": 3,  # text, text + tool_use, a 200 whose body is only an overloaded error event
    "azure": 0,
    "deepseek": 1,
    "gemini": 1,  # streamGenerateContent?alt=sse, CRLF line ends
    "groq": 3,  # aborted by an error event after reasoning; tool call; reasoning + text
    "mistral": 1,
    "ollama": 2,  # native /api/chat NDJSON; ollama.com /v1 SSE (OpenAICompatible)
    "openai": 1,  # chat completions SSE
    "openrouter": 1,  # ": OPENROUTER PROCESSING" comments
    "xai": 1,  # reasoning_content deltas
}


def test_recordings_found() -> None:
    assert {r.folder for r in RECORDINGS} == set(FOLDERS)
    assert SUCCESSES and ERRORS and EMBEDDINGS


def test_every_interaction_is_accounted_for() -> None:
    """Every recorded interaction is replayed, or skipped for a stated reason."""
    unknown = [r.id for r in NOT_REPLAYED if r.skip == UNRECOGNISED]
    assert not unknown, f"recordings of an endpoint this test does not know: {unknown}"
    replayed = {folder: 0 for folder in FOLDERS}
    for rec in RECORDINGS:
        replayed[rec.folder] += 1
    assert replayed == REPLAYED_PER_FOLDER
    streamed = {folder: 0 for folder in FOLDERS}
    for rec in STREAMS:
        streamed[rec.folder] += 1
    assert streamed == STREAMED_PER_FOLDER
    # Only OpenAI's Responses API streams (and a streamed transcription) are left out.
    assert {r.id for r in NOT_REPLAYED if r.streaming} == {
        r.id for r in NOT_REPLAYED if r.streaming and r.skip in (RESPONSES_API, MEDIA)
    }


def test_every_expectation_matches_a_recording() -> None:
    ids = {r.id for r in RECORDINGS} | {r.id for r in STREAMS}
    assert set(EXPECTED_ERRORS) <= ids, sorted(set(EXPECTED_ERRORS) - ids)
    assert set(EXPECTED_ERRORS) == {r.id for r in ERRORS}
    assert set(EXPECTED_STREAM_ERRORS) == {r.id for r in STREAM_ERRORS}
    for aspect, rec_id in KNOWN_DISCREPANCIES:
        assert aspect in ASPECTS, aspect
        assert rec_id in ids, rec_id


@pytest.mark.parametrize("rec", [pytest.param(r, id=r.id) for r in NOT_REPLAYED])
def test_not_replayed(rec: Recording) -> None:
    pytest.skip(rec.skip or "")


@pytest.mark.parametrize("rec", params(RECORDINGS, "request") + params(STREAMS, "stream-request"))
def test_default_base_url_matches_recording(
    rec: Recording, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The provider class's default base URL is where the recording was made (its scheme and
    host; a local Ollama's port). Where the endpoint is always the caller's own (an Azure
    resource; ollama.com's /v1 through OpenAICompatible) there is no default: the class asks
    for it rather than guess."""
    if rec.folder == "azure":
        monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
        with pytest.raises(failover.ConfigurationError, match="AZURE_OPENAI_ENDPOINT"):
            failover.Azure("recorded-deployment", api_key=API_KEY)
        return
    if is_ollama_cloud_v1(rec):
        with pytest.raises(failover.ConfigurationError, match="needs a base_url"):
            failover.OpenAICompatible(model=rec.model, api_key=API_KEY)
        return
    default, recorded = urlsplit(default_base_url(rec)), urlsplit(rec.uri)
    if is_loopback(rec.uri):
        assert is_loopback(default.geturl())
        assert (default.scheme, default.port) == (recorded.scheme, recorded.port)
    else:
        assert (default.scheme, default.netloc) == (recorded.scheme, recorded.netloc)
    assert rec.path.startswith(default.path)
