"""What each provider of a fault-matrix case is scripted to answer, on its MockServer."""

from __future__ import annotations

import email.utils
import json
from datetime import datetime, timezone
from typing import Any

from failover.testing import MockServer

from . import oracle

MESSAGE_START = {
    "message": {
        "id": "msg_fault",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5",
        "content": [],
        "usage": {"input_tokens": 3, "output_tokens": 0},
    }
}
TEXT_BLOCK = {"index": 0, "content_block": {"type": "text", "text": ""}}
PARTIAL = "partial "


def ant(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}"


def ant_delta(text: str) -> str:
    return ant("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": text}})


def anthropic_stream(text: str) -> list[str]:
    return [
        ant("message_start", MESSAGE_START),
        ant("content_block_start", TEXT_BLOCK),
        ant_delta(text),
        ant("content_block_stop", {"index": 0}),
        ant("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}),
        ant("message_stop", {}),
    ]


def openai_stream(text: str) -> list[str]:
    chunk = {"model": "gpt-4.1-mini", "choices": [{"index": 0, "delta": {"content": text}}]}
    finish = {
        "model": "gpt-4.1-mini",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
    }
    return ["data: " + json.dumps(chunk), "data: " + json.dumps(finish), "data: [DONE]"]


def success_body(case: oracle.Case, text: str) -> bytes:
    """The faulted provider's whole JSON answer (chat or embeddings), in its wire."""
    if case.call == "embed":
        body: Any = {
            "object": "list",
            "data": [{"object": "embedding", "index": 0, "embedding": [0.5, 0.25]}],
            "model": "text-embedding-3-small",
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }
    else:
        body = {
            "id": "msg_fault",
            "type": "message",
            "role": "assistant",
            "model": "claude-haiku-4-5",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 3, "output_tokens": 2},
        }
    return json.dumps(body).encode()


def push_success(server: MockServer, case: oracle.Case, wire: str, text: str) -> None:
    if case.call == "stream":
        server.push(sse=anthropic_stream(text) if wire == "anthropic" else openai_stream(text))
    elif case.call == "embed":
        server.push_embeddings([[0.5, 0.25]], wire="openai")
    else:
        server.push_text(text, wire=wire)


def error_body(case: oracle.Case, key: str) -> dict[str, Any]:
    """An error body echoing the key, as providers do ("Incorrect API key provided: sk-..."),
    with no word that would classify it beyond its status."""
    message = f"scripted {case.status} for the request made with {key}"
    if case.wire == "anthropic":
        return {"type": "error", "error": {"type": "fault_matrix_error", "message": message}}
    return {"error": {"message": message, "type": "fault_matrix_error", "code": None}}


def hint_headers(hint: str, wire: str, clock_start: float) -> dict[str, str]:
    def http_date(offset: float) -> str:
        return email.utils.formatdate(clock_start + offset, usegmt=True)

    if hint == "none":
        return {}
    plain = {
        "zero": "0",
        "one": "1",
        "one_and_a_half": "1.5",
        "negative": "-1",
        "abc": "abc",
        "exp_overflow": "1e400",
        "huge": "99999999999999999999",
    }
    if hint in plain:
        return {"retry-after": plain[hint]}
    if hint == "date_past":
        return {"retry-after": http_date(oracle.DATE_PAST_OFFSET)}
    if hint == "date_future":
        return {"retry-after": http_date(oracle.DATE_FUTURE_OFFSET)}
    future = datetime.fromtimestamp(clock_start + oracle.DATE_FUTURE_OFFSET, timezone.utc)
    days = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
    months = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()
    month = months[future.month - 1]
    if hint == "date_future_rfc850":  # Sunday, 06-Nov-94 08:49:37 GMT
        day = days[future.weekday()]
        stamp = f"{day}, {future.day:02d}-{month}-{future.year % 100:02d} {future:%H:%M:%S} GMT"
        return {"retry-after": stamp}
    if hint == "date_future_asctime":  # Sun Nov  6 08:49:37 1994
        day = days[future.weekday()][:3]
        return {"retry-after": f"{day} {month} {future.day:2d} {future:%H:%M:%S} {future.year}"}
    if hint == "should_retry_false":
        return {"x-should-retry": "false", "retry-after": "1"}
    if hint == "retry_after_ms":
        return {"retry-after-ms": "1500"}
    if hint == "provider_reset":
        if wire == "openai":
            return {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2s"}
        reset = datetime.fromtimestamp(clock_start + oracle.PROVIDER_RESET_OFFSET, timezone.utc)
        return {
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": reset.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
    raise ValueError(hint)


KEEPALIVE_INTERVAL = 0.1
SLOW_INTERVAL = 0.1


def push_fault(server: MockServer, case: oracle.Case, key: str, clock_start: float) -> None:
    """One faulted response."""
    if case.fault is None:
        assert case.status is not None
        headers = hint_headers(case.hint, case.wire, clock_start)
        server.push(case.status, headers=headers, json=error_body(case, key))
        return
    fault = case.fault
    stream = case.call == "stream"
    if fault == "reset_before_headers":
        server.push(fault="reset")
    elif fault == "hang":
        server.push(fault="hang")
    elif stream:
        push_stream_fault(server, fault, key)
    else:
        body = success_body(case, "whole answer")
        if fault == "reset_mid_body":
            server.push(
                200,
                headers={"content-type": "application/json"},
                body=body,
                fault=f"cut:{len(body) // 2}",
            )
        elif fault == "slow_body":
            step = len(body) // 4 + 1
            pieces = [body[i : i + step] for i in range(0, len(body), step)]
            server.push(
                200,
                headers={"content-type": "application/json"},
                chunks=pieces,
                interval=SLOW_INTERVAL,
            )
        elif fault == "stall_mid_body":
            half = len(body) // 2
            server.push(
                200,
                headers={"content-type": "application/json"},
                chunks=[body[:half], body[half:]],
                fault="stall:1",
            )
        elif fault == "truncated_body":
            server.push(
                200, headers={"content-type": "application/json"}, body=body[: len(body) // 2]
            )
        elif fault == "non_json_body":
            page = f"<html><body>502 upstream said no to {key}</body></html>"
            server.push(200, headers={"content-type": "text/html"}, body=page)
        elif fault == "invalid_utf8":
            broken = body.replace(b"whole answer", b"whole \xff\xfe answer")
            if case.call == "embed":
                broken = body.replace(b'"list"', b'"li\xffst"')
            server.push(200, headers={"content-type": "application/json"}, body=broken)
        else:
            raise ValueError(fault)


def overloaded_event(key: str) -> str:
    error = {"type": "overloaded_error", "message": f"Overloaded (request with {key})"}
    return ant("error", {"error": error})


def push_stream_fault(server: MockServer, fault: str, key: str) -> None:
    start = [ant("message_start", MESSAGE_START), ant("content_block_start", TEXT_BLOCK)]
    if fault == "reset_mid_body":
        server.push(sse=[*start, ant("ping", {})], fault="cut:2")
    elif fault == "slow_body":
        # Six events 0.1 s apart: longer than the 0.4 s timeout in all, never idle that long.
        server.push(sse=anthropic_stream("slow answer"), interval=SLOW_INTERVAL)
    elif fault == "truncated_body":
        server.push(sse=[*start, 'event: content_block_delta\ndata: {"type": "content_block_de'])
    elif fault == "non_json_body":
        server.push(sse=[f"event: message_start\ndata: <html>upstream said no to {key}</html>"])
    elif fault == "invalid_utf8":
        events = [(e + "\n\n").encode() for e in start]
        # json.dumps would escape a non-ASCII character: the broken bytes go in by hand.
        bad = ant_delta("caf_").encode().replace(b"caf_", b"caf\xff\xfe") + b"\n\n"
        assert b"\xff\xfe" in bad
        server.push(200, headers={"content-type": "text/event-stream"}, chunks=[*events, bad])
    elif fault == "stream_cut_before_content":
        server.push(sse=[*start, ant("ping", {})])  # ends cleanly, before any end marker
    elif fault == "stream_cut_after_content":
        server.push(sse=[*start, ant_delta(PARTIAL), ant_delta("never sent")], fault="cut:3")
    elif fault == "in_stream_overloaded_before_content":
        server.push(sse=[*start, overloaded_event(key)])
    elif fault == "in_stream_overloaded_after_content":
        server.push(sse=[*start, ant_delta(PARTIAL), overloaded_event(key)])
    elif fault == "stall_mid_body":
        server.push(sse=[*start, ant_delta(PARTIAL)], fault="stall:2")
    elif fault == "stall_after_content":
        server.push(sse=[*start, ant_delta(PARTIAL), ant_delta("never sent")], fault="stall:3")
    elif fault == "keepalives_only":
        server.push(sse=[": keep-alive"] * 100, interval=KEEPALIVE_INTERVAL)
    else:
        raise ValueError(fault)
