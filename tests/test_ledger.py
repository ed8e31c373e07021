"""The bi-temporal ledger over three real snapshots (scripted LLM): maintenance, evidence
moves, retirement reasons, supersession and the bi-temporal query."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.errors import WikidriftError
from pipeline.layout import (
    ledger_dir,
    ledger_snapshots,
    read_evidence,
    read_items,
    read_labels,
    read_snapshot_table,
)
from pipeline.ledger import _add_new, _write, facts_at, update_ledger
from pipeline.markers import LedgerSummary
from pipeline.schemas import LEDGER_ITEMS_SCHEMA
from tests.conftest import STAGE_DATES, copy_workdir

A, B, C = STAGE_DATES


def _sentences(workdir: Path, snapshot: str) -> dict[tuple[int, int], str]:
    t = read_snapshot_table(workdir, snapshot, "sentences", columns=["page_id", "sent_idx", "text"])
    return {
        (p, i): s
        for p, i, s in zip(
            t["page_id"].to_pylist(), t["sent_idx"].to_pylist(), t["text"].to_pylist(), strict=True
        )
    }


def test_items_grow_and_every_state_is_recorded(released_workdir: Path) -> None:
    assert ledger_snapshots(released_workdir) == list(STAGE_DATES)
    sizes = [read_items(released_workdir, s).num_rows for s in STAGE_DATES]
    assert sizes[0] > 0 and sizes[0] < sizes[1] < sizes[2]
    items = read_items(released_workdir, C).to_pylist()
    assert {it["kind"] for it in items} == {"qa", "dialogue_turn", "quadruple"}
    for it in items:
        assert it["valid_from"] == it["created_snapshot"]
        assert it["type_at_creation"] in ("new", "changed", "unchanged")
        assert (it["valid_to"] is None) == (it["retired_reason"] is None)


def test_kept_items_move_their_evidence_to_the_same_text(released_workdir: Path) -> None:
    evidence = read_evidence(released_workdir, B).to_pylist()
    at = {(e["item_id"], e["snapshot"]): e for e in evidence}
    old_text, new_text = _sentences(released_workdir, A), _sentences(released_workdir, B)
    moved = 0
    kept = [e for e in evidence if e["snapshot"] == B and (e["item_id"], A) in at]
    assert kept
    for e in kept:
        before = at[(e["item_id"], A)]
        assert e["type"] == "unchanged"
        assert e["evidence_text"] == " ".join(
            new_text[(e["page_id"], i)] for i in e["evidence_sent_idx"]
        )
        assert before["evidence_text"] == " ".join(
            old_text[(e["page_id"], i)] for i in before["evidence_sent_idx"]
        )
        moved += before["evidence_sent_idx"] != e["evidence_sent_idx"]
    assert moved > 0  # edits above the evidence shifted indices, the text still matches


def test_items_on_edited_sentences_are_retired_with_a_reason(released_workdir: Path) -> None:
    items = read_items(released_workdir, B).to_pylist()
    retired = [it for it in items if it["valid_to"] == B]
    assert retired
    reasons = {it["retired_reason"] for it in retired}
    assert reasons <= {
        "evidence_changed",
        "evidence_deleted",
        "evidence_unlabeled",
        "page_deleted",
        "superseded",
    }
    assert "evidence_changed" in reasons
    # Each evidence-based retirement really had an edited evidence sentence.
    labels = read_labels(released_workdir, A, B).to_pylist()
    unchanged_old = {
        (r["page_id"], i) for r in labels if r["label"] == "unchanged" for i in r["old_idx"]
    }
    ev_a = {
        e["item_id"]: e
        for e in read_evidence(released_workdir, A).to_pylist()
        if e["snapshot"] == A
    }
    for it in retired:
        if it["retired_reason"].startswith("evidence_"):
            ev = ev_a[it["item_id"]]
            assert not all((ev["page_id"], i) in unchanged_old for i in ev["evidence_sent_idx"])


def _fact(item_id: str, created: str, obj: str, ts: str | None, typ: str) -> dict:
    """A complete ledger row of a quadruple about "The Club"'s coach."""
    row: dict = dict.fromkeys(LEDGER_ITEMS_SCHEMA.names)
    return row | {
        "item_id": item_id,
        "kind": "quadruple",
        "page_id": 1,
        "title": "The Club",
        "created_snapshot": created,
        "valid_from": created,
        "type_at_creation": typ,
        "subject": "The Club",
        "relation": "coach",
        "object": obj,
        "timestamp": ts,
        "observed_at": created,
    }


@pytest.fixture
def superseded_ledger(tmp_path: Path) -> Path:
    """A ledger at A and B written by the real writer: at B the coach "Ann Lee" (2023) of A is
    superseded by "Bob Ray" (2024), a fact from a changed sentence."""
    items = {"a": _fact("a", A, "Ann Lee", "2023", "new")}
    _write(ledger_dir(tmp_path, A), items, [], LedgerSummary(A, None, "x"))
    summary = LedgerSummary(B, A, "y")
    _add_new(items, [_fact("b", B, "Bob Ray", "2024", "changed")], [{}], [], B, summary)
    _write(ledger_dir(tmp_path, B), items, [], summary)
    return tmp_path


def test_supersession_closes_but_keeps_the_earlier_quadruple(superseded_ledger: Path) -> None:
    items = {it["item_id"]: it for it in read_items(superseded_ledger, B).to_pylist()}
    old, new = items["a"], items["b"]
    assert old["retired_reason"] == "superseded" and old["superseded_by"] == "b"
    assert new["type_at_creation"] == "changed" and new["valid_to"] is None
    assert new["created_snapshot"] == old["valid_to"] > old["created_snapshot"]
    assert old["fact_valid_until"] == new["timestamp"]


def test_supersession_rule_details() -> None:
    def quad(item_id: str, created: str, obj: str, ts: str | None, typ: str = "changed") -> dict:
        return {
            "item_id": item_id,
            "kind": "quadruple",
            "subject": "The Club",
            "relation": "coach",
            "object": obj,
            "timestamp": ts,
            "created_snapshot": created,
            "type_at_creation": typ,
            "valid_to": None,
            "retired_reason": None,
            "superseded_by": None,
            "fact_valid_until": None,
        }

    items = {"a": quad("a", "2024-01-01", "Ann Lee", "2023", "new")}
    summary = LedgerSummary("2024-06-01", "2024-01-01", "x")
    evidence: list[dict] = []
    new = [
        quad("b", "2024-06-01", "Bob Ray", "2024"),
        quad("c", "2024-06-01", "ann lee.", None),
        quad("d", "2024-06-01", "Old Coach", "2019"),
    ]
    _add_new(items, new, [{"item_id": n["item_id"]} for n in new], evidence, "2024-06-01", summary)
    assert items["a"]["valid_to"] == "2024-06-01" and items["a"]["superseded_by"] == "b"
    assert items["a"]["fact_valid_until"] == "2024"
    assert summary.superseded == 1
    # A restatement of a valid fact (after normalization) would have been skipped; "c" came
    # after "a" was closed, so it is new. An older-dated fact does not supersede a newer one.
    assert items["b"]["valid_to"] is None
    assert "d" in items and items["d"]["valid_to"] is None
    items2 = {"a": quad("a", "2024-01-01", "Ann Lee", "2023")}
    s2 = LedgerSummary("2024-06-01", "2024-01-01", "x")
    again = [quad("e", "2024-06-01", "the ann lee", None)]
    _add_new(items2, again, [{"item_id": "e"}], [], "2024-06-01", s2)
    assert "e" not in items2 and s2.restated_quadruples_skipped == 1
    # Only an update supersedes: another object from a new sentence leaves both facts valid.
    items3 = {"a": quad("a", "2024-01-01", "Ann Lee", "2023")}
    s3 = LedgerSummary("2024-06-01", "2024-01-01", "x")
    _add_new(
        items3, [quad("f", "2024-06-01", "Bob Ray", "2024", "new")], [{}], [], "2024-06-01", s3
    )
    assert items3["a"]["valid_to"] is None and s3.superseded == 0
    # The fact whose evidence sentence changed is superseded by the update, not just retired.
    retired = quad("a", "2024-01-01", "Ann Lee", "2023") | {
        "valid_to": "2024-06-01",
        "retired_reason": "evidence_changed",
    }
    s4 = LedgerSummary("2024-06-01", "2024-01-01", "x")
    s4.retired = {"quadruple": {"evidence_changed": 1}}
    items4 = {"a": retired}
    _add_new(items4, [quad("g", "2024-06-01", "Bob Ray", "2024")], [{}], [], "2024-06-01", s4)
    assert items4["a"]["retired_reason"] == "superseded" and items4["a"]["superseded_by"] == "g"
    assert s4.retired == {"quadruple": {"superseded": 1}} and s4.superseded == 1


def test_bitemporal_query(superseded_ledger: Path) -> None:
    ledger = superseded_ledger
    known_before = facts_at(ledger, "2099-12-31", A)
    assert {f["item_id"] for f in known_before} == {"a"}  # the supersession is not known yet
    now = facts_at(ledger, "2099-12-31", B, subject="the club")
    assert {f["item_id"] for f in now} == {"b"}
    then = facts_at(ledger, "2023-06", B, subject="The Club")
    assert {f["item_id"] for f in then} == {"a"}  # still true back then
    with pytest.raises(WikidriftError, match="no ledger state"):
        facts_at(ledger, "2020-01-01", "2020-01-01")


def test_rerun_is_skipped_and_order_is_enforced(released_workdir: Path, tmp_path: Path) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    again = update_ledger(workdir, B, A)
    assert again.already_done
    with pytest.raises(WikidriftError, match="forward in time"):
        update_ledger(workdir, A, B)
    with pytest.raises(WikidriftError, match="has not been brought to 2023-06-01"):
        update_ledger(workdir, B, "2023-06-01")


class _Crash(BaseException):
    """An interruption (Ctrl-C, SIGTERM) between the two renames of a ledger update."""


def test_an_interrupted_update_never_loses_the_ledger_state(
    released_workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    import pipeline.storage as storage
    from pipeline.layout import ledger_dir, ledger_snapshots

    workdir = copy_workdir(released_workdir, tmp_path / "w")
    monkeypatch.setattr(storage, "exchange_paths", lambda a, b: False)  # two-rename path
    real_rename, calls = os.rename, []

    def interrupted(src, dst, *args, **kwargs):
        calls.append(dst)
        if len(calls) == 2:
            raise _Crash
        return real_rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "rename", interrupted)
    with pytest.raises(_Crash):
        update_ledger(workdir, B, A, force=True)
    monkeypatch.setattr(os, "rename", real_rename)
    assert (ledger_dir(workdir, B) / "items.parquet").exists()  # the old state is back
    assert ledger_snapshots(workdir) == list(STAGE_DATES)
    assert update_ledger(workdir, B, A).already_done
    assert [p.name for p in (workdir / "ledger").iterdir() if p.name.startswith(".")] == []
