"""The exported lm-evaluation-harness tasks, run end to end by lm-eval itself: its
OpenAI-compatible completions model (``local-completions``) against the real llama.cpp server
with SmolLM2-135M from its wheel. The score is whatever the model gets; the run must finish,
send every document to the server and report the metric over all of them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import lm_eval
import pytest
from lm_eval.tasks import TaskManager

from pipeline.export_hf import export_hf
from pipeline.layout import read_release_table
from pipeline.models.llm.llamacpp_server import LlamaServer, ServerSettings
from pipeline.models.llm.packaged import packaged_gguf
from tests.conftest import STAGE_DATES

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("exports_share_the_session_embedder")]

B = STAGE_DATES[1]
ALIAS = "SmolLM2-135M-Instruct"


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    log = tmp_path_factory.mktemp("llama") / "server.log"
    server = LlamaServer(
        ServerSettings(
            model_path=str(packaged_gguf(f"packaged:{ALIAS}")),
            alias=ALIAS,
            parallel=2,
            ctx_per_slot=2048,
            threads=1,  # the suite's other worker shares the two cores
            log_path=str(log),
        )
    )
    server.start()
    yield server
    server.stop()


# Every question closed-book; the first 4 with their retrieved passages (prompts several
# times longer, the same code path for every document).
@pytest.mark.parametrize(("task", "limit"), [("wikidrift_qa", None), ("wikidrift_qa_bm25", 4)])
def test_exported_task_runs_end_to_end_on_a_real_server(
    task: str,
    limit: int | None,
    released_workdir: Path,
    tmp_path: Path,
    smollm2: LlamaServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = export_hf(released_workdir, B, tmp_path / "hf")
    questions = read_release_table(released_workdir, B, "qa")["question"].to_pylist()
    assert len(questions) > (limit or 0)
    questions = questions[:limit]
    monkeypatch.chdir(out)  # the tasks read the export by paths relative to it
    results = lm_eval.simple_evaluate(
        model="local-completions",
        model_args={
            "base_url": f"{smollm2.base_url}/completions",
            "model": ALIAS,
            "tokenizer_backend": "none",  # plain-text prompts: no tokenizer from the hub
            "max_retries": 1,
        },
        tasks=[task],
        task_manager=TaskManager(include_path="lm_eval", include_defaults=False),
        log_samples=True,
        limit=limit,
    )
    assert results is not None
    assert results["n-samples"][task]["effective"] == len(questions)
    score = results["results"][task]["exact_match,none"]
    assert 0.0 <= score <= 1.0
    samples = results["samples"][task]
    assert len(samples) == len(questions)
    # Every document reached the model and came back with an answer (maybe an empty one).
    asked = sorted(s["doc"]["question"] for s in samples)
    assert asked == sorted(questions)
    assert all(isinstance(s["resps"][0][0], str) for s in samples)
    assert all(s["arguments"][0][0].rstrip().endswith("Short answer:") for s in samples)
