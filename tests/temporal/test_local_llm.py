"""The temporal stage with the real local LLM (llama.cpp server, SmolLM2-135M from its wheel)
over a real released workdir: every phrasing is kept or rejected with a reason, and the
release built from them verifies. Nothing here asserts on the model's words (a 135M model
phrases poorly; the README's examples come from the default 1.5B model)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.config import load_config
from pipeline.layout import read_manifest, read_questions
from pipeline.models.llm.llamacpp import LlamaCppBackend
from pipeline.release import build_release, manifest_config
from pipeline.release_verify import verify_release
from pipeline.temporal.phrasing import REASONS
from pipeline.temporal.stage import phrase_temporal_questions
from tests.conftest import STAGE_DATES, copy_workdir
from tests.generate.test_local_llm import ALIAS, start

pytestmark = pytest.mark.slow


def test_local_model_phrases_and_the_release_verifies(
    released_workdir: Path, tmp_path: Path
) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    shutil.rmtree(workdir / "temporal")
    server = start(tmp_path / "llama.log")
    try:
        backend = LlamaCppBackend(ALIAS, server.base_url, server=server)
        summary = phrase_temporal_questions(workdir, STAGE_DATES[0], backend, max_new=8)
    finally:
        server.stop()
    assert summary.phrased == 8
    rows = read_questions(workdir, STAGE_DATES[0]).to_pylist()
    assert len(rows) == 8
    for r in rows:
        assert r["generator"] == f"llamacpp:{ALIAS}"
        assert (r["status"] == "kept") == (r["reason"] is None)
        assert r["reason"] is None or r["reason"] in REASONS
    cfg = load_config(profile="offline")
    manifest = build_release(
        workdir,
        STAGE_DATES[0],
        config=manifest_config(cfg),
        config_hash=cfg.stable_hash(),
        revise_on_change=True,
    )
    kept = sum(r["status"] == "kept" for r in rows)
    assert read_manifest(workdir, STAGE_DATES[0]).counts["temporal_qa"]["total"] <= kept
    assert manifest.revision == 2
    assert verify_release(workdir, STAGE_DATES[0]) == []
