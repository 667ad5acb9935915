"""Retry policies: the default, tunable one and exact presets of other clients.

Both classes are immutable values: a policy can be shared by clients and
threads, and is checked once, when it is made.
"""

from __future__ import annotations

from . import _native
from ._checks import count, number, seconds
from ._exceptions import ConfigurationError
from ._record import Record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see _typing.py)
if TYPE_CHECKING:
    import typing
    from collections.abc import Iterable
else:
    from _collections_abc import Iterable  # collections.abc's, loaded at startup

    from . import _typing as typing

#: The error kinds, as ``ProviderError.kind`` and ``Attempt.kind`` spell them
#: (the engine's list).
KINDS: tuple[str, ...] = _native.ERROR_KINDS

#: Only a request that is wrong in itself ends a call by default: a bad key or
#: a missing model belongs to one provider, and the next has its own.
DEFAULT_STOP_ON = frozenset(_native.DEFAULT_STOP_ON)

# Failover's own policy as the engine defines it (src/engine/policy/default.rs,
# RetryBudget::default): the signature defaults below are its numbers.
_DEFAULT = _native.NativePolicy.preset("default")
_BACKOFF = _DEFAULT.backoff  # (initial, multiplier, max, jitter, spread)
_budget = _DEFAULT.budget
assert _budget is not None  # the default policy has a budget
_BUDGET: tuple[float, float, float] = _budget  # (ratio, reserve, window)


def _stop_on(value: object) -> frozenset[str]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ConfigurationError(
            f"stop_on must be a set of error kinds such as {{'bad_request', 'auth'}}, got {value!r}"
        )
    kinds = []
    for kind in value:
        named = getattr(kind, "kind", None)
        if isinstance(kind, type) and isinstance(named, str):
            raise ConfigurationError(
                f"stop_on names kinds as strings, not exception classes: use "
                f"{named!r} for {kind.__name__}"
            )
        if kind not in KINDS:
            raise ConfigurationError(
                f"stop_on: unknown error kind {kind!r}; the kinds are {', '.join(KINDS)}"
            )
        kinds.append(kind)
    return frozenset(kinds)


class Backoff(Record):
    """Exponential backoff:
    ``min(initial * multiplier**n, max) * (1 - jitter * U) + spread * U``, U from [0, 1).

    ``jitter`` takes up to that fraction off each wait (failover's own, openai-python's);
    ``spread`` adds up to that many seconds (faraday-retry's ``interval_randomness *
    interval``: ``RetryPolicy.ruby_llm()`` has ``jitter=0.0, spread=0.05``)."""

    __slots__ = ("initial", "multiplier", "max", "jitter", "spread")
    initial: float
    multiplier: float
    max: float
    jitter: float
    spread: float

    def __init__(
        self,
        initial: float = _BACKOFF[0],
        multiplier: float = _BACKOFF[1],
        max: float = _BACKOFF[2],
        jitter: float = _BACKOFF[3],
        spread: float = _BACKOFF[4],
    ) -> None:
        self._init(
            initial=seconds("initial", initial),
            multiplier=number("multiplier", multiplier, low=1.0, high=100.0),
            max=seconds("max", max),
            jitter=number("jitter", jitter, low=0.0, high=1.0),
            spread=seconds("spread", spread),
        )

    @classmethod
    def _engine(cls, numbers: tuple[float, float, float, float, float]) -> Backoff:
        """A preset's backoff as the engine holds it: ``max`` is ``inf`` where
        nothing bounds it (``RetryPolicy.ruby_llm()``), which ``Backoff()``
        refuses."""
        initial, multiplier, max, jitter, spread = numbers
        backoff = cls.__new__(cls)
        backoff._init(initial=initial, multiplier=multiplier, max=max, jitter=jitter, spread=spread)
        return backoff

    def __reduce__(self) -> tuple[typing.Any, ...]:
        if self.max == float("inf"):
            numbers = (self.initial, self.multiplier, self.max, self.jitter, self.spread)
            return (Backoff._engine, (numbers,))
        return super().__reduce__()


class RetryBudget(Record):
    """How much retrying may add to a provider's traffic (Finagle's retry budget).

    Same-provider retries in the last ``window`` seconds may be at most
    ``ratio`` of the calls (first attempts) to that provider in it, plus a
    reserve of ``min_retries_per_second * window`` retries. A spent budget
    means no retry: the call fails over (or raises), and ``.attempts``
    records the refused retry. Kept per provider, in the client.
    """

    __slots__ = ("ratio", "min_retries_per_second", "window")
    ratio: float
    min_retries_per_second: float
    window: float

    def __init__(
        self,
        ratio: float = _BUDGET[0],
        min_retries_per_second: float = _BUDGET[1],
        window: float = _BUDGET[2],
    ) -> None:
        self._init(
            ratio=number("ratio", ratio, low=0.0, high=1000.0),
            min_retries_per_second=number(
                "min_retries_per_second", min_retries_per_second, low=0.0, high=1e9
            ),
            window=seconds("window", window, positive=True),
        )


class RetryPolicy(Record):
    """When to wait and retry the same provider, and when to fail over.

    "Last" means no other provider remains to fail over to. A server-hinted
    wait (Retry-After and its cousins) up to the cap is slept exactly; a
    longer one fails over at once. See the docs' policy page (docs/policy.md).

    A provider given up on cools down in its client: after a failure with no
    usable hint for 5 s, doubling while it keeps failing, up to
    ``max_cooldown`` seconds (a recovered provider comes back soon); for the
    wait it asked for (a hint, a rate-limit reset) up to
    ``max_hinted_cooldown``, past which it is tried again. Presets cool the
    same way, with these defaults: cooldowns are the client's memory, not
    part of the client a preset reproduces.
    """

    __slots__ = (
        "max_retries",
        "max_retries_last",
        "max_retry_after",
        "max_retry_after_last",
        "backoff",
        "stop_on",
        "budget",
        "max_cooldown",
        "max_hinted_cooldown",
        "_preset",
        "_max_interval",
        "_native_policy",
    )
    max_retries: int
    max_retries_last: int
    max_retry_after: float
    max_retry_after_last: float
    backoff: Backoff
    stop_on: frozenset[str]
    """The error kinds that end a call at once: no retry, no failover."""
    budget: RetryBudget | None
    """The retry budget; ``None``: retries are limited only per call."""
    max_cooldown: float
    """The longest cooldown after failures with no usable hint, in seconds."""
    max_hinted_cooldown: float
    """The longest cooldown for a wait the provider asked for, in seconds."""
    if TYPE_CHECKING:  # declared for mypy only: the public fields are what type hints list
        _preset: str
        _max_interval: float | None
        _native_policy: _native.NativePolicy

    def __init__(
        self,
        max_retries: int = _DEFAULT.max_retries,
        max_retries_last: int = _DEFAULT.max_retries_last,
        max_retry_after: float = _DEFAULT.max_retry_after,
        max_retry_after_last: float = _DEFAULT.max_retry_after_last,
        backoff: Backoff | None = None,
        stop_on: Iterable[str] = DEFAULT_STOP_ON,
        budget: RetryBudget | None = RetryBudget(),  # noqa: B008 (an immutable value)
        max_cooldown: float = _DEFAULT.max_cooldown,
        max_hinted_cooldown: float = _DEFAULT.max_hinted_cooldown,
    ) -> None:
        if backoff is not None and not isinstance(backoff, Backoff):
            raise ConfigurationError(f"backoff must be a Backoff, got {backoff!r}")
        if budget is not None and not isinstance(budget, RetryBudget):
            raise ConfigurationError(f"budget must be a RetryBudget or None, got {budget!r}")
        self._init(
            max_retries=count("max_retries", max_retries),
            max_retries_last=count("max_retries_last", max_retries_last),
            max_retry_after=seconds("max_retry_after", max_retry_after),
            max_retry_after_last=seconds("max_retry_after_last", max_retry_after_last),
            backoff=backoff if backoff is not None else Backoff(),
            stop_on=_stop_on(stop_on),
            budget=budget,
            max_cooldown=seconds("max_cooldown", max_cooldown),
            max_hinted_cooldown=seconds("max_hinted_cooldown", max_hinted_cooldown),
        )
        b = self.backoff
        # What the engine receives, checked and built once: policies are
        # reused by every call.
        native = _native.NativePolicy(
            max_retries=self.max_retries,
            max_retries_last=self.max_retries_last,
            max_retry_after=self.max_retry_after,
            max_retry_after_last=self.max_retry_after_last,
            backoff_initial=b.initial,
            backoff_multiplier=b.multiplier,
            backoff_max=b.max,
            backoff_jitter=b.jitter,
            backoff_spread=b.spread,
            stop_on=sorted(self.stop_on),
            budget=None
            if self.budget is None
            else (self.budget.ratio, self.budget.min_retries_per_second, self.budget.window),
            max_cooldown=self.max_cooldown,
            max_hinted_cooldown=self.max_hinted_cooldown,
        )
        self._init(
            _preset="default",
            _max_interval=None,
            _native_policy=native,
            stop_on=frozenset(native.stop_on),
        )

    @classmethod
    def _make_preset(cls, name: str, max_interval: float | None = None) -> RetryPolicy:
        """A preset, showing the numbers the engine decides with, read from it
        (``src/engine/policy/``): presets are exact reproductions, not
        tunable. A bound nothing sets is ``inf`` (``ruby_llm()``'s waits)."""
        native = _native.NativePolicy.preset(name, max_interval)
        budget = native.budget
        policy = cls.__new__(cls)
        policy._init(
            max_retries=native.max_retries,
            max_retries_last=native.max_retries_last,
            max_retry_after=native.max_retry_after,
            max_retry_after_last=native.max_retry_after_last,
            backoff=Backoff._engine(native.backoff),
            stop_on=frozenset(native.stop_on),
            budget=None if budget is None else RetryBudget(*budget),
            max_cooldown=native.max_cooldown,
            max_hinted_cooldown=native.max_hinted_cooldown,
            _preset=name,
            _max_interval=max_interval,
            _native_policy=native,
        )
        return policy

    @classmethod
    def laravel(cls) -> RetryPolicy:
        """laravel/ai 1.2.1 ``withErrorHandling``: two attempts per provider;
        retries only a 429 or overloaded status whose ``Retry-After`` is a
        plain integer of at most 10 seconds, slept exactly. Any other hint
        (``1.5``, an HTTP-date, even a short one) or none fails over without
        waiting: laravel reads ``Retry-After`` as an integer only. It has no
        backoff (``backoff`` is all zeros)."""
        return cls._make_preset("laravel")

    @classmethod
    def ruby_llm(cls, max_interval: float | None = None) -> RetryPolicy:
        """ruby_llm 1.16 over faraday-retry 2.4: up to 3 retries, backoff
        ``min(0.1 * 2**n, max_interval) + U * 0.05`` (``backoff`` says so:
        ``jitter=0.0, spread=0.05``), the larger of the
        ``Retry-After``/``RateLimit-Reset`` wait and the backoff. ``None`` is
        faraday's unbounded default; ``30`` is ruby_llm's ``retry_max_interval``."""
        if max_interval is not None:
            max_interval = seconds("max_interval", max_interval)
        return cls._make_preset("ruby_llm", max_interval)

    @classmethod
    def openai(cls) -> RetryPolicy:
        """openai-python: 2 retries on 408, 409, 429, 5xx, timeouts and
        connection errors; server waits used when ``0 < v <= 120``."""
        return cls._make_preset("openai")

    def _native(self) -> _native.NativePolicy:
        return self._native_policy

    def worst_case(self, timeout: float, providers: int = 1) -> float:
        """The longest a non-streaming call can take under this policy with no
        deadline, in seconds: every attempt timing out after ``timeout``, every
        retry's wait the longest allowed, across ``providers`` providers. A
        ``deadline=`` bounds it whatever this says; ``math.inf`` when a wait is
        unbounded (``RetryPolicy.ruby_llm()``). Cooldowns do not count: they
        pass a provider over, they never make a call wait. The waits are the
        engine's own account of what this policy can sleep."""
        timeout = seconds("timeout", timeout)
        providers = count("providers", providers, minimum=1)
        total = 0.0
        for is_last, times in ((False, providers - 1), (True, 1)):
            if times:
                waits = self._native_policy.longest_waits(is_last)
                total += times * ((len(waits) + 1) * timeout + sum(waits))
        return total

    def __repr__(self) -> str:
        if self._preset == "ruby_llm":
            return f"RetryPolicy.ruby_llm(max_interval={self._max_interval!r})"
        if self._preset != "default":
            return f"RetryPolicy.{self._preset}()"
        return (
            f"RetryPolicy(max_retries={self.max_retries}, "
            f"max_retries_last={self.max_retries_last}, "
            f"max_retry_after={self.max_retry_after}, "
            f"max_retry_after_last={self.max_retry_after_last}, backoff={self.backoff!r}, "
            f"stop_on={_set_repr(self.stop_on)}, budget={self.budget!r}, "
            f"max_cooldown={self.max_cooldown}, max_hinted_cooldown={self.max_hinted_cooldown})"
        )

    def _args(self) -> tuple[typing.Any, ...]:
        """What ``RetryPolicy(...)`` takes, in its order."""
        return (
            self.max_retries,
            self.max_retries_last,
            self.max_retry_after,
            self.max_retry_after_last,
            self.backoff,
            self.stop_on,
            self.budget,
            self.max_cooldown,
            self.max_hinted_cooldown,
        )

    def _key(self) -> tuple[typing.Any, ...]:
        return (self._preset, self._max_interval, *self._args())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RetryPolicy) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __reduce__(self) -> tuple[typing.Any, ...]:
        if self._preset != "default":
            return (RetryPolicy._make_preset, (self._preset, self._max_interval))
        return (RetryPolicy, self._args())


def _set_repr(kinds: frozenset[str]) -> str:
    # Sorted, so a repr is the same in every process.
    return "{" + ", ".join(map(repr, sorted(kinds))) + "}" if kinds else "set()"
