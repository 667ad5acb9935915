"""Events a call reports, and the ``failover`` logger that mirrors them."""

from __future__ import annotations

from ._record import Record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (5 ms)
if TYPE_CHECKING:
    from typing import Any, Callable, Union

    from ._exceptions import FailoverError, ProviderError
    from ._models import Attempt

    Event = Union["RetryScheduled", "FailedOver", "CallFailed"]
    EventHook = Callable[[Event], object]


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


def _emitter(on_event: EventHook | None) -> Callable[[str, tuple[Any, ...]], None]:
    """The callable the native engine reports to: builds the event, logs it
    (INFO for what happens, DEBUG for why), then hands it to ``on_event``.
    A hook's ordinary exception is logged and the call goes on; a
    BaseException (KeyboardInterrupt, SystemExit) propagates and ends it."""

    def emit(kind: str, payload: tuple[Any, ...]) -> None:
        # Imported here, on the first event, to keep `import failover` cheap.
        import logging

        logger = logging.getLogger("failover")
        event: Event
        if kind == "RetryScheduled":
            event = RetryScheduled(*payload)
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
            event = FailedOver(*payload)
            logger.info(
                "failing over from %s to %s after %s [call %s]",
                event.from_provider,
                event.to_provider,
                event.error.kind,
                event.call_id,
            )
            logger.debug(
                "leaving %s because %s: %s", event.from_provider, event.reason, event.error
            )
        else:
            call_id, error, reason = payload
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
