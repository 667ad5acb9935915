"""What each recording says, decoded here from its own bytes and never through failover.

The independent reading the suites compare failover with: a 200's text, tool calls, finish
reason (in failover's one vocabulary), model, usage (DESIGN §2's one meaning) and embedding
vectors on each wire (OpenAI and its family, Anthropic, Gemini, Ollama); a streamed body's
events (SSE read by the WHATWG rules, Ollama's NDJSON), merged as DESIGN §3.6 says; and, read by
hand from each error recording's headers and body, the class DESIGN §3.1 asks for and the wait
hint of DESIGN §3.2 (``EXPECTED_ERRORS``), and the class of each in-stream error event
(``EXPECTED_STREAM_ERRORS``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import failover

from .loader import STREAMS, Recording


def user_text(wire: str, body: Any) -> str | None:
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


def tool_names(wire: str, body: Any) -> list[str]:
    tools = (body or {}).get("tools") or []
    return [t["name"] if wire == "anthropic" else t["function"]["name"] for t in tools]


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


def expected_text(rec: Recording) -> str:
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


def expected_tool_calls(rec: Recording) -> list[tuple[str | None, str, Any]]:
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


def expected_finish(rec: Recording) -> str:
    body = rec.body_json
    if expected_tool_calls(rec) and rec.wire in ("gemini", "ollama"):
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


def expected_model(rec: Recording) -> str:
    body = rec.body_json
    return body["modelVersion"] if rec.wire == "gemini" else body["model"]  # type: ignore[no-any-return]


@dataclass(frozen=True)
class ExpectedUsage:
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    reasoning_tokens: int | None
    cache_write_tokens: int | None = None


def expected_usage(rec: Recording) -> ExpectedUsage:
    """The usage of a non-streamed answer."""
    body = rec.body_json
    if rec.wire == "gemini":
        return usage_of("gemini", body["usageMetadata"])
    if rec.wire == "ollama":
        return usage_of("ollama", body)
    return usage_of(rec.wire, body["usage"])


def usage_of(wire: str, usage: dict[str, Any]) -> ExpectedUsage:
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


def recorded_request_id(rec: Recording) -> str | None:
    """The id OpenAI-style (x-request-id) and Anthropic (request-id) answers carry in a header.
    Other providers' ids (Mistral's correlation id, DeepSeek's trace id, Azure's
    apim-request-id, Gemini's responseId) are not checked: DESIGN names no source for them."""
    return rec.header("x-request-id") or rec.header("request-id")


def expected_vectors(rec: Recording) -> list[list[float]]:
    body = rec.body_json
    if rec.wire == "gemini":
        return [item["values"] for item in body["embeddings"]]
    if rec.wire == "ollama":
        return body["embeddings"]  # type: ignore[no-any-return]
    return [item["embedding"] for item in sorted(body["data"], key=lambda d: d["index"])]


# Per error recording: the class DESIGN §3.1 asks for (read from the recorded body), the
# wait hint DESIGN §3.2 gives (read from the recorded headers and body), and what in the
# recording decides them (shown when the class is wrong). None of these hints depends on the
# clock: no HTTP-date retry-after and no exhausted reset header among them.
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
    finish: str | None = None  # the wire's own word
    model: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)  # the wire's report, merged
    error: dict[str, Any] | None = None  # the in-stream error object

    @property
    def content_before_error(self) -> bool:
        """Text, reasoning or a tool call came before the error (DESIGN §3.6: all content)."""
        return bool(self.text or self.reasoning or self.calls)

    @property
    def tool_calls(self) -> list[tuple[str | None, str, Any]]:
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


_EXPECTED_STREAMS: dict[str, ExpectedStream] = {}


def expected_stream(rec: Recording) -> ExpectedStream:
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


def expected_stream_finish(rec: Recording, exp: ExpectedStream) -> str | None:
    if exp.calls and rec.wire in ("gemini", "ollama"):
        return "tool_calls"  # these wires say STOP / stop when the model called tools
    return ONE_VOCABULARY.get(exp.finish, exp.finish) if exp.finish else None


STREAM_SUCCESSES = [r for r in STREAMS if expected_stream(r).error is None]
STREAM_ERRORS = [r for r in STREAMS if expected_stream(r).error is not None]

_ANTHROPIC_STREAM_OVERLOADED = (
    "anthropic/chat_function_calling_anthropic_claude-3-5-haiku-20241022_can_use_tools_with_"
    "multi-turn_streaming_conversations.yml#1"
)
_GROQ_STREAM_ERROR = "groq/extracts/test_tool_use_failed_error_streaming.yaml.extract.json#0"

# Per streamed recording with an in-stream error event: the ProviderError class DESIGN §3.6
# asks for (raised before any content; the cause of StreamInterrupted after it) and what in the
# event decides it (shown when the class is wrong). Whether the error came before or after
# content, and the text delivered before it, are read from the body.
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


def assert_same_usage(got: failover.Usage, expected: failover.Usage) -> None:
    """Every figure of a usage the same as the oracle's (DESIGN §2's one meaning)."""
    assert (got.input_tokens, got.output_tokens) == (
        expected.input_tokens,
        expected.output_tokens,
    ), got
    assert got.cache_read_tokens == expected.cache_read_tokens, got
    assert got.reasoning_tokens == expected.reasoning_tokens, got
    assert got.cache_write_tokens == expected.cache_write_tokens, got
