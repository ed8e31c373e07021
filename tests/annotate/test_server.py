"""The annotation server's HTTP layer on 127.0.0.1: the page, the body limit, startup errors,
and behaviour under load and attack (threads, connection cap, Host checks)."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from pipeline.annotate.server import AnnotationServer
from tests.annotate import RELEASE, http_request


def test_page_has_no_external_assets(server: AnnotationServer) -> None:
    status, headers, html = http_request("GET", server.url)
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert "http://" not in html and "https://" not in html
    refs = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", html)
    assert refs, "the page loads its script and style"
    for ref in refs:
        assert not ref.startswith("//") and ":" not in ref, ref
        status, headers, text = http_request("GET", server.url + ref)
        assert status == 200, ref
        assert "http://" not in text and "https://" not in text, ref
    assert http_request("GET", server.url + "favicon.ico")[0] == 204


def test_body_too_large(server: AnnotationServer, root: Path) -> None:
    code, _, body = http_request("POST", server.url + "api/judgments", raw=b"x" * 70_000)
    assert code == 413 and "body over" in body["error"]


def test_missing_tasks_is_a_clear_error(released_workdir: Path, tmp_path: Path) -> None:
    from pipeline.errors import WikidriftError

    with pytest.raises(WikidriftError, match="annotate sample"):
        AnnotationServer(released_workdir, RELEASE, annotations_root=tmp_path, port=0)


# --------------------------------------------------------------------------- under load / attack
def _burst_of_posts(srv: AnnotationServer, n: int) -> list[str]:
    """``n`` clients connect and post at the same moment; returns each failure's reason."""
    import http.client
    import json
    from urllib.parse import urlsplit

    task_id = srv.store.tasks[0]["task_id"]
    parts = urlsplit(srv.url)
    start = threading.Barrier(n)
    failures: list[str] = []

    def client(i: int) -> None:
        body = json.dumps({"annotator": f"r{i:03d}", "task_id": task_id, "label": "supported"})
        start.wait()
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        try:
            conn.request("POST", "/api/judgments", body, {"Content-Type": "application/json"})
            status = conn.getresponse().status
            if status != 201:
                failures.append(f"status {status}")
        except OSError as exc:
            failures.append(type(exc).__name__)
        finally:
            conn.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return failures


def test_a_burst_of_200_posts_gets_no_connection_resets(server: AnnotationServer) -> None:
    failures = _burst_of_posts(server, 200)
    assert failures == [], f"{len(failures)} of 200 failed: {sorted(set(failures))}"
    assert len(server.store.progress()["annotators"]) == 200


def test_a_burst_past_the_connection_cap_waits_for_slots_instead_of_503(
    released_workdir: Path, root: Path
) -> None:
    """Slots that are busy only for a moment do not turn a burst away (a CI runner with slow
    fsync gave 26 of 200 posts a 503 when the server refused as soon as all slots were busy)."""
    with AnnotationServer(
        released_workdir, RELEASE, annotations_root=root, port=0, max_connections=2
    ) as srv:
        failures = _burst_of_posts(srv, 60)
        assert failures == [], f"{len(failures)} of 60 failed: {sorted(set(failures))}"
        assert len(srv.store.progress()["annotators"]) == 60


def test_idle_connections_are_closed_and_free_their_threads(
    released_workdir: Path, root: Path
) -> None:
    import socket
    import time

    with AnnotationServer(
        released_workdir, RELEASE, annotations_root=root, port=0, idle_timeout_s=0.5
    ) as srv:
        before = threading.active_count()
        idle = [
            socket.create_connection(("127.0.0.1", srv._httpd.server_address[1])) for _ in range(30)
        ]
        time.sleep(0.3)
        assert threading.active_count() >= before + 30  # one handler thread each, for now
        closed = 0
        for sock in idle:
            sock.settimeout(5)
            try:
                closed += sock.recv(1) == b""  # the server hung up on the silent client
            except ConnectionResetError:
                closed += 1
            except TimeoutError:
                pass  # still open: counted as not closed
            sock.close()
        deadline = time.monotonic() + 5
        while threading.active_count() > before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert closed == 30 and threading.active_count() <= before
        # The server still answers.
        assert http_request("GET", srv.url + "api/info")[0] == 200


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("127.0.0.1:{port}", True),
        ("localhost:{port}", True),
        ("LOCALHOST", True),
        ("evil.example:{port}", False),  # DNS rebinding: a foreign name pointing at us
        ("127.0.0.1:1", False),  # another port
        ("10.0.0.1:{port}", False),  # an address we do not listen on
        ("", False),
    ],
)
def test_host_header_must_name_this_server(server: AnnotationServer, host: str, allowed) -> None:
    port = server._httpd.server_address[1]
    status, _, body = http_request(
        "GET", server.url + "api/info", headers={"Host": host.format(port=port)}
    )
    if allowed:
        assert status == 200, body
    else:
        assert status == 421 and "is not this server" in body["error"], (status, body)
        assert http_request("GET", server.url, headers={"Host": "evil.example"})[0] == 421


def test_connections_beyond_the_cap_get_503_and_the_server_stays_up(
    released_workdir: Path, root: Path
) -> None:
    """A client trickling one byte just inside the idle timeout holds its connection; the
    cap keeps such clients from holding every thread."""
    import socket
    import time

    with AnnotationServer(
        released_workdir,
        RELEASE,
        annotations_root=root,
        port=0,
        max_connections=3,
        slot_wait_s=0.5,
    ) as srv:
        port = srv._httpd.server_address[1]
        held = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
        for sock in held:
            sock.sendall(b"G")  # a request that never finishes
        time.sleep(0.3)
        waits = []
        for _ in range(3):  # the first waits for a slot; the saturated server refuses the rest
            extra = socket.create_connection(("127.0.0.1", port))
            extra.settimeout(5)
            began = time.monotonic()
            answer = extra.recv(200)
            waits.append(time.monotonic() - began)
            assert answer.startswith(b"HTTP/1.1 503") and b"Retry-After: 1" in answer
            extra.close()
        assert waits[0] >= 0.4 and max(waits[1:]) < 0.4, waits
        for sock in held:
            sock.close()
        deadline = time.monotonic() + 5
        status = None
        while time.monotonic() < deadline:  # slots free up once the held clients hang up
            status = http_request("GET", srv.url + "api/info")[0]
            if status == 200:
                break
            time.sleep(0.05)
        assert status == 200
