"""Images, speech and transcription: the same engine as chat (hints, waits,
failover, skipping, deadlines), their wires, and their bad input refused
before anything is sent."""

from __future__ import annotations

import asyncio
import base64
import io
import json
from pathlib import Path
from typing import Any

import pytest

import failover
from failover.testing import SOME_MP3, SOME_PCM, TINY_PNG, MockServer, fake_sleep

from conftest import GEMINI_KEY, KEY, anthropic, gemini


@pytest.fixture
def server(mock_server: MockServer) -> MockServer:
    return mock_server


WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(40)


def run(face: str, client: failover.Client, method: str, *args: Any, **kwargs: Any) -> Any:
    """``client.METHOD`` or ``client.METHOD_async``: both faces of the one engine."""
    if face == "sync":
        return getattr(client, method)(*args, **kwargs)
    return asyncio.run(getattr(client, f"{method}_async")(*args, **kwargs))


def openai(server: MockServer, **kwargs: Any) -> failover.OpenAI:
    return failover.OpenAI("gpt-4.1-mini", api_key=KEY, base_url=server.url, **kwargs)


def rate_limited(server: MockServer, seconds: str = "1") -> None:
    error = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit"}}
    server.push(429, headers={"retry-after": seconds}, json=error)


# Each call type: its method, its arguments, what to script for its answer.
CALLS = {
    "image": ("generate_image", ("a red fox",), {}, lambda s: s.push_image(revised_prompt="fox")),
    "speech": ("speak", ("Hello",), {"voice": "alloy"}, lambda s: s.push_audio()),
    "transcription": ("transcribe", (WAV,), {}, lambda s: s.push_transcription("hi", duration=4)),
}


@pytest.mark.parametrize("kind", list(CALLS))
def test_a_429_with_retry_after_is_waited_then_retried(
    face: str, server: MockServer, kind: str
) -> None:
    method, args, kwargs, answer = CALLS[kind]
    rate_limited(server)
    answer(server)
    client = failover.Client({"gpt": openai(server)})
    with fake_sleep() as sleeper:
        result = run(face, client, method, *args, **kwargs)
    assert sleeper.sleeps == [1.0]
    assert [a.status for a in result.attempts] == [429, 200]
    assert result.provider == "gpt"
    first, second = server.requests
    assert first.path == second.path
    assert first.body == second.body or kind == "transcription"


@pytest.mark.parametrize("kind", list(CALLS))
def test_a_provider_that_fails_is_failed_over_for_each_call_type(
    face: str, server: MockServer, backup_server: MockServer, kind: str
) -> None:
    method, args, kwargs, answer = CALLS[kind]
    server.push(401, json={"error": {"message": "Incorrect API key", "type": "invalid_api_key"}})
    answer(backup_server)
    client = failover.Client({"a": openai(server), "b": openai(backup_server)})
    with fake_sleep():
        result = run(face, client, method, *args, **kwargs)
    assert result.provider == "b"
    assert [(a.provider, a.status) for a in result.attempts] == [("a", 401), ("b", 200)]


def test_an_image_comes_back_as_its_bytes_with_its_usage(face: str, server: MockServer) -> None:
    server.push_image([TINY_PNG, TINY_PNG], revised_prompt="a red fox in snow")
    client = failover.Client({"gpt": openai(server)})
    result = run(face, client, "generate_image", "a red fox", n=2, size="1024x1024", quality="low")
    assert result.data == TINY_PNG
    assert [i.media_type for i in result.images] == ["image/png", "image/png"]
    assert result.images[1].revised_prompt == "a red fox in snow"
    assert result.usage.output_tokens == 8320
    assert result.model == "gpt-image-1"
    sent = server.requests[0].json
    # A GPT image model refuses response_format: it always answers in base64.
    assert sent == {
        "model": "gpt-image-1",
        "prompt": "a red fox",
        "n": 2,
        "size": "1024x1024",
        "quality": "low",
    }


def test_an_image_url_is_fetched_without_the_key(face: str, server: MockServer) -> None:
    server.push_image(url=f"{server.url}/files/fox.png")
    server.push(body=TINY_PNG, content_type="image/png")
    client = failover.Client({"gpt": openai(server, image_model="dall-e-2")})
    result = run(face, client, "generate_image", "a red fox")
    assert result.data == TINY_PNG
    assert result.images[0].url == f"{server.url}/files/fox.png"
    generate, fetch = server.requests
    assert generate.json["response_format"] == "b64_json"
    assert (fetch.method, fetch.path) == ("GET", "/files/fox.png")
    assert "authorization" not in fetch.headers
    assert KEY not in repr(fetch.header_list)


def test_response_format_url_gives_the_url_and_fetches_nothing(
    face: str, server: MockServer
) -> None:
    server.push_image(url="https://files.example/fox.png")
    client = failover.Client({"gpt": openai(server, image_model="dall-e-3")})
    result = run(face, client, "generate_image", "a fox", response_format="url")
    assert result.data is None
    assert result.images[0].url == "https://files.example/fox.png"
    assert server.requests[0].json["response_format"] == "url"
    assert len(server.requests) == 1


def test_what_a_model_documents_it_cannot_take_is_refused_before_sending(
    face: str, server: MockServer
) -> None:
    client = failover.Client({"gpt": openai(server, image_model="dall-e-3")})
    with pytest.raises(failover.ConfigurationError, match=r"gpt cannot generate images so: .*n=1"):
        run(face, client, "generate_image", "two foxes", n=2)
    with pytest.raises(failover.ConfigurationError, match="at most 4096 characters"):
        run(face, client, "speak", "x" * 5000, voice="alloy")
    # Just over: the size is told closely enough to see by how much.
    too_big = r"at most 25 MB \(26,214,400 bytes\), not 26,224,456 bytes"
    with pytest.raises(failover.ConfigurationError, match=too_big):
        run(face, client, "transcribe", WAV + bytes(25 * 1024 * 1024 + 10_000))
    assert server.requests == []


def test_speech_comes_back_as_the_audio_bytes(face: str, server: MockServer) -> None:
    server.push_audio(SOME_MP3)
    client = failover.Client({"gpt": openai(server)})
    result = run(
        face, client, "speak", "Hello", voice="coral", speed=1.25, instructions="Cheerful."
    )
    assert (result.data, result.media_type) == (SOME_MP3, "audio/mpeg")
    assert server.requests[0].path == "/audio/speech"
    assert server.requests[0].json == {
        "model": "gpt-4o-mini-tts",
        "input": "Hello",
        "voice": "coral",
        "response_format": "mp3",
        "speed": 1.25,
        "instructions": "Cheerful.",
    }


def test_a_json_error_where_audio_was_expected_is_an_error(face: str, server: MockServer) -> None:
    error = {"error": {"message": f"Invalid voice; key {KEY}", "type": "invalid_request_error"}}
    server.push(400, json=error)
    client = failover.Client({"gpt": openai(server)})
    with pytest.raises(failover.BadRequest) as caught:
        run(face, client, "speak", "Hello", voice="nobody")
    assert "gpt returned 400" in str(caught.value)
    assert "Invalid voice" in str(caught.value)
    assert KEY not in str(caught.value)
    assert KEY not in repr(caught.value.attempts)


def test_an_empty_audio_answer_is_a_server_error_retried(face: str, server: MockServer) -> None:
    server.push(200, body=b"", content_type="audio/mpeg")
    server.push_audio()
    client = failover.Client({"gpt": openai(server)})
    with fake_sleep():
        result = run(face, client, "speak", "Hello", voice="alloy")
    assert result.attempts[0].kind == "server_error"
    assert result.data == SOME_MP3


def test_a_transcription_is_sent_as_a_multipart_form(
    face: str, server: MockServer, tmp_path: Path
) -> None:
    path = tmp_path / "call.wav"
    path.write_bytes(WAV)
    server.push_transcription(
        "Hello there.",
        response_format="verbose_json",
        language="english",
        duration=4.5,
        segments=[(0.0, 1.5, "Hello"), (1.5, 4.5, " there.")],
    )
    client = failover.Client({"gpt": openai(server, transcription_model="whisper-1")})
    result = run(
        face,
        client,
        "transcribe",
        path,
        language="en",
        prompt="A greeting.",
        response_format="verbose_json",
    )
    assert result.text == "Hello there."
    assert (result.language, result.duration) == ("english", 4.5)
    assert [(s.start, s.end, s.text) for s in result.segments] == [
        (0.0, 1.5, "Hello"),
        (1.5, 4.5, " there."),
    ]
    sent = server.requests[0]
    assert sent.path == "/audio/transcriptions"
    assert sent.form == {
        "model": "whisper-1",
        "language": "en",
        "prompt": "A greeting.",
        "response_format": "verbose_json",
    }
    assert sent.files["file"].filename == "call.wav"
    assert sent.files["file"].content_type == "audio/wav"
    assert sent.files["file"].data == WAV


def test_a_text_transcript_is_the_body_as_written(face: str, server: MockServer) -> None:
    server.push_transcription("1\n00:00:00,000 --> 00:00:01,500\nHello\n", response_format="srt")
    client = failover.Client({"gpt": openai(server, transcription_model="whisper-1")})
    result = run(face, client, "transcribe", io.BytesIO(WAV), response_format="srt")
    assert result.text.startswith("1\n00:00:00,000")
    assert result.segments == []


def test_a_large_file_is_read_once_and_resent_from_memory(
    face: str, server: MockServer, tmp_path: Path
) -> None:
    recording = WAV + bytes(range(256)) * (5 * 1024 * 4)  # about 5 MB
    path = tmp_path / "long.wav"
    path.write_bytes(recording)
    rate_limited(server)
    server.push_transcription("long")
    client = failover.Client({"gpt": openai(server)})
    with open(path, "rb") as file, fake_sleep() as sleeper:
        result = run(face, client, "transcribe", file)
        # Read once: a retry does not read the file again.
        assert file.tell() == len(recording)
    assert result.text == "long"
    assert sleeper.sleeps == [1.0]
    first, second = server.requests
    assert first.files["file"].data == recording
    assert second.files["file"].data == recording
    assert second.files["file"].filename == "long.wav"


def test_providers_without_the_call_type_are_skipped_with_the_reason(
    face: str, server: MockServer, backup_server: MockServer
) -> None:
    backup_server.push_image()
    client = failover.Client(
        {
            "claude": anthropic(server),
            "groq": failover.Groq("llama-3.3-70b", api_key=KEY, base_url=server.url),
            "gpt": openai(backup_server),
        }
    )
    result = run(face, client, "generate_image", "a fox")
    assert result.provider == "gpt"
    skipped = [(a.provider, a.skipped) for a in result.attempts if a.skipped]
    assert skipped == [
        ("claude", "claude cannot generate images: its API has none"),
        ("groq", "groq cannot generate images: its API has none"),
    ]
    assert server.requests == []


def test_a_chain_where_none_can_is_a_configuration_error(face: str, server: MockServer) -> None:
    client = failover.Client(
        {"claude": anthropic(server), "local": failover.OpenAICompatible("m", base_url=server.url)}
    )
    with pytest.raises(failover.ConfigurationError) as caught:
        run(face, client, "speak", "Hello", voice="alloy")
    message = str(caught.value)
    assert "no provider in the chain can speak" in message
    assert "claude cannot speak: its API has none" in message
    assert "local cannot speak: it has no speech_model=" in message
    assert server.requests == []


def test_groq_transcribes_with_its_whisper_by_default(face: str, server: MockServer) -> None:
    server.push_transcription("hola")
    groq = failover.Groq("llama-3.3-70b", api_key=KEY, base_url=server.url)
    client = failover.Client({"groq": groq})
    result = run(face, client, "transcribe", WAV, language="es")
    assert result.text == "hola"
    assert server.requests[0].form["model"] == "whisper-large-v3-turbo"
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_mistral_is_not_sent_the_fields_it_lacks(face: str, server: MockServer) -> None:
    server.push(json={"model": "voxtral-mini-latest", "text": "bonjour", "language": "fr"})
    mistral = failover.Mistral("mistral-small-latest", api_key=KEY, base_url=server.url)
    client = failover.Client({"mistral": mistral})
    result = run(face, client, "transcribe", WAV, prompt="greeting")
    assert (result.text, result.language, result.model) == ("bonjour", "fr", "voxtral-mini-latest")
    assert server.requests[0].form == {"model": "voxtral-mini-latest"}


def test_azure_sends_each_call_type_to_its_deployment(face: str, server: MockServer) -> None:
    server.push_image()
    azure = failover.Azure(
        "chat-deployment", endpoint=server.url, api_key=KEY, image_model="images-deployment"
    )
    client = failover.Client({"azure": azure})
    run(face, client, "generate_image", "a fox")
    sent = server.requests[0]
    assert sent.path == (
        "/openai/deployments/images-deployment/images/generations?api-version=2024-10-21"
    )
    assert sent.headers["api-key"] == KEY


@pytest.mark.parametrize(
    ("method", "args", "kwargs", "says"),
    [
        ("speak", ("",), {"voice": "alloy"}, "text must be a non-empty str"),
        ("speak", ("Hi",), {"voice": 3}, "voice= must be a voice name"),
        ("speak", ("Hi",), {"voice": "alloy", "format": "ogg"}, "format= is one of"),
        ("speak", ("Hi",), {"voice": "alloy", "speed": 9}, "speed must be a number from 0.25"),
        ("generate_image", ("",), {}, "prompt must be a non-empty str"),
        ("generate_image", ("a fox",), {"n": 0}, "n must be"),
        ("generate_image", ("a fox",), {"size": "big"}, "size= is WIDTHxHEIGHT"),
        ("generate_image", ("a fox",), {"response_format": "png"}, "response_format= is 'b64'"),
        ("transcribe", ("/no/such/file.wav",), {}, "no file at '/no/such/file.wav'"),
        ("transcribe", (b"",), {}, "audio is empty"),
        ("transcribe", (b"\x00\x01\x02",), {}, "pass filename="),
        ("transcribe", (WAV,), {"filename": "notes.txt"}, "filename= needs an audio extension"),
        ("transcribe", (WAV,), {"response_format": "xml"}, "response_format= is one of"),
        ("transcribe", (12,), {}, "audio must be bytes, a path or a binary file object"),
        ("transcribe", (io.StringIO("text"),), {}, "open it in binary mode"),
    ],
)
def test_bad_input_is_refused_before_sending(
    face: str, server: MockServer, method: str, args: tuple[Any, ...], kwargs: Any, says: str
) -> None:
    client = failover.Client({"gpt": openai(server)})
    with pytest.raises(failover.ConfigurationError, match=says.replace("(", r"\(")):
        run(face, client, method, *args, **kwargs)
    assert server.requests == []


def test_a_media_model_is_checked_when_given() -> None:
    with pytest.raises(failover.ConfigurationError, match="Anthropic has no image generation API"):
        failover.Anthropic("claude-haiku-4-5", api_key=KEY, image_model="x")
    with pytest.raises(failover.ConfigurationError, match="speech_model must be a model name"):
        failover.OpenAI("gpt-4.1", api_key=KEY, speech_model="  ")
    with pytest.raises(failover.ConfigurationError, match="Groq has no speech API"):
        failover.Groq("llama", api_key=KEY, speech_model="playai-tts")


def test_a_media_call_has_its_own_cooldown(face: str, server: MockServer) -> None:
    # An images 404 cools images only: chat goes on.
    server.push(404, json={"error": {"message": "The model does not exist", "type": "x"}})
    server.push_text("still here")
    client = failover.Client({"gpt": openai(server, image_model="no-such-image-model")})
    with pytest.raises(failover.ModelNotFound):
        run(face, client, "generate_image", "a fox")
    assert [key for key, _ in client.cooldowns().items()] == ["gpt:images"]
    assert client.prompt("Hi").text == "still here"


def test_the_call_model_overrides_the_providers(face: str, server: MockServer) -> None:
    server.push_audio()
    client = failover.Client({"gpt": openai(server)})
    result = run(face, client, "speak", "Hi", voice="alloy", model="tts-1")
    assert result.model == "tts-1"
    assert json.loads(server.requests[0].body)["model"] == "tts-1"


@pytest.mark.parametrize("kind", list(CALLS))
def test_a_slow_provider_ends_the_call_at_its_deadline(
    face: str, server: MockServer, kind: str
) -> None:
    import time

    method, args, kwargs, _ = CALLS[kind]
    server.push(200, json={}, delay=5.0)
    client = failover.Client({"gpt": openai(server)})
    started = time.monotonic()
    with pytest.raises(failover.DeadlineExceeded) as caught:
        run(face, client, method, *args, deadline=0.5, **kwargs)
    # A wide margin: the failure this guards against is seconds past it.
    assert time.monotonic() - started < 2.5
    assert "gpt" in str(caught.value)


def read_speech(face: str, client: failover.Client, text: str = "Hello", **kwargs: Any) -> Any:
    """Every piece of a speech stream through either face, and its response."""
    if face == "sync":
        with client.speak_stream(text, voice="alloy", **kwargs) as stream:
            pieces = list(stream)
        return pieces, stream.response

    async def go() -> Any:
        async with client.speak_stream_async(text, voice="alloy", **kwargs) as stream:
            pieces = [p async for p in stream]
        return pieces, stream.response

    return asyncio.run(go())


def test_a_speech_stream_yields_the_audio_as_it_arrives(face: str, server: MockServer) -> None:
    rate_limited(server)
    server.push(chunks=[b"\xff\xf3one", b"two", b"three"], content_type="audio/mpeg")
    client = failover.Client({"gpt": openai(server)})
    with fake_sleep() as sleeper:
        pieces, response = read_speech(face, client)
    assert b"".join(pieces) == b"\xff\xf3onetwothree"
    assert sleeper.sleeps == [1.0]
    assert [a.status for a in response.attempts] == [429, 200]
    assert server.requests[1].json["input"] == "Hello"


def test_a_speech_stream_cut_after_its_first_bytes_is_never_replayed(
    face: str, server: MockServer
) -> None:
    server.push(chunks=[b"\xff\xf3one", b"two", b"three"], content_type="audio/mpeg", fault="cut:1")
    client = failover.Client({"gpt": openai(server)})
    got: list[bytes] = []
    with pytest.raises(failover.StreamInterrupted) as caught:
        if face == "sync":
            with client.speak_stream("Hello", voice="alloy") as stream:
                got.extend(stream)
        else:

            async def go() -> None:
                async with client.speak_stream_async("Hello", voice="alloy") as stream:
                    async for piece in stream:
                        got.append(piece)

            asyncio.run(go())
    assert got == [b"\xff\xf3one"]
    assert "broke after its first content" in str(caught.value)
    assert len(server.requests) == 1


def test_a_speech_stream_cut_before_any_bytes_fails_over(
    face: str, server: MockServer, backup_server: MockServer
) -> None:
    server.push(fault="reset")
    backup_server.push(chunks=[b"\xff\xf3ok"], content_type="audio/mpeg")
    client = failover.Client({"a": openai(server), "b": openai(backup_server)})
    with fake_sleep():
        pieces, response = read_speech(face, client)
    assert pieces == [b"\xff\xf3ok"]
    assert response.provider == "b"


def test_a_speech_stream_error_is_read_from_its_json(face: str, server: MockServer) -> None:
    server.push(400, json={"error": {"message": "Unknown voice", "type": "invalid_request_error"}})
    client = failover.Client({"gpt": openai(server)})
    with pytest.raises(failover.BadRequest, match="gpt returned 400: Unknown voice"):
        read_speech(face, client)


def test_a_speech_stream_that_stalls_after_its_first_bytes_ends_at_its_timeout(
    face: str, server: MockServer
) -> None:
    # As for a chat stream: the deadline bounds the start, then `timeout`
    # bounds each wait for more.
    import time

    server.push(chunks=[b"\xff\xf3one", b"two"], content_type="audio/mpeg", fault="stall:1")
    client = failover.Client({"gpt": openai(server)})
    started = time.monotonic()
    with pytest.raises(failover.StreamInterrupted) as caught:
        read_speech(face, client, timeout=0.5)
    # A wide margin: the failure this guards against is seconds past it.
    assert time.monotonic() - started < 2.5
    assert "gpt: no event from" in str(caught.value)


# Gemini: all three call types are generateContent calls.

GEMINI_CALLS = {
    "image": (
        "generate_image",
        ("a red fox",),
        {"size": "1536x1024"},
        lambda s: s.push_image(wire="gemini"),
    ),
    "speech": (
        "speak",
        ("Hello",),
        {"voice": "Kore", "format": "wav"},
        lambda s: s.push_audio(wire="gemini"),
    ),
    "transcription": (
        "transcribe",
        (WAV,),
        {},
        lambda s: s.push_transcription("hi", wire="gemini"),
    ),
}


def gemini_rate_limited(server: MockServer, delay: str = "1s") -> None:
    """Gemini's own 429: the wait in the body's RetryInfo, no header."""
    error = {
        "error": {
            "code": 429,
            "message": "Resource has been exhausted (e.g. check quota).",
            "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}],
        }
    }
    server.push(429, json=error)


@pytest.mark.parametrize("kind", list(GEMINI_CALLS))
def test_gemini_media_waits_out_its_retry_delay_then_retries(
    face: str, server: MockServer, kind: str
) -> None:
    method, args, kwargs, answer = GEMINI_CALLS[kind]
    gemini_rate_limited(server)
    answer(server)
    client = failover.Client({"g": gemini(server)})
    with fake_sleep() as sleeper:
        result = run(face, client, method, *args, **kwargs)
    assert sleeper.sleeps == [1.0]
    assert [a.status for a in result.attempts] == [429, 200]
    first, second = server.requests
    assert first.body == second.body
    assert first.path.endswith(":generateContent")
    assert first.headers["x-goog-api-key"] == GEMINI_KEY
    assert result.attempts[1].usage.input_tokens == 8


@pytest.mark.parametrize("kind", list(GEMINI_CALLS))
def test_each_call_type_fails_over_from_openai_to_gemini(
    face: str, server: MockServer, backup_server: MockServer, kind: str
) -> None:
    method, args, kwargs, answer = GEMINI_CALLS[kind]
    server.push(503, json={"error": {"message": "Service unavailable", "type": "server_error"}})
    answer(backup_server)
    client = failover.Client({"gpt": openai(server), "gemini": gemini(backup_server)})
    with fake_sleep():
        result = run(face, client, method, *args, **kwargs)
    assert result.provider == "gemini"
    assert [(a.provider, a.status) for a in result.attempts] == [("gpt", 503), ("gemini", 200)]


def test_speech_fails_over_between_providers_each_in_its_own_voice(
    face: str, server: MockServer, backup_server: MockServer
) -> None:
    server.push(503, json={"error": {"message": "Service unavailable", "type": "server_error"}})
    backup_server.push_audio(SOME_PCM, wire="gemini")
    client = failover.Client({"gpt": openai(server), "gemini": gemini(backup_server)})
    voices = {"gpt": "alloy", "gemini": "Kore"}
    with fake_sleep():
        result = run(face, client, "speak", "Hello", voice=voices, format="wav")
    assert result.provider == "gemini"
    assert server.requests[0].json["voice"] == "alloy"
    sent = backup_server.requests[0].json["generationConfig"]["speechConfig"]
    assert sent["voiceConfig"]["prebuiltVoiceConfig"] == {"voiceName": "Kore"}
    # A provider the mapping leaves out is skipped, saying why.
    backup_server.push_audio(SOME_PCM, wire="gemini")
    result = run(face, client, "speak", "Hello", voice={"gemini": "Puck"}, format="wav")
    assert result.attempts[0].skipped == "gpt cannot speak: voice= names no voice for it"
    assert server.requests[1:] == []


def test_a_voice_for_a_pool_is_each_members_and_unknown_names_are_refused(
    server: MockServer, backup_server: MockServer
) -> None:
    server.push_audio()
    pool = failover.Pool("tts", {"a1": openai(server), "a2": openai(backup_server)})
    client = failover.Client({"tts": pool, "gemini": gemini(backup_server)})
    result = client.speak("Hello", voice={"tts": "nova"})
    assert result.provider == "a1"
    assert server.requests[0].json["voice"] == "nova"
    for voices, says in [
        ({"gpt": "alloy"}, r"voice= names unknown provider\(s\) \['gpt'\]"),
        ({"a1": "alloy"}, r"voice= names pools, not their members: \['a1'\]"),
        ({}, "voice= as a mapping gives each provider's voice by its name"),
        ({"tts": ""}, "voice= as a mapping"),
        ({"tts": 3}, "voice= as a mapping"),
        (["alloy"], "voice= must be a voice name"),
    ]:
        with pytest.raises(failover.ConfigurationError, match=says):
            client.speak("Hello", voice=voices)  # type: ignore[arg-type]
    assert len(server.requests) == 1


def test_a_gemini_image_asks_for_the_image_modality_and_an_aspect_ratio(
    face: str, server: MockServer
) -> None:
    server.push_image(TINY_PNG, wire="gemini", revised_prompt="Here is a fox.")
    client = failover.Client({"g": gemini(server)})
    result = run(face, client, "generate_image", "a red fox", size="1536x1024")
    assert result.data == TINY_PNG
    assert result.images[0].media_type == "image/png"
    assert (result.model, result.usage.output_tokens) == ("gemini-2.5-flash-image", 1290)
    sent = server.requests[0]
    assert sent.path == "/models/gemini-2.5-flash-image:generateContent"
    assert sent.json == {
        "contents": [{"role": "user", "parts": [{"text": "a red fox"}]}],
        "generationConfig": {
            "responseModalities": ["TEXT", "IMAGE"],
            "imageConfig": {"aspectRatio": "3:2"},
        },
    }


def test_gemini_speech_is_its_pcm_wrapped_as_wav_or_left_raw(face: str, server: MockServer) -> None:
    import wave

    samples = bytes(range(256)) * 10
    server.push_audio(samples, wire="gemini")
    server.push_audio(samples, wire="gemini")
    client = failover.Client({"g": gemini(server)})
    result = run(face, client, "speak", "Hello", voice="kore", format="wav", instructions="Warmly.")
    assert result.media_type == "audio/wav"
    with wave.open(io.BytesIO(result.data)) as read:
        assert (read.getnchannels(), read.getsampwidth(), read.getframerate()) == (1, 2, 24000)
        assert read.readframes(read.getnframes()) == samples
    raw = run(face, client, "speak", "Hello", voice="Kore", format="pcm")
    assert (raw.data, raw.media_type) == (samples, "audio/pcm;rate=24000")
    sent = server.requests[0].json
    assert sent["contents"][0]["parts"] == [{"text": "Warmly: Hello"}]
    voice = sent["generationConfig"]["speechConfig"]["voiceConfig"]["prebuiltVoiceConfig"]
    assert voice == {"voiceName": "Kore"}
    assert server.requests[0].path == "/models/gemini-2.5-flash-preview-tts:generateContent"


def test_a_gemini_transcription_sends_the_recording_inline_to_its_model(
    face: str, server: MockServer
) -> None:
    server.push_transcription("Hello there.", wire="gemini")
    client = failover.Client({"g": gemini(server)})
    result = run(face, client, "transcribe", WAV, language="en", prompt="Names: Ada.")
    assert result.text == "Hello there."
    assert (result.language, result.duration, result.segments) == (None, None, [])
    sent = server.requests[0]
    # A transcription is an ordinary multimodal prompt to the provider's model.
    assert sent.path == "/models/gemini-2.5-flash:generateContent"
    instruction, recording = sent.json["contents"][0]["parts"]
    assert "The speech is in en." in instruction["text"]
    assert "Names: Ada." in instruction["text"]
    assert recording == {
        "inlineData": {"mimeType": "audio/wav", "data": base64.b64encode(WAV).decode()}
    }


@pytest.mark.parametrize(
    ("method", "args", "kwargs", "says"),
    [
        ("generate_image", ("a fox",), {"n": 2}, "one image per call"),
        ("generate_image", ("a fox",), {"response_format": "url"}, "never a URL"),
        ("generate_image", ("a fox",), {"quality": "high"}, "no quality="),
        ("generate_image", ("a fox",), {"size": "1000x999"}, "1000:999"),
        ("speak", ("Hi",), {"voice": "Kore"}, "WAV or raw PCM"),
        ("speak", ("Hi",), {"voice": "alloy", "format": "wav"}, 'no voice "alloy"'),
        ("speak", ("Hi",), {"voice": "Kore", "format": "wav", "speed": 2}, "no speed="),
        ("transcribe", (WAV,), {"filename": "a.m4a"}, 'not "a.m4a"'),
        ("transcribe", (WAV,), {"response_format": "srt"}, "text only"),
    ],
)
def test_what_gemini_cannot_take_is_refused_before_sending_or_skipped(
    face: str,
    server: MockServer,
    backup_server: MockServer,
    method: str,
    args: tuple[Any, ...],
    kwargs: Any,
    says: str,
) -> None:
    alone = failover.Client({"g": gemini(server)})
    with pytest.raises(failover.ConfigurationError, match=f"g cannot .* so: .*{says}"):
        run(face, alone, method, *args, **kwargs)
    assert server.requests == []
    # In a chain, Gemini is passed over for a provider that can.
    CALLS[{"generate_image": "image", "speak": "speech", "transcribe": "transcription"}[method]][3](
        backup_server
    )
    chain = failover.Client(
        {
            "g": gemini(server),
            "gpt": openai(backup_server, image_model="dall-e-2", transcription_model="whisper-1"),
        }
    )
    result = run(face, chain, method, *args, **kwargs)
    assert result.provider == "gpt"
    assert says.replace("\\", "") in (result.attempts[0].skipped or "")
    assert server.requests == []


def test_an_image_gemini_blocked_is_a_bad_request_naming_it(face: str, server: MockServer) -> None:
    server.push(json={"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}})
    client = failover.Client({"g": gemini(server)})
    with pytest.raises(failover.BadRequest) as caught:
        run(face, client, "generate_image", "something forbidden")
    assert "g refused the request: its safety filters blocked the prompt" in str(caught.value)
    assert caught.value.provider == "g"
    assert GEMINI_KEY not in str(caught.value)


def test_a_gemini_answer_with_words_but_no_image_is_retried(face: str, server: MockServer) -> None:
    said = {"candidates": [{"content": {"parts": [{"text": "Which fox do you mean?"}]}}]}
    server.push(json=said)
    server.push_image(wire="gemini")
    client = failover.Client({"g": gemini(server)})
    with fake_sleep():
        result = run(face, client, "generate_image", "a fox")
    assert result.data == TINY_PNG
    first = result.attempts[0]
    assert first.kind == "server_error"


def test_a_gemini_speech_stream_gives_its_wav_whole(face: str, server: MockServer) -> None:
    server.push_audio(SOME_PCM, wire="gemini")
    client = failover.Client({"g": gemini(server)})
    if face == "sync":
        with client.speak_stream("Hello", voice="Kore", format="wav") as stream:
            pieces = list(stream)
    else:

        async def go() -> list[bytes]:
            async with client.speak_stream_async("Hello", voice="Kore", format="wav") as stream:
                return [p async for p in stream]

        pieces = asyncio.run(go())
    assert len(pieces) == 1
    assert pieces[0][:4] == b"RIFF" and pieces[0][44:] == SOME_PCM


HTML = "<html><body>Gateway says hi</body></html>"


def _gemini_json(*parts: dict[str, Any], finish: str = "STOP") -> dict[str, Any]:
    return {"candidates": [{"content": {"parts": list(parts)}, "finishReason": finish}]}


def _pcm_part(data: str) -> dict[str, Any]:
    return {"inlineData": {"mimeType": "audio/L16;codec=pcm;rate=24000", "data": data}}


@pytest.mark.parametrize(
    ("method", "args", "kwargs", "answer", "says"),
    [
        (
            "speak",
            ("Hi",),
            {"voice": "Kore", "format": "wav"},
            _gemini_json(_pcm_part("")),
            "no audio",
        ),
        (
            "speak",
            ("Hi",),
            {"voice": "Kore", "format": "wav"},
            _gemini_json(_pcm_part("AQAC")),
            "inside a sample",
        ),
        (
            "transcribe",
            (WAV,),
            {},
            _gemini_json({"text": "Hello th"}, finish="MAX_TOKENS"),
            "MAX_TOKENS",
        ),
        (
            "transcribe",
            (WAV,),
            {},
            {"candidates": [{"content": {}, "finishReason": "STOP"}]},
            "no transcript",
        ),
        (
            "generate_image",
            ("a fox",),
            {},
            _gemini_json({"inlineData": {"mimeType": "text/plain", "data": "aGVsbG8="}}),
            "no image",
        ),
    ],
)
def test_a_gemini_answer_without_what_was_asked_is_malformed_never_returned(
    face: str, server: MockServer, method: str, args: Any, kwargs: Any, answer: Any, says: str
) -> None:
    server.push(json=answer)
    client = failover.Client({"g": gemini(server)}, retry=failover.RetryPolicy(max_retries_last=0))
    with pytest.raises(failover.ServerError, match=f"malformed response body from g: .*{says}"):
        run(face, client, method, *args, **kwargs)


def read_speech_of(face: str, client: failover.Client, **kwargs: Any) -> Any:
    """``read_speech`` with the caller's voice and format."""
    if face == "sync":
        with client.speak_stream("Hello", **kwargs) as stream:
            pieces = list(stream)
        return pieces, stream.response

    async def go() -> Any:
        async with client.speak_stream_async("Hello", **kwargs) as stream:
            pieces = [p async for p in stream]
        return pieces, stream.response

    return asyncio.run(go())


@pytest.mark.parametrize("wire", ["openai", "gemini"])
def test_an_html_page_where_speech_was_expected_is_an_error_in_every_face(
    face: str, server: MockServer, wire: str
) -> None:
    make = openai if wire == "openai" else gemini
    voice = {"voice": "alloy"} if wire == "openai" else {"voice": "Kore", "format": "wav"}
    client = failover.Client({"p": make(server)}, retry=failover.RetryPolicy(max_retries_last=0))
    server.push(body=HTML, content_type="text/html")
    with pytest.raises(failover.ServerError, match="malformed response body from p"):
        run(face, client, "speak", "Hello", **voice)
    server.push(body=HTML, content_type="text/html")
    with pytest.raises(failover.ServerError, match="malformed response body from p"):
        read_speech_of(face, client, **voice)


def test_an_html_page_where_a_json_transcript_was_expected_is_an_error(
    face: str, server: MockServer
) -> None:
    server.push(body=HTML, content_type="text/html")
    client = failover.Client({"p": openai(server)}, retry=failover.RetryPolicy(max_retries_last=0))
    with pytest.raises(failover.ServerError, match="where a json transcript was expected"):
        run(face, client, "transcribe", WAV)


def test_gemini_speech_labelled_as_text_is_still_read_as_its_json(
    face: str, server: MockServer
) -> None:
    packed = base64.b64encode(SOME_PCM).decode()
    server.push(body=json.dumps(_gemini_json(_pcm_part(packed))), content_type="text/plain")
    client = failover.Client({"g": gemini(server)})
    pieces, _ = read_speech_of(face, client, voice="Kore", format="wav")
    assert b"".join(pieces)[44:] == SOME_PCM


def test_a_speech_streams_response_has_its_model_usage_and_cost(
    face: str, server: MockServer
) -> None:
    server.push_audio(wire="gemini")
    prices = {"gemini-2.5-flash-preview-tts": failover.Price(0.5, 10.0)}
    client = failover.Client({"g": gemini(server)}, prices=prices)
    _, response = read_speech_of(face, client, voice="Kore", format="wav")
    assert response.model == "gemini-2.5-flash-preview-tts"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (8, 120)
    assert response.cost == pytest.approx((8 * 0.5 + 120 * 10.0) / 1e6)
    server.push_audio()
    bytes_client = failover.Client({"o": openai(server)})
    _, response = read_speech_of(face, bytes_client, voice="alloy")
    assert response.model == "gpt-4o-mini-tts"


def test_a_filename_with_a_line_break_is_refused_before_sending(
    face: str, server: MockServer
) -> None:
    client = failover.Client({"o": openai(server)})
    for name in ("a\r\nContent-Type: text/plain\r\n.wav", "a\x85b.wav", "a\u2028b.wav"):
        with pytest.raises(failover.ConfigurationError, match="control character"):
            run(face, client, "transcribe", WAV, filename=name)
    assert server.requests == []


def test_mistral_is_passed_over_for_formats_it_cannot_give(
    face: str, server: MockServer, backup_server: MockServer
) -> None:
    backup_server.push_transcription(
        "1\n00:00:00,000 --> 00:00:01,000\nbonjour\n", response_format="srt"
    )
    mistral = failover.Mistral("mistral-small-latest", api_key=KEY, base_url=server.url)
    client = failover.Client(
        {"mistral": mistral, "gpt": openai(backup_server, transcription_model="whisper-1")}
    )
    result = run(face, client, "transcribe", WAV, response_format="srt")
    assert result.provider == "gpt"
    assert "Mistral answers with the text only" in (result.attempts[0].skipped or "")
    assert server.requests == []
    # And a multipart request's .json is None, not an error.
    assert backup_server.requests[0].json is None


def test_an_openai_image_that_is_no_image_is_malformed_and_retried(
    face: str, server: MockServer
) -> None:
    for packed in ("", base64.b64encode(HTML.encode()).decode()):
        server.push(json={"created": 1, "data": [{"b64_json": packed}]})
    server.push_image()
    client = failover.Client({"o": openai(server)})
    with fake_sleep():
        result = run(face, client, "generate_image", "a fox")
    assert result.data == TINY_PNG
    assert [a.kind for a in result.attempts] == ["server_error", "server_error", None]


def test_an_image_url_that_serves_a_page_is_malformed_and_keeps_the_generations_usage(
    face: str, server: MockServer
) -> None:
    server.push(
        json={
            "created": 1,
            "data": [{"url": f"{server.url}/x.png"}],
            "usage": {"input_tokens": 5, "output_tokens": 100},
        }
    )
    server.push(body=HTML, content_type="image/png")
    client = failover.Client(
        {"o": openai(server, image_model="dall-e-3")},
        prices={"dall-e-3": failover.Price(1.0, 10.0)},
        retry=failover.RetryPolicy(max_retries_last=0),
    )
    with pytest.raises(failover.ServerError, match="not an image") as caught:
        run(face, client, "generate_image", "a fox")
    attempt = caught.value.attempts[0]
    assert (attempt.status, attempt.billed) == (200, True)
    assert attempt.usage is not None and attempt.usage.output_tokens == 100
    assert attempt.cost == pytest.approx((5 * 1.0 + 100 * 10.0) / 1e6)


@pytest.mark.parametrize(
    ("body", "content_type"),
    [(HTML.encode(), "audio/mpeg"), (b"Service temporarily unavailable", "audio/mpeg")],
)
def test_text_labelled_as_audio_is_no_speech(
    face: str, server: MockServer, body: bytes, content_type: str
) -> None:
    server.push(body=body, content_type=content_type)
    client = failover.Client({"o": openai(server)}, retry=failover.RetryPolicy(max_retries_last=0))
    with pytest.raises(failover.ServerError, match="text where audio was expected"):
        run(face, client, "speak", "Hi", voice="alloy")


def test_an_html_page_is_no_text_transcript(face: str, server: MockServer) -> None:
    server.push(body=HTML, content_type="text/plain")
    client = failover.Client(
        {"o": openai(server, transcription_model="whisper-1")},
        retry=failover.RetryPolicy(max_retries_last=0),
    )
    with pytest.raises(failover.ServerError, match="an HTML page where a transcript"):
        run(face, client, "transcribe", WAV, response_format="srt")


@pytest.mark.parametrize("finish", ["MAX_TOKENS", "OTHER", "MALFORMED_FUNCTION_CALL"])
def test_gemini_speech_or_a_transcript_that_did_not_stop_of_itself_is_cut_short(
    face: str, server: MockServer, finish: str
) -> None:
    packed = base64.b64encode(b"\x00\x01" * 10).decode()
    server.push(json=_gemini_json(_pcm_part(packed), finish=finish))
    server.push(json=_gemini_json({"text": "hello partial"}, finish=finish))
    client = failover.Client({"g": gemini(server)}, retry=failover.RetryPolicy(max_retries_last=0))
    with pytest.raises(failover.ServerError, match=f"speech cut short \\({finish}\\)"):
        run(face, client, "speak", "Hi", voice="Kore", format="pcm")
    with pytest.raises(failover.ServerError, match=finish):
        run(face, client, "transcribe", WAV)


def test_a_gemini_image_whose_bytes_are_not_what_its_type_says_is_no_image(
    face: str, server: MockServer
) -> None:
    fake = base64.b64encode(HTML.encode()).decode()
    server.push(json=_gemini_json({"inlineData": {"mimeType": "image/png", "data": fake}}))
    client = failover.Client({"g": gemini(server)}, retry=failover.RetryPolicy(max_retries_last=0))
    with pytest.raises(failover.ServerError, match="no image"):
        run(face, client, "generate_image", "a fox")
