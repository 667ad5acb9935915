"""What each attempt used and cost: ``Attempt.usage/.billed/.cost``, ``Price``,
``prices=`` (the caller's, or genai-prices), and the totals on results, streams,
embeddings and errors."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from typing import Any

import pytest

import failover
from failover.testing import FakeSleeper, MockServer

from conftest import KEY, ant, anthropic, chat_answer, collect, oa, openai

MILLION = 1_000_000


def rate_limited(server: MockServer, wait: str = "1") -> None:
    server.push(status=429, headers={"retry-after": wait}, json={"error": {"message": "slow"}})


PRICE = failover.Price(input=0.4, output=1.6, cache_read=0.1)


def test_a_retry_and_a_failover_each_show_what_they_used_and_cost(
    call: Any, mock_server: MockServer, backup_server: MockServer
) -> None:
    """A 429 (refused, not billed), a 529 failover (not billed), then an answer
    priced by its provider's own price; the totals add up over attempts."""
    rate_limited(mock_server)
    mock_server.push(status=529, json={"error": {"type": "overloaded_error"}})
    backup_server.push(json=chat_answer(1000, 200, cached=400))
    backup_price = failover.Price(input=2.0, output=8.0, cache_read=0.5)
    client = failover.Client(
        {
            "main": anthropic(mock_server, price=failover.Price(1.0, 5.0)),
            "backup": openai(backup_server, price=backup_price),
        },
        sleeper=FakeSleeper(),
    )
    response = call(client)
    first, second, answer = response.attempts
    assert (first.status, first.billed, first.usage, first.cost) == (429, False, None, None)
    assert (second.status, second.billed, second.cost) == (529, False, None)
    assert (answer.provider, answer.model, answer.billed) == ("backup", "gpt-4.1-mini", True)
    assert answer.usage == failover.Usage(1000, 200, 400, None, None)
    expected = (600 * 2.0 + 400 * 0.5 + 200 * 8.0) / MILLION
    assert answer.cost == pytest.approx(expected)
    assert response.cost == pytest.approx(expected)
    assert response.total_cost == pytest.approx(expected)
    assert response.unpriced_attempts == 0
    assert response.total_usage == failover.Usage(1000, 200, 400, None, None)
    assert first.started <= second.started <= answer.started


def test_a_cache_price_left_out_costs_what_input_does(call: Any, mock_server: MockServer) -> None:
    """Anthropic's usage in the one meaning (input counts cache reads and
    writes): cache writes priced at input when no cache_write price is given."""
    mock_server.push(
        json={
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-haiku-4-5",
            "content": [{"type": "text", "text": "Hi"}],
            "stop_reason": "end_turn",
            "usage": {
                "input_tokens": 100,
                "cache_read_input_tokens": 1000,
                "cache_creation_input_tokens": 500,
                "output_tokens": 50,
            },
        }
    )
    price = failover.Price(input=1.0, output=5.0, cache_read=0.1)
    client = failover.Client({"claude": anthropic(mock_server, price=price)})
    response = call(client)
    assert response.usage.input_tokens == 1600
    expected = (100 * 1.0 + 1000 * 0.1 + 500 * 1.0 + 50 * 5.0) / MILLION
    assert response.cost == pytest.approx(expected)


def test_client_prices_are_looked_up_by_the_model_sent_and_a_providers_own_wins_for_its_model(
    call: Any, mock_server: MockServer
) -> None:
    for _ in range(4):
        mock_server.push(json=chat_answer(1000, 1000))
    prices = {"gpt-4.1-mini": failover.Price(1.0, 2.0), "gpt-4.1": failover.Price(10.0, 20.0)}
    client = failover.Client(
        {"plain": openai(mock_server), "own": openai(mock_server, price=failover.Price(3.0, 3.0))},
        prices=prices,
    )
    assert call(client, provider="plain").cost == pytest.approx(3000 / MILLION)
    assert call(client, provider="plain", model="gpt-4.1").cost == pytest.approx(30000 / MILLION)
    assert call(client, provider="own").cost == pytest.approx(6000 / MILLION)
    # A provider's own price is its own model's: another model is priced by the client's.
    assert call(client, provider="own", model="gpt-4.1").cost == pytest.approx(30000 / MILLION)
    assert json.loads(mock_server.requests[1].body)["model"] == "gpt-4.1"


def test_a_model_without_a_price_has_no_cost_and_counts_as_unpriced(
    call: Any, mock_server: MockServer
) -> None:
    mock_server.push(json=chat_answer(10, 10))
    client = failover.Client({"a": openai(mock_server)}, prices={"other": PRICE})
    response = call(client)
    assert response.cost is None
    assert response.total_cost is None
    assert response.unpriced_attempts == 1
    assert response.total_usage.input_tokens == 10


def test_without_prices_nothing_has_a_cost_but_usage_and_billed_are_reported(
    call: Any, mock_server: MockServer
) -> None:
    mock_server.push(json=chat_answer(7, 3))
    response = call(failover.Client({"a": openai(mock_server)}))
    (attempt,) = response.attempts
    assert attempt.usage == failover.Usage(7, 3, None, None, None)
    assert (attempt.billed, attempt.cost, response.total_cost) == (True, None, None)
    assert response.unpriced_attempts == 1


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_timeout_may_be_billed_and_a_refused_connection_is_not(
    call: Any, mock_server: MockServer
) -> None:
    """A hang after the request was sent cannot be known (billed None, counted
    as unpriced); a connection never made is not billed."""
    refused = failover.OpenAICompatible(
        "gpt-4.1-mini", base_url=f"http://127.0.0.1:{closed_port()}/v1", api_key=KEY
    )
    mock_server.push(fault="hang")
    slow = openai(mock_server)
    backup = MockServer()
    try:
        backup.push(json=chat_answer(100, 10))
        client = failover.Client(
            {"refused": refused, "slow": slow, "ok": openai(backup)},
            timeout=0.3,
            prices={"gpt-4.1-mini": PRICE},
            retry=failover.RetryPolicy(max_retries=0),
        )
        response = call(client)
    finally:
        backup.close()
    refused_attempt, hung, answer = response.attempts
    assert (refused_attempt.kind, refused_attempt.billed) == ("connection", False)
    assert (hung.kind, hung.billed, hung.cost) == ("timeout", None, None)
    assert answer.cost == pytest.approx((100 * 0.4 + 10 * 1.6) / MILLION)
    assert response.total_cost == answer.cost
    assert response.unpriced_attempts == 1


def test_a_failed_call_reports_what_it_cost_so_far(call: Any, mock_server: MockServer) -> None:
    """Every attempt refused: nothing billed, no cost, nothing unpriced."""
    rate_limited(mock_server, "1")
    rate_limited(mock_server, "1")
    client = failover.Client(
        {"a": openai(mock_server, price=PRICE)},
        sleeper=FakeSleeper(),
        retry=failover.RetryPolicy(max_retries=1, max_retries_last=1),
    )
    with pytest.raises(failover.RateLimited) as caught:
        call(client)
    error = caught.value
    assert [a.billed for a in error.attempts] == [False, False]
    assert (error.total_cost, error.unpriced_attempts) == (None, 0)
    assert error.total_usage == failover.Usage()


def test_an_error_body_that_carries_usage_is_billed_and_priced(
    call: Any, mock_server: MockServer
) -> None:
    mock_server.push(
        status=400,
        json={
            "error": {"message": "the output broke a rule", "type": "invalid_request_error"},
            "usage": {"prompt_tokens": 500, "completion_tokens": 100},
        },
    )
    client = failover.Client({"a": openai(mock_server, price=PRICE)})
    with pytest.raises(failover.BadRequest) as caught:
        call(client)
    (attempt,) = caught.value.attempts
    assert attempt.billed is True
    assert attempt.usage == failover.Usage(500, 100, None, None, None)
    assert caught.value.total_cost == pytest.approx((500 * 0.4 + 100 * 1.6) / MILLION)


def test_the_deadline_error_carries_the_cost_so_far(mock_server: MockServer) -> None:
    rate_limited(mock_server, "30")
    client = failover.Client(
        {"a": openai(mock_server, price=PRICE)}, sleeper=FakeSleeper(), deadline=5
    )
    with pytest.raises(failover.FailoverError) as caught:
        client.prompt("Hi")
    assert caught.value.attempts[0].billed is False
    assert caught.value.unpriced_attempts == 0


def test_a_stream_prices_its_usage_chunk(face: str, mock_server: MockServer) -> None:
    mock_server.push(
        sse=[
            oa({"model": "gpt-4.1-mini", "choices": [{"index": 0, "delta": {"content": "Hi"}}]}),
            oa(
                {
                    "model": "gpt-4.1-mini",
                    "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                }
            ),
            oa({"choices": [], "usage": {"prompt_tokens": 1000, "completion_tokens": 100}}),
            "data: [DONE]",
        ]
    )
    client = failover.Client({"a": openai(mock_server, price=PRICE)})
    _, response = collect(face, client)
    (attempt,) = response.attempts
    assert attempt.usage == failover.Usage(1000, 100, None, None, None)
    assert attempt.billed is True
    assert response.cost == pytest.approx((1000 * 0.4 + 100 * 1.6) / MILLION)
    assert response.total_cost == response.cost


def test_a_cut_stream_reports_what_it_used_up_to_the_cut(
    face: str, mock_server: MockServer
) -> None:
    """Anthropic's message_start reports the input; a cut after the first
    words: the interrupted attempt was billed, for an output nobody knows, so
    it is unpriced (total_cost is a floor, not the bill)."""
    mock_server.push(
        sse=[
            ant(
                "message_start",
                {
                    "message": {
                        "id": "msg_1",
                        "model": "claude-haiku-4-5",
                        "usage": {"input_tokens": 2000, "output_tokens": 1},
                    }
                },
            ),
            ant(
                "content_block_start",
                {"index": 0, "content_block": {"type": "text", "text": ""}},
            ),
            ant(
                "content_block_delta",
                {"index": 0, "delta": {"type": "text_delta", "text": "Once upon"}},
            ),
        ],
        fault="cut:3",
    )
    client = failover.Client({"claude": anthropic(mock_server, price=failover.Price(1.0, 5.0))})
    with pytest.raises(failover.StreamInterrupted) as caught:
        collect(face, client)
    error = caught.value
    (attempt,) = error.attempts
    assert attempt.billed is True
    # The input is known; the output so far (message_start's 1) is not the bill.
    assert attempt.usage == failover.Usage(2000, None, None, None, None)
    assert error.usage is not None and error.usage.output_tokens == 1
    assert (attempt.cost, error.total_cost) == (None, None)
    assert error.unpriced_attempts == 1


def test_embeddings_use_the_embedding_price(face: str, mock_server: MockServer) -> None:
    mock_server.push(
        json={
            "object": "list",
            "model": "text-embedding-3-small",
            "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2]}],
            "usage": {"prompt_tokens": 1000, "total_tokens": 1000},
        }
    )
    provider = openai(
        mock_server,
        embedding_model="text-embedding-3-small",
        price=PRICE,
        embedding_price=failover.Price(input=0.02, output=0.0),
    )
    client = failover.Client({"a": provider})
    if face == "sync":
        result = client.embed("hello")
    else:
        result = asyncio.run(client.embed_async("hello"))
    (attempt,) = result.attempts
    assert attempt.model == "text-embedding-3-small"
    assert result.cost == pytest.approx(1000 * 0.02 / MILLION)
    assert result.total_usage.input_tokens == 1000


genai_prices = pytest.importorskip("genai_prices", reason="genai-prices is not installed")


def test_genai_prices_prices_a_known_model_at_its_published_rate(
    call: Any, mock_server: MockServer
) -> None:
    """gpt-4.1-mini at genai-prices' published $0.40 / $1.60 / $0.10 cached
    (the Makefile pins the package version these figures come from)."""
    mock_server.push(json=chat_answer(1000, 100, cached=200))
    provider = failover.OpenAI("gpt-4.1-mini", base_url=mock_server.url, api_key=KEY)
    client = failover.Client({"a": provider}, prices="genai-prices")
    response = call(client)
    assert response.cost == pytest.approx((800 * 0.4 + 200 * 0.1 + 100 * 1.6) / MILLION)


def test_genai_prices_never_guesses(call: Any, mock_server: MockServer) -> None:
    """A model it does not know, and a server it cannot place (an
    OpenAI-compatible URL on loopback, Ollama), have no price."""
    mock_server.push(json=chat_answer(10, 10))
    mock_server.push(json=chat_answer(10, 10))
    unknown = failover.OpenAI("no-such-model-9", base_url=mock_server.url, api_key=KEY)
    client = failover.Client(
        {"unknown": unknown, "local": openai(mock_server)}, prices="genai-prices"
    )
    assert call(client, provider="unknown").cost is None
    response = call(client, provider="local")
    assert (response.cost, response.unpriced_attempts) == (None, 1)


def test_genai_prices_without_the_package_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, mock_server: MockServer
) -> None:
    monkeypatch.setitem(sys.modules, "genai_prices", None)
    with pytest.raises(failover.ConfigurationError, match=r"failover\[prices\]"):
        failover.Client({"a": openai(mock_server)}, prices="genai-prices")


@pytest.mark.parametrize(
    "make",
    [
        lambda: failover.Price(-1, 1),
        lambda: failover.Price("1", 1),
        lambda: failover.Price(True, 1),
        lambda: failover.Price(1, float("inf")),
        lambda: failover.Price(10**400, 1),
        lambda: failover.Price(1, 1, cache_read=float("nan")),
        lambda: failover.OpenAI("m", api_key=KEY, price=1.0),
        lambda: failover.Anthropic("m", api_key=KEY, embedding_price=failover.Price(1, 1)),
        lambda: failover.Client({"a": failover.OpenAI("m", api_key=KEY)}, prices={"m": 1}),
        lambda: failover.Client({"a": failover.OpenAI("m", api_key=KEY)}, prices={"": PRICE}),
        lambda: failover.Client({"a": failover.OpenAI("m", api_key=KEY)}, prices="litellm"),
    ],
)
def test_prices_are_checked_when_given(make: Any) -> None:
    with pytest.raises(failover.ConfigurationError):
        make()


def test_price_is_a_readable_value() -> None:
    price = failover.Price(0.4, 1.6, cache_read=0.1)
    assert repr(price) == "Price(input=0.4, output=1.6, cache_read=0.1, cache_write=None)"
    assert price == failover.Price(0.4, 1.6, 0.1)
    assert price.cost(failover.Usage(input_tokens=None)) is None


@pytest.mark.parametrize(
    ("status", "billed"), [(400, False), (503, False), (500, None), (504, None)]
)
def test_an_error_status_is_a_refusal_or_cannot_be_known(
    call: Any, mock_server: MockServer, status: int, billed: bool | None
) -> None:
    """A 4xx, 503 or 529 refuses before generating; a gateway's 504 (or a 500) may come
    after the model generated: unknown, and counted as unpriced."""
    mock_server.push(status=status, json={"error": {"message": "no"}})
    client = failover.Client(
        {"a": openai(mock_server, price=PRICE)},
        retry=failover.RetryPolicy(max_retries=0, max_retries_last=0),
    )
    with pytest.raises(failover.ProviderError) as caught:
        call(client)
    assert caught.value.attempts[-1].billed is billed
    assert caught.value.unpriced_attempts == (0 if billed is False else 1)


def test_a_key_callable_that_raises_sent_nothing_and_is_not_billed(
    mock_server: MockServer, backup_server: MockServer
) -> None:
    def broken_key() -> str:
        raise RuntimeError("vault is down")

    backup_server.push(json=chat_answer(10, 1))
    keyless = failover.OpenAICompatible(
        "gpt-4.1-mini", base_url=mock_server.url, api_key=broken_key
    )
    client = failover.Client({"a": keyless, "b": openai(backup_server)})
    response = client.prompt("Hi")
    assert mock_server.requests == []
    assert response.attempts[0].billed is False
    assert response.unpriced_attempts == 1  # only b's answer, which has no price
