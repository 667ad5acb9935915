"""Argument checks shared by the public constructors: a bad option is a
ConfigurationError when it is given, never a surprise at call time."""

from __future__ import annotations

from ._exceptions import ConfigurationError
from ._native import MAX_RETRIES as MAX_RETRIES
from ._native import MAX_SECONDS as MAX_SECONDS

# Both are the engine's. MAX_SECONDS (1e9, about 31 years): longer than any
# wait or timeout anyone means, and the value an absurd Retry-After counts
# as. MAX_RETRIES: more retries than any policy should make on one provider
# in one call (the engine bounds a backoff's exponent by it too).

# -_INF < x < _INF is math.isfinite(x) for an int or a float (NaN compares
# false), without loading the math extension at import.
_INF = float("inf")


def seconds(name: str, value: object, *, positive: bool = False) -> float:
    """A finite number of seconds, >= 0 (> 0 with ``positive``)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ConfigurationError(f"{name} must be a number of seconds, got {value!r}")
    low_ok = value > 0 if positive else value >= 0
    if not -_INF < value < _INF or not low_ok or value > MAX_SECONDS:
        bound = "> 0" if positive else ">= 0"
        raise ConfigurationError(
            f"{name} must be a finite number of seconds {bound} and <= {MAX_SECONDS:g}, "
            f"got {value!r}"
        )
    return float(value)


def count(name: str, value: object, *, minimum: int = 0, maximum: int = MAX_RETRIES) -> int:
    """A whole number in ``[minimum, maximum]``."""
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= maximum:
        raise ConfigurationError(
            f"{name} must be an int from {minimum} to {maximum}, got {value!r}"
        )
    return value


def number(name: str, value: object, *, low: float, high: float) -> float:
    """A finite number in ``[low, high]``."""
    if (
        not isinstance(value, (int, float))
        or isinstance(value, bool)
        or not -_INF < value < _INF
        or not low <= value <= high
    ):
        raise ConfigurationError(f"{name} must be a number from {low:g} to {high:g}, got {value!r}")
    return float(value)


def is_utf8(value: str) -> bool:
    """Whether UTF-8 can carry ``value``: a Python str may hold a lone
    surrogate ("\\ud800"), which no wire (and no Rust ``String``) can."""
    if value.isascii():  # O(1) on CPython: the common case costs nothing
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def utf8_text(what: str, value: str) -> str:
    """``value``, a str, refused when UTF-8 cannot carry it: checked before
    it crosses into the engine, where it would be a TypeError or a
    UnicodeEncodeError naming no option."""
    if not is_utf8(value):
        # The value is not echoed: it may be a credential (a header, a key).
        at = next(i for i, c in enumerate(value) if "\ud800" <= c <= "\udfff")
        raise ConfigurationError(
            f"{what} must be valid Unicode: a lone surrogate (at index {at}) cannot be sent"
        )
    return value


def header_text(what: str, value: object) -> str:
    """Text that can travel in an HTTP header: no CR, LF or NUL, nothing
    UTF-8 cannot carry."""
    if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
        raise ConfigurationError(f"{what} must be a str without line breaks or NUL")
    return utf8_text(what, value)


#: code.co_flags bits of ``async def`` functions and async generators.
_ASYNC_CODE_FLAGS = 0x0080 | 0x0200


def is_async_callable(obj: object) -> bool:
    """Whether calling ``obj`` gives an awaitable for sure (an ``async def``
    function or method, a partial of one, or an object whose ``__call__`` is
    one); read from code flags, so no ``inspect`` import."""
    while hasattr(obj, "func") and hasattr(obj, "args"):  # functools.partial
        obj = obj.func
    for candidate in (obj, getattr(type(obj), "__call__", None)):  # noqa: B004
        function = getattr(candidate, "__func__", candidate)
        code = getattr(function, "__code__", None)
        if code is not None and code.co_flags & _ASYNC_CODE_FLAGS:
            return True
    return False


def accepts(function: object, count: int) -> bool:
    """Whether ``function`` can be called with ``count`` positional
    arguments, when its signature can be read (builtins may hide theirs)."""
    import inspect  # only when a callable option is given: not at import

    try:
        # follow_wrapped=False: a decorator may supply arguments itself.
        signature = inspect.signature(function, follow_wrapped=False)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return True
    try:
        signature.bind(*([None] * count))
    except TypeError:
        return False
    return True
