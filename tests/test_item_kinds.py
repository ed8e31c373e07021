"""The item kinds: each names tables that exist, and the ledger kinds' payload flows from the
generated table through the ledger to the release."""

from __future__ import annotations

from pipeline.item_kinds import KINDS, LEDGER_KINDS
from pipeline.schemas import GENERATED_TABLES, LEDGER_ITEMS_SCHEMA, RELEASE_TABLES


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
