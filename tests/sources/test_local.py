"""The revisions-dir source over the real wikisnap folder."""

from __future__ import annotations

import json
import shutil
from datetime import date
from pathlib import Path

import pytest

from pipeline.errors import SourceError
from pipeline.sources import ArticleSelection
from pipeline.sources.local import RevisionsDirSource
from tests.conftest import WIKISNAP_DATES, load_wikisnap_revision


def test_every_article_at_every_date_matches_the_files(
    wikisnap_dir: Path, wikisnap_manifest: dict
) -> None:
    source = RevisionsDirSource(wikisnap_dir)
    for d in WIKISNAP_DATES:
        revs = list(source.iter_revisions(ArticleSelection(), date.fromisoformat(d)))
        assert [r.page_id for r in revs] == [a["page_id"] for a in wikisnap_manifest["articles"]]
        for rev, art in zip(revs, wikisnap_manifest["articles"], strict=True):
            assert rev.revision_id == art["snapshots"][d]["revision_id"]
            assert rev.title == art["snapshots"][d]["title"]
    sony = load_wikisnap_revision(1071662, "2024-06-01")
    rev = next(source.iter_revisions(ArticleSelection(page_ids=(1071662,)), date(2024, 6, 1)))
    assert rev.wikitext == sony["content"]
    assert rev.revision_timestamp == sony["revision_timestamp"]


def test_date_between_files_takes_the_latest_at_or_before(wikisnap_dir: Path) -> None:
    source = RevisionsDirSource(wikisnap_dir)
    sel = ArticleSelection(titles=("Sam Altman",))
    mid = next(source.iter_revisions(sel, date(2024, 3, 15)))
    assert mid.revision_id == load_wikisnap_revision(22476815, "2024-01-01")["revision_id"]
    assert list(source.iter_revisions(sel, date(2022, 12, 31))) == []
    assert source.skipped_not_yet_created == []


def test_selection_by_title_normalizes_and_reports_unmatched(wikisnap_dir: Path) -> None:
    source = RevisionsDirSource(wikisnap_dir)
    sel = ArticleSelection(titles=("sam_Altman", "Dark energy", "No such article"))
    revs = list(source.iter_revisions(sel, date(2025, 1, 1)))
    assert sorted(r.title for r in revs) == ["Dark energy", "Sam Altman"]
    assert source.unmatched == ["No such article"]


def test_bad_folder_and_corrupt_file_fail_clearly(tmp_path: Path, wikisnap_dir: Path) -> None:
    with pytest.raises(SourceError, match="not a revisions folder"):
        RevisionsDirSource(tmp_path)
    page = tmp_path / "revisions" / "1317"
    page.mkdir(parents=True)
    shutil.copy(wikisnap_dir / "revisions" / "1317" / "2023-01-01.json", page / "2023-01-01.json")
    (page / "2023-06-01.json").write_text('{"title": "Antimatter", "page_id": 1317')
    source = RevisionsDirSource(tmp_path)
    assert len(list(source.iter_revisions(ArticleSelection(), date(2023, 2, 1)))) == 1
    with pytest.raises(SourceError, match=r"2023-06-01\.json: unreadable"):
        list(source.iter_revisions(ArticleSelection(), date(2023, 7, 1)))
    (page / "2023-06-01.json").write_text(
        json.dumps(
            {
                "title": "X",
                "page_id": 5,
                "revision_id": 1,
                "revision_timestamp": "2023-05-01T00:00:00Z",
                "content": "",
            }
        )
    )
    with pytest.raises(SourceError, match="does not match its folder"):
        list(source.iter_revisions(ArticleSelection(), date(2023, 7, 1)))
