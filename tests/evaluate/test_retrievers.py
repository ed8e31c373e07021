"""The retrieval corpus and the retrievers, on real Wikipedia articles at three dates."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config import EvaluateConfig
from pipeline.evaluate.corpus import build_corpus
from pipeline.evaluate.retrievers import (
    BM25Retriever,
    DenseRetriever,
    TemporalRetriever,
    make_retriever,
)
from pipeline.layout import read_snapshot_table
from tests.conftest import STAGE_DATES

LAST = STAGE_DATES[-1]


def _paragraph_texts(workdir: Path, date: str) -> set[str]:
    rows = read_snapshot_table(workdir, date, "sentences").to_pylist()
    paragraphs: dict[tuple[int, int], list[tuple[int, str]]] = {}
    for r in rows:
        paragraphs.setdefault((r["page_id"], r["para_idx"]), []).append((r["sent_idx"], r["text"]))
    return {" ".join(t for _, t in sorted(v)) for v in paragraphs.values()}


@pytest.fixture(scope="module")
def corpus(stage_workdir: Path) -> list:
    return build_corpus(stage_workdir, LAST)


def test_corpus_holds_every_snapshot_once_per_text(stage_workdir: Path, corpus: list) -> None:
    texts = [p.text for p in corpus]
    assert len(texts) == len(set(texts))  # identical paragraphs are stored once
    for date in STAGE_DATES:
        held = {p.text for p in corpus if date in p.snapshots}
        assert held == _paragraph_texts(stage_workdir, date)
    assert {p.text for p in corpus if p.current} == _paragraph_texts(stage_workdir, LAST)
    # real edits: some paragraphs span all three dates, some were replaced later
    assert any(p.snapshots == STAGE_DATES for p in corpus)
    assert any(not p.current for p in corpus)


def test_corpus_cut_at_an_earlier_date(stage_workdir: Path) -> None:
    early = build_corpus(stage_workdir, STAGE_DATES[1])
    assert all(max(p.snapshots) <= STAGE_DATES[1] for p in early)
    assert {p.text for p in early if p.current} == _paragraph_texts(stage_workdir, STAGE_DATES[1])


def _probes(corpus: list) -> list[tuple[str, str]]:
    """(query, passage id): a long sentence of each current passage that only it holds."""
    holders: dict[str, set[str]] = {}
    for p in corpus:
        for s in p.sentences:
            holders.setdefault(s, set()).add(p.passage_id)
    probes = []
    for p in corpus:
        if not p.current:
            continue
        unique = [s for s in p.sentences if len(s) > 80 and holders[s] == {p.passage_id}]
        if unique:
            probes.append((unique[0], p.passage_id))
    return probes


def test_bm25_finds_the_paragraph_of_a_sentence(corpus: list) -> None:
    probes = _probes(corpus)
    assert len(probes) >= 20
    hits = BM25Retriever(corpus).search([q for q, _ in probes], 3)
    top1 = sum(h[0].passage.passage_id == pid for h, (_, pid) in zip(hits, probes, strict=True))
    assert top1 / len(probes) >= 0.9
    assert all(len(h) <= 3 and h == sorted(h, key=lambda x: -x.score) for h in hits)
    assert BM25Retriever(corpus).search(["zzzzqx"], 3) == [[]]  # no shared term, no hit


def test_dense_finds_the_paragraph_of_a_sentence(corpus: list, cached_offline_embedder) -> None:
    probes = _probes(corpus)
    hits = DenseRetriever(corpus, cached_offline_embedder).search([q for q, _ in probes], 3)
    found = sum(
        pid in {x.passage.passage_id for x in h} for h, (_, pid) in zip(hits, probes, strict=True)
    )
    assert found / len(probes) >= 0.9
    assert all(len(h) == 3 for h in hits)


def test_temporal_ranks_outdated_passages_down_and_drops_superseded_facts(
    corpus: list, cached_offline_embedder
) -> None:
    current_sentences = {s for p in corpus if p.current for s in p.sentences}
    outdated = [
        s for p in corpus if not p.current for s in p.sentences if s not in current_sentences
    ]
    dense = DenseRetriever(corpus, cached_offline_embedder)
    # a sentence edited away later, whose best dense match is an outdated paragraph
    sentence, top = next(
        (s, h[0])
        for s, h in zip(outdated, dense.search(outdated, 1), strict=True)
        if not h[0].passage.current
    )
    ranked = TemporalRetriever(dense).search([sentence], len(corpus))[0]
    flags = [h.passage.current for h in ranked]
    assert flags == sorted(flags, reverse=True) and flags[0]  # every current one first
    assert top.passage.passage_id in {h.passage.passage_id for h in ranked if not h.passage.current}
    assert len(ranked) == len(corpus)
    filtered = TemporalRetriever(dense, superseded_evidence=[sentence]).search([sentence], 5)[0]
    assert filtered and all(h.passage.current or sentence not in h.passage.text for h in filtered)
    assert top.passage.passage_id not in {h.passage.passage_id for h in filtered}


def test_make_retriever(corpus: list, cached_offline_embedder) -> None:
    from pipeline.errors import WikidriftError

    assert make_retriever("none", corpus) is None
    assert make_retriever("temporal", corpus, embedder=cached_offline_embedder).name == "temporal"
    with pytest.raises(WikidriftError, match="needs an embedder"):
        make_retriever("dense", corpus)
    with pytest.raises(WikidriftError, match="allowed"):
        make_retriever("tfidf", corpus)


class RecordingEmbedder:
    """The offline embedder, remembering every text it was given."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.texts_embedded = 0
        self.seen: list[str] = []

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts):
        self.seen += list(texts)
        return self.inner.embed(texts)


def test_dense_prefixes_queries_and_passages_and_temporal_pool(
    corpus: list, cached_offline_embedder
) -> None:
    recorder = RecordingEmbedder(cached_offline_embedder)
    retriever = make_retriever(
        "temporal",
        corpus[:30],
        embedder=recorder,
        settings=EvaluateConfig(
            query_prefix="query: ", passage_prefix="passage: ", temporal_pool=7
        ),
    )
    assert len(recorder.seen) == 30 and all(t.startswith("passage: ") for t in recorder.seen)
    hits = retriever.search(["Who founded it?"], 2)[0]
    assert recorder.seen[-1] == "query: Who founded it?"
    assert retriever.pool == 7 and len(hits) == 2


def test_bm25_matches_inflected_words() -> None:
    from pipeline.evaluate.corpus import Passage, passage_id

    texts = [
        "Karpathy received a PhD from Stanford University in 2015.",
        "Andrej Karpathy was born in Bratislava and moved to Toronto with his family.",
        "Andrej Karpathy joined OpenAI as a founding member of the research group.",
    ]
    passages = [
        Passage(passage_id(t), 1, "Andrej Karpathy", (t,), ("2025-01-01",), True) for t in texts
    ]
    # "receive" only meets "received" through their common stem
    hits = BM25Retriever(passages).search(["When did Andrej Karpathy receive it?"], 1)
    assert hits[0][0].passage.text == texts[0]
