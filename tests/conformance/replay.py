"""Plays a recording back through ``failover.testing.MockServer`` and calls it through the
public API.

Each recording is answered byte for byte with its recorded status, headers and body (a stream as
raw pieces: one network read per event, or cut in awkward places) to the provider class of its
folder (``Gemini``, ``Ollama``, the ``Groq`` / ``Mistral`` / ``DeepSeek`` / ``XAI`` /
``OpenRouter`` presets, ...) at its default base path on the MockServer, a single provider, no
retries and a FakeSleeper, through ``prompt`` / ``embed`` / ``stream`` and their async faces.
"""

from __future__ import annotations

import asyncio
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import failover
from failover.testing import FakeSleeper, MockServer, RecordedRequest

from .loader import Recording
from .oracle import user_text

# Long enough to be searched for in every text (DESIGN §2: values under 8 characters are not).
API_KEY = "sk-test-conformance-0123456789"
NO_RETRIES = failover.RetryPolicy(max_retries=0, max_retries_last=0)
PROMPT = "What's 2 + 2?"  # sent when a recording has no plain user text to send again
# Every header that carries a provider key, lower-cased.
AUTH_HEADERS = ("authorization", "x-api-key", "x-goog-api-key", "api-key")
# The header each folder's API documents, for recordings whose recorder filtered the request's
# credential headers (pydantic-ai's cassettes) or dropped its headers (the extracts).
DOCUMENTED_AUTH = {"anthropic": "x-api-key", "gemini": "x-goog-api-key", "azure": "api-key"}

PRESETS: dict[str, Callable[..., failover.Provider]] = {
    "openai": failover.OpenAI,
    "anthropic": failover.Anthropic,
    "gemini": failover.Gemini,
    "ollama": failover.Ollama,
    "groq": failover.Groq,
    "mistral": failover.Mistral,
    "deepseek": failover.DeepSeek,
    "xai": failover.XAI,
    "openrouter": failover.OpenRouter,
}


def is_loopback(uri: str) -> bool:
    return urlsplit(uri).hostname in ("127.0.0.1", "localhost", "::1")


def is_ollama_cloud_v1(rec: Recording) -> bool:
    return rec.folder == "ollama" and rec.wire == "openai"


def default_base_url(rec: Recording) -> str:
    """The base URL the folder's provider class uses when given none."""
    return PRESETS[rec.folder](model=rec.model).base_url


def provider_for(rec: Recording, server: MockServer) -> failover.Provider:
    if rec.folder == "azure":
        # The one Azure recording is Azure AI Foundry ("models as a service"):
        # POST {resource}.services.ai.azure.com/models/chat/completions?api-version=... with the
        # key in `api-key` and the model in the body. failover.Azure speaks Azure OpenAI
        # (/openai/deployments/{d}/... or /openai/v1/...) and cannot send that path, so, as
        # DESIGN §5 says, it is an OpenAI-compatible server: OpenAICompatible at the recorded
        # base path and query, the key passed as the recording sent it (an `api-key` header).
        parts = urlsplit(rec.uri)
        base_path = parts.path[: -len("/chat/completions")]
        return failover.OpenAICompatible(
            model=rec.model,
            base_url=f"{server.url}{base_path}?{parts.query}",
            headers={"api-key": API_KEY},
        )
    if is_ollama_cloud_v1(rec):
        # ollama.com's OpenAI-compatible API (/v1/chat/completions), which failover reaches
        # through OpenAICompatible (failover.Ollama speaks the native /api/chat), the key as a
        # bearer token as recorded.
        return failover.OpenAICompatible(
            model=rec.model, base_url=f"{server.url}/v1", api_key=API_KEY
        )
    # The preset's own base path (its default base_url's path, e.g. Groq's /openai/v1) on the
    # MockServer: the full request path must then be the recorded one.
    base_url = server.url + urlsplit(default_base_url(rec)).path.rstrip("/")
    cls = PRESETS[rec.folder]
    if rec.folder == "ollama":
        return cls(model=rec.model, base_url=base_url)  # a local Ollama needs no key
    return cls(model=rec.model, api_key=API_KEY, base_url=base_url)


def chat_text(rec: Recording) -> str:
    """What the test sends: the recorded last user text when there is one."""
    return user_text(rec.wire, rec.request_json) or PROMPT


def embed_input(rec: Recording) -> tuple[str | list[str], int | None]:
    """The recorded texts (as the recording gave them: one str or a list) and dimensions."""
    body = rec.request_json
    if rec.wire == "gemini":
        requests = body["requests"]
        texts = ["".join(p["text"] for p in r["content"]["parts"]) for r in requests]
        return texts, requests[0].get("outputDimensionality")
    return body["input"], body.get("dimensions")


FACES = ("sync", "async")

Result = failover.Response | failover.Embeddings | failover.FailoverError


@dataclass
class Played:
    result: Result
    sleeper: FakeSleeper
    request: RecordedRequest  # what the client sent


def play(rec: Recording, face: str) -> Played:
    """Plays the recorded response back and calls it once, through ``prompt`` /
    ``prompt_async`` or ``embed`` / ``embed_async``; returns the answer or the error."""
    server = MockServer()
    sleeper = FakeSleeper()
    try:
        server.push(status=rec.status, headers=rec.playback_headers, body=rec.body)
        client = failover.Client(
            {rec.folder: provider_for(rec, server)}, retry=NO_RETRIES, sleeper=sleeper
        )
        result: Result
        try:
            if rec.kind == "embed":
                texts, dimensions = embed_input(rec)
                if face == "sync":
                    result = client.embed(texts, dimensions=dimensions, timeout=5.0)
                else:
                    result = asyncio.run(
                        client.embed_async(texts, dimensions=dimensions, timeout=5.0)
                    )
            elif face == "sync":
                result = client.prompt(chat_text(rec), timeout=5.0)
            else:
                result = asyncio.run(client.prompt_async(chat_text(rec), timeout=5.0))
        except failover.FailoverError as exc:
            result = exc
        finally:
            client.close()
        assert server.pending == 0, f"the recorded response was not requested: {result!r}"
        [request] = server.requests
        return Played(result, sleeper, request)
    finally:
        server.close()


def _expected_auth_header(rec: Recording) -> str | None:
    """The credential header the recorded request carried (lower-cased), or None."""
    recorded = [h for h in AUTH_HEADERS if h in rec.request_header_names]
    if recorded:
        [name] = recorded
        return name
    if is_loopback(rec.uri):
        return None  # a local Ollama: the recorded request carried no key
    # The recorder filtered the credential headers (pydantic-ai) or dropped every request
    # header (the extracts): the header the folder's API documents.
    return DOCUMENTED_AUTH.get(rec.folder, "authorization")


def check_auth(rec: Recording, request: RecordedRequest) -> None:
    """The key goes in the header the recording used (the folder's documented one where the
    recorder dropped it), and in no other."""
    expected_auth = _expected_auth_header(rec)
    sent_auth = [h for h in AUTH_HEADERS if h in request.headers]
    assert sent_auth == ([expected_auth] if expected_auth else []), request
    if expected_auth == "authorization":
        assert request.headers["authorization"] == f"Bearer {API_KEY}"
    elif expected_auth is not None:
        assert request.headers[expected_auth] == API_KEY
    if rec.wire == "anthropic":
        assert request.headers.get("anthropic-version")  # as recorded (where not filtered)


def event_pieces(rec: Recording) -> list[bytes]:
    """The recorded body cut after each event (SSE: after its blank line; NDJSON: after each
    line): one network read per event, as a provider sends them. Together, byte for byte the
    recorded body."""
    if rec.wire == "ollama":
        pieces = rec.body.splitlines(keepends=True)
    else:
        pieces = re.split(rb"(?<=\r\n\r\n)|(?<=\n\n)|(?<=\r\r)", rec.body)
    pieces = [p for p in pieces if p]
    assert b"".join(pieces) == rec.body
    return pieces


def awkward_pieces(rec: Recording) -> list[bytes]:
    """The recorded body cut once inside every event, in turn one byte before its end (inside
    the blank line that ends an SSE event, between CR and LF in Gemini's CRLF ones; before an
    NDJSON line's LF) and in its middle (inside the JSON, maybe inside a character): no read
    ends where an event does."""
    cuts, offset = [], 0
    for i, piece in enumerate(event_pieces(rec)):
        cuts.append(offset + (len(piece) - 1 if i % 2 == 0 else len(piece) // 2))
        offset += len(piece)
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(rec.body)}), len(rec.body)]
    pieces = [rec.body[a:b] for a, b in itertools.pairwise(bounds)]
    assert b"".join(pieces) == rec.body
    return pieces


def _recorded_tools(rec: Recording) -> list[dict[str, Any]]:
    """The tools the recorded request declared, OpenAI-style (what ``tools=`` takes)."""
    tools = []
    for tool in (rec.request_json or {}).get("tools") or []:
        if "function" in tool:  # Chat Completions
            tools.append({"type": "function", "function": tool["function"]})
        else:  # Anthropic
            function = {"name": tool["name"], "parameters": tool.get("input_schema")}
            if tool.get("description"):
                function["description"] = tool["description"]
            tools.append({"type": "function", "function": function})
    return tools


@dataclass
class PlayedStream:
    chunks: list[failover.Chunk]  # every chunk yielded, up to the end or the error
    response: failover.Response | None  # stream.response, when the stream ended
    error: failover.FailoverError | None
    sleeper: FakeSleeper
    requests: list[RecordedRequest]  # what the client sent
    events: list[Any]  # on_event's


def run_stream(
    script: list[tuple[Recording, list[bytes]]],
    chain: list[Recording],
    face: str,
    retry: failover.RetryPolicy,
) -> PlayedStream:
    """Plays the recorded streamed responses back in order, each as raw pieces with its
    recorded headers, and reads one ``stream`` / ``stream_async`` call through the providers
    of ``chain``'s folders (in that order), asking what the first recording asked."""
    server = MockServer()
    sleeper = FakeSleeper()
    events: list[Any] = []
    try:
        for rec, pieces in script:
            server.push(status=rec.status, headers=rec.playback_headers, chunks=pieces)
        client = failover.Client(
            {rec.folder: provider_for(rec, server) for rec in chain},
            retry=retry,
            sleeper=sleeper,
            on_event=events.append,
        )
        first = chain[0]
        prompt, tools = chat_text(first), _recorded_tools(first) or None
        chunks: list[failover.Chunk] = []
        response: failover.Response | None = None
        error: failover.FailoverError | None = None
        try:
            if face == "sync":
                with client.stream(prompt, tools=tools, timeout=5.0) as stream:
                    for chunk in stream:
                        chunks.append(chunk)
                response = stream.response
            else:

                async def read() -> failover.Response:
                    async with client.stream_async(prompt, tools=tools, timeout=5.0) as stream:
                        async for chunk in stream:
                            chunks.append(chunk)
                    return stream.response

                response = asyncio.run(read())
        except failover.FailoverError as exc:
            error = exc
        finally:
            client.close()
        assert server.pending == 0, f"a recorded response was not requested: {error!r}"
        return PlayedStream(chunks, response, error, sleeper, list(server.requests), events)
    finally:
        server.close()


_PLAYED_STREAMS: dict[tuple[str, str, str], PlayedStream] = {}


def play_stream(rec: Recording, face: str, split: str = "events") -> PlayedStream:
    """One recorded stream through its folder's provider, no retries; played once per face
    and split, and shared by the tests of each aspect (a replay paces its pieces apart)."""
    key = (rec.id, face, split)
    if key not in _PLAYED_STREAMS:
        pieces = event_pieces(rec) if split == "events" else awkward_pieces(rec)
        _PLAYED_STREAMS[key] = run_stream([(rec, pieces)], [rec], face, NO_RETRIES)
    return _PLAYED_STREAMS[key]
