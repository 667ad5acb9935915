"""``failover.retry_after()``: the wait a response asks for, as the engine reads it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from . import _native

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (5 ms)

if TYPE_CHECKING:
    from typing import Any, Union

    Headers = Union[Mapping[str, str], Iterable[tuple[str, str]]]


def retry_after(headers: Headers, body: Any = None, now: float | None = None) -> float | None:
    """Seconds the response asks to wait, or ``None`` when it gives no usable hint.

    Reads ``retry-after-ms``, ``retry-after`` (seconds or an HTTP-date), Gemini's
    ``retryDelay`` in the body, OpenAI's and Anthropic's rate-limit reset headers,
    exactly as the engine does; ``x-should-retry: false`` gives ``None``.

    ``headers``: a mapping or a list of pairs, names case-insensitive.
    ``body``: bytes, str or parsed JSON. ``now``: Unix seconds (default: now).
    """
    items = headers.items() if isinstance(headers, Mapping) else headers
    # Raw ASGI and HTTP libraries hand headers over as bytes.
    pairs = [(_text(k), _text(v)) for k, v in items]
    if now is not None and (
        not isinstance(now, (int, float)) or isinstance(now, bool) or not 0 <= now < 1e11
    ):
        raise TypeError(f"now must be Unix seconds (a finite number >= 0), got {now!r}")
    text: str | None
    if body is None or isinstance(body, str):
        text = body
    elif isinstance(body, (bytes, bytearray)):
        text = bytes(body).decode("utf-8", "replace")
    else:
        import json

        text = json.dumps(body)
    return _native.retry_after(pairs, text, now)


def _text(value: object) -> str:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("latin-1")
    return str(value)
