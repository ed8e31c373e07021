"""Runtime objects are built when first needed: a run with nothing to do starts no local LLM
server and opens no LLM call cache (so it also runs on a read-only workdir)."""

from __future__ import annotations

from pathlib import Path

import pytest

import pipeline.runtime as runtime
from pipeline.config import load_config
from pipeline.layout import LLM_CACHE
from pipeline.models.llm.base import LLMRequest
from pipeline.models.llm.packaged import model_name
from pipeline.models.llm.scripted import ScriptedBackend


def test_local_llm_and_its_cache_start_on_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[str] = []

    def fake_local_llm(cfg, workdir, *, start: bool = True) -> ScriptedBackend:
        started.append(str(workdir))
        return ScriptedBackend(lambda request: "ok", model=model_name(cfg.llm.local_model))

    monkeypatch.setattr(runtime, "local_llm", fake_local_llm)
    cfg = load_config(profile="offline", overrides={"llm": {"backend": "local"}})
    setup = runtime.llm_from_config(cfg, tmp_path)
    cache_file = tmp_path / "cache" / LLM_CACHE
    # What a stage needs to decide that it has nothing to do: no server, no cache file.
    assert setup.backend.model == model_name(cfg.llm.local_model)
    assert setup.backend.backend_id == "llamacpp"
    assert setup.backend.provenance == f"llamacpp:{model_name(cfg.llm.local_model)}"
    assert setup.backend.backend.complete_many([]) == []
    assert started == [] and not cache_file.exists()
    request = LLMRequest(
        messages=({"role": "user", "content": "hi"},), prompt_hash="p", purpose="qa_initial"
    )
    answers = setup.backend.complete_many([request, request])
    assert [a.text for a in answers] == ["ok", "ok"]
    assert started == [str(tmp_path)] and cache_file.exists()
    setup.backend.complete_many([request])  # cached: the server is not asked again
    assert started == [str(tmp_path)]
