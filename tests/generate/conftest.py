"""A small real workdir for the generation tests, built once per session.

Snapshots 2024-01-01 and 2024-06-01 of a few wikisnap articles, built and labeled with the
real pipeline (spaCy sentences, the offline MiniLM embedder). Andrej Karpathy is left out of
the first snapshot so the second one has an article to generate from scratch.
The scripted LLM that answers the prompts lives in ``tests/scripted_llm.py``.
"""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import pytest

from pipeline.config import load_config
from pipeline.generate.validate import REASONS, Verdict
from pipeline.labeling.stage import label_snapshots, make_labeler
from pipeline.models.embedder import CachedEmbedder, Embedder, load_embedder
from pipeline.models.vector_cache import VectorCache
from pipeline.snapshot import build_snapshot
from pipeline.sources import ArticleSelection
from pipeline.sources.local import RevisionsDirSource
from pipeline.text import SentenceSplitter

OLD, NEW = "2024-01-01", "2024-06-01"
KARPATHY = 58107648  # only in the new snapshot
# Altman, Krishna, RX 7000, iPhone 15, Semaglutide, Lisa Su (net worth updated), Tesla Model Y.
UPDATED_IDS = [22476815, 63017060, 72175749, 74806347, 71928301, 44063188, 49033638]
ALL_IDS = [*UPDATED_IDS, KARPATHY]


@pytest.fixture(scope="session")
def gen_snapshots_dir(wikisnap_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Snapshots OLD (without Karpathy) and NEW of the test articles (not labeled yet)."""
    workdir = tmp_path_factory.mktemp("generate-workdir")
    source = RevisionsDirSource(wikisnap_dir)
    splitter = SentenceSplitter()
    build_snapshot(
        source,
        ArticleSelection(page_ids=tuple(UPDATED_IDS)),
        date.fromisoformat(OLD),
        workdir,
        splitter=splitter,
        source_description="wikisnap",
    )
    build_snapshot(
        source,
        ArticleSelection(page_ids=tuple(ALL_IDS)),
        date.fromisoformat(NEW),
        workdir,
        splitter=splitter,
        source_description="wikisnap",
    )
    return workdir


@pytest.fixture(scope="session")
def gen_source_workdir(gen_snapshots_dir: Path) -> Path:
    """The snapshots, labeled OLD -> NEW with the offline profile (real MiniLM embedder)."""
    cfg = load_config(profile="offline")
    label_snapshots(gen_snapshots_dir, OLD, NEW, make_labeler(cfg, gen_snapshots_dir))
    return gen_snapshots_dir


@pytest.fixture
def gen_workdir(gen_source_workdir: Path, tmp_path: Path) -> Path:
    """A private copy of the built workdir (snapshots and labels, no generated output)."""
    target = tmp_path / "workdir"
    shutil.copytree(gen_source_workdir, target, ignore=shutil.ignore_patterns("generated"))
    return target


@pytest.fixture(scope="session")
def minilm(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    """The real offline embedder (loaded once) behind a session cache: a text is embedded
    once for all tests, and its vector does not depend on the company it is embedded in
    (tests/models/test_batching.py), so cached vectors are the model's."""
    cache = VectorCache(tmp_path_factory.mktemp("minilm") / "embeddings.sqlite")
    return CachedEmbedder(load_embedder("packaged:all-MiniLM-L6-v2"), cache)


def assert_rejected_for(verdict: Verdict, reason: str) -> None:
    """The verdict rejects its item for ``reason`` (its first failed check), names it in its
    detail, and the reason is a known reject code."""
    assert not verdict.keep
    assert verdict.reason == reason
    assert reason in verdict.detail
    assert reason in REASONS
