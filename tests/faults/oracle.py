"""The fault matrix's oracle: what DESIGN.md §3 says a call ends in, written from its tables
alone (§3.1 classification, §3.2 wait hints, §3.3 default policy, §3.6 streaming, §3.7
exceptions, §3.8 cooldowns), never from the engine's code.

``predict(case)`` plays the default ``RetryPolicy()`` over the scripted chain on a virtual
clock and returns the ``Outcome``: the provider that answers or the exception (by class name,
with the provider it names), every sleep (an exact value for a hint, a range for a jittered
backoff), the HTTP requests each provider receives, the attempts recorded and the failovers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# §3.3: RetryPolicy(max_retries=1, max_retries_last=2, max_retry_after=10.0,
# max_retry_after_last=60.0, backoff=Backoff(initial=0.5, multiplier=2.0, max=8.0, jitter=0.25))
MAX_RETRIES = 1
MAX_RETRIES_LAST = 2
MAX_RETRY_AFTER = 10.0
MAX_RETRY_AFTER_LAST = 60.0
BACKOFF_INITIAL, BACKOFF_MULTIPLIER, BACKOFF_MAX, BACKOFF_JITTER = 0.5, 2.0, 8.0, 0.25
STOP_ON = frozenset({"bad_request"})
# §3.2: a well-formed wait above this counts as exactly this.
LONGEST_WAIT = 1e9

# §3.1: kind -> (exception class, retried, fails over)
KINDS: dict[str, tuple[str, bool, bool]] = {
    "rate_limited": ("RateLimited", True, True),
    "overloaded": ("ProviderOverloaded", True, True),
    "server_error": ("ServerError", True, True),
    "timeout": ("ProviderTimeout", True, True),
    "connection": ("ProviderConnectionError", True, True),
    "insufficient_credits": ("InsufficientCredits", False, True),
    "auth": ("AuthenticationError", False, True),
    "not_found": ("ModelNotFound", False, True),
    "too_large": ("ContextLengthExceeded", False, True),
    "bad_request": ("BadRequest", False, False),
}
# §3.1: the default overloaded statuses, and what each wire adds.
OVERLOADED_DEFAULT = frozenset({502, 503, 504, 520, 522, 524})
OVERLOADED_EXTRA = {"anthropic": frozenset({529}), "openai": frozenset()}


def classify_status(status: int, wire: str) -> str:
    """§3.1's table for an HTTP status (bodies carry no classifying words in the matrix)."""
    if status == 429:
        return "rate_limited"
    if status in OVERLOADED_DEFAULT or status in OVERLOADED_EXTRA[wire]:
        return "overloaded"
    if status == 408:
        return "timeout"
    if status == 402:
        return "insufficient_credits"
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "not_found"
    if status == 413:
        return "too_large"
    if status in (409, 425) or status >= 500:
        return "server_error"
    return "bad_request"


# The hints of issue 17 §2. Each is described by how DESIGN §3.2 reads it: either no hint,
# a relative wait, or an absolute time (Unix seconds, offset from the call's start) whose wait
# is its distance from the virtual clock's now, 0 once past.
HINTS = (
    "none",
    "zero",
    "one",
    "one_and_a_half",
    "negative",
    "abc",
    "date_past",
    "date_future",
    "exp_overflow",
    "huge",
    "retry_after_ms",
    "provider_reset",
    # Beyond issue 17's list: §3.2's first rule, with a wait hint beside it.
    "should_retry_false",
    # §3.2: "all three RFC 9110 forms" of an HTTP-date, the obsolete two.
    "date_future_rfc850",
    "date_future_asctime",
)
DATE_PAST_OFFSET = -60.0
DATE_FUTURE_OFFSET = 30.0  # over the 10 s cap, under the last provider's 60 s
PROVIDER_RESET_OFFSET = 2.0


@dataclass(frozen=True)
class Hint:
    relative: float | None = None
    absolute_offset: float | None = None  # seconds after the clock's start
    no_retry: bool = False  # `x-should-retry: false`

    def wait(self, elapsed: float) -> float | None:
        """The wait this hint asks for when the virtual clock is ``elapsed`` past its start."""
        if self.relative is not None:
            return min(self.relative, LONGEST_WAIT)
        if self.absolute_offset is not None:
            return max(0.0, self.absolute_offset - elapsed)
        return None


def read_hint(hint: str, wire: str) -> Hint:
    """§3.2 in order: retry-after-ms, retry-after (seconds or HTTP-date), provider hints;
    negative or malformed values are no hint; over 1e9 (or unrepresentable) counts as 1e9."""
    if hint in ("none", "negative", "abc"):
        return Hint()
    if hint == "should_retry_false":
        # No retry on this provider; its `retry-after: 1` still sets .retry_after and the
        # cooldown (§3.8).
        return Hint(relative=1.0, no_retry=True)
    if hint == "exp_overflow":
        # `retry-after: 1e400`: §3.2 reads "non-negative decimal seconds, fractions allowed";
        # exponent notation is not decimal seconds, so this is "otherwise malformed": no hint.
        return Hint()
    relative = {"zero": 0.0, "one": 1.0, "one_and_a_half": 1.5, "retry_after_ms": 1.5}
    if hint in relative:
        return Hint(relative=relative[hint])
    if hint == "huge":
        return Hint(relative=LONGEST_WAIT)
    if hint == "date_past":
        return Hint(absolute_offset=DATE_PAST_OFFSET)
    if hint in ("date_future", "date_future_rfc850", "date_future_asctime"):
        return Hint(absolute_offset=DATE_FUTURE_OFFSET)
    if hint == "provider_reset":
        # OpenAI's `x-ratelimit-reset-requests: 2s` is relative; Anthropic's RFC 3339 reset time
        # is absolute (both with their `remaining` at 0).
        if wire == "openai":
            return Hint(relative=PROVIDER_RESET_OFFSET)
        return Hint(absolute_offset=PROVIDER_RESET_OFFSET)
    raise ValueError(hint)


# Transport faults. For each: the kinds DESIGN allows (a set where it leaves the kind open:
# §3.6 says a truncated or malformed body is retried "like a server error", while a body cut
# off by a reset is a connection failure; the policy treats both alike), or "ok" when the
# fault is within what a call must tolerate, or "interrupted"/"deadline" for streams.
TRANSPORT_FAULTS = (
    "reset_before_headers",
    "reset_mid_body",
    "hang",
    "slow_body",
    "truncated_body",
    "non_json_body",
    "invalid_utf8",
    "stream_cut_before_content",
    "stream_cut_after_content",
    "keepalives_only",
    # Beyond issue 17's list: Anthropic's in-stream error event, before and after content.
    "in_stream_overloaded_before_content",
    "in_stream_overloaded_after_content",
    # A connection that goes silent, open: mid-body (before any content), and after content.
    "stall_mid_body",
    "stall_after_content",
)
STREAM_ONLY_FAULTS = frozenset(
    {
        "stream_cut_before_content",
        "stream_cut_after_content",
        "keepalives_only",
        "in_stream_overloaded_before_content",
        "in_stream_overloaded_after_content",
        "stall_after_content",
    }
)
MALFORMED = frozenset({"server_error", "connection"})


def transport_kinds(fault: str, call: str) -> frozenset[str] | str:
    if fault == "reset_before_headers":
        return frozenset({"connection"})
    if fault == "hang":
        return frozenset({"timeout"})
    if fault == "slow_body":
        return "ok"  # the idle timeout is never hit; a long answer that keeps arriving is fine
    if fault == "stream_cut_before_content":
        return frozenset({"connection"})  # §3.6: ended before any end marker
    if fault == "stall_mid_body":
        # §3.6: the timeout covers each next event of a stream; a whole body that stops
        # coming has not arrived within the attempt's timeout (§3.1's timeout) either.
        return frozenset({"timeout"})
    if fault in (
        "stream_cut_after_content",
        "in_stream_overloaded_after_content",
        "stall_after_content",
    ):
        return "interrupted"
    if fault == "in_stream_overloaded_before_content":
        return frozenset({"overloaded"})  # §3.1: in-stream `overloaded_error`
    if fault == "keepalives_only":
        return "deadline"  # keep-alives reset the idle timeout; only the deadline ends it
    if fault == "reset_mid_body" and call == "stream":
        return frozenset({"connection"})
    return MALFORMED


@dataclass(frozen=True)
class Case:
    face: str  # "sync" | "async"
    call: str  # "chat" | "stream" | "embed"
    chain: str  # "one" | "two" | "three_cooling"
    status: int | None = None  # an HTTP error status, or None for a transport fault
    hint: str = "none"
    fault: str | None = None
    deadline: float | None = None  # virtual seconds; None: the matrix's roomy default

    @property
    def wire(self) -> str:
        """The faulted provider's wire: Anthropic (which adds 529) for chat and streams,
        OpenAI for embeddings (Anthropic cannot embed)."""
        return "openai" if self.call == "embed" else "anthropic"

    @property
    def id(self) -> str:
        what = f"{self.status}-{self.hint}" if self.fault is None else self.fault
        bound = "" if self.deadline is None else f"-deadline{self.deadline:g}"
        return f"{self.face}-{self.call}-{self.chain}-{what}{bound}"


# The chains: provider names in order, and each one's role. The faulted provider's script
# repeats its fault; in a one-provider chain it recovers on its third attempt (so the
# retries of the last provider show), elsewhere it keeps failing. "cooling" was made to cool
# by an earlier call on the same client (a 503 asking for an hour).
CHAINS = {
    "one": (("p1", "faulted"),),
    "two": (("p1", "faulted"), ("p2", "ok")),
    "three_cooling": (("p1", "cooling"), ("p2", "faulted"), ("p3", "ok")),
    "three_cooling_middle": (("p1", "faulted"), ("p2", "cooling"), ("p3", "ok")),
}
# §3.8's cooldowns: a short default (5 s) after a retryable failure with no usable hint; 300 s
# for auth, not-found and insufficient credits; a hinted one kept up to an hour.
DEFAULT_COOLDOWN = 5.0
LONG_COOLDOWN = 300.0
MAX_HINTED_COOLDOWN = 3600.0
SETUP_COOLDOWN = 3600.0  # the hour the cooling provider's earlier 503 asked for


def faulted_script_length(chain: str) -> tuple[int, bool]:
    """How many faulted responses the faulted provider is scripted with, and whether a
    success follows them."""
    return (2, True) if chain == "one" else (3, False)


ANSWERED = frozenset({True})
REFUSED = frozenset({False})
UNKNOWABLE = frozenset({None})


def billed_status(status: int) -> frozenset[bool | None]:
    """An error status whose body reports no usage (issue 18): a refusal before generating
    (a 4xx, an overload's 503 or 529) is not billed; another 5xx (a gateway timing out on
    the model, a server error) may come after generating, which cannot be known."""
    return REFUSED if status < 500 or status in (503, 529) else UNKNOWABLE


def billed(fault: str | None, call: str) -> frozenset[bool | None]:
    """Whether a failed attempt may be billed (issue 18: True once the provider generated,
    False when it refused before generating, None when it cannot be known)."""
    if fault is None:
        return REFUSED  # (an error status: billed_status)
    if transport_kinds(fault, call) == "interrupted":
        return ANSWERED  # content was delivered
    if fault in ("truncated_body", "non_json_body", "invalid_utf8"):
        # A 2xx whose body cannot be read: the provider answered, so generated; a body that
        # ends early (or a stream's that is no stream) may also read as cut after its
        # headers, which cannot be known.
        return frozenset({True, None})
    # Sent, and then a reset, a hang, a cut or a stall before any content.
    return UNKNOWABLE


@dataclass(frozen=True)
class AttemptDetail:
    """What an HTTP attempt records (§2: Attempt(provider, status, kind, waited, ...))."""

    status: int | None
    status_known: bool  # False where a body fault may come after a 200's headers, or not
    kinds: frozenset[str | None] | None  # None: not said; {None} for a success
    waited: tuple[float, float]  # the sleep before it, (low, high)
    billed: frozenset[bool | None] = ANSWERED  # its allowed values


@dataclass
class Outcome:
    provider: str | None = None  # who answered
    error: frozenset[str] | None = None  # the exception's class names allowed
    error_provider: str | None = None
    error_kinds: frozenset[str] | None = None
    retry_after: float | None = None  # of the raised ProviderError
    retry_after_known: bool = False  # False where the error carries no hint to check
    sleeps: list[tuple[float, float]] = field(default_factory=list)  # (low, high) each
    requests: dict[str, int] = field(default_factory=dict)
    attempts: list[tuple[str, bool]] = field(default_factory=list)  # (provider, skipped)
    details: list[AttemptDetail | None] = field(default_factory=list)  # None for a skip
    failovers: list[tuple[str, str]] = field(default_factory=list)
    timed_out_attempts: int = 0  # attempts that wait out a real timeout
    # The faulted provider's cooldown after the call (None: not cooling), when DESIGN says.
    cooldown: float | None = None
    cooldown_known: bool = False
    cooldown_rule: str | None = None  # which of §3.8's rules set it (findings name them)


ROOMY_DEADLINE = 100.0  # holds every wait under the caps


def retried_kind(kinds: frozenset[str]) -> bool:
    return all(KINDS[k][1] for k in kinds)


def backoff(n: int) -> tuple[float, float]:
    """§3.3: min(initial * multiplier**n, max) * (1 - jitter * U[0,1))."""
    base = min(BACKOFF_INITIAL * BACKOFF_MULTIPLIER**n, BACKOFF_MAX)
    return (base * (1 - BACKOFF_JITTER), base)


def predict(case: Case) -> Outcome:
    out = Outcome()
    chain = CHAINS[case.chain]
    names = [name for name, _ in chain]
    out.requests = {name: 0 for name in names}
    elapsed = 0.0  # virtual clock, from the call's start (sleeps only)
    left_behind: str | None = None
    faulted_count, recovers = faulted_script_length(case.chain)
    deadline = ROOMY_DEADLINE if case.deadline is None else case.deadline

    def arrive(name: str) -> None:
        nonlocal left_behind
        if left_behind is not None:
            out.failovers.append((left_behind, name))
            left_behind = None

    for index, (name, role) in enumerate(chain):
        # §3.3 "last": none left in the chain that is not cooling.
        is_last = all(r == "cooling" for _, r in chain[index + 1 :])
        if role == "cooling":
            # §3.8: later calls skip it, recorded as skipped; a skip emits no event.
            out.attempts.append((name, True))
            out.details.append(None)
            continue
        arrive(name)
        if role == "ok":
            out.requests[name] += 1
            out.attempts.append((name, False))
            out.details.append(AttemptDetail(200, True, frozenset({None}), (0.0, 0.0)))
            out.provider = name
            return out
        # The faulted provider.
        retries = 0
        before = (0.0, 0.0)  # the sleep before the next attempt
        for attempt in range(faulted_count + 1):
            out.requests[name] += 1
            out.attempts.append((name, False))
            waited, before = before, (0.0, 0.0)
            success = AttemptDetail(200, True, frozenset({None}), waited)
            if attempt == faulted_count:  # its recovery (scripted only when `recovers`)
                assert recovers
                out.details.append(success)
                out.provider = name
                # A success ends a cooldown.
                out.cooldown, out.cooldown_known, out.cooldown_rule = None, True, None
                return out
            no_retry = False
            if case.fault is not None:
                kinds = transport_kinds(case.fault, case.call)
                if kinds == "ok":
                    out.details.append(success)
                    out.provider = name
                    out.cooldown_known = True
                    return out
                if kinds in ("interrupted", "deadline"):
                    allowed = billed(case.fault, case.call)
                    out.details.append(AttemptDetail(None, False, None, waited, allowed))
                if kinds == "interrupted":
                    # §3.6: after the first content chunk, StreamInterrupted; never retried.
                    out.error = frozenset({"StreamInterrupted"})
                    out.error_provider = name
                    return out
                if kinds == "deadline":
                    out.error = frozenset({"DeadlineExceeded"})
                    return out
                assert isinstance(kinds, frozenset)
                before_headers = case.fault in ("reset_before_headers", "hang")
                allowed = billed(case.fault, case.call)
                detail = AttemptDetail(None, before_headers, frozenset(kinds), waited, allowed)
                out.details.append(detail)
                if kinds == {"timeout"}:
                    out.timed_out_attempts += 1
                wait = None
            else:
                kinds = frozenset({classify_status(case.status or 0, case.wire)})
                out.details.append(
                    AttemptDetail(
                        case.status, True, frozenset(kinds), waited, billed_status(case.status or 0)
                    )
                )
                hint = read_hint(case.hint, case.wire)
                wait = hint.wait(elapsed)
                if hint.no_retry and retried_kind(kinds):
                    no_retry = True
            any_kind = next(iter(kinds))
            _, retried, fails_over = KINDS[any_kind]
            assert all(KINDS[k][1:] == (retried, fails_over) for k in kinds)

            def fail(
                kinds: frozenset[str] = kinds, wait: float | None = wait, name: str = name
            ) -> None:
                out.error = frozenset(KINDS[k][0] for k in kinds)
                out.error_kinds = kinds
                out.error_provider = name
                out.retry_after = wait
                out.retry_after_known = True

            limit = 0 if no_retry else MAX_RETRIES_LAST if is_last else MAX_RETRIES
            cap = MAX_RETRY_AFTER_LAST if is_last else MAX_RETRY_AFTER
            # §3.3: a wait is slept only if it ends before the deadline. (Attempts take real
            # time too, a few ms here: the matrix keeps its waits clear of the boundary.)
            fits = wait is not None and elapsed + wait < deadline

            def cool(
                kind: str = any_kind,
                wait: float | None = wait,
                retried: bool = retried,
                cap: float = cap,
                fits: bool = fits,
                no_retry: bool = no_retry,
            ) -> None:
                """§3.8, for the provider as the call leaves it (fails over or raises); a
                retry's response overrides it."""
                out.cooldown, out.cooldown_known, out.cooldown_rule = None, False, None
                if not retried:
                    if wait is not None:
                        return  # DESIGN does not say whether a hint or the kind decides
                    if kind in ("auth", "not_found", "insufficient_credits"):
                        out.cooldown = LONG_COOLDOWN
                    out.cooldown_known = True
                    return
                out.cooldown_known = True
                if wait is None:
                    out.cooldown, out.cooldown_rule = DEFAULT_COOLDOWN, "no_hint"
                elif wait > cap or not fits:  # a wait it did not get: until the hinted time
                    out.cooldown = min(wait, MAX_HINTED_COOLDOWN)
                    out.cooldown_rule = "hint_not_taken"
                elif no_retry:  # its hint still sets the cooldown
                    out.cooldown = wait if wait > 0 else None
                    out.cooldown_rule = "should_retry_false"
                else:  # retries ran out on hints it accepted: until the last one (now for 0)
                    out.cooldown = wait if wait > 0 else None
                    out.cooldown_rule = "hints_ran_out" if wait > 0 else "hints_ran_out_at_zero"

            if any_kind in STOP_ON or (not fails_over and is_last):
                fail()
                if any_kind in STOP_ON:
                    # A bad request cools nothing (with a hint DESIGN does not say).
                    out.cooldown, out.cooldown_known = None, wait is None
                else:
                    cool()
                return out
            cool()
            if not retried:
                if is_last:
                    fail()
                    return out
                left_behind = name
                break
            if wait is not None:
                if wait <= cap and fits and retries < limit:
                    out.sleeps.append((wait, wait))
                    before = (wait, wait)
                    elapsed += wait
                    retries += 1
                    continue
            elif is_last:
                if retries < limit and elapsed + backoff(retries)[1] < deadline:
                    low, high = backoff(retries)
                    out.sleeps.append((low, high))
                    before = (low, high)
                    elapsed += high  # no absolute hint is read after a backoff in the matrix
                    retries += 1
                    continue
            elif (
                any_kind in ("server_error", "connection")
                and retries < min(1, MAX_RETRIES)
                and elapsed + backoff(retries)[1] < deadline
            ):
                low, high = backoff(retries)
                out.sleeps.append((low, high))
                before = (low, high)
                elapsed += high
                retries += 1
                continue
            # Out of retries, or a wait it may not take: fail over, or raise on the last.
            if is_last:
                fail()
                return out
            left_behind = name
            break
    raise AssertionError(f"the chain of {case.id} ended without an outcome")


MAX_COOLDOWN = 30.0  # §3.8: the default cap of the unhinted cooldown


def unhinted_cooldowns(rounds: int) -> list[float]:
    """§3.8: a provider that keeps failing with no usable hint cools 5 s, doubling each time
    it fails again (its probe after the cooldown failing), capped at 30 s."""
    return [min(DEFAULT_COOLDOWN * 2**n, MAX_COOLDOWN) for n in range(rounds)]
