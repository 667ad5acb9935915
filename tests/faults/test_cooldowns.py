"""A provider that keeps failing, call after call (DESIGN §3.8): its unhinted cooldown of 5 s
doubles each time its probe after a cooldown fails, up to 30 s; a good answer ends it, and the
next failure starts again from 5 s. For every retryable status and a connection reset, on both
faces, for chat, streams and embeddings, on the FakeSleeper's clock (``advance()`` lets each
cooldown run out). The expected figures come from ``oracle.py``, not from the engine.
"""

from __future__ import annotations

import math
import secrets
from typing import Any

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

from . import oracle, scripts
from .test_matrix import FACES, invoke, provider_for

RETRYABLE = (429, 503, 529, 500, 502, 504, 408, 409, "reset")
CALLS = ("chat", "stream", "embed")
FAILING_ROUNDS = 5  # 5, 10, 20, 30, 30 s


def case_for(face: str, call: str, fault: Any) -> oracle.Case:
    if fault == "reset":
        return oracle.Case(face, call, "two", fault="reset_before_headers")
    return oracle.Case(face, call, "two", status=fault)


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("fault", RETRYABLE, ids=str)
def test_an_unhinted_cooldown_doubles_to_its_cap_and_a_success_ends_it(
    fault: Any, face: str, call: str
) -> None:
    case = case_for(face, call, fault)
    per_round = oracle.predict(case).requests["p1"]  # the attempts one failing call makes
    expected = oracle.unhinted_cooldowns(FAILING_ROUNDS)
    key = f"sk-FAULTMATRIX-{secrets.token_hex(12)}"
    name = "p1:embeddings" if call == "embed" else "p1"
    sleeper = FakeSleeper()
    with MockServer() as primary, MockServer() as backup:
        for _ in range(FAILING_ROUNDS):
            for _ in range(per_round):
                scripts.push_fault(primary, case, key, sleeper.time())
            scripts.push_success(backup, case, "openai", "from p2")
        scripts.push_success(primary, case, case.wire, "from p1")  # the probe that recovers
        for _ in range(per_round):
            scripts.push_fault(primary, case, key, sleeper.time())
        scripts.push_success(backup, case, "openai", "from p2")
        client = failover.Client(
            {
                "p1": provider_for(case.wire, primary, key, call),
                "p2": provider_for("openai", backup, key, call),
            },
            sleeper=sleeper,
        )
        seen: list[float] = []
        with client:
            for cooldown in expected:
                run = invoke(case, client)
                assert run.error is None and run.result.provider == "p2", run.error
                left = client.cooldowns().get(name)
                seen.append(-1.0 if left is None else left)
                # Let it run out (just past it: the probe comes after the cooldown).
                sleeper.advance(max(cooldown, 0.0) + 0.01)
            assert all(math.isclose(a, e, abs_tol=0.01) for a, e in zip(seen, expected)), (
                f"cooldowns {seen}, the oracle expects {expected}"
            )
            run = invoke(case, client)
            assert run.error is None and run.result.provider == "p1", run.error
            assert name not in client.cooldowns(), "a success ends a cooldown"
            run = invoke(case, client)
            assert run.error is None and run.result.provider == "p2", run.error
            left = client.cooldowns().get(name)
            assert left is not None and math.isclose(left, expected[0], abs_tol=0.01), (
                f"after a recovery the next failure cools {left}, not {expected[0]}"
            )
        assert len(primary.requests) == (FAILING_ROUNDS + 1) * per_round + 1
        assert primary.pending == 0 and backup.pending == 0
