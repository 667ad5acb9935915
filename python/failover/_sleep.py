"""Sleeping helpers: the sleeper ``fake_sleep()`` installs, and how an async
sleeper's awaitable runs on the caller's event loop."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (5 ms)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

#: The sleeper every client without one of its own uses inside ``fake_sleep()``.
active: object = None


class _LoopSleep:
    """Runs an async sleeper's awaitable as a task on the caller's loop, in
    the caller's context, and reports its end to ``done(exception or None)``.
    ``cancel()`` (from any thread) stops it: a cancelled call leaves no task."""

    __slots__ = ("_cancelled", "_loop", "_task")

    def __init__(
        self, awaitable: Any, loop: Any, context: Any, done: Callable[[Any], object]
    ) -> None:
        self._loop = loop
        self._task: Any = None
        self._cancelled = False

        async def wait() -> None:
            await awaitable

        def finished(task: Any) -> None:
            done(None if task.cancelled() else task.exception())

        def start() -> None:
            if self._cancelled:
                if hasattr(awaitable, "close"):
                    awaitable.close()
                done(None)
                return
            # start() runs in the caller's context, which the task copies.
            self._task = loop.create_task(wait())
            self._task.add_done_callback(finished)

        loop.call_soon_threadsafe(start, context=context)

    def cancel(self) -> None:
        self._cancelled = True

        def stop() -> None:
            if self._task is not None:
                self._task.cancel()

        try:
            self._loop.call_soon_threadsafe(stop)
        except RuntimeError:  # the loop has closed: nothing runs on it any more
            pass
