"""Release rows and counts follow each Kind's record (pipeline.release_items), and the card
lists the files of the release's schema version (pipeline.release_card)."""

from __future__ import annotations

import pyarrow as pa

from pipeline.item_kinds import DIALOGUE_TURN, QA, QUADRUPLE
from pipeline.markers import ReleaseManifest
from pipeline.release_card import _files
from pipeline.release_items import _release_row, _released, release_counts
from pipeline.schemas import LABELS_SCHEMA, LEDGER_ITEMS_SCHEMA, RELEASE_TABLES, RETIRED_SCHEMA

SNAP = "2024-06-01"
EVIDENCE = {"evidence_sent_idx": [3], "evidence_text": "A sentence.", "snapshot": "2024-01-01"}


def _item(kind: str, item_id: str, **fields: object) -> dict[str, object]:
    base = dict.fromkeys(LEDGER_ITEMS_SCHEMA.names) | {
        "item_id": item_id,
        "kind": kind,
        "page_id": 7,
        "title": "T",
        "created_snapshot": "2024-01-01",
        "valid_from": "2024-01-01",
        "type_at_creation": "new",
    }
    return base | fields


def test_a_superseded_fact_is_released_with_its_status_and_no_type() -> None:
    names = RELEASE_TABLES[QUADRUPLE.table].schema.names
    current = _item("quadruple", "q1", subject="S", relation="r", object="O")
    gone = _item("quadruple", "q2", valid_to=SNAP, retired_reason="superseded", superseded_by="q1")
    retired = _item("quadruple", "q3", valid_to=SNAP, retired_reason="evidence_deleted")
    kept = _released([current, gone, retired], QUADRUPLE)
    assert [it["item_id"] for it in kept] == ["q1", "q2"]
    row_now = _release_row(current, EVIDENCE, names, QUADRUPLE, SNAP)
    row_gone = _release_row(gone, EVIDENCE, names, QUADRUPLE, SNAP)
    assert (row_now["status"], row_now["type"], row_now["subject"]) == ("current", "unchanged", "S")
    assert (row_gone["status"], row_gone["type"], row_gone["superseded_by"]) == (
        "superseded",
        None,
        "q1",
    )
    assert row_now["evidence_snapshot"] == "2024-01-01" and list(row_now) == names


def test_a_dialogue_stays_while_one_turn_is_valid() -> None:
    names = RELEASE_TABLES[DIALOGUE_TURN.table].schema.names
    live = _item("dialogue_turn", "d1:0", dialogue_id="d1", turn_idx=0)
    excluded = _item(
        "dialogue_turn",
        "d1:1",
        dialogue_id="d1",
        turn_idx=1,
        valid_to=SNAP,
        retired_reason="evidence_changed",
    )
    dead = _item("dialogue_turn", "d2:0", dialogue_id="d2", turn_idx=0, valid_to=SNAP)
    kept = _released([live, excluded, dead], DIALOGUE_TURN)
    assert [it["item_id"] for it in kept] == ["d1:0", "d1:1"]
    row = _release_row(excluded, EVIDENCE, names, DIALOGUE_TURN, SNAP)
    assert row["turn_id"] == "d1:1" and row["evaluate"] is False
    assert (row["excluded_reason"], row["excluded_at"]) == ("evidence_changed", SNAP)


def test_counts_skip_a_kind_the_release_has_no_table_for() -> None:
    tables = {
        QA.table: pa.Table.from_pylist(
            [{"item_id": "a", "type": "new"}, {"item_id": "b", "type": "unchanged"}],
            schema=RELEASE_TABLES[QA.table].schema,
        ),
        QUADRUPLE.table: RELEASE_TABLES[QUADRUPLE.table].schema.empty_table(),
        "retired": pa.Table.from_pylist(
            [{"item_id": "c", "kind": "qa", "reason": "evidence_deleted"}], schema=RETIRED_SCHEMA
        ),
        "sentence_labels": LABELS_SCHEMA.empty_table(),
    }
    counts = release_counts(tables)
    assert list(counts) == ["qa", "quadruples", "sentence_labels"]
    assert counts["qa"] == {"unchanged": 1, "new": 1, "changed": 0, "deleted": 1, "total": 2}
    assert counts["quadruples"]["current"] == counts["quadruples"]["superseded"] == 0


def _manifest(version: int) -> ReleaseManifest:
    return ReleaseManifest(
        release_id="r",
        snapshot=SNAP,
        revision=1,
        previous_release=None,
        schema_version=version,
        inputs_digest="",
        config={},
        config_hash="",
        models={},
        prompt_hashes={},
        labeling_rule="initial",
        counts={},
    )


def test_the_card_lists_the_files_of_the_release_version() -> None:
    assert _files(_manifest(2)) == (
        "`qa.parquet`, `dialogue.parquet`, `quadruples.parquet`, `sentence_labels.parquet` (the\n"
        "sentence labels that maintained this release), `retired.parquet` (items that left here,"
        " with\nthe reason), `temporal_qa.parquet`, `timelines.parquet`, `relations.parquet`;\n"
        "`manifest.json` lists every file with its sha256 (`wikidrift verify`)."
    )
    assert "temporal_qa" not in _files(_manifest(1))
