"""The old article of a task's page, served whole, by section and in order."""

from __future__ import annotations

from pathlib import Path

from pipeline.annotate import read_tasks
from pipeline.annotate.server import AnnotationServer
from pipeline.layout import read_snapshot_table
from tests.annotate import FIRST_RELEASE, RELEASE, http_request


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
