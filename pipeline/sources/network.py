"""HTTP for the sources: what a failed request means, and every request bounded.

A machine without network (or a typo in ``--input``) makes every request fail at name
resolution. Retrying that with polite backoff, then again at the task level, kept a user
waiting many minutes for the error, so the sources stop at the first such failure.

Bounds (issue 13): a :class:`Deadline` caps the total time of one request, headers and body
(socket timeouts only bound each read, so a server dripping a byte a second kept a request
open indefinitely); :func:`read_body` decodes gzip incrementally and stops at a byte limit (a
500 KB gzip answer inflated to 500 MB before); :func:`open_response` follows redirects only to
the same host or an allow-listed one, and never carries credentials to another host.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import zlib
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests
import urllib3
import urllib3.connection
from requests.adapters import HTTPAdapter

from pipeline.errors import SourceError, UnknownHostError
from pipeline.redact import without_credentials
from pipeline.sources import SOURCE_KINDS

# "Name or service not known" and "No address associated with hostname"; a resolver that is
# only down answers EAI_AGAIN ("Temporary failure in name resolution"), which stays retried.
_UNKNOWN_NAME_CODES = frozenset(
    code
    for code in (getattr(socket, "EAI_NONAME", None), getattr(socket, "EAI_NODATA", None))
    if code is not None
)


def _causes(exc: BaseException) -> list[object]:
    """``exc`` and what it wraps: __cause__/__context__, urllib3's ``reason``, requests' args."""
    seen: list[object] = []
    todo: list[object] = [exc]
    while todo and len(seen) < 20:
        item = todo.pop()
        if item is None or any(item is s for s in seen):
            continue
        seen.append(item)
        if isinstance(item, BaseException):
            todo.extend([item.__cause__, item.__context__, getattr(item, "reason", None)])
            todo.extend(a for a in item.args if isinstance(a, BaseException))
    return seen


def host_does_not_resolve(exc: BaseException) -> bool:
    """Whether ``exc`` (from requests) failed because the host name does not exist."""
    return any(
        isinstance(c, socket.gaierror) and c.errno in _UNKNOWN_NAME_CODES for c in _causes(exc)
    )


def unknown_host_error(what: str, url: str) -> UnknownHostError:
    """The error to raise for a host that does not resolve, with what to do about it."""
    host = urlsplit(url).hostname or url
    return UnknownHostError(
        f"{what}: cannot resolve host {host!r} ({url}): the name does not exist or this machine "
        "has no network. Offline, snapshot from local files: "
        + " or ".join(f"--source {k.name} ({k.input_help})" for k in SOURCE_KINDS if k.offline)
        + "."
    )


# --------------------------------------------------------------------------- bounded HTTP


class InputLimitError(SourceError):
    """An input went over a configured limit (answer size, request time, decompressed bytes)."""


class ResponseTooLargeError(InputLimitError):
    """An HTTP answer decodes to more bytes than allowed (a gzip bomb, a runaway server)."""


class DeadlineExceededError(InputLimitError):
    """An HTTP request (headers and body) did not finish within its total time budget."""


class RedirectRefusedError(SourceError):
    """A server redirected to a host the configuration does not allow."""


_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# Headers that must never follow a redirect to another host.
_PRIVATE_HEADERS = ("Authorization", "Proxy-Authorization", "Cookie")
_READ_CHUNK = 64 * 1024
_active = threading.local()


class Deadline:
    """A total time budget for one HTTP exchange, enforced by a watchdog timer.

    Socket timeouts bound each ``recv`` only, so a server sending one byte per second keeps a
    request open forever; when the budget runs out the watchdog shuts down the sockets of the
    connections opened under it (see :func:`open_response`), which unblocks the read at once.
    ``with Deadline(...)`` starts and cancels the timer; :meth:`start` / :meth:`cancel` do
    the same where the body is read outside the block that opened the request."""

    def __init__(self, seconds: float, what: str) -> None:
        self.seconds = seconds
        self.what = what
        self.expired = False
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._started = time.monotonic()
        self._timer: threading.Timer | None = None

    def start(self) -> Deadline:
        """Start (or restart) the clock."""
        self.reset(self.seconds)
        return self

    def reset(self, seconds: float) -> None:
        """Give the request ``seconds`` from now (a response reused for a longer download)."""
        self.cancel()
        self.seconds = seconds
        self._started = time.monotonic()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def cancel(self) -> None:
        """Stop the watchdog (the request finished)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def __enter__(self) -> Deadline:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.cancel()
        with self._lock:
            self._socks.clear()

    def remaining(self) -> float:
        """Seconds left (never below 0)."""
        return max(0.0, self.seconds - (time.monotonic() - self._started))

    def watch(self, sock: socket.socket) -> None:
        """Register a socket (the adapter's connections do, as each request is sent)."""
        with self._lock:
            self._socks.append(sock)
            expired = self.expired
        if expired:
            _shutdown(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            socks = list(self._socks)
        for sock in socks:
            _shutdown(sock)

    def check(self) -> None:
        """Raise :class:`DeadlineExceededError` once the budget is spent."""
        if self.expired or self.remaining() <= 0:
            self.expired = True
            raise self.error()

    def error(self) -> DeadlineExceededError:
        """The error that says this request ran out of time."""
        return DeadlineExceededError(
            f"{self.what}: no complete answer within {self.seconds:g}s (limits.max_request_s; "
            "the server is too slow or drips its answer)"
        )


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed
        sock.shutdown(socket.SHUT_RDWR)


class _WatchedMixin:
    """Registers the socket of each request with the thread's current :class:`Deadline`.

    The socket itself, taken once the request is sent (connected): http.client drops the
    connection's reference to it as soon as an answer says ``Connection: close``, while the
    response goes on reading from it."""

    def request(self, *args: Any, **kwargs: Any) -> Any:
        result = super().request(*args, **kwargs)  # type: ignore[misc]
        deadline = getattr(_active, "deadline", None)
        sock = getattr(self, "sock", None)
        if deadline is not None and sock is not None:
            deadline.watch(sock)
        return result


class _WatchedHTTPConnection(_WatchedMixin, urllib3.connection.HTTPConnection):
    pass


class _WatchedHTTPSConnection(_WatchedMixin, urllib3.connection.HTTPSConnection):
    pass


class _WatchedPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


class DeadlineAdapter(HTTPAdapter):
    """A requests adapter whose connections a :class:`Deadline` can cut."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _WatchedPool, "https": _WatchedHTTPSPool}

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        manager.pool_classes_by_scheme = {"http": _WatchedPool, "https": _WatchedHTTPSPool}
        return manager


def bounded_session(session: requests.Session | None = None) -> requests.Session:
    """``session`` (or a new one) with adapters that :class:`Deadline` can enforce."""
    session = session if session is not None else requests.Session()
    for prefix in ("http://", "https://"):
        if not isinstance(session.get_adapter(prefix), DeadlineAdapter):
            session.mount(prefix, DeadlineAdapter())
    return session


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    default = {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or default


def redirect_allowed(source: str, target: str, allowed_hosts: frozenset[str]) -> bool:
    """Whether a redirect from ``source`` to ``target`` may be followed: same scheme, host and
    port (http -> https on the same host too) or a host in ``allowed_hosts`` (lower case);
    never a downgrade from https to http."""
    s_scheme, s_host, s_port = _origin(source)
    t_scheme, t_host, t_port = _origin(target)
    if t_scheme not in ("http", "https") or not t_host:
        return False
    if s_scheme == "https" and t_scheme == "http":
        return False
    if t_host == s_host:
        return t_scheme != s_scheme or t_port == s_port
    return t_host in allowed_hosts


def open_response(
    session: requests.Session,
    url: str,
    *,
    params: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float,
    deadline: Deadline,
    allowed_hosts: frozenset[str] = frozenset(),
    max_redirects: int = 5,
) -> requests.Response:
    """GET ``url`` streamed, following redirects only where :func:`redirect_allowed` says so
    (credentials and cookies are dropped on a change of host); the connections used are cut
    when ``deadline`` (started) runs out. Any other redirect raises
    :class:`RedirectRefusedError`."""
    current = url
    sent_headers = dict(headers or {})
    for _ in range(max_redirects + 1):
        deadline.check()
        outer = getattr(_active, "deadline", None)
        _active.deadline = deadline  # the adapter's connections register with it
        try:
            resp = session.get(
                current,
                params=params,
                headers=sent_headers,
                timeout=min(timeout_s, max(deadline.remaining(), 0.001)),
                stream=True,
                allow_redirects=False,
            )
        except requests.RequestException as exc:
            if deadline.expired:
                raise deadline.error() from exc
            raise
        finally:
            _active.deadline = outer
        if resp.status_code not in _REDIRECT_STATUSES or "Location" not in resp.headers:
            return resp
        target = urljoin(resp.url, resp.headers["Location"])
        source = resp.url
        resp.close()
        if not redirect_allowed(source, target, allowed_hosts):
            raise RedirectRefusedError(
                f"{without_credentials(source)} redirects to {without_credentials(target)}: "
                "not followed, a redirect may only stay on the same host (list other hosts in "
                "limits.redirect_hosts)"
            )
        if _origin(target)[1] != _origin(source)[1]:
            for name in _PRIVATE_HEADERS:
                sent_headers.pop(name, None)
        params = None  # the Location carries the full query
        current = target
    raise RedirectRefusedError(f"{without_credentials(url)}: more than {max_redirects} redirects")


def read_body(
    resp: requests.Response, *, limit: int, deadline: Deadline, what: str
) -> tuple[bytes, int]:
    """The whole body, decoded (gzip / deflate) incrementally so a bomb stops at ``limit``
    decoded bytes; returns (body, bytes off the wire). Raises :class:`ResponseTooLargeError`
    or :class:`DeadlineExceededError`."""
    encoding = (resp.headers.get("Content-Encoding") or "identity").strip().lower()
    if encoding in ("gzip", "x-gzip", "deflate"):
        decoder: Any = zlib.decompressobj(47 if encoding != "deflate" else zlib.MAX_WBITS)
    elif encoding in ("identity", ""):
        decoder = None
    else:
        raise SourceError(f"{what}: unsupported Content-Encoding {encoding!r}")
    out = bytearray()
    wire = 0
    try:
        while True:
            deadline.check()
            raw = resp.raw.read(_READ_CHUNK, decode_content=False)
            if not raw:
                break
            wire += len(raw)
            if decoder is None:
                out += raw
            else:
                # max_length keeps one step's output bounded however well the chunk compresses.
                data = decoder.decompress(raw, limit + 1 - len(out))
                out += data
                while decoder.unconsumed_tail and len(out) <= limit:
                    out += decoder.decompress(decoder.unconsumed_tail, limit + 1 - len(out))
            if len(out) > limit:
                raise ResponseTooLargeError(
                    f"{what}: the answer is over the {limit} byte limit (limits."
                    "max_response_bytes)"
                    + (f", {wire} bytes {encoding}-compressed" if decoder else "")
                )
        if decoder is not None:
            out += decoder.flush()
    except requests.RequestException as exc:
        if deadline.expired:
            raise deadline.error() from exc
        raise
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        if deadline.expired:
            raise deadline.error() from exc
        # Reading resp.raw bypasses requests' own wrapping: give callers requests' type.
        raise requests.exceptions.ConnectionError(f"{what}: {exc}") from exc
    except zlib.error as exc:
        raise requests.exceptions.ContentDecodingError(
            f"{what}: bad {encoding} body: {exc}"
        ) from exc
    finally:
        resp.close()
    if len(out) > limit:
        raise ResponseTooLargeError(f"{what}: the answer is over the {limit} byte limit")
    return bytes(out), wire


def iter_raw(
    resp: requests.Response, *, deadline: Deadline, chunk: int = _READ_CHUNK
) -> Iterator[bytes]:
    """Undecoded body chunks, checking the deadline before each read."""
    while True:
        deadline.check()
        try:
            data = resp.raw.read(chunk, decode_content=False)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            if deadline.expired:
                raise deadline.error() from exc
            raise requests.exceptions.ConnectionError(str(exc)) from exc
        if not data:
            return
        yield data
