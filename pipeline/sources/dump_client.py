"""Remote dumps over HTTP: :class:`DumpClient` reads the selected pages of one dated Wikimedia
multistream dump with verified downloads and ``Range`` requests, retried politely."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path

import requests

from pipeline.errors import ConfigError, IntegrityError, SourceError
from pipeline.http_retry import retry_after_seconds
from pipeline.sources import ArticleSelection
from pipeline.sources.dump_index import IndexDB, IndexLookup, StreamSpan, warn_missing
from pipeline.sources.dump_pages import (
    CHUNK_BYTES,
    DumpPage,
    StreamTooLargeError,
    iter_file_pages,
    pages_in_stream,
    skipped_pages,
)
from pipeline.sources.dump_status import DumpFile, DumpStatus, MultistreamPart, parse_dumpstatus
from pipeline.sources.limits import DEFAULT_LIMITS, SourceLimits
from pipeline.sources.network import (
    Deadline,
    DeadlineExceededError,
    bounded_session,
    host_does_not_resolve,
    iter_raw,
    open_response,
    read_body,
    unknown_host_error,
)

__all__ = ["DEFAULT_BASE_URL", "DumpClient", "DumpFetchStats"]

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://dumps.wikimedia.org"

WIKI_RE = re.compile(r"^[a-z][a-z0-9_]*$")
DATE_RE = re.compile(r"^\d{8}$")


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
        if not WIKI_RE.match(wiki):
            raise ConfigError(f"dump wiki must be a database name like 'enwiki', got {wiki!r}")
        if not DATE_RE.match(dump_date):
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
        self._indexes: dict[str, IndexDB] = {}
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
                yield from iter_file_pages(path, lambda _i, _t: True, cutoff, self.limits)
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
                    yield from skipped_pages(span.page_ids, str(exc))
                    continue
                self.stats.streams_read += 1
                yield from pages_in_stream(
                    data,
                    where=part.data.url,
                    offset=span.offset,
                    page_ids=set(span.page_ids),
                    cutoff=cutoff,
                    limits=self.limits,
                )
        warn_missing(selection, found, self.dir_url)

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

    def _index(self, part: MultistreamPart) -> IndexDB:
        name = part.index.name
        if name in self._indexes:
            return self._indexes[name]
        key = part.index.sha1 or f"size:{part.index.size}"
        db_path = self.cache_dir / f"{name}.sqlite"
        db = IndexDB.open_if_current(db_path, key)
        if db is None:
            path = self._download(part.index, purpose="index")
            db = IndexDB.build(path, db_path, key)
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
                    for chunk in iter_raw(resp, deadline=deadline, chunk=CHUNK_BYTES):
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
                        for chunk in iter_raw(resp, deadline=deadline, chunk=CHUNK_BYTES):
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
                while chunk := fh.read(CHUNK_BYTES):
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
                retry_after = retry_after_seconds(resp.headers.get("Retry-After"))
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
