"""``verify`` for the temporal tables: every question rests on quadruples the release holds
and its answer is what those quadruples say; every relation's endpoints exist with the text
it quotes; every timeline interval is what the ledger recorded. Each check reads the data
itself, not the code path that built the tables."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pyarrow as pa

from pipeline.fact_keys import normalize_key
from pipeline.layout import read_items, sentence_texts
from pipeline.temporal.tables import parse_sentence_id


def _norm(values: list[str]) -> list[str]:
    return [normalize_key(v) for v in values]


def _question_problems(qa: pa.Table, quads: dict[str, dict]) -> list[str]:
    problems = []
    by_key: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for q in quads.values():
        by_key[(normalize_key(q["subject"]), normalize_key(q["relation"]))].append(q)
    for r in qa.to_pylist():
        label = f"temporal_qa {r['question_id']}"
        missing = [i for i in r["quadruple_ids"] if i not in quads]
        if missing:
            problems.append(f"{label}: supporting quadruple(s) not in the release: {missing}")
            continue
        facts = [quads[i] for i in r["quadruple_ids"]]
        if r["evidence_text"] != [f["evidence_text"] for f in facts]:
            problems.append(f"{label}: evidence differs from its quadruples' evidence")
        if r["category"] == "C1" and _norm(r["answer"]) != _norm([facts[0]["object"]]):
            problems.append(f"{label}: C1 answer {r['answer']} is not its fact's object")
        if r["category"] == "C2":
            start, end = r["as_of"].split("/")
            first = facts[0]
            key = (normalize_key(first["subject"]), normalize_key(first["relation"]))
            inside = sorted(
                (q for q in by_key[key] if start <= (q["timestamp"] or q["observed_at"]) <= end),
                key=lambda q: (q["timestamp"] or q["observed_at"], q["item_id"]),
            )
            want = list(dict.fromkeys(normalize_key(q["object"]) for q in inside))
            if _norm(r["answer"]) != want:
                problems.append(
                    f"{label}: C2 answer {r['answer']} differs from the ledger's objects of "
                    f"({first['subject']}, {first['relation']}) over {r['as_of']}"
                )
        if r["category"] == "C3":
            entities = {normalize_key(f[k]) for f in facts for k in ("subject", "object")}
            if not set(_norm(r["answer"])) <= entities:
                problems.append(f"{label}: C3 answer {r['answer']} is not an entity of its facts")
    return problems


def _relation_problems(workdir: Path, relations: pa.Table, quads: dict[str, dict]) -> list[str]:
    problems = []
    endpoints = []
    for r in relations.to_pylist():
        for end in ("source", "target"):
            endpoints.append((r["relation_id"], r[f"{end}_kind"], r[f"{end}_id"], r[f"{end}_text"]))
    wanted: dict[str, set[int]] = defaultdict(set)
    for _, kind, eid, _ in endpoints:
        if kind == "sentence":
            snap, page, _ = parse_sentence_id(eid)
            wanted[snap].add(page)
    texts = {
        (snap, p, i): t
        for snap, pages in wanted.items()
        for (p, i), t in sentence_texts(workdir, snap, pages).items()
    }
    for rid, kind, eid, text in endpoints:
        if kind == "quadruple":
            if eid.removeprefix("q:") not in quads:
                problems.append(f"relation {rid}: endpoint {eid} is not a quadruple of the release")
            continue
        snap, page, idx = parse_sentence_id(eid)
        got = [texts.get((snap, page, i)) for i in idx]
        if any(g is None for g in got):
            problems.append(f"relation {rid}: endpoint {eid} is not a sentence of snapshot {snap}")
        elif " ".join(got) != text:  # type: ignore[arg-type]
            problems.append(f"relation {rid}: endpoint {eid} does not hold the text it quotes")
    return problems


def _timeline_problems(
    workdir: Path, snapshot: str, timelines: pa.Table, quads: dict[str, dict]
) -> list[str]:
    problems = []
    items = {it["item_id"]: it for it in read_items(workdir, snapshot).to_pylist()}
    for r in timelines.to_pylist():
        label = f"timeline {r['question_id']} interval {r['interval_idx']}"
        if r["source"] == "qa_chain":
            item = items.get(r["question_id"])
            if item is None or item["kind"] != "qa" or item["type_at_creation"] != "changed":
                problems.append(f"{label}: not a changed QA pair of the ledger")
                continue
            want = item["previous_answer"] if r["interval_idx"] == 0 else item["answer"]
            if r["answer"] != want:
                problems.append(f"{label}: answer {r['answer']!r} != ledger {want!r}")
        else:
            fact = quads.get(r["evidence_id"].removeprefix("q:"))
            if fact is None:
                problems.append(f"{label}: fact {r['evidence_id']} is not in the release")
            elif r["answer"] != fact["object"]:
                problems.append(f"{label}: answer {r['answer']!r} != its fact's object")
    return problems


def temporal_problems(workdir: str | Path, snapshot: str, tables: dict[str, pa.Table]) -> list[str]:
    """Every violation in the temporal tables of a release (empty = good)."""
    workdir = Path(workdir)
    quads = {q["item_id"]: q for q in tables["quadruples"].to_pylist()}
    return (
        _question_problems(tables["temporal_qa"], quads)
        + _relation_problems(workdir, tables["relations"], quads)
        + _timeline_problems(workdir, snapshot, tables["timelines"], quads)
    )
