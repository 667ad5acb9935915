"""Client-side limits: ``Limit``, checked when given, and a client's limits
as the core takes them (one bucket per limit given, and which buckets each
provider draws on for chat and for embeddings)."""

from __future__ import annotations

from ._checks import count, utf8_text
from ._exceptions import ConfigurationError
from ._record import Record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see _typing.py)
if TYPE_CHECKING:
    from collections.abc import Mapping

    from ._providers import Pool, Provider
else:
    from _collections_abc import Mapping  # collections.abc's, loaded at startup

#: The largest figure a limit takes: far above any provider's published
#: limits, and within what the core counts in.
_MAX_CALLS = 1_000_000_000
_MAX_TOKENS = 10**15


class Limit(Record):
    """What a client sends a provider, a pool or a quota at most:
    ``concurrency`` calls in flight at once (a stream holds its slot until it
    ends, is closed or is cancelled), ``rpm`` requests started in any rolling
    minute, ``tpm`` tokens in any rolling minute (a request is charged its
    input characters / 4 plus ``max_tokens`` when it is sent, then what the
    provider reports it used). ``None``: no bound of that kind.

    A provider without room is passed over for the next one in the chain with
    room; when none has it, the call waits for the first that will (through
    the sleeper, never past the deadline, and no longer than the policy waits
    for a ``Retry-After``)."""

    __slots__ = ("concurrency", "rpm", "tpm")
    concurrency: int | None
    rpm: int | None
    tpm: int | None

    def __init__(
        self,
        concurrency: int | None = None,
        rpm: int | None = None,
        tpm: int | None = None,
    ) -> None:
        if concurrency is None and rpm is None and tpm is None:
            raise ConfigurationError(
                "Limit needs at least one of concurrency=, rpm= or tpm= (a Limit() bounds nothing)"
            )

        def bound(name: str, value: int | None, maximum: int) -> int | None:
            if value is None:
                return None
            return count(f"Limit {name}", value, minimum=1, maximum=maximum)

        self._init(
            concurrency=bound("concurrency", concurrency, _MAX_CALLS),
            rpm=bound("rpm", rpm, _MAX_CALLS),
            tpm=bound("tpm", tpm, _MAX_TOKENS),
        )

    def __repr__(self) -> str:
        fields = (("concurrency", self.concurrency), ("rpm", self.rpm), ("tpm", self.tpm))
        given = [f"{name}={value!r}" for name, value in fields if value is not None]
        return f"Limit({', '.join(given)})"


def check_limit(owner: str, what: str, value: object) -> Limit | None:
    """``value`` as a provider's or a pool's ``limit=``-like option."""
    if value is not None and not isinstance(value, Limit):
        raise ConfigurationError(
            f"{owner} {what} must be a failover.Limit(...) or None, got {value!r}"
        )
    return value


def check_quota(owner: str, value: object) -> str | None:
    """``value`` as a provider's ``quota=``: the name of what it draws on."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(
            f"{owner} quota must name the quota it draws on (a non-empty str), got {value!r}"
        )
    # `|` and tabs separate the parts of the state's keys and records.
    if "|" in value or any(c < " " for c in value):
        raise ConfigurationError(
            f"{owner} quota {value!r}: a quota's name holds no '|' and no control character"
        )
    return utf8_text(f"{owner} quota", value)


def check_quotas(value: object) -> dict[str, Limit]:
    """``Client(quotas=)``: each quota's name and its limit."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f"quotas must be a dict of quota names to failover.Limit(...), got {value!r}"
        )
    quotas: dict[str, Limit] = {}
    for given, limit in value.items():
        name = check_quota("Client quotas:", given)
        if name is None:
            raise ConfigurationError("quotas names None: a quota's name is a non-empty str")
        if not isinstance(limit, Limit):
            raise ConfigurationError(
                f"quotas[{name!r}] must be a failover.Limit(...), got {limit!r}"
            )
        quotas[name] = limit
    return quotas


class ClientLimits:
    """A client's limits as the core takes them: ``buckets`` (name,
    concurrency, rpm, tpm) and, per provider, the indexes of those it draws
    on for chat calls and streams (``chat``), for embeddings (``embed``),
    and its quota's name.

    A bucket's name is what it is shared as with ``state=RedisState(...)``:
    a provider's is its name and model (``"gpt|gpt-4.1-mini"``,
    ``"gpt:embeddings|text-embedding-3-small"``), as its cooldowns are; a
    pool's ``"pool NAME"``, a quota's ``"quota NAME"``."""

    __slots__ = ("buckets", "chat", "embed", "own_chat", "own_embed", "quota")

    def __init__(
        self,
        providers: Mapping[str, Provider],
        pools: Mapping[str, Pool],
        quotas: Mapping[str, Limit],
    ) -> None:
        self.buckets: list[tuple[str, int | None, int | None, int | None]] = []
        self.chat: dict[str, list[int]] = {name: [] for name in providers}
        self.embed: dict[str, list[int]] = {name: [] for name in providers}
        self.own_chat: dict[str, int | None] = dict.fromkeys(providers)
        self.own_embed: dict[str, int | None] = dict.fromkeys(providers)
        self.quota: dict[str, str | None] = {
            name: provider._quota for name, provider in providers.items()
        }

        def bucket(name: str, limit: Limit) -> int:
            self.buckets.append((name, limit.concurrency, limit.rpm, limit.tpm))
            return len(self.buckets) - 1

        for name, provider in providers.items():
            if provider._limit is not None:
                own = bucket(f"{name}|{provider.model}", provider._limit)
                self.own_chat[name] = own
                self.chat[name].append(own)
            if provider._embedding_limit is not None:
                model = provider.embedding_model or provider.model
                own = bucket(f"{name}:embeddings|{model}", provider._embedding_limit)
                self.own_embed[name] = own
                self.embed[name].append(own)
        # A pool's and a quota's limits bound every call kind of their members.
        for pool in pools.values():
            if pool.limit is not None:
                index = bucket(f"pool {pool.name}", pool.limit)
                for member in pool.members:
                    self.chat[member].append(index)
                    self.embed[member].append(index)
        drawn = {quota for quota in self.quota.values() if quota is not None}
        for quota, limit in quotas.items():
            if quota not in drawn:
                known = sorted(drawn) or "none"
                raise ConfigurationError(
                    f"quotas names {quota!r}, which no provider draws on (Provider(quota=...) "
                    f"names: {known})"
                )
            index = bucket(f"quota {quota}", limit)
            for name, drawn_from in self.quota.items():
                if drawn_from == quota:
                    self.chat[name].append(index)
                    self.embed[name].append(index)
