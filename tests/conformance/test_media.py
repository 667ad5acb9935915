"""OpenAI's recorded image, speech and transcription answers, replayed through a
MockServer into ``generate_image()``, ``speak()`` and ``transcribe()``: each 200
read into the result its body holds, each error into its typed exception
naming the provider. (Gemini's media recordings wait for its media wire; image
edits, the Responses API's image tool and streamed transcriptions are call
types this library does not make.)"""

from __future__ import annotations

import base64
import json

import pytest

import failover
from failover.testing import MockServer

from .loader import MEDIA, NOT_REPLAYED, Recording
from .replay import API_KEY

WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(40)

REPLAYED = [
    r
    for r in NOT_REPLAYED
    if r.skip == MEDIA
    and r.folder == "openai"
    and not r.streaming
    and r.uri.split("?")[0].endswith(
        ("/images/generations", "/audio/speech", "/audio/transcriptions")
    )
]


def test_every_openai_media_recording_is_replayed_here() -> None:
    paths = sorted(r.uri.split("/v1/")[1] for r in REPLAYED)
    assert paths == [
        "audio/speech",
        "audio/transcriptions",
        "audio/transcriptions",
        "images/generations",
        "images/generations",
        "images/generations",
        "images/generations",
    ]


def _model(rec: Recording, default: str) -> str:
    if isinstance(rec.request_json, dict) and rec.request_json.get("model"):
        return str(rec.request_json["model"])
    return default


@pytest.mark.parametrize("rec", [pytest.param(r, id=r.id) for r in REPLAYED])
def test_recorded_media_answer(rec: Recording) -> None:
    path = rec.uri.split("/v1/")[1]
    with MockServer() as server:
        server.push(rec.status, headers=rec.playback_headers, body=rec.body)
        if path == "images/generations":
            asked = rec.request_json or {}
            urls = asked.get("response_format") != "b64_json"
            model = _model(rec, "dall-e-2")
            provider = failover.OpenAI(
                "gpt-4.1", api_key=API_KEY, base_url=server.url, image_model=model
            )
            client = failover.Client({"openai": provider})
            call = lambda: client.generate_image(  # noqa: E731
                "a picture", response_format="url" if urls else "b64"
            )
        elif path == "audio/speech":
            provider = failover.OpenAI(
                "gpt-4.1", api_key=API_KEY, base_url=server.url, speech_model=_model(rec, "tts-1")
            )
            client = failover.Client({"openai": provider})
            call = lambda: client.speak("Hello", voice="alloy")  # noqa: E731
        else:
            model = "whisper-1"
            fmt = "verbose_json" if b'"segments"' in rec.body else "json"
            provider = failover.OpenAI(
                "gpt-4.1", api_key=API_KEY, base_url=server.url, transcription_model=model
            )
            client = failover.Client({"openai": provider})
            call = lambda: client.transcribe(WAV, response_format=fmt)  # noqa: E731
        if rec.status >= 400:
            with pytest.raises(failover.FailoverError) as caught:
                call()
            assert caught.value.status == rec.status
            assert "openai returned" in str(caught.value)
            return
        result = call()
        body = json.loads(rec.body) if rec.body.startswith(b"{") else None
        if path == "images/generations":
            assert body is not None
            first = body["data"][0]
            if "b64_json" in first:
                assert result.data == base64.b64decode(first["b64_json"])
                assert result.images[0].media_type == "image/png"
            else:
                assert result.images[0].url == first["url"]
                assert result.data is None
            assert result.images[0].revised_prompt == first.get("revised_prompt")
        elif path == "audio/speech":
            assert result.data == rec.body
            assert result.media_type == "audio/mpeg"
        else:
            assert body is not None
            assert result.text == body["text"]
            if "segments" in body:
                assert len(result.segments) == len(body["segments"])
                assert result.duration == pytest.approx(body["duration"])
                assert result.language == body["language"]
            else:
                assert result.duration == body["usage"]["seconds"]
