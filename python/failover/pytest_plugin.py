"""pytest fixtures, registered through the ``pytest11`` entry point."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from . import testing


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "mock_server(assert_all_used=True): options of the mock_server fixture; "
        "assert_all_used=False lets the test leave scripted responses unserved.",
    )


@pytest.fixture(name="fake_sleep")
def _fake_sleep() -> Iterator[testing.FakeSleeper]:
    """The FakeSleeper every client without its own sleeper uses in this test."""
    with testing.fake_sleep() as sleeper:
        yield sleeper


def _assert_all_used(request: pytest.FixtureRequest) -> bool:
    marker = request.node.get_closest_marker("mock_server")
    if marker is None:
        return True
    options = dict(marker.kwargs)
    check = options.pop("assert_all_used", True)
    if marker.args or options:
        raise TypeError(
            "@pytest.mark.mock_server takes only assert_all_used=..., "
            f"got {marker.args!r} {options!r}"
        )
    return bool(check)


@pytest.fixture(name="mock_server")
def _mock_server(request: pytest.FixtureRequest) -> Iterator[testing.MockServer]:
    """A MockServer on 127.0.0.1, closed after the test.

    At teardown the test fails if scripted responses are left unserved
    (``MockServer.assert_all_used()``); opt out with
    ``@pytest.mark.mock_server(assert_all_used=False)``.
    """
    check = _assert_all_used(request)
    server = testing.MockServer()
    try:
        yield server
        if check:
            server.assert_all_used()
    finally:
        server.close()
