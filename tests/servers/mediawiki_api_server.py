"""A local MediaWiki Action API server over the real wikisnap folder, for tests over real HTTP.

It speaks the subset of ``api.php`` the pipeline uses, in the JSON ``formatversion=2`` shape of
the real API: ``action=query`` with ``titles``/``pageids``, ``redirects``, title normalization,
``prop=revisions`` (rvprop ids|timestamp|sha1|size|content, rvslots=main, rvstart/rvend/rvdir/
rvlimit, rvcontinue) and ``prop=links`` (plnamespace, pllimit, plcontinue) for
``Portal:Current events/<Month> <Year>`` pages built from the wikisnap titles. It gzips answers
for clients that accept gzip, records every request, and can be told to fail the next requests
(HTTP 429/5xx/4xx with ``Retry-After``, the ``maxlag`` API error, a dropped connection) or
misbehave on purpose (:meth:`misbehave_next`: drip an answer a byte at a time, send a gzip
bomb, redirect to another host)::

    with MediaWikiApiServer(wikisnap_dir) as srv:
        srv.fail_next(2, 429, retry_after=1)
        client = MediaWikiClient(srv.url, user_agent="tests (test@example.org)")

The server only knows the five stored revisions of each article: the "first" revision of a
page is its 2023-01-01 snapshot, so a date before that finds no revision (like a page that did
not exist yet). Wikisnap files are read in place, never copied.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import threading
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from pipeline.dates import MONTH_NAMES

API_PATH = "/w/api.php"

# Real enwiki redirects to wikisnap articles (title -> target title).
DEFAULT_REDIRECTS: dict[str, str] = {
    "Sony Music Entertainment": "Sony Music",
    "Universal Music": "Universal Music Group",
    "Department of Homeland Security": "United States Department of Homeland Security",
    "Champions League": "UEFA Champions League",
}

NAMESPACES: dict[str, int] = {
    "Talk": 1,
    "User": 2,
    "Wikipedia": 4,
    "File": 6,
    "Template": 10,
    "Help": 12,
    "Category": 14,
    "Portal": 100,
}

# Characters MediaWiki never allows in a title.
_ILLEGAL_TITLE_CHARS = set("#<>[]|{}")
# API error codes the server answers with HTTP 200 and a JSON error, like Wikimedia does.
_API_ERROR_INFO = {
    "maxlag": "Waiting for 10.64.0.1: 7 seconds lagged.",
    "ratelimited": "You've exceeded your rate limit. Please wait some time and try again.",
    "readonly": "The wiki is currently in read-only mode.",
}
_BAD_CONTINUE = (
    "Invalid continue param. You should pass the original value returned by the previous query."
)
_DOCREF = "See http://127.0.0.1/w/api.php for API usage."
_SINGLE_PAGE_ONLY = (
    "titles, pageids or a generator was used to supply multiple pages, but the rvlimit, "
    "rvstartid, rvendid, rvdir=newer, rvuser, rvexcludeuser, rvstart, and rvend parameters "
    "may only be used on a single page."
)


def normalize(title: str) -> str:
    """MediaWiki title normalization (own copy, so the client's is tested, not reused):
    underscores to spaces, whitespace collapsed, namespace and first letter capitalized."""
    t = " ".join(title.replace("_", " ").split())
    prefix, sep, rest = t.partition(":")
    for name in NAMESPACES:
        if sep and prefix.strip().lower() == name.lower():
            rest = rest.strip()
            return f"{name}:{rest[:1].upper()}{rest[1:]}"
    return t[:1].upper() + t[1:]


def namespace_of(title: str) -> int:
    """Namespace number of a normalized title (0 unless it has a known prefix)."""
    prefix, sep, _ = title.partition(":")
    return NAMESPACES.get(prefix, 0) if sep else 0


def current_events_page(year: int, month: int) -> str:
    """'Portal:Current events/January 2023' for (2023, 1)."""
    return f"Portal:Current events/{MONTH_NAMES[month - 1]} {year}"


def default_current_events(titles: Sequence[str]) -> dict[str, list[str]]:
    """Month pages January-April 2023 linking overlapping slices of ``titles`` (12 per month,
    3 shared with the next month), one redirect title, and non-article links (daily portal
    pages, a Wikipedia: page) that plnamespace=0 must filter out."""
    out: dict[str, list[str]] = {}
    n = len(titles)
    for k in range(4):
        links = [titles[(9 * k + i) % n] for i in range(12)] if n else []
        links += [f"Portal:Current events/2023 {MONTH_NAMES[k]} {day}" for day in (1, 2, 3)]
        links.append("Wikipedia:How the Current events page works")
        out[current_events_page(2023, k + 1)] = links
    out[current_events_page(2023, 2)].append("Sony Music Entertainment")
    return out


@dataclass
class RecordedRequest:
    """One request as the server saw it, and what it answered."""

    method: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]
    status: int = 0
    gzipped: bool = False
    body_bytes: int = 0  # bytes of body sent (after gzip)

    def header(self, name: str) -> str | None:
        """A request header by case-insensitive name."""
        for key, value in self.headers.items():
            if key.lower() == name.lower():
                return value
        return None


@dataclass
class _Revision:
    revid: int
    parentid: int
    timestamp: str
    path: Path | None = None  # wikisnap file holding the content
    text: str | None = None  # content of synthetic pages


@dataclass
class _Page:
    pageid: int
    title: str
    ns: int
    revisions: list[_Revision] = field(default_factory=list)  # oldest first
    redirect_to: str | None = None
    links: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Failure:
    kind: int | str
    retry_after: float | None


@dataclass(frozen=True)
class _Misbehaviour:
    kind: str  # "drip", "drip_body", "gzip_bomb", "redirect"
    interval_s: float = 1.0  # drip: seconds between bytes
    decoded_bytes: int = 0  # gzip_bomb: what the body inflates to
    location: str = ""  # redirect: the Location header


_BOMBS: dict[int, bytes] = {}


def gzip_bomb(decoded_bytes: int) -> bytes:
    """A gzip body of ``decoded_bytes`` zero bytes (about 1000:1; built once per size)."""
    if decoded_bytes not in _BOMBS:
        comp = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: gzip container
        block = bytes(1 << 20)
        parts = [comp.compress(block) for _ in range(decoded_bytes >> 20)]
        parts.append(comp.compress(bytes(decoded_bytes & ((1 << 20) - 1))))
        parts.append(comp.flush())
        _BOMBS[decoded_bytes] = b"".join(parts)
    return _BOMBS[decoded_bytes]


class _ApiError(Exception):
    def __init__(self, code: str, info: str) -> None:
        super().__init__(info)
        self.code = code
        self.info = info


class MediaWikiApiServer:
    """The local Action API. ``url`` is the api.php URL; ``requests`` the recorded requests."""

    def __init__(
        self,
        wikisnap_dir: str | Path,
        *,
        redirects: Mapping[str, str] | None = None,
        current_events: Mapping[str, Sequence[str]] | None = None,
        links_page_size: int = 7,
    ) -> None:
        self.wikisnap_dir = Path(wikisnap_dir)
        self.links_page_size = links_page_size
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._failures: list[_Failure | _Misbehaviour] = []
        self._hidden: set[int] = set()
        self._content_cache: dict[int, str] = {}
        self._pages_by_title: dict[str, _Page] = {}
        self._pages_by_id: dict[int, _Page] = {}
        self._load_wikisnap()
        article_titles = [p.title for p in self._pages_by_id.values()]
        self.redirects = dict(DEFAULT_REDIRECTS if redirects is None else redirects)
        for i, (source, target) in enumerate(sorted(self.redirects.items())):
            self._add_page(
                _Page(
                    pageid=80_000_001 + i,
                    title=source,
                    ns=namespace_of(source),
                    revisions=[
                        _Revision(
                            90_000_001 + i,
                            0,
                            "2010-01-01T00:00:00Z",
                            text=f"#REDIRECT [[{target}]]",
                        )
                    ],
                    redirect_to=target,
                )
            )
        self.current_events = {
            k: list(v)
            for k, v in (
                default_current_events(article_titles) if current_events is None else current_events
            ).items()
        }
        for i, (page_title, links) in enumerate(self.current_events.items()):
            text = "\n".join(f"* [[{link}]]" for link in links)
            self._add_page(
                _Page(
                    pageid=70_000_001 + i,
                    title=page_title,
                    ns=namespace_of(page_title),
                    revisions=[_Revision(91_000_001 + i, 0, "2022-12-01T00:00:00Z", text=text)],
                    links=sorted(set(links), key=lambda t: (namespace_of(t), t)),
                )
            )
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- data -------------------------------------------------------------------------------

    def _load_wikisnap(self) -> None:
        manifest = json.loads((self.wikisnap_dir / "MANIFEST.json").read_text())
        for article in manifest["articles"]:
            snaps = sorted(article["snapshots"].values(), key=lambda s: s["revision_timestamp"])
            revisions: list[_Revision] = []
            for snap in snaps:
                if revisions and revisions[-1].revid == snap["revision_id"]:
                    continue  # unchanged between two snapshot dates: one revision
                parent = revisions[-1].revid if revisions else 0
                revisions.append(
                    _Revision(
                        int(snap["revision_id"]),
                        parent,
                        snap["revision_timestamp"],
                        path=self.wikisnap_dir / snap["path"],
                    )
                )
            title = snaps[-1]["title"] if snaps else article["title"]
            self._add_page(_Page(int(article["page_id"]), title, namespace_of(title), revisions))

    def _add_page(self, page: _Page) -> None:
        self._pages_by_title[page.title] = page
        self._pages_by_id[page.pageid] = page

    def _content(self, rev: _Revision) -> str:
        if rev.text is not None:
            return rev.text
        with self._lock:
            cached = self._content_cache.get(rev.revid)
        if cached is None:
            assert rev.path is not None
            cached = json.loads(rev.path.read_text(encoding="utf-8"))["content"]
            with self._lock:
                self._content_cache[rev.revid] = cached
        return cached

    # -- knobs ------------------------------------------------------------------------------

    def fail_next(
        self, count: int, kind: int | str = 429, *, retry_after: float | None = 1
    ) -> None:
        """Fail the next ``count`` requests: an int is an HTTP status (429, 500, 503, 400...);
        'maxlag', 'ratelimited', 'readonly' (or any code) is an HTTP 200 API error like the real
        API sends; 'disconnect' closes the connection without answering. ``retry_after`` (seconds)
        is sent as Retry-After unless None."""
        with self._lock:
            self._failures.extend(_Failure(kind, retry_after) for _ in range(count))

    def misbehave_next(
        self,
        count: int,
        kind: str,
        *,
        interval_s: float = 1.0,
        decoded_bytes: int = 256 << 20,
        location: str = "",
    ) -> None:
        """Misbehave on the next ``count`` requests: ``"drip"`` sends the whole answer (status
        line and headers included) one byte every ``interval_s``; ``"drip_body"`` sends the
        headers at once and the body that slowly; ``"gzip_bomb"`` answers 200 with a gzip
        body inflating to ``decoded_bytes``; ``"redirect"`` answers 302 to ``location``."""
        with self._lock:
            self._failures.extend(
                _Misbehaviour(kind, interval_s, decoded_bytes, location) for _ in range(count)
            )

    def hide_revision_content(self, revid: int) -> None:
        """Answer as if revision ``revid``'s text were revision-deleted (texthidden)."""
        with self._lock:
            self._hidden.add(revid)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of the requests recorded so far, oldest first."""
        with self._lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        """Forget the recorded requests."""
        with self._lock:
            self._requests.clear()

    def reset(self) -> None:
        """Forget recorded requests, pending failures and hidden revisions (between tests)."""
        with self._lock:
            self._requests.clear()
            self._failures.clear()
            self._hidden.clear()

    def page_id_of(self, title: str) -> int:
        """Page id of a title the server knows (articles, redirects, portal pages)."""
        return self._pages_by_title[normalize(title)].pageid

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The api.php URL of the running server."""
        if self._httpd is None:
            raise RuntimeError("server not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}{API_PATH}"

    def start(self) -> MediaWikiApiServer:
        """Bind 127.0.0.1 on a free port and serve in a background thread."""
        if self._httpd is not None:
            return self
        handler = type("BoundHandler", (_Handler,), {"api": self})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},  # quick shutdown between tests
            name="mediawiki-api-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> MediaWikiApiServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- request handling -------------------------------------------------------------------

    def _record(self, rec: RecordedRequest) -> _Failure | _Misbehaviour | None:
        with self._lock:
            self._requests.append(rec)
            return self._failures.pop(0) if self._failures else None

    def answer(self, params: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
        """The JSON answer (and extra headers) for one api.php request."""
        try:
            return self._dispatch(params), {}
        except _ApiError as err:
            return _error_body(err.code, err.info), {"MediaWiki-API-Error": err.code}

    def _dispatch(self, params: Mapping[str, str]) -> dict[str, Any]:
        if params.get("format") != "json":
            raise _ApiError("badvalue", 'This test server only speaks "format=json".')
        if params.get("formatversion") != "2":
            raise _ApiError("badvalue", 'This test server only speaks "formatversion=2".')
        if "maxlag" in params and not params["maxlag"].lstrip("-").isdigit():
            raise _ApiError("badinteger", f'Invalid value "{params["maxlag"]}" for "maxlag".')
        action = params.get("action", "help")
        if action != "query":
            raise _ApiError("badvalue", f'Unrecognized value for parameter "action": {action}.')
        return self._query(params)

    def _query(self, params: Mapping[str, str]) -> dict[str, Any]:
        warnings: dict[str, dict[str, str]] = {}
        if "titles" in params and "pageids" in params:
            raise _ApiError(
                "invalidparammix", "The parameters titles and pageids cannot be used together."
            )
        query: dict[str, Any] = {}
        pages = self._resolve_pages(params, query)
        props = [p for p in params.get("prop", "").split("|") if p]
        cont: dict[str, str] = {}
        limits: dict[str, int] = {}
        page_out = [self._page_stub(p) for p in pages]
        for prop in props:
            if prop == "revisions":
                cont.update(self._prop_revisions(params, pages, page_out, warnings))
            elif prop == "links":
                cont.update(self._prop_links(params, pages, page_out, limits))
            else:
                warnings.setdefault("main", {})["warnings"] = (
                    f'Unrecognized value for parameter "prop": {prop}.'
                )
        if page_out:
            query["pages"] = page_out
        body: dict[str, Any] = {}
        if not cont:
            body["batchcomplete"] = True
        else:
            body["continue"] = {**cont, "continue": "||"}
        if warnings:
            body["warnings"] = warnings
        if limits:
            body["limits"] = limits
        if query:
            body["query"] = query
        return body

    def _resolve_pages(
        self, params: Mapping[str, str], query: dict[str, Any]
    ) -> list[_Page | dict[str, Any]]:
        """Pages named by titles/pageids (normalized, redirects followed when asked), each once;
        missing and invalid ones as ready-made output dicts."""
        follow = "redirects" in params  # a MediaWiki boolean: present means true
        normalized: list[dict[str, Any]] = []
        redirects: list[dict[str, str]] = []
        out: list[_Page | dict[str, Any]] = []
        seen: set[int | str] = set()

        def add(page: _Page | dict[str, Any], key: int | str) -> None:
            if key not in seen:
                seen.add(key)
                out.append(page)

        def follow_redirect(page: _Page) -> _Page | dict[str, Any]:
            if not (follow and page.redirect_to):
                return page
            target = normalize(page.redirect_to)
            redirects.append({"from": page.title, "to": target})
            found = self._pages_by_title.get(target)
            return (
                found if found else {"ns": namespace_of(target), "title": target, "missing": True}
            )

        for raw in _multi(params.get("titles")):
            title = normalize(raw)
            if not title or _ILLEGAL_TITLE_CHARS & set(title):
                reason = "The requested page title is empty or contains illegal characters."
                add({"title": raw, "invalidreason": reason, "invalid": True}, f"invalid:{raw}")
                continue
            if title != raw:
                normalized.append({"fromencoded": False, "from": raw, "to": title})
            page = self._pages_by_title.get(title)
            if page is None:
                add({"ns": namespace_of(title), "title": title, "missing": True}, title)
                continue
            resolved = follow_redirect(page)
            key = resolved.pageid if isinstance(resolved, _Page) else str(resolved["title"])
            add(resolved, key)
        for raw in _multi(params.get("pageids")):
            if not raw.isdigit():
                raise _ApiError(
                    "badinteger", f'Invalid value "{raw}" for integer parameter "pageids".'
                )
            page = self._pages_by_id.get(int(raw))
            if page is None:
                add({"pageid": int(raw), "missing": True}, f"id:{raw}")
                continue
            resolved = follow_redirect(page)
            key = resolved.pageid if isinstance(resolved, _Page) else str(resolved["title"])
            add(resolved, key)
        if normalized:
            query["normalized"] = normalized
        if redirects:
            query["redirects"] = redirects
        return out

    @staticmethod
    def _page_stub(page: _Page | dict[str, Any]) -> dict[str, Any]:
        if isinstance(page, dict):
            return dict(page)
        return {"pageid": page.pageid, "ns": page.ns, "title": page.title}

    def _prop_revisions(
        self,
        params: Mapping[str, str],
        pages: list[_Page | dict[str, Any]],
        page_out: list[dict[str, Any]],
        warnings: dict[str, dict[str, str]],
    ) -> dict[str, str]:
        single_mode_keys = ("rvlimit", "rvstart", "rvend", "rvcontinue")
        single = any(k in params for k in single_mode_keys) or params.get("rvdir") == "newer"
        if single and len(pages) > 1:
            raise _ApiError("invalidparammix", _SINGLE_PAGE_ONLY)
        rvprop = set(params.get("rvprop", "ids|timestamp|flags|comment|user").split("|"))
        slots = params.get("rvslots")
        if slots is not None and slots not in ("main", "*"):
            raise _ApiError("badvalue", f'Unrecognized value for parameter "rvslots": {slots}.')
        if "content" in rvprop and slots is None:
            warnings.setdefault("main", {})["warnings"] = (
                'Because "rvslots" was not specified, a legacy format has been used for the '
                "output. This format is deprecated, and in the future the new format will "
                "always be used."
            )
        cont: dict[str, str] = {}
        for page, out in zip(pages, page_out, strict=True):
            if not isinstance(page, _Page):
                continue
            if not single:
                chosen = page.revisions[-1:]
            else:
                chosen, cont = self._select_revisions(params, page)
            if chosen:
                out["revisions"] = [self._revision_json(r, rvprop, slots) for r in chosen]
        return cont

    def _select_revisions(
        self, params: Mapping[str, str], page: _Page
    ) -> tuple[list[_Revision], dict[str, str]]:
        """rvdir/rvstart/rvend/rvlimit/rvcontinue over one page's stored revisions."""
        newer = params.get("rvdir", "older") == "newer"
        if params.get("rvdir", "older") not in ("older", "newer"):
            raise _ApiError(
                "badvalue", f'Unrecognized value for parameter "rvdir": {params["rvdir"]}.'
            )
        start = _api_timestamp(params.get("rvstart"), "rvstart")
        end = _api_timestamp(params.get("rvend"), "rvend")
        revs = list(page.revisions) if newer else list(reversed(page.revisions))
        if newer:
            revs = [r for r in revs if (start is None or r.timestamp >= start)]
            revs = [r for r in revs if (end is None or r.timestamp <= end)]
        else:
            revs = [r for r in revs if (start is None or r.timestamp <= start)]
            revs = [r for r in revs if (end is None or r.timestamp >= end)]
        if "rvcontinue" in params:
            ts, _, revid = params["rvcontinue"].partition("|")
            if not revid.isdigit():
                raise _ApiError("badcontinue", _BAD_CONTINUE)
            key = (ts, int(revid))
            revs = [
                r
                for r in revs
                if (
                    (_compact(r.timestamp), r.revid) >= key
                    if newer
                    else (_compact(r.timestamp), r.revid) <= key
                )
            ]
        limit = _limit(params.get("rvlimit"), "rvlimit", default=10, maximum=50)
        if len(revs) > limit:
            nxt = revs[limit]
            return revs[:limit], {"rvcontinue": f"{_compact(nxt.timestamp)}|{nxt.revid}"}
        return revs, {}

    def _revision_json(self, rev: _Revision, rvprop: set[str], slots: str | None) -> dict[str, Any]:
        with self._lock:
            hidden = rev.revid in self._hidden
        out: dict[str, Any] = {}
        if "ids" in rvprop:
            out["revid"] = rev.revid
            out["parentid"] = rev.parentid
        if "timestamp" in rvprop:
            out["timestamp"] = rev.timestamp
        text = self._content(rev)
        if "size" in rvprop:
            out["size"] = len(text.encode("utf-8"))
        if "sha1" in rvprop:
            if hidden:
                out["sha1hidden"] = True
            else:
                out["sha1"] = hashlib.sha1(text.encode("utf-8")).hexdigest()
        if "content" in rvprop:
            slot: dict[str, Any] = {"contentmodel": "wikitext", "contentformat": "text/x-wiki"}
            if hidden:
                slot = {"contentmodel": "wikitext", "texthidden": True}
            else:
                slot["content"] = text
            if slots is None:
                out.update(slot)  # the deprecated pre-MCR shape
            else:
                out["slots"] = {"main": slot}
        return out

    def _prop_links(
        self,
        params: Mapping[str, str],
        pages: list[_Page | dict[str, Any]],
        page_out: list[dict[str, Any]],
        limits: dict[str, int],
    ) -> dict[str, str]:
        """Links ordered by (page id, namespace, title) like the links table, paged with
        plcontinue='<pageid>|<ns>|<dbkey>' after at most links_page_size per answer."""
        namespaces = {int(n) for n in _multi(params.get("plnamespace")) if n.lstrip("-").isdigit()}
        if params.get("pllimit") == "max":
            limits["links"] = 500
        limit = min(
            _limit(params.get("pllimit"), "pllimit", default=10, maximum=500), self.links_page_size
        )
        rows: list[tuple[int, int, str, int]] = []  # (pageid, ns, title, index into page_out)
        for i, page in enumerate(pages):
            if isinstance(page, _Page):
                rows += [
                    (page.pageid, namespace_of(t), t, i)
                    for t in page.links
                    if not namespaces or namespace_of(t) in namespaces
                ]
        rows.sort(key=lambda r: (r[0], r[1], r[2]))
        if "plcontinue" in params:
            parts = params["plcontinue"].split("|", 2)
            if len(parts) != 3 or not parts[0].isdigit() or not parts[1].lstrip("-").isdigit():
                raise _ApiError("badcontinue", _BAD_CONTINUE)
            key = (int(parts[0]), int(parts[1]), parts[2].replace("_", " "))
            rows = [r for r in rows if (r[0], r[1], r[2]) >= key]
        for _pageid, ns, title, i in rows[:limit]:
            page_out[i].setdefault("links", []).append({"ns": ns, "title": title})
        if len(rows) > limit:
            pageid, ns, title, _ = rows[limit]
            return {"plcontinue": f"{pageid}|{ns}|{title.replace(' ', '_')}"}
        return {}


class _Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive (as requests.Session uses it), one api.php endpoint."""

    api: MediaWikiApiServer
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: without TCP_NODELAY each answer waits ~40 ms on
    # the client's delayed ACK.
    disable_nagle_algorithm = True
    server_version = "mediawiki-api-test/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # keep test output clean

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._handle("GET", b"")

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        length = int(self.headers.get("Content-Length") or 0)
        self._handle("POST", self.rfile.read(length) if length else b"")

    def _handle(self, method: str, body: bytes) -> None:
        split = urlsplit(self.path)
        params = dict(parse_qsl(split.query, keep_blank_values=True))
        if body:
            params.update(parse_qsl(body.decode("utf-8"), keep_blank_values=True))
        rec = RecordedRequest(method, split.path, params, dict(self.headers.items()))
        failure = self.api._record(rec)
        if split.path != API_PATH:
            self._send(rec, 404, b"Not Found", "text/plain; charset=utf-8")
            return
        if isinstance(failure, _Misbehaviour):
            self._misbehave(rec, failure, params)
            return
        if failure is not None:
            self._fail(rec, failure)
            return
        payload, headers = self.api.answer(params)
        self._send_json(rec, 200, payload, headers)

    def _misbehave(
        self, rec: RecordedRequest, how: _Misbehaviour, params: Mapping[str, str]
    ) -> None:
        rec.status = 200
        if how.kind == "redirect":
            rec.status = 302
            self.send_response(302)
            self.send_header("Location", how.location)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if how.kind == "gzip_bomb":
            body = gzip_bomb(how.decoded_bytes)
            rec.gzipped, rec.body_bytes = True, len(body)
            self.send_response(200)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        # drip / drip_body: a real answer, but a byte at a time.
        payload, _ = self.api.answer(params)
        body = json.dumps(payload).encode("utf-8")
        head = (
            f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode()
        self.close_connection = True
        dripped = head + body if how.kind == "drip" else body
        if how.kind == "drip_body":
            self.wfile.write(head)
            self.wfile.flush()
        try:
            for i in range(len(dripped)):
                self.wfile.write(dripped[i : i + 1])
                self.wfile.flush()
                rec.body_bytes += 1
                time.sleep(how.interval_s)
        except OSError:
            return  # the client gave up: what a bounded client should do

    def _fail(self, rec: RecordedRequest, failure: _Failure) -> None:
        headers: dict[str, str] = {}
        if failure.retry_after is not None:
            headers["Retry-After"] = _format_seconds(failure.retry_after)
        if failure.kind == "disconnect":
            rec.status = -1
            self.close_connection = True  # drop the socket without a word
            return
        if isinstance(failure.kind, int):
            text = f"<html><body><h1>HTTP {failure.kind}</h1>test failure</body></html>"
            self._send(rec, failure.kind, text.encode(), "text/html; charset=utf-8", headers)
            return
        code = str(failure.kind)
        headers["MediaWiki-API-Error"] = code
        if code == "maxlag":
            headers["X-Database-Lag"] = "7"
        info = _API_ERROR_INFO.get(code, f"Test failure {code}.")
        payload = _error_body(code, info)
        if code == "maxlag":
            payload["error"].update(host="10.64.0.1", lag=7, type="db")
        self._send_json(rec, 200, payload, headers)

    def _send_json(
        self,
        rec: RecordedRequest,
        status: int,
        payload: Mapping[str, Any],
        headers: Mapping[str, str],
    ) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self._send(rec, status, data, "application/json; charset=utf-8", headers)

    def _send(
        self,
        rec: RecordedRequest,
        status: int,
        data: bytes,
        content_type: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        accept = (self.headers.get("Accept-Encoding") or "").lower()
        gzipped = any(tok.strip().split(";")[0] == "gzip" for tok in accept.split(","))
        if gzipped:
            data = gzip.compress(data, compresslevel=5)
        rec.status, rec.gzipped, rec.body_bytes = status, gzipped, len(data)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Vary", "Accept-Encoding")
        if gzipped:
            self.send_header("Content-Encoding", "gzip")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


def _error_body(code: str, info: str) -> dict[str, Any]:
    return {"error": {"code": code, "info": info, "docref": _DOCREF}, "servedby": "test-server"}


def _multi(value: str | None) -> list[str]:
    """A multi-value parameter split on '|' (empty values dropped)."""
    return [v for v in (value or "").split("|") if v != ""]


def _limit(value: str | None, name: str, *, default: int, maximum: int) -> int:
    if value is None:
        return default
    if value == "max":
        return maximum
    if not value.isdigit() or int(value) < 1:
        raise _ApiError("badinteger", f'Invalid value "{value}" for integer parameter "{name}".')
    return min(int(value), maximum)


def _api_timestamp(value: str | None, name: str) -> str | None:
    """An ISO 8601 'YYYY-MM-DDTHH:MM:SSZ' timestamp, comparable as a string with stored ones."""
    if value is None:
        return None
    v = value.strip()
    if len(v) == 14 and v.isdigit():  # MediaWiki also takes TS_MW 'YYYYMMDDHHMMSS'
        v = f"{v[:4]}-{v[4:6]}-{v[6:8]}T{v[8:10]}:{v[10:12]}:{v[12:14]}Z"
    if len(v) != 20 or v[10] != "T" or not v.endswith("Z"):
        raise _ApiError(
            "badtimestamp", f'Invalid value "{value}" for timestamp parameter "{name}".'
        )
    return v


def _compact(ts: str) -> str:
    """'2023-12-31T18:49:52Z' -> '20231231184952' (the form used in rvcontinue)."""
    return "".join(ch for ch in ts if ch.isdigit())


def _format_seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
