"""The release's temporal tables, derived from the ledger (and the phrased questions):

``temporal_qa``
    the Chronos C1 / C2 / C3 questions whose answer the release's facts still give, with the
    quadruples and evidence they rest on and the interval their answer holds for.
``timelines``
    questions re-asked at every release (OAKS), one row per interval with the answer valid
    then: every changed QA pair (its earlier and its current answer) and every supersession
    chain of quadruples (its timeline question).
``relations``
    edges between facts, newer -> older (TPR-RAG's directed relations): ``updates`` (a
    changed sentence and the one it replaced; a quadruple and the one it superseded),
    ``contradicts`` (a changed pair the contradiction check confirmed), ``supports`` (a
    reworded sentence labeled unchanged; two quadruples stating the same fact).

Every row names the article revision its evidence comes from (``revision_ids``, one per
quadruple; ``revision_id``; ``source_revision_id`` / ``target_revision_id``): a sentence's is
its page's revision in its snapshot, a quadruple's that of its release row's evidence.

Everything but the questions' wording is computed from the ledger, the sentence labels and
the snapshots, so ``verify`` can recompute it.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from pipeline.fact_keys import normalize_key
from pipeline.layout import (
    ledger_previous,
    ledger_snapshots,
    read_evidence,
    read_items,
    read_labels,
    read_questions,
)
from pipeline.release_sources import Revisions
from pipeline.schemas import RELATIONS_SCHEMA, TEMPORAL_QA_SCHEMA, TIMELINES_SCHEMA
from pipeline.temporal.questions import Fact, QuestionSpec, current_spec, facts_from_rows


def sentence_id(snapshot: str, page_id: int, idx: Sequence[int]) -> str:
    """Endpoint id of one sentence, or of several joined: ``s:<snapshot>:<page>:<i>[+<j>]``."""
    return f"s:{snapshot}:{page_id}:" + "+".join(str(i) for i in idx)


def parse_sentence_id(value: str) -> tuple[str, int, list[int]]:
    """(snapshot, page_id, sentence indices) of a sentence endpoint id."""
    _, snapshot, page, idx = value.split(":")
    return snapshot, int(page), [int(i) for i in idx.split("+")]


# --------------------------------------------------------------------------- temporal_qa
def _qa_row(spec: QuestionSpec, stored: dict, snapshot: str, quad_revs: dict[str, int]) -> dict:
    return {
        "question_id": spec.question_id,
        "category": spec.category,
        "shape": spec.shape,
        "question": stored["question"],
        "answer": list(spec.answer),
        "answer_mode": spec.answer_mode,
        "as_of": spec.as_of,
        "valid_from": spec.valid_from,
        "valid_to": spec.valid_to,
        "quadruple_ids": [f.item_id for f in spec.facts],
        "page_ids": [f.page_id for f in spec.facts],
        "titles": [f.title for f in spec.facts],
        "evidence_text": [f.evidence_text for f in spec.facts],
        "type": "new" if stored["created_snapshot"] == snapshot else "unchanged",
        "created_snapshot": stored["created_snapshot"],
        "prompt_hash": stored["prompt_hash"],
        "generator": stored["generator"],
        "revision_ids": [quad_revs.get(f.item_id) for f in spec.facts],
    }


def _live_questions(stored: list[dict], facts: list[Fact]) -> list[tuple[QuestionSpec, dict]]:
    """The kept questions whose answer the facts still give, rebuilt from the facts."""
    out = []
    for row in stored:
        if row["status"] != "kept":
            continue
        spec = current_spec(
            row["category"], row["shape"], row["quadruple_ids"], row["as_of"], row["answer"], facts
        )
        if spec is not None:
            out.append((spec, row))
    return out


# --------------------------------------------------------------------------- timelines
def _unchanged_since(
    workdir: Path, snapshot: str, page_id: int, idx: Sequence[int], seen: dict[str, dict]
) -> str:
    """The first snapshot from which the sentence ``idx`` of ``page_id`` at ``snapshot``
    stood unchanged: back through the labels while each pair labels it ``unchanged`` from one
    old sentence (``seen`` keeps each pair's labels, by page and new index, across calls)."""
    start = snapshot
    while len(idx) == 1 and (before := ledger_previous(workdir, start)) is not None:
        if start not in seen:
            table = read_labels(workdir, before, start).to_pylist()
            seen[start] = {(r["page_id"], r["new_idx"]): r for r in table}
        row = seen[start].get((page_id, idx[0]))
        if row is None or row["label"] != "unchanged":
            break
        start, idx = before, row["old_idx"] or []
    return start


def _qa_chain_rows(workdir: Path, items: list[dict], revisions: Revisions) -> list[dict]:
    """Two intervals per changed QA pair: its earlier answer from the first snapshot whose
    sentence said it (back through unchanged labels) to the snapshot the pair was made, its
    current answer from then until its evidence changed (or still open)."""
    changed = [it for it in items if it["kind"] == "qa" and it["type_at_creation"] == "changed"]
    seen: dict[str, dict] = {}
    by_snapshot: dict[str, list[dict]] = defaultdict(list)
    for it in changed:
        by_snapshot[it["created_snapshot"]].append(it)
    rows: list[dict] = []
    for created, group in sorted(by_snapshot.items()):
        before = ledger_previous(workdir, created)
        if before is None:
            continue
        labels = read_labels(workdir, before, created)
        old = {
            (p, n): (o, t)
            for p, n, o, t, lab in zip(
                labels["page_id"].to_pylist(),
                labels["new_idx"].to_pylist(),
                labels["old_idx"].to_pylist(),
                labels["old_text"].to_pylist(),
                labels["label"].to_pylist(),
                strict=True,
            )
            if lab == "changed"
        }
        evidence = _creation_evidence(workdir, created, {it["item_id"] for it in group})
        for it in sorted(group, key=lambda it: it["item_id"]):
            idx, text = evidence[it["item_id"]]
            was = next((old[(it["page_id"], i)] for i in idx if (it["page_id"], i) in old), None)
            if was is None:
                continue
            base = {
                "question_id": it["item_id"],
                "question": it["question"],
                "source": "qa_chain",
                "page_id": it["page_id"],
                "title": it["title"],
            }
            rows.append(
                base
                | {
                    "interval_idx": 0,
                    "interval_start": _unchanged_since(
                        workdir, before, it["page_id"], was[0], seen
                    ),
                    "interval_end": created,
                    "answer": it["previous_answer"],
                    "evidence_id": sentence_id(before, it["page_id"], was[0]),
                    "evidence_text": was[1],
                    "revision_id": revisions.of(before, it["page_id"]),
                }
            )
            rows.append(
                base
                | {
                    "interval_idx": 1,
                    "interval_start": created,
                    "interval_end": it["valid_to"],
                    "answer": it["answer"],
                    "evidence_id": sentence_id(created, it["page_id"], idx),
                    "evidence_text": text,
                    "revision_id": revisions.of(created, it["page_id"]),
                }
            )
    return rows


def _creation_evidence(workdir: Path, snapshot: str, ids: set[str]) -> dict[str, tuple]:
    ev = read_evidence(workdir, snapshot)
    return {
        i: (list(idx), t)
        for i, s, idx, t in zip(
            ev["item_id"].to_pylist(),
            ev["snapshot"].to_pylist(),
            ev["evidence_sent_idx"].to_pylist(),
            ev["evidence_text"].to_pylist(),
            strict=True,
        )
        if i in ids and s == snapshot
    }


def _fact_chain_rows(
    live: list[tuple[QuestionSpec, dict]], items: dict[str, dict], quad_revs: dict[str, int]
) -> list[dict]:
    """One interval per fact of each supersession chain that has a kept timeline question:
    from the snapshot that saw the fact to the one that superseded it."""
    rows = []
    for spec, stored in live:
        if spec.category != "timeline":
            continue
        for k, fact in enumerate(spec.facts):
            rows.append(
                {
                    "question_id": spec.question_id,
                    "question": stored["question"],
                    "source": "fact_chain",
                    "page_id": fact.page_id,
                    "title": fact.title,
                    "interval_idx": k,
                    "interval_start": fact.observed_at,
                    "interval_end": items[fact.item_id]["valid_to"],
                    "answer": fact.object,
                    "evidence_id": f"q:{fact.item_id}",
                    "evidence_text": fact.evidence_text,
                    "revision_id": quad_revs.get(fact.item_id),
                }
            )
    return rows


# --------------------------------------------------------------------------- relations
def _edge(kind: str, rule: str, source: dict, target: dict, page: int, seen: str) -> dict:
    # An endpoint's "revision_id" becomes its ``*_revision_id`` (not part of the relation id).
    rid = hashlib.sha256(f"{kind}|{source['id']}|{target['id']}".encode()).hexdigest()[:16]
    return {
        "relation_id": rid,
        "type": kind,
        "rule": rule,
        **{f"source_{k}": v for k, v in source.items()},
        **{f"target_{k}": v for k, v in target.items()},
        "page_id": page,
        "observed_at": seen,
    }


def _sentence(
    snapshot: str, page: int, idx: Sequence[int], text: str, revisions: Revisions
) -> dict:
    return {
        "kind": "sentence",
        "id": sentence_id(snapshot, page, idx),
        "snapshot": snapshot,
        "time": snapshot,
        "text": text,
        "revision_id": revisions.of(snapshot, page),
    }


def _quad(fact: Fact, quad_revs: dict[str, int]) -> dict:
    return {
        "kind": "quadruple",
        "id": f"q:{fact.item_id}",
        "snapshot": fact.observed_at,
        "time": fact.time,
        "text": f"{fact.subject} | {fact.relation} | {fact.object}",
        "revision_id": quad_revs.get(fact.item_id),
    }


def _sentence_edges(workdir: Path, before: str, after: str, revisions: Revisions) -> list[dict]:
    edges = []
    for r in read_labels(workdir, before, after).to_pylist():
        if r["label"] not in ("changed", "unchanged") or not r["old_idx"] or r["new_idx"] is None:
            continue
        new = _sentence(after, r["page_id"], [r["new_idx"]], r["text"], revisions)
        old = _sentence(before, r["page_id"], r["old_idx"], r["old_text"], revisions)
        if r["label"] == "changed":
            confirmed = r["rule"] == "nli_contradiction" and r["verified"] is True
            kind = "contradicts" if confirmed else "updates"
            rule = "confirmed_contradiction" if confirmed else f"changed:{r['rule']}"
            edges.append(_edge(kind, rule, new, old, r["page_id"], after))
        elif " ".join(r["text"].split()) != " ".join((r["old_text"] or "").split()):
            edges.append(_edge("supports", f"reworded:{r['rule']}", new, old, r["page_id"], after))
    return edges


def _fact_edges(facts: list[Fact], quad_revs: dict[str, int]) -> list[dict]:
    by_id = {f.item_id: f for f in facts}
    edges = []
    for f in facts:
        successor = by_id.get(f.superseded_by or "")
        if successor is not None:
            edges.append(
                _edge(
                    "updates",
                    "supersession",
                    _quad(successor, quad_revs),
                    _quad(f, quad_revs),
                    successor.page_id,
                    successor.observed_at,
                )
            )
    # The same fact: subject, relation, object and date (the same event on another date is
    # another fact).
    same: dict[tuple[str, str, str, str], list[Fact]] = defaultdict(list)
    for f in facts:
        same[(*f.key, normalize_key(f.object), f.timestamp or "")].append(f)
    for group in same.values():
        group.sort(key=lambda f: (f.observed_at, f.item_id))
        first = group[0]
        for later in group[1:]:
            edges.append(
                _edge(
                    "supports",
                    "same_fact",
                    _quad(later, quad_revs),
                    _quad(first, quad_revs),
                    later.page_id,
                    later.observed_at,
                )
            )
    return edges


# --------------------------------------------------------------------------- all
def temporal_tables(
    workdir: str | Path, snapshot: str, quadruples: pa.Table, revisions: Revisions | None = None
) -> dict[str, pa.Table]:
    """``temporal_qa``, ``timelines`` and ``relations`` of the release of ``snapshot``, from
    its ``quadruples`` table, the ledger, the labels and the phrased questions; ``revisions``
    (default: read from the workdir's snapshots) gives the sentences' revisions."""
    workdir = Path(workdir)
    revisions = revisions or Revisions(workdir)
    rows = quadruples.to_pylist()
    facts = facts_from_rows(rows)
    quad_revs = {r["item_id"]: r.get("revision_id") for r in rows}
    stored = read_questions(workdir, snapshot)
    live = _live_questions(stored.to_pylist() if stored is not None else [], facts)
    items = read_items(workdir, snapshot).to_pylist()
    qa_rows = [
        _qa_row(spec, row, snapshot, quad_revs) for spec, row in live if spec.category != "timeline"
    ]
    timeline_rows = _qa_chain_rows(workdir, items, revisions) + _fact_chain_rows(
        live, {it["item_id"]: it for it in items}, quad_revs
    )
    edges: list[dict] = []
    for snap in ledger_snapshots(workdir):
        if snap > snapshot:
            break
        before = ledger_previous(workdir, snap)
        if before is not None:
            edges += _sentence_edges(workdir, before, snap, revisions)
    edges += _fact_edges(facts, quad_revs)
    edges.sort(key=lambda e: (e["observed_at"], e["type"], e["relation_id"]))
    return {
        "temporal_qa": pa.Table.from_pylist(qa_rows, schema=TEMPORAL_QA_SCHEMA),
        "timelines": pa.Table.from_pylist(timeline_rows, schema=TIMELINES_SCHEMA),
        "relations": pa.Table.from_pylist(edges, schema=RELATIONS_SCHEMA),
    }
