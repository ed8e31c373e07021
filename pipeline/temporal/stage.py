"""The temporal stage: phrase the questions the ledger's facts allow, once each.

After the ledger reaches snapshot ``t``, ``<workdir>/temporal/<t>/questions.parquet`` holds
every temporal question phrased so far (carried over from the previous snapshot) plus the
ones the facts at ``t`` newly allow, phrased now: kept, or rejected with the reason. A
question is phrased once in its life; the release decides each time whether the data still
gives its answer (:mod:`pipeline.temporal.tables`). ``state.json`` records the inputs, so a
re-run with nothing new is skipped; writes are atomic.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa

from pipeline.generate.prompts import load_prompt
from pipeline.layout import (
    done_before,
    output_fingerprints,
    outputs_intact,
    own_marker,
    verified_inputs,
)
from pipeline.ledger import ledger_dir, previous_snapshot
from pipeline.models.llm.base import LLMBackend
from pipeline.storage import (
    publish_state_dir,
    read_parquet,
    recover_state_dirs,
    stage_lock,
    write_json_atomic,
    write_parquet_atomic,
)
from pipeline.temporal.phrasing import CHECKS_VERSION, PROMPT, phrase_questions, recheck
from pipeline.temporal.questions import facts_from_rows, question_specs

SCHEMA_VERSION = 1
QUESTIONS_SCHEMA = pa.schema(
    [
        ("question_id", pa.string()),
        ("category", pa.string()),
        ("shape", pa.string()),
        ("quadruple_ids", pa.list_(pa.string())),
        ("answer", pa.list_(pa.string())),
        ("answer_mode", pa.string()),
        ("as_of", pa.string()),
        ("question", pa.string()),
        ("status", pa.string()),  # kept | rejected
        ("reason", pa.string()),
        ("detail", pa.string()),
        ("created_snapshot", pa.string()),
        ("prompt_hash", pa.string()),
        ("generator", pa.string()),
    ]
)


@dataclass
class TemporalSummary:
    """What one run of the stage did (also ``state.json``)."""

    snapshot: str
    previous: str | None
    inputs_digest: str
    candidates: int = 0
    carried: int = 0
    phrased: int = 0
    kept: dict[str, int] = field(default_factory=dict)
    rejected: dict[str, int] = field(default_factory=dict)
    deferred: int = 0
    seconds: float = 0.0
    inputs: dict[str, str] = field(default_factory=dict)  # workdir path -> sha256
    outputs: dict[str, str] = field(default_factory=dict)  # file name -> sha256
    already_done: bool = False

    def line(self) -> str:
        """One line for logs and the CLI."""
        state = " (already done)" if self.already_done else ""
        kept = sum(self.kept.values())
        rejected = sum(self.rejected.values())
        return (
            f"temporal {self.snapshot}: candidates={self.candidates} carried={self.carried} "
            f"phrased={self.phrased} kept={kept} rejected={rejected} "
            f"deferred={self.deferred}{state}"
        )


def temporal_dir(workdir: str | Path, snapshot: str) -> Path:
    """``<workdir>/temporal/<snapshot>``."""
    return Path(workdir) / "temporal" / snapshot


def read_questions(workdir: str | Path, snapshot: str) -> pa.Table | None:
    """Every temporal question phrased up to ``snapshot`` (None if the stage never ran)."""
    path = temporal_dir(workdir, snapshot) / "questions.parquet"
    if not path.exists():
        return None
    return read_parquet(
        path, expected_table="temporal_questions", max_schema_version=SCHEMA_VERSION
    )


def _digest(
    workdir: Path, snapshot: str, previous: str | None, limit: int
) -> tuple[str, dict[str, str]]:
    """The digest of what decides the stage's output, and its input files' sha256."""
    paths = [ledger_dir(workdir, snapshot) / name for name in ("items.parquet", "evidence.parquet")]
    if previous is not None and (temporal_dir(workdir, previous) / "questions.parquet").exists():
        paths.append(temporal_dir(workdir, previous) / "questions.parquet")
    inputs = verified_inputs(workdir, paths)
    # Not the generator: another model phrases only questions that are new anyway.
    blob = {
        "limit": limit,
        "prompt": load_prompt(PROMPT).prompt_hash,
        "checks": CHECKS_VERSION,
        "inputs": inputs,
    }
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:16], inputs


def phrase_temporal_questions(
    workdir: str | Path,
    snapshot: str,
    backend: LLMBackend,
    *,
    max_new: int = 200,
    force: bool = False,
) -> TemporalSummary:
    """Phrase the temporal questions the facts at ``snapshot`` newly allow (at most
    ``max_new``; the rest wait for the next run) and store them with every earlier one.
    Holds the workdir's temporal lock."""
    workdir = Path(workdir)
    with stage_lock(workdir, "temporal"):
        recover_state_dirs(workdir / "temporal")
        return _phrase(workdir, snapshot, backend, max_new=max_new, force=force)


def _phrase(
    workdir: Path, snapshot: str, backend: LLMBackend, *, max_new: int, force: bool
) -> TemporalSummary:
    from pipeline.release import release_item_tables

    started = time.monotonic()
    previous = previous_snapshot(workdir, snapshot)
    generator = f"{backend.backend_id}:{backend.model}"
    digest, inputs = _digest(workdir, snapshot, previous, max_new)
    out = temporal_dir(workdir, snapshot)
    mine = own_marker(out / "state.json", TemporalSummary)
    stored = None if force else mine
    if done_before(stored, digest, out):
        stored.already_done = True
        return stored

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
    candidates = question_specs(facts)
    for spec in candidates:  # phrasings stored earlier, under the checks of today
        row = rows.get(spec.question_id)
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
    prompt = load_prompt(PROMPT).prompt_hash
    for spec, phrasing in zip(todo, phrase_questions(todo, backend), strict=True):
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
    new_rows = [r for r in rows.values() if r["created_snapshot"] == snapshot]
    summary.kept = dict(Counter(r["category"] for r in new_rows if r["status"] == "kept"))
    summary.rejected = dict(Counter(r["reason"] for r in new_rows if r["status"] != "kept"))
    summary.seconds = round(time.monotonic() - started, 2)
    _write(out, list(rows.values()), summary)
    return summary


def _write(out: Path, rows: list[dict], summary: TemporalSummary) -> None:
    def write(tmp: Path) -> None:
        write_parquet_atomic(
            pa.Table.from_pylist(rows, schema=QUESTIONS_SCHEMA),
            tmp / "questions.parquet",
            table_name="temporal_questions",
            schema_version=SCHEMA_VERSION,
        )
        summary.outputs = output_fingerprints(tmp, ["questions.parquet"])
        write_json_atomic(tmp / "state.json", asdict(summary))

    publish_state_dir(out, write)
