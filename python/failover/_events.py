"""Events a call reports, and the ``failover`` logger that mirrors them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional, Union

from ._attempt import Attempt
from ._exceptions import FailoverError, ProviderError
from ._record import Record


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
    status: Optional[int]
    reason: str

    def __init__(
        self,
        call_id: str,
        provider: str,
        attempt: int,
        delay: float,
        kind: str,
        status: Optional[int],
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
Event = Union[RetryScheduled, FailedOver, CallFailed]
#: ``Client(on_event=...)``: called with each event.
EventHook = Callable[[Event], object]

#: Kinds whose failover is logged at WARNING: a broken key or a missing model
#: must not hide behind a successful answer from the next provider.
_LOUD_KINDS = frozenset({"auth", "not_found"})


def _emitter(on_event: Optional[EventHook]) -> Callable[[str, dict[str, Any]], None]:
    """The callable the native engine reports to: builds the event, logs it
    (INFO for what happens, DEBUG for why), then hands it to ``on_event``.
    A hook's ordinary exception is logged and the call goes on; a
    BaseException (KeyboardInterrupt, SystemExit) propagates and ends it."""

    def emit(kind: str, fields: dict[str, Any]) -> None:
        # Imported here, on the first event, to keep `import failover` cheap.
        import logging

        logger = logging.getLogger("failover")
        event: Event
        if kind == "Notice":
            logger.warning("%s", fields["text"])
            return
        if kind == "Debug":
            logger.debug("%s [call %s]", fields["text"], fields["call_id"])
            return
        if kind == "Skipped":
            # Logged only: a skip is no event.
            logger.info(
                "skipping %s: %s [call %s]", fields["provider"], fields["reason"], fields["call_id"]
            )
            return
        if kind == "RetryScheduled":
            event = RetryScheduled(**fields)
            logger.info(
                "retrying %s in %.3fs after %s (status %s, attempt %d) [call %s]",
                event.provider,
                event.delay,
                event.kind,
                event.status,
                event.attempt,
                event.call_id,
            )
            logger.debug("retrying %s because %s", event.provider, event.reason)
        elif kind == "FailedOver":
            event = FailedOver(**fields)
            level = logging.WARNING if event.error.kind in _LOUD_KINDS else logging.INFO
            logger.log(
                level,
                "failing over from %s to %s after %s: %s [call %s]",
                event.from_provider,
                event.to_provider,
                event.error.kind,
                event.error,
                event.call_id,
            )
            logger.debug(
                "leaving %s because %s: %s", event.from_provider, event.reason, event.error
            )
        else:
            call_id, error, reason = fields["call_id"], fields["error"], fields["reason"]
            event = CallFailed(call_id, error, error.attempts, reason)
            logger.info(
                "call failed after %d attempt(s): %s [call %s]", len(error.attempts), error, call_id
            )
            logger.debug("raising %s because %s", type(error).__name__, reason)
        if on_event is not None:
            try:
                on_event(event)
            except Exception:
                logger.exception("on_event hook raised; the call goes on")

    return emit
