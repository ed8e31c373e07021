"""The annotation server over real HTTP on 127.0.0.1: page, API, durability, errors, threads."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import pipeline.annotate.server as server_mod
from pipeline.annotate import JUDGMENT_LABELS, read_judgments, read_tasks
from pipeline.annotate.sample import sample_tasks
from pipeline.annotate.server import AnnotationServer
from pipeline.layout import read_snapshot_table
from tests.annotate import FIRST_RELEASE, RELEASE, copy_release_dir, http_request, read_jsonl


@pytest.fixture(scope="module")
def sampled_root(released_workdir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An annotations root with 9 tasks of RELEASE, 6 new and its 3 changed (read-only:
    tests copy it)."""
    root = tmp_path_factory.mktemp("annotations")
    sample_tasks(released_workdir, RELEASE, per_label=6, seed=4, annotations_root=root)
    return root


@pytest.fixture
def root(sampled_root: Path, tmp_path: Path) -> Path:
    """A private copy of the sampled annotations root."""
    return copy_release_dir(sampled_root, tmp_path / "ann")


@pytest.fixture
def server(released_workdir: Path, root: Path) -> Iterator[AnnotationServer]:
    """A running server on a free port."""
    with AnnotationServer(released_workdir, RELEASE, annotations_root=root, port=0) as srv:
        yield srv


def _post(srv: AnnotationServer, annotator: str, task_id: str, label: str) -> dict:
    status, _, body = http_request(
        "POST",
        srv.url + "api/judgments",
        body={"annotator": annotator, "task_id": task_id, "label": label},
    )
    assert status == 201, body
    return body


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


def test_info_and_tasks_are_blind(server: AnnotationServer, root: Path) -> None:
    status, _, info = http_request("GET", server.url + "api/info")
    assert status == 200
    assert info["release"] == RELEASE and info["old_snapshot"] == FIRST_RELEASE
    assert info["total"] == 9 and info["labels"] == list(JUDGMENT_LABELS)
    status, _, body = http_request("GET", server.url + "api/tasks?annotator=alice")
    assert status == 200 and body["judgments"] == {}
    ids = [t["task_id"] for t in read_tasks(root / RELEASE)]
    assert [t["task_id"] for t in body["tasks"]] == ids
    assert all("label" not in t and "replaces" not in t for t in body["tasks"])
    status, _, one = http_request("GET", server.url + f"api/tasks/{ids[3]}?annotator=alice")
    assert status == 200 and one["position"] == 4 and one["judgment"] is None
    assert one["task"]["task_id"] == ids[3]


def test_judgment_appended_and_fsynced(
    server: AnnotationServer, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real_fsync = server_mod.os.fsync

    def spy(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(server_mod.os, "fsync", spy)
    task_id = read_tasks(root / RELEASE)[0]["task_id"]
    body = _post(server, "alice", task_id, "not_supported")
    assert body["done"] == 1 and body["total"] == 9 and body["superseded"] is False
    assert synced, "the judgment file was not fsynced"
    lines = read_jsonl(root / RELEASE / "alice.jsonl")
    assert len(lines) == 1
    assert lines[0]["task_id"] == task_id and lines[0]["label"] == "not_supported"
    assert lines[0]["annotator"] == "alice" and lines[0]["release"] == RELEASE
    assert lines[0]["at"].endswith("Z")


def test_resume_skips_judged_tasks(
    server: AnnotationServer, released_workdir: Path, root: Path
) -> None:
    ids = [t["task_id"] for t in read_tasks(root / RELEASE)]
    url = server.url + "api/next?annotator=bob"
    assert http_request("GET", url)[2]["task"]["task_id"] == ids[0]
    _post(server, "bob", ids[0], "supported")
    _post(server, "bob", ids[1], "uncertain")
    _post(server, "bob", ids[3], "supported")
    nxt = http_request("GET", url)[2]
    assert nxt["task"]["task_id"] == ids[2] and nxt["position"] == 3
    assert nxt["done"] == 3 and nxt["remaining"] == 6
    # after= continues past a task, skipping the judged one that follows.
    after = http_request("GET", url + f"&after={ids[2]}")[2]
    assert after["task"]["task_id"] == ids[4]
    # Another annotator starts from the beginning.
    assert http_request("GET", server.url + "api/next?annotator=carol")[2]["position"] == 1
    # A restarted server resumes from the files.
    server.stop()
    with AnnotationServer(released_workdir, RELEASE, annotations_root=root, port=0) as again:
        resumed = http_request("GET", again.url + "api/next?annotator=bob")[2]
        assert resumed["task"]["task_id"] == ids[2] and resumed["done"] == 3
        tasks = http_request("GET", again.url + "api/tasks?annotator=bob")[2]
        assert tasks["judgments"] == {ids[0]: "supported", ids[1]: "uncertain", ids[3]: "supported"}


def test_all_done_returns_no_task(server: AnnotationServer, root: Path) -> None:
    for t in read_tasks(root / RELEASE):
        _post(server, "dana", t["task_id"], "uncertain")
    nxt = http_request("GET", server.url + "api/next?annotator=dana")[2]
    assert nxt["task"] is None and nxt["done"] == 9 and nxt["remaining"] == 0


def test_later_judgment_supersedes(server: AnnotationServer, root: Path) -> None:
    task_id = read_tasks(root / RELEASE)[5]["task_id"]
    _post(server, "erin", task_id, "supported")
    second = _post(server, "erin", task_id, "not_supported")
    assert second["superseded"] is True and second["done"] == 1
    assert len(read_jsonl(root / RELEASE / "erin.jsonl")) == 2  # append-only
    listed = http_request("GET", server.url + "api/judgments?annotator=erin")[2]["judgments"]
    assert [(j["task_id"], j["label"]) for j in listed] == [(task_id, "not_supported")]
    assert read_judgments(root / RELEASE).latest["erin"][task_id]["label"] == "not_supported"
    one = http_request("GET", server.url + f"api/tasks/{task_id}?annotator=erin")[2]
    assert one["judgment"] == "not_supported"


def test_old_article(server: AnnotationServer, released_workdir: Path, root: Path) -> None:
    task = read_tasks(root / RELEASE)[0]
    status, _, article = http_request(
        "GET", server.url + f"api/tasks/{task['task_id']}/old-article"
    )
    assert status == 200
    assert article["snapshot"] == FIRST_RELEASE and article["page_id"] == task["page_id"]
    old = read_snapshot_table(
        released_workdir, FIRST_RELEASE, "sentences", page_ids=[task["page_id"]]
    ).to_pylist()
    got = [(s["sent_idx"], s["text"]) for sec in article["sections"] for s in sec["sentences"]]
    assert got == [(s["sent_idx"], s["text"]) for s in old]


def test_progress(server: AnnotationServer, root: Path) -> None:
    ids = [t["task_id"] for t in read_tasks(root / RELEASE)]
    for name in ("ann1", "ann2", "ann3"):
        _post(server, name, ids[0], "supported")
    _post(server, "ann1", ids[1], "supported")
    status, _, body = http_request("GET", server.url + "api/progress")
    assert status == 200 and body["total"] == 9
    assert {k: v["done"] for k, v in body["annotators"].items()} == {
        "ann1": 2,
        "ann2": 1,
        "ann3": 1,
    }
    assert body["tasks_by_raters"] == {"0": 7, "1": 1, "2": 0, "3+": 1}


def _valid(root: Path) -> dict:
    task_id = read_tasks(root / RELEASE)[0]["task_id"]
    return {"annotator": "alice", "task_id": task_id, "label": "supported"}


@pytest.mark.parametrize(
    ("method", "path", "change", "status", "message"),
    [
        ("POST", "api/judgments", {"task_id": "s-000000000000"}, 404, "unknown task id"),
        ("POST", "api/judgments", {"label": "maybe"}, 400, "not one of"),
        ("POST", "api/judgments", {"label": None}, 400, "not one of"),
        ("POST", "api/judgments", {"annotator": None}, 400, "annotator name missing"),
        ("POST", "api/judgments", {"annotator": "../etc/passwd"}, 400, "safe slug"),
        ("POST", "api/judgments", {"annotator": "Alice"}, 400, "safe slug"),
        ("POST", "api/judgments", {"annotator": "tasks"}, 400, "reserved"),
        ("POST", "api/judgments", {"task_id": 7}, 400, "task_id"),
        ("POST", "api/judgments", {"lable": "supported"}, 400, "unknown field"),
        ("POST", "api/judgments", {"elapsed_ms": -5}, 400, "elapsed_ms"),
        ("POST", "api/judgments", "not json", 400, "malformed JSON"),
        ("POST", "api/judgments", "[1, 2]", 400, "JSON object"),
        ("POST", "api/judgments", "no content type", 415, "application/json"),
        ("DELETE", "api/judgments", None, 405, "not allowed"),
        ("PUT", "api/judgments", None, 405, "not allowed"),
        ("POST", "api/progress", {}, 405, "not allowed"),
        ("POST", "", {}, 405, "not allowed"),
        ("GET", "api/nothing", None, 404, "no such path"),
        ("GET", "etc/passwd", None, 404, "no such path"),
        ("GET", "api/tasks/s-000000000000", None, 404, "unknown task id"),
        ("GET", "api/tasks/s-000000000000/old-article", None, 404, "unknown task id"),
        ("GET", "api/next", None, 400, "'annotator' is required"),
        ("GET", "api/next?annotator=a%20b", None, 400, "safe slug"),
        ("GET", "api/next?annotator=alice&after=nope", None, 404, "unknown task id"),
        ("GET", "api/judgments", None, 400, "'annotator' is required"),
        ("GET", "api/tasks?annotator=UPPER", None, 400, "safe slug"),
    ],
)
def test_bad_requests(
    server: AnnotationServer,
    root: Path,
    method: str,
    path: str,
    change: object,
    status: int,
    message: str,
) -> None:
    url = server.url + path
    if change == "not json":
        got = http_request(method, url, raw=b"{not json")
    elif change == "[1, 2]":
        got = http_request(method, url, raw=b"[1, 2]")
    elif change == "no content type":
        got = http_request(method, url, body=_valid(root), json_content_type=False)
    elif isinstance(change, dict):
        body = _valid(root) | change if path == "api/judgments" else change
        got = http_request(method, url, body=body)
    else:
        got = http_request(method, url)
    code, headers, body = got
    assert code == status, body
    assert headers["content-type"].startswith("application/json")
    assert message in body["error"] and body["status"] == status
    if status == 405:
        assert headers["allow"]
    # Nothing was written by a refused request.
    assert [p.name for p in (root / RELEASE).glob("*.jsonl")] == ["tasks.jsonl"]


def test_body_too_large(server: AnnotationServer, root: Path) -> None:
    code, _, body = http_request("POST", server.url + "api/judgments", raw=b"x" * 70_000)
    assert code == 413 and "body over" in body["error"]


def test_two_annotators_concurrently(server: AnnotationServer, root: Path) -> None:
    ids = [t["task_id"] for t in read_tasks(root / RELEASE)]
    per_thread = 30
    errors: list[str] = []
    start = threading.Barrier(2)

    def work(name: str) -> None:
        start.wait()
        for i in range(per_thread):
            label = JUDGMENT_LABELS[i % 3]
            code, _, body = http_request(
                "POST",
                server.url + "api/judgments",
                body={"annotator": name, "task_id": ids[i % len(ids)], "label": label},
            )
            if code != 201:
                errors.append(f"{name} {i}: {code} {body}")

    threads = [threading.Thread(target=work, args=(n,)) for n in ("left", "right")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    for name in ("left", "right"):
        lines = read_jsonl(root / RELEASE / f"{name}.jsonl")  # each line parses
        assert len(lines) == per_thread
        assert {ln["annotator"] for ln in lines} == {name}
        assert [ln["label"] for ln in lines] == [JUDGMENT_LABELS[i % 3] for i in range(per_thread)]
    log = read_judgments(root / RELEASE)
    assert not log.malformed and set(log.latest) == {"left", "right"}
    # Many requests from one annotator at once also stay whole (one lock per file).
    burst = [
        threading.Thread(target=_post, args=(server, "left", ids[k % len(ids)], "uncertain"))
        for k in range(12)
    ]
    for t in burst:
        t.start()
    for t in burst:
        t.join(timeout=60)
    assert len(read_jsonl(root / RELEASE / "left.jsonl")) == per_thread + 12


def test_torn_last_line_is_tolerated(
    released_workdir: Path, root: Path, server: AnnotationServer
) -> None:
    path = root / RELEASE / "zoe.jsonl"
    ids = [t["task_id"] for t in read_tasks(root / RELEASE)]
    path.write_text('{"task_id": "' + ids[0] + '", "label": "supported"}\n{"task_id": "s-')
    server.stop()
    with AnnotationServer(released_workdir, RELEASE, annotations_root=root, port=0) as again:
        nxt = http_request("GET", again.url + "api/next?annotator=zoe")[2]
        assert nxt["done"] == 1 and nxt["task"]["task_id"] == ids[1]
        _post(again, "zoe", ids[1], "uncertain")
    log = read_judgments(root / RELEASE)
    assert log.malformed == ["zoe.jsonl:2"]
    assert set(log.latest["zoe"]) == {ids[0], ids[1]}


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
