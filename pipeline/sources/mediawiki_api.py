"""Snapshots from the MediaWiki Action API: the revision of each article current at a date.

One ``action=query&prop=revisions`` request per article (``rvstart`` + ``rvdir=older`` +
``rvlimit=1`` only work on a single page), polite by default: a descriptive User-Agent is
required, ``maxlag`` is always sent, requests are serial unless asked otherwise, and 429 / 5xx /
``maxlag`` answers are retried with exponential backoff that always honours ``Retry-After``.

Article selection as GrowOVER did it: :func:`current_events_titles` collects the articles linked
from the ``Portal:Current events`` month pages; :func:`read_article_list` reads a list file.
"""

from __future__ import annotations

import json
import logging
import random
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

import requests

from pipeline.dates import MONTH_NAMES
from pipeline.errors import ConfigError, SourceError, WikidriftError
from pipeline.http_retry import retry_after_seconds
from pipeline.records import RawRevision
from pipeline.sources import ArticleSelection, normalize_title, parse_timestamp, snapshot_cutoff
from pipeline.sources.limits import DEFAULT_LIMITS, SourceLimits
from pipeline.sources.network import (
    Deadline,
    DeadlineExceededError,
    ResponseTooLargeError,
    bounded_session,
    host_does_not_resolve,
    open_response,
    read_body,
    unknown_host_error,
)

logger = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "https://en.wikipedia.org/w/api.php"

# API error codes that mean "try again later" rather than "your request is wrong".
RETRIABLE_API_CODES = frozenset({"maxlag", "ratelimited", "readonly"})

# Why a requested article yielded no revision (keys of MediaWikiApiSource.skipped).
SKIP_MISSING = "missing"
SKIP_NOT_YET_CREATED = "not_yet_created"
SKIP_INVALID = "invalid_title"
SKIP_OVER_LIMIT = "over_limit"

# The Maxlag manual asks bots to pause at least this long after a lag error.
_MAXLAG_MIN_WAIT_S = 5.0

# Transport failures worth another try (a dropped connection, a timeout, a truncated body).
_TRANSIENT_EXCEPTIONS: tuple[type[BaseException], ...] = (
    requests.exceptions.ConnectionError,
    requests.exceptions.Timeout,
    requests.exceptions.ChunkedEncodingError,
    requests.exceptions.ContentDecodingError,
)

_URL_RE = re.compile(r"(?:https?://|\bwww\.)\S+", re.IGNORECASE)
_EMAIL_RE = re.compile(r"[^\s@<>()]+@[^\s@<>()]+\.[A-Za-z]{2,}")
_MONTH_RE = re.compile(r"^(\d{4})-(\d{2})$")


def check_user_agent(user_agent: str) -> str:
    """Return the User-Agent stripped, or raise ConfigError when Wikimedia's policy would reject
    it (empty, or no contact: neither a URL nor an e-mail address)."""
    ua = (user_agent or "").strip()
    if not ua:
        raise ConfigError(
            "user_agent is empty: Wikimedia requires a descriptive User-Agent such as "
            "'wikidrift/0.1 (https://example.org/you; you@example.org)'"
        )
    if not (_URL_RE.search(ua) or _EMAIL_RE.search(ua)):
        raise ConfigError(
            f"user_agent {ua!r} has no contact information: Wikimedia's User-Agent policy asks "
            "for a URL or an e-mail address, e.g. 'wikidrift/0.1 (you@example.org)'"
        )
    return ua


@dataclass(frozen=True, slots=True)
class _Retry:
    """One failed attempt that may be retried: what went wrong and what the server asked for."""

    reason: str
    retry_after_s: float | None = None
    min_wait_s: float = 0.0


@dataclass(frozen=True, slots=True)
class RevisionLookup:
    """The answer for one requested article: a revision, or the reason there is none."""

    requested: str  # "title 'X'" or "page id N", for messages and the skip list
    revision: RawRevision | None
    skip_reason: str | None = None
    detail: str = ""  # what exactly went over a limit, for the not-delivered list


class MediaWikiClient:
    """A polite MediaWiki Action API client (JSON, formatversion=2) with retries and pacing.

    ``requests_made`` counts HTTP attempts (retries included), ``bytes_received`` the bytes read
    off the wire (compressed), ``bytes_decoded`` the body bytes after decompression and
    ``retries`` the waits taken before another attempt. Safe to share between threads.

    ``limits`` bound every answer (decoded size, total request time, redirects to other
    hosts) and the wikitext of a page; see :class:`pipeline.sources.limits.SourceLimits`.
    """

    def __init__(
        self,
        endpoint: str = DEFAULT_ENDPOINT,
        *,
        user_agent: str,
        maxlag: int = 5,
        max_retries: int = 6,
        backoff_base_s: float = 1.0,
        max_backoff_s: float = 120.0,
        min_interval_s: float = 0.0,
        timeout_s: float = 60.0,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        limits: SourceLimits = DEFAULT_LIMITS,
    ) -> None:
        if not endpoint.startswith(("http://", "https://")):
            raise ConfigError(f"endpoint {endpoint!r} is not an http(s) URL of api.php")
        for name, value in (
            ("maxlag", maxlag),
            ("max_retries", max_retries),
            ("backoff_base_s", backoff_base_s),
            ("max_backoff_s", max_backoff_s),
            ("min_interval_s", min_interval_s),
        ):
            if value < 0:
                raise ConfigError(f"{name} must be >= 0, got {value!r}")
        if timeout_s <= 0:
            raise ConfigError(f"timeout_s must be > 0, got {timeout_s!r}")
        self.endpoint = endpoint
        self.user_agent = check_user_agent(user_agent)
        self.maxlag = maxlag
        self.max_retries = max_retries
        self.backoff_base_s = backoff_base_s
        self.max_backoff_s = max_backoff_s
        self.min_interval_s = min_interval_s
        self.timeout_s = timeout_s
        self.limits = limits
        self._owns_session = session is None
        self._session = bounded_session(session)
        self._sleep = sleep
        self._clock = clock
        self._rng = rng if rng is not None else random.Random()
        self._lock = threading.Lock()
        self._next_slot = float("-inf")
        self.requests_made = 0
        self.bytes_received = 0
        self.bytes_decoded = 0
        self.retries = 0

    # -- plumbing ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the HTTP session when this client created it."""
        if self._owns_session:
            self._session.close()

    def __enter__(self) -> MediaWikiClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def headers(self) -> dict[str, str]:
        """Headers sent with every request (User-Agent policy, gzip to save Wikimedia bandwidth)."""
        return {"User-Agent": self.user_agent, "Accept-Encoding": "gzip"}

    def get(self, params: Mapping[str, str | int], *, what: str = "") -> dict[str, Any]:
        """One API GET with format=json, formatversion=2 and maxlag added; retried on 429, 5xx,
        transport errors and maxlag/ratelimited/readonly; returns the decoded JSON object."""
        full = {k: str(v) for k, v in params.items()}
        full.update(format="json", formatversion="2", maxlag=str(self.maxlag))
        url = requests.Request("GET", self.endpoint, params=full).prepare().url or self.endpoint
        target = f"{what} ({url})" if what else url
        attempts = 0
        while True:
            attempts += 1
            self._pace()
            outcome = self._attempt(full, url, target)
            if isinstance(outcome, dict):
                return outcome
            if attempts > self.max_retries:
                raise SourceError(
                    f"MediaWiki API: gave up on {target} after {attempts} attempts "
                    f"(last: {outcome.reason})"
                )
            delay = self._retry_delay(attempts, outcome)
            logger.warning(
                "MediaWiki API: %s for %s; retry %d/%d in %.1fs",
                outcome.reason,
                target,
                attempts,
                self.max_retries,
                delay,
            )
            with self._lock:
                self.retries += 1
            self._sleep(delay)

    def query_continued(
        self, params: Mapping[str, str | int], *, what: str = ""
    ) -> Iterator[dict[str, Any]]:
        """Yield the ``query`` object of each response, following ``continue`` until done."""
        cont: dict[str, str] = {}
        while True:
            data = self.get({**params, **cont}, what=what)
            if isinstance(data.get("query"), dict):
                yield data["query"]
            nxt = data.get("continue")
            if not isinstance(nxt, dict) or not nxt:
                return
            nxt = {k: str(v) for k, v in nxt.items()}
            if nxt == cont:
                # A server repeating its continuation would otherwise loop forever.
                raise SourceError(f"MediaWiki API: continuation did not advance for {what}: {nxt}")
            cont = nxt

    def _pace(self) -> None:
        """Wait until min_interval_s has passed since the previous request started."""
        if self.min_interval_s <= 0:
            return
        # Reserve the slot under the lock, sleep outside it, so threads queue up fairly.
        with self._lock:
            now = self._clock()
            start = max(now, self._next_slot)
            self._next_slot = start + self.min_interval_s
        if start > now:
            self._sleep(start - now)

    def _attempt(self, params: dict[str, str], url: str, target: str) -> dict[str, Any] | _Retry:
        """Send one request; return the JSON object, a _Retry, or raise SourceError."""
        try:
            with Deadline(self.limits.max_request_s, f"MediaWiki API {target}") as deadline:
                resp = open_response(
                    self._session,
                    self.endpoint,
                    params=params,
                    headers=self.headers,
                    timeout_s=self.timeout_s,
                    deadline=deadline,
                    allowed_hosts=self.limits.redirect_hosts,
                )
                body, wire = read_body(
                    resp,
                    limit=self.limits.max_response_bytes,
                    deadline=deadline,
                    what=f"MediaWiki API {target}",
                )
        except DeadlineExceededError as exc:
            self._count(0, 0)
            return _Retry(str(exc))
        except ResponseTooLargeError:
            self._count(0, 0)
            raise  # the same request would get the same answer: the page is skipped
        except _TRANSIENT_EXCEPTIONS as exc:
            self._count(0, 0)
            if host_does_not_resolve(exc):
                raise unknown_host_error("MediaWiki API", self.endpoint) from exc
            return _Retry(f"{type(exc).__name__}: {exc}")
        except requests.RequestException as exc:
            self._count(0, 0)
            raise SourceError(f"MediaWiki API: request for {target} failed: {exc}") from exc
        self._count(wire or len(body), len(body))

        status = resp.status_code
        retry_after = retry_after_seconds(resp.headers.get("Retry-After"))
        data = _json_object(body)
        error = data.get("error") if isinstance(data, dict) else None
        code = str(error.get("code", "")) if isinstance(error, dict) else ""
        info = str(error.get("info", "")) if isinstance(error, dict) else ""

        if status == 429 or status >= 500:
            reason = f"HTTP {status}" + (f" (API error {code}: {info})" if code else "")
            floor = _MAXLAG_MIN_WAIT_S if code == "maxlag" else 0.0
            return _Retry(reason, retry_after, floor)
        if status != 200:
            detail = f"API error '{code}': {info}" if code else _snippet(body)
            raise SourceError(f"MediaWiki API: HTTP {status} for {target}: {detail}")
        if data is None:
            raise SourceError(
                f"MediaWiki API: {url} did not return a JSON object (is the endpoint an api.php "
                f"URL?): {_snippet(body)}"
            )
        if code:
            if code in RETRIABLE_API_CODES:
                floor = _MAXLAG_MIN_WAIT_S if code == "maxlag" else 0.0
                return _Retry(f"API error {code}: {info}", retry_after, floor)
            raise SourceError(f"MediaWiki API error '{code}' for {target}: {info}")
        if data.get("warnings"):
            logger.warning("MediaWiki API warnings for %s: %s", target, data["warnings"])
        return data

    def _retry_delay(self, attempt: int, retry: _Retry) -> float:
        """Seconds to wait before the next attempt: Retry-After when the server gave one (capped),
        else exponential backoff with up to 25% jitter so parallel clients spread out."""
        if retry.retry_after_s is not None:
            return min(self.max_backoff_s, retry.retry_after_s)
        delay = self.backoff_base_s * (2 ** (attempt - 1)) * (1.0 + self._rng.uniform(0.0, 0.25))
        return min(self.max_backoff_s, max(delay, retry.min_wait_s))

    def _count(self, wire: int, decoded: int) -> None:
        with self._lock:
            self.requests_made += 1
            self.bytes_received += wire
            self.bytes_decoded += decoded

    # -- revisions --------------------------------------------------------------------------

    def lookup_revision_at(
        self, title: str | None = None, *, page_id: int | None = None, snapshot_date: date
    ) -> RevisionLookup:
        """The revision of one page current at the snapshot date, or why there is none.
        Redirects are followed (the revision is the target's); hidden content raises."""
        if (title is None) == (page_id is None):
            raise ValueError("give exactly one of title or page_id")
        cutoff = snapshot_cutoff(snapshot_date)
        params: dict[str, str | int] = {
            "action": "query",
            "prop": "revisions",
            "rvstart": cutoff.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "rvdir": "older",
            "rvlimit": 1,
            "rvslots": "main",
            "rvprop": "ids|timestamp|sha1|content",
            "redirects": 1,
        }
        if title is not None:
            if not title.strip():
                raise ValueError("title is empty")
            params["titles"] = title
            requested = f"title {title!r}"
        else:
            assert page_id is not None  # guaranteed by the check above; narrows the type
            params["pageids"] = int(page_id)
            requested = f"page id {page_id}"
        what = f"{requested} at {snapshot_date.isoformat()}"
        try:
            data = self.get(params, what=what)
        except ResponseTooLargeError as exc:
            logger.warning("MediaWiki API: %s skipped: %s", requested, exc)
            limit = self.limits.max_response_bytes
            return RevisionLookup(
                requested, None, SKIP_OVER_LIMIT, f"API answer over {limit} bytes"
            )
        query = data.get("query") or {}
        pages = query.get("pages") or []
        if not pages:
            # e.g. an interwiki title: the API answers with no page at all.
            logger.warning("MediaWiki API: no page for %s (%s)", requested, query)
            return RevisionLookup(requested, None, SKIP_MISSING)
        if len(pages) > 1:
            raise SourceError(f"MediaWiki API: {len(pages)} pages returned for {what}")
        page = pages[0]
        if page.get("invalid"):
            logger.warning("MediaWiki API: invalid %s: %s", requested, page.get("invalidreason"))
            return RevisionLookup(requested, None, SKIP_INVALID)
        if page.get("missing"):
            logger.warning("MediaWiki API: %s does not exist (missing page)", requested)
            return RevisionLookup(requested, None, SKIP_MISSING)
        revisions = page.get("revisions") or []
        if not revisions:
            logger.warning(
                "MediaWiki API: %s (%r) has no revision at or before %s (created later)",
                requested,
                page.get("title"),
                cutoff.isoformat(),
            )
            return RevisionLookup(requested, None, SKIP_NOT_YET_CREATED)
        revision = _to_raw_revision(page, revisions[0], what, cutoff)
        size = len(revision.wikitext.encode("utf-8"))
        if size > self.limits.max_wikitext_bytes:
            detail = f"wikitext {size} bytes, over {self.limits.max_wikitext_bytes}"
            logger.warning("MediaWiki API: %s skipped: %s", requested, detail)
            return RevisionLookup(requested, None, SKIP_OVER_LIMIT, detail)
        return RevisionLookup(requested, revision)

    def revision_at(
        self, title: str | None = None, *, page_id: int | None = None, snapshot_date: date
    ) -> RawRevision | None:
        """The revision current at 00:00 UTC of the snapshot date (redirects resolved), or None
        when the page is missing or was created later (a warning is logged)."""
        return self.lookup_revision_at(title, page_id=page_id, snapshot_date=snapshot_date).revision


def _to_raw_revision(
    page: Mapping[str, Any], rev: Mapping[str, Any], what: str, cutoff: datetime
) -> RawRevision:
    """Map one formatversion=2 page + revision to a RawRevision, refusing hidden content."""
    slot = (rev.get("slots") or {}).get("main") or {}
    if rev.get("texthidden") or slot.get("texthidden"):
        raise SourceError(
            f"MediaWiki API: the content of revision {rev.get('revid')} ({what}) is hidden "
            "(revision-deleted); cannot snapshot it"
        )
    content = slot.get("content", rev.get("content"))  # legacy shape when rvslots is ignored
    if not isinstance(content, str) or slot.get("textmissing") or rev.get("textmissing"):
        raise SourceError(
            f"MediaWiki API: no content returned for revision {rev.get('revid')} ({what})"
        )
    try:
        revid = int(rev["revid"])
        timestamp = str(rev["timestamp"])
        page_id = int(page["pageid"])
        title = str(page["title"])
    except (KeyError, TypeError, ValueError) as exc:
        raise SourceError(f"MediaWiki API: malformed revision for {what}: missing {exc}") from exc
    if parse_timestamp(timestamp) > cutoff:
        # A server that ignored rvstart would silently give us the wrong snapshot.
        raise SourceError(
            f"MediaWiki API: revision {revid} of {title!r} is dated {timestamp}, after the "
            f"snapshot cutoff {cutoff.isoformat()} ({what})"
        )
    sha1 = rev.get("sha1") if isinstance(rev.get("sha1"), str) else None
    return RawRevision(
        page_id=page_id,
        title=title,
        revision_id=revid,
        revision_timestamp=timestamp,
        wikitext=content,
        sha1=sha1,
        namespace=int(page.get("ns", 0)),
    )


def _json_object(body: bytes) -> dict[str, Any] | None:
    """The body as a JSON object, or None when it is not one (an HTML error page, say)."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _snippet(body: bytes, limit: int = 200) -> str:
    text = body[:limit].decode("utf-8", errors="replace").strip()
    return text + ("..." if len(body) > limit else "")


class MediaWikiApiSource:
    """A SnapshotSource over the Action API: one request per selected article, serial by default.

    After (or during) ``iter_revisions``: ``skipped`` counts requests that gave no revision by
    reason (``missing``, ``not_yet_created``, ``invalid_title``), ``skipped_requests`` lists
    them, ``duplicates`` counts requests that reached a page already yielded.
    """

    def __init__(self, client: MediaWikiClient, *, max_workers: int = 1) -> None:
        if max_workers < 1:
            raise ConfigError(f"max_workers must be >= 1, got {max_workers!r}")
        self.client = client
        self.max_workers = max_workers
        self.skipped: Counter[str] = Counter()
        self.skipped_requests: list[tuple[str, str]] = []
        self.duplicates = 0

    def not_delivered(self) -> list[str]:
        """Requested articles the last run did not yield, as "title (reason)"."""
        return [f"{requested} ({reason})" for requested, reason in self.skipped_requests]

    def iter_revisions(
        self, selection: ArticleSelection, snapshot_date: date
    ) -> Iterator[RawRevision]:
        """Yield the revision current at the snapshot date of each selected article, in selection
        order (titles, then page ids), each page once; missing/not-yet-created ones are skipped."""
        if selection.is_all:
            raise ConfigError(
                "the MediaWiki API source needs an explicit article list (titles or page ids); "
                "it cannot enumerate every article of a wiki: use an article list file, "
                "current_events_titles(), or the dumps source"
            )
        self.skipped = Counter()
        self.skipped_requests = []
        self.duplicates = 0
        seen_pages: set[int] = set()
        for lookup in self._lookups(_unique_requests(selection), snapshot_date):
            if lookup.revision is None:
                reason = lookup.skip_reason or SKIP_MISSING
                self.skipped[reason] += 1
                described = f"{reason}: {lookup.detail}" if lookup.detail else reason
                self.skipped_requests.append((lookup.requested, described))
                continue
            if lookup.revision.page_id in seen_pages:
                # Two titles redirecting to one page: keep the first.
                self.duplicates += 1
                continue
            seen_pages.add(lookup.revision.page_id)
            yield lookup.revision

    def _lookup(self, request: tuple[str, str | int], snapshot_date: date) -> RevisionLookup:
        kind, value = request
        if kind == "title":
            return self.client.lookup_revision_at(str(value), snapshot_date=snapshot_date)
        return self.client.lookup_revision_at(page_id=int(value), snapshot_date=snapshot_date)

    def _lookups(
        self, requests_: list[tuple[str, str | int]], snapshot_date: date
    ) -> Iterator[RevisionLookup]:
        """Lookups in request order; with max_workers > 1 a bounded window runs ahead in threads."""
        if self.max_workers == 1 or len(requests_) <= 1:
            for request in requests_:
                yield self._lookup(request, snapshot_date)
            return
        window = 2 * self.max_workers  # bounded so wikitext does not pile up ahead of the reader
        pending: deque[Future[RevisionLookup]] = deque()
        with ThreadPoolExecutor(self.max_workers, thread_name_prefix="mediawiki-api") as pool:
            try:
                for request in requests_:
                    pending.append(pool.submit(self._lookup, request, snapshot_date))
                    if len(pending) >= window:
                        yield pending.popleft().result()
                while pending:
                    yield pending.popleft().result()
            finally:
                for future in pending:
                    future.cancel()


def _unique_requests(selection: ArticleSelection) -> list[tuple[str, str | int]]:
    """Titles then page ids, dropping repeats (titles compared after MediaWiki normalization)."""
    out: list[tuple[str, str | int]] = []
    seen_titles: set[str] = set()
    seen_ids: set[int] = set()
    for title in selection.titles:
        key = normalize_title(title)
        if key and key not in seen_titles:
            seen_titles.add(key)
            out.append(("title", title))
    for page_id in selection.page_ids:
        if page_id not in seen_ids:
            seen_ids.add(page_id)
            out.append(("page_id", page_id))
    return out


def _parse_month(value: str, name: str) -> tuple[int, int]:
    match = _MONTH_RE.match(value.strip())
    if not match or not 1 <= int(match.group(2)) <= 12:
        raise ConfigError(f"{name} must look like YYYY-MM (e.g. 2023-01), got {value!r}")
    return int(match.group(1)), int(match.group(2))


def _months(start_month: str, end_month: str) -> Iterator[tuple[int, int]]:
    start = _parse_month(start_month, "start_month")
    end = _parse_month(end_month, "end_month")
    if start > end:
        raise ConfigError(f"start_month {start_month!r} is after end_month {end_month!r}")
    year, month = start
    while (year, month) <= end:
        yield year, month
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)


def current_events_page_title(year: int, month: int) -> str:
    """The Portal:Current events month page, e.g. 'Portal:Current events/January 2023'."""
    return f"Portal:Current events/{MONTH_NAMES[month - 1]} {year}"


def current_events_titles(client: MediaWikiClient, start_month: str, end_month: str) -> list[str]:
    """Main-namespace titles linked from the Portal:Current events month pages in the inclusive
    range ("2023-01".."2023-12"), deduplicated in first-seen order (GrowOVER's selection)."""
    seen: dict[str, None] = {}
    for year, month in _months(start_month, end_month):
        page_title = current_events_page_title(year, month)
        params: dict[str, str | int] = {
            "action": "query",
            "prop": "links",
            "titles": page_title,
            "plnamespace": 0,
            "pllimit": "max",
        }
        for query in client.query_continued(params, what=f"links of {page_title!r}"):
            for page in query.get("pages") or []:
                if page.get("missing") or page.get("invalid"):
                    logger.warning("MediaWiki API: %r does not exist; skipped", page_title)
                    continue
                for link in page.get("links") or []:
                    # plnamespace=0 already filters; checked again in case a server ignores it.
                    if link.get("ns", 0) == 0 and link.get("title"):
                        seen.setdefault(str(link["title"]), None)
    return list(seen)


def read_article_list(path: str | Path) -> ArticleSelection:
    """Parse an article list: one title or page id per line; '#' starts a comment, blank lines
    are ignored; digits only or 'id:12345' is a page id, anything else a title."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError as exc:
        raise WikidriftError(f"article list not found: {path}") from exc
    titles: list[str] = []
    page_ids: list[int] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        # '#' cannot occur in a MediaWiki title, so everything after it is a comment/fragment.
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.lower().startswith("id:"):
            value = line[3:].strip()
            if not (value.isascii() and value.isdigit()):
                raise WikidriftError(f"{path}:{lineno}: bad page id {line!r} (expected id:12345)")
            page_ids.append(int(value))
        elif line.isascii() and line.isdigit():
            page_ids.append(int(line))
        else:
            titles.append(line)
    return ArticleSelection(
        titles=tuple(dict.fromkeys(titles)), page_ids=tuple(dict.fromkeys(page_ids))
    )
