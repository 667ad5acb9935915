"""What an attempt cost: ``Price`` and a client's prices, applied to the usage
each attempt reported. Here, in Python, because the maintained price database
(``genai-prices``) is a Python package; the core reports the facts (usage,
billed, the model sent) and this prices them."""

from __future__ import annotations

from ._attempt import Attempt
from ._checks import number, utf8_text
from ._exceptions import ConfigurationError, FailoverError
from ._record import Record
from ._usage import Usage

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see _typing.py)
if TYPE_CHECKING:
    import typing
    from collections.abc import Iterable, Mapping

    from ._providers import Provider
else:
    from _collections_abc import Mapping  # collections.abc's, loaded at startup

    from . import _typing as typing

#: ``Client(prices=GENAI_PRICES)``: look each attempt up in genai-prices.
GENAI_PRICES = "genai-prices"

_PER_MILLION = 1_000_000


#: The highest price taken, USD per million tokens: far above any model's,
#: and a bound that refuses absurd numbers (10**400) when given.
_MAX_RATE = 1_000_000.0


def _rate(what: str, value: object) -> float:
    return number(f"Price {what} (USD per million tokens)", value, low=0.0, high=_MAX_RATE)


class Price(Record):
    """What a model costs, in USD per million tokens. ``cache_read`` and
    ``cache_write`` are the prices of cached input read and written; left
    out, they cost what ``input`` does."""

    __slots__ = ("input", "output", "cache_read", "cache_write")
    input: float
    output: float
    cache_read: float | None
    cache_write: float | None

    def __init__(
        self,
        input: float,
        output: float,
        cache_read: float | None = None,
        cache_write: float | None = None,
    ) -> None:
        self._init(
            input=_rate("input", input),
            output=_rate("output", output),
            cache_read=None if cache_read is None else _rate("cache_read", cache_read),
            cache_write=None if cache_write is None else _rate("cache_write", cache_write),
        )

    def cost(self, usage: Usage, *, output: bool = True) -> float | None:
        """USD for ``usage`` (input counts every input token, the cache figures
        are parts of it); ``None`` when the input is not known, or the output
        (``output=False``: there is none, as for embeddings)."""
        if usage.input_tokens is None or (output and usage.output_tokens is None):
            return None
        cache_read = usage.cache_read_tokens or 0
        cache_write = usage.cache_write_tokens or 0
        fresh = max(usage.input_tokens - cache_read - cache_write, 0)
        read_rate = self.input if self.cache_read is None else self.cache_read
        write_rate = self.input if self.cache_write is None else self.cache_write
        total = (
            fresh * self.input
            + cache_read * read_rate
            + cache_write * write_rate
            + (usage.output_tokens or 0) * self.output
        )
        return total / _PER_MILLION


def check_price(owner: str, what: str, price: object) -> Price | None:
    """A provider's ``price=`` / ``embedding_price=``, checked when given."""
    if price is not None and not isinstance(price, Price):
        raise ConfigurationError(f"{owner} {what} must be a failover.Price, got {price!r}")
    return price


class Pricing:
    """A client's prices: each provider's own (``price=`` for chat and
    streams, ``embedding_price=`` for embeddings), then the client's
    ``prices=`` (by the model a request was sent with, or genai-prices)."""

    __slots__ = ("_by_model", "_genai", "_providers")

    def __init__(
        self,
        providers: Mapping[str, Provider],
        by_model: dict[str, Price] | None,
        genai: typing.Any,
    ) -> None:
        self._providers = providers
        self._by_model = by_model
        self._genai = genai

    @staticmethod
    def of(providers: Mapping[str, Provider], prices: object) -> Pricing | None:
        """``Client(prices=...)`` checked, with the providers' own prices;
        ``None`` when nothing has a price (attempts then carry no cost)."""
        by_model: dict[str, Price] | None = None
        genai = None
        if prices == GENAI_PRICES:
            genai = _genai_prices()
        elif isinstance(prices, Mapping):
            by_model = {}
            for model, price in prices.items():
                if not isinstance(model, str) or not model.strip():
                    raise ConfigurationError(
                        f"prices= maps model names (non-empty str) to Price, got key {model!r}"
                    )
                utf8_text("a prices= model name", model)
                if not isinstance(price, Price):
                    raise ConfigurationError(
                        f"prices[{model!r}] must be a failover.Price, got {price!r}"
                    )
                by_model[model] = price
        elif prices is not None:
            raise ConfigurationError(
                f"prices must be a dict of model names to failover.Price, or {GENAI_PRICES!r}, "
                f"got {prices!r}"
            )
        own = any(
            p._price is not None or p._embedding_price is not None for p in providers.values()
        )
        if not own and not by_model and genai is None:
            return None
        return Pricing(providers, by_model, genai)

    def cost(self, attempt: Attempt, embeddings: bool) -> float | None:
        """USD for one attempt, or ``None`` without a price or usage."""
        usage = attempt.usage
        if usage is None:
            return None
        provider = self._providers.get(attempt.provider)
        model = attempt.model
        output = not embeddings
        if provider is not None:
            # A provider's own price is its configured model's: a call that
            # names another model (model=) is priced by the client's prices.
            own, own_model = (
                (provider._embedding_price, provider.embedding_model or provider.model)
                if embeddings
                else (provider._price, provider.model)
            )
            if own is not None and model == own_model:
                return own.cost(usage, output=output)
        if self._by_model is not None:
            price = self._by_model.get(model) if model is not None else None
            return price.cost(usage, output=output) if price is not None else None
        if self._genai is not None and provider is not None and model is not None:
            if usage.input_tokens is None or (output and usage.output_tokens is None):
                return None  # genai-prices would count what is unknown as 0
            cost: float | None = self._genai(provider, model, usage, attempt.started)
            return cost
        return None

    def attempts(self, attempts: Iterable[Attempt], embeddings: bool) -> tuple[Attempt, ...]:
        """``attempts`` with each one's cost."""
        return tuple(
            a if a.usage is None else a._with_cost(self.cost(a, embeddings)) for a in attempts
        )

    def error(self, error: FailoverError, embeddings: bool) -> None:
        """Prices the attempts a failed call's error carries (what it cost so far)."""
        if error.attempts:
            error.attempts = self.attempts(error.attempts, embeddings)


def _genai_prices() -> typing.Any:
    """The lookup into genai-prices (imported now, when a client asks for it)."""
    try:
        import genai_prices
    except ImportError:
        raise ConfigurationError(
            "prices='genai-prices' needs the genai-prices package: pip install 'failover[prices]'"
        ) from None
    from datetime import datetime, timezone

    def cost(provider: Provider, model: str, usage: Usage, started: float) -> float | None:
        if provider.genai_prices_id is None and not provider.genai_prices_by_url:
            return None  # a local server (Ollama): nothing to price
        counted = genai_prices.Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
        )
        when = datetime.fromtimestamp(started, timezone.utc)
        try:
            if provider.genai_prices_id is not None:
                found = genai_prices.calc_price(
                    counted,
                    model,
                    provider_id=provider.genai_prices_id,
                    genai_request_timestamp=when,
                )
            else:
                found = genai_prices.calc_price(
                    counted, model, provider_api_url=provider.base_url, genai_request_timestamp=when
                )
        except LookupError:
            # A model (or server) it does not know has no price: never a guess.
            return None
        except Exception:
            # Whatever else the database raises, the call has its answer: the
            # attempt is left unpriced, and the lookup's failure logged.
            import logging

            logging.getLogger("failover").warning(
                "genai-prices could not price %s of %s",
                model,
                type(provider).__name__,
                exc_info=True,
            )
            return None
        return float(found.total_price)

    return cost
