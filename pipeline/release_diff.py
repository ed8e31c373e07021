"""``wikidrift release diff``: which items and temporal rows one release has that another has
not."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from pipeline.layout import list_releases, read_manifest, read_release_table
from pipeline.release_items import release_item_ids


def release_diff(workdir: str | Path, a: str, b: str) -> dict[str, dict[str, Any]]:
    """Per kind: items added in ``b``, kept from ``a``, and retired between them (by reason)."""
    workdir = Path(workdir)
    ids_a, ids_b = release_item_ids(workdir, a), release_item_ids(workdir, b)
    retired_reason: dict[str, str] = {}
    for snap in list_releases(workdir):
        if a < snap <= b:
            r = read_release_table(workdir, snap, "retired")
            retired_reason.update(
                zip(r["item_id"].to_pylist(), r["reason"].to_pylist(), strict=True)
            )
    out = {}
    for kind in ids_a:
        gone = ids_a[kind] - ids_b[kind]
        out[kind] = {
            "added": len(ids_b[kind] - ids_a[kind]),
            "kept": len(ids_a[kind] & ids_b[kind]),
            "retired": len(gone),
            "retired_by_reason": dict(
                sorted(Counter(retired_reason.get(i, "unknown") for i in gone).items())
            ),
        }
    if all(read_manifest(workdir, s).schema_version >= 2 for s in (a, b)):
        out |= _temporal_diff(workdir, a, b)
    return out


def release_diff_items(workdir: str | Path, a: str, b: str) -> dict[str, dict[str, list[str]]]:
    """Per ledger kind: the ids of the items added in ``b``, kept from ``a`` and retired
    between them, each list sorted (``release diff --items``)."""
    workdir = Path(workdir)
    ids_a, ids_b = release_item_ids(workdir, a), release_item_ids(workdir, b)
    return {
        kind: {
            "added": sorted(ids_b[kind] - ids_a[kind]),
            "kept": sorted(ids_a[kind] & ids_b[kind]),
            "retired": sorted(ids_a[kind] - ids_b[kind]),
        }
        for kind in ids_a
    }


_TEMPORAL_IDS = {
    "temporal_qa": "question_id",
    "timelines": "question_id",
    "relations": "relation_id",
}


def _temporal_diff(workdir: Path, a: str, b: str) -> dict[str, dict[str, Any]]:
    """Temporal questions, timeline questions and relations added / kept / gone between two
    releases; a question leaves when one of its facts left (``fact_gone``) or the facts no
    longer give its answer (``answer_changed``)."""
    facts_b = set(read_release_table(workdir, b, "quadruples")["item_id"].to_pylist())
    out = {}
    for name, column in _TEMPORAL_IDS.items():
        ta, tb = read_release_table(workdir, a, name), read_release_table(workdir, b, name)
        ids_a, ids_b = set(ta[column].to_pylist()), set(tb[column].to_pylist())
        gone = ids_a - ids_b
        reasons: Counter[str] = Counter()
        if name == "temporal_qa":
            for r in ta.to_pylist():
                if r["question_id"] in gone:
                    lost = any(i not in facts_b for i in r["quadruple_ids"])
                    reasons["fact_gone" if lost else "answer_changed"] += 1
        out[name] = {
            "added": len(ids_b - ids_a),
            "kept": len(ids_a & ids_b),
            "retired": len(gone),
            "retired_by_reason": dict(sorted(reasons.items())),
        }
    return out
