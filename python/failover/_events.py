"""Events a call reports, and the ``failover`` logger that mirrors them."""

from __future__ import annotations

from ._attempt import Attempt
from ._exceptions import FailoverError, ProviderError
from ._record import Record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see _typing.py)
if TYPE_CHECKING:
    import typing
    from collections.abc import Callable
else:
    from _collections_abc import Callable  # collections.abc's, loaded at startup

    from . import _typing as typing


class RetryScheduled(Record):
    """Sent before each sleep: ``provider`` is tried again after ``delay`` seconds.

    ``attempt`` is which attempt at this provider failed (1 = the first);
    ``reason`` says in words why the engine waits.
    """

    __slots__ = ("call_id", "provider", "attempt", "delay", "kind", "status", "reason")
    call_id: str
    provider: str
    attempt: int
    delay: float
    kind: str
    status: int | None
    reason: str

    def __init__(
        self,
        call_id: str,
        provider: str,
        attempt: int,
        delay: float,
        kind: str,
        status: int | None,
        reason: str = "",
    ) -> None:
        self._init(
            call_id=call_id,
            provider=provider,
            attempt=attempt,
            delay=delay,
            kind=kind,
            status=status,
            reason=reason,
        )


class FailedOver(Record):
    """Sent for each provider left behind (never for the final one);
    ``reason`` says in words why the engine left it."""

    __slots__ = ("call_id", "from_provider", "to_provider", "error", "reason")
    call_id: str
    from_provider: str
    to_provider: str
    error: ProviderError
    reason: str

    def __init__(
        self,
        call_id: str,
        from_provider: str,
        to_provider: str,
        error: ProviderError,
        reason: str = "",
    ) -> None:
        self._init(
            call_id=call_id,
            from_provider=from_provider,
            to_provider=to_provider,
            error=error,
            reason=reason,
        )


class HedgeStarted(Record):
    """Sent when ``provider`` has not delivered after ``after`` seconds and
    the same request goes to ``to_provider`` too (``Client(hedge=)``)."""

    __slots__ = ("call_id", "provider", "to_provider", "after", "reason")
    call_id: str
    provider: str
    to_provider: str
    after: float
    reason: str

    def __init__(
        self, call_id: str, provider: str, to_provider: str, after: float, reason: str = ""
    ) -> None:
        self._init(
            call_id=call_id, provider=provider, to_provider=to_provider, after=after, reason=reason
        )


class HedgeWon(Record):
    """Sent when one request of a hedge delivered first: ``loser``'s was
    cancelled (its connection closed)."""

    __slots__ = ("call_id", "winner", "loser", "reason")
    call_id: str
    winner: str
    loser: str
    reason: str

    def __init__(self, call_id: str, winner: str, loser: str, reason: str = "") -> None:
        self._init(call_id=call_id, winner=winner, loser=loser, reason=reason)


class CallFailed(Record):
    """Sent once when a call ends in an error; ``error`` is what is raised,
    ``reason`` why the engine raised it."""

    __slots__ = ("call_id", "error", "attempts", "reason")
    call_id: str
    error: FailoverError
    attempts: tuple[Attempt, ...]
    reason: str

    def __init__(
        self,
        call_id: str,
        error: FailoverError,
        attempts: tuple[Attempt, ...],
        reason: str = "",
    ) -> None:
        self._init(call_id=call_id, error=error, attempts=attempts, reason=reason)


#: What ``on_event`` receives.
Event = RetryScheduled | FailedOver | CallFailed | HedgeStarted | HedgeWon
#: ``Client(on_event=...)``: called with each event.
EventHook = Callable[[Event], object]

#: Kinds whose failover is logged at WARNING: a broken key or a missing model
#: must not hide behind a successful answer from the next provider.
_LOUD_KINDS = frozenset({"auth", "not_found"})

if TYPE_CHECKING:
    from logging import Logger

    #: The ``extra`` of a log record (``_extra``).
    _Extra = dict[str, typing.Any]
    #: What the engine sends for one kind, read into a typed event (or only
    #: logged, for the kinds that are no event), then logged; with the
    #: ``extra`` its records carried.
    _Reader = Callable[[Logger, dict[str, typing.Any]], tuple[Event | None, _Extra]]


def _extra(
    call_id: str | None,
    provider: str | None = None,
    kind: str | None = None,
    status: int | None = None,
    wait: float | None = None,
) -> _Extra:
    """The fields every record of the ``failover`` logger carries, for a log
    formatter to index (``record.failover_provider``, ...): ``None`` where one
    does not apply. Names, kinds, statuses and seconds only: nothing a
    provider sent, so nothing to redact."""
    return {
        "failover_call_id": call_id,
        "failover_provider": provider,
        "failover_kind": kind,
        "failover_status": status,
        "failover_wait": wait,
    }


def _retry_scheduled(logger: Logger, fields: dict[str, typing.Any]) -> tuple[Event, _Extra]:
    event = RetryScheduled(**fields)
    extra = _extra(event.call_id, event.provider, event.kind, event.status, event.delay)
    logger.info(
        "retrying %s in %.3fs after %s (status %s, attempt %d) [call %s]",
        event.provider,
        event.delay,
        event.kind,
        event.status,
        event.attempt,
        event.call_id,
        extra=extra,
    )
    logger.debug("retrying %s because %s", event.provider, event.reason, extra=extra)
    return event, extra


def _failed_over(logger: Logger, fields: dict[str, typing.Any]) -> tuple[Event, _Extra]:
    import logging

    event = FailedOver(**fields)
    error = event.error
    # The provider left behind: what failed there.
    extra = _extra(event.call_id, event.from_provider, error.kind, error.status)
    level = logging.WARNING if error.kind in _LOUD_KINDS else logging.INFO
    logger.log(
        level,
        "failing over from %s to %s after %s: %s [call %s]",
        event.from_provider,
        event.to_provider,
        error.kind,
        error,
        event.call_id,
        extra=extra,
    )
    logger.debug("leaving %s because %s: %s", event.from_provider, event.reason, error, extra=extra)
    return event, extra


def _call_failed(logger: Logger, fields: dict[str, typing.Any]) -> tuple[Event, _Extra]:
    error: FailoverError = fields["error"]
    event = CallFailed(fields["call_id"], error, error.attempts, fields["reason"])
    # A provider's error names its provider, kind and status; a stream's
    # break its provider; a deadline none of them.
    extra = _extra(
        event.call_id,
        getattr(error, "provider", None),
        error.kind if isinstance(error, ProviderError) else None,
        getattr(error, "status", None),
    )
    logger.info(
        "call failed after %d attempt(s): %s [call %s]",
        # HTTP attempts, as stats() counts them: a provider passed over is none.
        sum(1 for attempt in error.attempts if attempt.skipped is None),
        error,
        event.call_id,
        extra=extra,
    )
    logger.debug("raising %s because %s", type(error).__name__, event.reason, extra=extra)
    return event, extra


def _hedge_started(logger: Logger, fields: dict[str, typing.Any]) -> tuple[Event, _Extra]:
    reason = f"no answer from {fields['provider']} after {fields['after']:.3f}s"
    event = HedgeStarted(reason=reason, **fields)
    extra = _extra(event.call_id, event.provider)
    logger.info(
        "hedging %s with %s: %s [call %s]",
        event.provider,
        event.to_provider,
        reason,
        event.call_id,
        extra=extra,
    )
    return event, extra


def _hedge_won(logger: Logger, fields: dict[str, typing.Any]) -> tuple[Event, _Extra]:
    reason = f"{fields['winner']} delivered first; {fields['loser']}'s request is over"
    event = HedgeWon(reason=reason, **fields)
    extra = _extra(event.call_id, event.winner)
    logger.info(
        "hedge won by %s over %s [call %s]", event.winner, event.loser, event.call_id, extra=extra
    )
    return event, extra


def _hedge_failed(logger: Logger, fields: dict[str, typing.Any]) -> tuple[None, _Extra]:
    # Logged only: one request of a hedge failed while the other goes on, or
    # after it had failed (the call then goes on as without a hedge).
    import logging

    error = fields["error"]
    extra = _extra(fields["call_id"], fields["provider"], error.kind, error.status)
    level = logging.WARNING if error.kind in _LOUD_KINDS else logging.INFO
    how = "after %s had failed" if fields["other_failed"] else "while %s goes on"
    logger.log(
        level,
        "hedge: %s failed " + how + ": %s [call %s]",
        fields["provider"],
        fields["other"],
        error,
        fields["call_id"],
        extra=extra,
    )
    return None, extra


def _skipped(logger: Logger, fields: dict[str, typing.Any]) -> tuple[None, _Extra]:
    # Logged only: a skip is no event.
    extra = _extra(fields["call_id"], fields["provider"])
    logger.info(
        "skipping %s: %s [call %s]",
        fields["provider"],
        fields["reason"],
        fields["call_id"],
        extra=extra,
    )
    return None, extra


def _notice(logger: Logger, fields: dict[str, typing.Any]) -> tuple[None, _Extra]:
    # A fleet-wide state lost or back: for the log only, of no call.
    extra = _extra(None)
    logger.warning("%s", fields["text"], extra=extra)
    return None, extra


def _debug(logger: Logger, fields: dict[str, typing.Any]) -> tuple[None, _Extra]:
    # A hint a provider is not sent: for the DEBUG log only.
    extra = _extra(fields["call_id"])
    logger.debug("%s [call %s]", fields["text"], fields["call_id"], extra=extra)
    return None, extra


#: Every kind the engine sends (``src/python/events.rs``), with its reader.
#: A kind missing here is an error, never read as another kind.
_READERS: dict[str, _Reader] = {
    "RetryScheduled": _retry_scheduled,
    "FailedOver": _failed_over,
    "CallFailed": _call_failed,
    "Skipped": _skipped,
    "HedgeStarted": _hedge_started,
    "HedgeWon": _hedge_won,
    "HedgeFailed": _hedge_failed,
    "Notice": _notice,
    "Debug": _debug,
}


def _emitter(
    on_event: EventHook | None,
    tap: Callable[[Event], None] | None = None,
) -> Callable[[str, dict[str, typing.Any]], None]:
    """The callable the native engine reports to: reads the kind's fields
    into its event, logs it (INFO for what happens, DEBUG for why), then
    hands it to ``on_event``. A hook's ordinary exception is logged and the
    call goes on; a BaseException (KeyboardInterrupt, SystemExit) propagates
    and ends it. An unknown kind raises (the engine reports it to
    ``sys.unraisablehook``): a kind added on one side only."""

    def emit(kind: str, fields: dict[str, typing.Any]) -> None:
        reader = _READERS.get(kind)
        if reader is None:
            raise FailoverError(
                f"the engine sent an event of unknown kind {kind!r}; known: {sorted(_READERS)}"
            )
        # Imported here, on the first event, to keep `import failover` cheap.
        import logging

        logger = logging.getLogger("failover")
        event, extra = reader(logger, fields)
        if event is not None and tap is not None:
            tap(event)  # telemetry's: the call's span events
        if event is not None and on_event is not None:
            try:
                on_event(event)
            except Exception:
                logger.exception("on_event hook raised; the call goes on", extra=extra)

    return emit
