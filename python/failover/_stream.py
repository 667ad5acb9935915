"""Streams: ``Client.stream()`` and ``Client.stream_async()`` return these.

A stream sends nothing until it is first read. Until its first content
chunk, failures are retried and failed over exactly as for ``prompt()``;
after it, a failure raises ``StreamInterrupted`` (or, with
``on_interrupt="restart"``, starts again and yields a ``"restart"`` chunk
first). Chunks come from the native side in batches: one crossing per
network read, not per chunk.
"""

from __future__ import annotations

from ._attempt import Attempt, _attempts
from ._exceptions import FailoverError
from ._models import Response, ToolCall, _tool_calls

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see _typing.py)
if TYPE_CHECKING:
    import typing
    from collections import deque
    from collections.abc import Callable

    from ._cost import Pricing
    from ._stats import Tally
    from ._telemetry import Observed
else:
    from . import _typing as typing


class Chunk:
    """One piece of a streamed answer.

    ``kind`` is ``"text"``, ``"reasoning"``, ``"tool_call"``, ``"audio"`` (a
    speech stream's bytes, in ``data``) or ``"restart"``;
    ``text`` is ``""`` on every kind but ``"text"`` (so ``"".join(c.text for c
    in stream)`` is the answer). ``tool_call`` is the assembled ``ToolCall``
    once complete. A ``"restart"`` chunk means everything yielded before it
    is to be thrown away: ``discarded`` is that text, ``discarded_tool_calls``
    those calls.
    """

    __slots__ = (
        "data",
        "discarded",
        "discarded_tool_calls",
        "kind",
        "reasoning",
        "text",
        "tool_call",
    )

    kind: str
    text: str
    reasoning: str
    tool_call: ToolCall | None
    discarded: str
    discarded_tool_calls: tuple[ToolCall, ...]
    data: bytes | None

    def __init__(
        self,
        kind: str,
        text: str = "",
        reasoning: str = "",
        tool_call: ToolCall | None = None,
        discarded: str = "",
        discarded_tool_calls: tuple[ToolCall, ...] = (),
        data: bytes | None = None,
    ) -> None:
        self.kind = kind
        self.data = data
        self.text = text
        self.reasoning = reasoning
        self.tool_call = tool_call
        self.discarded = discarded
        self.discarded_tool_calls = discarded_tool_calls

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Chunk):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        if self.kind == "text":
            return f"Chunk(kind='text', text={self.text!r})"
        if self.kind == "reasoning":
            return f"Chunk(kind='reasoning', reasoning={self.reasoning!r})"
        if self.kind == "tool_call":
            return f"Chunk(kind='tool_call', tool_call={self.tool_call!r})"
        if self.kind == "audio" and self.data is not None:
            return f"Chunk(kind='audio', data=<{len(self.data)} bytes>)"
        return (
            f"Chunk(kind='restart', discarded={self.discarded!r}, "
            f"discarded_tool_calls={self.discarded_tool_calls!r})"
        )


def _chunk(data: typing.Any) -> Chunk:
    """A ``_native.ChunkData`` as a ``Chunk`` (text first: it is most of them)."""
    kind = data.kind
    if kind == "text":
        return Chunk("text", data.text)
    if kind == "reasoning":
        return Chunk("reasoning", reasoning=data.reasoning)
    if kind == "tool_call":
        return Chunk("tool_call", tool_call=_tool_calls([data.tool_call])[0])
    if kind == "audio":
        return Chunk("audio", data=data.audio)
    return Chunk(
        "restart",
        discarded=data.discarded,
        discarded_tool_calls=_tool_calls(data.discarded_tool_calls),
    )


def _count_closed(
    tally: Tally, pricing: Pricing | None, observed: Observed | None, call_id: str
) -> Callable[[list[typing.Any]], None]:
    """What a stream closed before its end hands its attempts to (from the
    closing thread, or the runtime's once a read in flight lets go): priced,
    then counted. It holds no reference to the stream, which the native
    stream holding it would keep alive."""

    def count(raw: list[typing.Any]) -> None:
        attempts = _attempts(raw)
        if pricing is not None:
            attempts = pricing.attempts(attempts, False)
        tally.count(attempts, None)
        if observed is not None:
            observed.closed(attempts, call_id)

    return count


class _StreamBase:
    __slots__ = ("_done", "_native", "_observed", "_pending", "_pricing", "_response", "_tally")

    def __init__(
        self,
        native: typing.Any,
        pricing: Pricing | None = None,
        tally: Tally | None = None,
        observed: Observed | None = None,
    ) -> None:
        self._native = native
        self._pricing = pricing
        #: The stream's span (telemetry), ended with the stream.
        self._observed = observed
        #: The client's stats, counted once when the stream ends or breaks
        #: (then None: counted), or by the native stream if it is closed
        #: before its end.
        self._tally = tally
        if tally is not None:
            native.on_closed(_count_closed(tally, pricing, observed, native.call_id))
        from collections import deque  # per stream, not at import: collections costs 1 ms

        self._pending: deque[Chunk] = deque()
        self._done = False
        self._response: Response | None = None

    def _take(self, batch: list[typing.Any] | None) -> None:
        if batch is None:
            self._done = True
            data = self._native.response
            if data is not None:
                response = Response(data, self._pricing)
                response.time_to_first_token = self._native.time_to_first_token
                self._response = response
                self._count(response.attempts, response.provider)
                if self._observed is not None:
                    self._observed.answered(response)
        else:
            self._pending.extend(map(_chunk, batch))

    def _failed(self, error: BaseException) -> None:
        """A failed stream's error: what it cost so far, then counted."""
        # Only a failure of the stream itself, which carries its attempts.
        if isinstance(error, FailoverError) and error.attempts:
            if self._pricing is not None:
                self._pricing.error(error, False)
            self._count(error.attempts, None)
        if self._observed is not None:
            self._observed.failed(error)

    def _count(self, attempts: tuple[Attempt, ...], answered: str | None) -> None:
        tally = self._tally
        if tally is not None:
            self._tally = None
            tally.count(attempts, answered)

    def _close(self) -> None:
        self._done = True
        self._pending.clear()
        self._native.close()
        if self._observed is not None:
            # Ended by on_closed with the attempts read so far, unless the
            # stream never started (or a read still holds it): ended here.
            self._observed.closed(call_id=self._native.call_id)

    def __del__(self) -> None:
        # A stream dropped unread or half read is closed: counted in stats()
        # with what it read, and its span ended (telemetry).
        if not getattr(self, "_done", True):
            try:
                self._close()
            except Exception:
                pass

    def __repr__(self) -> str:
        state = "ended" if self._done else "open"
        return f"<failover.{type(self).__name__} {state}>"

    @property
    def response(self) -> Response:
        """The complete answer (text, tool calls, usage, finish reason, provider,
        attempts, ``time_to_first_token``), once the stream has ended."""
        if self._response is None:
            if self._done:
                raise FailoverError(
                    "the stream has no complete answer: it was closed, or it broke, before its end"
                )
            raise FailoverError(
                "the stream has not ended: read it to the end before asking for .response"
            )
        return self._response


class Stream(_StreamBase):
    """A streamed answer: iterate it for ``Chunk``s; also a context manager.

    Leaving the ``with`` block, ``close()``, breaking out and dropping it
    close the connection at once.
    """

    __slots__ = ()

    def __iter__(self) -> Stream:
        return self

    def __next__(self) -> Chunk:
        while not self._pending:
            if self._done:
                raise StopIteration
            try:
                batch = self._native.next()
            except BaseException as error:
                self._failed(error)
                self.close()
                raise
            self._take(batch)
        return self._pending.popleft()

    def close(self) -> None:
        """Closes the connection; the stream ends."""
        self._close()

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncStream(_StreamBase):
    """A streamed answer for asyncio: ``async for`` it; also an async context
    manager. Cancelling the task that iterates it closes the connection."""

    __slots__ = ()

    def __aiter__(self) -> AsyncStream:
        return self

    def __iter__(self) -> None:
        raise TypeError(
            "an AsyncStream is read with `async for`; for a plain `for`, use client.stream()"
        )

    async def __anext__(self) -> Chunk:
        while not self._pending:
            if self._done:
                raise StopAsyncIteration
            # What has already arrived, without a trip through the event loop.
            ready = self._native.try_next()
            if ready is not None:
                self._take(ready)
                continue
            try:
                batch = await self._native.next_async()
            except BaseException as error:
                self._failed(error)
                # A cancelled task keeps its frame (and this stream) alive:
                # close the connection here, not at garbage collection.
                self._close()
                raise
            self._take(batch)
        return self._pending.popleft()

    async def aclose(self) -> None:
        """Closes the connection; the stream ends."""
        self._close()

    async def __aenter__(self) -> AsyncStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._close()


class SpeechStream(Stream):
    """Speech as it arrives (``client.speak_stream()``): iterate it for the
    audio's ``bytes``; also a context manager. Nothing is replayed once bytes
    were handed out: a cut after them raises ``StreamInterrupted``.
    ``.response`` (once it has ended) has its provider and attempts."""

    __slots__ = ()

    def __iter__(self) -> SpeechStream:
        return self

    def __next__(self) -> bytes:  # type: ignore[override]
        return super().__next__().data or b""

    def __enter__(self) -> SpeechStream:
        return self


class AsyncSpeechStream(AsyncStream):
    """``SpeechStream`` for asyncio: ``async for`` it for the audio's ``bytes``."""

    __slots__ = ()

    def __aiter__(self) -> AsyncSpeechStream:
        return self

    async def __anext__(self) -> bytes:  # type: ignore[override]
        return (await super().__anext__()).data or b""

    async def __aenter__(self) -> AsyncSpeechStream:
        return self
