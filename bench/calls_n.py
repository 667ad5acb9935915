"""N sync prompt() calls against a server, for counting instructions per call under
callgrind (bench/README.md, "What cost, stats and telemetry add"):

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        .venv/bin/python bench/calls_n.py URL MODE N

MODE: plain (no price, no telemetry), prices (a provider price), telemetry (OpenTelemetry SDK
providers, no exporter). The difference between N=350 and N=50, over 300, is one call's count.
"""

import sys

import failover

url, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
options: dict[str, object] = {}
if mode == "telemetry":
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider

    options["telemetry"] = failover.OpenTelemetry(TracerProvider(), MeterProvider())
price = {"price": failover.Price(0.4, 1.6)} if mode == "prices" else {}
provider = failover.OpenAICompatible(
    model="gpt-4.1-mini", base_url=url, api_key="sk-bench-0123456789", **price
)
client = failover.Client({"p": provider}, **options)  # type: ignore[arg-type]
for _ in range(n):
    client.prompt("Hi")
