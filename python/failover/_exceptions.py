"""The exceptions failover raises.

Every error is a ``FailoverError``; every error raised at the end of a call
carries ``.attempts`` and, where the provider sent one, ``.retry_after``::

    FailoverError
    ├── ConfigurationError (also ValueError)
    ├── DeadlineExceeded (also TimeoutError)
    ├── StreamInterrupted
    └── ProviderError                .provider .model .status .request_id .retry_after .body .kind
        ├── RateLimited
        ├── ProviderOverloaded
        ├── ServerError
        ├── InsufficientCredits
        ├── AuthenticationError
        ├── BadRequest
        │   ├── ContextLengthExceeded
        │   └── ModelNotFound
        └── ProviderConnectionError
            └── ProviderTimeout (also TimeoutError)
"""

from __future__ import annotations

from ._attempt import Attempt, _attempts, _Totals
from ._usage import Usage

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see _typing.py)
if TYPE_CHECKING:
    import typing
else:
    from . import _typing as typing

__all__ = [
    "AuthenticationError",
    "BadRequest",
    "ConfigurationError",
    "ContextLengthExceeded",
    "DeadlineExceeded",
    "FailoverError",
    "InsufficientCredits",
    "ModelNotFound",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderOverloaded",
    "ProviderTimeout",
    "RateLimited",
    "ServerError",
    "StreamInterrupted",
]


class FailoverError(_Totals, Exception):
    """Base class of every error failover raises.

    A failed call's error carries its ``attempts`` and what they used and
    cost so far: ``total_usage``, ``total_cost``, ``unpriced_attempts``.
    """

    attempts: tuple[Attempt, ...] = ()
    retry_after: float | None = None
    #: The failed call's id (as its events carry), where a call failed.
    call_id: str | None = None


class ConfigurationError(FailoverError, ValueError):
    """The client, a provider or a call was configured wrongly."""


class DeadlineExceeded(FailoverError, TimeoutError):
    """The call's deadline left no time to start an attempt, or cut one short.

    ``__cause__`` is the last provider error seen before it, if any.
    """

    def __init__(
        self, message: str, *, deadline: float | None = None, call_id: str | None = None
    ) -> None:
        super().__init__(message)
        self.deadline = deadline
        self.call_id = call_id


class StreamInterrupted(FailoverError):
    """A stream failed after its first content chunk was delivered: never
    retried silently, since that would repeat text the caller has seen.

    ``partial_text`` is the text delivered before the failure, ``provider``
    the provider that was streaming, ``usage`` what it reported so far
    (a ``Usage``, or ``None``), and ``__cause__`` the ``ProviderError``.
    """

    def __init__(
        self,
        message: str,
        *,
        partial_text: str = "",
        provider: str | None = None,
        usage: typing.Any = None,
        call_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.partial_text = partial_text
        self.provider = provider
        self.usage = usage
        self.call_id = call_id

    def __repr__(self) -> str:
        return (
            f"StreamInterrupted({str(self)!r}, provider={self.provider!r}, "
            f"partial_text={len(self.partial_text)} chars)"
        )


class ProviderError(FailoverError):
    """A provider answered with an error, or could not be reached."""

    kind: str = "provider_error"

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        model: str | None = None,
        status: int | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
        body: str | None = None,
        kind: str | None = None,
        attempts: tuple[Attempt, ...] = (),
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.model = model
        self.status = status
        self.request_id = request_id
        self.retry_after = retry_after
        self.body = body
        if kind is not None:
            self.kind = kind
        self.attempts = attempts

    def __repr__(self) -> str:
        parts = [repr(str(self))]
        for name in ("provider", "status", "retry_after"):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(parts)})"


class RateLimited(ProviderError):
    """429, Gemini RESOURCE_EXHAUSTED, or an in-stream rate-limit error."""

    kind = "rate_limited"


class ProviderOverloaded(ProviderError):
    """One of the provider's overloaded statuses (503, Anthropic's 529, ...)."""

    kind = "overloaded"


class ServerError(ProviderError):
    """Any other 5xx, or a success whose body was truncated or malformed."""

    kind = "server_error"


class InsufficientCredits(ProviderError):
    """402, OpenAI ``insufficient_quota``, a credit-balance message."""

    kind = "insufficient_credits"


class AuthenticationError(ProviderError):
    """401, 403, or a 400 that says the key is invalid. Fails over by default
    (another provider has its own key), logged at WARNING; name ``"auth"`` in
    ``RetryPolicy(stop_on=...)`` to end the call instead."""

    kind = "auth"


class BadRequest(ProviderError):
    """Any other 4xx: the request itself is wrong; retrying cannot help."""

    kind = "bad_request"


class ContextLengthExceeded(BadRequest):
    """The request is too large for the model (``context_length_exceeded``,
    a 413); another model may take it, so it fails over."""

    kind = "too_large"


class ModelNotFound(BadRequest):
    """A 404: this provider has no such model or deployment. Fails over by
    default (another provider has its own models), logged at WARNING; name
    ``"not_found"`` in ``RetryPolicy(stop_on=...)`` to end the call instead."""

    kind = "not_found"


class ProviderConnectionError(ProviderError):
    """Refused, DNS failure, or a connection reset before a response."""

    kind = "connection"


class ProviderTimeout(ProviderConnectionError, TimeoutError):
    """No connection within ``connect_timeout``, no response within the
    attempt's timeout, or a 408 (the server gave up waiting)."""

    kind = "timeout"


_BY_KIND: dict[str, type[ProviderError]] = {
    cls.kind: cls
    for cls in (
        RateLimited,
        ProviderOverloaded,
        ServerError,
        InsufficientCredits,
        AuthenticationError,
        BadRequest,
        ContextLengthExceeded,
        ModelNotFound,
        ProviderConnectionError,
        ProviderTimeout,
    )
}


def _provider_error(
    *,
    kind: str,
    message: str,
    provider: str,
    model: str,
    status: int | None,
    request_id: str | None,
    retry_after: float | None,
    body: str | None,
    attempts: list[typing.Any] | None,
    call_id: str | None = None,
) -> ProviderError:
    """Called by the native module to build the exception for a failed attempt
    (``call_id``: the call's, when it is the error the call raises)."""
    cls = _BY_KIND.get(kind, ProviderError)
    error = cls(
        message,
        provider=provider,
        model=model,
        status=status,
        request_id=request_id,
        retry_after=retry_after,
        body=body,
        kind=kind,
        attempts=_attempts(attempts or ()),
    )
    error.call_id = call_id
    return error


def _deadline_error(
    *,
    deadline: float,
    attempts: list[typing.Any],
    cause: ProviderError | None,
    call_id: str,
    waiting_for: str | None = None,
) -> DeadlineExceeded:
    """Called by the native module when the deadline ends a call;
    ``waiting_for``: the provider it was waiting for room at under the
    client's limits, and why it had none."""
    shown = _attempts(attempts)
    # (Providers passed over sent nothing: not attempts here.)
    sent = sum(1 for attempt in shown if attempt.skipped is None)
    message = f"deadline of {deadline:g}s exceeded after {sent} attempt(s)"
    if waiting_for is not None:
        message += f" while waiting for capacity ({waiting_for})"
    if cause is not None:
        message += f"; last error: {cause}"
    error = DeadlineExceeded(message, deadline=deadline, call_id=call_id)
    error.attempts = shown
    if cause is not None:
        error.__cause__ = cause
        error.retry_after = cause.retry_after
    return error


def _stream_interrupted(
    *,
    cause: BaseException,
    partial_text: str,
    provider: str,
    usage: tuple[int | None, ...],
    attempts: list[typing.Any],
    call_id: str,
) -> StreamInterrupted:
    """Called by the native module when a stream breaks after its first content."""
    # A speech stream (or one of tool calls only) has content but no text.
    shown = f"{len(partial_text)} characters" if partial_text else "its first content"
    message = f"the stream from {provider} broke after {shown}: {cause}"
    error = StreamInterrupted(
        message,
        partial_text=partial_text,
        provider=provider,
        usage=Usage(*usage) if any(v is not None for v in usage) else None,
        call_id=call_id,
    )
    error.attempts = _attempts(attempts)
    error.retry_after = getattr(cause, "retry_after", None)
    error.__cause__ = cause
    return error


def _unserved_error(message: str, attempts: list[typing.Any]) -> ConfigurationError:
    """Called by the native module when no provider in the chain can serve
    the call (a feature none of their wires can express): nothing was sent."""
    error = ConfigurationError(message)
    error.attempts = _attempts(attempts)
    return error
