"""The ledger as of one snapshot in the layout of a release: what the release stage writes,
what ``verify`` recomputes and what the temporal stage reads its quadruples from."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.layout import read_evidence, read_items, read_release_table
from pipeline.schemas import (
    RELEASE_DIALOGUE_SCHEMA,
    RELEASE_QA_SCHEMA,
    RELEASE_QUADRUPLES_SCHEMA,
    RETIRED_SCHEMA,
)


def release_item_tables(workdir: str | Path, snapshot: str) -> dict[str, pa.Table]:
    """The ledger's items as of ``snapshot`` in the release layout: ``qa``, ``dialogue``,
    ``quadruples`` (current and superseded) and ``retired``."""
    items = read_items(workdir, snapshot).to_pylist()
    evidence = read_evidence(workdir, snapshot).to_pylist()
    latest: dict[str, dict] = {}
    for ev in evidence:  # sorted by snapshot: the last one wins
        latest[ev["item_id"]] = ev

    def valid(it: dict) -> bool:
        return it["valid_to"] is None

    def type_now(it: dict) -> str:
        return it["type_at_creation"] if it["created_snapshot"] == snapshot else "unchanged"

    def evid(it: dict) -> dict:
        return latest[it["item_id"]]

    qa_rows = [
        {
            "item_id": it["item_id"],
            "page_id": it["page_id"],
            "title": it["title"],
            "type": type_now(it),
            "type_at_creation": it["type_at_creation"],
            "created_snapshot": it["created_snapshot"],
            "origin": it["origin"],
            "question": it["question"],
            "answer": it["answer"],
            "previous_answer": it["previous_answer"],
            "evidence_sent_idx": evid(it)["evidence_sent_idx"],
            "evidence_text": evid(it)["evidence_text"],
            "prompt_hash": it["prompt_hash"],
            "generator": it["generator"],
        }
        for it in items
        if it["kind"] == "qa" and valid(it)
    ]
    turns = [it for it in items if it["kind"] == "dialogue_turn"]
    live_dialogues = {it["dialogue_id"] for it in turns if valid(it)}
    dialogue_rows = [
        {
            "dialogue_id": it["dialogue_id"],
            "turn_id": it["item_id"],
            "turn_idx": it["turn_idx"],
            "page_id": it["page_id"],
            "title": it["title"],
            "created_snapshot": it["created_snapshot"],
            "user": it["user"],
            "expert": it["expert"],
            "evidence_sent_idx": evid(it)["evidence_sent_idx"],
            "evidence_text": evid(it)["evidence_text"],
            "evidence_snapshot": evid(it)["snapshot"],
            "type": type_now(it) if valid(it) else None,
            "type_at_creation": it["type_at_creation"],
            "evaluate": valid(it),
            "excluded_reason": it["retired_reason"],
            "excluded_at": it["valid_to"],
            "prompt_hash": it["prompt_hash"],
            "generator": it["generator"],
        }
        for it in turns
        if it["dialogue_id"] in live_dialogues
    ]
    dialogue_rows.sort(key=lambda r: (r["created_snapshot"], r["dialogue_id"], r["turn_idx"]))
    quad_rows = [
        {
            "item_id": it["item_id"],
            "page_id": it["page_id"],
            "title": it["title"],
            "subject": it["subject"],
            "relation": it["relation"],
            "object": it["object"],
            "timestamp": it["timestamp"],
            "observed_at": it["observed_at"],
            "status": "current" if valid(it) else "superseded",
            "superseded_by": it["superseded_by"],
            "fact_valid_until": it["fact_valid_until"],
            "type": type_now(it) if valid(it) else None,
            "type_at_creation": it["type_at_creation"],
            "created_snapshot": it["created_snapshot"],
            "evidence_sent_idx": evid(it)["evidence_sent_idx"],
            "evidence_text": evid(it)["evidence_text"],
            "evidence_snapshot": evid(it)["snapshot"],
            "prompt_hash": it["prompt_hash"],
            "generator": it["generator"],
        }
        for it in items
        if it["kind"] == "quadruple" and (valid(it) or it["retired_reason"] == "superseded")
    ]
    retired_rows = [
        {
            "item_id": it["item_id"],
            "kind": it["kind"],
            "page_id": it["page_id"],
            "reason": it["retired_reason"],
            "superseded_by": it["superseded_by"],
        }
        for it in items
        if it["valid_to"] == snapshot
    ]
    return {
        "qa": pa.Table.from_pylist(qa_rows, schema=RELEASE_QA_SCHEMA),
        "dialogue": pa.Table.from_pylist(dialogue_rows, schema=RELEASE_DIALOGUE_SCHEMA),
        "quadruples": pa.Table.from_pylist(quad_rows, schema=RELEASE_QUADRUPLES_SCHEMA),
        "retired": pa.Table.from_pylist(retired_rows, schema=RETIRED_SCHEMA),
    }


def _type_counts(table: pa.Table, retired: int) -> dict[str, int]:
    types = Counter(table["type"].to_pylist()) if table.num_rows else Counter()
    counts = {k: types.get(k, 0) for k in ("unchanged", "new", "changed")}
    counts["deleted"] = retired
    counts["total"] = counts["unchanged"] + counts["new"] + counts["changed"]
    return counts


def release_counts(tables: dict[str, pa.Table]) -> dict[str, dict[str, int]]:
    """Row counts of a release's tables in the layout of GrowOVER Tables 13/14 (per type, retired,
    total), plus the temporal tables' counts."""
    retired = Counter(tables["retired"]["kind"].to_pylist())
    dialogue = tables["dialogue"]
    evaluated = dialogue.filter(dialogue["evaluate"]) if dialogue.num_rows else dialogue
    quads = tables["quadruples"]
    current = quads.filter(pc.equal(quads["status"], "current")) if quads.num_rows else quads
    qcounts = _type_counts(current, retired.get("quadruple", 0))
    qcounts["current"] = current.num_rows
    qcounts["superseded"] = quads.num_rows - current.num_rows
    labels = Counter(tables["sentence_labels"]["label"].to_pylist())
    counts = {
        "qa": _type_counts(tables["qa"], retired.get("qa", 0)),
        "dialogue_turns": _type_counts(evaluated, retired.get("dialogue_turn", 0))
        | {"context_only": dialogue.num_rows - evaluated.num_rows},
        "dialogues": {"total": len(set(dialogue["dialogue_id"].to_pylist()))},
        "quadruples": qcounts,
        "sentence_labels": dict(sorted(labels.items())),
    }
    if "temporal_qa" in tables:
        counts |= _temporal_counts(tables)
    return counts


def _temporal_counts(tables: dict[str, pa.Table]) -> dict[str, dict[str, int]]:
    qa, timelines, relations = tables["temporal_qa"], tables["timelines"], tables["relations"]
    categories = Counter(qa["category"].to_pylist())
    types = Counter(qa["type"].to_pylist())
    sources = Counter(
        dict(
            zip(timelines["question_id"].to_pylist(), timelines["source"].to_pylist(), strict=True)
        ).values()
    )
    kinds = Counter(relations["type"].to_pylist())
    return {
        "temporal_qa": {c: categories.get(c, 0) for c in ("C1", "C2", "C3")}
        | {
            "new": types.get("new", 0),
            "unchanged": types.get("unchanged", 0),
            "total": qa.num_rows,
        },
        "timelines": {
            "questions": sum(sources.values()),
            "qa_chain": sources.get("qa_chain", 0),
            "fact_chain": sources.get("fact_chain", 0),
            "intervals": timelines.num_rows,
        },
        "relations": {k: kinds.get(k, 0) for k in ("updates", "contradicts", "supports")}
        | {"total": relations.num_rows},
    }


def release_item_ids(workdir: Path, snapshot: str) -> dict[str, set[str]]:
    """The item ids a release holds, per ledger kind (what ``release diff`` and ``verify``
    compare)."""
    qa = read_release_table(workdir, snapshot, "qa")
    dialogue = read_release_table(workdir, snapshot, "dialogue")
    quads = read_release_table(workdir, snapshot, "quadruples")
    return {
        "qa": set(qa["item_id"].to_pylist()),
        "dialogue_turn": {
            t
            for t, e in zip(
                dialogue["turn_id"].to_pylist(), dialogue["evaluate"].to_pylist(), strict=True
            )
            if e
        },
        "quadruple": {
            i
            for i, s in zip(quads["item_id"].to_pylist(), quads["status"].to_pylist(), strict=True)
            if s == "current"
        },
    }
