"""Atomic writes, schema-versioned Parquet, and resumable sharded outputs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from pipeline.errors import DamagedFileError, MissingFileError
from pipeline.shards import ShardedOutput, chunk_sizes, chunked
from pipeline.stage_folders import rebuild_advice
from pipeline.storage import (
    AtomicParquetWriter,
    SchemaVersionError,
    read_parquet,
    schema_version_of,
    write_json_atomic,
    write_parquet_atomic,
)

SCHEMA = pa.schema([("page_id", pa.int64()), ("text", pa.string())])


def test_parquet_round_trip_keeps_schema_version(tmp_path: Path) -> None:
    table = pa.table({"page_id": [1, 2], "text": ["a", "b"]}, schema=SCHEMA)
    path = tmp_path / "t.parquet"
    write_parquet_atomic(table, path, table_name="things", schema_version=3)
    assert schema_version_of(path) == 3
    back = read_parquet(path, expected_table="things", max_schema_version=3)
    assert back.to_pylist() == table.to_pylist()
    with pytest.raises(SchemaVersionError, match="schema version 3, written by a newer"):
        read_parquet(path, expected_table="things", max_schema_version=2)
    with pytest.raises(DamagedFileError, match="holds table 'things'"):
        read_parquet(path, expected_table="other", max_schema_version=3)
    with pytest.raises(MissingFileError, match="no such table"):
        read_parquet(tmp_path / "missing.parquet", expected_table="things", max_schema_version=1)


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: b"garbage, not Parquet " * 50,
        lambda raw: raw[: len(raw) // 2],  # cut short
        lambda raw: raw[:8] + bytes(64) + raw[72:],  # scribbled over after the magic bytes
        lambda raw: b"",
    ],
    ids=["garbage", "truncated", "scribbled", "empty"],
)
def test_a_damaged_table_is_one_clear_error_naming_the_rebuild(
    tmp_path: Path, damage: Callable[[bytes], bytes]
) -> None:
    path = tmp_path / "w" / "snapshots" / "2024-06-01" / "sentences.parquet"
    path.parent.mkdir(parents=True)
    write_parquet_atomic(
        pa.table({"page_id": list(range(200)), "text": ["x" * 40] * 200}, schema=SCHEMA),
        path,
        table_name="sentences",
        schema_version=1,
    )
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(DamagedFileError) as caught:
        read_parquet(path, expected_table="sentences", max_schema_version=1)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message and caught.value.path == path
    # storage says what is wrong with the bytes; the CLI adds what to run (rebuild_advice)
    assert "rebuild" not in message
    assert rebuild_advice(caught.value).startswith(
        "; rebuild it with `wikidrift snapshot --date 2024-06-01 --workdir"
    )


def test_failed_write_leaves_nothing_behind(tmp_path: Path) -> None:
    path = tmp_path / "out.parquet"
    with (
        pytest.raises(RuntimeError),
        AtomicParquetWriter(path, SCHEMA, table_name="t", schema_version=1) as writer,
    ):
        writer.write_rows([{"page_id": 1, "text": "x"}])
        raise RuntimeError("crash mid-write")
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []


def test_json_write_replaces_atomically(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b.json"
    write_json_atomic(path, {"x": 1})
    write_json_atomic(path, {"x": 2})
    assert path.read_text().strip().endswith("}")
    assert '"x": 2' in path.read_text()
    assert [p.name for p in path.parent.iterdir()] == ["b.json"]


def test_sharded_output_resumes_and_discards_other_requests(tmp_path: Path) -> None:
    out = tmp_path / "stage"
    first = ShardedOutput(out, {"t": SCHEMA}, schema_version=1, request={"r": 1})
    first.write_part({"t": pa.table({"page_id": [1], "text": ["a"]})}, {"page_ids": [1]})
    first.write_part({"t": pa.table({"page_id": [2], "text": ["b"]})}, {"page_ids": [2]})
    # A crash after this point: a new object for the same request sees both parts.
    again = ShardedOutput(out, {"t": SCHEMA}, schema_version=1, request={"r": 1})
    assert [m["page_ids"] for m in again.completed()] == [[1], [2]]
    # A part whose done-file never got written is not counted (and will be redone).
    (again.work / "part-00002.t.parquet").write_bytes(b"partial")
    assert len(again.completed()) == 2
    again.write_part({"t": pa.table({"page_id": [3], "text": ["c"]})}, {"page_ids": [3]})
    assert again.finalize() == {"t": 3}
    table = read_parquet(out / "t.parquet", expected_table="t", max_schema_version=1)
    assert table["page_id"].to_pylist() == [1, 2, 3]
    again.cleanup()
    assert not (out / "_work").exists()
    # Unfinished work of a different request is thrown away, not mixed in.
    other = ShardedOutput(out, {"t": SCHEMA}, schema_version=1, request={"r": 1})
    other.write_part({"t": pa.table({"page_id": [9], "text": ["z"]})}, {"page_ids": [9]})
    changed = ShardedOutput(out, {"t": SCHEMA}, schema_version=1, request={"r": 2})
    assert changed.completed() == []


def test_publish_dir_swaps_without_a_gap(tmp_path: Path) -> None:
    from pipeline.storage import publish_dir

    out, tmp, old = tmp_path / "out", tmp_path / ".out.tmp", tmp_path / "out.r1"
    assert publish_dir(_dir_with(tmp, "v1"), out, old) is False
    assert publish_dir(_dir_with(tmp, "v2"), out, old) is True
    assert (out / "v").read_text() == "v2" and (old / "v").read_text() == "v1"
    assert not tmp.exists()


def _dir_with(path: Path, text: str) -> Path:
    path.mkdir()
    (path / "v").write_text(text)
    return path


def test_chunk_sizes_are_the_lengths_of_the_chunks() -> None:
    for n in (0, 1, 199, 200, 201, 1000, 1001):
        for size in (1, 7, 200):
            assert chunk_sizes(n, size) == [len(c) for c in chunked(range(n), size)]
