"""The fault server `bench/soak.py` runs in its own process: OpenAI Chat Completions on
127.0.0.1 that fails a share of requests at random, and logs every request it received.

    python bench/soak_server.py --log requests.tsv [--fail-rate 0.3] [--seed 1]

It prints its port on the first line of stdout, then serves until SIGTERM or SIGINT (or a
`GET /__stop`). `GET /__flush` writes the log out and answers with the number of requests
logged so far.

Faults, each among the failing share: 429, 503 and 529 with a retry hint of 0 to 0.2 s
(`retry-after-ms`, or `retry-after: 0`), a connection reset before any answer, a stream cut
before its first event or after its first content, a JSON body cut halfway (both cuts end in a
reset). Paths are `/{provider}/chat/completions`; `provider` goes in the log.

Log: one tab-separated line per request, in arrival order: the `x-soak-call` header, the
provider, the `x-retry-count` header, and what was sent (`200`, `429`, `503`, `529`, `reset`,
`cut-early`, `cut-late`, `cut-body`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import signal
import socket
import struct
import sys

FAULTS = (
    # (what, weight among failures)
    ("429", 25),
    ("503", 15),
    ("529", 15),
    ("reset", 20),
    ("cut-early", 8),
    ("cut-late", 9),
    ("cut-body", 8),
)
WHATS = [what for what, _ in FAULTS]
WEIGHTS = [weight for _, weight in FAULTS]


def completion(text: str) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-soak",
            "object": "chat.completion",
            "created": 1767967901,
            "model": "soak-model",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        }
    ).encode()


BODY = completion("soak answer")
CONTENT_EVENT = b'data: {"choices":[{"index":0,"delta":{"content":"soak "}}]}\n\n'
SECOND_EVENT = b'data: {"choices":[{"index":0,"delta":{"content":"answer"}}]}\n\n'
FINISH_EVENT = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
DONE_EVENT = b"data: [DONE]\n\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class Server:
    def __init__(self, log_path: str, fail_rate: float, seed: int) -> None:
        self.random = random.Random(seed)
        self.fail_rate = fail_rate
        # Buffered: a line per request; flushed on /__flush and at exit.
        self.log = open(log_path, "w", buffering=1 << 20)
        self.logged = 0
        self.stopping: asyncio.Event | None = None

    def record(self, call: str, provider: str, retry_count: str, what: str) -> None:
        self.log.write(f"{call}\t{provider}\t{retry_count}\t{what}\n")
        self.logged += 1

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                _method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if line:
                        name, _, value = line.partition(":")
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                if path.startswith("/__"):
                    await self.control(path, writer)
                    continue
                if not await self.answer(path, headers, body, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        except asyncio.CancelledError:
            # The server stopping with this connection idle: not an error to print.
            return
        finally:
            writer.close()

    async def control(self, path: str, writer: asyncio.StreamWriter) -> None:
        if path == "/__flush":
            self.log.flush()
        elif path == "/__stop" and self.stopping is not None:
            self.stopping.set()
        data = str(self.logged).encode()
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(data), data))
        await writer.drain()

    async def answer(
        self, path: str, headers: dict[str, str], body: bytes, writer: asyncio.StreamWriter
    ) -> bool:
        """Answers one request; False when the connection is gone (reset or cut)."""
        provider = path.strip("/").split("/", 1)[0]
        stream = b'"stream":true' in body or b'"stream": true' in body
        what = "200"
        if self.random.random() < self.fail_rate:
            what = self.random.choices(WHATS, WEIGHTS)[0]
            if what == "cut-body" and stream:
                what = "cut-early"
            if what in ("cut-early", "cut-late") and not stream:
                what = "cut-body"
        self.record(
            headers.get("x-soak-call", "-"), provider, headers.get("x-retry-count", "-"), what
        )
        if what in ("429", "503", "529"):
            hint = self.random.choice(
                [f"retry-after-ms: {self.random.randint(0, 200)}", "retry-after: 0"]
            )
            error = b'{"error":{"message":"soak fault","type":"soak"}}'
            reason = {"429": "Too Many Requests", "503": "Service Unavailable", "529": "Overloaded"}
            writer.write(
                f"HTTP/1.1 {what} {reason[what]}\r\ncontent-type: application/json\r\n"
                f"{hint}\r\ncontent-length: {len(error)}\r\n\r\n".encode()
                + error
            )
            await writer.drain()
            return True
        if what == "reset":
            reset(writer)
            return False
        if not stream:
            head = (
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
            )
            if what == "cut-body":
                writer.write(head % len(BODY) + BODY[: len(BODY) // 2])
                await writer.drain()
                reset(writer)
                return False
            writer.write(head % len(BODY) + BODY)
            await writer.drain()
            return True
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        if what == "cut-early":
            await writer.drain()
            reset(writer)
            return False
        writer.write(chunk(CONTENT_EVENT))
        if what == "cut-late":
            await writer.drain()
            reset(writer)
            return False
        writer.write(chunk(SECOND_EVENT) + chunk(FINISH_EVENT) + chunk(DONE_EVENT) + b"0\r\n\r\n")
        await writer.drain()
        return True

    async def serve(self) -> None:
        self.stopping = asyncio.Event()
        server = await asyncio.start_server(self.handle, "127.0.0.1", 0, backlog=4096)
        port = server.sockets[0].getsockname()[1]
        print(port, flush=True)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stopping.set)
        async with server:
            await self.stopping.wait()
        self.log.close()


def reset(writer: asyncio.StreamWriter) -> None:
    """Ends the connection with a TCP reset (SO_LINGER 0), as a crashed proxy does."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", required=True)
    parser.add_argument("--fail-rate", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    # 10,000 concurrent calls are 10,000 connections.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    del soft
    asyncio.run(Server(args.log, args.fail_rate, args.seed).serve())
    sys.exit(0)


if __name__ == "__main__":
    main()
