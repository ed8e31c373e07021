"""``wikidrift evaluate`` end to end through the local OpenAI-compatible test server, resume
after an interruption, and the temporal kinds (list answers, per-interval accuracy)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pipeline.config import EvaluateConfig
from pipeline.evaluate import metrics
from pipeline.evaluate.harness import ItemFilter, evaluate_release
from pipeline.evaluate.report import default_out, scored_model
from pipeline.layout import read_release_table, release_dir
from pipeline.models.llm.base import LLMRequest
from pipeline.models.llm.scripted import ScriptedBackend
from pipeline.storage import write_parquet_atomic
from tests.conftest import STAGE_DATES, copy_workdir, reseal_release
from tests.servers.openai_server import OpenAIServer, last_user_text
from wikidrift.cli import main

RELEASE = STAGE_DATES[-1]


def _line_after(text: str, prefix: str) -> str:
    return text.rsplit(f"\n{prefix}", 1)[1].split("\n", 1)[0].strip()


class Oracle:
    """Answers like a model that knows the release: the gold answer, except the previous
    answer for changed questions (an outdated model) and the gold reply for dialogue."""

    def __init__(self, workdir: Path) -> None:
        qa = read_release_table(workdir, RELEASE, "qa").to_pylist()
        self.answers = {
            r["question"]: r["previous_answer"] if r["type"] == "changed" else r["answer"]
            for r in qa
        }
        dialogue = read_release_table(workdir, RELEASE, "dialogue").to_pylist()
        self.replies = {r["user"]: r["expert"] for r in dialogue}

    def __call__(self, body: dict[str, Any]) -> str:
        text = last_user_text(body)
        if '{"reply"' in text:
            return json.dumps({"reply": self.replies.get(_line_after(text, "User: "), "no idea")})
        return json.dumps({"answer": self.answers.get(_line_after(text, "Question: "), "no idea")})


def _distinct(server: OpenAIServer) -> int:
    return len({json.dumps(body["messages"]) for body in server.chat_requests})


@pytest.fixture
def workdir(released_workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return copy_workdir(released_workdir, tmp_path / "w")


def _evaluate(workdir: Path, url: str, *extra: str) -> int:
    return main(
        [
            "evaluate",
            "--release",
            RELEASE,
            "--workdir",
            str(workdir),
            "--profile",
            "offline",
            "--model",
            url,
            *extra,
        ]
    )


def test_evaluate_end_to_end(workdir: Path, capsys) -> None:
    qa = read_release_table(workdir, RELEASE, "qa").to_pylist()
    turns = [
        r for r in read_release_table(workdir, RELEASE, "dialogue").to_pylist() if r["evaluate"]
    ]
    changed = [r for r in qa if r["type"] == "changed"]
    assert changed and turns and len(qa) > len(changed)
    (release_dir(workdir, RELEASE) / "temporal_qa.parquet").unlink(missing_ok=True)
    reseal_release(workdir, RELEASE)  # as a release written before the temporal layer
    oracle = Oracle(workdir)
    n = len(qa) + len(turns)
    kinds = ("--kinds", "qa,dialogue,temporal_qa")
    with OpenAIServer(oracle) as server:
        assert _evaluate(workdir, server.url, "--retriever", "bm25", *kinds) == 0
        out = capsys.readouterr().out
        assert "skipped temporal_qa: release 2025-01-01 has no temporal_qa.parquet" in out
        assert "QA F1 unchanged" in out
        # a server that lists no models is named by its URL, not the configured OpenAI model
        run = default_out(workdir, RELEASE, server.url.rstrip("/"), "bm25")
        results = json.loads((run / "results.json").read_text())
        assert results["model"] == server.url.rstrip("/") and results["filter"] is None
        # identical requests (the scripted generic turns) are sent once
        assert len(server.chat_requests) == results["model_calls"] == _distinct(server) > n / 2
        m = results["metrics"]
        assert set(m) == {"qa", "dialogue"} and results["counts"]["qa"]["all"] == len(qa)
        assert m["qa"]["unchanged"]["f1"] == 100.0 and m["qa"]["new"]["f1"] == 100.0
        expected = 100 * metrics.mean(
            metrics.token_f1(r["previous_answer"], r["answer"]) for r in changed
        )
        assert m["qa"]["changed"]["f1"] == pytest.approx(expected, abs=0.01)
        outdated = [
            metrics.is_outdated(r["previous_answer"], r["answer"], r["previous_answer"])
            for r in changed
        ]
        assert any(outdated)
        assert m["qa"]["outdated_rate"] == pytest.approx(100 * sum(outdated) / len(outdated))
        replies = [oracle.replies[t["user"]] for t in turns]
        bleu = metrics.corpus_bleu(replies, [t["expert"] for t in turns])
        assert m["dialogue"]["all"]["bleu"] == pytest.approx(bleu, abs=0.01)
        assert 0 < m["qa"]["all"]["recall"] <= 100
        lines = (run / "predictions.jsonl").read_text().splitlines()
        assert len(lines) == n
        assert all(len(json.loads(x)["retrieved"]) <= 3 for x in lines)
        assert "| unchanged |" in (run / "results.md").read_text()

        # the same run again: every answer from the cache, its leaderboard line replaced
        before = len(server.chat_requests)
        assert _evaluate(workdir, server.url, "--retriever", "bm25", *kinds) == 0
        assert len(server.chat_requests) == before
        again = json.loads((run / "results.json").read_text())
        assert again["model_calls"] == 0 and again["cache_hits"] == n
        assert again["metrics"] == results["metrics"]
        board = workdir / "evaluations" / "leaderboard.jsonl"
        assert len(board.read_text().splitlines()) == 1
        # closed book: a second line, no retrieval recall
        assert _evaluate(workdir, server.url, "--kinds", "qa", "--limit", "2") == 0
        rows = [json.loads(x) for x in board.read_text().splitlines()]
        assert sorted(r["retriever"] for r in rows) == ["bm25", "none"]
        closed = next(r for r in rows if r["retriever"] == "none")
        assert closed["counts"]["qa"]["all"] == 2 and "recall" not in closed["metrics"]["qa"]["all"]
        assert "| bm25 (k=3) |" in (workdir / "evaluations" / "leaderboard.md").read_text()


def test_bad_arguments_fail_with_one_line(workdir: Path, capsys) -> None:
    assert _evaluate(workdir, "ftp://x", "--kinds", "qa") == 2
    assert "--model 'ftp://x': use local, openai:MODEL" in capsys.readouterr().err
    assert _evaluate(workdir, "local", "--kinds", "qa,essays") == 2
    assert "--kinds some of qa, dialogue" in capsys.readouterr().err
    assert _evaluate(workdir, "local", "--release", "2025-13-01") == 2  # the later one wins
    assert "--release: '2025-13-01' is not a date" in capsys.readouterr().err
    assert _evaluate(workdir, "local", "--k", "0") == 2
    assert "--k: 0 is out of range (1 or more)" in capsys.readouterr().err


class StopAfter:
    """A backend that is interrupted (like Ctrl-C) once ``batches`` batches were answered."""

    def __init__(self, inner: Any, batches: int) -> None:
        self.inner = inner
        self.left = batches

    def complete_many(self, requests: list[LLMRequest], **kwargs: Any) -> list[Any]:
        if self.left == 0:
            raise KeyboardInterrupt
        self.left -= 1
        return self.inner.complete_many(requests, **kwargs)


def test_resume_after_an_interruption_repeats_no_call(workdir: Path) -> None:
    from pipeline.config import load_config
    from pipeline.runtime import llm_from_config

    with OpenAIServer(Oracle(workdir)) as server:
        cfg = load_config(
            profile="offline",
            overrides={
                "workdir": str(workdir),
                "llm": {"backend": "openai", "base_url": server.url},
            },
        )
        backend = StopAfter(llm_from_config(cfg, workdir).backend, batches=2)
        with pytest.raises(KeyboardInterrupt):
            evaluate_release(
                workdir,
                RELEASE,
                backend=backend,
                kinds=["qa", "dialogue"],
                settings=EvaluateConfig(batch_size=4),
            )
        first = len(server.chat_requests)
        assert first == 8
        assert _evaluate(workdir, server.url, "--kinds", "qa,dialogue") == 0
        run = default_out(workdir, RELEASE, server.url.rstrip("/"), "none")
        results = json.loads((run / "results.json").read_text())
        # the second run sent only what the first had not: no request twice
        assert len(server.chat_requests) == first + results["model_calls"] == _distinct(server)
        assert results["cache_hits"] >= first


def _temporal_tables(workdir: Path) -> None:
    out = release_dir(workdir, RELEASE)
    write_parquet_atomic(
        pa.Table.from_pylist(
            [
                {
                    "question_id": "t1",
                    "category": "C1",
                    "question": "Which cities host the team?",
                    "answer": ["Denver", "Aurora"],
                    "answer_mode": "all",
                    "type": "new",
                    "evidence_text": ["The team plays in Denver."],
                },
                {
                    "question_id": "t2",
                    "category": "C2",
                    "question": "Name a coach of the team.",
                    "answer": ["Michael Malone", "George Karl"],
                    "answer_mode": "any",
                    "type": "unchanged",
                    "evidence_text": [],
                },
            ]
        ),
        out / "temporal_qa.parquet",
        table_name="release_temporal_qa",
        schema_version=2,
    )
    rows = []
    for idx, (start, end, answer) in enumerate(
        [
            ("2024-01-01", "2024-06-01", "Alice"),
            ("2024-06-01", None, "Bob"),
            ("2026-01-01", None, "Eve"),
        ]
    ):
        rows.append(
            {
                "question_id": "q1",
                "question": "Who leads the team?",
                "source": "test",
                "interval_idx": idx,
                "interval_start": start,
                "interval_end": end,
                "answer": answer,
                "evidence_text": "",
            }
        )
    write_parquet_atomic(
        pa.Table.from_pylist(rows),
        out / "timelines.parquet",
        table_name="release_timelines",
        schema_version=2,
    )
    reseal_release(workdir, RELEASE)


def test_temporal_kinds_list_answers_and_intervals(workdir: Path) -> None:
    _temporal_tables(workdir)
    seen_dates: list[str] = []

    def respond(request: LLMRequest) -> str:
        system = request.messages[0]["content"]
        user = request.messages[-1]["content"]
        if "Which cities" in user:
            return json.dumps({"answer": "Denver"})
        if "Name a coach" in user:
            return json.dumps({"answer": "George Karl"})
        date = system.split("Today is ", 1)[1][:10]
        seen_dates.append(date)
        return json.dumps({"answer": "Alice" if date == "2024-01-01" else "Carol"})

    run = evaluate_release(
        workdir,
        RELEASE,
        backend=ScriptedBackend(respond),
        retriever="bm25",
        kinds=["temporal_qa", "timelines"],
    )
    tq = run.metrics["temporal_qa"]
    assert tq["new"]["f1"] == 50.0 and tq["new"]["em"] == 0.0  # one of two cities, mode "all"
    assert tq["unchanged"]["em"] == 100.0  # one coach suffices, mode "any"
    assert set(tq["by_category"]) == {"C1", "C2"}
    tl = run.metrics["timelines"]
    # the interval starting after the release is not asked; each is asked as of its start
    assert sorted(seen_dates) == ["2024-01-01", "2024-06-01"]
    assert tl["0"]["accuracy"] == 100.0 and tl["1"]["accuracy"] == 0.0
    assert tl["all"]["accuracy"] == 50.0
    early = next(p for p in run.predictions if p["item_id"] == "q1@0")
    assert early["as_of"] == "2024-01-01"
    assert early["retrieved"] and all(h["snapshot"] == "2024-01-01" for h in early["retrieved"])


def test_the_release_temporal_tables_score_full_marks_for_an_oracle(workdir: Path) -> None:
    """The temporal layer's own tables (not hand-made rows) go through the harness: an
    oracle that gives every gold answer, as of the date it is asked, scores 100."""
    questions = read_release_table(workdir, RELEASE, "temporal_qa").to_pylist()
    intervals = read_release_table(workdir, RELEASE, "timelines").to_pylist()
    assert questions and intervals
    # the scripted phrasings repeat: only a question whose text is unique has one answer
    texts = Counter(q["question"] for q in questions)
    golds = {q["question"]: "; ".join(q["answer"]) for q in questions if texts[q["question"]] == 1}
    assert len(golds) >= len(questions) / 2
    keys = Counter((r["question"], r["interval_start"]) for r in intervals)
    by_date = {
        (r["question"], r["interval_start"]): r["answer"]
        for r in intervals
        if keys[(r["question"], r["interval_start"])] == 1
    }

    def respond(request: LLMRequest) -> str:
        date = request.messages[0]["content"].split("Today is ", 1)[1][:10]
        question = _line_after(request.messages[-1]["content"], "Question: ")
        return json.dumps({"answer": by_date.get((question, date)) or golds.get(question, "")})

    run = evaluate_release(
        workdir, RELEASE, backend=ScriptedBackend(respond), kinds=["temporal_qa", "timelines"]
    )
    assert run.counts["temporal_qa"]["all"] == len(questions)
    assert set(run.metrics["temporal_qa"]["by_category"]) <= {"C1", "C2", "C3"}
    unique = {q["question_id"] for q in questions if q["question"] in golds}
    scored = [p for p in run.predictions if p["kind"] == "temporal_qa"]
    assert all(p["em"] == 1.0 for p in scored if p["item_id"] in unique)
    asked = [r for r in intervals if r["interval_start"] <= RELEASE]
    assert run.counts["timelines"]["all"] == len(asked) > 0
    known = {
        f"{r['question_id']}@{r['interval_idx']}": r["interval_start"]
        for r in asked
        if (r["question"], r["interval_start"]) in by_date
    }
    assert len(known) >= max(4, len(asked) / 2)  # 8 of this corpus's few real update chains
    for p in run.predictions:
        if p["kind"] == "timelines" and p["item_id"] in known:
            assert p["correct"] and p["as_of"] == known[p["item_id"]], p


def test_created_after_and_types_score_exactly_the_filtered_items(workdir: Path) -> None:
    """On a 3-release workdir: --created-after scores the items made after the date, and no
    other; --types the items of those types; results and leaderboard record the filter."""
    qa = read_release_table(workdir, RELEASE, "qa").to_pylist()
    dialogue = read_release_table(workdir, RELEASE, "dialogue").to_pylist()
    turns = [t for t in dialogue if t["evaluate"]]
    cutoff = STAGE_DATES[0]
    newer_qa = {r["item_id"] for r in qa if r["created_snapshot"] > cutoff}
    newer_turns = {t["turn_id"] for t in turns if t["created_snapshot"] > cutoff}
    assert newer_qa and newer_qa != {r["item_id"] for r in qa}  # the filter leaves some out
    kinds = ("--kinds", "qa,dialogue")
    with OpenAIServer(Oracle(workdir)) as server:
        assert _evaluate(workdir, server.url, "--created-after", cutoff, *kinds) == 0
        model = server.url.rstrip("/")
        item_filter = {"created_after": cutoff, "types": None}
        run = default_out(workdir, RELEASE, model, "none", item_filter)
        assert run.name.endswith(f"__none__after-{cutoff}")
        results = json.loads((run / "results.json").read_text())
        assert results["filter"] == item_filter
        scored = [json.loads(x) for x in (run / "predictions.jsonl").read_text().splitlines()]
        assert {p["item_id"] for p in scored if p["kind"] == "qa"} == newer_qa
        assert {p["item_id"] for p in scored if p["kind"] == "dialogue"} == newer_turns
        # the oracle answers every unchanged and new question right
        assert results["metrics"]["qa"]["new"]["f1"] == 100.0
        assert f"- items: after {cutoff}" in (run / "results.md").read_text()

        assert _evaluate(workdir, server.url, "--types", "changed", "--kinds", "qa,timelines") == 0
        run = default_out(workdir, RELEASE, model, "none", {"types": ["changed"]})
        results = json.loads((run / "results.json").read_text())
        changed = {r["item_id"] for r in qa if r["type"] == "changed"}
        scored = [json.loads(x) for x in (run / "predictions.jsonl").read_text().splitlines()]
        assert changed and {p["item_id"] for p in scored} == changed
        assert results["skipped"] == {"timelines": "timeline intervals have no item type (--types)"}
    board = (workdir / "evaluations" / "leaderboard.md").read_text()
    assert f"| after {cutoff} |" in board and "| changed |" in board
    assert len((workdir / "evaluations" / "leaderboard.jsonl").read_text().splitlines()) == 2


def test_item_filter_on_the_harness_and_bad_types(workdir: Path, capsys) -> None:
    respond = ScriptedBackend(lambda request: '{"answer": "x"}')
    after_all = evaluate_release(
        workdir,
        RELEASE,
        backend=respond,
        kinds=["qa", "temporal_qa", "timelines"],
        item_filter=ItemFilter(created_after=RELEASE),
    )
    assert after_all.predictions == [] and after_all.filter == {
        "created_after": RELEASE,
        "types": None,
    }
    assert ItemFilter(types=("new", "changed", "unchanged")).record() is None
    assert _evaluate(workdir, "local", "--types", "new,fresh") == 2
    assert "--types ['fresh']: allowed: unchanged, new, changed" in capsys.readouterr().err


def test_a_server_that_does_not_answer_is_recorded_by_its_url(
    workdir: Path, tmp_path: Path, capsys
) -> None:
    """``--model http://127.0.0.1:1/v1`` with nothing listening: every call fails, and the
    results name the URL, never the configured OpenAI model."""
    config = tmp_path / "no-retries.toml"
    config.write_text('profile = "offline"\n[llm]\nmax_retries = 0\n')
    url = "http://127.0.0.1:1/v1"
    code = _evaluate(workdir, url, "--kinds", "qa", "--limit", "1", "--config", str(config))
    assert code == 1  # the failed call counts as wrong, and says so
    runs = list((workdir / "evaluations" / RELEASE).iterdir())
    assert [p.name for p in runs] == ["http-127.0.0.1-1-v1__none"]
    results = json.loads((runs[0] / "results.json").read_text())
    assert results["model"] == url and results["model_spec"] == url and results["failed"] == 1
    assert "gpt-4o" not in json.dumps(results["model"])


def test_scored_model_names_what_answered() -> None:
    from pipeline.models.llm.cache import CachedLLM
    from pipeline.models.llm.openai_backend import OpenAIBackend

    class NoCache:
        pass

    down = OpenAIBackend("gpt-4o-2024-08-06", base_url="http://user:pw@127.0.0.1:1/v1/")
    assert scored_model(CachedLLM(down, NoCache())) == "http://127.0.0.1:1/v1"
    with OpenAIServer(lambda body: "{}") as server:
        server.models = ["qwen2.5-1.5b"]
        up = OpenAIBackend("gpt-4o-2024-08-06", base_url=server.url)
        assert scored_model(CachedLLM(up, NoCache())) == "qwen2.5-1.5b"
    scripted = ScriptedBackend(lambda request: "{}", model="m", backend_id="scripted")
    assert scored_model(CachedLLM(scripted, NoCache())) == "scripted:m"
