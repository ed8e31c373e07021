"""What the embedding model's arithmetic alone costs a labeling run.

Label time on a CPU is the embedding model's matrix products. This module counts the tokens a
run actually sends to the model and turns them into two floors: the seconds they take at the
model's measured throughput on real sentences, and the seconds they would take if every
matrix product ran at the peak this machine reaches on the model's shapes (fp32). The
benchmarks print both, so a speed target can be checked against what the method must embed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch


class TokenCountingEmbedder:
    """Wraps a sentence-transformers embedder and remembers every text sent to the model.

    Tokens are counted on demand (`tokens_since`), outside any timed region: tokenizing again
    while a benchmark's clock runs would inflate the time being measured."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_id: str = inner.model_id
        self.texts: list[str] = []

    @property
    def texts_embedded(self) -> int:
        """Texts the wrapped model embedded."""
        return self.inner.texts_embedded

    @property
    def dim(self) -> int:
        """Length of each vector."""
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """The wrapped model's vectors, unchanged; the texts are remembered."""
        vectors = self.inner.embed(texts)
        self.texts.extend(texts)
        return vectors

    def mark(self) -> int:
        """A position to count from later (`tokens_since`)."""
        return len(self.texts)

    def tokens_since(self, mark: int = 0) -> int:
        """Tokens the model processed for the texts embedded after ``mark`` (special tokens
        included, each text cut at the model's maximum sequence length, as encode() cuts)."""
        return count_tokens(self.inner.load(), self.texts[mark:])


def count_tokens(model: Any, texts: Sequence[str]) -> int:
    """Tokens of ``texts`` as a SentenceTransformer feeds them to its transformer."""
    if not texts:
        return 0
    ids = model.tokenizer(list(texts), truncation=True, max_length=model.max_seq_length)
    return sum(len(row) for row in ids["input_ids"])


def linear_flops_per_token(model: torch.nn.Module) -> int:
    """Multiply-adds x 2 of every Linear layer a token passes, per token: the matrix products
    each token costs. A BERT pooler sees one token per text, and attention scores and
    element-wise work are left out too, so the floor stays a floor."""
    return sum(
        2 * m.in_features * m.out_features
        for name, m in model.named_modules()
        if isinstance(m, torch.nn.Linear) and "pooler" not in name
    )


def matmul_peak_gflops(model: torch.nn.Module, rows: int = 512, repeats: int = 30) -> float:
    """The best GFLOP/s this machine reaches on the model's own Linear shapes (fp32, the
    torch threads the model uses), measured."""
    shapes = {
        (m.in_features, m.out_features) for m in model.modules() if isinstance(m, torch.nn.Linear)
    }
    best = 0.0
    with torch.inference_mode():
        for k, n in sorted(shapes):
            x, w = torch.randn(rows, k), torch.randn(n, k)
            torch.nn.functional.linear(x, w)
            start = time.perf_counter()
            for _ in range(repeats):
                torch.nn.functional.linear(x, w)
            seconds = (time.perf_counter() - start) / repeats
            best = max(best, 2 * rows * k * n / seconds / 1e9)
    return best


def model_tokens_per_s(embedder: Any, texts: Sequence[str]) -> float:
    """Tokens per second the embedder reaches on ``texts`` (real sentences), batched as
    configured; the model is warmed up first."""
    model = embedder.load()
    embedder.embed(list(texts[:16]))
    start = time.perf_counter()
    embedder.embed(list(texts))
    return count_tokens(model, texts) / (time.perf_counter() - start)


class EmbeddingFloor:
    """Seconds that a number of embedded tokens costs on this machine, two ways."""

    def __init__(self, embedder: Any, sample: Sequence[str]) -> None:
        model = embedder.load()
        self.tokens_per_s = model_tokens_per_s(embedder, sample)
        self.flops_per_token = linear_flops_per_token(model)
        self.peak_gflops = matmul_peak_gflops(model)

    def at_model_speed(self, tokens: int) -> float:
        """Seconds at the model's measured throughput."""
        return tokens / self.tokens_per_s

    def at_matmul_peak(self, tokens: int) -> float:
        """Seconds if every matrix product ran at the measured peak."""
        return tokens * self.flops_per_token / (self.peak_gflops * 1e9)

    def describe(self) -> str:
        """The measured figures, one line."""
        return (
            f"model_tokens_per_s={self.tokens_per_s:.0f} "
            f"linear_mflop_per_token={self.flops_per_token / 1e6:.1f} "
            f"matmul_peak_gflops={self.peak_gflops:.0f}"
        )
