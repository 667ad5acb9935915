"""Every provider users run, through the public API against MockServer: Gemini and
Ollama natively, Azure, the OpenAI-compatible presets, and failover across them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

from conftest import GEMINI_KEY, KEY, SINGLE_TRY, gemini, ollama, openai


def _gemini_error(code: int, status: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": status, **extra}}


# --------------------------------------------------------------------------- Gemini


def test_gemini_chat_request_and_answer(mock_server: MockServer, call: Callable[..., Any]) -> None:
    mock_server.push(
        json={
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [{"text": "Paris", "thoughtSignature": "c2ln"}],
                    },
                    "finishReason": "STOP",
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 10,
                "candidatesTokenCount": 2,
                "thoughtsTokenCount": 30,
                "cachedContentTokenCount": 4,
            },
            "modelVersion": "gemini-2.5-flash-001",
        }
    )
    client = failover.Client({"g": gemini(mock_server)})
    r = call(
        client,
        [{"role": "developer", "content": "Be brief"}, {"role": "user", "content": "Capital?"}],
        system="You are a geographer",
        max_tokens=50,
        temperature=0.1,
        stop="END",
        top_p=0.5,
        seed=4,
    )
    assert (r.text, r.provider, r.model, r.finish_reason) == (
        "Paris",
        "g",
        "gemini-2.5-flash-001",
        "stop",
    )
    assert r.usage == failover.Usage(
        input_tokens=10, output_tokens=32, cache_read_tokens=4, reasoning_tokens=30
    )
    # The text's thought signature goes back on it to Gemini.
    assert r.message["provider_data"] == {"gemini": {"text": "c2ln"}}
    [request] = mock_server.requests
    assert request.path == "/models/gemini-2.5-flash:generateContent"
    assert request.headers["x-goog-api-key"] == GEMINI_KEY
    assert "authorization" not in request.headers
    assert request.json == {
        "contents": [{"role": "user", "parts": [{"text": "Capital?"}]}],
        "systemInstruction": {"parts": [{"text": "You are a geographer\n\nBe brief"}]},
        "generationConfig": {
            "maxOutputTokens": 50,
            "temperature": 0.1,
            "topP": 0.5,
            "seed": 4,
            "stopSequences": ["END"],
        },
    }


def test_gemini_tool_loop_and_structured_output(mock_server: MockServer) -> None:
    mock_server.push(
        json={
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [{"functionCall": {"name": "weather", "args": {"city": "Oslo"}}}],
                    },
                    "finishReason": "STOP",
                }
            ]
        }
    )
    mock_server.push(
        json={
            "candidates": [
                {"content": {"parts": [{"text": '{"ok": true}'}]}, "finishReason": "STOP"}
            ]
        }
    )
    client = failover.Client({"g": gemini(mock_server)})
    tool = failover.Tool("weather", "Weather in a city", {"type": "object"})
    history: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Oslo?"}]
    r = client.prompt(history, tools=[tool], tool_choice="required")
    assert r.finish_reason == "tool_calls" and r.text == ""
    [tool_call] = r.tool_calls
    assert (tool_call.name, tool_call.arguments) == ("weather", {"city": "Oslo"})
    assert tool_call.id.startswith("call_")
    history += [r.message, {"role": "tool", "tool_call_id": tool_call.id, "content": "-3 C"}]
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    r = client.prompt(
        history,
        response_format={"type": "json_schema", "json_schema": {"name": "s", "schema": schema}},
    )
    assert r.json() == {"ok": True}
    first, second = (req.json for req in mock_server.requests)
    assert first["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    assert first["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"] == {
        "type": "object"
    }
    assert second["contents"][1:] == [
        {
            "role": "model",
            "parts": [
                {
                    "functionCall": {"name": "weather", "args": {"city": "Oslo"}},
                    # Unsigned (no thinking): the documented stand-in goes with it.
                    "thoughtSignature": "skip_thought_signature_validator",
                }
            ],
        },
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "weather", "response": {"output": "-3 C"}}}],
        },
    ]
    assert second["generationConfig"] == {
        "responseMimeType": "application/json",
        "responseJsonSchema": schema,
    }


@pytest.mark.parametrize(
    ("status", "body", "error", "retry_after"),
    [
        (
            429,
            _gemini_error(
                429,
                "RESOURCE_EXHAUSTED",
                "Quota exceeded",
                details=[
                    {
                        "@type": "type.googleapis.com/google.rpc.RetryInfo",
                        "retryDelay": "7s",
                    }
                ],
            ),
            failover.RateLimited,
            7.0,
        ),
        (503, _gemini_error(503, "UNAVAILABLE", "overloaded"), failover.ProviderOverloaded, None),
        (500, _gemini_error(500, "INTERNAL", "oops"), failover.ServerError, None),
        (
            400,
            _gemini_error(
                400,
                "INVALID_ARGUMENT",
                f"API key not valid: {GEMINI_KEY}",
                details=[{"reason": "API_KEY_INVALID"}],
            ),
            failover.AuthenticationError,
            None,
        ),
    ],
)
def test_gemini_errors(
    mock_server: MockServer, status: int, body: Any, error: type, retry_after: float | None
) -> None:
    mock_server.push(status=status, json=body)
    client = failover.Client(
        {"g": gemini(mock_server)}, retry=failover.RetryPolicy(max_retries=0, max_retries_last=0)
    )
    with pytest.raises(error) as info:
        client.prompt("Hi")
    assert info.value.retry_after == retry_after
    assert info.value.provider == "g"
    for text in (str(info.value), repr(info.value), info.value.body or ""):
        assert GEMINI_KEY not in text


def test_gemini_reads_google_api_key_when_gemini_api_key_is_unset(
    mock_server: MockServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "from-google-var-123")
    mock_server.push_text("hi", wire="gemini")
    client = failover.Client({"g": failover.Gemini("gemini-2.5-flash", base_url=mock_server.url)})
    assert client.prompt("Hi").text == "hi"
    assert mock_server.requests[0].headers["x-goog-api-key"] == "from-google-var-123"
    monkeypatch.delenv("GOOGLE_API_KEY")
    with pytest.raises(failover.ConfigurationError, match="GEMINI_API_KEY"):
        failover.Client({"g": failover.Gemini("gemini-2.5-flash")})


def test_a_gemini_chat_fails_over_to_groq(
    mock_server: MockServer, backup_server: MockServer, call: Callable[..., Any]
) -> None:
    mock_server.push(status=503, json=_gemini_error(503, "UNAVAILABLE", "The model is overloaded"))
    backup_server.push(
        json={
            "model": "llama-3.3-70b-versatile",
            "choices": [
                {"message": {"role": "assistant", "content": "4"}, "finish_reason": "stop"}
            ],
            "x_groq": {"usage": {"prompt_tokens": 9, "completion_tokens": 1}},
        }
    )
    sleeper = FakeSleeper()
    client = failover.Client(
        {
            "gemini": gemini(mock_server),
            "groq": failover.Groq(
                "llama-3.3-70b-versatile", api_key=KEY, base_url=backup_server.url
            ),
        },
        retry=failover.RetryPolicy(max_retries=0),
        sleeper=sleeper,
    )
    r = call(client, "2+2?")
    assert (r.provider, r.text) == ("groq", "4")
    assert (r.usage.input_tokens, r.usage.output_tokens) == (9, 1)
    assert [(a.provider, a.status, a.kind) for a in r.attempts] == [
        ("gemini", 503, "overloaded"),
        ("groq", 200, None),
    ]
    assert backup_server.requests[0].path == "/chat/completions"
    assert backup_server.requests[0].headers["authorization"] == f"Bearer {KEY}"


# --------------------------------------------------------------------------- Ollama


def test_ollama_native_chat_without_a_key(
    mock_server: MockServer, call: Callable[..., Any]
) -> None:
    mock_server.push(
        json={
            "model": "llama3.2",
            "message": {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "weather", "arguments": {"city": "Rome"}}}],
            },
            "done_reason": "stop",
            "done": True,
            "prompt_eval_count": 21,
            "eval_count": 7,
        }
    )
    client = failover.Client({"local": ollama(mock_server)})
    tool = failover.Tool("weather", "Weather", {"type": "object"})
    r = call(client, "Rome?", tools=[tool], max_tokens=64, response_format={"type": "json_object"})
    assert r.finish_reason == "tool_calls"
    assert [(c.name, c.arguments) for c in r.tool_calls] == [("weather", {"city": "Rome"})]
    assert (r.usage.input_tokens, r.usage.output_tokens) == (21, 7)
    [request] = mock_server.requests
    assert request.path == "/api/chat"
    assert "authorization" not in request.headers
    body = request.json
    assert body["stream"] is False and body["format"] == "json"
    assert body["options"] == {"num_predict": 64}
    assert body["tools"][0]["function"]["name"] == "weather"


def test_ollama_default_url_and_what_it_cannot_take(mock_server: MockServer) -> None:
    assert failover.Ollama("llama3.2").base_url == "http://localhost:11434"
    client = failover.Client({"local": ollama(mock_server)})
    linked = [
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "https://x.test/cat.png"}}],
        }
    ]
    with pytest.raises(failover.ConfigurationError, match="data: URLs"):
        client.prompt(linked)
    assert mock_server.requests == []


def test_an_error_string_from_ollama(mock_server: MockServer) -> None:
    mock_server.push(status=404, json={"error": 'model "llama9" not found, try pulling it first'})
    client = failover.Client({"local": ollama(mock_server)})
    with pytest.raises(failover.ModelNotFound, match="try pulling it first"):
        client.prompt("Hi")


def test_an_error_inside_an_ollama_200_says_what_came(mock_server: MockServer) -> None:
    mock_server.push(json={"error": "model 'x' not found"})
    client = failover.Client({"local": ollama(mock_server)}, retry=SINGLE_TRY)
    with pytest.raises(failover.ServerError) as info:
        client.prompt("Hi")
    assert str(info.value) == "local answered 200 with an error: model 'x' not found"
    assert info.value.status == 200


# --------------------------------------------------------------------------- Azure


def test_azure_deployment_url_key_header_and_embeddings(mock_server: MockServer) -> None:
    mock_server.push_text("hi")
    mock_server.push_embeddings([[0.5, 0.25]])
    azure = failover.Azure(
        "gpt-4o-prod",
        endpoint=mock_server.url,
        api_key="azure-key-1234567890",
        embedding_model="embed-prod",
    )
    assert azure.base_url == f"{mock_server.url}/openai?api-version=2024-10-21"
    client = failover.Client({"azure": azure})
    assert client.prompt("Hi", max_tokens=5).text == "hi"
    assert client.embed("Hi").vectors == [[0.5, 0.25]]
    chat, embed = mock_server.requests
    assert chat.path == "/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21"
    assert embed.path == "/openai/deployments/embed-prod/embeddings?api-version=2024-10-21"
    assert chat.headers["api-key"] == "azure-key-1234567890"
    assert "authorization" not in chat.headers
    assert chat.json["max_completion_tokens"] == 5
    assert "azure-key" not in repr(azure) and "azure-key" not in repr(client)


def test_azure_v1_form_and_entra_token(mock_server: MockServer) -> None:
    mock_server.push_text("hi")
    tokens = iter(["eyJ-token-one-123456", "eyJ-token-two-123456"])
    azure = failover.Azure(
        "gpt-4o", endpoint=mock_server.url, api_version=None, api_key=lambda: next(tokens)
    )
    client = failover.Client({"azure": azure})
    client.prompt("Hi")
    [request] = mock_server.requests
    assert request.path == "/openai/v1/chat/completions"
    assert request.json["model"] == "gpt-4o"
    assert request.headers["authorization"] == "Bearer eyJ-token-one-123456"
    assert "api-key" not in request.headers


def test_azure_endpoint_from_the_environment_and_bad_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://res.openai.azure.com/")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "k" * 32)
    azure = failover.Azure("gpt-4o")
    assert azure.base_url == "https://res.openai.azure.com/openai?api-version=2024-10-21"
    failover.Client({"azure": azure})
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT")
    with pytest.raises(failover.ConfigurationError, match="AZURE_OPENAI_ENDPOINT"):
        failover.Azure("gpt-4o")
    with pytest.raises(failover.ConfigurationError, match="without /openai"):
        failover.Azure("gpt-4o", endpoint="https://res.openai.azure.com/openai")
    with pytest.raises(failover.ConfigurationError, match="deployment name"):
        failover.Azure("gpt 4o/../x", endpoint="https://res.openai.azure.com")
    with pytest.raises(failover.ConfigurationError, match="api_version"):
        failover.Azure("gpt-4o", endpoint="https://res.openai.azure.com", api_version="x&y=1")


def test_azure_content_filter_is_a_bad_request_that_says_what_fired(
    mock_server: MockServer,
) -> None:
    mock_server.push(
        status=400,
        json={
            "error": {
                "message": "The response was filtered due to the prompt triggering Azure "
                "OpenAI's content management policy.",
                "type": None,
                "param": "prompt",
                "code": "content_filter",
                "status": 400,
                "innererror": {
                    "code": "ResponsibleAIPolicyViolation",
                    "content_filter_result": {
                        "hate": {"filtered": False, "severity": "safe"},
                        "jailbreak": {"filtered": True, "detected": True},
                        "violence": {"filtered": True, "severity": "medium"},
                    },
                },
            }
        },
    )
    azure = failover.Azure("gpt-4o", endpoint=mock_server.url, api_key="azure-key-1234567890")
    client = failover.Client({"azure": azure})
    with pytest.raises(failover.BadRequest) as info:
        client.prompt("Hi")
    assert "content filter: jailbreak, violence (medium)" in str(info.value)


# --------------------------------------------------------------------------- presets


@pytest.mark.parametrize(
    ("cls", "url", "env", "embeds"),
    [
        (failover.Groq, "https://api.groq.com/openai/v1", "GROQ_API_KEY", False),
        (failover.Mistral, "https://api.mistral.ai/v1", "MISTRAL_API_KEY", True),
        (failover.DeepSeek, "https://api.deepseek.com", "DEEPSEEK_API_KEY", False),
        (failover.XAI, "https://api.x.ai/v1", "XAI_API_KEY", False),
        (failover.OpenRouter, "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", True),
    ],
)
def test_presets_have_their_real_defaults(
    monkeypatch: pytest.MonkeyPatch, cls: type, url: str, env: str, embeds: bool
) -> None:
    monkeypatch.delenv(env, raising=False)
    provider = cls("some-model")
    assert provider.base_url == url
    assert isinstance(provider, failover.OpenAICompatible)
    with pytest.raises(failover.ConfigurationError, match=env):
        failover.Client({"p": provider})
    monkeypatch.setenv(env, "preset-key-1234567890")
    failover.Client({"p": provider})
    if not embeds:
        with pytest.raises(failover.ConfigurationError, match="no embeddings API"):
            cls("m", embedding_model="e")


def test_groq_498_is_overloaded(mock_server: MockServer) -> None:
    mock_server.push(status=498, json={"error": {"message": "capacity exceeded"}})
    groq = failover.Groq("llama", api_key=KEY, base_url=mock_server.url)
    assert 498 in groq.overloaded_statuses and 503 in groq.overloaded_statuses
    client = failover.Client({"groq": groq}, retry=failover.RetryPolicy(max_retries_last=0))
    with pytest.raises(failover.ProviderOverloaded):
        client.prompt("Hi")


def test_xai_plain_string_error_and_bad_key_400(mock_server: MockServer) -> None:
    mock_server.push(
        status=400,
        json={
            "code": "Client specified an invalid argument",
            "error": f"Incorrect API key provided: {KEY}. Obtain one at https://console.x.ai.",
        },
    )
    client = failover.Client({"xai": failover.XAI("grok-4", api_key=KEY, base_url=mock_server.url)})
    with pytest.raises(failover.AuthenticationError) as info:
        client.prompt("Hi")
    assert "Incorrect API key provided" in str(info.value)
    assert KEY not in str(info.value) and KEY not in (info.value.body or "")


def _openrouter_upstream_429() -> dict[str, Any]:
    upstream = {
        "error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED"}
    }
    return {
        "error": {
            "code": 429,
            "message": "Provider returned error",
            "metadata": {"raw": json.dumps(upstream), "provider_name": "Google"},
        }
    }


def test_openrouter_error_in_a_200_and_the_upstream_message(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    mock_server.push(status=200, json=_openrouter_upstream_429())
    mock_server.push(status=200, json=_openrouter_upstream_429())
    backup_server.push_text("from mistral")
    client = failover.Client(
        {
            "router": failover.OpenRouter("google/gemini", api_key=KEY, base_url=mock_server.url),
            "mistral": failover.Mistral("mistral-small", api_key=KEY, base_url=backup_server.url),
        },
        retry=failover.RetryPolicy(max_retries=0, max_retries_last=0),
        sleeper=FakeSleeper(),
    )
    r = client.prompt("Hi")
    assert r.provider == "mistral"
    assert [(a.status, a.kind) for a in r.attempts] == [(429, "rate_limited"), (200, None)]
    with pytest.raises(failover.RateLimited, match="Google said: Resource exhausted") as info:
        client.prompt("Hi", provider="router")
    assert info.value.status == 429


# --------------------------------------------------------------------------- embeddings


def embed(face: str, client: failover.Client, texts: Any, **kwargs: Any) -> failover.Embeddings:
    if face == "sync":
        return client.embed(texts, **kwargs)
    return asyncio.run(client.embed_async(texts, **kwargs))


def test_an_openai_embedding_fails_over_to_gemini(
    mock_server: MockServer, backup_server: MockServer, face: str
) -> None:
    mock_server.push(status=429, headers={"retry-after": "60"}, json={"error": {"message": "slow"}})
    backup_server.push_embeddings([[0.1, 0.2], [0.3, 0.4]], wire="gemini")
    sleeper = FakeSleeper()
    client = failover.Client(
        {
            "claude": failover.Anthropic("claude-haiku-4-5", api_key=KEY, base_url=mock_server.url),
            "openai": failover.OpenAI(
                "gpt-4.1", api_key=KEY, base_url=mock_server.url, embedding_model="te-3-small"
            ),
            "gemini": gemini(backup_server, embedding_model="gemini-embedding-001"),
        },
        sleeper=sleeper,
    )
    e = embed(face, client, ["a", "b"], dimensions=2)
    assert e.vectors == [[0.1, 0.2], [0.3, 0.4]]
    assert (e.provider, e.model, len(e)) == ("gemini", "gemini-embedding-001", 2)
    assert [(a.provider, a.status, a.skipped is not None) for a in e.attempts] == [
        ("claude", None, True),
        ("openai", 429, False),
        ("gemini", 200, False),
    ]
    assert "Anthropic has no embeddings API" in (e.attempts[0].skipped or "")
    sleeper.assert_never_slept()  # a 60 s wait is dearer than failing over
    [openai_request] = mock_server.requests
    assert openai_request.path == "/embeddings"
    assert openai_request.json == {
        "model": "te-3-small",
        "input": ["a", "b"],
        "dimensions": 2,
        # OpenAI speaks base64: a quarter of the bytes.
        "encoding_format": "base64",
    }
    [gemini_request] = backup_server.requests
    assert gemini_request.path == "/models/gemini-embedding-001:batchEmbedContents"
    assert gemini_request.json["requests"][1] == {
        "model": "models/gemini-embedding-001",
        "content": {"parts": [{"text": "b"}]},
        "outputDimensionality": 2,
    }


def test_embeddings_on_mistral_ollama_and_a_compatible_server(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    mock_server.push_embeddings([[1.0]], model="mistral-embed")
    backup_server.push_embeddings([[2.0], [3.0]], wire="ollama", model="nomic-embed-text")
    mock_server.push(
        json={
            "data": [{"index": 1, "embedding": [5.0]}, {"index": 0, "embedding": [4.0]}],
            "model": "bge",
        }
    )
    client = failover.Client(
        {
            "mistral": failover.Mistral("mistral-small", api_key=KEY, base_url=mock_server.url),
            "ollama": ollama(backup_server, embedding_model="nomic-embed-text"),
            "compat": openai(mock_server),
        }
    )
    e = client.embed("x", provider="mistral", model="mistral-embed", dimensions=8)
    assert (e.vectors, e.model, e.usage.input_tokens) == ([[1.0]], "mistral-embed", 3)
    assert mock_server.requests[0].json["output_dimension"] == 8
    assert "dimensions" not in mock_server.requests[0].json
    e = client.embed(["x", "y"], provider="ollama", dimensions=4)
    assert (e.vectors, e.model, e.usage.input_tokens) == ([[2.0], [3.0]], "nomic-embed-text", 6)
    assert backup_server.requests[0].path == "/api/embed"
    assert backup_server.requests[0].json == {
        "model": "nomic-embed-text",
        "input": ["x", "y"],
        "dimensions": 4,
    }
    # Put back in input order by index.
    assert client.embed(["x", "y"], provider="compat").vectors == [[4.0], [5.0]]


def test_embed_checks_its_options_and_the_chain(mock_server: MockServer) -> None:
    client = failover.Client(
        {
            "claude": failover.Anthropic("claude", api_key=KEY, base_url=mock_server.url),
            "groq": failover.Groq("llama", api_key=KEY, base_url=mock_server.url),
            "openai": openai(mock_server),
        }
    )
    with pytest.raises(failover.ConfigurationError, match="no provider in the chain can embed"):
        client.embed("x", provider=["claude", "groq"])
    for texts in ([], [1], None):
        with pytest.raises(failover.ConfigurationError):
            client.embed(texts)  # type: ignore[arg-type]
    with pytest.raises(failover.ConfigurationError, match="dimensions"):
        client.embed("x", dimensions=0)
    # Nothing to embed is refused, as prompt("") is: empty or only whitespace.
    with pytest.raises(failover.ConfigurationError, match="nothing to embed: the text is empty"):
        client.embed("")
    with pytest.raises(failover.ConfigurationError, match=r"nothing to embed: texts\[1\] is empty"):
        client.embed(["a", " \n"])
    with pytest.raises(failover.ConfigurationError, match="nothing to answer"):
        client.prompt(" ")
    with pytest.raises(failover.ConfigurationError, match="model="):
        client.embed("x", model="m")
    with pytest.raises(failover.ConfigurationError, match="no embeddings API"):
        failover.Anthropic("claude", api_key=KEY, embedding_model="e")
    assert mock_server.requests == []


def test_a_wrong_number_of_vectors_is_a_malformed_answer(mock_server: MockServer) -> None:
    mock_server.push_embeddings([[1.0]])
    mock_server.push(json={"data": [{"embedding": ["x"]}]})
    client = failover.Client(
        {"openai": openai(mock_server)}, retry=failover.RetryPolicy(max_retries_last=0)
    )
    with pytest.raises(failover.ServerError, match="1 vectors for 2 inputs"):
        client.embed(["a", "b"])
    with pytest.raises(failover.ServerError, match="not a number"):
        client.embed(["a"])


def test_embedding_vectors_are_plain_floats(mock_server: MockServer) -> None:
    mock_server.push_embeddings([[0.5] * 1536] * 3)
    client = failover.Client({"openai": openai(mock_server)})
    e = client.embed(["a", "b", "c"])
    assert type(e.vectors) is list and type(e.vectors[0]) is list
    assert type(e.vectors[0][0]) is float and len(e.vectors[2]) == 1536
    assert "1536" in repr(e) and KEY not in repr(e)


def test_the_prompt_command_knows_every_driver(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from failover.__main__ import main

    assert main(["prompt", "Hi", "--provider", "cohere"]) == 2
    assert "gemini" in capsys.readouterr().err
    assert main(["prompt", "Hi", "--provider", "azure"]) == 2
    assert "azure needs a model" in capsys.readouterr().err
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    assert main(["prompt", "Hi", "--provider", "azure:gpt-4o"]) == 2
    assert "AZURE_OPENAI_ENDPOINT" in capsys.readouterr().err


def test_errors_name_the_model_the_call_asked_for(mock_server: MockServer) -> None:
    client = failover.Client(
        {"openai": openai(mock_server, embedding_model="te-3-small")},
        retry=failover.RetryPolicy(max_retries_last=0),
    )
    mock_server.push(status=400, json={"error": {"message": "bad"}})
    with pytest.raises(failover.BadRequest) as info:
        client.embed("x")
    assert info.value.model == "te-3-small"
    mock_server.push(status=400, json={"error": {"message": "bad"}})
    with pytest.raises(failover.BadRequest) as info:
        client.prompt("x", model="gpt-5")
    assert info.value.model == "gpt-5"


def test_gemini_signatures_go_back_on_their_parts_and_edits_are_kept(
    mock_server: MockServer,
) -> None:
    mock_server.push(
        json={
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [
                            {"text": "Checking."},
                            {"functionCall": {"name": "a", "args": {}}, "thoughtSignature": "s1"},
                            {"functionCall": {"name": "b", "args": {}}},
                        ],
                    },
                    "finishReason": "STOP",
                }
            ]
        }
    )
    mock_server.push_text("done", wire="gemini")
    mock_server.push_text("done", wire="gemini")
    client = failover.Client({"g": gemini(mock_server)})
    tools = [failover.Tool("a"), failover.Tool("b")]
    r = client.prompt("Go", tools=tools)
    first, _second = r.tool_calls
    # The caller keeps only the first call, and edits the text.
    message = {**r.message, "content": "EDITED", "tool_calls": r.message["tool_calls"][:1]}
    history = ["Go", message, {"role": "tool", "tool_call_id": first.id, "content": "ok"}]
    client.prompt([{"role": "user", "content": "Go"}, *history[1:]], tools=tools)
    sent = mock_server.requests[1].json["contents"][1]
    assert sent == {
        "role": "model",
        "parts": [
            {"text": "EDITED"},
            {"functionCall": {"name": "a", "args": {}}, "thoughtSignature": "s1"},
        ],
    }
    # A call another model wrote gets the signature Google documents for that.
    foreign = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_x", "type": "function", "function": {"name": "a", "arguments": "{}"}}
        ],
    }
    client.prompt(
        [
            {"role": "user", "content": "Go"},
            foreign,
            {"role": "tool", "tool_call_id": "call_x", "content": "ok"},
        ],
        tools=tools,
    )
    part = mock_server.requests[2].json["contents"][1]["parts"][0]
    assert part["thoughtSignature"] == "skip_thought_signature_validator"


@pytest.mark.parametrize(
    ("answer", "error", "match"),
    [
        (
            {"candidates": [{"content": {"parts": []}, "finishReason": "MALFORMED_FUNCTION_CALL"}]},
            failover.ServerError,
            "unusable function call",
        ),
    ],
)
def test_gemini_answers_that_are_failures(
    mock_server: MockServer, answer: Any, error: type, match: str
) -> None:
    mock_server.push(json=answer)
    client = failover.Client(
        {"g": gemini(mock_server)}, retry=failover.RetryPolicy(max_retries_last=0)
    )
    with pytest.raises(error, match=match):
        client.prompt("Hi")


def test_failures_inside_a_200_are_retried_not_answers(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    mock_server.push(
        json={
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "The answer is"},
                    "finish_reason": "insufficient_system_resource",
                }
            ]
        }
    )
    mock_server.push(
        json={
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "error",
                    "message": {"role": "assistant", "content": ""},
                    "error": {"code": 502, "message": "upstream died"},
                }
            ]
        }
    )
    backup_server.push_text("whole answer")
    backup_server.push_text("whole answer")
    client = failover.Client(
        {
            "deepseek": failover.DeepSeek("deepseek-chat", api_key=KEY, base_url=mock_server.url),
            "backup": openai(backup_server),
        },
        retry=failover.RetryPolicy(max_retries=0),
        sleeper=FakeSleeper(),
    )
    r = client.prompt("Hi")
    assert (r.provider, r.text) == ("backup", "whole answer")
    assert [(a.status, a.kind) for a in r.attempts] == [(503, "overloaded"), (200, None)]
    # The first provider now cools down: its own recovery is another story.
    assert "deepseek" in client.cooldowns()
    client = failover.Client(
        {
            "deepseek": failover.DeepSeek("deepseek-chat", api_key=KEY, base_url=mock_server.url),
            "backup": openai(backup_server),
        },
        retry=failover.RetryPolicy(max_retries=0),
    )
    r = client.prompt("Hi")
    assert [(a.status, a.kind) for a in r.attempts] == [(502, "overloaded"), (200, None)]


def test_mistral_reasoning_blocks_and_deepseek_cache_hits(mock_server: MockServer) -> None:
    mock_server.push(
        json={
            "model": "magistral-medium-latest",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {
                        "role": "assistant",
                        "content": [
                            {"type": "thinking", "thinking": [{"type": "text", "text": "hmm"}]},
                            {"type": "text", "text": "Answer"},
                        ],
                    },
                }
            ],
        }
    )
    mock_server.push(
        json={
            "model": "deepseek-chat",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"content": "x"}}],
            "usage": {
                "prompt_tokens": 10,
                "completion_tokens": 1,
                "prompt_cache_hit_tokens": 8,
                "prompt_cache_miss_tokens": 2,
            },
        }
    )
    client = failover.Client(
        {
            "m": failover.Mistral("magistral-medium-latest", api_key=KEY, base_url=mock_server.url),
            "d": failover.DeepSeek("deepseek-chat", api_key=KEY, base_url=mock_server.url),
        }
    )
    assert client.prompt("Hi", provider="m").text == "Answer"
    assert client.prompt("Hi", provider="d").usage.cache_read_tokens == 8


def test_huge_usage_numbers_saturate_instead_of_failing(mock_server: MockServer) -> None:
    top = 2**64 - 1
    mock_server.push(
        json={
            "candidates": [{"content": {"parts": [{"text": "h"}]}, "finishReason": "STOP"}],
            "usageMetadata": {
                "promptTokenCount": top,
                "toolUsePromptTokenCount": 5,
                "candidatesTokenCount": top,
                "thoughtsTokenCount": 1,
            },
        }
    )
    client = failover.Client({"g": gemini(mock_server)})
    r = client.prompt("x")
    assert (r.usage.input_tokens, r.usage.output_tokens) == (top, top)


def test_model_names_that_would_change_the_url_are_refused(mock_server: MockServer) -> None:
    for bad in ("gem#x", "gem?x", "../x", "a/b", ".."):
        with pytest.raises(failover.ConfigurationError, match="Gemini model"):
            failover.Gemini(bad, api_key=GEMINI_KEY)
    failover.Gemini("models/gemini-2.5-flash", api_key=GEMINI_KEY)
    failover.Gemini("tunedModels/my-model-1", api_key=GEMINI_KEY)
    for bad in ("..", ".", "a/b", "dep?x"):
        with pytest.raises(failover.ConfigurationError, match="deployment name"):
            failover.Azure(bad, endpoint="https://r.openai.azure.com", api_key=KEY)
        with pytest.raises(failover.ConfigurationError, match="deployment name"):
            failover.Azure(
                "ok", endpoint="https://r.openai.azure.com", api_key=KEY, embedding_model=bad
            )
    for version in ("v1", "preview", "2024-1-1", "2024-10-21-previewx"):
        with pytest.raises(failover.ConfigurationError, match="api_version"):
            failover.Azure("d", endpoint="https://r.openai.azure.com", api_version=version)
    failover.Azure(
        "d", endpoint="https://r.openai.azure.com", api_version="2025-04-01-preview", api_key=KEY
    )
    with pytest.raises(failover.ConfigurationError, match="endpoint must be"):
        failover.Azure("d", endpoint="ftp://x", api_key=KEY)
    client = failover.Client(
        {
            "az": failover.Azure("dep", endpoint=mock_server.url, api_key=KEY),
            "g": gemini(mock_server),
        }
    )
    for provider, bad in (("az", "../x?y"), ("g", "gem#x")):
        with pytest.raises(failover.ConfigurationError, match="model="):
            client.prompt("hi", provider=provider, model=bad)
        with pytest.raises(failover.ConfigurationError, match="model="):
            client.embed("hi", provider=provider, model=bad)
    assert mock_server.requests == []


def test_embed_refuses_a_gemini_batch_too_big_and_ragged_vectors(mock_server: MockServer) -> None:
    client = failover.Client(
        {"g": gemini(mock_server)}, retry=failover.RetryPolicy(max_retries_last=0)
    )
    with pytest.raises(failover.ConfigurationError, match="at most 100"):
        client.embed(["t"] * 150)
    with pytest.raises(failover.ConfigurationError, match=r"texts\[1\] is a int"):
        client.embed(["a", 3])  # type: ignore[list-item]
    mock_server.push(json={"embeddings": [{"values": [1.0, 2.0]}, {"values": [1.0]}]})
    with pytest.raises(failover.ServerError, match="different lengths"):
        client.embed(["a", "b"])
    with pytest.raises(ValueError, match="finite"):
        mock_server.push_embeddings([[float("nan")]])


def test_a_404_hint_fits_the_wire(mock_server: MockServer) -> None:
    client = failover.Client(
        {"local": ollama(mock_server), "g": gemini(mock_server)},
        retry=failover.RetryPolicy(max_retries=0, max_retries_last=0),
    )
    mock_server.push(status=404, body="404 page not found")
    with pytest.raises(failover.ModelNotFound, match="localhost:11434"):
        client.prompt("x", provider="local")
    mock_server.push(status=404, body="Not Found")
    with pytest.raises(failover.ModelNotFound, match="v1beta"):
        client.prompt("x", provider="g")


def test_the_prompt_command_may_name_one_driver_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    from failover import __main__ as cli

    seen: dict[str, Any] = {}

    class Recorder(failover.Client):
        def prompt(self, *args: Any, **kwargs: Any) -> Any:
            seen.update(self.providers)
            raise failover.FailoverError("stop here")

    monkeypatch.setattr(cli, "Client", Recorder)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-cli-test-123456")
    assert cli.main(["prompt", "Hi", "--provider", "openai:a", "--provider", "openai:b"]) == 1
    assert [p.model for p in seen.values()] == ["a", "b"]
    monkeypatch.delenv("OPENAI_API_KEY")
    for name in (
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "GROQ_API_KEY",
        "MISTRAL_API_KEY",
        "DEEPSEEK_API_KEY",
        "XAI_API_KEY",
        "OPENROUTER_API_KEY",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "google-cli-123456")
    seen.clear()
    assert cli.main(["prompt", "Hi"]) == 1
    assert [type(p).__name__ for p in seen.values()] == ["Gemini"]


def test_base64_embeddings_are_decoded_exactly(mock_server: MockServer) -> None:
    import base64
    import struct

    values = [0.5, -0.25, 1e-3, 3.4e38]
    packed = base64.b64encode(struct.pack("<4f", *values)).decode()
    mock_server.push(json={"data": [{"index": 0, "embedding": packed}], "model": "te-3"})
    mock_server.push(json={"data": [{"index": 0, "embedding": "AAAA=="}]})
    client = failover.Client(
        {"openai": failover.OpenAI("gpt", api_key=KEY, base_url=mock_server.url)},
        retry=failover.RetryPolicy(max_retries_last=0),
    )
    e = client.embed("x")
    assert e.vectors == [list(struct.unpack("<4f", struct.pack("<4f", *values)))]
    with pytest.raises(failover.ServerError, match="base64"):
        client.embed("x")
    # The OpenAI-compatible family is asked for floats, which every server speaks.
    assert mock_server.requests[0].json["encoding_format"] == "base64"


def test_calls_with_a_stop_are_tool_calls(mock_server: MockServer) -> None:
    """Found by the new-user trials of 2026-11-30."""
    call = {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    mock_server.push(200, json={"choices": [{"message": message, "finish_reason": "stop"}]})
    r = failover.Client({"g": openai(mock_server)}).prompt("Hi")
    assert r.finish_reason == "tool_calls" and r.tool_calls[0].id == "c1"


def test_a_refusal_is_the_answers_text_in_a_prompt_and_a_stream(mock_server: MockServer) -> None:
    """Found by the new-user trials of 2026-11-30."""
    refusal = "I can't help with that."
    message = {"role": "assistant", "content": None, "refusal": refusal}
    mock_server.push(200, json={"choices": [{"message": message, "finish_reason": "stop"}]})
    chunks = [
        'data: {"choices": [{"index": 0, "delta": {"role": "assistant", "refusal": ""}}]}',
        'data: {"choices": [{"index": 0, "delta": {"refusal": "I can\'t help"}}]}',
        'data: {"choices": [{"index": 0, "delta": {"refusal": " with that."}}]}',
        'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}',
        "data: [DONE]",
    ]
    mock_server.push(sse=chunks)
    client = failover.Client({"g": openai(mock_server)})
    r = client.prompt("Hi")
    assert (r.text, r.finish_reason, r.message["content"]) == (refusal, "content_filter", refusal)
    with client.stream("Hi") as stream:
        streamed = "".join(c.text for c in stream)
    assert streamed == refusal
    assert stream.response is not None and stream.response.finish_reason == "content_filter"
