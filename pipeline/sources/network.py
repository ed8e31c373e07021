"""What a failed HTTP request means: a host that does not resolve is not worth retrying.

A machine without network (or a typo in ``--input``) makes every request fail at name
resolution. Retrying that with polite backoff, then again at the task level, kept a user
waiting many minutes for the error, so the sources stop at the first such failure.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from pipeline.errors import UnknownHostError

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
        "has no network. Offline, snapshot from local files: --source revisions-dir or "
        "--source dump with a local --input."
    )
