"""Conformance against REAL recorded provider traffic (DESIGN §5).

Every non-streaming OpenAI Chat Completions (OpenAI and the OpenAI-compatible family) and
Anthropic Messages interaction recorded in ``<repo>/../shared/fixtures/recorded/`` (see its
SOURCES.md) is played back byte for byte through ``failover.testing.MockServer`` and called
through the public API, with a single provider, no retries and a FakeSleeper:

- a 200 must give the recorded text, usage, finish reason and model;
- an error must raise the class of DESIGN §3.1 (decided per recording by reading its body, in
  ``EXPECTED_ERRORS`` below), with the recorded status, the wait hint of DESIGN §3.2 (both as
  ``failover.retry_after`` computes it and as hard-coded from reading the headers), one attempt,
  and no API key anywhere in it.

The recordings are read from the shared folder at test time and never copied into this
repository; when the folder is absent the whole module skips.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

RECORDED = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "recorded"
if not RECORDED.is_dir():
    pytest.skip(
        f"recorded provider traffic not found at {RECORDED} (expected a shared/ folder beside "
        "the repository, see DESIGN.md §5)",
        allow_module_level=True,
    )

yaml = pytest.importorskip("yaml", reason="PyYAML is needed to read the VCR cassettes")

API_KEY = "sk-test"
OPENAI_FOLDERS = ("openai", "azure", "deepseek", "mistral", "xai", "openrouter", "groq", "ollama")
ANTHROPIC_FOLDERS = ("anthropic",)
# Hop-by-hop or transport-level headers: MockServer frames the body itself.
DROPPED_HEADERS = frozenset(
    {"transfer-encoding", "content-length", "content-encoding", "connection", "keep-alive"}
)
NO_RETRIES = failover.RetryPolicy(max_retries=0, max_retries_last=0)
PROMPT = "What's 2 + 2?"


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
    uri: str
    request_json: Any
    status: int
    headers: tuple[tuple[str, str], ...]  # every recorded header value, names as recorded
    body: bytes  # decoded (gunzipped) body bytes

    @property
    def id(self) -> str:
        return f"{self.rel}#{self.index}"

    @property
    def wire(self) -> str:
        return "anthropic" if self.folder in ANTHROPIC_FOLDERS else "openai"

    def header(self, name: str) -> str | None:
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None

    @property
    def playback_headers(self) -> list[tuple[str, str]]:
        return [(k, v) for k, v in self.headers if k.lower() not in DROPPED_HEADERS]

    @property
    def date(self) -> float | None:
        """The recorded Date header as Unix seconds, or None."""
        value = self.header("date")
        return parsedate_to_datetime(value).timestamp() if value else None

    @property
    def model(self) -> str:
        model = (self.request_json or {}).get("model")
        return model if isinstance(model, str) and model else "recorded-model"

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


def _response_body(response: dict[str, Any], headers: list[tuple[str, str]]) -> bytes:
    if "parsed_body" in response:  # pydantic-ai serialiser: JSON rewritten as YAML
        return json.dumps(response["parsed_body"]).encode("utf-8")
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


def _is_streaming(request_json: Any, headers: list[tuple[str, str]]) -> bool:
    if isinstance(request_json, dict) and request_json.get("stream") is True:
        return True
    return any(k.lower() == "content-type" and "text/event-stream" in v.lower() for k, v in headers)


def _recordings() -> Iterator[Recording]:
    for path in sorted(RECORDED.rglob("*")):
        if path.suffix not in (".yml", ".yaml", ".json") or not path.is_file():
            continue
        rel = path.relative_to(RECORDED).as_posix()
        folder = rel.split("/", 1)[0]
        if folder not in OPENAI_FOLDERS + ANTHROPIC_FOLDERS:
            continue
        data = _load(path)
        interactions = data.get("http_interactions") or data.get("interactions") or []
        for index, interaction in enumerate(interactions):
            request, response = interaction["request"], interaction["response"]
            uri = str(request["uri"])
            endpoint = uri.split("?", 1)[0]
            wanted = "/v1/messages" if folder in ANTHROPIC_FOLDERS else "/chat/completions"
            if not endpoint.endswith(wanted):
                continue
            headers = _header_pairs(response.get("headers"))
            request_json = _request_json(request)
            if _is_streaming(request_json, headers):
                continue  # streaming is not built yet
            yield Recording(
                rel=rel,
                index=index,
                folder=folder,
                uri=uri,
                request_json=request_json,
                status=int(response["status"]["code"]),
                headers=tuple(headers),
                body=_response_body(response, headers),
            )


RECORDINGS = list(_recordings())

# --------------------------------------------------------------------------- expectations

# Per error recording: the class DESIGN §3.1 asks for (read from the recorded body) and the
# wait hint DESIGN §3.2 gives (read from the recorded headers). None of these hints depends on
# the clock: no HTTP-date retry-after and no exhausted reset header among them.
_ANTHROPIC_429_41 = (
    "anthropic/chat_real_error_scenarios_anthropic_claude-haiku-4-5_handles_context_length_"
    "exceeded_errors.yml#0"
)
_ANTHROPIC_429_NO_RETRY = (
    "anthropic/ruby_llm@0950693/chat_real_error_scenarios_anthropic_claude-haiku-4-5_handles_"
    "context_length_exceeded_errors.yml#0"
)
EXPECTED_ERRORS: dict[str, tuple[type[failover.ProviderError], float | None, str]] = {
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

# Cases where failover's behaviour is wrong per DESIGN.md: id -> reason (strict xfail).
KNOWN_DISCREPANCIES: dict[str, str] = {}

SUCCESSES = [r for r in RECORDINGS if r.status == 200]
ERRORS = [r for r in RECORDINGS if r.status != 200]


def _params(recordings: list[Recording], known: dict[str, str]) -> list[Any]:
    params = []
    for rec in recordings:
        marks = []
        if rec.id in known:
            marks.append(pytest.mark.xfail(strict=True, reason=known[rec.id]))
        params.append(pytest.param(rec, id=rec.id, marks=marks))
    return params


# --------------------------------------------------------------------------- helpers


def _provider(rec: Recording, server: MockServer) -> failover.Provider:
    if rec.wire == "anthropic":
        return failover.Anthropic(model=rec.model, api_key=API_KEY, base_url=server.url)
    if rec.folder == "openai":
        return failover.OpenAI(model=rec.model, api_key=API_KEY, base_url=server.url)
    return failover.OpenAICompatible(model=rec.model, api_key=API_KEY, base_url=server.url)


FACES = ("sync", "async")


@dataclass
class Played:
    result: failover.Response | failover.FailoverError
    sleeper: FakeSleeper


def _play(rec: Recording, face: str) -> Played:
    """Plays the recorded response back and calls it once, through ``prompt`` or
    ``prompt_async``; returns the answer or the error."""
    server = MockServer()
    sleeper = FakeSleeper()
    try:
        server.push(status=rec.status, headers=rec.playback_headers, body=rec.body)
        client = failover.Client(
            {rec.folder: _provider(rec, server)}, retry=NO_RETRIES, sleeper=sleeper
        )
        result: failover.Response | failover.FailoverError
        try:
            if face == "sync":
                result = client.prompt(PROMPT, timeout=5.0)
            else:
                result = asyncio.run(client.prompt_async(PROMPT, timeout=5.0))
        except failover.FailoverError as exc:
            result = exc
        _check_request(rec, server)
        return Played(result, sleeper)
    finally:
        server.close()


def _check_request(rec: Recording, server: MockServer) -> None:
    assert server.pending == 0, "the recorded response was not requested"
    [request] = server.requests
    assert request.method == "POST"
    if rec.wire == "anthropic":
        assert request.path.endswith("/messages"), request.path
        assert request.headers.get("x-api-key") == API_KEY
        assert request.headers.get("anthropic-version")
    else:
        assert request.path.endswith("/chat/completions"), request.path
        assert request.headers.get("authorization") == f"Bearer {API_KEY}"
    sent = request.json
    assert sent["model"] == rec.model
    assert sent["messages"][-1]["role"] == "user"


def _expected_text(rec: Recording) -> str:
    body = rec.body_json
    if rec.wire == "anthropic":
        return "".join(b["text"] for b in body["content"] if b.get("type") == "text")
    return body["choices"][0]["message"].get("content") or ""


def _expected_usage(rec: Recording) -> tuple[int, int]:
    usage = rec.body_json["usage"]
    if rec.wire == "anthropic":
        # One meaning on every wire: every input token, cache included.
        every_input = (
            usage["input_tokens"]
            + (usage.get("cache_read_input_tokens") or 0)
            + (usage.get("cache_creation_input_tokens") or 0)
        )
        return every_input, usage["output_tokens"]
    return usage["prompt_tokens"], usage["completion_tokens"]


def _expected_tool_calls(rec: Recording) -> list[tuple[str, str, Any]]:
    """The tool calls recorded in the answer, as (id, name, parsed arguments)."""
    body = rec.body_json
    if rec.wire == "anthropic":
        return [
            (b["id"], b["name"], b["input"]) for b in body["content"] if b.get("type") == "tool_use"
        ]
    calls = body["choices"][0]["message"].get("tool_calls") or []
    return [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls]


#: Each wire's stop words in failover's one vocabulary.
ONE_VOCABULARY = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


def _expected_finish(rec: Recording) -> str:
    body = rec.body_json
    if rec.wire == "anthropic":
        raw = body["stop_reason"]
    else:
        raw = body["choices"][0]["finish_reason"]
    return ONE_VOCABULARY.get(raw, raw)  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- the cases


def test_recordings_found() -> None:
    folders = {r.folder for r in RECORDINGS}
    assert {"openai", "anthropic"} <= folders, sorted(folders)
    assert SUCCESSES and ERRORS


def test_every_expectation_matches_a_recording() -> None:
    ids = {r.id for r in RECORDINGS}
    assert set(EXPECTED_ERRORS) <= ids, sorted(set(EXPECTED_ERRORS) - ids)
    assert set(KNOWN_DISCREPANCIES) <= ids, sorted(set(KNOWN_DISCREPANCIES) - ids)


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("rec", _params(SUCCESSES, KNOWN_DISCREPANCIES))
def test_recorded_success(rec: Recording, face: str) -> None:
    played = _play(rec, face)
    r = played.result
    assert isinstance(r, failover.Response), f"expected a Response, got {r!r}"
    assert r.text == _expected_text(rec)
    input_tokens, output_tokens = _expected_usage(rec)
    assert r.usage.input_tokens == input_tokens
    assert r.usage.output_tokens == output_tokens
    assert r.finish_reason == _expected_finish(rec)
    assert r.model == rec.body_json["model"]
    assert r.provider == rec.folder
    assert r.raw == rec.body_json
    assert [(c.id, c.name, c.arguments) for c in r.tool_calls] == _expected_tool_calls(rec)
    assert r.message["role"] == "assistant"
    [attempt] = r.attempts
    assert (attempt.provider, attempt.status, attempt.kind) == (rec.folder, 200, None)
    assert API_KEY not in repr(r)
    played.sleeper.assert_never_slept()


@pytest.mark.parametrize("rec", _params(SUCCESSES, KNOWN_DISCREPANCIES))
def test_recorded_usage_details(rec: Recording) -> None:
    """Cache and reasoning counts: the recorded value where the provider reported one."""
    r = _play(rec, "sync").result
    assert isinstance(r, failover.Response), f"expected a Response, got {r!r}"
    usage = rec.body_json["usage"]
    if rec.wire == "anthropic":
        assert r.usage.cache_read_tokens == usage.get("cache_read_input_tokens")
        assert r.usage.cache_write_tokens == usage.get("cache_creation_input_tokens")
        assert r.usage.reasoning_tokens is None
    else:
        prompt_details = usage.get("prompt_tokens_details") or {}
        completion_details = usage.get("completion_tokens_details") or {}
        assert r.usage.cache_read_tokens == prompt_details.get("cached_tokens")
        assert r.usage.reasoning_tokens == completion_details.get("reasoning_tokens")


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("rec", _params(ERRORS, KNOWN_DISCREPANCIES))
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

    # The wait hint: what the public parser reads from the recording (measured at the recorded
    # Date, and again now: none of these hints depends on the clock), what reading the headers
    # by hand gives, and what the engine attached to the error.
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
