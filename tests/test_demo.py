"""`make demo` runs `python -m failover demo`: it must tell the story it claims."""

from __future__ import annotations

import subprocess
import sys


def test_demo_runs_every_scene():
    out = subprocess.run(
        # The demo's own sleeps are real; the test records them instead.
        [sys.executable, "-m", "failover", "demo", "--fake-sleep"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "claude: 429 rate_limited; waiting 1.00s, then retrying claude" in out
    assert "asked for 300s; failing over to gpt" in out
    assert "local answered" in out
    assert "claude: 200 overloaded; failing over to gpt" in out
    assert "chunks: 'Streamed ' 'from ' 'GPT.'" in out
    assert "[restart: discard 'A story that '] 'A whole ' 'story, ' 'from GPT.'" in out
    assert "claude skipped (cooling down for 300.0s more: it asked for 300s), gpt ok" in out
    assert "6 calls at once: claude answered 2, gpt 4; claude never had more than 2 at once" in out
    assert "claude skipped (at its concurrency limit (2 in flight)), gpt ok" in out
    assert "gpt answered in" in out and "bytes of image/png" in out
    assert "summary: 8/8 calls answered, 4 retries" in out
    assert "fake sleeps" in out
    # The batch scene: stopped by --max-cost, resumed, every id once.
    assert "stopped: the cost reached --max-cost 0.0006" in out
    assert "out.jsonl: 200 results, one for each of the 200 ids: yes" in out
