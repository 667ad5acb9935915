"""Hedging against a heavy tail: the same calls, in one run, without hedging,
with a fixed ``after`` and with ``after="p95"``, against two MockServers
whose answers take 100 ms, except 5 % of them, which take 1 s (ten times
as long). Prints p50/p95/p99 latency per call and the extra requests spent
(hedges sent, as a share of calls).

    .venv/bin/python bench/hedge.py [--calls 1000] [--concurrency 20]

The servers run in this process: read the figures as one setting against
another, which share them alike.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from typing import Any

import failover
from failover.testing import MockServer

FAST, SLOW, SLOW_SHARE = 0.1, 1.0, 0.05


def script(server: MockServer, count: int, rng: random.Random) -> None:
    for _ in range(count):
        server.push_text("ok", delay=SLOW if rng.random() < SLOW_SHARE else FAST)


async def run(
    hedge: failover.Hedge | None, calls: int, concurrency: int, seed: int
) -> dict[str, Any]:
    rng = random.Random(seed)
    with MockServer() as a, MockServer() as b:
        script(a, calls, rng)
        script(b, calls, rng)
        hedges: list[Any] = []
        client = failover.Client(
            {
                "a": failover.OpenAICompatible("m", base_url=a.url, api_key="sk-bench-0000000000"),
                "b": failover.OpenAICompatible("m", base_url=b.url, api_key="sk-bench-0000000000"),
            },
            hedge=hedge,
            on_event=lambda e: hedges.append(e) if isinstance(e, failover.HedgeStarted) else None,
        )
        gate = asyncio.Semaphore(concurrency)
        took: list[float] = []

        async def one() -> None:
            async with gate:
                started = time.perf_counter()
                await client.prompt_async("Hi")
                took.append(time.perf_counter() - started)

        await asyncio.gather(*(one() for _ in range(calls)))
        client.close()
    cuts = statistics.quantiles(took, n=100)
    return {
        "p50": cuts[49],
        "p95": cuts[94],
        "p99": cuts[98],
        "extra": len(hedges) / calls,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=20)
    args = parser.parse_args()
    settings: list[tuple[str, failover.Hedge | None]] = [
        ("no hedging", None),
        ("Hedge(after=0.25, max_extra=0.1)", failover.Hedge(0.25, 0.1)),
        ('Hedge(after="p90", max_extra=0.1)', failover.Hedge("p90", 0.1)),
        ('Hedge(after="p95", max_extra=0.1)', failover.Hedge("p95", 0.1)),
    ]
    print(
        f"# hedging: {args.calls:,} calls, {args.concurrency} in flight; answers take "
        f"{FAST * 1000:.0f} ms, {SLOW_SHARE:.0%} of them {SLOW * 1000:.0f} ms\n"
    )
    print("| setting | p50 ms | p95 ms | p99 ms | extra requests |")
    print("|---|---:|---:|---:|---:|")
    for name, hedge in settings:
        figures = asyncio.run(run(hedge, args.calls, args.concurrency, seed=7))
        print(
            f"| {name} | {figures['p50'] * 1000:.0f} | {figures['p95'] * 1000:.0f} | "
            f"{figures['p99'] * 1000:.0f} | {figures['extra']:.1%} |"
        )


if __name__ == "__main__":
    main()
