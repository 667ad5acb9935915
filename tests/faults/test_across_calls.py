"""Cooldowns across calls (DESIGN §3.8), beyond one call's outcome: when a cooldown ends, one
call at a time probes the provider while the others keep to the next one; and when every
provider of a chain is cooling, the one that recovers first is tried. Both faces, on the
FakeSleeper's clock; the probe's answer is held back (really) so the calls overlap."""

from __future__ import annotations

import asyncio
import math
import secrets
import threading
from typing import Any

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

from . import oracle
from .test_matrix import FACES

PROBE_DELAY = 0.5  # real seconds the probe's answer is held, so the second call overlaps it


def provider(server: MockServer, key: str) -> failover.OpenAICompatible:
    return failover.OpenAICompatible(model="gpt-4.1-mini", base_url=server.url, api_key=key)


def prompt_twice_at_once(face: str, client: failover.Client) -> list[Any]:
    """Two calls side by side: threads on the sync face, tasks on the async one."""
    if face == "async":

        async def both() -> list[Any]:
            calls = [client.prompt_async("Hi"), client.prompt_async("Hi")]
            return list(await asyncio.gather(*calls, return_exceptions=True))

        return asyncio.run(both())
    results: list[Any] = [None, None]

    def one(i: int) -> None:
        try:
            results[i] = client.prompt("Hi")
        except Exception as error:  # the outcome is what is checked
            results[i] = error

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return results


@pytest.mark.parametrize("probe_answers", [True, False], ids=["probe_answers", "probe_fails"])
@pytest.mark.parametrize("face", FACES)
def test_one_call_probes_a_provider_whose_cooldown_ended(face: str, probe_answers: bool) -> None:
    key = f"sk-FAULTMATRIX-{secrets.token_hex(12)}"
    sleeper = FakeSleeper()
    with MockServer() as primary, MockServer() as backup:
        primary.push(429, json={"error": {"message": "slow down"}})  # unhinted: cools 5 s
        backup.push_text("from p2")
        if probe_answers:
            primary.push_text("from p1", delay=PROBE_DELAY)
        else:
            primary.push(429, json={"error": {"message": "still"}}, delay=PROBE_DELAY)
        backup.push_text("from p2")
        backup.push_text("from p2")
        client = failover.Client(
            {"p1": provider(primary, key), "p2": provider(backup, key)}, sleeper=sleeper
        )
        with client:
            assert client.prompt("Hi").provider == "p2"
            first, second = oracle.unhinted_cooldowns(2)
            assert math.isclose(client.cooldowns()["p1"], first, abs_tol=0.01)
            sleeper.advance(first + 0.01)

            results = prompt_twice_at_once(face, client)

            errors = [r for r in results if isinstance(r, BaseException)]
            assert not errors, errors
            answered = sorted(r.provider for r in results)
            assert len(primary.requests) == 2, "more than one call probed p1 at once"
            if probe_answers:
                assert answered == ["p1", "p2"]
                assert "p1" not in client.cooldowns(), "a good answer closes the circuit"
            else:
                assert answered == ["p2", "p2"]
                left = client.cooldowns().get("p1")
                assert left is not None and math.isclose(left, second, abs_tol=0.01), (
                    f"a failed probe starts the next cooldown ({second} s), got {left}"
                )
        assert backup.pending == (0 if not probe_answers else 1)


@pytest.mark.parametrize("face", FACES)
def test_when_every_provider_cools_the_one_that_recovers_first_is_tried(face: str) -> None:
    key = f"sk-FAULTMATRIX-{secrets.token_hex(12)}"
    sleeper = FakeSleeper()
    servers = [MockServer() for _ in range(3)]
    try:
        names = ["p1", "p2", "p3"]
        # Hints over every cap: each provider cools for its own hint (p2 the shortest).
        for server, seconds in zip(servers, ("3000", "200", "900")):
            server.push(503, headers={"retry-after": seconds}, json={"error": {"message": "x"}})
        servers[1].push_text("from p2")
        client = failover.Client(
            {n: provider(s, key) for n, s in zip(names, servers)}, sleeper=sleeper
        )
        with client:
            for name in names:
                with pytest.raises(failover.ProviderOverloaded):
                    client.prompt("Hi", provider=[name])
            assert sorted(client.cooldowns()) == names
            if face == "sync":
                r = client.prompt("Hi")
            else:
                r = asyncio.run(client.prompt_async("Hi"))
            assert r.provider == "p2"
            assert [len(s.requests) for s in servers] == [1, 2, 1]
            assert "p2" not in client.cooldowns()
    finally:
        for server in servers:
            server.close()
