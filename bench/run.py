"""Side-by-side benchmark: failover against openai, anthropic, httpx and litellm.

Everything runs in this one process, against `failover.testing.MockServer` on 127.0.0.1 (never
the internet), and prints Markdown tables. See bench/README.md for what each row means.

    python bench/run.py            # default run, about 70 seconds on 2 cores
    python bench/run.py --quick    # about 20 seconds
    python bench/run.py --n 5000   # timed calls per client and case
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import os
import platform
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import failover
from failover.testing import FakeSleeper, MockServer

# litellm fetches a model price list from the internet when imported unless told not to; this
# benchmark talks to loopback only. Set before any peer is imported (peers import lazily).
OFFLINE_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true"}
LOOPBACK = "127.0.0.1,localhost"

KEY = "sk-bench"
OPENAI_MODEL = "gpt-4.1-mini"
ANTHROPIC_MODEL = "claude-haiku-4-5"
MAX_TOKENS = 1024
TEXT = "Hello"
MESSAGES = [{"role": "user", "content": "Hi"}]

SyncCall = Callable[[], str]
AsyncCall = Callable[[], Awaitable[str]]


# --------------------------------------------------------------------------------------------
# Statistics and formatting


@dataclass
class Result:
    """Timings of one client in one case, or why it has none."""

    client: str
    samples_ns: list[int] = field(default_factory=list)
    total_ns: int = 0
    calls: int = 0
    error: str | None = None

    def median_us(self) -> float:
        return statistics.median(self.samples_ns) / 1e3

    def p90_us(self) -> float:
        ordered = sorted(self.samples_ns)
        return ordered[min(len(ordered) - 1, math.ceil(0.9 * len(ordered)) - 1)] / 1e3

    def calls_per_s(self) -> float:
        return self.calls / (self.total_ns / 1e9) if self.total_ns else 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.samples_ns)


def short_error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ").replace("|", "/")
    return text if len(text) <= 90 else text[:87] + "..."


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], left: int = 2) -> str:
    """A Markdown table; the columns after the first `left` ones are right-aligned numbers."""
    right = [i >= left for i in range(len(headers))]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        padded = [c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right)]
        return "| " + " | ".join(padded) + " |"

    rule = ["-" * (w - 1) + ":" if r else "-" * w for w, r in zip(widths, right)]
    return "\n".join([line(headers), line(rule), *(line(r) for r in rows)])


def ratio(peer: float, base: float) -> str:
    return f"{peer / base:.2f}x" if base > 0 else "n/a"


def result_rows(case: str, results: list[Result], baseline: str) -> list[list[str]]:
    base = next((r for r in results if r.client == baseline and r.ok), None)
    rows = []
    for r in results:
        if not r.ok:
            rows.append([case, r.client, "n/a", "n/a", "n/a", f"n/a ({r.error or 'no samples'})"])
            continue
        if r.client == baseline:
            rel = "1.00 (baseline)"
        else:
            rel = ratio(r.median_us(), base.median_us()) if base else "n/a"
        rows.append(
            [
                case,
                r.client,
                f"{r.median_us():,.1f}",
                f"{r.p90_us():,.1f}",
                f"{r.calls_per_s():,.0f}",
                rel,
            ]
        )
    return rows


CALL_HEADERS = ["case", "client", "median µs", "p90 µs", "calls/s", "peer / failover"]


# --------------------------------------------------------------------------------------------
# The clients. Each maker builds a client against a server URL and returns one call; an import
# or construction error makes that client "n/a" with the reason.


def _check(text: Any) -> None:
    if text != TEXT:
        raise RuntimeError(f"unexpected answer {text!r}")


def failover_openai_client(url: str, sleeper: Any = None) -> failover.Client:
    provider = failover.OpenAICompatible(model=OPENAI_MODEL, base_url=url, api_key=KEY)
    return failover.Client({"p": provider}, sleeper=sleeper)


def failover_anthropic_client(url: str) -> failover.Client:
    # failover appends /messages to base_url; the anthropic SDK appends /v1/messages.
    provider = failover.Anthropic(model=ANTHROPIC_MODEL, base_url=url + "/v1", api_key=KEY)
    return failover.Client({"p": provider})


def sync_failover_openai(url: str) -> SyncCall:
    client = failover_openai_client(url)
    return lambda: client.prompt("Hi").text


def sync_failover_anthropic(url: str) -> SyncCall:
    client = failover_anthropic_client(url)
    return lambda: client.prompt("Hi", max_tokens=MAX_TOKENS).text


def sync_openai(url: str) -> SyncCall:
    import openai

    client = openai.OpenAI(base_url=url, api_key=KEY, max_retries=0)

    def call() -> str:
        r = client.chat.completions.create(model=OPENAI_MODEL, messages=MESSAGES)  # type: ignore[arg-type]
        return r.choices[0].message.content or ""

    return call


def sync_anthropic(url: str) -> SyncCall:
    import anthropic

    client = anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0)

    def call() -> str:
        r = client.messages.create(
            model=ANTHROPIC_MODEL,
            max_tokens=MAX_TOKENS,
            messages=MESSAGES,  # type: ignore[arg-type]
        )
        return "".join(b.text for b in r.content if b.type == "text")

    return call


def sync_httpx_openai(url: str) -> SyncCall:
    import httpx

    client = httpx.Client(base_url=url, headers={"authorization": f"Bearer {KEY}"})
    body = {"model": OPENAI_MODEL, "messages": MESSAGES}

    def call() -> str:
        r = client.post("/chat/completions", json=body)
        r.raise_for_status()
        return r.json()["choices"][0]["message"]["content"]  # type: ignore[no-any-return]

    return call


def sync_httpx_anthropic(url: str) -> SyncCall:
    import httpx

    headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
    client = httpx.Client(base_url=url, headers=headers)
    body = {"model": ANTHROPIC_MODEL, "max_tokens": MAX_TOKENS, "messages": MESSAGES}

    def call() -> str:
        r = client.post("/v1/messages", json=body)
        r.raise_for_status()
        return r.json()["content"][0]["text"]  # type: ignore[no-any-return]

    return call


def sync_litellm(url: str) -> SyncCall:
    import litellm

    def call() -> str:
        r = litellm.completion(
            model="openai/" + OPENAI_MODEL,
            api_base=url,
            api_key=KEY,
            messages=MESSAGES,
            max_retries=0,
        )
        return r.choices[0].message.content  # type: ignore[no-any-return]

    return call


def async_failover_openai(url: str) -> AsyncCall:
    client = failover_openai_client(url)

    async def call() -> str:
        return (await client.prompt_async("Hi")).text

    return call


def async_failover_anthropic(url: str) -> AsyncCall:
    client = failover_anthropic_client(url)

    async def call() -> str:
        return (await client.prompt_async("Hi", max_tokens=MAX_TOKENS)).text

    return call


def async_openai(url: str) -> AsyncCall:
    import openai

    client = openai.AsyncOpenAI(base_url=url, api_key=KEY, max_retries=0)

    async def call() -> str:
        r = await client.chat.completions.create(model=OPENAI_MODEL, messages=MESSAGES)  # type: ignore[arg-type]
        return r.choices[0].message.content or ""

    return call


def async_anthropic(url: str) -> AsyncCall:
    import anthropic

    client = anthropic.AsyncAnthropic(base_url=url, api_key=KEY, max_retries=0)

    async def call() -> str:
        r = await client.messages.create(
            model=ANTHROPIC_MODEL,
            max_tokens=MAX_TOKENS,
            messages=MESSAGES,  # type: ignore[arg-type]
        )
        return "".join(b.text for b in r.content if b.type == "text")

    return call


def async_httpx_openai(url: str) -> AsyncCall:
    import httpx

    client = httpx.AsyncClient(base_url=url, headers={"authorization": f"Bearer {KEY}"})
    body = {"model": OPENAI_MODEL, "messages": MESSAGES}

    async def call() -> str:
        r = await client.post("/chat/completions", json=body)
        r.raise_for_status()
        return r.json()["choices"][0]["message"]["content"]  # type: ignore[no-any-return]

    return call


def async_httpx_anthropic(url: str) -> AsyncCall:
    import httpx

    headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
    client = httpx.AsyncClient(base_url=url, headers=headers)
    body = {"model": ANTHROPIC_MODEL, "max_tokens": MAX_TOKENS, "messages": MESSAGES}

    async def call() -> str:
        r = await client.post("/v1/messages", json=body)
        r.raise_for_status()
        return r.json()["content"][0]["text"]  # type: ignore[no-any-return]

    return call


def async_litellm(url: str) -> AsyncCall:
    import litellm

    async def call() -> str:
        r = await litellm.acompletion(
            model="openai/" + OPENAI_MODEL,
            api_base=url,
            api_key=KEY,
            messages=MESSAGES,
            max_retries=0,
        )
        return r.choices[0].message.content  # type: ignore[no-any-return]

    return call


@dataclass
class Spec:
    client: str
    wire: str
    sync: Callable[[str], SyncCall]
    async_: Callable[[str], AsyncCall]


OPENAI_SPECS = [
    Spec("failover", "openai", sync_failover_openai, async_failover_openai),
    Spec("openai", "openai", sync_openai, async_openai),
    Spec("litellm", "openai", sync_litellm, async_litellm),
    Spec("httpx (raw floor)", "openai", sync_httpx_openai, async_httpx_openai),
]
ANTHROPIC_SPECS = [
    Spec("failover", "anthropic", sync_failover_anthropic, async_failover_anthropic),
    Spec("anthropic", "anthropic", sync_anthropic, async_anthropic),
    Spec("httpx (raw floor)", "anthropic", sync_httpx_anthropic, async_httpx_anthropic),
]


# --------------------------------------------------------------------------------------------
# Contenders: one client, its own MockServer, and how to script k calls' worth of answers.


@dataclass
class Contender:
    result: Result
    server: MockServer
    script: Callable[[int], None]
    sync_call: SyncCall | None = None
    async_call: AsyncCall | None = None

    def top_up(self, calls: int) -> None:
        """Scripts exactly `calls` more answers (outside the timed region)."""
        self.script(calls)

    def fail(self, exc: BaseException) -> None:
        self.result.error = short_error(exc)


def text_script(server: MockServer, wire: str) -> Callable[[int], None]:
    def script(calls: int) -> None:
        for _ in range(max(0, calls - server.pending)):
            server.push_text(TEXT, wire=wire)

    return script


def retry_script(server: MockServer) -> Callable[[int], None]:
    error = {"error": {"message": "Rate limit reached", "type": "requests", "code": None}}

    def script(calls: int) -> None:
        if server.pending:
            raise RuntimeError(f"{server.pending} scripted answers left over")
        for _ in range(calls):
            server.push(429, headers={"retry-after": "1"}, json=error)
            server.push_text(TEXT, wire="openai")

    return script


def make_contenders(specs: Sequence[Spec], mode: str) -> list[Contender]:
    out = []
    for spec in specs:
        server = MockServer()
        c = Contender(Result(spec.client), server, text_script(server, spec.wire))
        try:
            if mode == "sync":
                c.sync_call = spec.sync(server.url)
            else:
                c.async_call = spec.async_(server.url)
        except Exception as exc:  # a peer that fails to import or build is reported, not fatal
            c.fail(exc)
        out.append(c)
    return out


def rotated(items: Sequence[Contender], k: int) -> list[Contender]:
    k %= len(items)
    return [*items[k:], *items[:k]]


def blocks(n: int, rounds: int) -> list[int]:
    """Splits n calls into `rounds` blocks of near-equal size."""
    rounds = max(1, min(rounds, n))
    return [n // rounds + (1 if i < n % rounds else 0) for i in range(rounds)]


# --------------------------------------------------------------------------------------------
# Runners. Clients take turns in rounds (rotating who goes first) so drift of the machine
# spreads over all of them; answers are scripted and garbage is collected between blocks.


def settle() -> None:
    """Collects garbage, then freezes what survives so later collections between blocks only
    scan what the benchmark made since (a full collection of litellm's heap takes ~0.4 s)."""
    gc.collect()
    gc.freeze()


def run_sync(contenders: list[Contender], n: int, warmup: int, rounds: int) -> None:
    clock = time.perf_counter_ns
    for c in contenders:
        if c.result.error is None and c.sync_call is not None:
            try:
                c.top_up(warmup)
                for _ in range(warmup):
                    _check(c.sync_call())
            except Exception as exc:
                c.fail(exc)
    settle()
    for i, size in enumerate(blocks(n, rounds)):
        for c in rotated(contenders, i):
            call = c.sync_call
            if c.result.error is not None or call is None:
                continue
            c.top_up(size)
            gc.collect()
            samples = c.result.samples_ns
            try:
                for _ in range(size):
                    t0 = clock()
                    text = call()
                    t1 = clock()
                    _check(text)
                    samples.append(t1 - t0)
                    c.result.total_ns += t1 - t0
                    c.result.calls += 1
            except Exception as exc:
                c.fail(exc)


async def run_async_sequential(
    contenders: list[Contender], n: int, warmup: int, rounds: int
) -> None:
    clock = time.perf_counter_ns
    for c in contenders:
        if c.result.error is None and c.async_call is not None:
            try:
                c.top_up(warmup)
                for _ in range(warmup):
                    _check(await c.async_call())
            except Exception as exc:
                c.fail(exc)
    settle()
    for i, size in enumerate(blocks(n, rounds)):
        for c in rotated(contenders, i):
            call = c.async_call
            if c.result.error is not None or call is None:
                continue
            c.top_up(size)
            gc.collect()
            samples = c.result.samples_ns
            try:
                for _ in range(size):
                    t0 = clock()
                    text = await call()
                    t1 = clock()
                    _check(text)
                    samples.append(t1 - t0)
                    c.result.total_ns += t1 - t0
                    c.result.calls += 1
            except Exception as exc:
                c.fail(exc)


async def run_async_gather(
    contenders: list[Contender], batches: int, in_flight: int, rounds: int
) -> None:
    """Each sample is one batch of `in_flight` concurrent calls: wall time / in_flight."""
    clock = time.perf_counter_ns
    for c in contenders:
        if c.result.error is None and c.async_call is not None:
            try:
                c.top_up(in_flight)
                for text in await asyncio.gather(*(c.async_call() for _ in range(in_flight))):
                    _check(text)
            except Exception as exc:
                c.fail(exc)
    settle()
    for i, size in enumerate(blocks(batches, rounds)):
        for c in rotated(contenders, i):
            call = c.async_call
            if c.result.error is not None or call is None:
                continue
            gc.collect()
            try:
                for _ in range(size):
                    c.top_up(in_flight)
                    t0 = clock()
                    texts = await asyncio.gather(*(call() for _ in range(in_flight)))
                    t1 = clock()
                    for text in texts:
                        _check(text)
                    c.result.samples_ns.append((t1 - t0) // in_flight)
                    c.result.total_ns += t1 - t0
                    c.result.calls += in_flight
            except Exception as exc:
                c.fail(exc)


def close_servers(contenders: list[Contender]) -> None:
    for c in contenders:
        c.server.close()


# --------------------------------------------------------------------------------------------
# Sections


@dataclass
class Config:
    n: int
    warmup: int
    rounds: int
    in_flight: int
    batches: int
    import_reps: int


def section_calls(cfg: Config) -> str:
    rows: list[list[str]] = []
    for wire, specs in (("openai", OPENAI_SPECS), ("anthropic", ANTHROPIC_SPECS)):
        contenders = make_contenders(specs, "sync")
        run_sync(contenders, cfg.n, cfg.warmup, cfg.rounds)
        rows += result_rows(f"{wire} wire, sync", [c.result for c in contenders], "failover")
        close_servers(contenders)

    async def async_cases() -> None:
        for wire, specs in (("openai", OPENAI_SPECS), ("anthropic", ANTHROPIC_SPECS)):
            contenders = make_contenders(specs, "async")
            await run_async_sequential(contenders, cfg.n, cfg.warmup, cfg.rounds)
            case = f"{wire} wire, async sequential"
            rows.extend(result_rows(case, [c.result for c in contenders], "failover"))
            for c in contenders:
                if c.result.error is None:
                    c.result = Result(c.result.client)
            await run_async_gather(contenders, cfg.batches, cfg.in_flight, cfg.rounds)
            case = f"{wire} wire, async {cfg.in_flight} in flight"
            rows.extend(result_rows(case, [c.result for c in contenders], "failover"))
            close_servers(contenders)

    asyncio.run(async_cases())
    return table(CALL_HEADERS, rows)


def section_retry(cfg: Config) -> str:
    """failover alone: a 429 with retry-after: 1 then a 200, with a FakeSleeper, next to the
    plain 200 path. What is left over is the engine's decision and the second request."""
    sleeper = FakeSleeper()
    warmup = min(cfg.warmup, 20)
    ok_server, retry_server = MockServer(), MockServer()
    ok_client = failover_openai_client(ok_server.url, sleeper=sleeper)
    retry_client = failover_openai_client(retry_server.url, sleeper=sleeper)
    ok_name, retry_name = "200 (1 request)", "429 retry-after: 1, then 200 (2 requests)"

    ok = Contender(Result(ok_name), ok_server, text_script(ok_server, "openai"))
    retry = Contender(Result(retry_name), retry_server, retry_script(retry_server))
    ok.sync_call = lambda: ok_client.prompt("Hi").text
    retry.sync_call = lambda: retry_client.prompt("Hi").text
    run_sync([ok, retry], cfg.n, warmup, cfg.rounds)

    async def ok_async() -> str:
        return (await ok_client.prompt_async("Hi")).text

    async def retry_async() -> str:
        return (await retry_client.prompt_async("Hi")).text

    a_ok = Contender(Result(ok_name), ok_server, ok.script, async_call=ok_async)
    a_retry = Contender(Result(retry_name), retry_server, retry.script, async_call=retry_async)
    asyncio.run(run_async_sequential([a_ok, a_retry], cfg.n, warmup, cfg.rounds))

    # Check that the engine really retried once per call, after one fake sleep of 1 s.
    retried_calls = retry.result.calls + a_retry.result.calls + 2 * warmup
    sleeps = sleeper.sleeps
    if (
        len(retry_server.requests) != 2 * retried_calls
        or len(sleeps) != retried_calls
        or any(s != 1.0 for s in sleeps)
    ):
        for c in (retry, a_retry):
            c.result.error = c.result.error or "did not retry as scripted"
    ok_server.close()
    retry_server.close()
    rows = result_rows("failover, sync", [ok.result, retry.result], ok_name)
    rows += result_rows("failover, async sequential", [a_ok.result, a_retry.result], ok_name)
    return table(["case", "answers", *CALL_HEADERS[2:-1], "vs the 200 path"], rows)


def import_times(
    modules: Sequence[str], reps: int
) -> tuple[dict[str, list[float]], dict[str, str], float]:
    """Milliseconds to import each module in a fresh interpreter (measured inside it), why the
    ones that failed did, and the median wall time of `python -c pass` for context."""
    # Import from bytecode caches, as after a pip install: the peers' .pyc files came with pip;
    # an editable failover writes its own (git-ignored) on the untimed first import below.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(OFFLINE_ENV)
    subprocess.run([sys.executable, "-c", "import failover"], check=True, env=env)
    code = (
        "import time; t = time.perf_counter_ns(); import {m}; "
        "print((time.perf_counter_ns() - t) / 1e6)"
    )
    times: dict[str, list[float]] = {m: [] for m in modules}
    failed: dict[str, str] = {}
    starts: list[float] = []
    # No warm-up round for the rest: the call sections above have read every module already, so
    # the page cache is warm.
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        subprocess.run([sys.executable, "-c", "pass"], check=True, env=env)
        starts.append((time.perf_counter_ns() - t0) / 1e6)
        for m in modules:
            if m in failed:
                continue
            proc = subprocess.run(
                [sys.executable, "-c", code.format(m=m)], capture_output=True, text=True, env=env
            )
            if proc.returncode != 0:
                lines = proc.stderr.strip().splitlines()
                failed[m] = short_error(RuntimeError(lines[-1] if lines else proc.returncode))
                times[m] = []
                continue
            times[m].append(float(proc.stdout.strip().splitlines()[-1]))
    return times, failed, statistics.median(starts)


def section_imports(cfg: Config) -> tuple[str, float]:
    modules = ["failover", "httpx", "openai", "anthropic", "litellm"]
    times, failed, start_ms = import_times(modules, cfg.import_reps)
    base = statistics.median(times["failover"]) if times["failover"] else 0.0
    rows = []
    for m in modules:
        if not times[m]:
            rows.append([f"import {m}", "n/a", "n/a", f"n/a ({failed.get(m, 'no samples')})"])
            continue
        med = statistics.median(times[m])
        rel = "1.00 (baseline)" if m == "failover" else ratio(med, base)
        rows.append([f"import {m}", f"{med:,.1f}", f"{min(times[m]):,.1f}", rel])
    return table(["module", "median ms", "min ms", "peer / failover"], rows, left=1), start_ms


# --------------------------------------------------------------------------------------------


def version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def native_build() -> str:
    """Tells an optimised build of failover's extension from a `make develop` one, which this
    project builds with debug info (`make test` installs that into the same tree)."""
    path = failover._native.__file__ or ""
    try:
        with open(path, "rb") as f:
            data = f.read()
        if data[:5] != b"\x7fELF\x02":  # 64-bit ELF only
            return f"{os.path.basename(path)} (build profile unknown)"
        (shoff,) = struct.unpack_from("<Q", data, 0x28)
        entsize, count, names_index = struct.unpack_from("<HHH", data, 0x3A)

        def section(i: int) -> tuple[int, int]:
            name, offset = struct.unpack_from("<I20xQ", data, shoff + i * entsize)
            return name, offset

        names_at = section(names_index)[1]
        names = {
            data[names_at + n : data.index(b"\0", names_at + n)]
            for n, _ in map(section, range(count))
        }
    except (OSError, struct.error, ValueError):
        return f"{os.path.basename(path)} (build profile unknown)"
    if b".debug_info" in names:
        return "DEBUG BUILD (has debug info): run `make release` first, failover is slower here"
    return "release build (no debug info)"


def machine_info() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(
                (ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu
            )
    except OSError:
        pass
    packages = ", ".join(
        f"{d} {version(d)}" for d in ("failover", "openai", "anthropic", "httpx", "litellm")
    )
    return "\n".join(
        [
            f"- machine: {platform.system()} {platform.release()}, {cpu}, {os.cpu_count()} CPUs",
            f"- python: {platform.python_implementation()} {platform.python_version()}",
            f"- packages: {packages}",
            f"- failover extension: {native_build()}",
        ]
    )


def parse_args(argv: Sequence[str] | None) -> Config:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a ~20 s run with fewer iterations")
    p.add_argument("--n", type=int, help="timed calls per client and case (1000; quick: 100)")
    p.add_argument("--in-flight", type=int, default=50, help="concurrent calls in the gather case")
    p.add_argument("--import-reps", type=int, help="fresh interpreters per module (default 7)")
    a = p.parse_args(argv)
    n = a.n if a.n is not None else (100 if a.quick else 1000)
    if n < 1 or a.in_flight < 1:
        p.error("--n and --in-flight must be at least 1")
    reps = a.import_reps if a.import_reps is not None else (2 if a.quick else 7)
    return Config(
        n=n,
        warmup=20 if a.quick else 50,
        rounds=5 if a.quick else 10,
        in_flight=a.in_flight,
        batches=max(5, n // a.in_flight),
        import_reps=max(1, reps),
    )


def main(argv: Sequence[str] | None = None) -> None:
    os.environ.update(OFFLINE_ENV)
    for var in ("NO_PROXY", "no_proxy"):  # never route loopback through a proxy
        os.environ[var] = ",".join(filter(None, [os.environ.get(var), LOOPBACK]))
    cfg = parse_args(argv)
    started = time.perf_counter()
    print(f"# failover benchmark ({time.strftime('%Y-%m-%d')})\n")
    print(machine_info())
    print(
        f"- settings: {cfg.n} timed calls per client and case after {cfg.warmup} warm-up calls, "
        f"in {cfg.rounds} alternating rounds; {cfg.batches} batches of {cfg.in_flight} in flight; "
        f"imports: median of {cfg.import_reps} fresh interpreters\n"
    )
    sys.stdout.flush()

    print("## Per-call overhead, successful chat call (MockServer on 127.0.0.1)\n")
    print(section_calls(cfg), flush=True)
    print("\n## Retry path: 429 with retry-after: 1, then 200, with a FakeSleeper\n")
    print(section_retry(cfg), flush=True)
    imports, start_ms = section_imports(cfg)
    print(f"\n## Import time (fresh interpreter each; `python -c pass` takes {start_ms:.0f} ms)\n")
    print(imports)
    print(f"\n_total bench time: {time.perf_counter() - started:.0f} s_")


if __name__ == "__main__":
    main()
