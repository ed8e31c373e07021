"""The bi-temporal item ledger: every QA pair, dialogue turn and quadruple ever generated.

After snapshot ``t`` the ledger lives in ``<workdir>/ledger/<t>/``:

``items.parquet``
    one row per item ever made (up to ``t``): a stable ``item_id``, ``kind`` (``qa``,
    ``dialogue_turn``, ``quadruple``), the snapshot that created it, ``valid_from`` /
    ``valid_to`` (null while valid) and ``retired_reason``, its type at creation (new /
    changed) and its payload. Quadruples also carry valid time (``timestamp``: when the fact
    holds, from the text) and transaction time (``observed_at``: the snapshot that saw it), and
    when a later quadruple supersedes them ``superseded_by`` / ``fact_valid_until``.
``evidence.parquet``
    the evidence of every item *as of each snapshot* it was valid in: sentence indices of that
    snapshot's revision and their text, and the item's type at that snapshot.
``state.json``
    which inputs produced this state (so an unchanged re-run is skipped) and the counts.

Maintenance at ``t`` from the labels ``t-1 -> t`` (GrowOVER Algorithms 4 and 5): an item
whose evidence sentences are all unchanged stays, typed unchanged, its evidence moved to the
new indices; otherwise it is retired with the reason (``evidence_changed``,
``evidence_unlabeled``, ``evidence_deleted``, ``page_deleted``). A QA pair, dialogue turn or
quadruple whose evidence stayed but was edited is retired too when the edit no longer fits it
(``answer_no_longer_fits``: the QA answer, a name / date / number the turn's reply took from
the sentence or the quadruple's year is gone from it, or the QA answer is now one member of a
list, one end of a range, the end of a name).
For dialogues the unit is the turn: an excluded turn stays in its dialogue as context but is
no longer evaluated; a dialogue leaves the benchmark when none of its turns is left.

Supersession (MemStrata): a new quadruple with the same normalized (subject, relation) as a
valid one and a different object closes the earlier one (``valid_to``, ``superseded_by``)
without deleting it — unless the new fact's own date is older than the earlier one's (then
it is history, not an update). Quadruples restating a valid fact are not added twice.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline.carried_items import fact_misfit, qa_misfit, turn_misfit
from pipeline.errors import WikidriftError
from pipeline.fact_keys import normalize_key
from pipeline.item_kinds import LEDGER_KINDS
from pipeline.layout import (
    LEDGER_FILES,
    done_before,
    generated_dir,
    labels_dir,
    ledger_dir,
    ledger_snapshots,
    output_fingerprints,
    own_marker,
    read_evidence,
    read_generated,
    read_items,
    read_labels,
    sentence_texts,
    snapshot_dir,
    verified_inputs,
)
from pipeline.markers import LedgerSummary
from pipeline.schemas import LEDGER_EVIDENCE_SCHEMA, LEDGER_ITEMS_SCHEMA, LEDGER_SCHEMA_VERSION
from pipeline.stage import Stage, Tools, job_digest, run_stage
from pipeline.stage_folders import LEDGER_MARKER, STAGE_FOLDERS
from pipeline.storage import (
    publish_state_dir,
    recover_state_dirs,
    write_json_atomic,
    write_parquet_atomic,
)

# Bump when maintenance decides differently, so stored ledger steps are redone.
LEDGER_RULES = "ledger-5"
# Why a QA pair, dialogue turn or quadruple leaves although its evidence stayed `unchanged`:
# the small edit took its answer (a value the reply states, a quadruple's year) out of the
# sentence, or made the answer one of a list, one end of a range, part of a name
# (pipeline.carried_items).
ANSWER_NO_LONGER_FITS = "answer_no_longer_fits"


def recover_ledger(workdir: str | Path) -> list[str]:
    """Repair what a killed ledger update left (call under the ledger lock); returns one line
    per repair (see :func:`~pipeline.storage.recover_state_dirs`)."""
    folder = STAGE_FOLDERS["ledger"]
    return recover_state_dirs(folder.path(workdir), folder.marker)


def _fates(labels: pa.Table) -> tuple[dict[tuple[int, int], Any], set[int]]:
    """Fate of every old sentence: a list of new indices (unchanged) or a reason string; and
    the pages deleted at this snapshot."""
    fate: dict[tuple[int, int], Any] = {}
    deleted_pages: set[int] = set()
    rank = {"changed": 3, "unlabeled": 2, "deleted": 1}
    for r in labels.to_pylist():
        page = r["page_id"]
        if r["rule"] == "page_deleted":
            deleted_pages.add(page)
        if r["label"] == "unchanged":
            for i in r["old_idx"]:
                current = fate.get((page, i))
                new_list = current if isinstance(current, list) else []
                new_list.append(r["new_idx"])
                fate[(page, i)] = new_list
            continue
        reason = {"changed": "changed", "unlabeled": "unlabeled", "deleted": "deleted"}.get(
            r["label"]
        )
        if reason is None:
            continue
        for i in r["old_idx"]:
            current = fate.get((page, i))
            if isinstance(current, list):
                continue  # also matched by an unchanged sentence: the evidence survives
            if current is None or rank[reason] > rank[current]:
                fate[(page, i)] = reason
    return fate, deleted_pages


# Generated table -> (ledger kind, its id column, the columns the ledger copies as they are).
def _new_item_rows(workdir: Path, snapshot: str) -> tuple[list[dict], list[dict]]:
    """Ledger rows and evidence rows of the items generated at ``snapshot``."""
    items: list[dict] = []
    evidence: list[dict] = []
    base = {"created_snapshot": snapshot, "valid_from": snapshot}
    for kind in LEDGER_KINDS:
        for r in read_generated(workdir, snapshot, kind.table).to_pylist():
            item = base | {
                "item_id": r[kind.id_column],
                "kind": kind.name,
                "page_id": r["page_id"],
                "title": r["title"],
                "type_at_creation": r["type"],
                "prompt_hash": r["prompt_hash"],
                "generator": r["generator"],
            }
            items.append(
                dict.fromkeys(LEDGER_ITEMS_SCHEMA.names) | item | {c: r[c] for c in kind.payload}
            )
            evidence.append(
                {
                    "item_id": r[kind.id_column],
                    "snapshot": snapshot,
                    "page_id": r["page_id"],
                    "evidence_sent_idx": list(r["evidence_sent_idx"]),
                    "evidence_text": r["evidence_text"],
                    "type": r["type"],
                }
            )
    return items, evidence


def _timestamp_key(value: str | None) -> str | None:
    # "2024", "2024-05" and "2024-05-08" compare correctly as strings of their own precision.
    return value or None


@dataclass(frozen=True)
class LedgerJob:
    """One ledger step, as plain data."""

    workdir: str
    snapshot: str
    previous: str | None
    inputs_digest: str
    inputs: dict[str, str]  # workdir path -> sha256

    @property
    def out(self) -> Path:
        return ledger_dir(self.workdir, self.snapshot)


def plan_ledger(workdir: str | Path, snapshot: str, previous: str | None) -> LedgerJob:
    """Describe the step ``previous -> snapshot`` and the digest of the files it reads."""
    workdir = Path(workdir)
    inputs = [generated_dir(workdir, snapshot) / f"{k.table}.parquet" for k in LEDGER_KINDS]
    if previous is not None:
        if previous >= snapshot:
            raise WikidriftError(f"ledger steps go forward in time, got {previous} -> {snapshot}")
        if not (ledger_dir(workdir, previous) / LEDGER_MARKER).exists():
            raise WikidriftError(
                f"the ledger has not been brought to {previous} yet; build that release first"
            )
        inputs += [
            ledger_dir(workdir, previous) / "items.parquet",
            ledger_dir(workdir, previous) / "evidence.parquet",
            labels_dir(workdir, previous, snapshot) / "sentence_labels.parquet",
            snapshot_dir(workdir, snapshot) / "sentences.parquet",
        ]
    files = verified_inputs(workdir, inputs)
    digest = job_digest({"files": files, "rules": LEDGER_RULES})
    return LedgerJob(str(workdir), snapshot, previous, digest, files)


def prepare_ledger(job: LedgerJob, force: bool) -> LedgerSummary | None:
    """The stored state when this ledger step was done from the same inputs and the same
    previous snapshot (and not ``force``), else None (the step runs)."""
    stored = None if force else own_marker(job.out / LEDGER_MARKER, LedgerSummary)
    if done_before(stored, job.inputs_digest, job.out) and stored.previous == job.previous:
        stored.already_done = True
        return stored
    return None


def _step(
    job: LedgerJob, index: int, tools: Any
) -> tuple[dict[str, dict], list[dict], LedgerSummary]:
    """The new ledger state (items, evidence, summary), in memory: finalize writes it."""
    workdir, snapshot, previous = Path(job.workdir), job.snapshot, job.previous
    summary = LedgerSummary(
        snapshot=snapshot, previous=previous, inputs_digest=job.inputs_digest, inputs=job.inputs
    )
    items: dict[str, dict] = {}
    evidence_rows: list[dict] = []
    if previous is not None:
        for row in read_items(workdir, previous).to_pylist():
            items[row["item_id"]] = row
        prev_evidence = read_evidence(workdir, previous).to_pylist()
        evidence_rows.extend(prev_evidence)
        _maintain(workdir, snapshot, previous, items, prev_evidence, evidence_rows, summary)

    new_items, new_evidence = _new_item_rows(workdir, snapshot)
    _add_new(items, new_items, new_evidence, evidence_rows, snapshot, summary)
    return items, evidence_rows, summary


LEDGER_STAGE: Stage[LedgerJob, LedgerSummary] = Stage(
    name="ledger",
    unit=None,  # one quick step: no progress line
    prepare=prepare_ledger,
    part_sizes=lambda job: [0],
    run_part=_step,
    finalize=lambda job, results, seconds: _write(job.out, *results[0]),
    recover=recover_ledger,
)


def update_ledger(
    workdir: str | Path, snapshot: str, previous: str | None, *, force: bool = False
) -> LedgerSummary:
    """Bring the ledger from ``previous`` to ``snapshot``: maintain the items valid at
    ``previous`` with the labels ``previous -> snapshot``, add the items generated at
    ``snapshot``, apply quadruple supersession. Written atomically; skipped when its inputs
    are unchanged. Holds the workdir's ledger lock (a second writer waits)."""
    return run_stage(
        LEDGER_STAGE,
        lambda: plan_ledger(workdir, snapshot, previous),
        workdir=workdir,
        tools=Tools(),
        label=f"{snapshot} ledger",
        force=force,
    )


def _maintain(
    workdir: Path,
    snapshot: str,
    previous: str,
    items: dict[str, dict],
    prev_evidence: list[dict],
    evidence_rows: list[dict],
    summary: LedgerSummary,
) -> None:
    fate, deleted_pages = _fates(read_labels(workdir, previous, snapshot))
    at_previous = {e["item_id"]: e for e in prev_evidence if e["snapshot"] == previous}
    valid = [it for it in items.values() if it["valid_to"] is None]
    texts = sentence_texts(workdir, snapshot, {it["page_id"] for it in valid})
    for it in valid:
        kind = it["kind"]
        ev = at_previous.get(it["item_id"])
        if ev is None:
            raise WikidriftError(
                f"ledger {previous}: valid item {it['item_id']} has no evidence at {previous}"
            )
        page = it["page_id"]
        reason = None
        moved: set[int] = set()
        if page in deleted_pages:
            reason = "page_deleted"
        else:
            for i in ev["evidence_sent_idx"]:
                f = fate.get((page, i), "deleted")
                if isinstance(f, list):
                    moved.update(f)
                else:
                    reason = f"evidence_{f}"
                    break
        new_idx = sorted(moved)
        new_text = " ".join(texts[(page, j)] for j in new_idx)
        # A sentence edited too little to be relabeled can still take an item's answer away.
        if reason is None and new_text != ev["evidence_text"] and _misfit(it, ev, new_text):
            reason = ANSWER_NO_LONGER_FITS
        if reason is not None:
            it["valid_to"] = snapshot
            it["retired_reason"] = reason
            summary.retired.setdefault(kind, {})
            summary.retired[kind][reason] = summary.retired[kind].get(reason, 0) + 1
            continue
        evidence_rows.append(
            {
                "item_id": it["item_id"],
                "snapshot": snapshot,
                "page_id": page,
                "evidence_sent_idx": new_idx,
                "evidence_text": new_text,
                "type": "unchanged",
            }
        )
        summary.kept[kind] = summary.kept.get(kind, 0) + 1


def _misfit(item: dict, evidence: dict, new_text: str) -> str:
    """Why a carried QA pair, dialogue turn or quadruple no longer fits its edited evidence,
    or ""."""
    old_text = evidence["evidence_text"]
    if item["kind"] == "qa":
        return qa_misfit(item["question"], item["answer"], old_text, new_text)
    if item["kind"] == "dialogue_turn":
        return turn_misfit(item["expert"], item["title"], old_text, new_text)
    if item["kind"] == "quadruple":
        return fact_misfit(item["timestamp"], old_text, new_text)
    return ""


def _add_new(
    items: dict[str, dict],
    new_items: list[dict],
    new_evidence: list[dict],
    evidence_rows: list[dict],
    snapshot: str,
    summary: LedgerSummary,
) -> None:
    # Facts a new quadruple can restate (the valid ones) or supersede (those, and the ones
    # whose evidence sentence changed at this snapshot: the update that replaced them).
    current_facts: dict[tuple[str, str], list[dict]] = {}
    for it in items.values():
        replaced_here = it["valid_to"] == snapshot and it["retired_reason"] == "evidence_changed"
        if it["kind"] == "quadruple" and (it["valid_to"] is None or replaced_here):
            key = (normalize_key(it["subject"]), normalize_key(it["relation"]))
            current_facts.setdefault(key, []).append(it)
    for it, ev in zip(new_items, new_evidence, strict=True):
        if it["item_id"] in items:
            continue  # the same item generated again (same id): already in the ledger
        if it["kind"] == "quadruple":
            key = (normalize_key(it["subject"]), normalize_key(it["relation"]))
            obj = normalize_key(it["object"])
            earlier = [f for f in current_facts.get(key, []) if f["created_snapshot"] < snapshot]
            if any(normalize_key(f["object"]) == obj and f["valid_to"] is None for f in earlier):
                summary.restated_quadruples_skipped += 1
                continue
            # Only an update supersedes: a fact from a changed sentence. A new sentence that
            # gives the same subject and relation another object may speak of another time
            # or context; both facts stay.
            for f in earlier if it.get("type_at_creation") == "changed" else []:
                new_ts, old_ts = _timestamp_key(it["timestamp"]), _timestamp_key(f["timestamp"])
                if normalize_key(f["object"]) == obj or (new_ts and old_ts and new_ts < old_ts):
                    continue  # the same object, or an older fact surfacing now: no update
                if f["valid_to"] is not None:  # retired a moment ago for its changed evidence
                    counts = summary.retired["quadruple"]
                    counts["evidence_changed"] -= 1
                    if not counts["evidence_changed"]:
                        del counts["evidence_changed"]
                f["valid_to"] = snapshot
                f["retired_reason"] = "superseded"
                f["superseded_by"] = it["item_id"]
                f["fact_valid_until"] = it["timestamp"] or snapshot
                current_facts[key].remove(f)
                summary.superseded += 1
                summary.retired.setdefault("quadruple", {})
                summary.retired["quadruple"]["superseded"] = (
                    summary.retired["quadruple"].get("superseded", 0) + 1
                )
            current_facts.setdefault(key, []).append(it)
        items[it["item_id"]] = it
        evidence_rows.append(ev)
        summary.added[it["kind"]] = summary.added.get(it["kind"], 0) + 1


def _write(
    out: Path, items: dict[str, dict], evidence: list[dict], summary: LedgerSummary
) -> LedgerSummary:
    """Write the new ledger state, its marker last, and swap it in atomically."""

    def write(tmp: Path) -> None:
        ordered = sorted(items.values(), key=lambda r: (r["created_snapshot"], r["item_id"]))
        write_parquet_atomic(
            pa.Table.from_pylist(ordered, schema=LEDGER_ITEMS_SCHEMA),
            tmp / "items.parquet",
            table_name="ledger_items",
            schema_version=LEDGER_SCHEMA_VERSION,
        )
        write_parquet_atomic(
            pa.Table.from_pylist(
                sorted(evidence, key=lambda r: (r["snapshot"], r["item_id"])),
                schema=LEDGER_EVIDENCE_SCHEMA,
            ),
            tmp / "evidence.parquet",
            table_name="ledger_evidence",
            schema_version=LEDGER_SCHEMA_VERSION,
        )
        summary.outputs = output_fingerprints(tmp, LEDGER_FILES)
        write_json_atomic(tmp / LEDGER_MARKER, asdict(summary))

    publish_state_dir(out, write)
    return summary


def facts_at(
    workdir: str | Path, valid_on: str | date, known_at: str, *, subject: str | None = None
) -> list[dict]:
    """Quadruples true on ``valid_on`` as known at snapshot ``known_at`` (bi-temporal query).

    Transaction time: facts observed at or before ``known_at`` whose record was not withdrawn
    (evidence gone, page deleted) by then; a supersession recorded after ``known_at`` is not
    known yet. Valid time: the fact's own date (``timestamp``; unknown counts as "since
    always") is on or before ``valid_on``, and, if it was superseded by ``known_at``, the
    superseding fact's date (``fact_valid_until``) is after ``valid_on``.
    """
    valid_on = str(valid_on)
    known = [s for s in ledger_snapshots(workdir) if s <= known_at]
    if not known:
        raise WikidriftError(f"no ledger state at or before {known_at} in {workdir}")
    want = normalize_key(subject) if subject else None
    out = []
    for it in read_items(workdir, known[-1]).to_pylist():
        if it["kind"] != "quadruple" or it["observed_at"] > known_at:
            continue
        if want is not None and normalize_key(it["subject"]) != want:
            continue
        retired = it["valid_to"] is not None and it["valid_to"] <= known_at
        if retired and it["retired_reason"] != "superseded":
            continue  # withdrawn: no longer asserted
        if it["timestamp"] and it["timestamp"][: len(valid_on)] > valid_on[: len(it["timestamp"])]:
            continue  # not yet true on that date
        if retired and (it["fact_valid_until"] or "") <= valid_on[: len(it["fact_valid_until"])]:
            continue  # replaced by then
        out.append(it)
    return out
