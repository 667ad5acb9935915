"""``failover.toml``: a client described in a file (or a dict of the same
shape), built by ``Client.from_config``.

Each table is passed to the class it describes, so every value gets the very
checks and messages the Python API gives; this module adds what a file needs
on top: unknown keys refused by name (with the line they are on),
``${VAR}`` read from the environment, and each message prefixed with where
the value is.

```toml
[client]                 # Client(...) options (not sleeper= or on_event=)
deadline = 30
prices = "genai-prices"  # or [client.prices."gpt-4.1-mini"] input = ..., output = ...
state = "redis://localhost:6379/0"   # or a table: url, prefix, timeout
telemetry = true         # or a table: capture_content = true

[retry]                  # RetryPolicy(...), or preset = "openai" | "laravel" | "ruby_llm"
max_retries = 1
backoff = { initial = 0.5 }
budget = false           # no retry budget

[quotas.org]             # Client(quotas={"org": Limit(...)})
rpm = 500

[providers.claude]       # in chain order; type names the provider class
type = "anthropic"
model = "claude-haiku-4-5"
api_key = "${ANTHROPIC_API_KEY}"
limit = { concurrency = 8 }

[providers.gpt]          # a pool: its members are providers too
type = "pool"
strategy = "least_busy"
members = [ { type = "openai", model = "gpt-4.1-mini" },
            { type = "azure", deployment = "gpt", endpoint = "https://x.openai.azure.com" } ]
```
"""

from __future__ import annotations

import difflib
import inspect
import os
import re
import sys
import typing
from collections.abc import Callable, Mapping
from typing import Any

from ._exceptions import ConfigurationError

if typing.TYPE_CHECKING:
    from ._client import Client

    ClientClass = type[Client]

#: The provider classes a ``type`` names.
PROVIDER_TYPES = (
    "openai",
    "anthropic",
    "gemini",
    "ollama",
    "azure",
    "openai_compatible",
    "groq",
    "mistral",
    "deepseek",
    "xai",
    "openrouter",
)
_TOP_KEYS = ("client", "retry", "quotas", "providers")
#: Client options a file cannot give (Python objects), or gives elsewhere.
_CLIENT_ELSEWHERE = {
    "providers": "[providers.NAME] tables",
    "retry": "a [retry] table",
    "quotas": "[quotas.NAME] tables",
    "sleeper": "Client.from_config(..., sleeper=)",
    "on_event": "Client.from_config(..., on_event=)",
}
#: What a refusal says of a key without naming it, and the key.
_SAID = {"plain http": "base_url"}
_ENV = re.compile(r"\$\$|\$\{([^}]*)\}|\$\{")


class _Frame:
    """An array or inline table still open while a file is read."""

    __slots__ = ("array", "index", "path", "pending")

    def __init__(self, path: tuple[str, ...], array: bool) -> None:
        self.path = path
        self.array = array
        self.index = 0
        self.pending = array  # an array's next element is yet to start

    def inner(self) -> tuple[str, ...]:
        """The path of what is written here: an array's current element."""
        return (*self.path, str(self.index)) if self.array else self.path


class _Source:
    """Where each key of a TOML file is, to say it in messages: the line of
    every table, key, array element and inline-table key, by its path (array
    elements and ``[[tables]]`` by their index)."""

    def __init__(self, name: str | None, text: str | None) -> None:
        self.name = name
        self.lines: dict[tuple[str, ...], int] = {}
        if text is not None:
            self._index(text)

    def _index(self, text: str) -> None:
        table: tuple[str, ...] = ()
        counts: dict[tuple[str, ...], int] = {}
        stack: list[_Frame] = []
        for number, line in enumerate(text.splitlines(), start=1):
            stripped = line.strip()
            if not stack and stripped.startswith("["):
                inner = stripped.strip("[").split("]", 1)[0]
                path = _dotted(inner)
                if stripped.startswith("[["):
                    index = counts.get(path, 0)
                    counts[path] = index + 1
                    self.lines.setdefault(path, number)
                    path = (*path, str(index))
                table = path
                self.lines.setdefault(table, number)
                continue
            self._scan(line, number, table, stack)

    def _scan(self, line: str, number: int, table: tuple[str, ...], stack: list[_Frame]) -> None:
        """Notes the keys and array elements of one line, inside whatever
        arrays and inline tables earlier lines left open."""
        expect_key = not stack
        value_path = table
        i = 0
        while i < len(line):
            c = line[i]
            if c.isspace():
                i += 1
                continue
            if c == "#":
                return
            top = stack[-1] if stack else None
            if top is not None and top.array and top.pending and c != "]":
                self.lines.setdefault(top.inner(), number)
                top.pending = False
            if expect_key:
                equals = line.find("=", i)
                if equals == -1:
                    return
                where = top.inner() if top is not None else table
                value_path = (*where, *_dotted(line[i:equals]))
                self.lines.setdefault(value_path, number)
                i, expect_key = equals + 1, False
                continue
            if c in "\"'":
                end = i + 1
                while end < len(line) and line[end] != c:
                    end += 2 if c == '"' and line[end] == "\\" else 1
                i = end + 1
                continue
            if c in "[{":
                path = top.inner() if top is not None and top.array else value_path
                stack.append(_Frame(path, array=c == "["))
                expect_key = c == "{"
            elif c in "]}":
                if stack:
                    stack.pop()
            elif c == "," and top is not None:
                if top.array:
                    top.index += 1
                    top.pending = True
                else:
                    expect_key = True
            i += 1

    def where(self, path: tuple[str, ...]) -> str:
        """``failover.toml, line 7, providers.claude.modle``, or, for a
        dict, the key path alone."""
        dotted = ".".join(path) or "the config"
        if self.name is None:
            return dotted
        for end in range(len(path), 0, -1):
            line = self.lines.get(path[:end])
            if line is None:
                # A table written only through deeper headers ([a.b] for a).
                inside = [n for p, n in self.lines.items() if p[:end] == path[:end]]
                line = min(inside, default=None)
            if line is not None:
                return f"{self.name}, line {line}, {dotted}"
        return f"{self.name}, {dotted}"


def _dotted(key: str) -> tuple[str, ...]:
    """A TOML key (``a."b.c".d``) as its parts."""
    parts = re.findall(r'"((?:[^"\\]|\\.)*)"|\'([^\']*)\'|([^.\s"\']+)', key)
    return tuple(next((p for p in groups if p), "") for groups in parts)


def load(source: object) -> tuple[dict[str, Any], _Source]:
    """The config's tables, and where each key is."""
    if isinstance(source, Mapping):
        return dict(source), _Source(None, None)
    if not isinstance(source, (str, os.PathLike)):
        raise ConfigurationError(
            f"from_config takes a path to a TOML file or a dict, got {type(source).__name__}"
        )
    path = os.fspath(source)
    if not isinstance(path, str):
        path = os.fsdecode(path)
    try:
        with open(path, "rb") as file:
            raw = file.read()
    except OSError as error:
        raise ConfigurationError(f"config file {path!r} cannot be read: {error}") from None
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise ConfigurationError(f"config file {path!r} is not UTF-8 text") from None
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        tables = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigurationError(f"config file {path!r} is not valid TOML: {error}") from None
    return tables, _Source(path, text)


def _expand(value: Any, path: tuple[str, ...], source: _Source) -> Any:
    """``value`` with each ``${VAR}`` in its strings read from the
    environment (``$$`` is a ``$``)."""
    if isinstance(value, str):

        def variable(match: re.Match[str]) -> str:
            if match.group(0) == "$$":
                return "$"
            name = match.group(1)
            if name is None:
                raise ConfigurationError(
                    f"{source.where(path)}: a ${{ without its closing }} (write $$ for a plain $)"
                )
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ConfigurationError(
                    f"{source.where(path)}: ${{{name}}} is not a variable name"
                )
            found = os.environ.get(name)
            if found is None:
                raise ConfigurationError(
                    f"{source.where(path)}: the environment variable {name} is not set"
                )
            return found

        return _ENV.sub(variable, value)
    if isinstance(value, Mapping):
        return {k: _expand(v, (*path, str(k)), source) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, (*path, str(i)), source) for i, v in enumerate(value)]
    return value


def _table(value: object, path: tuple[str, ...], source: _Source) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        # A list is not shown: it may hold a table's keys (`[[providers]]`).
        shown = "" if isinstance(value, list) else f" {value!r}"
        raise ConfigurationError(
            f"{source.where(path)}: must be a table, got {type(value).__name__}{shown}"
        )
    for key in value:
        if not isinstance(key, str):
            raise ConfigurationError(f"{source.where(path)}: key {key!r} is not a string")
    return dict(value)


def _unknown(
    table: Mapping[str, Any],
    allowed: typing.Iterable[str],
    path: tuple[str, ...],
    source: _Source,
    elsewhere: Mapping[str, str] | None = None,
) -> None:
    allowed = list(allowed)
    for key in table:
        if key in allowed:
            continue
        where = source.where((*path, key))
        if elsewhere and key in elsewhere:
            raise ConfigurationError(f"{where}: {key} is given as {elsewhere[key]}")
        close = difflib.get_close_matches(key, allowed, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        known = ", ".join(allowed)
        raise ConfigurationError(f"{where}: unknown key {key!r}{hint}; known keys: {known}")


def _options(cls: Callable[..., Any]) -> list[str]:
    """The keyword options a class takes (its signature, as documented)."""
    signature = inspect.signature(cls)
    return [
        name
        for name, p in signature.parameters.items()
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


def _make(
    cls: Callable[..., Any], options: dict[str, Any], path: tuple[str, ...], source: _Source
) -> Any:
    """``cls(**options)``, its refusal said with where the value it names
    is (else where the table is), without the table's key in it."""
    try:
        return cls(**options)
    except (ConfigurationError, TypeError) as error:
        # (A key pasted into another value and echoed there is redacted by
        # build(), from every error.)
        message = str(error)
        named = _named_key(message, options)
        where = path if named is None else (*path, named)
        raise ConfigurationError(f"{source.where(where)}: {message}") from None


def _named_key(message: str, keys: typing.Iterable[str]) -> str | None:
    """The key a refusal is about: the one it names first (``OpenAI
    speech_model must be a model name`` is about ``speech_model``, not
    ``model``), else one it says without naming."""
    found = []
    for key in keys:
        match = re.search(rf"(?<![\w-]){re.escape(key)}(?![\w-])", message)
        if match is not None:
            found.append((match.start(), -len(key), key))
    if found:
        return min(found)[2]
    return next((k for phrase, k in _SAID.items() if phrase in message and k in keys), None)


def _limit(value: object, path: tuple[str, ...], source: _Source) -> Any:
    from ._limits import Limit

    table = _table(value, path, source)
    _unknown(table, _options(Limit), path, source)
    return _make(Limit, table, path, source)


def _price(value: object, path: tuple[str, ...], source: _Source) -> Any:
    from ._cost import Price

    table = _table(value, path, source)
    _unknown(table, _options(Price), path, source)
    return _make(Price, table, path, source)


def _provider(value: object, path: tuple[str, ...], source: _Source, *, pooled: bool) -> Any:
    from . import _providers

    table = _table(value, path, source)
    kind = table.pop("type", None)
    types = PROVIDER_TYPES if pooled else (*PROVIDER_TYPES, "pool")
    if kind not in types:
        said_kind = str(kind).lower().replace("-", "_")
        close = difflib.get_close_matches(said_kind, types, n=1) if kind else []
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        said = "no type" if kind is None else f"type {kind!r}"
        raise ConfigurationError(
            f"{source.where((*path, 'type'))}: {said}{hint}; type is one of {', '.join(types)}"
        )
    if kind == "pool":
        return _pool(table, path, source)
    cls = {
        "openai": _providers.OpenAI,
        "anthropic": _providers.Anthropic,
        "gemini": _providers.Gemini,
        "ollama": _providers.Ollama,
        "azure": _providers.Azure,
        "openai_compatible": _providers.OpenAICompatible,
        "groq": _providers.Groq,
        "mistral": _providers.Mistral,
        "deepseek": _providers.DeepSeek,
        "xai": _providers.XAI,
        "openrouter": _providers.OpenRouter,
    }[kind]
    _unknown(table, [*_options(cls), "type"], path, source)
    if kind == "azure" and table.get("api_version") is False:
        # TOML has no null: false asks for Azure's v1 API (api_version=None).
        table["api_version"] = None
    for key in ("limit", "embedding_limit"):
        if key in table:
            table[key] = _limit(table[key], (*path, key), source)
    for key in ("price", "embedding_price"):
        if key in table:
            table[key] = _price(table[key], (*path, key), source)
    return _make(cls, table, path, source)


def _pool(table: dict[str, Any], path: tuple[str, ...], source: _Source) -> Any:
    from ._providers import Pool

    _unknown(table, [o for o in _options(Pool) if o != "name"] + ["type"], path, source)
    members = table.get("members")
    if isinstance(members, list):
        table["members"] = [
            _provider(m, (*path, "members", str(i)), source, pooled=True)
            for i, m in enumerate(members)
        ]
    elif isinstance(members, Mapping):
        table["members"] = {
            str(name): _provider(m, (*path, "members", str(name)), source, pooled=True)
            for name, m in members.items()
        }
    elif members is None:
        raise ConfigurationError(f"{source.where(path)}: a pool needs members")
    if "limit" in table:
        table["limit"] = _limit(table["limit"], (*path, "limit"), source)
    return _make(Pool, {"name": path[-1], **table}, path, source)


def _retry(value: object, source: _Source) -> Any:
    from ._policy import Backoff, RetryBudget, RetryPolicy

    path = ("retry",)
    table = _table(value, path, source)
    preset = table.pop("preset", None)
    if preset is not None:
        presets: dict[str, Callable[..., Any]] = {
            "openai": RetryPolicy.openai,
            "laravel": RetryPolicy.laravel,
            "ruby_llm": RetryPolicy.ruby_llm,
        }
        if not isinstance(preset, str) or preset not in presets:
            raise ConfigurationError(
                f"{source.where((*path, 'preset'))}: preset is one of "
                f"{', '.join(presets)}, not {preset!r}"
            )
        takes = _options(presets[preset])
        for key in table:
            if key not in takes:
                own = f"its options: {', '.join(takes)}" if takes else "it has no options"
                raise ConfigurationError(
                    f"{source.where((*path, key))}: the {preset} preset is used as it is "
                    f"({own}); for {key}, describe the policy without preset"
                )
        return _make(presets[preset], table, path, source)
    _unknown(table, ["preset", *_options(RetryPolicy)], path, source)
    if "backoff" in table:
        backoff = _table(table["backoff"], (*path, "backoff"), source)
        _unknown(backoff, _options(Backoff), (*path, "backoff"), source)
        table["backoff"] = _make(Backoff, backoff, (*path, "backoff"), source)
    if table.get("budget") is False:
        table["budget"] = None
    elif "budget" in table:
        budget = table["budget"]
        if budget is True:
            budget = {}
        budget = _table(budget, (*path, "budget"), source)
        _unknown(budget, _options(RetryBudget), (*path, "budget"), source)
        table["budget"] = _make(RetryBudget, budget, (*path, "budget"), source)
    return _make(RetryPolicy, table, path, source)


def _client_options(value: object, source: _Source, client: ClientClass) -> dict[str, Any]:
    path = ("client",)
    table = _table(value, path, source)
    allowed = [o for o in _options(client) if o not in _CLIENT_ELSEWHERE]
    _unknown(table, allowed, path, source, _CLIENT_ELSEWHERE)
    state = table.get("state")
    if state is not None:
        from ._fleet import RedisState

        where = (*path, "state")
        state = {"url": state} if isinstance(state, str) else _table(state, where, source)
        _unknown(state, _options(RedisState), where, source)
        table["state"] = _make(RedisState, state, where, source)
    telemetry = table.get("telemetry")
    if telemetry is False:
        table["telemetry"] = None
    elif telemetry is not None:
        from ._telemetry import OpenTelemetry

        where = (*path, "telemetry")
        options = {} if telemetry is True else _table(telemetry, where, source)
        _unknown(options, ["capture_content"], where, source)
        table["telemetry"] = _make(OpenTelemetry, options, where, source)
    hedge = table.get("hedge")
    if hedge is False:
        table["hedge"] = None
    elif hedge is not None:
        from ._hedge import Hedge

        where = (*path, "hedge")
        options = _table(hedge, where, source)
        _unknown(options, _options(Hedge), where, source)
        table["hedge"] = _make(Hedge, options, where, source)
    prices = table.get("prices")
    if isinstance(prices, Mapping):
        table["prices"] = {
            str(model): _price(price, (*path, "prices", str(model)), source)
            for model, price in prices.items()
        }
    return table


def build(client: ClientClass, source: object, overrides: Mapping[str, Any]) -> Client:
    """The ``client`` (the class, passed in: this module does not import it)
    a config describes; ``overrides`` are its options given in Python
    (``sleeper=``, ``on_event=``), which win."""
    raw, where = load(source)
    tables = _expand(_table(raw, (), where), (), where)
    try:
        return _build(client, tables, where, overrides)
    except ConfigurationError as error:
        # A key pasted into another value is echoed by that value's check.
        message = str(error)
        for key in _keys(tables):
            message = message.replace(key, "<redacted>")
        if message == str(error):
            raise
        raise ConfigurationError(message) from None


def _keys(tables: Mapping[str, Any]) -> list[str]:
    """Every provider's (and pool member's) api_key string in the config."""
    found: list[str] = []

    def visit(table: object) -> None:
        if not isinstance(table, Mapping):
            return
        key = table.get("api_key")
        if isinstance(key, str) and len(key) >= 8:
            found.append(key)
        members = table.get("members")
        for member in members.values() if isinstance(members, Mapping) else members or []:
            visit(member)

    providers = tables.get("providers")
    for table in providers.values() if isinstance(providers, Mapping) else []:
        visit(table)
    return found


def _build(
    client: ClientClass, tables: dict[str, Any], where: _Source, overrides: Mapping[str, Any]
) -> Client:
    _unknown(tables, _TOP_KEYS, (), where)
    options = _client_options(tables.get("client", {}), where, client)
    if "retry" in tables:
        options["retry"] = _retry(tables["retry"], where)
    if "quotas" in tables:
        quotas = _table(tables["quotas"], ("quotas",), where)
        options["quotas"] = {
            name: _limit(limit, ("quotas", name), where) for name, limit in quotas.items()
        }
    providers_table = _table(tables.get("providers", {}), ("providers",), where)
    if not providers_table:
        raise ConfigurationError(
            f"{where.where(('providers',))}: no providers; add a [providers.NAME] table "
            'with type = "openai" (or another type) and its model'
        )
    providers = {
        name: _provider(table, ("providers", name), where, pooled=False)
        for name, table in providers_table.items()
    }
    options.update(overrides)
    try:
        return client(providers, **options)
    except (ConfigurationError, TypeError) as error:
        blamed = _blamed(str(error), tables, options)
        raise ConfigurationError(f"{where.where(blamed)}: {error}") from None


def _blamed(message: str, tables: Mapping[str, Any], options: Mapping[str, Any]) -> tuple[str, ...]:
    """Where a refusal of the whole client points: the provider (or pool
    member) it names, else the [client] option it names, else [client]."""
    named = re.search(r"provider (?:name )?'([^']+)'", message)
    if named is not None:
        name = named.group(1)
        providers = tables.get("providers") or {}
        if name in providers:
            return ("providers", name)
        for pool, table in providers.items():
            members = table.get("members") if isinstance(table, Mapping) else None
            if isinstance(members, Mapping) and name in members:
                return ("providers", pool, "members", name)
            if isinstance(members, list) and name.startswith(f"{pool}/"):
                return ("providers", pool, "members", name.partition("/")[2])
    client = tables.get("client") or {}
    key = _named_key(message, [k for k in options if k in client])
    return ("client",) if key is None else ("client", key)
