"""What a call returns: Response, Usage, Attempt."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Usage:
    """Token counts; each is ``None`` where the provider did not report it."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None


@dataclass(frozen=True)
class Attempt:
    """One HTTP attempt of a call (or one provider skipped, with the reason)."""

    provider: str
    status: int | None
    kind: str | None
    """The error kind (``"rate_limited"``, ...); ``None`` for the success."""
    waited: float
    """Seconds slept before this attempt."""
    duration: float
    """Seconds the attempt took."""
    skipped: str | None = None


def _attempts(raw: Any) -> tuple[Attempt, ...]:
    return tuple(Attempt(*a) for a in raw)


class Response:
    """The answer of a call, with where it came from and what it took."""

    __slots__ = (
        "_raw_body",
        "_raw_json",
        "attempts",
        "call_id",
        "finish_reason",
        "model",
        "provider",
        "request_id",
        "text",
        "usage",
    )

    text: str
    provider: str
    """The configured name of the provider that answered."""
    model: str | None
    """The model the provider reports."""
    finish_reason: str | None
    usage: Usage
    attempts: tuple[Attempt, ...]
    request_id: str | None
    call_id: str

    def __init__(self, native: tuple[Any, ...]) -> None:
        (
            self.text,
            self.provider,
            self.model,
            self.finish_reason,
            usage,
            attempts,
            self.request_id,
            self._raw_body,
            self.call_id,
        ) = native
        self.usage = Usage(*usage)
        self.attempts = _attempts(attempts)
        self._raw_json: Any = None

    @property
    def raw(self) -> Any:
        """The provider's response body, parsed (on first access)."""
        if self._raw_json is None:
            self._raw_json = json.loads(self._raw_body)
        return self._raw_json

    def __repr__(self) -> str:
        text = self.text if len(self.text) <= 60 else self.text[:57] + "..."
        return (
            f"Response(provider={self.provider!r}, model={self.model!r}, text={text!r}, "
            f"finish_reason={self.finish_reason!r}, attempts={len(self.attempts)})"
        )
