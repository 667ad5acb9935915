"""Testing utilities, part of the product.

- ``FakeSleeper``: pass as ``Client(sleeper=...)``; sleeps are recorded and
  take no real time, on a virtual clock that the deadline follows too.
- ``fake_sleep()``: every client without its own sleeper uses one FakeSleeper
  inside the block.
- ``MockServer``: a real HTTP server on 127.0.0.1 (in Rust) playing back
  scripted responses in order.

The pytest plugin offers both as the ``fake_sleep`` and ``mock_server`` fixtures;
the ``mock_server`` fixture fails a test at teardown that leaves scripted
responses unserved (``MockServer.assert_all_used()``).
"""

from __future__ import annotations

import base64
import json as _json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from . import _native, _sleep

__all__ = ["FakeSleeper", "MockServer", "RecordedFile", "RecordedRequest", "fake_sleep"]


class FakeSleeper:
    """Records each requested sleep and returns without sleeping, moving a virtual clock.

    The clock starts at the real time (whole seconds) when the FakeSleeper is made and moves
    only by the sleeps (and ``advance()``); HTTP-dates, reset times, cooldowns and the deadline
    are measured against it. Calls side by side under it (threads or tasks) wait for each other
    as under real sleeping: the time moves only when every call in flight is sleeping, then to
    the earliest wake-up (docs/testing.md says how long it waits for calls just starting).
    """

    def __init__(self) -> None:
        self._native_clock = _native.VirtualClock()

    @property
    def sleeps(self) -> list[float]:
        """Every sleep requested so far, in seconds."""
        return self._native_clock.sleeps

    def time(self) -> float:
        """The virtual time, in Unix seconds."""
        return self._native_clock.time()

    def __call__(self, seconds: float) -> None:
        """Records a sleep and moves the clock at once (waking the calls due by then)."""
        self._native_clock.sleep(seconds)

    def advance(self, seconds: float) -> None:
        """Moves the virtual clock by ``seconds`` without recording a sleep:
        time passing between calls (a cooldown running out, a budget's window
        moving on)."""
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, (int, float))
            or not (0 <= seconds < float("inf"))
        ):
            raise ValueError(f"advance() takes a finite number of seconds >= 0, got {seconds!r}")
        self._native_clock.advance(float(seconds))

    def clear(self) -> None:
        """Forgets the sleeps recorded so far (the clock keeps its time)."""
        self._native_clock.clear()

    def assert_sequence(self, expected: Sequence[float], *, tolerance: float = 1e-6) -> None:
        """Asserts the sleeps so far were exactly ``expected`` (to ``tolerance`` seconds)."""
        actual = self.sleeps
        same = len(actual) == len(expected) and all(
            math.isclose(a, e, rel_tol=0.0, abs_tol=tolerance) for a, e in zip(actual, expected)
        )
        if not same:
            raise AssertionError(f"expected sleeps {list(expected)}, got {actual}")

    def assert_never_slept(self) -> None:
        if self.sleeps:
            raise AssertionError(f"expected no sleep, got {self.sleeps}")

    def __repr__(self) -> str:
        return f"FakeSleeper(sleeps={self.sleeps})"


@contextmanager
def fake_sleep() -> Iterator[FakeSleeper]:
    """Inside the block, every client without an explicit sleeper uses one
    FakeSleeper (like Laravel's ``Sleep::fake()``)."""
    sleeper = FakeSleeper()
    previous = _sleep.active
    _sleep.active = sleeper
    try:
        yield sleeper
    finally:
        _sleep.active = previous


# A header name: RFC 9110's token characters.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


@dataclass(frozen=True)
class RecordedRequest:
    """A request MockServer received."""

    method: str
    path: str
    headers: dict[str, str]
    """Names lower-cased; of a repeated header, the last."""
    body: bytes
    header_list: tuple[tuple[str, str], ...] = ()
    """Every header line in the order received (names lower-cased), repeats kept."""

    @property
    def json(self) -> Any:
        """The body parsed as JSON; ``None`` when it is empty or not JSON (a
        multipart form: see ``.form`` and ``.files``)."""
        try:
            return _json.loads(self.body) if self.body else None
        except ValueError:
            return None

    @property
    def form(self) -> dict[str, str]:
        """A ``multipart/form-data`` request's plain fields (``{}`` otherwise)."""
        return {name: value for name, value in _form_parts(self) if isinstance(value, str)}

    @property
    def files(self) -> dict[str, RecordedFile]:
        """A ``multipart/form-data`` request's files, by field name (``{}`` otherwise)."""
        return {name: value for name, value in _form_parts(self) if isinstance(value, RecordedFile)}

    def __repr__(self) -> str:
        # The client sent real credentials; a repr must not show them.
        secret = _native.is_credential_header
        shown = {k: "<redacted>" if secret(k) else v for k, v in self.headers.items()}
        return (
            f"RecordedRequest(method={self.method!r}, path={self.path!r}, headers={shown!r}, "
            f"body=<{len(self.body)} bytes>)"
        )


@dataclass(frozen=True)
class RecordedFile:
    """A file a multipart request carried."""

    filename: str | None
    content_type: str | None
    data: bytes

    def __repr__(self) -> str:
        return (
            f"RecordedFile(filename={self.filename!r}, content_type={self.content_type!r}, "
            f"data=<{len(self.data)} bytes>)"
        )


def _form_parts(request: RecordedRequest) -> list[tuple[str, str | RecordedFile]]:
    """The parts of a ``multipart/form-data`` body, in order: a field's
    text, or a file (the standard library's MIME parser, imported here)."""
    content_type = request.headers.get("content-type", "")
    if not content_type.lower().startswith("multipart/form-data"):
        return []
    from email.parser import BytesParser
    from email.policy import HTTP

    head = f"Content-Type: {content_type}\r\n\r\n".encode()
    message = BytesParser(policy=HTTP).parsebytes(head + request.body)
    parts: list[tuple[str, str | RecordedFile]] = []
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if not isinstance(payload, bytes):
            payload = b""
        filename = part.get_filename()
        if not isinstance(name, str):
            continue
        if filename is None and part.get("content-type") is None:
            parts.append((name, payload.decode()))
        else:
            parts.append((name, RecordedFile(filename, part.get_content_type(), payload)))
    return parts


#: A 1x1 transparent PNG: a real image, for tests that check the bytes.
TINY_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63000100000500010d0a2db40000000049454e44ae426082"
)
#: A few bytes that start as MP3 frames do.
SOME_MP3 = b"\xff\xf3\x44\xc4" + bytes(60)


#: A tenth of a second of silence as Gemini speaks: 16-bit PCM at 24 kHz.
SOME_PCM = bytes(4800)


def _gemini_answer(
    parts: list[dict[str, Any]], output_tokens: int, *, model: str = "gemini-2.5-flash-image"
) -> dict[str, Any]:
    """A ``generateContent`` answer of ``parts``."""
    return {
        "candidates": [
            {"content": {"parts": parts, "role": "model"}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": 8,
            "candidatesTokenCount": output_tokens,
            "totalTokenCount": 8 + output_tokens,
        },
        "modelVersion": model,
        "responseId": "mock",
    }


def _text_body(wire: str, text: str, model: str | None) -> dict[str, Any]:
    if wire in ("openai", "openai_compatible"):
        return {
            "id": "chatcmpl-mock",
            "object": "chat.completion",
            "created": 1767967901,
            "model": model or "gpt-4.1-mini-2025-04-14",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": 12,
                "completion_tokens": max(1, len(text.split())),
                "total_tokens": 12 + max(1, len(text.split())),
                "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
            },
        }
    if wire == "anthropic":
        return {
            "id": "msg_mock",
            "type": "message",
            "role": "assistant",
            "model": model or "claude-haiku-4-5-20251001",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": 12,
                "output_tokens": max(1, len(text.split())),
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }
    if wire == "gemini":
        return {
            "candidates": [
                {
                    "content": {"parts": [{"text": text}], "role": "model"},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 12,
                "candidatesTokenCount": max(1, len(text.split())),
                "totalTokenCount": 12 + max(1, len(text.split())),
            },
            "modelVersion": model or "gemini-2.5-flash",
            "responseId": "mock",
        }
    if wire == "ollama":
        return {
            "model": model or "llama3.2",
            "created_at": "2026-01-01T00:00:00Z",
            "message": {"role": "assistant", "content": text},
            "done_reason": "stop",
            "done": True,
            "prompt_eval_count": 12,
            "eval_count": max(1, len(text.split())),
        }
    raise ValueError(f"unknown wire {wire!r}: {_WIRES}")


_WIRES = (
    "use 'openai' (the OpenAI-compatible family and Azure too), 'anthropic', 'gemini' or 'ollama'"
)


def _embeddings_body(wire: str, vectors: Sequence[Sequence[float]], model: str | None) -> Any:
    if isinstance(vectors, (str, bytes)) or not all(
        isinstance(v, Sequence) and not isinstance(v, (str, bytes)) for v in vectors
    ):
        raise ValueError("vectors is a list of vectors, each a list of floats")
    rows = [list(v) for v in vectors]
    if not all(
        isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
        for row in rows
        for x in row
    ):
        raise ValueError("every vector value must be a finite number (JSON has no NaN)")
    if wire in ("openai", "openai_compatible"):
        return {
            "object": "list",
            "data": [
                {"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(rows)
            ],
            "model": model or "text-embedding-3-small",
            "usage": {"prompt_tokens": 3 * len(rows), "total_tokens": 3 * len(rows)},
        }
    if wire == "gemini":
        return {"embeddings": [{"values": v} for v in rows]}
    if wire == "ollama":
        return {
            "model": model or "nomic-embed-text",
            "embeddings": rows,
            "prompt_eval_count": 3 * len(rows),
        }
    if wire == "anthropic":
        raise ValueError("Anthropic has no embeddings API")
    raise ValueError(f"unknown wire {wire!r}: {_WIRES}")


class MockServer:
    """A real HTTP server on 127.0.0.1 that plays back scripted responses.

    Each request takes the next scripted response (first in, first out, across
    connections); an unscripted request gets a 500 that says so. Use ``url``
    as a provider's ``base_url``.
    """

    def __init__(self) -> None:
        self._native = _native.NativeMockServer()

    @property
    def url(self) -> str:
        return self._native.url

    def push(
        self,
        status: int = 200,
        headers: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
        json: Any = None,
        body: bytes | str | None = None,
        sse: Sequence[str] | None = None,
        delay: float = 0.0,
        fault: str | None = None,
        chunks: Sequence[bytes | str] | None = None,
        interval: float = 0.0,
        content_type: str | None = None,
    ) -> None:
        """Scripts the next response.

        ``json`` is serialised; ``body`` is sent as is; ``sse`` is a list of
        server-sent events (each the text of one event, e.g. ``'data: {...}'``).
        ``chunks`` is a streamed body written piece by piece exactly as given
        (no separators, each its own network read: a piece may end inside a
        character), e.g. NDJSON lines. ``delay`` waits (really) before
        answering; ``interval`` (really) between one event or chunk of a
        stream and the next, as a server keeping a connection alive does.
        ``fault``: ``"reset"`` drops the connection, ``"hang"`` never answers,
        ``"cut:N"`` stops a stream after N events or chunks (or a body after
        N bytes) and resets the connection, ``"stall:N"``
        sends N events or chunks and then nothing, keeping the connection
        open. ``content_type`` sets the Content-Type header (of a binary
        ``body=``, say: ``push(body=mp3, content_type="audio/mpeg")``).

        A bad script fails here, at once, with ``ValueError``: a ``status``
        that is not an int from 100 to 599, a push after ``close()``, ``sse=``
        with ``json=`` or ``body=`` (or as one str instead of a list of
        events, or events that are not str), a header name that is not an
        HTTP token, a header value with a line break.
        """
        pairs = list(headers.items() if isinstance(headers, Mapping) else headers or [])
        if content_type is not None:
            if not isinstance(content_type, str) or not content_type:
                raise ValueError(f"content_type must be a media type (a str), got {content_type!r}")
            if any(k.lower() == "content-type" for k, _ in pairs):
                raise ValueError("give content_type= or a content-type header, not both")
            pairs.append(("content-type", content_type))
        for name, value in pairs:
            if any(c in f"{name}{value}" for c in "\r\n\0"):
                raise ValueError(f"header {name!r} holds a line break or NUL")
            if not isinstance(name, str) or not _TOKEN.fullmatch(name):
                raise ValueError(f"header name {name!r} is not an HTTP token (RFC 9110)")
        if json is not None and body is not None:
            raise ValueError("give json= or body=, not both")
        if sse is not None and (json is not None or body is not None):
            raise ValueError("give sse= alone: a stream has no json= or body=")
        if chunks is not None and (sse is not None or json is not None or body is not None):
            raise ValueError("give chunks= alone: a stream has no sse=, json= or body=")
        if isinstance(chunks, (str, bytes)):
            raise ValueError("chunks= is a list of pieces, not one str")
        pieces = None
        if chunks is not None:
            pieces = [c.encode() if isinstance(c, str) else bytes(c) for c in chunks]
        if isinstance(sse, (str, bytes)):
            raise ValueError("sse= is a list of events (each the text of one event), not one str")
        raw = _json.dumps(json).encode() if json is not None else body or b""
        if isinstance(raw, str):
            raw = raw.encode()
        if json is not None and not any(k.lower() == "content-type" for k, _ in pairs):
            pairs.append(("content-type", "application/json"))
        events = list(sse) if sse is not None else None
        if events is not None and not all(isinstance(e, str) for e in events):
            raise ValueError("sse= events are str, each the text of one event ('data: {...}')")
        for name, seconds in (("delay", delay), ("interval", interval)):
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
                raise ValueError(f"{name} must be a number of seconds, got {seconds!r}")
        self._native.push(status, pairs, raw, events, delay, fault, pieces, interval)

    def push_text(
        self,
        text: str = "Hello",
        wire: str = "openai",
        *,
        model: str | None = None,
        headers: Mapping[str, str] | None = None,
        delay: float = 0.0,
    ) -> None:
        """Scripts a realistic successful answer of ``text`` in a wire format:
        ``"openai"`` (also the OpenAI-compatible family and Azure),
        ``"anthropic"``, ``"gemini"`` or ``"ollama"``."""
        self.push(200, headers=headers, json=_text_body(wire, text, model), delay=delay)

    def push_embeddings(
        self,
        vectors: Sequence[Sequence[float]],
        wire: str = "openai",
        *,
        model: str | None = None,
        headers: Mapping[str, str] | None = None,
        delay: float = 0.0,
    ) -> None:
        """Scripts a successful embeddings answer (one vector per text) in a
        wire format: ``"openai"``, ``"gemini"`` or ``"ollama"``."""
        body = _embeddings_body(wire, vectors, model)
        self.push(200, headers=headers, json=body, delay=delay)

    def push_image(
        self,
        data: bytes | Sequence[bytes] = TINY_PNG,
        wire: str = "openai",
        *,
        url: str | None = None,
        revised_prompt: str | None = None,
        headers: Mapping[str, str] | None = None,
        delay: float = 0.0,
    ) -> None:
        """Scripts a successful image answer in a wire's shape: ``"openai"``
        (also Azure's and the compatible family's): each image of ``data``
        (one or a list) as ``b64_json``, or, with ``url=``, one image as that
        URL, with a GPT image model's token usage; ``"gemini"``: a
        ``generateContent`` answer with each image as an ``inlineData`` part
        (after a text part of ``revised_prompt``, when given)."""
        images = [data] if isinstance(data, (bytes, bytearray)) else list(data)
        if wire == "gemini":
            if url is not None:
                raise ValueError("Gemini answers with the image itself, never a URL")
            parts: list[dict[str, Any]] = [{"text": revised_prompt}] if revised_prompt else []
            parts += [
                {"inlineData": {"mimeType": "image/png", "data": base64.b64encode(i).decode()}}
                for i in map(bytes, images)
            ]
            self.push(200, headers=headers, json=_gemini_answer(parts, 1290), delay=delay)
            return
        if wire != "openai":
            raise ValueError(f"push_image speaks the 'openai' and 'gemini' wires, not {wire!r}")
        if url is not None:
            items: list[dict[str, Any]] = [{"url": url}]
        else:
            items = [{"b64_json": base64.b64encode(bytes(i)).decode()} for i in images]
        if revised_prompt is not None:
            for item in items:
                item["revised_prompt"] = revised_prompt
        body = {
            "created": 1713833628,
            "data": items,
            "usage": {
                "input_tokens": 50,
                "output_tokens": 4160 * len(items),
                "total_tokens": 50 + 4160 * len(items),
                "input_tokens_details": {"text_tokens": 50, "image_tokens": 0},
            },
        }
        self.push(200, headers=headers, json=body, delay=delay)

    def push_audio(
        self,
        data: bytes | None = None,
        wire: str = "openai",
        *,
        content_type: str = "audio/mpeg",
        headers: Mapping[str, str] | None = None,
        delay: float = 0.0,
    ) -> None:
        """Scripts a successful speech answer as a wire sends it:
        ``"openai"``, the raw audio bytes (default ``SOME_MP3``), ``audio/mpeg``
        unless ``content_type`` says otherwise; ``"gemini"``, a
        ``generateContent`` answer whose ``inlineData`` part holds ``data`` as
        headerless 16-bit PCM at 24 kHz (default ``SOME_PCM``)."""
        if wire == "gemini":
            mime = "audio/L16;codec=pcm;rate=24000"
            packed = base64.b64encode(SOME_PCM if data is None else bytes(data)).decode()
            parts = [{"inlineData": {"mimeType": mime, "data": packed}}]
            body = _gemini_answer(parts, 120, model="gemini-2.5-flash-preview-tts")
            self.push(200, headers=headers, json=body, delay=delay)
            return
        if wire != "openai":
            raise ValueError(f"push_audio speaks the 'openai' and 'gemini' wires, not {wire!r}")
        audio = SOME_MP3 if data is None else bytes(data)
        self.push(200, headers=headers, body=audio, content_type=content_type, delay=delay)

    def push_transcription(
        self,
        text: str = "Hello there.",
        wire: str = "openai",
        *,
        response_format: str = "json",
        language: str | None = None,
        duration: float | None = None,
        segments: Sequence[tuple[float, float, str]] = (),
        headers: Mapping[str, str] | None = None,
        delay: float = 0.0,
    ) -> None:
        """Scripts a successful transcription in OpenAI's shape: ``json``
        (the text and its duration as usage), ``verbose_json`` (with
        ``language``, ``duration`` and ``segments`` of ``(start, end,
        text)``), or a plain-text body for ``text``, ``srt`` and ``vtt``; or,
        with ``wire="gemini"``, a ``generateContent`` answer of the text (Gemini
        reports no language, duration or segments)."""
        if wire == "gemini":
            if response_format not in ("json", "text") or language or duration or segments:
                raise ValueError("Gemini's transcript is its answer's text, and nothing else")
            words = max(1, len(text.split()))
            answer = _gemini_answer([{"text": text}], words, model="gemini-2.5-flash")
            self.push(200, headers=headers, json=answer, delay=delay)
            return
        if wire != "openai":
            raise ValueError(
                f"push_transcription speaks the 'openai' and 'gemini' wires, not {wire!r}"
            )
        if response_format in ("text", "srt", "vtt"):
            self.push(200, headers=headers, body=text.encode(), content_type="text/plain")
            return
        body: dict[str, Any] = {"text": text}
        if response_format == "verbose_json":
            body.update(
                task="transcribe",
                language=language,
                duration=duration,
                segments=[
                    {"id": i, "start": start, "end": end, "text": piece}
                    for i, (start, end, piece) in enumerate(segments)
                ],
            )
        elif duration is not None:
            body["usage"] = {"type": "duration", "seconds": duration}
        self.push(200, headers=headers, json=body, delay=delay)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in order."""
        return [
            RecordedRequest(method, path, dict(headers), bytes(body), tuple(headers))
            for method, path, headers, body in self._native.requests()
        ]

    @property
    def max_in_flight(self) -> int:
        """The most requests it was answering at once: from a request's
        arrival until its response was all sent (a stream's last event) or
        its client went away."""
        return int(self._native.max_in_flight)

    @property
    def left_early(self) -> int:
        """How many requests' clients closed their connection while the
        answer was delayed (``delay=``), before any of it was sent: a call
        cancelled, or a hedge's loser."""
        return int(self._native.left_early)

    @property
    def pending(self) -> int:
        """Scripted responses not served yet."""
        return self._native.pending

    def assert_all_used(self) -> None:
        """Asserts every scripted response was served.

        Raises ``AssertionError`` naming how many are left and their statuses,
        e.g. ``2 scripted responses were never requested: [429, 200]``. The
        ``mock_server`` fixture calls it at teardown; opt a test out with
        ``@pytest.mark.mock_server(assert_all_used=False)``.
        """
        __tracebackhide__ = True
        left = self._native.pending_statuses()
        if left:
            were = "response was" if len(left) == 1 else "responses were"
            raise AssertionError(f"{len(left)} scripted {were} never requested: {left}")

    def close(self) -> None:
        """Stops the server and ends every connection, hanging ones too."""
        self._native.close()

    def __enter__(self) -> MockServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MockServer(url={self.url!r}, pending={self.pending})"
