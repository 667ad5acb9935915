"""Side-by-side benchmark: failover against openai, anthropic, httpx, litellm and the floor.

The chat tables talk to bench/floor's server, a Rust process of its own on 127.0.0.1, and put
each client's CPU per call beside the floor's plain reqwest loop; the embeddings, streaming,
retry and state tables use `failover.testing.MockServer` in this process. Never the internet.
Prints Markdown tables; see bench/README.md for what each row means.

    python bench/run.py              # default run, about 5 minutes on 2 cores
    python bench/run.py --quick      # about 1.5 minutes
    python bench/run.py --n 5000     # timed chat calls per client and case
    python bench/run.py --tput-calls 8000 --concurrency 100  # the throughput table
    python bench/run.py --floor target/release/failover-bench-floor
"""

from __future__ import annotations

import argparse
import array
import asyncio
import base64
import gc
import http.client
import importlib.util
import json
import math
import os
import platform
import random
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
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

# Embeddings: EMBED_TEXTS texts in one call, one vector of EMBED_DIMS float32 values each.
EMBED_MODEL = "text-embedding-3-small"
EMBED_TEXTS = 100
EMBED_DIMS = 1536

SyncCall = Callable[[], Any]
AsyncCall = Callable[[], Awaitable[Any]]


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


def failover_openai_client(url: str, sleeper: Any = None, retry: Any = None) -> failover.Client:
    provider = failover.OpenAICompatible(model=OPENAI_MODEL, base_url=url, api_key=KEY)
    if retry is None:
        return failover.Client({"p": provider}, sleeper=sleeper)
    return failover.Client({"p": provider}, sleeper=sleeper, retry=retry)


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


def async_httpx_openai(url: str, limits: Any = None) -> AsyncCall:
    import httpx

    pool = {} if limits is None else {"limits": limits}
    client = httpx.AsyncClient(base_url=url, headers={"authorization": f"Bearer {KEY}"}, **pool)
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
# Embeddings. Every client gets the same vectors (float32 values, as the API's are), served in
# the encoding_format the client asks for: JSON numbers for "float", each vector's
# little-endian float32 bytes in base64 for "base64".

EMBED_WORDS = (
    "the request failed over to a second provider after a timeout while the first one kept "
    "answering with rate limits so the client waited for the hint and retried once"
).split()


@dataclass
class EmbedFixture:
    texts: list[str]
    vectors: list[list[float]]
    bodies: dict[str, bytes]
    """The response body for each encoding_format, "float" and "base64"."""


def float32(x: float) -> float:
    """x rounded to the nearest float32 (raises for a value that is not a float)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]  # type: ignore[no-any-return]


def unpack_float32(text: str) -> list[float]:
    """A base64 embedding: little-endian float32 values, as openai-python decodes them."""
    row = array.array("f", base64.b64decode(text))
    if sys.byteorder == "big":
        row.byteswap()
    return row.tolist()


def make_embed_fixture() -> EmbedFixture:
    rng = random.Random(EMBED_DIMS)
    texts = [
        f"Passage {i}: " + " ".join(rng.choice(EMBED_WORDS) for _ in range(40)) + "."
        for i in range(EMBED_TEXTS)
    ]
    # Unit-length-ish vectors, as embedding models return; array("f") rounds to float32.
    rows = [
        array.array("f", (rng.gauss(0.0, EMBED_DIMS**-0.5) for _ in range(EMBED_DIMS)))
        for _ in range(EMBED_TEXTS)
    ]
    vectors = [row.tolist() for row in rows]
    if sys.byteorder == "big":
        for row in rows:
            row.byteswap()
    encoded: dict[str, list[Any]] = {
        "float": vectors,
        "base64": [base64.b64encode(row.tobytes()).decode("ascii") for row in rows],
    }
    tokens = sum(len(t.split()) for t in texts)
    bodies = {
        encoding: json.dumps(
            {
                "object": "list",
                "data": [
                    {"object": "embedding", "index": i, "embedding": e} for i, e in enumerate(items)
                ],
                "model": EMBED_MODEL,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        ).encode()
        for encoding, items in encoded.items()
    }
    return EmbedFixture(texts, vectors, bodies)


def embed_checker(fixture: EmbedFixture) -> Callable[[Any], None]:
    """Checks the shape and the first, a middle and the last value of an answer. Values are
    compared at float32 precision: that is all the wire carries (failover's JSON parser may land
    one double ulp away from the decimal's nearest double)."""
    expected = fixture.vectors
    probes = [(0, 0), (EMBED_TEXTS // 2, EMBED_DIMS // 2), (EMBED_TEXTS - 1, EMBED_DIMS - 1)]

    def check(vectors: Any) -> None:
        if len(vectors) != EMBED_TEXTS or any(len(v) != EMBED_DIMS for v in vectors):
            raise RuntimeError(f"unexpected shape: {len(vectors)} vectors")
        for i, j in probes:
            if float32(vectors[i][j]) != expected[i][j]:
                raise RuntimeError(f"vector {i}[{j}] is {vectors[i][j]!r}, not {expected[i][j]!r}")

    return check


EmbedMaker = Callable[[str, list[str]], Any]


def failover_embed_provider(url: str, encoding: str) -> failover.Provider:
    """failover.OpenAI asks for base64 (OpenAI speaks it); the OpenAI-compatible family,
    for floats (every server speaks them)."""
    cls = failover.OpenAI if encoding == "base64" else failover.OpenAICompatible
    return cls(model=OPENAI_MODEL, base_url=url, api_key=KEY, embedding_model=EMBED_MODEL)


def failover_embed(is_async: bool, encoding: str) -> EmbedMaker:
    def make(url: str, texts: list[str]) -> Any:
        client = failover.Client({"p": failover_embed_provider(url, encoding)})
        if not is_async:
            return lambda: client.embed(texts).vectors

        async def call() -> list[list[float]]:
            return (await client.embed_async(texts)).vectors

        return call

    return make


def openai_embed(is_async: bool, encoding_format: str | None) -> EmbedMaker:
    """openai-python's embeddings.create; encoding_format None leaves its default (base64, which
    it decodes itself into lists of floats)."""
    options = {} if encoding_format is None else {"encoding_format": encoding_format}

    def make(url: str, texts: list[str]) -> SyncCall | AsyncCall:
        import openai

        if not is_async:
            client = openai.OpenAI(base_url=url, api_key=KEY, max_retries=0)

            def call() -> list[list[float]]:
                r = client.embeddings.create(model=EMBED_MODEL, input=texts, **options)  # type: ignore[arg-type]
                return [d.embedding for d in r.data]

            return call

        aclient = openai.AsyncOpenAI(base_url=url, api_key=KEY, max_retries=0)

        async def acall() -> list[list[float]]:
            r = await aclient.embeddings.create(model=EMBED_MODEL, input=texts, **options)  # type: ignore[arg-type]
            return [d.embedding for d in r.data]

        return acall

    return make


def httpx_embed(is_async: bool, encoding_format: str) -> EmbedMaker:
    """A bare POST, json(), and for base64 the same decoding openai-python does."""

    def vectors(data: list[dict[str, Any]]) -> list[list[float]]:
        if encoding_format == "float":
            return [d["embedding"] for d in data]
        return [unpack_float32(d["embedding"]) for d in data]

    def make(url: str, texts: list[str]) -> SyncCall | AsyncCall:
        import httpx

        headers = {"authorization": f"Bearer {KEY}"}
        body = {"model": EMBED_MODEL, "input": texts, "encoding_format": encoding_format}
        if not is_async:
            client = httpx.Client(base_url=url, headers=headers)

            def call() -> list[list[float]]:
                r = client.post("/embeddings", json=body)
                r.raise_for_status()
                return vectors(r.json()["data"])

            return call

        aclient = httpx.AsyncClient(base_url=url, headers=headers)

        async def acall() -> list[list[float]]:
            r = await aclient.post("/embeddings", json=body)
            r.raise_for_status()
            return vectors(r.json()["data"])

        return acall

    return make


@dataclass
class EmbedSpec:
    client: str
    encoding: str
    """The encoding_format the client asks for, and is served."""
    sync: EmbedMaker
    async_: EmbedMaker


EMBED_SPECS = [
    EmbedSpec(
        "failover OpenAI (base64)",
        "base64",
        failover_embed(False, "base64"),
        failover_embed(True, "base64"),
    ),
    EmbedSpec(
        "failover compatible (float)",
        "float",
        failover_embed(False, "float"),
        failover_embed(True, "float"),
    ),
    EmbedSpec(
        "openai (base64, its default)",
        "base64",
        openai_embed(False, None),
        openai_embed(True, None),
    ),
    EmbedSpec(
        'openai (encoding_format="float")',
        "float",
        openai_embed(False, "float"),
        openai_embed(True, "float"),
    ),
    EmbedSpec(
        "httpx float (raw floor)", "float", httpx_embed(False, "float"), httpx_embed(True, "float")
    ),
    EmbedSpec(
        "httpx base64 (raw floor)",
        "base64",
        httpx_embed(False, "base64"),
        httpx_embed(True, "base64"),
    ),
]


# --------------------------------------------------------------------------------------------
# Streaming: one answer of many small chunks on the OpenAI Chat Completions SSE wire, as
# OpenAI sends it with stream_options.include_usage: a first chunk with the role, one chunk per
# word, a chunk with finish_reason "stop", a chunk with the usage and no choices, data: [DONE].
# Every contender asks for exactly that (stream: true, stream_options.include_usage: true) and
# returns (the concatenated text, completion_tokens from the usage chunk).

STREAM_PROMPT_TOKENS = 8


@dataclass
class StreamFixture:
    chunks: int
    text: str
    events: list[str]
    """The text of each server-sent event, e.g. 'data: {...}'."""
    body: bytes
    """The same events as one body, each followed by a blank line."""


def make_stream_fixture(chunks: int) -> StreamFixture:
    rng = random.Random(chunks)
    words = [" " + rng.choice(EMBED_WORDS) for _ in range(chunks)]

    def event(choices: list[Any], usage: Any = None) -> str:
        body = {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 1764460800,
            "model": OPENAI_MODEL,
            "system_fingerprint": "fp_bench",
            "choices": choices,
            "usage": usage,
        }
        return "data: " + json.dumps(body, separators=(",", ":"))

    def choice(delta: dict[str, Any], finish: str | None = None) -> list[Any]:
        return [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]

    usage = {
        "prompt_tokens": STREAM_PROMPT_TOKENS,
        "completion_tokens": chunks,
        "total_tokens": STREAM_PROMPT_TOKENS + chunks,
    }
    events = [
        event(choice({"role": "assistant", "content": "", "refusal": None})),
        *(event(choice({"content": w})) for w in words),
        event(choice({}, "stop")),
        event([], usage),
        "data: [DONE]",
    ]
    body = "".join(e + "\n\n" for e in events).encode()
    return StreamFixture(chunks, "".join(words), events, body)


def stream_checker(fixture: StreamFixture) -> Callable[[Any], None]:
    def check(answer: Any) -> None:
        text, tokens = answer
        if text != fixture.text:
            got = len(text) if isinstance(text, str) else type(text).__name__
            raise RuntimeError(f"text differs from the scripted one ({got} of {len(fixture.text)})")
        if tokens != fixture.chunks:
            raise RuntimeError(f"completion_tokens {tokens!r}, not {fixture.chunks}")

    return check


STREAM_BODY = {
    "model": OPENAI_MODEL,
    "messages": MESSAGES,
    "stream": True,
    "stream_options": {"include_usage": True},
}


def sync_failover_stream(url: str) -> SyncCall:
    client = failover_openai_client(url)

    def call() -> tuple[str, int | None]:
        stream = client.stream("Hi")
        text = "".join([chunk.text for chunk in stream])
        return text, stream.response.usage.output_tokens

    return call


def async_failover_stream(url: str) -> AsyncCall:
    client = failover_openai_client(url)

    async def call() -> tuple[str, int | None]:
        stream = client.stream_async("Hi")
        text = "".join([chunk.text async for chunk in stream])
        return text, stream.response.usage.output_tokens

    return call


def sync_openai_stream(url: str) -> SyncCall:
    import openai

    client = openai.OpenAI(base_url=url, api_key=KEY, max_retries=0)

    def call() -> tuple[str, int | None]:
        parts: list[str] = []
        tokens = None
        stream = client.chat.completions.create(
            model=OPENAI_MODEL,
            messages=MESSAGES,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
        )
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                parts.append(chunk.choices[0].delta.content)
            if chunk.usage:
                tokens = chunk.usage.completion_tokens
        return "".join(parts), tokens

    return call


def async_openai_stream(url: str) -> AsyncCall:
    import openai

    client = openai.AsyncOpenAI(base_url=url, api_key=KEY, max_retries=0)

    async def call() -> tuple[str, int | None]:
        parts: list[str] = []
        tokens = None
        stream = await client.chat.completions.create(
            model=OPENAI_MODEL,
            messages=MESSAGES,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
        )
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                parts.append(chunk.choices[0].delta.content)
            if chunk.usage:
                tokens = chunk.usage.completion_tokens
        return "".join(parts), tokens

    return call


class SSEText:
    """The raw floor's reading of one stream: the data of each `data:` line, json.loads, the
    content deltas and the usage, until data: [DONE]."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.tokens: int | None = None

    def feed(self, line: str) -> bool:
        """Takes one line; False once the stream is done."""
        if not line.startswith("data:"):
            return True
        data = line[5:].strip()
        if data == "[DONE]":
            return False
        event = json.loads(data)
        for choice in event["choices"]:
            content = choice["delta"].get("content")
            if content:
                self.parts.append(content)
        if event.get("usage"):
            self.tokens = event["usage"]["completion_tokens"]
        return True

    def answer(self) -> tuple[str, int | None]:
        return "".join(self.parts), self.tokens


def sync_httpx_stream(url: str) -> SyncCall:
    import httpx

    client = httpx.Client(base_url=url, headers={"authorization": f"Bearer {KEY}"})

    def call() -> tuple[str, int | None]:
        sse = SSEText()
        with client.stream("POST", "/chat/completions", json=STREAM_BODY) as r:
            r.raise_for_status()
            for line in r.iter_lines():
                if not sse.feed(line):
                    break
        return sse.answer()

    return call


def async_httpx_stream(url: str) -> AsyncCall:
    import httpx

    client = httpx.AsyncClient(base_url=url, headers={"authorization": f"Bearer {KEY}"})

    async def call() -> tuple[str, int | None]:
        sse = SSEText()
        async with client.stream("POST", "/chat/completions", json=STREAM_BODY) as r:
            r.raise_for_status()
            async for line in r.aiter_lines():
                if not sse.feed(line):
                    break
        return sse.answer()

    return call


STREAM_SPECS = [
    Spec("failover", "openai", sync_failover_stream, async_failover_stream),
    Spec("openai", "openai", sync_openai_stream, async_openai_stream),
    Spec("httpx (raw floor)", "openai", sync_httpx_stream, async_httpx_stream),
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
    check: Callable[[Any], None] = _check
    """Raises unless a call's answer is the scripted one; runs after the clock stops."""

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


def retry_script(server: MockServer, status: int = 429) -> Callable[[int], None]:
    error = {"error": {"message": "Rate limit reached", "type": "requests", "code": None}}
    headers = {"retry-after": "1"} if status == 429 else {}

    def script(calls: int) -> None:
        if server.pending:
            raise RuntimeError(f"{server.pending} scripted answers left over")
        for _ in range(calls):
            server.push(status, headers=headers, json=error)
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


def body_script(server: MockServer, body: bytes) -> Callable[[int], None]:
    """Scripts a pre-serialised 200 (a 3 MB body is not worth re-encoding for every call)."""
    headers = {"content-type": "application/json"}

    def script(calls: int) -> None:
        for _ in range(max(0, calls - server.pending)):
            server.push(200, headers=headers, body=body)

    return script


def make_embed_contenders(fixture: EmbedFixture, mode: str) -> list[Contender]:
    check = embed_checker(fixture)
    out = []
    for spec in EMBED_SPECS:
        server = MockServer()
        script = body_script(server, fixture.bodies[spec.encoding])
        c = Contender(Result(spec.client), server, script, check=check)
        try:
            if mode == "sync":
                c.sync_call = spec.sync(server.url, fixture.texts)
            else:
                c.async_call = spec.async_(server.url, fixture.texts)
        except Exception as exc:  # a peer that fails to import or build is reported, not fatal
            c.fail(exc)
        out.append(c)
    return out


# How the streamed answer is written: "event by event" (each event written and flushed on its
# own, as a server generating tokens sends them) or "all at once" (the whole body in one write,
# so the client is never waiting for the server: its own cost alone).
STREAM_DELIVERIES = ("event by event", "all at once")


def sse_script(server: MockServer, fixture: StreamFixture, delivery: str) -> Callable[[int], None]:
    """Scripts a streamed 200 (the connection is closed after it)."""

    def script(calls: int) -> None:
        for _ in range(max(0, calls - server.pending)):
            if delivery == "all at once":
                server.push(200, chunks=[fixture.body])
            else:
                server.push(200, sse=fixture.events)

    return script


def make_stream_contenders(fixture: StreamFixture, mode: str, delivery: str) -> list[Contender]:
    check = stream_checker(fixture)
    out = []
    for spec in STREAM_SPECS:
        server = MockServer()
        script = sse_script(server, fixture, delivery)
        c = Contender(Result(spec.client), server, script, check=check)
        try:
            if mode == "sync":
                c.sync_call = spec.sync(server.url)
            else:
                c.async_call = spec.async_(server.url)
        except Exception as exc:  # a peer that fails to import or build is reported, not fatal
            c.fail(exc)
        out.append(c)
    return out


def check_stream_requests(contenders: list[Contender]) -> None:
    """Fails a contender whose requests did not all ask for a stream with usage."""
    for c in contenders:
        for request in c.server.requests:
            body = request.json if request.path.endswith("/chat/completions") else None
            body = body if isinstance(body, dict) else {}
            options = body.get("stream_options") or {}
            if body.get("stream") is not True or options.get("include_usage") is not True:
                if c.result.error is None:
                    asked = f"stream={body.get('stream')!r}, stream_options={options!r}"
                    c.fail(RuntimeError(f"{request.path} asked for {asked}"))
                break


def check_embed_requests(contenders: list[Contender]) -> None:
    """Fails a contender whose requests did not all ask for the encoding its server answered in,
    for all the texts."""
    for c, spec in zip(contenders, EMBED_SPECS):
        asked = set()
        for request in c.server.requests:
            body = request.json if request.path.endswith("/embeddings") else None
            body = body if isinstance(body, dict) else {}
            asked.add((body.get("encoding_format"), len(body.get("input") or ())))
        if c.result.error is None and asked - {(spec.encoding, EMBED_TEXTS)}:
            c.fail(RuntimeError(f"served {spec.encoding}, asked for {sorted(asked, key=str)}"))


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
                    c.check(c.sync_call())
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
                    c.check(text)
                    del text  # freed off the clock, not when the next answer replaces it
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
                    c.check(await c.async_call())
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
                    c.check(text)
                    del text
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
                    c.check(text)
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
                        c.check(text)
                    del texts, text
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
    floor: Path
    concurrency: int
    tput_calls: int
    tput_rounds: int
    import_reps: int
    embed_n: int
    embed_warmup: int
    embed_rounds: int
    embed_in_flight: int
    embed_batches: int
    stream_n: int
    stream_warmup: int
    stream_rounds: int
    stream_chunks: int


# --------------------------------------------------------------------------------------------
# The floor: client CPU per call against the floor server in its own process, next to a plain
# reqwest loop (bench/floor), and async throughput at high concurrency.

REPO = Path(__file__).resolve().parent.parent
FLOOR_BIN = "failover-bench-floor"
# Issue 17's goals, as multiples of the current-thread floor's CPU per call, and for the rest.
SYNC_GOAL = 1.5
ASYNC_GOAL = 2.0
THROUGHPUT_GOAL = 20.0
IMPORT_GOAL_MS = 5.0


def default_floor_binary() -> Path:
    target = os.environ.get("CARGO_TARGET_DIR") or str(REPO / "target")
    return Path(target) / "release" / FLOOR_BIN


class FloorServer:
    """bench/floor's server in a process of its own: it takes the server's CPU off the
    client's clock, and it ends when its stdin (held here) closes."""

    def __init__(self, binary: Path) -> None:
        self.process = subprocess.Popen(
            [str(binary), "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line.isdigit():
            self.close()
            raise RuntimeError(f"the floor server did not print its port (got {line!r})")
        self.port = int(line)
        self.url = f"http://127.0.0.1:{self.port}"

    def stats(self) -> tuple[int, int]:
        """Requests answered and connections accepted so far (this asking included)."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            connection.request("GET", "/__floor/stats")
            answer = json.loads(connection.getresponse().read())
        finally:
            connection.close()
        return answer["requests"], answer["connections"]

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


@dataclass
class CpuResult:
    """Per-call client CPU and wall time of one contender, one value per round."""

    client: str
    cpu_us: list[float] = field(default_factory=list)
    wall_us: list[float] = field(default_factory=list)
    calls: int = 0
    new_connections: int = 0
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.cpu_us)

    def cpu(self) -> float:
        return statistics.median(self.cpu_us)

    def wall(self) -> float:
        return statistics.median(self.wall_us)


@dataclass
class CpuContender:
    """One row: `run(calls)` makes that many calls and returns (CPU µs, wall µs) per call,
    measured by whoever made them (this process, or the floor client's own)."""

    result: CpuResult
    run: Callable[[int], tuple[float, float]] | None = None
    warmup: Callable[[], None] | None = None
    # Requests a run of `calls` calls adds at the server beyond the calls themselves (the
    # floor client warms up inside each run), and the connections it may open.
    extra_requests: Callable[[int], int] = lambda calls: 0
    # Connections a run opens by design (the floor client is a new process each run): the
    # table shows the new connections beyond those.
    own_connections: int = 0


def floor_client(binary: Path, url: str, wire: str, runtime: str, concurrency: int = 1) -> Any:
    """Runs the floor client once; the calls it times come after its own warm-up calls."""
    warmup = 100 if concurrency == 1 else 2 * concurrency

    def run(calls: int) -> dict[str, Any]:
        args = [str(binary), "client", "--url", url, "--wire", wire, "--runtime", runtime]
        args += ["--n", str(calls), "--warmup", str(warmup), "--concurrency", str(concurrency)]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr.strip() or f"floor client exited {proc.returncode}")
        report: dict[str, Any] = json.loads(proc.stdout)
        if report["calls"] != calls:
            raise RuntimeError(f"floor client made {report['calls']} calls, not {calls}")
        return report

    return run, warmup


FLOOR_ROWS = (
    ("current", "floor, current-thread runtime"),
    ("multi", "floor, multi-thread + block_on"),
)
FLOOR_CT, FLOOR_MT = (name for _, name in FLOOR_ROWS)
# Calls per run of the floor client: a floor call costs ~20-50 µs and the process start is off
# its clock, so a long run is cheap and steadier than a round's share of the Python clients'.
FLOOR_CALLS_PER_RUN = 2000


def floor_contenders(binary: Path, url: str, wire: str) -> list[CpuContender]:
    out = []
    for runtime, name in FLOOR_ROWS:
        run_floor, warmup = floor_client(binary, url, wire, runtime)

        def run(calls: int, run_floor: Any = run_floor) -> tuple[float, float]:
            report = run_floor(max(calls, FLOOR_CALLS_PER_RUN))
            return report["cpu_us_per_call"], report["wall_us_per_call"]

        out.append(
            CpuContender(
                CpuResult(name),
                run,
                extra_requests=lambda calls, w=warmup: w + max(calls, FLOOR_CALLS_PER_RUN) - calls,
                own_connections=1,
            )
        )
    return out


def python_sync_contender(name: str, call: SyncCall) -> CpuContender:
    def run(calls: int) -> tuple[float, float]:
        cpu0, wall0 = time.process_time_ns(), time.perf_counter_ns()
        for _ in range(calls):
            _check(call())
        cpu, wall = time.process_time_ns() - cpu0, time.perf_counter_ns() - wall0
        return cpu / calls / 1e3, wall / calls / 1e3

    return CpuContender(CpuResult(name), run)


def python_async_contender(
    name: str, call: AsyncCall, loop: asyncio.AbstractEventLoop
) -> CpuContender:
    async def timed(calls: int) -> tuple[int, int]:
        cpu0, wall0 = time.process_time_ns(), time.perf_counter_ns()
        for _ in range(calls):
            _check(await call())
        return time.process_time_ns() - cpu0, time.perf_counter_ns() - wall0

    def run(calls: int) -> tuple[float, float]:
        cpu, wall = loop.run_until_complete(timed(calls))
        return cpu / calls / 1e3, wall / calls / 1e3

    return CpuContender(CpuResult(name), run)


def measure_cpu(
    server: FloorServer, contenders: list[CpuContender], n: int, warmup: int, rounds: int
) -> None:
    """Warms every contender up, then `rounds` rounds in rotating order, each contender making
    its share of the n calls; checks at the server that each made exactly its requests."""
    for c in contenders:
        if c.result.error is None and c.run is not None:
            try:
                c.run(warmup)
            except Exception as exc:
                c.result.error = short_error(exc)
    settle()
    for i, size in enumerate(blocks(n, rounds)):
        order = contenders[i % len(contenders) :] + contenders[: i % len(contenders)]
        for c in order:
            if c.result.error is not None or c.run is None:
                continue
            gc.collect()
            try:
                requests0, connections0 = server.stats()
                cpu, wall = c.run(size)
                requests, connections = server.stats()
            except Exception as exc:
                c.result.error = short_error(exc)
                continue
            # One request each for the two stats reads (and a connection for the second).
            made = requests - requests0 - 1
            opened = connections - connections0 - 1
            if made != size + c.extra_requests(size):
                c.result.error = f"the server saw {made} requests for {size} calls"
                continue
            c.result.cpu_us.append(cpu)
            c.result.wall_us.append(wall)
            c.result.calls += size
            c.result.new_connections += opened - c.own_connections


CPU_HEADERS = ["wire", "client", "CPU µs / call", "x floor", "goal", "wall µs / call", "new conns"]


def cpu_rows(wire: str, results: list[CpuResult]) -> tuple[list[list[str]], dict[str, float]]:
    """Rows of the CPU table and, by client, the multiple of the current-thread floor."""
    floor = next((r for r in results if r.client == FLOOR_CT and r.ok), None)
    rows, multiples = [], {}
    for r in results:
        if not r.ok:
            rows.append([wire, r.client, "n/a", "", "", "", f"n/a ({r.error or 'no samples'})"])
            continue
        multiple = r.cpu() / floor.cpu() if floor else float("nan")
        multiples[r.client] = multiple
        goal = ""
        if r.client.startswith("failover"):
            bound = SYNC_GOAL if r.client.endswith(", sync") else ASYNC_GOAL
            met = multiple <= bound
            goal = f"<= {bound:g}x: {'met' if met else 'NOT met'}"
        rows.append(
            [
                wire,
                r.client,
                f"{r.cpu():,.1f}",
                "1.00 (floor)" if r.client == FLOOR_CT else f"{multiple:.2f}x",
                goal,
                f"{r.wall():,.1f}",
                str(r.new_connections),
            ]
        )
    return rows, multiples


CPU_SPECS = {
    "openai": [
        ("failover", sync_failover_openai, async_failover_openai),
        ("openai", sync_openai, async_openai),
        ("httpx", sync_httpx_openai, async_httpx_openai),
        ("litellm", sync_litellm, async_litellm),
    ],
    "anthropic": [
        ("failover", sync_failover_anthropic, async_failover_anthropic),
        ("anthropic", sync_anthropic, async_anthropic),
        ("httpx", sync_httpx_anthropic, async_httpx_anthropic),
    ],
}


def section_cpu(cfg: Config, server: FloorServer) -> tuple[str, list[str]]:
    """The CPU-per-call table for both wires, and one verdict line per goal."""
    rows: list[list[str]] = []
    verdicts: list[str] = []
    loop = asyncio.new_event_loop()
    try:
        for wire, specs in CPU_SPECS.items():
            contenders = floor_contenders(cfg.floor, server.url, wire)
            for name, sync_maker, async_maker in specs:
                for mode, maker in (("sync", sync_maker), ("async", async_maker)):
                    label = f"{name}, {mode}"
                    try:
                        if mode == "sync":
                            c = python_sync_contender(label, sync_maker(server.url))
                        else:
                            # Built inside the loop: some clients bind to the running one.
                            async def build(m: Any = maker) -> AsyncCall:
                                return m(server.url)  # type: ignore[no-any-return]

                            c = python_async_contender(
                                label, loop.run_until_complete(build()), loop
                            )
                    except Exception as exc:  # a peer that fails to import is reported
                        c = CpuContender(CpuResult(label, error=short_error(exc)))
                    contenders.append(c)
            measure_cpu(server, contenders, cfg.n, cfg.warmup, cfg.rounds)
            wire_rows, multiples = cpu_rows(f"{wire}", [c.result for c in contenders])
            rows += wire_rows
            for mode, bound in (("sync", SYNC_GOAL), ("async", ASYNC_GOAL)):
                m = multiples.get(f"failover, {mode}")
                if m is None:
                    verdicts.append(f"{wire} wire, {mode}: not measured")
                    continue
                floor_us = next(
                    r.cpu() for r in (c.result for c in contenders) if r.client == FLOOR_CT
                )
                gap = (m - bound) * floor_us
                state = "met" if m <= bound else f"NOT met: {gap:,.0f} µs / call over it"
                verdicts.append(
                    f"{wire} wire, {mode}: failover {m:.2f}x the current-thread floor "
                    f"(goal <= {bound:g}x): {state}"
                )
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
    return table(CPU_HEADERS, rows), verdicts


# Throughput: many calls at once on one event loop, each client with enough connections.


def tput_failover(url: str) -> AsyncCall:
    return async_failover_openai(url)


def tput_openai(url: str) -> AsyncCall:
    return async_openai(url)  # AsyncOpenAI's own pool: up to 1,000 connections, 100 kept


def tput_httpx(url: str) -> AsyncCall:
    import httpx

    # httpx keeps 20 connections alive by default: at 100 in flight it would reconnect.
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=1000)
    return async_httpx_openai(url, limits)


async def drive(call: AsyncCall, calls: int, concurrency: int) -> None:
    """`calls` calls with `concurrency` of them in flight at every moment: that many workers,
    each starting its next call when its last ends."""
    left = calls

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            _check(await call())

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def section_throughput(cfg: Config, server: FloorServer) -> tuple[str, list[str]]:
    calls, concurrency = cfg.tput_calls, cfg.concurrency
    results = {name: CpuResult(name) for name in ("failover", "openai", "httpx")}
    floor_results = {name: CpuResult(name) for _, name in FLOOR_ROWS}
    loop = asyncio.new_event_loop()
    makers = {"failover": tput_failover, "openai": tput_openai, "httpx": tput_httpx}
    clients: dict[str, AsyncCall] = {}

    async def build(maker: Callable[[str], AsyncCall]) -> AsyncCall:
        return maker(server.url)

    async def timed(call: AsyncCall) -> tuple[int, int]:
        cpu0, wall0 = time.process_time_ns(), time.perf_counter_ns()
        await drive(call, calls, concurrency)
        return time.process_time_ns() - cpu0, time.perf_counter_ns() - wall0

    try:
        for name, maker in makers.items():
            try:
                clients[name] = loop.run_until_complete(build(maker))
                # Warm-up: every connection of the pool opened, and the code paths hot.
                loop.run_until_complete(drive(clients[name], 4 * concurrency, concurrency))
            except Exception as exc:
                results[name].error = short_error(exc)
        settle()
        for i in range(cfg.tput_rounds):
            names = [*makers, *floor_results]
            for name in names[i % len(names) :] + names[: i % len(names)]:
                gc.collect()
                if name in floor_results:
                    r = floor_results[name]
                    runtime = next(rt for rt, n in FLOOR_ROWS if n == name)
                    try:
                        run, _ = floor_client(cfg.floor, server.url, "openai", runtime, concurrency)
                        report = run(calls)
                    except Exception as exc:
                        r.error = short_error(exc)
                        continue
                    r.cpu_us.append(report["cpu_us_per_call"])
                    r.wall_us.append(report["wall_us_per_call"])
                    r.calls += calls
                    continue
                r = results[name]
                if r.error is not None:
                    continue
                try:
                    requests0, _ = server.stats()
                    cpu, wall = loop.run_until_complete(timed(clients[name]))
                    requests, _ = server.stats()
                except Exception as exc:
                    r.error = short_error(exc)
                    continue
                if requests - requests0 - 1 != calls:
                    r.error = f"the server saw {requests - requests0 - 1} requests for {calls}"
                    continue
                r.cpu_us.append(cpu / calls / 1e3)
                r.wall_us.append(wall / calls / 1e3)
                r.calls += calls
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()

    base = results["openai"]
    rows = []
    labels = {
        "failover": "failover (prompt_async)",
        "openai": "openai (AsyncOpenAI)",
        "httpx": "httpx (AsyncClient, raw)",
    }
    everything = [(labels[n], r) for n, r in results.items()]
    floor_labels = {
        FLOOR_CT: "floor, current-thread runtime",
        FLOOR_MT: "floor, multi-thread runtime",
    }
    everything += [
        (f"{floor_labels[n]} (Rust, {concurrency} tasks)", r) for n, r in floor_results.items()
    ]
    for label, r in everything:
        if not r.ok:
            rows.append([label, "n/a", "", "", f"n/a ({r.error or 'no samples'})"])
            continue
        rps = 1e6 / r.wall()
        vs = ratio(base.wall(), r.wall()) if base.ok else "n/a"
        rows.append([label, f"{rps:,.0f}", vs, f"{r.cpu():,.1f}", f"{r.wall():,.1f}"])
    verdicts = []
    f = results["failover"]
    if f.ok and base.ok:
        times = base.wall() / f.wall()
        state = "met" if times >= THROUGHPUT_GOAL else "NOT met"
        verdicts.append(
            f"async throughput at {concurrency} in flight: failover {times:.1f}x AsyncOpenAI's "
            f"requests/s (goal >= {THROUGHPUT_GOAL:g}x): {state}"
        )
    else:
        verdicts.append("async throughput: not measured")
    headers = ["client", "requests/s", "x AsyncOpenAI", "CPU µs / call", "wall µs / call"]
    return table(headers, rows, left=1), verdicts


def section_type_hints() -> str:
    """Whether typing.get_type_hints resolves every public annotation of failover, in a fresh
    interpreter (a lazy import that hides a name behind TYPE_CHECKING would break it)."""
    code = """
import inspect, json, typing
import failover
checked, failed = 0, []
for name in failover.__all__:
    obj = getattr(failover, name)
    targets = [(name, obj)] if inspect.isclass(obj) or inspect.isfunction(obj) else []
    if inspect.isclass(obj):
        for attr, value in vars(obj).items():
            if inspect.isfunction(value) and (attr == "__init__" or not attr.startswith("_")):
                targets.append((f"{name}.{attr}", value))
    for label, target in targets:
        checked += 1
        try:
            typing.get_type_hints(target)
        except Exception as exc:
            failed.append(f"{label}: {type(exc).__name__}: {exc}")
print(json.dumps({"checked": checked, "failed": failed}))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return f"typing.get_type_hints on failover's public API: could not run ({lines[-1:]})"
    report = json.loads(proc.stdout)
    if not report["failed"]:
        return (
            f"typing.get_type_hints resolves all {report['checked']} public classes, functions "
            "and methods of failover (Client.__init__ among them)."
        )
    return (
        f"typing.get_type_hints FAILS on {len(report['failed'])} of {report['checked']}: "
        + "; ".join(report["failed"][:5])
    )


def section_embed(cfg: Config) -> tuple[str, str]:
    """The embeddings table, and a line on what was served."""
    fixture = make_embed_fixture()
    baseline = EMBED_SPECS[0].client
    shape = f"{EMBED_TEXTS} x {EMBED_DIMS:,}"
    rows: list[list[str]] = []
    contenders = make_embed_contenders(fixture, "sync")
    run_sync(contenders, cfg.embed_n, cfg.embed_warmup, cfg.embed_rounds)
    check_embed_requests(contenders)
    rows += result_rows(f"{shape}, sync", [c.result for c in contenders], baseline)
    close_servers(contenders)

    async def async_cases() -> None:
        contenders = make_embed_contenders(fixture, "async")
        await run_async_sequential(contenders, cfg.embed_n, cfg.embed_warmup, cfg.embed_rounds)
        check_embed_requests(contenders)
        case = f"{shape}, async sequential"
        rows.extend(result_rows(case, [c.result for c in contenders], baseline))
        for c in contenders:
            if c.result.error is None:
                c.result = Result(c.result.client)
        await run_async_gather(contenders, cfg.embed_batches, cfg.embed_in_flight, cfg.embed_rounds)
        check_embed_requests(contenders)
        case = f"{shape}, async {cfg.embed_in_flight} in flight"
        rows.extend(result_rows(case, [c.result for c in contenders], baseline))
        close_servers(contenders)

    asyncio.run(async_cases())
    numpy = "numpy" if importlib.util.find_spec("numpy") else "array.array (numpy not installed)"
    sizes = ", ".join(f"{k} {len(v) / 1e6:.2f} MB" for k, v in fixture.bodies.items())
    note = f"Response bodies: {sizes}. openai-python decodes base64 with {numpy}."
    return table(CALL_HEADERS, rows), note


STREAM_HEADERS = ["case", "client", "median ms", "p90 ms", "µs / chunk", "peer / failover"]


def stream_rows(case: str, results: list[Result], chunks: int) -> list[list[str]]:
    """Per whole stream, in ms, and that median over the number of chunks."""
    base = next((r for r in results if r.client == "failover" and r.ok), None)
    rows = []
    for r in results:
        if not r.ok:
            rows.append([case, r.client, "n/a", "n/a", "n/a", f"n/a ({r.error or 'no samples'})"])
            continue
        if r.client == "failover":
            rel = "1.00 (baseline)"
        else:
            rel = ratio(r.median_us(), base.median_us()) if base else "n/a"
        median, p90 = r.median_us(), r.p90_us()
        cells = [f"{median / 1e3:,.1f}", f"{p90 / 1e3:,.1f}", f"{median / chunks:,.2f}", rel]
        rows.append([case, r.client, *cells])
    return rows


def stream_verdict(results: dict[str, list[Result]]) -> str:
    """Whether failover's stream is no slower than openai-python's and than the raw httpx loop,
    case by case."""
    verdicts = []
    for case, rs in results.items():
        by = {r.client: r for r in rs if r.ok}
        if "failover" not in by:
            verdicts.append(f"{case}: not measured")
            continue
        f = by["failover"].median_us()
        parts = []
        for peer, label in (("openai", "openai-python"), ("httpx (raw floor)", "raw httpx")):
            if peer in by:
                o = by[peer].median_us()
                parts.append(f"{'holds' if f <= o else 'FAILS'} ({f / o:.3f}x {label})")
            else:
                parts.append(f"{label} not measured")
        verdicts.append(f"{case}: " + ", ".join(parts))
    return (
        "Bar (failover's 10,000-chunk stream not slower than openai-python's, and ahead of the "
        "raw httpx loop): " + "; ".join(verdicts) + "."
    )


def section_stream(cfg: Config) -> tuple[str, str, str]:
    """The streaming table, a line on what was served, and one on whether the bar holds."""
    fixture = make_stream_fixture(cfg.stream_chunks)
    rows: list[list[str]] = []
    results: dict[str, list[Result]] = {}

    def record(case: str, contenders: list[Contender]) -> None:
        check_stream_requests(contenders)
        results[case] = [c.result for c in contenders]
        rows.extend(stream_rows(case, results[case], cfg.stream_chunks))
        close_servers(contenders)

    for delivery in STREAM_DELIVERIES:
        contenders = make_stream_contenders(fixture, "sync", delivery)
        run_sync(contenders, cfg.stream_n, cfg.stream_warmup, cfg.stream_rounds)
        record(f"sync, {delivery}", contenders)

    async def async_cases() -> None:
        for delivery in STREAM_DELIVERIES:
            contenders = make_stream_contenders(fixture, "async", delivery)
            await run_async_sequential(
                contenders, cfg.stream_n, cfg.stream_warmup, cfg.stream_rounds
            )
            record(f"async, {delivery}", contenders)

    asyncio.run(async_cases())
    note = (
        f"One answer of {len(fixture.events):,} server-sent events ({len(fixture.body) / 1e6:.2f}"
        f" MB): a role chunk, {fixture.chunks:,} one-word content chunks, a finish chunk, a "
        "usage chunk and data: [DONE]. Event by event: each written and flushed on its own; "
        "all at once: the whole body in one write."
    )
    return table(STREAM_HEADERS, rows), note, stream_verdict(results)


def section_retry(cfg: Config) -> str:
    """failover alone: a 429 with retry-after: 1 then a 200, with a recording sleeper, next to
    the plain 200 path. What is left over is the engine's decision and the second request."""
    # A plain callable that records, not a FakeSleeper: a FakeSleeper holds its virtual clock
    # still for a 5 ms real-time settle after an async call starts (so calls gathered together
    # join before time moves), and the async row would measure that settle, not the engine.
    # On the real clock the default retry budget (retries as a share of calls per second)
    # rightly refuses a retry on every call at thousands of calls a second; a budget that
    # grants them all keeps what is measured the retry itself.
    slept: list[float] = []
    sleeper = slept.append
    generous = failover.RetryPolicy(
        budget=failover.RetryBudget(ratio=1.0, min_retries_per_second=1e6)
    )
    warmup = min(cfg.warmup, 20)
    ok_server, retry_server = MockServer(), MockServer()
    ok_client = failover_openai_client(ok_server.url, sleeper=sleeper, retry=generous)
    retry_client = failover_openai_client(retry_server.url, sleeper=sleeper, retry=generous)
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
    sleeps = slept
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


def _redis_server() -> tuple[Any, str] | None:
    """A redis-server on a free loopback port, or None when the machine has none."""
    binary = shutil.which("redis-server")
    if binary is None:
        return None
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(200):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.1):
                return process, f"redis://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.02)
    process.kill()
    return None


def section_state(cfg: Config) -> str:
    """failover alone: the per-call cost of fleet state on a local Redis, next to the
    in-process state: a 200 (warm: the mirror is current), a 500 then a 200 (the retry asks
    Redis's budget script, one round trip), and a fresh client's first call (cold: it waits
    for the first read of the fleet's cooldowns)."""
    started = _redis_server()
    if started is None:
        return "_skipped: no redis-server on this machine_"
    process, url = started
    warmup = min(cfg.warmup, 20)
    servers = [MockServer() for _ in range(4)]
    sleeper = FakeSleeper()

    # A budget that grants every retry here: what is measured is its round trip.
    generous = failover.RetryPolicy(
        budget=failover.RetryBudget(ratio=1.0, min_retries_per_second=1e6)
    )

    def client(server: MockServer, state: Any = None) -> failover.Client:
        provider = failover.OpenAICompatible(model=OPENAI_MODEL, base_url=server.url, api_key=KEY)
        return failover.Client({"p": provider}, sleeper=sleeper, state=state, retry=generous)

    local = client(servers[0])
    fleet = client(servers[1], failover.RedisState(url, prefix="bench"))
    fleet_retry = client(servers[2], failover.RedisState(url, prefix="bench-retry"))
    names = ("in-process state, 200", "RedisState, 200 (warm)", "RedisState, 500 then 200")
    contenders = [
        Contender(Result(names[0]), servers[0], text_script(servers[0], "openai")),
        Contender(Result(names[1]), servers[1], text_script(servers[1], "openai")),
        Contender(Result(names[2]), servers[2], retry_script(servers[2], status=500)),
    ]
    contenders[0].sync_call = lambda: local.prompt("Hi").text
    contenders[1].sync_call = lambda: fleet.prompt("Hi").text
    contenders[2].sync_call = lambda: fleet_retry.prompt("Hi").text
    time.sleep(0.2)  # the mirrors' first reads
    run_sync(contenders, min(cfg.n, 500), warmup, cfg.rounds)
    # Cold: each a fresh client and state, timed on its first call.
    cold = Result("RedisState, a fresh client's first call (cold)")
    for i in range(min(cfg.n, 30)):
        servers[3].push_text("Hello")
        fresh = client(servers[3], failover.RedisState(url, prefix=f"bench-cold-{i}"))
        t0 = time.perf_counter_ns()
        fresh.prompt("Hi")
        cold.samples_ns.append(time.perf_counter_ns() - t0)
        cold.calls += 1
        cold.total_ns += cold.samples_ns[-1]
    for server in servers:
        server.close()
    process.kill()
    results = [c.result for c in contenders] + [cold]
    return table(
        ["case", "client", *CALL_HEADERS[2:-1], "vs in-process"],
        result_rows("failover, sync", results, names[0]),
    )


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


def section_imports(cfg: Config) -> tuple[str, float, float | None]:
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
    headers = ["module", "median ms", "min ms", "peer / failover"]
    return table(headers, rows, left=1), start_ms, (base if times["failover"] else None)


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
    p.add_argument("--quick", action="store_true", help="a shorter run with fewer iterations")
    p.add_argument("--n", type=int, help="timed chat calls per client and case (1000; quick: 200)")
    p.add_argument(
        "--floor",
        type=Path,
        default=default_floor_binary(),
        help="the floor binary (default: target/release/failover-bench-floor, built by make bench)",
    )
    p.add_argument(
        "--concurrency", type=int, default=100, help="calls in flight in the throughput case (100)"
    )
    p.add_argument("--tput-calls", type=int, help="calls per throughput run (8,000; quick: 2,000)")
    p.add_argument("--tput-rounds", type=int, help="throughput runs per client (3; quick: 1)")
    p.add_argument("--import-reps", type=int, help="fresh interpreters per module (default 7)")
    p.add_argument(
        "--embed-n", type=int, help="timed embeddings calls per client and case (30; quick: 6)"
    )
    p.add_argument(
        "--embed-in-flight", type=int, default=10, help="concurrent embeddings calls (default 10)"
    )
    p.add_argument("--stream-n", type=int, help="timed streams per client and case (10; quick: 5)")
    p.add_argument(
        "--stream-chunks", type=int, default=10_000, help="content chunks per stream (10,000)"
    )
    a = p.parse_args(argv)
    n = a.n if a.n is not None else (200 if a.quick else 1000)
    tput_calls = a.tput_calls if a.tput_calls is not None else (2000 if a.quick else 8000)
    tput_rounds = a.tput_rounds if a.tput_rounds is not None else (1 if a.quick else 3)
    embed_n = a.embed_n if a.embed_n is not None else (6 if a.quick else 30)
    stream_n = a.stream_n if a.stream_n is not None else (5 if a.quick else 10)
    numbers = (n, a.concurrency, tput_calls, tput_rounds, embed_n, a.embed_in_flight, stream_n)
    if min(*numbers, a.stream_chunks) < 1:
        p.error(
            "--n, --concurrency, --tput-calls, --tput-rounds, --embed-n, --embed-in-flight, "
            "--stream-n and --stream-chunks must be at least 1"
        )
    reps = a.import_reps if a.import_reps is not None else (3 if a.quick else 7)
    return Config(
        n=n,
        warmup=20 if a.quick else 50,
        rounds=5 if a.quick else 10,
        floor=a.floor,
        concurrency=a.concurrency,
        tput_calls=tput_calls,
        tput_rounds=tput_rounds,
        import_reps=max(1, reps),
        embed_n=embed_n,
        embed_warmup=1 if a.quick else 3,
        embed_rounds=3 if a.quick else 5,
        embed_in_flight=a.embed_in_flight,
        embed_batches=max(3 if a.quick else 5, embed_n // a.embed_in_flight),
        stream_n=stream_n,
        stream_warmup=1 if a.quick else 2,
        stream_rounds=5,
        stream_chunks=a.stream_chunks,
    )


def start_floor(cfg: Config) -> FloorServer | str:
    """The floor server, or why there is none (the tables against it are then skipped)."""
    if not cfg.floor.is_file():
        return (
            f"_skipped: no floor binary at {cfg.floor}; build it with "
            "`cargo build --release -p failover-bench-floor` (`make bench` does)_"
        )
    try:
        return FloorServer(cfg.floor)
    except (OSError, RuntimeError) as exc:
        return f"_skipped: the floor server did not start ({short_error(exc)})_"


def main(argv: Sequence[str] | None = None) -> None:
    os.environ.update(OFFLINE_ENV)
    for var in ("NO_PROXY", "no_proxy"):  # never route loopback through a proxy
        os.environ[var] = ",".join(filter(None, [os.environ.get(var), LOOPBACK]))
    cfg = parse_args(argv)
    started = time.perf_counter()
    print(f"# failover benchmark ({time.strftime('%Y-%m-%d')})\n")
    print(machine_info())
    print(
        f"- chat calls: {cfg.n} timed calls per client and case after {cfg.warmup} warm-up "
        f"calls, in {cfg.rounds} alternating rounds (the floor client: 2,000 a round after 100 "
        f"of its own); throughput: {cfg.tput_calls:,} calls at {cfg.concurrency} in flight, "
        f"{cfg.tput_rounds} alternating round(s); imports: median of {cfg.import_reps} fresh "
        "interpreters"
    )
    print(
        f"- embeddings: {cfg.embed_n} timed calls per client and case after {cfg.embed_warmup} "
        f"warm-up calls, in {cfg.embed_rounds} alternating rounds; {cfg.embed_batches} batches "
        f"of {cfg.embed_in_flight} in flight"
    )
    print(
        f"- streaming: {cfg.stream_n} timed streams of {cfg.stream_chunks:,} chunks per client "
        f"and case after {cfg.stream_warmup} warm-up streams, in {cfg.stream_rounds} "
        "alternating rounds\n"
    )
    sys.stdout.flush()
    goals: list[str] = []

    # First, while no in-process MockServer is running: process CPU time counts every thread.
    floor = start_floor(cfg)
    print(
        "## Client CPU per chat call, against the floor (floor server in its own process)\n",
        flush=True,
    )
    if isinstance(floor, str):
        print(floor)
        goals.append("CPU per call and throughput: not measured (no floor)")
    else:
        try:
            cpu, cpu_goals = section_cpu(cfg, floor)
            print(cpu, flush=True)
            print(
                f"\n## Async throughput: {cfg.tput_calls:,} calls at {cfg.concurrency} in flight, "
                "OpenAI wire (floor server in its own process)\n",
                flush=True,
            )
            tput, tput_goals = section_throughput(cfg, floor)
            print(tput, flush=True)
            goals += cpu_goals + tput_goals
        finally:
            floor.close()
    print(
        f"\n## Embeddings: {EMBED_TEXTS} texts x {EMBED_DIMS:,} dimensions in one call "
        "(MockServer on 127.0.0.1)\n",
        flush=True,
    )
    embed, embed_note = section_embed(cfg)
    print(embed_note + "\n")
    print(embed, flush=True)
    print(
        f"\n## Streaming: {cfg.stream_chunks:,} small chunks in one answer, OpenAI wire "
        "(MockServer on 127.0.0.1)\n",
        flush=True,
    )
    stream, stream_note, stream_bar = section_stream(cfg)
    print(stream_note + "\n")
    print(stream + "\n")
    print(stream_bar, flush=True)
    goals.append(stream_bar)
    print("\n## Retry path: 429 with retry-after: 1, then 200, with a recording sleeper\n")
    print(section_retry(cfg), flush=True)
    print("\n## Fleet state: RedisState on a local redis-server, next to in-process state\n")
    print(section_state(cfg), flush=True)
    imports, start_ms, import_ms = section_imports(cfg)
    print(f"\n## Import time (fresh interpreter each; `python -c pass` takes {start_ms:.0f} ms)\n")
    print(imports + "\n")
    hints = section_type_hints()
    print(hints)
    if import_ms is None:
        goals.append("import failover: not measured")
    else:
        state = "met" if import_ms <= IMPORT_GOAL_MS else "NOT met"
        goals.append(
            f"import failover: {import_ms:.1f} ms (goal <= {IMPORT_GOAL_MS:g} ms): {state}"
        )
    goals.append(hints)
    print("\n## Goals (issue 17)\n")
    print("\n".join(f"- {g}" for g in goals))
    print(f"\n_total bench time: {time.perf_counter() - started:.0f} s_")


if __name__ == "__main__":
    main()
