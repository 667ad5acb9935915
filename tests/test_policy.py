"""The policy: which statuses retry, fail over or stop (stop_on, overloaded statuses), the presets
and their numbers."""

from __future__ import annotations

import copy
import logging
import math
import pickle

import pytest

import failover
from failover.testing import FakeSleeper

from conftest import SINGLE_TRY, anthropic, openai


def test_408_is_a_timeout_retried_on_the_last_provider(mock_server, call):
    # DESIGN §3.1 revised: the server gave up waiting for the request.
    """Found in review."""
    mock_server.push(408)
    mock_server.push_text("ok")
    sleeper = FakeSleeper()
    client = failover.Client({"a": openai(mock_server)}, sleeper=sleeper)
    assert call(client).text == "ok"
    assert len(sleeper.sleeps) == 1
    mock_server.push(408)
    client = failover.Client({"a": openai(mock_server)}, retry=SINGLE_TRY)
    with pytest.raises(failover.ProviderTimeout) as info:
        call(client)
    assert isinstance(info.value, TimeoutError) and info.value.status == 408


def test_policies_are_immutable_values():
    """Found in the second review."""
    policy = failover.RetryPolicy(max_retries_last=3)
    with pytest.raises(AttributeError):
        policy.max_retries_last = -1  # type: ignore[misc]
    with pytest.raises(AttributeError):
        policy.backoff.initial = float("nan")  # type: ignore[misc]
    for p in (policy, failover.RetryPolicy.ruby_llm(30), failover.RetryPolicy.laravel()):
        assert pickle.loads(pickle.dumps(p)) == p
        assert copy.deepcopy(p) == p
    assert failover.RetryPolicy.ruby_llm(30) != failover.RetryPolicy.ruby_llm(None)


def test_presets_show_the_numbers_they_use():
    """Found in the second review."""
    openai_preset = failover.RetryPolicy.openai()
    assert (openai_preset.max_retries, openai_preset.max_retry_after) == (2, 120.0)
    laravel = failover.RetryPolicy.laravel()
    assert (laravel.max_retries, laravel.max_retries_last, laravel.max_retry_after) == (1, 1, 10.0)
    ruby = failover.RetryPolicy.ruby_llm(30)
    assert (ruby.max_retries, ruby.backoff.initial, ruby.backoff.max) == (3, 0.1, 30.0)


def test_an_unbounded_preset_shows_infinity():
    """Issue 16: ruby_llm()'s unbounded waits were shown as 1e9 s."""
    ruby = failover.RetryPolicy.ruby_llm()
    assert ruby.max_retry_after == ruby.max_retry_after_last == ruby.backoff.max == math.inf
    assert repr(ruby.backoff) == (
        "Backoff(initial=0.1, multiplier=2.0, max=inf, jitter=0.0, spread=0.05)"
    )
    assert pickle.loads(pickle.dumps(ruby.backoff)) == ruby.backoff
    assert copy.deepcopy(ruby) == ruby
    # A finite backoff keeps its checks when rebuilt.
    assert pickle.loads(pickle.dumps(failover.Backoff(max=3))) == failover.Backoff(max=3)


@pytest.mark.parametrize("hint", ["1000000010", "1e20", "99999999999999999999"])
def test_regression_ruby_llm_unbounded_clamps_a_huge_hint_to_max_seconds(mock_server, hint):
    """ruby_llm() (unbounded) slept a Retry-After of 1000000010 s in full, past MAX_SECONDS,
    yet gave up on 1e20 ("the wait cannot be slept"). Every wait is bounded by MAX_SECONDS:
    both count as exactly 1e9 s and are slept as it (the deadline decides, as for any wait)."""
    mock_server.push(429, headers={"retry-after": hint}, json={"error": {"message": "slow"}})
    mock_server.push_text("ok")
    sleeper = FakeSleeper()
    client = failover.Client(
        {"a": openai(mock_server)}, sleeper=sleeper, retry=failover.RetryPolicy.ruby_llm()
    )
    try:
        assert client.prompt("Hi").text == "ok"
    finally:
        client.close()
    assert sleeper.sleeps == [1e9]


def test_a_policy_built_from_ruby_llms_attributes_backs_off_as_ruby_llm(mock_server):
    """faraday-retry adds U * 0.05 s to each wait; ruby_llm()'s backoff said jitter=0.5, which
    takes up to half off instead, so a policy built from its attributes slept less. Found by the
    new-user trial of 2026-12-02."""
    ruby = failover.RetryPolicy.ruby_llm(30)
    assert (ruby.backoff.jitter, ruby.backoff.spread) == (0.0, 0.05)
    rebuilt = failover.RetryPolicy(
        max_retries=3, max_retries_last=3, max_retry_after=30, max_retry_after_last=30,
        backoff=ruby.backoff, budget=None,
    )  # fmt: skip
    for policy in (ruby, rebuilt):
        for _ in range(4):
            mock_server.push(500, json={"error": {"message": "down"}})
        sleeper = FakeSleeper()
        with pytest.raises(failover.ServerError):
            failover.Client({"a": openai(mock_server)}, sleeper=sleeper, retry=policy).prompt("Hi")
        assert len(sleeper.sleeps) == 3, policy
        for n, slept in enumerate(sleeper.sleeps):
            assert 0.1 * 2**n <= slept <= 0.1 * 2**n + 0.05, (policy, sleeper.sleeps)


def test_a_backoffs_spread_adds_seconds_and_is_checked(mock_server):
    mock_server.push(500, json={"error": {"message": "down"}})
    mock_server.push_text("ok")
    sleeper = FakeSleeper()
    flat = failover.Backoff(initial=1.0, multiplier=1.0, max=1.0, jitter=0.0, spread=0.5)
    policy = failover.RetryPolicy(max_retry_after_last=0, backoff=flat)
    failover.Client({"a": openai(mock_server)}, sleeper=sleeper, retry=policy).prompt("Hi")
    [slept] = sleeper.sleeps
    assert 1.0 < slept <= 1.5
    assert policy.worst_case(timeout=10) == 3 * 10 + 1.5 + 1.5
    for bad in (-1, float("inf"), "x"):
        with pytest.raises(failover.ConfigurationError):
            failover.Backoff(spread=bad)  # type: ignore[arg-type]


def test_the_default_policy_holds_the_engines_defaults():
    """Issue 16: RetryPolicy()'s defaults were written in Python and in the engine; they are
    read from the engine, and a policy made from them is the engine's default."""
    assert failover.RetryPolicy._make_preset("default") == failover.RetryPolicy()
    assert failover.RetryPolicy() == failover.RetryPolicy(
        1,
        2,
        10.0,
        60.0,
        failover.Backoff(0.5, 2.0, 8.0, 0.25, 0.0),
        {"bad_request"},
        failover.RetryBudget(0.2, 10.0, 10.0),
        30.0,
        3600.0,
    ), "the public defaults did not change"


@pytest.mark.parametrize(
    "policy",
    [
        failover.RetryPolicy(),
        failover.RetryPolicy.laravel(),
        failover.RetryPolicy.openai(),
        failover.RetryPolicy.ruby_llm(30),
    ],
    ids=repr,
)
def test_worst_case_is_what_the_engine_sleeps(mock_server, backup_server, policy):
    """Issue 16: worst_case() came from numbers re-typed in Python (openai's 120 s while the
    engine held 10/60); it is now the engine's own account, and a call that gets every
    longest wait sleeps exactly that."""
    plan = [
        (mock_server, policy.max_retries, policy.max_retry_after),
        (backup_server, policy.max_retries_last, policy.max_retry_after_last),
    ]
    for server, retries, cap in plan:
        for _ in range(retries + 1):
            server.push(
                429, headers={"retry-after": f"{cap:g}"}, json={"error": {"message": "slow"}}
            )
    sleeper = FakeSleeper()
    client = failover.Client(
        {"a": openai(mock_server), "b": openai(backup_server)}, retry=policy, sleeper=sleeper
    )
    with pytest.raises(failover.RateLimited):
        client.prompt("Hi")
    assert sleeper.sleeps == [cap for _, retries, cap in plan for _ in range(retries)]
    assert sum(sleeper.sleeps) == policy.worst_case(0, providers=2)


def test_worst_case_counts_the_backoff_the_engine_sleeps(mock_server):
    """Issue 16: with caps under the backoff, worst_case() counted backoff.max for every
    retry; the engine sleeps each step of the backoff."""
    policy = failover.RetryPolicy(max_retry_after_last=0, backoff=failover.Backoff(jitter=0))
    for _ in range(policy.max_retries_last + 1):
        mock_server.push(503)
    sleeper = FakeSleeper()
    client = failover.Client({"a": openai(mock_server)}, retry=policy, sleeper=sleeper)
    with pytest.raises(failover.ProviderOverloaded):
        client.prompt("Hi")
    b = policy.backoff
    assert sleeper.sleeps == [b.initial, b.initial * b.multiplier]
    assert policy.worst_case(0) == sum(sleeper.sleeps)
    assert policy.worst_case(10) == 3 * 10 + sum(sleeper.sleeps)


def test_the_retry_cap_is_the_engines(mock_server):
    """Issue 16: the cap was written in Python and again in the engine's backoff."""
    cap = failover._native.MAX_RETRIES
    assert failover.RetryPolicy(max_retries=cap, max_retries_last=cap).max_retries == cap
    for name in ("max_retries", "max_retries_last"):
        with pytest.raises(failover.ConfigurationError, match=f"{name} .* to {cap}"):
            failover.RetryPolicy(**{name: cap + 1})


@pytest.mark.parametrize("status", [409, 425])
def test_409_and_425_are_server_errors_retried_once(mock_server, backup_server, call, status):
    """Found hardening the first slice."""
    mock_server.push(status)
    mock_server.push_text("second try")
    sleeper = FakeSleeper()
    client = failover.Client(
        {"a": openai(mock_server), "b": openai(backup_server)}, sleeper=sleeper
    )
    assert call(client).text == "second try"
    assert len(sleeper.sleeps) == 1
    mock_server.push(status)
    with pytest.raises(failover.ServerError):
        call(failover.Client({"a": openai(mock_server)}, retry=SINGLE_TRY))


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (413, "<html>413 Request Entity Too Large</html>"),
        (
            413,
            '{"type":"error","error":{"type":"request_too_large",'
            '"message":"Request exceeds the maximum allowed number of bytes."}}',
        ),
    ],
)
def test_413_and_request_too_large_fail_over_as_context_length(
    mock_server, backup_server, call, status, body
):
    """Found hardening the first slice."""
    mock_server.push(status, body=body)
    backup_server.push_text("a bigger model")
    client = failover.Client(
        {"a": anthropic(mock_server), "b": openai(backup_server)}, sleeper=FakeSleeper()
    )
    assert call(client).text == "a bigger model"
    mock_server.push(status, body=body)
    with pytest.raises(failover.ContextLengthExceeded) as info:
        call(failover.Client({"a": anthropic(mock_server)}))
    assert isinstance(info.value, failover.BadRequest) and info.value.kind == "too_large"


@pytest.mark.parametrize(
    ("status", "cls", "kind"),
    [(404, failover.ModelNotFound, "not_found"), (401, failover.AuthenticationError, "auth")],
)
def test_auth_and_not_found_fail_over_loudly_unless_stop_on_names_them(
    mock_server, backup_server, call, caplog, status, cls, kind
):
    """Found hardening the first slice."""
    mock_server.push(status, json={"error": {"message": "nope"}})
    backup_server.push_text("backup")
    events: list[object] = []
    client = failover.Client(
        {"a": openai(mock_server), "b": openai(backup_server)}, on_event=events.append
    )
    caplog.set_level(logging.INFO, logger="failover")
    assert call(client).provider == "b"
    [moved] = [e for e in events if isinstance(e, failover.FailedOver)]
    assert type(moved.error) is cls and moved.error.kind == kind
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "a returned" in warnings[0].getMessage(), caplog.records
    # Named in stop_on: the call ends at once, the backup is never called.
    # (A new client: this one has "a" cooling down after its failure.)
    strict = failover.RetryPolicy(stop_on={"bad_request", "auth", "not_found"})
    mock_server.push(status, json={"error": {"message": "nope"}})
    client = failover.Client({"a": openai(mock_server), "b": openai(backup_server)})
    with pytest.raises(cls):
        call(client, retry=strict)
    assert len(backup_server.requests) == 1
    if status == 404:
        assert issubclass(cls, failover.BadRequest)


def test_an_empty_stop_on_lets_even_a_400_fail_over(mock_server, backup_server, call):
    """Found hardening the first slice."""
    mock_server.push(400, json={"error": {"message": "this model rejects the request"}})
    backup_server.push_text("backup")
    lenient = failover.RetryPolicy(stop_on=set())
    client = failover.Client({"a": openai(mock_server), "b": openai(backup_server)})
    assert call(client, retry=lenient).provider == "b"
    mock_server.push(400)
    with pytest.raises(failover.BadRequest):
        call(client)  # the default ends the call on a 400
    assert len(backup_server.requests) == 1


def test_stop_on_is_checked_when_given():
    """Found hardening the first slice."""
    assert failover.RetryPolicy().stop_on == frozenset({"bad_request"})
    assert failover.RetryPolicy(stop_on=["auth"]).stop_on == frozenset({"auth"})
    for bad in ("auth", {"auht"}, 5, [None]):
        with pytest.raises(failover.ConfigurationError, match="stop_on"):
            failover.RetryPolicy(stop_on=bad)  # type: ignore[arg-type]
    with pytest.raises(failover.ConfigurationError, match="'auth' for AuthenticationError"):
        failover.RetryPolicy(stop_on={failover.AuthenticationError})  # type: ignore[arg-type]
    policy = failover.RetryPolicy(stop_on={"auth", "bad_request"})
    assert "stop_on={'auth', 'bad_request'}" in repr(policy)
    assert policy != failover.RetryPolicy()
    import pickle

    assert pickle.loads(pickle.dumps(policy)) == policy


def test_presets_keep_their_peers_rules(mock_server, backup_server, call):
    # laravel/ai raises on a 401; the default policy fails over.
    """Found hardening the first slice."""
    assert "auth" in failover.RetryPolicy.laravel().stop_on
    mock_server.push(401)
    client = failover.Client({"a": openai(mock_server), "b": openai(backup_server)})
    with pytest.raises(failover.AuthenticationError):
        call(client, retry=failover.RetryPolicy.laravel())
    assert backup_server.requests == []
    # openai-python gives up on a 404 at once; then the default stop_on applies.
    assert failover.RetryPolicy.openai().stop_on == frozenset({"bad_request"})
    mock_server.push(404)
    backup_server.push_text("backup")
    client = failover.Client({"a": openai(mock_server), "b": openai(backup_server)})
    assert call(client, retry=failover.RetryPolicy.openai()).provider == "b"
    assert len(mock_server.requests) == 2


def test_a_providers_own_overloaded_4xx_is_accepted(mock_server):
    """Found by trying the first slice as a new user."""
    assert 498 in openai(mock_server, overloaded_statuses=[498]).overloaded_statuses


def test_the_default_overloaded_statuses_are_the_engines(mock_server, call):
    """Issue 16: the list was written in Python and in the engine; the engine's is the one."""
    engine = failover._native.DEFAULT_OVERLOADED_STATUSES
    assert openai(mock_server).overloaded_statuses == engine
    assert failover.Anthropic(model="m", api_key="k").overloaded_statuses == (*engine, 529)
    client = failover.Client({"a": openai(mock_server)}, retry=SINGLE_TRY)
    for status in engine:
        mock_server.push(status)
        with pytest.raises(failover.ProviderOverloaded):
            call(client)


def test_overloaded_statuses_add_to_the_wires_own(mock_server, call):
    """Found by the second review of the first slice."""
    provider = openai(mock_server, overloaded_statuses=[498])
    assert 498 in provider.overloaded_statuses and 503 in provider.overloaded_statuses
    assert (
        529
        in failover.Anthropic(model="m", api_key="k", overloaded_statuses=[498]).overloaded_statuses
    )
    client = failover.Client({"a": provider}, retry=SINGLE_TRY)
    for status in (498, 503):
        mock_server.push(status)
        with pytest.raises(failover.ProviderOverloaded):
            call(client)


def test_a_json_not_found_from_a_router_says_to_check_base_url(mock_server):
    """Found by the second review of the first slice."""
    mock_server.push(404, json={"detail": "Not Found"})
    with pytest.raises(failover.ModelNotFound, match="check base_url"):
        failover.Client({"a": openai(mock_server)}, retry=SINGLE_TRY).prompt("Hi")
