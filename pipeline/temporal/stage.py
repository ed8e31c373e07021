"""The temporal stage: phrase the questions the ledger's facts allow, once each.

After the ledger reaches snapshot ``t``, ``<workdir>/temporal/<t>/questions.parquet`` holds
every temporal question phrased so far (carried over from the previous snapshot) plus the
ones the facts at ``t`` newly allow, phrased now: kept, or rejected with the reason. A
question is phrased once in its life; the release decides each time whether the data still
gives its answer (:mod:`pipeline.temporal.tables`). ``state.json`` records the inputs, so a
re-run with nothing new is skipped; writes are atomic.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa

from pipeline.generate.prompts import load_prompt
from pipeline.layout import (
    done_before,
    ledger_dir,
    ledger_previous,
    output_fingerprints,
    outputs_intact,
    own_marker,
    read_questions,
    temporal_dir,
    verified_inputs,
)
from pipeline.markers import TemporalSummary
from pipeline.models.llm.base import LLMBackend
from pipeline.release_items import release_item_tables
from pipeline.schemas import TEMPORAL_QUESTIONS_SCHEMA, TEMPORAL_SCHEMA_VERSION
from pipeline.stage import Stage, Tools, job_digest, run_stage
from pipeline.stage_folders import STAGE_FOLDERS, TEMPORAL_MARKER
from pipeline.storage import (
    publish_state_dir,
    recover_state_dirs,
    write_json_atomic,
    write_parquet_atomic,
)
from pipeline.temporal.phrasing import (
    AMBIGUOUS_DETAIL,
    CHECKS_VERSION,
    PROMPT,
    ambiguous_questions,
    asked_keys,
    is_ambiguous,
    phrase_questions,
    recheck,
)
from pipeline.temporal.questions import QuestionSpec, facts_from_rows, question_specs
from pipeline.temporal.templates import TEMPLATE_VERSION, template_id, template_phrasings


def _digest(
    workdir: Path, snapshot: str, previous: str | None, job: dict[str, object]
) -> tuple[str, dict[str, str]]:
    """The digest of what decides the stage's output, and its input files' sha256."""
    paths = [ledger_dir(workdir, snapshot) / name for name in ("items.parquet", "evidence.parquet")]
    if previous is not None and (temporal_dir(workdir, previous) / "questions.parquet").exists():
        paths.append(temporal_dir(workdir, previous) / "questions.parquet")
    inputs = verified_inputs(workdir, paths)
    # Not the generator: another model phrases only questions that are new anyway.
    templated = job["phrasing"] == "template"
    blob = {
        **job,
        "prompt": TEMPLATE_VERSION if templated else load_prompt(PROMPT).prompt_hash,
        "checks": CHECKS_VERSION,
        "inputs": inputs,
    }
    return job_digest(blob), inputs


@dataclass(frozen=True)
class TemporalJob:
    """One run of the temporal stage, as plain data."""

    workdir: str
    snapshot: str
    previous: str | None
    inputs_digest: str
    inputs: dict[str, str]  # workdir path -> sha256
    max_new: int
    phrasing: str = "llm"  # "llm" | "template"
    c2: str = "successions"  # "successions" | "all"

    @property
    def out(self) -> Path:
        return temporal_dir(self.workdir, self.snapshot)


def plan_temporal(
    workdir: str | Path,
    snapshot: str,
    *,
    max_new: int,
    phrasing: str = "llm",
    c2: str = "successions",
) -> TemporalJob:
    """Describe the phrasing of the questions the facts at ``snapshot`` newly allow."""
    workdir = Path(workdir)
    previous = ledger_previous(workdir, snapshot)
    choices = {"limit": max_new, "phrasing": phrasing, "c2": c2}
    digest, inputs = _digest(workdir, snapshot, previous, choices)
    return TemporalJob(str(workdir), snapshot, previous, digest, inputs, max_new, phrasing, c2)


def prepare_temporal(job: TemporalJob, force: bool) -> TemporalSummary | None:
    """The stored state when these temporal questions were built from the same inputs (and
    not ``force``), else None (the stage runs)."""
    stored = None if force else own_marker(job.out / TEMPORAL_MARKER, TemporalSummary)
    if done_before(stored, job.inputs_digest, job.out):
        stored.already_done = True
        return stored
    return None


TEMPORAL_STAGE: Stage[TemporalJob, TemporalSummary] = Stage(
    name="temporal",
    unit="LLM request",  # the backend reports requests as they are planned and answered
    tools=("backend",),
    prepare=prepare_temporal,
    part_sizes=lambda job: [0],
    run_part=lambda job, index, tools: _phrase(job, tools.backend),
    finalize=lambda job, results, seconds: _write(job.out, *results[0]),
    recover=lambda workdir: recover_state_dirs(
        STAGE_FOLDERS["temporal"].path(workdir), TEMPORAL_MARKER
    ),
)


def phrase_temporal_questions(
    workdir: str | Path,
    snapshot: str,
    backend: LLMBackend,
    *,
    max_new: int = 200,
    phrasing: str = "llm",
    c2: str = "successions",
    force: bool = False,
) -> TemporalSummary:
    """Phrase the temporal questions the facts at ``snapshot`` newly allow (at most
    ``max_new``; the rest wait for the next run) with the LLM or, ``phrasing="template"``,
    from the facts' words, and store them with every earlier one. ``c2``: which C2 questions
    (:func:`pipeline.temporal.questions.c2_specs`). Holds the workdir's temporal lock."""
    return run_stage(
        TEMPORAL_STAGE,
        lambda: plan_temporal(workdir, snapshot, max_new=max_new, phrasing=phrasing, c2=c2),
        workdir=workdir,
        tools=Tools(backend=backend),
        label=f"{snapshot} temporal questions",
        force=force,
    )


def _phrase(job: TemporalJob, backend: LLMBackend) -> tuple[list[dict], TemporalSummary]:
    """Every question phrased so far and the summary, in memory: finalize writes them."""
    started = time.monotonic()
    workdir, snapshot, previous = Path(job.workdir), job.snapshot, job.previous
    templated = job.phrasing == "template"
    generator = template_id() if templated else f"{backend.backend_id}:{backend.model}"
    digest, inputs, max_new, out = job.inputs_digest, job.inputs, job.max_new, job.out
    mine = own_marker(out / TEMPORAL_MARKER, TemporalSummary)

    # Questions phrased before: at the previous snapshot, and by an earlier run at this one
    # (a run that deferred some, or a re-run after the ledger changed) unless that run's
    # file was damaged since.
    own = snapshot if mine is not None and outputs_intact(out, mine.outputs) else None
    rows: dict[str, dict] = {}
    for snap in (previous, own):
        table = read_questions(workdir, snap) if snap is not None else None
        for r in table.to_pylist() if table is not None else []:
            rows.setdefault(r["question_id"], r)
    carried = len(rows)
    facts = facts_from_rows(release_item_tables(workdir, snapshot)["quadruples"].to_pylist())
    candidates = question_specs(facts, job.c2)
    for spec in candidates:  # phrasings stored earlier, under the checks of today
        row = rows.get(spec.question_id)
        if row is not None and row["reason"] == "ambiguous":
            continue  # decided once, when it was phrased (see _reject_ambiguous)
        checked = recheck(spec, row["question"]) if row is not None else None
        if checked is not None:
            row["status"] = "kept" if checked.reason is None else "rejected"
            row["reason"], row["detail"] = checked.reason, checked.detail
    fresh = [s for s in candidates if s.question_id not in rows]
    todo = fresh[:max_new]
    summary = TemporalSummary(
        snapshot=snapshot,
        previous=previous,
        inputs_digest=digest,
        inputs=inputs,
        candidates=len(candidates),
        carried=carried,
        phrased=len(todo),
        deferred=len(fresh) - len(todo),
    )
    prompt = TEMPLATE_VERSION if templated else load_prompt(PROMPT).prompt_hash
    phrased = template_phrasings(todo) if templated else phrase_questions(todo, backend)
    for spec, phrasing in zip(todo, phrased, strict=True):
        rows[spec.question_id] = {
            "question_id": spec.question_id,
            "category": spec.category,
            "shape": spec.shape,
            "quadruple_ids": [f.item_id for f in spec.facts],
            "answer": list(spec.answer),
            "answer_mode": spec.answer_mode,
            "as_of": spec.as_of,
            "question": phrasing.question,
            "status": "kept" if phrasing.reason is None else "rejected",
            "reason": phrasing.reason,
            "detail": phrasing.detail,
            "created_snapshot": snapshot,
            "prompt_hash": prompt,
            "generator": generator,
        }
    specs = {s.question_id: s for s in candidates}
    _reject_ambiguous(
        [rows[s.question_id] for s in todo],
        [rows[s.question_id] for s in candidates if s.question_id in rows],
        specs,
    )
    new_rows = [r for r in rows.values() if r["created_snapshot"] == snapshot]
    summary.kept = dict(Counter(r["category"] for r in new_rows if r["status"] == "kept"))
    summary.rejected = dict(Counter(r["reason"] for r in new_rows if r["status"] != "kept"))
    summary.seconds = round(time.monotonic() - started, 2)
    return list(rows.values()), summary


def _reject_ambiguous(
    phrased: list[dict], live: list[dict], specs: dict[str, QuestionSpec]
) -> None:
    """Reject each question just ``phrased`` that another kept question of the ``live``
    ones asks for another answer. Decided once: a question already published stays (its
    answer is still its fact's), so a release does not lose and regain it."""

    def keys(row: dict) -> tuple[str, ...]:
        return asked_keys(specs[row["question_id"]], row["question"])

    kept = [r for r in live if r["status"] == "kept"]
    ambiguous = ambiguous_questions((keys(r), r["answer"]) for r in kept)
    for r in phrased:
        if r["status"] == "kept" and is_ambiguous(keys(r), ambiguous):
            r["status"], r["reason"], r["detail"] = "rejected", "ambiguous", AMBIGUOUS_DETAIL


def _write(out: Path, rows: list[dict], summary: TemporalSummary) -> TemporalSummary:
    """Write the questions, then the marker, and swap them in atomically."""

    def write(tmp: Path) -> None:
        write_parquet_atomic(
            pa.Table.from_pylist(rows, schema=TEMPORAL_QUESTIONS_SCHEMA),
            tmp / "questions.parquet",
            table_name="temporal_questions",
            schema_version=TEMPORAL_SCHEMA_VERSION,
        )
        summary.outputs = output_fingerprints(tmp, ["questions.parquet"])
        write_json_atomic(tmp / TEMPORAL_MARKER, asdict(summary))

    publish_state_dir(out, write)
    return summary
