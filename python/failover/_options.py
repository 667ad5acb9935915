"""The checks of ``Client``'s options and of each call's: every option is
checked when it is given (a ``ConfigurationError`` naming it), and comes out
as the engine reads it. ``failover._checks`` holds the value checks they
share with the other public constructors."""

from __future__ import annotations

from . import _native
from ._checks import accepts, count, is_async_callable, number, utf8_text
from ._exceptions import ConfigurationError
from ._models import Tool
from ._providers import _checked_headers, _display_url, _url_problem

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see _typing.py)
if TYPE_CHECKING:
    import typing
    from collections.abc import Mapping
else:
    from _collections_abc import Mapping  # collections.abc's, loaded at startup

    from . import _typing as typing

if TYPE_CHECKING:
    from ._seam import CallArgs


def prompt_messages(prompt: object) -> list[typing.Any]:
    """The prompt as messages: a str is one user message."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if not isinstance(prompt, (list, tuple)):
        raise ConfigurationError(
            f"prompt must be a str or a list of message dicts, got {type(prompt).__name__}"
        )
    # Checked (roles, content) by the native side, before any request.
    return [dict(m) if isinstance(m, Mapping) and not isinstance(m, dict) else m for m in prompt]


def proxy_url(proxy: object, where: str = "proxy") -> str | None:
    if proxy is None:
        return None
    if not isinstance(proxy, str):
        raise ConfigurationError(f"{where} must be a URL (a str) or None, got {proxy!r}")
    if proxy.lower().startswith("socks"):
        raise ConfigurationError(
            f"{where}: socks proxies are not supported: use an http:// or https:// proxy"
        )
    problem = _url_problem(proxy)
    if problem is not None:
        raise ConfigurationError(
            f"{where} must be an http(s) URL; {_display_url(proxy)!r} is not: {problem}"
        )
    return proxy


def check_proxy_variables() -> None:
    """The proxy environment variables the transport will use, checked as
    ``proxy=`` is: a bad one would otherwise fail every call, retried like an
    outage. Read as the transport reads them (``_native.PROXY_VARIABLES``:
    pairs in order, https, http, all): the first of each pair
    (``HTTPS_PROXY`` before ``https_proxy``), ``ALL_PROXY`` only where one of
    the others is missing, none under CGI (``REQUEST_METHOD`` set)."""
    import os

    if "REQUEST_METHOD" in os.environ:
        return

    def first(pair: tuple[str, ...]) -> tuple[str, str] | None:
        for name in pair:
            value = os.environ.get(name)
            if value is None:
                continue
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                continue  # not UTF-8: the transport skips it too
            return name, value.strip()
        return None

    names = _native.PROXY_VARIABLES
    https, http, every = (first(names[i : i + 2]) for i in range(0, len(names), 2))
    used = [found for found in (https, http) if found and found[1]]
    if len(used) < 2 and every and every[1]:
        used.append(every)
    for name, value in used:
        # A bare host:port is read as http://host:port, as curl does.
        url = value if "://" in value else f"http://{value}"
        proxy_url(url, where=f"the {name} environment variable")


def tools(tools: object) -> list[dict[str, typing.Any]] | None:
    """``tools=`` as the engine reads it: a list of tool dicts."""
    if tools is None:
        return None
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, (list, tuple)):
        raise ConfigurationError(
            f"tools must be a list of failover.Tool or tool dicts, got {type(tools).__name__}"
        )
    wire: list[dict[str, typing.Any]] = []
    for tool in tools:
        if isinstance(tool, Tool):
            wire.append(tool._wire())
        elif isinstance(tool, Mapping):
            wire.append(dict(tool))
        else:
            raise ConfigurationError(f"each tool must be a failover.Tool or a dict, got {tool!r}")
    return wire


def request_options(
    args: CallArgs,
    response_format: object,
    stop: object,
    top_p: object,
    seed: object,
    headers: object,
) -> None:
    """The per-call request options, checked before they cross."""
    if response_format is None and stop is None and top_p is None and seed is None:
        # The usual call: nothing to check (headers below are cheap when None).
        args.response_format = args.stop = args.top_p = args.seed = None
        args.headers = None
        if headers is not None:
            args.headers = list(_checked_headers("headers=", headers).items()) or None
        return
    if response_format is not None and not isinstance(response_format, Mapping):
        raise ConfigurationError(
            'response_format must be {"type": "json_object"}, '
            '{"type": "json_schema", "json_schema": {...}} or {"type": "text"} (the default: '
            f"plain text), got {response_format!r}"
        )
    args.response_format = dict(response_format) if response_format is not None else None
    if isinstance(stop, str):
        stop = [stop]
    if stop is not None and (
        not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) and s for s in stop)
    ):
        raise ConfigurationError(f"stop must be a str or a list of non-empty str, got {stop!r}")
    args.stop = None
    if stop is not None:
        args.stop = [utf8_text(f"stop[{i}]", s) for i, s in enumerate(stop)]
    args.top_p = None if top_p is None else number("top_p", top_p, low=0.0, high=1.0)
    if seed is not None:
        seed = count("seed", seed, minimum=-(2**63), maximum=2**63 - 1)
    args.seed = seed
    checked = _checked_headers("headers=", headers)
    args.headers = list(checked.items()) if checked else None


def tool_choice(choice: object) -> str | None:
    """``tool_choice`` as a word or a tool's name: also OpenAI's
    ``{"type": "function", "function": {"name": ...}}`` and Anthropic's
    ``{"type": "auto" | "any" | "none"}`` / ``{"type": "tool", "name": ...}``."""
    if choice is None:
        return None
    if isinstance(choice, str):
        return utf8_text("tool_choice", choice)
    if isinstance(choice, Mapping):
        odd_keys = [k for k in choice if not isinstance(k, str)]
        if odd_keys:
            raise ConfigurationError(
                f"tool_choice: its keys are str (a JSON object's), got {odd_keys[0]!r}"
            )
        kind = choice.get("type")
        function = choice.get("function")
        name: object = None
        known = {"type"}
        if kind == "function" and isinstance(function, Mapping):
            name = function.get("name")
            known.add("function")
        elif kind == "tool":
            name = choice.get("name")
            known.add("name")
        elif kind in ("auto", "none"):
            name = kind
        elif kind == "any":
            name = "required"
        extra = sorted(set(choice) - known)
        if extra and isinstance(name, str):
            # Not dropped in silence: it means something on one wire only.
            raise ConfigurationError(
                f"tool_choice: {', '.join(extra)} is not sent to every provider; give it in "
                "that provider's params= (Anthropic(params={'tool_choice': "
                "{'disable_parallel_tool_use': True}}), with tool_choice='auto')"
            )
        if isinstance(name, str) and name:
            return utf8_text("tool_choice's name", name)
    raise ConfigurationError(
        'tool_choice must be "auto", "none", "required" or a tool name (or OpenAI\'s '
        '{"type": "function", "function": {"name": ...}}), '
        f"got {choice!r}"
    )


def check_sleeper(sleeper: object) -> None:
    if sleeper is not None and not callable(sleeper):
        raise ConfigurationError("sleeper must be None, a FakeSleeper or a callable")
    if sleeper is not None and not hasattr(sleeper, "_native_clock") and not accepts(sleeper, 1):
        raise ConfigurationError(
            f"sleeper must take the seconds to sleep as its one argument, got {sleeper!r}"
        )


def check_on_event(on_event: object) -> None:
    if on_event is None:
        return
    if not callable(on_event):
        raise ConfigurationError(f"on_event must be a callable taking one event, got {on_event!r}")
    if not accepts(on_event, 1):
        raise ConfigurationError(
            f"on_event must take the event as its one argument, got {on_event!r}"
        )
    if is_async_callable(on_event):
        raise ConfigurationError(
            "on_event must be a plain function: it is called, never awaited "
            "(from an async hook, schedule the work with loop.create_task)"
        )


def idempotency_key(key: object) -> str | None:
    """``idempotency_key=``: a header value HTTP can carry."""
    if key is None:
        return None
    if not isinstance(key, str) or not key.strip():
        raise ConfigurationError(f"idempotency_key must be a non-empty str, got {key!r}")
    utf8_text("idempotency_key", key)
    problem = _native.check_header("Idempotency-Key", key)
    if problem is not None:
        raise ConfigurationError(f"idempotency_key: {problem}")
    return key


def restart(on_interrupt: object) -> bool:
    """``on_interrupt=``: ``"raise"`` (the default) or ``"restart"``."""
    if on_interrupt not in ("raise", "restart"):
        raise ConfigurationError(f'on_interrupt must be "raise" or "restart", got {on_interrupt!r}')
    return on_interrupt == "restart"


def verify(verify: object) -> bool | str:
    if isinstance(verify, bool):
        return verify
    import os

    if isinstance(verify, (str, os.PathLike)):
        path = os.fspath(verify)
        if isinstance(path, str) and path:
            # A file name os.fsdecode() could not decode holds surrogates: the
            # engine's paths are UTF-8, so it is refused here, named.
            return utf8_text("verify", path)
    raise ConfigurationError(
        f"verify must be True, False or the path of a PEM CA bundle, got {verify!r}"
    )


def embed_texts(texts: object) -> list[str]:
    """``embed()``'s texts: a str or a list of str, none of them blank."""
    one = isinstance(texts, str)
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, (list, tuple)):
        raise ConfigurationError(
            f"embed() takes a str or a list of str, got {type(texts).__name__}"
        )
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise ConfigurationError(
                f"embed() takes a str or a list of str; texts[{i}] is a {type(text).__name__}"
            )
        # As prompt() refuses a conversation with nothing to answer: a
        # provider would refuse it, or embed nothing.
        which = "the text" if one else f"texts[{i}]"
        if not text.strip():
            raise ConfigurationError(
                f"embed() has nothing to embed: {which} is empty (or only whitespace)"
            )
        utf8_text(f"embed(): {which}", text)
    if not texts:
        raise ConfigurationError("embed() needs at least one text")
    return list(texts)
