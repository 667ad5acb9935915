"""How an async call's result reaches its event loop: a runtime thread schedules ``complete``
with ``loop.call_soon_threadsafe``, in the same hold of the GIL that made the result."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    import asyncio


def complete(future: asyncio.Future[object], value: object, error: BaseException | None) -> None:
    """Ends ``future`` with ``value`` or ``error``, unless it was cancelled meanwhile."""
    if future.done():
        return
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(error)
