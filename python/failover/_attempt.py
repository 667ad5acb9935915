"""``Attempt``: one HTTP attempt of a call, or one provider skipped. Its own
module, so that exceptions (which carry attempts) and results (which carry
them too) both import it without importing each other."""

from __future__ import annotations

from ._record import Record
from ._usage import Usage

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see _typing.py)
if TYPE_CHECKING:
    import typing
    from collections.abc import Sequence
else:
    from . import _typing as typing

_set = object.__setattr__  # Records refuse setattr once built


class Attempt(Record):
    """One HTTP attempt of a call (or one provider skipped, with the reason).

    ``kind`` is the error kind (``"rate_limited"``, ...), ``None`` for the
    success; ``waited`` the seconds slept before it; ``duration`` the seconds
    it took; ``model`` the model the request was sent with. ``usage`` is what
    the provider reported for this attempt (``None`` when it reported
    nothing); ``billed`` whether the provider may charge for it (``True``: it
    generated; ``False``: it refused before generating, or was skipped;
    ``None``: it cannot be known, as after a timeout); ``cost`` its price in
    USD (``None`` without a price or usage); ``started`` when it was sent, in
    Unix seconds. ``hedged`` is ``True`` on an attempt that lost a hedge's
    race (``Client(hedge=)``): cancelled because the other request delivered
    first (no status, no kind, and ``billed`` ``None``: the provider may
    have generated, and may charge, before its connection closed), or failed
    while the other went on (its status and kind).
    """

    __slots__ = (
        "provider",
        "status",
        "kind",
        "waited",
        "duration",
        "skipped",
        "model",
        "usage",
        "billed",
        "cost",
        "started",
        "hedged",
    )
    provider: str
    status: int | None
    kind: str | None
    waited: float
    duration: float
    skipped: str | None
    model: str | None
    usage: Usage | None
    billed: bool | None
    cost: float | None
    started: float
    hedged: bool

    def __init__(
        self,
        provider: str,
        status: int | None,
        kind: str | None,
        waited: float,
        duration: float,
        skipped: str | None = None,
        model: str | None = None,
        usage: Usage | None = None,
        billed: bool | None = None,
        cost: float | None = None,
        started: float = 0.0,
        hedged: bool = False,
    ) -> None:
        # Built for every attempt of every call: see Usage.
        _set(self, "provider", provider)
        _set(self, "status", status)
        _set(self, "kind", kind)
        _set(self, "waited", waited)
        _set(self, "duration", duration)
        _set(self, "skipped", skipped)
        _set(self, "model", model)
        _set(self, "usage", usage)
        _set(self, "billed", billed)
        _set(self, "cost", cost)
        _set(self, "started", started)
        _set(self, "hedged", hedged)

    def _with_cost(self, cost: float | None) -> Attempt:
        return Attempt(
            self.provider,
            self.status,
            self.kind,
            self.waited,
            self.duration,
            self.skipped,
            self.model,
            self.usage,
            self.billed,
            cost,
            self.started,
            self.hedged,
        )


def _attempts(raw: typing.Any) -> tuple[Attempt, ...]:
    """``_native.AttemptData`` objects -> ``Attempt`` values."""
    return tuple(
        Attempt(
            a.provider,
            a.status,
            a.kind,
            a.waited,
            a.duration,
            a.skipped,
            a.model,
            None if (u := a.usage) is None else Usage(*u),
            a.billed,
            None,
            a.started,
            a.hedged,
        )
        for a in raw
    )


def steps(
    attempts: Sequence[Attempt],
) -> typing.Iterator[tuple[Attempt | None, Attempt | None, Attempt | None]]:
    """Each HTTP attempt (skips left out), with the attempt it retries (the
    last at its provider, whose failure it follows) and the one the call
    failed over from to reach it (the last before it at another provider).

    A hedge's loser ran beside the others: it is neither, and nothing fails
    over from it. When both of the race failed and the call moved on to the
    hedge's provider, as without a hedge: its next attempt is both a
    failover (from the first provider) and a retry (of the hedge); passed
    over there instead (the hedge's failure given up on), the move is a
    failover with no attempt (``None``), and the hedge is what the call
    leaves next."""
    last_at: dict[str, Attempt] = {}
    failed_hedges: dict[str, Attempt] = {}
    previous: Attempt | None = None
    for attempt in attempts:
        if attempt.skipped is not None:
            reached = failed_hedges.pop(attempt.provider, None)
            if reached is not None and previous is not None:
                yield None, None, previous
                previous = reached
            continue
        retried = last_at.get(attempt.provider)
        last_at[attempt.provider] = attempt
        if attempt.hedged:
            if attempt.kind is not None:
                failed_hedges[attempt.provider] = attempt
            yield attempt, None, None
            continue
        failed_hedges.pop(attempt.provider, None)
        left = previous if previous is not None and previous.provider != attempt.provider else None
        yield attempt, retried, left
        previous = attempt


_USAGE_FIELDS = Usage.__slots__


def add_known(total: typing.Any, value: typing.Any) -> typing.Any:
    """A sum where ``None`` is unknown: unknown until a first known value."""
    if value is None:
        return total
    return value if total is None else total + value


def total_usage(attempts: tuple[Attempt, ...]) -> Usage:
    """The usage of every attempt, summed field by field; a field no attempt
    reported stays ``None``."""
    sums: list[int | None] = [None] * len(_USAGE_FIELDS)
    for attempt in attempts:
        usage = attempt.usage
        if usage is None:
            continue
        for i, name in enumerate(_USAGE_FIELDS):
            sums[i] = add_known(sums[i], getattr(usage, name))
    return Usage(*sums)


def total_cost(attempts: tuple[Attempt, ...]) -> float | None:
    """The sum of the attempts' known costs; ``None`` when none is known."""
    costs = [a.cost for a in attempts if a.cost is not None]
    return sum(costs) if costs else None


def unpriced_attempts(attempts: tuple[Attempt, ...]) -> int:
    """How many attempts may have been billed (``billed`` True or None) but
    have no cost."""
    return sum(
        1 for a in attempts if a.skipped is None and a.billed is not False and a.cost is None
    )


def answering_cost(attempts: tuple[Attempt, ...]) -> float | None:
    """The cost of the attempt that answered (the last one sent that did not
    lose a hedge's race, which may be recorded after it)."""
    for attempt in reversed(attempts):
        if attempt.skipped is None and not attempt.hedged:
            return attempt.cost
    return None


class _Totals:
    """What a call's attempts used and cost, summed: a mixin of results and of
    ``FailoverError`` (a failed call's cost so far)."""

    __slots__ = ()
    attempts: tuple[Attempt, ...]

    @property
    def total_usage(self) -> Usage:
        """Every attempt's usage, summed field by field (``None`` where no
        attempt reported the field)."""
        return total_usage(self.attempts)

    @property
    def total_cost(self) -> float | None:
        """USD of every attempt whose cost is known, summed (``None`` when none is)."""
        return total_cost(self.attempts)

    @property
    def unpriced_attempts(self) -> int:
        """How many attempts may have been billed but have no cost: while it
        is not 0, ``total_cost`` is a floor, not the bill."""
        return unpriced_attempts(self.attempts)
