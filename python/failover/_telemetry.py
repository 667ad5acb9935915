"""OpenTelemetry: a span per call with a child per attempt, its waits and
failovers as span events, and metrics, after the GenAI semantic conventions.

``OpenTelemetry`` (the option) is defined here without importing the
``opentelemetry`` packages; ``Telemetry`` imports them when a client is made
with ``telemetry=``, so ``import failover`` never does.
"""

from __future__ import annotations

from _thread import allocate_lock  # threading's lock, without importing threading

from ._attempt import steps
from ._exceptions import ConfigurationError, FailoverError
from ._record import Record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see _typing.py)
if TYPE_CHECKING:
    import typing
    from collections.abc import Mapping, Sequence

    from ._attempt import Attempt
    from ._providers import Provider
else:
    from . import _typing as typing

#: The conventions' advisory bucket boundaries (gen_ai.client.* metrics).
_DURATION_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24]
_DURATION_BUCKETS += [20.48, 40.96, 81.92]
_TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304]
_TOKEN_BUCKETS += [16777216, 67108864]

#: Calls whose events are kept waiting for their end: a stream dropped
#: unread never ends, so the oldest are let go past this many.
_MAX_PENDING_CALLS = 10_000

_NS = 1_000_000_000


class OpenTelemetry(Record):
    """``Client(telemetry=failover.OpenTelemetry())``: spans and metrics per
    the OpenTelemetry GenAI semantic conventions (``pip install
    'failover[otel]'``). ``None`` providers mean the global ones;
    ``capture_content=True`` records messages and answers (the conventions'
    opt-in attributes), which may hold personal data."""

    __slots__ = ("tracer_provider", "meter_provider", "capture_content")
    tracer_provider: typing.Any
    meter_provider: typing.Any
    capture_content: bool

    def __init__(
        self,
        tracer_provider: typing.Any = None,
        meter_provider: typing.Any = None,
        capture_content: bool = False,
    ) -> None:
        if tracer_provider is not None and not callable(
            getattr(tracer_provider, "get_tracer", None)
        ):
            raise ConfigurationError(
                f"tracer_provider must be an OpenTelemetry TracerProvider (or None for the "
                f"global one), got {tracer_provider!r}"
            )
        if meter_provider is not None and not callable(getattr(meter_provider, "get_meter", None)):
            raise ConfigurationError(
                f"meter_provider must be an OpenTelemetry MeterProvider (or None for the "
                f"global one), got {meter_provider!r}"
            )
        if not isinstance(capture_content, bool):
            raise ConfigurationError(
                f"capture_content must be True or False, got {capture_content!r}"
            )
        self._init(
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            capture_content=capture_content,
        )


def _histogram(
    meter: typing.Any, name: str, unit: str, what: str, buckets: list[float]
) -> typing.Any:
    try:
        return meter.create_histogram(
            name, unit=unit, description=what, explicit_bucket_boundaries_advisory=buckets
        )
    except TypeError:  # an API release before advisory buckets
        return meter.create_histogram(name, unit=unit, description=what)


class Telemetry:
    """A client's instruments; one ``Observed`` per call."""

    def __init__(
        self,
        options: OpenTelemetry,
        providers: Mapping[str, Provider],
        names: Sequence[str],
    ) -> None:
        try:
            from opentelemetry import context, metrics, trace
        except ImportError:
            raise ConfigurationError(
                "telemetry=failover.OpenTelemetry(...) needs the opentelemetry packages: "
                "pip install 'failover[otel]'"
            ) from None
        from . import __version__

        self.trace = trace
        self.context = context
        self.capture_content = options.capture_content
        self.providers = providers
        self.names = names
        self.tracer = trace.get_tracer(
            "failover", __version__, tracer_provider=options.tracer_provider
        )
        meter = metrics.get_meter("failover", __version__, meter_provider=options.meter_provider)
        self.duration = _histogram(
            meter,
            "gen_ai.client.operation.duration",
            "s",
            "GenAI operation duration",
            _DURATION_BUCKETS,
        )
        self.tokens = _histogram(
            meter,
            "gen_ai.client.token.usage",
            "{token}",
            "Number of input and output tokens used",
            [float(b) for b in _TOKEN_BUCKETS],
        )
        self.attempts = meter.create_counter(
            "failover.attempts", unit="{attempt}", description="HTTP attempts, by provider and kind"
        )
        self.retries = meter.create_counter(
            "failover.retries",
            unit="{retry}",
            description="Retries of a provider, by provider and kind",
        )
        self.failovers = meter.create_counter(
            "failover.failovers",
            unit="{failover}",
            description="Calls moved away from a provider, by provider and kind",
        )
        self.waits = meter.create_histogram(
            "failover.wait.duration", unit="s", description="Waits before a retry"
        )
        self._lock = allocate_lock()
        #: call_id -> the span events its waits and failovers made, until it ends.
        self._pending: dict[str, list[tuple[str, dict[str, typing.Any], int]]] = {}

    def tap(self, event: typing.Any) -> None:
        """An engine event of a call (``_events._emitter`` hands each one
        here): kept as a span event for the call's span, and the wait measured."""
        from ._events import FailedOver, HedgeStarted, HedgeWon, RetryScheduled

        if isinstance(event, RetryScheduled):
            name = "failover.wait"
            attributes: dict[str, typing.Any] = {
                "failover.wait.seconds": event.delay,
                "failover.provider": event.provider,
                # Which attempt at this provider failed (RetryScheduled.attempt).
                "failover.provider_attempt": event.attempt,
                "failover.reason": event.reason,
                "error.type": event.kind,
            }
            if event.status is not None:
                attributes["http.response.status_code"] = event.status
            self.waits.record(
                event.delay, {"failover.provider": event.provider, "failover.kind": event.kind}
            )
        elif isinstance(event, FailedOver):
            name = "failover.failover"
            attributes = {
                "failover.from": event.from_provider,
                "failover.to": event.to_provider,
                "failover.reason": event.reason,
                "error.type": type(event.error).__name__,
            }
        elif isinstance(event, HedgeStarted):
            name = "failover.hedge"
            attributes = {
                "failover.provider": event.provider,
                "failover.to": event.to_provider,
                "failover.reason": event.reason,
            }
        elif isinstance(event, HedgeWon):
            name = "failover.hedge_won"
            attributes = {"failover.winner": event.winner, "failover.loser": event.loser}
        else:
            return
        import time

        with self._lock:
            pending = self._pending
            if event.call_id not in pending and len(pending) >= _MAX_PENDING_CALLS:
                del pending[next(iter(pending))]
            pending.setdefault(event.call_id, []).append((name, attributes, time.time_ns()))

    def events_of(self, call_id: str | None) -> list[tuple[str, dict[str, typing.Any], int]]:
        if call_id is None:
            return []
        with self._lock:
            return self._pending.pop(call_id, [])

    def start(self, operation: str, args: typing.Any, current: bool) -> Observed:
        """A call's span, begun now (``current``: made the current span until
        it ends, for a whole call; a stream's is only parented)."""
        return Observed(self, operation, args, current)

    def begin(self, operation: str, args: typing.Any, current: bool) -> Observed | None:
        """``start``, or ``None`` (no span) when the SDK raises: telemetry never
        changes a call's outcome."""
        try:
            return self.start(operation, args, current)
        except Exception:
            import logging

            logging.getLogger("failover").warning(
                "telemetry failed; the call goes on", exc_info=True
            )
            return None


def _why(attempt: Attempt) -> dict[str, str]:
    """A retry's or a failover's metric attributes: the failure it follows."""
    return {"failover.provider": attempt.provider, "failover.kind": attempt.kind or "ok"}


def _provider_name(provider: Provider | None) -> str:
    if provider is None:
        return "openai"
    return provider.otel_provider_name


def _server(provider: Provider | None) -> tuple[str | None, int | None]:
    if provider is None:
        return None, None
    from ._providers import _url_parts

    parts = _url_parts(provider.base_url)
    if parts is None:
        return None, None
    scheme, host, port = parts[0], parts[1], parts[2]
    if port is None:
        port = 443 if scheme == "https" else 80
    return host, port


class Observed:
    """One call as telemetry sees it: its span, open until the call ends."""

    __slots__ = ("_attributes", "_ended", "_operation", "_started", "_telemetry", "_token", "span")

    def __init__(
        self, telemetry: Telemetry, operation: str, args: typing.Any, current: bool
    ) -> None:
        import time

        self._telemetry = telemetry
        self._operation = operation
        self._ended = False
        self._started = time.perf_counter()
        first = telemetry.names[args.chain[0]] if args.chain else None
        provider = telemetry.providers.get(first) if first is not None else None
        model = args.model
        if model is None and provider is not None:
            kind = getattr(args, "kind", None)  # a media call's
            if kind is not None:
                model = getattr(provider, f"{kind}_model") or provider.model
            elif operation == "embeddings":
                model = provider.embedding_model or provider.model
            else:
                model = provider.model
        attributes: dict[str, typing.Any] = {
            "gen_ai.operation.name": operation,
            "gen_ai.provider.name": _provider_name(provider),
        }
        if model is not None:
            attributes["gen_ai.request.model"] = model
        address, port = _server(provider)
        if address is not None:
            attributes["server.address"] = address
            attributes["server.port"] = port
        for field, name in (
            ("max_tokens", "gen_ai.request.max_tokens"),
            ("temperature", "gen_ai.request.temperature"),
            ("top_p", "gen_ai.request.top_p"),
            ("seed", "gen_ai.request.seed"),
        ):
            value = getattr(args, field, None)
            if value is not None:
                attributes[name] = value
        stop = getattr(args, "stop", None)
        if stop:
            attributes["gen_ai.request.stop_sequences"] = list(stop)
        if telemetry.capture_content and operation == "chat":
            import json

            attributes["gen_ai.input.messages"] = json.dumps(
                [_message_parts(m) for m in args.messages], ensure_ascii=False
            )
            if args.system is not None:
                attributes["gen_ai.system_instructions"] = json.dumps(
                    [{"type": "text", "content": args.system}], ensure_ascii=False
                )
        self._attributes = attributes
        trace = telemetry.trace
        self.span = telemetry.tracer.start_span(
            f"{operation} {model}" if model is not None else operation,
            kind=trace.SpanKind.CLIENT,
            attributes=attributes,
        )
        self._token = (
            telemetry.context.attach(trace.set_span_in_context(self.span)) if current else None
        )

    def _describe(self, last: Attempt | None) -> dict[str, typing.Any]:
        """The call span's provider, model and server, and usage, as the last
        attempt's (the answering one, or the one whose error ended the call)."""
        attributes: dict[str, typing.Any] = {}
        if last is None:
            return attributes
        provider = self._telemetry.providers.get(last.provider)
        attributes["gen_ai.provider.name"] = _provider_name(provider)
        address, port = _server(provider)
        if address is not None:
            attributes["server.address"] = address
            attributes["server.port"] = port
        if last.model is not None:
            attributes["gen_ai.request.model"] = last.model
            self.span.update_name(f"{self._operation} {last.model}")
        if last.usage is not None:
            if last.usage.input_tokens is not None:
                attributes["gen_ai.usage.input_tokens"] = last.usage.input_tokens
            if last.usage.output_tokens is not None:
                attributes["gen_ai.usage.output_tokens"] = last.usage.output_tokens
        return attributes

    def answered(self, result: typing.Any) -> None:
        """The call's answer: the span describes the answering attempt."""
        if not self._ended:
            _guarded(self._answered, result)

    def _answered(self, result: typing.Any) -> None:
        span = self.span
        attempts = result.attempts
        attributes = self._describe(_answering(attempts))
        if result.model is not None:
            attributes["gen_ai.response.model"] = result.model
        response_id = _response_id(result)
        if response_id is not None:
            attributes["gen_ai.response.id"] = response_id
        finish = getattr(result, "finish_reason", None)
        if finish is not None:
            attributes["gen_ai.response.finish_reasons"] = [finish]
        usage = result.usage
        if usage.input_tokens is not None:
            attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
        if usage.output_tokens is not None:
            attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
        if self._telemetry.capture_content and self._operation == "chat":
            import json

            parts: list[dict[str, typing.Any]] = []
            if result.text:
                parts.append({"type": "text", "content": result.text})
            for call in result.tool_calls:
                parts.append(
                    {
                        "type": "tool_call",
                        "id": call.id,
                        "name": call.name,
                        "arguments": call.arguments,
                    }
                )
            message = {"role": "assistant", "parts": parts, "finish_reason": finish or "stop"}
            attributes["gen_ai.output.messages"] = json.dumps([message], ensure_ascii=False)
        span.set_attributes(attributes)
        self._attributes.update(attributes)
        self._end(attempts, result.call_id, None)

    def failed(self, error: BaseException, cut: tuple[Attempt, ...] = ()) -> None:
        """The call ended in ``error`` (a cancellation included); ``cut``: what a
        call cut short had sent (its error carries none)."""
        if not self._ended:
            _guarded(self._failed, error, cut)

    def _failed(self, error: BaseException, cut: tuple[Attempt, ...]) -> None:
        span = self.span
        kind = type(error).__name__
        attempts = error.attempts if isinstance(error, FailoverError) and error.attempts else cut
        attributes = self._describe(_answering(attempts))
        attributes["error.type"] = kind
        span.set_attributes(attributes)
        self._attributes.update(attributes)
        # The class only: an error's message quotes what a provider sent.
        trace = self._telemetry.trace
        span.set_status(trace.Status(trace.StatusCode.ERROR, kind))
        self._end(attempts, getattr(error, "call_id", None), kind)

    def closed(self, attempts: tuple[Attempt, ...] = (), call_id: str | None = None) -> None:
        """A stream closed (or dropped) before its end: no answer, no error."""
        if not self._ended:
            _guarded(self._closed, attempts, call_id)

    def _closed(self, attempts: tuple[Attempt, ...], call_id: str | None) -> None:
        attributes = self._describe(_answering(attempts))
        attributes["failover.closed_early"] = True
        self.span.set_attributes(attributes)
        self._attributes.update(attributes)
        self._end(attempts, call_id, None)

    def _end(self, attempts: tuple[Attempt, ...], call_id: str | None, error: str | None) -> None:
        self._ended = True
        try:
            self._record(attempts, call_id, error)
        finally:
            if self._token is not None:
                self._telemetry.context.detach(self._token)
                self._token = None

    def _record(
        self, attempts: tuple[Attempt, ...], call_id: str | None, error: str | None
    ) -> None:
        import time

        telemetry = self._telemetry
        span = self.span
        trace = telemetry.trace
        parent = trace.set_span_in_context(span)
        real = 0
        failovers = 0
        for attempt, retried, left in steps(attempts):
            if left is not None:
                failovers += 1
                telemetry.failovers.add(1, _why(left))
            if attempt is None:  # a failover to a provider then passed over
                continue
            real += 1
            kind = attempt.kind or "ok"
            name = attempt.provider
            counted = {"failover.provider": name, "failover.kind": kind}
            telemetry.attempts.add(1, counted)
            # Each counted under the provider and kind of the failure it follows.
            if retried is not None:
                telemetry.retries.add(1, _why(retried))
            provider = telemetry.providers.get(name)
            attributes: dict[str, typing.Any] = {
                "gen_ai.operation.name": self._operation,
                "gen_ai.provider.name": _provider_name(provider),
                "failover.provider": name,
                "failover.attempt": real,
            }
            if attempt.model is not None:
                attributes["gen_ai.request.model"] = attempt.model
            address, port = _server(provider)
            if address is not None:
                attributes["server.address"] = address
                attributes["server.port"] = port
            if attempt.status is not None:
                attributes["http.response.status_code"] = attempt.status
            if attempt.kind is not None:
                attributes["error.type"] = attempt.kind
            if attempt.usage is not None:
                if attempt.usage.input_tokens is not None:
                    attributes["gen_ai.usage.input_tokens"] = attempt.usage.input_tokens
                if attempt.usage.output_tokens is not None:
                    attributes["gen_ai.usage.output_tokens"] = attempt.usage.output_tokens
            if attempt.billed is not None:
                attributes["failover.billed"] = attempt.billed
            if attempt.cost is not None:
                attributes["failover.cost"] = attempt.cost
            if attempt.hedged:
                attributes["failover.hedged"] = True
                if attempt.kind is None:
                    # Cancelled: another request of its hedge delivered first.
                    attributes["error.type"] = "cancelled"
            start = int(attempt.started * _NS)
            child = telemetry.tracer.start_span(
                f"{self._operation} {attempt.model}",
                context=parent,
                kind=trace.SpanKind.CLIENT,
                attributes=attributes,
                start_time=start,
            )
            if attempt.kind is not None:
                child.set_status(trace.Status(trace.StatusCode.ERROR, attempt.kind))
            elif attempt.hedged:
                child.set_status(trace.Status(trace.StatusCode.ERROR, "cancelled: hedge lost"))
            child.end(end_time=start + int(attempt.duration * _NS))
        for attempt in attempts:
            if attempt.skipped is not None:
                span.add_event(
                    "failover.skipped",
                    {"failover.provider": attempt.provider, "failover.reason": attempt.skipped},
                    timestamp=int(attempt.started * _NS),
                )
        for name, attributes, at in telemetry.events_of(call_id):
            span.add_event(name, attributes, timestamp=at)
        from ._attempt import total_cost, total_usage

        span.set_attribute("failover.attempts", real)
        span.set_attribute("failover.failovers", failovers)
        cost = total_cost(attempts)
        if cost is not None:
            span.set_attribute("failover.cost", cost)
        metric: dict[str, typing.Any] = {
            key: self._attributes[key]
            for key in (
                "gen_ai.operation.name",
                "gen_ai.provider.name",
                "gen_ai.request.model",
                "gen_ai.response.model",
                "server.address",
                "server.port",
            )
            if key in self._attributes
        }
        if error is not None:
            metric["error.type"] = error
        telemetry.duration.record(time.perf_counter() - self._started, metric)
        usage = total_usage(attempts)
        if usage.input_tokens is not None:
            telemetry.tokens.record(usage.input_tokens, {**metric, "gen_ai.token.type": "input"})
        if usage.output_tokens is not None:
            telemetry.tokens.record(usage.output_tokens, {**metric, "gen_ai.token.type": "output"})
        span.end()


def _guarded(method: typing.Any, *args: typing.Any) -> None:
    """Telemetry never changes a call's outcome: an exception from the SDK
    (a span processor that raises) is logged, and the call goes on."""
    try:
        method(*args)
    except Exception:
        import logging

        logging.getLogger("failover").warning("telemetry failed; the call goes on", exc_info=True)


def _answering(attempts: tuple[Attempt, ...]) -> Attempt | None:
    # The last one sent that did not lose a hedge's race (which may be
    # recorded after it).
    for attempt in reversed(attempts):
        if attempt.skipped is None and not attempt.hedged:
            return attempt
    return None


def _response_id(result: typing.Any) -> str | None:
    """The id the provider gave the answer (OpenAI's ``id``, Anthropic's,
    Gemini's ``responseId``), read from a whole answer's body."""
    raw = getattr(result, "_raw_body", None)
    if not raw or raw == "null":
        return None
    try:
        body = result.raw
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    found = body.get("id", body.get("responseId"))
    return found if isinstance(found, str) else None


def _message_parts(message: typing.Any) -> dict[str, typing.Any]:
    """A message dict as the conventions' input message: role and parts."""
    role = message.get("role", "user")
    content = message.get("content")
    parts: list[dict[str, typing.Any]] = []
    if isinstance(content, str):
        parts.append({"type": "text", "content": content})
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append({"type": "text", "content": part.get("text", "")})
            else:
                parts.append(
                    {"type": str(part.get("type", "part")) if isinstance(part, dict) else "part"}
                )
    for call in message.get("tool_calls") or ():
        function = call.get("function", {}) if isinstance(call, dict) else {}
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("id") if isinstance(call, dict) else None,
                "name": function.get("name"),
                "arguments": _parsed(function.get("arguments")),
            }
        )
    if role == "tool":
        return {
            "role": "tool",
            "parts": [
                {
                    "type": "tool_call_response",
                    "id": message.get("tool_call_id"),
                    "response": content,
                }
            ],
        }
    return {"role": role, "parts": parts}


def _parsed(arguments: typing.Any) -> typing.Any:
    """A tool call's arguments as the object they encode (as output messages
    carry them), or as given when they are not JSON."""
    if not isinstance(arguments, str):
        return arguments
    import json

    try:
        return json.loads(arguments)
    except ValueError:
        return arguments
