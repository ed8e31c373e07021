"""The leaderboard (one line per run, a re-run replaces its line), the tables and the plot."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.evaluate import report
from pipeline.evaluate.harness import EvalRun


def _record(release: str, retriever: str, f1: float) -> dict:
    qa = {t: {"n": 2, "f1": f1, "em": 0.0} for t in ("unchanged", "new", "changed", "all")}
    qa["outdated_rate"] = 50.0
    return {
        "release": release,
        "release_id": f"wikidrift-{release}",
        "model": "openai:m",
        "retriever": retriever,
        "k": 3,
        "kinds": ["qa"],
        "limit": None,
        "metrics": {"qa": qa},
        "skipped": {},
        "model_calls": 2,
        "cache_hits": 0,
        "failed": 0,
        "retrieval_ms_per_query": 0.1234,
        "seconds": 1.0,
    }


def test_leaderboard_replaces_a_rerun_and_plots_across_releases(tmp_path: Path) -> None:
    report.update_leaderboard(tmp_path, _record("2024-06-01", "bm25", 40.0))
    assert (
        report.write_release_plot(
            tmp_path, [_record("2024-06-01", "bm25", 40.0)], "openai:m", "bm25"
        )
        is None
    )
    report.update_leaderboard(tmp_path, _record("2024-06-01", "bm25", 45.0))  # same run again
    runs = report.update_leaderboard(tmp_path, _record("2025-01-01", "bm25", 50.0))
    lines = (tmp_path / "evaluations" / "leaderboard.jsonl").read_text().splitlines()
    assert [json.loads(x)["release"] for x in lines] == ["2024-06-01", "2025-01-01"]
    assert json.loads(lines[0])["metrics"]["qa"]["all"]["f1"] == 45.0
    md = (tmp_path / "evaluations" / "leaderboard.md").read_text()
    assert "| 2024-06-01 | openai:m | bm25 (k=3) | all | 45.0 | 45.0 | 45.0 | 45.0 | – |" in md
    plot = report.write_release_plot(tmp_path, runs, "openai:m", "bm25")
    assert plot == tmp_path / "evaluations" / "plots" / "openai-m__bm25.png"
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_results_markdown_and_default_folder(tmp_path: Path) -> None:
    text = report.results_markdown(_record("2025-01-01", "none", 10.0))
    assert "# Evaluation of release wikidrift-2025-01-01" in text
    assert "| changed | 2 | 0.0 | 10.0 |" in text and "50.0% of" not in text
    assert "retrieval: 0.12 ms/query" in text
    out = report.default_out(tmp_path, "2025-01-01", "llamacpp:Qwen2.5 1.5B", "bm25")
    assert out == tmp_path / "evaluations" / "2025-01-01" / "llamacpp-Qwen2.5-1.5B__bm25"


def test_a_filtered_run_has_its_own_line_folder_and_label(tmp_path: Path) -> None:
    everything = _record("2025-01-01", "bm25", 40.0)
    newer = _record("2025-01-01", "bm25", 60.0) | {
        "filter": {"created_after": "2024-06-01", "types": ["new", "changed"]}
    }
    report.update_leaderboard(tmp_path, everything)
    runs = report.update_leaderboard(tmp_path, newer)
    assert len(runs) == 2  # the filter is part of a run's key: neither replaces the other
    md = (tmp_path / "evaluations" / "leaderboard.md").read_text()
    assert "| bm25 (k=3) | all | 40.0 |" in md
    assert "| bm25 (k=3) | after 2024-06-01; new,changed | 60.0 |" in md
    text = report.results_markdown(newer)
    assert "- items: after 2024-06-01; new,changed" in text
    out = report.default_out(tmp_path, "2025-01-01", "openai:m", "bm25", newer["filter"])
    assert out.name == "openai-m__bm25__after-2024-06-01__types-new-changed"
    assert report.default_out(tmp_path, "2025-01-01", "openai:m", "bm25", None).name == (
        "openai-m__bm25"
    )
    # the across-releases plot only draws runs on every item
    older = _record("2024-06-01", "bm25", 10.0) | {"filter": newer["filter"]}
    runs = report.update_leaderboard(tmp_path, older)
    assert report.write_release_plot(tmp_path, runs, "openai:m", "bm25") is None


def _run(release: str, failed: int, f1: float) -> EvalRun:
    record = _record(release, "bm25", f1)
    return EvalRun(
        release=release,
        release_id=record["release_id"],
        retriever="bm25",
        k=3,
        kinds=["qa"],
        skipped={},
        counts={"qa": {"all": 2}},
        metrics=record["metrics"],
        predictions=[{"id": "q1", "prediction": "x", "error": "timeout" if failed else None}],
        model_calls=2,
        cache_hits=0,
        failed=failed,
        retrieval_ms_per_query=0.1,
        seconds=1.0,
        prompt_hashes={"qa": "p"},
    )


def test_a_recorded_run_joins_the_leaderboard_only_when_no_call_failed(tmp_path: Path) -> None:
    common = {"model": "openai:m", "model_spec": "", "config": {}, "limit": None}
    failed = report.record_run(tmp_path, _run("2024-06-01", 1, 10.0), **common)
    assert failed.out == tmp_path / "evaluations" / "2024-06-01" / "openai-m__bm25"
    assert json.loads((failed.out / "results.json").read_text())["failed"] == 1
    assert not failed.on_leaderboard and failed.plot is None
    assert not (tmp_path / "evaluations" / "leaderboard.jsonl").exists()
    first = report.record_run(tmp_path, _run("2024-06-01", 0, 40.0), **common)
    assert first.on_leaderboard and first.plot is None  # one release: nothing to plot yet
    out = tmp_path / "mine"
    second = report.record_run(
        tmp_path, _run("2025-01-01", 0, 50.0), **common, out=out, per_release=True
    )
    assert second.out == out / "2025-01-01" and (second.out / "predictions.jsonl").is_file()
    assert second.plot is not None and second.plot.is_file()
    lines = (tmp_path / "evaluations" / "leaderboard.jsonl").read_text().splitlines()
    assert [json.loads(x)["release"] for x in lines] == ["2024-06-01", "2025-01-01"]
