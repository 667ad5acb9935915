"""pytest fixtures, registered through the ``pytest11`` entry point."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from . import testing


@pytest.fixture(name="fake_sleep")
def _fake_sleep() -> Iterator[testing.FakeSleeper]:
    """The FakeSleeper every client without its own sleeper uses in this test."""
    with testing.fake_sleep() as sleeper:
        yield sleeper


@pytest.fixture(name="mock_server")
def _mock_server() -> Iterator[testing.MockServer]:
    """A MockServer on 127.0.0.1, closed after the test."""
    server = testing.MockServer()
    try:
        yield server
    finally:
        server.close()
