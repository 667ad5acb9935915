"""``failover.retry_after()``: the wait a response asks for, as the engine reads it."""

from __future__ import annotations

from . import _native

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see _typing.py)
if TYPE_CHECKING:
    import typing
    from collections.abc import Iterable, Mapping
else:
    from _collections_abc import Iterable, Mapping  # collections.abc's, loaded at startup

    from . import _typing as typing

#: Response headers: a mapping, or (name, value) pairs; names case-insensitive.
Headers = Mapping[str, str] | Iterable[tuple[str, str]]


def retry_after(
    headers: Headers, body: typing.Any = None, now: float | None = None
) -> float | None:
    """Seconds the response asks to wait, or ``None`` when it gives no usable hint.

    Reads ``retry-after-ms``, ``retry-after`` (seconds or an HTTP-date), Gemini's
    ``retryDelay`` in the body, OpenAI's and Anthropic's rate-limit reset headers,
    exactly as the engine does; ``x-should-retry: false`` gives ``None`` (the engine
    does not retry then, though the error's ``.retry_after`` still says the wait).

    ``headers``: a mapping or a list of pairs, names case-insensitive.
    ``body``: bytes, str or parsed JSON. ``now``: Unix seconds (default: now).
    """
    if isinstance(headers, Mapping):
        items: Iterable[typing.Any] = headers.items()
    elif isinstance(headers, Iterable) and not isinstance(headers, (str, bytes)):
        items = headers
    else:
        raise TypeError(
            "headers must be a mapping or a list of (name, value) pairs, "
            f"got {type(headers).__name__}"
        )
    # Raw ASGI and HTTP libraries hand headers over as bytes.
    pairs = []
    for item in items:
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise TypeError(f"headers must be (name, value) pairs, got {item!r}")
        pairs.append((_text(item[0]), _text(item[1])))
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

        try:
            text = json.dumps(body)
        except (TypeError, ValueError, RecursionError):
            return None  # not what a server could have sent: no hint
    try:
        return _native.retry_after(pairs, text, now)
    except UnicodeEncodeError:  # a lone surrogate: nothing a server could have sent
        return None


def _text(value: object) -> str:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("latin-1")
    if isinstance(value, (list, tuple)) and all(isinstance(v, (str, bytes)) for v in value):
        # A cassette's or a multi-dict's values: joined, as HTTP joins a
        # repeated header (one value reads as itself).
        return ", ".join(_text(v) for v in value)
    if isinstance(value, (list, tuple, dict, set)):
        raise TypeError(f"a header name or value is a str or bytes, got {value!r}")
    return str(value)
