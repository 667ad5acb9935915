"""OpenAI's and Gemini's recorded image, speech and transcription answers,
replayed through a MockServer into ``generate_image()``, ``speak()`` and
``transcribe()``: each 200 read into the result its body holds (or, where the
recorder cut the data short, into the typed error of a malformed answer), each
error into its typed exception naming the provider. (Image edits, the Responses
API's image tool and streamed transcriptions are call types this library does
not make.)"""

from __future__ import annotations

import base64
import io
import json
import wave

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


GEMINI_REPLAYED = [r for r in NOT_REPLAYED if r.skip == MEDIA and r.folder == "gemini"]


def test_every_gemini_media_recording_is_replayed_here() -> None:
    models = sorted(r.uri.split("/models/")[1] for r in GEMINI_REPLAYED)
    assert models == [
        "gemini-2.0-flash-preview-image-generation:generateContent",
        "gemini-2.5-flash-image:generateContent",
        "gemini-2.5-flash-preview-tts:generateContent",
        "gemini-2.5-flash:generateContent",
    ]


def _gemini_inline(body: dict[str, object], prefix: str) -> bytes:
    """The recorded answer's inline data of a media type starting ``prefix``."""
    parts = body["candidates"][0]["content"]["parts"]  # type: ignore[index]
    for part in parts:
        blob = part.get("inlineData") or {}
        if str(blob.get("mimeType", "")).startswith(prefix):
            return base64.b64decode(blob["data"])
    raise AssertionError(f"no {prefix} part in the recording")


@pytest.mark.parametrize("rec", [pytest.param(r, id=r.id) for r in GEMINI_REPLAYED])
def test_recorded_gemini_media_answer(rec: Recording) -> None:
    model = rec.uri.split("/models/")[1].split(":")[0]
    asked = rec.request_json if isinstance(rec.request_json, dict) else {}
    modalities = (asked.get("generationConfig") or {}).get("responseModalities") or []
    with MockServer() as server:
        server.push(rec.status, headers=rec.playback_headers, body=rec.body)
        body = json.loads(rec.body)
        if "IMAGE" in modalities:
            provider = failover.Gemini(
                "gemini-2.5-flash", api_key=API_KEY, base_url=server.url, image_model=model
            )
            client = failover.Client(
                {"gemini": provider}, retry=failover.RetryPolicy(max_retries_last=0)
            )
            if b"__BINARY_TRUNCATED__" in rec.body:
                # The recorder replaced the image by a marker: not base64, so
                # no image; a malformed answer, never a wrong one.
                with pytest.raises(
                    failover.ServerError, match="malformed response body from gemini"
                ):
                    client.generate_image("a picture")
                return
            result = client.generate_image("a picture")
            assert result.data == _gemini_inline(body, "image/")
            assert result.images[0].media_type == "image/png"
            assert result.model == body.get("modelVersion", model)
            assert result.usage.input_tokens == body["usageMetadata"]["promptTokenCount"]
        elif "AUDIO" in modalities:
            provider = failover.Gemini(
                "gemini-2.5-flash", api_key=API_KEY, base_url=server.url, speech_model=model
            )
            client = failover.Client({"gemini": provider})
            speech = client.speak("Hello", voice="Kore", format="wav")
            pcm = _gemini_inline(body, "audio/")
            assert speech.media_type == "audio/wav"
            with wave.open(io.BytesIO(speech.data)) as read:
                assert (read.getnchannels(), read.getsampwidth()) == (1, 2)
                assert read.getframerate() == 24000
                assert read.readframes(read.getnframes()) == pcm
        else:
            provider = failover.Gemini(model, api_key=API_KEY, base_url=server.url)
            client = failover.Client({"gemini": provider})
            transcript = client.transcribe(WAV)
            parts = body["candidates"][0]["content"]["parts"]
            assert transcript.text == "".join(p.get("text", "") for p in parts).strip()
            assert transcript.usage.input_tokens == body["usageMetadata"]["promptTokenCount"]
