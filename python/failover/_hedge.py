"""``Hedge``: hedged requests, the option (checked when given) and its
native form, whose budget every call given this ``Hedge`` shares."""

from __future__ import annotations

from ._exceptions import ConfigurationError
from ._native import NativeHedge
from ._record import Record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing


class Hedge(Record):
    """Hedged requests ("The Tail at Scale"): when an attempt has not
    delivered for ``after`` seconds (a whole answer; a stream's first
    content), the same request goes to the next provider the chain would
    fail over to (not cooling, with room under its limits), and the first to
    deliver wins; the other is cancelled at once, its connection closed. At
    most one hedge a call.

    ``max_extra`` bounds the extra requests: a token bucket that each call
    fills by ``max_extra`` and each hedge empties by one, so over ``n``
    calls at most ``1 + max_extra * n`` hedges are sent (none with 0). The
    budget is this object's: calls and clients given the same ``Hedge``
    share it. ``after`` is real time, also under a ``FakeSleeper`` (it
    measures a provider's latency; no virtual time passes during a request).
    """

    __slots__ = ("after", "max_extra", "_native_hedge")
    after: float
    max_extra: float
    if TYPE_CHECKING:  # not an annotation get_type_hints() reads: the type is private
        _native_hedge: NativeHedge

    def __init__(self, after: float = 2.0, max_extra: float = 0.05) -> None:
        if isinstance(after, str):
            raise ConfigurationError(
                f"Hedge(after=) is seconds (a number); {after!r} (a learned latency) is not "
                "built yet"
            )
        if (
            isinstance(after, bool)
            or not isinstance(after, (int, float))
            or not 0 < after <= 3600  # (NaN compares false, infinity is above)
        ):
            raise ConfigurationError(
                f"Hedge(after=) is seconds above 0 and at most 3600, got {after!r}"
            )
        if (
            isinstance(max_extra, bool)
            or not isinstance(max_extra, (int, float))
            or not 0 <= max_extra <= 1
        ):
            raise ConfigurationError(
                f"Hedge(max_extra=) is a fraction of calls from 0 to 1, got {max_extra!r}"
            )
        self._init(
            after=float(after),
            max_extra=float(max_extra),
            _native_hedge=NativeHedge(after=float(after), max_extra=float(max_extra)),
        )

    def _fields(self) -> tuple[float, float]:
        return (self.after, self.max_extra)

    def __reduce__(self) -> tuple[object, ...]:
        return (Hedge, (self.after, self.max_extra))

    def __repr__(self) -> str:
        return f"Hedge(after={self.after!r}, max_extra={self.max_extra!r})"
