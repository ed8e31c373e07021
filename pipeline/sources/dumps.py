"""Wikimedia XML dumps as a snapshot source.

Two ways in:

- **Remote** (:class:`DumpClient`): a dated dump directory such as
  ``https://dumps.wikimedia.org/enwiki/20240601/``. ``dumpstatus.json`` says whether the
  multistream job finished and names the files with their sizes and sha1; the
  ``...-multistream-index.txt.bz2`` index (lines ``offset:page_id:title``) is downloaded once,
  verified and turned into a SQLite lookup in ``cache_dir``; then only the bz2 streams (each a
  complete bz2 stream of up to 100 ``<page>`` elements) that hold the selected pages are fetched
  with HTTP ``Range`` requests. A server that ignores ``Range`` triggers one verified full
  download into ``cache_dir``; later reads seek in that file.
- **Local** (:func:`iter_dump_file`): a ``.xml``, ``.xml.bz2`` (single or multistream) or
  ``.xml.gz`` dump or Special:Export file, parsed in streaming mode whatever the export schema
  version (0.3 ... 0.11). A multistream file with its index beside it is read by seeking to the
  selected streams instead of scanning the whole file.

Which revision: for each page the latest revision saved at or before
``snapshot_cutoff(snapshot_date)`` (``None`` = the latest one in the file). A pages-articles dump
holds one revision per page, so a page edited after the cutoff has no usable revision and is
skipped (logged, counted in :attr:`SelectionReport.after_cutoff`).

Dump date vs snapshot date: a dump dated X holds, per page, the revision current when the dump
run read it, i.e. as of X (runs start on X and take days, so a few pages carry edits made on X
itself; those fall after the cutoff of X and are skipped). A remote dump therefore stands for
snapshot date X and that is the default; asking it for a later date is refused (it cannot know
later edits).

Redirects are never yielded as articles. A selected page that turns out to be a redirect (an
article renamed since the title list was written) is followed one hop, as MediaWiki does: its
target is read and yielded under its own title and id, unless the target is already in the
output. Pages outside the main namespace are skipped.

``--input`` (:meth:`DumpSource.from_input`): an ``http(s)://`` URL of a dump directory
(``<base>/<wiki>/<YYYYMMDD>/``, optionally ending in a file name such as ``dumpstatus.json``)
gives a remote source with base, wiki and date parsed from it (mirrors with a path prefix work);
anything else (or a ``file://`` URL) is a local dump file path.
"""

from __future__ import annotations

import bz2
import email.utils
import gzip
import hashlib
import html
import json
import logging
import os
import re
import sqlite3
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import unquote, urlsplit

import requests

from pipeline.errors import ConfigError, DumpNotReadyError, IntegrityError, SourceError
from pipeline.records import RawRevision
from pipeline.sources import ArticleSelection, normalize_title, parse_timestamp, snapshot_cutoff
from pipeline.sources.network import host_does_not_resolve, unknown_host_error

__all__ = [
    "DEFAULT_BASE_URL",
    "DumpClient",
    "DumpFetchStats",
    "DumpFile",
    "DumpPage",
    "DumpRevision",
    "DumpSource",
    "DumpStatus",
    "IndexEntry",
    "IndexLookup",
    "MultistreamPart",
    "SelectionReport",
    "StreamSpan",
    "find_streams",
    "index_path_for",
    "iter_dump_file",
    "mediawiki_sha1",
    "parse_dump_url",
    "parse_dumpstatus",
    "parse_index_line",
]

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://dumps.wikimedia.org"
MULTISTREAM_JOB = "articlesmultistreamdump"
RECOMBINE_JOB = "articlesmultistreamdumprecombine"

_CHUNK = 1 << 20
_WIKI_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_DATE_RE = re.compile(r"^\d{8}$")
# Combined files: enwiki-20240601-pages-articles-multistream.xml.bz2 / -index.txt.bz2;
# parts: enwiki-20240601-pages-articles-multistream3.xml-p1p41242.bz2 /
# enwiki-20240601-pages-articles-multistream-index3.txt-p1p41242.bz2.
_DATA_RE = re.compile(r"-pages-articles-multistream(?P<n>\d*)\.xml(?P<range>-p\d+p\d+)?\.bz2$")
_INDEX_RE = re.compile(
    r"-pages-articles-multistream-index(?P<n>\d*)\.txt(?P<range>-p\d+p\d+)?\.bz2$"
)
_REDIRECT_TEXT_RE = re.compile(r"^\s*#REDIRECT\s*:?\s*\[\[([^\]|]+)", re.IGNORECASE)
_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


# --------------------------------------------------------------------------- small helpers


def mediawiki_sha1(text: str) -> str:
    """MediaWiki's ``<sha1>`` of a revision text: sha1 of the UTF-8 bytes in base 36, 31 digits."""
    n = int(hashlib.sha1(text.encode("utf-8")).hexdigest(), 16)
    digits = []
    while n:
        n, d = divmod(n, 36)
        digits.append(_BASE36[d])
    return "".join(reversed(digits)).rjust(31, "0")


def _local_name(tag: str) -> str:
    # Export schemas differ only in their namespace URI; matching local names reads them all.
    return tag.rpartition("}")[2]


def _required_int(value: str | None, what: str) -> int:
    if value is None or not value.strip():
        raise ValueError(f"missing <{what}>")
    return int(value.strip())


def _redirect_target(title: str) -> str:
    # "Foo#Section" redirects to the page Foo.
    return normalize_title(title.partition("#")[0])


class _Matcher:
    """Precomputed :class:`ArticleSelection` test (``selection.matches`` rebuilds sets per call)."""

    def __init__(self, selection: ArticleSelection) -> None:
        self.all = selection.is_all
        self.ids = set(selection.page_ids)
        self.titles = {normalize_title(t) for t in selection.titles}

    def __call__(self, page_id: int, title: str) -> bool:
        return self.all or page_id in self.ids or normalize_title(title) in self.titles


# --------------------------------------------------------------------------- XML pages


@dataclass(frozen=True, slots=True)
class DumpRevision:
    """The revision of a page chosen for the cutoff, as the dump has it."""

    revision_id: int
    timestamp: str
    text: str | None  # None when the dump hides the text (<text deleted="deleted"/>)
    sha1: str | None  # MediaWiki base-36 sha1 when the dump carries one


@dataclass(frozen=True, slots=True)
class DumpPage:
    """One ``<page>`` of a dump, reduced to what a snapshot needs."""

    page_id: int
    title: str
    namespace: int
    redirect: str | None  # target title of a redirect page ("" if it names none), else None
    revision: DumpRevision | None  # latest at or before the cutoff; None when none qualifies
    revisions_seen: int


class _PageCollector:
    """Turns start/end events of an XML pull parser into :class:`DumpPage` objects.

    Keeps only the best revision of a selected page and clears every finished element, so
    memory stays flat on multi-gigabyte dumps and on pages with long histories.
    """

    def __init__(self, wanted: Callable[[int, str], bool], cutoff: datetime | None) -> None:
        self._wanted = wanted
        self._cutoff = cutoff
        self._stack: list[str] = []
        self._root: ET.Element | None = None
        self._namespaces: dict[str, int] = {}
        self._reset_page()

    def _reset_page(self) -> None:
        self._title: str | None = None
        self._ns: int | None = None
        self._page_id: int | None = None
        self._redirect: str | None = None
        self._selected: bool | None = None
        self._best: DumpRevision | None = None
        self._best_key: tuple[datetime, int] | None = None
        self._seen = 0

    def handle(self, event: str, elem: ET.Element) -> DumpPage | None:
        """Feed one pull-parser event; returns a page when a selected ``</page>`` closes."""
        tag = _local_name(elem.tag)
        if event == "start":
            if self._root is None:
                self._root = elem
            self._stack.append(tag)
            if tag == "page":
                self._reset_page()
            return None
        self._stack.pop()
        parent = self._stack[-1] if self._stack else ""
        if parent == "page":
            self._page_field(tag, elem)
        elif tag == "namespace" and parent == "namespaces":
            key = elem.get("key")
            if key is not None and elem.text:
                self._namespaces[elem.text.strip()] = int(key)
        elif tag == "page":
            page = self._finish_page()
            if self._root is not None:
                self._root.clear()  # drop finished pages (and siteinfo) from the tree
            return page
        return None

    def _page_field(self, tag: str, elem: ET.Element) -> None:
        if tag == "title":
            self._title = elem.text or ""
        elif tag == "ns":
            self._ns = _required_int(elem.text, "ns")
        elif tag == "id":
            self._page_id = _required_int(elem.text, "id")
        elif tag == "redirect":
            self._redirect = elem.get("title", "")
        elif tag == "revision":
            self._take_revision(elem)
            elem.clear()

    def _is_selected(self) -> bool:
        if self._selected is None:
            self._selected = self._wanted(
                self._page_id if self._page_id is not None else -1, self._title or ""
            )
        return self._selected

    def _take_revision(self, elem: ET.Element) -> None:
        self._seen += 1
        if not self._is_selected():
            return
        fields = {_local_name(child.tag): child for child in elem}
        ts_el = fields.get("timestamp")
        timestamp = (ts_el.text or "").strip() if ts_el is not None else ""
        if not timestamp:
            raise ValueError(f"revision of page {self._title!r} has no <timestamp>")
        when = parse_timestamp(timestamp)
        if self._cutoff is not None and when > self._cutoff:
            return
        id_el = fields.get("id")
        rev_id = _required_int(id_el.text if id_el is not None else None, "revision id")
        key = (when, rev_id)
        if self._best_key is not None and key < self._best_key:
            return
        text_el = fields.get("text")
        text = None if text_el is None or text_el.get("deleted") else (text_el.text or "")
        sha1_el = fields.get("sha1")
        sha1 = (sha1_el.text or "").strip() or None if sha1_el is not None else None
        self._best = DumpRevision(rev_id, timestamp, text, sha1)
        self._best_key = key

    def _finish_page(self) -> DumpPage | None:
        if self._title is None or self._page_id is None:
            raise ValueError("a <page> lacks <title> or <id>")
        if not self._is_selected():
            return None
        ns = self._ns if self._ns is not None else self._namespace_of(self._title)
        redirect = self._redirect
        if redirect is None and self._best is not None and self._best.text:
            # Schemas before 0.5 have no <redirect title=...>; the text itself says so.
            match = _REDIRECT_TEXT_RE.match(self._best.text)
            if match:
                redirect = match.group(1).strip()
        return DumpPage(self._page_id, self._title, ns, redirect, self._best, self._seen)

    def _namespace_of(self, title: str) -> int:
        # Schema 0.3 has no <ns>: the prefix of the title, as siteinfo names it, tells.
        prefix, sep, _ = title.partition(":")
        return self._namespaces.get(prefix, 0) if sep else 0


def _pull_pages(chunks: Iterable[bytes], collector: _PageCollector) -> Iterator[DumpPage]:
    parser = ET.XMLPullParser(events=("start", "end"))
    for chunk in chunks:
        parser.feed(chunk)
        for event, elem in parser.read_events():
            page = collector.handle(event, elem)
            if page is not None:
                yield page
    parser.close()  # raises ParseError when the document is unfinished (truncated file)
    for event, elem in parser.read_events():
        page = collector.handle(event, elem)
        if page is not None:
            yield page


def _decompress_stream(data: bytes) -> bytes:
    """The XML of one multistream bz2 stream; only the file's footer stream may follow it."""
    dec = bz2.BZ2Decompressor()
    xml = dec.decompress(data)
    if not dec.eof:
        raise EOFError("bz2 stream ends before its end-of-stream marker")
    rest = dec.unused_data
    while rest:
        # The last page stream of a file is followed by a stream holding "</mediawiki>".
        tail_dec = bz2.BZ2Decompressor()
        tail = tail_dec.decompress(rest)
        if not tail_dec.eof or tail.strip() not in (b"", b"</mediawiki>"):
            raise ValueError("unexpected data after the bz2 stream")
        rest = tail_dec.unused_data
    return xml


def _pages_in_stream(
    data: bytes, *, where: str, offset: int, page_ids: set[int], cutoff: datetime | None
) -> list[DumpPage]:
    """Decompress and parse one stream (a run of <page> elements without a root element)."""
    collector = _PageCollector(lambda page_id, _title: page_id in page_ids, cutoff)
    try:
        xml = _decompress_stream(data)
        pages = list(_pull_pages((b"<dump-stream>", xml, b"</dump-stream>"), collector))
    except (EOFError, OSError, ValueError, ET.ParseError) as exc:
        raise IntegrityError(
            f"{where}: bz2 stream at byte offset {offset} ({len(data)} bytes) is truncated or "
            f"corrupt: {exc}"
        ) from exc
    absent = page_ids - {p.page_id for p in pages}
    if absent:
        raise IntegrityError(
            f"{where}: the index puts pages {sorted(absent)} in the stream at byte offset "
            f"{offset}, but it does not hold them (index and dump file disagree)"
        )
    return pages


# --------------------------------------------------------------------------- multistream index


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
    match = _DATA_RE.search(name)
    if match is None:
        return None
    index_name = (
        name[: match.start()]
        + f"-pages-articles-multistream-index{match['n']}.txt{match['range'] or ''}.bz2"
    )
    return data_path.with_name(index_name)


def _read_index_entries(path: Path) -> Iterator[IndexEntry]:
    with bz2.open(path, "rt", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
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
        if hit:
            wanted.setdefault(entry.offset, []).append(entry.page_id)
    lookup.spans = [StreamSpan(off, ends.get(off), tuple(p)) for off, p in sorted(wanted.items())]
    return lookup


class _IndexDB:
    """The parsed index of one multistream file as SQLite, so later runs skip download and parse."""

    _FORMAT = "wikidrift-multistream-index-1"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)

    @classmethod
    def open_if_current(cls, path: Path, key: str) -> _IndexDB | None:
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
    def build(cls, index_file: Path, path: Path, key: str) -> _IndexDB:
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
            for entry in _read_index_entries(index_file):
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


# --------------------------------------------------------------------------- local files


def _open_decompressed(raw: IO[bytes]) -> IO[bytes]:
    magic = raw.read(3)
    raw.seek(0)
    if magic == b"BZh":
        return bz2.BZ2File(raw)  # reads multistream files too
    if magic[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw)
    return raw


def _iter_file_pages(
    path: Path, wanted: Callable[[int, str], bool], cutoff: datetime | None
) -> Iterator[DumpPage]:
    """Every selected page of a whole dump file, in one streaming pass."""
    size = path.stat().st_size
    with path.open("rb") as raw:
        stream = _open_decompressed(raw)

        def chunks() -> Iterator[bytes]:
            while chunk := stream.read(_CHUNK):
                yield chunk

        try:
            yield from _pull_pages(chunks(), _PageCollector(wanted, cutoff))
        except (EOFError, OSError, ValueError, ET.ParseError) as exc:
            raise IntegrityError(
                f"{path}: truncated or corrupt dump near byte {raw.tell()} of {size}: {exc}"
            ) from exc


def _iter_indexed_file(
    path: Path, index: Path, selection: ArticleSelection, cutoff: datetime | None
) -> Iterator[DumpPage]:
    """The selected pages of a local multistream file, reading only their streams."""
    lookup = find_streams(_read_index_entries(index), selection)
    _warn_missing(selection, lookup, str(index))
    size = path.stat().st_size
    with path.open("rb") as fh:
        for span in lookup.spans:
            end = span.end if span.end is not None else size
            fh.seek(span.offset)
            data = fh.read(end - span.offset)
            if len(data) != end - span.offset:
                raise IntegrityError(
                    f"{path}: file ends at byte {size}, before the stream at offset "
                    f"{span.offset} that {index.name} lists ends (truncated file?)"
                )
            yield from _pages_in_stream(
                data,
                where=str(path),
                offset=span.offset,
                page_ids=set(span.page_ids),
                cutoff=cutoff,
            )


def _warn_missing(selection: ArticleSelection, lookup: IndexLookup, where: str) -> None:
    missing = [str(i) for i in selection.page_ids if i not in lookup.found_ids]
    missing += [t for t in selection.titles if normalize_title(t) not in lookup.found_titles]
    if missing:
        log.warning("%s: %d selected pages are not in the dump: %s", where, len(missing), missing)


@dataclass
class SelectionReport:
    """What happened to the selection in the last read (for logs and benchmarks)."""

    yielded: int = 0
    redirects_followed: dict[str, str] = field(default_factory=dict)  # redirect -> target title
    skipped_redirects: list[str] = field(default_factory=list)
    skipped_namespace: list[str] = field(default_factory=list)
    after_cutoff: list[str] = field(default_factory=list)
    text_hidden: list[str] = field(default_factory=list)


def _select_revisions(
    read_pass: Callable[[ArticleSelection], Iterator[DumpPage]],
    selection: ArticleSelection,
    *,
    follow_redirects: bool,
    verify_sha1: bool,
    where: str,
    report: SelectionReport,
) -> Iterator[RawRevision]:
    """Yield the selected articles; follow redirects one hop with a second, targeted pass."""
    yielded_ids: set[int] = set()
    yielded_titles: set[str] = set()
    targets: dict[str, str] = {}

    def emit(page: DumpPage, *, first_pass: bool) -> RawRevision | None:
        if page.page_id in yielded_ids:
            return None
        if page.namespace != 0:
            report.skipped_namespace.append(page.title)
            log.info("%s: %r is in namespace %d, not an article", where, page.title, page.namespace)
            return None
        if page.redirect is not None:
            if first_pass and follow_redirects and page.redirect and not selection.is_all:
                targets.setdefault(_redirect_target(page.redirect), page.title)
            else:
                report.skipped_redirects.append(page.title)
            return None
        rev = page.revision
        if rev is None:
            report.after_cutoff.append(page.title)
            log.warning(
                "%s: %r has no revision at or before the cutoff in this dump (%d seen); skipped",
                where,
                page.title,
                page.revisions_seen,
            )
            return None
        if rev.text is None:
            report.text_hidden.append(page.title)
            log.warning("%s: text of %r revision %d is hidden", where, page.title, rev.revision_id)
            return None
        if verify_sha1 and rev.sha1 and mediawiki_sha1(rev.text) != rev.sha1:
            raise IntegrityError(
                f"{where}: text of {page.title!r} (page {page.page_id}, revision "
                f"{rev.revision_id}) does not match its <sha1> {rev.sha1}"
            )
        yielded_ids.add(page.page_id)
        yielded_titles.add(normalize_title(page.title))
        report.yielded += 1
        return RawRevision(
            page_id=page.page_id,
            title=page.title,
            revision_id=rev.revision_id,
            revision_timestamp=rev.timestamp,
            wikitext=rev.text,
            sha1=rev.sha1,
            namespace=page.namespace,
        )

    for page in read_pass(selection):
        raw = emit(page, first_pass=True)
        if raw is not None:
            yield raw
    pending = {t: src for t, src in targets.items() if t not in yielded_titles}
    if not pending:
        return
    log.info("%s: following %d redirects to their targets", where, len(pending))
    for page in read_pass(ArticleSelection(titles=tuple(sorted(pending)))):
        raw = emit(page, first_pass=False)
        if raw is not None:
            source = pending.pop(normalize_title(page.title), "")
            report.redirects_followed[source] = page.title
            yield raw
    for target, source in sorted(pending.items()):
        # Redirects whose target is missing, not an article, or already yielded under its id.
        if target not in yielded_titles:
            report.skipped_redirects.append(source)
            log.warning("%s: redirect %r -> %r leads to no article", where, source, target)


def iter_dump_file(
    path: Path,
    selection: ArticleSelection,
    snapshot_date: date | None,
    *,
    follow_redirects: bool = True,
    use_index: bool = True,
    verify_sha1: bool = True,
    at: datetime | None = None,
    report: SelectionReport | None = None,
) -> Iterator[RawRevision]:
    """Yield the selected main-namespace articles of a local dump or Special:Export file.

    Per page, the latest revision at or before ``snapshot_cutoff(snapshot_date)`` (None = the
    latest; ``at``, an aware datetime, overrides it with an exact instant). A multistream file
    with its ``-index.txt.bz2`` beside it is read by seeking to the selected streams. Truncated
    or corrupt input raises :class:`IntegrityError` naming the file and the byte offset."""
    path = Path(path)
    if not path.is_file():
        raise SourceError(f"dump file not found: {path}")
    if at is not None and at.tzinfo is None:
        raise ValueError("iter_dump_file(at=...) needs an aware datetime (UTC)")
    cutoff = at if at is not None else snapshot_cutoff(snapshot_date) if snapshot_date else None
    index = index_path_for(path) if use_index and not selection.is_all else None
    if index is not None and not index.is_file():
        index = None

    def read_pass(sel: ArticleSelection) -> Iterator[DumpPage]:
        if index is not None:
            return _iter_indexed_file(path, index, sel, cutoff)
        return _iter_file_pages(path, _Matcher(sel), cutoff)

    yield from _select_revisions(
        read_pass,
        selection,
        follow_redirects=follow_redirects,
        verify_sha1=verify_sha1,
        where=str(path),
        report=report if report is not None else SelectionReport(),
    )


# --------------------------------------------------------------------------- dumpstatus.json


@dataclass(frozen=True, slots=True)
class DumpFile:
    """A file listed in dumpstatus.json."""

    name: str
    url: str  # absolute
    size: int | None
    sha1: str | None
    md5: str | None


@dataclass(frozen=True, slots=True)
class MultistreamPart:
    """A multistream data file and its index (one pair, or one per part of a split dump)."""

    data: DumpFile
    index: DumpFile


@dataclass(frozen=True, slots=True)
class DumpStatus:
    """What dumpstatus.json says about the multistream files of one dump."""

    job: str  # the job whose files are read
    parts: tuple[MultistreamPart, ...]
    job_status: dict[str, str]  # every job -> its status

    @property
    def data_size(self) -> int:
        """Total bytes of the multistream data file(s)."""
        return sum(p.data.size or 0 for p in self.parts)


def _multistream_parts(job: dict, dir_url: str, job_name: str) -> tuple[MultistreamPart, ...]:
    files = job.get("files") or {}
    data: dict[tuple[str, str], DumpFile] = {}
    index: dict[tuple[str, str], DumpFile] = {}
    for name, meta in files.items():
        if "/" in name or name.startswith(".") or not isinstance(meta, dict):
            raise SourceError(f"dumpstatus.json: job {job_name} lists a bad file name {name!r}")
        size = meta.get("size")
        info = DumpFile(
            name=name,
            url=f"{dir_url}/{name}",  # mirrors keep the layout, so base/wiki/date/name is right
            size=int(size) if size is not None else None,
            sha1=meta.get("sha1"),
            md5=meta.get("md5"),
        )
        if m := _DATA_RE.search(name):
            data[(m["n"], m["range"] or "")] = info
        elif m := _INDEX_RE.search(name):
            index[(m["n"], m["range"] or "")] = info
    if ("", "") in data and ("", "") in index:
        return (MultistreamPart(data[("", "")], index[("", "")]),)
    keys = sorted(
        (k for k in data if k in index and k != ("", "")),
        key=lambda k: (int(k[0] or 0), int(re.findall(r"\d+", k[1])[0]) if k[1] else 0),
    )
    return tuple(MultistreamPart(data[k], index[k]) for k in keys)


def parse_dumpstatus(doc: dict, *, wiki: str, dump_date: str, dir_url: str) -> DumpStatus:
    """Pick the multistream files from a parsed dumpstatus.json, refusing an unfinished dump.

    Big wikis list part files under ``articlesmultistreamdump`` and the single combined file
    under ``articlesmultistreamdumprecombine`` (which finishes later); small wikis list the single
    file under ``articlesmultistreamdump``. The combined file is preferred; while it is not done
    the finished parts are used."""
    jobs = doc.get("jobs")
    if not isinstance(jobs, dict):
        raise SourceError(f"{dir_url}/dumpstatus.json has no 'jobs' object")
    statuses = {name: str(job.get("status", "?")) for name, job in jobs.items()}
    label = f"{wiki} dump {dump_date}"
    if MULTISTREAM_JOB not in jobs and RECOMBINE_JOB not in jobs:
        raise SourceError(f"{label}: dumpstatus.json has no {MULTISTREAM_JOB} job")
    for job_name in (RECOMBINE_JOB, MULTISTREAM_JOB):
        job = jobs.get(job_name)
        if job is None or statuses[job_name] != "done":
            continue
        parts = _multistream_parts(job, dir_url, job_name)
        if parts:
            if job_name == MULTISTREAM_JOB and RECOMBINE_JOB in jobs:
                log.info("%s: %s not done; reading %d part files", label, RECOMBINE_JOB, len(parts))
            return DumpStatus(job_name, parts, statuses)
    states = ", ".join(
        f"job {name} is {statuses[name]!r}"
        for name in (MULTISTREAM_JOB, RECOMBINE_JOB)
        if name in statuses
    )
    done = all(statuses.get(n) == "done" for n in (MULTISTREAM_JOB, RECOMBINE_JOB) if n in jobs)
    if done:
        raise SourceError(f"{label}: finished multistream jobs list no data/index file pair")
    raise DumpNotReadyError(f"{label} is not finished: {states}; pick an earlier dump date")


# --------------------------------------------------------------------------- remote client


@dataclass
class DumpFetchStats:
    """What a :class:`DumpClient` did over HTTP."""

    http_requests: int = 0
    bytes_fetched: int = 0  # every response body byte received (status, index, ranges, full)
    range_requests: int = 0
    range_bytes: int = 0
    index_downloads: int = 0
    index_bytes: int = 0
    full_download_used: bool = False  # the server ignored Range: the whole file was fetched
    full_download_bytes: int = 0
    streams_read: int = 0
    retries: int = 0
    slept_s: float = 0.0


def _parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


_CONTENT_RANGE_RE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")


class _RangeIgnored(Exception):
    """The server answered a Range request with 200 and the whole file."""

    def __init__(self, response: requests.Response) -> None:
        super().__init__("Range ignored")
        self.response = response


class DumpClient:
    """Reads selected pages of one dated Wikimedia multistream dump over HTTP.

    Fetches dumpstatus.json, the verified index (cached as SQLite in ``cache_dir``) and then only
    the bz2 streams that hold the selected pages, with ``Range`` requests."""

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        wiki: str = "enwiki",
        dump_date: str = "",
        *,
        cache_dir: Path,
        user_agent: str,
        session: requests.Session | None = None,
        max_retries: int = 5,
        backoff_s: float = 1.0,
        max_backoff_s: float = 120.0,
        timeout_s: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
        max_full_download_bytes: int | None = None,
    ) -> None:
        if not _WIKI_RE.match(wiki):
            raise ConfigError(f"dump wiki must be a database name like 'enwiki', got {wiki!r}")
        if not _DATE_RE.match(dump_date):
            raise ConfigError(f"dump date must be YYYYMMDD (a dated dump), got {dump_date!r}")
        if not user_agent.strip():
            raise ConfigError("dump user_agent is empty; Wikimedia asks for a contactable one")
        self.base_url = base_url.rstrip("/")
        self.wiki = wiki
        self.dump_date = dump_date
        self.cache_dir = Path(cache_dir)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.stats = DumpFetchStats()
        self._own_session = session is None
        self._session = session if session is not None else requests.Session()
        self._session.headers["User-Agent"] = user_agent
        self._max_retries = max_retries
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._timeout_s = timeout_s
        self._sleep = sleep
        self._max_full_download = max_full_download_bytes
        self._status: DumpStatus | None = None
        self._indexes: dict[str, _IndexDB] = {}
        self._local_files: dict[str, Path] = {}
        self._range_supported = True

    # ---- public

    @property
    def dir_url(self) -> str:
        """URL of the dump directory, ``<base>/<wiki>/<date>``."""
        return f"{self.base_url}/{self.wiki}/{self.dump_date}"

    @property
    def snapshot_date(self) -> date:
        """The date this dump stands for (see the module docstring)."""
        return datetime.strptime(self.dump_date, "%Y%m%d").date()

    def status(self) -> DumpStatus:
        """dumpstatus.json of this dump (fetched once per client)."""
        if self._status is None:
            url = f"{self.dir_url}/dumpstatus.json"
            body = self._get_body(url)
            try:
                doc = json.loads(body)
            except ValueError as exc:
                raise SourceError(f"{url} is not JSON: {exc}") from exc
            self._status = parse_dumpstatus(
                doc, wiki=self.wiki, dump_date=self.dump_date, dir_url=self.dir_url
            )
        return self._status

    @property
    def data_size(self) -> int:
        """Bytes of the whole multistream data file(s), for bytes-fetched comparisons."""
        return self.status().data_size

    def iter_pages(
        self, selection: ArticleSelection, cutoff: datetime | None = None
    ) -> Iterator[DumpPage]:
        """Selected pages (redirects and other namespaces included) with their cutoff revision."""
        status = self.status()
        if selection.is_all:
            for part in status.parts:
                path = self._full_file(part, None)
                yield from _iter_file_pages(path, lambda _i, _t: True, cutoff)
            return
        found = IndexLookup()
        for part in status.parts:
            lookup = self._index(part).lookup(selection)
            found.found_ids |= lookup.found_ids
            found.found_titles |= lookup.found_titles
            for span in lookup.spans:
                data = self._read_span(part, span)
                self.stats.streams_read += 1
                yield from _pages_in_stream(
                    data,
                    where=part.data.url,
                    offset=span.offset,
                    page_ids=set(span.page_ids),
                    cutoff=cutoff,
                )
        _warn_missing(selection, found, self.dir_url)

    def close(self) -> None:
        """Close cached SQLite lookups and the HTTP session this client opened."""
        for db in self._indexes.values():
            db.close()
        self._indexes.clear()
        if self._own_session:
            self._session.close()

    def __enter__(self) -> DumpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- index

    def _index(self, part: MultistreamPart) -> _IndexDB:
        name = part.index.name
        if name in self._indexes:
            return self._indexes[name]
        key = part.index.sha1 or f"size:{part.index.size}"
        db_path = self.cache_dir / f"{name}.sqlite"
        db = _IndexDB.open_if_current(db_path, key)
        if db is None:
            path = self._download(part.index, purpose="index")
            db = _IndexDB.build(path, db_path, key)
        self._indexes[name] = db
        return db

    # ---- stream bytes

    def _read_span(self, part: MultistreamPart, span: StreamSpan) -> bytes:
        end = span.end if span.end is not None else part.data.size
        local = self._local_data(part)
        if local is None and self._range_supported:
            try:
                return self._fetch_range(part.data, span.offset, end)
            except _RangeIgnored as ignored:
                self._range_supported = False
                log.warning(
                    "%s ignores Range requests; downloading the whole file (%s bytes) once",
                    part.data.url,
                    part.data.size,
                )
                local = self._full_file(part, ignored.response)
        if local is None:
            local = self._full_file(part, None)
        with local.open("rb") as fh:
            fh.seek(span.offset)
            data = fh.read((end - span.offset) if end is not None else -1)
        if end is not None and len(data) != end - span.offset:
            raise IntegrityError(f"{local}: shorter than the stream at offset {span.offset}")
        return data

    def _local_data(self, part: MultistreamPart) -> Path | None:
        name = part.data.name
        if name not in self._local_files and self._is_verified(part.data):
            self._local_files[name] = self.cache_dir / name
        return self._local_files.get(name)

    def _full_file(self, part: MultistreamPart, first: requests.Response | None) -> Path:
        local = self._local_data(part)
        if local is not None:
            if first is not None:
                first.close()
            return local
        size = part.data.size
        if self._max_full_download is not None and (size or 0) > self._max_full_download:
            if first is not None:
                first.close()
            raise SourceError(
                f"{part.data.url} needs a full download of {size} bytes (server ignores Range or "
                f"the whole dump was selected), over the {self._max_full_download} byte limit"
            )
        path = self._download(part.data, purpose="full", first=first)
        self.stats.full_download_used = True
        self._local_files[part.data.name] = path
        return path

    def _fetch_range(self, info: DumpFile, start: int, end: int | None) -> bytes:
        """Bytes [start, end) of a remote file; raises _RangeIgnored on a 200 answer."""
        spec = f"bytes={start}-{end - 1}" if end is not None else f"bytes={start}-"
        where = f"{info.url} (stream at byte offset {start})"
        last_error = ""
        for attempt in range(self._max_retries + 1):
            resp = self._get(info.url, headers={"Range": spec})
            self.stats.range_requests += 1
            if resp.status_code == 200:
                raise _RangeIgnored(resp)
            if resp.status_code != 206:
                resp.close()
                raise SourceError(f"{where}: expected 206 for {spec}, got HTTP {resp.status_code}")
            with resp:
                first, last = self._check_content_range(resp, info, start, end, where)
                expected = last - first + 1
                chunks: list[bytes] = []
                got = 0
                try:
                    for chunk in resp.iter_content(_CHUNK):
                        chunks.append(chunk)
                        got += len(chunk)
                        self.stats.bytes_fetched += len(chunk)
                        self.stats.range_bytes += len(chunk)
                except requests.RequestException as exc:
                    last_error = f"connection dropped after {got} of {expected} bytes ({exc})"
                else:
                    if got == expected:
                        return b"".join(chunks)
                    last_error = f"got {got} of {expected} bytes"
            if attempt < self._max_retries:
                self._wait(attempt, None, f"{where}: {last_error}")
        raise IntegrityError(f"{where}: truncated response, {last_error}")

    @staticmethod
    def _check_content_range(
        resp: requests.Response, info: DumpFile, start: int, end: int | None, where: str
    ) -> tuple[int, int]:
        header = resp.headers.get("Content-Range", "")
        match = _CONTENT_RANGE_RE.match(header.strip())
        if match is None:
            raise IntegrityError(f"{where}: 206 without a usable Content-Range ({header!r})")
        first, last, total = int(match[1]), int(match[2]), match[3]
        want_last = (end - 1) if end is not None else last
        if first != start or last != want_last:
            raise IntegrityError(
                f"{where}: asked for bytes {start}-{want_last}, server sent {first}-{last}"
            )
        if total != "*" and info.size is not None and int(total) != info.size:
            raise IntegrityError(
                f"{where}: server says the file has {total} bytes, dumpstatus.json {info.size}"
            )
        length = resp.headers.get("Content-Length")
        if length is not None and int(length) != last - first + 1:
            raise IntegrityError(
                f"{where}: Content-Length {length} does not match Content-Range {header}"
            )
        return first, last

    # ---- whole files

    def _marker(self, info: DumpFile) -> Path:
        return self.cache_dir / f"{info.name}.verified"

    def _is_verified(self, info: DumpFile) -> bool:
        path = self.cache_dir / info.name
        marker = self._marker(info)
        if not path.is_file() or not marker.is_file():
            return False
        if info.size is not None and path.stat().st_size != info.size:
            return False
        return marker.read_text().strip() == (info.sha1 or info.md5 or "")

    def _download(
        self, info: DumpFile, *, purpose: str, first: requests.Response | None = None
    ) -> Path:
        """Download a file into cache_dir via ``<name>.part`` (resumed with Range when present),
        check size and sha1 against dumpstatus.json, then rename it into place."""
        dest = self.cache_dir / info.name
        if self._is_verified(info):
            if first is not None:
                first.close()
            return dest
        part = dest.with_name(dest.name + ".part")
        last_error = ""
        for attempt in range(self._max_retries + 1):
            have = part.stat().st_size if part.exists() else 0
            if info.size is not None and have > info.size:
                part.unlink()
                have = 0
            if info.size is not None and have == info.size:
                if first is not None:
                    first.close()
                break
            if first is not None:
                resp, first = first, None
                if have:
                    part.unlink()
                    have = 0
            else:
                headers = {"Range": f"bytes={have}-"} if have else {}
                resp = self._get(info.url, headers=headers)
            with resp:
                append = resp.status_code == 206 and have > 0
                if append:
                    self._check_content_range(
                        resp, info, have, info.size, f"{info.url} (resuming at byte {have})"
                    )
                elif resp.status_code != 200:
                    raise SourceError(f"{info.url}: HTTP {resp.status_code}")
                if purpose == "index":
                    self.stats.index_downloads += 1
                try:
                    with part.open("ab" if append else "wb") as fh:
                        for chunk in resp.iter_content(_CHUNK):
                            fh.write(chunk)
                            self.stats.bytes_fetched += len(chunk)
                            if purpose == "index":
                                self.stats.index_bytes += len(chunk)
                            else:
                                self.stats.full_download_bytes += len(chunk)
                except requests.RequestException as exc:
                    last_error = f"connection dropped ({exc})"
                    if attempt < self._max_retries:
                        self._wait(attempt, None, f"{info.url}: {last_error}")
                    continue
            if info.size is None or part.stat().st_size == info.size:
                break
            last_error = f"got {part.stat().st_size} of {info.size} bytes"
            if attempt < self._max_retries:
                self._wait(attempt, None, f"{info.url}: {last_error}")
        else:
            raise IntegrityError(f"{info.url}: download incomplete after retries, {last_error}")
        self._verify(part, info)
        os.replace(part, dest)
        marker = self._marker(info)
        tmp_marker = marker.with_name(marker.name + ".tmp")
        tmp_marker.write_text(info.sha1 or info.md5 or "")
        os.replace(tmp_marker, marker)
        return dest

    @staticmethod
    def _verify(path: Path, info: DumpFile) -> None:
        size = path.stat().st_size
        problems = []
        if info.size is not None and size != info.size:
            problems.append(f"size {size} != {info.size}")
        algo, expected = ("sha1", info.sha1) if info.sha1 else ("md5", info.md5)
        if expected:
            digest = hashlib.new(algo)
            with path.open("rb") as fh:
                while chunk := fh.read(_CHUNK):
                    digest.update(chunk)
            if digest.hexdigest() != expected.lower():
                problems.append(f"{algo} {digest.hexdigest()} != {expected} (dumpstatus.json)")
        if problems:
            path.unlink(missing_ok=True)  # a bad .part must not be resumed
            raise IntegrityError(f"{info.url}: downloaded file is corrupt: {'; '.join(problems)}")

    # ---- HTTP

    def _get_body(self, url: str) -> bytes:
        with self._get(url) as resp:
            if resp.status_code != 200:
                raise SourceError(f"{url}: HTTP {resp.status_code}")
            body = resp.content
        self.stats.bytes_fetched += len(body)
        return body

    def _get(self, url: str, headers: dict[str, str] | None = None) -> requests.Response:
        """GET (streamed) with retries on 429, 5xx and connection errors; honours Retry-After."""
        for attempt in range(self._max_retries + 1):
            # identity: a compressed transfer would break byte ranges and Content-Length checks
            request_headers = {"Accept-Encoding": "identity", **(headers or {})}
            try:
                resp = self._session.get(
                    url, headers=request_headers, stream=True, timeout=self._timeout_s
                )
            except (requests.ConnectionError, requests.Timeout) as exc:
                if host_does_not_resolve(exc):
                    raise unknown_host_error("dump download", url) from exc
                if attempt >= self._max_retries:
                    raise SourceError(
                        f"{url}: unreachable after {attempt + 1} tries: {exc}"
                    ) from exc
                self._wait(attempt, None, f"{url}: {exc}")
                continue
            self.stats.http_requests += 1
            status = resp.status_code
            if status == 429 or status >= 500:
                retry_after = _parse_retry_after(resp.headers.get("Retry-After"))
                resp.close()
                if attempt >= self._max_retries:
                    raise SourceError(f"{url}: HTTP {status} after {attempt + 1} tries")
                self._wait(attempt, retry_after, f"{url}: HTTP {status}")
                continue
            if status == 404:
                resp.close()
                raise SourceError(f"{url}: not found (404); check the wiki name and dump date")
            if status == 416:
                resp.close()
                raise IntegrityError(f"{url}: {headers} not satisfiable (index and file disagree)")
            if status >= 400:
                resp.close()
                raise SourceError(f"{url}: HTTP {status}")
            return resp
        raise AssertionError("unreachable")  # pragma: no cover

    def _wait(self, attempt: int, retry_after: float | None, why: str) -> None:
        delay = retry_after if retry_after is not None else self._backoff_s * (2**attempt)
        delay = min(delay, self._max_backoff_s)
        log.info("retrying in %.1fs: %s", delay, why)
        self.stats.retries += 1
        self.stats.slept_s += delay
        self._sleep(delay)


# --------------------------------------------------------------------------- the source


def parse_dump_url(url: str) -> tuple[str, str, str]:
    """Split a dump directory URL into (base_url, wiki, dump_date).

    ``https://dumps.wikimedia.org/enwiki/20240601/`` -> (``https://dumps.wikimedia.org``,
    ``enwiki``, ``20240601``); a trailing file name and a mirror's path prefix are allowed."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"not an http(s) dump URL: {url!r}")
    segments = [unquote(s) for s in parts.path.split("/") if s]
    for i in range(len(segments) - 1, 0, -1):
        if _DATE_RE.match(segments[i]) and _WIKI_RE.match(segments[i - 1]):
            prefix = "/".join(segments[: i - 1])
            base = f"{parts.scheme}://{parts.netloc}" + (f"/{prefix}" if prefix else "")
            return base, segments[i - 1], segments[i]
    if "latest" in segments:
        raise ConfigError(f"{url}: use a dated dump directory (YYYYMMDD), not 'latest'")
    raise ConfigError(f"{url}: expected a dump directory like {DEFAULT_BASE_URL}/enwiki/20240601/")


class DumpSource:
    """:class:`pipeline.sources.SnapshotSource` over a remote dump or a local dump file."""

    def __init__(
        self,
        *,
        client: DumpClient | None = None,
        path: Path | None = None,
        follow_redirects: bool = True,
        verify_sha1: bool = True,
    ) -> None:
        if (client is None) == (path is None):
            raise ConfigError("DumpSource needs exactly one of a DumpClient or a local path")
        self.client = client
        self.path = Path(path) if path is not None else None
        self.follow_redirects = follow_redirects
        self.verify_sha1 = verify_sha1
        self.report = SelectionReport()

    @classmethod
    def remote(
        cls, url: str, *, cache_dir: Path, user_agent: str, **client_options: Any
    ) -> DumpSource:
        """A source over the dated dump directory at ``url`` (see :func:`parse_dump_url`)."""
        base, wiki, dump_date = parse_dump_url(url)
        client = DumpClient(
            base, wiki, dump_date, cache_dir=cache_dir, user_agent=user_agent, **client_options
        )
        return cls(client=client)

    @classmethod
    def local(cls, path: Path | str, **options: bool) -> DumpSource:
        """A source over a local dump or Special:Export file."""
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"dump file not found: {path}")
        return cls(path=path, **options)

    @classmethod
    def from_input(
        cls, value: str, *, cache_dir: Path, user_agent: str, **client_options: Any
    ) -> DumpSource:
        """Map the CLI's ``--input``: an http(s) URL of a dump directory, else a local file."""
        scheme = urlsplit(value).scheme
        if scheme in ("http", "https"):
            return cls.remote(value, cache_dir=cache_dir, user_agent=user_agent, **client_options)
        if scheme == "file":
            return cls.local(Path(unquote(urlsplit(value).path)))
        return cls.local(Path(value).expanduser())

    @property
    def dump_date(self) -> date | None:
        """The date a remote dump stands for; None for local files."""
        return self.client.snapshot_date if self.client is not None else None

    def not_delivered(self) -> list[str]:
        """Selected pages the last run did not yield, as "title (reason)"."""
        r = self.report
        return (
            [f"{t} (redirect not followed)" for t in r.skipped_redirects]
            + [f"{t} (not an article namespace)" for t in r.skipped_namespace]
            + [f"{t} (only a revision after the snapshot date)" for t in r.after_cutoff]
            + [f"{t} (text hidden)" for t in r.text_hidden]
        )

    def iter_revisions(
        self, selection: ArticleSelection, snapshot_date: date | None = None
    ) -> Iterator[RawRevision]:
        """The selected articles as current at ``snapshot_date`` (remote default: the dump
        date; local default None: the latest revision in the file)."""
        self.report = SelectionReport()
        if self.path is not None:
            yield from iter_dump_file(
                self.path,
                selection,
                snapshot_date,
                follow_redirects=self.follow_redirects,
                verify_sha1=self.verify_sha1,
                report=self.report,
            )
            return
        client = self.client
        assert client is not None
        if snapshot_date is None:
            snapshot_date = client.snapshot_date
        elif snapshot_date > client.snapshot_date:
            raise SourceError(
                f"dump {client.wiki} {client.dump_date} cannot give the revisions current at "
                f"{snapshot_date.isoformat()}: it only knows edits up to its own date"
            )
        cutoff = snapshot_cutoff(snapshot_date)
        yield from _select_revisions(
            lambda sel: client.iter_pages(sel, cutoff),
            selection,
            follow_redirects=self.follow_redirects,
            verify_sha1=self.verify_sha1,
            where=client.dir_url,
            report=self.report,
        )

    def close(self) -> None:
        """Release the remote client's connections and cached lookups."""
        if self.client is not None:
            self.client.close()
