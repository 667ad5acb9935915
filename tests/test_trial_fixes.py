"""What the new-user trials of 2026-11-30 found, each pinned through the public API."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

from conftest import KEY, ant, anthropic, openai


def _call(call_id: str, name: str = "weather") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def _loop(*call_ids: str) -> list[dict[str, Any]]:
    """A history: a question, one assistant turn calling each id, a result for each."""
    return [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "", "tool_calls": [_call(i) for i in call_ids]},
        *[{"role": "tool", "tool_call_id": i, "content": f"result {i}"} for i in call_ids],
    ]


# Headers and secrets -----------------------------------------------------------------


def test_a_credential_header_under_the_keys_name_is_sent_once_instead_of_the_key(
    mock_server: MockServer,
) -> None:
    gateway = "Bearer gateway-token-123456"
    mock_server.push_text("ok")
    provider = openai(mock_server, headers={"Authorization": gateway})
    failover.Client({"g": provider}).prompt("Hi")
    sent = [v for n, v in mock_server.requests[0].header_list if n == "authorization"]
    assert sent == [gateway]


def test_a_calls_header_replaces_the_providers_of_the_same_name(mock_server: MockServer) -> None:
    mock_server.push_text("ok")
    provider = openai(mock_server, headers={"X-Team": "ml", "Authorization": "Bearer a-123456789"})
    failover.Client({"g": provider}).prompt(
        "Hi", headers={"x-team": "search", "authorization": "Bearer b-123456789"}
    )
    headers = mock_server.requests[0].header_list
    assert [v for n, v in headers if n == "x-team"] == ["search"]
    assert [v for n, v in headers if n == "authorization"] == ["Bearer b-123456789"]


def test_a_gateways_auth_header_is_redacted(mock_server: MockServer) -> None:
    token = "Bearer sk-helicone-abcdef123456"
    mock_server.push(401, json={"error": {"message": f"bad Helicone-Auth: {token}"}})
    provider = openai(mock_server, headers={"Helicone-Auth": token})
    with pytest.raises(failover.AuthenticationError) as info:
        failover.Client({"g": provider}).prompt("Hi")
    assert "sk-helicone-abcdef123456" not in str(info.value)
    assert "<redacted>" in str(info.value)


# Classification and messages ---------------------------------------------------------


@pytest.mark.mock_server(assert_all_used=False)
def test_anthropics_overloaded_error_inside_a_200_is_an_overload(mock_server: MockServer) -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    for _ in range(5):
        mock_server.push(200, json=body)
    client = failover.Client({"c": anthropic(mock_server)}, sleeper=FakeSleeper())
    with pytest.raises(failover.ProviderOverloaded):
        client.prompt("Hi")


@pytest.mark.mock_server(assert_all_used=False)
def test_a_408_names_the_host(mock_server: MockServer) -> None:
    for _ in range(5):
        mock_server.push(408, json={"error": {"message": "request timeout"}})
    client = failover.Client({"p": openai(mock_server)}, sleeper=FakeSleeper())
    with pytest.raises(failover.ProviderTimeout) as info:
        client.prompt("Hi")
    host = mock_server.url.removeprefix("http://")
    assert "p returned 408" in str(info.value) and host in str(info.value)


@pytest.mark.mock_server(assert_all_used=False)
def test_a_stream_that_fails_before_its_first_chunk_names_its_provider(
    mock_server: MockServer,
) -> None:
    for _ in range(3):  # a first try and two retries
        mock_server.push(fault="reset")
    client = failover.Client({"gpt": openai(mock_server)}, sleeper=FakeSleeper())
    with pytest.raises(failover.ProviderConnectionError, match=r"^gpt: "):
        with client.stream("Hi") as stream:
            list(stream)


def test_a_cut_stream_names_its_provider_in_the_cause(mock_server: MockServer) -> None:
    text = 'data: {"choices": [{"index": 0, "delta": {"content": "Hel"}}]}'
    mock_server.push(sse=[text, text], fault="cut:1")
    client = failover.Client({"gpt": openai(mock_server)})
    with pytest.raises(failover.StreamInterrupted) as info:
        with client.stream("Hi") as stream:
            list(stream)
    assert str(info.value.__cause__).startswith("gpt: ")


def test_anthropics_context_window_stop_is_length(mock_server: MockServer) -> None:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "Part"}],
        "stop_reason": "model_context_window_exceeded",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    mock_server.push(200, json=body)
    r = failover.Client({"c": anthropic(mock_server)}).prompt("Hi")
    assert r.finish_reason == "length"


# The conversation on each wire ------------------------------------------------------


def test_whitespace_only_text_is_not_sent_to_anthropic(mock_server: MockServer) -> None:
    history = _loop("t1")
    history[1]["content"] = "  "
    mock_server.push_text("Sunny.", wire="anthropic")
    failover.Client({"c": anthropic(mock_server)}).prompt(history)
    assistant = mock_server.requests[0].json["messages"][1]["content"]
    assert [b["type"] for b in assistant] == ["tool_use"]


def test_call_ids_that_differ_outside_anthropics_alphabet_stay_distinct(
    mock_server: MockServer,
) -> None:
    mock_server.push_text("Sunny.", wire="anthropic")
    failover.Client({"c": anthropic(mock_server)}).prompt(_loop("a.b", "a/b", "a_b"))
    sent = mock_server.requests[0].json["messages"]
    uses = [b["id"] for b in sent[1]["content"]]
    results = [b["tool_use_id"] for b in sent[2]["content"]]
    assert len(set(uses)) == 3 and uses == results
    assert uses[2] == "a_b", "an id Anthropic takes is sent as it is"


def test_mistral_gets_nine_character_ids_and_random_seed(mock_server: MockServer) -> None:
    mock_server.push_text("Sunny.")
    mistral = failover.Mistral(model="mistral-small-latest", base_url=mock_server.url, api_key=KEY)
    failover.Client({"m": mistral}).prompt(_loop("toolu_01A09q90qw90", "abcDEF123"), seed=7)
    sent = mock_server.requests[0].json
    calls = [c["id"] for c in sent["messages"][1]["tool_calls"]]
    results = [m["tool_call_id"] for m in sent["messages"][2:]]
    assert calls == results and calls[1] == "abcDEF123"
    assert all(len(i) == 9 and i.isalnum() for i in calls), calls
    assert sent["random_seed"] == 7 and "seed" not in sent


def test_other_openai_compatible_servers_keep_their_ids_and_seed(mock_server: MockServer) -> None:
    mock_server.push_text("Sunny.")
    failover.Client({"g": openai(mock_server)}).prompt(_loop("toolu_01A09q90qw90"), seed=7)
    sent = mock_server.requests[0].json
    assert sent["messages"][1]["tool_calls"][0]["id"] == "toolu_01A09q90qw90"
    assert sent["seed"] == 7


def test_stream_options_in_params_win_in_a_stream_and_stay_off_other_calls(
    mock_server: MockServer,
) -> None:
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


def test_a_conversation_without_a_user_turn_skips_gemini(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    gemini = failover.Gemini(model="gemini-2.5-flash", base_url=mock_server.url, api_key=KEY)
    client = failover.Client({"gem": gemini, "gpt": openai(backup_server)})
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
    mock_server.push_text("ok")
    tool = failover.Tool(name="weather")
    client = failover.Client({"g": openai(mock_server)})
    client.prompt("Hi", tools=[tool], tool_choice={"type": "any"})
    assert mock_server.requests[0].json["tool_choice"] == "required"
    with pytest.raises(failover.ConfigurationError, match="tool_choice"):
        client.prompt("Hi", tools=[tool], tool_choice={"type": "bogus"})


# Options checked when given ----------------------------------------------------------


@pytest.mark.parametrize("name", ["bad name", "auto", "x" * 65, "a.b"])
def test_a_tool_name_providers_refuse_is_refused_by_tool(name: str) -> None:
    with pytest.raises(failover.ConfigurationError, match="tool"):
        failover.Tool(name=name)


def test_pool_and_member_names_are_checked_when_given() -> None:
    member = failover.OpenAI(model="m", api_key=KEY)
    with pytest.raises(failover.ConfigurationError, match="Pool name 'a/b'"):
        failover.Pool("a/b", [member])
    for bad in ("x/y", "x:y"):
        with pytest.raises(failover.ConfigurationError, match="member name"):
            failover.Pool("g", {bad: member})
    failover.Pool("g", [member, member])  # numbered members are named g/0, g/1


def test_mockserver_refuses_a_bad_header_name_and_events_that_are_not_str() -> None:
    with MockServer() as server:
        with pytest.raises(ValueError, match="not an HTTP token"):
            server.push(headers={"bad name": "v"})
        with pytest.raises(ValueError, match="events are str"):
            server.push(sse=[{"data": "x"}])  # type: ignore[list-item]
        assert server.pending == 0


def test_an_images_detail_reaches_chat_completions_only(
    mock_server: MockServer, backup_server: MockServer
) -> None:
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


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("unix://tmp/redis.sock", "absolute path"),
        ("", "not a redis://"),
        ("localhost:6379", "not a redis://"),
    ],
)
def test_a_redis_url_that_cannot_work_is_refused_in_the_usual_words(url: str, why: str) -> None:
    with pytest.raises(failover.ConfigurationError, match="RedisState needs a Redis URL") as info:
        failover.RedisState(url)
    assert why in str(info.value) and "'://'" not in str(info.value)


def test_whitespace_only_system_text_is_not_sent_to_anthropic(mock_server: MockServer) -> None:
    mock_server.push_text("Hi.", wire="anthropic")
    mock_server.push_text("Hi.", wire="anthropic")
    client = failover.Client({"c": anthropic(mock_server)})
    client.prompt("Hi", system=" \n")
    client.prompt([{"role": "system", "content": "  "}, {"role": "user", "content": "Hi"}])
    assert all("system" not in r.json for r in mock_server.requests)


def test_a_tool_call_left_without_a_result_is_refused_before_sending(
    mock_server: MockServer,
) -> None:
    history = [*_loop("c1", "c2"), {"role": "user", "content": "And?"}]
    del history[3]  # c2's result
    with pytest.raises(failover.ConfigurationError, match=r'\["c2"\] have no result'):
        failover.Client({"g": openai(mock_server)}).prompt(history)
    assert mock_server.requests == []


def test_a_header_under_the_keys_name_stands_in_for_the_key(
    mock_server: MockServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    gateway = {"Authorization": "Bearer gateway-token-123456"}
    provider = failover.OpenAI(model="m", base_url=mock_server.url, headers=gateway)
    asked: list[int] = []

    def key() -> str:
        asked.append(1)
        raise RuntimeError("the vault is down")

    keyed = failover.OpenAI(model="m", base_url=mock_server.url, headers=gateway, api_key=key)
    for client_provider in (provider, keyed):
        mock_server.push_text("ok")
        failover.Client({"g": client_provider}).prompt("Hi")
    assert asked == [], "a key that would not be sent is not fetched"
    assert [r.headers["authorization"] for r in mock_server.requests] == [
        "Bearer gateway-token-123456"
    ] * 2


def test_a_stream_whose_first_event_the_deadline_cuts_off_is_deadline_exceeded(
    mock_server: MockServer,
) -> None:
    mock_server.push(sse=["data: {}"], fault="stall:0")
    client = failover.Client({"g": openai(mock_server)}, timeout=10)
    with pytest.raises(failover.DeadlineExceeded):
        with client.stream("Hi", deadline=0.3) as stream:
            list(stream)


def test_a_tool_choice_dict_with_a_field_one_wire_reads_is_refused() -> None:
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
    image = {"type": "image_url", "image_url": {"url": "https://e.com/a.png", "detail": "original"}}
    mock_server.push_text("A cat.")
    failover.Client({"g": openai(mock_server)}).prompt([{"role": "user", "content": [image]}])
    assert mock_server.requests[0].json["messages"][0]["content"][0] == image


def test_calls_with_a_stop_are_tool_calls(mock_server: MockServer) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    mock_server.push(200, json={"choices": [{"message": message, "finish_reason": "stop"}]})
    r = failover.Client({"g": openai(mock_server)}).prompt("Hi")
    assert r.finish_reason == "tool_calls" and r.tool_calls[0].id == "c1"


def test_a_blank_key_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "  ")
    with pytest.raises(failover.ConfigurationError, match="OPENAI_API_KEY is blank"):
        failover.Client({"g": failover.OpenAI(model="m")})


def test_mistral_is_skipped_for_an_image_in_a_tool_result(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    # Mistral refuses a user message after tool messages, which is where the
    # image would go: the next provider takes the call.
    history = _loop("t1")
    history[2]["content"] = [{"type": "image_url", "image_url": {"url": "https://e.com/a.png"}}]
    backup_server.push_text("A chart.")
    mistral = failover.Mistral(model="mistral-small-latest", base_url=mock_server.url, api_key=KEY)
    r = failover.Client({"m": mistral, "g": openai(backup_server)}).prompt(history)
    assert r.provider == "g" and mock_server.requests == []
    assert "right after tool results" in (r.attempts[0].skipped or "")
    sent = backup_server.requests[0].json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[3]["content"][1]["image_url"]["url"] == "https://e.com/a.png"


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
    mock_server.push_text("ok", wire="anthropic")
    image = {"type": "image_url", "image_url": {"url": url}}
    failover.Client({"c": anthropic(mock_server)}).prompt([{"role": "user", "content": [image]}])
    source = mock_server.requests[0].json["messages"][0]["content"][0]["source"]
    assert source["type"] == "base64" and source["data"] == "iVBORw0KGgoAAAANSUhEUg=="
    assert source["media_type"] == media_type


def test_azure_with_an_entra_token_in_its_own_header_needs_no_key(
    mock_server: MockServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AZURE_OPENAI_API_KEY", raising=False)
    mock_server.push_text("ok")
    azure = failover.Azure(
        deployment="gpt",
        endpoint=mock_server.url,
        api_version="2024-10-21",
        headers={"Authorization": "Bearer entra-token-123456"},
    )
    failover.Client({"a": azure}).prompt("Hi")
    headers = mock_server.requests[0].header_list
    assert [v for n, v in headers if n == "authorization"] == ["Bearer entra-token-123456"]
    assert not [n for n, _ in headers if n == "api-key"]


def test_a_blank_key_variable_gives_way_to_a_fallback_that_holds_one(
    mock_server: MockServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", " ")
    monkeypatch.setenv("GOOGLE_API_KEY", "AIza-fallback-123456")
    mock_server.push_text("ok", wire="gemini")
    gemini = failover.Gemini(model="gemini-2.5-flash", base_url=mock_server.url)
    failover.Client({"g": gemini}).prompt("Hi")
    assert mock_server.requests[0].headers["x-goog-api-key"] == "AIza-fallback-123456"


def test_a_streams_accept_header_is_the_streams_whatever_its_case(
    mock_server: MockServer,
) -> None:
    stop = 'data: {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}'
    mock_server.push(sse=[stop, "data: [DONE]"])
    provider = openai(mock_server, headers={"Accept": "application/json"})
    with failover.Client({"g": provider}).stream("Hi") as stream:
        list(stream)
    accept = [v for n, v in mock_server.requests[0].header_list if n == "accept"]
    assert accept == ["text/event-stream"]


def test_a_call_ended_by_its_key_callable_sends_call_failed(mock_server: MockServer, call) -> None:
    events: list[Any] = []
    provider = failover.OpenAICompatible(
        model="m",
        base_url=mock_server.url,
        api_key=lambda: "",  # no key: ends the call
    )
    client = failover.Client({"a": provider}, on_event=events.append)
    with pytest.raises(failover.ConfigurationError) as info:
        call(client, "Hi")
    failed = [e for e in events if isinstance(e, failover.CallFailed)]
    assert len(failed) == 1 and failed[0].error is info.value
    assert mock_server.requests == []


def test_mistral_is_skipped_for_a_user_message_right_after_tool_results(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    history = [*_loop("t1"), {"role": "user", "content": "And tomorrow?"}]
    backup_server.push_text("Rain.")
    mistral = failover.Mistral(model="mistral-small-latest", base_url=mock_server.url, api_key=KEY)
    r = failover.Client({"m": mistral, "g": openai(backup_server)}).prompt(history)
    assert r.provider == "g" and mock_server.requests == []
    assert "the conversation has one" in (r.attempts[0].skipped or "")


def test_mistral_is_skipped_for_a_final_assistant_message(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    # Mistral's answer to a prefix repeats it; Anthropic's continues it.
    backup_server.push_text(" Paris.")
    mistral = failover.Mistral(model="mistral-small-latest", base_url=mock_server.url, api_key=KEY)
    r = failover.Client({"m": mistral, "g": openai(backup_server)}).prompt(
        [
            {"role": "user", "content": "Capital of France?"},
            {"role": "assistant", "content": "It is"},
        ]
    )
    assert r.provider == "g" and mock_server.requests == []
    assert "final assistant message" in (r.attempts[0].skipped or "")


def test_an_image_in_an_assistant_message_is_refused() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://e.com/a.png"}}
    client = failover.Client({"g": failover.OpenAI(model="m", api_key=KEY)})
    with pytest.raises(failover.ConfigurationError, match="assistant message takes text only"):
        client.prompt(
            [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": [image]}]
        )


def test_a_refusal_is_the_answers_text_in_a_prompt_and_a_stream(mock_server: MockServer) -> None:
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


def test_a_json_schemas_description_reaches_chat_completions(mock_server: MockServer) -> None:
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
    mock_server.push_text("ok", wire="anthropic")
    image = {"type": "image_url", "image_url": {"url": "data:IMAGE/PNG;base64,-_-_-_"}}
    failover.Client({"c": anthropic(mock_server)}).prompt([{"role": "user", "content": [image]}])
    source = mock_server.requests[0].json["messages"][0]["content"][0]["source"]
    assert (source["media_type"], source["data"]) == ("image/png", "+/+/+/==")


def test_a_tool_call_id_longer_than_chat_completions_takes_is_shortened(
    mock_server: MockServer,
) -> None:
    long_id = "fc_" + "0f" * 25  # a Responses API id: 53 characters
    mock_server.push_text("Sunny.")
    failover.Client({"g": openai(mock_server)}).prompt(_loop(long_id, "call_short"))
    sent = mock_server.requests[0].json["messages"]
    calls = [c["id"] for c in sent[1]["tool_calls"]]
    assert calls == [m["tool_call_id"] for m in sent[2:]]
    assert len(calls[0]) <= 40 and calls[0] != long_id and calls[1] == "call_short"


def test_a_streamed_server_tool_is_no_tool_call(mock_server: MockServer) -> None:
    # web_search runs on Anthropic's side: its input streams as the deltas a
    # client tool's does, and is not the caller's to run.
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


@pytest.mark.mock_server(assert_all_used=False)
@pytest.mark.parametrize("finish", ["OTHER", "TOO_MANY_TOOL_CALLS"])
def test_a_gemini_answer_that_ended_abnormally_with_nothing_fails_over(
    mock_server: MockServer, backup_server: MockServer, finish: str
) -> None:
    empty = {"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": finish}]}
    for _ in range(3):
        mock_server.push(200, json=empty)
    backup_server.push_text("ok")
    gemini = failover.Gemini(model="gemini-2.5-flash", base_url=mock_server.url, api_key=KEY)
    client = failover.Client({"gem": gemini, "g": openai(backup_server)}, sleeper=FakeSleeper())
    r = client.prompt("Hi")
    assert (r.provider, r.text) == ("g", "ok")
    assert r.attempts[0].kind == "server_error"


def test_retry_after_reads_a_list_of_values_as_http_joins_them() -> None:
    assert failover.retry_after({"Retry-After": ["41"]}) == 41.0  # type: ignore[dict-item]
    assert failover.retry_after({"Retry-After": ["1", "2"]}) is None  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="str or bytes"):
        failover.retry_after({"Retry-After": {"v": 1}})  # type: ignore[dict-item]


def test_mistrals_request_id_is_read(mock_server: MockServer) -> None:
    mock_server.push(
        400,
        headers={"mistral-correlation-id": "019a-corr-id"},
        json={"object": "error", "message": "bad", "type": "invalid_request_error"},
    )
    mistral = failover.Mistral(model="mistral-small-latest", base_url=mock_server.url, api_key=KEY)
    with pytest.raises(failover.BadRequest) as info:
        failover.Client({"m": mistral}).prompt("Hi")
    assert info.value.request_id == "019a-corr-id"


@pytest.mark.mock_server(assert_all_used=False)
def test_a_gemini_stream_that_ended_abnormally_with_nothing_fails_over(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    import json

    empty = {"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "OTHER"}]}
    for _ in range(3):
        mock_server.push(sse=[f"data: {json.dumps(empty)}"])
    stop = 'data: {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}'
    backup_server.push(sse=[stop, "data: [DONE]"])
    gemini = failover.Gemini(model="gemini-2.5-flash", base_url=mock_server.url, api_key=KEY)
    client = failover.Client({"gem": gemini, "g": openai(backup_server)}, sleeper=FakeSleeper())
    with client.stream("Hi") as stream:
        assert "".join(c.text for c in stream) == "ok"
    assert stream.response is not None and stream.response.provider == "g"


def test_a_stream_of_tool_call_pieces_without_a_finish_reason_is_an_answer(
    mock_server: MockServer,
) -> None:
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


def test_gemini_calls_then_other_in_a_later_chunk_are_tool_calls(mock_server: MockServer) -> None:
    import json

    call = {"functionCall": {"name": "weather", "args": {}}}
    chunks = [
        {"candidates": [{"content": {"role": "model", "parts": [call]}}]},
        {"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "OTHER"}]},
    ]
    mock_server.push(sse=[f"data: {json.dumps(c)}" for c in chunks])
    gemini = failover.Gemini(model="gemini-2.5-flash", base_url=mock_server.url, api_key=KEY)
    with failover.Client({"gem": gemini}).stream("Hi") as stream:
        list(stream)
    assert stream.response is not None and stream.response.finish_reason == "tool_calls"


def test_mistrals_model_length_is_length(mock_server: MockServer) -> None:
    message = {"role": "assistant", "content": ""}
    mock_server.push(200, json={"choices": [{"message": message, "finish_reason": "model_length"}]})
    mistral = failover.Mistral(model="mistral-small-latest", base_url=mock_server.url, api_key=KEY)
    r = failover.Client({"m": mistral}).prompt("Hi")
    assert (r.text, r.finish_reason) == ("", "length")


def test_magistral_streams_blocks_of_thinking_and_text(mock_server: MockServer) -> None:
    import json

    thinking = {"type": "thinking", "thinking": [{"type": "text", "text": "Hmm."}]}
    blocks = [thinking, {"type": "text", "text": "Paris."}]
    chunk = {"choices": [{"index": 0, "delta": {"content": blocks}, "finish_reason": "stop"}]}
    mock_server.push(sse=[f"data: {json.dumps(chunk)}", "data: [DONE]"])
    mistral = failover.Mistral(model="magistral-small", base_url=mock_server.url, api_key=KEY)
    with failover.Client({"m": mistral}).stream("Capital?") as stream:
        pieces = [(c.kind, c.text or c.reasoning) for c in stream]
    assert pieces == [("reasoning", "Hmm."), ("text", "Paris.")]


def test_a_missing_gemini_key_names_both_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(failover.ConfigurationError, match="GEMINI_API_KEY or GOOGLE_API_KEY"):
        failover.Client({"g": failover.Gemini(model="gemini-2.5-flash")})


def test_a_redis_states_repr_shows_its_database_but_no_password() -> None:
    state = failover.RedisState("redis://:hunter2-pw@localhost:6379/3")
    assert repr(state).startswith("RedisState('redis://localhost:6379/3'")
    assert "hunter2" not in repr(state)


def test_values_json_cannot_carry_are_refused_when_given() -> None:
    import math

    with pytest.raises(failover.ConfigurationError, match="OpenAI params cannot be sent as JSON"):
        failover.OpenAI(model="m", api_key=KEY, params={"x": object()})
    with pytest.raises(failover.ConfigurationError, match="'t': parameters cannot be sent"):
        failover.Tool("t", parameters={"x": math.nan})
    client = failover.Client({"g": failover.OpenAI(model="m", api_key=KEY)})
    with pytest.raises(failover.ConfigurationError, match="response_format cannot be sent"):
        client.prompt("Hi", response_format={"type": "json_object", "x": object()})


@pytest.mark.parametrize("key", ["", "   ", "abc\ndef"])
def test_a_key_headers_cannot_carry_is_refused_when_given(key: str) -> None:
    with pytest.raises(failover.ConfigurationError, match=r"OpenAI api_key (is blank|holds)"):
        failover.OpenAI(model="m", api_key=key)


def test_a_stream_no_provider_can_serve_fails_when_made(mock_server: MockServer) -> None:
    # An image by link: Ollama takes images as data: URLs only.
    image = {"type": "image_url", "image_url": {"url": "https://e.com/a.png"}}
    ollama = failover.Ollama(model="llama3.2", base_url=mock_server.url)
    client = failover.Client({"o": ollama})
    messages = [{"role": "user", "content": [image]}]
    with pytest.raises(failover.ConfigurationError, match="no provider can serve") as info:
        client.stream(messages)
    assert info.value.attempts[0].skipped is not None

    async def make() -> None:
        client.stream_async(messages)

    with pytest.raises(failover.ConfigurationError, match="no provider can serve"):
        asyncio.run(make())
    assert mock_server.requests == []
