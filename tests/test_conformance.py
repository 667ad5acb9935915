"""Conformance against REAL recorded provider traffic (DESIGN §5).

Every model call recorded in ``<repo>/../shared/fixtures/recorded/`` (ten provider folders, see
its SOURCES.md) is played back byte for byte through ``failover.testing.MockServer`` and called
through the public API with the provider class of its folder (``Gemini``, ``Ollama``, the
``Groq`` / ``Mistral`` / ``DeepSeek`` / ``XAI`` / ``OpenRouter`` presets, ...), a single
provider, no retries and a FakeSleeper.

Non-streaming interactions go through ``prompt`` / ``prompt_async`` for chat and ``embed`` /
``embed_async`` for embeddings:

- a 200 must give the recorded text, tool calls, usage (DESIGN §2's one meaning), finish reason
  (the one vocabulary) and model; an embeddings 200 the recorded vectors, exactly, with model and
  usage;
- an error must raise the class of DESIGN §3.1 (decided per recording by reading its body, in
  ``EXPECTED_ERRORS`` below), with the recorded status, the wait hint of DESIGN §3.2 (both as
  ``failover.retry_after`` computes it and as hard-coded from reading the headers and body), one
  attempt, and no API key anywhere in it;
- the request the client sends must match the recorded one: method, full path (the preset's
  default base path plus the endpoint), the auth header the recording used, and the body fields
  that carry the model and the conversation.

Streaming interactions (SSE, and Ollama's NDJSON) go through ``stream`` / ``stream_async``, the
recorded body played back as raw pieces (one network read per recorded event or line, and again
cut in awkward places) with its recorded content type (DESIGN §3.6):

- a complete stream must yield the text, reasoning and tool calls this module decodes from the
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

Interactions that are not replayed are listed as skips with their reason: APIs the contract does
not cover (OpenAI's Responses API, DESIGN §5) and calls that are not model calls (Gemini File
Search store management).

The recordings are read from the shared folder at test time and never copied into this
repository; when the folder is absent the whole module skips.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, Callable, Optional, Union
from urllib.parse import urlsplit

import pytest

import failover
from failover.testing import FakeSleeper, MockServer, RecordedRequest

RECORDED = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "recorded"
if not RECORDED.is_dir():
    pytest.skip(
        f"recorded provider traffic not found at {RECORDED} (expected a shared/ folder beside "
        "the repository, see DESIGN.md §5)",
        allow_module_level=True,
    )

yaml = pytest.importorskip("yaml", reason="PyYAML is needed to read the VCR cassettes")

# Long enough to be searched for in every text (DESIGN §2: values under 8 characters are not).
API_KEY = "sk-test-conformance-0123456789"
FOLDERS = (
    "anthropic",
    "azure",
    "deepseek",
    "gemini",
    "groq",
    "mistral",
    "ollama",
    "openai",
    "openrouter",
    "xai",
)
# Hop-by-hop or transport-level headers: MockServer frames the body itself.
DROPPED_HEADERS = frozenset(
    {"transfer-encoding", "content-length", "content-encoding", "connection", "keep-alive"}
)
NO_RETRIES = failover.RetryPolicy(max_retries=0, max_retries_last=0)
PROMPT = "What's 2 + 2?"  # sent when a recording has no plain user text to send again

# Every header that carries a provider key, lower-cased.
AUTH_HEADERS = ("authorization", "x-api-key", "x-goog-api-key", "api-key")
# The header each folder's API documents, for recordings whose recorder filtered the request's
# credential headers (pydantic-ai's cassettes) or dropped its headers (the extracts).
DOCUMENTED_AUTH = {"anthropic": "x-api-key", "gemini": "x-goog-api-key", "azure": "api-key"}

# Why an interaction is not replayed (the skips, with these reasons).
RESPONSES_API = "OpenAI's Responses API (/v1/responses): not an API the contract covers (DESIGN §5)"
FILE_SEARCH = "Gemini File Search store management (create, upload, delete): not a model call"
MEDIA = "image generation, speech or transcription: a call type issue 20 builds, replayed there"
UNRECOGNISED = "unrecognised endpoint"


# --------------------------------------------------------------------------- cassette loading


class _CassetteLoader(yaml.SafeLoader):
    """SafeLoader that also reads Ruby VCR's ``!binary`` (base64) scalars."""


def _binary(loader: yaml.SafeLoader, node: yaml.Node) -> bytes:
    return base64.b64decode(loader.construct_scalar(node))  # type: ignore[arg-type]


_CassetteLoader.add_constructor("!binary", _binary)


@dataclass(frozen=True)
class Recording:
    """One recorded request/response pair, normalised across the cassette formats."""

    rel: str  # path relative to RECORDED
    index: int  # interaction index inside the file
    folder: str  # top-level folder: the provider family
    method: str  # upper-case
    uri: str
    request_json: Any
    request_header_names: tuple[str, ...]  # lower-cased; empty when the recorder dropped them
    status: int
    headers: tuple[tuple[str, str], ...]  # every recorded header value, names as recorded
    body: bytes  # decoded (gunzipped) body bytes
    wire: str  # "openai", "anthropic", "gemini", "ollama"; "" when not replayed
    kind: str  # "chat" or "embed"; "" when not replayed
    skip: Optional[str]  # why it is not replayed, or None
    streaming: bool  # a streamed answer (SSE / NDJSON), replayed through client.stream()

    @property
    def id(self) -> str:
        return f"{self.rel}#{self.index}"

    def header(self, name: str) -> Optional[str]:
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None

    @property
    def playback_headers(self) -> list[tuple[str, str]]:
        return [(k, v) for k, v in self.headers if k.lower() not in DROPPED_HEADERS]

    @property
    def date(self) -> Optional[float]:
        """The recorded Date header as Unix seconds, or None."""
        value = self.header("date")
        return parsedate_to_datetime(value).timestamp() if value else None

    @property
    def path(self) -> str:
        return urlsplit(self.uri).path

    @property
    def model(self) -> str:
        """The model the recorded request asked for: the body's ``model``, or Gemini's
        ``/models/{model}:method`` path segment."""
        model = (self.request_json or {}).get("model")
        if isinstance(model, str) and model:
            return model
        last = self.path.rsplit("/", 1)[-1]
        if ":" in last:
            return last.split(":", 1)[0]
        return "recorded-model"

    @property
    def body_json(self) -> Any:
        return json.loads(self.body)


def _as_bytes(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    return str(value).encode("utf-8")


def _request_json(request: dict[str, Any]) -> Any:
    if "parsed_body" in request:
        return request["parsed_body"]
    body = request.get("body")
    raw = body.get("string") if isinstance(body, dict) else body
    raw = _as_bytes(raw)
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


def _status(response: dict[str, Any]) -> int:
    if "status_code" in response:  # vcrpy's older httpx serialisation (dd-trace-py's v1/)
        return int(response["status_code"])
    return int(response["status"]["code"])


def _response_body(response: dict[str, Any], headers: list[tuple[str, str]]) -> bytes:
    if "parsed_body" in response:  # pydantic-ai serialiser: JSON rewritten as YAML
        return json.dumps(response["parsed_body"]).encode("utf-8")
    if "content" in response and "body" not in response:  # older httpx: the decoded body
        return _as_bytes(response["content"])
    body = response.get("body")
    raw = _as_bytes(body.get("string") if isinstance(body, dict) else body)
    gzipped = any(k.lower() == "content-encoding" and "gzip" in v.lower() for k, v in headers)
    if gzipped or raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return raw


def _header_pairs(headers: Any) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for name, values in (headers or {}).items():
        for value in values if isinstance(values, list) else [values]:
            pairs.append((str(name), str(value)))
    return pairs


def _load(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return json.loads(text)  # type: ignore[no-any-return]
    return yaml.load(text, Loader=_CassetteLoader)  # type: ignore[no-any-return]


def _is_streaming(uri: str, request_json: Any, headers: list[tuple[str, str]]) -> bool:
    if isinstance(request_json, dict) and request_json.get("stream") is True:
        return True
    if ":streamGenerateContent" in uri:
        return True
    return any(
        k.lower() == "content-type" and ("text/event-stream" in v or "ndjson" in v)
        for k, v in headers
    )


def _classify(folder: str, path: str) -> tuple[str, str, Optional[str]]:
    """(wire, kind, why not replayed) of an interaction, from its endpoint."""
    if folder == "anthropic" and path.endswith("/v1/messages"):
        return "anthropic", "chat", None
    if path.endswith("/chat/completions"):
        return "openai", "chat", None  # also ollama.com's OpenAI-compatible /v1
    if path.endswith("/embeddings"):
        return "openai", "embed", None
    if path.endswith((":generateContent", ":streamGenerateContent")):
        return "gemini", "chat", None
    if path.endswith(":batchEmbedContents"):
        return "gemini", "embed", None
    if path == "/api/chat":
        return "ollama", "chat", None
    if path == "/api/embed":
        return "ollama", "embed", None
    if path.endswith("/v1/responses"):
        return "", "", RESPONSES_API
    if "/images/" in path or "/audio/" in path:
        return "", "", MEDIA
    if "/fileSearchStores" in path:
        return "", "", FILE_SEARCH
    return "", "", UNRECOGNISED


def _mime(blob: dict[str, Any]) -> str:
    return str(blob.get("mimeType") or blob.get("mime_type") or "")


def _gemini_media(request_json: Any) -> bool:
    """A generateContent call that asks for images or speech, or sends audio to transcribe."""
    if not isinstance(request_json, dict):
        return False
    config = request_json.get("generationConfig") or {}
    if {"IMAGE", "AUDIO"} & {str(m).upper() for m in config.get("responseModalities") or []}:
        return True
    return any(
        str(_mime(part.get("inlineData") or part.get("inline_data") or {}))
        .lower()
        .startswith("audio/")
        for content in request_json.get("contents") or []
        for part in (content.get("parts") or [] if isinstance(content, dict) else [])
        if isinstance(part, dict)
    )


def _recordings() -> Iterator[Recording]:
    for path in sorted(RECORDED.rglob("*")):
        if path.suffix not in (".yml", ".yaml", ".json") or not path.is_file():
            continue
        rel = path.relative_to(RECORDED).as_posix()
        folder = rel.split("/", 1)[0]
        if folder not in FOLDERS:
            continue
        data = _load(path)
        interactions = data.get("http_interactions") or data.get("interactions") or []
        for index, interaction in enumerate(interactions):
            request, response = interaction["request"], interaction["response"]
            uri = str(request["uri"])
            headers = _header_pairs(response.get("headers"))
            request_json = _request_json(request)
            wire, kind, skip = _classify(folder, urlsplit(uri).path)
            if wire == "gemini" and _gemini_media(request_json):
                wire, kind, skip = "", "", MEDIA
            yield Recording(
                rel=rel,
                index=index,
                folder=folder,
                method=str(request.get("method", "")).upper(),
                uri=uri,
                request_json=request_json,
                request_header_names=tuple(str(k).lower() for k in request.get("headers") or {}),
                status=_status(response),
                headers=tuple(headers),
                body=_response_body(response, headers),
                wire=wire,
                kind=kind,
                skip=skip,
                streaming=_is_streaming(uri, request_json, headers),
            )


ALL = list(_recordings())
RECORDINGS = [r for r in ALL if r.skip is None and not r.streaming]
STREAMS = [r for r in ALL if r.skip is None and r.streaming]
NOT_REPLAYED = [r for r in ALL if r.skip is not None]

# --------------------------------------------------------------------------- expectations

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

# Per error recording: the class DESIGN §3.1 asks for (read from the recorded body) and the
# wait hint DESIGN §3.2 gives (read from the recorded headers and body). None of these hints
# depends on the clock: no HTTP-date retry-after and no exhausted reset header among them.
_ANTHROPIC_429_41 = (
    "anthropic/chat_real_error_scenarios_anthropic_claude-haiku-4-5_handles_context_length_"
    "exceeded_errors.yml#0"
)
_ANTHROPIC_429_NO_RETRY = (
    "anthropic/ruby_llm@0950693/chat_real_error_scenarios_anthropic_claude-haiku-4-5_handles_"
    "context_length_exceeded_errors.yml#0"
)
EXPECTED_ERRORS: dict[str, tuple[type[failover.ProviderError], Optional[float], str]] = {
    # 401 authentication_error "invalid x-api-key"; x-should-retry: false.
    "anthropic/chat_error_handling_with_anthropic_claude-haiku-4-5_raises_appropriate_auth_"
    "error.yml#0": (failover.AuthenticationError, None, "401"),
    # 529 overloaded_error, x-should-retry: true, no wait header.
    "anthropic/chat_function_calling_anthropic_claude-3-5-haiku-20241022_can_use_tools_without_"
    "parameters.yml#0": (failover.ProviderOverloaded, None, "Anthropic 529"),
    # 429 rate_limit_error, retry-after: 41, x-should-retry: true; the reset headers are either
    # the 1970 placeholder or belong to a family with tokens remaining.
    _ANTHROPIC_429_41: (failover.RateLimited, 41.0, "retry-after: 41"),
    # Same test a month later: x-should-retry: false and no retry-after -> no hint.
    _ANTHROPIC_429_NO_RETRY: (failover.RateLimited, None, "x-should-retry: false"),
    # pydantic-ai: 429 rate_limit_error, retry-after: 4 (other headers filtered by the recorder).
    "anthropic/test_tool_choice_none_live.yaml#0": (failover.RateLimited, 4.0, "retry-after: 4"),
    # Azure AI Foundry 429 RateLimitReached: Retry-After: 1 and retry-after-ms: 0 -> ms wins.
    "azure/chat_real_error_scenarios_azure_grok-4-1-fast-non-reasoning_handles_context_length_"
    "exceeded_errors.yml#0": (failover.RateLimited, 0.0, "retry-after-ms: 0 beats retry-after"),
    # 400 invalid_request_error "This model's maximum context length is ..." (octet-stream).
    "deepseek/chat_real_error_scenarios_deepseek_deepseek-chat_handles_context_length_exceeded_"
    "errors.yml#0": (failover.ContextLengthExceeded, None, "400 context length"),
    # Gemini 400 INVALID_ARGUMENT whose ErrorInfo reason is API_KEY_INVALID ("API key not
    # valid"): a bad key, though the status is 400.
    "gemini/chat_error_handling_with_gemini_gemini-2_5-flash_raises_appropriate_auth_error.yml#0": (
        failover.AuthenticationError,
        None,
        "400 API_KEY_INVALID",
    ),
    # Gemini 429 RESOURCE_EXHAUSTED, a per-minute input-token quota (QuotaFailure
    # GenerateContentPaidTierInputTokensPerModelPerMinute), no Retry-After header; the body's
    # RetryInfo says retryDelay "48s" (the message's "Please retry in 48.9s" is not a hint).
    "gemini/chat_real_error_scenarios_gemini_gemini-2_5-flash_handles_context_length_exceeded_"
    "errors.yml#0": (failover.RateLimited, 48.0, "RetryInfo.retryDelay 48s"),
    # Gemini 503 UNAVAILABLE "The model is overloaded. Please try again later."
    "gemini/test_google_model_file_search_tool.yaml#3": (
        failover.ProviderOverloaded,
        None,
        "503 UNAVAILABLE",
    ),
    # Gemini 500 INTERNAL "An internal error has occurred": a 5xx that is not overloaded.
    "gemini/test_google_recursive_schema_native_output_gemini_2_5.yaml#0": (
        failover.ServerError,
        None,
        "500 INTERNAL",
    ),
    # Groq 429 rate_limit_exceeded (TPM), retry-after: 5, then 7.
    "groq/extracts/test_multimodal_tool_return_matrix[direct-url-audio-groq].yaml.extract.json#0": (
        failover.RateLimited,
        5.0,
        "retry-after: 5",
    ),
    "groq/extracts/test_multimodal_tool_return_matrix[direct-url-audio-groq].yaml.extract.json#1": (
        failover.RateLimited,
        7.0,
        "retry-after: 7",
    ),
    # Groq 404 model_not_found -> ModelNotFound (a BadRequest that fails over).
    "groq/test_tool_regular_error.yaml#0": (failover.ModelNotFound, None, "404 model_not_found"),
    # Mistral 429 rate_limited code 1300; its x-ratelimit-*-minute headers are not reset hints.
    "mistral/chat_real_error_scenarios_mistral_mistral-small-latest_handles_context_length_"
    "exceeded_errors.yml#0": (failover.RateLimited, None, "Mistral 429"),
    # Mistral 500 internal_server_error "Service unavailable." -> a 5xx that is not overloaded.
    "mistral/ruby_llm@eca308b/chat_real_error_scenarios_mistral_mistral-small-latest_handles_"
    "context_length_exceeded_errors.yml#0": (failover.ServerError, None, "500"),
    # OpenAI 429 rate_limit_exceeded "Request too large ... (TPM)": too large, not a rate limit.
    # No limit has remaining 0, so the x-ratelimit-reset-* headers are no hint.
    "openai/chat_real_error_scenarios_openai_gpt-4_1-nano_handles_context_length_exceeded_"
    "errors.yml#0": (failover.ContextLengthExceeded, None, "429 request too large"),
    # OpenRouter 429 "Provider returned error" (upstream Google rate limit), no wait header.
    "openrouter/test_openrouter_errors_raised.yaml#0": (failover.RateLimited, None, "429"),
    "openrouter/test_openrouter_errors_raised.yaml#1": (failover.RateLimited, None, "429"),
    "openrouter/test_openrouter_errors_raised.yaml#2": (failover.RateLimited, None, "429"),
    # xAI 503 "The model is at capacity" -> an overloaded status.
    "xai/chat_tool_choice_and_parallel_control_xai_grok-4-fast-non-reasoning_respects_choice_"
    "none.yml#0": (failover.ProviderOverloaded, None, "503 at capacity"),
}

_ANTHROPIC_STREAM_OVERLOADED = (
    "anthropic/chat_function_calling_anthropic_claude-3-5-haiku-20241022_can_use_tools_with_"
    "multi-turn_streaming_conversations.yml#1"
)
_GROQ_STREAM_ERROR = "groq/extracts/test_tool_use_failed_error_streaming.yaml.extract.json#0"

# Per streamed recording with an in-stream error event: the ProviderError class DESIGN §3.6
# asks for (raised before any content; the cause of StreamInterrupted after it). Whether the
# error came before or after content, and the text delivered before it, are read from the body.
EXPECTED_STREAM_ERRORS: dict[str, tuple[type[failover.ProviderError], str]] = {
    # HTTP 200 whose SSE body is only `event: error` {"type": "overloaded_error"}: the string
    # code overloaded_error is overloaded, before any content.
    _ANTHROPIC_STREAM_OVERLOADED: (failover.ProviderOverloaded, "in-stream overloaded_error"),
    # Groq, HTTP 200: 92 reasoning deltas (content), then `event: error` whose error carries
    # code "tool_use_failed" (none of DESIGN's three string codes), type
    # invalid_request_error and status_code 400: "anything else by its HTTP status if the event
    # carries one" -> a 400 -> BadRequest, the cause of StreamInterrupted.
    _GROQ_STREAM_ERROR: (failover.BadRequest, "in-stream tool_use_failed, status_code 400"),
}

# The aspects a test checks, for KNOWN_DISCREPANCIES.
ASPECTS = (
    "request",
    "response",
    "usage",
    "error",
    "embeddings",
    "vectors",
    "stream-request",
    "stream-response",
    "stream-usage",
    "stream-error",
    "stream-error-class",
    "stream-framing",
)

# Cases where failover's behaviour is wrong per DESIGN.md: (aspect, id) -> reason (strict xfail
# of the tests of that aspect for that recording, so every other aspect is still checked).
KNOWN_DISCREPANCIES: dict[tuple[str, str], str] = {}

SUCCESSES = [r for r in RECORDINGS if r.kind == "chat" and r.status == 200]
EMBEDDINGS = [r for r in RECORDINGS if r.kind == "embed" and r.status == 200]
ERRORS = [r for r in RECORDINGS if r.status != 200]


def _params(recordings: list[Recording], aspect: str) -> list[Any]:
    params = []
    for rec in recordings:
        marks = []
        reason = KNOWN_DISCREPANCIES.get((aspect, rec.id))
        if reason is not None:
            marks.append(pytest.mark.xfail(strict=True, reason=reason))
        params.append(pytest.param(rec, id=rec.id, marks=marks))
    return params


# --------------------------------------------------------------------------- the providers

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


def _is_loopback(uri: str) -> bool:
    return urlsplit(uri).hostname in ("127.0.0.1", "localhost", "::1")


def _is_ollama_cloud_v1(rec: Recording) -> bool:
    return rec.folder == "ollama" and rec.wire == "openai"


def _default_base_url(rec: Recording) -> str:
    """The base URL the folder's provider class uses when given none."""
    return PRESETS[rec.folder](model=rec.model).base_url


def _provider(rec: Recording, server: MockServer) -> failover.Provider:
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
    if _is_ollama_cloud_v1(rec):
        # ollama.com's OpenAI-compatible API (/v1/chat/completions), which failover reaches
        # through OpenAICompatible (failover.Ollama speaks the native /api/chat), the key as a
        # bearer token as recorded.
        return failover.OpenAICompatible(
            model=rec.model, base_url=f"{server.url}/v1", api_key=API_KEY
        )
    # The preset's own base path (its default base_url's path, e.g. Groq's /openai/v1) on the
    # MockServer: the full request path must then be the recorded one.
    base_url = server.url + urlsplit(_default_base_url(rec)).path.rstrip("/")
    cls = PRESETS[rec.folder]
    if rec.folder == "ollama":
        return cls(model=rec.model, base_url=base_url)  # a local Ollama needs no key
    return cls(model=rec.model, api_key=API_KEY, base_url=base_url)


# --------------------------------------------------------------------------- the call


def _user_text(wire: str, body: Any) -> Optional[str]:
    """The text of the last user turn of a chat request body (any wire), or None when it has
    no plain text."""
    if not isinstance(body, dict):
        return None
    turns = body.get("contents") if wire == "gemini" else body.get("messages")
    for turn in reversed(turns or []):
        if turn.get("role") != "user":
            continue
        if wire == "gemini":
            parts = turn.get("parts") or []
        elif isinstance(turn.get("content"), str):
            return turn["content"]  # type: ignore[no-any-return]
        else:
            parts = turn.get("content") or []
        texts = [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return "".join(texts) if texts else None
    return None


def _chat_text(rec: Recording) -> str:
    """What the test sends: the recorded last user text when there is one."""
    return _user_text(rec.wire, rec.request_json) or PROMPT


def _embed_input(rec: Recording) -> tuple[Union[str, list[str]], Optional[int]]:
    """The recorded texts (as the recording gave them: one str or a list) and dimensions."""
    body = rec.request_json
    if rec.wire == "gemini":
        requests = body["requests"]
        texts = ["".join(p["text"] for p in r["content"]["parts"]) for r in requests]
        return texts, requests[0].get("outputDimensionality")
    return body["input"], body.get("dimensions")


FACES = ("sync", "async")

Result = Union[failover.Response, failover.Embeddings, failover.FailoverError]


@dataclass
class Played:
    result: Result
    sleeper: FakeSleeper
    request: RecordedRequest  # what the client sent


def _play(rec: Recording, face: str) -> Played:
    """Plays the recorded response back and calls it once, through ``prompt`` /
    ``prompt_async`` or ``embed`` / ``embed_async``; returns the answer or the error."""
    server = MockServer()
    sleeper = FakeSleeper()
    try:
        server.push(status=rec.status, headers=rec.playback_headers, body=rec.body)
        client = failover.Client(
            {rec.folder: _provider(rec, server)}, retry=NO_RETRIES, sleeper=sleeper
        )
        result: Result
        try:
            if rec.kind == "embed":
                texts, dimensions = _embed_input(rec)
                if face == "sync":
                    result = client.embed(texts, dimensions=dimensions, timeout=5.0)
                else:
                    result = asyncio.run(
                        client.embed_async(texts, dimensions=dimensions, timeout=5.0)
                    )
            elif face == "sync":
                result = client.prompt(_chat_text(rec), timeout=5.0)
            else:
                result = asyncio.run(client.prompt_async(_chat_text(rec), timeout=5.0))
        except failover.FailoverError as exc:
            result = exc
        finally:
            client.close()
        assert server.pending == 0, f"the recorded response was not requested: {result!r}"
        [request] = server.requests
        return Played(result, sleeper, request)
    finally:
        server.close()


# --------------------------------------------------------------------------- the request


def _expected_auth_header(rec: Recording) -> Optional[str]:
    """The credential header the recorded request carried (lower-cased), or None."""
    recorded = [h for h in AUTH_HEADERS if h in rec.request_header_names]
    if recorded:
        [name] = recorded
        return name
    if _is_loopback(rec.uri):
        return None  # a local Ollama: the recorded request carried no key
    # The recorder filtered the credential headers (pydantic-ai) or dropped every request
    # header (the extracts): the header the folder's API documents.
    return DOCUMENTED_AUTH.get(rec.folder, "authorization")


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


def _check_auth(rec: Recording, request: RecordedRequest) -> None:
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


def _check_request(rec: Recording, request: RecordedRequest) -> None:
    assert request.method == rec.method
    # The full path: the provider class's default base path plus the endpoint suffix (e.g.
    # /v1beta/models/gemini-2.5-flash:generateContent, /api/chat, /openai/v1/chat/completions).
    sent_path, _, sent_query = request.path.partition("?")
    assert sent_path == rec.path
    if rec.folder == "azure":
        assert sent_query == urlsplit(rec.uri).query  # api-version after the endpoint path

    _check_auth(rec, request)

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
        assert _user_text(rec.wire, sent) == _chat_text(rec)
    elif rec.wire == "gemini":
        # batchEmbedContents: the very body recorded (model, parts, outputDimensionality).
        assert sent == recorded
    else:
        texts = recorded["input"]
        assert sent["input"] in (texts, [texts] if isinstance(texts, str) else texts)
        assert sent.get("dimensions") == recorded.get("dimensions")


# --------------------------------------------------------------------------- what a 200 means

#: Each wire's stop words in failover's one vocabulary.
ONE_VOCABULARY = {
    # Anthropic
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
    # Gemini
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    # OpenAI's legacy word
    "function_call": "tool_calls",
}


def _gemini_parts(rec: Recording) -> list[dict[str, Any]]:
    return rec.body_json["candidates"][0]["content"].get("parts") or []


def _expected_text(rec: Recording) -> str:
    body = rec.body_json
    if rec.wire == "anthropic":
        return "".join(b["text"] for b in body["content"] if b.get("type") == "text")
    if rec.wire == "gemini":
        return "".join(
            p["text"] for p in _gemini_parts(rec) if "text" in p and not p.get("thought")
        )
    if rec.wire == "ollama":
        return str(body["message"].get("content") or "")
    return str(body["choices"][0]["message"].get("content") or "")


def _expected_tool_calls(rec: Recording) -> list[tuple[Optional[str], str, Any]]:
    """The tool calls recorded in the answer, as (id or None when the wire has none, name,
    parsed arguments)."""
    body = rec.body_json
    if rec.wire == "anthropic":
        return [
            (b["id"], b["name"], b["input"]) for b in body["content"] if b.get("type") == "tool_use"
        ]
    if rec.wire == "gemini":
        calls = [p["functionCall"] for p in _gemini_parts(rec) if "functionCall" in p]
        return [(c.get("id"), c["name"], c.get("args") or {}) for c in calls]
    if rec.wire == "ollama":
        calls = body["message"].get("tool_calls") or []
        return [(None, c["function"]["name"], c["function"]["arguments"]) for c in calls]
    calls = body["choices"][0]["message"].get("tool_calls") or []
    return [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls]


def _expected_finish(rec: Recording) -> str:
    body = rec.body_json
    if _expected_tool_calls(rec) and rec.wire in ("gemini", "ollama"):
        return "tool_calls"  # these wires say STOP / stop when the model called tools
    if rec.wire == "anthropic":
        raw = body["stop_reason"]
    elif rec.wire == "gemini":
        raw = body["candidates"][0]["finishReason"]
    elif rec.wire == "ollama":
        raw = body["done_reason"]
    else:
        raw = body["choices"][0]["finish_reason"]
    return str(ONE_VOCABULARY.get(raw, raw))


def _expected_model(rec: Recording) -> str:
    body = rec.body_json
    return body["modelVersion"] if rec.wire == "gemini" else body["model"]  # type: ignore[no-any-return]


@dataclass(frozen=True)
class ExpectedUsage:
    input_tokens: Optional[int]
    output_tokens: Optional[int]
    cache_read_tokens: Optional[int]
    reasoning_tokens: Optional[int]
    cache_write_tokens: Optional[int] = None


def _expected_usage(rec: Recording) -> ExpectedUsage:
    """The usage of a non-streamed answer."""
    body = rec.body_json
    if rec.wire == "gemini":
        return _usage_of("gemini", body["usageMetadata"])
    if rec.wire == "ollama":
        return _usage_of("ollama", body)
    return _usage_of(rec.wire, body["usage"])


def _usage_of(wire: str, usage: dict[str, Any]) -> ExpectedUsage:
    """DESIGN §2's one meaning of a wire's usage report (Anthropic's and OpenAI's ``usage``,
    Gemini's ``usageMetadata``, Ollama's final object): ``input_tokens`` counts every input
    token (cache included); ``output_tokens`` includes the reasoning tokens, and
    ``reasoning_tokens`` is that part."""
    if wire == "anthropic":
        read = usage.get("cache_read_input_tokens")
        write = usage.get("cache_creation_input_tokens")
        given = usage.get("input_tokens")
        every_input = None if given is None else given + (read or 0) + (write or 0)
        return ExpectedUsage(every_input, usage.get("output_tokens"), read, None, write)
    if wire == "gemini":
        # input = promptTokenCount; output = candidatesTokenCount + thoughtsTokenCount (the
        # thoughts are not in candidatesTokenCount); reasoning = thoughtsTokenCount.
        thoughts = usage.get("thoughtsTokenCount")
        output = usage.get("candidatesTokenCount", 0) + (thoughts or 0)
        return ExpectedUsage(
            usage.get("promptTokenCount"), output, usage.get("cachedContentTokenCount"), thoughts
        )
    if wire == "ollama":
        return ExpectedUsage(usage.get("prompt_eval_count"), usage.get("eval_count"), None, None)
    reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens")
    output = usage.get("completion_tokens")
    total = usage.get("total_tokens")
    if (
        reasoning
        and output is not None
        and total == usage.get("prompt_tokens", 0) + output + reasoning
    ):
        # The provider counts reasoning outside completion_tokens (its total says so):
        # output_tokens must include it.
        output += reasoning
    prompt_details = usage.get("prompt_tokens_details") or {}
    return ExpectedUsage(
        usage.get("prompt_tokens"),
        output,
        prompt_details.get("cached_tokens"),
        reasoning,
        prompt_details.get("cache_write_tokens"),  # OpenRouter's; None elsewhere
    )


def _recorded_request_id(rec: Recording) -> Optional[str]:
    """The id OpenAI-style (x-request-id) and Anthropic (request-id) answers carry in a header.
    Other providers' ids (Mistral's correlation id, DeepSeek's trace id, Azure's
    apim-request-id, Gemini's responseId) are not checked: DESIGN names no source for them."""
    return rec.header("x-request-id") or rec.header("request-id")


def _expected_vectors(rec: Recording) -> list[list[float]]:
    body = rec.body_json
    if rec.wire == "gemini":
        return [item["values"] for item in body["embeddings"]]
    if rec.wire == "ollama":
        return body["embeddings"]  # type: ignore[no-any-return]
    return [item["embedding"] for item in sorted(body["data"], key=lambda d: d["index"])]


# --------------------------------------------------------------------------- the cases


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


@pytest.mark.parametrize("rec", _params(RECORDINGS, "request") + _params(STREAMS, "stream-request"))
def test_default_base_url_matches_recording(rec: Recording) -> None:
    """The provider class's default base URL is where the recording was made (its scheme and
    host; a local Ollama's port)."""
    if rec.folder == "azure":
        pytest.skip("an Azure endpoint is always the caller's own resource")
    if _is_ollama_cloud_v1(rec):
        pytest.skip("ollama.com's /v1 is OpenAICompatible's, whose base_url is the caller's")
    default, recorded = urlsplit(_default_base_url(rec)), urlsplit(rec.uri)
    if _is_loopback(rec.uri):
        assert _is_loopback(default.geturl())
        assert (default.scheme, default.port) == (recorded.scheme, recorded.port)
    else:
        assert (default.scheme, default.netloc) == (recorded.scheme, recorded.netloc)
    assert rec.path.startswith(default.path)


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("rec", _params(RECORDINGS, "request"))
def test_recorded_request(rec: Recording, face: str) -> None:
    """The request sent matches the recorded one: method, path, auth header, body shape."""
    _check_request(rec, _play(rec, face).request)


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("rec", _params(SUCCESSES, "response"))
def test_recorded_success(rec: Recording, face: str) -> None:
    played = _play(rec, face)
    r = played.result
    assert isinstance(r, failover.Response), f"expected a Response, got {r!r}"
    assert r.text == _expected_text(rec)
    assert r.finish_reason == _expected_finish(rec)
    assert r.model == _expected_model(rec)
    assert r.provider == rec.folder
    assert r.raw == rec.body_json
    calls = _expected_tool_calls(rec)
    assert [(c.name, c.arguments) for c in r.tool_calls] == [(n, a) for _, n, a in calls]
    for call, (expected_id, _, _) in zip(r.tool_calls, calls):
        assert call.id  # the recorded id, or one failover made where the wire has none
        if expected_id is not None:
            assert call.id == expected_id
    assert r.message["role"] == "assistant"
    if _recorded_request_id(rec) is not None:
        assert r.request_id == _recorded_request_id(rec)
    [attempt] = r.attempts
    assert (attempt.provider, attempt.status, attempt.kind) == (rec.folder, 200, None)
    assert API_KEY not in repr(r)
    played.sleeper.assert_never_slept()


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("rec", _params(SUCCESSES, "usage"))
def test_recorded_usage(rec: Recording, face: str) -> None:
    """Every usage figure, with DESIGN §2's one meaning on every wire."""
    r = _play(rec, face).result
    assert isinstance(r, failover.Response), f"expected a Response, got {r!r}"
    expected = _expected_usage(rec)
    got = r.usage
    assert (got.input_tokens, got.output_tokens) == (
        expected.input_tokens,
        expected.output_tokens,
    ), got
    assert got.cache_read_tokens == expected.cache_read_tokens, got
    assert got.reasoning_tokens == expected.reasoning_tokens, got
    assert got.cache_write_tokens == expected.cache_write_tokens, got


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("rec", _params(EMBEDDINGS, "embeddings"))
def test_recorded_embeddings(rec: Recording, face: str) -> None:
    played = _play(rec, face)
    e = played.result
    assert isinstance(e, failover.Embeddings), f"expected Embeddings, got {e!r}"
    body = rec.body_json
    vectors = _expected_vectors(rec)
    if rec.wire == "gemini":
        # batchEmbedContents reports neither the model nor a token count.
        model, input_tokens = rec.model, None
    elif rec.wire == "ollama":
        model, input_tokens = body["model"], body.get("prompt_eval_count")
    else:
        model, input_tokens = body["model"], body["usage"]["prompt_tokens"]
    texts, dimensions = _embed_input(rec)
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
@pytest.mark.parametrize("rec", _params(EMBEDDINGS, "vectors"))
def test_recorded_embedding_values(rec: Recording, face: str) -> None:
    """Every float exactly as the provider sent it (Python's json reads them correctly
    rounded; so must failover)."""
    e = _play(rec, face).result
    assert isinstance(e, failover.Embeddings), f"expected Embeddings, got {e!r}"
    differ = [
        (i, j, got, recorded)
        for i, (vg, vr) in enumerate(zip(e.vectors, _expected_vectors(rec)))
        for j, (got, recorded) in enumerate(zip(vg, vr))
        if got != recorded
    ]
    assert not differ, f"{len(differ)} floats differ (vector, index, got, recorded): {differ[:5]}"


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("rec", _params(ERRORS, "error"))
def test_recorded_error(rec: Recording, face: str) -> None:
    assert rec.id in EXPECTED_ERRORS, (
        f"new error recording {rec.id} (status {rec.status}): read its body and add the class "
        "DESIGN §3.1 asks for to EXPECTED_ERRORS"
    )
    expected_cls, expected_wait, _why = EXPECTED_ERRORS[rec.id]
    played = _play(rec, face)
    exc = played.result

    assert type(exc) is expected_cls, f"expected {expected_cls.__name__}, got {exc!r}"
    assert isinstance(exc, failover.ProviderError)
    assert exc.kind == expected_cls.kind
    assert exc.status == rec.status
    assert exc.provider == rec.folder
    assert exc.model == rec.model
    assert exc.body == rec.body.decode("utf-8")
    if _recorded_request_id(rec) is not None:
        assert exc.request_id == _recorded_request_id(rec)

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


# --------------------------------------------------------------------------- streams: the recording


def _sse_events(body: bytes) -> list[tuple[str, str]]:
    """The (event type, data) of each server-sent event of a body, read as the WHATWG rules
    say: lines end in CRLF, LF or CR; a blank line ends an event; comment lines (``:``) are
    skipped; several ``data:`` lines join with LF; an event without data is none."""
    events: list[tuple[str, str]] = []
    event, data = "", []
    for line in re.split(r"\r\n|\r|\n", body.decode("utf-8")):
        if not line:
            if data:
                events.append((event or "message", "\n".join(data)))
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
    return events


def _merge_usage(into: dict[str, Any], report: Any) -> None:
    """DESIGN §3.6: the last figure reported wins, field by field (nested details too); a null
    is no figure, and nothing is summed."""
    if not isinstance(report, dict):
        return
    for key, value in report.items():
        if value is None:
            continue
        if isinstance(value, dict):
            if not isinstance(into.get(key), dict):
                into[key] = {}
            _merge_usage(into[key], value)
        else:
            into[key] = value


@dataclass
class ExpectedStream:
    """What a recorded streamed body says, decoded here from its bytes (never by failover):
    everything up to its end, or up to an in-stream error event."""

    text: str = ""
    reasoning: str = ""
    # Tool calls by the wire's index or block number: [id (None where the wire has none),
    # name, arguments (streamed JSON text, or an object where the wire sends one whole)].
    calls: dict[Any, list[Any]] = field(default_factory=dict)
    finish: Optional[str] = None  # the wire's own word
    model: Optional[str] = None
    usage: dict[str, Any] = field(default_factory=dict)  # the wire's report, merged
    error: Optional[dict[str, Any]] = None  # the in-stream error object

    @property
    def content_before_error(self) -> bool:
        """Text, reasoning or a tool call came before the error (DESIGN §3.6: all content)."""
        return bool(self.text or self.reasoning or self.calls)

    @property
    def tool_calls(self) -> list[tuple[Optional[str], str, Any]]:
        """(id or None, name, parsed arguments), in the order the calls started."""
        return [
            (call_id, name, json.loads(args or "{}") if isinstance(args, str) else args)
            for call_id, name, args in self.calls.values()
        ]


def _anthropic_event(exp: ExpectedStream, obj: dict[str, Any]) -> None:
    kind = obj.get("type")
    if kind == "message_start":
        message = obj["message"]
        exp.model = message.get("model")
        _merge_usage(exp.usage, message.get("usage"))  # the input counts
    elif kind == "content_block_start":
        block = obj["content_block"]
        if block.get("type") == "tool_use":
            exp.calls[obj["index"]] = [block["id"], block["name"], ""]
        elif block.get("type") == "text":
            exp.text += block.get("text") or ""
        elif block.get("type") == "thinking":
            exp.reasoning += block.get("thinking") or ""
    elif kind == "content_block_delta":
        delta = obj["delta"]
        if delta.get("type") == "text_delta":
            exp.text += delta["text"]
        elif delta.get("type") == "thinking_delta":
            exp.reasoning += delta["thinking"]
        elif delta.get("type") == "input_json_delta":
            exp.calls[obj["index"]][2] += delta["partial_json"]
    elif kind == "message_delta":
        exp.finish = (obj.get("delta") or {}).get("stop_reason") or exp.finish
        _merge_usage(exp.usage, obj.get("usage"))  # the output count (and, lately, input again)


def _gemini_event(exp: ExpectedStream, obj: dict[str, Any]) -> None:
    exp.model = obj.get("modelVersion") or exp.model
    _merge_usage(exp.usage, obj.get("usageMetadata"))
    for candidate in (obj.get("candidates") or [])[:1]:
        for part in (candidate.get("content") or {}).get("parts") or []:
            if isinstance(part.get("text"), str):
                if part.get("thought"):
                    exp.reasoning += part["text"]
                else:
                    exp.text += part["text"]
            if "functionCall" in part:
                call = part["functionCall"]
                exp.calls[len(exp.calls)] = [call.get("id"), call["name"], call.get("args") or {}]
        exp.finish = candidate.get("finishReason") or exp.finish


def _openai_event(exp: ExpectedStream, obj: dict[str, Any]) -> None:
    exp.model = exp.model or obj.get("model")
    _merge_usage(exp.usage, (obj.get("x_groq") or {}).get("usage"))
    _merge_usage(exp.usage, obj.get("usage"))
    for choice in obj.get("choices") or []:
        if choice.get("index", 0) != 0:
            continue
        delta = choice.get("delta") or {}
        exp.text += delta.get("content") or ""
        # xAI's reasoning_content, Groq's and Ollama's reasoning.
        exp.reasoning += delta.get("reasoning_content") or delta.get("reasoning") or ""
        for call in delta.get("tool_calls") or []:
            entry = exp.calls.setdefault(call.get("index", 0), [None, "", ""])
            function = call.get("function") or {}
            entry[0] = entry[0] or call.get("id")
            entry[1] = entry[1] or function.get("name") or ""
            entry[2] += function.get("arguments") or ""
        exp.finish = choice.get("finish_reason") or exp.finish


USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)
_EXPECTED_STREAMS: dict[str, ExpectedStream] = {}


def _expected_stream(rec: Recording) -> ExpectedStream:
    if rec.id in _EXPECTED_STREAMS:
        return _EXPECTED_STREAMS[rec.id]
    exp = ExpectedStream()
    if rec.wire == "ollama":  # NDJSON: one object a line, the last with done: true
        for line in rec.body.splitlines():
            if not line.strip():
                continue
            obj = json.loads(line)
            if obj.get("error") is not None:
                exp.error = {"message": obj["error"]}
                break
            exp.model = exp.model or obj.get("model")
            message = obj.get("message") or {}
            exp.text += message.get("content") or ""
            exp.reasoning += message.get("thinking") or ""
            for call in message.get("tool_calls") or []:
                function = call["function"]
                exp.calls[len(exp.calls)] = [
                    call.get("id"),
                    function["name"],
                    function["arguments"],
                ]
            if obj.get("done"):
                exp.finish = obj.get("done_reason")
                _merge_usage(exp.usage, obj)
                break
    else:
        for event, data in _sse_events(rec.body):
            if data == "[DONE]":
                break
            obj = json.loads(data)
            if event == "error" or obj.get("type") == "error" or obj.get("error") is not None:
                error = obj.get("error")
                exp.error = error if isinstance(error, dict) else {"message": error}
                break
            if rec.wire == "anthropic":
                _anthropic_event(exp, obj)
            elif rec.wire == "gemini":
                _gemini_event(exp, obj)
            else:
                _openai_event(exp, obj)
    _EXPECTED_STREAMS[rec.id] = exp
    return exp


def _expected_stream_finish(rec: Recording, exp: ExpectedStream) -> Optional[str]:
    if exp.calls and rec.wire in ("gemini", "ollama"):
        return "tool_calls"  # these wires say STOP / stop when the model called tools
    return ONE_VOCABULARY.get(exp.finish, exp.finish) if exp.finish else None


STREAM_SUCCESSES = [r for r in STREAMS if _expected_stream(r).error is None]
STREAM_ERRORS = [r for r in STREAMS if _expected_stream(r).error is not None]


def _event_pieces(rec: Recording) -> list[bytes]:
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


def _awkward_pieces(rec: Recording) -> list[bytes]:
    """The recorded body cut once inside every event, in turn one byte before its end (inside
    the blank line that ends an SSE event, between CR and LF in Gemini's CRLF ones; before an
    NDJSON line's LF) and in its middle (inside the JSON, maybe inside a character): no read
    ends where an event does."""
    cuts, offset = [], 0
    for i, piece in enumerate(_event_pieces(rec)):
        cuts.append(offset + (len(piece) - 1 if i % 2 == 0 else len(piece) // 2))
        offset += len(piece)
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(rec.body)}), len(rec.body)]
    pieces = [rec.body[a:b] for a, b in zip(bounds, bounds[1:])]
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


def _tool_names(wire: str, body: Any) -> list[str]:
    tools = (body or {}).get("tools") or []
    return [t["name"] if wire == "anthropic" else t["function"]["name"] for t in tools]


# --------------------------------------------------------------------------- streams: the call


@dataclass
class PlayedStream:
    chunks: list[failover.Chunk]  # every chunk yielded, up to the end or the error
    response: Optional[failover.Response]  # stream.response, when the stream ended
    error: Optional[failover.FailoverError]
    sleeper: FakeSleeper
    requests: list[RecordedRequest]  # what the client sent
    events: list[Any]  # on_event's


def _run_stream(
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
            {rec.folder: _provider(rec, server) for rec in chain},
            retry=retry,
            sleeper=sleeper,
            on_event=events.append,
        )
        first = chain[0]
        prompt, tools = _chat_text(first), _recorded_tools(first) or None
        chunks: list[failover.Chunk] = []
        response: Optional[failover.Response] = None
        error: Optional[failover.FailoverError] = None
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


def _play_stream(rec: Recording, face: str, split: str = "events") -> PlayedStream:
    """One recorded stream through its folder's provider, no retries; played once per face
    and split, and shared by the tests of each aspect (a replay paces its pieces apart)."""
    key = (rec.id, face, split)
    if key not in _PLAYED_STREAMS:
        pieces = _event_pieces(rec) if split == "events" else _awkward_pieces(rec)
        _PLAYED_STREAMS[key] = _run_stream([(rec, pieces)], [rec], face, NO_RETRIES)
    return _PLAYED_STREAMS[key]


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
    exp = _expected_stream(rec)
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


# --------------------------------------------------------------------------- streams: the cases


def _check_stream_request(rec: Recording, request: RecordedRequest) -> None:
    assert request.method == rec.method == "POST"
    # The streaming endpoint, under the provider class's default base path.
    sent_path, _, sent_query = request.path.partition("?")
    assert sent_path == rec.path
    assert sent_query == urlsplit(rec.uri).query
    if rec.wire == "gemini":
        assert sent_path.endswith(":streamGenerateContent") and sent_query == "alt=sse"
    _check_auth(rec, request)

    sent, recorded = request.json, rec.request_json
    assert _user_text(rec.wire, sent) == _chat_text(rec)
    assert _tool_names(rec.wire, sent) == _tool_names(rec.wire, recorded)
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
    assert any(_expected_stream(r).content_before_error for r in STREAM_ERRORS)
    assert any(not _expected_stream(r).content_before_error for r in STREAM_ERRORS)
    for rec in STREAMS:
        assert rec.status == 200
        assert len(_awkward_pieces(rec)) == len(_event_pieces(rec)) + 1


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("rec", _params(STREAMS, "stream-request"))
def test_streamed_request(rec: Recording, face: str) -> None:
    """The request asks for a stream at the streaming endpoint, as recorded."""
    played = _play_stream(rec, face)
    [request] = played.requests
    _check_stream_request(rec, request)


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("rec", _params(STREAM_SUCCESSES, "stream-response"))
def test_streamed_success(rec: Recording, face: str) -> None:
    played = _play_stream(rec, face)
    assert played.error is None, f"expected a complete stream, got {played.error!r}"
    _check_chunks(rec, played.chunks)
    exp = _expected_stream(rec)
    r = played.response
    assert isinstance(r, failover.Response), f"expected a Response, got {r!r}"
    assert r.text == exp.text
    _, _, calls = _content(played.chunks)
    assert [(c.id, c.name, c.arguments) for c in r.tool_calls] == calls
    assert r.finish_reason == _expected_stream_finish(rec, exp)
    assert r.model == exp.model
    assert r.provider == rec.folder
    assert r.message["role"] == "assistant"
    assert len(r.message.get("tool_calls") or []) == len(calls)
    if _recorded_request_id(rec) is not None:
        assert r.request_id == _recorded_request_id(rec)
    [attempt] = r.attempts
    assert (attempt.provider, attempt.status, attempt.kind) == (rec.folder, 200, None)
    assert isinstance(r.time_to_first_token, float)
    assert 0.0 < r.time_to_first_token < 5.0
    assert API_KEY not in repr(r)
    played.sleeper.assert_never_slept()


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("rec", _params(STREAM_SUCCESSES, "stream-usage"))
def test_streamed_usage(rec: Recording, face: str) -> None:
    """Every usage figure the stream reported, the last one winning field by field, with
    DESIGN §2's one meaning (Anthropic's input from message_start, output from
    message_delta; Groq's x_groq.usage; Gemini's last usageMetadata)."""
    r = _play_stream(rec, face).response
    assert isinstance(r, failover.Response), f"expected a Response, got {r!r}"
    _check_stream_usage(rec, r.usage)


def _check_stream_usage(rec: Recording, got: failover.Usage) -> None:
    expected = _usage_of(rec.wire, _expected_stream(rec).usage)
    assert (got.input_tokens, got.output_tokens) == (
        expected.input_tokens,
        expected.output_tokens,
    ), got
    assert got.cache_read_tokens == expected.cache_read_tokens, got
    assert got.reasoning_tokens == expected.reasoning_tokens, got
    assert got.cache_write_tokens == expected.cache_write_tokens, got


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("rec", _params(STREAM_ERRORS, "stream-error"))
def test_streamed_error(rec: Recording, face: str) -> None:
    """An in-stream error event: before any content a failure of the attempt (the stream
    never starts); after content StreamInterrupted with the exact text delivered."""
    played = _play_stream(rec, face)
    exp = _expected_stream(rec)
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
        expected = _usage_of(rec.wire, exp.usage)
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
@pytest.mark.parametrize("rec", _params(STREAM_ERRORS, "stream-error-class"))
def test_streamed_error_class(rec: Recording, face: str) -> None:
    """The in-stream error's class, by DESIGN §3.6's reading of its code."""
    assert rec.id in EXPECTED_STREAM_ERRORS, (
        f"new in-stream error {rec.id}: read its event and add the class DESIGN §3.6 asks for "
        "to EXPECTED_STREAM_ERRORS"
    )
    expected_cls, _why = EXPECTED_STREAM_ERRORS[rec.id]
    exc = _play_stream(rec, face).error
    error = exc.__cause__ if isinstance(exc, failover.StreamInterrupted) else exc
    assert type(error) is expected_cls, f"expected {expected_cls.__name__}, got {error!r}"
    assert isinstance(error, failover.ProviderError)
    assert error.kind == expected_cls.kind
    if not isinstance(exc, failover.StreamInterrupted):
        assert [a.kind for a in exc.attempts] == [expected_cls.kind]


@pytest.mark.parametrize("rec", _params(STREAMS, "stream-framing"))
def test_streamed_framing(rec: Recording) -> None:
    """The same body read in pieces that never end where an event does (cut inside the JSON
    and inside the blank line, CRLF split): the same content and the same end."""
    played = _play_stream(rec, "sync", split="awkward")
    exp = _expected_stream(rec)
    _check_chunks(rec, played.chunks)
    if exp.error is None:
        assert played.response is not None, f"expected a Response, got {played.error!r}"
        assert played.response.text == exp.text
        assert played.response.finish_reason == _expected_stream_finish(rec, exp)
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
        if not _expected_stream(r).content_before_error
    ],
)
def test_streamed_error_before_content_is_retried(rec: Recording, route: str, face: str) -> None:
    """DESIGN §3.6: an error event inside a 200 before any content is retried (the same
    provider, after the backoff of a hint-less overload on the last provider) or failed over
    (at once: another provider remains), like prompt()'s failures; the caller only sees the
    stream start later. The next answer is the folder's own recorded stream, or OpenAI's."""
    after = _next_stream(rec.folder) if route == "retry" else _next_stream("openai")
    chain = [rec] if route == "retry" else [rec, after]
    played = _run_stream(
        [(rec, _event_pieces(rec)), (after, _event_pieces(after))],
        chain,
        face,
        failover.RetryPolicy(),
    )
    assert played.error is None, f"expected the next stream, got {played.error!r}"
    _check_chunks(after, played.chunks)
    r = played.response
    assert r is not None
    assert r.text == _expected_stream(after).text
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
