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


def _publish() -> None:
    """The public names report the package they are used from, as httpx's
    do: reprs, tracebacks and docs say ``failover.RateLimited``, not the
    private module it is written in, and pickle finds each here. A class's
    own annotations are resolved first, in the module that wrote them:
    ``typing.get_type_hints`` would look them up in this package."""
    import sys
    from types import CodeType

    public = globals()
    compiled: dict[str, CodeType] = {}  # a hint is written alike in many classes
    for name in __all__:
        value = public[name]
        module = getattr(value, "__module__", "")
        if not module.startswith("failover."):
            continue  # __version__: no module of its own
        own = vars(value).get("__annotations__") if isinstance(value, type) else None
        if own:
            # As get_type_hints reads them: the module's names before the class's.
            where, shadows = vars(sys.modules[module]), dict(vars(value))
            resolved = {}
            for field, hint in own.items():
                if isinstance(hint, str):
                    code = compiled.get(hint) or compiled.setdefault(
                        hint, compile(hint, "<annotation>", "eval")
                    )
                    try:
                        hint = eval(code, shadows, where)  # our own annotations
                    except Exception:
                        pass  # left as written: get_type_hints says why, as before
                resolved[field] = hint
            value.__annotations__ = resolved
        value.__module__ = "failover"


_publish()
