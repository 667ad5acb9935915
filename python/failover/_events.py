"""Events a call reports, and the ``failover`` logger that mirrors them."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Union

from ._models import Attempt, _attempts

if TYPE_CHECKING:
    from ._exceptions import FailoverError, ProviderError

logger = logging.getLogger("failover")


@dataclass(frozen=True)
class RetryScheduled:
    """Sent before each sleep: ``provider`` is tried again after ``delay`` seconds."""

    call_id: str
    provider: str
    attempt: int
    """Which attempt at this provider failed (1 = the first)."""
    delay: float
    kind: str
    status: int | None


@dataclass(frozen=True)
class FailedOver:
    """Sent for each provider left behind (never for the final one)."""

    call_id: str
    from_provider: str
    to_provider: str
    error: ProviderError


@dataclass(frozen=True)
class CallFailed:
    """Sent once when a call ends in an error; ``error`` is what is raised."""

    call_id: str
    error: FailoverError
    attempts: tuple[Attempt, ...]


Event = Union[RetryScheduled, FailedOver, CallFailed]
EventHook = Callable[[Event], object]


def _emitter(on_event: EventHook | None) -> Callable[[str, tuple[Any, ...]], None]:
    """The callable the native engine reports to: builds the event, logs it,
    then hands it to ``on_event``. A failing hook is logged, never raised."""

    def emit(kind: str, payload: tuple[Any, ...]) -> None:
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
                "%s left behind: %s (retry_after=%s)",
                event.from_provider,
                event.error,
                event.error.retry_after,
            )
        else:
            call_id, error, attempts = payload
            event = CallFailed(call_id, error, _attempts(attempts))
            logger.info(
                "call failed after %d attempt(s): %s [call %s]", len(attempts), error, call_id
            )
        if on_event is not None:
            try:
                on_event(event)
            except Exception:
                logger.exception("on_event hook raised; the call goes on")

    return emit
