"""The annotation server's HTTP layer (``wikidrift annotate serve``): sockets, threads, the
static page, and requests handed to the JSON API of :mod:`pipeline.annotate.api`.

Standard library only (``http.server``, one thread per request) and no external assets: the
page, its script and its style are served from ``static/``. This layer itself refuses a body too
large (413), a POST without a JSON content type (415) and a ``Host`` header naming another
server (421); the API's routes and status codes are listed in :mod:`pipeline.annotate.api`.

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
import socket
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from pipeline.annotate import read_tasks, release_annotations_dir
from pipeline.annotate.api import AnnotationApp, ApiRequest
from pipeline.annotate.errors import ApiError
from pipeline.annotate.store import AnnotationStore
from pipeline.errors import WikidriftError

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
