"""LLMCallCache persistence and CachedLLM: only misses reach the backend."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from pipeline.models.llm.base import LLMRequest, LLMResponse, OnResponse
from pipeline.models.llm.cache import CachedLLM, LLMCallCache
from pipeline.models.llm.costs import BudgetExceededError
from pipeline.models.llm.scripted import ScriptedBackend


def _request(i: int, *, purpose: str = "qa_new") -> LLMRequest:
    return LLMRequest(
        messages=({"role": "user", "content": f"question {i}"},),
        prompt_hash="tmpl-1",
        purpose=purpose,
        json_schema={"type": "object"},
    )


def _answer(request: LLMRequest) -> str:
    return json.dumps({"answer": request.messages[0]["content"]})


def test_roundtrip_keeps_the_whole_response(tmp_path: Path) -> None:
    cache = LLMCallCache(tmp_path / "llm.db")
    response = LLMResponse(
        text='{"a": 1}',
        model="gpt-4o-mini-2024-07-18",
        parsed={"a": 1},
        prompt_tokens=12,
        completion_tokens=3,
        cost_usd=0.0001,
        meta={"finish_reason": "stop"},
    )
    assert cache.put("k1", response, backend_id="openai", purpose="qa_new")
    cache.close()
    again = LLMCallCache(tmp_path / "llm.db").get("k1")
    assert again is not None
    assert again.cached is True
    assert (again.text, again.model, again.parsed) == (response.text, response.model, {"a": 1})
    assert (again.prompt_tokens, again.completion_tokens) == (12, 3)
    assert again.cost_usd == pytest.approx(0.0001)
    assert again.meta == {"finish_reason": "stop"}
    assert "k1" in LLMCallCache(tmp_path / "llm.db")


def test_failures_are_not_stored(tmp_path: Path) -> None:
    cache = LLMCallCache(tmp_path / "llm.db")
    failed = LLMResponse(text="", model="m", error="HTTP 500")
    assert cache.put("bad", failed, backend_id="openai") is False
    assert cache.get("bad") is None
    assert len(cache) == 0


def test_wal_mode(tmp_path: Path) -> None:
    cache = LLMCallCache(tmp_path / "llm.db")
    assert cache._connection().execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_cached_llm_sends_only_misses(tmp_path: Path) -> None:
    backend = ScriptedBackend(_answer, model="scripted-1")
    llm = CachedLLM(backend, LLMCallCache(tmp_path / "llm.db"))
    first = llm.complete_many([_request(1), _request(2), _request(1)])  # 1 twice in one call
    assert [r.parsed for r in first] == [
        {"answer": "question 1"},
        {"answer": "question 2"},
        {"answer": "question 1"},
    ]
    assert backend.calls == 2 and llm.calls_made == 2 and llm.hits == 0
    assert not any(r.cached for r in first)

    second = llm.complete_many([_request(2), _request(3), _request(1)])
    assert backend.calls == 3 and llm.calls_made == 3 and llm.hits == 2
    assert [r.cached for r in second] == [True, False, True]
    assert second[0].parsed == {"answer": "question 2"}
    assert llm.backend_id == "scripted" and llm.model == "scripted-1"

    # A new process (fresh objects on the same file) pays for nothing already answered.
    backend2 = ScriptedBackend(_answer, model="scripted-1")
    llm2 = CachedLLM(backend2, LLMCallCache(tmp_path / "llm.db"))
    assert llm2.misses([_request(1), _request(4)]) == [_request(4)]
    llm2.complete_many([_request(1), _request(2), _request(3)])
    assert backend2.calls == 0 and llm2.hits == 3


def test_model_is_part_of_the_key(tmp_path: Path) -> None:
    cache = LLMCallCache(tmp_path / "llm.db")
    CachedLLM(ScriptedBackend(_answer, model="a"), cache).complete_many([_request(1)])
    other = ScriptedBackend(_answer, model="b")
    CachedLLM(other, cache).complete_many([_request(1)])
    assert other.calls == 1


def test_failed_answers_are_retried_next_time(tmp_path: Path) -> None:
    attempts: list[int] = []

    def flaky(request: LLMRequest) -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("server melted")
        return _answer(request)

    llm = CachedLLM(ScriptedBackend(flaky), LLMCallCache(tmp_path / "llm.db"))
    assert llm.complete_many([_request(1)])[0].error == "RuntimeError: server melted"
    assert llm.complete_many([_request(1)])[0].error is None
    assert llm.complete_many([_request(1)])[0].cached is True
    assert len(attempts) == 2


class _BudgetedBackend:
    """Answers the first two requests, then stops like OpenAIBackend on a budget."""

    backend_id = "fake"
    model = "fake-1"

    def complete_many(
        self, requests: list[LLMRequest], *, on_response: OnResponse | None = None
    ) -> list[LLMResponse]:
        answered: list[LLMResponse | None] = []
        for index, r in enumerate(requests[:2]):
            answered.append(LLMResponse(text=_answer(r), model=self.model, parsed={"ok": 1}))
            if on_response is not None:
                on_response(index, answered[-1])
        raise BudgetExceededError("budget", responses=answered + [None] * (len(requests) - 2))


def test_budget_stop_keeps_what_was_paid_for(tmp_path: Path) -> None:
    llm = CachedLLM(_BudgetedBackend(), LLMCallCache(tmp_path / "llm.db"))
    with pytest.raises(BudgetExceededError):
        llm.complete_many([_request(1), _request(2), _request(3)])
    assert llm.calls_made == 2
    assert llm.misses([_request(1), _request(2), _request(3)]) == [_request(3)]


def _write_from_child(path: str, start: int) -> None:
    cache = LLMCallCache(path)
    for i in range(start, start + 50):
        cache.put(f"k{i}", LLMResponse(text=str(i), model="m"), backend_id="x")


def test_two_processes_write_the_same_file(tmp_path: Path) -> None:
    path = str(tmp_path / "llm.db")
    LLMCallCache(path)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_write_from_child, args=(path, s)) for s in (0, 50)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert all(p.exitcode == 0 for p in procs)
    assert len(LLMCallCache(path)) == 100


def test_scripted_backend_contract() -> None:
    def responder(request: LLMRequest) -> str | LLMResponse:
        text = request.messages[0]["content"]
        if text.endswith("1"):
            return "```json\n{'answer': 'one',}\n```"
        if text.endswith("2"):
            return LLMResponse(text='{"answer": "two"}', model="custom", prompt_tokens=7)
        raise ValueError("no script for this one")

    backend = ScriptedBackend(responder, model="scripted-test")
    one, two, three = backend.complete_many([_request(1), _request(2), _request(3)])
    assert one.parsed == {"answer": "one"} and one.model == "scripted-test"
    assert one.prompt_tokens > 0 and one.completion_tokens > 0
    assert two.parsed == {"answer": "two"} and two.model == "custom" and two.prompt_tokens == 7
    assert three.error == "ValueError: no script for this one" and three.parsed is None
    assert backend.calls == 3 and backend.requests == [_request(1), _request(2), _request(3)]


def test_scripted_backend_lets_pipeline_errors_raise() -> None:
    def over_budget(request: LLMRequest) -> str:
        raise BudgetExceededError("no money left")

    with pytest.raises(BudgetExceededError):
        ScriptedBackend(over_budget).complete_many([_request(1)])
