"""Retrievers over a release corpus: BM25 (bm25s), dense (the configured embedder) and
temporal (either, with outdated passages ranked down).

Every retriever answers ``search(queries, k)`` with, per query, up to ``k`` :class:`Hit`
objects, best first. ``temporal`` asks its base retriever for a wider pool, drops passages
that are no longer in the latest snapshot and state a fact the ledger marks superseded, and
ranks the passages of the latest snapshot before older ones (score order within each), so
an outdated paragraph only fills places no current paragraph matched.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from pipeline.config import EvaluateConfig
from pipeline.errors import WikidriftError
from pipeline.evaluate.corpus import Passage
from pipeline.models.embedder import Embedder

RETRIEVERS = ("none", "bm25", "dense", "temporal")
# Candidates the temporal retriever draws from its base: this many times k, at least 20.
TEMPORAL_POOL = EvaluateConfig().temporal_pool


@dataclass(frozen=True)
class Hit:
    """One retrieved passage and its score under the retriever that found it."""

    passage: Passage
    score: float


class Retriever(Protocol):
    """Finds the passages that best match each query."""

    name: str

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """Up to ``k`` hits per query, best first."""
        ...


class BM25Retriever:
    """Okapi BM25 (bm25s, Lucene variant) over the passage texts, English stopwords removed
    and words reduced to their Snowball stems ("received" = "receive"), as Lucene's English
    analyzer does."""

    name = "bm25"

    def __init__(self, passages: Sequence[Passage]) -> None:
        import bm25s
        import Stemmer

        # bm25s sets its own logger to DEBUG on import: its index chatter is not ours to show.
        logging.getLogger("bm25s").setLevel(logging.WARNING)
        self.passages = list(passages)
        self._stemmer = Stemmer.Stemmer("english")
        self._bm25 = bm25s.BM25()
        self._bm25.index(self._tokens([p.text for p in self.passages]), show_progress=False)

    def _tokens(self, texts: list[str]) -> object:
        import bm25s

        return bm25s.tokenize(texts, stopwords="en", stemmer=self._stemmer, show_progress=False)

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        if not queries or not self.passages:
            return [[] for _ in queries]
        n = min(k, len(self.passages))
        docs, scores = self._bm25.retrieve(self._tokens(list(queries)), k=n, show_progress=False)
        return [
            [
                Hit(self.passages[int(d)], float(s))
                for d, s in zip(row_d, row_s, strict=True)
                if s > 0
            ]
            for row_d, row_s in zip(docs, scores, strict=True)
        ]


class DenseRetriever:
    """Cosine similarity of embedder vectors (unit rows, so a dot product). Models trained
    with instructions (e5) get their query and passage prefixes."""

    name = "dense"

    def __init__(
        self,
        passages: Sequence[Passage],
        embedder: Embedder,
        *,
        query_prefix: str = "",
        passage_prefix: str = "",
    ) -> None:
        self.passages = list(passages)
        self.embedder = embedder
        self.query_prefix = query_prefix
        texts = [passage_prefix + p.text for p in self.passages]
        self._matrix = np.asarray(embedder.embed(texts), np.float32)

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        if not queries or not self.passages:
            return [[] for _ in queries]
        vectors = self.embedder.embed([self.query_prefix + q for q in queries])
        scores = np.asarray(vectors, np.float32) @ self._matrix.T
        n = min(k, len(self.passages))
        top = np.argpartition(-scores, n - 1, axis=1)[:, :n]
        results = []
        for row, candidates in zip(scores, top, strict=True):
            best = candidates[np.argsort(-row[candidates], kind="stable")]
            results.append([Hit(self.passages[int(i)], float(row[i])) for i in best])
        return results


class TemporalRetriever:
    """A base retriever whose hits are filtered and re-ranked by time (see the module doc)."""

    name = "temporal"

    def __init__(
        self, base: Retriever, superseded_evidence: Iterable[str] = (), pool: int = TEMPORAL_POOL
    ) -> None:
        self.base = base
        self.pool = pool
        self.superseded = [" ".join(t.split()) for t in superseded_evidence if t and t.strip()]

    def _states_superseded(self, passage: Passage) -> bool:
        text = " ".join(passage.text.split())
        return any(s in text for s in self.superseded)

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        pools = self.base.search(queries, max(k * self.pool, 20))
        results = []
        for pool in pools:
            kept = [h for h in pool if h.passage.current or not self._states_superseded(h.passage)]
            # sorted() is stable: score order (the base's) is kept within current and outdated.
            results.append(sorted(kept, key=lambda h: not h.passage.current)[:k])
        return results


def make_retriever(
    name: str,
    passages: Sequence[Passage],
    *,
    embedder: Embedder | None = None,
    superseded_evidence: Iterable[str] = (),
    settings: EvaluateConfig | None = None,
) -> Retriever | None:
    """The retriever called ``name`` over ``passages`` (None for ``none``: closed book);
    ``settings`` (the ``[evaluate]`` config, default its defaults) gives a dense embedder its
    query and passage prefixes and the temporal re-ranking its pool."""
    if name == "none":
        return None
    if name == "bm25":
        return BM25Retriever(passages)
    if name not in ("dense", "temporal"):
        raise WikidriftError(f"retriever {name!r}: allowed: {', '.join(RETRIEVERS)}")
    if embedder is None:
        raise WikidriftError(f"the {name} retriever needs an embedder")
    settings = settings or EvaluateConfig()
    dense = DenseRetriever(
        passages,
        embedder,
        query_prefix=settings.query_prefix,
        passage_prefix=settings.passage_prefix,
    )
    if name == "dense":
        return dense
    return TemporalRetriever(dense, superseded_evidence, pool=settings.temporal_pool)
