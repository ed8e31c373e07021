"""The benchmarks' embedding floor: tokens counted as the model sees them, vectors untouched,
floors computed from the counted tokens."""

from __future__ import annotations

import numpy as np
import torch

from benchmarks.embedding_floor import (
    EmbeddingFloor,
    TokenCountingEmbedder,
    count_tokens,
    linear_flops_per_token,
)

SENTENCES = [
    "The Denver Nuggets won their first NBA championship in 2023.",
    "Barclays is headquartered in London.",
]


def test_counting_embedder_returns_the_models_vectors_and_counts_its_tokens(offline_embedder):
    counting = TokenCountingEmbedder(offline_embedder)
    start = counting.mark()
    vectors = counting.embed(SENTENCES)
    np.testing.assert_allclose(vectors, offline_embedder.embed(SENTENCES), atol=1e-6)
    assert counting.model_id == offline_embedder.model_id
    tokenizer = offline_embedder.load().tokenizer
    expected = sum(len(tokenizer(t)["input_ids"]) for t in SENTENCES)
    assert counting.tokens_since(start) == expected
    after = counting.mark()
    counting.embed(SENTENCES[:1])
    assert counting.tokens_since(after) == len(tokenizer(SENTENCES[0])["input_ids"])


def test_long_texts_count_only_the_tokens_the_model_keeps(offline_embedder):
    model = offline_embedder.load()
    long_text = " ".join(SENTENCES * 100)
    assert count_tokens(model, [long_text]) == model.max_seq_length
    assert count_tokens(model, []) == 0


def test_linear_flops_per_token_adds_every_linear_layer_but_the_pooler():
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    assert linear_flops_per_token(net) == 2 * (3 * 4 + 4 * 2)
    net.add_module("pooler", torch.nn.Linear(2, 2))
    assert linear_flops_per_token(net) == 2 * (3 * 4 + 4 * 2)


def test_floors_are_measured_and_scale_with_tokens(offline_embedder):
    floor = EmbeddingFloor(offline_embedder, SENTENCES * 8)
    # MiniLM-L6: per layer 4 products of 384 x 384 and 2 of 384 x 1536, six layers; the
    # pooler's product runs once per text, not per token.
    assert floor.flops_per_token == 6 * 2 * (4 * 384 * 384 + 2 * 384 * 1536)
    assert floor.tokens_per_s > 0 and floor.peak_gflops > 0
    assert floor.at_model_speed(2000) == 2 * floor.at_model_speed(1000)
    assert floor.at_matmul_peak(1000) == 1000 * floor.flops_per_token / (floor.peak_gflops * 1e9)
