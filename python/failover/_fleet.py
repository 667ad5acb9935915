"""``RedisState``: cooldowns, headroom and the retry budget shared by every client
on one Redis (``Client(state=RedisState(url))``), from any process or machine."""

from __future__ import annotations

from . import _native
from ._checks import is_utf8, seconds
from ._exceptions import ConfigurationError

_SCHEMES = ("redis", "rediss", "unix", "redis+unix")
#: The shortest state timeout: below it a healthy Redis would look down.
_MIN_TIMEOUT = 0.001


def _display(url: str) -> str:
    """``url`` without its user part (a password may be in it) or query; a
    socket's path kept."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "<not a URL>" if url else ""
    rest = rest.split("?", 1)[0].split("#", 1)[0]
    if scheme.lower() in ("unix", "redis+unix"):
        return f"{scheme}://{rest.rsplit('@', 1)[-1]}"
    host, _, path = rest.partition("/")
    host = host.rsplit("@", 1)[-1]
    # The database is no secret, and two of them are two fleets.
    return f"{scheme}://{host}/{path}" if path.isdigit() else f"{scheme}://{host}"


def _url_problem(url: object) -> str | None:
    """Why ``url`` is no Redis URL the client can use, or None."""
    if not isinstance(url, str):
        return f"a str, got {type(url).__name__}"
    if not is_utf8(url):
        return "it is not valid Unicode (a lone surrogate cannot be sent)"
    if any(ord(c) < 33 or ord(c) == 127 for c in url):
        return "it holds spaces or control characters"
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in _SCHEMES:
        return "it is not a redis://, rediss:// or unix:// URL"
    if scheme.lower() in ("unix", "redis+unix") and not rest.rsplit("@", 1)[-1].startswith("/"):
        return "a socket URL names an absolute path: unix:///run/redis/redis.sock"
    if scheme.lower() in ("redis", "rediss"):
        authority, _, path = rest.partition("/")
        host = authority.rsplit("@", 1)[-1]
        port = host.rsplit(":", 1)[1] if host.count(":") == 1 else None
        if not host or (port is not None and (not port.isdigit() or not 0 < int(port) < 65536)):
            return "its host or port is not usable"
        db = path.split("?", 1)[0]
        if db and (not db.isdigit() or int(db) > 2**31 - 1):
            return "its database is not a number from 0"
    return None


class RedisState:
    """Fleet-wide state on Redis: pass it as ``Client(state=...)``.

    Clients with the same ``url`` and ``prefix`` share cooldowns (a provider
    that asked one worker for quiet is left alone by all; when a cooldown
    ends, one call in the fleet probes the provider), headroom, the retry
    budget and limits (a ``Limit``'s concurrency, rpm and tpm count every
    process's calls; a crashed process's slots free within 3 s).
    ``url``: ``redis://``, ``rediss://`` (TLS; the system's certificate
    roots, or ``SSL_CERT_FILE``) or ``unix://``. Building it never waits on
    Redis; a call waits at most ``timeout`` for it (only a retry's budget
    check, taking a probe and a limited provider's take ask Redis on the
    call's path; cooldowns are read from a local copy Redis keeps fresh).
    With Redis down, slow or gone, each client uses its in-process state
    (and limits), logs that once at WARNING, and reconnects in the
    background.
    """

    __slots__ = ("_native", "_url", "prefix", "timeout")

    def __init__(self, url: str, *, prefix: str = "failover", timeout: float = 0.05) -> None:
        problem = _url_problem(url)
        if problem is not None:
            shown = _display(url) if isinstance(url, str) else repr(url)
            raise ConfigurationError(f"RedisState needs a Redis URL: {shown!r}: {problem}")
        if (
            not isinstance(prefix, str)
            or not prefix
            or not all(c.isascii() and (c.isalnum() or c in "-_.") for c in prefix)
        ):
            raise ConfigurationError(
                "RedisState prefix must be letters, digits, '-', '_' or '.' (no pattern "
                f"characters), got {prefix!r}"
            )
        self.timeout = seconds("timeout", timeout, positive=True)
        if self.timeout < _MIN_TIMEOUT:
            raise ConfigurationError(
                f"RedisState timeout must be at least {_MIN_TIMEOUT}s, got {timeout!r}"
            )
        self.prefix = prefix
        self._url = url
        self._native = _native.NativeRedisState(url=url, prefix=prefix, timeout=self.timeout)

    def __repr__(self) -> str:
        return (
            f"RedisState({_display(self._url)!r}, prefix={self.prefix!r}, timeout={self.timeout})"
        )
