"""Pages out of dump XML: a bounded streaming parser that keeps, per selected ``<page>``, the
latest revision at or before a cutoff; over one multistream bz2 stream or over a whole file."""

from __future__ import annotations

import bz2
import gzip
import itertools
import logging
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO

from pipeline.errors import IntegrityError
from pipeline.sources import parse_timestamp
from pipeline.sources.limits import DEFAULT_LIMITS, SourceLimits
from pipeline.sources.network import InputLimitError

__all__ = ["DumpPage", "DumpRevision", "StreamTooLargeError"]

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20
_REDIRECT_TEXT_RE = re.compile(r"^\s*#REDIRECT\s*:?\s*\[\[([^\]|]+)", re.IGNORECASE)


def _local_name(tag: str) -> str:
    # Export schemas differ only in their namespace URI; matching local names reads them all.
    return tag.rpartition("}")[2]


def _required_int(value: str | None, what: str) -> int:
    if value is None or not value.strip():
        raise ValueError(f"missing <{what}>")
    return int(value.strip())


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


def skipped_pages(page_ids: Iterable[int], reason: str) -> list[DumpPage]:
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


def pages_in_stream(
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
        return pages + skipped_pages(sorted(page_ids - done), str(exc))
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
        return pages + skipped_pages(sorted(absent), unidentified[0].skip_reason or "over a limit")
    if absent:
        raise IntegrityError(
            f"{where}: the index puts pages {sorted(absent)} in the stream at byte offset "
            f"{offset}, but it does not hold them (index and dump file disagree)"
        )
    return pages


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


def iter_file_pages(
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
            while chunk := stream.read(CHUNK_BYTES):
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
