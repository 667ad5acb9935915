"""Client-side limits through the public API: Limit(concurrency, rpm, tpm) on providers, pools
and quotas; a provider without room passed over, a wait for room through the sleeper bounded by
the deadline, fairness and cancellation, streams holding their slot, tpm corrected to the usage,
shared quotas. (Found by the issue's trial and review: retries failing over, corrections waking
waiters, deadlines under a FakeSleeper, a waiter not holding back a call with room.)
Fleet-wide limits are in test_fleet_limits.py."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import failover
from failover import ConfigurationError, Limit
from failover.testing import FakeSleeper, MockServer

from conftest import chat_answer, oa_text, openai

#: The client's providers drawing on one server each: "a" limited, "b" the backup.
Providers = dict[str, failover.Provider | failover.Pool]


def skips(attempts: list[failover.Attempt]) -> list[tuple[str, str]]:
    return [(a.provider, a.skipped) for a in attempts if a.skipped is not None]


def in_any_minute(times: list[float]) -> int:
    """The most of ``times`` (seconds) in any rolling minute."""
    times = sorted(times)
    return max(sum(1 for u in times if t <= u < t + 60) for t in times)


# Concurrency


def test_no_more_calls_in_flight_than_the_limit_across_threads(mock_server: MockServer) -> None:
    for _ in range(40):
        mock_server.push_text("ok", delay=0.05)
    client = failover.Client({"a": openai(mock_server, limit=Limit(concurrency=8))})
    with ThreadPoolExecutor(40) as pool:
        answers = list(pool.map(lambda _: client.prompt("hi").text, range(40)))
    assert answers == ["ok"] * 40
    assert 1 < mock_server.max_in_flight <= 8


def test_a_hundred_tasks_under_a_fake_sleeper_never_exceed_the_limit(
    mock_server: MockServer,
) -> None:
    for _ in range(100):
        mock_server.push_text("ok", delay=0.02)
    fake = FakeSleeper()
    client = failover.Client({"a": openai(mock_server, limit=Limit(concurrency=8))}, sleeper=fake)

    async def run() -> list[str]:
        answers = await asyncio.gather(*(client.prompt_async("hi") for _ in range(100)))
        return [a.text for a in answers]

    assert asyncio.run(run()) == ["ok"] * 100
    assert 1 < mock_server.max_in_flight <= 8
    # Waiting for a slot is no sleep a test asserts.
    fake.assert_never_slept()


def test_sync_threads_and_asyncio_tasks_share_one_limiter(mock_server: MockServer) -> None:
    for _ in range(24):
        mock_server.push_text("ok", delay=0.05)
    client = failover.Client({"a": openai(mock_server, limit=Limit(concurrency=2))})

    async def tasks() -> None:
        await asyncio.gather(*(client.prompt_async("hi") for _ in range(12)))

    threads = [threading.Thread(target=client.prompt, args=("hi",)) for _ in range(12)]
    for thread in threads:
        thread.start()
    asyncio.run(tasks())
    for thread in threads:
        thread.join()
    assert mock_server.pending == 0
    assert mock_server.max_in_flight <= 2


def test_a_provider_at_its_concurrency_limit_is_passed_over_for_the_backup(
    mock_server: MockServer, backup_server: MockServer, face: str
) -> None:
    mock_server.push(sse=[oa_text("streaming"), "data: [DONE]"], interval=0.3)
    mock_server.push_text("a again")
    backup_server.push_text("from b")
    client = failover.Client(
        {"a": openai(mock_server, limit=Limit(concurrency=1)), "b": openai(backup_server)}
    )
    # An open stream holds a's only slot until it is closed.
    with client.stream("hi") as stream:
        next(iter(stream))
        if face == "sync":
            r = client.prompt("hi")
        else:
            r = asyncio.run(client.prompt_async("hi"))
        assert r.text == "from b"
        assert skips(r.attempts) == [("a", "at its concurrency limit (1 in flight)")]
    # Closed, it gives the slot back.
    assert client.prompt("hi").text == "a again"


def test_with_no_room_anywhere_the_deadline_ends_the_wait_and_says_so(
    mock_server: MockServer, call: Callable[..., failover.Response]
) -> None:
    mock_server.push(sse=[oa_text("streaming"), "data: [DONE]"], interval=0.3)
    client = failover.Client(
        {"a": openai(mock_server, limit=Limit(concurrency=1))}, sleeper=FakeSleeper()
    )
    with client.stream("hi") as stream:
        next(iter(stream))
        with pytest.raises(failover.DeadlineExceeded) as caught:
            call(client, deadline=2.0)
    message = str(caught.value)
    assert "while waiting for capacity (a: at its concurrency limit (1 in flight))" in message
    assert skips(caught.value.attempts) == [("a", "at its concurrency limit (1 in flight)")]
    assert len(mock_server.requests) == 1


def test_a_cancelled_call_gives_its_slot_back(mock_server: MockServer) -> None:
    mock_server.push(fault="hang")
    mock_server.push_text("next")
    client = failover.Client({"a": openai(mock_server, limit=Limit(concurrency=1))})

    async def run() -> str:
        hanging = asyncio.ensure_future(client.prompt_async("hi"))
        while not mock_server.requests:
            await asyncio.sleep(0.01)
        hanging.cancel()
        with pytest.raises(asyncio.CancelledError):
            await hanging
        r = await asyncio.wait_for(client.prompt_async("hi"), 5)
        return r.text

    assert asyncio.run(run()) == "next"


def test_a_cancelled_waiter_gives_up_its_place(mock_server: MockServer) -> None:
    mock_server.push(sse=[oa_text("streaming"), "data: [DONE]"], interval=0.3)
    mock_server.push_text("second")
    client = failover.Client({"a": openai(mock_server, limit=Limit(concurrency=1))})

    async def run() -> str:
        stream = client.stream_async("hi")
        await stream.__anext__()
        waiter = asyncio.ensure_future(client.prompt_async("hi"))
        await asyncio.sleep(0.05)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        second = asyncio.ensure_future(client.prompt_async("hi"))
        await asyncio.sleep(0.05)
        await stream.aclose()
        return (await asyncio.wait_for(second, 5)).text

    assert asyncio.run(run()) == "second"
    assert len(mock_server.requests) == 2


def test_waiting_calls_get_room_in_arrival_order(mock_server: MockServer) -> None:
    mock_server.push(sse=[oa_text("streaming"), "data: [DONE]"], interval=0.3)
    for i in range(5):
        mock_server.push_text(f"answer {i}")
    client = failover.Client({"a": openai(mock_server, limit=Limit(concurrency=1))})
    order: list[int] = []

    async def one(i: int) -> None:
        await client.prompt_async(f"call {i}")
        order.append(i)

    async def run() -> None:
        stream = client.stream_async("hi")
        await stream.__anext__()
        waiters = []
        for i in range(5):
            waiters.append(asyncio.ensure_future(one(i)))
            await asyncio.sleep(0.02)  # each in line before the next comes
        await stream.aclose()
        await asyncio.gather(*waiters)

    asyncio.run(run())
    sent = [r.json["messages"][-1]["content"] for r in mock_server.requests[1:]]
    assert sent == [f"call {i}" for i in range(5)]
    assert order == list(range(5))


# Requests and tokens per minute


def test_rpm_over_three_virtual_minutes_starts_no_more_than_the_limit_in_any_minute(
    mock_server: MockServer, call: Callable[..., failover.Response]
) -> None:
    for _ in range(150):
        mock_server.push_text("ok")
    fake = FakeSleeper()
    client = failover.Client({"a": openai(mock_server, limit=Limit(rpm=60))}, sleeper=fake)
    started, waited = [], []
    for _ in range(150):
        waited.append(call(client).attempts[0].waited)
        started.append(fake.time())
    assert in_any_minute(started) == 60
    # The 61st and the 121st each waited a minute for the window: in their attempt's
    # `waited`, not among the sleeps (a wait for room may end early).
    assert [(i, w) for i, w in enumerate(waited) if w] == [(60, 60.0), (120, 60.0)]
    fake.assert_never_slept()


def test_concurrent_calls_under_rpm_wait_through_the_sleeper(mock_server: MockServer) -> None:
    for _ in range(25):
        mock_server.push_text("ok")
    fake = FakeSleeper()
    start = fake.time()
    client = failover.Client({"a": openai(mock_server, limit=Limit(rpm=10))}, sleeper=fake)

    async def run() -> None:
        await asyncio.gather(*(client.prompt_async("hi") for _ in range(25)))

    asyncio.run(run())
    assert mock_server.pending == 0
    # 10 at once, 10 a minute later, 5 two minutes later.
    assert fake.time() - start == pytest.approx(120.0)
    fake.assert_never_slept()


def test_tpm_is_charged_an_estimate_then_corrected_to_the_reported_usage(
    mock_server: MockServer, call: Callable[..., failover.Response]
) -> None:
    fake = FakeSleeper()
    client = failover.Client({"a": openai(mock_server, limit=Limit(tpm=1100))}, sleeper=fake)
    # Estimated at 400 characters / 4 + max_tokens 800 = 900 tokens; it used 150.
    mock_server.push(json=chat_answer(100, 50))
    call(client, "x" * 400, max_tokens=800)
    # 150 + 900 fits in 1100: the next goes at once (900 + 900 would not).
    mock_server.push(json=chat_answer(100, 800))
    call(client, "x" * 400, max_tokens=800)
    fake.assert_never_slept()
    # Now 150 + 900 are in the window: the next 900 waits for the first to leave it.
    mock_server.push(json=chat_answer(100, 50))
    r = call(client, "x" * 400, max_tokens=800)
    assert r.attempts[0].waited == 60.0


def test_a_stream_is_corrected_to_the_usage_at_its_end(mock_server: MockServer) -> None:
    fake = FakeSleeper()
    client = failover.Client({"a": openai(mock_server, limit=Limit(tpm=1100))}, sleeper=fake)
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    mock_server.push(sse=[oa_text("hi"), oa_text("", usage=usage, choices=[]), "data: [DONE]"])
    with client.stream("x" * 400, max_tokens=800) as stream:
        assert "".join(c.text for c in stream) == "hi"
    mock_server.push_text("next")
    client.prompt("x" * 400, max_tokens=800)
    fake.assert_never_slept()


def test_room_later_than_the_policy_waits_fails_over_to_a_sooner_one(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    fake = FakeSleeper()
    client = failover.Client(
        {
            "a": openai(mock_server, limit=Limit(rpm=1)),
            "b": openai(backup_server, limit=Limit(rpm=1)),
        },
        sleeper=fake,
    )
    mock_server.push_text("a")
    backup_server.push_text("b")
    assert client.prompt("hi").provider == "a"
    fake.advance(50)
    assert client.prompt("hi").provider == "b"
    fake.advance(5)
    # a has room in 5 s, b in 55 s: the call waits 5 s for a.
    mock_server.push_text("a again")
    r = client.prompt("hi")
    assert (r.provider, r.attempts[0].waited) == ("a", 5.0)
    # Now a's room is 60 s away and b's 50 s: the call waits for b, the sooner, and
    # records a as passed over.
    backup_server.push_text("b again")
    r = client.prompt("hi")
    assert r.provider == "b"
    assert r.attempts[-1].waited == 50.0
    assert skips(r.attempts) == [("a", "rpm limit: capacity in 10.0s")]


def test_room_later_than_the_policy_waits_anywhere_is_a_rate_limit_naming_its_provider(
    mock_server: MockServer, call: Callable[..., failover.Response]
) -> None:
    client = failover.Client(
        {"gpt": openai(mock_server, limit=Limit(rpm=1))},
        sleeper=FakeSleeper(),
        retry=failover.RetryPolicy(max_retry_after_last=5),
    )
    mock_server.push_text("one")
    call(client)
    with pytest.raises(failover.RateLimited) as caught:
        call(client)
    assert str(caught.value).startswith("gpt: no room under the client's limits: rpm limit")
    assert caught.value.provider == "gpt"
    assert caught.value.retry_after == pytest.approx(60.0)
    assert len(mock_server.requests) == 1


def test_a_hinted_429_empties_the_window_until_the_hint_runs_out(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    """While a call waits out a's 2 s rate limit to retry it (a is not cooling: it is being
    retried), a call made meanwhile finds a's window emptied by the 429 and goes to b."""
    inner: list[failover.Response] = []

    async def sleeper(seconds: float) -> None:
        # The retry's wait: another call is made during it.
        inner.append(await client.prompt_async("meanwhile"))

    client = failover.Client(
        {"a": openai(mock_server, limit=Limit(rpm=100)), "b": openai(backup_server)},
        sleeper=sleeper,
    )
    mock_server.push(429, headers={"retry-after": "2"}, json={"error": {"message": "slow"}})
    mock_server.push_text("a after its wait")
    backup_server.push_text("b meanwhile")
    outer = asyncio.run(client.prompt_async("hi"))
    assert outer.text == "a after its wait"
    (meanwhile,) = inner
    assert meanwhile.provider == "b"
    (skipped,) = skips(meanwhile.attempts)
    assert skipped[0] == "a"
    assert skipped[1].startswith("rate limited: capacity in ")


def test_headroom_headers_lower_what_the_limit_lets_through(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    client = failover.Client(
        {"a": openai(mock_server, limit=Limit(rpm=1000)), "b": openai(backup_server)},
        sleeper=FakeSleeper(),
    )
    headers = {"x-ratelimit-remaining-requests": "1", "x-ratelimit-reset-requests": "30s"}
    mock_server.push_text("a", headers=headers)
    mock_server.push_text("a")
    backup_server.push_text("b")
    answers = [client.prompt("hi") for _ in range(3)]
    assert [r.provider for r in answers] == ["a", "a", "b"]
    assert "say no request is left: capacity in 30.0s" in skips(answers[2].attempts)[0][1]


def test_a_retry_without_room_soon_enough_fails_over_to_the_backup(
    mock_server: MockServer, backup_server: MockServer, call: Callable[..., failover.Response]
) -> None:
    fake = FakeSleeper()
    client = failover.Client(
        {"a": openai(mock_server, limit=Limit(rpm=1)), "b": openai(backup_server)},
        sleeper=fake,
    )
    # a's 500 earns one quick retry; a's window has room only in a minute: the call
    # fails over at once instead of waiting (or running into its deadline).
    mock_server.push(500, json={"error": {"message": "oops"}})
    backup_server.push_text("from b")
    r = call(client, deadline=30)
    assert r.provider == "b"
    assert [a.provider for a in r.attempts] == ["a", "a", "b"]
    assert r.attempts[1].skipped.startswith("retry skipped: rpm limit: capacity in")


def test_room_made_by_a_correction_wakes_a_waiting_call(mock_server: MockServer) -> None:
    fake = FakeSleeper()
    start = fake.time()
    client = failover.Client({"a": openai(mock_server, limit=Limit(tpm=1100))}, sleeper=fake)
    # Each is estimated at 900 tokens; the first's answer says it used 150.
    mock_server.push(json=chat_answer(100, 50), delay=0.05)
    mock_server.push(json=chat_answer(100, 50))

    async def run() -> list[failover.Response]:
        return list(
            await asyncio.gather(
                *(client.prompt_async("x" * 400, max_tokens=800) for _ in range(2))
            )
        )

    answers = asyncio.run(run())
    # The second went when the first was corrected, not a minute later.
    assert fake.time() - start < 1.0
    assert sorted(a.attempts[0].waited for a in answers) == [0.0, 0.0]


def test_calls_waiting_for_a_slot_under_a_fake_sleeper_keep_to_their_deadline(
    mock_server: MockServer,
) -> None:
    for _ in range(30):
        mock_server.push_text("ok", delay=0.03)
    client = failover.Client(
        {"a": openai(mock_server, limit=Limit(concurrency=2))},
        sleeper=FakeSleeper(),
        deadline=30,
    )
    with ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(lambda _: client.prompt("hi").text, range(30)))
    # No call's deadline ran out while another call held the slot it waited for.
    assert answers == ["ok"] * 30


def test_a_waiter_in_line_for_one_provider_does_not_hold_back_a_call_with_room(
    mock_server: MockServer,
) -> None:
    provider = openai(mock_server, embedding_model="e", limit=Limit(concurrency=1), quota="org")
    client = failover.Client({"a": provider}, quotas={"org": Limit(concurrency=10)})
    mock_server.push(sse=[oa_text("streaming"), "data: [DONE]"], interval=0.3)
    mock_server.push_embeddings([[0.5]])
    mock_server.push_text("after")

    async def run() -> None:
        stream = client.stream_async("hi")
        await stream.__anext__()
        waiting = asyncio.ensure_future(client.prompt_async("hi"))
        await asyncio.sleep(0.05)
        # The chat call waits for a's slot; the embeddings call needs only the quota's.
        embedded = await asyncio.wait_for(client.embed_async(["x"]), 5)
        assert embedded.vectors == [[0.5]]
        assert not waiting.done()
        await stream.aclose()
        assert (await asyncio.wait_for(waiting, 5)).text == "after"

    asyncio.run(run())


def test_an_unbilled_failure_gives_its_tokens_back(mock_server: MockServer) -> None:
    fake = FakeSleeper()
    client = failover.Client({"a": openai(mock_server, limit=Limit(tpm=1000))}, sleeper=fake)
    mock_server.push(400, json={"error": {"message": "bad"}})
    with pytest.raises(failover.BadRequest):
        client.prompt("x" * 400, max_tokens=800)
    mock_server.push_text("ok")
    assert client.prompt("x" * 400, max_tokens=800).attempts[0].waited == 0.0


def test_a_restarted_stream_gives_its_slot_back_before_taking_one(
    mock_server: MockServer,
) -> None:
    client = failover.Client({"a": openai(mock_server, limit=Limit(concurrency=1))})
    mock_server.push(sse=[oa_text("half ")], fault="cut:1")
    mock_server.push(sse=[oa_text("whole"), "data: [DONE]"])
    with client.stream("hi", on_interrupt="restart") as stream:
        chunks = [c for c in stream if c.kind != "restart"]
    assert "".join(c.text for c in chunks).endswith("whole")


# Embeddings, pools and quotas


def test_embedding_limit_bounds_embeddings_and_limit_bounds_chat(
    mock_server: MockServer, face: str
) -> None:
    fake = FakeSleeper()
    provider = openai(
        mock_server,
        embedding_model="text-embedding-3-small",
        limit=Limit(rpm=100),
        embedding_limit=Limit(rpm=1),
    )
    client = failover.Client({"a": provider}, sleeper=fake)

    def embed() -> Any:
        if face == "sync":
            return client.embed(["x"])
        return asyncio.run(client.embed_async(["x"]))

    mock_server.push_embeddings([[0.1]])
    mock_server.push_text("chat")
    mock_server.push_embeddings([[0.2]])
    embed()
    assert client.prompt("hi").attempts[0].waited == 0.0
    second = embed()
    assert second.vectors == [[0.2]]
    assert second.attempts[0].waited == 60.0


def test_a_pool_limit_is_shared_by_its_members(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    with MockServer() as second:
        pool = failover.Pool(
            "gpt", [openai(mock_server), openai(second)], limit=Limit(concurrency=1)
        )
        client = failover.Client({"gpt": pool, "b": openai(backup_server)})
        mock_server.push(sse=[oa_text("streaming"), "data: [DONE]"], interval=0.3)
        backup_server.push_text("b")
        with client.stream("hi") as stream:
            next(iter(stream))
            r = client.prompt("hi")
        assert r.provider == "b"
        assert skips(r.attempts) == [
            ("gpt/1", "at pool gpt's concurrency limit (1 in flight)"),
            ("gpt/0", "at pool gpt's concurrency limit (1 in flight)"),
        ]
        assert len(second.requests) == 0


def test_a_rate_limit_cools_every_provider_of_its_quota(
    call: Callable[..., failover.Response],
) -> None:
    with MockServer() as a, MockServer() as b, MockServer() as c:
        client = failover.Client(
            {
                "a": openai(a, quota="org"),
                "b": failover.OpenAICompatible("gpt-4.1", base_url=b.url, api_key="k", quota="org"),
                "c": openai(c),
            },
            sleeper=FakeSleeper(),
        )
        a.push(429, headers={"retry-after": "30"}, json={"error": {"message": "org limit"}})
        c.push_text("from c")
        r = call(client)
        assert r.provider == "c"
        assert len(b.requests) == 0
        (skipped,) = skips(r.attempts)
        assert skipped[0] == "b"
        assert "its quota org was rate limited" in skipped[1]
        cooling = client.cooldowns()
        assert cooling["a"] == pytest.approx(30.0)
        assert cooling["b"] == pytest.approx(30.0)
        # health() agrees: b cools for its quota.
        health = client.health()["b"]
        assert health.cooling
        assert "its quota org was rate limited" in health.reason


def test_an_overload_stays_with_the_model_that_said_it(
    call: Callable[..., failover.Response],
) -> None:
    with MockServer() as a, MockServer() as b:
        client = failover.Client(
            {"a": openai(a, quota="org"), "b": openai(b, quota="org")}, sleeper=FakeSleeper()
        )
        a.push(529, headers={"retry-after": "30"}, json={"error": {"message": "overloaded"}})
        b.push_text("from b")
        assert call(client).provider == "b"
        assert set(client.cooldowns()) == {"a"}


def test_a_quota_limit_is_shared_by_its_providers(
    call: Callable[..., failover.Response],
) -> None:
    with MockServer() as a, MockServer() as b, MockServer() as c:
        client = failover.Client(
            {"a": openai(a, quota="org"), "b": openai(b, quota="org"), "c": openai(c)},
            quotas={"org": Limit(rpm=1)},
            sleeper=FakeSleeper(),
        )
        a.push_text("a")
        c.push_text("c")
        assert call(client).provider == "a"
        r = call(client)
        assert r.provider == "c"
        assert [p for p, _ in skips(r.attempts)] == ["a", "b"]
        assert len(b.requests) == 0


def test_without_limits_or_quotas_nothing_changes(mock_server: MockServer) -> None:
    for _ in range(30):
        mock_server.push_text("ok", delay=0.05)
    client = failover.Client({"a": openai(mock_server)})
    with ThreadPoolExecutor(30) as pool:
        list(pool.map(lambda _: client.prompt("hi"), range(30)))
    assert mock_server.max_in_flight > 8


# Options, checked when given


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Limit(), "at least one of"),
        (lambda: Limit(concurrency=0), "Limit concurrency must be an int from 1"),
        (lambda: Limit(rpm=True), "Limit rpm must be an int"),
        (lambda: Limit(tpm=-5), "Limit tpm must be an int"),
        (lambda: Limit(rpm=1.5), "Limit rpm must be an int"),
        (lambda: failover.OpenAI("m", api_key="k", limit=5), "limit must be a failover.Limit"),
        (
            lambda: failover.OpenAI("m", api_key="k", embedding_limit={"rpm": 1}),
            "embedding_limit must be a failover.Limit",
        ),
        (
            lambda: failover.Anthropic("m", api_key="k", embedding_limit=Limit(rpm=1)),
            "no embeddings API",
        ),
        (lambda: failover.OpenAI("m", api_key="k", quota=""), "quota must name"),
        (lambda: failover.OpenAI("m", api_key="k", quota=3), "quota must name"),
        (lambda: failover.OpenAI("m", api_key="k", quota="org|x"), "holds no '|'"),
        (lambda: failover.OpenAI("m", api_key="k", quota="org\tx"), "no control character"),
        (
            lambda: failover.Pool("p", [failover.OpenAI("m", api_key="k")], limit=Limit),
            "Pool 'p': limit must be a failover.Limit",
        ),
        (
            lambda: failover.Client(
                {"a": failover.OpenAI("m", api_key="k", quota="org")},
                quotas={"org-b": Limit(rpm=1)},
            ),
            "quotas names 'org-b', which no provider draws on",
        ),
        (
            lambda: failover.Client(
                {"a": failover.OpenAI("m", api_key="k", quota="org")}, quotas={"org": 5}
            ),
            "quotas['org'] must be a failover.Limit",
        ),
        (
            lambda: failover.Client({"a": failover.OpenAI("m", api_key="k")}, quotas=["org"]),
            "quotas must be a dict",
        ),
    ],
)
def test_limit_options_are_checked_when_given(make: Callable[[], Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(").replace("[", r"\[")):
        make()


def test_a_limit_reads_and_compares_as_a_value() -> None:
    limit = Limit(concurrency=8, tpm=200_000)
    assert repr(limit) == "Limit(concurrency=8, tpm=200000)"
    assert limit == Limit(tpm=200_000, concurrency=8)
    assert (limit.concurrency, limit.rpm, limit.tpm) == (8, None, 200_000)
    pool = failover.Pool("p", [failover.OpenAI("m", api_key="k")], limit=Limit(rpm=5))
    assert repr(pool).endswith("limit=Limit(rpm=5))")
