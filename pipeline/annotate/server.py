"""The annotation web page and its JSON API (``wikidrift annotate serve``).

Standard library only (``http.server``, one thread per request) and no external assets: the
page, its script and its style are served from ``static/``. Every judgment is appended to
``<annotator>.jsonl`` as one JSON line, flushed and fsynced before the answer goes back, under
a lock per file so two annotators (or two tabs) never interleave bytes.

API (JSON in and out; errors are ``{"error": "..."}`` with a 4xx status)::

    GET  /api/info                          release, old snapshot, task count, labels, keys
    GET  /api/tasks[?annotator=a]           every task (blind view) [+ a's current labels]
    GET  /api/tasks/<id>[?annotator=a]      one task, its position [+ a's current label]
    GET  /api/tasks/<id>/old-article        the whole old article, by section
    GET  /api/next?annotator=a[&after=<id>] the next task a has not judged (after <id>)
    GET  /api/judgments?annotator=a         a's current judgments, in task order
    POST /api/judgments                     {"annotator", "task_id", "label"[, "elapsed_ms"]}
    GET  /api/progress                      judgments per annotator and per task

Status codes: 400 bad JSON / field / annotator / label, 404 unknown path or task id, 405
wrong method (with ``Allow``), 413 body too large, 415 POST without a JSON content type (which
also keeps other web sites from posting here: a cross-origin JSON POST needs a preflight this
server never grants), 421 a ``Host`` header naming another server (a DNS-rebinding page).

Under load: a listen backlog of :data:`LISTEN_BACKLOG` (a burst of concurrent posts queues
instead of being reset), a socket timeout (:data:`IDLE_TIMEOUT_S`) that closes idle or
stalled connections so they do not hold a thread each, and at most :data:`MAX_CONNECTIONS`
connections served at once. A connection beyond the cap waits up to :data:`SLOT_WAIT_S` for
a slot (a burst of real requests frees slots within that), then gets 503 with ``Retry-After``;
once a wait has run out the server counts as saturated and later connections get that 503 at
once until a slot frees (a client trickling one byte just inside the timeout can hold a
connection, never the server). The page retries a 503 after ``Retry-After``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import os
import re
import socket
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from pipeline.annotate import (
    JUDGMENT_LABELS,
    JudgmentLog,
    annotator_problem,
    judgment_files,
    public_task,
    read_judgment_file,
    read_tasks,
    release_annotations_dir,
)
from pipeline.errors import WikidriftError
from pipeline.storage import fsync_dir

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).parent / "static"
STATIC_FILES: dict[str, tuple[str, str]] = {
    "/": ("annotate.html", "text/html; charset=utf-8"),
    "/annotate.js": ("annotate.js", "text/javascript; charset=utf-8"),
    "/annotate.css": ("annotate.css", "text/css; charset=utf-8"),
}
MAX_BODY_BYTES = 64 * 1024
# The stdlib default backlog is 5: 200 concurrent posts saw 154 connection resets. The kernel
# caps it at net.core.somaxconn (4096 on current Linux).
LISTEN_BACKLOG = 1024
IDLE_TIMEOUT_S = 30.0
# Handler threads at once; annotators are a handful of people, a page makes a few requests.
MAX_CONNECTIONS = 64
# Refusing at once when all slots were busy gave 26 of 200 burst posts a 503 on a CI runner whose
# fsync is slow; the slots were only busy for a moment, so a connection first waits this long.
SLOT_WAIT_S = 2.0
_BUSY_TEXT = b"too many connections; retry in a second\n"
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: text/plain\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(_BUSY_TEXT), _BUSY_TEXT)
)
_LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}
SHORTCUTS = {"1": "supported", "2": "not_supported", "3": "uncertain", "u": "back", "o": "old"}
_POST_FIELDS = {"annotator", "task_id", "label", "elapsed_ms"}


class ApiError(Exception):
    """A request the API refuses: HTTP status plus a message for the JSON body."""

    def __init__(self, status: HTTPStatus, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def append_line_durably(path: Path, line: str) -> None:
    """Append one line to ``path`` and fsync it; the caller holds the file's lock."""
    data = line.encode("utf-8")
    created = not path.exists()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            # A crash mid-append left a torn line: end it so this record stays parseable.
            data = b"\n" + data
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        fsync_dir(path.parent)  # a new file's directory entry


class AnnotationStore:
    """Tasks of one release and every annotator's judgments, in memory and on disk."""

    def __init__(self, directory: Path, tasks: list[dict[str, Any]]) -> None:
        self.directory = directory
        self.tasks = tasks
        self.position = {t["task_id"]: i for i, t in enumerate(tasks)}
        if len(self.position) != len(tasks):
            dupes = [k for k, n in Counter(t["task_id"] for t in tasks).items() if n > 1]
            raise WikidriftError(f"{directory}/tasks.jsonl repeats task ids: {dupes[:5]}")
        self.public = {t["task_id"]: public_task(t) for t in tasks}
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        existing = JudgmentLog()
        for annotator, path in judgment_files(directory):
            read_judgment_file(path, annotator, existing)
        # Judgments of tasks no longer in the sample stay on disk but do not count here.
        self._latest: dict[str, dict[str, dict[str, Any]]] = {
            a: {tid: rec for tid, rec in js.items() if tid in self.position}
            for a, js in existing.latest.items()
        }

    def _lock(self, annotator: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(annotator, threading.Lock())

    def task(self, task_id: str) -> dict[str, Any]:
        """The blind view of one task; ApiError 404 when unknown."""
        if task_id not in self.public:
            raise ApiError(HTTPStatus.NOT_FOUND, f"unknown task id {task_id!r}")
        return self.public[task_id]

    def judgments(self, annotator: str) -> dict[str, dict[str, Any]]:
        """task_id -> current judgment record of one annotator (a copy)."""
        with self._lock(annotator):
            return dict(self._latest.get(annotator, {}))

    def record(
        self, annotator: str, task_id: str, label: str, elapsed_ms: int | None = None
    ) -> tuple[dict[str, Any], bool]:
        """Append a judgment durably; returns (record, whether it replaced an earlier one)."""
        problem = annotator_problem(annotator)
        if problem:  # the name becomes a file name: never trust a caller with it
            raise ApiError(HTTPStatus.BAD_REQUEST, problem)
        if label not in JUDGMENT_LABELS:
            raise ApiError(
                HTTPStatus.BAD_REQUEST, f"label {label!r} is not one of {JUDGMENT_LABELS}"
            )
        self.task(task_id)
        rec: dict[str, Any] = {
            "task_id": task_id,
            "label": label,
            "annotator": annotator,
            "release": self.tasks[self.position[task_id]].get("release"),
            "at": _now(),
        }
        if elapsed_ms is not None:
            rec["elapsed_ms"] = elapsed_ms
        line = json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n"
        with self._lock(annotator):
            append_line_durably(self.directory / f"{annotator}.jsonl", line)
            with self._guard:  # progress() lists annotators under the guard
                mine = self._latest.setdefault(annotator, {})
            superseded = task_id in mine
            mine[task_id] = rec
        return rec, superseded

    def next_task(self, annotator: str, after: str | None = None) -> int | None:
        """Index of the first task ``annotator`` has not judged, looking after task ``after``
        first and then from the start; None when every task is judged."""
        done = self.judgments(annotator)
        start = self.position[after] + 1 if after is not None else 0
        n = len(self.tasks)
        for k in range(n):
            i = (start + k) % n
            if self.tasks[i]["task_id"] not in done:
                return i
        return None

    def progress(self) -> dict[str, Any]:
        """Judgments per annotator and how many raters each task has."""
        with self._guard:
            annotators = list(self._latest)
        per_annotator = {}
        raters: Counter[str] = Counter()
        for a in sorted(annotators):
            js = self.judgments(a)
            per_annotator[a] = {
                "done": len(js),
                "last_at": max((r["at"] for r in js.values() if "at" in r), default=None),
            }
            raters.update(js.keys())
        per_task = Counter(min(raters.get(t["task_id"], 0), 3) for t in self.tasks)
        return {
            "total": len(self.tasks),
            "annotators": per_annotator,
            "tasks_by_raters": {
                "0": per_task[0],
                "1": per_task[1],
                "2": per_task[2],
                "3+": per_task[3],
            },
        }


class OldArticles:
    """The old snapshot's sentences of one article at a time, read on demand and cached."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._cache: dict[tuple[str, int], dict[str, Any]] = {}
        self._lock = threading.Lock()

    def get(self, snapshot: str, page_id: int) -> dict[str, Any]:
        """``{page_id, snapshot, title, revision_id, sections: [{name, sentences}]}``."""
        key = (snapshot, page_id)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        from pipeline.layout import read_snapshot_table

        try:
            sents = read_snapshot_table(
                self.workdir,
                snapshot,
                "sentences",
                page_ids=[page_id],
                columns=["page_id", "sent_idx", "section", "text"],
            ).to_pylist()
            arts = read_snapshot_table(
                self.workdir,
                snapshot,
                "articles",
                page_ids=[page_id],
                columns=["page_id", "title", "revision_id"],
            ).to_pylist()
        except (WikidriftError, FileNotFoundError) as exc:
            raise ApiError(
                HTTPStatus.SERVICE_UNAVAILABLE, f"old snapshot {snapshot} not readable: {exc}"
            ) from None
        sections: list[dict[str, Any]] = []
        for s in sorted(sents, key=lambda r: r["sent_idx"]):
            # Consecutive sentences of one section form one block, in article order.
            if not sections or sections[-1]["name"] != s["section"]:
                sections.append({"name": s["section"], "sentences": []})
            sections[-1]["sentences"].append({"sent_idx": s["sent_idx"], "text": s["text"]})
        article = {
            "page_id": page_id,
            "snapshot": snapshot,
            "title": arts[0]["title"] if arts else None,
            "revision_id": arts[0]["revision_id"] if arts else None,
            "exists": bool(arts),
            "sections": sections,
        }
        with self._lock:
            self._cache[key] = article
        return article


@dataclass
class ApiRequest:
    """What a handler gets: path parameters, query string and decoded JSON body."""

    params: dict[str, str]
    query: dict[str, list[str]]
    body: Any = None


Handler = Callable[[ApiRequest], tuple[HTTPStatus, Any]]


class AnnotationApp:
    """Routes and handlers, independent of the HTTP plumbing."""

    def __init__(self, workdir: Path, release: str, store: AnnotationStore) -> None:
        self.workdir = workdir
        self.release = release
        self.store = store
        self.old_articles = OldArticles(workdir)
        first = store.tasks[0] if store.tasks else {}
        self.old_snapshot = first.get("old_snapshot")
        self.routes: list[tuple[re.Pattern[str], dict[str, Handler]]] = [
            (re.compile(r"/api/info"), {"GET": self.info}),
            (re.compile(r"/api/tasks"), {"GET": self.list_tasks}),
            (re.compile(r"/api/tasks/(?P<task_id>[^/]+)"), {"GET": self.get_task}),
            (re.compile(r"/api/tasks/(?P<task_id>[^/]+)/old-article"), {"GET": self.old_article}),
            (re.compile(r"/api/next"), {"GET": self.next_task}),
            (re.compile(r"/api/judgments"), {"GET": self.list_judgments, "POST": self.judge}),
            (re.compile(r"/api/progress"), {"GET": self.progress}),
        ]

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _optional_annotator(query: dict[str, list[str]]) -> str | None:
        values = query.get("annotator")
        if not values:
            return None
        problem = annotator_problem(values[0])
        if problem:
            raise ApiError(HTTPStatus.BAD_REQUEST, problem)
        return values[0]

    def _required_annotator(self, query: dict[str, list[str]]) -> str:
        annotator = self._optional_annotator(query)
        if annotator is None:
            raise ApiError(HTTPStatus.BAD_REQUEST, "query parameter 'annotator' is required")
        return annotator

    def _position(self, index: int | None, annotator: str) -> dict[str, Any]:
        done = len(self.store.judgments(annotator))
        total = len(self.store.tasks)
        task = None if index is None else self.store.public[self.store.tasks[index]["task_id"]]
        return {
            "task": task,
            "position": None if index is None else index + 1,
            "total": total,
            "done": done,
            "remaining": total - done,
        }

    # ------------------------------------------------------------------ handlers
    def info(self, req: ApiRequest) -> tuple[HTTPStatus, Any]:
        """Release, old snapshot, task count, labels and keyboard shortcuts."""
        return HTTPStatus.OK, {
            "release": self.release,
            "old_snapshot": self.old_snapshot,
            "total": len(self.store.tasks),
            "labels": list(JUDGMENT_LABELS),
            "shortcuts": SHORTCUTS,
        }

    def list_tasks(self, req: ApiRequest) -> tuple[HTTPStatus, Any]:
        """Every task (blind view); with ``annotator``, that annotator's current labels."""
        annotator = self._optional_annotator(req.query)
        body: dict[str, Any] = {
            "release": self.release,
            "total": len(self.store.tasks),
            "tasks": [self.store.public[t["task_id"]] for t in self.store.tasks],
        }
        if annotator:
            body["judgments"] = {
                tid: rec["label"] for tid, rec in self.store.judgments(annotator).items()
            }
        return HTTPStatus.OK, body

    def get_task(self, req: ApiRequest) -> tuple[HTTPStatus, Any]:
        """One task with its position; with ``annotator``, that annotator's current label."""
        task = self.store.task(req.params["task_id"])
        annotator = self._optional_annotator(req.query)
        body = {
            "task": task,
            "position": self.store.position[req.params["task_id"]] + 1,
            "total": len(self.store.tasks),
        }
        if annotator:
            rec = self.store.judgments(annotator).get(req.params["task_id"])
            body["judgment"] = rec["label"] if rec else None
        return HTTPStatus.OK, body

    def old_article(self, req: ApiRequest) -> tuple[HTTPStatus, Any]:
        """The whole old article of a task's page, by section."""
        task = self.store.task(req.params["task_id"])
        return HTTPStatus.OK, self.old_articles.get(task["old_snapshot"], task["page_id"])

    def next_task(self, req: ApiRequest) -> tuple[HTTPStatus, Any]:
        """The next task the annotator has not judged (``task`` is null when all are)."""
        annotator = self._required_annotator(req.query)
        after = req.query.get("after", [None])[0]
        if after is not None:
            self.store.task(after)
        return HTTPStatus.OK, self._position(self.store.next_task(annotator, after), annotator)

    def list_judgments(self, req: ApiRequest) -> tuple[HTTPStatus, Any]:
        """One annotator's current judgments in task order."""
        annotator = self._required_annotator(req.query)
        mine = self.store.judgments(annotator)
        ordered = [mine[t["task_id"]] for t in self.store.tasks if t["task_id"] in mine]
        return HTTPStatus.OK, {"annotator": annotator, "judgments": ordered}

    def judge(self, req: ApiRequest) -> tuple[HTTPStatus, Any]:
        """Record one judgment (a later one for the same task supersedes it)."""
        body = req.body
        if not isinstance(body, dict):
            raise ApiError(HTTPStatus.BAD_REQUEST, "the body must be a JSON object")
        unknown = sorted(set(body) - _POST_FIELDS)
        if unknown:
            raise ApiError(
                HTTPStatus.BAD_REQUEST,
                f"unknown field(s) {unknown}; expected {sorted(_POST_FIELDS)}",
            )
        problem = annotator_problem(body.get("annotator"))
        if problem:
            raise ApiError(HTTPStatus.BAD_REQUEST, problem)
        task_id = body.get("task_id")
        if not isinstance(task_id, str) or not task_id:
            raise ApiError(HTTPStatus.BAD_REQUEST, "field 'task_id' (a string) is required")
        label = body.get("label")
        if label not in JUDGMENT_LABELS:
            raise ApiError(
                HTTPStatus.BAD_REQUEST,
                f"label {label!r} is not one of {list(JUDGMENT_LABELS)}",
            )
        elapsed = body.get("elapsed_ms")
        if elapsed is not None and (
            not isinstance(elapsed, int) or isinstance(elapsed, bool) or elapsed < 0
        ):
            raise ApiError(HTTPStatus.BAD_REQUEST, "'elapsed_ms' must be a non-negative integer")
        rec, superseded = self.store.record(body["annotator"], task_id, label, elapsed)
        done = len(self.store.judgments(body["annotator"]))
        return HTTPStatus.CREATED, {
            "judgment": rec,
            "superseded": superseded,
            "done": done,
            "total": len(self.store.tasks),
        }

    def progress(self, req: ApiRequest) -> tuple[HTTPStatus, Any]:
        """Judgments per annotator and raters per task."""
        return HTTPStatus.OK, {"release": self.release} | self.store.progress()

    def route(self, method: str, path: str) -> tuple[Handler, dict[str, str]]:
        """The handler for ``method path``; ApiError 404 / 405 otherwise."""
        for pattern, methods in self.routes:
            match = pattern.fullmatch(path)
            if match:
                if method not in methods:
                    allow = ", ".join(sorted(methods))
                    raise ApiError(
                        HTTPStatus.METHOD_NOT_ALLOWED,
                        f"{method} is not allowed on {path}; use {allow}",
                        {"Allow": allow},
                    )
                return methods[method], match.groupdict()
        raise ApiError(HTTPStatus.NOT_FOUND, f"no such path: {path}")


class _RequestHandler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "wikidrift-annotate"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("%s %s", self.address_string(), format % args)

    def _send(
        self,
        status: HTTPStatus,
        body: bytes,
        content_type: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        # Answers change with every judgment; a cached /api/next would resume at the wrong task.
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _send_json(
        self, status: HTTPStatus, payload: Any, headers: dict[str, str] | None = None
    ) -> None:
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self._send(status, body, "application/json; charset=utf-8", headers)

    def _read_json(self) -> Any:
        ctype = self.headers.get("Content-Type", "")
        if ctype.split(";")[0].strip().lower() != "application/json":
            raise ApiError(
                HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                "send the body as JSON with 'Content-Type: application/json'",
            )
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            raise ApiError(
                HTTPStatus.LENGTH_REQUIRED, "a Content-Length header is required"
            ) from None
        if length > MAX_BODY_BYTES:
            raise ApiError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body over {MAX_BODY_BYTES} bytes")
        raw = self.rfile.read(length) if length > 0 else b""
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ApiError(HTTPStatus.BAD_REQUEST, f"malformed JSON body: {exc}") from None

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        path = unquote(url.path)
        try:
            self._check_host()
            if path in STATIC_FILES:
                if method not in ("GET", "HEAD"):
                    raise ApiError(
                        HTTPStatus.METHOD_NOT_ALLOWED,
                        f"{method} is not allowed on {path}; use GET",
                        {"Allow": "GET, HEAD"},
                    )
                name, ctype = STATIC_FILES[path]
                self._send(HTTPStatus.OK, (STATIC_DIR / name).read_bytes(), ctype)
                return
            if path == "/favicon.ico":  # browsers ask for it; an empty answer keeps logs quiet
                self._send(HTTPStatus.NO_CONTENT, b"", "image/x-icon")
                return
            handler, match = self.server.app.route(method, path)
            body = self._read_json() if method == "POST" else None
            status, payload = handler(ApiRequest(match, parse_qs(url.query), body))
            self._send_json(status, payload)
        except ApiError as exc:
            if exc.status in (HTTPStatus.REQUEST_ENTITY_TOO_LARGE, HTTPStatus.LENGTH_REQUIRED):
                self.close_connection = True  # the unread body must not be taken as a request
            self._send_json(exc.status, {"error": exc.message, "status": exc.status}, exc.headers)
        except Exception as exc:  # a bug must answer 500, not hang the page
            log.exception("annotation server: %s %s failed", method, self.path)
            self._send_json(
                HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"internal error: {exc}", "status": 500}
            )

    def _check_host(self) -> None:
        """Refuse requests whose ``Host`` is not this server: a page on another site that
        rebinds its DNS name to 127.0.0.1 would otherwise read and post as a same-origin page."""
        host = self.headers.get("Host")
        if host is None or not self.server.host_allowed(host):
            raise ApiError(
                HTTPStatus.MISDIRECTED_REQUEST,
                f"Host {host!r} is not this server; open {self.server.base_url}",
            )

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        """GET: pages and API reads."""
        self._dispatch("GET")

    def do_HEAD(self) -> None:  # noqa: N802
        """HEAD: like GET without the body."""
        self._dispatch("HEAD")

    def do_POST(self) -> None:  # noqa: N802
        """POST: judgments."""
        self._dispatch("POST")

    def do_PUT(self) -> None:  # noqa: N802
        """PUT: never allowed (405)."""
        self._dispatch("PUT")

    def do_DELETE(self) -> None:  # noqa: N802
        """DELETE: never allowed (405)."""
        self._dispatch("DELETE")

    def do_PATCH(self) -> None:  # noqa: N802
        """PATCH: never allowed (405)."""
        self._dispatch("PATCH")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG
    app: AnnotationApp
    idle_timeout_s: float = IDLE_TIMEOUT_S

    max_connections: int = MAX_CONNECTIONS
    slot_wait_s: float = SLOT_WAIT_S
    _slots: threading.BoundedSemaphore | None = None
    _saturated: bool = False

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve in a thread once a slot is free; answer 503 and hang up when none frees within
        ``slot_wait_s`` (at once while the server is saturated)."""
        if self._slots is None:  # only the serving thread gets here
            self._slots = threading.BoundedSemaphore(self.max_connections)
        if self._saturated:
            # Waiting again for each queued connection of a flood would serve it one wait at a time.
            got_slot = self._slots.acquire(blocking=False)
        else:
            got_slot = self._slots.acquire(timeout=self.slot_wait_s)
        self._saturated = not got_slot
        if not got_slot:
            with contextlib.suppress(OSError):
                request.sendall(_BUSY)
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            assert self._slots is not None
            self._slots.release()

    def get_request(self) -> tuple[socket.socket, Any]:
        """Accept a connection with a timeout on its socket: a client that goes quiet (idle
        keep-alive, a stalled body) is dropped after ``idle_timeout_s``, freeing its thread."""
        conn, addr = super().get_request()
        conn.settimeout(self.idle_timeout_s)
        return conn, addr

    @property
    def base_url(self) -> str:
        """``http://host:port/`` as a browser should open it."""
        host, port = self.server_address[:2]
        return f"http://{_url_host(host)}:{port}/"

    def host_allowed(self, header: str) -> bool:
        """Whether a ``Host`` header names this server: the address it listens on, or
        loopback (any IP address too when it listens on every interface); the port, when
        given, must be ours. Names other than ``localhost`` never pass (DNS rebinding)."""
        bound, port = self.server_address[:2]
        name, given_port = _split_host(header)
        if given_port and given_port != str(port):
            return False
        name = name.lower()
        if name in _LOOPBACK_NAMES or name == str(bound).lower():
            return True
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return False
        return ipaddress.ip_address(bound).is_unspecified


def _split_host(header: str) -> tuple[str, str]:
    """``Host`` header -> (name, port or ""): ``a:1``, ``a``, ``[::1]:1``, ``[::1]``."""
    header = header.strip()
    if header.startswith("["):
        name, _, rest = header[1:].partition("]")
        return name, rest[1:] if rest.startswith(":") else rest
    if header.count(":") == 1:
        name, _, port = header.partition(":")
        return name, port
    return header, ""


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class AnnotationServer:
    """The annotation server of one release; ``start()`` runs it in a background thread,
    ``serve_forever()`` in the calling one."""

    def __init__(
        self,
        workdir: str | Path,
        release: str,
        *,
        annotations_root: str | Path | None = None,
        host: str = "127.0.0.1",
        port: int = 8765,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        max_connections: int = MAX_CONNECTIONS,
        slot_wait_s: float = SLOT_WAIT_S,
    ) -> None:
        workdir = Path(workdir)
        directory = release_annotations_dir(workdir, release, annotations_root)
        tasks = read_tasks(directory)
        if not tasks:
            raise WikidriftError(f"{directory}/tasks.jsonl holds no tasks")
        self.store = AnnotationStore(directory, tasks)
        self.app = AnnotationApp(workdir, release, self.store)
        try:
            self._httpd = _Server((host, port), _RequestHandler)
        except (OSError, OverflowError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            raise WikidriftError(f"cannot listen on {host}:{port}: {reason}") from None
        self._httpd.app = self.app
        self._httpd.idle_timeout_s = idle_timeout_s
        self._httpd.max_connections = max_connections
        self._httpd.slot_wait_s = slot_wait_s
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:8765/``."""
        return self._httpd.base_url

    def start(self) -> AnnotationServer:
        """Serve in a daemon thread (tests, notebooks)."""
        # A short poll interval makes stop() quick (tests start and stop many servers).
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="annotate-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until ``stop()`` or KeyboardInterrupt."""
        self._httpd.serve_forever()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> AnnotationServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
