"""Provider configurations: small option objects, no I/O.

The key is read from the provider's usual environment variable when the
Client is built, unless given. It never appears in a repr.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from . import _native
from ._checks import header_text
from ._exceptions import ConfigurationError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (5 ms)

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, ClassVar

#: Statuses that mean "overloaded" unless a provider says otherwise.
DEFAULT_OVERLOADED_STATUSES: tuple[int, ...] = (502, 503, 504, 520, 522, 524)


class Provider:
    """Base class of provider configurations."""

    wire: ClassVar[str] = "openai"
    default_base_url: ClassVar[str | None] = None
    env_var: ClassVar[str | None] = None
    key_required: ClassVar[bool] = True
    overloaded_statuses: tuple[int, ...] = DEFAULT_OVERLOADED_STATUSES
    max_tokens_field: ClassVar[str] = "max_tokens"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        headers: Mapping[str, str] | None = None,
        allow_insecure: bool = False,
        overloaded_statuses: Sequence[int] | None = None,
    ) -> None:
        owner = type(self).__name__
        if not isinstance(model, str) or not model:
            raise ConfigurationError(f"{owner} needs a model name (a str), got {model!r}")
        url = base_url if base_url is not None else self.default_base_url
        if not isinstance(url, str) or not url:
            raise ConfigurationError(f"{owner} needs a base_url (a str)")
        if headers is not None and not isinstance(headers, Mapping):
            raise ConfigurationError(f"{owner} headers must be a mapping of str to str")
        if api_key is not None and not isinstance(api_key, str):
            raise ConfigurationError(f"{owner} api_key must be a str")
        self.model = model
        self.base_url = _checked_url(owner, url.rstrip("/"))
        self.headers = {
            header_text("a header name", k): header_text(f"header {k!r}", v)
            for k, v in (headers or {}).items()
        }
        self.allow_insecure = bool(allow_insecure)
        if overloaded_statuses is not None:
            statuses = tuple(overloaded_statuses)
            if not all(isinstance(s, int) and 100 <= s <= 599 for s in statuses):
                raise ConfigurationError(f"{owner} overloaded_statuses must be HTTP statuses")
            self.overloaded_statuses = statuses
        self._api_key = api_key
        self._env_var = self.env_var
        self._key_required = self.key_required

    def _resolve_key(self, name: str) -> str | None:
        """The key to send, checked; raises ConfigurationError naming what is missing."""
        key = self._api_key
        if key is None and self._env_var:
            key = os.environ.get(self._env_var) or None
        if key is not None:
            # Keys read from files and variables often end in a newline.
            key = key.strip()
            if not key or any(ord(c) < 32 or ord(c) == 127 for c in key):
                raise ConfigurationError(
                    f"provider {name!r} has an API key with control characters or none at all"
                )
        if key is None and self._key_required:
            where = f"set {self._env_var} or pass api_key=" if self._env_var else "pass api_key="
            raise ConfigurationError(
                f"provider {name!r} ({type(self).__name__}) has no API key: {where}"
            )
        sends_secret = key is not None or any(map(_native.is_credential_header, self.headers))
        if sends_secret and not self.allow_insecure and not _safe_for_secrets(self.base_url):
            raise ConfigurationError(
                f"provider {name!r} would send a credential over plain http to "
                f"{_display_url(self.base_url)}; use https, or pass allow_insecure=True"
            )
        return key

    def _native(self, name: str) -> tuple[Any, ...]:
        return (
            name,
            self.wire,
            self.model,
            self.base_url,
            self._resolve_key(name),
            list(self.headers.items()),
            list(self.overloaded_statuses),
            self.max_tokens_field,
        )

    def __repr__(self) -> str:
        url = _display_url(self.base_url)
        return f"{type(self).__name__}(model={self.model!r}, base_url={url!r})"


def _checked_url(owner: str, url: str) -> str:
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError on a malformed port
    except ValueError as exc:
        raise ConfigurationError(f"{owner} base_url is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"{owner} base_url must be an http(s) URL with a host, got {_display_url(url)!r}"
        )
    return url


def _display_url(url: str) -> str:
    """``url`` without a user part or a query, either of which may hold a key."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        netloc = f"{host}:{parts.port}" if parts.port else host
    except ValueError:
        netloc = host
    query = "..." if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def _safe_for_secrets(url: str) -> bool:
    # Imported on first use: they are not cheap, and `import failover` should be.
    import ipaddress
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme == "https":
        return True
    host = parts.hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class OpenAI(Provider):
    """OpenAI Chat Completions. Key: ``OPENAI_API_KEY``."""

    default_base_url = "https://api.openai.com/v1"
    env_var = "OPENAI_API_KEY"
    max_tokens_field = "max_completion_tokens"


class Anthropic(Provider):
    """Anthropic Messages. Key: ``ANTHROPIC_API_KEY``. 529 means overloaded."""

    wire = "anthropic"
    default_base_url = "https://api.anthropic.com/v1"
    env_var = "ANTHROPIC_API_KEY"
    overloaded_statuses = (*DEFAULT_OVERLOADED_STATUSES, 529)


class OpenAICompatible(Provider):
    """Any server speaking OpenAI Chat Completions at ``base_url``.

    The key is optional: pass ``api_key=`` or name a variable with ``api_key_env=``.
    """

    key_required = False

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | None = None,
        api_key_env: str | None = None,
        headers: Mapping[str, str] | None = None,
        allow_insecure: bool = False,
        overloaded_statuses: Sequence[int] | None = None,
    ) -> None:
        super().__init__(
            model,
            api_key=api_key,
            base_url=base_url,
            headers=headers,
            allow_insecure=allow_insecure,
            overloaded_statuses=overloaded_statuses,
        )
        if api_key_env is not None:
            if not isinstance(api_key_env, str) or not api_key_env:
                raise ConfigurationError("api_key_env must name an environment variable")
            self._env_var = api_key_env
            self._key_required = True
