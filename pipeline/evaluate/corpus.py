"""The retrieval corpus of a release: the paragraphs of its snapshot and of every earlier one.

A passage is one paragraph (its sentences joined by a space). Outdated text competes with
current text, as on the web: a paragraph that changed between snapshots is in the corpus in
both versions. A paragraph whose text is identical in several snapshots is stored once, with
every snapshot date it appears in (``snapshots``); it is *current* when the latest snapshot
of the corpus holds it. A corpus can stop at an earlier date (``until``), for questions asked
at that date (timelines).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from pipeline.errors import WikidriftError
from pipeline.layout import list_snapshots, read_snapshot_table


@dataclass(frozen=True)
class Passage:
    """One distinct paragraph text and where and when it appears."""

    passage_id: str  # 16 hex digits of the text's blake2b hash
    page_id: int
    title: str
    sentences: tuple[str, ...]
    snapshots: tuple[str, ...]  # every snapshot date holding this text, ascending
    current: bool  # the corpus's latest snapshot holds it

    @property
    def text(self) -> str:
        """The paragraph text."""
        return " ".join(self.sentences)

    @property
    def first_seen(self) -> str:
        """The earliest snapshot date holding the text."""
        return self.snapshots[0]

    @property
    def last_seen(self) -> str:
        """The latest snapshot date holding the text."""
        return self.snapshots[-1]


def passage_id(text: str) -> str:
    """Stable id of a passage text."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


def corpus_snapshots(workdir: str | Path, until: str) -> list[str]:
    """The complete snapshots of ``workdir`` dated ``until`` or earlier, ascending."""
    dates = [d for d in list_snapshots(workdir) if d <= until]
    if not dates:
        raise WikidriftError(
            f"no snapshot dated {until} or earlier in {workdir}: nothing to retrieve"
        )
    return dates


def _paragraphs(sentences: pa.Table) -> dict[tuple[int, int], list[str]]:
    order = sorted(
        zip(
            sentences.column("page_id").to_pylist(),
            sentences.column("para_idx").to_pylist(),
            sentences.column("sent_idx").to_pylist(),
            sentences.column("text").to_pylist(),
            strict=True,
        )
    )
    paragraphs: dict[tuple[int, int], list[str]] = {}
    for page_id, para_idx, _, text in order:
        paragraphs.setdefault((page_id, para_idx), []).append(text)
    return paragraphs


def build_corpus(workdir: str | Path, until: str) -> list[Passage]:
    """Every distinct paragraph of the snapshots dated ``until`` or earlier, in order of first
    appearance (snapshot, page, paragraph)."""
    dates = corpus_snapshots(str(workdir), until)
    seen: dict[str, dict] = {}
    for snap in dates:
        articles = read_snapshot_table(workdir, snap, "articles", columns=["page_id", "title"])
        titles = dict(
            zip(
                articles.column("page_id").to_pylist(),
                articles.column("title").to_pylist(),
                strict=True,
            )
        )
        sentences = read_snapshot_table(
            workdir, snap, "sentences", columns=["page_id", "para_idx", "sent_idx", "text"]
        )
        for (page_id, _), texts in _paragraphs(sentences).items():
            text = " ".join(texts)
            key = passage_id(text)
            entry = seen.get(key)
            if entry is None:
                seen[key] = {
                    "page_id": page_id,
                    "title": titles.get(page_id, ""),
                    "sentences": tuple(texts),
                    "snapshots": [snap],
                }
            elif entry["snapshots"][-1] != snap:
                entry["snapshots"].append(snap)
    latest = dates[-1]
    return [
        Passage(
            passage_id=key,
            page_id=e["page_id"],
            title=e["title"],
            sentences=e["sentences"],
            snapshots=tuple(e["snapshots"]),
            current=e["snapshots"][-1] == latest,
        )
        for key, e in seen.items()
    ]
