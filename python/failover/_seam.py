"""The typed seam to the native engine: what ``failover._client`` hands over.

Each class here is read by attribute into a Rust struct of the same name in
``src/python/seam.rs``; adding a field touches one definition on each side
(``ProviderSpec``: one name in ``ProviderSpec.COPIED``).
What comes back (``_native.ResponseData``, ``_native.AttemptData``) and the
compiled policy (``_native.NativePolicy``) are native classes with named
fields.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at runtime here

if TYPE_CHECKING:
    from typing import Any

    from ._native import Journal, NativeHedge, NativePolicy


class ProviderSpec:
    """One configured provider, as ``ProviderSpec`` in ``src/python/seam.rs``
    reads it (by attribute, straight into the engine's ``ProviderConfig``):
    the provider's own fields, copied by name, and what its client settles
    for it. Built once per client, never per call."""

    #: Read from the ``failover.Provider`` by the same name: a new provider
    #: field is one name here, the provider's attribute, and one line in
    #: ``seam.rs``.
    COPIED = (
        "wire",
        "model",
        "base_url",
        "overloaded_statuses",
        "max_tokens_field",
        "params",
        "embedding_model",
        "can_embed",
        "dimensions_field",
        "embed_base64",
        "stream_usage",
        "seed_field",
        "mistral_rules",
        "image_model",
        "speech_model",
        "transcription_model",
        "media",
    )
    __slots__ = (
        *COPIED,
        "name",
        "api_key",
        "headers",
        "entra_token",
        "limits",
        "embedding_limits",
        "own_limit",
        "own_embedding_limit",
        "quota",
    )

    def __init__(self, provider: Any, name: str, api_key: Any) -> None:
        # provider: a failover.Provider, read by attribute only (the seam sits
        # below _providers and does not import it back).
        for field in self.COPIED:
            setattr(self, field, getattr(provider, field))
        self.name = name
        #: A str, a callable returning one (called for each attempt), or None.
        self.api_key = api_key
        self.headers = list(provider.headers.items())
        #: Azure: the (callable) key is an Entra ID bearer token.
        self.entra_token = False
        #: The client's limits it draws on (indexes into ``NativeClient``'s
        #: ``limits``), for chat and streams and for embeddings, and its quota:
        #: set by the client, which knows its pools and quotas.
        self.limits: list[int] = []
        self.embedding_limits: list[int] = []
        #: Its own among them (not its pool's or its quota's).
        self.own_limit: int | None = None
        self.own_embedding_limit: int | None = None
        self.quota: str | None = None

    def __repr__(self) -> str:  # never shows the key
        shown = ", ".join(f"{f}={getattr(self, f)!r}" for f in ("name", "wire", "model"))
        return f"ProviderSpec({shown})"


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
        "hedge",
        "idempotency_key",
        "journal",
        "max_tokens",
        "messages",
        "model",
        "policy",
        "pools",
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
    hedge: NativeHedge | None
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
    journal: Journal | None
    emit: Any
    pools: list[tuple[str, list[int]]] | None


class MediaArgs:
    """One image, speech or transcription call's arguments (``kind`` says
    which; the others' fields stay ``None``), checked by ``Client``."""

    __slots__ = (
        "audio",
        "chain",
        "deadline",
        "emit",
        "filename",
        "format",
        "headers",
        "idempotency_key",
        "journal",
        "instructions",
        "kind",
        "language",
        "model",
        "n",
        "policy",
        "pools",
        "prompt",
        "quality",
        "response_format",
        "size",
        "sleeper",
        "speed",
        "text",
        "timeout",
        "urls",
        "voice",
    )

    kind: str
    prompt: str | None
    size: str | None
    n: int
    quality: str | None
    urls: bool
    text: str | None
    # One name; each provider's by its name (as given); each chain member's
    # (pools expanded by the client).
    voice: str | dict[str, str] | list[tuple[str, str]] | None
    format: str | None
    speed: float | None
    instructions: str | None
    audio: bytes | None
    filename: str | None
    language: str | None
    response_format: str | None
    chain: list[int]
    policy: NativePolicy
    timeout: float
    deadline: float | None
    sleeper: Any
    model: str | None
    headers: list[tuple[str, str]] | None
    idempotency_key: str | None
    journal: Journal | None
    emit: Any
    pools: list[tuple[str, list[int]]] | None

    def __init__(self, kind: str) -> None:
        self.kind = kind
        for name in self.__slots__:
            if name != "kind":
                setattr(self, name, None)
        self.n = 1
        self.urls = False


class EmbedArgs:
    """One embeddings call's arguments, checked by ``Client`` before they cross."""

    __slots__ = (
        "chain",
        "deadline",
        "dimensions",
        "emit",
        "headers",
        "idempotency_key",
        "journal",
        "model",
        "policy",
        "pools",
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
    journal: Journal | None
    emit: Any
    pools: list[tuple[str, list[int]]] | None
