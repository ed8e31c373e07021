"""The item generators: one per ledger kind, found through its Kind, and a generation stage
that runs whatever is registered."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pipeline.config import GenerationConfig
from pipeline.generate import kinds
from pipeline.generate.dialogue import DIALOGUE_GENERATOR
from pipeline.generate.kinds import (
    Batch,
    ItemGenerator,
    KindOutput,
    generation_prompt_names,
    item_generators,
    reject_reasons,
)
from pipeline.generate.qa import QA_GENERATOR
from pipeline.generate.selection import Article, ArticleParagraph
from pipeline.generate.stage import generate_items
from pipeline.generate.validate import REASONS
from pipeline.item_kinds import LEDGER_KINDS
from pipeline.layout import read_generated
from pipeline.models.embedder import Embedder
from pipeline.models.llm.scripted import ScriptedBackend
from pipeline.schemas import GENERATED_TABLES
from tests.generate.conftest import OLD
from tests.scripted_llm import good_answer


def test_every_ledger_kind_has_its_generator_table_and_switch() -> None:
    gens = item_generators()
    assert [g.table for g in gens] == [k.table for k in LEDGER_KINDS]
    for g in gens:
        assert g.table in GENERATED_TABLES
        assert GenerationConfig.model_fields[g.table].annotation is bool


def test_generation_prompts_keep_their_order() -> None:
    # The generation digest of every existing workdir hashes these templates.
    assert generation_prompt_names() == (
        "qa_initial",
        "qa_new",
        "qa_changed",
        "qa_check",
        "dialogue",
        "quadruples",
        "contradiction",
        "qa_retry",
    )


def test_a_kind_must_name_a_generator() -> None:
    with pytest.raises(TypeError, match="not an ItemGenerator"):
        kinds._resolve("pipeline.item_kinds:QA")


def _fake_tasks(
    article: Article, paragraphs: list[ArticleParagraph], _cfg: GenerationConfig
) -> list[Any]:
    return [(article, p.sent_idx) for p in paragraphs]


def _fake_run(tasks: list[Any], batch: Batch) -> KindOutput:
    rows = [
        {
            "item_id": f"{article.page_id}:{idx[0]}",
            "page_id": article.page_id,
            "title": article.title,
            "snapshot": article.snapshot,
            "subject": article.title,
            "relation": "has paragraph starting at",
            "object": str(idx[0]),
            "timestamp": None,
            "observed_at": article.snapshot,
            "evidence_sent_idx": [idx[0]],
            "evidence_text": article.texts[idx[0]],
            "type": "new",
            "prompt_hash": "0" * 16,
            "generator": batch.generator,
        }
        for article, idx in tasks
    ]
    return KindOutput(rows, [], {"fake": len(tasks)}, {"fake_shard": batch.index})


FAKE = ItemGenerator(
    table="quadruples",
    prompts=("quadruples",),
    initial_tasks=_fake_tasks,
    update_tasks=lambda _article, _cfg, _previous: [],
    run=_fake_run,
    counts=lambda table, parts: {"parts": len(parts), "rows": table.num_rows},
    reasons={"fake_reason": "a code only this generator records"},
)


def test_reject_reasons_add_each_generators_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kinds, "item_generators", lambda: (QA_GENERATOR, FAKE))
    reasons = reject_reasons()
    assert reasons["fake_reason"] == "a code only this generator records"
    assert REASONS.items() <= reasons.items()


def test_makes_items_follows_every_kinds_switch() -> None:
    off = {k.table: False for k in LEDGER_KINDS}
    assert not GenerationConfig(**off).makes_items
    for kind in LEDGER_KINDS:
        assert GenerationConfig(**(off | {kind.table: True})).makes_items


@pytest.mark.slow  # a real labeled workdir (spaCy, MiniLM)
def test_the_stage_runs_whatever_generators_are_registered(
    gen_source_workdir: Path,
    minilm: Embedder,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stage knows no kind by name: a generator swapped in for the quadruples fills their
    table, its request counts, shard metadata and extra counts reach ``run.json``, and a
    switched-off kind still gets its (empty) table."""
    workdir = tmp_path / "workdir"
    shutil.copytree(gen_source_workdir, workdir)
    monkeypatch.setattr(
        "pipeline.generate.stage.item_generators",
        lambda: (QA_GENERATOR, DIALOGUE_GENERATOR, FAKE),
    )
    cfg = GenerationConfig(qa=False, dialogue=True, quadruple_grammar_check=False)
    backend = ScriptedBackend(good_answer)
    summary = generate_items(
        workdir, OLD, previous=None, backend=backend, embedder=minilm, cfg=cfg, shard_pages=3
    )
    table = read_generated(workdir, OLD, "quadruples")
    assert table.num_rows == summary.requests["fake"] > 0
    assert set(table["relation"].to_pylist()) == {"has paragraph starting at"}
    n_parts = -(-summary.articles["total"] // 3)
    assert summary.counts["quadruples"] == {
        "new": table.num_rows,
        "total": table.num_rows,
        "parts": n_parts,
        "rows": table.num_rows,
    }
    assert read_generated(workdir, OLD, "qa").num_rows == 0
    assert "qa_initial" not in summary.requests
    assert summary.requests["dialogue"] > 0
    assert isinstance(read_generated(workdir, OLD, "dialogue"), pa.Table)
