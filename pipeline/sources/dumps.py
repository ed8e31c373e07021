"""Wikimedia XML dumps as a snapshot source.

Two ways in:

- **Remote** (:class:`~pipeline.sources.dump_client.DumpClient`): a dated dump directory such as
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

This module reads local files and is the :class:`DumpSource`; the parts live beside it:
:mod:`~pipeline.sources.dump_status` (``dumpstatus.json``), :mod:`~pipeline.sources.dump_index`
(the multistream index), :mod:`~pipeline.sources.dump_pages` (the XML parser) and
:mod:`~pipeline.sources.dump_client` (HTTP).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from pipeline.config import Config
from pipeline.errors import ConfigError, IntegrityError, SourceError
from pipeline.layout import cache_dir
from pipeline.records import RawRevision
from pipeline.sources import ArticleSelection, normalize_title, snapshot_cutoff
from pipeline.sources.dump_client import DATE_RE, DEFAULT_BASE_URL, WIKI_RE, DumpClient
from pipeline.sources.dump_index import (
    find_streams,
    index_path_for,
    read_index_entries,
    warn_missing,
)
from pipeline.sources.dump_pages import DumpPage, iter_file_pages, pages_in_stream, skipped_pages
from pipeline.sources.factory import source_limits
from pipeline.sources.limits import DEFAULT_LIMITS, SourceLimits

__all__ = [
    "DumpSource",
    "SelectionReport",
    "iter_dump_file",
    "mediawiki_sha1",
    "parse_dump_url",
]

log = logging.getLogger(__name__)

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


# --------------------------------------------------------------------------- local files


def _iter_indexed_file(
    path: Path,
    index: Path,
    selection: ArticleSelection,
    cutoff: datetime | None,
    limits: SourceLimits = DEFAULT_LIMITS,
) -> Iterator[DumpPage]:
    """The selected pages of a local multistream file, reading only their streams."""
    lookup = find_streams(read_index_entries(index), selection)
    warn_missing(selection, lookup, str(index))
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
                yield from skipped_pages(span.page_ids, reason)
                continue
            fh.seek(span.offset)
            data = fh.read(end - span.offset)
            if len(data) != end - span.offset:
                raise IntegrityError(
                    f"{path}: file ends at byte {size}, before the stream at offset "
                    f"{span.offset} that {index.name} lists ends (truncated file?)"
                )
            yield from pages_in_stream(
                data,
                where=str(path),
                offset=span.offset,
                page_ids=set(span.page_ids),
                cutoff=cutoff,
                limits=limits,
            )


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
        return iter_file_pages(path, _Matcher(sel), cutoff, limits)

    yield from _select_revisions(
        read_pass,
        selection,
        follow_redirects=follow_redirects,
        verify_sha1=verify_sha1,
        where=str(path),
        report=report if report is not None else SelectionReport(),
    )


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
        if DATE_RE.match(segments[i]) and WIKI_RE.match(segments[i - 1]):
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


def dump_source(cfg: Config, workdir: Path, snapshot_date: date) -> tuple[DumpSource, str]:
    """The source of ``--source dump`` (``--input``: a dump directory URL or a local file)."""
    value = cfg.snapshot.input
    if not value:
        raise ConfigError(
            "snapshot.input = '': the dump source needs --input, a dump directory URL such as "
            f"{cfg.dump.base_url}/{cfg.dump.wiki}/{snapshot_date:%Y%m%d}/ or a local dump file"
        )
    default = cache_dir(workdir, create=False) / "dumps"
    source = DumpSource.from_input(
        value,
        cache_dir=Path(cfg.dump.cache_dir) if cfg.dump.cache_dir else default,
        user_agent=cfg.api.user_agent,
        max_retries=cfg.dump.max_retries,
        timeout_s=cfg.dump.timeout_s,
        limits=source_limits(cfg),
    )
    return source, f"dump:{value}"
