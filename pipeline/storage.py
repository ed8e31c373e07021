"""Atomic file writes and schema-versioned Parquet tables.

Every file a stage publishes is written to a temporary name in the same directory, fsynced,
and renamed into place, so a crash never leaves a half-written file under the final name.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import hashlib
import json
import logging
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.errors import DamagedFileError, MissingFileError, NewerWorkdirError

log = logging.getLogger(__name__)

SCHEMA_VERSION_KEY = b"wikidrift.schema_version"
TABLE_NAME_KEY = b"wikidrift.table"


def _umask_mode() -> int:
    # mkstemp creates 0600 files; published outputs should get the usual permissions.
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


_FILE_MODE = _umask_mode()


class SchemaVersionError(NewerWorkdirError):
    """A Parquet file was written with a schema version this code cannot read."""

    remedy = "or rebuild"


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
        fsync_dir(path.parent)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def fsync_dir(directory: Path) -> None:
    """Fsync ``directory`` so a new or renamed entry in it survives a crash.

    A directory that cannot be opened is skipped: the file itself is already on disk.
    """
    # The rename is only durable once the directory entry itself reaches the disk.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
        fsync_dir(self.path.parent)

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
        raise MissingFileError(
            f"{path}: no such table (has the stage that writes it run?)", path=path
        )
    try:
        schema = pq.read_schema(path)
    except (pa.ArrowException, OSError) as exc:
        raise _damaged(path, exc) from None
    meta = schema.metadata or {}
    name = meta.get(TABLE_NAME_KEY, b"").decode(errors="replace")
    if name != expected_table:
        raise DamagedFileError(
            f"{path}: holds table {name!r}, expected {expected_table!r}", path=path
        )
    try:
        version = int(meta.get(SCHEMA_VERSION_KEY, b"0"))
    except ValueError:
        version = 0
    if version > max_schema_version:
        raise SchemaVersionError(
            f"{path}: schema version {version}, written by a newer wikidrift; this one reads "
            f"versions 1..{max_schema_version}: upgrade wikidrift",
            path=path,
        )
    if version < 1:
        raise DamagedFileError(f"{path}: no schema version", path=path)
    try:
        if page_ids is None:
            return pq.read_table(path, columns=columns)
        table = pq.read_table(path, columns=columns, filters=[("page_id", "in", list(page_ids))])
    except (pa.ArrowException, OSError) as exc:
        raise _damaged(path, exc) from None
    # The dataset reader drops the file's schema metadata; keep it like an unfiltered read.
    return table.replace_schema_metadata(meta)


def _damaged(path: Path, exc: BaseException) -> DamagedFileError:
    reason = " ".join(str(exc).split())[:160]
    return DamagedFileError(
        f"{path} is not a readable Parquet table ({type(exc).__name__}: {reason})", path=path
    )


def schema_version_of(path: str | Path) -> int:
    """The schema version stamped in a Parquet file's metadata (0 when absent)."""
    meta = pq.read_schema(path).metadata or {}
    return int(meta.get(SCHEMA_VERSION_KEY, b"0"))


# --------------------------------------------------------------------------- publishing dirs
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _libc_renameat2() -> object | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        func = libc.renameat2
    except (OSError, AttributeError):
        return None
    func.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    func.restype = ctypes.c_int
    return func


_renameat2 = _libc_renameat2()


def exchange_paths(a: Path, b: Path) -> bool:
    """Swap two existing paths in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``).
    False when the platform or file system cannot; then nothing changed."""
    if _renameat2 is None:
        return False
    rc = _renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def publish_dir(tmp: Path, out: Path, old: Path) -> bool:
    """Put the finished directory ``tmp`` at ``out``; the directory that was at ``out`` (if
    any) ends at ``old``. ``out`` is never missing: the two are swapped in one atomic step
    and the old one is then renamed to ``old``. Where the file system cannot swap, two
    renames are used: an exception between them puts the old directory back, and a kill
    between them is repaired by the stage's next run (its recovery restores ``old``).
    Returns whether an old directory was moved to ``old``."""
    if not out.exists():
        os.rename(tmp, out)
        fsync_dir(out.parent)
        return False
    if exchange_paths(tmp, out):
        fsync_dir(out.parent)
        os.rename(tmp, old)  # tmp's name now holds the old directory
    else:
        os.rename(out, old)
        try:
            os.rename(tmp, out)
        except BaseException:
            os.rename(old, out)  # interrupted (Ctrl-C, SIGTERM, disk error): put it back
            raise
    fsync_dir(out.parent)
    return True


def recover_state_dirs(root: Path, marker: str) -> list[str]:
    """Repair what a killed update of a ``<root>/<snapshot>/`` state folder left (call under
    the stage's lock); returns one line per repair. A state moved aside (``.<snapshot>.old``)
    with its ``marker`` file but not replaced is put back; every other hidden folder (an
    unfinished update, or a replaced state) is deleted."""
    if not root.is_dir():
        return []
    done: list[str] = []
    for p in sorted(root.iterdir()):
        if not (p.name.startswith(".") and p.is_dir()):
            continue
        snap = p.name[1:].split(".", 1)[0]
        out = root / snap
        if p.name == f".{snap}.old" and not out.exists() and (p / marker).exists():
            p.rename(out)
            done.append(f"restored the state of {snap}")
        else:
            shutil.rmtree(p, ignore_errors=True)
            done.append(f"removed the leftover temp folder {p.name}")
    return done


def publish_state_dir(out: Path, write: Callable[[Path], None]) -> None:
    """Write a stage's ``<root>/<snapshot>/`` state folder: ``write(tmp)`` fills a hidden temp
    folder beside ``out``, which is then swapped in (``out`` is never missing, see
    :func:`publish_dir`); a failure while writing leaves nothing behind."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        write(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = out.with_name(f".{out.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if publish_dir(tmp, out, old):
        shutil.rmtree(old, ignore_errors=True)


def enable_wal(conn: sqlite3.Connection, wait_s: float = 30.0) -> None:
    """Put a SQLite database in WAL mode. Switching takes an exclusive lock and SQLite does
    not always wait for it (another process opening the same cache got "database is locked"),
    so an already-WAL database is left alone and a busy switch is retried until ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)
