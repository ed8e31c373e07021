"""OpenAIBatchRunner over real HTTP: full cycle, resume after a crash, partial results."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.errors import WikidriftError
from pipeline.models.llm.base import LLMRequest
from pipeline.models.llm.batch import OpenAIBatchRunner
from pipeline.models.llm.cache import CachedLLM, LLMCallCache
from pipeline.models.llm.costs import BudgetExceededError, CostLedger
from pipeline.models.llm.openai_backend import OpenAIBackend, endpoint_address
from tests.servers.openai_server import OpenAIServer, last_user_text

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}


def _responder(body: dict[str, Any]) -> str:
    return json.dumps({"answer": f"about {last_user_text(body).splitlines()[0]}"})


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(_responder, batch_polls=3) as srv:
        yield srv


def _request(i: int) -> LLMRequest:
    return LLMRequest(
        messages=({"role": "user", "content": f"fact {i}"},),
        prompt_hash="tmpl-quad-1",
        purpose="quadruples",
        json_schema=SCHEMA,
        max_tokens=50,
    )


def _backend(server: OpenAIServer, ledger: CostLedger | None = None) -> OpenAIBackend:
    # A stand-in for OpenAI's own API, so trusted with the key.
    return OpenAIBackend(
        "gpt-4o-mini",
        base_url=server.url,
        api_key="k",
        sleep=[].append,
        ledger=ledger,
        trust_base_url=True,
    )


def _work_requests(server: OpenAIServer) -> list:
    """Requests other than the identity probe (GET /v1/models: free, once per backend)."""
    return [r for r in server.requests if (r.method, r.path) != ("GET", "/v1/models")]


def _count(server: OpenAIServer, method: str, path: str) -> int:
    return len(server.requests_to(path, method))


def test_full_cycle(server: OpenAIServer, tmp_path: Path) -> None:
    ledger = CostLedger()
    backend = _backend(server, ledger)
    cache = LLMCallCache(tmp_path / "llm.db")
    sleeps: list[float] = []
    runner = OpenAIBatchRunner(
        backend, state_dir=tmp_path / "batch", cache=cache, poll_interval_s=30, sleep=sleeps.append
    )
    requests = [_request(1), _request(2), _request(3), _request(1)]
    responses = runner.run(requests)
    assert [r.parsed for r in responses] == [
        {"answer": "about fact 1"},
        {"answer": "about fact 2"},
        {"answer": "about fact 3"},
        {"answer": "about fact 1"},
    ]
    assert all(r.error is None and not r.cached for r in responses)
    # one upload, one batch, polled until completed (validating -> in_progress -> completed)
    assert _count(server, "POST", "/v1/files") == 1
    assert _count(server, "POST", "/v1/batches") == 1
    assert runner.polls == 3 and sleeps == [30.0, 30.0]
    assert _count(server, "POST", "/v1/chat/completions") == 0

    # the uploaded JSONL: one line per distinct miss, keyed by the cache key
    [batch] = server.batches.values()
    assert batch["endpoint"] == "/v1/chat/completions" and batch["completion_window"] == "24h"
    assert server.files[batch["input_file_id"]]["purpose"] == "batch"
    lines = [json.loads(x) for x in server.file_bytes(batch["input_file_id"]).splitlines()]
    assert len(lines) == 3
    # The key names the server (host:port), as the sync path's CachedLLM does.
    address = endpoint_address(server.url)
    assert lines[0]["custom_id"] == _request(1).cache_key("openai", "gpt-4o-mini", address)
    assert lines[0]["method"] == "POST" and lines[0]["url"] == "/v1/chat/completions"
    assert lines[0]["body"]["response_format"]["type"] == "json_schema"
    assert lines[0]["body"]["model"] == "gpt-4o-mini"

    # batch prices are half the sync prices
    first = responses[0]
    assert first.cost_usd == pytest.approx(
        ledger.cost("gpt-4o-mini", first.prompt_tokens, first.completion_tokens) / 2
    )
    assert first.meta["batch_id"] == batch["id"]

    # the state is archived, nothing is pending
    assert runner.pending_batch_id is None
    assert not (tmp_path / "batch" / "batch.json").exists()
    archived = json.loads((tmp_path / "batch" / f"batch-{batch['id']}.json").read_text())
    assert archived["status"] == "done" and archived["final_status"] == "completed"
    assert sorted(p.name for p in (tmp_path / "batch").glob("*.jsonl")) == []

    # the answers are in the cache: the sync path makes zero requests
    server.clear()
    llm = CachedLLM(_backend(server), LLMCallCache(tmp_path / "llm.db"))
    again = llm.complete_many(requests)
    assert _work_requests(server) == []
    assert llm.calls_made == 0 and llm.hits == 4
    assert [r.parsed for r in again] == [r.parsed for r in responses]

    # a second run of the same requests uploads nothing
    runner.run(requests)
    assert _work_requests(server) == []


class _Crash(Exception):
    pass


def _crash(_: float) -> None:
    raise _Crash("killed while polling")


def test_resume_after_crash_while_polling(server: OpenAIServer, tmp_path: Path) -> None:
    state_dir = tmp_path / "batch"
    requests = [_request(i) for i in range(5)]
    crashing = OpenAIBatchRunner(
        _backend(server), state_dir=state_dir, cache=LLMCallCache(tmp_path / "llm.db"), sleep=_crash
    )
    with pytest.raises(_Crash):
        crashing.run(requests)
    state = json.loads((state_dir / "batch.json").read_text())
    batch_id = state["batch_id"]
    assert batch_id and state["status"] == "submitted" and len(state["requests"]) == 5
    assert crashing.pending_batch_id == batch_id

    # a new process: new backend, new cache object, same files
    resumed = OpenAIBatchRunner(
        _backend(server),
        state_dir=state_dir,
        cache=LLMCallCache(tmp_path / "llm.db"),
        sleep=lambda s: None,
    )
    responses = resumed.run(requests)
    assert [r.parsed for r in responses] == [{"answer": f"about fact {i}"} for i in range(5)]
    assert resumed.batches_resumed == 1 and resumed.uploads == 0 and resumed.batches_created == 0
    assert _count(server, "POST", "/v1/files") == 1
    assert _count(server, "POST", "/v1/batches") == 1
    assert {r.path.rsplit("/", 1)[-1] for r in server.requests_to("/v1/batches/" + batch_id, "GET")}
    assert all(r.meta["batch_id"] == batch_id for r in responses)

    server.clear()
    llm = CachedLLM(_backend(server), LLMCallCache(tmp_path / "llm.db"))
    llm.complete_many(requests)
    assert _work_requests(server) == [] and llm.calls_made == 0


def test_resume_after_crash_between_create_and_saving_the_id(
    server: OpenAIServer, tmp_path: Path
) -> None:
    state_dir = tmp_path / "batch"
    runner = OpenAIBatchRunner(_backend(server), state_dir=state_dir, sleep=lambda s: None)
    original = runner._save_state

    def save_then_die_after_create(state: dict[str, Any]) -> None:
        if state.get("batch_id"):
            raise _Crash("killed right after batches.create")
        original(state)

    runner._save_state = save_then_die_after_create  # type: ignore[method-assign]
    with pytest.raises(_Crash):
        runner.run([_request(1), _request(2)])
    state = json.loads((state_dir / "batch.json").read_text())
    assert state["input_file_id"] and not state["batch_id"]

    resumed = OpenAIBatchRunner(_backend(server), state_dir=state_dir, sleep=lambda s: None)
    responses = resumed.run([_request(1), _request(2)])
    assert all(r.error is None for r in responses)
    # the batch made before the crash was found by its input file and reused
    assert _count(server, "POST", "/v1/batches") == 1
    assert _count(server, "POST", "/v1/files") == 1
    assert _count(server, "GET", "/v1/batches?limit=100") == 1


def test_only_cache_misses_are_sent(server: OpenAIServer, tmp_path: Path) -> None:
    cache = LLMCallCache(tmp_path / "llm.db")
    CachedLLM(_backend(server), cache).complete_many([_request(1)])
    runner = OpenAIBatchRunner(
        _backend(server), state_dir=tmp_path / "b", cache=cache, sleep=lambda s: None
    )
    responses = runner.run([_request(1), _request(2)])
    assert responses[0].cached is True and responses[1].cached is False
    [batch] = server.batches.values()
    assert len(server.file_bytes(batch["input_file_id"]).splitlines()) == 1


def test_failed_requests_come_back_with_error(server: OpenAIServer, tmp_path: Path) -> None:
    server.reject = lambda body: "bad request" if "fact 2" in json.dumps(body) else None
    cache = LLMCallCache(tmp_path / "llm.db")
    runner = OpenAIBatchRunner(
        _backend(server), state_dir=tmp_path / "b", cache=cache, sleep=lambda s: None
    )
    responses = runner.run([_request(1), _request(2), _request(3)])
    assert [r.error is None for r in responses] == [True, False, True]
    assert "HTTP 400" in (responses[1].error or "") and "bad request" in (responses[1].error or "")
    assert len(cache) == 2  # the failure is not cached: a later run retries it


def test_expired_batch_keeps_partial_output(server: OpenAIServer, tmp_path: Path) -> None:
    server.batch_outcome = "expired"
    server.batch_expire_after = 2
    cache = LLMCallCache(tmp_path / "llm.db")
    runner = OpenAIBatchRunner(
        _backend(server), state_dir=tmp_path / "b", cache=cache, sleep=lambda s: None
    )
    responses = runner.run([_request(1), _request(2), _request(3)])
    assert [r.error is None for r in responses] == [True, True, False]
    assert "batch_expired" in (responses[2].error or "")
    assert len(cache) == 2


def test_failed_batch_marks_every_request(server: OpenAIServer, tmp_path: Path) -> None:
    server.batch_outcome = "failed"
    runner = OpenAIBatchRunner(_backend(server), state_dir=tmp_path / "b", sleep=lambda s: None)
    responses = runner.run([_request(1), _request(2)])
    assert all(r.error and "failed" in r.error for r in responses)
    assert runner.pending_batch_id is None


def test_budget_is_checked_before_upload(server: OpenAIServer, tmp_path: Path) -> None:
    ledger = CostLedger(max_cost_usd=1e-7)
    runner = OpenAIBatchRunner(
        _backend(server, ledger), state_dir=tmp_path / "b", sleep=lambda s: None
    )
    assert runner.estimate([_request(1)])[2] > 1e-7
    with pytest.raises(BudgetExceededError):
        runner.run([_request(1)])
    assert _work_requests(server) == []


def test_max_wait_leaves_the_batch_pending(server: OpenAIServer, tmp_path: Path) -> None:
    runner = OpenAIBatchRunner(
        _backend(server), state_dir=tmp_path / "b", sleep=lambda s: None, max_wait_s=0
    )
    with pytest.raises(WikidriftError, match="run again later"):
        runner.run([_request(1)])
    pending = runner.pending_batch_id
    assert pending is not None
    later = OpenAIBatchRunner(_backend(server), state_dir=tmp_path / "b", sleep=lambda s: None)
    assert later.run([_request(1)])[0].error is None
    assert _count(server, "POST", "/v1/batches") == 1


def test_large_request_lists_are_split(server: OpenAIServer, tmp_path: Path) -> None:
    runner = OpenAIBatchRunner(
        _backend(server), state_dir=tmp_path / "b", sleep=lambda s: None, max_requests_per_batch=2
    )
    responses = runner.run([_request(i) for i in range(5)])
    assert all(r.error is None for r in responses)
    assert _count(server, "POST", "/v1/batches") == 3


def test_bare_client_needs_a_model(server: OpenAIServer, tmp_path: Path) -> None:
    import openai

    client = openai.OpenAI(base_url=server.url, api_key="k")
    with pytest.raises(WikidriftError, match="model"):
        OpenAIBatchRunner(client, state_dir=tmp_path / "b")
    runner = OpenAIBatchRunner(
        client, model="gpt-4o-mini", state_dir=tmp_path / "b", sleep=lambda s: None
    )
    assert runner.run([_request(7)])[0].parsed == {"answer": "about fact 7"}
