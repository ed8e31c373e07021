"""The ledger as of one snapshot in the layout of a release: what the release stage writes,
what ``verify`` recomputes and what the temporal stage reads its quadruples from."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.item_kinds import LEDGER_KINDS, Kind
from pipeline.layout import read_evidence, read_items, read_manifest, read_release_table
from pipeline.release_sources import Revisions, first_release
from pipeline.schemas import RELEASE_TABLES, RETIRED_SCHEMA


def _release_row(
    it: dict,
    evidence: dict,
    names: list[str],
    kind: Kind,
    snapshot: str,
    revisions: Revisions | None = None,
) -> dict[str, object]:
    """One ledger item as a row of its kind's release table: the ledger's columns as they are,
    and those that say what the item is at ``snapshot`` (its type then, its evidence then and
    the article revision that holds it, whether it is valid); without ``revisions`` the
    revision is left empty."""
    valid = it["valid_to"] is None
    type_now = it["type_at_creation"] if it["created_snapshot"] == snapshot else "unchanged"
    derived = {
        kind.id_column: it["item_id"],
        "type": type_now if valid else None,
        "evidence_sent_idx": evidence["evidence_sent_idx"],
        "evidence_text": evidence["evidence_text"],
        "evidence_snapshot": evidence["snapshot"],
        "status": "current" if valid else "superseded",
        "evaluate": valid,
        "excluded_reason": it["retired_reason"],
        "excluded_at": it["valid_to"],
        "revision_id": (
            revisions.of(evidence["snapshot"], it["page_id"]) if revisions is not None else None
        ),
        "first_release": first_release(it["created_snapshot"]),
    }
    return {c: derived[c] if c in derived else it[c] for c in names}


def _released(items: list[dict], kind: Kind) -> list[dict]:
    """The ledger items of ``kind`` its release table holds (see :class:`Kind`)."""
    mine = [it for it in items if it["kind"] == kind.name]
    if kind.group_column is not None:
        live = {it[kind.group_column] for it in mine if it["valid_to"] is None}
        return [it for it in mine if it[kind.group_column] in live]
    return [
        it
        for it in mine
        if it["valid_to"] is None or (kind.keep_superseded and it["retired_reason"] == "superseded")
    ]


def release_item_tables(
    workdir: str | Path, snapshot: str, revisions: Revisions | None = None
) -> dict[str, pa.Table]:
    """The ledger's items as of ``snapshot`` in the release layout: one table per ledger kind
    (``qa``, ``dialogue``, ``quadruples``), then ``retired``; ``revisions`` (default: read
    from the workdir's snapshots) gives each row's ``revision_id``."""
    revisions = revisions or Revisions(workdir)
    items = read_items(workdir, snapshot).to_pylist()
    latest: dict[str, dict] = {}
    for ev in read_evidence(workdir, snapshot).to_pylist():  # sorted by snapshot: last wins
        latest[ev["item_id"]] = ev
    tables: dict[str, pa.Table] = {}
    for kind in LEDGER_KINDS:
        schema = RELEASE_TABLES[kind.table].schema
        rows = [
            _release_row(it, latest[it["item_id"]], schema.names, kind, snapshot, revisions)
            for it in _released(items, kind)
        ]
        if kind.release_order:
            rows.sort(key=lambda r: tuple(r[c] for c in kind.release_order))
        tables[kind.table] = pa.Table.from_pylist(rows, schema=schema)
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
    tables["retired"] = pa.Table.from_pylist(retired_rows, schema=RETIRED_SCHEMA)
    return tables


def _live(table: pa.Table) -> pa.Table:
    """The rows of a release table that are valid at its release (not superseded, not kept
    as context only)."""
    if not table.num_rows:
        return table
    if "status" in table.column_names:
        return table.filter(pc.equal(table["status"], "current"))
    if "evaluate" in table.column_names:
        return table.filter(table["evaluate"])
    return table


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
    counts: dict[str, dict[str, int]] = {}
    for kind in LEDGER_KINDS:
        if kind.table not in tables:  # a kind newer than the release's schema version
            continue
        table = tables[kind.table]
        live = _live(table)
        counts[kind.count_key] = _type_counts(live, retired.get(kind.name, 0))
        if kind.live_count:
            counts[kind.count_key][kind.live_count] = live.num_rows
        if kind.other_count:
            counts[kind.count_key][kind.other_count] = table.num_rows - live.num_rows
        if kind.group_column and kind.group_count:
            groups = set(table[kind.group_column].to_pylist())
            counts[kind.group_count] = {"total": len(groups)}
    labels = Counter(tables["sentence_labels"]["label"].to_pylist())
    counts["sentence_labels"] = dict(sorted(labels.items()))
    if "temporal_qa" in tables:
        counts |= _temporal_counts(tables)
    if "sources" in tables:  # schema v3 on
        sources = tables["sources"]
        counts["sources"] = {
            "revisions": sources.num_rows,
            "articles": len(set(sources["page_id"].to_pylist())),
        }
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
    """The ids of the items valid in a release, per ledger kind (what ``release diff`` and
    ``verify`` compare)."""
    version = read_manifest(workdir, snapshot).schema_version
    ids: dict[str, set[str]] = {}
    for kind in LEDGER_KINDS:
        if RELEASE_TABLES[kind.table].since <= version:
            table = _live(read_release_table(workdir, snapshot, kind.table))
            ids[kind.name] = set(table[kind.id_column].to_pylist())
    return ids
