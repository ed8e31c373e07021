"""The labeling stage on real wikisnap revisions with the offline models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.config import load_config
from pipeline.labeling.stage import label_snapshots, make_labeler
from pipeline.layout import labels_dir, read_labels, read_snapshot_table
from pipeline.schemas import LABELS_SCHEMA_VERSION
from pipeline.storage import schema_version_of
from pipeline.text import normalize_sentence
from tests.conftest import build_wikisnap_snapshots, copy_workdir

OLD, NEW = "2024-01-01", "2024-06-01"


@pytest.fixture(scope="module")
def labeled(stage_workdir: Path, tmp_path_factory: pytest.TempPathFactory, offline_embedder):
    workdir = copy_workdir(stage_workdir, tmp_path_factory.mktemp("labeling") / "w")
    labeler = make_labeler(load_config(profile="offline"), workdir, embedder=offline_embedder)
    summary = label_snapshots(workdir, OLD, NEW, labeler)
    rows = read_labels(workdir, OLD, NEW).to_pylist()
    return workdir, summary, rows, labeler


def _sentences(workdir: Path, date: str, page_id: int) -> list[str]:
    table = read_snapshot_table(workdir, date, "sentences", page_ids=[page_id])
    return table["text"].to_pylist()


def test_outputs_and_one_row_per_new_sentence(labeled) -> None:
    workdir, summary, rows, _ = labeled
    out = labels_dir(workdir, OLD, NEW)
    assert schema_version_of(out / "sentence_labels.parquet") == LABELS_SCHEMA_VERSION
    stored = json.loads((out / "summary.json").read_text())
    assert stored["counts"] == summary.counts
    n_new = read_snapshot_table(workdir, NEW, "sentences").num_rows
    assert sum(1 for r in rows if r["new_idx"] is not None) == n_new
    assert summary.counts["deleted"] == sum(1 for r in rows if r["label"] == "deleted")
    assert set(summary.counts) == {"unchanged", "changed", "new", "deleted", "unlabeled"}
    assert all(summary.counts[k] > 0 for k in ("unchanged", "changed", "new", "deleted"))
    assert "| Unchanged | New | Changed | Deleted |" in summary.table()
    for r in rows:
        assert r["rule"] and r["decided_by"]
        if r["label"] == "changed":
            assert r["old_idx"] and r["old_text"] and r["verified"] is False


def test_verbatim_sentences_are_unchanged(labeled) -> None:
    workdir, _, rows, _ = labeled
    by_page: dict[int, set[str]] = {}
    for pid in {r["page_id"] for r in rows}:
        by_page[pid] = {normalize_sentence(t) for t in _sentences(workdir, OLD, pid)}
    verbatim = [
        r
        for r in rows
        if r["new_idx"] is not None and normalize_sentence(r["text"]) in by_page[r["page_id"]]
    ]
    assert len(verbatim) > 500
    assert {r["label"] for r in verbatim} == {"unchanged"}


def test_a_section_only_in_the_new_revision_is_new(labeled) -> None:
    workdir, _, rows, _ = labeled
    nuggets = read_snapshot_table(workdir, NEW, "sentences", page_ids=[72883]).to_pylist()
    section = [s["sent_idx"] for s in nuggets if s["section"] == "2024: Dethroned"]
    assert len(section) >= 3
    labels = {r["new_idx"]: r["label"] for r in rows if r["page_id"] == 72883}
    assert [labels[i] for i in section] == ["new"] * len(section)


def test_a_sentence_split_in_two_is_unchanged_through_span_matching(labeled) -> None:
    workdir, _, rows, _ = labeled
    old = _sentences(workdir, OLD, 22476815)
    new = _sentences(workdir, NEW, 22476815)
    whole = next(i for i, t in enumerate(old) if t.startswith("He dated Loopt co-founder"))
    assert ";" in old[whole]
    parts = [i for i, t in enumerate(new) if "Nick Sivo" in t or t.startswith("They broke up")]
    assert len(parts) == 2
    got = [
        (r["label"], r["rule"], r["old_idx"])
        for r in rows
        if r["page_id"] == 22476815 and r["new_idx"] in parts
    ]
    assert got == [("unchanged", "span", [whole])] * 2


def test_a_deleted_paragraph_is_deleted(labeled) -> None:
    workdir, _, rows, _ = labeled
    # Tesla Model Y lost the paragraph quoting Herbert Diess between 2024-01 and 2024-06.
    old = read_snapshot_table(workdir, OLD, "sentences", page_ids=[49033638]).to_pylist()
    start = next(s for s in old if "Herbert Diess, wrote about the Model Y" in s["text"])
    para = [s for s in old if s["para_idx"] == start["para_idx"]]
    assert len(para) >= 4
    new_text = " ".join(_sentences(workdir, NEW, 49033638))
    assert "Diess" not in new_text and "ICE platforms" not in new_text
    deleted = {
        r["old_idx"][0] for r in rows if r["page_id"] == 49033638 and r["label"] == "deleted"
    }
    assert {s["sent_idx"] for s in para} <= deleted


def test_identical_revisions_make_zero_model_calls(
    tmp_path: Path, splitter, offline_embedder
) -> None:
    # 2024-03-01 holds the same revisions as 2024-01-01 in wikisnap.
    build_wikisnap_snapshots(tmp_path, ["2024-01-01", "2024-03-01"], (22476815, 72883), splitter)
    before = offline_embedder.texts_embedded
    labeler = make_labeler(load_config(profile="offline"), tmp_path, embedder=offline_embedder)
    summary = label_snapshots(tmp_path, "2024-01-01", "2024-03-01", labeler)
    assert offline_embedder.texts_embedded == before
    assert summary.model_calls["texts_embedded"] == 0
    assert summary.pages["identical"] == 2
    assert (
        summary.counts["unchanged"]
        == read_snapshot_table(tmp_path, "2024-03-01", "sentences").num_rows
    )
    assert summary.counts["deleted"] == summary.counts["new"] == 0


def test_rerun_is_skipped_and_embeddings_come_from_the_cache(labeled, offline_embedder) -> None:
    workdir, first, _, _ = labeled
    labeler = make_labeler(load_config(profile="offline"), workdir, embedder=offline_embedder)
    again = label_snapshots(workdir, OLD, NEW, labeler)
    assert again.already_done and again.counts == first.counts
    before = offline_embedder.texts_embedded
    forced = label_snapshots(workdir, OLD, NEW, labeler, force=True)
    assert offline_embedder.texts_embedded == before  # every vector was cached on disk
    assert forced.counts == first.counts


def test_naive_mode_agrees_on_exact_matches(labeled, offline_embedder, tmp_path: Path) -> None:
    workdir, _, fast_rows, _ = labeled
    naive_dir = copy_workdir(workdir, tmp_path / "naive")
    labeler = make_labeler(
        load_config(profile="offline"), naive_dir, embedder=offline_embedder, naive=True
    )
    before = offline_embedder.texts_embedded
    summary = label_snapshots(naive_dir, OLD, NEW, labeler)
    n_sentences = sum(read_snapshot_table(naive_dir, d, "sentences").num_rows for d in (OLD, NEW))
    # The reference embeds every sentence of both revisions.
    assert offline_embedder.texts_embedded - before >= n_sentences
    assert summary.settings["naive"] is True
    naive = {
        (r["page_id"], r["new_idx"]): r["label"]
        for r in read_labels(naive_dir, OLD, NEW).to_pylist()
        if r["new_idx"] is not None
    }
    exact = [r for r in fast_rows if r["rule"] == "exact"]
    assert exact and all(naive[(r["page_id"], r["new_idx"])] == "unchanged" for r in exact)
    fast = {(r["page_id"], r["new_idx"]): r["label"] for r in fast_rows if r["new_idx"] is not None}
    same = sum(1 for k, v in fast.items() if naive[k] == v) / len(fast)
    assert same > 0.97


def test_cli_label_prints_counts(labeled, capsys: pytest.CaptureFixture[str]) -> None:
    from wikidrift.cli import main

    workdir, summary, _, _ = labeled
    code = main(
        ["label", "--old", OLD, "--new", NEW, "--workdir", str(workdir), "--profile", "offline"]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert f"unchanged={summary.counts['unchanged']}" in out and "(already labeled)" in out
    assert main(["label", "--old", NEW, "--new", OLD, "--workdir", str(workdir)]) == 2
    assert "older to a newer" in capsys.readouterr().err
