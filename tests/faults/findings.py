"""Where the engine disagrees with the oracle and DESIGN.md sides with the oracle: findings
for the lead, whose cases are marked ``xfail(strict=True)`` so they stay visible (and turn
into failures once fixed, to be unmarked)."""

from __future__ import annotations

from . import oracle

# By case id, for a disagreement particular to some cases.
BY_CASE: dict[str, str] = {}

# By the oracle's cooldown rule, for a disagreement in one of §3.8's rules.
BY_COOLDOWN_RULE: dict[str, str] = {
    # F1 (a provider whose retries ran out on a zero hint cooled for the 5 s no-hint default,
    # where DESIGN §3.8 cools it until its last hinted time, now) is fixed: no entry left.
}


def finding(case: oracle.Case, expected: oracle.Outcome) -> str | None:
    if case.id in BY_CASE:
        return BY_CASE[case.id]
    if expected.cooldown_rule is not None:
        return BY_COOLDOWN_RULE.get(expected.cooldown_rule)
    return None
