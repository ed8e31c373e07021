"""The annotation server's JSON API: routes and handlers over the store, no sockets (the HTTP
layer is :mod:`pipeline.annotate.server`).

API (JSON in and out; errors are ``{"error": "..."}`` with a 4xx status)::

    GET  /api/info                          release, old snapshot, task count, labels, keys
    GET  /api/tasks[?annotator=a]           every task (blind view) [+ a's current labels]
    GET  /api/tasks/<id>[?annotator=a]      one task, its position [+ a's current label]
    GET  /api/tasks/<id>/old-article        the whole old article, by section
    GET  /api/next?annotator=a[&after=<id>] the next task a has not judged (after <id>)
    GET  /api/judgments?annotator=a         a's current judgments, in task order
    POST /api/judgments                     {"annotator", "task_id", "label"[, "elapsed_ms"]}
    GET  /api/progress                      judgments per annotator and per task

Status codes: 400 bad JSON / field / annotator / label, 404 unknown path or task id, 405
wrong method (with ``Allow``), 413 body too large, 415 POST without a JSON content type (which
also keeps other web sites from posting here: a cross-origin JSON POST needs a preflight this
server never grants), 421 a ``Host`` header naming another server (a DNS-rebinding page).
413, 415 and 421 come from the HTTP layer; the rest from here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any

from pipeline.annotate import JUDGMENT_LABELS, annotator_problem
from pipeline.annotate.errors import ApiError
from pipeline.annotate.old_articles import OldArticles
from pipeline.annotate.store import AnnotationStore

SHORTCUTS = {"1": "supported", "2": "not_supported", "3": "uncertain", "u": "back", "o": "old"}
_POST_FIELDS = {"annotator", "task_id", "label", "elapsed_ms"}


@dataclass
class ApiRequest:
    """What a handler gets: path parameters, query string and decoded JSON body."""

    params: dict[str, str]
    query: dict[str, list[str]]
    body: Any = None


Handler = Callable[[ApiRequest], tuple[HTTPStatus, Any]]


class AnnotationApp:
    """Routes and handlers, independent of the HTTP plumbing."""

    def __init__(self, workdir: Path, release: str, store: AnnotationStore) -> None:
        self.workdir = workdir
        self.release = release
        self.store = store
        self.old_articles = OldArticles(workdir)
        first = store.tasks[0] if store.tasks else {}
        self.old_snapshot = first.get("old_snapshot")
        self.routes: list[tuple[re.Pattern[str], dict[str, Handler]]] = [
            (re.compile(r"/api/info"), {"GET": self.info}),
            (re.compile(r"/api/tasks"), {"GET": self.list_tasks}),
            (re.compile(r"/api/tasks/(?P<task_id>[^/]+)"), {"GET": self.get_task}),
            (re.compile(r"/api/tasks/(?P<task_id>[^/]+)/old-article"), {"GET": self.old_article}),
            (re.compile(r"/api/next"), {"GET": self.next_task}),
            (re.compile(r"/api/judgments"), {"GET": self.list_judgments, "POST": self.judge}),
            (re.compile(r"/api/progress"), {"GET": self.progress}),
        ]

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _optional_annotator(query: dict[str, list[str]]) -> str | None:
        values = query.get("annotator")
        if not values:
            return None
        problem = annotator_problem(values[0])
        if problem:
            raise ApiError(HTTPStatus.BAD_REQUEST, problem)
        return values[0]

    def _required_annotator(self, query: dict[str, list[str]]) -> str:
        annotator = self._optional_annotator(query)
        if annotator is None:
            raise ApiError(HTTPStatus.BAD_REQUEST, "query parameter 'annotator' is required")
        return annotator

    def _position(self, index: int | None, annotator: str) -> dict[str, Any]:
        done = len(self.store.judgments(annotator))
        total = len(self.store.tasks)
        task = None if index is None else self.store.public[self.store.tasks[index]["task_id"]]
        return {
            "task": task,
            "position": None if index is None else index + 1,
            "total": total,
            "done": done,
            "remaining": total - done,
        }

    # ------------------------------------------------------------------ handlers
    def info(self, req: ApiRequest) -> tuple[HTTPStatus, Any]:
        """Release, old snapshot, task count, labels and keyboard shortcuts."""
        return HTTPStatus.OK, {
            "release": self.release,
            "old_snapshot": self.old_snapshot,
            "total": len(self.store.tasks),
            "labels": list(JUDGMENT_LABELS),
            "shortcuts": SHORTCUTS,
        }

    def list_tasks(self, req: ApiRequest) -> tuple[HTTPStatus, Any]:
        """Every task (blind view); with ``annotator``, that annotator's current labels."""
        annotator = self._optional_annotator(req.query)
        body: dict[str, Any] = {
            "release": self.release,
            "total": len(self.store.tasks),
            "tasks": [self.store.public[t["task_id"]] for t in self.store.tasks],
        }
        if annotator:
            body["judgments"] = {
                tid: rec["label"] for tid, rec in self.store.judgments(annotator).items()
            }
        return HTTPStatus.OK, body

    def get_task(self, req: ApiRequest) -> tuple[HTTPStatus, Any]:
        """One task with its position; with ``annotator``, that annotator's current label."""
        task = self.store.task(req.params["task_id"])
        annotator = self._optional_annotator(req.query)
        body = {
            "task": task,
            "position": self.store.position[req.params["task_id"]] + 1,
            "total": len(self.store.tasks),
        }
        if annotator:
            rec = self.store.judgments(annotator).get(req.params["task_id"])
            body["judgment"] = rec["label"] if rec else None
        return HTTPStatus.OK, body

    def old_article(self, req: ApiRequest) -> tuple[HTTPStatus, Any]:
        """The whole old article of a task's page, by section."""
        task = self.store.task(req.params["task_id"])
        return HTTPStatus.OK, self.old_articles.get(task["old_snapshot"], task["page_id"])

    def next_task(self, req: ApiRequest) -> tuple[HTTPStatus, Any]:
        """The next task the annotator has not judged (``task`` is null when all are)."""
        annotator = self._required_annotator(req.query)
        after = req.query.get("after", [None])[0]
        if after is not None:
            self.store.task(after)
        return HTTPStatus.OK, self._position(self.store.next_task(annotator, after), annotator)

    def list_judgments(self, req: ApiRequest) -> tuple[HTTPStatus, Any]:
        """One annotator's current judgments in task order."""
        annotator = self._required_annotator(req.query)
        mine = self.store.judgments(annotator)
        ordered = [mine[t["task_id"]] for t in self.store.tasks if t["task_id"] in mine]
        return HTTPStatus.OK, {"annotator": annotator, "judgments": ordered}

    def judge(self, req: ApiRequest) -> tuple[HTTPStatus, Any]:
        """Record one judgment (a later one for the same task supersedes it)."""
        body = req.body
        if not isinstance(body, dict):
            raise ApiError(HTTPStatus.BAD_REQUEST, "the body must be a JSON object")
        unknown = sorted(set(body) - _POST_FIELDS)
        if unknown:
            raise ApiError(
                HTTPStatus.BAD_REQUEST,
                f"unknown field(s) {unknown}; expected {sorted(_POST_FIELDS)}",
            )
        problem = annotator_problem(body.get("annotator"))
        if problem:
            raise ApiError(HTTPStatus.BAD_REQUEST, problem)
        task_id = body.get("task_id")
        if not isinstance(task_id, str) or not task_id:
            raise ApiError(HTTPStatus.BAD_REQUEST, "field 'task_id' (a string) is required")
        label = body.get("label")
        if label not in JUDGMENT_LABELS:
            raise ApiError(
                HTTPStatus.BAD_REQUEST,
                f"label {label!r} is not one of {list(JUDGMENT_LABELS)}",
            )
        elapsed = body.get("elapsed_ms")
        if elapsed is not None and (
            not isinstance(elapsed, int) or isinstance(elapsed, bool) or elapsed < 0
        ):
            raise ApiError(HTTPStatus.BAD_REQUEST, "'elapsed_ms' must be a non-negative integer")
        rec, superseded = self.store.record(body["annotator"], task_id, label, elapsed)
        done = len(self.store.judgments(body["annotator"]))
        return HTTPStatus.CREATED, {
            "judgment": rec,
            "superseded": superseded,
            "done": done,
            "total": len(self.store.tasks),
        }

    def progress(self, req: ApiRequest) -> tuple[HTTPStatus, Any]:
        """Judgments per annotator and raters per task."""
        return HTTPStatus.OK, {"release": self.release} | self.store.progress()

    def route(self, method: str, path: str) -> tuple[Handler, dict[str, str]]:
        """The handler for ``method path``; ApiError 404 / 405 otherwise."""
        for pattern, methods in self.routes:
            match = pattern.fullmatch(path)
            if match:
                if method not in methods:
                    allow = ", ".join(sorted(methods))
                    raise ApiError(
                        HTTPStatus.METHOD_NOT_ALLOWED,
                        f"{method} is not allowed on {path}; use {allow}",
                        {"Allow": allow},
                    )
                return methods[method], match.groupdict()
        raise ApiError(HTTPStatus.NOT_FOUND, f"no such path: {path}")
