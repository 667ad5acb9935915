"""Client-side limits shared by a fleet on a real Redis (the `redis_url` fixture): concurrency
as leases that run out on their own, rpm windows shared across processes, quotas cooled
fleet-wide, and each process's own limits when Redis is away."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

from conftest import openai, prefix, redis_cli, wait_for

SLOW = {"error": {"message": "slow down"}}
#: The state timeout of these tests' clients: far above a loaded machine's slowest round trip,
#: so that what they check is the sharing (a timed-out take is this process's own, tested
#: apart with a stall).
TIMEOUT = 1.0


def _state(redis_url: str, pfx: str) -> failover.RedisState:
    return failover.RedisState(redis_url, prefix=pfx, timeout=TIMEOUT)


def _worker(
    redis_url: str,
    pfx: str,
    providers: str,
    *,
    calls: int,
    threads: int = 1,
    options: str = "",
) -> str:
    """A worker process's script: a client on the fleet state with `providers` (Python
    source of the dict), which prints "ready", waits for a line on stdin, then makes
    `calls` prompts over `threads` threads; for each, a line: "ok" or the error's class,
    the provider, and the sleeper's virtual time at its end (or the real time)."""
    return textwrap.dedent(
        f"""
        import sys, threading, time, failover
        from failover.testing import FakeSleeper
        sleeper = FakeSleeper() if {("sleeper=" in options)!r} else None
        client = failover.Client(
            {providers},
            state=failover.RedisState({redis_url!r}, prefix={pfx!r}, timeout={TIMEOUT}),
            {options}
        )
        print("ready", flush=True)
        sys.stdin.readline()
        lock = threading.Lock()
        waited = []
        def run(n):
            for _ in range(n):
                try:
                    r = client.prompt("Hi")
                    line = f"ok {{r.provider}}"
                    with lock:
                        waited.extend(a.waited for a in r.attempts)
                except failover.FailoverError as exc:
                    line = f"{{type(exc).__name__}} -"
                now = sleeper.time() if sleeper is not None else time.time()
                with lock:
                    print(line, now, flush=True)
        workers = [threading.Thread(target=run, args=(n,)) for n in
                   [{calls} // {threads} + (1 if i < {calls} % {threads} else 0)
                    for i in range({threads})]]
        for w in workers: w.start()
        for w in workers: w.join()
        if sleeper is not None:
            print("slept", sum(waited), flush=True)
        """
    )


def _provider(url: str, **options: str) -> str:
    extra = "".join(f", {k}={v}" for k, v in options.items())
    return f"failover.OpenAICompatible('gpt-4.1-mini', base_url={url!r}{extra})"


def _start(*scripts: str) -> list[subprocess.Popen[str]]:
    """Starts a worker per script, waits until each is ready, then lets them all go at once."""
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for script in scripts
    ]
    for worker in workers:
        assert worker.stdout is not None
        assert worker.stdout.readline().strip() == "ready"
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    return workers


def _outputs(workers: list[subprocess.Popen[str]]) -> list[list[list[str]]]:
    outputs = []
    for worker in workers:
        out, _ = worker.communicate(timeout=60)
        assert worker.returncode == 0
        outputs.append([line.split() for line in out.splitlines()])
    return outputs


def test_concurrency_is_counted_across_processes(redis_url: str, mock_server: MockServer) -> None:
    pfx = prefix()
    for _ in range(16):
        mock_server.push_text("a", delay=0.25)
    providers = f"{{'a': {_provider(mock_server.url, limit='failover.Limit(concurrency=4)')}}}"
    script = _worker(redis_url, pfx, providers, calls=8, threads=8, options="deadline=30,")
    outputs = _outputs(_start(script, script))
    assert [line[0] for out in outputs for line in out] == ["ok"] * 16
    # Each process alone would let 4 through, 8 together: the fleet lets 4 through in all,
    # and not one at a time.
    assert 1 < mock_server.max_in_flight <= 4


def test_a_killed_processs_slot_frees_when_its_lease_runs_out(
    redis_url: str, mock_server: MockServer
) -> None:
    pfx = prefix()
    limit = "failover.Limit(concurrency=1)"
    mock_server.push(fault="hang")
    providers = f"{{'a': {_provider(mock_server.url, limit=limit)}}}"
    (holder,) = _start(_worker(redis_url, pfx, providers, calls=1, options="timeout=60,"))
    wait_for(lambda: len(mock_server.requests) == 1, within=10)
    leases = f"{pfx}:limit:a|gpt-4.1-mini:leases"
    assert redis_cli(redis_url, "ZCARD", leases) == "1"
    # The lease is kept while the call lives (every second, for 3 s each time): past its
    # first 3 s, it still runs out later than now.
    time.sleep(3.5)
    assert _lease_ends_ms(redis_url, leases) > _redis_now_ms(redis_url)
    client = failover.Client(
        {"a": openai(mock_server, limit=failover.Limit(concurrency=1))},
        state=_state(redis_url, pfx),
    )
    os.kill(holder.pid, signal.SIGKILL)
    holder.communicate(timeout=10)  # reaps it and closes its pipes
    mock_server.push_text("free")
    started = time.perf_counter()
    # Its slot is the dead process's until the lease runs out (3 s at most), then this
    # call's (a wide margin: the deadline).
    r = client.prompt("Hi", deadline=20)
    assert r.text == "free"
    assert time.perf_counter() - started < 10
    # Given back once the call ended.
    wait_for(lambda: redis_cli(redis_url, "ZCARD", leases) == "0", within=5)


def _lease_ends_ms(redis_url: str, leases: str) -> float:
    (_, score) = redis_cli(redis_url, "ZRANGE", leases, "0", "-1", "WITHSCORES").split()
    return float(score)


def _redis_now_ms(redis_url: str) -> float:
    seconds, micros = redis_cli(redis_url, "TIME").split()
    return int(seconds) * 1000 + int(micros) / 1000


def test_a_slot_in_the_fleet_is_waited_for_and_given_back(
    redis_url: str, mock_server: MockServer
) -> None:
    pfx = prefix()

    def client() -> failover.Client:
        return failover.Client(
            {"a": openai(mock_server, limit=failover.Limit(concurrency=1))},
            state=_state(redis_url, pfx),
        )

    first, second = client(), client()
    mock_server.push_text("first", delay=0.5)
    mock_server.push_text("second")
    answers: list[failover.Response] = []
    holder = threading.Thread(target=lambda: answers.append(first.prompt("Hi")))
    holder.start()
    wait_for(lambda: len(mock_server.requests) == 1, within=5)
    # Another client (as another process: nothing in its own process holds the slot).
    r = second.prompt("Hi", deadline=10)
    holder.join(10)
    assert (answers[0].text, r.text) == ("first", "second")
    assert mock_server.max_in_flight == 1


def test_a_slot_held_elsewhere_is_waited_for_in_real_time_under_a_fake_sleeper(
    redis_url: str, mock_server: MockServer, call: Any
) -> None:
    # A slot another process holds is freed unheard: the waiter asks again every 100 ms of
    # real time, a pause its FakeSleeper neither records nor moves for (as a request in
    # flight), so its 5 s of virtual deadline are not burnt by asking.
    pfx = prefix()
    holder = failover.Client(
        {"a": openai(mock_server, limit=failover.Limit(concurrency=1))},
        state=_state(redis_url, pfx),
    )
    fake = FakeSleeper()
    waiter = failover.Client(
        {"a": openai(mock_server, limit=failover.Limit(concurrency=1))},
        state=_state(redis_url, pfx),
        sleeper=fake,
        deadline=5,
    )
    mock_server.push_text("held", delay=0.6)
    mock_server.push_text("waited")
    thread = threading.Thread(target=holder.prompt, args=("Hi",))
    thread.start()
    wait_for(lambda: len(mock_server.requests) == 1, within=5)
    started = fake.time()
    assert call(waiter, "Hi").text == "waited"
    thread.join(10)
    assert fake.sleeps == [] and fake.time() == started
    assert mock_server.max_in_flight == 1


def test_rpm_is_shared_across_processes(redis_url: str, mock_server: MockServer) -> None:
    pfx = prefix()
    for _ in range(6):
        mock_server.push_text("a")
    providers = f"{{'a': {_provider(mock_server.url, limit='failover.Limit(rpm=3)')}}}"
    options = "sleeper=sleeper, retry=failover.RetryPolicy(max_retry_after_last=120),"
    script = _worker(redis_url, pfx, providers, calls=3, options=options)
    outputs = _outputs(_start(script, script))
    starts = sorted(float(line[2]) for out in outputs for line in out if line[0] == "ok")
    assert len(starts) == 6
    # Each process's calls are timed by its own FakeSleeper (Unix seconds, on the second):
    # no rolling minute holds more than 3 of the 6 between them.
    assert all(sum(1 for t in starts if s <= t < s + 60) <= 3 for s in starts), starts
    # Alone, each would have started its 3 at once: one of them waited for the other's.
    slept = [float(out[-1][1]) for out in outputs]
    assert max(slept) >= 55, slept


def test_the_window_is_charged_by_one_script_and_corrected_to_the_usage(
    redis_url: str, mock_server: MockServer
) -> None:
    pfx = prefix()
    client = failover.Client(
        {"a": openai(mock_server, limit=failover.Limit(rpm=100, tpm=10_000))},
        state=_state(redis_url, pfx),
    )
    mock_server.push(json={**_answer(), "usage": _usage(7, 5)})
    client.prompt("Hi", max_tokens=1000)
    base = f"{pfx}:limit:a|gpt-4.1-mini"
    assert redis_cli(redis_url, "ZCARD", f"{base}:window") == "1"
    # The estimate (input / 4 + max_tokens) is replaced by the reported 12, not added to.
    wait_for(lambda: redis_cli(redis_url, "HGET", f"{base}:tokens", "=") == "12", within=3)
    # Another client of the fleet sees the window: its request is the second.
    other = failover.Client(
        {"a": openai(mock_server, limit=failover.Limit(rpm=100, tpm=10_000))},
        state=_state(redis_url, pfx),
    )
    mock_server.push(json={**_answer(), "usage": _usage(3, 3)})
    other.prompt("Hi")
    assert redis_cli(redis_url, "ZCARD", f"{base}:window") == "2"
    wait_for(lambda: redis_cli(redis_url, "HGET", f"{base}:tokens", "=") == "18", within=3)
    # The keys run out on their own.
    assert 0 < int(redis_cli(redis_url, "PTTL", f"{base}:window")) <= 61_000


def test_limits_are_shared_under_the_name_and_model_of_what_they_limit(
    redis_url: str, mock_server: MockServer
) -> None:
    pfx = prefix()
    pool = failover.Pool("p", [openai(mock_server)], limit=failover.Limit(rpm=10))
    client = failover.Client(
        {
            "a": openai(
                mock_server,
                embedding_model="text-embedding-3-small",
                limit=failover.Limit(rpm=10),
                embedding_limit=failover.Limit(rpm=10),
            ),
            "p": pool,
        },
        state=_state(redis_url, pfx),
    )
    mock_server.push_text("a")
    mock_server.push_embeddings([[0.1]])
    mock_server.push_text("p")
    client.prompt("Hi")
    client.embed(["Hi"])
    client.prompt("Hi", provider="p")
    keys = redis_cli(redis_url, "KEYS", f"{pfx}:limit:*").splitlines()
    assert sorted(keys) == [
        f"{pfx}:limit:a:embeddings|text-embedding-3-small:window",
        f"{pfx}:limit:a|gpt-4.1-mini:window",
        f"{pfx}:limit:pool p:window",
    ]


def _answer() -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "model": "gpt-4.1-mini",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "x"}, "finish_reason": "stop"}
        ],
    }


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def test_a_fleet_rpm_wait_is_on_the_calls_clock(
    redis_url: str, mock_server: MockServer, call: Any
) -> None:
    pfx = prefix()
    fake = FakeSleeper()
    policy = failover.RetryPolicy(max_retry_after_last=120)

    def client() -> failover.Client:
        return failover.Client(
            {"a": openai(mock_server, limit=failover.Limit(rpm=1))},
            state=_state(redis_url, pfx),
            sleeper=fake,
            retry=policy,
        )

    mock_server.push_text("one")
    mock_server.push_text("two")
    assert call(client(), "Hi").text == "one"
    # A fresh client (nothing in its own window): the fleet's window makes it wait the
    # rest of the minute, on the sleeper's clock (in the attempt's wait: a wait for room
    # may end early, so it is not one of the sleeps).
    r = call(client(), "Hi")
    assert r.text == "two"
    assert r.attempts[0].waited == 60.0
    fake.assert_never_slept()


def test_the_fleets_tokens_are_the_reported_usage_and_bound_another_client(
    redis_url: str, mock_server: MockServer, call: Any
) -> None:
    pfx = prefix()
    fake = FakeSleeper()

    def client() -> failover.Client:
        return failover.Client(
            {"a": openai(mock_server, limit=failover.Limit(tpm=100))},
            state=_state(redis_url, pfx),
            sleeper=fake,
            retry=failover.RetryPolicy(max_retry_after_last=120),
        )

    mock_server.push(json={**_answer(), "usage": _usage(60, 30)})
    mock_server.push(json={**_answer(), "usage": _usage(5, 5)})
    # Kept alive: a client dropped at once may drop its writes not yet sent (the correction).
    first = client()
    call(first, "Hi")
    tokens = f"{pfx}:limit:a|gpt-4.1-mini:tokens"
    wait_for(lambda: redis_cli(redis_url, "HGET", tokens, "=") == "90", within=3)
    # A fresh client: 90 of the fleet's 100 are spent, it needs about 21 (max_tokens 20),
    # so it waits until the first request leaves the window.
    r = call(client(), "Hi", max_tokens=20)
    assert r.text == "x"
    assert r.attempts[0].waited == 60.0


@pytest.mark.mock_server(assert_all_used=False)
def test_with_redis_away_the_limits_are_the_processs_own_and_it_says_so_once(
    mock_server: MockServer, caplog: Any
) -> None:
    import socket

    caplog.set_level(logging.WARNING, logger="failover")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens there
    client = failover.Client(
        {"a": openai(mock_server, limit=failover.Limit(concurrency=1))},
        state=failover.RedisState(f"redis://127.0.0.1:{port}", prefix=prefix()),
    )
    for _ in range(6):
        mock_server.push_text("a", delay=0.1)
    threads = [threading.Thread(target=lambda: client.prompt("Hi", deadline=20)) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(mock_server.requests) == 6
    assert mock_server.max_in_flight == 1
    said = [r for r in caplog.records if "Redis state is unavailable" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in said]


def test_a_429_in_one_process_cools_its_quota_in_another(
    redis_url: str, mock_server: MockServer, backup_server: MockServer
) -> None:
    pfx = prefix()
    with MockServer() as other_model:
        providers = {
            "a": openai(mock_server, quota="org"),
            "b": failover.OpenAICompatible(
                "gpt-4o", base_url=other_model.url, api_key="k", quota="org"
            ),
            "c": openai(backup_server),
        }
        watcher = failover.Client(providers, state=_state(redis_url, pfx))
        watcher.cooldowns()
        mock_server.push(429, headers={"retry-after": "30"}, json=SLOW)
        backup_server.push_text("c")
        source = (
            f"{{'a': {_provider(mock_server.url, quota=repr('org'))}, "
            f"'b': failover.OpenAICompatible('gpt-4o', base_url={other_model.url!r}, "
            f"quota='org'), 'c': {_provider(backup_server.url)}}}"
        )
        (worker,) = _start(_worker(redis_url, pfx, source, calls=1))
        (out,) = _outputs([worker])
        assert out[0][:2] == ["ok", "c"], out
        # The quota's cooldown reached this process: b, which never answered, cools too.
        wait_for(lambda: {"a", "b"} <= set(watcher.cooldowns()), within=5)
        backup_server.push_text("c again")
        r = watcher.prompt("Hi")
        assert r.provider == "c"
        assert [a.skipped is not None for a in r.attempts] == [True, True, False]
        assert other_model.requests == []


@pytest.mark.mock_server(assert_all_used=False)
def test_limits_are_shared_again_once_redis_is_back(
    own_redis: tuple[str, Any], mock_server: MockServer, caplog: Any
) -> None:
    url, (start, stop) = own_redis
    caplog.set_level(logging.WARNING, logger="failover")
    pfx = prefix()
    client = failover.Client(
        {"a": openai(mock_server, limit=failover.Limit(rpm=1000))},
        state=_state(url, pfx),
    )
    window = f"{pfx}:limit:a|gpt-4.1-mini:window"
    for _ in range(100):
        mock_server.push_text("a")
    client.prompt("Hi")
    assert redis_cli(url, "ZCARD", window) == "1"
    stop()
    # Counted in this process alone meanwhile, without a failed call.
    for _ in range(3):
        assert client.prompt("Hi").text == "a"
    start()  # empty: what was counted before is gone with the old server

    def shared_again() -> bool:
        client.prompt("Hi")
        time.sleep(0.05)
        return redis_cli(url, "EXISTS", window) == "1"

    wait_for(shared_again, within=10)
    said = [r.getMessage() for r in caplog.records]
    assert any("Redis state is unavailable" in m for m in said), said
    assert any("limits are shared again" in m for m in said), said


@pytest.mark.mock_server(assert_all_used=False)
def test_after_a_stall_the_limits_are_shared_again(redis_url: str, mock_server: MockServer) -> None:
    # Nothing but a limit asks Redis here (no budget, pool or cooldown): the writer
    # notices on its own that a Redis taken for down answers again.
    pfx = prefix()
    client = failover.Client(
        {"a": openai(mock_server, limit=failover.Limit(rpm=1000))},
        state=failover.RedisState(redis_url, prefix=pfx, timeout=0.05),
        retry=failover.RetryPolicy(budget=None),
    )
    window = f"{pfx}:limit:a|gpt-4.1-mini:window"
    for _ in range(100):
        mock_server.push_text("a")
    client.prompt("Hi")
    stall = subprocess.Popen(
        ["redis-cli", "-p", redis_url.rsplit(":", 1)[1], "debug", "sleep", "0.5"]
    )
    time.sleep(0.1)
    started = time.perf_counter()
    assert client.prompt("Hi").text == "a"  # the take times out: this process's own
    assert time.perf_counter() - started < 0.4
    stall.wait(5)
    # (The take that timed out ran once Redis woke: a start counted twice errs on the
    # side of fewer requests, and a lease never kept runs out on its own.)
    counted = int(redis_cli(redis_url, "ZCARD", window))

    def shared_again() -> bool:
        client.prompt("Hi")
        time.sleep(0.05)
        return int(redis_cli(redis_url, "ZCARD", window)) > counted

    wait_for(shared_again, within=5)
