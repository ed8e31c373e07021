"""The done-marker records of pipeline.markers: their JSON round trip through the layout readers,
their defaults, and the one-line summaries the CLI prints."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from pipeline.layout import (
    generated_dir,
    labels_dir,
    ledger_dir,
    read_generation_summary,
    read_label_summary,
    read_ledger_summary,
    read_manifest,
    read_marker,
    read_snapshot_summary,
    release_dir,
    snapshot_dir,
    temporal_dir,
)
from pipeline.markers import (
    GenerationSummary,
    LabelSummary,
    LedgerSummary,
    ReleaseManifest,
    SnapshotSummary,
    TemporalSummary,
)
from pipeline.storage import write_json_atomic

OLD, NEW = "2024-01-01", "2024-06-01"


def _snapshot() -> SnapshotSummary:
    return SnapshotSummary(
        snapshot=NEW,
        source="wikisnap:/data",
        selection_digest="sel",
        text_version="t1/en_core_web_sm",
        articles=4,
        sentences=120,
        parsed_articles=3,
        reused_articles=1,
        resumed_articles=2,
        not_delivered=["Some Title"],
        seconds=12.34,
        outputs={"articles.parquet": "a" * 64},
        already_done=True,
    )


def _labels() -> LabelSummary:
    return LabelSummary(
        old=OLD,
        new=NEW,
        inputs_digest="d1",
        counts={"unchanged": 10, "changed": 2, "new": 3, "deleted": 4, "unlabeled": 1},
        pages={"labeled": 4},
        model_calls={"nli": 7},
        settings={"threshold": 0.5, "nested": {"k": [1, 2]}},
        models={"embedder": "e5", "judge": None},
        seconds=3.0,
        fact_guard_flips=1,
        already_done=True,
        per_page={"72883": {"new": 2}},
        inputs={"snapshots/2024-01-01/sentences.parquet": "b" * 64},
        outputs={"sentence_labels.parquet": "c" * 64},
    )


def _generation() -> GenerationSummary:
    return GenerationSummary(
        snapshot=NEW,
        previous=OLD,
        inputs_digest="d2",
        articles={"selected": 4},
        requests={"qa": 9},
        counts={"qa": {"total": 5}, "dialogue": {"total": 6, "dialogues": 2}},
        rejects={"unsupported": 2, "duplicate": 1},
        rejects_by_kind={"qa": {"unsupported": 2}},
        llm={"requests": 11, "errors": 0},
        prompt_hashes={"qa": "p1"},
        embedder="e5",
        seconds=1.5,
        inputs={"labels/x": "d" * 64},
        outputs={"qa.parquet": "e" * 64},
        already_done=True,
    )


def _ledger() -> LedgerSummary:
    return LedgerSummary(
        snapshot=NEW,
        previous=None,
        inputs_digest="d3",
        kept={"qa": 3, "quadruples": 1},
        added={"qa": 2},
        retired={"qa": {"edited": 1, "deleted": 2}},
        superseded=1,
        restated_quadruples_skipped=4,
        inputs={"generated/2024-06-01/qa.parquet": "f" * 64},
        outputs={"items.parquet": "0" * 64},
        already_done=True,
    )


def _temporal() -> TemporalSummary:
    return TemporalSummary(
        snapshot=NEW,
        previous=OLD,
        inputs_digest="d4",
        candidates=9,
        carried=2,
        phrased=5,
        kept={"as_of": 3, "since": 1},
        rejected={"ambiguous": 2},
        deferred=1,
        seconds=0.25,
        inputs={"ledger/2024-06-01/items.parquet": "1" * 64},
        outputs={"questions.parquet": "2" * 64},
        already_done=True,
    )


def _manifest() -> ReleaseManifest:
    return ReleaseManifest(
        release_id="wikidrift-2024-06-01-r1",
        snapshot=NEW,
        revision=1,
        previous_release=None,
        schema_version=3,
        inputs_digest="d5",
        config={"generate": {"qa_per_article": 2}},
        config_hash="h",
        models={"llm": {"name": "m", "revision": None}},
        prompt_hashes={"qa": "p1"},
        labeling_rule="growover",
        counts={"qa": {"total": 7}, "dialogue_turns": {"total": 8}, "quadruples": {"current": 9}},
        files={"qa.parquet": {"sha256": "3" * 64, "bytes": 10, "rows": 7}},
        inputs={"ledger/2024-06-01/items.parquet": "4" * 64},
        already_done=True,
    )


def test_a_release_line_names_counts_it_lacks_with_a_question_mark() -> None:
    assert _manifest().line() == (
        "release wikidrift-2024-06-01-r1: qa=7 dialogue_turns=8 quadruples=9 (already built)"
    )
    partial = _manifest()
    partial.counts = {"qa": {"total": 7}}
    assert partial.line().startswith("release wikidrift-2024-06-01-r1: qa=7 dialogue_turns=? ")


def test_snapshot_summary_round_trips_through_snapshot_json(tmp_path: Path) -> None:
    summary = _snapshot()
    write_json_atomic(snapshot_dir(tmp_path, NEW) / "snapshot.json", asdict(summary))
    assert read_snapshot_summary(tmp_path, NEW) == summary


def test_label_summary_round_trips_through_summary_json(tmp_path: Path) -> None:
    summary = _labels()
    write_json_atomic(labels_dir(tmp_path, OLD, NEW) / "summary.json", asdict(summary))
    back = read_label_summary(tmp_path, OLD, NEW)
    assert back == summary
    assert back.models["judge"] is None and back.settings["nested"] == {"k": [1, 2]}


def test_generation_summary_round_trips_through_run_json(tmp_path: Path) -> None:
    summary = _generation()
    write_json_atomic(generated_dir(tmp_path, NEW) / "run.json", asdict(summary))
    assert read_generation_summary(tmp_path, NEW) == summary


def test_ledger_summary_round_trips_through_state_json(tmp_path: Path) -> None:
    summary = _ledger()
    write_json_atomic(ledger_dir(tmp_path, NEW) / "state.json", asdict(summary))
    back = read_ledger_summary(tmp_path, NEW)
    assert back == summary and back.previous is None


def test_temporal_summary_round_trips_through_state_json(tmp_path: Path) -> None:
    summary = _temporal()
    path = temporal_dir(tmp_path, NEW) / "state.json"
    write_json_atomic(path, asdict(summary))
    assert read_marker(path, TemporalSummary) == summary


def test_release_manifest_round_trips_through_manifest_json(tmp_path: Path) -> None:
    manifest = _manifest()
    write_json_atomic(release_dir(tmp_path, NEW) / "manifest.json", asdict(manifest))
    back = read_manifest(tmp_path, NEW)
    assert back == manifest and back.previous_release is None


@pytest.mark.parametrize(
    ("cls", "required", "defaults"),
    [
        (
            SnapshotSummary,
            {"snapshot": NEW, "source": "s", "selection_digest": "d", "text_version": "t"},
            {
                "articles": 0,
                "sentences": 0,
                "parsed_articles": 0,
                "reused_articles": 0,
                "resumed_articles": 0,
                "not_delivered": [],
                "seconds": 0.0,
                "inputs": {},
                "outputs": {},
                "already_done": False,
            },
        ),
        (
            LabelSummary,
            {
                "old": OLD,
                "new": NEW,
                "inputs_digest": "d",
                "counts": {},
                "pages": {},
                "model_calls": {},
                "settings": {},
                "models": {},
            },
            {
                "seconds": 0.0,
                "fact_guard_flips": 0,
                "already_done": False,
                "per_page": {},
                "inputs": {},
                "outputs": {},
            },
        ),
        (
            GenerationSummary,
            {"snapshot": NEW, "previous": None, "inputs_digest": "d"},
            {
                "articles": {},
                "requests": {},
                "counts": {},
                "rejects": {},
                "rejects_by_kind": {},
                "llm": {},
                "prompt_hashes": {},
                "embedder": "",
                "seconds": 0.0,
                "inputs": {},
                "outputs": {},
                "already_done": False,
            },
        ),
        (
            LedgerSummary,
            {"snapshot": NEW, "previous": None, "inputs_digest": "d"},
            {
                "kept": {},
                "added": {},
                "retired": {},
                "superseded": 0,
                "restated_quadruples_skipped": 0,
                "seconds": 0.0,
                "inputs": {},
                "outputs": {},
                "already_done": False,
            },
        ),
        (
            TemporalSummary,
            {"snapshot": NEW, "previous": None, "inputs_digest": "d"},
            {
                "candidates": 0,
                "carried": 0,
                "phrased": 0,
                "kept": {},
                "rejected": {},
                "deferred": 0,
                "seconds": 0.0,
                "inputs": {},
                "outputs": {},
                "already_done": False,
            },
        ),
        (
            ReleaseManifest,
            {
                "release_id": "r",
                "snapshot": NEW,
                "revision": 0,
                "previous_release": None,
                "schema_version": 3,
                "inputs_digest": "d",
                "config": {},
                "config_hash": "h",
                "models": {},
                "prompt_hashes": {},
                "labeling_rule": "growover",
                "counts": {},
            },
            {"files": {}, "inputs": {}, "already_done": False},
        ),
    ],
    ids=["snapshot", "labels", "generation", "ledger", "temporal", "release"],
)
def test_a_marker_with_only_its_required_keys_reads_back_with_the_defaults(
    tmp_path: Path, cls: type, required: dict, defaults: dict
) -> None:
    # An older writer may have left out every key that has a default.
    path = tmp_path / "marker.json"
    write_json_atomic(path, required)
    back = read_marker(path, cls)
    assert asdict(back) == required | defaults
    # Mutable defaults come from a factory: two records never share one dict or list.
    other = cls(**required)
    shared = [k for k, v in defaults.items() if isinstance(v, dict | list)]
    assert shared
    assert all(getattr(back, k) is not getattr(other, k) for k in shared)


def test_snapshot_summary_line() -> None:
    summary = _snapshot()
    assert summary.line() == (
        "articles=4 sentences=120 reused=1 resumed=2 not_delivered=1 (already built)"
    )
    summary.already_done = False
    assert summary.line().endswith("not_delivered=1 in 12.3s")
    plain = SnapshotSummary(NEW, "s", "d", "t", articles=2, sentences=9, seconds=0.04)
    # Zero counts of reused, resumed and undelivered articles are left out of the line.
    assert plain.line() == "articles=2 sentences=9 in 0.0s"


def test_label_summary_line_lists_every_label_in_order() -> None:
    summary = _labels()
    assert summary.line() == (
        "2024-01-01 -> 2024-06-01: unchanged=10 changed=2 new=3 deleted=4 unlabeled=1"
        " (already labeled)"
    )
    summary.already_done = False
    summary.counts = {"new": 5}
    assert summary.line() == (
        "2024-01-01 -> 2024-06-01: unchanged=0 changed=0 new=5 deleted=0 unlabeled=0 in 3.0s"
    )


def test_label_summary_table_totals_unchanged_new_and_changed() -> None:
    assert _labels().table().splitlines() == [
        "| pair | Unchanged | New | Changed | Deleted | Unlabeled | Total |",
        "|---|---:|---:|---:|---:|---:|---:|",
        "| 2024-01-01 -> 2024-06-01 | 10 | 3 | 2 | 4 | 1 | 15 |",
    ]


def test_generation_summary_kept_and_line() -> None:
    summary = _generation()
    # Dialogue counts both dialogues and turns; only the turns ("total") are items.
    assert summary.kept == 11
    assert summary.line() == (
        "2024-06-01: qa=5 dialogues=2 turns=6 quadruples=0 rejects=3 llm_requests=11"
        " (already generated)"
    )
    empty = GenerationSummary(NEW, None, "d", seconds=2.25)
    assert empty.kept == 0
    assert empty.line() == (
        "2024-06-01: qa=0 dialogues=0 turns=0 quadruples=0 rejects=0 llm_requests=0 in 2.2s"
    )


def test_ledger_summary_line_sums_every_kind() -> None:
    summary = _ledger()
    assert summary.line() == (
        "ledger 2024-06-01: kept=4 added=2 retired=3 superseded=1 (already applied)"
    )
    summary.already_done = False
    assert summary.line() == "ledger 2024-06-01: kept=4 added=2 retired=3 superseded=1"


def test_temporal_summary_line() -> None:
    summary = _temporal()
    assert summary.line() == (
        "temporal 2024-06-01: candidates=9 carried=2 phrased=5 kept=4 rejected=2 deferred=1"
        " (already done)"
    )
    assert TemporalSummary(NEW, None, "d").line() == (
        "temporal 2024-06-01: candidates=0 carried=0 phrased=0 kept=0 rejected=0 deferred=0"
    )


def test_release_manifest_line() -> None:
    manifest = _manifest()
    assert manifest.line() == (
        "release wikidrift-2024-06-01-r1: qa=7 dialogue_turns=8 quadruples=9 (already built)"
    )
    manifest.already_done = False
    assert manifest.line() == "release wikidrift-2024-06-01-r1: qa=7 dialogue_turns=8 quadruples=9"


@pytest.mark.parametrize(
    ("make", "old_flag"),
    [(_snapshot, "already_built"), (_generation, "skipped")],
    ids=["snapshot", "generation"],
)
def test_a_marker_written_before_one_already_done_still_reads(
    tmp_path: Path, make: Callable[[], Any], old_flag: str
) -> None:
    # Older versions spelled the "found done" flag per stage; it is runtime state, so the
    # old key is simply not read and the record comes back as freshly written.
    record = make()
    data = asdict(record)
    data.pop("already_done")
    path = tmp_path / "marker.json"
    write_json_atomic(path, data | {old_flag: True})
    back = read_marker(path, type(record))
    assert not back.already_done
    assert asdict(back) == data | {"already_done": False}
