"""Load and soak: failover against a server that fails 30 % of requests at random.

    make soak                              # release build, 10 minutes of soak
    make soak SOAK_MINUTES=1               # a quick run (about 1.5 minutes in all)
    .venv/bin/python bench/soak.py --minutes 1 --calls 2000   # smaller still

Phases, on one client each (a chain of two providers, "a" and "b", on the fault server):
  1. burst:   10,000 concurrent async calls (prompt_async and stream_async, half each);
  2. threads: 32 threads sharing one client, making sync calls (prompt and stream);
  3. soak:    steady mixed load (async tasks and a few threads) for --minutes, sampling this
              process's RSS (/proc/self/status) and open fds (/proc/self/fd) every few seconds.

Checks (exit status 1 if any fails):
  - every call ended in an answer or a FailoverError subclass (never another exception);
  - the server's request log reconciles with `.attempts` exactly: per call, as many requests
    as attempts that were sent, to the same providers in the same order, 429/503/529 seen
    with the status the server sent; no request the client does not know of;
  - RSS flat: the soak's last sample within --rss-tolerance of its level after the warm-up;
  - no file descriptor left open: after the clients are closed, the fds are the baseline's.

The fault server (bench/soak_server.py) runs in its own process, so its memory and sockets
are not counted here.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, TextIO

import failover

HERE = os.path.dirname(os.path.abspath(__file__))
KEY = "sk-soak-local-only"
MIB = 1024 * 1024


def rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def open_fds() -> list[str]:
    """What each open descriptor is (a socket, a pipe, a file), as /proc says."""
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            names.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass  # the descriptor listdir itself held, closed by now
    return sorted(names)


def released_rss() -> int | None:
    """RSS after glibc returns its free memory to the system (None off glibc): what of the
    peak is still in use, as opposed to kept by the allocator for reuse."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return None
    return rss_bytes()


def policy() -> failover.RetryPolicy:
    """Short waits so the soak keeps moving: the server's hints are 0-0.2 s anyway. A budget
    that lets most retries through, and short cooldowns, so most calls answer yet both paths
    (refused retries, cooling providers) are exercised."""
    return failover.RetryPolicy(
        max_retries=2,
        max_retries_last=4,
        max_retry_after=1.0,
        max_retry_after_last=1.0,
        backoff=failover.Backoff(initial=0.01, multiplier=2.0, max=0.2),
        budget=failover.RetryBudget(ratio=1.0, min_retries_per_second=100.0, window=10.0),
        max_cooldown=1.0,
        max_hinted_cooldown=0.2,
    )


def make_client(url: str) -> failover.Client:
    def provider(name: str) -> failover.OpenAICompatible:
        # 529 counts as overloaded, as on Anthropic's wire.
        return failover.OpenAICompatible(
            model="soak-model", base_url=f"{url}/{name}", api_key=KEY, overloaded_statuses=[529]
        )

    return failover.Client(
        {"a": provider("a"), "b": provider("b")}, retry=policy(), timeout=30.0, deadline=60.0
    )


class Records:
    """Every call's outcome, one JSON line each, on disk: kept out of this process's memory
    so the soak's RSS is the library's."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.file: TextIO = open(path, "w", buffering=1 << 20)
        self.lock = threading.Lock()

    def write(self, call: str, kind: str, outcome: str, attempts: tuple[Any, ...]) -> None:
        sent = [(a.provider, a.status) for a in attempts if a.skipped is None]
        skipped = sum(1 for a in attempts if a.skipped is not None)
        line = json.dumps([call, kind, outcome, sent, skipped])
        with self.lock:
            self.file.write(line + "\n")

    def close(self) -> None:
        self.file.close()


def outcome_of(error: BaseException) -> str:
    """A FailoverError subclass's name; anything else is a failed check."""
    if isinstance(error, failover.FailoverError) and type(error) is not failover.FailoverError:
        return type(error).__name__
    return f"UNTYPED {type(error).__module__}.{type(error).__name__}: {error}"


def sync_call(client: failover.Client, call: str, kind: str, records: Records) -> None:
    headers = {"x-soak-call": call}
    try:
        if kind == "prompt":
            response = client.prompt("Hi", max_tokens=16, headers=headers)
        else:
            restart = "restart" if kind == "stream-restart" else "raise"
            with client.stream("Hi", max_tokens=16, headers=headers, on_interrupt=restart) as s:
                for _ in s:
                    pass
            response = s.response
        records.write(call, kind, "answer", response.attempts)
    except Exception as error:  # every exception is recorded and judged: none escapes
        records.write(call, kind, outcome_of(error), getattr(error, "attempts", ()))


async def async_call(client: failover.Client, call: str, kind: str, records: Records) -> None:
    headers = {"x-soak-call": call}
    try:
        if kind == "prompt":
            response = await client.prompt_async("Hi", max_tokens=16, headers=headers)
        else:
            restart = "restart" if kind == "stream-restart" else "raise"
            async with client.stream_async(
                "Hi", max_tokens=16, headers=headers, on_interrupt=restart
            ) as s:
                async for _ in s:
                    pass
            response = s.response
        records.write(call, kind, "answer", response.attempts)
    except Exception as error:
        records.write(call, kind, outcome_of(error), getattr(error, "attempts", ()))


KINDS = ("prompt", "stream", "prompt", "stream-restart")


def kind_of(n: int) -> str:
    return KINDS[n % len(KINDS)]


@dataclass
class Sample:
    at: float
    rss: int
    fds: int


@dataclass
class Report:
    lines: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def say(self, text: str) -> None:
        print(text, flush=True)
        self.lines.append(text)

    def check(self, ok: bool, what: str) -> None:
        self.say(f"  [{'ok' if ok else 'FAIL'}] {what}")
        if not ok:
            self.failed.append(what)


# --------------------------------------------------------------------------- phases


def burst(url: str, calls: int, records: Records) -> float:
    async def run() -> None:
        with make_client(url) as client:
            await asyncio.gather(
                *(async_call(client, f"burst-{n}", kind_of(n), records) for n in range(calls))
            )

    began = time.monotonic()
    asyncio.run(run())
    return time.monotonic() - began


def threads(url: str, count: int, per_thread: int, records: Records) -> float:
    with make_client(url) as client:

        def work(t: int) -> None:
            for n in range(per_thread):
                sync_call(client, f"thread-{t}-{n}", kind_of(n + t), records)

        workers = [threading.Thread(target=work, args=(t,)) for t in range(count)]
        began = time.monotonic()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        return time.monotonic() - began


def soak(
    url: str,
    seconds: float,
    tasks: int,
    thread_count: int,
    pause: float,
    sample_every: float,
    records: Records,
) -> tuple[list[Sample], int]:
    """Steady load for ``seconds`` (each worker pausing ``pause`` between its calls, so the
    soak leaves the other core to others); the samples, and the number of calls made."""
    samples: list[Sample] = []
    made = [0]
    made_lock = threading.Lock()
    began = time.monotonic()
    until = began + seconds

    def sample() -> None:
        samples.append(
            Sample(time.monotonic() - began, rss_bytes(), len(os.listdir("/proc/self/fd")))
        )

    def count() -> int:
        with made_lock:
            made[0] += 1
            return made[0]

    with make_client(url) as client:

        def work(t: int) -> None:
            while time.monotonic() < until:
                n = count()
                sync_call(client, f"soak-t{t}-{n}", kind_of(n), records)
                time.sleep(pause)

        async def task(t: int) -> None:
            while time.monotonic() < until:
                n = count()
                await async_call(client, f"soak-a{t}-{n}", kind_of(n), records)
                await asyncio.sleep(pause)

        async def sampler() -> None:
            while time.monotonic() < until:
                sample()
                await asyncio.sleep(sample_every)

        async def run() -> None:
            await asyncio.gather(sampler(), *(task(t) for t in range(tasks)))

        workers = [threading.Thread(target=work, args=(t,)) for t in range(thread_count)]
        for worker in workers:
            worker.start()
        asyncio.run(run())
        for worker in workers:
            worker.join()
        sample()
    return samples, made[0]


# --------------------------------------------------------------------------- the server


class FaultServer:
    def __init__(self, log_path: str, fail_rate: float, seed: int) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                os.path.join(HERE, "soak_server.py"),
                "--log",
                log_path,
                "--fail-rate",
                str(fail_rate),
                "--seed",
                str(seed),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())
        self.url = f"http://127.0.0.1:{self.port}"

    def control(self, path: str) -> int:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.request("GET", path)
            return int(connection.getresponse().read())
        finally:
            connection.close()

    def stop(self) -> None:
        try:
            self.control("/__stop")
            self.process.wait(timeout=30)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            assert self.process.stdout is not None
            self.process.stdout.close()


# --------------------------------------------------------------------------- reconciling


def reconcile(records_path: str, log_path: str, report: Report, expected: dict[str, int]) -> None:
    server: dict[str, list[tuple[str, str]]] = {}
    with open(log_path) as log:
        for line in log:
            call, provider, _retry_count, what = line.rstrip("\n").split("\t")
            server.setdefault(call, []).append((provider, what))
    client: dict[str, list[Any]] = {}
    duplicates = 0
    with open(records_path) as records:
        for line in records:
            call, kind, outcome, sent, skipped = json.loads(line)
            duplicates += call in client
            client[call] = [kind, outcome, sent, skipped]

    for phase, issued in expected.items():
        ended = sum(1 for call in client if call.startswith(phase + "-"))
        outcomes = Counter(
            record[1] for call, record in client.items() if call.startswith(phase + "-")
        )
        attempts = sum(
            len(record[2]) for call, record in client.items() if call.startswith(phase + "-")
        )
        requests = sum(len(v) for call, v in server.items() if call.startswith(phase + "-"))
        shown = ", ".join(f"{name} {n}" for name, n in outcomes.most_common())
        report.say(f"- {phase}: {ended} calls ({shown}); {attempts} attempts, {requests} requests")
        if issued >= 0:
            report.check(ended == issued, f"{phase}: every one of the {issued} calls accounted for")
    untyped = [call for call, record in client.items() if record[1].startswith("UNTYPED")]
    report.check(not untyped, f"every call an answer or a typed FailoverError ({len(untyped)} not)")
    for call in untyped[:5]:
        report.say(f"    {call}: {client[call][1]}")
    report.check(duplicates == 0, f"no call recorded twice ({duplicates})")

    unknown = [call for call in server if call not in client]
    report.check(not unknown, f"no request the client does not know of ({len(unknown)})")
    mismatched = []
    for call, (_kind, _outcome, sent, _skipped) in client.items():
        received = server.get(call, [])
        same = len(sent) == len(received) and all(
            provider == got_provider
            and (what not in ("429", "503", "529", "200") or str(status) == what or what == "200")
            for (provider, status), (got_provider, what) in zip(sent, received)
        )
        if not same:
            mismatched.append((call, sent, received))
    total_attempts = sum(len(record[2]) for record in client.values())
    total_requests = sum(len(v) for v in server.values())
    report.check(
        not mismatched and total_attempts == total_requests,
        f"server log reconciled with .attempts per call ({total_requests} requests, "
        f"{total_attempts} attempts, {len(mismatched)} calls differ)",
    )
    for call, sent, received in mismatched[:10]:
        report.say(
            f"    {call} ({client[call][0]}, {client[call][1]}): attempts {sent}, server {received}"
        )


# --------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="soak length (10)")
    parser.add_argument("--calls", type=int, default=10_000, help="concurrent async calls (10,000)")
    parser.add_argument("--threads", type=int, default=32, help="threads sharing a client (32)")
    parser.add_argument("--thread-calls", type=int, default=100, help="sync calls per thread (100)")
    parser.add_argument("--soak-tasks", type=int, default=32, help="async tasks in the soak (32)")
    parser.add_argument("--soak-threads", type=int, default=4, help="threads in the soak (4)")
    parser.add_argument(
        "--soak-pause", type=float, default=0.05, help="seconds a soak worker waits between calls"
    )
    parser.add_argument("--sample-every", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--fail-rate", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument(
        "--rss-tolerance",
        type=float,
        default=0.03,
        help="end RSS may exceed the post-warm-up level by this fraction, or 8 MiB (0.03)",
    )
    args = parser.parse_args()
    random.seed(args.seed)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    report = Report()
    native = failover._native.__file__
    report.say(f"failover soak: {native}")
    try:
        from run import native_build  # bench/run.py's reading of the build profile

        report.say(f"  {native_build()}")
    except ImportError:
        pass

    workdir = tempfile.mkdtemp(prefix="failover-soak-")
    log_path = os.path.join(workdir, "requests.tsv")
    records_path = os.path.join(workdir, "calls.jsonl")
    server = FaultServer(log_path, args.fail_rate, args.seed)
    records = Records(records_path)
    try:
        # Two runtimes live for the process, with their descriptors: the shared one (async
        # calls, streams, a thread's first sync call) and this thread's own (its later sync
        # calls). Both are made before the baseline, by calls on a client of its own, so the
        # baseline counts them.
        with make_client(server.url) as warm:
            sync_call(warm, "warmup-0", "prompt", records)
            sync_call(warm, "warmup-1", "prompt", records)
            asyncio.run(async_call(warm, "warmup-2", "prompt", records))
        # close() ends a client's connections in the background (within half a second here).
        time.sleep(1.0)
        baseline = open_fds()
        start_rss = rss_bytes()
        report.say(
            f"fault server pid {server.process.pid} at {server.url}, failing "
            f"{args.fail_rate:.0%}; baseline {len(baseline)} fds, RSS {start_rss / MIB:.1f} MiB"
        )

        took = burst(server.url, args.calls, records)
        after_burst = rss_bytes()
        report.say(
            f"burst: {args.calls} concurrent async calls in {took:.1f} s; "
            f"RSS {after_burst / MIB:.1f} MiB"
        )
        took = threads(server.url, args.threads, args.thread_calls, records)
        after_threads = rss_bytes()
        report.say(
            f"threads: {args.threads} x {args.thread_calls} sync calls in {took:.1f} s; "
            f"RSS {after_threads / MIB:.1f} MiB"
        )
        seconds = args.minutes * 60
        samples, made = soak(
            server.url,
            seconds,
            args.soak_tasks,
            args.soak_threads,
            args.soak_pause,
            args.sample_every,
            records,
        )
        time.sleep(1.0)  # the last connections' closes, as for the baseline
        final_fds = open_fds()
        records.close()
        server.control("/__flush")
    finally:
        if not records.file.closed:
            records.close()
        server.stop()

    # RSS over the soak: the warm-up is its first fifth, at most a minute.
    warmup = min(60.0, seconds / 5)
    settled = [s for s in samples if s.at >= warmup] or samples
    level = settled[0].rss
    peak = max(s.rss for s in samples)
    end = samples[-1].rss
    slope = 0.0
    if len(settled) >= 3:
        xs = [s.at / 60 for s in settled]
        ys = [s.rss / MIB for s in settled]
        slope = statistics.linear_regression(xs, ys).slope
    trimmed = released_rss()
    fds = [s.fds for s in samples]
    report.say(
        f"soak: {args.minutes:g} min, {made} calls ({made / seconds:.0f}/s), "
        f"{args.soak_tasks} tasks + {args.soak_threads} threads, {len(samples)} samples"
    )
    report.say(
        f"  RSS: process start {start_rss / MIB:.1f} MiB; soak start {samples[0].rss / MIB:.1f}, "
        f"after warm-up ({warmup:.0f} s) {level / MIB:.1f}, peak {peak / MIB:.1f}, "
        f"end {end / MIB:.1f} MiB; trend after warm-up {slope:+.2f} MiB/min"
    )
    if trimmed is not None:
        report.say(
            f"  RSS once the clients are closed and malloc_trim(0) hands back glibc's free "
            f"memory: {trimmed / MIB:.1f} MiB (the burst's high-water mark is kept free, "
            f"not leaked)"
        )
    report.say(f"  open fds during the soak: min {min(fds)}, max {max(fds)}")
    allowed = max(level * args.rss_tolerance, 8 * MIB)
    report.check(
        end <= level + allowed,
        f"RSS flat: end within {allowed / MIB:.1f} MiB of the post-warm-up level "
        f"({(end - level) / MIB:+.1f} MiB)",
    )
    left = sorted((Counter(final_fds) - Counter(baseline)).elements())
    report.check(
        not left,
        f"no fd left open after closing the clients ({len(final_fds)} now, "
        f"{len(baseline)} at baseline)",
    )
    for name in left[:10]:
        report.say(f"    left open: {name}")

    reconcile(
        records_path,
        log_path,
        report,
        {
            "burst": args.calls,
            "thread": args.threads * args.thread_calls,
            "soak": made,
            "warmup": -1,
        },
    )
    report.say(f"logs kept in {workdir}")
    if report.failed:
        report.say(f"FAILED: {len(report.failed)} check(s)")
        return 1
    report.say("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
