"""The generation stage with the real local LLM (llama.cpp server, SmolLM2-135M from its
wheel): a server that dies mid-stage stops the stage with a clear error instead of turning the
remaining requests into rejected items, and the re-run asks only what was not answered.
Nothing here asserts on the model's words (a 135M model writes poor items)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from pipeline import progress
from pipeline.config import GenerationConfig
from pipeline.generate.stage import generate_items
from pipeline.layout import generated_dir
from pipeline.models.embedder import Embedder
from pipeline.models.llm.cache import CachedLLM, LLMCallCache
from pipeline.models.llm.llamacpp import LlamaCppBackend
from pipeline.models.llm.llamacpp_server import LlamaServer, LocalServerError, ServerSettings
from pipeline.models.llm.packaged import packaged_gguf
from tests.generate.conftest import OLD, UPDATED_IDS

pytestmark = pytest.mark.slow

# One request per kind: a retry or a round-trip check would depend on what the tiny model says.
CFG = GenerationConfig(paragraphs_per_article=1, qa_retry=False, qa_answer_check=False)
ALIAS = "SmolLM2-135M-Instruct"


def start(log: Path) -> LlamaServer:
    server = LlamaServer(
        ServerSettings(
            model_path=str(packaged_gguf("packaged:" + ALIAS)),
            alias=ALIAS,
            parallel=1,
            ctx_per_slot=2048,
            threads=1,
            log_path=str(log),
        )
    )
    server.start()
    return server


class KillAfter:
    """A progress reporter that SIGKILLs the server when the ``n``-th answer arrives."""

    def __init__(self, server: LlamaServer, n: int) -> None:
        self.server, self.n, self.seen = server, n, 0

    def stage(self, label: str, total: int | None, unit: str) -> None: ...

    def add_total(self, n: int) -> None: ...

    def advance(self, n: int = 1) -> None:
        self.seen += n
        if self.seen == self.n:
            os.kill(self.server.pid or 0, signal.SIGKILL)


def test_a_dead_server_stops_the_stage_and_the_rerun_resumes(
    gen_workdir: Path, minilm: Embedder, tmp_path: Path
) -> None:
    cache = LLMCallCache(tmp_path / "calls.sqlite")
    pages = UPDATED_IDS[:1]
    first = start(tmp_path / "server.log")
    killer = KillAfter(first, 1)
    progress.set_reporter(killer)
    try:
        backend = CachedLLM(LlamaCppBackend(ALIAS, first.base_url, server=first), cache)
        with pytest.raises(LocalServerError, match="killed by signal 9"):
            generate_items(
                gen_workdir, OLD, previous=None, backend=backend, embedder=minilm, cfg=CFG,
                page_ids=pages,
            )  # fmt: skip
    finally:
        progress.set_reporter(None)
        first.stop()
    assert not (generated_dir(gen_workdir, OLD) / "run.json").exists()
    assert backend.calls_made >= 1

    second = start(tmp_path / "server.log")
    try:
        backend = CachedLLM(LlamaCppBackend(ALIAS, second.base_url, server=second), cache)
        summary = generate_items(
            gen_workdir, OLD, previous=None, backend=backend, embedder=minilm, cfg=CFG,
            page_ids=pages,
        )  # fmt: skip
    finally:
        second.stop()
    # One QA, one dialogue, one quadruple request; the answer that arrived is not asked again.
    assert summary.llm["requests"] == 3 and backend.hits == 1 and backend.calls_made == 2
    assert summary.llm["errors"] == 0 and summary.llm["generator"] == f"llamacpp:{ALIAS}"
