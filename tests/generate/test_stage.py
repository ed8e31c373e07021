"""The generation stage end to end on the real test workdir, with a scripted LLM that answers
from the request and injects one bad answer per rejection reason."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipeline.config import GenerationConfig
from pipeline.errors import WikidriftError
from pipeline.generate.answer_spans import answer_spans
from pipeline.generate.kinds import reject_reasons
from pipeline.generate.prompts import prompt_hash
from pipeline.generate.selection import is_elaboration, is_statement
from pipeline.generate.stage import generate_items
from pipeline.layout import (
    generated_dir,
    read_generated,
    read_generation_summary,
    read_labels,
    read_snapshot_table,
)
from pipeline.markers import GenerationSummary
from pipeline.models.embedder import Embedder
from pipeline.models.llm.base import LLMRequest, LLMResponse, OnResponse
from pipeline.models.llm.scripted import ScriptedBackend
from pipeline.text_checks import is_grounded, is_iso_timestamp, leaning_phrase
from tests.conftest import SCRIPTED_GENERATION
from tests.generate.conftest import ALL_IDS, KARPATHY, NEW, OLD, UPDATED_IDS
from tests.scripted_llm import (
    FaultyResponder,
    expected_reason,
    good_answer,
    numbered,
    title_of,
)

pytestmark = pytest.mark.slow  # builds and labels a real workdir (spaCy, MiniLM)

CFG = GenerationConfig(**SCRIPTED_GENERATION)
PAIR = UPDATED_IDS[:2]  # two articles are enough to test re-runs
QA_PROMPT = {"initial": "qa_initial", "new_sentences": "qa_new", "changed_sentence": "qa_changed"}


class SpyBackend:
    """Passes requests to a ScriptedBackend and records each ``complete_many`` batch."""

    def __init__(self, inner: ScriptedBackend) -> None:
        self.inner = inner
        self.backend_id = inner.backend_id
        self.model = inner.model
        self.batches: list[list[str]] = []

    def complete_many(
        self, requests: list[LLMRequest], *, on_response: OnResponse | None = None
    ) -> list[LLMResponse]:
        self.batches.append([r.purpose for r in requests])
        return self.inner.complete_many(requests, on_response=on_response)


@dataclass
class Runs:
    workdir: Path
    backend: SpyBackend
    responder: FaultyResponder
    first: GenerationSummary
    second: GenerationSummary
    batches_first: list[list[str]]
    batches_second: list[list[str]]


@pytest.fixture(scope="module")
def runs(
    gen_source_workdir: Path, minilm: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Runs:
    workdir = tmp_path_factory.mktemp("stage") / "workdir"
    shutil.copytree(gen_source_workdir, workdir)
    responder = FaultyResponder(stride=1)
    backend = SpyBackend(ScriptedBackend(responder))
    first = generate_items(workdir, OLD, previous=None, backend=backend, embedder=minilm, cfg=CFG)
    batches_first = list(backend.batches)
    second = generate_items(workdir, NEW, previous=OLD, backend=backend, embedder=minilm, cfg=CFG)
    return Runs(
        workdir,
        backend,
        responder,
        first,
        second,
        batches_first,
        backend.batches[len(batches_first) :],
    )


def _table(runs: Runs, snapshot: str, name: str) -> list[dict]:
    return read_generated(runs.workdir, snapshot, name).to_pylist()


def _sentences(workdir: Path, snapshot: str) -> dict[tuple[int, int], str]:
    rows = read_snapshot_table(workdir, snapshot, "sentences").to_pylist()
    return {(r["page_id"], r["sent_idx"]): r["text"] for r in rows}


def _labels(workdir: Path) -> dict[tuple[int, int], dict]:
    return {
        (r["page_id"], r["new_idx"]): r
        for r in read_labels(workdir, OLD, NEW).to_pylist()
        if r["new_idx"] is not None
    }


def test_one_backend_call_per_kind(runs: Runs) -> None:
    # the round-trip check asks every valid QA pair back in one more batch; every rejected QA
    # request gets one retry, whose valid pairs are asked back too
    assert [set(b) for b in runs.batches_first] == [
        {"qa_initial"},
        {"qa_check"},
        {"qa_retry"},
        {"qa_check"},
        {"dialogue"},
        {"quadruples"},
    ]
    assert [set(b) for b in runs.batches_second] == [
        {"qa_initial", "qa_new", "qa_changed"},
        {"qa_check"},
        {"qa_retry"},
        {"qa_check"},
        {"dialogue"},
        {"quadruples"},
    ]
    for summary, batches in ((runs.first, runs.batches_first), (runs.second, runs.batches_second)):
        assert summary.llm["batches"] == 6
        assert summary.requests["qa_retry"] == len(batches[2])
        assert summary.requests["qa_check"] == len(batches[1]) + len(batches[3])
        assert summary.llm["requests"] == sum(len(b) for b in batches)
        assert summary.llm["prompt_tokens"] > 0 and summary.llm["completion_tokens"] > 0
        assert summary.llm["generator"] == "scripted:scripted"


def test_outputs_and_run_json(runs: Runs) -> None:
    for summary in (runs.first, runs.second):
        out = generated_dir(runs.workdir, summary.snapshot)
        for name in ("qa", "dialogue", "quadruples", "rejects"):
            assert (out / f"{name}.parquet").exists()
        stored = json.loads((out / "run.json").read_text())
        assert stored["counts"] == summary.counts and stored["rejects"] == summary.rejects
        assert (
            read_generation_summary(runs.workdir, summary.snapshot).inputs_digest
            == summary.inputs_digest
        )
        assert summary.counts["qa"]["total"] == len(_table(runs, summary.snapshot, "qa"))
        assert summary.counts["dialogue"]["total"] == len(
            _table(runs, summary.snapshot, "dialogue")
        )
        assert summary.counts["quadruples"]["total"] == len(
            _table(runs, summary.snapshot, "quadruples")
        )
        assert sum(summary.rejects.values()) == len(_table(runs, summary.snapshot, "rejects"))
        assert summary.prompt_hashes == {n: prompt_hash(n) for n in summary.prompt_hashes}
        assert summary.kept > 0 and not summary.already_done
    assert runs.first.articles == {"total": 7, "initial": 7, "updated": 0, "without_labels": 0}
    assert runs.second.articles == {"total": 8, "initial": 1, "updated": 7, "without_labels": 0}


def first_batch_of(runs: Runs, purpose: str) -> list[LLMRequest]:
    """The first generation run's requests of one purpose."""
    requests = runs.backend.inner.requests[: sum(len(b) for b in runs.batches_first)]
    return [r for r in requests if r.purpose == purpose]


def _paragraph(request: LLMRequest) -> tuple[str, tuple[tuple[int, str], ...]]:
    """The article title and the numbered sentences a QA or dialogue request shows."""
    return title_of(request), tuple(numbered(request))


def test_first_snapshot_is_initial_generation(runs: Runs) -> None:
    sentences = _sentences(runs.workdir, OLD)
    qa = _table(runs, OLD, "qa")
    assert qa and {(r["type"], r["origin"]) for r in qa} == {("new", "initial")}
    first_batch = runs.backend.inner.requests[: len(runs.batches_first[0])]
    per_article = Counter(title_of(r) for r in first_batch)
    assert len(per_article) == len(UPDATED_IDS)
    assert max(per_article.values()) == CFG.paragraphs_per_article  # K-Means capped some
    # every selected paragraph is offered for a dialogue; for QA, when it has answer spans
    dialogue = {_paragraph(r) for r in first_batch_of(runs, "dialogue")}
    asked = {_paragraph(r) for r in first_batch_of(runs, "qa_initial")}
    assert len(dialogue) == runs.first.requests["dialogue"]
    assert len(asked) == runs.first.requests["qa_initial"] and asked <= dialogue
    for title, shown in dialogue - asked:
        indices, texts = zip(*shown, strict=True)
        assert answer_spans(indices, texts, title) == [], (title, shown)
    assert runs.first.requests["dialogue"] == runs.first.requests["quadruples"]
    for r in qa:
        assert r["snapshot"] == OLD and r["previous_answer"] is None
        assert r["evidence_text"] == " ".join(
            sentences[(r["page_id"], i)] for i in r["evidence_sent_idx"]
        )
        assert (
            is_grounded(r["answer"], r["evidence_text"]) and leaning_phrase(r["question"]) is None
        )
        assert r["prompt_hash"].split("+")[0] == prompt_hash("qa_initial")
        assert len(r["answer"].split()) <= CFG.answer_max_words
    turns = _table(runs, OLD, "dialogue")
    assert turns and {t["type"] for t in turns} == {"new"}
    quads = _table(runs, OLD, "quadruples")
    assert quads and {q["type"] for q in quads} == {"new"}
    assert {q["observed_at"] for q in quads} == {OLD}


def test_prompt_hashes_and_ids_on_every_item(runs: Runs) -> None:
    for snap in (OLD, NEW):
        qa = _table(runs, snap, "qa")
        retry = prompt_hash("qa_retry")
        for r in qa:
            first = prompt_hash(QA_PROMPT[r["origin"]])
            assert r["prompt_hash"] in (first, f"{first}+{retry}")
        assert any(r["prompt_hash"].endswith(f"+{retry}") for r in qa)  # retried pairs kept
        assert all(r["generator"] == "scripted:scripted" and r["raw_output"] for r in qa)
        assert {r["prompt_hash"] for r in _table(runs, snap, "dialogue")} == {
            prompt_hash("dialogue")
        }
        assert {r["prompt_hash"] for r in _table(runs, snap, "quadruples")} == {
            prompt_hash("quadruples")
        }
        ids = [r["item_id"] for r in qa] + [r["item_id"] for r in _table(runs, snap, "quadruples")]
        assert len(ids) == len(set(ids))
        turn_ids = [r["turn_id"] for r in _table(runs, snap, "dialogue")]
        assert len(turn_ids) == len(set(turn_ids))


def test_later_snapshot_qa_from_new_and_changed_sentences(runs: Runs) -> None:
    labels = _labels(runs.workdir)
    old_sentences = _sentences(runs.workdir, OLD)
    new_sentences = _sentences(runs.workdir, NEW)
    qa = _table(runs, NEW, "qa")
    origins = {r["origin"] for r in qa}
    assert origins == {"initial", "new_sentences", "changed_sentence"}
    for r in qa:
        key = (r["page_id"], r["evidence_sent_idx"][0])
        assert r["evidence_text"] == " ".join(
            new_sentences[(r["page_id"], i)] for i in r["evidence_sent_idx"]
        )
        if r["origin"] == "initial":
            assert r["page_id"] == KARPATHY and r["type"] == "new"
        elif r["origin"] == "new_sentences":
            assert r["type"] == "new" and r["previous_answer"] is None
            assert all(labels[(r["page_id"], i)]["label"] == "new" for i in r["evidence_sent_idx"])
            assert 1 <= len(r["evidence_sent_idx"]) <= 6
        else:
            label = labels[key]
            assert r["type"] == "changed" and label["label"] == "changed"
            assert len(r["evidence_sent_idx"]) == 1
            assert r["old_evidence_sent_idx"] == [label["old_idx"][0]]
            assert r["old_evidence_text"] == old_sentences[(r["page_id"], label["old_idx"][0])]
            assert r["previous_answer"] and r["answer"]
            assert is_grounded(r["previous_answer"], r["old_evidence_text"])
            assert is_grounded(r["answer"], r["evidence_text"])
            assert r["previous_snapshot"] == OLD
    # 3 changed pairs (real updates) are asked; each first answer is a fault, the retry good
    assert runs.second.counts["qa"]["changed"] >= 2
    # One request per changed statement that replaced a fact (elaborations hold none).
    assert runs.second.requests["qa_changed"] == sum(
        1
        for (pid, _), lab in labels.items()
        if lab["label"] == "changed"
        and pid in ALL_IDS
        and is_statement(lab["text"])
        and lab["old_idx"]
        and not is_elaboration(lab["old_text"], lab["text"])
    )


def test_later_snapshot_dialogue_turns_are_typed_from_labels(runs: Runs) -> None:
    labels = _labels(runs.workdir)
    new_sentences = _sentences(runs.workdir, NEW)
    turns = _table(runs, NEW, "dialogue")
    by_dialogue: dict[str, list[dict]] = {}
    for t in turns:
        by_dialogue.setdefault(t["dialogue_id"], []).append(t)
        (idx,) = t["evidence_sent_idx"]
        assert t["evidence_text"] == new_sentences[(t["page_id"], idx)]
        want = "new" if t["page_id"] == KARPATHY else labels[(t["page_id"], idx)]["label"]
        assert t["type"] == want
    for rows in by_dialogue.values():
        assert CFG.dialogue_min_turns <= len(rows) <= CFG.dialogue_max_turns
        assert [r["turn_idx"] for r in rows] == list(range(len(rows)))
        assert len({r["para_idx"] for r in rows}) == 1
    assert {"new", "unchanged"} <= {t["type"] for t in turns}


def test_later_snapshot_quadruples(runs: Runs) -> None:
    labels = _labels(runs.workdir)
    quads = _table(runs, NEW, "quadruples")
    assert quads
    for q in quads:
        assert q["observed_at"] == NEW
        assert q["timestamp"] is None or is_iso_timestamp(q["timestamp"])
        if q["page_id"] != KARPATHY:
            assert q["type"] == labels[(q["page_id"], q["evidence_sent_idx"][0])]["label"]
            assert q["type"] in ("new", "changed")
    assert {"new", "changed"} <= {q["type"] for q in quads}
    assert any(q["timestamp"] for q in quads) and any(q["timestamp"] is None for q in quads)


def test_every_injected_fault_is_rejected_with_its_reason_and_output(runs: Runs) -> None:
    rejects = _table(runs, OLD, "rejects") + _table(runs, NEW, "rejects")
    injected = runs.responder.injected
    assert len(injected) == 10 + 5 + 2 + 1 + 10 + 11
    for purpose, fault in injected:
        reason = expected_reason(purpose, fault)
        # a failed round-trip check rejects the QA pair it asked back
        wanted = set(QA_PROMPT.values()) if purpose == "qa_check" else {purpose}
        mine = [r for r in rejects if r["reason"] == reason and r["purpose"] in wanted]
        assert mine, f"{purpose}/{fault}: no reject with reason {reason}"
        for r in mine:
            assert r["raw_output"] is not None and r["detail"] is not None
            if reason != "llm_error":
                assert r["raw_output"]
            # a retried request's reject carries its first prompt's hash + the retry's
            assert r["prompt_hash"].split("+")[0] == prompt_hash(r["purpose"])
    # Everything that can happen in a run happened (evidence_unlabeled cannot: such paragraphs
    # are not sent; grammar_mismatch is off for the scripted model, whose relations are no words
    # of their sentences; a changed QA's two answers come from code, so the checks of the
    # answers of a changed item guard that code only; the scripted questions always name their
    # article, set nothing "against" anyone, give no action to another actor, answer with no
    # end of a range, and its users ask no when / who questions and assume no name, number or
    # rank their sentence does not say.
    # tests/generate/test_validate.py and tests/test_syntax.py cover them all).
    unseen = {
        "evidence_unlabeled", "grammar_mismatch", "answers_identical",
        "previous_answer_not_grounded", "answer_did_not_change", "question_names_nothing",
        "question_side_unstated", "question_actor_swapped", "answer_part_of_range",
        "turn_not_answered", "turn_premise_unstated", "question_drops_date", "turn_drops_date",
        "answer_lacks_year", "turn_open_question", "answer_abbreviates_question",
    }  # fmt: skip
    seen = {r["reason"] for r in rejects}
    assert seen == set(reject_reasons()) - unseen
    counted = {**runs.first.rejects}
    for reason, n in runs.second.rejects.items():
        counted[reason] = counted.get(reason, 0) + n
    assert counted == {reason: sum(r["reason"] == reason for r in rejects) for reason in seen}
    item_rejects = [r for r in rejects if r["reason"] not in ("llm_error", "no_json")]
    assert all(r["item_json"] for r in item_rejects)


def test_rerun_with_same_inputs_makes_no_backend_call(runs: Runs, minilm: Embedder) -> None:
    before = runs.backend.inner.calls
    stamp = (generated_dir(runs.workdir, NEW) / "qa.parquet").stat().st_mtime_ns
    for prev, snap in ((None, OLD), (OLD, NEW)):
        again = generate_items(
            runs.workdir, snap, previous=prev, backend=runs.backend, embedder=minilm, cfg=CFG
        )
        assert again.already_done
    assert runs.backend.inner.calls == before
    assert again.counts == runs.second.counts
    assert (generated_dir(runs.workdir, NEW) / "qa.parquet").stat().st_mtime_ns == stamp


def test_changed_inputs_or_force_regenerate(gen_workdir: Path, minilm: Embedder) -> None:
    def run(
        backend: ScriptedBackend, cfg: GenerationConfig, force: bool = False
    ) -> GenerationSummary:
        return generate_items(
            gen_workdir,
            OLD,
            previous=None,
            backend=backend,
            embedder=minilm,
            cfg=cfg,
            page_ids=PAIR,
            force=force,
        )

    backend = ScriptedBackend(good_answer)
    run(backend, CFG)
    calls = backend.calls
    assert calls > 0
    assert run(backend, CFG).already_done and backend.calls == calls
    assert not run(backend, CFG, force=True).already_done and backend.calls == 2 * calls
    other_cfg = CFG.model_copy(update={"answer_max_words": 8})
    run(backend, other_cfg)
    assert backend.calls == 3 * calls
    other_model = ScriptedBackend(good_answer, model="scripted-2")
    run(other_model, other_cfg)
    assert other_model.calls == calls
    (generated_dir(gen_workdir, OLD) / "qa.parquet").unlink()  # a lost output is remade
    run(other_model, other_cfg)
    assert other_model.calls == 2 * calls


def test_an_endpoint_that_does_not_answer_stops_the_stage_and_loses_nothing(
    gen_workdir: Path, minilm: Embedder
) -> None:
    """A dead server is no answer: recording its failures as rejected items would replace
    good items for good (with --force) or hide them; the stage stops, the re-run resumes."""
    import socket

    from pipeline.models.llm.base import LLMUnavailableError
    from pipeline.models.llm.openai_backend import OpenAIBackend

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before use: nothing listens there
    dead = OpenAIBackend(
        "served-model", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=0
    )
    with pytest.raises(LLMUnavailableError, match="did not answer .* re-run to resume"):
        generate_items(
            gen_workdir, OLD, previous=None, backend=dead, embedder=minilm, cfg=CFG,
            page_ids=PAIR,
        )  # fmt: skip
    assert not (generated_dir(gen_workdir, OLD) / "run.json").exists()
    summary = generate_items(
        gen_workdir, OLD, previous=None, backend=ScriptedBackend(good_answer), embedder=minilm,
        cfg=CFG, page_ids=PAIR,
    )  # fmt: skip
    assert summary.llm["errors"] == 0 and summary.kept > 0


def test_page_filter_switches_and_errors(gen_workdir: Path, minilm: Embedder) -> None:
    backend = ScriptedBackend(good_answer)
    only_qa = CFG.model_copy(update={"dialogue": False, "quadruples": False})
    summary = generate_items(
        gen_workdir,
        NEW,
        previous=OLD,
        backend=backend,
        embedder=minilm,
        cfg=only_qa,
        page_ids=[KARPATHY],
    )
    assert summary.articles == {"total": 1, "initial": 1, "updated": 0, "without_labels": 0}
    assert set(summary.requests) == {"qa_initial", "qa_check", "dialogue", "quadruples"}
    assert summary.requests["dialogue"] == summary.requests["quadruples"] == 0
    assert {r.purpose for r in backend.requests} == {"qa_initial", "qa_check"}
    qa = read_generated(gen_workdir, NEW, "qa").to_pylist()
    assert qa and {r["page_id"] for r in qa} == {KARPATHY}
    assert read_generated(gen_workdir, NEW, "dialogue").num_rows == 0
    with pytest.raises(WikidriftError, match="not older"):
        generate_items(gen_workdir, OLD, previous=NEW, backend=backend, embedder=minilm, cfg=CFG)


def test_missing_inputs_are_clear_errors(gen_workdir: Path, minilm: Embedder) -> None:
    backend = ScriptedBackend(good_answer)
    with pytest.raises(WikidriftError, match="no complete snapshot 2024-03-01"):
        generate_items(
            gen_workdir, "2024-03-01", previous=None, backend=backend, embedder=minilm, cfg=CFG
        )
    shutil.rmtree(gen_workdir / "labels")
    with pytest.raises(WikidriftError, match="no labels"):
        generate_items(gen_workdir, NEW, previous=OLD, backend=backend, embedder=minilm, cfg=CFG)
    assert backend.calls == 0
