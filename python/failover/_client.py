"""``failover.Client``: the public face of the native engine."""

from __future__ import annotations

import os  # loaded at interpreter startup: transcribe()'s hints name os.PathLike

from . import _media, _native, _options, _sleep
from ._attempt import Attempt, _attempts
from ._checks import count, is_async_callable, number, seconds
from ._cost import Price, Pricing
from ._events import EventHook, _emitter
from ._exceptions import ConfigurationError, FailoverError
from ._fleet import RedisState
from ._health import ProviderHealth, _health
from ._hedge import Hedge
from ._limits import ClientLimits, Limit, check_quotas
from ._models import Embeddings, ImageResponse, Response, SpeechResponse, Tool, Transcription
from ._policy import RetryPolicy
from ._providers import Pool, Provider, _check_name, _checked_headers, _display_url
from ._seam import CallArgs, EmbedArgs, MediaArgs, TransportSpec
from ._stats import Stats, Tally
from ._stream import AsyncSpeechStream, AsyncStream, SpeechStream, Stream
from ._telemetry import Observed, OpenTelemetry, Telemetry

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see _typing.py)
if TYPE_CHECKING:
    import typing
    from collections.abc import Callable, Iterable, Mapping, Sequence

    #: A whole call's result.
    R = typing.TypeVar("R", Response, Embeddings, ImageResponse, SpeechResponse, Transcription)
    #: A media call's result.
    M = typing.TypeVar("M", ImageResponse, SpeechResponse, Transcription)
else:
    from _collections_abc import (  # collections.abc's, loaded at startup
        Callable,
        Iterable,
        Mapping,
        Sequence,
    )

    from . import _typing as typing

#: A prompt: a string (one user message) or a list of message dicts.
#: (object, not Any: an alias is built at import, where typing is not.)
Prompt = str | Sequence[Mapping[str, object]]
#: A sleeper: a ``failover.testing.FakeSleeper`` or any callable taking seconds.
Sleeper = Callable[[float], object]

_DEFAULT_POLICY = RetryPolicy()
#: More idle connections per host than anyone means.
_MAX_IDLE_CONNECTIONS = 100_000


_QUIESCE_REGISTERED = False


def _quiesce_at_exit() -> None:
    """On the first async call: at exit, let the runtime finish handing the
    last results to the event loop before the interpreter finalizes (it
    would otherwise abort the process now and then)."""
    global _QUIESCE_REGISTERED
    if not _QUIESCE_REGISTERED:
        import atexit

        atexit.register(_native.quiesce)
        _QUIESCE_REGISTERED = True


class _Entry:
    """A chain entry: one provider, or a pool's members and its strategy."""

    __slots__ = ("indexes", "strategy")

    def __init__(self, indexes: list[int], strategy: str | None) -> None:
        self.indexes = indexes
        self.strategy = strategy


class _Unset:
    """An option left out (where ``None`` means something)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<unset>"


_UNSET = _Unset()


#: The span name of image, speech and transcription calls (the GenAI
#: conventions' operation for content a model generates).
_MEDIA_OPERATION = "generate_content"


class Client:
    """Calls a chain of providers, waiting out short rate limits and failing
    over when waiting would cost more than switching.

    ``providers`` is ordered; its names are what responses, errors and events
    report. ``timeout`` bounds each attempt, ``deadline`` the whole call (all
    attempts, waits and failovers). ``sleeper``: ``None`` sleeps for real in
    Rust; a ``failover.testing.FakeSleeper`` or any callable taking seconds
    replaces it. ``on_event`` receives RetryScheduled, FailedOver,
    HedgeStarted, HedgeWon and CallFailed events. ``state``: a
    ``failover.RedisState`` shares cooldowns, limits and the budgets with the
    fleet; ``quotas``: limits shared by the providers that name them;
    ``hedge``: a ``failover.Hedge`` for hedged requests.

    Transport: ``proxy`` (an http(s) URL; default: the usual proxy environment
    variables), ``verify`` (``True``, ``False`` or the path of a PEM CA
    bundle), ``http2`` (offered over TLS), ``max_idle_connections`` (kept per
    host; ``None``: no limit).

    Cost: ``prices`` maps model names to ``failover.Price`` (the model a
    request was sent with is looked up; a provider's own ``price=`` wins),
    or is ``"genai-prices"`` to look each attempt up in that database
    (``pip install 'failover[prices]'``). Each attempt then has a ``cost``,
    and results and errors a ``total_cost``.

    Limits: ``quotas`` maps the names providers give as ``quota=`` to a
    ``failover.Limit`` that bounds them together; a rate limit at one provider
    of a quota cools them all, with or without a ``Limit``. A provider's own
    ``limit=`` and a pool's ``limit=`` bound it alone; a provider without room
    is passed over for the next that has it.

    Telemetry: ``telemetry=failover.OpenTelemetry(...)`` makes each call a
    span (GenAI semantic conventions) with a child per attempt, and records
    metrics (``pip install 'failover[otel]'``).

    ``stats()`` is what its calls did and cost since it was made.

    A client holds a connection pool: ``close()`` it, or use it as a context
    manager (``with`` or ``async with``). It is safe to share between threads
    and tasks.
    """

    def __init__(
        self,
        providers: Mapping[str, Provider | Pool],
        *,
        retry: RetryPolicy = _DEFAULT_POLICY,
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
        deadline: float | None = None,
        sleeper: Sleeper | None = None,
        on_event: EventHook | None = None,
        proxy: str | None = None,
        verify: bool | str = True,
        http2: bool = True,
        max_idle_connections: int | None = None,
        state: RedisState | None = None,
        prices: Mapping[str, Price] | str | None = None,
        telemetry: OpenTelemetry | None = None,
        quotas: Mapping[str, Limit] | None = None,
        hedge: Hedge | None = None,
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
            _check_name(name)
            if isinstance(provider, Pool):
                if provider.name != name:
                    raise ConfigurationError(
                        f"Pool {provider.name!r} is configured under the name {name!r}: "
                        "a pool's name must be its key in providers"
                    )
            elif not isinstance(provider, Provider):
                raise ConfigurationError(
                    f"provider {name!r} must be a failover provider "
                    f"(OpenAI, Anthropic, ...) or a Pool, got {provider!r}"
                )
        if not isinstance(retry, RetryPolicy):
            raise ConfigurationError(f"retry must be a RetryPolicy, got {retry!r}")
        _options.check_sleeper(sleeper)
        _options.check_on_event(on_event)
        if not isinstance(http2, bool):
            raise ConfigurationError(f"http2 must be True or False, got {http2!r}")
        if state is not None and not isinstance(state, RedisState):
            raise ConfigurationError(
                f"state must be None (in-process) or a RedisState, got {state!r}"
            )
        if max_idle_connections is not None:
            max_idle_connections = count(
                "max_idle_connections", max_idle_connections, maximum=_MAX_IDLE_CONNECTIONS
            )
        self._given = dict(providers)
        # Pools are flattened: the engine sees their members, named as the pool names
        # them; each chain entry is a provider's index or a pool's members.
        self._providers: dict[str, Provider] = {}
        self._entries: dict[str, _Entry] = {}
        for name, provider in providers.items():
            members = provider.members if isinstance(provider, Pool) else {name: provider}
            indexes = []
            for member_name, member in members.items():
                if member_name in self._providers or (
                    member_name in providers and member_name != name
                ):
                    raise ConfigurationError(
                        f"provider name {member_name!r} is used twice (a pool member's "
                        "name must be unique among all providers)"
                    )
                indexes.append(len(self._providers))
                self._providers[member_name] = member
            strategy = provider.strategy if isinstance(provider, Pool) else None
            self._entries[name] = _Entry(indexes, strategy)
        self._names = list(self._providers)
        #: What attempts cost (None: nothing has a price).
        self._pricing = Pricing.of(self._providers, prices)
        self._index = {name: i for i, name in enumerate(self._names)}
        #: What every finished call did (shared with with_options() clients).
        self._tally = Tally(self._names)
        if telemetry is not None and not isinstance(telemetry, OpenTelemetry):
            raise ConfigurationError(
                f"telemetry must be a failover.OpenTelemetry(...) or None, got {telemetry!r}"
            )
        #: Spans and metrics (None: no telemetry, and no cost for it).
        self._telemetry = (
            None if telemetry is None else Telemetry(telemetry, self._providers, self._names)
        )
        self._tap = None if self._telemetry is None else self._telemetry.tap
        self._retry = retry
        if hedge is not None and not isinstance(hedge, Hedge):
            raise ConfigurationError(f"hedge must be a failover.Hedge(...) or None, got {hedge!r}")
        #: Hedged requests for chat calls and streams (None: none).
        self._hedge = hedge
        self._timeout = seconds("timeout", timeout, positive=True)
        self._connect_timeout = seconds("connect_timeout", connect_timeout, positive=True)
        self._deadline = None if deadline is None else seconds("deadline", deadline, positive=True)
        self._sleeper = sleeper
        self._proxy = _options.proxy_url(proxy)
        if self._proxy is None:
            _options.check_proxy_variables()
        transport = TransportSpec(
            connect_timeout=self._connect_timeout,
            proxy=self._proxy,
            verify=_options.verify(verify),
            http2=http2,
            max_idle_connections=max_idle_connections,
        )
        pools = {name: p for name, p in providers.items() if isinstance(p, Pool)}
        limits = ClientLimits(self._providers, pools, check_quotas(quotas))
        specs = [p._spec(name) for name, p in self._providers.items()]
        for spec in specs:
            spec.limits = limits.chat[spec.name]
            spec.embedding_limits = limits.embed[spec.name]
            spec.own_limit = limits.own_chat[spec.name]
            spec.own_embedding_limit = limits.own_embed[spec.name]
            spec.quota = limits.quota[spec.name]
        self._native = _native.NativeClient(
            providers=specs,
            transport=transport,
            emit=_emitter(on_event, self._tap),
            state=state._native if state is not None else None,
            limits=limits.buckets,
        )
        #: The on_event of a client made by with_options(); None: the native one's.
        self._emit: typing.Any = None
        #: Whether close() closes the pool (a with_options() client shares it).
        self._owns_pool = True
        #: A with_options() client closed on its own (the pool stays open).
        self._closed_here = False

    def __repr__(self) -> str:
        chain = ", ".join(f"{n!r}: {p!r}" for n, p in self._given.items())
        extra = ""
        if self._proxy is not None:
            extra += f", proxy={_display_url(self._proxy)!r}"
        if self.is_closed:
            extra += ", closed"
        return (
            f"Client(providers={{{chain}}}, retry={self._retry!r}, timeout={self._timeout}, "
            f"connect_timeout={self._connect_timeout}, deadline={self._deadline}{extra})"
        )

    @property
    def providers(self) -> dict[str, Provider | Pool]:
        return dict(self._given)

    def _chain(self, names: Iterable[str]) -> tuple[list[int], list[tuple[str, list[int]]] | None]:
        """The providers to try, in configured order, and the pools among them
        (strategy, members), which the native side orders and counts for each
        call (atomically, so threads share each pool's turns and a burst of
        calls spreads)."""
        chain: list[int] = []
        pools: list[tuple[str, list[int]]] | None = None
        for name in names:
            entry = self._entries[name]
            members = entry.indexes
            if entry.strategy is not None and len(members) > 1:
                pools = [*(pools or []), (entry.strategy, members)]
            chain.extend(members)
        return chain, pools

    @property
    def is_closed(self) -> bool:
        """Whether ``close()`` was called (on this client, or on the one whose
        pool it shares)."""
        return self._closed_here or bool(self._native.is_closed)

    def close(self) -> None:
        """Releases the connection pool. Calls in flight finish; a later call
        raises ``FailoverError``. Closing twice is harmless. A client made by
        ``with_options()`` shares its original's pool: closing it closes
        nothing shared."""
        if self._owns_pool:
            self._native.close()
        self._closed_here = True

    @classmethod
    def from_config(
        cls,
        config: str | os.PathLike[str] | Mapping[str, typing.Any],
        *,
        sleeper: Sleeper | None = None,
        on_event: EventHook | None = None,
    ) -> Client:
        """A client built from a ``failover.toml`` file (a path) or a dict of
        the same shape: ``[client]`` options, a ``[retry]`` policy (or
        ``preset``), ``[quotas.NAME]`` limits and ``[providers.NAME]`` tables
        in chain order, each with a ``type``. ``${VAR}`` in a string is read
        from the environment. Every value is checked as the Python API checks
        it; an unknown key is a ``ConfigurationError`` naming it and its line.
        ``sleeper=`` and ``on_event=``, which a file cannot hold, are given
        here."""
        from ._config import build

        overrides: dict[str, typing.Any] = {}
        if sleeper is not None:
            overrides["sleeper"] = sleeper
        if on_event is not None:
            overrides["on_event"] = on_event
        return build(cls, config, overrides)

    def with_options(
        self,
        *,
        timeout: float | None = None,
        deadline: float | _Unset | None = _UNSET,
        retry: RetryPolicy | None = None,
        sleeper: Sleeper | _Unset | None = _UNSET,
        on_event: EventHook | _Unset | None = _UNSET,
    ) -> Client:
        """A client with other defaults that shares this one's providers,
        connection pool, cooldowns and retry budget. ``deadline=None`` and
        ``sleeper=None``/``on_event=None`` mean none; leave an option out to
        keep this client's."""
        other = Client.__new__(Client)
        other.__dict__.update(self.__dict__)
        other._owns_pool = False
        other._closed_here = False
        if timeout is not None:
            other._timeout = seconds("timeout", timeout, positive=True)
        if not isinstance(deadline, _Unset):
            other._deadline = (
                None if deadline is None else seconds("deadline", deadline, positive=True)
            )
        if retry is not None:
            if not isinstance(retry, RetryPolicy):
                raise ConfigurationError(f"retry must be a RetryPolicy, got {retry!r}")
            other._retry = retry
        if not isinstance(sleeper, _Unset):
            _options.check_sleeper(sleeper)
            other._sleeper = sleeper
        if not isinstance(on_event, _Unset):
            _options.check_on_event(on_event)
            other._emit = _emitter(on_event, self._tap)
        return other

    def _observe(
        self, operation: str, args: CallArgs | EmbedArgs | MediaArgs, current: bool
    ) -> Observed | None:
        """The call's span, when the client has telemetry (``current``: made the
        current span while a whole call runs)."""
        if self._telemetry is None:
            return None
        return self._telemetry.begin(operation, args, current)

    def _answered(self, result: R, observed: Observed | None) -> R:
        """A call's answer: counted in ``stats()``, and its span ended."""
        self._tally.count(result.attempts, result.provider)
        if observed is not None:
            observed.answered(result)
        return result

    def _failed(
        self,
        error: BaseException,
        embeddings: bool,
        observed: Observed | None,
        journal: _native.Journal | None = None,
    ) -> None:
        """A failed call's error: priced, counted in ``stats()``, and its span
        ended (an interrupt or a cancellation ends the span only). A call cut
        short (cancelled, Ctrl-C, a ConfigurationError partway) is counted from
        its ``journal``: what it had sent, the attempt in flight with
        ``billed=None``."""
        cut: tuple[Attempt, ...] = ()
        if isinstance(error, FailoverError) and error.attempts:
            if self._pricing is not None:
                self._pricing.error(error, embeddings)
            self._tally.count(error.attempts, None)
        elif journal is not None:
            # A call refused before anything was sent is no call: nothing logged.
            cut = _attempts(journal.take())
            if cut:
                if self._pricing is not None:
                    cut = self._pricing.attempts(cut, embeddings)
                self._tally.count(cut, None)
        if observed is not None:
            observed.failed(error, cut)

    def stats(self) -> Stats:
        """What this client's calls did since it was made (and those of the
        clients ``with_options()`` made from it): a ``failover.Stats`` with
        ``providers`` by name and their ``total``. Counted once per finished
        call (an answer, a failed call, a stream at its end, break or
        close); cheap to call from any thread."""
        return self._tally.snapshot()

    def cooldowns(self) -> dict[str, float]:
        """The providers cooling down, with the seconds each has left: keys
        are provider names (``name/model`` for a call's own ``model=``,
        ``name:embeddings`` for embeddings, ``name:embeddings/model`` for an
        embeddings call's own ``model=``). Time is the sleeper's: a
        FakeSleeper's virtual clock in tests."""
        return dict(self._native.cooldowns(self._now()))

    def health(self) -> dict[str, ProviderHealth]:
        """Each provider's ``ProviderHealth``, by the keys of
        ``cooldowns()``: every provider (and pool member) under its name,
        healthy ones too, and its other keys (embeddings, a call's own
        ``model=``) once used. With ``RedisState``, cooldowns and their
        causes are the fleet's. Time is the sleeper's, as for
        ``cooldowns()``. A snapshot: cheap, from any thread."""
        return _health(self._native.health(self._now()))

    def _now(self) -> float | None:
        """Now on the sleeper's clock (a FakeSleeper's virtual time), or
        ``None`` for the system clock."""
        sleeper = self._sleeper if self._sleeper is not None else _sleep.active
        clock = getattr(sleeper, "_native_clock", None)
        return clock.time() if clock is not None else None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()

    def _common_args(
        self,
        args: CallArgs | EmbedArgs | MediaArgs,
        *,
        provider: str | Sequence[str] | None,
        model: str | None,
        timeout: float | None,
        deadline: float | None,
        retry: RetryPolicy | None,
        idempotency_key: str | None,
        is_async: bool,
    ) -> None:
        """What every call has, checked: the chain, the model, the policy,
        the sleeper, the times and the idempotency key."""
        if self._closed_here:
            raise FailoverError("this Client is closed: make a new one to call providers again")
        if provider is None:
            names = list(self._entries)
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
            self._check_named("provider=", names)
        chain_names = [self._names[i] for n in names for i in self._entries[n].indexes]
        if model is not None and len(chain_names) != 1:
            # Named in the configured order (the core orders pools per call).
            pool_names = [n for n in names if n not in self._index]
            if provider is not None and names == pool_names and len(pool_names) == 1:
                # A pool's members share one name: none can be named alone.
                why = (
                    f"pool {pool_names[0]!r} has {len(chain_names)}: {chain_names}; a pool of "
                    f"several members takes no model= (give it a one-member pool or a provider "
                    f"of its own for that model)"
                )
            else:
                why = (
                    f"this call's has {len(chain_names)}: {chain_names}; name a single "
                    f"provider with provider="
                )
            raise ConfigurationError(
                f"model= names one provider's model, so it needs a chain of one provider, and {why}"
            )
        chain, pools = self._chain(names)
        if model is not None:
            if not isinstance(model, str) or not model.strip():
                raise ConfigurationError(
                    f"model= must be a model name (a non-empty str), got {model!r}"
                )
            problem = self._providers[self._names[chain[0]]]._model_problem(model)
            if problem is not None:
                raise ConfigurationError(f"model=: {problem}")
        policy = retry if retry is not None else self._retry
        if not isinstance(policy, RetryPolicy):
            raise ConfigurationError(f"retry must be a RetryPolicy, got {policy!r}")
        sleeper = self._sleeper if self._sleeper is not None else _sleep.active
        native_clock = getattr(sleeper, "_native_clock", None)
        if native_clock is not None:
            sleeper = native_clock
        elif sleeper is not None and not is_async and is_async_callable(sleeper):
            raise ConfigurationError(
                "the sleeper is an async function, which a sync call cannot await: "
                "use a plain function, or call prompt_async()"
            )
        if timeout is not None:
            timeout = seconds("timeout", timeout, positive=True)
        if deadline is not None:
            deadline = seconds("deadline", deadline, positive=True)
        args.chain = chain
        args.policy = policy._native()
        args.timeout = self._timeout if timeout is None else timeout
        args.deadline = self._deadline if deadline is None else deadline
        args.sleeper = sleeper
        args.model = model
        args.idempotency_key = _options.idempotency_key(idempotency_key)
        args.emit = self._emit
        args.pools = pools
        args.journal = _native.Journal()

    def _call_args(
        self,
        prompt: Prompt,
        *,
        provider: str | Sequence[str] | None,
        model: str | None,
        system: str | None,
        max_tokens: int | None,
        temperature: float | None,
        timeout: float | None,
        deadline: float | None,
        retry: RetryPolicy | None,
        tools: Sequence[Tool | Mapping[str, typing.Any]] | None,
        tool_choice: str | Mapping[str, typing.Any] | None,
        response_format: Mapping[str, typing.Any] | None,
        stop: str | Sequence[str] | None,
        top_p: float | None,
        seed: int | None,
        headers: Mapping[str, str] | None,
        idempotency_key: str | None,
        hedge: Hedge | bool | None,
        is_async: bool,
    ) -> CallArgs:
        """The one place the four chat methods (``prompt``, ``stream`` and
        their async twins) hand their options to, by keyword: each checked,
        as the engine reads it."""
        if max_tokens is not None:
            max_tokens = count("max_tokens", max_tokens, minimum=1, maximum=2**31 - 1)
        if temperature is not None:
            # 0 to 2: the widest range a provider takes (OpenAI, Gemini); above it
            # every one refuses, and its 400 would stop the chain.
            temperature = number("temperature", temperature, low=0.0, high=2.0)
        args = CallArgs()
        self._common_args(
            args,
            provider=provider,
            model=model,
            timeout=timeout,
            deadline=deadline,
            retry=retry,
            idempotency_key=idempotency_key,
            is_async=is_async,
        )
        chain = args.chain
        args.messages = _options.prompt_messages(prompt)
        args.system = system
        args.max_tokens = max_tokens
        args.temperature = temperature
        args.tools = _options.tools(tools)
        tool_choice = _options.tool_choice(tool_choice)
        if tool_choice is not None and args.tools is None and tool_choice != "none":
            raise ConfigurationError("tool_choice= needs tools= to choose from")
        args.tool_choice = tool_choice
        _options.request_options(args, response_format, stop, top_p, seed, headers)
        self._check_credential_headers(args.headers, chain)
        if hedge is True:
            hedge = self._hedge
        elif hedge is False:
            hedge = None
        elif hedge is not None and not isinstance(hedge, Hedge):
            raise ConfigurationError(
                f"hedge= takes a failover.Hedge(...), True (the client's, the default) or "
                f"False/None (no hedging), got {hedge!r}"
            )
        args.hedge = None if hedge is None else hedge._native_hedge
        return args

    def _check_credential_headers(
        self, headers: list[tuple[str, str]] | None, chain: list[int]
    ) -> None:
        """A call's credential header goes to no provider over plain http."""
        if headers and any(_native.is_credential_header(n) for n, _ in headers):
            for i in chain:
                self._providers[self._names[i]]._check_secure(self._names[i])

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
        tools: Sequence[Tool | Mapping[str, typing.Any]] | None = None,
        tool_choice: str | Mapping[str, typing.Any] | None = None,
        response_format: Mapping[str, typing.Any] | None = None,
        stop: str | Sequence[str] | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        headers: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
        hedge: Hedge | bool | None = True,
    ) -> Response:
        """Sends a prompt (a string or a list of message dicts) and returns the answer.

        Raises the last provider's error when every provider failed, or at once
        an error that no other provider could fix (a bad request, or a kind the
        policy's ``stop_on`` names).
        """
        args = self._call_args(
            prompt,
            provider=provider,
            model=model,
            system=system,
            max_tokens=max_tokens,
            temperature=temperature,
            timeout=timeout,
            deadline=deadline,
            retry=retry,
            tools=tools,
            tool_choice=tool_choice,
            response_format=response_format,
            stop=stop,
            top_p=top_p,
            seed=seed,
            headers=headers,
            idempotency_key=idempotency_key,
            hedge=hedge,
            is_async=False,
        )
        observed = self._observe("chat", args, True)
        try:
            data = self._native.prompt(args)
        except BaseException as error:
            self._failed(error, False, observed, args.journal)
            raise
        return self._answered(Response(data, self._pricing), observed)

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
        tools: Sequence[Tool | Mapping[str, typing.Any]] | None = None,
        tool_choice: str | Mapping[str, typing.Any] | None = None,
        response_format: Mapping[str, typing.Any] | None = None,
        stop: str | Sequence[str] | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        headers: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
        hedge: Hedge | bool | None = True,
    ) -> Response:
        """``prompt()`` for asyncio: the same engine; cancelling the task
        cancels the request."""
        args = self._call_args(
            prompt,
            provider=provider,
            model=model,
            system=system,
            max_tokens=max_tokens,
            temperature=temperature,
            timeout=timeout,
            deadline=deadline,
            retry=retry,
            tools=tools,
            tool_choice=tool_choice,
            response_format=response_format,
            stop=stop,
            top_p=top_p,
            seed=seed,
            headers=headers,
            idempotency_key=idempotency_key,
            hedge=hedge,
            is_async=True,
        )
        _quiesce_at_exit()
        observed = self._observe("chat", args, True)
        try:
            data = await self._native.prompt_async(args)
        except BaseException as error:
            self._failed(error, False, observed, args.journal)
            raise
        return self._answered(Response(data, self._pricing), observed)

    def stream(
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
        tools: Sequence[Tool | Mapping[str, typing.Any]] | None = None,
        tool_choice: str | Mapping[str, typing.Any] | None = None,
        response_format: Mapping[str, typing.Any] | None = None,
        stop: str | Sequence[str] | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        headers: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
        hedge: Hedge | bool | None = True,
        on_interrupt: str = "raise",
    ) -> Stream:
        """Streams the answer: iterate the ``Stream`` for ``Chunk``s, then read
        ``stream.response``. Takes what ``prompt()`` takes.

        Until the first content chunk, failures are retried and failed over
        as for ``prompt()`` (``deadline`` bounds that start); ``timeout``
        bounds the wait for each event. After it, a failure raises
        ``StreamInterrupted`` with the text so far, or, with
        ``on_interrupt="restart"``, starts again (same provider or the next,
        same rules) and first yields a ``"restart"`` chunk whose
        ``discarded`` is the text to throw away.
        """
        args = self._call_args(
            prompt,
            provider=provider,
            model=model,
            system=system,
            max_tokens=max_tokens,
            temperature=temperature,
            timeout=timeout,
            deadline=deadline,
            retry=retry,
            tools=tools,
            tool_choice=tool_choice,
            response_format=response_format,
            stop=stop,
            top_p=top_p,
            seed=seed,
            headers=headers,
            idempotency_key=idempotency_key,
            hedge=hedge,
            is_async=False,
        )
        observed = self._observe("chat", args, False)
        try:
            native = self._native.stream(args, _options.restart(on_interrupt))
        except BaseException as error:
            self._failed(error, False, observed)
            raise
        return Stream(native, self._pricing, self._tally, observed)

    def stream_async(
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
        tools: Sequence[Tool | Mapping[str, typing.Any]] | None = None,
        tool_choice: str | Mapping[str, typing.Any] | None = None,
        response_format: Mapping[str, typing.Any] | None = None,
        stop: str | Sequence[str] | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        headers: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
        hedge: Hedge | bool | None = True,
        on_interrupt: str = "raise",
    ) -> AsyncStream:
        """``stream()`` for asyncio: ``async for chunk in client.stream_async(...)``.
        Call it on the event loop that iterates it; cancelling the task closes
        the connection."""
        args = self._call_args(
            prompt,
            provider=provider,
            model=model,
            system=system,
            max_tokens=max_tokens,
            temperature=temperature,
            timeout=timeout,
            deadline=deadline,
            retry=retry,
            tools=tools,
            tool_choice=tool_choice,
            response_format=response_format,
            stop=stop,
            top_p=top_p,
            seed=seed,
            headers=headers,
            idempotency_key=idempotency_key,
            hedge=hedge,
            is_async=True,
        )
        restart = _options.restart(on_interrupt)
        _quiesce_at_exit()
        observed = self._observe("chat", args, False)
        try:
            try:
                native = self._native.stream_async(args, restart)
            except RuntimeError as exc:
                if "event loop" not in str(exc):
                    raise
                raise FailoverError(
                    "stream_async() is called on the running event loop that will iterate it "
                    "(inside async code); in sync code, use stream()"
                ) from None
        except BaseException as error:
            self._failed(error, False, observed)
            raise
        return AsyncStream(native, self._pricing, self._tally, observed)

    def _embed_args(
        self,
        texts: str | Sequence[str],
        *,
        provider: str | Sequence[str] | None,
        model: str | None,
        dimensions: int | None,
        timeout: float | None,
        deadline: float | None,
        retry: RetryPolicy | None,
        headers: Mapping[str, str] | None,
        idempotency_key: str | None,
        is_async: bool,
    ) -> EmbedArgs:
        """Where ``embed`` and ``embed_async`` hand their options, by keyword."""
        texts = _options.embed_texts(texts)
        if dimensions is not None:
            dimensions = count("dimensions", dimensions, minimum=1, maximum=2**31 - 1)
        args = EmbedArgs()
        self._common_args(
            args,
            provider=provider,
            model=model,
            timeout=timeout,
            deadline=deadline,
            retry=retry,
            idempotency_key=idempotency_key,
            is_async=is_async,
        )
        args.texts = texts
        args.dimensions = dimensions
        args.headers = list(_checked_headers("headers=", headers).items()) or None
        self._check_credential_headers(args.headers, args.chain)
        return args

    def embed(
        self,
        texts: str | Sequence[str],
        *,
        provider: str | Sequence[str] | None = None,
        model: str | None = None,
        dimensions: int | None = None,
        timeout: float | None = None,
        deadline: float | None = None,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
    ) -> Embeddings:
        """Embeds a text or a list of texts: one vector per text, in order.

        The same retry and failover as ``prompt()``. Providers that cannot
        embed (Anthropic, and presets without an embeddings API) are skipped,
        with the reason in ``.attempts``; a chain where none can is a
        ``ConfigurationError``. Failing over between models of different
        dimensions is the caller's choice: ``Embeddings.model`` says which
        answered.
        """
        args = self._embed_args(
            texts,
            provider=provider,
            model=model,
            dimensions=dimensions,
            timeout=timeout,
            deadline=deadline,
            retry=retry,
            headers=headers,
            idempotency_key=idempotency_key,
            is_async=False,
        )
        observed = (
            None if self._telemetry is None else self._telemetry.start("embeddings", args, True)
        )
        try:
            data = self._native.embed(args)
        except BaseException as error:
            self._failed(error, True, observed, args.journal)
            raise
        return self._answered(Embeddings(data, self._pricing), observed)

    async def embed_async(
        self,
        texts: str | Sequence[str],
        *,
        provider: str | Sequence[str] | None = None,
        model: str | None = None,
        dimensions: int | None = None,
        timeout: float | None = None,
        deadline: float | None = None,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
    ) -> Embeddings:
        """``embed()`` for asyncio: the same engine; cancelling the task
        cancels the request."""
        args = self._embed_args(
            texts,
            provider=provider,
            model=model,
            dimensions=dimensions,
            timeout=timeout,
            deadline=deadline,
            retry=retry,
            headers=headers,
            idempotency_key=idempotency_key,
            is_async=True,
        )
        _quiesce_at_exit()
        observed = (
            None if self._telemetry is None else self._telemetry.start("embeddings", args, True)
        )
        try:
            data = await self._native.embed_async(args)
        except BaseException as error:
            self._failed(error, True, observed, args.journal)
            raise
        return self._answered(Embeddings(data, self._pricing), observed)

    def _media_args(
        self,
        args: MediaArgs,
        *,
        provider: str | Sequence[str] | None,
        model: str | None,
        timeout: float | None,
        deadline: float | None,
        retry: RetryPolicy | None,
        headers: Mapping[str, str] | None,
        idempotency_key: str | None,
        is_async: bool,
    ) -> MediaArgs:
        """Where the image, speech and transcription calls hand their
        options, by keyword (their own are in ``args``, checked)."""
        self._common_args(
            args,
            provider=provider,
            model=model,
            timeout=timeout,
            deadline=deadline,
            retry=retry,
            idempotency_key=idempotency_key,
            is_async=is_async,
        )
        args.headers = list(_checked_headers("headers=", headers).items()) or None
        self._check_credential_headers(args.headers, args.chain)
        if isinstance(args.voice, dict):
            args.voice = self._voices(args.voice)
        return args

    def _check_named(self, option: str, names: Iterable[str]) -> None:
        """Every name is a configured provider's or pool's (a pool member's is
        refused: members are not named alone)."""
        unknown = [name for name in names if name not in self._entries]
        if unknown:
            members = [name for name in unknown if name in self._index]
            if members:
                raise ConfigurationError(f"{option} names pools, not their members: {members}")
            raise ConfigurationError(
                f"{option} names unknown provider(s) {unknown}; configured: {list(self._entries)}"
            )

    def _voices(self, voices: dict[str, str]) -> list[tuple[str, str]]:
        """``voice=`` by provider name, as each chain member is named: a pool's voice is
        each of its members'. A name the client lacks is refused (a typo would skip)."""
        self._check_named("voice=", voices)
        return [
            (self._names[i], voice)
            for name, voice in voices.items()
            for i in self._entries[name].indexes
        ]

    def _media(self, args: MediaArgs, result: type[M]) -> M:
        """One image, speech or transcription call, made: its span, its
        answer counted, its error priced and counted."""
        observed = (
            None if self._telemetry is None else self._telemetry.start(_MEDIA_OPERATION, args, True)
        )
        try:
            data = self._native.media(args)
        except BaseException as error:
            self._failed(error, False, observed, args.journal)
            raise
        return self._answered(result(data, self._pricing), observed)

    async def _media_async(self, args: MediaArgs, result: type[M]) -> M:
        """``_media`` for asyncio."""
        _quiesce_at_exit()
        observed = (
            None if self._telemetry is None else self._telemetry.start(_MEDIA_OPERATION, args, True)
        )
        try:
            data = await self._native.media_async(args)
        except BaseException as error:
            self._failed(error, False, observed, args.journal)
            raise
        return self._answered(result(data, self._pricing), observed)

    def generate_image(
        self,
        prompt: str,
        *,
        size: str | None = None,
        n: int = 1,
        quality: str | None = None,
        response_format: str = "b64",
        provider: str | Sequence[str] | None = None,
        model: str | None = None,
        timeout: float | None = None,
        deadline: float | None = None,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
    ) -> ImageResponse:
        """Generates ``n`` images from ``prompt``: an ``ImageResponse`` whose
        ``.data`` is the first image's bytes.

        The same retry, failover, deadline, limits and events as ``prompt()``.
        ``size`` is ``"WIDTHxHEIGHT"`` or ``"auto"`` as the model names them;
        ``quality`` the model's word (``"low"``, ``"high"``, ``"hd"``...);
        ``response_format="url"`` gives each image's URL instead of its
        bytes (the URLs a provider returns otherwise are fetched, without the
        key). Providers without an image API (or without an
        ``image_model``) are skipped, with the reason in ``.attempts``; what
        a model documents it cannot take (``n=2`` on dall-e-3, a prompt too
        long) skips it too; a chain where none can is a ``ConfigurationError``.
        """
        args = self._media_args(
            _media.image_args(prompt, size, n, quality, response_format),
            provider=provider,
            model=model,
            timeout=timeout,
            deadline=deadline,
            retry=retry,
            headers=headers,
            idempotency_key=idempotency_key,
            is_async=False,
        )
        return self._media(args, ImageResponse)

    async def generate_image_async(
        self,
        prompt: str,
        *,
        size: str | None = None,
        n: int = 1,
        quality: str | None = None,
        response_format: str = "b64",
        provider: str | Sequence[str] | None = None,
        model: str | None = None,
        timeout: float | None = None,
        deadline: float | None = None,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
    ) -> ImageResponse:
        """``generate_image()`` for asyncio: the same engine; cancelling the task
        cancels the request."""
        args = self._media_args(
            _media.image_args(prompt, size, n, quality, response_format),
            provider=provider,
            model=model,
            timeout=timeout,
            deadline=deadline,
            retry=retry,
            headers=headers,
            idempotency_key=idempotency_key,
            is_async=True,
        )
        return await self._media_async(args, ImageResponse)

    def speak(
        self,
        text: str,
        *,
        voice: str | Mapping[str, str],
        format: str = "mp3",
        speed: float | None = None,
        instructions: str | None = None,
        provider: str | Sequence[str] | None = None,
        model: str | None = None,
        timeout: float | None = None,
        deadline: float | None = None,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
    ) -> SpeechResponse:
        """Speaks ``text`` in ``voice``: a ``SpeechResponse`` with the whole
        audio (``format``: ``"mp3"``, ``"opus"``, ``"aac"``, ``"flac"``,
        ``"wav"`` or ``"pcm"``) and its media type.

        The same retry, failover, deadline, limits and events as ``prompt()``.
        ``speed`` is from 0.25 to 4.0; ``instructions`` steers the voice where
        the model takes them (gpt-4o-mini-tts). Voices are each provider's
        own names: to fail over between providers with different voices,
        name each one's, ``voice={"openai": "alloy", "gemini": "Kore"}`` (a
        provider the mapping leaves out is skipped).
        """
        args = self._media_args(
            _media.speech_args(text, voice, format, speed, instructions),
            provider=provider,
            model=model,
            timeout=timeout,
            deadline=deadline,
            retry=retry,
            headers=headers,
            idempotency_key=idempotency_key,
            is_async=False,
        )
        return self._media(args, SpeechResponse)

    async def speak_async(
        self,
        text: str,
        *,
        voice: str | Mapping[str, str],
        format: str = "mp3",
        speed: float | None = None,
        instructions: str | None = None,
        provider: str | Sequence[str] | None = None,
        model: str | None = None,
        timeout: float | None = None,
        deadline: float | None = None,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
    ) -> SpeechResponse:
        """``speak()`` for asyncio: the same engine; cancelling the task
        cancels the request."""
        args = self._media_args(
            _media.speech_args(text, voice, format, speed, instructions),
            provider=provider,
            model=model,
            timeout=timeout,
            deadline=deadline,
            retry=retry,
            headers=headers,
            idempotency_key=idempotency_key,
            is_async=True,
        )
        return await self._media_async(args, SpeechResponse)

    def speak_stream(
        self,
        text: str,
        *,
        voice: str | Mapping[str, str],
        format: str = "mp3",
        speed: float | None = None,
        instructions: str | None = None,
        provider: str | Sequence[str] | None = None,
        model: str | None = None,
        timeout: float | None = None,
        deadline: float | None = None,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
    ) -> SpeechStream:
        """``speak()``, its audio's bytes yielded as they arrive: a
        ``SpeechStream`` (iterate it; also a context manager). Before the first
        bytes the same retry and failover as ``speak()``; after them nothing is
        replayed (a cut raises ``StreamInterrupted``). As for ``stream()``, the
        deadline bounds its start, until the first bytes; then ``timeout``
        bounds each wait for more."""
        args = self._media_args(
            _media.speech_args(text, voice, format, speed, instructions),
            provider=provider,
            model=model,
            timeout=timeout,
            deadline=deadline,
            retry=retry,
            headers=headers,
            idempotency_key=idempotency_key,
            is_async=False,
        )
        observed = self._observe(_MEDIA_OPERATION, args, False)
        try:
            native = self._native.speak_stream(args)
        except BaseException as error:
            self._failed(error, False, observed)
            raise
        return SpeechStream(native, self._pricing, self._tally, observed)

    def speak_stream_async(
        self,
        text: str,
        *,
        voice: str | Mapping[str, str],
        format: str = "mp3",
        speed: float | None = None,
        instructions: str | None = None,
        provider: str | Sequence[str] | None = None,
        model: str | None = None,
        timeout: float | None = None,
        deadline: float | None = None,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
    ) -> AsyncSpeechStream:
        """``speak_stream()`` for asyncio: ``async for`` it (call it on the
        event loop that reads it)."""
        args = self._media_args(
            _media.speech_args(text, voice, format, speed, instructions),
            provider=provider,
            model=model,
            timeout=timeout,
            deadline=deadline,
            retry=retry,
            headers=headers,
            idempotency_key=idempotency_key,
            is_async=True,
        )
        _quiesce_at_exit()
        observed = self._observe(_MEDIA_OPERATION, args, False)
        try:
            try:
                native = self._native.speak_stream_async(args)
            except RuntimeError as exc:
                if "event loop" not in str(exc):
                    raise
                raise FailoverError(
                    "speak_stream_async() is called on the running event loop that will "
                    "iterate it (inside async code); in sync code, use speak_stream()"
                ) from None
        except BaseException as error:
            self._failed(error, False, observed)
            raise
        return AsyncSpeechStream(native, self._pricing, self._tally, observed)

    def transcribe(
        self,
        audio: bytes | str | os.PathLike[str] | typing.BinaryIO,
        *,
        filename: str | None = None,
        language: str | None = None,
        prompt: str | None = None,
        response_format: str = "json",
        provider: str | Sequence[str] | None = None,
        model: str | None = None,
        timeout: float | None = None,
        deadline: float | None = None,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
    ) -> Transcription:
        """Transcribes ``audio`` (bytes, a path, or a binary file object): a
        ``Transcription`` with its ``text``.

        The recording is read once and resent from memory on a retry, as
        ``multipart/form-data``; its format is told by ``filename`` (taken
        from the path or file object, else from the bytes; pass it when
        neither tells). ``language`` (ISO-639-1, e.g. ``"en"``) and
        ``prompt`` guide the model; ``response_format`` is ``"json"``,
        ``"text"``, ``"verbose_json"`` (with ``language``, ``duration`` and
        ``segments``), ``"srt"`` or ``"vtt"``. A recording over 25 MB skips
        OpenAI, Azure and Groq. The same retry, failover, deadline, limits
        and events as ``prompt()``.
        """
        args = self._media_args(
            _media.transcription_args(audio, filename, language, prompt, response_format),
            provider=provider,
            model=model,
            timeout=timeout,
            deadline=deadline,
            retry=retry,
            headers=headers,
            idempotency_key=idempotency_key,
            is_async=False,
        )
        return self._media(args, Transcription)

    async def transcribe_async(
        self,
        audio: bytes | str | os.PathLike[str] | typing.BinaryIO,
        *,
        filename: str | None = None,
        language: str | None = None,
        prompt: str | None = None,
        response_format: str = "json",
        provider: str | Sequence[str] | None = None,
        model: str | None = None,
        timeout: float | None = None,
        deadline: float | None = None,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
    ) -> Transcription:
        """``transcribe()`` for asyncio: the same engine; cancelling the task
        cancels the request."""
        args = self._media_args(
            _media.transcription_args(audio, filename, language, prompt, response_format),
            provider=provider,
            model=model,
            timeout=timeout,
            deadline=deadline,
            retry=retry,
            headers=headers,
            idempotency_key=idempotency_key,
            is_async=True,
        )
        return await self._media_async(args, Transcription)
