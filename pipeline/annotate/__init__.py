"""Human validation of sentence labels, after GrowOVER Appendix D (the MTurk check).

Annotators see a sentence of the new article and judge whether it is *supported*, *not
supported* or *uncertain* given the OLD article. Three commands (``wikidrift annotate ...``):

- ``sample`` (:mod:`pipeline.annotate.sample`): a seeded, stratified sample of ``new`` and
  ``changed`` sentences (optionally QA items) of one release, with the old context each needs;
- ``serve`` (:mod:`pipeline.annotate.server`): a local web page that records judgments (that
  module is the HTTP layer; the JSON API is :mod:`~pipeline.annotate.api`, over the judgment
  store :mod:`~pipeline.annotate.store` and the old articles of
  :mod:`~pipeline.annotate.old_articles`);
- ``report`` (:mod:`pipeline.annotate.report`): majority vote, accuracy in the layout of
  GrowOVER Table 12, Fleiss' kappa and the disagreements.

Layout under ``<annotations_root>/<release>/`` (root default ``<workdir>/annotations``)::

    tasks.jsonl        one task per line, in the order annotators see them
    sample.json        how the sample was drawn (seed, counts available and taken)
    <annotator>.jsonl  that annotator's judgments, append-only; a later line for the same
                       task supersedes an earlier one
    report.md          the last report

This module holds what the three share: paths, the judgment vocabulary, annotator names and
reading the files back.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.errors import WikidriftError
from pipeline.layout import default_annotations_root

log = logging.getLogger(__name__)

TASKS_FILE = "tasks.jsonl"
SAMPLE_FILE = "sample.json"
REPORT_FILE = "report.md"

# The three answers of GrowOVER's protocol, in the order of the keyboard shortcuts 1, 2, 3.
JUDGMENT_LABELS: tuple[str, ...] = ("supported", "not_supported", "uncertain")
# Automatic labels a task can validate.
TASK_LABELS: tuple[str, ...] = ("new", "changed")

ANNOTATOR_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
# Stems of files that live beside the judgment files and must never be taken for one.
RESERVED_NAMES = frozenset({"tasks", "sample", "report"})

# Task fields that would tell an annotator which label the pipeline chose (GrowOVER's workers
# judged blind; showing the label invites agreeing with it).
_HIDDEN_TASK_FIELDS = ("label", "rule", "decided_by", "similarity", "replaces")


def release_annotations_dir(
    workdir: str | Path, release: str, annotations_root: str | Path | None = None
) -> Path:
    """``<annotations_root>/<release>`` (root default ``<workdir>/annotations``)."""
    root = Path(annotations_root) if annotations_root else default_annotations_root(workdir)
    return root / release


def annotator_problem(name: object) -> str | None:
    """Why ``name`` is not a usable annotator name, or None when it is."""
    if not isinstance(name, str) or not name:
        return "annotator name missing"
    if not ANNOTATOR_RE.fullmatch(name):
        return (
            f"annotator name {name!r} is not a safe slug: 1-40 characters, lowercase letters, "
            "digits, '-' or '_', starting with a letter or digit"
        )
    if name in RESERVED_NAMES:
        return f"annotator name {name!r} is reserved (it names another file); pick another"
    return None


def public_task(task: dict[str, Any]) -> dict[str, Any]:
    """The task as annotators see it: without the pipeline's label or how it was decided."""
    view = {k: v for k, v in task.items() if k not in _HIDDEN_TASK_FIELDS}
    if view.get("closest_old"):
        view["closest_old"] = {k: v for k, v in view["closest_old"].items() if k != "source"}
    if view.get("qa"):
        view["qa"] = {k: v for k, v in view["qa"].items() if k != "previous_answer"}
    return view


def read_tasks(directory: str | Path) -> list[dict[str, Any]]:
    """The tasks of ``<annotations_root>/<release>``, in annotation order."""
    path = Path(directory) / TASKS_FILE
    if not path.exists():
        raise WikidriftError(
            f"no tasks in {path.parent}: run `wikidrift annotate sample --release "
            f"{path.parent.name}` first"
        )
    tasks = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                tasks.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise WikidriftError(f"{path}:{n}: not JSON ({exc.msg})") from None
    return tasks


@dataclass
class JudgmentLog:
    """Every annotator's current judgments of one release, read from the JSONL files."""

    # annotator -> task_id -> the latest judgment record
    latest: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    lines: int = 0
    malformed: list[str] = field(default_factory=list)

    def votes(self, task_id: str) -> dict[str, str]:
        """annotator -> label for one task."""
        return {a: js[task_id]["label"] for a, js in self.latest.items() if task_id in js}

    def total(self) -> int:
        """Number of (annotator, task) judgments in force."""
        return sum(len(js) for js in self.latest.values())


def judgment_files(directory: str | Path) -> Iterator[tuple[str, Path]]:
    """(annotator, path) of every judgment file in a release's annotation folder."""
    directory = Path(directory)
    if not directory.is_dir():
        return
    for path in sorted(directory.glob("*.jsonl")):
        if annotator_problem(path.stem) is None:
            yield path.stem, path


def parse_judgment_line(line: str, annotator: str) -> dict[str, Any] | None:
    """One judgment record, or None when the line is not a judgment by ``annotator``."""
    try:
        rec = json.loads(line)
    except json.JSONDecodeError:
        return None
    if (
        not isinstance(rec, dict)
        or not isinstance(rec.get("task_id"), str)
        or rec.get("label") not in JUDGMENT_LABELS
        or rec.get("annotator", annotator) != annotator
    ):
        return None
    return rec


def read_judgment_file(path: Path, annotator: str, log_: JudgmentLog) -> None:
    """Fold one annotator's file into ``log_`` (later lines supersede earlier ones)."""
    latest = log_.latest.setdefault(annotator, {})
    with path.open(encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            rec = parse_judgment_line(line, annotator)
            if rec is None:
                # A crash mid-append can leave a torn last line; keep the rest usable.
                log_.malformed.append(f"{path.name}:{n}")
                continue
            log_.lines += 1
            latest[rec["task_id"]] = rec
    if not latest:
        del log_.latest[annotator]


def read_judgments(directory: str | Path) -> JudgmentLog:
    """All judgment files of a release's annotation folder."""
    result = JudgmentLog()
    for annotator, path in judgment_files(directory):
        read_judgment_file(path, annotator, result)
    if result.malformed:
        log.warning(
            "skipped %d malformed judgment line(s): %s",
            len(result.malformed),
            ", ".join(result.malformed[:5]),
        )
    return result
