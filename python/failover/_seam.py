"""The typed seam to the native engine: what ``failover._client`` hands over.

Each class here is read by attribute into a Rust struct of the same name in
``src/python/seam.rs``; adding a field touches one definition on each side.
What comes back (``_native.ResponseData``, ``_native.AttemptData``) and the
compiled policy (``_native.NativePolicy``) are native classes with named
fields.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at runtime here

if TYPE_CHECKING:
    from typing import Any

    from ._native import NativePolicy


class ProviderSpec:
    """One configured provider, with its key (a str, a callable or None)."""

    __slots__ = (
        "api_key",
        "base_url",
        "dimensions_field",
        "embed_base64",
        "embedding_model",
        "embeds",
        "entra_token",
        "headers",
        "max_tokens_field",
        "model",
        "name",
        "overloaded_statuses",
        "params",
        "mistral_rules",
        "seed_field",
        "stream_usage",
        "wire",
    )

    def __init__(
        self,
        *,
        name: str,
        wire: str,
        model: str,
        base_url: str,
        api_key: Any,
        headers: list[tuple[str, str]],
        overloaded_statuses: list[int],
        max_tokens_field: str,
        params: dict[str, Any] | None,
        embedding_model: str | None,
        embeds: bool,
        dimensions_field: str,
        embed_base64: bool,
        stream_usage: bool,
        entra_token: bool,
        seed_field: str = "seed",
        mistral_rules: bool = False,
    ) -> None:
        self.name = name
        self.wire = wire
        self.model = model
        self.base_url = base_url
        self.api_key = api_key
        self.headers = headers
        self.overloaded_statuses = overloaded_statuses
        self.max_tokens_field = max_tokens_field
        self.params = params
        self.embedding_model = embedding_model
        self.embeds = embeds
        self.dimensions_field = dimensions_field
        self.embed_base64 = embed_base64
        self.stream_usage = stream_usage
        self.entra_token = entra_token
        self.seed_field = seed_field
        self.mistral_rules = mistral_rules

    def __repr__(self) -> str:  # never shows the key
        return f"ProviderSpec(name={self.name!r}, wire={self.wire!r}, model={self.model!r})"


class TransportSpec:
    """How the client reaches providers."""

    __slots__ = ("connect_timeout", "http2", "max_idle_connections", "proxy", "verify")

    def __init__(
        self,
        *,
        connect_timeout: float,
        proxy: str | None,
        verify: bool | str,
        http2: bool,
        max_idle_connections: int | None,
    ) -> None:
        self.connect_timeout = connect_timeout
        self.proxy = proxy
        self.verify = verify
        self.http2 = http2
        self.max_idle_connections = max_idle_connections


class CallArgs:
    """One call's arguments, checked by ``Client`` before they cross.

    Filled in field by field (``args = CallArgs(); args.messages = ...``):
    it is built for every call, and a keyword ``__init__`` would cost more
    than the rest of the Python side of a call.
    """

    __slots__ = (
        "chain",
        "deadline",
        "emit",
        "headers",
        "idempotency_key",
        "least_busy",
        "max_tokens",
        "messages",
        "model",
        "policy",
        "response_format",
        "seed",
        "sleeper",
        "stop",
        "system",
        "temperature",
        "timeout",
        "tool_choice",
        "tools",
        "top_p",
    )

    messages: list[Any]
    chain: list[int]
    policy: NativePolicy
    timeout: float
    deadline: float | None
    sleeper: Any
    model: str | None
    system: str | None
    max_tokens: int | None
    temperature: float | None
    tools: list[dict[str, Any]] | None
    tool_choice: str | None
    response_format: dict[str, Any] | None
    stop: list[str] | None
    top_p: float | None
    seed: int | None
    headers: list[tuple[str, str]] | None
    idempotency_key: str | None
    emit: Any
    least_busy: list[list[int]] | None


class EmbedArgs:
    """One embeddings call's arguments, checked by ``Client`` before they cross."""

    __slots__ = (
        "chain",
        "deadline",
        "dimensions",
        "emit",
        "headers",
        "idempotency_key",
        "least_busy",
        "model",
        "policy",
        "sleeper",
        "texts",
        "timeout",
    )

    texts: list[str]
    chain: list[int]
    policy: NativePolicy
    timeout: float
    deadline: float | None
    sleeper: Any
    model: str | None
    dimensions: int | None
    headers: list[tuple[str, str]] | None
    idempotency_key: str | None
    emit: Any
    least_busy: list[list[int]] | None
