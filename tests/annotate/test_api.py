"""The annotation server's JSON API over real HTTP on 127.0.0.1: blind tasks, resuming where
an annotator left off, and the requests it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.annotate import JUDGMENT_LABELS, read_tasks
from pipeline.annotate.server import AnnotationServer
from tests.annotate import FIRST_RELEASE, RELEASE, http_request, post_judgment


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


def test_resume_skips_judged_tasks(
    server: AnnotationServer, released_workdir: Path, root: Path
) -> None:
    ids = [t["task_id"] for t in read_tasks(root / RELEASE)]
    url = server.url + "api/next?annotator=bob"
    assert http_request("GET", url)[2]["task"]["task_id"] == ids[0]
    post_judgment(server, "bob", ids[0], "supported")
    post_judgment(server, "bob", ids[1], "uncertain")
    post_judgment(server, "bob", ids[3], "supported")
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
        post_judgment(server, "dana", t["task_id"], "uncertain")
    nxt = http_request("GET", server.url + "api/next?annotator=dana")[2]
    assert nxt["task"] is None and nxt["done"] == 9 and nxt["remaining"] == 0


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
