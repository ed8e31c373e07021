"""Atomic file writes and schema-versioned Parquet tables.

Every file a stage publishes is written to a temporary name in the same directory, fsynced,
and renamed into place, so a crash never leaves a half-written file under the final name.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA_VERSION_KEY = b"wikidrift.schema_version"
TABLE_NAME_KEY = b"wikidrift.table"


def _umask_mode() -> int:
    # mkstemp creates 0600 files; published outputs should get the usual permissions.
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


_FILE_MODE = _umask_mode()


class SchemaVersionError(RuntimeError):
    """A Parquet file was written with a schema version this code cannot read."""


@contextmanager
def atomic_open(path: str | Path, mode: str = "wb") -> Iterator[IO]:
    """Open a temp file beside ``path``; on clean exit fsync it and rename it onto ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, _FILE_MODE)
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _fsync_dir(directory: Path) -> None:
    # The rename is only durable once the directory entry itself reaches the disk.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def cache_dir(workdir: str | Path) -> Path:
    """``<workdir>/cache``: embeddings, NLI results, LLM calls, dump index, batch state."""
    path = Path(workdir) / "cache"
    path.mkdir(parents=True, exist_ok=True)
    return path


def logs_dir(workdir: str | Path) -> Path:
    """``<workdir>/logs``: the local LLM server's and Prefect's logs."""
    return Path(workdir) / "logs"


EMBEDDING_CACHE = "embeddings.sqlite"
NLI_CACHE = "nli.sqlite"
LLM_CACHE = "llm_calls.sqlite"


def file_sha256(path: str | Path) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_open(path, "w") as fh:
        fh.write(text)


def write_json_atomic(path: str | Path, obj: object) -> None:
    """Write ``obj`` as indented, key-sorted JSON to ``path`` atomically."""
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def write_parquet_atomic(
    table: pa.Table, path: str | Path, *, table_name: str, schema_version: int
) -> None:
    """Write ``table`` to ``path`` atomically, stamping its name and schema version."""
    meta = dict(table.schema.metadata or {})
    meta[SCHEMA_VERSION_KEY] = str(schema_version).encode()
    meta[TABLE_NAME_KEY] = table_name.encode()
    table = table.replace_schema_metadata(meta)
    with atomic_open(path, "wb") as fh:
        pq.write_table(table, fh, compression="zstd")


class AtomicParquetWriter:
    """Stream record batches into one Parquet file that appears only when closed cleanly."""

    def __init__(
        self, path: str | Path, schema: pa.Schema, *, table_name: str, schema_version: int
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        meta = dict(schema.metadata or {})
        meta[SCHEMA_VERSION_KEY] = str(schema_version).encode()
        meta[TABLE_NAME_KEY] = table_name.encode()
        self.schema = schema.with_metadata(meta)
        fd, tmp = tempfile.mkstemp(
            prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent
        )
        os.fchmod(fd, _FILE_MODE)
        os.close(fd)
        self._tmp = Path(tmp)
        self._writer = pq.ParquetWriter(self._tmp, self.schema, compression="zstd")
        self.rows = 0

    def write_rows(self, rows: list[dict]) -> None:
        """Append a list of row dicts (keys = schema field names)."""
        if rows:
            self.write_table(pa.Table.from_pylist(rows, schema=self.schema))

    def write_table(self, table: pa.Table) -> None:
        """Append a table whose columns match the writer's schema."""
        self._writer.write_table(table.cast(self.schema))
        self.rows += table.num_rows

    def close(self) -> None:
        """Finish the file and move it into place."""
        self._writer.close()
        with open(self._tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(self._tmp, self.path)
        _fsync_dir(self.path.parent)

    def abort(self) -> None:
        """Drop the partial file; nothing appears under the final name."""
        try:
            self._writer.close()
        finally:
            self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> AtomicParquetWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def read_parquet(
    path: str | Path,
    *,
    expected_table: str,
    max_schema_version: int,
    columns: list[str] | None = None,
    page_ids: Iterable[int] | None = None,
) -> pa.Table:
    """Read a table written by :func:`write_parquet_atomic`, refusing unknown schema versions.
    ``page_ids`` keeps only those pages' rows, filtered while reading (batch by batch), so a
    shard of a large table costs the memory of the shard, not of the table."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such table (has the stage that writes it run?)")
    schema = pq.read_schema(path)
    meta = schema.metadata or {}
    name = meta.get(TABLE_NAME_KEY, b"").decode()
    if name != expected_table:
        raise SchemaVersionError(f"{path}: holds table {name!r}, expected {expected_table!r}")
    version = int(meta.get(SCHEMA_VERSION_KEY, b"0"))
    if not 1 <= version <= max_schema_version:
        raise SchemaVersionError(
            f"{path}: schema version {version}; "
            f"this wikidrift reads versions 1..{max_schema_version}"
        )
    if page_ids is None:
        return pq.read_table(path, columns=columns)
    table = pq.read_table(path, columns=columns, filters=[("page_id", "in", list(page_ids))])
    # The dataset reader drops the file's schema metadata; keep it like an unfiltered read.
    return table.replace_schema_metadata(meta)


def schema_version_of(path: str | Path) -> int:
    """The schema version stamped in a Parquet file's metadata (0 when absent)."""
    meta = pq.read_schema(path).metadata or {}
    return int(meta.get(SCHEMA_VERSION_KEY, b"0"))
