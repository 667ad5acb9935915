"""Provider configurations: small option objects, no I/O.

The key is read from the provider's usual environment variable when the
Client is built, unless given. It never appears in a repr.
"""

from __future__ import annotations

import os

from . import _native
from ._checks import accepts, header_text, is_async_callable, is_utf8, utf8_text
from ._cost import Price, check_price
from ._exceptions import ConfigurationError
from ._limits import Limit, check_limit, check_quota
from ._seam import ProviderSpec

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see _typing.py)
if TYPE_CHECKING:
    import typing
    from collections.abc import Callable, Iterable, Mapping, Sequence
else:
    from _collections_abc import (  # collections.abc's, loaded at startup
        Callable,
        Iterable,
        Mapping,
        Sequence,
    )

    from . import _typing as typing

#: An API key: the key itself, or a callable returning it, called for each
#: attempt (rotating Azure AD or Vertex tokens).
ApiKey = str | Callable[[], str]

#: Headers the transport writes for each request (framing, connection):
#: one given by hand would corrupt the request on the wire.
_TRANSPORT_HEADERS = frozenset(
    {
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
        # The transport reads bodies as they come: it asks for no encoding.
        "accept-encoding",
    }
)

#: Statuses that mean "overloaded" unless a provider says otherwise (the
#: engine's list).
DEFAULT_OVERLOADED_STATUSES: tuple[int, ...] = _native.DEFAULT_OVERLOADED_STATUSES


def _check_name(name: str, what: str = "provider name") -> None:
    """A provider's name: ``/`` and ``:`` mark a model and a call kind in
    cooldown keys (``name/model``, ``name:embeddings``) and pool members."""
    utf8_text(what, name)
    if any(c in name for c in "/:|"):
        raise ConfigurationError(
            f"{what} {name!r} may not hold '/', ':' or '|' (they mark pool members, "
            "a call's model, embeddings and models in cooldown keys)"
        )


def _key_text_problem(key: str) -> str | None:
    """Why ``key`` (stripped) cannot go in a header, or ``None``."""
    if not key:
        return "is blank"
    if not is_utf8(key):
        return "is not valid Unicode (a lone surrogate cannot be sent)"
    if any(ord(c) < 32 or ord(c) == 127 for c in key):
        return "holds control characters"
    return None


def _key_callable_problem(key: object) -> str | None:
    """Why ``key``, a callable ``api_key``, cannot be used, or ``None``."""
    if not callable(key) or isinstance(key, str):
        return None
    if not accepts(key, 0):
        return f"api_key: a callable key is called with no arguments, got {key!r}"
    if is_async_callable(key):
        return (
            "api_key must be a plain function returning the key; it is called, never "
            "awaited (fetch async tokens ahead and return the latest one)"
        )
    return None


#: What each media call type's API is called, for messages.
_MEDIA_API = {
    "image": "image generation API",
    "speech": "speech API",
    "transcription": "transcription API",
}


class Provider:
    """Base class of provider configurations."""

    wire: typing.ClassVar[str] = "openai"
    default_base_url: typing.ClassVar[str | None] = None
    env_var: typing.ClassVar[str | None] = None
    key_required: typing.ClassVar[bool] = True
    #: Variables read, in order, when ``env_var`` is unset.
    env_fallbacks: typing.ClassVar[tuple[str, ...]] = ()
    overloaded_statuses: tuple[int, ...] = DEFAULT_OVERLOADED_STATUSES
    max_tokens_field: typing.ClassVar[str] = "max_tokens"
    #: Whether the provider has an embeddings endpoint.
    can_embed: typing.ClassVar[bool] = True
    #: The image, speech and transcription calls it has an API for
    #: (``"image"``, ``"speech"``, ``"transcription"``), and the model each
    #: asks for unless ``image_model=``/``speech_model=``/``transcription_model=``
    #: or the call's ``model=`` names one (``None``: one must be named).
    media: typing.ClassVar[tuple[str, ...]] = ()
    default_media_models: typing.ClassVar[tuple[tuple[str, str], ...]] = ()
    #: Whether a transcription asks the provider's ``model`` when
    #: ``transcription_model=`` names none (a multimodal chat model listens).
    transcribes_with_model: typing.ClassVar[bool] = False
    #: The embeddings body field that carries ``dimensions``.
    dimensions_field: typing.ClassVar[str] = "dimensions"
    #: Whether to ask for embeddings as base64 float32 (servers known to speak it).
    embed_base64: typing.ClassVar[bool] = False
    #: Whether a Chat Completions stream may be asked for its usage
    #: (``stream_options``); Mistral refuses the field.
    stream_usage: typing.ClassVar[bool] = True
    #: The body field that carries ``seed``.
    seed_field: typing.ClassVar[str] = "seed"
    #: Mistral's conversation rules: 9-character tool-call ids (others' are
    #: rewritten); no user message right after tool results and no final
    #: assistant message to continue (Mistral is skipped for those).
    mistral_rules: typing.ClassVar[bool] = False
    #: The provider's id in genai-prices (``Client(prices="genai-prices")``);
    #: ``None``: looked up by its base URL (``genai_prices_by_url``), or not at all.
    genai_prices_id: typing.ClassVar[str | None] = "openai"
    genai_prices_by_url: typing.ClassVar[bool] = False
    #: ``gen_ai.provider.name`` in telemetry (the conventions' well-known value,
    #: or a custom one).
    otel_provider_name: typing.ClassVar[str] = "openai"

    def __init__(
        self,
        model: str,
        *,
        api_key: ApiKey | None = None,
        base_url: str | None = None,
        headers: Mapping[str, str] | None = None,
        allow_insecure: bool = False,
        overloaded_statuses: Sequence[int] | None = None,
        params: Mapping[str, typing.Any] | None = None,
        embedding_model: str | None = None,
        image_model: str | None = None,
        speech_model: str | None = None,
        transcription_model: str | None = None,
        price: Price | None = None,
        embedding_price: Price | None = None,
        limit: Limit | None = None,
        embedding_limit: Limit | None = None,
        quota: str | None = None,
    ) -> None:
        owner = type(self).__name__
        # Blank like a call's model=: no provider has a model named "   ".
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(f"{owner} needs a model name (a non-empty str), got {model!r}")
        utf8_text(f"{owner} model", model)
        if embedding_model is not None:
            if not self.can_embed:
                raise ConfigurationError(
                    f"{owner} has no embeddings API: embedding_model= has nothing to name"
                )
            if not isinstance(embedding_model, str) or not embedding_model.strip():
                raise ConfigurationError(
                    f"{owner} embedding_model must be a model name (a non-empty str), "
                    f"got {embedding_model!r}"
                )
            utf8_text(f"{owner} embedding_model", embedding_model)
        for what, name in (("model", model), ("embedding_model", embedding_model)):
            problem = self._model_problem(name) if name is not None else None
            if problem is not None:
                raise ConfigurationError(f"{owner} {what}: {problem}")
        self.embedding_model = embedding_model
        given = {
            "image": image_model,
            "speech": speech_model,
            "transcription": transcription_model,
        }
        for kind, name in given.items():
            if name is None:
                continue
            option = f"{kind}_model"
            if kind not in self.media:
                raise ConfigurationError(
                    f"{owner} has no {_MEDIA_API[kind]}: {option}= has nothing to name"
                )
            if not isinstance(name, str) or not name.strip():
                raise ConfigurationError(
                    f"{owner} {option} must be a model name (a non-empty str), got {name!r}"
                )
            utf8_text(f"{owner} {option}", name)
            problem = self._model_problem(name)
            if problem is not None:
                raise ConfigurationError(f"{owner} {option}: {problem}")
        defaults = dict(self.default_media_models)
        if self.transcribes_with_model:
            defaults["transcription"] = model
        models = {kind: given[kind] or defaults.get(kind) for kind in given}
        self.image_model: str | None = models["image"]
        self.speech_model: str | None = models["speech"]
        self.transcription_model: str | None = models["transcription"]
        self._price = check_price(owner, "price", price)
        self._embedding_price = check_price(owner, "embedding_price", embedding_price)
        if embedding_price is not None and not self.can_embed:
            raise ConfigurationError(
                f"{owner} has no embeddings API: embedding_price= has nothing to price"
            )
        self._limit = check_limit(owner, "limit", limit)
        self._embedding_limit = check_limit(owner, "embedding_limit", embedding_limit)
        if embedding_limit is not None and not self.can_embed:
            raise ConfigurationError(
                f"{owner} has no embeddings API: embedding_limit= has nothing to limit"
            )
        self._quota = check_quota(owner, quota)
        url = base_url if base_url is not None else self.default_base_url
        if not isinstance(url, str) or not url:
            raise ConfigurationError(f"{owner} needs a base_url (a str)")
        if headers is not None and not isinstance(headers, Mapping):
            raise ConfigurationError(f"{owner} headers must be a mapping of str to str")
        if api_key is not None and not isinstance(api_key, str) and not callable(api_key):
            raise ConfigurationError(
                f"{owner} api_key must be a str or a callable returning one, got "
                f"{type(api_key).__name__}"
            )
        self.model = model
        self.base_url = _checked_url(owner, url.rstrip("/"))
        self.headers = _checked_headers(owner, headers)
        if params is not None and not isinstance(params, Mapping):
            raise ConfigurationError(
                f"{owner} params must be a dict of request body fields, got {params!r}"
            )
        problem = _native.json_problem(dict(params)) if params is not None else None
        if problem is not None:
            raise ConfigurationError(f"{owner} params cannot be sent as JSON: {problem}")
        self.params: dict[str, typing.Any] | None = dict(params) if params is not None else None
        if not isinstance(allow_insecure, bool):
            raise ConfigurationError(
                f"{owner} allow_insecure must be True or False, got {allow_insecure!r}"
            )
        self.allow_insecure = allow_insecure
        if overloaded_statuses is not None:
            # Added to the wire's own (a provider's 498 does not drop 503).
            extra = _overloaded_statuses(owner, overloaded_statuses)
            self.overloaded_statuses = tuple(dict.fromkeys((*self.overloaded_statuses, *extra)))
        self._api_key = api_key
        self._env_var = self.env_var
        self._key_required = self.key_required
        # Checked when given: a key callable that cannot be called as it
        # will be, and a credential bound for plain http.
        problem = _key_callable_problem(api_key)
        if isinstance(api_key, str):
            text_problem = _key_text_problem(api_key.strip())
            problem = f"api_key {text_problem}" if text_problem is not None else None
        if problem is not None:
            raise ConfigurationError(f"{owner} {problem}")
        if (
            api_key is not None
            or any(map(_native.is_credential_header, self.headers))
            or _url_has_credentials(self.base_url)
        ):
            self._check_secure(None)

    def _model_problem(self, model: str) -> str | None:
        """Why ``model`` cannot be sent to this provider, or ``None``. Wires
        that put the model in the URL path (Gemini, Azure) refuse what would
        change the path."""
        return None

    def _resolve_key(self, name: str) -> ApiKey | None:
        """The key to send, checked; raises ConfigurationError naming what is missing."""
        key = self._api_key
        if callable(key):
            # Called for each attempt (from a worker thread on async calls);
            # what it returns is checked then (the callable itself was checked
            # when given).
            self._check_secure(name)
            return key
        source = "its API key"
        fallbacks = self.env_fallbacks if self._env_var == self.env_var else ()
        variables = (self._env_var, *fallbacks) if self._env_var else ()
        if key is None and variables:
            # The first variable that holds a key; a blank one (a stray space)
            # is named only when none does.
            present = [(v, os.environ[v]) for v in variables if os.environ.get(v)]
            holding = [(v, value) for v, value in present if value.strip()]
            if holding or present:
                source, key = (holding or present)[0]
        if key is not None:
            # Keys read from files and variables often end in a newline.
            key = key.strip()
            problem = _key_text_problem(key)
            if problem is not None:
                raise ConfigurationError(f"provider {name!r}: {source} {problem}")
        if key is None and self._key_required and not self._key_header_given():
            where = (
                f"set {' or '.join(variables)} or pass api_key=" if variables else "pass api_key="
            )
            raise ConfigurationError(
                f"provider {name!r} ({type(self).__name__}) has no API key: {where}"
            )
        if (
            key is not None
            or any(map(_native.is_credential_header, self.headers))
            or _url_has_credentials(self.base_url)
        ):
            self._check_secure(name)
        return key

    def _key_header_given(self) -> bool:
        """Whether ``headers`` carry a credential under the name the key travels in
        (a gateway's token in ``Authorization``): it is sent instead, so no key is
        needed."""
        wanted = {_native.key_header_name(self.wire, entra) for entra in (False, True)}
        return any(name.lower() in wanted for name in self.headers)

    def _check_secure(self, name: str | None) -> None:
        """Refuses a credential bound for plain http (``name`` None: the provider
        is not in a client yet, and is named by its class)."""
        if not self.allow_insecure and not _safe_for_secrets(self.base_url):
            who = type(self).__name__ if name is None else f"provider {name!r}"
            raise ConfigurationError(
                f"{who} would send a credential over plain http to "
                f"{_display_url(self.base_url)}; use https, or pass allow_insecure=True"
            )

    def _spec(self, name: str) -> ProviderSpec:
        return ProviderSpec(self, name, self._resolve_key(name))

    def __repr__(self) -> str:
        url = _display_url(self.base_url)
        return f"{type(self).__name__}(model={self.model!r}, base_url={url!r})"


def _is_path_segment(name: str) -> bool:
    """Whether ``name`` is one URL path segment as it is: no separator, no
    query or fragment, no dot segment."""
    return (
        bool(name)
        and name not in (".", "..")
        and all(c.isascii() and (c.isalnum() or c in "-_.") for c in name)
    )


def _checked_headers(owner: str, headers: object) -> dict[str, str]:
    """Headers the transport can send as given: names and values it can
    carry, none of the framing headers it writes itself."""
    if headers is None:
        return {}
    if not isinstance(headers, Mapping):
        raise ConfigurationError(f"{owner} headers must be a mapping of str to str")
    checked = {}
    for k, v in headers.items():
        name = header_text(f"{owner} headers: a header name", k)
        value = header_text(f"{owner} headers: header {name!r}", v)
        problem = _native.check_header(name, value)
        if problem is None and name.lower() in _TRANSPORT_HEADERS:
            problem = f"{name!r} is set by the transport for each request; it cannot be given"
        if problem is not None:
            raise ConfigurationError(f"{owner} headers: {problem}")
        checked[name] = value
    return checked


def _overloaded_statuses(owner: str, statuses: object) -> tuple[int, ...]:
    """Statuses that mean "overloaded", added to the defaults: server errors
    (5xx) or a provider's own 4xx (Groq's 498); never a 429, which is
    already a rate limit, nor an auth, not-found or too-large status."""
    claimed = (400, 401, 402, 403, 404, 408, 413, 429)
    # A dict iterates as its keys: refused, as the docs say "a list".
    if isinstance(statuses, (str, bytes, Mapping)) or not isinstance(statuses, Iterable):
        raise ConfigurationError(
            f"{owner} overloaded_statuses must be a list of statuses, got {statuses!r}"
        )
    values = tuple(statuses)
    for status in values:
        if (
            not isinstance(status, int)
            or isinstance(status, bool)
            or not 400 <= status <= 599
            or status in claimed
        ):
            raise ConfigurationError(
                f"{owner} overloaded_statuses must be 4xx or 5xx statuses that mean "
                f"'overloaded' (not 429 or an auth, not-found or too-large status), "
                f"got {status!r}"
            )
    return values


def _url_problem(url: str) -> str | None:
    """Why the transport cannot use ``url``, or ``None``."""
    try:
        return _native.check_base_url(url)
    except UnicodeEncodeError:
        return "it holds characters that are not valid Unicode"


def _url_parts(url: str) -> tuple[str, str, int | None, str, bool] | None:
    """``url`` as the transport reads it (scheme, host, port, path, has a
    query), or ``None``: never another parser's reading."""
    try:
        return _native.url_parts(url)
    except UnicodeEncodeError:
        return None


def _url_has_credentials(url: str) -> bool:
    """Whether the URL itself carries a credential: a user part, or a
    credential-named query value (``?key=``, ``?sig=``)."""
    try:
        return _native.url_has_credentials(url)
    except UnicodeEncodeError:
        return True  # unreadable: treated as the worst case


def _is_api_version(version: object) -> bool:
    """``2024-10-21`` or ``2025-04-01-preview``."""
    if not isinstance(version, str):
        return False
    date, _, suffix = version.partition("-preview")
    parts = date.split("-")
    return (
        suffix == ""
        and len(parts) == 3
        and [len(p) for p in parts] == [4, 2, 2]
        and all(p.isascii() and p.isdigit() for p in parts)
    )


def _checked_url(owner: str, url: str, what: str = "base_url") -> str:
    """``url`` if the transport can use it, read exactly as the transport
    will (so a bad one fails here, not at call time)."""
    problem = _url_problem(url)
    if problem is not None:
        raise ConfigurationError(
            f"{owner} {what} must be an http(s) URL with a host; "
            f"{_display_url(url)!r} is not: {problem}"
        )
    return url


def _display_url(url: str) -> str:
    """``url`` as the transport reads it, without a user part or a query
    (either may hold a key); nothing of it when it does not parse, since a
    malformed URL may put a password anywhere."""
    parts = _url_parts(url)
    if parts is None:
        return "<a URL that does not parse>"
    scheme, host, port, path, has_query = parts
    netloc = host if port is None else f"{host}:{port}"
    return f"{scheme}://{netloc}{'' if path == '/' else path}{'?...' if has_query else ''}"


def _safe_for_secrets(url: str) -> bool:
    # Imported on first use: it is not cheap, and `import failover` should be.
    import ipaddress

    parts = _url_parts(url)
    if parts is None:
        return False
    scheme, host = parts[0], parts[1]
    if scheme == "https":
        return True
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class OpenAI(Provider):
    """OpenAI Chat Completions. Key: ``OPENAI_API_KEY``."""

    default_base_url = "https://api.openai.com/v1"
    env_var = "OPENAI_API_KEY"
    max_tokens_field = "max_completion_tokens"
    embed_base64 = True
    media = ("image", "speech", "transcription")
    default_media_models = (
        ("image", "gpt-image-1"),
        ("speech", "gpt-4o-mini-tts"),
        ("transcription", "gpt-4o-mini-transcribe"),
    )


class Anthropic(Provider):
    """Anthropic Messages. Key: ``ANTHROPIC_API_KEY``. 529 means overloaded."""

    wire = "anthropic"
    genai_prices_id = "anthropic"
    otel_provider_name = "anthropic"
    default_base_url = "https://api.anthropic.com/v1"
    env_var = "ANTHROPIC_API_KEY"
    overloaded_statuses = (*DEFAULT_OVERLOADED_STATUSES, 529)
    can_embed = False


class Gemini(Provider):
    """Gemini's native API (``generateContent``, ``batchEmbedContents``).

    Key: ``GEMINI_API_KEY`` (else ``GOOGLE_API_KEY``), sent as ``x-goog-api-key``.
    """

    wire = "gemini"
    genai_prices_id = "google"
    otel_provider_name = "gcp.gemini"
    default_base_url = "https://generativelanguage.googleapis.com/v1beta"
    env_var = "GEMINI_API_KEY"
    env_fallbacks = ("GOOGLE_API_KEY",)
    # All three are generateContent calls; a transcription is an ordinary
    # multimodal prompt, which the provider's own model answers.
    media = ("image", "speech", "transcription")
    default_media_models = (
        ("image", "gemini-2.5-flash-image"),
        ("speech", "gemini-2.5-flash-preview-tts"),
    )
    transcribes_with_model = True

    def _model_problem(self, model: str) -> str | None:
        # `gemini-2.5-flash`, or a resource name: `models/...`, `tunedModels/...`.
        collection, _, name = model.rpartition("/")
        if collection not in ("", "models", "tunedModels") or not _is_path_segment(name):
            return (
                f"{model!r} is not a Gemini model name (letters, digits, '-', '_', '.', "
                "optionally after models/ or tunedModels/)"
            )
        return None


class Ollama(Provider):
    """Ollama's native API (``/api/chat``, ``/api/embed``) at
    ``http://localhost:11434``. No key needed; pass ``api_key=`` for ollama.com."""

    wire = "ollama"
    genai_prices_id: typing.ClassVar[str | None] = None
    otel_provider_name = "ollama"
    default_base_url = "http://localhost:11434"
    key_required = False


class Azure(Provider):
    """Azure OpenAI: a deployment of a resource.

    ``endpoint`` is the resource URL (``https://NAME.openai.azure.com``,
    default: ``AZURE_OPENAI_ENDPOINT``); the key comes from
    ``AZURE_OPENAI_API_KEY`` and travels as ``api-key``. A callable
    ``api_key`` returns an Entra ID token, sent as a bearer token, called for
    each attempt. Requests go to
    ``{endpoint}/openai/deployments/{deployment}/...?api-version=...``;
    ``api_version=None`` uses the v1 form ``{endpoint}/openai/v1/...``.
    ``embedding_model`` names the embeddings deployment.
    """

    wire = "azure"
    genai_prices_id = "azure"
    otel_provider_name = "azure.ai.openai"
    env_var = "AZURE_OPENAI_API_KEY"
    max_tokens_field = "max_completion_tokens"
    embed_base64 = True
    #: Each names its deployment: image_model=, speech_model=, transcription_model=.
    media = ("image", "speech", "transcription")

    def __init__(
        self,
        deployment: str,
        *,
        endpoint: str | None = None,
        api_version: str | None = "2024-10-21",
        api_key: ApiKey | None = None,
        headers: Mapping[str, str] | None = None,
        allow_insecure: bool = False,
        overloaded_statuses: Sequence[int] | None = None,
        params: Mapping[str, typing.Any] | None = None,
        embedding_model: str | None = None,
        image_model: str | None = None,
        speech_model: str | None = None,
        transcription_model: str | None = None,
        price: Price | None = None,
        embedding_price: Price | None = None,
        limit: Limit | None = None,
        embedding_limit: Limit | None = None,
        quota: str | None = None,
    ) -> None:
        if not isinstance(deployment, str) or not _is_path_segment(deployment):
            raise ConfigurationError(
                f"Azure deployment must be a deployment name (letters, digits, '-', '_', '.'), "
                f"got {deployment!r}"
            )
        if endpoint is None:
            endpoint = os.environ.get("AZURE_OPENAI_ENDPOINT") or None
            if endpoint is None:
                raise ConfigurationError(
                    "Azure needs the resource URL: set AZURE_OPENAI_ENDPOINT or pass endpoint="
                )
        if not isinstance(endpoint, str) or not endpoint.strip():
            raise ConfigurationError(f"Azure endpoint must be a URL (a str), got {endpoint!r}")
        if api_version is not None and not _is_api_version(api_version):
            raise ConfigurationError(
                f"Azure api_version must be a dated version like '2024-10-21' or "
                f"'2025-04-01-preview' (or None for the v1 API), got {api_version!r}"
            )
        endpoint = endpoint.strip().rstrip("/")
        _checked_url("Azure", endpoint, what="endpoint")
        if endpoint.endswith("/openai") or "/openai/" in endpoint:
            raise ConfigurationError(
                f"Azure endpoint is the resource URL (https://NAME.openai.azure.com), "
                f"without /openai: got {_display_url(endpoint)!r}"
            )
        if "?" in endpoint:
            raise ConfigurationError("Azure endpoint takes no query: pass api_version=")
        # The deployments form puts each deployment in the path (the wire
        # adds it); the v1 form names it as the body's model.
        base_url = (
            f"{endpoint}/openai/v1"
            if api_version is None
            else f"{endpoint}/openai?api-version={api_version}"
        )
        super().__init__(
            deployment,
            api_key=api_key,
            base_url=base_url,
            headers=headers,
            allow_insecure=allow_insecure,
            overloaded_statuses=overloaded_statuses,
            params=params,
            embedding_model=embedding_model,
            image_model=image_model,
            speech_model=speech_model,
            transcription_model=transcription_model,
            price=price,
            embedding_price=embedding_price,
            limit=limit,
            embedding_limit=embedding_limit,
            quota=quota,
        )
        self.deployment = deployment
        self.endpoint = endpoint
        self.api_version = api_version

    def _model_problem(self, model: str) -> str | None:
        if not _is_path_segment(model):
            return f"{model!r} is not a deployment name (letters, digits, '-', '_', '.')"
        return None

    def _spec(self, name: str) -> ProviderSpec:
        spec = super()._spec(name)
        spec.entra_token = callable(self._api_key)
        return spec

    def __repr__(self) -> str:
        return (
            f"Azure(deployment={self.deployment!r}, endpoint={_display_url(self.endpoint)!r}, "
            f"api_version={self.api_version!r})"
        )


class OpenAICompatible(Provider):
    """Any server speaking OpenAI Chat Completions at ``base_url``.

    The key is optional: pass ``api_key=`` or name a variable with ``api_key_env=``.
    """

    key_required = False
    genai_prices_id: typing.ClassVar[str | None] = None
    otel_provider_name = "openai_compatible"
    genai_prices_by_url = True
    #: OpenAI's image and audio paths; which the server has is its own
    #: (a call to a path it lacks fails like any 404).
    media: typing.ClassVar[tuple[str, ...]] = ("image", "speech", "transcription")

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: ApiKey | None = None,
        api_key_env: str | None = None,
        headers: Mapping[str, str] | None = None,
        allow_insecure: bool = False,
        overloaded_statuses: Sequence[int] | None = None,
        params: Mapping[str, typing.Any] | None = None,
        embedding_model: str | None = None,
        image_model: str | None = None,
        speech_model: str | None = None,
        transcription_model: str | None = None,
        price: Price | None = None,
        embedding_price: Price | None = None,
        limit: Limit | None = None,
        embedding_limit: Limit | None = None,
        quota: str | None = None,
    ) -> None:
        super().__init__(
            model,
            api_key=api_key,
            base_url=base_url,
            headers=headers,
            allow_insecure=allow_insecure,
            overloaded_statuses=overloaded_statuses,
            params=params,
            embedding_model=embedding_model,
            image_model=image_model,
            speech_model=speech_model,
            transcription_model=transcription_model,
            price=price,
            embedding_price=embedding_price,
            limit=limit,
            embedding_limit=embedding_limit,
            quota=quota,
        )
        if api_key_env is not None:
            if not isinstance(api_key_env, str) or not api_key_env:
                raise ConfigurationError("api_key_env must name an environment variable")
            utf8_text("api_key_env", api_key_env)
            self._env_var = api_key_env
            self._key_required = True


# The OpenAI-compatible family: presets (data, not wire modules) with each
# one's real base URL, key variable, overloaded statuses and embeddings.


class Groq(OpenAICompatible):
    """Groq. Key: ``GROQ_API_KEY``. 498 (capacity exceeded) means overloaded. No embeddings."""

    default_base_url = "https://api.groq.com/openai/v1"
    genai_prices_id = "groq"
    otel_provider_name = "groq"
    env_var = "GROQ_API_KEY"
    key_required = True
    overloaded_statuses = (*DEFAULT_OVERLOADED_STATUSES, 498)
    can_embed = False
    media = ("transcription",)
    default_media_models = (("transcription", "whisper-large-v3-turbo"),)


class Mistral(OpenAICompatible):
    """Mistral. Key: ``MISTRAL_API_KEY``. Embeddings take ``dimensions`` as ``output_dimension``;
    ``seed`` goes as ``random_seed``; other providers' tool-call ids are rewritten to the 9
    letters or digits Mistral accepts."""

    default_base_url = "https://api.mistral.ai/v1"
    genai_prices_id = "mistral"
    otel_provider_name = "mistral_ai"
    env_var = "MISTRAL_API_KEY"
    key_required = True
    dimensions_field = "output_dimension"
    stream_usage = False
    seed_field = "random_seed"
    mistral_rules = True
    media = ("transcription",)
    default_media_models = (("transcription", "voxtral-mini-latest"),)


class DeepSeek(OpenAICompatible):
    """DeepSeek. Key: ``DEEPSEEK_API_KEY``. No embeddings."""

    default_base_url = "https://api.deepseek.com"
    genai_prices_id = "deepseek"
    otel_provider_name = "deepseek"
    env_var = "DEEPSEEK_API_KEY"
    key_required = True
    can_embed = False
    media = ()


class XAI(OpenAICompatible):
    """xAI (Grok). Key: ``XAI_API_KEY``. A bad key is a 400 it words as one. No embeddings."""

    default_base_url = "https://api.x.ai/v1"
    genai_prices_id = "x-ai"
    otel_provider_name = "x_ai"
    env_var = "XAI_API_KEY"
    key_required = True
    can_embed = False
    media = ()


class OpenRouter(OpenAICompatible):
    """OpenRouter. Key: ``OPENROUTER_API_KEY``. An error inside a 200 is a failure,
    classified by its code; the upstream provider's message is in the error's text."""

    default_base_url = "https://openrouter.ai/api/v1"
    genai_prices_id = "openrouter"
    media = ()
    otel_provider_name = "openrouter"
    env_var = "OPENROUTER_API_KEY"
    key_required = True


class Pool:
    """Equivalent providers (several keys, regions or deployments of one model)
    standing in a chain as one: calls spread across the members, a cooling member
    is skipped, and the chain moves on only when every member has failed or is
    cooling. ``strategy``: ``"round_robin"`` (each call starts at the next member)
    or ``"least_busy"`` (members with fewer requests in flight first).

    ``members`` is a list (named ``"{name}/{index}"`` in ``.attempts``,
    ``r.provider`` and ``cooldowns()``) or a dict of member names. ``name`` must be
    the pool's key in the client's ``providers``; ``provider=`` names the pool.
    """

    STRATEGIES: typing.ClassVar[tuple[str, ...]] = ("round_robin", "least_busy")

    def __init__(
        self,
        name: str,
        members: Sequence[Provider] | Mapping[str, Provider],
        *,
        strategy: str = "round_robin",
        limit: Limit | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"Pool needs a name (a non-empty str), got {name!r}")
        _check_name(name, "Pool name")
        if isinstance(members, Mapping):
            named = list(members.items())
        elif isinstance(members, Sequence) and not isinstance(members, (str, bytes)):
            named = [(f"{name}/{i}", member) for i, member in enumerate(members)]
        else:
            raise ConfigurationError(
                f"Pool {name!r}: members is a list of providers or a dict of them, got {members!r}"
            )
        if not named:
            raise ConfigurationError(f"Pool {name!r} needs at least one member")
        for member_name, member in named:
            if not isinstance(member_name, str) or not member_name:
                raise ConfigurationError(
                    f"Pool {name!r}: member names are non-empty strings, got {member_name!r}"
                )
            if isinstance(members, Mapping):
                _check_name(member_name, f"Pool {name!r}: member name")
            if not isinstance(member, Provider):
                raise ConfigurationError(
                    f"Pool {name!r}: member {member_name!r} must be a failover provider, "
                    f"got {member!r}"
                )
        if strategy not in self.STRATEGIES:
            raise ConfigurationError(
                f'Pool {name!r}: strategy is "round_robin" or "least_busy", got {strategy!r}'
            )
        self.name = name
        self.members: dict[str, Provider] = dict(named)
        self.strategy = strategy
        #: Bounds every call to its members together (each member's own
        #: ``limit=`` applies too).
        self.limit = check_limit(f"Pool {name!r}:", "limit", limit)
        #: Members named by the caller (a dict), not numbered.

    def __repr__(self) -> str:
        members = ", ".join(f"{n!r}: {p!r}" for n, p in self.members.items())
        limit = f", limit={self.limit!r}" if self.limit is not None else ""
        return f"Pool({self.name!r}, {{{members}}}, strategy={self.strategy!r}{limit})"
