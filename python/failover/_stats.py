"""``client.stats()``: what a client's calls did and cost since it was made,
counted once per finished call from its ``attempts``.

Every finished call passes through ``Tally.count`` once: a ``Response``, an
``Embeddings``, a stream that ended, broke or was closed, and every failed
call's exception. The update is a few additions under a lock; a snapshot
(``stats()``) copies the counters under the same lock.
"""

from __future__ import annotations

from _thread import allocate_lock  # threading's lock, without importing threading

from ._attempt import add_known, steps
from ._record import Record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see _typing.py)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from ._attempt import Attempt


class ProviderStats(Record):
    """What one provider (or, as ``Stats.total``, every provider) did.

    ``answered``: calls it answered. ``attempts``: HTTP attempts sent to it
    (a provider skipped is no attempt). ``failures``: its failed attempts by
    error kind (``{"rate_limited": 2}``). ``retries``: attempts at it after
    its first in the same call. ``failovers``: times a call left it for
    another provider. ``waited``: seconds slept before its attempts.
    ``hedged``: its attempts that lost a hedge's race, cancelled or failed
    (counted in ``attempts`` too).
    ``input_tokens``/``output_tokens``: the sum of what its attempts
    reported, ``None`` until one reported the figure. ``cost``: USD, the sum
    of its attempts' known costs, ``None`` until one had a cost (attempts
    without a price are left out: see ``Response.unpriced_attempts``).
    """

    __slots__ = (
        "answered",
        "attempts",
        "failures",
        "retries",
        "failovers",
        "waited",
        "hedged",
        "input_tokens",
        "output_tokens",
        "cost",
    )
    answered: int
    attempts: int
    failures: dict[str, int]
    retries: int
    failovers: int
    waited: float
    hedged: int
    input_tokens: int | None
    output_tokens: int | None
    cost: float | None

    def __init__(
        self,
        answered: int = 0,
        attempts: int = 0,
        failures: dict[str, int] | None = None,
        retries: int = 0,
        failovers: int = 0,
        waited: float = 0.0,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        cost: float | None = None,
        hedged: int = 0,
    ) -> None:
        self._init(
            answered=answered,
            attempts=attempts,
            failures={} if failures is None else dict(failures),
            retries=retries,
            failovers=failovers,
            waited=waited,
            hedged=hedged,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost=cost,
        )

    __hash__ = None  # type: ignore[assignment]  # failures is a dict


class Stats(Record):
    """A snapshot of ``client.stats()``: ``calls`` finished since the client
    was made (answered, failed, or streams closed before their end),
    ``providers`` by configured name (a pool's members by their own names),
    and ``total`` over all of them."""

    __slots__ = ("calls", "providers", "total")
    calls: int
    providers: dict[str, ProviderStats]
    total: ProviderStats

    def __init__(
        self, calls: int, providers: dict[str, ProviderStats], total: ProviderStats
    ) -> None:
        self._init(calls=calls, providers=dict(providers), total=total)

    __hash__ = None  # type: ignore[assignment]  # providers is a dict

    def __repr__(self) -> str:
        shown = ", ".join(f"{name!r}: {stats!r}" for name, stats in self.providers.items())
        return f"Stats(calls={self.calls}, total={self.total!r}, providers={{{shown}}})"


class _Counters:
    """One provider's running counts (mutable; read under the tally's lock)."""

    __slots__ = ProviderStats.__slots__

    def __init__(self) -> None:
        self.answered = 0
        self.attempts = 0
        self.failures: dict[str, int] = {}
        self.retries = 0
        self.failovers = 0
        self.waited = 0.0
        self.hedged = 0
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.cost: float | None = None

    def snapshot(self) -> ProviderStats:
        return ProviderStats(
            self.answered,
            self.attempts,
            self.failures,
            self.retries,
            self.failovers,
            self.waited,
            self.input_tokens,
            self.output_tokens,
            self.cost,
            self.hedged,
        )


class Tally:
    """A client's counters, shared by the clients ``with_options()`` makes
    from it; safe to update and read from any thread."""

    __slots__ = ("_calls", "_lock", "_providers")

    def __init__(self, names: Iterable[str]) -> None:
        self._lock = allocate_lock()
        self._calls = 0
        self._providers = {name: _Counters() for name in names}

    def count(self, attempts: tuple[Attempt, ...], answered: str | None) -> None:
        """One finished call: its attempts, and the provider that answered
        (``None``: it failed, or was closed before its end)."""
        with self._lock:
            self._calls += 1
            providers = self._providers
            for attempt, retried, left in steps(attempts):
                if left is not None:
                    providers[left.provider].failovers += 1
                if attempt is None:  # a failover to a provider then passed over
                    continue
                name = attempt.provider
                counters = providers.get(name)
                if counters is None:  # not configured (never expected): counted all the same
                    counters = providers[name] = _Counters()
                counters.attempts += 1
                if retried is not None:
                    counters.retries += 1
                kind = attempt.kind
                if kind is not None:
                    counters.failures[kind] = counters.failures.get(kind, 0) + 1
                counters.waited += attempt.waited
                if attempt.hedged:
                    counters.hedged += 1
                usage = attempt.usage
                if usage is not None:
                    counters.input_tokens = add_known(counters.input_tokens, usage.input_tokens)
                    counters.output_tokens = add_known(counters.output_tokens, usage.output_tokens)
                if attempt.cost is not None:
                    counters.cost = add_known(counters.cost, attempt.cost)
            if answered is not None:
                counters = providers.get(answered)
                if counters is None:
                    counters = providers[answered] = _Counters()
                counters.answered += 1

    def snapshot(self) -> Stats:
        with self._lock:
            calls = self._calls
            providers = {name: c.snapshot() for name, c in self._providers.items()}
        return Stats(calls, providers, _total(providers.values()))


def _total(providers: Iterable[ProviderStats]) -> ProviderStats:
    total = _Counters()
    for stats in providers:
        total.answered += stats.answered
        total.attempts += stats.attempts
        for kind, n in stats.failures.items():
            total.failures[kind] = total.failures.get(kind, 0) + n
        total.retries += stats.retries
        total.failovers += stats.failovers
        total.waited += stats.waited
        total.hedged += stats.hedged
        total.input_tokens = add_known(total.input_tokens, stats.input_tokens)
        total.output_tokens = add_known(total.output_tokens, stats.output_tokens)
        total.cost = add_known(total.cost, stats.cost)
    return total.snapshot()
