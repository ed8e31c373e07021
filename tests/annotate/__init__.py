"""Tests of ``wikidrift annotate``: sampling, the annotation server, the report, the page.

Shared helpers. The fixtures the server's test modules share (a sampled release, a running
server) are in ``conftest.py``; the other modules build what they need from
``released_workdir``.
"""

from __future__ import annotations

import http.client
import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from pipeline.annotate.server import AnnotationServer

# The second release: the first one has nothing to annotate (every sentence "new" by rule).
RELEASE = "2024-06-01"
FIRST_RELEASE = "2024-01-01"


def copy_release_dir(src_root: Path, dst_root: Path, release: str = RELEASE) -> Path:
    """A private copy of ``<src_root>/<release>`` under ``dst_root``; returns ``dst_root``."""
    shutil.copytree(src_root / release, dst_root / release)
    return dst_root


def http_request(
    method: str,
    url: str,
    *,
    body: Any = None,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
    json_content_type: bool = True,
) -> tuple[int, dict[str, str], Any]:
    """One HTTP request over a fresh connection: (status, headers, decoded JSON or text)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        data = raw if raw is not None else None
        hdrs = dict(headers or {})
        if body is not None:
            data = json.dumps(body).encode()
        if data is not None and json_content_type:
            hdrs.setdefault("Content-Type", "application/json")
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        conn.request(method, path or "/", body=data, headers=hdrs)
        resp = conn.getresponse()
        payload = resp.read()
        ctype = resp.getheader("Content-Type", "")
        decoded: Any = payload.decode("utf-8")
        if ctype.startswith("application/json"):
            decoded = json.loads(decoded)
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, decoded
    finally:
        conn.close()


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every line of a JSONL file, parsed (fails on a malformed line)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def post_judgment(srv: AnnotationServer, annotator: str, task_id: str, label: str) -> dict:
    """POST one judgment to ``srv`` and assert it was recorded (201); returns the answer."""
    status, _, body = http_request(
        "POST",
        srv.url + "api/judgments",
        body={"annotator": annotator, "task_id": task_id, "label": label},
    )
    assert status == 201, body
    return body
