"""Smoke test of an installed failover: import it, make one call against a MockServer.

Run with the interpreter of the environment the wheel or sdist was installed into, from
outside the repository's python/ folder (the Makefile's wheel and sdist-check targets and the
release workflow do), so that the installed package is the one imported:

    /tmp/venv/bin/python scripts/smoke.py
"""

from __future__ import annotations

import sys

import failover
from failover.testing import MockServer


def main() -> int:
    with MockServer() as server:
        server.push_text("hi")
        provider = failover.OpenAICompatible("m", base_url=server.url)
        with failover.Client({"a": provider}) as client:
            text = client.prompt("x").text
    print(f"failover from {failover.__file__}: {text}")
    if text != "hi":
        print(f"smoke: expected 'hi', got {text!r}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
