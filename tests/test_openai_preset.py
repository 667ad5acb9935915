"""`RetryPolicy.openai()` on openai-python's edge cases (openai-python 3.57's
`_base_client.py`: `_parse_retry_after_header`, `_should_retry`,
`_calculate_retry_timeout`, and `send`, which reads the whole body before deciding).
Each case: the requests and sleeps openai-python makes, through the public API."""

from __future__ import annotations

import email.utils
from typing import Any

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

from conftest import openai

SLOW = {"error": {"message": "slow down"}}
OPENAI = failover.RetryPolicy.openai()


def run(mock_server: MockServer, *scripted: dict[str, Any]) -> tuple[int, list[float], Any]:
    """Plays ``scripted`` pushes (then 200s), calls once under the preset with a single
    provider; returns (requests made, sleeps, the answer or the error)."""
    for push in scripted:
        mock_server.push(**push)
    for _ in range(3):
        mock_server.push_text("ok")
    sleeper = FakeSleeper()
    client = failover.Client({"a": openai(mock_server)}, retry=OPENAI, sleeper=sleeper)
    try:
        outcome: Any = client.prompt("Hi")
    except failover.FailoverError as exc:
        outcome = exc
    return len(mock_server.requests), sleeper.sleeps, outcome


def backed_off(sleeps: list[float], retries: int) -> bool:
    """openai's backoff: min(0.5 * 2**n, 8) * (1 - 0.25 * U)."""
    return len(sleeps) == retries and all(
        0.75 * min(0.5 * 2**n, 8) <= s <= min(0.5 * 2**n, 8) for n, s in enumerate(sleeps)
    )


@pytest.mark.mock_server(assert_all_used=False)
@pytest.mark.parametrize("header", ["retry-after", "retry-after-ms"])
def test_a_number_that_overflows_a_float_is_never_retried(
    mock_server: MockServer, header: str
) -> None:
    # float("1e400") overflows; openai-python takes it for 121 s: over its 120 s bound.
    requests, sleeps, outcome = run(
        mock_server, {"status": 429, "headers": {header: "1e400"}, "json": SLOW}
    )
    assert (requests, sleeps) == (1, [])
    assert isinstance(outcome, failover.RateLimited)


@pytest.mark.parametrize("header", ["retry-after", "retry-after-ms"])
def test_a_number_that_overflows_a_float_asks_for_1e9_s_as_under_every_policy(
    mock_server: MockServer, header: str
) -> None:
    """openai-python's 121 s stand-in is its own; the error and the cooldown say what README
    says of any wait too large to represent: 1e9 s, cooled for an hour. Found by the new-user
    trial of 2026-12-02 (it said 121 s)."""
    mock_server.push(429, headers={header: "1e400"}, json=SLOW)
    client = failover.Client({"a": openai(mock_server)}, retry=OPENAI, sleeper=FakeSleeper())
    with pytest.raises(failover.RateLimited) as info:
        client.prompt("Hi")
    assert info.value.retry_after == 1e9
    assert client.cooldowns() == {"a": 3600.0}


@pytest.mark.mock_server(assert_all_used=False)
@pytest.mark.parametrize("value", ["inf", "Infinity", "nan", "-1e400"])
def test_a_literal_inf_or_nan_is_backed_off(mock_server: MockServer, value: str) -> None:
    requests, sleeps, outcome = run(
        mock_server, {"status": 429, "headers": {"retry-after": value}, "json": SLOW}
    )
    assert requests == 2 and backed_off(sleeps, 1), sleeps
    assert isinstance(outcome, failover.Response)


@pytest.mark.mock_server(assert_all_used=False)
@pytest.mark.parametrize(
    ("value", "wait"), [("1_5", 15.0), ("1_", None), ("_1", None), ("1__5", None)]
)
def test_numbers_follow_pythons_float_grammar(
    mock_server: MockServer, value: str, wait: float | None
) -> None:
    requests, sleeps, _ = run(
        mock_server, {"status": 429, "headers": {"retry-after": value}, "json": SLOW}
    )
    assert requests == 2
    assert sleeps == [wait] if wait is not None else backed_off(sleeps, 1), sleeps


@pytest.mark.mock_server(assert_all_used=False)
def test_repeated_headers_are_joined_before_parsing(mock_server: MockServer) -> None:
    # httpx joins them: "1, 2" is neither a number nor a date.
    requests, sleeps, _ = run(
        mock_server,
        {"status": 429, "headers": [("retry-after", "1"), ("retry-after", "2")], "json": SLOW},
    )
    assert requests == 2 and backed_off(sleeps, 1), sleeps


@pytest.mark.mock_server(assert_all_used=False)
@pytest.mark.parametrize(
    "form",
    [
        "%d %B %Y %H:%M:%S GMT",  # full month name
        "%b %d %Y %H:%M:%S GMT",  # month before day
        "%a %d %b %Y %H:%M:%S GMT",  # weekday without a comma
        "%d %b %Y %H.%M.%S GMT",  # dots in the time
        "%d %b %Y %H:%M:%S CET",  # an unknown zone: UTC
        "%d %b %Y %H:%M:%S +00:00",
    ],
)
def test_lenient_dates_are_read_as_parsedate_tz_reads_them(
    mock_server: MockServer, form: str
) -> None:
    import time

    sleeper = FakeSleeper()
    at = time.strftime(form, time.gmtime(sleeper.time() + 5))
    assert email.utils.parsedate_tz(at) is not None, at  # Python reads it
    mock_server.push(429, headers={"retry-after": at}, json=SLOW)
    mock_server.push_text("ok")
    client = failover.Client({"a": openai(mock_server)}, retry=OPENAI, sleeper=sleeper)
    client.prompt("Hi")
    [slept] = sleeper.sleeps
    assert 4.0 <= slept <= 5.0, (at, slept)


@pytest.mark.mock_server(assert_all_used=False)
@pytest.mark.parametrize(("status", "headers"), [(200, {}), (400, {}), (429, {"retry-after": "5"})])
def test_a_body_cut_off_after_the_headers_is_a_lost_connection(
    mock_server: MockServer, status: int, headers: dict[str, str]
) -> None:
    # httpx raises a protocol error for the cut body: retried with backoff whatever
    # the status, its headers never read.
    body = b'{"choices": [{"message": {"content": "never whole"}}]}'
    for _ in range(3):
        mock_server.push(status, headers=headers, body=body, fault="cut:10")
    sleeper = FakeSleeper()
    client = failover.Client({"a": openai(mock_server)}, retry=OPENAI, sleeper=sleeper)
    with pytest.raises(failover.FailoverError):
        client.prompt("Hi")
    assert len(mock_server.requests) == 3
    assert backed_off(sleeper.sleeps, 2), sleeper.sleeps


@pytest.mark.mock_server(assert_all_used=False)
def test_the_default_policy_keeps_its_own_rules(mock_server: MockServer) -> None:
    mock_server.push(429, headers={"retry-after": "1_5"}, json=SLOW)
    mock_server.push_text("ok")
    sleeper = FakeSleeper()
    client = failover.Client({"a": openai(mock_server)}, sleeper=sleeper)
    client.prompt("Hi")
    assert sleeper.sleeps != [15.0]


# Side by side with openai-python itself, where it is installed (`make test` installs
# the pinned release; elsewhere these skip). Each case is one reply
# played three times (a first request and openai's two retries), then a 200, to
# openai-python (its sleep recorded, its jitter fixed at none) and to failover
# under the preset (a FakeSleeper): both must make the same requests and sleep
# the same, up to failover's own jitter on a backoff.
SIDE_BY_SIDE: list[tuple[str, dict[str, Any]]] = [
    *[(f"status {s}", {"status": s, "json": SLOW}) for s in (400, 401, 404, 408, 409, 422)],
    *[(f"status {s}", {"status": s, "json": SLOW}) for s in (429, 500, 503, 529)],
    *[
        (f"retry-after {v!r}", {"status": 429, "headers": {"retry-after": v}, "json": SLOW})
        for v in ("1", "0", "-1", "1.5", " 2 ", "120", "121", "1e400", "-1e400", "inf", "nan")
    ],
    *[
        (f"retry-after {v!r}", {"status": 429, "headers": {"retry-after": v}, "json": SLOW})
        for v in ("1_5", "1_", "_1", "1__5", "soon", "")
    ],
    *[
        (f"retry-after-ms {v!r}", {"status": 429, "headers": {"retry-after-ms": v}, "json": SLOW})
        for v in ("1500", "0", "130000", "1e400")
    ],
    (
        "both hints",
        {"status": 503, "headers": {"retry-after-ms": "250", "retry-after": "7"}, "json": SLOW},
    ),
    (
        "repeated retry-after",
        {"status": 429, "headers": [("retry-after", "1"), ("retry-after", "2")], "json": SLOW},
    ),
    ("x-should-retry true on 400", {"status": 400, "headers": {"x-should-retry": "true"}}),
    ("x-should-retry false on 500", {"status": 500, "headers": {"x-should-retry": "false"}}),
    ("x-should-retry false on 429", {"status": 429, "headers": {"x-should-retry": "false"}}),
    *[
        (f"cut body, status {s}", {"status": s, "body": b'{"error": {"mes', "fault": "cut:8"})
        for s in (200, 400, 429)
    ],
    *[
        (f"date {form!r}", {"status": 429, "headers": {"retry-after": form}, "date": True})
        for form in (
            "%a, %d %b %Y %H:%M:%S GMT",
            "%d %B %Y %H:%M:%S GMT",
            "%b %d %Y %H:%M:%S GMT",
            "%d %b %Y %H.%M.%S CET",
            "%d %b %Y %H:%M:%S +00:00",
        )
    ],
]


@pytest.mark.parametrize(("reply"), [c[1] for c in SIDE_BY_SIDE], ids=[c[0] for c in SIDE_BY_SIDE])
def test_side_by_side_with_openai_python(
    monkeypatch: pytest.MonkeyPatch, reply: dict[str, Any]
) -> None:
    openai_sdk = pytest.importorskip("openai", reason="openai-python is not installed")
    import time
    import types

    from openai import _base_client

    # openai's clock moves on by what it sleeps, as FakeSleeper's does.
    theirs_slept: list[float] = []
    fake_time = types.SimpleNamespace(
        sleep=theirs_slept.append, time=lambda: time.time() + sum(theirs_slept)
    )
    dated = reply.get("date", False)
    if dated:  # a date 5 s ahead, in the given form
        at = time.strftime(reply["headers"]["retry-after"], time.gmtime(time.time() + 5))
        reply = {"status": reply["status"], "headers": {"retry-after": at}}
    monkeypatch.setattr(_base_client, "time", fake_time)
    monkeypatch.setattr(_base_client, "random", lambda: 0.0)

    def play(server: MockServer) -> None:
        for _ in range(3):
            server.push(**reply)
        server.push_text("ok")

    with MockServer() as for_them, MockServer() as for_us:
        play(for_them)
        sdk = openai_sdk.OpenAI(api_key="sk-side-by-side", base_url=for_them.url, max_retries=2)
        try:
            sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}])
            they_answered = True
        except openai_sdk.OpenAIError:
            they_answered = False
        theirs = (len(for_them.requests), they_answered)

        play(for_us)
        sleeper = FakeSleeper()
        client = failover.Client({"a": openai(for_us)}, retry=OPENAI, sleeper=sleeper)
        try:
            client.prompt("Hi")
            we_answered = True
        except failover.FailoverError:
            we_answered = False
        ours = (len(for_us.requests), we_answered)

    assert ours == theirs, (sleeper.sleeps, theirs_slept)
    assert len(sleeper.sleeps) == len(theirs_slept), (sleeper.sleeps, theirs_slept)
    for n, (we, they) in enumerate(zip(sleeper.sleeps, theirs_slept)):
        base = min(0.5 * 2**n, 8.0)  # openai's backoff with no jitter
        if they == base and 0.75 * base <= we <= base:
            continue  # a backoff on both sides, failover's with its jitter
        assert we == pytest.approx(they, abs=1.5 if dated else 1e-9), (sleeper.sleeps, theirs_slept)


@pytest.mark.parametrize(("value", "wait"), [("1.5e2", 150.0), ("1_50", 150.0), ("150", 150.0)])
def test_a_wait_refused_as_too_long_still_says_how_long(
    mock_server: MockServer, value: str, wait: float
) -> None:
    # openai-python reads 150 s in each and refuses to wait that long; the
    # error says so, and the provider cools for that long.
    mock_server.push(429, headers={"retry-after": value}, json=SLOW)
    sleeper = FakeSleeper()
    client = failover.Client({"a": openai(mock_server)}, retry=OPENAI, sleeper=sleeper)
    with pytest.raises(failover.RateLimited) as info:
        client.prompt("Hi")
    assert len(mock_server.requests) == 1 and sleeper.sleeps == []
    assert info.value.retry_after == wait
    assert client.cooldowns() == {"a": pytest.approx(wait)}
