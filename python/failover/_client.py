"""``failover.Client``: the public face of the native engine."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from . import _native, _sleep
from ._checks import count, number, seconds
from ._events import _emitter
from ._exceptions import ConfigurationError
from ._models import Response
from ._policy import RetryPolicy
from ._providers import Provider

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (5 ms)

if TYPE_CHECKING:
    from typing import Any, Union

    from ._events import EventHook

    Prompt = Union[str, Sequence[Mapping[str, Any]]]

_DEFAULT_POLICY = RetryPolicy()


def _messages(prompt: Prompt) -> list[Any]:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if not isinstance(prompt, (list, tuple)):
        raise ConfigurationError(
            f"prompt must be a str or a list of message dicts, got {type(prompt).__name__}"
        )
    messages = list(prompt)
    for m in messages:
        if not isinstance(m, Mapping) or "role" not in m:
            raise ConfigurationError(f"each message must be a dict with a 'role', got {m!r}")
    return [m if isinstance(m, dict) else dict(m) for m in messages]


class Client:
    """Calls a chain of providers, waiting out short rate limits and failing
    over when waiting would cost more than switching.

    ``providers`` is ordered; its names are what responses, errors and events
    report. ``timeout`` bounds each attempt, ``deadline`` the whole call (all
    attempts, waits and failovers). ``sleeper``: ``None`` sleeps for real in
    Rust; a ``failover.testing.FakeSleeper`` or any callable taking seconds
    replaces it. ``on_event`` receives RetryScheduled, FailedOver and
    CallFailed events.
    """

    def __init__(
        self,
        providers: Mapping[str, Provider],
        *,
        retry: RetryPolicy = _DEFAULT_POLICY,
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
        deadline: float | None = None,
        sleeper: Any = None,
        on_event: EventHook | None = None,
    ) -> None:
        if not isinstance(providers, Mapping):
            raise ConfigurationError(
                "providers must be a mapping of names to providers, e.g. {'main': OpenAI(...)}"
            )
        if not providers:
            raise ConfigurationError("Client needs at least one provider")
        for name, provider in providers.items():
            if not isinstance(name, str) or not name:
                raise ConfigurationError(f"provider names must be non-empty strings, got {name!r}")
            if not isinstance(provider, Provider):
                raise ConfigurationError(
                    f"provider {name!r} must be a failover provider "
                    f"(OpenAI, Anthropic, ...), got {provider!r}"
                )
        if not isinstance(retry, RetryPolicy):
            raise ConfigurationError(f"retry must be a RetryPolicy, got {retry!r}")
        if sleeper is not None and not callable(sleeper):
            raise ConfigurationError("sleeper must be None, a FakeSleeper or a callable")
        self._providers = dict(providers)
        self._names = list(self._providers)
        self._index = {name: i for i, name in enumerate(self._names)}
        self._retry = retry
        self._timeout = seconds("timeout", timeout, positive=True)
        self._connect_timeout = seconds("connect_timeout", connect_timeout, positive=True)
        self._deadline = None if deadline is None else seconds("deadline", deadline, positive=True)
        self._sleeper = sleeper
        native_providers = [p._native(name) for name, p in self._providers.items()]
        self._native = _native.NativeClient(
            native_providers, self._connect_timeout, _emitter(on_event)
        )

    def __repr__(self) -> str:
        chain = ", ".join(f"{n!r}: {p!r}" for n, p in self._providers.items())
        return f"Client(providers={{{chain}}}, retry={self._retry!r}, timeout={self._timeout})"

    @property
    def providers(self) -> dict[str, Provider]:
        return dict(self._providers)

    def _call_args(
        self,
        prompt: Prompt,
        provider: str | Sequence[str] | None,
        model: str | None,
        timeout: float | None,
        deadline: float | None,
        retry: RetryPolicy | None,
        system: str | None,
        max_tokens: int | None,
        temperature: float | None,
    ) -> tuple[Any, ...]:
        if provider is None:
            chain = list(range(len(self._names)))
        else:
            if isinstance(provider, str):
                names = [provider]
            elif isinstance(provider, (list, tuple)) and all(isinstance(n, str) for n in provider):
                names = list(provider)
            else:
                raise ConfigurationError(
                    f"provider= takes a name or a list of names, got {provider!r}"
                )
            if not names:
                raise ConfigurationError("provider= names no provider")
            if len(set(names)) != len(names):
                raise ConfigurationError(f"provider= names a provider twice: {names}")
            unknown = [n for n in names if n not in self._index]
            if unknown:
                raise ConfigurationError(
                    f"unknown provider(s) {unknown}; configured: {self._names}"
                )
            chain = [self._index[n] for n in names]
        if model is not None and len(chain) != 1:
            raise ConfigurationError("model= is allowed only when a single provider is named")
        policy = retry if retry is not None else self._retry
        if not isinstance(policy, RetryPolicy):
            raise ConfigurationError(f"retry must be a RetryPolicy, got {policy!r}")
        sleeper = self._sleeper if self._sleeper is not None else _sleep.active
        sleeper = getattr(sleeper, "_native_clock", sleeper)
        if timeout is not None:
            timeout = seconds("timeout", timeout, positive=True)
        if deadline is not None:
            deadline = seconds("deadline", deadline, positive=True)
        if max_tokens is not None:
            max_tokens = count("max_tokens", max_tokens, minimum=1, maximum=2**31 - 1)
        if temperature is not None:
            temperature = number("temperature", temperature, low=0.0, high=100.0)
        # Positional, in the order _native.NativeClient.prompt unpacks them.
        return (
            _messages(prompt),
            chain,
            policy._native(),
            self._timeout if timeout is None else timeout,
            self._deadline if deadline is None else deadline,
            sleeper,
            model,
            system,
            max_tokens,
            temperature,
        )

    def prompt(
        self,
        prompt: Prompt,
        *,
        provider: str | Sequence[str] | None = None,
        model: str | None = None,
        system: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        timeout: float | None = None,
        deadline: float | None = None,
        retry: RetryPolicy | None = None,
    ) -> Response:
        """Sends a prompt (a string or a list of message dicts) and returns the answer.

        Raises the last provider's error when every provider failed, or at once
        an error that no other provider could fix (a bad request, a bad key).
        """
        args = self._call_args(
            prompt, provider, model, timeout, deadline, retry, system, max_tokens, temperature
        )
        return Response(self._native.prompt(args))

    async def prompt_async(
        self,
        prompt: Prompt,
        *,
        provider: str | Sequence[str] | None = None,
        model: str | None = None,
        system: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        timeout: float | None = None,
        deadline: float | None = None,
        retry: RetryPolicy | None = None,
    ) -> Response:
        """``prompt()`` for asyncio: the same engine; cancelling the task
        cancels the request."""
        args = self._call_args(
            prompt, provider, model, timeout, deadline, retry, system, max_tokens, temperature
        )
        return Response(await self._native.prompt_async(args))
