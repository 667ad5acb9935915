"""Cases where the engine disagrees with the oracle and DESIGN.md sides with the oracle:
findings for the lead, each marked xfail(strict=True) by its case id."""

FINDINGS: dict[str, str] = {}
