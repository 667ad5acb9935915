"""failover: LLM calls that survive rate limits, overloads and outages.

Reads what the provider says about waiting, waits briefly when that is
cheaper than switching, fails over to the next provider when it is not, and
never waits longer than the caller allowed. The engine is Rust; sync and
async calls run the same engine future.
"""

from ._attempt import Attempt
from ._client import Client
from ._cost import Price
from ._events import CallFailed, FailedOver, HedgeStarted, HedgeWon, RetryScheduled
from ._exceptions import (
    AuthenticationError,
    BadRequest,
    ConfigurationError,
    ContextLengthExceeded,
    DeadlineExceeded,
    FailoverError,
    InsufficientCredits,
    ModelNotFound,
    ProviderConnectionError,
    ProviderError,
    ProviderOverloaded,
    ProviderTimeout,
    RateLimited,
    ServerError,
    StreamInterrupted,
)
from ._fleet import RedisState
from ._health import Headroom, ProviderHealth
from ._hedge import Hedge
from ._hints import retry_after
from ._limits import Limit
from ._models import (
    Embeddings,
    Image,
    ImageResponse,
    Response,
    Segment,
    SpeechResponse,
    Tool,
    ToolCall,
    Transcription,
)
from ._native import __version__
from ._policy import Backoff, RetryBudget, RetryPolicy
from ._providers import (
    XAI,
    Anthropic,
    Azure,
    DeepSeek,
    Gemini,
    Groq,
    Mistral,
    Ollama,
    OpenAI,
    OpenAICompatible,
    OpenRouter,
    Pool,
    Provider,
)
from ._stats import ProviderStats, Stats
from ._stream import AsyncSpeechStream, AsyncStream, Chunk, SpeechStream, Stream
from ._telemetry import OpenTelemetry
from ._usage import Usage

__all__ = [
    "XAI",
    "Anthropic",
    "AsyncSpeechStream",
    "AsyncStream",
    "Attempt",
    "AuthenticationError",
    "Azure",
    "Backoff",
    "BadRequest",
    "CallFailed",
    "Chunk",
    "Client",
    "ConfigurationError",
    "ContextLengthExceeded",
    "DeadlineExceeded",
    "DeepSeek",
    "Embeddings",
    "FailedOver",
    "FailoverError",
    "Gemini",
    "Groq",
    "Headroom",
    "Hedge",
    "HedgeStarted",
    "HedgeWon",
    "Image",
    "ImageResponse",
    "InsufficientCredits",
    "Limit",
    "Mistral",
    "ModelNotFound",
    "Ollama",
    "OpenAI",
    "OpenAICompatible",
    "OpenRouter",
    "OpenTelemetry",
    "Pool",
    "Price",
    "Provider",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderHealth",
    "ProviderOverloaded",
    "ProviderStats",
    "ProviderTimeout",
    "RateLimited",
    "RedisState",
    "Response",
    "RetryBudget",
    "RetryPolicy",
    "RetryScheduled",
    "Segment",
    "ServerError",
    "SpeechResponse",
    "SpeechStream",
    "Stats",
    "Stream",
    "StreamInterrupted",
    "Tool",
    "ToolCall",
    "Transcription",
    "Usage",
    "__version__",
    "retry_after",
]

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see _typing.py)
if not TYPE_CHECKING:
    # The public classes' annotations are read here (they report this module),
    # and name ``typing.Any`` and ``typing.ClassVar``: the lazy typing, which
    # imports the real one when a hint is resolved.
    from . import _typing as typing  # noqa: F401


def _publish() -> None:
    """The public names report the package they are used from, as httpx's
    do: reprs, tracebacks and docs say ``failover.RateLimited``, not the
    private module it is written in, and pickle finds each here.
    ``typing.get_type_hints`` then reads a class's annotations (strings) in
    this package's namespace: they name only public classes, builtins and
    ``typing`` (bound above), as tests/test_public_api.py checks."""
    public = globals()
    for name in __all__:
        value = public[name]
        if getattr(value, "__module__", "").startswith("failover."):
            value.__module__ = "failover"  # not __version__: no module of its own


_publish()
