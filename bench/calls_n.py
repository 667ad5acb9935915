"""N prompt() calls against a server, for counting instructions per call under callgrind
(bench/README.md, "What cost, stats and telemetry add" and "What limits add"):

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        .venv/bin/python bench/calls_n.py URL MODE N [sync|async]

MODE: plain (no price, no telemetry, no limit), prices (a provider price), telemetry
(OpenTelemetry SDK providers, no exporter), limits (a provider Limit with every bound, never
reached). The calls are sync, or awaited one after another on one event loop (async). The
difference between N=350 and N=50, over 300, is one call's count.
"""

import asyncio
import sys

import failover

url, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
face = sys.argv[4] if len(sys.argv) > 4 else "sync"
options: dict[str, object] = {}
if mode == "telemetry":
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider

    options["telemetry"] = failover.OpenTelemetry(TracerProvider(), MeterProvider())
extra: dict[str, object] = {}
if mode == "prices":
    extra["price"] = failover.Price(0.4, 1.6)
if mode == "limits":
    extra["limit"] = failover.Limit(concurrency=64, rpm=10**8, tpm=10**12)
provider = failover.OpenAICompatible(
    model="gpt-4.1-mini", base_url=url, api_key="sk-bench-0123456789", **extra
)
client = failover.Client({"p": provider}, **options)  # type: ignore[arg-type]
if face == "sync":
    for _ in range(n):
        client.prompt("Hi")
else:

    async def run() -> None:
        for _ in range(n):
            await client.prompt_async("Hi")

    asyncio.run(run())
