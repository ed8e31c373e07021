"""The snapshot stage on real wikisnap data: layout, schema, reuse, idempotence, resume."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipeline.layout import (
    is_complete,
    list_snapshots,
    read_snapshot_summary,
    read_snapshot_table,
    snapshot_dir,
)
from pipeline.records import RawRevision
from pipeline.schemas import SNAPSHOT_SCHEMA_VERSION
from pipeline.snapshot import build_snapshot
from pipeline.sources import ArticleSelection
from pipeline.sources.local import RevisionsDirSource
from pipeline.storage import schema_version_of
from pipeline.text import sentence_hash
from tests.conftest import STAGE_PAGE_IDS, WIKISNAP, load_wikisnap_revision

SELECTION = ArticleSelection(page_ids=STAGE_PAGE_IDS)


def test_layout_columns_and_contents(stage_workdir: Path) -> None:
    out = snapshot_dir(stage_workdir, "2024-06-01")
    assert sorted(p.name for p in out.iterdir()) == [
        "articles.parquet",
        "revisions.parquet",
        "sentences.parquet",
        "snapshot.json",
    ]
    for name in ("articles", "sentences", "revisions"):
        assert schema_version_of(out / f"{name}.parquet") == SNAPSHOT_SCHEMA_VERSION
    arts = read_snapshot_table(stage_workdir, "2024-06-01", "articles")
    for col in ("page_id", "title", "revision_id", "revision_timestamp"):
        assert col in arts.column_names
    assert sorted(arts["page_id"].to_pylist()) == sorted(STAGE_PAGE_IDS)
    altman = load_wikisnap_revision(22476815, "2024-06-01")
    row = next(r for r in arts.to_pylist() if r["page_id"] == 22476815)
    assert row["revision_id"] == altman["revision_id"]
    assert row["revision_timestamp"] == altman["revision_timestamp"]
    assert row["snapshot"] == "2024-06-01"
    sents = read_snapshot_table(stage_workdir, "2024-06-01", "sentences", page_ids=[22476815])
    for col in ("page_id", "sent_idx", "para_idx", "section", "text", "text_hash"):
        assert col in sents.column_names
    rows = sents.to_pylist()
    assert [r["sent_idx"] for r in rows] == list(range(len(rows)))
    assert row["n_sentences"] == len(rows)
    assert all(r["text_hash"] == sentence_hash(r["text"]) for r in rows)
    assert rows[0]["section"] == ""
    assert any(r["section"] == "Early life and education" for r in rows)
    para = [r["para_idx"] for r in rows]
    assert para == sorted(para)
    revs = read_snapshot_table(stage_workdir, "2024-06-01", "revisions", page_ids=[22476815])
    assert revs["wikitext"][0].as_py() == altman["content"]
    summary = read_snapshot_summary(stage_workdir, "2024-06-01")
    assert summary.articles == len(STAGE_PAGE_IDS)
    assert summary.sentences == pq.read_metadata(out / "sentences.parquet").num_rows
    assert list_snapshots(stage_workdir) == ["2024-01-01", "2024-06-01", "2025-01-01"]


def test_rebuild_is_skipped_and_unchanged_wikitext_is_not_reparsed(
    stage_workdir: Path, tmp_path: Path, splitter
) -> None:
    source = RevisionsDirSource(WIKISNAP)
    kw = {"splitter": splitter, "source_description": "t"}
    first = build_snapshot(source, SELECTION, date(2024, 1, 1), tmp_path, **kw)
    assert first.parsed_articles == 4 and first.reused_articles == 0
    again = build_snapshot(source, SELECTION, date(2024, 1, 1), tmp_path, **kw)
    assert again.already_done and again.line().endswith("(already built)")
    # 2024-03-01 holds the same revisions as 2024-01-01 (no newer file): nothing is parsed.
    later = build_snapshot(source, SELECTION, date(2024, 3, 1), tmp_path, **kw)
    assert later.reused_articles == 4 and later.parsed_articles == 0
    a = read_snapshot_table(tmp_path, "2024-01-01", "sentences").to_pylist()
    b = read_snapshot_table(tmp_path, "2024-03-01", "sentences").to_pylist()
    assert a == b
    forced = build_snapshot(source, SELECTION, date(2024, 1, 1), tmp_path, force=True, **kw)
    assert not forced.already_done and forced.sentences == first.sentences


class _CrashingSource:
    """Yields a few real revisions, then dies like a network failure would."""

    def __init__(self, inner: RevisionsDirSource, crash_after: int) -> None:
        self.inner, self.crash_after, self.asked, self.yielded = inner, crash_after, [], 0

    def iter_revisions(self, selection: ArticleSelection, d: date) -> Iterator[RawRevision]:
        self.asked.append(selection)
        for rev in self.inner.iter_revisions(selection, d):
            if self.yielded == self.crash_after:
                raise ConnectionError("network went away")
            self.yielded += 1
            yield rev

    def not_delivered(self) -> list[str]:
        return self.inner.not_delivered()


def test_crash_mid_build_resumes_without_refetching(tmp_path: Path, splitter) -> None:
    inner = RevisionsDirSource(WIKISNAP)
    crashing = _CrashingSource(inner, crash_after=3)
    kw = {"splitter": splitter, "source_description": "t", "shard_size": 1}
    with pytest.raises(ConnectionError):
        build_snapshot(crashing, SELECTION, date(2024, 6, 1), tmp_path, **kw)
    assert not is_complete(tmp_path, "2024-06-01")
    assert not (snapshot_dir(tmp_path, "2024-06-01") / "sentences.parquet").exists()
    resumed = build_snapshot(inner, SELECTION, date(2024, 6, 1), tmp_path, **kw)
    assert resumed.resumed_articles == 3
    assert resumed.parsed_articles == 4  # 3 parsed before the crash, 1 after
    clean = tmp_path / "clean"
    build_snapshot(inner, SELECTION, date(2024, 6, 1), clean, **kw)
    for name in ("articles", "sentences"):
        got = read_snapshot_table(tmp_path, "2024-06-01", name).to_pylist()
        assert got == read_snapshot_table(clean, "2024-06-01", name).to_pylist()
    assert not (snapshot_dir(tmp_path, "2024-06-01") / "_work").exists()
    stored = json.loads((snapshot_dir(tmp_path, "2024-06-01") / "snapshot.json").read_text())
    assert stored["articles"] == 4


def test_resume_asks_the_source_only_for_what_is_missing(tmp_path: Path, splitter) -> None:
    inner = RevisionsDirSource(WIKISNAP)
    titles = ArticleSelection(titles=("Sam Altman", "Denver Nuggets", "Sony Music"))
    crashing = _CrashingSource(inner, crash_after=2)
    kw = {"splitter": splitter, "source_description": "t", "shard_size": 1}
    with pytest.raises(ConnectionError):
        build_snapshot(crashing, titles, date(2024, 6, 1), tmp_path, **kw)
    recorder = _CrashingSource(inner, crash_after=99)
    build_snapshot(recorder, titles, date(2024, 6, 1), tmp_path, **kw)
    # Shards follow the selection order: the third title is the one left to fetch.
    assert recorder.asked == [ArticleSelection(titles=("Sony Music",))]


def test_unparsable_article_is_named(tmp_path: Path, splitter, monkeypatch) -> None:
    import pipeline.snapshot as snap
    from pipeline.errors import WikidriftError

    def broken(wikitext: str) -> list:
        raise ValueError("boom")

    monkeypatch.setattr(snap, "wikitext_to_paragraphs", broken)
    inner = RevisionsDirSource(WIKISNAP)
    with pytest.raises(WikidriftError, match=r"article 'Sam Altman' \(page 22476815, revision"):
        build_snapshot(
            inner,
            ArticleSelection(page_ids=(22476815,)),
            date(2024, 6, 1),
            tmp_path,
            splitter=splitter,
            source_description="t",
        )


class _CountingSplitter:
    """Splits on ". " and counts the paragraphs it was asked to split."""

    def __init__(self) -> None:
        self.calls = 0

    def split(self, texts: list[str]) -> Iterator[list[str]]:
        for text in texts:
            self.calls += 1
            yield [s for s in text.split(". ") if s]


def test_paragraph_splits_are_cached_across_snapshots(tmp_path: Path) -> None:
    from pipeline.snapshot import SplitCache

    splitter = _CountingSplitter()
    first = SplitCache(tmp_path, "v1").split(["A b. C d.", "E f."], splitter)  # type: ignore[arg-type]
    assert first == [["A b", "C d."], ["E f."]] and splitter.calls == 2
    # A later month (a new cache object on the same workdir): only the edited paragraph is split.
    cache = SplitCache(tmp_path, "v1")
    again = cache.split(["A b. C d.", "E f. G h."], splitter)  # type: ignore[arg-type]
    assert again == [["A b", "C d."], ["E f", "G h."]]
    assert splitter.calls == 3 and (cache.hits, cache.misses) == (1, 1)
    # Another text pipeline version does not reuse the splits.
    SplitCache(tmp_path, "v2").split(["A b. C d."], splitter)  # type: ignore[arg-type]
    assert splitter.calls == 4
