"""The one definition of every table and item kind: the kinds agree with the schemas they name,
and schema versions pick files by name."""

from __future__ import annotations

from pipeline.schemas import (
    GENERATED_TABLES,
    KINDS,
    LEDGER_ITEMS_SCHEMA,
    LEDGER_KINDS,
    RELEASE_SCHEMA_VERSION,
    RELEASE_TABLES,
    export_configs,
    release_files,
)


def test_release_files_and_export_configs_by_schema_version() -> None:
    assert release_files(1) == ("qa", "dialogue", "quadruples", "sentence_labels", "retired")
    assert release_files(2) == (*release_files(1), "temporal_qa", "timelines", "relations")
    assert release_files(RELEASE_SCHEMA_VERSION) == (*release_files(2), "sources")
    assert export_configs(1) == ("qa", "dialogue", "quadruples", "sentence_labels")
    assert "retired" not in export_configs(RELEASE_SCHEMA_VERSION)
    assert "sources" in export_configs(3) and "sources" not in export_configs(2)
    assert RELEASE_TABLES["qa"].stored_name == "release_qa"
    assert RELEASE_TABLES["sentence_labels"].stored_name == "sentence_labels"


def test_every_kind_names_tables_that_exist() -> None:
    names = [k.name for k in KINDS]
    assert len(set(names)) == len(names) == 6
    for kind in KINDS:
        assert kind.table in RELEASE_TABLES, kind
    for kind in LEDGER_KINDS:
        generated = GENERATED_TABLES[kind.table]
        released = RELEASE_TABLES[kind.table].schema
        # the ledger keeps the payload from the generated table and hands it on to the release
        for column in kind.payload:
            assert column in generated.names and column in LEDGER_ITEMS_SCHEMA.names, column
            assert column in released.names, column
        assert kind.id_column in generated.names and kind.id_column in released.names
        assert kind.growth, kind
    assert [k.name for k in LEDGER_KINDS] == ["qa", "dialogue_turn", "quadruple"]
    assert [k.table for k in KINDS if k.evaluated] == ["qa", "dialogue", "temporal_qa", "timelines"]


def test_a_table_at_an_earlier_schema_version_lacks_the_columns_added_since() -> None:
    qa = RELEASE_TABLES["qa"]
    assert qa.schema_at(RELEASE_SCHEMA_VERSION) == qa.schema
    assert qa.schema.names[-2:] == ["revision_id", "first_release"]  # appended: v2 order kept
    assert qa.schema_at(2).names == qa.schema.names[:-2]
    relations = RELEASE_TABLES["relations"].schema_at(2).names
    assert "source_revision_id" not in relations and "target_revision_id" not in relations
    assert "revision_ids" not in RELEASE_TABLES["temporal_qa"].schema_at(2).names
