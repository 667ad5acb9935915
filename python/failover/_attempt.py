"""``Attempt``: one HTTP attempt of a call, or one provider skipped. Its own
module, so that exceptions (which carry attempts) and results (which carry
them too) both import it without importing each other."""

from __future__ import annotations

from ._record import Record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see _typing.py)
if TYPE_CHECKING:
    import typing
else:
    from . import _typing as typing

_set = object.__setattr__  # Records refuse setattr once built


class Attempt(Record):
    """One HTTP attempt of a call (or one provider skipped, with the reason).

    ``kind`` is the error kind (``"rate_limited"``, ...), ``None`` for the
    success; ``waited`` the seconds slept before it; ``duration`` the seconds
    it took.
    """

    __slots__ = ("provider", "status", "kind", "waited", "duration", "skipped")
    provider: str
    status: int | None
    kind: str | None
    waited: float
    duration: float
    skipped: str | None

    def __init__(
        self,
        provider: str,
        status: int | None,
        kind: str | None,
        waited: float,
        duration: float,
        skipped: str | None = None,
    ) -> None:
        # Built for every attempt of every call: see Usage.
        _set(self, "provider", provider)
        _set(self, "status", status)
        _set(self, "kind", kind)
        _set(self, "waited", waited)
        _set(self, "duration", duration)
        _set(self, "skipped", skipped)


def _attempts(raw: typing.Any) -> tuple[Attempt, ...]:
    """``_native.AttemptData`` objects -> ``Attempt`` values."""
    return tuple(
        Attempt(a.provider, a.status, a.kind, a.waited, a.duration, a.skipped) for a in raw
    )
