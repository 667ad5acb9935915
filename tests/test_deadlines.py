"""Never past the deadline: a stream's start (every attempt, wait and failover up to its first
content) ends by the deadline whatever arrives before that content — SSE comments, Anthropic
pings, empty or role-only deltas, Ollama's empty lines, Gemini's empty parts —, whatever
``timeout`` is (below, at or above the deadline), on both faces, alone or in a chain; and so
does a restart, counted from its cut (DESIGN §3.6).

Each server keeps its connection alive for 20 s before any content, with an event every 0.1 s;
the deadline is 0.5 s. The assertion is an upper bound with a wide margin (3 s), because the
failure mode is the keep-alives' 20 s: no timing is measured here."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

from conftest import KEY, ant, anthropic, gemini, oa, ollama, openai, wait_for

DEADLINE = 0.5
BOUND = DEADLINE + 3.0  # the call must end well before the keep-alives would
INTERVAL = 0.1
KEEP_ALIVES = 200  # 20 s of them


OA_TEXT = oa({"choices": [{"index": 0, "delta": {"content": "late"}}]})
OA_STOP = oa({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
ANT_START = ant("message_start", {"message": {"model": "claude", "usage": {"input_tokens": 3}}})
ANT_TEXT = [
    ant("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
    ant("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "late"}}),
    ant("content_block_stop", {"index": 0}),
    ant("message_stop", {}),
]


def ndjson(line: dict[str, Any]) -> bytes:
    return json.dumps(line).encode() + b"\n"


@dataclass(frozen=True)
class KeepAlive:
    """A provider whose stream sends only keep-alives for 20 s before its first content."""

    provider: Callable[[MockServer], failover.Provider]
    push: Callable[[MockServer], None]


def _sse(events: list[str]) -> Callable[[MockServer], None]:
    return lambda server: server.push(sse=events, interval=INTERVAL)


def _ollama_push(server: MockServer) -> None:
    empty = ndjson({"model": "llama3.2", "message": {"role": "assistant", "content": ""}})
    done = ndjson({"model": "llama3.2", "message": {"content": "late"}, "done": True})
    server.push(
        chunks=[empty] * KEEP_ALIVES + [done],
        headers={"content-type": "application/x-ndjson"},
        interval=INTERVAL,
    )


GEMINI_EMPTY = oa({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}}]})
GEMINI_TEXT = oa(
    {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "late"}]}, "finishReason": "STOP"}
        ]
    }
)

KEEP_ALIVE_KINDS = {
    "sse comments": KeepAlive(openai, _sse([": keep-alive"] * KEEP_ALIVES + [OA_TEXT, OA_STOP])),
    "anthropic pings": KeepAlive(
        anthropic, _sse([ANT_START] + [ant("ping", {})] * KEEP_ALIVES + ANT_TEXT)
    ),
    "role-only deltas": KeepAlive(
        openai,
        _sse(
            [oa({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})] * KEEP_ALIVES
            + [OA_TEXT, OA_STOP]
        ),
    ),
    "empty deltas": KeepAlive(
        openai,
        _sse(
            [oa({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})]
            * KEEP_ALIVES
            + [OA_TEXT, OA_STOP]
        ),
    ),
    "gemini empty parts": KeepAlive(gemini, _sse([GEMINI_EMPTY] * KEEP_ALIVES + [GEMINI_TEXT])),
    "ollama empty lines": KeepAlive(ollama, _ollama_push),
}
TIMEOUTS = {"timeout below the deadline": 0.25, "at it": DEADLINE, "above it": 5.0}


@dataclass
class Ended:
    """How one call ended: what it raised (or its first chunk's text) and when."""

    label: str
    outcome: Any
    elapsed: float


def _first_chunk(face: str, client: failover.Client, **kwargs: Any) -> Any:
    if face == "sync":
        with client.stream("Hi", **kwargs) as stream:
            return next(iter(stream)).text

    async def run() -> Any:
        async with client.stream_async("Hi", **kwargs) as stream:
            async for chunk in stream:
                return chunk.text
        return None

    return asyncio.run(run())


def _run_side_by_side(
    calls: dict[str, Callable[[], Any]], servers: list[MockServer]
) -> list[Ended]:
    """Runs each call in its own thread, all at once, says how each ended, and then closes the
    servers (still sending their keep-alives)."""
    try:
        return _side_by_side(calls)
    finally:
        for server in servers:
            server.close()


def _side_by_side(calls: dict[str, Callable[[], Any]]) -> list[Ended]:
    ended: list[Ended] = []
    lock = threading.Lock()

    def one(label: str, call: Callable[[], Any]) -> None:
        started = time.monotonic()
        try:
            outcome: Any = call()
        except Exception as e:  # the outcome under test
            outcome = e
        with lock:
            ended.append(Ended(label, outcome, time.monotonic() - started))

    threads = [threading.Thread(target=one, args=item) for item in calls.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(ended) == len(calls), "a call never ended"
    return ended


@pytest.mark.parametrize("timeout", TIMEOUTS.values(), ids=list(TIMEOUTS))
@pytest.mark.parametrize("kind", KEEP_ALIVE_KINDS.values(), ids=list(KEEP_ALIVE_KINDS))
def test_a_stream_start_ends_at_the_deadline_whatever_comes_before_content(
    kind: KeepAlive, timeout: float
) -> None:
    servers: list[MockServer] = []

    def client(chain: bool) -> failover.Client:
        primary = MockServer()
        servers.append(primary)
        kind.push(primary)
        providers: dict[str, failover.Provider] = {"primary": kind.provider(primary)}
        if chain:
            backup = MockServer()
            servers.append(backup)
            backup.push_text("from the backup", wire="openai")
            providers["backup"] = openai(backup)
        return failover.Client(providers, timeout=timeout)

    calls: dict[str, Callable[[], Any]] = {}
    for face in ("sync", "async"):
        for chain in (False, True):
            c = client(chain)
            label = f"{face}, {'a chain' if chain else 'one provider'}"
            calls[label] = lambda c=c, face=face: _first_chunk(face, c, deadline=DEADLINE)
    ended = _run_side_by_side(calls, servers)
    for call in ended:
        assert isinstance(call.outcome, failover.DeadlineExceeded), (call.label, call.outcome)
        assert call.elapsed < BOUND, (call.label, call.elapsed)
    # The keep-alives never reached their content: the servers were still sending them.
    assert all(len(s.requests) <= 1 for s in servers)


@pytest.mark.parametrize("timeout", TIMEOUTS.values(), ids=list(TIMEOUTS))
def test_a_restart_ends_at_the_deadline_counted_from_its_cut(timeout: float) -> None:
    """The first answer breaks after its first text; the restart gets only keep-alives: the
    restart's start is bounded by the deadline from the cut, whatever ``timeout`` is."""
    servers: list[MockServer] = []
    calls: dict[str, Callable[[], Any]] = {}
    for face in ("sync", "async"):
        server = MockServer()
        servers.append(server)
        server.push(
            sse=[oa({"choices": [{"index": 0, "delta": {"content": "Hel"}}]})], fault="cut:1"
        )
        server.push(sse=[": keep-alive"] * KEEP_ALIVES + [OA_TEXT, OA_STOP], interval=INTERVAL)
        # A short backoff without jitter: the default's 0.5 s could leave the restart no time
        # under the 0.5 s deadline, and the test is of the restart's start, not of the wait.
        quick = failover.RetryPolicy(backoff=failover.Backoff(initial=0.05, jitter=0))
        c = failover.Client({"p": openai(server)}, timeout=timeout, retry=quick)

        def read_all(c: failover.Client = c, face: str = face) -> str | None:
            if face == "sync":
                with c.stream("Hi", deadline=DEADLINE, on_interrupt="restart") as stream:
                    return "".join(chunk.text for chunk in stream)

            async def run() -> str:
                async with c.stream_async("Hi", deadline=DEADLINE, on_interrupt="restart") as s:
                    return "".join([chunk.text async for chunk in s])

            return asyncio.run(run())

        calls[face] = read_all
    ended = _run_side_by_side(calls, servers)
    for call in ended:
        assert isinstance(call.outcome, failover.StreamInterrupted), (call.label, call.outcome)
        assert isinstance(call.outcome.__cause__, failover.DeadlineExceeded), call.label
        assert call.outcome.partial_text == "Hel"
        assert call.elapsed < BOUND, (call.label, call.elapsed)
    assert all(len(s.requests) == 2 for s in servers)


def test_a_stream_whose_keep_alives_stop_in_time_fails_over_within_the_deadline() -> None:
    """Keep-alives reset the wait for the next event: a provider that pings and then goes
    silent fails by its own timeout, and with time left the chain fails over."""
    with MockServer() as primary, MockServer() as backup:
        primary.push(sse=[ANT_START] + [ant("ping", {})] * 3, fault="stall:4", interval=INTERVAL)
        backup.push(sse=[OA_TEXT, OA_STOP])
        client = failover.Client(
            {"primary": anthropic(primary), "backup": openai(backup)}, timeout=0.5
        )
        with client.stream("Hi", deadline=10.0) as stream:
            assert "".join(c.text for c in stream) == "late"
        r = stream.response
        assert r.provider == "backup"
        assert [(a.provider, a.kind) for a in r.attempts] == [
            ("primary", "timeout"),
            ("backup", None),
        ]
        assert backup.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_a_slow_key_callable_counts_against_the_deadline() -> None:
    """A key callable cannot be cut short, but the attempt after it gets only the time left:
    a 2.5 s token fetch under a 2 s deadline ends the call when the fetch returns, instead of
    starting an attempt with the 2 s it had before the fetch."""

    def slow_key() -> str:
        time.sleep(2.5)  # a token endpoint that hangs; no retry is being timed
        return KEY

    with MockServer() as server:
        server.push_text("too late", wire="openai")
        client = failover.Client(
            {"p": failover.OpenAICompatible(model="m", base_url=server.url, api_key=slow_key)}
        )
        started = time.monotonic()
        with pytest.raises(failover.DeadlineExceeded) as raised:
            client.prompt("Hi", deadline=2.0)
        # What used the time is named, not the provider's silence.
        assert re.search(
            r"p: its api_key callable took the [12]\.\d{3}s left before the deadline; "
            r"nothing was sent",
            str(raised.value.__cause__),
        ), raised.value.__cause__
        # Without the rule: 2.5 s of fetch, then an attempt. A bound, not a timing.
        assert time.monotonic() - started < 4.0
        # Nothing is sent past the deadline, however fast the server would answer.
        assert server.requests == []


def test_a_stream_whose_first_event_the_deadline_cuts_off_is_deadline_exceeded(
    mock_server: MockServer,
) -> None:
    """Found by the new-user trials of 2026-11-30."""
    mock_server.push(sse=["data: {}"], fault="stall:0")
    client = failover.Client({"g": openai(mock_server)}, timeout=10)
    with pytest.raises(failover.DeadlineExceeded):
        with client.stream("Hi", deadline=0.3) as stream:
            list(stream)


def test_deadline_cutting_an_attempt_short_is_deadline_exceeded(mock_server, call):
    mock_server.push(fault="hang")
    client = failover.Client({"a": openai(mock_server)}, sleeper=FakeSleeper(), timeout=30)
    with pytest.raises(failover.DeadlineExceeded) as info:
        call(client, deadline=0.2)
    assert isinstance(info.value, TimeoutError)
    assert isinstance(info.value.__cause__, failover.ProviderTimeout)
    assert len(info.value.attempts) == 1


def test_a_request_the_deadline_cuts_short_has_its_connection_closed_at_once(
    call: Any, mock_server: MockServer
) -> None:
    # The provider sees its client leave (and may stop generating), on the
    # sync face too, whose runtime otherwise runs only during calls.
    mock_server.push_text("too late", delay=5.0)
    client = failover.Client({"a": openai(mock_server)})
    with pytest.raises(failover.DeadlineExceeded):
        call(client, deadline=0.3)
    wait_for(lambda: mock_server.left_early == 1, within=2)
    client.close()
