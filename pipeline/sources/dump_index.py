"""The multistream index (``offset:page_id:title`` lines, bz2): parsing it, finding the bz2
streams that hold a selection, and the SQLite lookup a remote dump's index is cached as."""

from __future__ import annotations

import bz2
import html
import logging
import os
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.errors import IntegrityError
from pipeline.sources import ArticleSelection, normalize_title
from pipeline.sources.dump_status import DATA_FILE_RE

__all__ = [
    "IndexEntry",
    "IndexLookup",
    "StreamSpan",
    "find_streams",
    "index_path_for",
    "parse_index_line",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One line of a multistream index: the stream offset of a page."""

    offset: int
    page_id: int
    title: str


@dataclass(frozen=True, slots=True)
class StreamSpan:
    """Bytes [offset, end) of a multistream file and the selected pages inside them."""

    offset: int
    end: int | None  # exclusive; None = up to the end of the file
    page_ids: tuple[int, ...]


@dataclass
class IndexLookup:
    """Where the selected pages are, and which of the selection the index knows."""

    spans: list[StreamSpan] = field(default_factory=list)
    found_ids: set[int] = field(default_factory=set)
    found_titles: set[str] = field(default_factory=set)  # normalized


def parse_index_line(line: str) -> IndexEntry:
    """Parse ``offset:page_id:title``; the title may itself contain colons and is XML-escaped."""
    offset, sep1, rest = line.rstrip("\r\n").partition(":")
    page_id, sep2, title = rest.partition(":")
    if not sep1 or not sep2 or not title:
        raise ValueError(f"not an index line: {line[:200]!r}")
    return IndexEntry(int(offset), int(page_id), html.unescape(title))


def index_path_for(data_path: Path) -> Path | None:
    """The index file name that belongs to a multistream data file (None if not one)."""
    name = data_path.name
    match = DATA_FILE_RE.search(name)
    if match is None:
        return None
    index_name = (
        name[: match.start()]
        + f"-pages-articles-multistream-index{match['n']}.txt{match['range'] or ''}.bz2"
    )
    return data_path.with_name(index_name)


# An index line is "offset:page_id:title"; titles are at most 255 bytes (escaped: ~1.5 KB).
_MAX_INDEX_LINE = 4096
_MAX_BLANK_INDEX_LINES = 1000


def read_index_entries(path: Path) -> Iterator[IndexEntry]:
    """Every entry of a multistream index file (``offset:page_id:title`` lines, bz2)."""
    blank = 0
    with bz2.open(path, "rt", encoding="utf-8") as fh:
        lineno = 0
        # readline(limit): a line without end (a bz2 bomb of one character) stays bounded.
        while line := fh.readline(_MAX_INDEX_LINE):
            lineno += 1
            if len(line) >= _MAX_INDEX_LINE and not line.endswith("\n"):
                raise IntegrityError(
                    f"{path}: line {lineno} is over {_MAX_INDEX_LINE} characters: not an index"
                )
            if not line.strip():
                blank += 1
                if blank > _MAX_BLANK_INDEX_LINES:
                    raise IntegrityError(f"{path}: more than {blank - 1} blank lines: not an index")
                continue
            try:
                yield parse_index_line(line)
            except ValueError as exc:
                raise IntegrityError(f"{path}: line {lineno}: {exc}") from exc


def find_streams(entries: Iterable[IndexEntry], selection: ArticleSelection) -> IndexLookup:
    """One streaming pass over index entries (in file order): the streams holding the selection.

    Memory is proportional to the selection, not to the index (enwiki: ~24M lines)."""
    ids = set(selection.page_ids)
    titles = {normalize_title(t) for t in selection.titles}
    lookup = IndexLookup()
    wanted: dict[int, list[int]] = {}
    ends: dict[int, int] = {}
    prev: int | None = None
    for entry in entries:
        if prev is not None and entry.offset != prev:
            if entry.offset < prev:
                raise IntegrityError(
                    f"index offsets go backwards at {entry.offset}:{entry.page_id}"
                )
            if prev in wanted:
                ends[prev] = entry.offset
        prev = entry.offset
        hit = entry.page_id in ids
        if hit:
            lookup.found_ids.add(entry.page_id)
        if titles:
            norm = normalize_title(entry.title)
            if norm in titles:
                lookup.found_titles.add(norm)
                hit = True
        if hit and entry.page_id not in wanted.setdefault(entry.offset, []):
            wanted[entry.offset].append(entry.page_id)
    lookup.spans = [StreamSpan(off, ends.get(off), tuple(p)) for off, p in sorted(wanted.items())]
    return lookup


class IndexDB:
    """The parsed index of one multistream file as SQLite, so later runs skip download and parse."""

    _FORMAT = "wikidrift-multistream-index-1"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)

    @classmethod
    def open_if_current(cls, path: Path, key: str) -> IndexDB | None:
        """Open the cached lookup when it was built from the index with this checksum key."""
        if not path.exists():
            return None
        try:
            db = cls(path)
            rows = dict(db._conn.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.Error:
            return None
        if rows.get("format") == cls._FORMAT and rows.get("index_key") == key:
            return db
        db.close()
        return None

    @classmethod
    def build(cls, index_file: Path, path: Path, key: str) -> IndexDB:
        """Parse ``index_file`` into a new SQLite file, written to a temp name then renamed."""
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.unlink(missing_ok=True)
        conn = sqlite3.connect(tmp)
        try:
            conn.execute("PRAGMA journal_mode=OFF")
            conn.execute("PRAGMA synchronous=OFF")
            conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
            conn.execute("CREATE TABLE pages (page_id INTEGER, title TEXT, offset INTEGER)")
            conn.execute("CREATE TABLE streams (offset INTEGER PRIMARY KEY)")
            batch: list[tuple[int, str, int]] = []
            offsets: set[int] = set()
            for entry in read_index_entries(index_file):
                batch.append((entry.page_id, normalize_title(entry.title), entry.offset))
                offsets.add(entry.offset)
                if len(batch) >= 50_000:
                    conn.executemany("INSERT INTO pages VALUES (?, ?, ?)", batch)
                    batch.clear()
            conn.executemany("INSERT INTO pages VALUES (?, ?, ?)", batch)
            conn.executemany("INSERT INTO streams VALUES (?)", ((o,) for o in sorted(offsets)))
            conn.execute("CREATE INDEX pages_id ON pages (page_id)")
            conn.execute("CREATE INDEX pages_title ON pages (title)")
            conn.executemany(
                "INSERT INTO meta VALUES (?, ?)",
                [("format", cls._FORMAT), ("index_key", key), ("source", index_file.name)],
            )
            conn.commit()
        except BaseException:
            conn.close()
            tmp.unlink(missing_ok=True)
            raise
        conn.close()
        os.replace(tmp, path)
        return cls(path)

    def lookup(self, selection: ArticleSelection) -> IndexLookup:
        """The streams holding the selected ids and titles."""
        result = IndexLookup()
        wanted: dict[int, list[int]] = {}
        ids = sorted(set(selection.page_ids))
        titles = sorted({normalize_title(t) for t in selection.titles})
        for column, values in (("page_id", ids), ("title", titles)):
            for start in range(0, len(values), 500):
                chunk = values[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._conn.execute(
                    f"SELECT page_id, title, offset FROM pages WHERE {column} IN ({marks})", chunk
                ).fetchall()
                for page_id, title, offset in rows:
                    if column == "page_id":
                        result.found_ids.add(page_id)
                    else:
                        result.found_titles.add(title)
                    if page_id not in wanted.setdefault(offset, []):
                        wanted[offset].append(page_id)
        for offset, page_ids in sorted(wanted.items()):
            (end,) = self._conn.execute(
                "SELECT MIN(offset) FROM streams WHERE offset > ?", (offset,)
            ).fetchone()
            result.spans.append(StreamSpan(offset, end, tuple(page_ids)))
        return result

    def close(self) -> None:
        """Close the SQLite connection."""
        self._conn.close()


def warn_missing(selection: ArticleSelection, lookup: IndexLookup, where: str) -> None:
    """Log the selected pages an index does not list (they cannot be read from that dump)."""
    missing = [str(i) for i in selection.page_ids if i not in lookup.found_ids]
    missing += [t for t in selection.titles if normalize_title(t) not in lookup.found_titles]
    if missing:
        log.warning("%s: %d selected pages are not in the dump: %s", where, len(missing), missing)
