"""pipeline.shards: cutting work into shards, ShardedOutput writing, resuming, merging and
cleaning up its parts, and ShardedFolder: the done-marker and work area of a sharded stage."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pipeline.errors import WikidriftError
from pipeline.shards import (
    MergedParts,
    ShardedFolder,
    ShardedOutput,
    TableTransform,
    chunk_sizes,
    chunked,
    release_memory,
)
from pipeline.storage import file_sha256, read_parquet, schema_version_of, write_json_atomic

PAGES = pa.schema([("page_id", pa.int64()), ("text", pa.string())])
COUNTS = pa.schema([("page_id", pa.int64()), ("n", pa.int32())])
TABLES = {"pages": PAGES, "counts": COUNTS}
REQUEST = {"snapshot": "2024-06-01", "pages": [1, 2, 3]}


def _shard(*page_ids: int) -> dict[str, pa.Table]:
    return {
        "pages": pa.table({"page_id": list(page_ids), "text": [f"p{p}" for p in page_ids]}),
        "counts": pa.table({"page_id": list(page_ids), "n": [p * 10 for p in page_ids]}),
    }


def _open(out: Path, **kwargs: Any) -> ShardedOutput:
    kwargs.setdefault("request", REQUEST)
    return ShardedOutput(out, TABLES, schema_version=2, table_prefix="stage_", **kwargs)


@pytest.mark.parametrize(
    ("n", "size", "expected"),
    [
        (0, 3, []),
        (6, 3, [[0, 1, 2], [3, 4, 5]]),
        (7, 3, [[0, 1, 2], [3, 4, 5], [6]]),
        (3, 1, [[0], [1], [2]]),
        (2, 5, [[0, 1]]),
    ],
    ids=["empty", "exact-multiple", "remainder", "size-1", "size-over-n"],
)
def test_chunked_and_chunk_sizes(n: int, size: int, expected: list[list[int]]) -> None:
    assert chunked(list(range(n)), size) == expected
    assert chunk_sizes(n, size) == [len(c) for c in expected]


def test_chunked_makes_lists_of_any_sequence() -> None:
    assert chunked(("a", "b", "c"), 2) == [["a", "b"], ["c"]]
    assert chunked("abc", 2) == [["a", "b"], ["c"]]
    items = [1, 2]
    chunks = chunked(items, 2)
    chunks[0].append(3)
    # Each shard is a copy: growing one leaves the caller's list alone.
    assert items == [1, 2]


@pytest.mark.parametrize("size", [0, -3])
def test_a_shard_size_below_one_is_refused(size: int) -> None:
    with pytest.raises(ValueError, match="at least 1 item"):
        chunked([1, 2], size)
    with pytest.raises(ValueError, match="at least 1 item"):
        chunk_sizes(2, size)


def test_release_memory_returns_quietly() -> None:
    assert release_memory() is None


def test_a_new_work_area_records_its_request(tmp_path: Path) -> None:
    work = _open(tmp_path / "out").work
    assert work == tmp_path / "out" / "_work"
    assert json.loads((work / "request.json").read_text()) == REQUEST
    assert [p.name for p in work.iterdir()] == ["request.json"]


def test_parts_at_fixed_indices_merge_in_index_order(tmp_path: Path) -> None:
    out = tmp_path / "out"
    sharded = _open(out)
    # Planned shards may finish out of order (parallel workers).
    sharded.write_part(_shard(5, 6), {"shard": "c"}, index=2)
    sharded.write_part(_shard(1), {"shard": "a"}, index=0)
    assert [(m["_index"], m["shard"]) for m in sharded.completed()] == [(0, "a"), (2, "c")]
    assert sharded.is_done(0) and sharded.is_done(2)
    assert not sharded.is_done(1)
    # a part that finds its shard done returns its metadata instead of working again
    assert sharded.finished(2) == {"shard": "c", "_index": 2, "skipped": True}
    assert sharded.finished(1) is None
    sharded.write_part(_shard(3, 4), {"shard": "b"}, index=1)
    part = read_parquet(
        sharded.work / "part-00001.counts.parquet",
        expected_table="stage_counts",
        max_schema_version=2,
    )
    # Each part is cast to its table's schema (pa.table() made n an int64).
    assert part.schema.field("n").type == pa.int32()
    assert part.to_pylist() == [{"page_id": 3, "n": 30}, {"page_id": 4, "n": 40}]

    assert sharded.finalize() == {"pages": 5, "counts": 5}
    pages = read_parquet(out / "pages.parquet", expected_table="stage_pages", max_schema_version=2)
    counts = read_parquet(
        out / "counts.parquet", expected_table="stage_counts", max_schema_version=2
    )
    assert pages["page_id"].to_pylist() == [1, 3, 4, 5, 6]
    assert pages["text"].to_pylist() == ["p1", "p3", "p4", "p5", "p6"]
    assert counts.to_pylist()[-1] == {"page_id": 6, "n": 60}
    assert schema_version_of(out / "pages.parquet") == 2
    assert counts.schema.field("n").type == pa.int32()


def test_a_streamed_part_takes_the_next_index_after_the_finished_ones(tmp_path: Path) -> None:
    sharded = _open(tmp_path / "out")
    sharded.write_part(_shard(1), {"i": 0})
    sharded.write_part(_shard(2), {"i": 1}, index=4)
    sharded.write_part(_shard(3), {"i": 2})
    assert [m["_index"] for m in sharded.completed()] == [0, 4, 5]
    assert sorted(p.name for p in sharded.work.glob("part-00005.*")) == [
        "part-00005.counts.parquet",
        "part-00005.done.json",
        "part-00005.pages.parquet",
    ]


def test_unfinished_parts_are_not_done_and_are_not_merged(tmp_path: Path) -> None:
    out = tmp_path / "out"
    sharded = _open(out)
    sharded.write_part(_shard(1), {"i": 0}, index=0)
    sharded.write_part(_shard(2), {"i": 1}, index=1)
    sharded.write_part(_shard(3), {"i": 2}, index=2)
    # Part 1 lost one of its tables; part 2 was cut short before its done-file.
    (sharded.work / "part-00001.counts.parquet").unlink()
    (sharded.work / "part-00002.done.json").unlink()
    assert [sharded.is_done(i) for i in range(3)] == [True, False, False]
    assert [m["_index"] for m in sharded.completed()] == [0]
    # A streamed part after a crash reuses the first index after the last finished part.
    sharded.write_part(_shard(4), {"i": 3})
    assert [m["_index"] for m in sharded.completed()] == [0, 1]
    assert sharded.finalize() == {"pages": 2, "counts": 2}
    pages = read_parquet(out / "pages.parquet", expected_table="stage_pages", max_schema_version=2)
    assert pages["page_id"].to_pylist() == [1, 4]


def test_finalize_passes_each_part_through_transform(tmp_path: Path) -> None:
    out = tmp_path / "out"
    sharded = _open(out)
    sharded.write_part(_shard(1, 2), {"keep": [2]}, index=0)
    sharded.write_part(_shard(3, 4), {"keep": [3, 4]}, index=1)
    seen: list[tuple[str, int]] = []

    def keep(name: str, meta: dict[str, Any], table: pa.Table) -> pa.Table:
        seen.append((name, meta["_index"]))
        wanted = pa.array(meta["keep"], pa.int64())
        return table.filter(pc.is_in(table["page_id"], value_set=wanted))

    assert sharded.finalize(keep) == {"pages": 3, "counts": 3}
    assert seen == [("pages", 0), ("pages", 1), ("counts", 0), ("counts", 1)]
    counts = read_parquet(
        out / "counts.parquet", expected_table="stage_counts", max_schema_version=2
    )
    assert counts["n"].to_pylist() == [20, 30, 40]


def test_finalize_without_parts_writes_empty_tables(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert _open(out).finalize() == {"pages": 0, "counts": 0}
    pages = read_parquet(out / "pages.parquet", expected_table="stage_pages", max_schema_version=2)
    assert pages.num_rows == 0
    assert pages.schema.names == ["page_id", "text"]


def test_cleanup_removes_the_work_area_and_keeps_the_final_tables(tmp_path: Path) -> None:
    out = tmp_path / "out"
    sharded = _open(out)
    sharded.write_part(_shard(1), {}, index=0)
    sharded.finalize()
    sharded.cleanup()
    assert sorted(p.name for p in out.iterdir()) == ["counts.parquet", "pages.parquet"]
    sharded.cleanup()  # nothing left to remove is no error
    assert not sharded.work.exists()


def test_a_work_area_without_its_request_is_discarded(tmp_path: Path) -> None:
    out = tmp_path / "out"
    sharded = _open(out)
    sharded.write_part(_shard(1), {}, index=0)
    (sharded.work / "request.json").unlink()
    again = _open(out)
    assert again.completed() == []
    assert json.loads((again.work / "request.json").read_text()) == REQUEST


def test_a_work_area_whose_request_is_not_json_belongs_to_no_request(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _open(out).write_part(_shard(1), {}, index=0)
    (out / "_work" / "request.json").write_text('{"snapshot": ')  # cut short
    with pytest.raises(RuntimeError, match="not prepared for this request"):
        _open(out, attach=True)
    again = _open(out)
    assert again.completed() == []
    assert json.loads((again.work / "request.json").read_text()) == REQUEST


def test_a_worker_attaches_to_a_prepared_area_without_touching_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _open(out).write_part(_shard(1), {"by": "first"}, index=0)
    request = (out / "_work" / "request.json").stat()
    worker = _open(out, attach=True)
    # Not even the request is written again: the preparing process owns it.
    after = (worker.work / "request.json").stat()
    assert (after.st_ino, after.st_mtime_ns) == (request.st_ino, request.st_mtime_ns)
    assert [m["by"] for m in worker.completed()] == ["first"]
    worker.write_part(_shard(2), {"by": "worker"}, index=1)
    assert [m["by"] for m in _open(out).completed()] == ["first", "worker"]


def test_attaching_to_another_request_or_no_area_fails_and_deletes_nothing(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="not prepared for this request"):
        _open(out, attach=True)
    assert not out.exists()
    _open(out).write_part(_shard(1), {}, index=0)
    with pytest.raises(RuntimeError, match="not prepared for this request"):
        _open(out, request={"snapshot": "2025-01-01"}, attach=True)
    assert _open(out).is_done(0)


# --------------------------------------------------------------------------- ShardedFolder


@dataclass
class _Summary:
    """A stage's done-marker, as the sharded stages' summaries are."""

    rows: dict[str, int]
    pages: int = 0
    page_ids: list[int] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Job:
    out: Path
    planned: int  # 0: one streamed part, as a snapshot of every article

    def parts(self) -> list[int]:
        return list(range(self.planned))

    def shards(self, *, attach: bool = False) -> ShardedOutput:
        return _open(self.out, attach=attach)


FOLDER = ShardedFolder("done.json", _Summary, ("pages.parquet", "counts.parquet"))


def _summarize(merged: MergedParts) -> _Summary:
    return _Summary(
        rows=merged.rows,
        pages=merged.total("pages", 0),
        page_ids=merged.total("page_ids", []),
        calls=merged.total("calls", {}),
    )


def test_finish_refuses_while_a_planned_shard_is_unfinished(tmp_path: Path) -> None:
    job = _Job(tmp_path / "out", planned=4)
    FOLDER.prepare(job, False, lambda stored: True)
    sharded = job.shards(attach=True)
    sharded.write_part(_shard(1), {"pages": 1}, index=0)
    sharded.write_part(_shard(3), {"pages": 1}, index=2)
    with pytest.raises(WikidriftError, match=r"^stage x: 2 shard\(s\) not finished$"):
        FOLDER.finish(job, "stage x", _summarize)
    # Nothing merged, no marker, and the finished shards are kept for the next run.
    assert sorted(p.name for p in job.out.iterdir()) == ["_work"]
    assert [m["_index"] for m in sharded.completed()] == [0, 2]


def test_finish_merges_adds_up_the_metadata_writes_the_marker_last_and_cleans_up(
    tmp_path: Path,
) -> None:
    job = _Job(tmp_path / "out", planned=3)
    FOLDER.prepare(job, False, lambda stored: True)
    sharded = job.shards(attach=True)
    sharded.write_part(_shard(1, 2), {"pages": 2, "page_ids": [1, 2], "calls": {"a": 1}}, index=0)
    sharded.write_part(_shard(2, 3), {"pages": 2, "page_ids": [2, 3]}, index=1)  # no calls
    sharded.write_part(_shard(4), {"pages": 1, "page_ids": [4], "calls": {"a": 2, "b": 5}}, index=2)

    def first_shard_of_each_page(parts: list[dict[str, Any]]) -> TableTransform:
        seen: set[int] = set()
        keep: dict[int, list[int]] = {}
        for meta in parts:
            keep[meta["_index"]] = [p for p in meta["page_ids"] if p not in seen]
            seen.update(meta["page_ids"])
        return lambda name, meta, table: table.filter(
            pc.is_in(table["page_id"], value_set=pa.array(keep[meta["_index"]], pa.int64()))
        )

    def summarize(merged: MergedParts) -> _Summary:
        # Called with the tables merged, before the marker and while the work area is there.
        assert (job.out / "pages.parquet").exists() and sharded.work.exists()
        assert not (job.out / "done.json").exists()
        (job.out / "extra.txt").write_text("written by the stage")
        return _summarize(merged)

    summary = FOLDER.finish(job, "stage x", summarize, transform=first_shard_of_each_page)
    assert summary.rows == {"pages": 4, "counts": 4}  # page 2 once
    assert (summary.pages, summary.page_ids) == (5, [1, 2, 2, 3, 4])
    assert summary.calls == {"a": 3, "b": 5}
    assert summary.outputs == {
        name: file_sha256(job.out / name) for name in ("counts.parquet", "pages.parquet")
    }
    assert json.loads((job.out / "done.json").read_text()) == asdict(summary)
    assert not sharded.work.exists()
    files = sorted(p.name for p in job.out.iterdir())
    assert files == ["counts.parquet", "done.json", "extra.txt", "pages.parquet"]
    marker_time = (job.out / "done.json").stat().st_mtime_ns
    assert all((job.out / name).stat().st_mtime_ns <= marker_time for name in files)


def test_finish_of_a_streamed_job_takes_whatever_shards_finished(tmp_path: Path) -> None:
    job = _Job(tmp_path / "out", planned=0)
    FOLDER.prepare(job, False, lambda stored: True)
    summary = FOLDER.finish(job, "stage x", _summarize)
    # No shard: every total is its start, every table empty.
    assert summary == _Summary(rows={"pages": 0, "counts": 0}, outputs=summary.outputs)
    assert not (job.out / "_work").exists()


def test_prepare_returns_a_current_marker_and_otherwise_starts_over(tmp_path: Path) -> None:
    job = _Job(tmp_path / "out", planned=1)
    assert FOLDER.prepare(job, False, lambda stored: True) is None  # no marker yet
    job.shards(attach=True).write_part(_shard(1), {"pages": 1}, index=0)
    done = FOLDER.finish(job, "stage x", _summarize)

    assert FOLDER.prepare(job, False, lambda stored: stored.pages == 1) == done
    assert not (job.out / "_work").exists()  # a done job opens no work area
    for force, current in [(True, True), (False, False)]:
        write_json_atomic(job.out / "done.json", asdict(done))
        job.shards(attach=False).write_part(_shard(2), {"pages": 1}, index=0)
        assert FOLDER.prepare(job, force, lambda stored, current=current: current) is None
        # The marker goes, so a run that dies now leaves nothing looking done; the shards
        # of the same request stay.
        assert not (job.out / "done.json").exists()
        assert job.shards(attach=True).is_done(0)
    write_json_atomic(job.out / "done.json", {"not": "a summary"})
    assert FOLDER.prepare(job, False, lambda stored: True) is None  # a damaged marker
    assert not (job.out / "done.json").exists()
