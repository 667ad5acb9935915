"""``ProviderHealth`` and ``Headroom``: what ``Client.health()`` says of each
provider (its cooldown and why, its failures in a row, the rate-limit
headroom it last reported, its probe)."""

from __future__ import annotations

from ._record import Record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see _typing.py)
if TYPE_CHECKING:
    import typing
else:
    from . import _typing as typing


class Headroom(Record):
    """The rate-limit headroom a provider's last successful response
    reported (OpenAI's ``x-ratelimit-*``, Anthropic's
    ``anthropic-ratelimit-*`` headers): the requests and tokens left, when
    each limit resets and when it was seen (Unix seconds of the client's
    clock). A figure the response did not carry is ``None``."""

    __slots__ = ("requests", "tokens", "requests_reset", "tokens_reset", "seen")
    requests: int | None
    tokens: int | None
    requests_reset: float | None
    tokens_reset: float | None
    seen: float

    def __init__(
        self,
        requests: int | None,
        tokens: int | None,
        requests_reset: float | None,
        tokens_reset: float | None,
        seen: float,
    ) -> None:
        self._init(
            requests=requests,
            tokens=tokens,
            requests_reset=requests_reset,
            tokens_reset=tokens_reset,
            seen=seen,
        )


class ProviderHealth(Record):
    """One provider as the client's state sees it (with ``RedisState``, as the
    fleet does).

    ``cooling`` says whether it is cooling down; ``until`` (Unix seconds of
    the client's clock) and ``seconds_left`` say until when, ``None`` when it
    is not. ``half_open`` means its cooldown has ended with no success since:
    the next call probes it, and ``probing`` says a call of this process is
    doing so now. ``reason`` (in words), ``kind``, ``status`` and
    ``retry_after`` describe what set the cooldown (running or half-open):
    the error kind, HTTP status and wait hint of the failure, or for a
    provider whose rate-limit headroom ran out on a success, ``kind=None``
    and a reason; all ``None`` when nothing did. ``failures_in_a_row``
    counts the times it was given up on since its last success;
    ``headroom`` is the ``Headroom`` its last success reported, or
    ``None``.
    """

    __slots__ = (
        "cooling",
        "until",
        "seconds_left",
        "half_open",
        "reason",
        "kind",
        "status",
        "retry_after",
        "failures_in_a_row",
        "headroom",
        "probing",
    )
    cooling: bool
    until: float | None
    seconds_left: float | None
    half_open: bool
    reason: str | None
    kind: str | None
    status: int | None
    retry_after: float | None
    failures_in_a_row: int
    headroom: Headroom | None
    probing: bool

    def __init__(
        self,
        *,
        cooling: bool = False,
        until: float | None = None,
        seconds_left: float | None = None,
        half_open: bool = False,
        reason: str | None = None,
        kind: str | None = None,
        status: int | None = None,
        retry_after: float | None = None,
        failures_in_a_row: int = 0,
        headroom: Headroom | None = None,
        probing: bool = False,
    ) -> None:
        self._init(
            cooling=cooling,
            until=until,
            seconds_left=seconds_left,
            half_open=half_open,
            reason=reason,
            kind=kind,
            status=status,
            retry_after=retry_after,
            failures_in_a_row=failures_in_a_row,
            headroom=headroom,
            probing=probing,
        )


def _health(raw: typing.Any) -> dict[str, ProviderHealth]:
    """``(key, _native.HealthData)`` pairs -> ``ProviderHealth`` by key."""
    out = {}
    for key, h in raw:
        seen = h.headroom
        headroom = None if seen is None else Headroom(seen[1], seen[2], seen[3], seen[4], seen[0])
        out[key] = ProviderHealth(
            cooling=h.cooling,
            until=h.until,
            seconds_left=h.seconds_left,
            half_open=h.half_open,
            reason=h.reason,
            kind=h.kind,
            status=h.status,
            retry_after=h.retry_after,
            failures_in_a_row=h.failures_in_a_row,
            headroom=headroom,
            probing=h.probing,
        )
    return out
