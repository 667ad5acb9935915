"""``python -m failover demo``, ``python -m failover prompt`` and
``python -m failover batch IN OUT``."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from . import (
    XAI,
    Anthropic,
    Azure,
    CallFailed,
    Client,
    DeepSeek,
    FailedOver,
    FailoverError,
    Gemini,
    Groq,
    Limit,
    Mistral,
    Ollama,
    OpenAI,
    OpenAICompatible,
    OpenRouter,
    Price,
    Provider,
    RetryScheduled,
    __version__,
)

if TYPE_CHECKING:
    from ._events import Event
from .testing import FakeSleeper, MockServer

_RATE_LIMIT = {"type": "error", "error": {"type": "rate_limit_error", "message": "Rate limited"}}
_OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
_STOP = 'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}'


def _chunk(text: str) -> str:
    """A Chat Completions stream event carrying ``text``."""
    return "data: " + json.dumps(
        {"model": "gpt-4.1-mini", "choices": [{"index": 0, "delta": {"content": text}}]}
    )


def _anthropic_text(text: str) -> str:
    """An Anthropic stream's start and a first text block carrying ``text``."""
    return (
        "event: message_start\ndata: "
        '{"type":"message_start","message":{"model":"claude-haiku-4-5"}}\n\n'
        'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        '"content_block":{"type":"text","text":""}}\n\n'
        "event: content_block_delta\ndata: "
        + json.dumps(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": text},
            }
        )
    )


def demo(fake_sleep: bool = False) -> int:
    """Runs three calls against local simulated providers, with real sleeps
    (or, with ``fake_sleep``, a FakeSleeper: the same timeline at once)."""
    claude, gpt, local = MockServer(), MockServer(), MockServer()
    start = time.perf_counter()
    counts = {"retries": 0, "slept": 0.0, "failovers": 0}

    def stamp() -> str:
        return f"{time.perf_counter() - start:6.2f}s"

    def on_event(event: Event) -> None:
        if isinstance(event, RetryScheduled):
            counts["retries"] += 1
            counts["slept"] += event.delay
            why = f"{event.status or ''} {event.kind}".strip()
            print(
                f"  {stamp()}  {event.provider}: {why}; "
                f"waiting {event.delay:.2f}s, then retrying {event.provider}"
            )
        elif isinstance(event, FailedOver):
            counts["failovers"] += 1
            err = event.error
            why = f"{err.status or ''} {err.kind}".strip()
            if err.retry_after is not None:
                why += f", asked for {err.retry_after:g}s"
            print(f"  {stamp()}  {event.from_provider}: {why}; failing over to {event.to_provider}")
        elif isinstance(event, CallFailed):
            print(f"  {stamp()}  call failed: {event.error}")

    sleeper = FakeSleeper() if fake_sleep else None

    def new_client(claude_limit: Limit | None = None) -> Client:
        return Client(
            {
                "claude": Anthropic(
                    model="claude-haiku-4-5",
                    api_key="demo",
                    base_url=claude.url,
                    limit=claude_limit,
                ),
                "gpt": OpenAI(model="gpt-4.1-mini", api_key="demo", base_url=gpt.url),
                # A local model costs nothing per token.
                "local": OpenAICompatible(
                    model="llama-3.1-8b", base_url=local.url, price=Price(0, 0)
                ),
            },
            # USD per million tokens, by the model each request was sent with.
            prices={
                "claude-haiku-4-5": Price(1.00, 5.00, cache_read=0.10, cache_write=1.25),
                "gpt-4.1-mini": Price(0.40, 1.60, cache_read=0.10),
                # Text in, image tokens out.
                "gpt-image-1": Price(5.00, 40.00),
            },
            timeout=5.0,
            sleeper=sleeper,
            deadline=20.0,
            on_event=on_event,
        )

    # A client remembers cooldowns across calls: scenes that start afresh get a new one.
    current = {"client": new_client()}

    def short_rate_limit() -> None:
        claude.push(429, headers={"retry-after": "1"}, json=_RATE_LIMIT)
        claude.push_text("Hello from Claude, after a 1 s wait.", wire="anthropic")

    def long_retry_after() -> None:
        claude.push(429, headers={"retry-after": "300"}, json=_RATE_LIMIT)
        gpt.push_text("Hello from GPT, without waiting 300 s.")

    def outage() -> None:
        claude.push(529, json=_OVERLOADED)
        gpt.push(fault="reset")
        gpt.push(fault="reset")
        local.push_text("Hello from the local model.")

    def stream_overloaded() -> None:
        claude.push(
            sse=[
                "event: message_start\n"
                'data: {"type":"message_start","message":{"model":"claude-haiku-4-5",'
                '"usage":{"input_tokens":9}}}',
                "event: error\ndata: " + json.dumps(_OVERLOADED),
            ]
        )
        gpt.push(sse=[_chunk(w) for w in ("Streamed ", "from ", "GPT.")] + [_STOP])

    def stream_cut() -> None:
        claude.push(
            sse=[_anthropic_text("A story that ")],
            fault="cut:1",
        )
        claude.push(529, json=_OVERLOADED)
        gpt.push(sse=[_chunk(w) for w in ("A whole ", "story, ", "from GPT.")] + [_STOP])

    def skipped_while_cooling() -> None:
        gpt.push_text("Hello from GPT; Claude was not even asked.")

    def burst_script() -> None:
        # Claude takes two calls at a time (its limit): the burst's others go to GPT
        # at once rather than earn 429s from Claude.
        current["client"] = new_client(claude_limit=Limit(concurrency=2))
        for _ in range(2):
            claude.push_text("Hello from Claude.", wire="anthropic", delay=0.5)
        for _ in range(4):
            gpt.push_text("Hello from GPT, while Claude was busy.")

    def burst() -> Any:
        client = current["client"]
        with ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(lambda _: client.prompt("Say hello"), range(6)))
        by = {name: sum(r.provider == name for r in answers) for name in ("claude", "gpt")}
        print(
            f"  {stamp()}  6 calls at once: claude answered {by['claude']}, gpt {by['gpt']}; "
            f"claude never had more than {claude.max_in_flight} at once"
        )
        return next(r for r in answers if r.provider == "gpt")

    def image_rate_limit() -> None:
        gpt.push(429, headers={"retry-after": "1"}, json=_RATE_LIMIT)
        gpt.push_image(revised_prompt="A red fox in fresh snow, morning light")

    def prompt() -> Any:
        return current["client"].prompt("Say hello")

    def image() -> Any:
        return current["client"].generate_image("a red fox in snow", size="1024x1024")

    def stream(on_interrupt: str = "raise") -> Callable[[], Any]:
        def run() -> Any:
            shown = []
            with current["client"].stream("Tell me a story", on_interrupt=on_interrupt) as s:
                for chunk in s:
                    if chunk.kind == "restart":
                        shown.append(f"[restart: discard {chunk.discarded!r}]")
                    else:
                        shown.append(repr(chunk.text))
            print(f"  {stamp()}  chunks: {' '.join(shown)}")
            return s.response

        return run

    # (title, script, call, whether the scene starts with a new client)
    scenes: list[tuple[str, Callable[[], None], Callable[[], Any], bool]] = [
        (
            "1. A short rate limit is waited out on the same provider",
            short_rate_limit,
            prompt,
            False,
        ),
        (
            "2. A long Retry-After fails over at once (no 5-minute sleep)",
            long_retry_after,
            prompt,
            False,
        ),
        (
            "3. The next call skips Claude, which asked for 300 s of quiet",
            skipped_while_cooling,
            prompt,
            False,
        ),
        (
            "4. An outage: Claude overloaded, GPT's connection drops, the local model answers",
            outage,
            prompt,
            True,
        ),
        (
            "5. A stream: Claude's overloaded_error inside its 200, before any text, fails over",
            stream_overloaded,
            stream(),
            True,
        ),
        (
            "6. A stream cut after its first words; Claude's retry is overloaded; GPT restarts "
            "it (on_interrupt='restart')",
            stream_cut,
            stream("restart"),
            True,
        ),
        (
            "7. A burst of six calls, Claude limited to two at a time: the rest go to GPT",
            burst_script,
            burst,
            False,
        ),
        (
            "8. An image call waits out GPT's short rate limit (Claude cannot draw: skipped)",
            image_rate_limit,
            image,
            True,
        ),
    ]
    answered = 0
    kind = "fake sleeps" if fake_sleep else "real sleeps"
    print(f"failover demo: three providers on 127.0.0.1, {kind}\n")
    for title, script, call, fresh in scenes:
        print(title)
        if fresh:
            current["client"] = new_client()
        script()
        call_start = time.perf_counter()
        try:
            r = call()
        except FailoverError as exc:
            print(f"  {stamp()}  raised {type(exc).__name__}: {exc}\n")
            continue
        answered += 1
        took = time.perf_counter() - call_start
        what = (
            repr(r.text)
            if hasattr(r, "text")
            else f"{len(r.data)} bytes of {r.images[0].media_type}"
        )
        print(f"  {stamp()}  {r.provider} answered in {took:.2f}s: {what}")
        print(f"           attempts: {', '.join(_attempt(a) for a in r.attempts)}")
        print(f"           cost: {_cost(r)}\n")
    total = time.perf_counter() - start
    print(
        f"summary: {answered}/{len(scenes)} calls answered, {counts['retries']} retries "
        f"({counts['slept']:.2f}s slept), {counts['failovers']} failovers, {total:.2f}s in all"
    )
    for server in (claude, gpt, local):
        server.close()
    batched = _demo_batch(sleeper=FakeSleeper() if fake_sleep else None)
    return 0 if answered == len(scenes) and batched else 1


def _demo_batch(lines: int = 200, sleeper: Any = None) -> bool:
    """The last scene: ``python -m failover batch`` over ``lines`` requests
    against two simulated providers where about 30% of answers are faults,
    stopped by --max-cost, then resumed to the end."""
    import dataclasses
    import random
    import tempfile

    from . import _batch

    print("\n9. A batch job: 200 prompts, about 30% of answers are faults (429s with hints,")
    print("   529s, resets); stopped by --max-cost, then resumed: nothing lost, nothing twice")
    rng = random.Random(9)
    with MockServer() as claude, MockServer() as gpt, tempfile.TemporaryDirectory() as folder:
        for server, wire in ((claude, "anthropic"), (gpt, "openai")):
            for _ in range(lines + lines // 2):
                roll = rng.random()
                if roll < 0.12:
                    server.push(429, headers={"retry-after-ms": "40"}, json=_RATE_LIMIT)
                elif roll < 0.22:
                    server.push(529 if wire == "anthropic" else 503, json=_OVERLOADED)
                elif roll < 0.3:
                    server.push(fault="reset")
                server.push_text("ok", wire=wire)
        config = os.path.join(folder, "failover.toml")
        with open(config, "w") as file:
            file.write(
                "[client]\ndeadline = 20\n\n"
                f'[providers.claude]\ntype = "anthropic"\nmodel = "claude-haiku-4-5"\n'
                f'api_key = "sk-ant-demo-0000000000"\nbase_url = "{claude.url}"\n'
                "price = { input = 1.0, output = 5.0 }\n\n"
                f'[providers.gpt]\ntype = "openai"\nmodel = "gpt-4.1-mini"\n'
                f'api_key = "sk-demo-0000000000"\nbase_url = "{gpt.url}"\n'
                "price = { input = 0.4, output = 1.6 }\n"
            )
        source, out = os.path.join(folder, "in.jsonl"), os.path.join(folder, "out.jsonl")
        with open(source, "w") as file:
            for i in range(lines):
                file.write(json.dumps({"id": f"q{i}", "prompt": f"Classify ticket {i}"}) + "\n")
        print("   $ python -m failover batch in.jsonl out.jsonl --max-cost 0.0006")
        resumed = _batch.Options(
            input=source,
            output=out,
            config=config,
            concurrency=16,
            progress="none",
            sleeper=sleeper,
        )
        capped = dataclasses.replace(resumed, max_cost=0.0006)
        first = _batch.run(capped)
        print(f"   $ python -m failover batch in.jsonl out.jsonl   (resumed; exit {first} before)")
        second = _batch.run(resumed)
        with open(out) as file:
            ids = [json.loads(line)["id"] for line in file]
        unique = len(set(ids)) == len(ids) == lines
        print(
            f"   out.jsonl: {len(ids)} results, one for each of the {lines} ids: "
            f"{'yes' if unique else 'NO'}"
        )
    return first == _batch.STOPPED and second in (_batch.DONE, _batch.FAILED_LINES) and unique


def _cost(r: Any) -> str:
    """What a call cost: every attempt's known cost, and what could not be priced."""
    total = r.total_cost
    shown = "unknown" if total is None else f"${total:.6f}"
    usage = r.total_usage

    def shown_tokens(n: int | None) -> str:
        return "?" if n is None else str(n)  # unknown is not 0

    tokens = f"{shown_tokens(usage.input_tokens)} in / {shown_tokens(usage.output_tokens)} out"
    unpriced = f", {r.unpriced_attempts} attempt(s) unpriced" if r.unpriced_attempts else ""
    return f"{shown} for {tokens} tokens over {len(r.attempts)} attempt(s){unpriced}"


def _attempt(a: Any) -> str:
    if a.skipped is not None:
        return f"{a.provider} skipped ({a.skipped})"
    outcome = "ok" if a.kind is None else f"{a.status or '-'} {a.kind}"
    return f"{a.provider} {outcome}"


_DRIVERS: dict[str, type[Provider]] = {
    "anthropic": Anthropic,
    "openai": OpenAI,
    "gemini": Gemini,
    "groq": Groq,
    "mistral": Mistral,
    "deepseek": DeepSeek,
    "xai": XAI,
    "openrouter": OpenRouter,
    "azure": Azure,
    "ollama": Ollama,
}
#: A model for each driver when none is given (Azure needs its deployment's name).
_DEFAULT_MODELS = {
    "anthropic": "claude-haiku-4-5",
    "openai": "gpt-4.1-mini",
    "gemini": "gemini-2.5-flash",
    "groq": "llama-3.3-70b-versatile",
    "mistral": "mistral-small-latest",
    "deepseek": "deepseek-chat",
    "xai": "grok-4-1-fast-non-reasoning",
    "openrouter": "openrouter/auto",
    "ollama": "llama3.2",
}


def prompt(args: argparse.Namespace) -> int:
    # Without --provider: every driver whose key variable is set, in table order.
    specs = args.provider or [
        name
        for name, cls in _DRIVERS.items()
        if name in _DEFAULT_MODELS
        and any(os.environ.get(v, "").strip() for v in (cls.env_var, *cls.env_fallbacks) if v)
    ]
    if not specs:
        print(
            "no provider: pass --provider openai:MODEL (azure:DEPLOYMENT for Azure, which has "
            "no default model) or set an API key variable",
            file=sys.stderr,
        )
        return 2
    providers: dict[str, Provider] = {}
    for spec in specs:
        driver, _, model = spec.partition(":")
        if driver not in _DRIVERS:
            print(f"unknown provider {driver!r}: use one of {sorted(_DRIVERS)}", file=sys.stderr)
            return 2
        model = model or _DEFAULT_MODELS.get(driver, "")
        if not model:
            print(f"{driver} needs a model: --provider {driver}:NAME", file=sys.stderr)
            return 2
        # One driver may appear twice with two models: the second is "driver#2".
        name, n = driver, 1
        while name in providers:
            n += 1
            name = f"{driver}#{n}"
        if any(
            p.model == model and p_name.split("#")[0] == driver for p_name, p in providers.items()
        ):
            print(f"--provider {spec} is given twice", file=sys.stderr)
            return 2
        try:
            providers[name] = _DRIVERS[driver](model)
        except FailoverError as exc:
            print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
    try:
        client = Client(providers, deadline=args.deadline)
        r = client.prompt(args.text)
    except FailoverError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(r.text)
    print(f"[{r.provider} {r.model}, {len(r.attempts)} attempt(s)]", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m failover")
    parser.add_argument("--version", action="version", version=f"failover {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="run the engine against local simulated providers")
    d.add_argument("--fake-sleep", action="store_true", help="record sleeps instead of sleeping")
    p = sub.add_parser("prompt", help="send one prompt through a provider chain")
    p.add_argument("text")
    p.add_argument("--provider", action="append", help="DRIVER[:MODEL], in order; repeatable")
    p.add_argument("--deadline", type=float, default=None, help="seconds for the whole call")
    b = sub.add_parser(
        "batch",
        help="run a JSON Lines file of requests through a config's providers",
        description='Runs each line of IN ({"id", "prompt" | "messages" | "embed", '
        "and any prompt() option}) and appends its result to OUT as it arrives. Run it "
        "again with the same OUT to resume: ids already there are skipped.",
    )
    b.add_argument("input", metavar="IN", help="JSON Lines, one request a line")
    b.add_argument("output", metavar="OUT", help="JSON Lines of results (appended; resumable)")
    b.add_argument("--config", help="the client's TOML file (default: ./failover.toml)")
    b.add_argument("--concurrency", type=int, default=64, help="calls at once (default 64)")
    b.add_argument("--deadline", type=float, help="seconds for each call, waits included")
    b.add_argument("--max-cost", type=float, help="USD: start no call once the cost reaches it")
    b.add_argument("--limit", type=int, help="only the first N lines of IN")
    b.add_argument(
        "--kind", choices=("chat", "embed", "stream"), help="how to run lines that could be either"
    )
    b.add_argument("--ordered", action="store_true", help="write results in input order")
    b.add_argument(
        "--retry-failed", action="store_true", help="run again the ids whose result is an error"
    )
    b.add_argument("--summary", metavar="FILE", help="also write the summary as JSON")
    b.add_argument(
        "--progress",
        choices=("auto", "bar", "plain", "none"),
        default="auto",
        help="a live bar in a terminal, plain lines otherwise (auto)",
    )
    b.add_argument(
        "--progress-interval", type=float, default=10.0, help="seconds between plain lines"
    )
    args = parser.parse_args(argv)
    if args.command == "demo":
        return demo(fake_sleep=args.fake_sleep)
    if args.command == "batch":
        from . import _batch

        return _batch.run(
            _batch.Options(
                input=args.input,
                output=args.output,
                config=args.config,
                concurrency=args.concurrency,
                deadline=args.deadline,
                max_cost=args.max_cost,
                limit=args.limit,
                kind=args.kind,
                ordered=args.ordered,
                retry_failed=args.retry_failed,
                summary=args.summary,
                progress=args.progress,
                interval=args.progress_interval,
            )
        )
    return prompt(args)


if __name__ == "__main__":
    sys.exit(main())
