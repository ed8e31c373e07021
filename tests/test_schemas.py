"""The one definition of every table: schema versions pick files and columns by name."""

from __future__ import annotations

from pipeline.schemas import (
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


def test_a_table_at_an_earlier_schema_version_lacks_the_columns_added_since() -> None:
    qa = RELEASE_TABLES["qa"]
    assert qa.schema_at(RELEASE_SCHEMA_VERSION) == qa.schema
    assert qa.schema.names[-2:] == ["revision_id", "first_release"]  # appended: v2 order kept
    assert qa.schema_at(2).names == qa.schema.names[:-2]
    relations = RELEASE_TABLES["relations"].schema_at(2).names
    assert "source_revision_id" not in relations and "target_revision_id" not in relations
    assert "revision_ids" not in RELEASE_TABLES["temporal_qa"].schema_at(2).names
