"""The old article of a task's page for the annotation page (``o``, and
``GET /api/tasks/<id>/old-article``): read from the old snapshot's tables on demand, cached.
"""

from __future__ import annotations

import threading
from http import HTTPStatus
from pathlib import Path
from typing import Any

from pipeline.annotate.errors import ApiError
from pipeline.errors import WikidriftError


class OldArticles:
    """The old snapshot's sentences of one article at a time, read on demand and cached."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._cache: dict[tuple[str, int], dict[str, Any]] = {}
        self._lock = threading.Lock()

    def get(self, snapshot: str, page_id: int) -> dict[str, Any]:
        """``{page_id, snapshot, title, revision_id, sections: [{name, sentences}]}``."""
        key = (snapshot, page_id)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        from pipeline.layout import read_snapshot_table

        try:
            sents = read_snapshot_table(
                self.workdir,
                snapshot,
                "sentences",
                page_ids=[page_id],
                columns=["page_id", "sent_idx", "section", "text"],
            ).to_pylist()
            arts = read_snapshot_table(
                self.workdir,
                snapshot,
                "articles",
                page_ids=[page_id],
                columns=["page_id", "title", "revision_id"],
            ).to_pylist()
        except (WikidriftError, FileNotFoundError) as exc:
            raise ApiError(
                HTTPStatus.SERVICE_UNAVAILABLE, f"old snapshot {snapshot} not readable: {exc}"
            ) from None
        sections: list[dict[str, Any]] = []
        for s in sorted(sents, key=lambda r: r["sent_idx"]):
            # Consecutive sentences of one section form one block, in article order.
            if not sections or sections[-1]["name"] != s["section"]:
                sections.append({"name": s["section"], "sentences": []})
            sections[-1]["sentences"].append({"sent_idx": s["sent_idx"], "text": s["text"]})
        article = {
            "page_id": page_id,
            "snapshot": snapshot,
            "title": arts[0]["title"] if arts else None,
            "revision_id": arts[0]["revision_id"] if arts else None,
            "exists": bool(arts),
            "sections": sections,
        }
        with self._lock:
            self._cache[key] = article
        return article
