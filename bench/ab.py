"""A/B of failover's own per-call cost: two builds, the same shell, alternating.

``run.py`` puts failover beside its peers; this compares failover with itself, to show that
a change (a refactor, a new feature on the call path) did not make a call slower. Each side is
a directory that holds a ``failover`` package with its compiled ``_native`` (an unpacked wheel,
or a checkout's ``python/`` after ``maturin develop``)::

    .venv/bin/maturin build --release -o /tmp/a        # on the old commit
    .venv/bin/maturin build --release -o /tmp/b        # on the new one
    unzip -q -d /tmp/a/site /tmp/a/*.whl; unzip -q -d /tmp/b/site /tmp/b/*.whl
    .venv/bin/python bench/ab.py --a /tmp/a/site --b /tmp/b/site

Every measurement runs in a fresh interpreter with only that side's package importable
(``PYTHONPATH``); rounds alternate A then B, then B then A, so drift of a busy machine falls on
both. A round's number is the median of its timed samples; the table shows the median of the
rounds, their spread, and B over A (below 1: B is faster). Against
``failover.testing.MockServer`` on 127.0.0.1 only.

Cases: ``sync`` (``prompt()`` on the OpenAI wire, whole answer), ``async`` (``prompt_async``
awaited in a row), ``stream`` (one ``stream()`` of 10,000 content chunks read to the end with
its final response; a sample is one whole stream).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CASES = ("sync", "async", "stream")
MODEL = "gpt-4.1-mini"
TEXT = "Hello! How can I help you today?"


def stream_events(chunks: int) -> list[str]:
    def event(choices: list[Any], usage: Any = None) -> str:
        body = {
            "id": "chatcmpl-ab",
            "object": "chat.completion.chunk",
            "model": MODEL,
            "choices": choices,
            "usage": usage,
        }
        return "data: " + json.dumps(body, separators=(",", ":"))

    def choice(delta: dict[str, Any], finish: str | None = None) -> list[Any]:
        return [{"index": 0, "delta": delta, "finish_reason": finish}]

    usage = {"prompt_tokens": 9, "completion_tokens": chunks, "total_tokens": 9 + chunks}
    return [
        event(choice({"role": "assistant", "content": ""})),
        *(event(choice({"content": f" w{i % 97}"})) for i in range(chunks)),
        event(choice({}, "stop")),
        event([], usage),
        "data: [DONE]",
    ]


def measure(case: str, n: int, chunks: int) -> dict[str, Any]:
    """One side's samples for one case, in this interpreter (the child)."""
    import asyncio

    import failover
    from failover.testing import MockServer

    server = MockServer()
    provider = failover.OpenAICompatible(model=MODEL, base_url=server.url, api_key="sk-ab")
    client = failover.Client({"p": provider})
    samples: list[float] = []
    if case == "stream":
        body = "".join(e + "\n\n" for e in stream_events(chunks)).encode()
        expected = "".join(f" w{i % 97}" for i in range(chunks))
        for i in range(n + 1):
            server.push(200, chunks=[body])
            began = time.perf_counter()
            stream = client.stream("Hi")
            text = "".join([chunk.text for chunk in stream])
            took = time.perf_counter() - began
            if text != expected or stream.response.usage.output_tokens != chunks:
                raise SystemExit("the stream's text or usage differs from the script")
            if i:  # the first warms the connection
                samples.append(took)
    else:
        batch = 100
        warm = batch
        for _ in range(warm):
            server.push_text(TEXT, wire="openai")
        for _ in range(warm):
            client.prompt("Hi")

        async def run_async() -> None:
            for _ in range(n // batch):
                for _ in range(batch):
                    server.push_text(TEXT, wire="openai")
                for _ in range(batch):
                    began = time.perf_counter()
                    answer = await client.prompt_async("Hi")
                    samples.append(time.perf_counter() - began)
                    if answer.text != TEXT:
                        raise SystemExit("unexpected answer")

        if case == "async":
            asyncio.run(run_async())
        else:
            for _ in range(n // batch):
                for _ in range(batch):
                    server.push_text(TEXT, wire="openai")
                for _ in range(batch):
                    began = time.perf_counter()
                    answer = client.prompt("Hi")
                    samples.append(time.perf_counter() - began)
                    if answer.text != TEXT:
                        raise SystemExit("unexpected answer")
    client.close()
    server.close()
    return {
        "median_us": statistics.median(samples) * 1e6,
        "module": failover.__file__,
    }


def child(side: Path, case: str, n: int, chunks: int) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(side))
    args = [sys.executable, __file__, "--child", case, "--n", str(n), "--chunks", str(chunks)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{side} {case}: {done.stderr.strip() or done.stdout.strip()}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if not Path(result["module"]).resolve().is_relative_to(side.resolve()):
        raise SystemExit(f"{side}: imported failover from {result['module']}, not from the side")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", type=Path, help="directory holding the old failover package")
    parser.add_argument("--b", type=Path, help="directory holding the new failover package")
    parser.add_argument("--rounds", type=int, default=6, help="rounds per side and case (6)")
    parser.add_argument("--n", type=int, default=2000, help="timed calls per round (2000)")
    parser.add_argument("--stream-n", type=int, default=8, help="timed streams per round (8)")
    parser.add_argument("--chunks", type=int, default=10_000, help="chunks per stream (10,000)")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated cases")
    parser.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.n, args.chunks)))
        return
    if args.a is None or args.b is None:
        parser.error("--a and --b are required")
    cases = [c for c in args.cases.split(",") if c]
    for case in cases:
        if case not in CASES:
            parser.error(f"unknown case {case!r}; the cases are {', '.join(CASES)}")
    if args.rounds < 1 or args.n < 100 or args.stream_n < 1 or args.chunks < 1:
        parser.error("--rounds, --stream-n and --chunks must be at least 1, --n at least 100")
    print(f"A: {args.a}\nB: {args.b}\n")
    print("| case | A median µs | B median µs | B / A | A spread | B spread |")
    print("|---|---:|---:|---:|---:|---:|")
    for case in cases:
        n = args.stream_n if case == "stream" else args.n
        rounds: dict[str, list[float]] = {"a": [], "b": []}
        for r in range(args.rounds):
            order = ("a", "b") if r % 2 == 0 else ("b", "a")
            for side in order:
                path = args.a if side == "a" else args.b
                rounds[side].append(child(path, case, n, args.chunks)["median_us"])
        a, b = (statistics.median(rounds[s]) for s in ("a", "b"))

        def spread(values: list[float]) -> str:
            return f"{min(values):,.0f} to {max(values):,.0f}"

        label = f"stream ({args.chunks:,} chunks)" if case == "stream" else case
        print(
            f"| {label} | {a:,.1f} | {b:,.1f} | {b / a:.3f} "
            f"| {spread(rounds['a'])} | {spread(rounds['b'])} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
