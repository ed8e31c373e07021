"""The annotation store: one release's tasks and every annotator's judgments, in memory and
on disk.

Every judgment is appended to ``<annotator>.jsonl`` as one JSON line, flushed and fsynced before
:meth:`AnnotationStore.record` returns (so before the API answers), under a lock per file so two
annotators (or two tabs) never interleave bytes.
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from datetime import UTC, datetime
from http import HTTPStatus
from pathlib import Path
from typing import Any

from pipeline.annotate import (
    JUDGMENT_LABELS,
    JudgmentLog,
    annotator_problem,
    judgment_files,
    public_task,
    read_judgment_file,
)
from pipeline.annotate.errors import ApiError
from pipeline.errors import WikidriftError
from pipeline.storage import fsync_dir


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
