"""A QA item whose evidence sentence stays `unchanged` but is edited: the ledger keeps it while
its answer still fits the edited sentence and retires it (``answer_no_longer_fits``) when the
edit makes the answer one of a list. Real revisions of the shipped sample (Aston Martin in
Formula One, 2024-06-01 -> 2025-01-01), labeled by the real offline labeler."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from pipeline.config import load_config
from pipeline.labeling.stage import label_snapshots, make_labeler
from pipeline.layout import read_labels, sentence_texts
from pipeline.ledger import ANSWER_NO_LONGER_FITS, _maintain
from pipeline.markers import LedgerSummary
from tests.conftest import REPO_ROOT

OLD, NEW = "2024-06-01", "2025-01-01"
ASTON_MARTIN = 63473867


@pytest.fixture(scope="module")
def labeled(tmp_path_factory: pytest.TempPathFactory, splitter, offline_embedder) -> Path:
    from pipeline.snapshot import build_snapshot
    from pipeline.sources import ArticleSelection
    from pipeline.sources.local import RevisionsDirSource

    workdir = tmp_path_factory.mktemp("edits")
    source = RevisionsDirSource(REPO_ROOT / "data" / "sample")
    for d in (OLD, NEW):
        build_snapshot(
            source,
            ArticleSelection(page_ids=(ASTON_MARTIN,)),
            date.fromisoformat(d),
            workdir,
            splitter=splitter,
            source_description="revisions-dir:data/sample",
        )
    labeler = make_labeler(load_config(profile="offline"), workdir, embedder=offline_embedder)
    label_snapshots(workdir, OLD, NEW, labeler)
    return workdir


def _sentence(workdir: Path, snapshot: str, needle: str) -> tuple[int, str]:
    texts = sentence_texts(workdir, snapshot, [ASTON_MARTIN])
    ((idx, text),) = [(i, t) for (_, i), t in texts.items() if needle in t]
    return idx, text


def _qa(item_id: str, question: str, answer: str) -> dict:
    return {"item_id": item_id, "kind": "qa", "page_id": ASTON_MARTIN, "question": question,
            "answer": answer, "valid_to": None, "retired_reason": None}  # fmt: skip


def test_an_edit_that_makes_the_answer_one_of_a_list_retires_the_item(labeled: Path) -> None:
    old_idx, old_text = _sentence(labeled, OLD, "retain Fernando Alonso")
    new_idx, new_text = _sentence(labeled, NEW, "retain Fernando Alonso")
    assert "Lance Stroll" in new_text and "Lance Stroll" not in old_text
    (label,) = [r for r in read_labels(labeled, OLD, NEW).to_pylist() if r["new_idx"] == new_idx]
    assert label["label"] == "unchanged" and label["old_idx"] == [old_idx]  # an edit, kept
    items = {
        "driver": _qa(
            "driver", "What driver will Aston Martin retain for 2025?", "Fernando Alonso"
        ),
        "year": _qa("year", "For which year will Aston Martin retain Fernando Alonso?", "2025"),
        # a turn whose reply states what the edited sentence still says: kept
        "turn": {"item_id": "turn", "kind": "dialogue_turn", "page_id": ASTON_MARTIN,
                 "title": "Aston Martin in Formula One", "user": "Who stays for 2025?",
                 "expert": "Fernando Alonso stays with the team for 2025.", "valid_to": None,
                 "retired_reason": None},
    }  # fmt: skip
    previous = [
        {"item_id": i, "snapshot": OLD, "page_id": ASTON_MARTIN, "evidence_sent_idx": [old_idx],
         "evidence_text": old_text, "type": "new"}
        for i in items
    ]  # fmt: skip
    evidence: list[dict] = []
    summary = LedgerSummary(NEW, OLD, "x")
    _maintain(labeled, NEW, OLD, items, previous, evidence, summary)
    assert items["driver"]["valid_to"] == NEW
    assert items["driver"]["retired_reason"] == ANSWER_NO_LONGER_FITS
    assert summary.retired["qa"] == {ANSWER_NO_LONGER_FITS: 1}
    # the year still answers its question in the edited sentence: kept, evidence moved on
    assert items["year"]["valid_to"] is None and summary.kept["qa"] == 1
    assert items["turn"]["valid_to"] is None and summary.kept["dialogue_turn"] == 1
    assert {e["item_id"] for e in evidence} == {"year", "turn"}
    assert {e["evidence_text"] for e in evidence} == {new_text}
