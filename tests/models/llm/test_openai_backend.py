"""OpenAIBackend over real HTTP against the local OpenAI-compatible server (no client mocks)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.errors import ConfigError
from pipeline.models.llm import make_llm
from pipeline.models.llm.base import UNANSWERED, LLMRequest
from pipeline.models.llm.cache import CachedLLM, LLMCallCache
from pipeline.models.llm.costs import BudgetExceededError, CostLedger
from pipeline.models.llm.openai_backend import OpenAIBackend
from tests.servers.openai_server import OpenAIServer, last_user_text

SCHEMA = {
    "type": "object",
    "properties": {"question": {"type": "string"}, "answer": {"type": "string"}},
    "required": ["question", "answer"],
    "additionalProperties": False,
}


def _responder(body: dict[str, Any]) -> str:
    question = last_user_text(body).split("\n")[0]
    return json.dumps({"question": question, "answer": f"answer to {question}"})


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(_responder) as srv:
        yield srv


def _request(i: int, *, schema: dict[str, Any] | None = SCHEMA, max_tokens: int = 64) -> LLMRequest:
    return LLMRequest(
        messages=(
            {"role": "system", "content": "You write quiz questions."},
            {"role": "user", "content": f"q{i}"},
        ),
        prompt_hash="tmpl-qa-1",
        purpose="qa_new",
        json_schema=schema,
        schema_name="qa item",
        max_tokens=max_tokens,
    )


def _backend(server: OpenAIServer, **kwargs: Any) -> OpenAIBackend:
    kwargs.setdefault("sleep", [].append)
    kwargs.setdefault("trust_base_url", True)  # the server stands in for OpenAI's API
    return OpenAIBackend("gpt-4o-mini", base_url=server.url, api_key="test-key", **kwargs)


def _formats(server: OpenAIServer) -> list[str]:
    return [(b.get("response_format") or {}).get("type", "none") for b in server.chat_requests]


def test_structured_output_request_and_parse(server: OpenAIServer) -> None:
    backend = _backend(server)
    [response] = backend.complete_many([_request(1)])
    assert response.error is None
    assert response.parsed == {"question": "q1", "answer": "answer to q1"}
    [body] = server.chat_requests
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "qa_item", "schema": SCHEMA, "strict": True},
    }
    assert body["model"] == "gpt-4o-mini" and body["max_tokens"] == 64
    assert body["messages"][1] == {"role": "user", "content": "q1"}  # no prompt note needed
    headers = server.requests_to("/v1/chat/completions")[0].headers
    assert headers["authorization"] == "Bearer test-key"


def test_a_seed_is_sent_only_when_the_request_has_one(server: OpenAIServer) -> None:
    from dataclasses import replace

    seeded = replace(_request(1), temperature=0.7, seed=3)
    _backend(server).complete_many([_request(2), seeded])
    bodies = {b["messages"][1]["content"]: b for b in server.chat_requests}
    assert "seed" not in bodies["q2"] and bodies["q2"]["temperature"] == 0.0
    assert (bodies["q1"]["seed"], bodies["q1"]["temperature"]) == (3, 0.7)
    # an unseeded request keeps the cache key it had before requests had seeds (the value
    # computed with that code), so no cached answer is lost; the seed is part of the key
    before_seeds = "f2157f006b60313fd250a4bc4e2beabdf790f247f57049c0604aef6f2f19c4a1"
    assert _request(1).cache_key("b", "m") == before_seeds
    assert seeded.cache_key("b", "m") != replace(seeded, seed=4).cache_key("b", "m")


def test_request_without_schema_sends_no_response_format(server: OpenAIServer) -> None:
    [response] = _backend(server).complete_many([_request(1, schema=None)])
    assert response.error is None
    assert "response_format" not in server.chat_requests[0]


def test_fallback_to_json_object_is_remembered(server: OpenAIServer) -> None:
    server.supports_json_schema = False
    backend = _backend(server, max_concurrency=1)
    first = backend.complete_many([_request(1), _request(2)])
    assert [r.parsed["question"] for r in first if r.parsed] == ["q1", "q2"]
    assert backend.response_format == "json_object"
    second = backend.complete_many([_request(3)])
    assert second[0].error is None and second[0].meta["response_format"] == "json_object"
    # json_schema was tried once only; later requests went straight to json_object
    assert _formats(server) == ["json_schema", "json_object", "json_object", "json_object"]
    # json_object needs the word JSON and benefits from the schema: both are in the prompt
    last_user = server.chat_requests[-1]["messages"][-1]["content"]
    assert last_user.startswith("q3\n\n") and "JSON" in last_user and '"answer"' in last_user


def test_fallback_down_to_plain_text(server: OpenAIServer) -> None:
    server.supports_json_schema = False
    server.supports_json_object = False
    backend = _backend(server)
    [response] = backend.complete_many([_request(1)])
    assert response.error is None and response.parsed is not None
    assert backend.response_format == "text"
    assert _formats(server) == ["json_schema", "json_object", "none"]


def test_structured_outputs_on_does_not_fall_back(server: OpenAIServer) -> None:
    server.supports_json_schema = False
    backend = _backend(server, structured_outputs="on")
    [response] = backend.complete_many([_request(1)])
    assert response.error is not None and "HTTP 400" in response.error
    assert "json_schema" in response.error
    assert _formats(server) == ["json_schema"]


def test_structured_outputs_off_uses_the_prompt(server: OpenAIServer) -> None:
    [response] = _backend(server, structured_outputs="off").complete_many([_request(1)])
    assert response.parsed is not None
    assert _formats(server) == ["none"]
    assert "JSON" in server.chat_requests[0]["messages"][-1]["content"]


def test_429_retried_honouring_retry_after(server: OpenAIServer) -> None:
    server.fail_next(2, 429, retry_after=7)
    sleeps: list[float] = []
    backend = _backend(server, sleep=sleeps.append)
    [response] = backend.complete_many([_request(1)])
    assert response.error is None and response.parsed is not None
    assert sleeps == [7.0, 7.0]
    assert len(server.chat_requests) == 3
    assert response.meta["attempts"] == 3 and backend.retries == 2


def test_retry_after_ms_wins(server: OpenAIServer) -> None:
    server.fail_next(1, 429, retry_after=30, retry_after_ms=1500)
    sleeps: list[float] = []
    [response] = _backend(server, sleep=sleeps.append).complete_many([_request(1)])
    assert response.error is None and sleeps == [1.5]


def test_500_retried_with_backoff(server: OpenAIServer) -> None:
    server.fail_next(2, 500)
    sleeps: list[float] = []
    backend = _backend(server, sleep=sleeps.append, backoff_base_s=2.0, seed=1)
    [response] = backend.complete_many([_request(1)])
    assert response.error is None
    assert len(sleeps) == 2
    assert 1.0 <= sleeps[0] <= 2.0 and 2.0 <= sleeps[1] <= 4.0  # exponential, jittered


def test_persistent_failure_is_a_response_not_an_exception(server: OpenAIServer) -> None:
    server.fail_next(10, 503)
    sleeps: list[float] = []
    backend = _backend(server, sleep=sleeps.append, max_retries=2)
    responses = backend.complete_many([_request(1)])
    assert responses[0].error is not None
    assert responses[0].error.startswith("gave up after 3 attempts: HTTP 503")
    assert responses[0].parsed is None
    assert len(server.chat_requests) == 3 and len(sleeps) == 2
    assert responses[0].meta[UNANSWERED]  # the endpoint never answered: not the item's fault


def test_non_retryable_4xx_fails_at_once(server: OpenAIServer) -> None:
    server.reject = lambda body: "content policy" if "q2" in json.dumps(body) else None
    responses = _backend(server).complete_many([_request(1), _request(2), _request(3)])
    assert [r.error is None for r in responses] == [True, False, True]
    assert "HTTP 400" in (responses[1].error or "") and "content policy" in (
        responses[1].error or ""
    )
    assert not responses[1].meta[UNANSWERED]  # an answer, a refusal of this request
    assert len(server.chat_requests) == 3


def test_connection_errors_are_retried_then_reported() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before use: nothing listens there
    sleeps: list[float] = []
    backend = OpenAIBackend(
        "gpt-4o-mini",
        base_url=f"http://127.0.0.1:{port}/v1",
        api_key="k",
        max_retries=1,
        sleep=sleeps.append,
        timeout_s=5,
    )
    [response] = backend.complete_many([_request(1)])
    assert response.error is not None and "APIConnectionError" in response.error
    assert len(sleeps) == 1 and response.meta[UNANSWERED]


def test_malformed_json_content_gives_parsed_none(server: OpenAIServer) -> None:
    server.malformed_next(1)
    first, second = _backend(server, max_concurrency=1).complete_many([_request(1), _request(2)])
    assert first.error is None and first.parsed is None and first.text.startswith('{"answer"')
    assert second.parsed == {"question": "q2", "answer": "answer to q2"}


def test_bounded_concurrency(server: OpenAIServer) -> None:
    server.latency_s = 0.15
    backend = _backend(server, max_concurrency=3)
    responses = backend.complete_many([_request(i) for i in range(9)])
    assert all(r.error is None for r in responses)
    assert [r.parsed["question"] for r in responses if r.parsed] == [f"q{i}" for i in range(9)]
    assert 2 <= server.max_concurrent <= 3
    assert backend.max_in_flight <= 3


def test_usage_and_cost_accounted(server: OpenAIServer) -> None:
    ledger = CostLedger()
    backend = _backend(server, ledger=ledger)
    responses = backend.complete_many([_request(1), _request(2)])
    prompt = sum(r.prompt_tokens for r in responses)
    completion = sum(r.completion_tokens for r in responses)
    assert prompt > 0 and completion > 0
    expected = (prompt * 0.15 + completion * 0.60) / 1e6  # gpt-4o-mini prices
    assert sum(r.cost_usd for r in responses) == pytest.approx(expected)
    record = ledger.to_dict()
    assert record["per_model"]["gpt-4o-mini"]["prompt_tokens"] == prompt
    assert record["per_model"]["gpt-4o-mini"]["completion_tokens"] == completion
    assert record["spent_usd"] == pytest.approx(expected)
    server_usage = [
        json.loads(r.body) for r in server.requests_to("/v1/chat/completions")
    ]  # requests only: the server's usage is echoed back in the responses
    assert len(server_usage) == 2


def test_budget_stops_before_exceeding(server: OpenAIServer, tmp_path: Path) -> None:
    # Long answers cut at max_tokens: the real cost is close to the worst-case estimate.
    server.responder = lambda body: json.dumps({"question": "q", "answer": "x" * 400})
    requests = [_request(i, max_tokens=20) for i in range(10)]
    ledger = CostLedger(max_cost_usd=1.0)
    worst = ledger.estimate_request(requests[0], "gpt-4o-mini")[2]
    ledger.max_cost_usd = 3.5 * worst  # room for a few requests, not ten
    backend = _backend(server, ledger=ledger, max_concurrency=1)
    llm = CachedLLM(backend, LLMCallCache(tmp_path / "llm.db"))
    with pytest.raises(BudgetExceededError) as info:
        llm.complete_many(requests)
    sent = len(server.chat_requests)
    assert 3 <= sent < 10
    assert ledger.spent_usd <= ledger.max_cost_usd
    # the request that was refused would have passed the budget in the worst case
    assert ledger.spent_usd + worst > ledger.max_cost_usd
    assert "spent" in str(info.value) and "asked" in str(info.value)
    got = [r for r in info.value.responses if r is not None]
    assert len(got) == sent and all(r.error is None for r in got)
    # what was paid for is cached: raising the budget sends only the rest
    ledger.max_cost_usd = 100.0
    server.clear()
    out = llm.complete_many(requests)
    assert len(server.chat_requests) == 10 - sent
    assert all(r.error is None for r in out)


def test_dry_run_estimate_sends_nothing(server: OpenAIServer) -> None:
    backend = _backend(server)
    prompt, completion, usd = backend.estimate([_request(i) for i in range(5)])
    assert prompt > 0 and completion == 5 * 64 and usd > 0
    assert server.requests == []


def test_real_endpoint_needs_a_key_but_dry_runs_do_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    backend = OpenAIBackend("gpt-4o")
    assert backend.estimate([_request(1)])[2] > 0
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        backend.complete_many([_request(1)])


def test_cached_rerun_makes_no_second_request(server: OpenAIServer, tmp_path: Path) -> None:
    requests = [_request(i) for i in range(4)]
    llm = make_llm(
        "openai:gpt-4o-mini",
        cache_path=tmp_path / "llm.db",
        base_url=server.url,
        api_key="k",
    )
    assert isinstance(llm, CachedLLM)
    first = llm.complete_many(requests)
    assert len(server.chat_requests) == 4
    again = make_llm(
        "openai:gpt-4o-mini", cache_path=tmp_path / "llm.db", base_url=server.url, api_key="k"
    )
    second = again.complete_many(requests)
    assert len(server.chat_requests) == 4  # nothing new reached the server
    assert [r.parsed for r in second] == [r.parsed for r in first]
    assert all(r.cached for r in second)


def test_works_inside_a_running_event_loop(server: OpenAIServer) -> None:
    backend = _backend(server)

    async def caller() -> list[str | None]:
        return [r.error for r in backend.complete_many([_request(1), _request(2)])]

    assert asyncio.run(caller()) == [None, None]


def test_truncated_answer_is_flagged(server: OpenAIServer) -> None:
    [response] = _backend(server).complete_many([_request(1, max_tokens=2)])
    assert response.meta["finish_reason"] == "length" and response.meta["truncated"] is True


def test_rate_limit_spaces_requests(server: OpenAIServer) -> None:
    sleeps: list[float] = []
    backend = _backend(server, requests_per_minute=600, sleep=sleeps.append, max_concurrency=4)
    backend.complete_many([_request(i) for i in range(4)])
    # 600 rpm = one start every 0.1 s; the fake sleep returns at once, so the second, third
    # and fourth starts are asked to wait about 0.1, 0.2 and 0.3 s
    assert len(sleeps) == 3
    assert sleeps == sorted(sleeps) and 0.2 < sleeps[-1] <= 0.3 + 1e-6
