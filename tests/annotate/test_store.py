"""The annotation store, through the server on 127.0.0.1: judgments appended and fsynced,
superseded, counted, kept whole under concurrent posts, and a torn last line survived."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import pipeline.annotate.store as store_mod
from pipeline.annotate import JUDGMENT_LABELS, read_judgments, read_tasks
from pipeline.annotate.server import AnnotationServer
from tests.annotate import RELEASE, http_request, post_judgment, read_jsonl


def test_judgment_appended_and_fsynced(
    server: AnnotationServer, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real_fsync = store_mod.os.fsync

    def spy(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(store_mod.os, "fsync", spy)
    task_id = read_tasks(root / RELEASE)[0]["task_id"]
    body = post_judgment(server, "alice", task_id, "not_supported")
    assert body["done"] == 1 and body["total"] == 9 and body["superseded"] is False
    assert synced, "the judgment file was not fsynced"
    lines = read_jsonl(root / RELEASE / "alice.jsonl")
    assert len(lines) == 1
    assert lines[0]["task_id"] == task_id and lines[0]["label"] == "not_supported"
    assert lines[0]["annotator"] == "alice" and lines[0]["release"] == RELEASE
    assert lines[0]["at"].endswith("Z")


def test_later_judgment_supersedes(server: AnnotationServer, root: Path) -> None:
    task_id = read_tasks(root / RELEASE)[5]["task_id"]
    post_judgment(server, "erin", task_id, "supported")
    second = post_judgment(server, "erin", task_id, "not_supported")
    assert second["superseded"] is True and second["done"] == 1
    assert len(read_jsonl(root / RELEASE / "erin.jsonl")) == 2  # append-only
    listed = http_request("GET", server.url + "api/judgments?annotator=erin")[2]["judgments"]
    assert [(j["task_id"], j["label"]) for j in listed] == [(task_id, "not_supported")]
    assert read_judgments(root / RELEASE).latest["erin"][task_id]["label"] == "not_supported"
    one = http_request("GET", server.url + f"api/tasks/{task_id}?annotator=erin")[2]
    assert one["judgment"] == "not_supported"


def test_progress(server: AnnotationServer, root: Path) -> None:
    ids = [t["task_id"] for t in read_tasks(root / RELEASE)]
    for name in ("ann1", "ann2", "ann3"):
        post_judgment(server, name, ids[0], "supported")
    post_judgment(server, "ann1", ids[1], "supported")
    status, _, body = http_request("GET", server.url + "api/progress")
    assert status == 200 and body["total"] == 9
    assert {k: v["done"] for k, v in body["annotators"].items()} == {
        "ann1": 2,
        "ann2": 1,
        "ann3": 1,
    }
    assert body["tasks_by_raters"] == {"0": 7, "1": 1, "2": 0, "3+": 1}


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
        threading.Thread(
            target=post_judgment, args=(server, "left", ids[k % len(ids)], "uncertain")
        )
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
        post_judgment(again, "zoe", ids[1], "uncertain")
    log = read_judgments(root / RELEASE)
    assert log.malformed == ["zoe.jsonl:2"]
    assert set(log.latest["zoe"]) == {ids[0], ids[1]}
