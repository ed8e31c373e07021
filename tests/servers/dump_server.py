"""A local stand-in for dumps.wikimedia.org, for tests of the dump reader.

- :func:`build_multistream_dump` writes a real multistream dump from revision dicts (the
  wikisnap JSON shape): ``<wiki>-<date>-pages-articles-multistream.xml.bz2`` (a siteinfo header
  stream, streams of ``pages_per_stream`` ``<page>`` elements, a ``</mediawiki>`` footer stream),
  its ``-multistream-index.txt.bz2`` (``offset:page_id:title``) and ``dumpstatus.json`` with
  sizes, md5 and sha1, laid out as ``<out>/<wiki>/<date>/``.
- :class:`DumpServer` serves such a tree over real HTTP on 127.0.0.1 (Range, keep-alive) with
  switchable misbehaviour (:class:`ServerBehaviour`) and records every request.
"""

from __future__ import annotations

import bz2
import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = [
    "BuiltDump",
    "build_bomb_dump",
    "DumpServer",
    "RecordedRequest",
    "ServerBehaviour",
    "build_multistream_dump",
    "wikisnap_revisions",
]

_EXPORT_NS = "http://www.mediawiki.org/xml/export-0.11/"
_HEADER = (
    f'<mediawiki xmlns="{_EXPORT_NS}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
    f'xsi:schemaLocation="{_EXPORT_NS} http://www.mediawiki.org/xml/export-0.11.xsd" '
    'version="0.11" xml:lang="en">\n'
    "  <siteinfo>\n"
    "    <sitename>Wikipedia</sitename>\n"
    "    <dbname>{wiki}</dbname>\n"
    "    <base>https://en.wikipedia.org/wiki/Main_Page</base>\n"
    "    <generator>MediaWiki 1.43.0-wmf.7</generator>\n"
    "    <case>first-letter</case>\n"
    "    <namespaces>\n"
    '      <namespace key="0" case="first-letter" />\n'
    '      <namespace key="1" case="first-letter">Talk</namespace>\n'
    '      <namespace key="4" case="first-letter">Wikipedia</namespace>\n'
    '      <namespace key="10" case="first-letter">Template</namespace>\n'
    '      <namespace key="14" case="first-letter">Category</namespace>\n'
    "    </namespaces>\n"
    "  </siteinfo>\n"
)
_FOOTER = "</mediawiki>\n"
_B36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def _escape(text: str) -> str:
    # Like PHP htmlspecialchars (ENT_COMPAT), which MediaWiki's XML dump writer uses.
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


def _base36_sha1(text: str) -> str:
    n = int(hashlib.sha1(text.encode("utf-8")).hexdigest(), 16)
    out = ""
    while n:
        n, d = divmod(n, 36)
        out = _B36[d] + out
    return out.rjust(31, "0")


def wikisnap_revisions(wikisnap_dir: Path, snapshot: str = "2024-06-01") -> list[dict[str, Any]]:
    """Every wikisnap article at one date, as revision dicts (title, page_id, ..., content)."""
    manifest = json.loads((wikisnap_dir / "MANIFEST.json").read_text())
    out = []
    for article in manifest["articles"]:
        rel = article["snapshots"][snapshot]["path"]
        out.append(json.loads((wikisnap_dir / rel).read_text()))
    return out


def _page_xml(rev: dict[str, Any]) -> str:
    content = rev["content"]
    redirect = rev.get("redirect")
    lines = [
        "  <page>",
        f"    <title>{_escape(rev['title'])}</title>",
        f"    <ns>{int(rev.get('ns', 0))}</ns>",
        f"    <id>{int(rev['page_id'])}</id>",
    ]
    if redirect is not None:
        lines.append(f'    <redirect title="{_escape(redirect)}" />')
    lines += [
        "    <revision>",
        f"      <id>{int(rev['revision_id'])}</id>",
        f"      <timestamp>{rev['revision_timestamp']}</timestamp>",
        '      <contributor deleted="deleted" />',
        "      <model>wikitext</model>",
        "      <format>text/x-wiki</format>",
        f'      <text bytes="{len(content.encode("utf-8"))}" xml:space="preserve">'
        f"{_escape(content)}</text>",
        f"      <sha1>{_base36_sha1(content)}</sha1>",
        "    </revision>",
        "  </page>",
    ]
    return "\n".join(lines) + "\n"


def _write_multistream(
    pages: list[dict[str, Any]], data: Path, index: Path, wiki: str, pages_per_stream: int
) -> tuple[list[int], dict[int, int]]:
    """Write data + index files; return the page stream offsets and page id -> offset."""
    offsets: list[int] = []
    page_offsets: dict[int, int] = {}
    lines: list[str] = []
    with data.open("wb") as fh:
        fh.write(bz2.compress(_HEADER.format(wiki=wiki).encode("utf-8")))
        for start in range(0, len(pages), pages_per_stream):
            chunk = pages[start : start + pages_per_stream]
            offset = fh.tell()
            offsets.append(offset)
            fh.write(bz2.compress("".join(_page_xml(p) for p in chunk).encode("utf-8")))
            for p in chunk:
                page_offsets[int(p["page_id"])] = offset
                lines.append(f"{offset}:{int(p['page_id'])}:{_escape(p['title'])}\n")
        fh.write(bz2.compress(_FOOTER.encode("utf-8")))
    index.write_bytes(bz2.compress("".join(lines).encode("utf-8")))
    return offsets, page_offsets


def _file_meta(path: Path, wiki: str, dump_date: str) -> dict[str, Any]:
    body = path.read_bytes()
    return {
        "size": len(body),
        "url": f"/{wiki}/{dump_date}/{path.name}",
        "md5": hashlib.md5(body).hexdigest(),
        "sha1": hashlib.sha1(body).hexdigest(),
    }


@dataclass(frozen=True)
class BuiltDump:
    """Paths and layout facts of a dump written by :func:`build_multistream_dump`."""

    root: Path  # what the server serves; holds <wiki>/<date>/
    wiki: str
    dump_date: str
    directory: Path
    data: Path
    index: Path
    dumpstatus: Path
    stream_offsets: tuple[int, ...]  # page streams of the combined file, in file order
    page_offsets: dict[int, int]  # page id -> offset of its stream in the combined file
    parts: tuple[tuple[Path, Path], ...] = ()  # (data, index) part files, when split

    @property
    def size(self) -> int:
        """Bytes of the combined multistream file."""
        return self.data.stat().st_size

    @property
    def url_path(self) -> str:
        """Server path of the dump directory, ``/<wiki>/<date>/``."""
        return f"/{self.wiki}/{self.dump_date}/"

    def stream_range(self, page_id: int) -> str:
        """The ``Range`` header a client should send for the stream holding ``page_id``."""
        start = self.page_offsets[page_id]
        later = [o for o in self.stream_offsets if o > start]
        end = later[0] - 1 if later else self.size - 1
        return f"bytes={start}-{end}"


def build_multistream_dump(
    revisions: list[dict[str, Any]],
    out_dir: Path,
    wiki: str = "enwiki",
    dump_date: str = "20240601",
    pages_per_stream: int = 100,
    *,
    split_parts: int = 0,
    job_status: str = "done",
    recombine_status: str = "done",
) -> BuiltDump:
    """Write a real multistream dump of ``revisions`` under ``out_dir/<wiki>/<dump_date>/``.

    Revision dicts have the wikisnap keys (title, page_id, revision_id, revision_timestamp,
    content) and may add ``ns`` and ``redirect`` (target title). Pages are sorted by id as in
    real dumps. ``split_parts=0`` lists the single file under ``articlesmultistreamdump`` (the
    small-wiki layout); ``split_parts=N`` also writes N part files with their own indexes under
    ``articlesmultistreamdump`` and lists the combined file under
    ``articlesmultistreamdumprecombine`` (the enwiki layout)."""
    directory = out_dir / wiki / dump_date
    directory.mkdir(parents=True, exist_ok=True)
    pages = sorted(revisions, key=lambda r: int(r["page_id"]))
    prefix = f"{wiki}-{dump_date}-pages-articles-multistream"
    data = directory / f"{prefix}.xml.bz2"
    index = directory / f"{prefix}-index.txt.bz2"
    offsets, page_offsets = _write_multistream(pages, data, index, wiki, pages_per_stream)
    combined = {p.name: _file_meta(p, wiki, dump_date) for p in (index, data)}
    parts: list[tuple[Path, Path]] = []
    if split_parts:
        per_part = -(-len(pages) // split_parts)
        for n, start in enumerate(range(0, len(pages), per_part), 1):
            chunk = pages[start : start + per_part]
            span = f"p{chunk[0]['page_id']}p{chunk[-1]['page_id']}"
            part_data = directory / f"{prefix}{n}.xml-{span}.bz2"
            part_index = directory / f"{prefix}-index{n}.txt-{span}.bz2"
            _write_multistream(chunk, part_data, part_index, wiki, pages_per_stream)
            parts.append((part_data, part_index))
    updated = "2024-06-02 07:41:19"
    jobs: dict[str, Any] = {
        "sitestatstable": {"status": "done", "updated": "2024-06-01 08:02:11"},
    }
    if split_parts:
        part_meta = {p.name: _file_meta(p, wiki, dump_date) for pair in parts for p in pair}
        jobs["articlesmultistreamdump"] = {
            "status": job_status,
            "updated": updated,
            "files": part_meta,
        }
        jobs["articlesmultistreamdumprecombine"] = {
            "status": recombine_status,
            "updated": updated,
            "files": combined if recombine_status == "done" else {},
        }
    else:
        jobs["articlesmultistreamdump"] = {
            "status": job_status,
            "updated": updated,
            "files": combined,
        }
    dumpstatus = directory / "dumpstatus.json"
    dumpstatus.write_text(json.dumps({"jobs": jobs, "version": "0.8"}, indent=1))
    return BuiltDump(
        root=out_dir,
        wiki=wiki,
        dump_date=dump_date,
        directory=directory,
        data=data,
        index=index,
        dumpstatus=dumpstatus,
        stream_offsets=tuple(offsets),
        page_offsets=page_offsets,
        parts=tuple(parts),
    )


def _bomb_stream(page_id: int, title: str, inflated_bytes: int) -> bytes:
    """One bz2 stream holding a page whose text is ``inflated_bytes`` of "a" (compressed in
    1 MiB steps, so building it takes no more memory than the result: a few hundred bytes)."""
    comp = bz2.BZ2Compressor(9)
    head = (
        f"  <page>\n    <title>{_escape(title)}</title>\n    <ns>0</ns>\n    <id>{page_id}</id>\n"
        "    <revision>\n      <id>1</id>\n      <timestamp>2024-01-01T00:00:00Z</timestamp>\n"
        '      <text xml:space="preserve">'
    )
    out = [comp.compress(head.encode())]
    block = b"a" * (1 << 20)
    for _ in range(inflated_bytes >> 20):
        out.append(comp.compress(block))
    out.append(comp.compress(b"</text>\n    </revision>\n  </page>\n"))
    out.append(comp.flush())
    return b"".join(out)


def build_bomb_dump(
    revisions: list[dict[str, Any]],
    out_dir: Path,
    *,
    bomb_page_id: int,
    bomb_title: str,
    inflated_bytes: int,
    wiki: str = "enwiki",
    dump_date: str = "20240601",
) -> BuiltDump:
    """A multistream dump like :func:`build_multistream_dump` (one page per stream) with one
    extra stream, a bz2 bomb: a few hundred bytes that inflate to ``inflated_bytes``. Pages
    are in id order, the bomb among them; ``dumpstatus.json`` lists both files."""
    directory = out_dir / wiki / dump_date
    directory.mkdir(parents=True, exist_ok=True)
    prefix = f"{wiki}-{dump_date}-pages-articles-multistream"
    data = directory / f"{prefix}.xml.bz2"
    index = directory / f"{prefix}-index.txt.bz2"
    entries = sorted(
        [(int(r["page_id"]), r) for r in revisions] + [(bomb_page_id, None)],
        key=lambda e: e[0],
    )
    offsets: list[int] = []
    page_offsets: dict[int, int] = {}
    lines: list[str] = []
    with data.open("wb") as fh:
        fh.write(bz2.compress(_HEADER.format(wiki=wiki).encode("utf-8")))
        for page_id, rev in entries:
            offset = fh.tell()
            offsets.append(offset)
            page_offsets[page_id] = offset
            if rev is None:
                fh.write(_bomb_stream(page_id, bomb_title, inflated_bytes))
                title = bomb_title
            else:
                fh.write(bz2.compress(_page_xml(rev).encode("utf-8")))
                title = rev["title"]
            lines.append(f"{offset}:{page_id}:{_escape(title)}\n")
        fh.write(bz2.compress(_FOOTER.encode("utf-8")))
    index.write_bytes(bz2.compress("".join(lines).encode("utf-8")))
    files = {p.name: _file_meta(p, wiki, dump_date) for p in (index, data)}
    status = {
        "jobs": {"articlesmultistreamdump": {"status": "done", "files": files}},
        "version": "0.8",
    }
    dumpstatus = directory / "dumpstatus.json"
    dumpstatus.write_text(json.dumps(status))
    return BuiltDump(
        root=out_dir,
        wiki=wiki,
        dump_date=dump_date,
        directory=directory,
        data=data,
        index=index,
        dumpstatus=dumpstatus,
        stream_offsets=tuple(offsets),
        page_offsets=page_offsets,
    )


# --------------------------------------------------------------------------- the server


@dataclass
class ServerBehaviour:
    """How the server (mis)behaves; change fields between requests as needed."""

    honour_range: bool = True  # False: answer Range requests with 200 and the whole file
    fail_first: list[int] = field(default_factory=list)  # statuses for the first requests
    retry_after: str | None = "1"  # sent with 429 answers
    truncate_ranges: bool = False  # send half a 206 body, then drop the connection
    corrupt_ranges: bool = False  # flip bytes in the middle of 206 bodies
    job_status: str | None = None  # override articlesmultistreamdump status in dumpstatus.json
    drip_interval_s: float | None = None  # send file bodies one byte per interval
    redirect_to: str | None = None  # answer 302 to this base URL + the request path


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server answered."""

    method: str
    path: str
    range: str | None
    status: int
    bytes_sent: int


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: DumpServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hang up mid-body on purpose (a 200 to a Range request); that is no error.
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a requests.Session expects
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.owner._answer(self, head=False)

    def do_HEAD(self) -> None:
        self.server.owner._answer(self, head=True)


class DumpServer:
    """Threaded HTTP server on 127.0.0.1:<free port> serving ``root`` like dumps.wikimedia.org."""

    def __init__(self, root: Path, behaviour: ServerBehaviour | None = None) -> None:
        self.root = Path(root).resolve()
        self.behaviour = behaviour or ServerBehaviour()
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._served = 0
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> DumpServer:
        """Start serving in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and free the port."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> DumpServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def requests_for(self, name: str) -> list[RecordedRequest]:
        """Recorded requests whose path ends with ``name``."""
        with self._lock:
            return [r for r in self.requests if r.path.endswith(name)]

    @property
    def bytes_sent(self) -> int:
        """Body bytes sent so far, all requests."""
        with self._lock:
            return sum(r.bytes_sent for r in self.requests)

    # ---- request handling (runs on server threads)

    def _record(self, handler: BaseHTTPRequestHandler, status: int, sent: int) -> None:
        with self._lock:
            self.requests.append(
                RecordedRequest(
                    handler.command, handler.path, handler.headers.get("Range"), status, sent
                )
            )

    def _answer(self, handler: _Handler, *, head: bool) -> None:
        b = self.behaviour
        with self._lock:
            n = self._served
            self._served += 1
        if n < len(b.fail_first):
            status = b.fail_first[n]
            extra = {"Retry-After": b.retry_after} if status == 429 and b.retry_after else {}
            self._send(handler, status, b"try again later\n", extra, head=head)
            return
        if b.redirect_to is not None:
            location = b.redirect_to.rstrip("/") + handler.path
            self._send(handler, 302, b"", {"Location": location}, head=head)
            return
        rel = unquote(urlsplit(handler.path).path).lstrip("/")
        path = (self.root / rel).resolve()
        if not path.is_relative_to(self.root) or not path.is_file():
            self._send(handler, 404, b"not found\n", {}, head=head)
            return
        body = path.read_bytes()
        if path.name == "dumpstatus.json" and b.job_status is not None:
            doc = json.loads(body)
            doc["jobs"]["articlesmultistreamdump"]["status"] = b.job_status
            body = json.dumps(doc).encode()
        headers = {
            "Accept-Ranges": "bytes",
            "Last-Modified": formatdate(path.stat().st_mtime, usegmt=True),
            "Content-Type": "application/json"
            if path.suffix == ".json"
            else "application/octet-stream",
        }
        spec = handler.headers.get("Range")
        rng = _parse_range(spec, len(body)) if spec and b.honour_range else None
        if rng == "unsatisfiable":
            headers["Content-Range"] = f"bytes */{len(body)}"
            self._send(handler, 416, b"", headers, head=head)
            return
        if rng is None:
            self._send(handler, 200, body, headers, head=head)
            return
        start, end = rng
        part = body[start : end + 1]
        headers["Content-Range"] = f"bytes {start}-{end}/{len(body)}"
        if b.corrupt_ranges and len(part) > 64:
            mid = len(part) // 2
            part = part[:mid] + bytes(x ^ 0xFF for x in part[mid : mid + 16]) + part[mid + 16 :]
        if b.truncate_ranges and not head:
            self._send(handler, 206, part, headers, head=False, cut_at=len(part) // 2)
            return
        self._send(handler, 206, part, headers, head=head)

    def _send(
        self,
        handler: _Handler,
        status: int,
        body: bytes,
        headers: dict[str, str],
        *,
        head: bool,
        cut_at: int | None = None,
    ) -> None:
        handler.send_response(status)
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(body)))
        if cut_at is not None:
            handler.send_header("Connection", "close")
        handler.end_headers()
        sent = 0
        drip = self.behaviour.drip_interval_s
        if not head and drip is not None and status in (200, 206):
            try:
                for i in range(len(body)):
                    handler.wfile.write(body[i : i + 1])
                    handler.wfile.flush()
                    sent += 1
                    time.sleep(drip)
            except OSError:
                handler.close_connection = True  # the client gave up, as it should
        elif not head:
            payload = body if cut_at is None else body[:cut_at]
            try:
                handler.wfile.write(payload)
                handler.wfile.flush()
                sent = len(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client hung up (e.g. it saw a 200 to its Range request)
        if cut_at is not None:
            handler.close_connection = True  # the client sees fewer bytes than announced
        self._record(handler, status, sent)


def _parse_range(spec: str, size: int) -> tuple[int, int] | str | None:
    """(first, last) of a single ``bytes=`` range, "unsatisfiable", or None (serve it all)."""
    unit, _, ranges = spec.partition("=")
    if unit.strip() != "bytes" or "," in ranges:
        return None
    first_s, sep, last_s = ranges.strip().partition("-")
    if not sep:
        return None
    try:
        if not first_s:  # suffix range: the last N bytes
            n = int(last_s)
            return (max(0, size - n), size - 1) if n > 0 and size else "unsatisfiable"
        first = int(first_s)
        last = int(last_s) if last_s else size - 1
    except ValueError:
        return None
    if first >= size or last < first:
        return "unsatisfiable"
    return first, min(last, size - 1)
