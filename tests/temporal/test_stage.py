"""The temporal stage on a real released workdir: phrased once, skipped when nothing
changed, bounded per run, atomic when the model fails mid-way."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.layout import read_questions, temporal_dir
from pipeline.models.llm.scripted import ScriptedBackend
from pipeline.temporal.questions import Fact, QuestionSpec
from pipeline.temporal.stage import _reject_ambiguous, phrase_temporal_questions
from tests.conftest import STAGE_DATES, copy_workdir
from tests.scripted_llm import good_answer

A, B, C = STAGE_DATES


def phrase(workdir: Path, snapshot: str, backend: ScriptedBackend, **kwargs: object):  # noqa: ANN201
    """The stage with the released fixture's settings (``SCRIPTED_TEMPORAL``)."""
    return phrase_temporal_questions(workdir, snapshot, backend, c2="all", **kwargs)


def CountingBackend() -> ScriptedBackend:  # noqa: N802 - reads as a class at call sites
    """The scripted LLM; ``len(backend.requests)`` counts what it answered."""
    return ScriptedBackend(good_answer)


class FailingBackend(ScriptedBackend):
    def __init__(self) -> None:
        super().__init__(good_answer)

    def complete_many(self, requests, **kwargs):  # noqa: ANN001, ANN201
        raise RuntimeError("server went away")


def test_a_rerun_with_nothing_new_asks_nothing(released_workdir: Path, tmp_path: Path) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    backend = CountingBackend()
    summary = phrase(workdir, C, backend)
    assert summary.already_done and not backend.requests


def test_questions_are_phrased_once_and_carried_forward(
    released_workdir: Path, tmp_path: Path
) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    shutil.rmtree(workdir / "temporal")
    counts = []
    for snap in STAGE_DATES:
        backend = CountingBackend()
        summary = phrase(workdir, snap, backend)
        assert len(backend.requests) == summary.phrased
        counts.append(summary)
    stored = read_questions(workdir, C).to_pylist()
    assert len(stored) == sum(s.phrased for s in counts)
    assert len({r["question_id"] for r in stored}) == len(stored)  # nothing asked twice
    assert counts[1].carried == counts[0].phrased
    assert {r["created_snapshot"] for r in stored} <= set(STAGE_DATES)
    assert sum(sum(s.kept.values()) for s in counts) == sum(r["status"] == "kept" for r in stored)


def test_max_new_defers_the_rest_to_the_next_run(released_workdir: Path, tmp_path: Path) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    shutil.rmtree(workdir / "temporal")
    first = phrase(workdir, A, CountingBackend(), max_new=2)
    assert first.phrased == 2 and first.deferred == first.candidates - 2 > 0
    backend = CountingBackend()
    again = phrase(workdir, A, backend, max_new=200)
    assert len(backend.requests) == first.deferred  # only what waited
    assert again.carried == 2 and len(read_questions(workdir, A)) == first.candidates


def test_a_failed_model_call_publishes_nothing(released_workdir: Path, tmp_path: Path) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    shutil.rmtree(temporal_dir(workdir, C))
    before = (temporal_dir(workdir, B) / "questions.parquet").read_bytes()
    (workdir / "temporal" / f".{C}.leftover").mkdir()  # what a killed run leaves
    with pytest.raises(RuntimeError, match="server went away"):
        phrase(workdir, C, FailingBackend())
    assert not temporal_dir(workdir, C).exists()
    assert (temporal_dir(workdir, B) / "questions.parquet").read_bytes() == before
    assert not [p for p in (workdir / "temporal").iterdir() if p.name.startswith(".")]
    # the next run with a working model does the whole step
    summary = phrase(workdir, C, CountingBackend())
    assert summary.phrased > 0 and read_questions(workdir, C) is not None


def test_templated_questions_ask_no_model(released_workdir: Path, tmp_path: Path) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    shutil.rmtree(workdir / "temporal")
    for snap in STAGE_DATES:
        summary = phrase(workdir, snap, FailingBackend(), phrasing="template")
        assert summary.phrased > 0 and not summary.already_done
    stored = read_questions(workdir, C).to_pylist()
    assert {r["generator"].split(":")[0] for r in stored} == {"template"}
    assert sum(r["status"] == "kept" for r in stored) > 0
    assert all(r["question"].endswith("?") for r in stored if r["status"] == "kept")
    # the phrasing decides the stage's digest: switching it is a new run, not a skip
    again = phrase(workdir, C, CountingBackend(), phrasing="llm")
    assert not again.already_done


def _c1(qid: str, subject: str, relation: str, obj: str, as_of: str) -> QuestionSpec:
    fact = Fact(qid, 1, "3M", subject, relation, obj, as_of, "2024-01-01", "current", None,
                None, "")  # fmt: skip
    return QuestionSpec(qid, "C1", "fact", (fact,), (obj,), "all", as_of, as_of, None)


def test_a_question_asked_for_another_answer_is_rejected_once_phrased() -> None:
    def row(qid: str, question: str, answer: str) -> dict:
        return {"question_id": qid, "question": question, "answer": [answer], "status": "kept",
                "reason": None, "detail": ""}  # fmt: skip

    old = row("o", "What did 3M acquire in 2008?", "Aearo Technologies")
    twin = row("t", "What did 3M acquire in 2008?", "Meguiar's")
    who = row("w", "Who did 3M acquire in 2008?", "Aearo Technologies")  # the wh-word aside
    other = row("x", "What did 3M acquire in 2010?", "Cogent Systems")
    # one fact's subject, relation and time asked in other words, for another answer
    eu = row("e", "Where was the sale of EMI approved on 21 September 2012?", "European Union")
    us = row("u", "What was the sale of EMI approved in on 21 September 2012?", "United States")
    specs = {
        "o": _c1("o", "3M", "acquired", "Aearo Technologies", "2008"),
        "t": _c1("t", "3M", "acquired", "Meguiar's", "2008"),
        "w": _c1("w", "3M", "acquired", "Aearo Technologies", "2008"),
        "x": _c1("x", "3M", "acquired", "Cogent Systems", "2010"),
        "e": _c1("e", "sale of EMI", "was approved in", "European Union", "2012-09-21"),
        "u": _c1("u", "sale of EMI", "was approved in", "United States", "2012-09-21"),
    }
    rows = [old, twin, who, other, eu, us]
    _reject_ambiguous(rows[1:], rows, specs)
    # the published question stays; the new ones asking the same are rejected
    assert [r["reason"] for r in rows] == [None, "ambiguous", "ambiguous", None, "ambiguous",
                                           "ambiguous"]  # fmt: skip
    assert twin["status"] == who["status"] == "rejected"
