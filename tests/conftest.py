from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import failover
from failover.testing import MockServer

# Runs small inner test files, to check the plugin's fixtures and markers.
pytest_plugins = ["pytester"]

KEY = "sk-test-do-not-leak-1234567890"
# Shaped like a Google key, which redaction must find as well.
GEMINI_KEY = "AIza-test-do-not-leak-0987654321"


@pytest.fixture
def backup_server() -> Iterator[MockServer]:
    """A second MockServer, for the provider a call fails over to."""
    with MockServer() as server:
        yield server


@pytest.fixture(params=["sync", "async"])
def call(request: pytest.FixtureRequest) -> Callable[..., failover.Response]:
    """Runs ``client.prompt`` or ``client.prompt_async``: every behaviour test
    runs through both faces of the one engine."""

    def run(client: failover.Client, prompt: Any = "Hi", **kwargs: Any) -> failover.Response:
        if request.param == "sync":
            return client.prompt(prompt, **kwargs)
        return asyncio.run(client.prompt_async(prompt, **kwargs))

    return run


@pytest.fixture(params=["sync", "async"])
def face(request: pytest.FixtureRequest) -> str:
    """``"sync"`` or ``"async"``, for a test that reads a stream or embeds through both faces
    of the one engine itself (``collect``)."""
    return str(request.param)


def collect(
    face: str, client: failover.Client, prompt: Any = "Hi", **kwargs: Any
) -> tuple[list[failover.Chunk], failover.Response]:
    """Every chunk of a stream, and its response, through either face."""
    if face == "sync":
        with client.stream(prompt, **kwargs) as stream:
            chunks = list(stream)
        return chunks, stream.response

    async def run() -> tuple[list[failover.Chunk], failover.Response]:
        async with client.stream_async(prompt, **kwargs) as stream:
            chunks = [c async for c in stream]
        return chunks, stream.response

    return asyncio.run(run())


def openai(server: MockServer, **kwargs: Any) -> failover.OpenAICompatible:
    return failover.OpenAICompatible(
        model="gpt-4.1-mini", base_url=server.url, api_key=KEY, **kwargs
    )


def oa(data: Any) -> str:
    """An OpenAI-style stream event: the chunk as JSON, non-ASCII sent as UTF-8 as providers do."""
    return "data: " + json.dumps(data, ensure_ascii=False)


def oa_text(text: str, **extra: Any) -> str:
    """An OpenAI-style chunk carrying ``text``."""
    return oa({"model": "gpt-4.1", "choices": [{"index": 0, "delta": {"content": text}}], **extra})


def ant(kind: str, data: dict[str, Any]) -> str:
    """An Anthropic stream event."""
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}"


def anthropic(server: MockServer, **kwargs: Any) -> failover.Anthropic:
    return failover.Anthropic(model="claude-haiku-4-5", base_url=server.url, api_key=KEY, **kwargs)


def gemini(server: MockServer, **kwargs: Any) -> failover.Gemini:
    kwargs.setdefault("api_key", GEMINI_KEY)
    return failover.Gemini(model="gemini-2.5-flash", base_url=server.url, **kwargs)


def mistral(
    server: MockServer, model: str = "mistral-small-latest", **kwargs: Any
) -> failover.Mistral:
    return failover.Mistral(model=model, base_url=server.url, api_key=KEY, **kwargs)


def ollama(server: MockServer, **kwargs: Any) -> failover.Ollama:
    return failover.Ollama(model="llama3.2", base_url=server.url, **kwargs)


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A real redis-server on a free loopback port for the suite (`make test` runs it
    here; `.ci/run` installs Debian's package when it is missing)."""
    yield from _redis_server()


def _redis_server() -> Iterator[str]:
    import shutil

    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("no redis-server on this machine (`.ci/run` installs Debian's package)")
    options = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    if re.search(r"v=([7-9]|\d\d)\.", version):
        # The stall tests freeze it with DEBUG SLEEP, refused by default since Redis 7.
        options += ["--enable-debug-command", "local"]
    # A port free when probed can be taken before redis-server binds it (by another suite's
    # Redis on the same machine): then ours exits, and the one answering is not ours.
    for _ in range(5):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        process = subprocess.Popen(
            [binary, "--port", str(port), *options],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            if _answers_as(process, port):
                yield f"redis://127.0.0.1:{port}"
                return
        finally:
            process.terminate()
            process.wait(10)
    pytest.skip("redis-server did not start")


def _answers_as(process: subprocess.Popen[bytes], port: int) -> bool:
    """Whether the Redis answering on ``port`` is ``process`` (its INFO's process_id), waiting
    up to 4 s for it to start; False once ``process`` has exited."""
    import time

    for _ in range(200):
        if process.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as conn:
                conn.sendall(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
                reply = b""
                while b"process_id:" not in reply or not reply.endswith(b"\r\n"):
                    data = conn.recv(65536)
                    if not data:
                        break
                    reply += data
            found = re.search(rb"process_id:(\d+)", reply)
            return found is not None and int(found.group(1)) == process.pid
        except OSError:
            time.sleep(0.02)
    return False


def tool_call(call_id: str, name: str = "weather") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def tool_loop(*call_ids: str) -> list[dict[str, Any]]:
    """A history: a question, one assistant turn calling each id, a result for each."""
    return [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "", "tool_calls": [tool_call(i) for i in call_ids]},
        *[{"role": "tool", "tool_call_id": i, "content": f"result {i}"} for i in call_ids],
    ]


SINGLE_TRY = failover.RetryPolicy(max_retries_last=0)


def clear_proxy_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*failover._native.PROXY_VARIABLES, "NO_PROXY", "no_proxy", "REQUEST_METHOD"):
        monkeypatch.delenv(name, raising=False)


def chat_answer(prompt_tokens: int, completion_tokens: int, cached: int | None = None) -> Any:
    """A Chat Completions answer reporting its usage (cached: prompt_tokens_details)."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return {
        "id": "chatcmpl-1",
        "model": "gpt-4.1-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hello"},
                "finish_reason": "stop",
            }
        ],
        "usage": usage,
    }


# Fleet state on the suite's Redis (test_fleet.py, test_health.py).


def prefix() -> str:
    """A prefix of its own for each test: tests share the suite's Redis."""
    return f"t{uuid.uuid4().hex[:8]}"


def fleet_client(url: str, pfx: str, *servers: MockServer, **kwargs: Any) -> failover.Client:
    names = ["a", "b", "c"][: len(servers)]
    return failover.Client(
        {n: openai(s) for n, s in zip(names, servers)},
        state=failover.RedisState(url, prefix=pfx),
        **kwargs,
    )


def wait_for(check: Any, within: float = 2.0) -> float:
    """Seconds until ``check()`` is true (fails after ``within``)."""
    start = time.perf_counter()
    while not check():
        if time.perf_counter() - start > within:
            raise AssertionError("not seen in time")
        time.sleep(0.005)
    return time.perf_counter() - start


def redis_cli(url: str, *args: str) -> str:
    port = url.rsplit(":", 1)[1]
    cli = shutil.which("redis-cli")
    if cli is None:
        pytest.skip("no redis-cli")
    return subprocess.run(
        [cli, "-p", port, *args], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture
def own_redis() -> Iterator[tuple[str, Any]]:
    """A redis-server of this test's own, which it may kill and restart."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("no redis-server on this machine")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    running: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        running.append(
            subprocess.Popen(
                [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        wait_for(lambda: _accepts(port), within=5)

    def stop() -> None:
        process = running.pop()
        process.kill()
        process.wait(5)

    start()
    yield f"redis://127.0.0.1:{port}", (start, stop)
    while running:
        stop()


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.1):
            return True
    except OSError:
        return False
