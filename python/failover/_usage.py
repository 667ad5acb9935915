"""``Usage``: token counts, one meaning on every wire. Its own module, so that
results and exceptions (``StreamInterrupted.usage``) both use it without
importing each other."""

from __future__ import annotations

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
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    reasoning_tokens: int | None

    def __init__(
        self,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        cache_read_tokens: int | None = None,
        cache_write_tokens: int | None = None,
        reasoning_tokens: int | None = None,
    ) -> None:
        # Built for every response: set field by field (_set), which costs a
        # third of Record._init's keyword form.
        _set(self, "input_tokens", input_tokens)
        _set(self, "output_tokens", output_tokens)
        _set(self, "cache_read_tokens", cache_read_tokens)
        _set(self, "cache_write_tokens", cache_write_tokens)
        _set(self, "reasoning_tokens", reasoning_tokens)
