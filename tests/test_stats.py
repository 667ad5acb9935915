"""``client.stats()``: what a client's calls did and cost since it was made,
counted once per finished call (an answer, an embedding, a stream at its end,
break or close, a failed call), shared by ``with_options()`` clients, safe
from many threads."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

from conftest import SINGLE_TRY, ant, anthropic, chat_answer, collect, oa, oa_text, openai

MILLION = 1_000_000


def stream_events(prompt_tokens: int, completion_tokens: int) -> list[str]:
    """An OpenAI stream: two words, the stop, then its usage chunk."""
    stop = {
        "model": "gpt-4.1-mini",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
    }
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
    return [
        oa_text("Hello "),
        oa_text("world"),
        oa(stop),
        oa({"choices": [], "usage": usage}),
        "data: [DONE]",
    ]


MAIN_PRICE = failover.Price(1.0, 5.0)
BACKUP_PRICE = failover.Price(input=2.0, output=8.0)


def test_a_retry_a_failover_and_an_answer_are_counted_per_provider_and_in_total(
    call: Any, mock_server: MockServer, backup_server: MockServer
) -> None:
    """A 429 with a hinted wait (slept on the FakeSleeper), a 529 that fails
    over, then an answer: every figure, for each provider and the total."""
    mock_server.push(status=429, headers={"retry-after": "2"}, json={"error": {"message": "s"}})
    mock_server.push(status=529, json={"error": {"type": "overloaded_error"}})
    backup_server.push(json=chat_answer(1000, 200))
    sleeper = FakeSleeper()
    client = failover.Client(
        {
            "main": anthropic(mock_server, price=MAIN_PRICE),
            "backup": openai(backup_server, price=BACKUP_PRICE),
        },
        sleeper=sleeper,
    )
    before = client.stats()
    assert before.calls == 0
    assert before.providers["main"] == failover.ProviderStats()
    assert before.total.cost is None and before.total.input_tokens is None

    response = call(client)
    sleeper.assert_sequence([2.0])
    assert response.provider == "backup"
    stats = client.stats()
    assert stats.calls == 1
    main = stats.providers["main"]
    assert (main.answered, main.attempts, main.retries, main.failovers) == (0, 2, 1, 1)
    assert main.failures == {"rate_limited": 1, "overloaded": 1}
    assert main.waited == pytest.approx(2.0)
    # Neither refusal reported usage: unknown, not zero; nothing to price.
    assert (main.input_tokens, main.output_tokens, main.cost) == (None, None, None)
    backup = stats.providers["backup"]
    assert (backup.answered, backup.attempts, backup.retries, backup.failovers) == (1, 1, 0, 0)
    assert backup.failures == {}
    assert backup.waited == 0.0
    assert (backup.input_tokens, backup.output_tokens) == (1000, 200)
    answer_cost = (1000 * 2.0 + 200 * 8.0) / MILLION
    assert backup.cost == pytest.approx(answer_cost)
    total = stats.total
    assert (total.answered, total.attempts, total.retries, total.failovers) == (1, 3, 1, 1)
    assert total.failures == {"rate_limited": 1, "overloaded": 1}
    assert total.waited == pytest.approx(2.0)
    assert (total.input_tokens, total.output_tokens) == (1000, 200)
    assert total.cost == pytest.approx(response.total_cost)

    # A second call adds to the same counters.
    backup_server.push(json=chat_answer(10, 5))
    call(client, provider="backup")
    again = client.stats()
    assert again.calls == 2
    assert again.providers["backup"].answered == 2
    assert again.providers["backup"].input_tokens == 1010
    assert again.total.cost == pytest.approx(answer_cost + (10 * 2.0 + 5 * 8.0) / MILLION)
    # The snapshot taken before is a value: it did not change.
    assert stats.providers["backup"].answered == 1


def test_a_stream_is_counted_when_it_ends_not_before(face: str, mock_server: MockServer) -> None:
    mock_server.push(sse=stream_events(100, 20))
    client = failover.Client({"main": openai(mock_server, price=MAIN_PRICE)})
    if face == "sync":
        with client.stream("Hi") as stream:
            first = next(stream)
            assert first.text == "Hello "
            assert client.stats().calls == 0
            rest = list(stream)
        assert "".join(c.text for c in rest) == "world"
    else:
        collect(face, client)
    stats = client.stats()
    assert stats.calls == 1
    main = stats.providers["main"]
    assert (main.answered, main.attempts, main.input_tokens, main.output_tokens) == (1, 1, 100, 20)
    assert main.cost == pytest.approx((100 * 1.0 + 20 * 5.0) / MILLION)
    # Leaving the with block after the end counts nothing more.
    assert client.stats().calls == 1


def test_a_stream_closed_before_its_end_counts_its_attempts_but_no_answer(
    face: str, mock_server: MockServer
) -> None:
    # Anthropic reports the input at the start: known even for a stream cut short.
    mock_server.push(
        sse=[
            ant(
                "message_start",
                {
                    "message": {
                        "id": "msg_1",
                        "model": "claude-haiku-4-5",
                        "usage": {"input_tokens": 300, "output_tokens": 1},
                    }
                },
            ),
            ant("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
            ant("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "A"}}),
            ant("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "B"}}),
        ],
        fault="stall:4",
    )
    client = failover.Client({"main": anthropic(mock_server, price=MAIN_PRICE)})
    if face == "sync":
        with client.stream("Hi") as stream:
            assert next(stream).text == "A"
        stream.close()  # a second close counts nothing
    else:

        async def run() -> None:
            async with client.stream_async("Hi") as stream:
                async for chunk in stream:
                    assert chunk.text == "A"
                    break
            await stream.aclose()

        asyncio.run(run())
    stats = client.stats()
    assert stats.calls == 1
    main = stats.providers["main"]
    assert (main.answered, main.attempts, main.failures) == (0, 1, {})
    assert main.input_tokens == 300
    # Closed before its end: its output is not known, so neither is its cost.
    assert (main.output_tokens, main.cost) == (None, None)


def test_a_stream_whose_task_is_cancelled_mid_read_is_counted(mock_server: MockServer) -> None:
    """Cancelled while a read waits on the network (the read holds the stream,
    so the close completes on the runtime once the read lets go)."""
    mock_server.push(sse=[oa_text("A"), oa_text("B")], fault="stall:2")
    client = failover.Client({"main": openai(mock_server)})

    async def run() -> failover.Stats:
        chunks: list[failover.Chunk] = []

        async def read() -> None:
            async for chunk in client.stream_async("Hi"):
                chunks.append(chunk)

        task = asyncio.create_task(read())
        while len(chunks) < 2:  # both events arrived; the next read waits
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.02)
        return await cancelled_then_counted(task, client)

    stats = asyncio.run(run())
    assert stats.calls == 1
    assert (stats.providers["main"].attempts, stats.providers["main"].answered) == (1, 0)


async def cancelled_then_counted(
    task: asyncio.Task[None], client: failover.Client
) -> failover.Stats:
    """Cancels ``task``, then its client's stats once the call is counted (a
    stream's close completes on the runtime once the read it cancelled lets
    go: up to 2 s)."""
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(400):
        if client.stats().calls:
            break
        await asyncio.sleep(0.005)
    return client.stats()


UNAUTHORIZED = {"error": {"message": "Incorrect API key", "type": "invalid_request_error"}}


def wait_for_request(server: MockServer) -> None:
    """Until ``server`` has been sent a request (its answer hangs)."""
    for _ in range(1000):
        if server.requests:
            return
        threading.Event().wait(0.005)
    raise AssertionError("no request came")


def assert_cut_after_a_failover(stats: failover.Stats) -> None:
    """``main`` refused (401), the call failed over to ``backup``, and was cut
    short while ``backup``'s request was in flight: both attempts counted."""
    assert stats.calls == 1
    main, backup = stats.providers["main"], stats.providers["backup"]
    assert (main.attempts, main.failures, main.failovers) == (1, {"auth": 1}, 1)
    assert (backup.attempts, backup.failures, backup.answered) == (1, {}, 0)


@pytest.mark.parametrize("what", ["prompt", "stream before its first content"])
def test_a_call_whose_task_is_cancelled_counts_what_it_sent(
    mock_server: MockServer, backup_server: MockServer, what: str
) -> None:
    mock_server.push(401, json=UNAUTHORIZED)
    backup_server.push(fault="hang")
    client = failover.Client({"main": openai(mock_server), "backup": openai(backup_server)})

    async def read() -> None:
        if what == "prompt":
            await client.prompt_async("Hi")
        else:
            async for _chunk in client.stream_async("Hi"):
                pass

    async def run() -> failover.Stats:
        task = asyncio.create_task(read())
        await asyncio.to_thread(wait_for_request, backup_server)
        return await cancelled_then_counted(task, client)

    assert_cut_after_a_failover(asyncio.run(run()))


def test_a_call_interrupted_in_its_wait_counts_what_it_sent(mock_server: MockServer) -> None:
    """Ctrl-C during a Retry-After wait: the rate-limited attempt was made."""
    mock_server.push(429, headers={"retry-after": "2"}, json={"error": {"message": "slow"}})

    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    client = failover.Client({"main": openai(mock_server)}, sleeper=interrupted)
    with pytest.raises(KeyboardInterrupt):
        client.prompt("Hi")
    stats = client.stats()
    assert stats.calls == 1
    assert stats.providers["main"].attempts == 1
    assert stats.providers["main"].failures == {"rate_limited": 1}


def test_a_call_ended_by_a_bad_key_partway_counts_what_it_sent(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    mock_server.push(401, json=UNAUTHORIZED)
    backup = failover.OpenAICompatible(
        model="m",
        base_url=backup_server.url,
        api_key=lambda: 42,  # type: ignore[arg-type,return-value]
    )
    client = failover.Client({"main": openai(mock_server), "backup": backup})
    with pytest.raises(failover.ConfigurationError):
        client.prompt("Hi")
    assert backup_server.requests == []
    stats = client.stats()
    assert stats.calls == 1
    assert (stats.providers["main"].attempts, stats.providers["backup"].attempts) == (1, 0)


def test_a_stream_closed_before_it_was_read_is_no_call(face: str, mock_server: MockServer) -> None:
    client = failover.Client({"main": openai(mock_server)})
    if face == "sync":
        client.stream("Hi").close()
    else:

        async def run() -> None:
            await client.stream_async("Hi").aclose()

        asyncio.run(run())
    assert mock_server.requests == []
    assert client.stats().calls == 0


def test_a_stream_that_breaks_after_content_is_a_failed_call(
    face: str, mock_server: MockServer
) -> None:
    mock_server.push(sse=[oa_text("Once "), oa_text("upon")], fault="cut:2")
    client = failover.Client({"main": openai(mock_server)})
    with pytest.raises(failover.StreamInterrupted):
        collect(face, client)
    stats = client.stats()
    assert stats.calls == 1
    main = stats.providers["main"]
    assert (main.answered, main.attempts) == (0, 1)
    assert sum(main.failures.values()) == 1


def test_a_failed_call_is_counted_from_its_error(call: Any, mock_server: MockServer) -> None:
    mock_server.push(status=400, json={"error": {"message": "bad"}})
    client = failover.Client({"main": openai(mock_server)}, retry=SINGLE_TRY)
    with pytest.raises(failover.BadRequest) as caught:
        call(client)
    stats = client.stats()
    assert stats.calls == 1
    assert caught.value.attempts[0].provider == "main"
    main = stats.providers["main"]
    assert (main.answered, main.attempts, main.failures) == (0, 1, {"bad_request": 1})
    assert stats.total.answered == 0


def test_a_stream_failing_before_content_is_a_failed_call(
    face: str, mock_server: MockServer
) -> None:
    mock_server.push(status=401, json={"error": {"message": "no"}})
    client = failover.Client({"main": openai(mock_server)}, retry=SINGLE_TRY)
    with pytest.raises(failover.AuthenticationError):
        collect(face, client)
    stats = client.stats()
    assert (stats.calls, stats.providers["main"].failures) == (1, {"auth": 1})


def test_embeddings_are_counted(face: str, mock_server: MockServer) -> None:
    mock_server.push_embeddings([[0.1, 0.2]])
    client = failover.Client({"main": openai(mock_server)})
    if face == "sync":
        client.embed("a")
    else:
        asyncio.run(client.embed_async("a"))
    stats = client.stats()
    assert (stats.calls, stats.providers["main"].answered, stats.total.attempts) == (1, 1, 1)


def test_pool_members_are_counted_by_their_own_names(
    call: Any, mock_server: MockServer, backup_server: MockServer
) -> None:
    mock_server.push_text("one")
    backup_server.push_text("two")
    pool = failover.Pool("gpt", [openai(mock_server), openai(backup_server)])
    client = failover.Client({"gpt": pool})
    call(client)
    call(client)
    stats = client.stats()
    assert set(stats.providers) == {"gpt/0", "gpt/1"}
    assert [s.answered for s in stats.providers.values()] == [1, 1]
    assert stats.total.answered == 2


def test_with_options_clients_share_the_stats(call: Any, mock_server: MockServer) -> None:
    mock_server.push_text()
    mock_server.push_text()
    client = failover.Client({"main": openai(mock_server)})
    other = client.with_options(timeout=5)
    call(other)
    assert client.stats().providers["main"].answered == 1
    call(client)
    assert other.stats().providers["main"].answered == 2


def test_many_threads_add_up(mock_server: MockServer) -> None:
    threads, calls_each = 8, 25
    for _ in range(threads * calls_each):
        mock_server.push(json=chat_answer(3, 2))
    client = failover.Client({"main": openai(mock_server, price=MAIN_PRICE)})
    snapshots: list[failover.Stats] = []

    def work() -> None:
        for _ in range(calls_each):
            client.prompt("Hi")
            snapshots.append(client.stats())

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    stats = client.stats()
    n = threads * calls_each
    assert (stats.calls, stats.total.answered, stats.total.attempts) == (n, n, n)
    assert (stats.total.input_tokens, stats.total.output_tokens) == (3 * n, 2 * n)
    assert stats.total.cost == pytest.approx(n * (3 * 1.0 + 2 * 5.0) / MILLION)
    # Every snapshot was consistent: its total is what its provider had.
    assert all(s.calls == s.providers["main"].answered for s in snapshots)


def test_stats_are_typed_values_with_a_readable_repr(mock_server: MockServer) -> None:
    mock_server.push_text()
    client = failover.Client({"main": openai(mock_server)})
    client.prompt("Hi")
    stats = client.stats()
    assert type(stats) is failover.Stats
    assert type(stats.total) is failover.ProviderStats
    shown = repr(stats)
    assert shown.startswith("Stats(calls=1, total=ProviderStats(answered=1, attempts=1,")
    assert "providers={'main': ProviderStats(answered=1," in shown
    assert "cost=None" in shown
    with pytest.raises(AttributeError):
        stats.total.answered = 5  # type: ignore[misc]
