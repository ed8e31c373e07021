"""Resumable, sharded stage output.

A long stage (fetching and parsing a snapshot, labeling a pair of snapshots) writes its
result shard by shard into ``<out_dir>/_work/``; each finished shard is a set of Parquet
files plus a ``.done.json`` written last. After a crash, the same request finds the finished
shards and continues; a different request discards them. :meth:`ShardedOutput.finalize`
streams the shards into the final tables (atomic renames) and removes ``_work/``.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.storage import AtomicParquetWriter, write_json_atomic, write_parquet_atomic

log = logging.getLogger(__name__)


class ShardedOutput:
    """The ``_work/`` area of one stage output directory (see the module docstring)."""

    def __init__(
        self,
        out_dir: Path,
        tables: dict[str, pa.Schema],
        *,
        schema_version: int,
        request: dict[str, Any],
    ) -> None:
        self.out_dir = Path(out_dir)
        self.tables = tables
        self.schema_version = schema_version
        self.work = self.out_dir / "_work"
        request_file = self.work / "request.json"
        if self.work.exists() and (
            not request_file.exists() or json.loads(request_file.read_text()) != request
        ):
            log.info("discarding unfinished work in %s: it was for another request", self.work)
            shutil.rmtree(self.work)
        self.work.mkdir(parents=True, exist_ok=True)
        write_json_atomic(request_file, request)

    def _part_file(self, index: int, name: str) -> Path:
        return self.work / f"part-{index:05d}.{name}.parquet"

    def completed(self) -> list[dict[str, Any]]:
        """Metadata of the finished shards, in order."""
        done = []
        for path in sorted(self.work.glob("part-*.done.json")):
            index = int(path.name.split(".")[0].removeprefix("part-"))
            if all(self._part_file(index, name).exists() for name in self.tables):
                done.append(json.loads(path.read_text()) | {"_index": index})
        return done

    def write_part(self, tables: dict[str, pa.Table], meta: dict[str, Any]) -> None:
        """Store one finished shard; its done-file is written last, so a shard cut short by a
        crash is simply redone."""
        indices = [m["_index"] for m in self.completed()]
        index = max(indices) + 1 if indices else 0
        for name, schema in self.tables.items():
            write_parquet_atomic(
                tables[name].cast(schema),
                self._part_file(index, name),
                table_name=name,
                schema_version=self.schema_version,
            )
        write_json_atomic(self.work / f"part-{index:05d}.done.json", meta)

    def finalize(self) -> dict[str, int]:
        """Concatenate the shards into ``<out_dir>/<name>.parquet``; returns rows per table."""
        parts = self.completed()
        rows = {}
        for name, schema in self.tables.items():
            with AtomicParquetWriter(
                self.out_dir / f"{name}.parquet",
                schema,
                table_name=name,
                schema_version=self.schema_version,
            ) as writer:
                for meta in parts:
                    writer.write_table(pq.read_table(self._part_file(meta["_index"], name)))
            rows[name] = writer.rows
        return rows

    def cleanup(self) -> None:
        """Remove ``_work/`` once the final files and the completion marker are written."""
        shutil.rmtree(self.work, ignore_errors=True)
