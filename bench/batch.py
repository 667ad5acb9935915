"""What ``python -m failover batch`` adds to each call: the same lines run three
ways, in one run, against the floor server (bench/floor, a Rust process of its
own, so the server's CPU is off this process's clock):

- ``calls``: ``client.prompt_async`` for every line, 64 in flight, results dropped;
- ``hand loop``: what a user writes by hand, the same calls plus a JSON line
  written for each;
- ``batch``: the batch runner (``_batch.run``): read, resume bookkeeping,
  records, one write a line, progress off.

Printed as this process's CPU microseconds per line and as ratios to ``calls``.

    .venv/bin/python bench/batch.py [--lines 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from run import FloorServer, default_floor_binary

import failover
from failover import _batch

CONCURRENCY = 64


def write_inputs(folder: Path, url: str, lines: int) -> tuple[Path, Path]:
    config = folder / "failover.toml"
    config.write_text(
        f'[providers.floor]\ntype = "openai"\nmodel = "gpt-4.1-mini"\n'
        f'api_key = "sk-bench-0000000000"\nbase_url = "{url}/v1"\n'
    )
    source = folder / "in.jsonl"
    with source.open("w") as file:
        for i in range(lines):
            file.write(json.dumps({"id": i, "prompt": f"hello {i}"}) + "\n")
    return config, source


async def calls(config: Path, lines: int, write: Path | None) -> None:
    client = failover.Client.from_config(config)
    gate = asyncio.Semaphore(CONCURRENCY)
    out = None if write is None else write.open("w")

    async def one(i: int) -> None:
        async with gate:
            r = await client.prompt_async(f"hello {i}")
        if out is not None:
            out.write(json.dumps({"id": i, "ok": True, "text": r.text}) + "\n")
            out.flush()

    try:
        await asyncio.gather(*(one(i) for i in range(lines)))
    finally:
        if out is not None:
            out.close()
        client.close()


def measure(run: object) -> float:
    """CPU seconds of this process while ``run()`` runs."""
    started = time.process_time()
    run()  # type: ignore[operator]
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--floor", type=Path, default=default_floor_binary())
    args = parser.parse_args()
    if not args.floor.is_file():
        sys.exit(f"no floor binary at {args.floor}: cargo build --release -p failover-bench-floor")
    server = FloorServer(args.floor)
    results: dict[str, list[float]] = {"calls": [], "hand loop": [], "batch": []}
    try:
        with tempfile.TemporaryDirectory() as name:
            folder = Path(name)
            config, source = write_inputs(folder, server.url, args.lines)
            out = folder / "out.jsonl"
            options = _batch.Options(
                input=str(source),
                output=str(out),
                config=str(config),
                concurrency=CONCURRENCY,
                progress="none",
            )
            quiet = open(os.devnull, "w")
            for _ in range(args.rounds):
                results["calls"].append(
                    measure(lambda: asyncio.run(calls(config, args.lines, None)))
                )
                results["hand loop"].append(
                    measure(lambda: asyncio.run(calls(config, args.lines, out)))
                )
                out.unlink()
                results["batch"].append(measure(lambda: _batch.run(options, out=quiet)))
                assert sum(1 for _ in out.open()) == args.lines
                out.unlink()
            quiet.close()
    finally:
        server.close()
    base = min(results["calls"]) / args.lines * 1e6
    print(
        f"# batch overhead: {args.lines:,} lines, {CONCURRENCY} in flight, best of {args.rounds}\n"
    )
    print("| run | CPU µs per line | ratio to calls |")
    print("|---|---:|---:|")
    for name, seconds in results.items():
        per_line = min(seconds) / args.lines * 1e6
        print(f"| {name} | {per_line:,.1f} | {per_line / base:.2f} |")


if __name__ == "__main__":
    main()
