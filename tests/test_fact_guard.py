"""The fact guard on real wikisnap revisions: similarity matches whose numbers or dates moved
are refused; formatting-only edits stay unchanged; ``faithful`` reproduces GrowOVER's rule."""

from __future__ import annotations

import shutil

import pytest

from pipeline.config import load_config
from pipeline.labeling.stage import label_snapshots, make_labeler
from pipeline.layout import read_labels
from tests.conftest import build_wikisnap_snapshots, copy_workdir

LIGO, IEA, HAAS, NUGGETS, DOJ = 81610, 285292, 42094020, 72883, 52563
DATES = ["2023-01-01", "2023-06-01", "2024-01-01", "2024-06-01"]
PAIRS = list(zip(DATES, DATES[1:], strict=False))


@pytest.fixture(scope="module")
def labels(tmp_path_factory: pytest.TempPathFactory, splitter, offline_embedder) -> dict:
    """Labels of consecutive dates, guarded and faithful, keyed by (pair, mode)."""
    built = tmp_path_factory.mktemp("snapshots")
    build_wikisnap_snapshots(built, DATES, (LIGO, IEA, HAAS, NUGGETS, DOJ), splitter)
    out = {}
    for faithful in (False, True):
        mode = "faithful" if faithful else "guarded"
        # The faithful run starts from the guarded one's workdir without its labels: the same
        # snapshots, and the sentence vectors already in its cache.
        workdir = copy_workdir(built, tmp_path_factory.mktemp(mode) / "w")
        shutil.rmtree(workdir / "labels", ignore_errors=True)
        built = workdir
        cfg = load_config(profile="offline", overrides={"align": {"faithful": faithful}})
        labeler = make_labeler(cfg, workdir, embedder=offline_embedder)
        for old, new in PAIRS:
            summary = label_snapshots(workdir, old, new, labeler)
            rows = read_labels(workdir, old, new).to_pylist()
            out[(old, new, faithful)] = (summary, rows)
    return out


def _row(labels: dict, old: str, new: str, faithful: bool, page: int, needle: str) -> dict:
    _, rows = labels[(old, new, faithful)]
    hits = [
        r for r in rows if r["page_id"] == page and r["new_idx"] is not None and needle in r["text"]
    ]
    assert len(hits) == 1, f"{needle!r}: {len(hits)} sentences"
    return hits[0]


@pytest.mark.parametrize(
    ("old", "new", "page", "needle", "what"),
    [
        ("2023-01-01", "2023-06-01", LIGO, "pushed back to 24 May 2023", "time"),
        ("2023-06-01", "2024-01-01", IEA, "13 Associated countries", "number"),
    ],
)
def test_a_moved_date_or_number_is_not_unchanged(
    labels: dict, old: str, new: str, page: int, needle: str, what: str
) -> None:
    guarded = _row(labels, old, new, False, page, needle)
    faithful = _row(labels, old, new, True, page, needle)
    # GrowOVER's rule calls the pair unchanged on similarity alone ...
    assert (faithful["label"], faithful["rule"]) == ("unchanged", "similarity")
    assert faithful["similarity"] > 0.99
    # ... the guard sends it down the changed path, keeping the old sentence as counterpart,
    # where the word alignment finds the value replaced in its role.
    assert (guarded["label"], guarded["rule"]) == ("changed", "value_replaced")
    assert guarded["reason"].startswith(what)
    assert guarded["old_idx"] == faithful["old_idx"] and guarded["old_text"]


@pytest.mark.parametrize(
    ("old", "new", "page", "needle"),
    [
        ("2023-06-01", "2024-01-01", HAAS, "Nico Hülkenberg and team apparel"),  # accent
        ("2024-01-01", "2024-06-01", HAAS, "On March 5, the team announced"),  # date format
        ("2023-01-01", "2023-06-01", NUGGETS, "earned the eighth seed again"),  # 8th -> eighth
        ("2023-01-01", "2023-06-01", DOJ, "from the Department of the Interior"),  # wording
    ],
)
def test_formatting_edits_stay_unchanged(
    labels: dict, old: str, new: str, page: int, needle: str
) -> None:
    row = _row(labels, old, new, False, page, needle)
    assert (row["label"], row["rule"]) == ("unchanged", "similarity")
    assert row["old_text"] != row["text"]  # really edited, yet the same facts


def test_flips_are_counted_and_faithful_flips_none(labels: dict) -> None:
    for old, new in PAIRS:
        guarded, _ = labels[(old, new, False)]
        faithful, _ = labels[(old, new, True)]
        assert faithful.fact_guard_flips == 0
        assert faithful.settings["faithful"] is True and guarded.settings["faithful"] is False
    assert sum(labels[(o, n, False)][0].fact_guard_flips for o, n in PAIRS) > 0
