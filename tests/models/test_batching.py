"""Fixed-shape batches: a text's vector (and a pair's NLI result) is bit-identical whatever
else is embedded with it, in whatever order, on however many threads."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from pipeline.models.batching import (
    PAD_STEP,
    block_namespace,
    cache_namespace,
    filled,
    fixed_shape_blocks,
    padded_length,
)
from pipeline.models.embedder import PACKAGED_MINILM, CachedEmbedder, load_embedder
from pipeline.models.vector_cache import VectorCache
from tests.conftest import WIKISNAP

pytestmark = pytest.mark.slow


def test_blocks_group_texts_by_padded_length_and_never_exceed_rows() -> None:
    counts = [3, 9, 16, 17, 300, 8, 8, 8, 8, 8, 8, 8, 8, 8]
    blocks = list(fixed_shape_blocks(counts, rows=4, cap=256))
    assert sorted(p for block, _ in blocks for p in block) == list(range(len(counts)))
    for block, length in blocks:
        assert 1 <= len(block) <= 4
        assert all(padded_length(counts[p], 256) == length for p in block)
        assert length % PAD_STEP == 0 and length <= 256
    assert padded_length(3, 256) == 8 and padded_length(17, 256) == 24
    assert padded_length(300, 256) == 256  # cut at the model's maximum
    assert filled([5, 7], 4) == [5, 7, 5, 5]
    with pytest.raises(ValueError):
        list(fixed_shape_blocks([1], rows=0, cap=8))


def _real_sentences(limit: int = 240) -> list[str]:
    """Sentence-like pieces of real wikitext of varied lengths (the splitter is not needed:
    what matters is realistic token counts)."""
    texts: set[str] = set()
    for path in sorted((WIKISNAP / "revisions").glob("*/2024-06-01.json"))[:8]:
        wikitext = json.loads(path.read_text())["content"]
        plain = re.sub(r"\{\{[^{}]*\}\}|<[^>]+>|\[\[(?:[^|\]]*\|)?|\]\]|'{2,}", "", wikitext)
        for piece in re.split(r"(?<=[.!?])\s+", plain):
            piece = " ".join(piece.split())
            if 30 <= len(piece) <= 900 and "=" not in piece and "|" not in piece:
                texts.add(piece)
    return sorted(texts)[:limit]


def _compositions(n: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(7)
    return [np.array_split(rng.permutation(n), parts) for parts in (3, 11, 40)]


def _pieced(
    embed: Callable[[list[str]], np.ndarray], texts: list[str], parts: list, like: np.ndarray
) -> np.ndarray:
    """The vectors of ``texts`` embedded one group of ``parts`` at a time, in text order
    (an array shaped ``like``)."""
    out = np.zeros_like(like)
    for part in parts:
        out[part] = embed([texts[i] for i in part])
    return out


def test_minilm_vectors_do_not_depend_on_batch_composition_order_or_threads() -> None:
    texts = _real_sentences(60)
    assert len(texts) == 60
    embedder = load_embedder(PACKAGED_MINILM)
    whole = embedder.embed(texts)
    for parts in _compositions(len(texts)):
        assert np.array_equal(_pieced(embedder.embed, texts, parts, whole), whole)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert np.array_equal(embedder.embed(texts[::-1])[::-1], whole)
    finally:
        torch.set_num_threads(threads)
    # The same texts through sentence-transformers' own length-sorted batches do move with
    # the company they keep: this is what the fixed shapes prevent.
    model = embedder.load()

    def encode(items: list[str]) -> np.ndarray:
        return model.encode(items, batch_size=8, normalize_embeddings=True, convert_to_numpy=True)

    plain = encode(texts)
    moved = 0
    for part in _compositions(len(texts))[1]:
        moved += int((encode([texts[i] for i in part]) != plain[part]).any(axis=1).sum())
    assert moved > 0
    np.testing.assert_allclose(plain, whole, atol=1e-6)  # the same vectors, up to the last bits


def test_simcse_and_nli_results_do_not_depend_on_batch_composition(
    tiny_bert_dir: Path, tiny_nli_dir: Path
) -> None:
    from pipeline.models.embedder import SimCSEEmbedder
    from pipeline.models.nli import HFNLIClassifier

    texts = _real_sentences(120)
    simcse = SimCSEEmbedder(tiny_bert_dir, batch_size=8)
    whole = simcse.embed(texts)
    for parts in _compositions(len(texts)):
        assert np.array_equal(_pieced(simcse.embed, texts, parts, whole), whole)
    pairs = list(zip(texts[:60], texts[60:120], strict=True))
    nli = HFNLIClassifier(tiny_nli_dir, batch_size=8)
    together = nli.classify(pairs)
    assert [nli.classify([pair])[0] for pair in pairs] == together


def test_cache_namespace_names_what_the_vectors_depend_on(tmp_path: Path) -> None:
    embedder = load_embedder(PACKAGED_MINILM, device="cpu")
    assert cache_namespace(embedder) == block_namespace(PACKAGED_MINILM, "cpu", 8)
    assert cache_namespace(embedder) == "packaged:all-MiniLM-L6-v2|cpu|rows=8"
    wider = load_embedder(PACKAGED_MINILM, device="cpu", batch_size=16)
    assert cache_namespace(wider) != cache_namespace(embedder)
    cached = CachedEmbedder(embedder, VectorCache(tmp_path / "v.sqlite"))
    assert cached.cache_namespace == cache_namespace(embedder)
    assert cache_namespace(cached) == cache_namespace(embedder)
    assert cached.model_id == PACKAGED_MINILM  # manifests keep naming the model itself
