"""``python -m failover batch IN OUT``: a JSON Lines file of requests run
through one client, each result written as it arrives, a run that resumes
where the last one stopped, progress while it runs and a summary at the end.

The output is the record of what was done: one complete line per input id,
appended with a single write and flushed at once, so a kill loses at most
the calls in flight. A half line left by a crash mid-write is cut off when
the file is next opened, and the ids already there are not run again."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from ._attempt import steps
from ._checks import number, seconds
from ._exceptions import ConfigurationError, FailoverError

if TYPE_CHECKING:
    from ._attempt import Attempt
    from ._client import Client

#: Exit codes.
DONE, FAILED_LINES, USAGE, STOPPED, INTERRUPTED, TERMINATED = 0, 1, 2, 3, 130, 143
#: A line's own keys; every other key is an option of the call.
_REQUEST_KEYS = ("id", "prompt", "messages", "embed")
#: ``prompt()`` options a JSON line may give (``retry=`` is a Python object).
_CHAT_OPTIONS = (
    "provider",
    "model",
    "system",
    "max_tokens",
    "temperature",
    "tools",
    "tool_choice",
    "response_format",
    "stop",
    "top_p",
    "seed",
    "headers",
    "timeout",
    "deadline",
    "idempotency_key",
    "hedge",
)
_EMBED_OPTIONS = (
    "provider",
    "model",
    "dimensions",
    "headers",
    "timeout",
    "deadline",
    "idempotency_key",
)


@dataclass
class Options:
    """What the command line says."""

    input: str
    output: str
    config: str | None = None
    concurrency: int = 64
    deadline: float | None = None
    max_cost: float | None = None
    limit: int | None = None
    kind: str | None = None
    ordered: bool = False
    retry_failed: bool = False
    summary: str | None = None
    progress: str = "auto"
    interval: float = 10.0
    #: The client's sleeper (not a flag: the demo's FakeSleeper).
    sleeper: Any = None


@dataclass
class Line:
    """One request of the input."""

    number: int
    id: Any
    request: dict[str, Any] | None
    problem: str | None = None


@dataclass
class Tally:
    """What this run did, as it goes."""

    total: int
    done: int = 0
    answered: int = 0
    failed: int = 0
    cost: float = 0.0
    started: float = field(default_factory=time.monotonic)
    stopping: str | None = None
    #: The signal that stopped the run ("Ctrl-C" or "SIGTERM"), if one did.
    signal: str | None = None
    unpriced_said: bool = False


def _key(value: Any) -> str:
    """An id as the output's records are matched on (1 and "1" differ)."""
    return json.dumps(value, sort_keys=True)


def read_done(path: str, retry_failed: bool) -> dict[str, bool]:
    """The ids the output already has (each to whether it was answered),
    after cutting off a half line a crash left at its end. With
    ``retry_failed``, the failed results are removed from the file first
    (their ids are run again)."""
    if not os.path.exists(path):
        return {}
    with open(path, "rb") as file:
        data = file.read()
    done: dict[str, bool] = {}
    kept: list[bytes] = []
    end = 0
    for raw in data.splitlines(keepends=True):
        if not raw.endswith(b"\n"):
            break  # a half line: the write a crash interrupted
        try:
            record = json.loads(raw)
            key = _key(record["id"])
            ok = bool(record["ok"])
        except (ValueError, KeyError, TypeError):
            raise ConfigurationError(
                f"{path}: line {len(kept) + 1} is not a result this command wrote; "
                "pass another OUT file"
            ) from None
        end += len(raw)
        if retry_failed and not ok:
            done.pop(key, None)
            continue
        done[key] = ok
        kept.append(raw)
    if retry_failed or end != len(data):
        _replace(path, kept)
    return done


def _replace(path: str, lines: Iterable[bytes]) -> None:
    """Writes OUT anew with ``lines``, replacing it at once (a crash leaves
    the old file or the new one, never half of one)."""
    temporary = f"{path}.tmp"
    with open(temporary, "wb") as file:
        file.writelines(lines)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


def read_input(path: str, limit: int | None) -> list[Line]:
    """Every request line of the input (blank lines skipped), in order."""
    try:
        file = open(path, "rb")
    except OSError as error:
        raise ConfigurationError(f"input {path!r} cannot be read: {error}") from None
    lines: list[Line] = []
    seen: dict[str, int] = {}
    with file:
        for number, raw in enumerate(file, start=1):
            if limit is not None and len(lines) >= limit:
                break
            if not raw.strip():
                continue
            request: dict[str, Any] | None = None
            problem = None
            try:
                parsed = json.loads(raw)
            except ValueError as error:
                problem = f"line {number} is not JSON: {error}"
            else:
                if isinstance(parsed, dict):
                    request = parsed
                else:
                    problem = f"line {number} is not a JSON object"
            line_id = request.get("id", number) if request is not None else number
            key = _key(line_id)
            if key in seen:
                raise ConfigurationError(
                    f"{path}: line {number} has the id {line_id!r} of line {seen[key]}: "
                    "ids must be unique (a line without one gets its line number)"
                )
            seen[key] = number
            lines.append(Line(number, line_id, request, problem))
    return lines


def _usage(usage: Any) -> dict[str, int | None] | None:
    if usage is None:
        return None
    fields = (
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "reasoning_tokens",
    )
    return {name: getattr(usage, name) for name in fields}


def _attempts(attempts: list[Attempt]) -> dict[str, Any]:
    """What a call's attempts did, in brief."""
    sent = [a for a in attempts if a.skipped is None]
    # (As stats() counts them: a hedge's loser is neither.)
    walked = list(steps(attempts))
    return {
        "count": len(sent),
        "retries": sum(1 for _, retried, _ in walked if retried is not None),
        "failovers": sum(1 for _, _, left in walked if left is not None),
        "waited": round(float(sum(a.waited for a in sent)), 3),
        "path": [f"{a.provider}:{a.status if a.status is not None else a.kind}" for a in sent],
        "skipped": [f"{a.provider}: {a.skipped}" for a in attempts if a.skipped is not None],
    }


def _error_record(line: Line, error: BaseException) -> dict[str, Any]:
    """A failed line's result: always the same keys (``None`` where the
    error has no such thing)."""
    message = str(error)
    if isinstance(error, ConfigurationError) and not message.startswith("line "):
        message = f"line {line.number}: {message}"
    attempts = list(getattr(error, "attempts", ()) or ())
    sent = [a for a in attempts if a.skipped is None]
    detail: dict[str, Any] = {
        "class": type(error).__name__,
        "kind": getattr(error, "kind", None),
        "status": getattr(error, "status", None),
        # The provider it names, else the last one the call tried.
        "provider": getattr(error, "provider", None) or (sent[-1].provider if sent else None),
        "message": message,
    }
    return {
        "id": line.id,
        "ok": False,
        "error": detail,
        "cost": error.total_cost if isinstance(error, FailoverError) else None,
        "attempts": _attempts(attempts),
    }


def _options_of(
    request: dict[str, Any], allowed: tuple[str, ...], defaults: dict[str, Any]
) -> dict[str, Any]:
    options = dict(defaults)
    for key, value in request.items():
        if key in _REQUEST_KEYS:
            continue
        if key not in allowed:
            raise ConfigurationError(
                f"unknown option {key!r} for this line; it takes {', '.join(allowed)}"
            )
        options[key] = value
    return options


async def _call(client: Client, line: Line, options: Options) -> dict[str, Any]:
    """One line's call, and its result record (an error is a result too)."""
    if line.problem is not None or line.request is None:
        return _error_record(line, ConfigurationError(line.problem or "not a request"))
    request = line.request
    defaults: dict[str, Any] = {}
    if options.deadline is not None:
        defaults["deadline"] = options.deadline
    try:
        if "embed" in request or options.kind == "embed":
            texts = request.get("embed", request.get("prompt"))
            if texts is None:
                raise ConfigurationError('an embeddings line needs "embed" (a text or a list)')
            embedded = await client.embed_async(
                texts, **_options_of(request, _EMBED_OPTIONS, defaults)
            )
            vectors = {"vector": embedded.vectors[0]} if isinstance(texts, str) else {}
            return {
                "id": line.id,
                "ok": True,
                **(vectors or {"vectors": embedded.vectors}),
                "provider": embedded.provider,
                "model": embedded.model,
                "usage": _usage(embedded.usage),
                "cost": embedded.total_cost,
                "attempts": _attempts(list(embedded.attempts)),
            }
        if "messages" in request and "prompt" in request:
            raise ConfigurationError('a line has "prompt" or "messages", not both')
        conversation = request.get("messages", request.get("prompt"))
        if conversation is None:
            raise ConfigurationError('a line needs "prompt", "messages" or "embed"')
        call_options = _options_of(request, _CHAT_OPTIONS, defaults)
        if options.kind == "stream":
            async with client.stream_async(conversation, **call_options) as stream:
                async for _ in stream:
                    pass
            response = stream.response
        else:
            response = await client.prompt_async(conversation, **call_options)
    except FailoverError as error:
        return _error_record(line, error)
    except (TypeError, ValueError) as error:
        # An option of the wrong shape that no check named: still a result.
        return _error_record(line, ConfigurationError(str(error)))
    record: dict[str, Any] = {"id": line.id, "ok": True, "text": response.text}
    if response.tool_calls:
        record["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments_json} for c in response.tool_calls
        ]
    record.update(
        finish_reason=response.finish_reason,
        provider=response.provider,
        model=response.model,
        usage=_usage(response.usage),
        cost=response.total_cost,
        attempts=_attempts(list(response.attempts)),
    )
    return record


class Writer:
    """Appends each record as one line with one write, at once: whatever
    ends the run, a result that arrived is in the file."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n"
        os.write(self._fd, line.encode())

    def close(self) -> None:
        os.close(self._fd)


def put_in_order(path: str, lines: list[Line]) -> None:
    """Rewrites OUT with its results in the input's order (those of ids
    the input lacks after them), replacing it at once: ``--ordered``, done
    when a run ends, so no result ever waits in memory for its turn."""
    with open(path, "rb") as file:
        records = [raw for raw in file.read().splitlines(keepends=True) if raw.endswith(b"\n")]
    by_id = {_key(json.loads(raw)["id"]): raw for raw in records}
    ordered = [by_id.pop(_key(line.id)) for line in lines if _key(line.id) in by_id]
    ordered += by_id.values()
    _replace(path, ordered)


class Display:
    """Progress: a live bar (rich) in a terminal, else a plain line every
    ``interval`` seconds; and the summary at the end."""

    def __init__(self, client: Client, tally: Tally, options: Options, out: IO[str]) -> None:
        self.client = client
        self.tally = tally
        self.out = out
        self.interval = options.interval
        mode = options.progress
        if mode == "auto":
            mode = "bar" if out.isatty() else "plain"
        if mode == "bar":
            try:
                import rich  # noqa: F401
            except ImportError:
                print(
                    "(pip install 'failover[batch]' for a live progress bar)",
                    file=out,
                    flush=True,
                )
                mode = "plain"
        self.mode = mode

    # What it shows.

    def rate_and_eta(self) -> tuple[float, float | None]:
        elapsed = max(time.monotonic() - self.tally.started, 1e-9)
        rate = self.tally.done / elapsed
        left = self.tally.total - self.tally.done
        return rate, (left / rate if rate > 0 else None)

    def provider_rows(self) -> list[tuple[str, Any, str]]:
        stats = self.client.stats()
        cooling = self.client.cooldowns()
        rows = []
        for name, figures in stats.providers.items():
            cool = [f"{s:.0f}s" for key, s in cooling.items() if key.split(":")[0] == name]
            rows.append((name, figures, f"cooling {cool[0]}" if cool else ""))
        return rows

    def plain_line(self) -> str:
        rate, eta = self.rate_and_eta()
        tally = self.tally
        percent = 100.0 * tally.done / tally.total if tally.total else 100.0
        parts = [
            f"batch: {tally.done}/{tally.total} ({percent:.1f}%), {tally.answered} answered, "
            f"{tally.failed} failed, {rate:.1f}/s, ETA {_duration(eta)}, cost ${tally.cost:.4f}"
        ]
        for name, figures, cooling in self.provider_rows():
            cost = "" if figures.cost is None else f", ${figures.cost:.4f}"
            parts.append(
                f"{name}: {figures.answered} answered, {figures.retries} retries, "
                f"{figures.waited:.1f}s waited, {figures.failovers} failovers{cost}"
                + (f", {cooling}" if cooling else "")
            )
        return " | ".join(parts)

    def renderable(self) -> Any:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table

        tally = self.tally
        rate, eta = self.rate_and_eta()
        head = Table.grid(padding=(0, 1))
        head.add_row(
            ProgressBar(total=max(tally.total, 1), completed=tally.done, width=40),
            f"{tally.done}/{tally.total}",
            f"{rate:.1f}/s",
            f"ETA {_duration(eta)}",
            f"{tally.answered} answered, {tally.failed} failed",
            f"${tally.cost:.4f}",
        )
        table = Table(box=None, padding=(0, 2), header_style="bold")
        for column in ("provider", "answered", "retries", "waited", "failovers", "cost", ""):
            table.add_column(column, justify="left" if column in ("provider", "") else "right")
        for name, figures, cooling in self.provider_rows():
            table.add_row(
                name,
                str(figures.answered),
                str(figures.retries),
                f"{figures.waited:.1f}s",
                str(figures.failovers),
                "-" if figures.cost is None else f"${figures.cost:.4f}",
                cooling,
            )
        parts: list[Any] = [head, table]
        if tally.stopping:
            parts.append(f"stopping: {tally.stopping}")
        return Group(*parts)

    async def run(self) -> None:
        """Shows progress until cancelled."""
        if self.mode == "none":
            return
        if self.mode == "plain":
            while True:
                await asyncio.sleep(self.interval)
                print(self.plain_line(), file=self.out, flush=True)
        from rich.console import Console
        from rich.live import Live

        console = Console(file=self.out)
        with Live(get_renderable=self.renderable, console=console, refresh_per_second=4):
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.Event().wait()

    def summary(self, before: int, failed_before: int, left: int) -> dict[str, Any]:
        stats = self.client.stats()
        providers = {}
        for name, figures in stats.providers.items():
            providers[name] = _figures(figures)
        return {
            "lines": {
                "total": self.tally.total + before,
                "done_before": before,
                "failed_before": failed_before,
                "answered": self.tally.answered,
                "failed": self.tally.failed,
                "left": left,
            },
            "stopped": self.tally.stopping,
            "seconds": round(time.monotonic() - self.tally.started, 3),
            "cost": round(self.tally.cost, 6),
            "providers": providers,
            "total": _figures(stats.total),
        }

    def print_summary(self, summary: dict[str, Any]) -> None:
        lines = summary["lines"]
        rows = [
            (name, f) for name, f in summary["providers"].items() if f["attempts"] or f["answered"]
        ]
        rows.append(("total", summary["total"]))
        header = (
            "provider",
            "calls",
            "attempts",
            "tokens in",
            "tokens out",
            "cost",
            "retries",
            "failovers",
            "waited",
        )
        table = [header] + [
            (
                name,
                str(f["answered"]),
                str(f["attempts"]),
                _count(f["input_tokens"]),
                _count(f["output_tokens"]),
                "-" if f["cost"] is None else f"${f['cost']:.6f}",
                str(f["retries"]),
                str(f["failovers"]),
                f"{f['waited']:.1f}s",
            )
            for name, f in rows
        ]
        widths = [max(len(row[i]) for row in table) for i in range(len(header))]
        print(
            f"\n{lines['answered']} answered, {lines['failed']} failed, {lines['left']} left "
            f"({lines['done_before']} done before this run"
            + (f", {lines['failed_before']} of them failed" if lines["failed_before"] else "")
            + f") in {summary['seconds']:.1f}s"
            + (f"; stopped: {summary['stopped']}" if summary["stopped"] else ""),
            file=self.out,
        )
        for i, row in enumerate(table):
            cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
            print("  ".join(cells), file=self.out)
            if i == 0:
                print("  ".join("-" * w for w in widths), file=self.out)
        self.out.flush()


def _figures(figures: Any) -> dict[str, Any]:
    return {
        "answered": figures.answered,
        "attempts": figures.attempts,
        "input_tokens": figures.input_tokens,
        "output_tokens": figures.output_tokens,
        "cost": figures.cost,
        "retries": figures.retries,
        "failovers": figures.failovers,
        "waited": round(figures.waited, 3),
        "hedged": figures.hedged,
        "failures": dict(figures.failures),
    }


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


async def _work(
    client: Client, lines: list[Line], options: Options, tally: Tally, writer: Writer
) -> None:
    """Runs ``lines`` ``options.concurrency`` at a time until done or
    stopped; a second Ctrl-C cancels the calls in flight."""
    pending: Iterator[Line] = iter(lines)

    async def worker() -> None:
        for line in pending:
            if tally.stopping:
                return
            if options.max_cost is not None and tally.cost >= options.max_cost:
                tally.stopping = f"the cost reached --max-cost {options.max_cost}"
                return
            record = await _call(client, line, options)
            tally.done += 1
            if record["ok"]:
                tally.answered += 1
            else:
                tally.failed += 1
            tally.cost += record.get("cost") or 0.0
            if options.max_cost is not None and record["ok"] and record.get("cost") is None:
                if not tally.unpriced_said:
                    tally.unpriced_said = True
                    print(
                        "failover batch: an answer had no price, and --max-cost counts only "
                        "priced attempts: give the providers price= (or [client] prices=)",
                        file=sys.stderr,
                        flush=True,
                    )
            writer.write(record)

    loop = asyncio.get_running_loop()
    workers = [asyncio.ensure_future(worker()) for _ in range(min(options.concurrency, len(lines)))]

    def interrupted(name: str) -> None:
        if tally.signal is None:
            tally.signal = name
            tally.stopping = f"{name}: no new calls; {name} again cancels those in flight"
            print(f"\n{tally.stopping}", file=sys.stderr, flush=True)
            return
        tally.stopping = f"{tally.signal}, then {name}: the calls in flight were cancelled"
        for task in workers:
            task.cancel()

    handled = []
    for signum, name in ((signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM")):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, interrupted, name)
            handled.append(signum)
    try:
        await asyncio.gather(*workers, return_exceptions=True)
    finally:
        for signum in handled:
            loop.remove_signal_handler(signum)


def run(options: Options, out: IO[str] | None = None) -> int:
    """The command: returns its exit code."""
    out = sys.stdout if out is None else out
    from ._client import Client

    try:
        if options.concurrency < 1:
            raise ConfigurationError(f"--concurrency is at least 1, got {options.concurrency}")
        if options.max_cost is not None:
            number("--max-cost", options.max_cost, low=0.0, high=sys.float_info.max)
        if options.limit is not None and options.limit < 1:
            raise ConfigurationError(f"--limit is at least 1, got {options.limit}")
        if options.deadline is not None:
            # As the call checks it: a deadline every line would refuse (inf) is refused here.
            seconds("--deadline", options.deadline, positive=True)
        if not 0 < options.interval < float("inf"):
            raise ConfigurationError(
                f"--progress-interval is seconds above 0, got {options.interval}"
            )
        if os.path.abspath(options.input) == os.path.abspath(options.output):
            raise ConfigurationError("IN and OUT are the same file")
        for option, path in (("OUT", options.output), ("--summary", options.summary)):
            if path is None:
                continue
            folder = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(folder):
                raise ConfigurationError(f"{option}'s folder {folder!r} does not exist")
            if os.path.isdir(path):
                raise ConfigurationError(f"{option} {path!r} is a folder, not a file")
        config = options.config
        if config is None:
            if not os.path.exists("failover.toml"):
                raise ConfigurationError(
                    "no config: pass --config FILE, or put a failover.toml here"
                )
            config = "failover.toml"
        lines = read_input(options.input, options.limit)
        done = read_done(options.output, options.retry_failed)
        client = Client.from_config(config, sleeper=options.sleeper)
    except ConfigurationError as error:
        print(f"failover batch: {error}", file=sys.stderr)
        return USAGE
    todo = [line for line in lines if _key(line.id) not in done]
    before = len(lines) - len(todo)
    failed_before = sum(1 for line in lines if done.get(_key(line.id)) is False)
    tally = Tally(total=len(todo))
    try:
        writer = Writer(options.output)
    except OSError as error:
        client.close()
        print(f"failover batch: OUT cannot be written: {error}", file=sys.stderr)
        return USAGE
    display = Display(client, tally, options, out)

    async def main() -> None:
        shown = asyncio.ensure_future(display.run())
        try:
            await _work(client, todo, options, tally, writer)
        finally:
            shown.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await shown

    try:
        asyncio.run(main())
    finally:
        writer.close()
        client.close()
        if options.ordered:
            put_in_order(options.output, lines)
    if display.mode == "plain":
        print(display.plain_line(), file=out, flush=True)
    left = tally.total - tally.done
    summary = display.summary(before, failed_before, left)
    display.print_summary(summary)
    if options.summary is not None:
        with open(options.summary, "w") as file:
            json.dump(summary, file, indent=2)
            file.write("\n")
    if tally.signal == "SIGTERM":
        return TERMINATED
    if tally.signal is not None:
        return INTERRUPTED
    if left:
        return STOPPED
    return FAILED_LINES if tally.failed or failed_before else DONE
