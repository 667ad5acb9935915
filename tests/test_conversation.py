"""One conversation on every wire: tools, tool calls, history translation,
images (through the public API, asserting the JSON each server saw)."""

from __future__ import annotations

import itertools
import logging
from typing import Any

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

from conftest import KEY, anthropic, gemini, openai, tool_loop

WEATHER = failover.Tool(
    name="weather",
    description="Current weather in a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


def _assistant_call(
    call_id: str, name: str, arguments: str = "{}", content: Any = None, **extra: Any
) -> dict[str, Any]:
    """An assistant turn in the history that made one call, OpenAI-style."""
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    return {"role": "assistant", "content": content, "tool_calls": [call], **extra}


def _openai_tool_call(call_id: str, city: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-tools",
        "model": "gpt-4.1-mini",
        "choices": [
            {
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": "weather", "arguments": f'{{"city": "{city}"}}'},
                        }
                    ],
                },
            }
        ],
    }


def _anthropic_tool_use(call_id: str, city: str) -> dict[str, Any]:
    return {
        "id": "msg_tools",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5",
        "stop_reason": "tool_use",
        "content": [
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": call_id, "name": "weather", "input": {"city": city}},
        ],
        "usage": {"input_tokens": 20, "output_tokens": 10},
    }


def test_tools_and_tool_choice_on_the_openai_wire(mock_server, call):
    mock_server.push(200, json=_openai_tool_call("call_1", "Paris"))
    client = failover.Client({"gpt": openai(mock_server)})
    r = call(client, "Weather in Paris?", tools=[WEATHER], tool_choice="weather")
    sent = mock_server.requests[0].json
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "Current weather in a city",
                "parameters": WEATHER.parameters,
            },
        }
    ]
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "weather"}}
    assert r.finish_reason == "tool_calls" and r.text == ""
    [tool_call] = r.tool_calls
    assert (tool_call.id, tool_call.name, tool_call.arguments) == (
        "call_1",
        "weather",
        {"city": "Paris"},
    )
    assert r.message == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    }


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("required", {"type": "any"}),
        ("weather", {"type": "tool", "name": "weather"}),
    ],
)
def test_tools_and_tool_choice_on_the_anthropic_wire(mock_server, call, choice, expected):
    mock_server.push(200, json=_anthropic_tool_use("toolu_1", "Rome"))
    client = failover.Client({"claude": anthropic(mock_server)})
    # OpenAI-style tool dicts are accepted too.
    openai_style = {"type": "function", "function": WEATHER._wire()}
    r = call(client, "Weather in Rome?", tools=[openai_style], tool_choice=choice)
    sent = mock_server.requests[0].json
    assert_anthropic_valid(sent)
    assert sent["tools"] == [
        {
            "name": "weather",
            "description": "Current weather in a city",
            "input_schema": WEATHER.parameters,
        }
    ]
    assert sent["tool_choice"] == expected
    assert r.finish_reason == "tool_calls" and r.text == "Let me check."
    assert [(c.id, c.arguments) for c in r.tool_calls] == [("toolu_1", {"city": "Rome"})]
    assert r.message["tool_calls"][0]["function"] == {
        "name": "weather",
        "arguments": '{"city":"Rome"}',
    }


def test_a_tool_loop_fails_over_from_claude_to_gpt_mid_conversation(
    mock_server, backup_server, call
):
    # Turn 1: Claude asks for the weather.
    mock_server.push(200, json=_anthropic_tool_use("toolu_7", "Paris"))
    client = failover.Client(
        {"claude": anthropic(mock_server), "gpt": openai(backup_server)}, sleeper=FakeSleeper()
    )
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Weather in Paris?"},
    ]
    r = call(client, history, tools=[WEATHER])
    assert r.provider == "claude"
    history.append(r.message)
    for tool_call in r.tool_calls:
        history.append({"role": "tool", "tool_call_id": tool_call.id, "content": "sunny, 21 C"})
    # Turn 2: Claude is overloaded; GPT answers from the same history.
    mock_server.push(529, json={"type": "error", "error": {"type": "overloaded_error"}})
    backup_server.push_text("Sunny and 21 C in Paris.")
    r = call(client, history, tools=[WEATHER])
    assert (r.provider, r.text) == ("gpt", "Sunny and 21 C in Paris.")
    # What Claude saw on turn 2: its own tool_use and the result, ids intact.
    claude_saw = mock_server.requests[1].json
    assert_anthropic_valid(claude_saw)
    assert claude_saw["system"] == "Answer briefly."
    assert claude_saw["messages"][1]["content"][1] == {
        "type": "tool_use",
        "id": "toolu_7",
        "name": "weather",
        "input": {"city": "Paris"},
    }
    assert claude_saw["messages"][2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_7",
            "content": [{"type": "text", "text": "sunny, 21 C"}],
        }
    ]
    # What GPT saw: the same conversation in its own shape.
    gpt_saw = backup_server.requests[0].json["messages"]
    assert gpt_saw[0] == {"role": "system", "content": "Answer briefly."}
    assert gpt_saw[2]["tool_calls"] == [
        {
            "id": "toolu_7",
            "type": "function",
            "function": {"name": "weather", "arguments": '{"city":"Paris"}'},
        }
    ]
    assert gpt_saw[3] == {"role": "tool", "content": "sunny, 21 C", "tool_call_id": "toolu_7"}


def test_images_become_each_wires_form(mock_server, backup_server):
    image = "data:image/png;base64,iVBORw0KGgo="
    content = [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": image}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
    ]
    mock_server.push_text("A cat.", wire="anthropic")
    backup_server.push_text("A cat.")
    failover.Client({"c": anthropic(mock_server)}).prompt([{"role": "user", "content": content}])
    failover.Client({"g": openai(backup_server)}).prompt([{"role": "user", "content": content}])
    claude_blocks = mock_server.requests[0].json["messages"][0]["content"]
    assert claude_blocks[1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
    }
    assert claude_blocks[2] == {
        "type": "image",
        "source": {"type": "url", "url": "https://example.com/cat.jpg"},
    }
    assert backup_server.requests[0].json["messages"][0]["content"] == content


def test_a_developer_message_is_anthropics_system(mock_server):
    mock_server.push_text("ok", wire="anthropic")
    failover.Client({"c": anthropic(mock_server)}).prompt(
        [{"role": "developer", "content": "Be terse."}, {"role": "user", "content": "Hi"}],
        system="You are failover's test.",
    )
    sent = mock_server.requests[0].json
    assert sent["system"] == "You are failover's test.\n\nBe terse."
    assert sent["messages"] == [{"role": "user", "content": "Hi"}]


@pytest.mark.parametrize(
    ("messages", "kwargs", "why"),
    [
        ([{"role": "tool", "content": "42"}], {}, "tool_call_id"),
        (
            [_assistant_call("c", "f", "{x")],
            {},
            "not JSON",
        ),
        ("Hi", {"tools": [{"description": "no name"}]}, "needs a 'name'"),
        ("Hi", {"tools": [WEATHER], "tool_choice": "forecast"}, "tool_choice"),
        ("Hi", {"tool_choice": "required"}, "needs tools="),
        ("Hi", {"tools": "weather"}, "tools must be a list"),
        ("Hi", {"tools": [{"type": "function", "function": {"name": "a b!"}}]}, "tool name"),
        ("", {}, "nothing to answer"),
        ([{"role": "user", "content": [{"type": "text", "text": " "}]}], {}, "nothing to answer"),
        (
            [
                {"role": "user", "content": "x"},
                {"role": "tool", "tool_call_id": "zzz", "content": "r"},
            ],
            {},
            "no assistant message before it made",
        ),
        *[
            (
                [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": u}}]}],
                {},
                why,
            )
            for u, why in [
                ("data:image/png,notbase64", "not base64"),
                ("data:;base64,AAAA", "not type/subtype"),
                ("data:image/png;base64,AAAAA", "not base64"),
                ("data:image/png;base64,AA=", "not base64"),
                ("data:image/png;base64,A*BC", "not base64"),
                ("data:image/png;base64", "no ','"),
            ]
        ],
        (
            [
                {"role": "user", "content": "x"},
                _assistant_call("c", "t"),
                {"role": "tool", "tool_call_id": "c", "content": "r", "is_error": "yes"},
            ],
            {},
            "is_error",
        ),
    ],
)
def test_conversation_mistakes_are_caught_before_any_request(
    mock_server, call, messages, kwargs, why
):
    client = failover.Client({"gpt": openai(mock_server)})
    with pytest.raises(failover.ConfigurationError, match=why):
        call(client, messages, **kwargs)
    assert mock_server.requests == []


def test_a_tool_call_whose_arguments_are_not_json_is_kept_as_written(mock_server):
    answer = _openai_tool_call("call_9", "Paris")
    answer["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = '{"city": Par'
    mock_server.push(200, json=answer)
    r = failover.Client({"gpt": openai(mock_server)}).prompt("Hi", tools=[WEATHER])
    [tool_call] = r.tool_calls
    assert tool_call.arguments is None and tool_call.arguments_json == '{"city": Par'
    # Sending that history back is the caller's to repair: refused before sending.
    with pytest.raises(failover.ConfigurationError, match="not JSON"):
        failover.Client({"gpt": openai(mock_server)}).prompt(
            [{"role": "user", "content": "Hi"}, r.message]
        )


def test_json_parses_the_text(mock_server):
    mock_server.push_text('{"answer": 42}')
    assert failover.Client({"g": openai(mock_server)}).prompt("Hi").json() == {"answer": 42}


def test_tool_values_are_checked_and_immutable():
    with pytest.raises(failover.ConfigurationError):
        failover.Tool(name="")
    with pytest.raises(failover.ConfigurationError):
        failover.Tool(name="t", parameters="not a schema")  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        WEATHER.name = "other"  # type: ignore[misc]
    assert "weather" in repr(WEATHER)


SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "city",
        "schema": {"type": "object", "properties": {"name": {"type": "string"}}},
        "strict": True,
    },
}


def test_structured_output_in_each_wires_native_form(mock_server, backup_server, call):
    mock_server.push_text('{"name": "Paris"}', wire="anthropic")
    backup_server.push_text('{"name": "Paris"}')
    r = call(failover.Client({"c": anthropic(mock_server)}), "City?", response_format=SCHEMA)
    assert r.json() == {"name": "Paris"}
    closed = {**SCHEMA["json_schema"]["schema"], "additionalProperties": False}
    assert mock_server.requests[0].json["output_config"] == {
        "format": {"type": "json_schema", "schema": closed}
    }
    call(failover.Client({"g": openai(backup_server)}), "City?", response_format=SCHEMA)
    assert backup_server.requests[0].json["response_format"] == SCHEMA


def test_json_object_without_a_schema(mock_server, backup_server):
    mock_server.push_text("{}", wire="anthropic")
    backup_server.push_text("{}")
    plain_json = {"type": "json_object"}
    failover.Client({"c": anthropic(mock_server)}).prompt("Hi", response_format=plain_json)
    failover.Client({"g": openai(backup_server)}).prompt("Hi", response_format=plain_json)
    assert mock_server.requests[0].json["output_config"]["format"]["schema"] == {"type": "object"}
    assert backup_server.requests[0].json["response_format"] == plain_json


def test_sampling_parameters_go_under_each_wires_names(mock_server, backup_server, caplog):
    mock_server.push_text("ok", wire="anthropic")
    backup_server.push_text("ok")

    caplog.set_level(logging.DEBUG, logger="failover")
    options: dict[str, Any] = {"stop": ["END"], "top_p": 0.5, "seed": 7}
    failover.Client({"c": anthropic(mock_server)}).prompt("Hi", **options)
    failover.Client({"g": openai(backup_server)}).prompt("Hi", **options)
    claude = mock_server.requests[0].json
    assert (claude["stop_sequences"], claude["top_p"]) == (["END"], 0.5)
    assert "seed" not in claude and "stop" not in claude, "never sent under another name"
    notes = [r.getMessage() for r in caplog.records]
    assert any(n.startswith("c: seed=7 not sent: the Anthropic API has no seed") for n in notes), (
        notes
    )
    gpt = backup_server.requests[0].json
    assert (gpt["stop"], gpt["top_p"], gpt["seed"]) == (["END"], 0.5, 7)


def test_provider_params_are_merged_into_every_body(mock_server):
    mock_server.push_text("ok", wire="anthropic")
    provider = anthropic(
        mock_server,
        params={"thinking": {"type": "enabled", "budget_tokens": 2048}, "model": "ignored"},
    )
    failover.Client({"c": provider}).prompt("Hi")
    sent = mock_server.requests[0].json
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert sent["model"] == "claude-haiku-4-5", "params never replace the model or messages"


def test_per_call_headers_are_sent_and_their_secrets_redacted(mock_server):
    mock_server.push(401, json={"error": {"message": "tenant token TENANT-TOKEN-123 revoked"}})
    client = failover.Client({"g": openai(mock_server)})
    with pytest.raises(failover.AuthenticationError) as info:
        client.prompt("Hi", headers={"X-Tenant-Token": "TENANT-TOKEN-123", "X-Trace": "t1"})
    sent = mock_server.requests[0].headers
    assert (sent["x-tenant-token"], sent["x-trace"]) == ("TENANT-TOKEN-123", "t1")
    assert "TENANT-TOKEN-123" not in str(info.value)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"response_format": "json"},
        {"response_format": {"type": "yaml"}},
        {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
        {"stop": 5},
        {"stop": [""]},
        {"top_p": 2},
        {"seed": 1.5},
        {"headers": {"Content-Length": "1"}},
        {"headers": {"bad name": "x"}},
    ],
)
def test_bad_call_options_are_refused_before_any_request(mock_server, kwargs):
    with pytest.raises(failover.ConfigurationError):
        failover.Client({"g": openai(mock_server)}).prompt("Hi", **kwargs)
    assert mock_server.requests == []


def test_bad_params_are_refused_when_given():
    with pytest.raises(failover.ConfigurationError):
        failover.OpenAI(model="m", api_key="k", params="reasoning_effort=low")  # type: ignore[arg-type]
    with pytest.raises(failover.ConfigurationError):
        failover.Client({"a": failover.OpenAI(model="m", api_key="k", params={"x": object()})})


def test_anthropic_thinking_blocks_go_back_to_anthropic_only(mock_server, backup_server):
    thinking = {"type": "thinking", "thinking": "Paris is in France.", "signature": "sig-abc"}
    answer = _anthropic_tool_use("toolu_3", "Paris")
    answer["content"].insert(0, thinking)
    mock_server.push(200, json=answer)
    claude = failover.Client({"c": anthropic(mock_server)})
    r = claude.prompt("Weather?", tools=[WEATHER])
    assert r.message["provider_data"] == {"anthropic": {"blocks": [thinking]}}
    history = [
        {"role": "user", "content": "Weather?"},
        r.message,
        {"role": "tool", "tool_call_id": "toolu_3", "content": "sunny"},
    ]
    mock_server.push_text("Sunny.", wire="anthropic")
    backup_server.push_text("Sunny.")
    claude.prompt(history, tools=[WEATHER])
    assert mock_server.requests[1].json["messages"][1]["content"][0] == thinking
    failover.Client({"g": openai(backup_server)}).prompt(history, tools=[WEATHER])
    sent = backup_server.requests[0].json["messages"][1]
    assert "provider_data" not in sent and sent["tool_calls"][0]["id"] == "toolu_3"


# What the Anthropic API accepts, checked on every body sent to it ----------------


def assert_anthropic_valid(body: dict[str, Any]) -> None:
    """The rules the Messages API enforces that a mock server would not."""
    import re

    messages = body["messages"]
    assert messages, "at least one message"
    roles = [m["role"] for m in messages]
    assert all(a != b for a, b in itertools.pairwise(roles)), f"roles alternate: {roles}"
    tool_ids: set[str] = set()
    for m in messages:
        blocks = m["content"] if isinstance(m["content"], list) else [m["content"]]
        assert blocks, f"no empty turn: {m}"
        for b in blocks:
            if isinstance(b, str):
                assert b, "no empty text"
                continue
            assert not (b["type"] == "text" and not b["text"]), f"no empty text block: {m}"
            if b["type"] == "tool_use":
                assert re.fullmatch(r"[a-zA-Z0-9_-]+", b["id"]), b["id"]
                assert isinstance(b["input"], dict)
                tool_ids.add(b["id"])
            if b["type"] == "tool_result":
                assert b["tool_use_id"] in tool_ids, "a result answers an earlier call"
                for inner in b.get("content", []):
                    assert inner.get("text", "x"), "no empty text in a result"
    if tool_ids:
        assert body.get("tools"), "tool blocks need tools declared"
    assert not ("temperature" in body and "top_p" in body)


def test_a_gpt_to_claude_tool_loop_with_thinking_is_valid_for_anthropic(mock_server, backup_server):
    # GPT answers turn 1 with an oddly-named call id and empty arguments.
    answer = _openai_tool_call("functions.weather:0", "Paris")
    answer["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = ""
    backup_server.push(200, json=answer)
    client = failover.Client(
        {
            "gpt": openai(backup_server),
            "claude": anthropic(
                mock_server, params={"thinking": {"type": "enabled", "budget_tokens": 1024}}
            ),
        },
        sleeper=FakeSleeper(),
    )
    history: list[dict[str, Any]] = [{"role": "user", "content": "Weather?"}]
    r = client.prompt(history, tools=[WEATHER])
    history += [r.message, {"role": "tool", "tool_call_id": r.tool_calls[0].id, "content": ""}]
    # Turn 2: GPT is down; Claude gets GPT's turn.
    backup_server.push(503)
    mock_server.push_text("Sunny.", wire="anthropic")
    assert client.prompt(history, tools=[WEATHER], temperature=0.2, top_p=0.9).provider == "claude"
    sent = mock_server.requests[0].json
    assert_anthropic_valid(sent)
    assert "thinking" not in sent, "GPT's tool turn has no signed thinking block"
    use, result = sent["messages"][1]["content"][0], sent["messages"][2]["content"][0]
    # "functions.weather:0" in Anthropic's alphabet, with a digest of the original
    # (so that "functions_weather_0" itself could not be taken for it).
    assert use["id"] == result["tool_use_id"]
    assert use["id"].startswith("functions_weather_0_") and len(use["id"]) == 36
    assert use["input"] == {} and "content" not in result
    assert sent["temperature"] == 0.2 and "top_p" not in sent


def test_a_closing_call_without_tools_still_declares_the_historys_tools(mock_server):
    mock_server.push_text("Sunny, 21 C.", wire="anthropic")
    history = [
        {"role": "user", "content": "Weather?"},
        _assistant_call("t1", "weather", content=""),
        {"role": "tool", "tool_call_id": "t1", "content": "sunny"},
        {"role": "assistant", "content": "Summary: "},
    ]
    failover.Client({"c": anthropic(mock_server)}).prompt(history, tool_choice="none")
    sent = mock_server.requests[0].json
    assert_anthropic_valid(sent)
    assert sent["tools"] == [{"name": "weather", "input_schema": {"type": "object"}}]
    assert sent["tool_choice"] == {"type": "none"}
    assert sent["messages"][-1]["content"] == "Summary:", "a prefill ends without whitespace"


def test_tool_choice_none_without_tools_is_not_sent_to_openai(mock_server):
    mock_server.push_text("ok")
    failover.Client({"g": openai(mock_server)}).prompt("Hi", tool_choice="none")
    assert "tool_choice" not in mock_server.requests[0].json


def test_an_openai_refusal_is_a_content_filter(mock_server):
    refusal = {
        "model": "gpt-4.1",
        "choices": [
            {
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": None, "refusal": "I can't help."},
            }
        ],
    }
    mock_server.push(200, json=refusal)
    r = failover.Client({"g": openai(mock_server)}).prompt("Hi")
    # The model's words are the answer's text; the reason says what it is.
    assert (r.text, r.finish_reason) == ("I can't help.", "content_filter")


def test_names_strict_tools_and_refusal_parts_pass_through(mock_server):
    mock_server.push_text("ok")
    strict = {"type": "function", "function": {**WEATHER._wire(), "strict": True}}
    history = [
        {"role": "user", "content": "Hi", "name": "alice"},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]},
        {"role": "user", "content": "Please"},
    ]
    failover.Client({"g": openai(mock_server)}).prompt(history, tools=[strict])
    sent = mock_server.requests[0].json
    assert sent["messages"][0]["name"] == "alice"
    assert sent["messages"][1]["content"] == "No."
    assert sent["tools"][0]["function"]["strict"] is True


def test_anthropic_structured_output_closes_every_object(mock_server):
    mock_server.push_text("{}", wire="anthropic")
    failover.Client({"c": anthropic(mock_server)}).prompt("City?", response_format=SCHEMA)
    schema = mock_server.requests[0].json["output_config"]["format"]["schema"]
    assert schema["additionalProperties"] is False


@pytest.mark.parametrize(("arguments", "why"), [("[1, 2]", "JSON object"), ("{x", "not JSON")])
def test_history_arguments_must_be_a_json_object(mock_server, arguments, why):
    history = [_assistant_call("c", "f", arguments)]
    with pytest.raises(failover.ConfigurationError, match=why):
        failover.Client({"c": anthropic(mock_server)}).prompt(history)
    assert mock_server.requests == []


def test_tool_names_that_tool_choice_reserves_are_refused(mock_server):
    with pytest.raises(failover.ConfigurationError, match="may not be named"):
        failover.Client({"g": openai(mock_server)}).prompt("Hi", tools=[failover.Tool(name="none")])


# A provider whose wire cannot express the call is skipped -------------------------


def test_a_provider_that_cannot_take_the_conversation_is_skipped_with_the_reason(
    mock_server, backup_server, call
):
    backup_server.push_text("hello")
    events: list[object] = []
    client = failover.Client(
        {"claude": anthropic(mock_server), "gpt": openai(backup_server)}, on_event=events.append
    )
    # Anthropic needs a user message first; Chat Completions takes this as is.
    r = call(client, [{"role": "assistant", "content": "Hi, how can I help?"}])
    assert r.provider == "gpt" and mock_server.requests == []
    skipped = r.attempts[0]
    assert skipped.provider == "claude" and skipped.status is None
    assert "start with a user message" in (skipped.skipped or "")
    assert r.attempts[1].skipped is None
    assert events == [], "a skip emits no event"


def test_when_no_provider_can_serve_the_call_nothing_is_sent(mock_server, call):
    client = failover.Client({"claude": anthropic(mock_server)})
    with pytest.raises(failover.ConfigurationError, match="no provider can serve") as info:
        call(client, [{"role": "system", "content": "Only a system prompt."}])
    assert mock_server.requests == []
    assert "claude" in str(info.value) and info.value.attempts[0].skipped


def test_an_image_in_a_tool_result_moves_to_a_user_message_on_chat_completions(mock_server):
    # Chat Completions takes tool results as text only; a screenshot a tool
    # returned to Claude must still reach GPT after a failover.
    image = {"type": "image_url", "image_url": {"url": "https://example.com/chart.png"}}
    history = [
        {"role": "user", "content": "Plot both."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "t1", "type": "function", "function": {"name": "plot", "arguments": "{}"}},
                {"id": "t2", "type": "function", "function": {"name": "plot", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "content": [{"type": "text", "text": "ok"}, image]},
        {"role": "tool", "tool_call_id": "t2", "content": "no data"},
        {"role": "user", "content": "Compare them."},
    ]
    mock_server.push_text("A chart.")
    r = failover.Client({"gpt": openai(mock_server)}).prompt(history)
    assert r.text == "A chart." and r.attempts[0].skipped is None
    sent = mock_server.requests[0].json["messages"]
    # The images join the user message that follows (roles still alternate).
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool", "user"]
    assert sent[2]["content"] == "ok\n[image 1 of this result: in the next user message]"
    assert sent[3]["content"] == "no data", "a result without images is left as it is"
    assert sent[4]["content"] == [
        {"type": "text", "text": "The images returned by tool call t1:"},
        image,
        {"type": "text", "text": "Compare them."},
    ]


def test_an_image_in_a_tool_result_goes_to_anthropic_as_it_is(mock_server):
    image = {"type": "image_url", "image_url": {"url": "https://example.com/chart.png"}}
    history = [
        {"role": "user", "content": "Plot it."},
        _assistant_call("t1", "plot"),
        {"role": "tool", "tool_call_id": "t1", "content": [image]},
    ]
    mock_server.push_text("A chart.", wire="anthropic")
    failover.Client({"claude": anthropic(mock_server)}).prompt(history)
    sent = mock_server.requests[0].json
    assert_anthropic_valid(sent)
    assert sent["messages"][2]["content"][0]["content"][0]["source"]["type"] == "url"


def test_an_image_in_a_system_message_is_refused_everywhere(mock_server):
    image = {"type": "image_url", "image_url": {"url": "https://example.com/logo.png"}}
    with pytest.raises(failover.ConfigurationError, match="text only"):
        failover.Client({"g": openai(mock_server)}).prompt(
            [{"role": "system", "content": [image]}, {"role": "user", "content": "Hi"}]
        )


def test_a_failed_tool_result_and_forced_tools_with_thinking_on_anthropic(mock_server):
    mock_server.push_text("Sorry.", wire="anthropic")
    history = [
        {"role": "user", "content": "Weather?"},
        _assistant_call(
            "t1",
            "weather",
            provider_data={
                "anthropic": {"blocks": [{"type": "thinking", "thinking": "t", "signature": "s"}]}
            },
        ),
        {"role": "tool", "tool_call_id": "t1", "content": "timeout", "is_error": True},
    ]
    provider = anthropic(
        mock_server, params={"thinking": {"type": "enabled", "budget_tokens": 1024}}
    )
    failover.Client({"c": provider}).prompt(history, tools=[WEATHER], tool_choice="required")
    sent = mock_server.requests[0].json
    assert_anthropic_valid(sent)
    assert sent["messages"][2]["content"][0]["is_error"] is True
    assert "thinking" not in sent, "thinking may not be on while a tool is forced"


@pytest.mark.parametrize(
    "thinking", [{"type": "enabled", "budget_tokens": 2048}, {"type": "adaptive"}]
)
def test_thinking_drops_the_sampling_hints_anthropic_refuses_beside_it(
    mock_server, call, caplog, thinking
):

    caplog.set_level(logging.DEBUG, logger="failover")
    client = failover.Client({"claude": anthropic(mock_server, params={"thinking": thinking})})
    cases = [
        # (temperature, top_p) given -> what is sent
        ((0.2, None), {}),
        ((None, 0.5), {}),
        ((0.2, 0.97), {"top_p": 0.97}),  # a top_p thinking takes then goes alone
        ((1.0, None), {"temperature": 1.0}),  # the one temperature it takes
        ((None, 0.95), {"top_p": 0.95}),
    ]
    for (temperature, top_p), expected in cases:
        mock_server.push_text("ok", wire="anthropic")
        assert call(client, temperature=temperature, top_p=top_p).text == "ok"
        sent = mock_server.requests[-1].json
        assert sent["thinking"] == thinking
        hints = {k: sent[k] for k in ("temperature", "top_p") if k in sent}
        assert hints == expected, (temperature, top_p)
    records = [r for r in caplog.records if " not sent: " in r.getMessage()]
    assert all(r.levelno == logging.DEBUG for r in records)
    notes = [r.getMessage() for r in records]
    # One note per call that dropped something, naming what (none for what was sent).
    dropped = [n.split(" not sent: ")[0] for n in notes]
    assert dropped == ["claude: temperature=0.2", "claude: top_p=0.5", "claude: temperature=0.2"]
    assert "while thinking is on" in notes[0]


def test_a_thinking_budget_gets_room_above_it_in_max_tokens(mock_server):
    """Anthropic refuses a max_tokens at or below thinking's budget_tokens: with none given,
    the budget comes on top of the usual 4096; one given is the caller's."""
    thinking = {"type": "enabled", "budget_tokens": 8000}
    client = failover.Client({"claude": anthropic(mock_server, params={"thinking": thinking})})
    for given, sent in [(None, 12096), (9000, 9000)]:
        mock_server.push_text("ok", wire="anthropic")
        client.prompt("Hi", max_tokens=given)
        assert mock_server.requests[-1].json["max_tokens"] == sent
    # Adaptive thinking names no budget; without thinking nothing is added.
    for params in [{"thinking": {"type": "adaptive"}}, {"thinking": {"type": "disabled"}}, None]:
        mock_server.push_text("ok", wire="anthropic")
        failover.Client({"claude": anthropic(mock_server, params=params)}).prompt("Hi")
        assert mock_server.requests[-1].json["max_tokens"] == 4096


def test_a_max_tokens_at_or_below_the_thinking_budget_skips_anthropic(
    mock_server, backup_server, call
):
    """Anthropic refuses it as a bad request, which would stop the chain: it is a call the
    wire cannot take. Found by the last new-user trial of 2026-12-01."""
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    backup_server.push_text("from gpt")
    client = failover.Client(
        {"claude": anthropic(mock_server, params=thinking), "gpt": openai(backup_server)}
    )
    r = call(client, max_tokens=2048)
    assert r.provider == "gpt" and mock_server.requests == []
    assert r.attempts[0].skipped is not None and "budget_tokens (2048" in r.attempts[0].skipped


def test_without_thinking_anthropic_gets_the_temperature(mock_server):
    mock_server.push_text("ok", wire="anthropic")
    disabled = anthropic(mock_server, params={"thinking": {"type": "disabled"}})
    failover.Client({"claude": disabled}).prompt("Hi", temperature=0.2)
    assert mock_server.requests[0].json["temperature"] == 0.2


def test_a_prefill_skips_anthropic_while_thinking_is_on(mock_server, backup_server, call):
    backup_server.push_text("Paris.")
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    client = failover.Client(
        {"claude": anthropic(mock_server, params=thinking), "gpt": openai(backup_server)}
    )
    prefill = [
        {"role": "user", "content": "The capital of France?"},
        {"role": "assistant", "content": "The capital is"},
    ]
    r = call(client, prefill)
    assert r.provider == "gpt" and mock_server.requests == []
    skipped = r.attempts[0]
    assert skipped.provider == "claude" and skipped.status is None
    assert "prefill" in (skipped.skipped or "") and "thinking" in (skipped.skipped or "")
    # Alone, it is refused before anything is sent, with the reason.
    with pytest.raises(failover.ConfigurationError, match="prefill"):
        failover.Client({"claude": anthropic(mock_server, params=thinking)}).prompt(prefill)
    # A forced tool leaves thinking off: the prefill is sent then.
    mock_server.push_text(" Paris.", wire="anthropic")
    only = failover.Client({"claude": anthropic(mock_server, params=thinking)})
    only.prompt(prefill, tools=[WEATHER], tool_choice="required")
    sent = mock_server.requests[0].json
    assert "thinking" not in sent and sent["messages"][-1]["role"] == "assistant"


def test_whitespace_only_text_is_not_sent_to_anthropic(mock_server: MockServer) -> None:
    """Found by the new-user trials of 2026-11-30."""
    history = tool_loop("t1")
    history[1]["content"] = "  "
    mock_server.push_text("Sunny.", wire="anthropic")
    failover.Client({"c": anthropic(mock_server)}).prompt(history)
    assistant = mock_server.requests[0].json["messages"][1]["content"]
    assert [b["type"] for b in assistant] == ["tool_use"]


def test_call_ids_that_differ_outside_anthropics_alphabet_stay_distinct(
    mock_server: MockServer,
) -> None:
    """Found by the new-user trials of 2026-11-30."""
    mock_server.push_text("Sunny.", wire="anthropic")
    failover.Client({"c": anthropic(mock_server)}).prompt(tool_loop("a.b", "a/b", "a_b"))
    sent = mock_server.requests[0].json["messages"]
    uses = [b["id"] for b in sent[1]["content"]]
    results = [b["tool_use_id"] for b in sent[2]["content"]]
    assert len(set(uses)) == 3 and uses == results
    assert uses[2] == "a_b", "an id Anthropic takes is sent as it is"


def test_a_conversation_without_a_user_turn_skips_gemini(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    """Found by the new-user trials of 2026-11-30."""
    client = failover.Client({"gem": gemini(mock_server), "gpt": openai(backup_server)})
    for history in (
        [{"role": "system", "content": "Greet the user."}],
        [{"role": "system", "content": "Go on."}, {"role": "assistant", "content": "Once"}],
    ):
        backup_server.push_text("Hello.")
        r = client.prompt(history)
        assert r.provider == "gpt" and mock_server.requests == []
        assert "needs a user turn" in (r.attempts[0].skipped or "")


@pytest.mark.parametrize(
    "choice",
    [
        {"type": "function", "function": {"name": "weather"}},
        {"type": "tool", "name": "weather"},
    ],
)
def test_tool_choice_takes_openai_and_anthropic_dicts(
    mock_server: MockServer, choice: dict[str, Any]
) -> None:
    """Found by the new-user trials of 2026-11-30."""
    mock_server.push_text("ok")
    tool = failover.Tool(name="weather", parameters={"type": "object", "properties": {}})
    failover.Client({"g": openai(mock_server)}).prompt("Hi", tools=[tool], tool_choice=choice)
    assert mock_server.requests[0].json["tool_choice"] == {
        "type": "function",
        "function": {"name": "weather"},
    }


def test_tool_choice_any_is_required_and_a_bogus_dict_is_refused(
    mock_server: MockServer,
) -> None:
    """Found by the new-user trials of 2026-11-30."""
    mock_server.push_text("ok")
    tool = failover.Tool(name="weather")
    client = failover.Client({"g": openai(mock_server)})
    client.prompt("Hi", tools=[tool], tool_choice={"type": "any"})
    assert mock_server.requests[0].json["tool_choice"] == "required"
    with pytest.raises(failover.ConfigurationError, match="tool_choice"):
        client.prompt("Hi", tools=[tool], tool_choice={"type": "bogus"})


@pytest.mark.parametrize("name", ["bad name", "auto", "x" * 65, "a.b"])
def test_a_tool_name_providers_refuse_is_refused_by_tool(name: str) -> None:
    """Found by the new-user trials of 2026-11-30."""
    with pytest.raises(failover.ConfigurationError, match="tool"):
        failover.Tool(name=name)


def test_an_images_detail_reaches_chat_completions_only(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    """Found by the new-user trials of 2026-11-30."""
    image = {"type": "image_url", "image_url": {"url": "https://e.com/a.png", "detail": "low"}}
    question = [{"role": "user", "content": [{"type": "text", "text": "What is it?"}, image]}]
    mock_server.push_text("A cat.")
    backup_server.push_text("A cat.", wire="anthropic")
    failover.Client({"g": openai(mock_server)}).prompt(question)
    failover.Client({"c": anthropic(backup_server)}).prompt(question)
    assert mock_server.requests[0].json["messages"][0]["content"][1] == image
    sent = backup_server.requests[0].json["messages"][0]["content"][1]
    assert sent == {"type": "image", "source": {"type": "url", "url": "https://e.com/a.png"}}
    with pytest.raises(failover.ConfigurationError, match="detail"):
        bad = {"type": "image_url", "image_url": {"url": "https://e.com/a.png", "detail": 3}}
        failover.Client({"g": openai(mock_server)}).prompt([{"role": "user", "content": [bad]}])


def test_whitespace_only_system_text_is_not_sent_to_anthropic(mock_server: MockServer) -> None:
    """Found by the new-user trials of 2026-11-30."""
    mock_server.push_text("Hi.", wire="anthropic")
    mock_server.push_text("Hi.", wire="anthropic")
    client = failover.Client({"c": anthropic(mock_server)})
    client.prompt("Hi", system=" \n")
    client.prompt([{"role": "system", "content": "  "}, {"role": "user", "content": "Hi"}])
    assert all("system" not in r.json for r in mock_server.requests)


def test_a_tool_call_left_without_a_result_is_refused_before_sending(
    mock_server: MockServer,
) -> None:
    """Found by the new-user trials of 2026-11-30."""
    history = [*tool_loop("c1", "c2"), {"role": "user", "content": "And?"}]
    del history[3]  # c2's result
    with pytest.raises(failover.ConfigurationError, match=r'\["c2"\] have no result'):
        failover.Client({"g": openai(mock_server)}).prompt(history)
    assert mock_server.requests == []


def test_a_tool_choice_dict_with_a_field_one_wire_reads_is_refused() -> None:
    """Found by the new-user trials of 2026-11-30."""
    client = failover.Client({"c": failover.Anthropic(model="m", api_key=KEY)})
    tool = failover.Tool(name="weather")
    with pytest.raises(failover.ConfigurationError, match=r"disable_parallel_tool_use.*params="):
        client.prompt(
            "Hi",
            tools=[tool],
            tool_choice={"type": "auto", "disable_parallel_tool_use": True},
        )


def test_an_images_detail_is_passed_on_as_given(mock_server: MockServer) -> None:
    # OpenAI adds values ("original"): a str is passed on, not judged.
    """Found by the new-user trials of 2026-11-30."""
    image = {"type": "image_url", "image_url": {"url": "https://e.com/a.png", "detail": "original"}}
    mock_server.push_text("A cat.")
    failover.Client({"g": openai(mock_server)}).prompt([{"role": "user", "content": [image]}])
    assert mock_server.requests[0].json["messages"][0]["content"][0] == image


@pytest.mark.parametrize(
    ("url", "media_type"),
    [
        ("data:image/png;base64,iVBORw0K\nGgoAAAAN\nSUhEUg==\n", "image/png"),  # wrapped at 76
        ("data:image/svg+xml;charset=utf-8;base64,iVBORw0KGgoAAAANSUhEUg==", "image/svg+xml"),
        ("data:image/png;name=a.png;BASE64,iVBORw0KGgoAAAANSUhEUg==", "image/png"),
    ],
)
def test_data_urls_as_tools_write_them_are_taken_in_one_form(
    mock_server: MockServer, url: str, media_type: str
) -> None:
    """Found by the new-user trials of 2026-11-30."""
    mock_server.push_text("ok", wire="anthropic")
    image = {"type": "image_url", "image_url": {"url": url}}
    failover.Client({"c": anthropic(mock_server)}).prompt([{"role": "user", "content": [image]}])
    source = mock_server.requests[0].json["messages"][0]["content"][0]["source"]
    assert source["type"] == "base64" and source["data"] == "iVBORw0KGgoAAAANSUhEUg=="
    assert source["media_type"] == media_type


def test_an_image_in_an_assistant_message_is_refused() -> None:
    """Found by the new-user trials of 2026-11-30."""
    image = {"type": "image_url", "image_url": {"url": "https://e.com/a.png"}}
    client = failover.Client({"g": failover.OpenAI(model="m", api_key=KEY)})
    with pytest.raises(failover.ConfigurationError, match="assistant message takes text only"):
        client.prompt(
            [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": [image]}]
        )


def test_a_json_schemas_description_reaches_chat_completions(mock_server: MockServer) -> None:
    """Found by the new-user trials of 2026-11-30."""
    mock_server.push_text("{}")
    spec = {"name": "city", "description": "A city and its country", "schema": {"type": "object"}}
    failover.Client({"g": openai(mock_server)}).prompt(
        "Hi", response_format={"type": "json_schema", "json_schema": spec}
    )
    sent = mock_server.requests[0].json["response_format"]["json_schema"]
    assert sent["description"] == "A city and its country"


def test_url_safe_base64_and_a_capitalised_media_type_are_sent_in_the_standard_form(
    mock_server: MockServer,
) -> None:
    """Found by the new-user trials of 2026-11-30."""
    mock_server.push_text("ok", wire="anthropic")
    image = {"type": "image_url", "image_url": {"url": "data:IMAGE/PNG;base64,-_-_-_"}}
    failover.Client({"c": anthropic(mock_server)}).prompt([{"role": "user", "content": [image]}])
    source = mock_server.requests[0].json["messages"][0]["content"][0]["source"]
    assert (source["media_type"], source["data"]) == ("image/png", "+/+/+/==")


def test_a_tool_call_id_longer_than_chat_completions_takes_is_shortened(
    mock_server: MockServer,
) -> None:
    """Found by the new-user trials of 2026-11-30."""
    long_id = "fc_" + "0f" * 25  # a Responses API id: 53 characters
    mock_server.push_text("Sunny.")
    failover.Client({"g": openai(mock_server)}).prompt(tool_loop(long_id, "call_short"))
    sent = mock_server.requests[0].json["messages"]
    calls = [c["id"] for c in sent[1]["tool_calls"]]
    assert calls == [m["tool_call_id"] for m in sent[2:]]
    assert len(calls[0]) <= 40 and calls[0] != long_id and calls[1] == "call_short"


@pytest.mark.parametrize(
    ("messages", "why"),
    [
        ([], "empty"),
        ([{"role": "user"}], "needs 'content'"),
        ([{"role": "user", "content": None}], "needs 'content'"),
        ([{"role": "robot", "content": "Hi"}], "unknown role 'robot'|unknown role \"robot\""),
        ([{"content": "Hi"}], "needs a 'role'"),
        (["Hi"], "must be a dict"),
        ([{"role": "user", "content": 5}], "str or a list of parts"),
        ([{"role": "user", "content": "a"}, {"role": "assistant"}], "message 1"),
    ],
)
def test_bad_messages_are_refused_before_any_request(mock_server, call, messages, why):
    """Found hardening the first slice."""
    client = failover.Client({"a": openai(mock_server)})
    with pytest.raises(failover.ConfigurationError, match=why):
        call(client, messages)
    assert mock_server.requests == []


def test_an_assistant_message_with_tool_calls_needs_no_content(mock_server):
    """Found hardening the first slice."""
    mock_server.push_text("ok")
    messages = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    assert failover.Client({"a": openai(mock_server)}).prompt(messages).text == "ok"
