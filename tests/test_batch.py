"""``python -m failover batch IN OUT``: every line answered or errored exactly
once, results written as they arrive and never as half lines, resume and
--retry-failed, the bounds (--concurrency, --deadline, --max-cost, --limit),
progress (plain lines when piped, a live bar in a real terminal) and the
summary."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from failover.__main__ import main
from failover.testing import MockServer

from conftest import KEY

RATE_LIMITED = {"error": {"message": "Rate limit reached", "type": "requests"}}
CUT_BODY = json.dumps({"choices": [{"message": {"role": "assistant", "content": "x" * 80}}]})
OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


def config(path: Path, *servers: MockServer, price: bool = True, **client: Any) -> Path:
    """A failover.toml whose providers are ``servers``: the first speaks
    OpenAI's wire, the second Anthropic's."""

    def toml(value: Any) -> str:
        if isinstance(value, dict):  # an inline table
            return "{ " + ", ".join(f"{k} = {toml(v)}" for k, v in value.items()) + " }"
        return json.dumps(value)

    lines = ["[client]"] + [f"{key} = {toml(value)}" for key, value in client.items()]
    for i, server in enumerate(servers):
        kind, model = [("openai", "gpt-4.1-mini"), ("anthropic", "claude-haiku-4-5")][i]
        lines += [
            f"[providers.{'ab'[i]}]",
            f'type = "{kind}"',
            f'model = "{model}"',
            f'api_key = "{KEY}"',
            f'base_url = "{server.url}"',
        ]
        if price:
            lines.append("price = { input = 1.0, output = 2.0 }")
    target = path / "failover.toml"
    target.write_text("\n".join(lines) + "\n")
    return target


def requests(path: Path, count: int, **extra: Any) -> Path:
    target = path / "in.jsonl"
    with target.open("w") as file:
        for i in range(count):
            file.write(json.dumps({"id": f"r{i}", "prompt": f"hello {i}", **extra}) + "\n")
    return target


def results(path: Path) -> list[dict[str, Any]]:
    raw = path.read_bytes()
    assert raw == b"" or raw.endswith(b"\n"), "a half line at the end"
    return [json.loads(line) for line in raw.splitlines()]


def batch(*args: str | Path) -> int:
    return main(["batch", *(str(a) for a in args), "--progress", "none"])


def test_each_line_gets_one_result_with_its_answer_and_what_it_cost(
    tmp_path: Path, mock_server: MockServer, capsys: pytest.CaptureFixture[str]
) -> None:
    mock_server.push(429, headers={"retry-after": "0.01"}, json=RATE_LIMITED)
    for _ in range(3):
        mock_server.push_text("ok")
    toml = config(tmp_path, mock_server)
    source = requests(tmp_path, 3)
    out = tmp_path / "out.jsonl"
    assert batch(source, out, "--config", toml, "--concurrency", "1") == 0
    records = results(out)
    assert [r["id"] for r in records] == ["r0", "r1", "r2"]
    first = records[0]
    assert (first["ok"], first["text"], first["provider"]) == (True, "ok", "a")
    assert first["attempts"]["path"] == ["a:429", "a:200"]
    assert first["attempts"]["retries"] == 1
    assert first["usage"]["input_tokens"] == 12
    assert first["cost"] == pytest.approx((12 * 1.0 + 1 * 2.0) / 1e6)
    printed = capsys.readouterr().out
    assert "3 answered, 0 failed, 0 left" in printed
    assert "provider" in printed and "failovers" in printed


def test_a_failed_line_is_a_result_and_the_exit_code_says_so(
    tmp_path: Path, mock_server: MockServer
) -> None:
    mock_server.push(401, json={"error": {"message": f"Invalid key {KEY}", "type": "auth"}})
    mock_server.push_text("ok")
    source = tmp_path / "in.jsonl"
    source.write_text(
        '{"id": "bad", "prompt": "x"}\n'
        "not json\n"
        '{"prompt": "no id", "bogus": 1}\n'
        '{"id": "good", "prompt": "y"}\n'
    )
    out = tmp_path / "out.jsonl"
    code = batch(source, out, "--config", config(tmp_path, mock_server), "--concurrency", "1")
    assert code == 1
    by_id = {r["id"]: r for r in results(out)}
    assert set(by_id) == {"bad", 2, 3, "good"}
    assert by_id["bad"]["error"]["class"] == "AuthenticationError"
    assert by_id["bad"]["error"]["provider"] == "a"
    assert by_id["bad"]["error"]["status"] == 401
    assert KEY not in out.read_text()
    assert "line 2 is not JSON" in by_id[2]["error"]["message"]
    assert "unknown option 'bogus'" in by_id[3]["error"]["message"]
    assert by_id["good"]["ok"] is True


def test_a_line_may_turn_hedging_on_or_off(tmp_path: Path, mock_server: MockServer) -> None:
    """Found by the new-user trial: ``hedge`` was an unknown option."""
    mock_server.push_text("ok")
    source = tmp_path / "in.jsonl"
    source.write_text(
        '{"id": "off", "prompt": "x", "hedge": false}\n{"id": "odd", "prompt": "y", "hedge": 3}\n'
    )
    out = tmp_path / "out.jsonl"
    code = batch(source, out, "--config", config(tmp_path, mock_server), "--concurrency", "1")
    by_id = {r["id"]: r for r in results(out)}
    assert (code, by_id["off"]["ok"]) == (1, True)
    assert "hedge" in by_id["odd"]["error"]["message"]


def test_a_won_hedge_is_no_failover_in_a_lines_attempts(
    tmp_path: Path, mock_server: MockServer, backup_server: MockServer
) -> None:
    """Found by the new-user trial: OUT said a failover where the call had none
    (stats() and the summary did not)."""
    mock_server.push_text("late", delay=2.0)
    backup_server.push_text("ok", wire="anthropic")
    toml = config(tmp_path, mock_server, backup_server, hedge={"after": 0.2, "max_extra": 1.0})
    out = tmp_path / "out.jsonl"
    assert batch(requests(tmp_path, 1), out, "--config", toml) == 0
    (line,) = results(out)
    assert line["attempts"]["path"] == ["a:None", "b:200"]
    assert (line["attempts"]["failovers"], line["attempts"]["retries"]) == (0, 0)


def test_a_rerun_skips_what_is_done_and_cuts_a_half_line(
    tmp_path: Path, mock_server: MockServer
) -> None:
    for _ in range(2):
        mock_server.push_text("again")
    source = requests(tmp_path, 4)
    out = tmp_path / "out.jsonl"
    kept = [
        {"id": "r0", "ok": True, "text": "before"},
        {"id": "r2", "ok": False, "error": {"class": "RateLimited", "message": "x"}},
    ]
    # A crash mid-write left half a line at the end.
    out.write_text("".join(json.dumps(r) + "\n" for r in kept) + '{"id": "r1", "ok": tr')
    # Done, but r2 failed (before): the exit status still says so.
    assert batch(source, out, "--config", config(tmp_path, mock_server)) == 1
    records = results(out)
    assert records[:2] == kept
    assert sorted(r["id"] for r in records[2:]) == ["r1", "r3"]
    assert len(mock_server.requests) == 2


def test_retry_failed_runs_the_failed_ids_again_and_keeps_one_line_each(
    tmp_path: Path, mock_server: MockServer
) -> None:
    mock_server.push_text("now fine")
    source = requests(tmp_path, 2)
    out = tmp_path / "out.jsonl"
    out.write_text(
        json.dumps({"id": "r0", "ok": True, "text": "fine"})
        + "\n"
        + json.dumps({"id": "r1", "ok": False, "error": {"class": "ServerError"}})
        + "\n"
    )
    toml = config(tmp_path, mock_server)
    assert batch(source, out, "--config", toml, "--retry-failed") == 0
    records = results(out)
    assert [(r["id"], r["ok"]) for r in records] == [("r0", True), ("r1", True)]
    assert records[1]["text"] == "now fine"


def test_ordered_writes_in_input_order(tmp_path: Path, mock_server: MockServer) -> None:
    # Each answer comes 50 ms sooner than the one before: unordered, the
    # results would be written in the reverse of the order they were asked.
    for k in range(5):
        mock_server.push_text(str(k), delay=0.3 - 0.05 * k)
    source = requests(tmp_path, 5)
    out = tmp_path / "out.jsonl"
    toml = config(tmp_path, mock_server)
    assert batch(source, out, "--config", toml, "--ordered", "--concurrency", "5") == 0
    assert [r["id"] for r in results(out)] == ["r0", "r1", "r2", "r3", "r4"]
    assert sorted(r["text"] for r in results(out)) == ["0", "1", "2", "3", "4"]


def test_max_cost_stops_starting_calls_and_limit_takes_the_first_lines(
    tmp_path: Path, mock_server: MockServer, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(8):
        mock_server.push_text("ok")
    source = requests(tmp_path, 10)
    out = tmp_path / "out.jsonl"
    toml = config(tmp_path, mock_server)
    # Each call costs 14e-6 USD: the third reaches 3.5e-5.
    args = ["--config", toml, "--concurrency", "1", "--max-cost", "3.5e-5", "--limit", "8"]
    assert batch(source, out, *args) == 3
    assert [r["id"] for r in results(out)] == ["r0", "r1", "r2"]
    assert "stopped: the cost reached --max-cost" in capsys.readouterr().out
    summary = tmp_path / "summary.json"
    assert batch(source, out, "--config", toml, "--limit", "8", "--summary", summary) == 0
    assert len(results(out)) == 8
    written = json.loads(summary.read_text())
    assert written["lines"] == {
        "total": 8,
        "done_before": 3,
        "failed_before": 0,
        "answered": 5,
        "failed": 0,
        "left": 0,
    }
    assert written["providers"]["a"]["answered"] == 5
    assert written["cost"] == pytest.approx(5 * 14e-6)


def test_embed_lines_give_vectors(tmp_path: Path, mock_server: MockServer) -> None:
    mock_server.push_embeddings([[0.5, 0.25]])
    mock_server.push_embeddings([[1.0, 0.0], [0.0, 1.0]])
    source = tmp_path / "in.jsonl"
    source.write_text('{"id": 1, "embed": "one"}\n{"id": 2, "embed": ["a", "b"]}\n')
    out = tmp_path / "out.jsonl"
    toml = config(tmp_path, mock_server)
    assert batch(source, out, "--config", toml, "--concurrency", "1") == 0
    first, second = results(out)
    assert first["vector"] == [0.5, 0.25]
    assert second["vectors"] == [[1.0, 0.0], [0.0, 1.0]]


def test_kind_stream_streams_each_prompt(tmp_path: Path, mock_server: MockServer) -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "streamed"}}]}
    stop = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    mock_server.push(sse=[f"data: {json.dumps(chunk)}", f"data: {json.dumps(stop)}"])
    source = requests(tmp_path, 1)
    out = tmp_path / "out.jsonl"
    assert batch(source, out, "--config", config(tmp_path, mock_server), "--kind", "stream") == 0
    assert results(out)[0]["text"] == "streamed"
    assert mock_server.requests[0].json["stream"] is True


def test_a_deadline_bounds_each_call(tmp_path: Path, mock_server: MockServer) -> None:
    mock_server.push_text("late", delay=3.0)
    source = requests(tmp_path, 1)
    out = tmp_path / "out.jsonl"
    started = time.monotonic()
    code = batch(source, out, "--config", config(tmp_path, mock_server), "--deadline", "0.3")
    assert code == 1
    # A wide margin: the failure this guards against is seconds past it.
    assert time.monotonic() - started < 2.5
    assert results(out)[0]["error"]["class"] == "DeadlineExceeded"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--concurrency", "0"], "--concurrency is at least 1"),
        (["--max-cost", "-1"], "--max-cost must be a number from 0"),
        (["--max-cost", "inf"], "--max-cost must be a number from 0"),
        (["--limit", "0"], "--limit is at least 1"),
        (["--deadline", "0"], "--deadline must be a finite number of seconds > 0"),
        # Found by the new-user trial: every line then failed on it.
        (["--deadline", "inf"], "--deadline must be a finite number of seconds > 0"),
        (["--deadline", "1e12"], "--deadline must be a finite number of seconds > 0"),
        (["--progress-interval", "-1"], "--progress-interval is seconds above 0"),
        (["--progress-interval", "nan"], "--progress-interval is seconds above 0"),
    ],
)
def test_bad_options_are_refused_before_any_call(
    tmp_path: Path,
    mock_server: MockServer,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    says: str,
) -> None:
    source = requests(tmp_path, 1)
    code = batch(source, tmp_path / "out.jsonl", "--config", config(tmp_path, mock_server), *args)
    assert code == 2
    assert says in capsys.readouterr().err
    assert mock_server.requests == []


def test_duplicate_ids_and_a_foreign_output_are_refused(
    tmp_path: Path, mock_server: MockServer, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text('{"id": 7, "prompt": "a"}\n{"prompt": "b"}\n{"id": 7, "prompt": "c"}\n')
    toml = config(tmp_path, mock_server)
    assert batch(source, tmp_path / "out.jsonl", "--config", toml) == 2
    assert "line 3 has the id 7 of line 1" in capsys.readouterr().err
    source.write_text('{"id": 1, "prompt": "a"}\n')
    foreign = tmp_path / "notes.txt"
    foreign.write_text("my notes\n")
    assert batch(source, foreign, "--config", toml) == 2
    assert "is not a result this command wrote" in capsys.readouterr().err
    assert foreign.read_text() == "my notes\n"
    assert mock_server.requests == []


def _faulty(server: MockServer, count: int, wire: str, seed: int) -> None:
    """``count`` answers, about 30% of them after a fault: a hinted 429, an
    overload, a reset, a body cut short."""
    rng = random.Random(seed)
    for _ in range(count):
        roll = rng.random()
        if roll < 0.1:
            server.push(429, headers={"retry-after-ms": "5"}, json=RATE_LIMITED)
        elif roll < 0.17:
            server.push(529 if wire == "anthropic" else 503, json=OVERLOADED)
        elif roll < 0.24:
            server.push(fault="reset")
        elif roll < 0.3:
            server.push(body=CUT_BODY, content_type="application/json", fault="cut:40")
        server.push_text("ok", wire=wire)


def _run(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "failover", "batch", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kwargs,
    )


def test_ten_thousand_lines_with_faults_killed_at_half_and_resumed(tmp_path: Path) -> None:
    total = 10_000
    with MockServer() as a, MockServer() as b:
        _faulty(a, total + 2_000, "openai", seed=1)
        _faulty(b, total + 2_000, "anthropic", seed=2)
        toml = config(tmp_path, a, b, deadline=30)
        source = requests(tmp_path, total)
        out = tmp_path / "out.jsonl"
        args = [str(source), str(out), "--config", str(toml), "--concurrency", "64"]
        first = _run([*args, "--progress", "plain", "--progress-interval", "0.5"])
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and first.poll() is None:
            if out.exists() and out.read_bytes().count(b"\n") >= total // 2:
                break
            time.sleep(0.05)
        first.send_signal(signal.SIGINT)
        stdout, stderr = first.communicate(timeout=60)
        assert first.returncode == 130, stderr.decode()
        assert b"Ctrl-C: no new calls" in stderr
        assert b"batch: " in stdout  # plain progress lines when piped
        at_interrupt = results(out)
        assert total // 2 <= len(at_interrupt) < total
        second = _run(args)
        stdout, stderr = second.communicate(timeout=180)
        assert second.returncode in (0, 1), stderr.decode()
        final = results(out)
    # Nothing lost, nothing repeated, nothing written before changed.
    assert final[: len(at_interrupt)] == at_interrupt
    ids = [r["id"] for r in final]
    assert len(ids) == len(set(ids)) == total
    assert set(ids) == {f"r{i}" for i in range(total)}
    answered = [r for r in final if r["ok"]]
    assert all(r["text"] == "ok" for r in answered)
    # A call fails only when every attempt it had met a fault (about 1 in 50
    # here, as 30% of answers are faults): then as the last fault's error.
    assert len(answered) >= total * 0.95
    faults = {"RateLimited", "ProviderOverloaded", "ServerError", "ProviderConnectionError"}
    assert {r["error"]["class"] for r in final if not r["ok"]} <= faults
    assert any(r["attempts"]["failovers"] for r in answered)
    assert any(r["attempts"]["waited"] > 0 for r in answered)
    # The summary counts this run's lines: what was left at the interrupt.
    resumed = final[len(at_interrupt) :]
    answered_now = sum(1 for r in resumed if r["ok"])
    said = f"{answered_now} answered, {len(resumed) - answered_now} failed, 0 left"
    assert said.encode() in stdout, stdout[-500:]


def _pane_until(session: str, *texts: str) -> str:
    """What a tmux pane shows once it shows every one of ``texts`` (or after
    ten seconds, whatever it shows then)."""
    seen = ""
    for _ in range(100):
        seen = subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", session],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        if all(text in seen for text in texts):
            break
        time.sleep(0.1)
    return seen


@pytest.mark.skipif(shutil.which("tmux") is None, reason="no tmux (`.ci/run` installs it)")
def test_a_terminal_shows_a_live_bar_and_a_provider_table(tmp_path: Path) -> None:
    pytest.importorskip("rich")
    with MockServer() as a:
        for _ in range(40):
            a.push_text("ok", delay=0.1)
        toml = config(tmp_path, a)
        source = requests(tmp_path, 40)
        out = tmp_path / "out.jsonl"
        session = f"failover-batch-{os.getpid()}"
        command = (
            f"{sys.executable} -m failover batch {source} {out} --config {toml} "
            f"--concurrency 2; sleep 30"
        )
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "30", command],
            check=True,
        )
        try:
            seen = _pane_until(session, "ETA", "answered")
            assert "/40" in seen and "ETA" in seen, seen
            assert "provider" in seen and "failovers" in seen, seen
            assert "━" in seen, seen  # the bar itself
            seen = _pane_until(session, "40 answered, 0 failed, 0 left")
            assert "40 answered, 0 failed, 0 left" in seen, seen
        finally:
            subprocess.run(["tmux", "kill-session", "-t", session], check=False)


def test_a_second_ctrl_c_cancels_the_calls_in_flight(tmp_path: Path) -> None:
    with MockServer() as a:
        a.push_text("quick")
        for _ in range(4):
            a.push_text("slow", delay=30.0)
        toml = config(tmp_path, a)
        source = requests(tmp_path, 20)
        out = tmp_path / "out.jsonl"
        started = time.monotonic()
        running = _run([str(source), str(out), "--config", str(toml), "--concurrency", "1"])
        while time.monotonic() - started < 20 and not (out.exists() and out.read_bytes()):
            time.sleep(0.02)
        time.sleep(0.3)  # the second call is in flight, answering in 30 s
        running.send_signal(signal.SIGINT)
        time.sleep(0.3)
        running.send_signal(signal.SIGINT)
        stdout, stderr = running.communicate(timeout=20)
    assert running.returncode == 130, stderr.decode()
    # Well before the slow answer: the call in flight was cancelled, not awaited.
    assert time.monotonic() - started < 15
    assert [r["id"] for r in results(out)] == ["r0"]
    assert b"1 answered, 0 failed, 19 left" in stdout
    assert b"Ctrl-C, then Ctrl-C: the calls in flight were cancelled" in stdout


def test_max_cost_without_prices_says_it_counts_nothing(
    tmp_path: Path, mock_server: MockServer, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(2):
        mock_server.push_text("ok")
    source = requests(tmp_path, 2)
    toml = config(tmp_path, mock_server, price=False)
    assert batch(source, tmp_path / "out.jsonl", "--config", toml, "--max-cost", "1") == 0
    err = capsys.readouterr().err
    assert err.count("--max-cost counts only priced attempts") == 1


def test_ordered_results_are_written_as_they_arrive_and_sorted_at_the_end(
    tmp_path: Path,
) -> None:
    # One line's answer never comes: the others are in OUT all the same when
    # the run is cancelled, and OUT is in input order after it.
    with MockServer() as a:
        a.push_text("never", delay=30.0)
        for _ in range(4):
            a.push_text("fast")
        toml = config(tmp_path, a)
        source = requests(tmp_path, 5)
        out = tmp_path / "out.jsonl"
        args = [str(source), str(out), "--config", str(toml), "--ordered", "--concurrency", "8"]
        running = _run(args)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (
            out.exists() and out.read_bytes().count(b"\n") == 4
        ):
            time.sleep(0.02)
        running.send_signal(signal.SIGINT)
        time.sleep(0.2)
        running.send_signal(signal.SIGINT)
        running.communicate(timeout=20)
    assert running.returncode == 130
    ids = [r["id"] for r in results(out)]
    assert len(ids) == 4  # every answer that came, whichever line waited for ever
    assert ids == sorted(ids, key=lambda i: int(i[1:]))


def test_sigterm_stops_gracefully_like_ctrl_c(tmp_path: Path) -> None:
    with MockServer() as a:
        a.push_text("first")
        a.push_text("in flight", delay=0.5)
        for _ in range(5):
            a.push_text("never asked", delay=30.0)
        toml = config(tmp_path, a)
        source = requests(tmp_path, 7)
        out = tmp_path / "out.jsonl"
        running = _run([str(source), str(out), "--config", str(toml), "--concurrency", "1"])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (out.exists() and out.read_bytes()):
            time.sleep(0.02)
        running.send_signal(signal.SIGTERM)
        stdout, stderr = running.communicate(timeout=20)
    assert running.returncode == 143, stderr.decode()
    assert b"SIGTERM: no new calls" in stderr
    # The call in flight finished and was written; none was started after.
    assert [r["text"] for r in results(out)] == ["first", "in flight"]
    assert b"2 answered, 0 failed, 5 left" in stdout


def test_every_error_record_has_the_same_keys(tmp_path: Path, mock_server: MockServer) -> None:
    mock_server.push_text("late", delay=2.0)
    source = tmp_path / "in.jsonl"
    source.write_text(
        '{"id": "both", "prompt": "x", "messages": [{"role": "user", "content": "y"}]}\n'
        '{"id": "late", "prompt": "x", "deadline": 0.3}\n'
    )
    out = tmp_path / "out.jsonl"
    toml = config(tmp_path, mock_server)
    assert batch(source, out, "--config", toml, "--concurrency", "1") == 1
    both, late = results(out)
    for record in (both, late):
        assert set(record["error"]) == {"class", "kind", "status", "provider", "message"}
        assert set(record) == {"id", "ok", "error", "cost", "attempts"}
    assert both["error"]["message"] == 'line 1: a line has "prompt" or "messages", not both'
    assert late["error"]["class"] == "DeadlineExceeded"
    assert late["error"]["provider"] == "a"
    assert late["attempts"]["waited"] == 0.0


def test_an_embed_line_takes_its_idempotency_key(tmp_path: Path, mock_server: MockServer) -> None:
    mock_server.push_embeddings([[1.0]])
    source = tmp_path / "in.jsonl"
    source.write_text('{"id": 1, "embed": "x", "idempotency_key": "job-7-line-1"}\n')
    out = tmp_path / "out.jsonl"
    assert batch(source, out, "--config", config(tmp_path, mock_server)) == 0
    assert mock_server.requests[0].headers["idempotency-key"] == "job-7-line-1"


def test_out_in_a_missing_folder_is_refused(
    tmp_path: Path, mock_server: MockServer, capsys: pytest.CaptureFixture[str]
) -> None:
    source = requests(tmp_path, 1)
    out = tmp_path / "no" / "such" / "out.jsonl"
    assert batch(source, out, "--config", config(tmp_path, mock_server)) == 2
    assert "OUT's folder" in capsys.readouterr().err


def test_out_or_summary_that_is_a_folder_is_refused_before_any_call(
    tmp_path: Path, mock_server: MockServer, capsys: pytest.CaptureFixture[str]
) -> None:
    source = requests(tmp_path, 1)
    toml = config(tmp_path, mock_server)
    assert batch(source, tmp_path, "--config", toml) == 2
    assert "is a folder, not a file" in capsys.readouterr().err
    out = tmp_path / "out.jsonl"
    missing = tmp_path / "no" / "summary.json"
    assert batch(source, out, "--config", toml, "--summary", missing) == 2
    assert "--summary's folder" in capsys.readouterr().err
    assert mock_server.requests == []
