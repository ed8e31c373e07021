"""Score the annotations of one release (``wikidrift annotate report``).

Per task, the votes are every annotator's *latest* judgment. The **verdict** is the category
with a strict majority of the votes (more than half: 2 of 3, 3 of 3, 3 of 4 ...); anything
else (1-1-1, 1-1, 2-2) is **no majority**. Tasks with fewer raters than ``min_raters`` are left
out of the scores (and counted); tasks with fewer than three raters are counted and flagged.

Whether the pipeline's label was right follows GrowOVER Appendix D:

- a **new** sentence is wrong only when the verdict is *supported* (the old article already
  said it); *not supported*, *uncertain* and no majority leave it standing;
- a **changed** sentence is right only when the verdict is *not supported* (the old article
  did not say this); *supported*, *uncertain* and no majority count against it.

So *uncertain* and ties favour the label for new sentences and go against it for changed ones,
exactly as the paper's wording reads. The report also gives a **strict** accuracy where only
a *not supported* verdict confirms either label (uncertain and ties always count as wrong), a
lower bound that does not depend on that asymmetry.

Agreement is Fleiss' kappa over the three categories. With unequal rater counts it uses the
generalization of Fleiss (1971) in Gwet's *Handbook of Inter-Rater Reliability* (also the R
package irrCAC): observed agreement averaged over tasks with at least two raters, category
shares averaged over tasks. With the same count everywhere it is Fleiss' kappa exactly.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.annotate import (
    JUDGMENT_LABELS,
    REPORT_FILE,
    TASK_LABELS,
    read_judgments,
    read_tasks,
    release_annotations_dir,
)
from pipeline.errors import WikidriftError
from pipeline.storage import write_text_atomic

NO_MAJORITY = "no_majority"
FULL_RATERS = 3  # GrowOVER had three workers judge each sentence
_VOTE_TEXT = {"supported": "supported", "not_supported": "not supported", "uncertain": "uncertain"}
_KIND_TITLE = {"sentence": "Sentence labels", "qa": "QA items"}


# --------------------------------------------------------------------------- statistics
def majority_vote(votes: Sequence[str]) -> str:
    """The category with more than half of ``votes``, else ``no_majority`` (also when empty)."""
    if not votes:
        return NO_MAJORITY
    label, count = Counter(votes).most_common(1)[0]
    return label if 2 * count > len(votes) else NO_MAJORITY


def label_is_correct(label: str, verdict: str) -> bool:
    """GrowOVER's rule: new is wrong only when supported; changed is right only when not
    supported (no majority counts like uncertain)."""
    if label == "new":
        return verdict != "supported"
    if label == "changed":
        return verdict == "not_supported"
    raise ValueError(f"no correctness rule for label {label!r}")


def label_is_correct_strict(label: str, verdict: str) -> bool:
    """Only a *not supported* verdict confirms a new or changed label."""
    if label not in TASK_LABELS:
        raise ValueError(f"no correctness rule for label {label!r}")
    return verdict == "not_supported"


def fleiss_kappa(counts: Sequence[Sequence[int]]) -> float | None:
    """Fleiss' kappa from a subjects x categories matrix of rating counts.

    Rows may have different totals (Gwet's generalization); rows with no rating are ignored.
    None when it is undefined: fewer than one task with two raters, or every rating in one
    category (chance agreement 1)."""
    rows = [list(r) for r in counts if sum(r) > 0]
    if not rows:
        return None
    width = len(rows[0])
    if any(len(r) != width for r in rows):
        raise ValueError("every row needs one count per category")
    if any(c < 0 for r in rows for c in r):
        raise ValueError("counts must be non-negative")
    # Category shares: each task's own proportions, averaged over tasks.
    shares = [sum(r[j] / sum(r) for r in rows) / len(rows) for j in range(width)]
    chance = sum(p * p for p in shares)
    paired = [r for r in rows if sum(r) >= 2]
    if not paired or chance >= 1.0:
        return None
    observed = sum(sum(c * (c - 1) for c in r) / (sum(r) * (sum(r) - 1)) for r in paired) / len(
        paired
    )
    return (observed - chance) / (1.0 - chance)


# --------------------------------------------------------------------------- scoring
@dataclass
class TaskResult:
    """One task's votes and what they say about its label."""

    task_id: str
    kind: str
    label: str
    sentence: str
    title: str
    votes: dict[str, str]  # annotator -> judgment
    verdict: str
    correct: bool | None  # None: not scored (too few raters)
    correct_strict: bool | None

    @property
    def n_raters(self) -> int:
        """How many annotators judged the task."""
        return len(self.votes)

    @property
    def unanimous(self) -> bool:
        """Every rater gave the same answer."""
        return len(set(self.votes.values())) <= 1


@dataclass
class AnnotationReport:
    """Everything ``annotate report`` prints."""

    release: str
    old_snapshot: str | None
    min_raters: int
    results: list[TaskResult] = field(default_factory=list)
    annotators: dict[str, int] = field(default_factory=dict)
    orphan_judgments: int = 0
    malformed_lines: list[str] = field(default_factory=list)

    def scored(self, kind: str, label: str) -> list[TaskResult]:
        """Tasks of one kind and label with enough raters to score."""
        return [
            r
            for r in self.results
            if r.kind == kind and r.label == label and r.n_raters >= self.min_raters
        ]

    def accuracy(self, kind: str, label: str, *, strict: bool = False) -> float | None:
        """Share of scored tasks whose label the annotators confirmed (None: none scored)."""
        scored = self.scored(kind, label)
        if not scored:
            return None
        hits = sum(bool(r.correct_strict if strict else r.correct) for r in scored)
        return hits / len(scored)

    def kinds(self) -> list[str]:
        """Task kinds present, sentences first."""
        present = {r.kind for r in self.results}
        return [k for k in ("sentence", "qa") if k in present]

    def kappa(self, kind: str | None = None) -> tuple[float | None, int]:
        """Fleiss' kappa over tasks (of one kind) with at least two raters, and their number."""
        rows = [
            [list(r.votes.values()).count(c) for c in JUDGMENT_LABELS]
            for r in self.results
            if (kind is None or r.kind == kind) and r.n_raters >= 2
        ]
        return fleiss_kappa(rows), len(rows)


def build_report(
    tasks: list[dict[str, Any]],
    judgments: dict[str, dict[str, dict[str, Any]]],
    *,
    release: str,
    min_raters: int = 1,
) -> AnnotationReport:
    """Votes, verdicts and correctness of every task from the latest judgments
    (annotator -> task_id -> record)."""
    if min_raters < 1:
        raise ValueError("min_raters must be >= 1")
    known = {t["task_id"] for t in tasks}
    report = AnnotationReport(
        release=release,
        old_snapshot=tasks[0].get("old_snapshot") if tasks else None,
        min_raters=min_raters,
    )
    for annotator, mine in sorted(judgments.items()):
        report.annotators[annotator] = sum(1 for tid in mine if tid in known)
        report.orphan_judgments += sum(1 for tid in mine if tid not in known)
    for task in tasks:
        tid = task["task_id"]
        votes = {a: mine[tid]["label"] for a, mine in sorted(judgments.items()) if tid in mine}
        verdict = majority_vote(list(votes.values()))
        scored = len(votes) >= min_raters
        report.results.append(
            TaskResult(
                task_id=tid,
                kind=task.get("kind", "sentence"),
                label=task["label"],
                sentence=task["sentence"],
                title=task.get("title", ""),
                votes=votes,
                verdict=verdict,
                correct=label_is_correct(task["label"], verdict) if scored else None,
                correct_strict=label_is_correct_strict(task["label"], verdict) if scored else None,
            )
        )
    return report


# --------------------------------------------------------------------------- markdown
def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _cell(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("\\", "\\\\").replace("|", "\\|")


def _votes_text(votes: dict[str, str]) -> str:
    counts = Counter(votes.values())
    summary = ", ".join(f"{_VOTE_TEXT[c]} {counts[c]}" for c in JUDGMENT_LABELS if counts[c])
    who = ", ".join(f"{a}: {_VOTE_TEXT[v]}" for a, v in votes.items())
    return f"{summary} ({who})"


def _verdict_text(verdict: str) -> str:
    return "no majority" if verdict == NO_MAJORITY else _VOTE_TEXT[verdict]


def render_markdown(report: AnnotationReport) -> str:
    """The report as Markdown (GrowOVER Table 12 layout first)."""
    out: list[str] = []
    old = report.old_snapshot or "?"
    out.append(f"# Human validation of release {report.release} (old article: {old})")
    out.append("")
    total = len(report.results)
    judged = sum(1 for r in report.results if r.n_raters)
    out.append(
        f"{total} tasks, {judged} judged by at least one annotator; "
        f"{sum(report.annotators.values())} judgments by {len(report.annotators)} annotator(s)."
    )
    out.append("")
    out.append("## Accuracy (layout of GrowOVER Table 12)")
    out.append("")
    out.append("| | New | Changed |")
    out.append("|---|---:|---:|")
    for kind in report.kinds() or ["sentence"]:
        title = _KIND_TITLE[kind]
        acc = [_pct(report.accuracy(kind, lab)) for lab in TASK_LABELS]
        strict = [_pct(report.accuracy(kind, lab, strict=True)) for lab in TASK_LABELS]
        n = [str(len(report.scored(kind, lab))) for lab in TASK_LABELS]
        out.append(f"| {title}: accuracy (%) | {acc[0]} | {acc[1]} |")
        out.append(f"| {title}: strict accuracy (%) | {strict[0]} | {strict[1]} |")
        out.append(f"| {title}: tasks scored | {n[0]} | {n[1]} |")
    out.append("| GrowOVER paper, Table 12: accuracy (%) | 86.7 | 96.7 |")
    out.append("")
    out.append(
        "Accuracy follows GrowOVER Appendix D on the majority verdict: a *new* label is wrong "
        "only when the verdict is *supported*; a *changed* label is right only when it is *not "
        "supported*. *Uncertain* and no majority therefore count for *new* and against "
        "*changed*. Strict accuracy: only a *not supported* verdict confirms either label. "
        f"Tasks need at least {report.min_raters} rater(s) to be scored."
    )
    out.append("")
    out.append("### Verdicts")
    out.append("")
    header = [_VOTE_TEXT[c] for c in JUDGMENT_LABELS] + ["no majority", "not judged"]
    out.append("| | " + " | ".join(header) + " |")
    out.append("|---|" + "---:|" * len(header))
    for kind in report.kinds():
        for lab in TASK_LABELS:
            rows = [r for r in report.results if r.kind == kind and r.label == lab]
            if not rows:
                continue
            judged_rows = [r for r in rows if r.n_raters]
            verdicts = Counter(r.verdict for r in judged_rows)
            cells = [str(verdicts[c]) for c in (*JUDGMENT_LABELS, NO_MAJORITY)]
            cells.append(str(len(rows) - len(judged_rows)))
            out.append(f"| {_KIND_TITLE[kind]}, {lab} | " + " | ".join(cells) + " |")
    out.append("")

    out.append("## Raters")
    out.append("")
    by_raters = Counter(min(r.n_raters, FULL_RATERS) for r in report.results)
    fewer = sum(1 for r in report.results if 0 < r.n_raters < FULL_RATERS)
    out.append(
        f"- tasks with {FULL_RATERS} or more raters: {by_raters[FULL_RATERS]}; "
        f"with fewer than {FULL_RATERS}: {fewer} (2: {by_raters[2]}, 1: {by_raters[1]}); "
        f"not judged: {by_raters[0]}"
    )
    unscored = sum(1 for r in report.results if 0 < r.n_raters < report.min_raters)
    if unscored:
        out.append(f"- left out of the scores (fewer than {report.min_raters} raters): {unscored}")
    for annotator, n in report.annotators.items():
        out.append(f"- {annotator}: {n} judgment(s)")
    if report.orphan_judgments:
        out.append(
            f"- {report.orphan_judgments} judgment(s) refer to tasks no longer in tasks.jsonl "
            "(ignored)"
        )
    if report.malformed_lines:
        shown = ", ".join(report.malformed_lines[:10])
        out.append(f"- {len(report.malformed_lines)} malformed line(s) skipped: {shown}")
    out.append("")

    out.append("## Agreement")
    out.append("")
    kappa, n = report.kappa()
    counts = {r.n_raters for r in report.results if r.n_raters >= 2}
    method = (
        "Fleiss' kappa"
        if len(counts) <= 1
        else "Fleiss' kappa, generalized to unequal rater counts (Gwet)"
    )
    value = "n/a" if kappa is None else f"{kappa:.3f}"
    out.append(f"- {method} over supported / not supported / uncertain: {value} ({n} tasks)")
    if len(report.kinds()) > 1:
        for kind in report.kinds():
            k, m = report.kappa(kind)
            out.append(
                f"- {_KIND_TITLE[kind]} only: {'n/a' if k is None else f'{k:.3f}'} ({m} tasks)"
            )
    multi = [r for r in report.results if r.n_raters >= 2]
    if multi:
        unanimous = sum(r.unanimous for r in multi)
        out.append(f"- unanimous: {unanimous} of {len(multi)} tasks with two or more raters")
    if kappa is None and n:
        out.append("- kappa is undefined when every rating falls in one category")
    out.append("")

    out.append("## Disagreements")
    out.append("")
    split = [r for r in report.results if r.n_raters >= 2 and not r.unanimous]
    if split:
        out.extend(_task_rows(split))
    else:
        out.append("None: every task with two or more raters was judged unanimously.")
    out.append("")

    out.append("## Labels the annotators rejected")
    out.append("")
    wrong = [r for r in report.results if r.correct is False]
    if wrong:
        out.extend(_task_rows(wrong))
    else:
        out.append("None.")
    out.append("")
    return "\n".join(out)


def _task_rows(results: list[TaskResult]) -> list[str]:
    """A Markdown table of tasks: id, pipeline label, verdict, sentence and votes."""
    rows = ["| task | label | verdict | sentence | votes |", "|---|---|---|---|---|"]
    rows.extend(
        f"| {r.task_id} | {r.label} | {_verdict_text(r.verdict)} | "
        f"{_cell(r.title + ': ' + r.sentence)} | {_cell(_votes_text(r.votes), 400)} |"
        for r in results
    )
    return rows


def write_report(
    workdir: str | Path,
    release: str,
    *,
    annotations_root: str | Path | None = None,
    min_raters: int = 1,
) -> tuple[str, Path]:
    """Build the report of ``release``, save it as ``report.md`` (atomic), return (text, path)."""
    if min_raters < 1:
        raise WikidriftError(f"--min-raters must be at least 1, not {min_raters}")
    directory = release_annotations_dir(workdir, release, annotations_root)
    tasks = read_tasks(directory)
    log_ = read_judgments(directory)
    report = build_report(tasks, log_.latest, release=release, min_raters=min_raters)
    report.malformed_lines = list(log_.malformed)
    text = render_markdown(report)
    path = directory / REPORT_FILE
    write_text_atomic(path, text)
    return text, path
