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

Every input is bounded (:class:`pipeline.sources.limits.SourceLimits`): a bz2 stream is
inflated in small steps and dropped past ``max_stream_bytes``; the parser never holds more
than ``max_page_xml_bytes`` of one page (of one revision); wikitext over
``max_wikitext_bytes`` is not delivered. Such a page or stream is skipped and listed by
:meth:`DumpSource.not_delivered` with the reason; the read goes on with the next page.

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
import itertools
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
from pipeline.sources.limits import DEFAULT_LIMITS, SourceLimits
from pipeline.sources.network import (
    Deadline,
    DeadlineExceededError,
    InputLimitError,
    bounded_session,
    host_does_not_resolve,
    iter_raw,
    open_response,
    read_body,
    unknown_host_error,
)

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
    skip_reason: str | None = None  # set when the page went over an input limit (not read)


class StreamTooLargeError(InputLimitError):
    """A bz2 stream is (or inflates to) more bytes than ``limits.max_stream_bytes``."""


def _skipped(page_ids: Iterable[int], reason: str) -> list[DumpPage]:
    """Placeholder pages for selected pages that could not be read, with the reason."""
    return [DumpPage(pid, f"page id {pid}", 0, None, None, 0, reason) for pid in page_ids]


class _PageCollector:
    """Turns start/end events of an XML pull parser into :class:`DumpPage` objects.

    Keeps only the best revision of a selected page and detaches every finished child of a
    ``<page>`` from it (a cleared element left in place still costs ~100 bytes: ten million
    tiny revisions held 1 GB), so memory stays flat on multi-gigabyte dumps and on pages with
    long histories. A revision
    text over ``max_text_bytes`` is dropped at once; the page is then skipped with a reason.
    ``units`` counts finished revisions and pages (the caller bounds the bytes between two).
    """

    def __init__(
        self,
        wanted: Callable[[int, str], bool],
        cutoff: datetime | None,
        max_text_bytes: int = DEFAULT_LIMITS.max_wikitext_bytes,
    ) -> None:
        self._wanted = wanted
        self._cutoff = cutoff
        self._max_text_bytes = max_text_bytes
        self._namespaces: dict[str, int] = {}
        self.units = 0
        self.restart()

    def restart(self) -> None:
        """Forget the document structure (a new parser resumes after a skipped page)."""
        self._stack: list[str] = []
        self._root: ET.Element | None = None
        self._page_elem: ET.Element | None = None
        self._reset_page()

    @property
    def in_page(self) -> bool:
        """Whether a ``<page>`` is open."""
        return "page" in self._stack

    def abandon_page(self, reason: str) -> DumpPage | None:
        """The open page, marked skipped with ``reason``, when it is (or may be) selected."""
        if self._page_id is None and not self._title:
            return DumpPage(-1, "an unidentified page", 0, None, None, self._seen, reason)
        if not self._is_selected():
            return None
        page_id = self._page_id if self._page_id is not None else -1
        title = self._title or f"page id {page_id}"
        return DumpPage(page_id, title, 0, None, None, self._seen, reason)

    def _reset_page(self) -> None:
        self._title: str | None = None
        self._ns: int | None = None
        self._page_id: int | None = None
        self._redirect: str | None = None
        self._selected: bool | None = None
        self._best: DumpRevision | None = None
        self._best_key: tuple[datetime, int] | None = None
        self._best_too_large: str | None = None
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
                self._page_elem = elem
            return None
        self._stack.pop()
        parent = self._stack[-1] if self._stack else ""
        if parent == "page":
            self._page_field(tag, elem)
            if self._page_elem is not None:
                self._page_elem.remove(elem)  # read: drop it from the tree
        elif tag == "namespace" and parent == "namespaces":
            key = elem.get("key")
            if key is not None and elem.text:
                self._namespaces[elem.text.strip()] = int(key)
        elif tag == "page":
            self.units += 1
            self._page_elem = None
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
            self.units += 1
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
        self._best_too_large = None
        if text is not None and len(text) * 4 > self._max_text_bytes:
            size = len(text.encode("utf-8"))
            if size > self._max_text_bytes:
                self._best_too_large = (
                    f"wikitext of revision {rev_id} is {size} bytes, over the "
                    f"{self._max_text_bytes} byte limit (limits.max_wikitext_bytes)"
                )
                text = None  # not kept: the page is skipped unless a later revision wins
        self._best = DumpRevision(rev_id, timestamp, text, sha1)
        self._best_key = key

    def _finish_page(self) -> DumpPage | None:
        if self._title is None or self._page_id is None:
            raise ValueError("a <page> lacks <title> or <id>")
        if not self._is_selected():
            return None
        ns = self._ns if self._ns is not None else self._namespace_of(self._title)
        if self._best_too_large is not None:
            return DumpPage(
                self._page_id, self._title, ns, None, None, self._seen, self._best_too_large
            )
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


_FEED = 256 * 1024  # bytes fed to the parser at a time (the page limit's granularity)


def _pull_pages(
    chunks: Iterable[bytes],
    collector: _PageCollector,
    *,
    max_page_bytes: int,
    resume: bytes,
    tail: bytes = b"",
    where: str = "",
) -> Iterator[DumpPage]:
    """Pages parsed from XML ``chunks``, never holding more than about ``max_page_bytes`` of
    one page (of one revision) in memory.

    A page that runs past the limit is skipped (yielded with ``skip_reason`` when selected):
    the bytes up to its ``</page>`` are dropped unparsed and a fresh parser, fed ``resume``
    (a root start tag), goes on with the next page. ``</page>`` cannot occur inside a page's
    text (the dump escapes ``<``), so the resync is exact. ``tail`` closes the document."""
    parser = ET.XMLPullParser(events=("start", "end"))
    pending = 0  # bytes fed since the last finished revision or page
    skipping: bytes | None = None  # the tag to resync on while dropping bytes
    carry = b""
    fed = 0
    for chunk in chunks:
        for at in range(0, len(chunk), _FEED):
            piece = chunk[at : at + _FEED]
            if skipping is not None:
                buf = carry + piece
                found = buf.find(skipping)
                if found < 0:
                    carry = buf[-len(skipping) :]
                    fed += len(piece)
                    continue
                # After "</page>" the next page starts; at "<page>" it starts right there.
                piece = buf[found + len(skipping) :] if skipping == b"</page>" else buf[found:]
                skipping, carry, pending = None, b"", 0
                parser = ET.XMLPullParser(events=("start", "end"))
                collector.restart()
                parser.feed(resume)
            units = collector.units
            parser.feed(piece)
            fed += len(piece)
            for event, elem in parser.read_events():
                page = collector.handle(event, elem)
                if page is not None:
                    yield page
            pending = 0 if collector.units != units else pending + len(piece)
            if pending > max_page_bytes:
                reason = (
                    f"page XML over the {max_page_bytes} byte limit near decompressed byte "
                    f"{fed} (limits.max_page_xml_bytes)"
                )
                log.warning("%s: %s; skipped", where or "dump", reason)
                skipped = collector.abandon_page(reason) if collector.in_page else None
                skipping = b"</page>" if collector.in_page else b"<page>"
                if skipped is not None:
                    yield skipped
    if skipping is not None:
        return  # the input ended inside the skipped page
    parser.feed(tail)
    parser.close()  # raises ParseError when the document is unfinished (truncated file)
    for event, elem in parser.read_events():
        page = collector.handle(event, elem)
        if page is not None:
            yield page


def _inflate_stream(data: bytes, max_bytes: int, offset: int) -> Iterator[bytes]:
    """The XML of one multistream bz2 stream, in bounded pieces; only the file's footer
    stream may follow it. Raises :class:`StreamTooLargeError` past ``max_bytes``."""
    if len(data) > max_bytes:
        raise StreamTooLargeError(
            f"bz2 stream at byte offset {offset} is {len(data)} bytes compressed, over the "
            f"{max_bytes} byte limit (limits.max_stream_bytes)"
        )
    dec = bz2.BZ2Decompressor()
    total = 0
    pending = data
    while not dec.eof:
        if pending or not dec.needs_input:
            # max_length bounds one step's output: a bomb never materializes.
            out = dec.decompress(pending, max_length=_FEED)
            pending = b""
        else:
            raise EOFError("bz2 stream ends before its end-of-stream marker")
        total += len(out)
        if total > max_bytes:
            raise StreamTooLargeError(
                f"bz2 stream at byte offset {offset} inflates past the {max_bytes} byte limit "
                f"({len(data)} bytes compressed; limits.max_stream_bytes)"
            )
        if out:
            yield out
    rest = dec.unused_data
    while rest:
        # The last page stream of a file is followed by a stream holding "</mediawiki>".
        tail_dec = bz2.BZ2Decompressor()
        tail = tail_dec.decompress(rest, max_length=64)
        if not tail_dec.eof or tail.strip() not in (b"", b"</mediawiki>"):
            raise ValueError("unexpected data after the bz2 stream")
        rest = tail_dec.unused_data


def _pages_in_stream(
    data: bytes,
    *,
    where: str,
    offset: int,
    page_ids: set[int],
    cutoff: datetime | None,
    limits: SourceLimits = DEFAULT_LIMITS,
) -> list[DumpPage]:
    """Decompress and parse one stream (a run of <page> elements without a root element).
    A stream over ``limits.max_stream_bytes`` yields its selected pages as skipped."""
    collector = _PageCollector(
        lambda page_id, _title: page_id in page_ids, cutoff, limits.max_wikitext_bytes
    )
    pages: list[DumpPage] = []
    try:
        for page in _pull_pages(
            itertools.chain(
                [b"<dump-stream>"], _inflate_stream(data, limits.max_stream_bytes, offset)
            ),
            collector,
            max_page_bytes=limits.max_page_xml_bytes,
            resume=b"<dump-stream>",
            tail=b"</dump-stream>",
            where=where,
        ):
            pages.append(page)
    except StreamTooLargeError as exc:
        log.warning("%s: %s; its pages are skipped", where, exc)
        done = {p.page_id for p in pages}
        return pages + _skipped(sorted(page_ids - done), str(exc))
    except (EOFError, OSError, ValueError, ET.ParseError) as exc:
        raise IntegrityError(
            f"{where}: bz2 stream at byte offset {offset} ({len(data)} bytes) is truncated or "
            f"corrupt: {exc}"
        ) from exc
    absent = page_ids - {p.page_id for p in pages}
    unidentified = [p for p in pages if p.page_id == -1]
    if absent and unidentified:
        # A page too large to read its id: the selected pages not seen may be that one.
        pages = [p for p in pages if p.page_id != -1]
        return pages + _skipped(sorted(absent), unidentified[0].skip_reason or "over a limit")
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


# An index line is "offset:page_id:title"; titles are at most 255 bytes (escaped: ~1.5 KB).
_MAX_INDEX_LINE = 4096
_MAX_BLANK_INDEX_LINES = 1000


def _read_index_entries(path: Path) -> Iterator[IndexEntry]:
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


class _Inflated(Exception):
    """A whole-file read went over its inflation bound (message: what and where)."""


def _iter_file_pages(
    path: Path,
    wanted: Callable[[int, str], bool],
    cutoff: datetime | None,
    limits: SourceLimits = DEFAULT_LIMITS,
) -> Iterator[DumpPage]:
    """Every selected page of a whole dump file, in one streaming pass (pages over the
    limits come back skipped; memory stays bounded by ``limits.max_page_xml_bytes``). Reading
    stops, with a warning, once more than ``limits.max_stream_bytes`` were inflated at over
    ``limits.max_inflation_ratio`` times the compressed bytes read: a bomb here can only be
    passed by inflating and parsing it (3-15 MB/s for tiny elements), while real dumps
    inflate 5-20x. The selected pages not seen by then are not delivered."""
    size = path.stat().st_size
    with path.open("rb") as raw:
        stream = _open_decompressed(raw)

        def chunks() -> Iterator[bytes]:
            inflated = 0
            while chunk := stream.read(_CHUNK):
                inflated += len(chunk)
                read = max(raw.tell(), 1)
                if (
                    inflated > limits.max_stream_bytes
                    and inflated > limits.max_inflation_ratio * read
                ):
                    raise _Inflated(
                        f"{path}: stopped reading at byte {read} of {size}: it inflated to "
                        f"{inflated} bytes, over limits.max_stream_bytes and over "
                        f"{limits.max_inflation_ratio}x (limits.max_inflation_ratio); "
                        "the selected pages after this point are not delivered"
                    )
                yield chunk

        try:
            yield from _pull_pages(
                chunks(),
                _PageCollector(wanted, cutoff, limits.max_wikitext_bytes),
                max_page_bytes=limits.max_page_xml_bytes,
                resume=b"<mediawiki>",  # the file's own </mediawiki> closes it
                where=str(path),
            )
        except _Inflated as exc:
            log.warning("%s", exc)
        except (EOFError, OSError, ValueError, ET.ParseError) as exc:
            raise IntegrityError(
                f"{path}: truncated or corrupt dump near byte {raw.tell()} of {size}: {exc}"
            ) from exc


def _iter_indexed_file(
    path: Path,
    index: Path,
    selection: ArticleSelection,
    cutoff: datetime | None,
    limits: SourceLimits = DEFAULT_LIMITS,
) -> Iterator[DumpPage]:
    """The selected pages of a local multistream file, reading only their streams."""
    lookup = find_streams(_read_index_entries(index), selection)
    _warn_missing(selection, lookup, str(index))
    size = path.stat().st_size
    with path.open("rb") as fh:
        for span in lookup.spans:
            end = span.end if span.end is not None else size
            if end - span.offset > limits.max_stream_bytes:
                reason = (
                    f"bz2 stream at byte offset {span.offset} is {end - span.offset} bytes, "
                    f"over the {limits.max_stream_bytes} byte limit (limits.max_stream_bytes)"
                )
                log.warning("%s: %s; its pages are skipped", path, reason)
                yield from _skipped(span.page_ids, reason)
                continue
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
                limits=limits,
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
    over_limit: list[str] = field(default_factory=list)  # "title (what went over which limit)"


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
        if page.skip_reason is not None:
            report.over_limit.append(f"{page.title} ({page.skip_reason})")
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
    limits: SourceLimits = DEFAULT_LIMITS,
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
            return _iter_indexed_file(path, index, sel, cutoff, limits)
        return _iter_file_pages(path, _Matcher(sel), cutoff, limits)

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


# A streamed response and the deadline that can cut it.
_Opened = tuple[requests.Response, Deadline]


def _close(opened: _Opened | None) -> None:
    """Close a streamed response and stop its deadline's watchdog."""
    if opened is not None:
        opened[1].cancel()
        opened[0].close()


_CONTENT_RANGE_RE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")


class _RangeIgnored(Exception):
    """The server answered a Range request with 200 and the whole file."""

    def __init__(self, response: requests.Response, deadline: Deadline) -> None:
        super().__init__("Range ignored")
        self.response = response
        self.deadline = deadline


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
        limits: SourceLimits = DEFAULT_LIMITS,
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
        self.limits = limits
        self._own_session = session is None
        self._session = bounded_session(session)
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
                yield from _iter_file_pages(path, lambda _i, _t: True, cutoff, self.limits)
            return
        found = IndexLookup()
        for part in status.parts:
            lookup = self._index(part).lookup(selection)
            found.found_ids |= lookup.found_ids
            found.found_titles |= lookup.found_titles
            for span in lookup.spans:
                try:
                    data = self._read_span(part, span)
                except StreamTooLargeError as exc:
                    log.warning("%s: %s; its pages are skipped", part.data.url, exc)
                    yield from _skipped(span.page_ids, str(exc))
                    continue
                self.stats.streams_read += 1
                yield from _pages_in_stream(
                    data,
                    where=part.data.url,
                    offset=span.offset,
                    page_ids=set(span.page_ids),
                    cutoff=cutoff,
                    limits=self.limits,
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
        if end is not None and end - span.offset > self.limits.max_stream_bytes:
            # Compressed bytes never outnumber the XML they inflate to: over either way.
            raise StreamTooLargeError(
                f"bz2 stream at byte offset {span.offset} is {end - span.offset} bytes, over "
                f"the {self.limits.max_stream_bytes} byte limit (limits.max_stream_bytes)"
            )
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
                local = self._full_file(part, (ignored.response, ignored.deadline))
        if local is None:
            local = self._full_file(part, None)
        with local.open("rb") as fh:
            fh.seek(span.offset)
            data = fh.read(
                (end - span.offset) if end is not None else self.limits.max_stream_bytes + 1
            )
            if end is None and len(data) > self.limits.max_stream_bytes:
                raise StreamTooLargeError(
                    f"bz2 stream at byte offset {span.offset} runs past the "
                    f"{self.limits.max_stream_bytes} byte limit (limits.max_stream_bytes)"
                )
        if end is not None and len(data) != end - span.offset:
            raise IntegrityError(f"{local}: shorter than the stream at offset {span.offset}")
        return data

    def _local_data(self, part: MultistreamPart) -> Path | None:
        name = part.data.name
        if name not in self._local_files and self._is_verified(part.data):
            self._local_files[name] = self.cache_dir / name
        return self._local_files.get(name)

    def _full_file(self, part: MultistreamPart, first: _Opened | None) -> Path:
        local = self._local_data(part)
        if local is not None:
            _close(first)
            return local
        size = part.data.size
        if self._max_full_download is not None and (size or 0) > self._max_full_download:
            _close(first)
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
            resp, deadline = self._get(info.url, headers={"Range": spec})
            self.stats.range_requests += 1
            if resp.status_code == 200:
                raise _RangeIgnored(resp, deadline)
            if resp.status_code != 206:
                _close((resp, deadline))
                raise SourceError(f"{where}: expected 206 for {spec}, got HTTP {resp.status_code}")
            try:
                first, last = self._check_content_range(resp, info, start, end, where)
                expected = last - first + 1
                chunks: list[bytes] = []
                got = 0
                try:
                    for chunk in iter_raw(resp, deadline=deadline, chunk=_CHUNK):
                        chunks.append(chunk)
                        got += len(chunk)
                        self.stats.bytes_fetched += len(chunk)
                        self.stats.range_bytes += len(chunk)
                        if got > expected:  # a chunked answer without Content-Length
                            break
                except (requests.RequestException, DeadlineExceededError) as exc:
                    last_error = f"connection dropped after {got} of {expected} bytes ({exc})"
                else:
                    if got == expected:
                        return b"".join(chunks)
                    last_error = f"got {got} of {expected} bytes"
            finally:
                _close((resp, deadline))
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

    def _download(self, info: DumpFile, *, purpose: str, first: _Opened | None = None) -> Path:
        """Download a file into cache_dir via ``<name>.part`` (resumed with Range when present),
        check size and sha1 against dumpstatus.json, then rename it into place."""
        dest = self.cache_dir / info.name
        if self._is_verified(info):
            _close(first)
            return dest
        part = dest.with_name(dest.name + ".part")
        last_error = ""
        for attempt in range(self._max_retries + 1):
            have = part.stat().st_size if part.exists() else 0
            if info.size is not None and have > info.size:
                part.unlink()
                have = 0
            if info.size is not None and have == info.size:
                _close(first)
                break
            allowed = self.limits.download_deadline_s((info.size or 0) - have)
            if first is not None:
                (resp, deadline), first = first, None
                deadline.reset(allowed)  # opened as a range read: now a whole download
                if have:
                    part.unlink()
                    have = 0
            else:
                headers = {"Range": f"bytes={have}-"} if have else {}
                resp, deadline = self._get(info.url, headers=headers, deadline_s=allowed)
            try:
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
                        for chunk in iter_raw(resp, deadline=deadline, chunk=_CHUNK):
                            if info.size is not None and fh.tell() + len(chunk) > info.size:
                                raise IntegrityError(
                                    f"{info.url}: the server sends more than the {info.size} "
                                    "bytes dumpstatus.json lists"
                                )
                            fh.write(chunk)
                            self.stats.bytes_fetched += len(chunk)
                            if purpose == "index":
                                self.stats.index_bytes += len(chunk)
                            else:
                                self.stats.full_download_bytes += len(chunk)
                except (requests.RequestException, DeadlineExceededError) as exc:
                    last_error = f"connection dropped ({exc})"
                    if attempt < self._max_retries:
                        self._wait(attempt, None, f"{info.url}: {last_error}")
                    continue
            finally:
                _close((resp, deadline))
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
        for attempt in range(self._max_retries + 1):
            resp, deadline = self._get(url)
            try:
                if resp.status_code != 200:
                    raise SourceError(f"{url}: HTTP {resp.status_code}")
                body, _ = read_body(
                    resp, limit=self.limits.max_response_bytes, deadline=deadline, what=url
                )
                break
            except DeadlineExceededError as exc:
                if attempt >= self._max_retries:
                    raise SourceError(f"{url}: {exc} (after {attempt + 1} tries)") from exc
                self._wait(attempt, None, str(exc))
            finally:
                _close((resp, deadline))
        self.stats.bytes_fetched += len(body)
        return body

    def _get(
        self, url: str, headers: dict[str, str] | None = None, *, deadline_s: float | None = None
    ) -> _Opened:
        """GET (streamed) with retries on 429, 5xx and connection errors; honours Retry-After.
        Returns the response and its started :class:`Deadline` (``deadline_s``, default
        ``limits.max_request_s``), which the caller cancels (:func:`_close`) when done."""
        for attempt in range(self._max_retries + 1):
            # identity: a compressed transfer would break byte ranges and Content-Length checks
            request_headers = {"Accept-Encoding": "identity", **(headers or {})}
            seconds = deadline_s if deadline_s is not None else self.limits.max_request_s
            deadline = Deadline(seconds, f"GET {url}").start()
            try:
                resp = open_response(
                    self._session,
                    url,
                    headers=request_headers,
                    timeout_s=self._timeout_s,
                    deadline=deadline,
                    allowed_hosts=self.limits.redirect_hosts,
                )
            except DeadlineExceededError:
                deadline.cancel()
                if attempt >= self._max_retries:
                    raise
                self._wait(attempt, None, f"{url}: no answer within {seconds:g}s")
                continue
            except SourceError:  # a refused redirect
                deadline.cancel()
                raise
            except (requests.ConnectionError, requests.Timeout) as exc:
                deadline.cancel()
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
                _close((resp, deadline))
                if attempt >= self._max_retries:
                    raise SourceError(f"{url}: HTTP {status} after {attempt + 1} tries")
                self._wait(attempt, retry_after, f"{url}: HTTP {status}")
                continue
            if status == 404:
                _close((resp, deadline))
                raise SourceError(f"{url}: not found (404); check the wiki name and dump date")
            if status == 416:
                _close((resp, deadline))
                raise IntegrityError(f"{url}: {headers} not satisfiable (index and file disagree)")
            if status >= 400:
                _close((resp, deadline))
                raise SourceError(f"{url}: HTTP {status}")
            return resp, deadline
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
        limits: SourceLimits | None = None,
    ) -> None:
        if (client is None) == (path is None):
            raise ConfigError("DumpSource needs exactly one of a DumpClient or a local path")
        self.client = client
        self.path = Path(path) if path is not None else None
        self.follow_redirects = follow_redirects
        self.verify_sha1 = verify_sha1
        self.limits = limits or (client.limits if client is not None else DEFAULT_LIMITS)
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
    def local(cls, path: Path | str, **options: Any) -> DumpSource:
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
        limits = client_options.get("limits")
        if scheme == "file":
            return cls.local(Path(unquote(urlsplit(value).path)), limits=limits)
        return cls.local(Path(value).expanduser(), limits=limits)

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
            + list(r.over_limit)
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
                limits=self.limits,
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
