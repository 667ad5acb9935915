"""``Hedge``: hedged requests, the option (checked when given) and its
native form (what a learned ``after`` has learned lives there)."""

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
    most one hedge a call. ``after="p95"`` (any percentile from ``"p50"`` to
    ``"p99"``) learns it per provider, model and call kind from the times its
    last 200 successful attempts took to deliver, within 0.1 s and 60 s; a
    provider with fewer than 20 of them is not hedged yet.

    ``max_extra`` bounds the extra requests, as the retry budget bounds
    retries: at most ``max_extra`` of the client's calls of the last minute,
    plus one hedge a minute (none with 0). The budget is the client's state:
    with ``RedisState``, the fleet's. ``after`` is real time, also under a
    ``FakeSleeper`` (it measures a provider's latency; no virtual time
    passes during a request).
    """

    __slots__ = ("after", "max_extra", "_native_hedge")
    after: float | str
    max_extra: float
    if TYPE_CHECKING:  # not an annotation get_type_hints() reads: the type is private
        _native_hedge: NativeHedge

    def __init__(self, after: float | str = 2.0, max_extra: float = 0.05) -> None:
        quantile = None
        if isinstance(after, str):
            digits = after[1:] if after[:1] == "p" else ""
            if not (digits.isdigit() and len(digits) == 2 and 50 <= int(digits) <= 99):
                raise ConfigurationError(
                    f"Hedge(after=) is seconds, or a percentile of each provider's recent "
                    f"times to deliver from 'p50' to 'p99' (e.g. 'p95'), got {after!r}"
                )
            quantile = int(digits) / 100
        elif (
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
        seconds = 0.0 if quantile is not None else float(after)
        self._init(
            after=after if quantile is not None else float(after),
            max_extra=float(max_extra),
            _native_hedge=NativeHedge(after=seconds, max_extra=float(max_extra), quantile=quantile),
        )

    def _fields(self) -> tuple[float | str, float]:
        return (self.after, self.max_extra)

    def __reduce__(self) -> tuple[object, ...]:
        return (Hedge, (self.after, self.max_extra))

    def __repr__(self) -> str:
        return f"Hedge(after={self.after!r}, max_extra={self.max_extra!r})"
