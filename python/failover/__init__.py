"""failover: LLM calls that survive rate limits, overloads and outages.

Reads what the provider says about waiting, waits briefly when that is
cheaper than switching, fails over to the next provider when it is not, and
never waits longer than the caller allowed. The engine is Rust; sync and
async calls run the same engine future.
"""

from ._attempt import Attempt
from ._client import Client
from ._events import CallFailed, FailedOver, RetryScheduled
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
from ._hints import retry_after
from ._models import Embeddings, Response, Tool, ToolCall
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
from ._stream import AsyncStream, Chunk, Stream
from ._usage import Usage

__all__ = [
    "XAI",
    "Anthropic",
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
    "InsufficientCredits",
    "Mistral",
    "ModelNotFound",
    "Ollama",
    "OpenAI",
    "OpenAICompatible",
    "OpenRouter",
    "Pool",
    "Provider",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderOverloaded",
    "ProviderTimeout",
    "RateLimited",
    "RedisState",
    "Response",
    "RetryBudget",
    "RetryPolicy",
    "RetryScheduled",
    "ServerError",
    "Stream",
    "StreamInterrupted",
    "Tool",
    "ToolCall",
    "Usage",
    "__version__",
    "retry_after",
]
