"""OpenTelemetry: a CLIENT span per call (GenAI semantic conventions) with a child per HTTP
attempt, waits, failovers and skips as span events, the call span current in the caller's
context, and the gen_ai.client.* and failover.* metrics; through both faces, streams and
embeddings, with the SDK's in-memory exporter and reader."""

from __future__ import annotations

import asyncio
import gc
import json
import sys
from typing import Any

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

pytest.importorskip("opentelemetry.sdk", reason="opentelemetry-sdk is not installed")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode

from conftest import KEY, ant, anthropic, collect, oa, openai


class Otel:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def option(self, capture_content: bool = False) -> failover.OpenTelemetry:
        return failover.OpenTelemetry(
            self.tracer_provider, self.meter_provider, capture_content=capture_content
        )

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def call_span(self) -> ReadableSpan:
        [span] = [s for s in self.spans() if "failover.attempts" in (s.attributes or {})]
        return span

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        kids = [s for s in self.spans() if s.parent and s.parent.span_id == parent.context.span_id]
        return sorted(kids, key=lambda s: s.attributes["failover.attempt"])

    def points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        found = []
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        for point in metric.data.data_points:
                            value = getattr(point, "value", None)
                            if value is None:
                                value = (point.count, point.sum)
                            found.append((dict(point.attributes), value))
        return found


@pytest.fixture
def otel() -> Otel:
    return Otel()


def no_key_in(spans: list[ReadableSpan]) -> None:
    for span in spans:
        text = json.dumps(
            [dict(span.attributes or {}), [dict(e.attributes or {}) for e in span.events]],
            default=str,
        )
        assert KEY not in text, span.name


def test_a_failover_chain_is_one_call_span_with_a_child_per_attempt(
    call: Any, otel: Otel, mock_server: MockServer, backup_server: MockServer
) -> None:
    mock_server.push(status=429, headers={"retry-after": "2"}, json={"error": {"message": "slow"}})
    mock_server.push(status=529, json={"error": {"type": "overloaded_error", "message": "busy"}})
    backup_server.push_text("Hello", wire="openai")
    client = failover.Client(
        {
            "claude": anthropic(mock_server),
            "gpt": openai(backup_server, price=failover.Price(1.0, 2.0)),
        },
        sleeper=FakeSleeper(),
        telemetry=otel.option(),
    )
    app = otel.tracer_provider.get_tracer("app")

    def run() -> failover.Response:
        with app.start_as_current_span("handler"):
            return call(client, max_tokens=50, temperature=0.5)

    response = run()
    spans = otel.spans()
    handler = next(s for s in spans if s.name == "handler")
    span = otel.call_span()
    # Nested under the app's span, on both faces (the caller's context).
    assert span.parent is not None and span.parent.span_id == handler.context.span_id
    assert span.kind == SpanKind.CLIENT
    assert span.name == "chat gpt-4.1-mini"
    attributes = dict(span.attributes or {})
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == "openai_compatible"
    assert attributes["gen_ai.request.model"] == "gpt-4.1-mini"
    assert attributes["gen_ai.request.max_tokens"] == 50
    assert attributes["gen_ai.request.temperature"] == 0.5
    assert attributes["gen_ai.response.model"] == response.model
    assert attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert attributes["gen_ai.usage.input_tokens"] == response.usage.input_tokens
    assert attributes["server.address"] == "127.0.0.1"
    assert attributes["failover.attempts"] == 3
    assert attributes["failover.failovers"] == 1
    assert attributes["failover.cost"] == pytest.approx(response.total_cost)
    assert "gen_ai.input.messages" not in attributes  # content only when asked for
    assert span.status.status_code == StatusCode.UNSET

    first, second, third = otel.children(span)
    assert [c.attributes["failover.provider"] for c in (first, second, third)] == [
        "claude",
        "claude",
        "gpt",
    ]
    assert first.attributes["gen_ai.provider.name"] == "anthropic"
    assert first.attributes["http.response.status_code"] == 429
    assert first.attributes["error.type"] == "rate_limited"
    assert first.status.status_code == StatusCode.ERROR
    assert second.attributes["error.type"] == "overloaded"
    assert third.attributes["http.response.status_code"] == 200
    assert third.attributes["gen_ai.request.model"] == "gpt-4.1-mini"
    assert third.attributes["failover.billed"] is True
    assert first.start_time <= second.start_time <= third.start_time <= third.end_time

    events = [(e.name, dict(e.attributes or {})) for e in span.events]
    names = [name for name, _ in events]
    assert names == ["failover.wait", "failover.failover"]
    assert events[0][1]["failover.wait.seconds"] == 2.0
    assert events[0][1]["failover.provider"] == "claude"
    assert events[1][1]["failover.from"] == "claude"
    assert events[1][1]["failover.to"] == "gpt"
    assert events[1][1]["failover.reason"]
    no_key_in(spans)

    assert otel.points("failover.retries") == [
        ({"failover.provider": "claude", "failover.kind": "rate_limited"}, 1)
    ]
    assert otel.points("failover.failovers") == [
        ({"failover.provider": "claude", "failover.kind": "overloaded"}, 1)
    ]
    attempts = {a["failover.kind"]: n for a, n in otel.points("failover.attempts")}
    assert attempts == {"rate_limited": 1, "overloaded": 1, "ok": 1}
    [(_, (count, total))] = otel.points("failover.wait.duration")
    assert (count, total) == (1, 2.0)
    [(duration_attributes, (calls, _))] = otel.points("gen_ai.client.operation.duration")
    assert calls == 1 and duration_attributes["gen_ai.provider.name"] == "openai_compatible"
    tokens = {a["gen_ai.token.type"]: v for a, v in otel.points("gen_ai.client.token.usage")}
    assert tokens["input"] == (1, response.usage.input_tokens)


def test_a_failed_call_ends_its_span_with_the_error(
    call: Any, otel: Otel, mock_server: MockServer
) -> None:
    mock_server.push(status=401, json={"error": {"message": f"bad key {KEY}"}})
    client = failover.Client({"a": openai(mock_server)}, telemetry=otel.option())
    with pytest.raises(failover.AuthenticationError):
        call(client)
    span = otel.call_span()
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes["error.type"] == "AuthenticationError"
    [attempt] = otel.children(span)
    assert attempt.attributes["http.response.status_code"] == 401
    assert attempt.attributes["failover.billed"] is False
    [(attributes, _)] = otel.points("gen_ai.client.operation.duration")
    assert attributes["error.type"] == "AuthenticationError"
    no_key_in(otel.spans())


def test_content_is_recorded_only_with_capture_content(
    call: Any, otel: Otel, mock_server: MockServer
) -> None:
    mock_server.push_text("Bonjour", wire="openai")
    client = failover.Client({"a": openai(mock_server)}, telemetry=otel.option(True))
    call(client, "Say hello in French", system="Be brief")
    attributes = otel.call_span().attributes
    assert json.loads(attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "Say hello in French"}]}
    ]
    assert json.loads(attributes["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "Be brief"}
    ]
    [message] = json.loads(attributes["gen_ai.output.messages"])
    assert message["parts"] == [{"type": "text", "content": "Bonjour"}]


def stream_events(text: str) -> list[str]:
    return [
        oa({"model": "gpt-4.1-mini", "choices": [{"index": 0, "delta": {"content": text}}]}),
        oa({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        oa({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}}),
        "data: [DONE]",
    ]


def test_a_stream_span_ends_with_the_stream(face: str, otel: Otel, mock_server: MockServer) -> None:
    mock_server.push(sse=stream_events("Hi there"))
    client = failover.Client({"a": openai(mock_server)}, telemetry=otel.option())
    collect(face, client)
    span = otel.call_span()
    assert span.name == "chat gpt-4.1-mini"
    assert span.attributes["gen_ai.usage.output_tokens"] == 2
    assert span.end_time is not None
    [attempt] = otel.children(span)
    assert attempt.attributes["gen_ai.usage.input_tokens"] == 5


def test_a_stream_closed_early_or_dropped_ends_its_span(
    otel: Otel, mock_server: MockServer
) -> None:
    mock_server.push(sse=stream_events("Hi there"))
    client = failover.Client({"a": openai(mock_server)}, telemetry=otel.option())
    with client.stream("Hi") as stream:
        next(iter(stream))
    span = otel.call_span()
    assert span.attributes["failover.closed_early"] is True
    # A stream never read, dropped: its span ends too.
    stream = client.stream("Hi")
    del stream
    gc.collect()
    assert len([s for s in otel.spans() if "failover.attempts" in s.attributes]) == 2
    # One dropped half read is closed: its span has its attempt, and stats() counts it.
    mock_server.push(sse=stream_events("Hi there"))
    stream = client.stream("Hi")
    next(iter(stream))
    del stream
    gc.collect()
    dropped = [s for s in otel.spans() if "failover.attempts" in s.attributes][-1]
    assert dropped.attributes["failover.attempts"] == 1
    assert len(otel.children(dropped)) == 1
    assert client.stats().total.attempts == 2


def test_a_stream_cut_after_content_ends_its_span_in_error(
    face: str, otel: Otel, mock_server: MockServer
) -> None:
    mock_server.push(
        sse=[
            ant("message_start", {"message": {"model": "claude-haiku-4-5", "usage": {}}}),
            ant("content_block_start", {"index": 0, "content_block": {"type": "text"}}),
            ant(
                "content_block_delta",
                {"index": 0, "delta": {"type": "text_delta", "text": "Once"}},
            ),
        ],
        fault="cut:3",
    )
    client = failover.Client({"c": anthropic(mock_server)}, telemetry=otel.option())
    with pytest.raises(failover.StreamInterrupted):
        collect(face, client)
    span = otel.call_span()
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes["error.type"] == "StreamInterrupted"
    [attempt] = otel.children(span)
    assert attempt.attributes["failover.billed"] is True


def test_embeddings_are_an_embeddings_span(face: str, otel: Otel, mock_server: MockServer) -> None:
    mock_server.push_embeddings([[0.1, 0.2]], wire="openai")
    provider = openai(mock_server, embedding_model="text-embedding-3-small")
    client = failover.Client({"a": provider}, telemetry=otel.option())
    if face == "sync":
        client.embed("hi")
    else:
        asyncio.run(client.embed_async("hi"))
    span = otel.call_span()
    assert span.name == "embeddings text-embedding-3-small"
    assert span.attributes["gen_ai.operation.name"] == "embeddings"


def test_a_skipped_provider_is_a_span_event(
    otel: Otel, mock_server: MockServer, backup_server: MockServer
) -> None:
    mock_server.push(status=429, headers={"retry-after": "300"}, json={"error": {}})
    backup_server.push_text("one", wire="openai")
    backup_server.push_text("two", wire="openai")
    client = failover.Client(
        {"a": openai(mock_server), "b": openai(backup_server)}, telemetry=otel.option()
    )
    client.prompt("Hi")
    otel.exporter.clear()
    client.prompt("Hi")
    span = otel.call_span()
    [skip] = [e for e in span.events if e.name == "failover.skipped"]
    assert skip.attributes["failover.provider"] == "a"
    assert "cooling down" in skip.attributes["failover.reason"]


def test_telemetry_is_checked_when_given(mock_server: MockServer) -> None:
    with pytest.raises(failover.ConfigurationError):
        failover.OpenTelemetry(tracer_provider="tp")
    with pytest.raises(failover.ConfigurationError):
        failover.OpenTelemetry(meter_provider=object())
    with pytest.raises(failover.ConfigurationError):
        failover.OpenTelemetry(capture_content=1)  # type: ignore[arg-type]
    with pytest.raises(failover.ConfigurationError):
        failover.Client({"a": openai(mock_server)}, telemetry=True)  # type: ignore[arg-type]


def test_telemetry_without_the_package_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, mock_server: MockServer
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(failover.ConfigurationError, match=r"failover\[otel\]"):
        failover.Client({"a": openai(mock_server)}, telemetry=failover.OpenTelemetry())


def test_a_cancelled_call_ends_its_span(otel: Otel, mock_server: MockServer) -> None:
    mock_server.push(fault="hang")
    client = failover.Client({"a": openai(mock_server)}, telemetry=otel.option())

    async def run() -> None:
        task = asyncio.ensure_future(client.prompt_async("Hi"))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    span = otel.call_span()
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes["error.type"] == "CancelledError"
    # What it had sent: the request in flight, a child span as any attempt.
    assert span.attributes["failover.attempts"] == 1
    [attempt] = otel.children(span)
    assert attempt.attributes["failover.provider"] == "a"


def test_a_stream_closed_early_keeps_its_waits(otel: Otel, mock_server: MockServer) -> None:
    """Its span has the wait before its retry (the events are matched by its call id)."""
    mock_server.push(status=429, headers={"retry-after": "1"}, json={"error": {}})
    mock_server.push(sse=stream_events("Hi there"))
    client = failover.Client(
        {"a": openai(mock_server)}, sleeper=FakeSleeper(), telemetry=otel.option()
    )
    with client.stream("Hi") as stream:
        next(iter(stream))
    span = otel.call_span()
    assert [e.name for e in span.events] == ["failover.wait"]
    assert span.attributes["failover.attempts"] == 2


def test_a_span_processor_that_raises_never_changes_the_call(
    call: Any, mock_server: MockServer, caplog: pytest.LogCaptureFixture
) -> None:
    from opentelemetry.sdk.trace import SpanProcessor

    class Broken(SpanProcessor):
        def on_start(self, span: Any, parent_context: Any = None) -> None:
            raise RuntimeError("processor on_start")

        def on_end(self, span: Any) -> None:
            raise RuntimeError("processor on_end")

    provider = TracerProvider()
    provider.add_span_processor(Broken())
    mock_server.push_text("Hello", wire="openai")
    client = failover.Client(
        {"a": openai(mock_server)}, telemetry=failover.OpenTelemetry(tracer_provider=provider)
    )
    assert call(client).text == "Hello"


def test_a_failed_chains_span_names_the_last_attempt_and_never_its_message(
    otel: Otel, mock_server: MockServer, backup_server: MockServer
) -> None:
    mock_server.push(status=401, json={"error": {"message": "bad key"}})
    backup_server.push(status=503, json={"error": {"message": "upstream said sk-other-secret"}})
    client = failover.Client(
        {"claude": anthropic(mock_server), "gpt": openai(backup_server)},
        telemetry=otel.option(),
        retry=failover.RetryPolicy(max_retries=0, max_retries_last=0),
    )
    with pytest.raises(failover.ProviderOverloaded):
        client.prompt("Hi")
    span = otel.call_span()
    assert span.name == "chat gpt-4.1-mini"
    assert span.attributes["gen_ai.provider.name"] == "openai_compatible"
    assert span.status.description == "ProviderOverloaded"


def test_a_hedge_is_on_the_span_and_its_loser_a_cancelled_child(
    otel: Otel, mock_server: MockServer, backup_server: MockServer
) -> None:
    mock_server.push_text("slow", delay=5.0)
    backup_server.push_text("fast")
    client = failover.Client(
        {"a": openai(mock_server), "b": openai(backup_server)},
        telemetry=otel.option(),
        hedge=failover.Hedge(0.2, 1.0),
    )
    client.prompt("Hi")
    client.close()
    span = otel.call_span()
    names = [event.name for event in span.events]
    assert "failover.hedge" in names and "failover.hedge_won" in names
    loser, winner = otel.children(span)
    assert loser.attributes["failover.hedged"] is True
    assert loser.status.status_code == StatusCode.ERROR
    assert "failover.hedged" not in (winner.attributes or {})
    assert winner.status.status_code != StatusCode.ERROR
