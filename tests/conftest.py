from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any, Callable

import pytest

import failover
from failover.testing import MockServer

# Runs small inner test files, to check the plugin's fixtures and markers.
pytest_plugins = ["pytester"]

KEY = "sk-test-do-not-leak-1234567890"


@pytest.fixture
def backup_server() -> Iterator[MockServer]:
    """A second MockServer, for the provider a call fails over to."""
    with MockServer() as server:
        yield server


@pytest.fixture(params=["sync", "async"])
def call(request: pytest.FixtureRequest) -> Callable[..., failover.Response]:
    """Runs ``client.prompt`` or ``client.prompt_async``: every behaviour test
    runs through both faces of the one engine."""

    def run(client: failover.Client, prompt: Any = "Hi", **kwargs: Any) -> failover.Response:
        if request.param == "sync":
            return client.prompt(prompt, **kwargs)
        return asyncio.run(client.prompt_async(prompt, **kwargs))

    return run


def openai(server: MockServer, **kwargs: Any) -> failover.OpenAICompatible:
    return failover.OpenAICompatible(
        model="gpt-4.1-mini", base_url=server.url, api_key=KEY, **kwargs
    )


def anthropic(server: MockServer, **kwargs: Any) -> failover.Anthropic:
    return failover.Anthropic(model="claude-haiku-4-5", base_url=server.url, api_key=KEY, **kwargs)
