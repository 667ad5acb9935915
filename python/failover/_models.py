"""What a call returns: Response, Usage, Attempt."""

from __future__ import annotations

from typing import Any, Optional

from ._record import Record

_set = object.__setattr__  # Records refuse setattr once built


class Usage(Record):
    """Token counts; each is ``None`` where the provider did not report it."""

    __slots__ = (
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "reasoning_tokens",
    )
    input_tokens: Optional[int]
    output_tokens: Optional[int]
    cache_read_tokens: Optional[int]
    cache_write_tokens: Optional[int]
    reasoning_tokens: Optional[int]

    def __init__(
        self,
        input_tokens: Optional[int] = None,
        output_tokens: Optional[int] = None,
        cache_read_tokens: Optional[int] = None,
        cache_write_tokens: Optional[int] = None,
        reasoning_tokens: Optional[int] = None,
    ) -> None:
        # Built for every response: set field by field (_set), which costs a
        # third of Record._init's keyword form.
        _set(self, "input_tokens", input_tokens)
        _set(self, "output_tokens", output_tokens)
        _set(self, "cache_read_tokens", cache_read_tokens)
        _set(self, "cache_write_tokens", cache_write_tokens)
        _set(self, "reasoning_tokens", reasoning_tokens)


class Attempt(Record):
    """One HTTP attempt of a call (or one provider skipped, with the reason).

    ``kind`` is the error kind (``"rate_limited"``, ...), ``None`` for the
    success; ``waited`` the seconds slept before it; ``duration`` the seconds
    it took.
    """

    __slots__ = ("provider", "status", "kind", "waited", "duration", "skipped")
    provider: str
    status: Optional[int]
    kind: Optional[str]
    waited: float
    duration: float
    skipped: Optional[str]

    def __init__(
        self,
        provider: str,
        status: Optional[int],
        kind: Optional[str],
        waited: float,
        duration: float,
        skipped: Optional[str] = None,
    ) -> None:
        # Built for every attempt of every call: see Usage.
        _set(self, "provider", provider)
        _set(self, "status", status)
        _set(self, "kind", kind)
        _set(self, "waited", waited)
        _set(self, "duration", duration)
        _set(self, "skipped", skipped)


def _attempts(raw: Any) -> tuple[Attempt, ...]:
    """``_native.AttemptData`` objects -> ``Attempt`` values."""
    return tuple(
        Attempt(a.provider, a.status, a.kind, a.waited, a.duration, a.skipped) for a in raw
    )


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
    model: Optional[str]
    """The model the provider reports."""
    finish_reason: Optional[str]
    usage: Usage
    attempts: tuple[Attempt, ...]
    request_id: Optional[str]
    call_id: str

    def __init__(self, data: Any) -> None:
        """Built from the engine's ``_native.ResponseData``."""
        self.text = data.text
        self.provider = data.provider
        self.model = data.model
        self.finish_reason = data.finish_reason
        self.usage = Usage(
            data.input_tokens,
            data.output_tokens,
            data.cache_read_tokens,
            data.cache_write_tokens,
            data.reasoning_tokens,
        )
        self.attempts = _attempts(data.attempts)
        self.request_id = data.request_id
        self._raw_body = data.raw
        self.call_id = data.call_id
        self._raw_json: Any = None

    @property
    def raw(self) -> Any:
        """The provider's response body, parsed (on first access)."""
        if self._raw_json is None:
            import json

            self._raw_json = json.loads(self._raw_body)
        return self._raw_json

    def __repr__(self) -> str:
        text = self.text if len(self.text) <= 60 else self.text[:57] + "..."
        return (
            f"Response(provider={self.provider!r}, model={self.model!r}, text={text!r}, "
            f"finish_reason={self.finish_reason!r}, attempts={len(self.attempts)})"
        )
