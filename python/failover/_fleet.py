"""``RedisState``: cooldowns, headroom and the retry budget shared by every client
on one Redis (``Client(state=RedisState(url))``), from any process or machine."""

from __future__ import annotations

from . import _native
from ._checks import seconds
from ._exceptions import ConfigurationError

_SCHEMES = ("redis://", "rediss://", "unix://", "redis+unix://")


def _display(url: str) -> str:
    """``url`` without its user part (a password may be in it), path or query."""
    scheme, _, rest = url.partition("://")
    host = rest.split("/", 1)[0].split("?", 1)[0].rsplit("@", 1)[-1]
    return f"{scheme}://{host}"


class RedisState:
    """Fleet-wide state on Redis: pass it as ``Client(state=...)``.

    Clients with the same ``url`` and ``prefix`` share cooldowns (a provider
    that asked one worker for quiet is left alone by all), headroom and the
    retry budget. ``url``: ``redis://``, ``rediss://`` (TLS) or ``unix://``.
    Building it never waits on Redis; a call waits at most ``timeout`` for it
    (only a retry's budget check asks Redis on the call's path; cooldowns are
    read from a local copy Redis keeps fresh). With Redis down, slow or gone,
    each client uses its in-process state, logs that once at WARNING, and
    reconnects in the background.
    """

    __slots__ = ("_native", "_url", "prefix", "timeout")

    def __init__(self, url: str, *, prefix: str = "failover", timeout: float = 0.05) -> None:
        if not isinstance(url, str) or not url.startswith(_SCHEMES):
            raise ConfigurationError(
                "RedisState needs a redis://, rediss:// or unix:// URL, got "
                f"{_display(url) if isinstance(url, str) else url!r}"
            )
        if not isinstance(prefix, str) or not prefix or any(c.isspace() for c in prefix):
            raise ConfigurationError(
                f"RedisState prefix must be a non-empty str without spaces, got {prefix!r}"
            )
        self.timeout = seconds("timeout", timeout, positive=True)
        self.prefix = prefix
        self._url = url
        self._native = _native.NativeRedisState(url=url, prefix=prefix, timeout=self.timeout)

    def __repr__(self) -> str:
        return (
            f"RedisState({_display(self._url)!r}, prefix={self.prefix!r}, timeout={self.timeout})"
        )
