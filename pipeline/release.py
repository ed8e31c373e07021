"""Immutable, versioned releases: ``<workdir>/releases/<snapshot>/``.

A release is the ledger filtered to one snapshot: every item valid at that snapshot with its
type *at that snapshot* (unchanged if created earlier, else new / changed) and its evidence as
of that snapshot. Files:

- ``qa.parquet``, ``dialogue.parquet`` (one row per turn; turns whose evidence changed stay as
  context with ``evaluate = false``), ``quadruples.parquet`` (current and superseded facts,
  with valid and transaction time), ``sentence_labels.parquet`` (the labels that maintained
  it), ``retired.parquet`` (items that left at this snapshot, with the reason),
  ``temporal_qa.parquet``, ``timelines.parquet``, ``relations.parquet`` (the temporal layer,
  :mod:`pipeline.temporal.tables`);
- ``manifest.json``: release id and revision, snapshot, previous release, config and its hash,
  model ids, prompt hashes, row counts in the layout of GrowOVER Tables 13/14, sha256 of every
  file, schema version;
- ``README.md`` (dataset card with the statistics), ``growth.png`` (items per type across
  releases) and ``timeline.png`` (dated facts of a few entities, when any fact is dated).

Written into a temporary directory and swapped into place in one atomic step, under the
workdir's release lock (``<workdir>/locks/release.lock``): a second writer waits. An existing
release is never overwritten: a new revision moves the old one aside to ``<snapshot>.r<N>/``.
Each run first repairs what a killed run left (hidden ``.<snapshot>.*`` temp folders, a
release moved aside but not replaced).

Nothing private is published: the config, models and card are redacted (no contact e-mail,
no credentials in URLs, no Dask address, no absolute paths of this machine).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.config import Config
from pipeline.config import config_hash as compute_config_hash
from pipeline.errors import WikidriftError
from pipeline.labeling import LABELS_SCHEMA, labels_dir, read_label_summary, read_labels
from pipeline.layout import outputs_intact, own_marker, read_marker, verified_inputs
from pipeline.ledger import (
    LEDGER_FILES,
    ledger_dir,
    ledger_snapshots,
    previous_snapshot,
    read_evidence,
    read_items,
    read_ledger_summary,
)
from pipeline.redact import redact_config, redact_value
from pipeline.snapshot import read_table, sentence_texts, snapshot_dir
from pipeline.storage import (
    file_sha256,
    publish_dir,
    read_parquet,
    stage_lock,
    write_json_atomic,
    write_parquet_atomic,
    write_text_atomic,
)
from pipeline.temporal.checks import temporal_problems
from pipeline.temporal.figure import write_timeline_plot
from pipeline.temporal.stage import temporal_dir
from pipeline.temporal.tables import TEMPORAL_SCHEMAS, temporal_tables

log = logging.getLogger(__name__)

# v2: the temporal tables (temporal_qa, timelines, relations); v1 releases have none.
SCHEMA_VERSION = 2
DATA_FILES = (
    "qa",
    "dialogue",
    "quadruples",
    "sentence_labels",
    "retired",
    "temporal_qa",
    "timelines",
    "relations",
)
V1_FILES = DATA_FILES[:5]

QA_SCHEMA = pa.schema(
    [
        ("item_id", pa.string()),
        ("page_id", pa.int64()),
        ("title", pa.string()),
        ("type", pa.string()),
        ("type_at_creation", pa.string()),
        ("created_snapshot", pa.string()),
        ("origin", pa.string()),
        ("question", pa.string()),
        ("answer", pa.string()),
        ("previous_answer", pa.string()),
        ("evidence_sent_idx", pa.list_(pa.int32())),
        ("evidence_text", pa.string()),
        ("prompt_hash", pa.string()),
        ("generator", pa.string()),
    ]
)
DIALOGUE_SCHEMA = pa.schema(
    [
        ("dialogue_id", pa.string()),
        ("turn_id", pa.string()),
        ("turn_idx", pa.int32()),
        ("page_id", pa.int64()),
        ("title", pa.string()),
        ("created_snapshot", pa.string()),
        ("user", pa.string()),
        ("expert", pa.string()),
        ("evidence_sent_idx", pa.list_(pa.int32())),
        ("evidence_text", pa.string()),
        ("evidence_snapshot", pa.string()),
        ("type", pa.string()),
        ("type_at_creation", pa.string()),
        ("evaluate", pa.bool_()),
        ("excluded_reason", pa.string()),
        ("excluded_at", pa.string()),
        ("prompt_hash", pa.string()),
        ("generator", pa.string()),
    ]
)
QUADRUPLES_SCHEMA = pa.schema(
    [
        ("item_id", pa.string()),
        ("page_id", pa.int64()),
        ("title", pa.string()),
        ("subject", pa.string()),
        ("relation", pa.string()),
        ("object", pa.string()),
        ("timestamp", pa.string()),
        ("observed_at", pa.string()),
        ("status", pa.string()),
        ("superseded_by", pa.string()),
        ("fact_valid_until", pa.string()),
        ("type", pa.string()),
        ("type_at_creation", pa.string()),
        ("created_snapshot", pa.string()),
        ("evidence_sent_idx", pa.list_(pa.int32())),
        ("evidence_text", pa.string()),
        ("evidence_snapshot", pa.string()),
        ("prompt_hash", pa.string()),
        ("generator", pa.string()),
    ]
)
RETIRED_SCHEMA = pa.schema(
    [
        ("item_id", pa.string()),
        ("kind", pa.string()),
        ("page_id", pa.int64()),
        ("reason", pa.string()),
        ("superseded_by", pa.string()),
    ]
)
SCHEMAS: dict[str, pa.Schema] = {
    "qa": QA_SCHEMA,
    "dialogue": DIALOGUE_SCHEMA,
    "quadruples": QUADRUPLES_SCHEMA,
    "sentence_labels": LABELS_SCHEMA,
    "retired": RETIRED_SCHEMA,
    **TEMPORAL_SCHEMAS,
}


@dataclass
class ReleaseManifest:
    """Everything needed to identify, reproduce and check a release (``manifest.json``)."""

    release_id: str
    snapshot: str
    revision: int
    previous_release: str | None
    schema_version: int
    inputs_digest: str
    config: dict[str, Any]
    config_hash: str
    models: dict[str, Any]
    prompt_hashes: dict[str, str]
    labeling_rule: str
    counts: dict[str, dict[str, int]]
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    inputs: dict[str, str] = field(default_factory=dict)  # workdir path -> sha256
    already_built: bool = False

    def line(self) -> str:
        """One line for the CLI."""
        q, d, f = self.counts["qa"], self.counts["dialogue_turns"], self.counts["quadruples"]
        state = " (already built)" if self.already_built else ""
        return (
            f"release {self.release_id}: qa={q['total']} dialogue_turns={d['total']} "
            f"quadruples={f['current']}{state}"
        )


def releases_root(workdir: str | Path) -> Path:
    """``<workdir>/releases``."""
    return Path(workdir) / "releases"


def release_dir(workdir: str | Path, snapshot: str) -> Path:
    """``<workdir>/releases/<snapshot>`` (the current revision)."""
    return releases_root(workdir) / snapshot


def list_releases(workdir: str | Path) -> list[str]:
    """Snapshots that have a current release, ascending."""
    root = releases_root(workdir)
    if not root.is_dir():
        return []
    return sorted(
        p.name for p in root.iterdir() if "." not in p.name and (p / "manifest.json").exists()
    )


def read_manifest(workdir: str | Path, snapshot: str) -> ReleaseManifest:
    """The manifest of the current release of ``snapshot``."""
    path = release_dir(workdir, snapshot) / "manifest.json"
    if not path.exists():
        raise WikidriftError(f"no release {snapshot} in {workdir} (run `wikidrift release`)")
    return read_marker(path, ReleaseManifest)


def check_release(workdir: str | Path, snapshot: str) -> ReleaseManifest:
    """The manifest of the release of ``snapshot``, once every file it lists is there with
    the bytes it lists (else one line naming the file and the command that writes a new
    revision): what exports, evaluations and annotation samples start with."""
    manifest = read_manifest(workdir, snapshot)
    verified_inputs(workdir, [release_dir(workdir, snapshot) / name for name in manifest.files])
    return manifest


def read_release_table(workdir: str | Path, snapshot: str, name: str) -> pa.Table:
    """One table of the current release of ``snapshot``, checked against the sha256 its
    manifest lists (a damaged release is named in one line, with the command that writes a new
    revision)."""
    if name not in SCHEMAS:
        raise ValueError(f"unknown release table {name!r}; one of {list(SCHEMAS)}")
    path = release_dir(workdir, snapshot) / f"{name}.parquet"
    verified_inputs(workdir, [path])
    return read_parquet(
        path,
        expected_table=f"release_{name}" if name != "sentence_labels" else "sentence_labels",
        max_schema_version=SCHEMA_VERSION,
    )


# --------------------------------------------------------------------------- tables
def release_item_tables(workdir: str | Path, snapshot: str) -> dict[str, pa.Table]:
    """The ledger's items as of ``snapshot`` in the release layout: ``qa``, ``dialogue``,
    ``quadruples`` (current and superseded) and ``retired``."""
    items = read_items(workdir, snapshot).to_pylist()
    evidence = read_evidence(workdir, snapshot).to_pylist()
    latest: dict[str, dict] = {}
    for ev in evidence:  # sorted by snapshot: the last one wins
        latest[ev["item_id"]] = ev

    def valid(it: dict) -> bool:
        return it["valid_to"] is None

    def type_now(it: dict) -> str:
        return it["type_at_creation"] if it["created_snapshot"] == snapshot else "unchanged"

    def evid(it: dict) -> dict:
        return latest[it["item_id"]]

    qa_rows = [
        {
            "item_id": it["item_id"],
            "page_id": it["page_id"],
            "title": it["title"],
            "type": type_now(it),
            "type_at_creation": it["type_at_creation"],
            "created_snapshot": it["created_snapshot"],
            "origin": it["origin"],
            "question": it["question"],
            "answer": it["answer"],
            "previous_answer": it["previous_answer"],
            "evidence_sent_idx": evid(it)["evidence_sent_idx"],
            "evidence_text": evid(it)["evidence_text"],
            "prompt_hash": it["prompt_hash"],
            "generator": it["generator"],
        }
        for it in items
        if it["kind"] == "qa" and valid(it)
    ]
    turns = [it for it in items if it["kind"] == "dialogue_turn"]
    live_dialogues = {it["dialogue_id"] for it in turns if valid(it)}
    dialogue_rows = [
        {
            "dialogue_id": it["dialogue_id"],
            "turn_id": it["item_id"],
            "turn_idx": it["turn_idx"],
            "page_id": it["page_id"],
            "title": it["title"],
            "created_snapshot": it["created_snapshot"],
            "user": it["user"],
            "expert": it["expert"],
            "evidence_sent_idx": evid(it)["evidence_sent_idx"],
            "evidence_text": evid(it)["evidence_text"],
            "evidence_snapshot": evid(it)["snapshot"],
            "type": type_now(it) if valid(it) else None,
            "type_at_creation": it["type_at_creation"],
            "evaluate": valid(it),
            "excluded_reason": it["retired_reason"],
            "excluded_at": it["valid_to"],
            "prompt_hash": it["prompt_hash"],
            "generator": it["generator"],
        }
        for it in turns
        if it["dialogue_id"] in live_dialogues
    ]
    dialogue_rows.sort(key=lambda r: (r["created_snapshot"], r["dialogue_id"], r["turn_idx"]))
    quad_rows = [
        {
            "item_id": it["item_id"],
            "page_id": it["page_id"],
            "title": it["title"],
            "subject": it["subject"],
            "relation": it["relation"],
            "object": it["object"],
            "timestamp": it["timestamp"],
            "observed_at": it["observed_at"],
            "status": "current" if valid(it) else "superseded",
            "superseded_by": it["superseded_by"],
            "fact_valid_until": it["fact_valid_until"],
            "type": type_now(it) if valid(it) else None,
            "type_at_creation": it["type_at_creation"],
            "created_snapshot": it["created_snapshot"],
            "evidence_sent_idx": evid(it)["evidence_sent_idx"],
            "evidence_text": evid(it)["evidence_text"],
            "evidence_snapshot": evid(it)["snapshot"],
            "prompt_hash": it["prompt_hash"],
            "generator": it["generator"],
        }
        for it in items
        if it["kind"] == "quadruple" and (valid(it) or it["retired_reason"] == "superseded")
    ]
    retired_rows = [
        {
            "item_id": it["item_id"],
            "kind": it["kind"],
            "page_id": it["page_id"],
            "reason": it["retired_reason"],
            "superseded_by": it["superseded_by"],
        }
        for it in items
        if it["valid_to"] == snapshot
    ]
    return {
        "qa": pa.Table.from_pylist(qa_rows, schema=QA_SCHEMA),
        "dialogue": pa.Table.from_pylist(dialogue_rows, schema=DIALOGUE_SCHEMA),
        "quadruples": pa.Table.from_pylist(quad_rows, schema=QUADRUPLES_SCHEMA),
        "retired": pa.Table.from_pylist(retired_rows, schema=RETIRED_SCHEMA),
    }


def _initial_labels(workdir: Path, snapshot: str) -> pa.Table:
    """The first snapshot has nothing to compare with: every sentence is new."""
    sents = read_table(workdir, snapshot, "sentences", columns=["page_id", "sent_idx", "text"])
    n = sents.num_rows
    rows = {
        "page_id": sents["page_id"],
        "new_idx": sents["sent_idx"],
        "old_idx": pa.array([[]] * n, pa.list_(pa.int32())),
        "label": pa.array(["new"] * n),
        "rule": pa.array(["initial_snapshot"] * n),
        "decided_by": pa.array(["rule"] * n),
        "text": sents["text"],
    }
    return pa.table(
        {
            name: rows.get(name, pa.nulls(n, LABELS_SCHEMA.field(name).type))
            for name in LABELS_SCHEMA.names
        }
    ).cast(LABELS_SCHEMA)


def _type_counts(table: pa.Table, retired: int) -> dict[str, int]:
    types = Counter(table["type"].to_pylist()) if table.num_rows else Counter()
    counts = {k: types.get(k, 0) for k in ("unchanged", "new", "changed")}
    counts["deleted"] = retired
    counts["total"] = counts["unchanged"] + counts["new"] + counts["changed"]
    return counts


def _counts(tables: dict[str, pa.Table]) -> dict[str, dict[str, int]]:
    retired = Counter(tables["retired"]["kind"].to_pylist())
    dialogue = tables["dialogue"]
    evaluated = dialogue.filter(dialogue["evaluate"]) if dialogue.num_rows else dialogue
    quads = tables["quadruples"]
    current = quads.filter(pc.equal(quads["status"], "current")) if quads.num_rows else quads
    qcounts = _type_counts(current, retired.get("quadruple", 0))
    qcounts["current"] = current.num_rows
    qcounts["superseded"] = quads.num_rows - current.num_rows
    labels = Counter(tables["sentence_labels"]["label"].to_pylist())
    counts = {
        "qa": _type_counts(tables["qa"], retired.get("qa", 0)),
        "dialogue_turns": _type_counts(evaluated, retired.get("dialogue_turn", 0))
        | {"context_only": dialogue.num_rows - evaluated.num_rows},
        "dialogues": {"total": len(set(dialogue["dialogue_id"].to_pylist()))},
        "quadruples": qcounts,
        "sentence_labels": dict(sorted(labels.items())),
    }
    if "temporal_qa" in tables:
        counts |= _temporal_counts(tables)
    return counts


def _temporal_counts(tables: dict[str, pa.Table]) -> dict[str, dict[str, int]]:
    qa, timelines, relations = tables["temporal_qa"], tables["timelines"], tables["relations"]
    categories = Counter(qa["category"].to_pylist())
    types = Counter(qa["type"].to_pylist())
    sources = Counter(
        dict(
            zip(timelines["question_id"].to_pylist(), timelines["source"].to_pylist(), strict=True)
        ).values()
    )
    kinds = Counter(relations["type"].to_pylist())
    return {
        "temporal_qa": {c: categories.get(c, 0) for c in ("C1", "C2", "C3")}
        | {
            "new": types.get("new", 0),
            "unchanged": types.get("unchanged", 0),
            "total": qa.num_rows,
        },
        "timelines": {
            "questions": sum(sources.values()),
            "qa_chain": sources.get("qa_chain", 0),
            "fact_chain": sources.get("fact_chain", 0),
            "intervals": timelines.num_rows,
        },
        "relations": {k: kinds.get(k, 0) for k in ("updates", "contradicts", "supports")}
        | {"total": relations.num_rows},
    }


# --------------------------------------------------------------------------- build
def _inputs_digest(workdir: Path, snapshot: str, config_hash: str) -> str:
    h = hashlib.sha256(f"v{SCHEMA_VERSION}:{config_hash}".encode())
    h.update(read_ledger_summary(workdir, snapshot).inputs_digest.encode())
    for name in ("items.parquet", "evidence.parquet"):
        h.update(file_sha256(ledger_dir(workdir, snapshot) / name).encode())
    questions = temporal_dir(workdir, snapshot) / "questions.parquet"
    h.update(file_sha256(questions).encode() if questions.exists() else b"no questions")
    return h.hexdigest()[:16]


def _input_files(workdir: Path, snapshot: str, previous: str | None) -> list[Path]:
    """The files a release is built from: the ledger state, the temporal questions, every
    label pair up to ``snapshot`` (relations accumulate over releases) or, for the first
    release, the snapshot's sentences."""
    files = [ledger_dir(workdir, snapshot) / name for name in LEDGER_FILES]
    questions = temporal_dir(workdir, snapshot) / "questions.parquet"
    files += [questions] if questions.exists() else []
    if previous is None:
        return [*files, snapshot_dir(workdir, snapshot) / "sentences.parquet"]
    for snap in ledger_snapshots(workdir):
        before = previous_snapshot(workdir, snap) if snap <= snapshot else None
        if before is not None:
            files.append(labels_dir(workdir, before, snap) / "sentence_labels.parquet")
    return files


def _models(workdir: Path, snapshot: str, previous: str | None) -> dict[str, Any]:
    from pipeline.generate.stage import read_generation_summary

    models: dict[str, Any] = {}
    if previous is not None:
        summary = read_label_summary(workdir, previous, snapshot)
        models["labeling"] = summary.models
    gen = read_generation_summary(workdir, snapshot)
    models["embedder_for_selection"] = gen.embedder
    models["generator"] = gen.llm.get("model") or gen.llm.get("generator")
    return redact_value(models)  # a local model file is named, not where it lives


def manifest_config(cfg: Config) -> dict[str, Any]:
    """The config recorded in a manifest: every setting, redacted (no workdir, contact
    e-mail, URL credentials, Dask address or absolute paths). :func:`config_hash` of it is
    ``cfg.stable_hash()``."""
    data = cfg.model_dump(mode="json")
    data.pop("workdir")
    return redact_config(data)


def build_release(
    workdir: str | Path,
    snapshot: str,
    *,
    config: dict[str, Any],
    config_hash: str,
    new_revision: bool = False,
    revise_on_change: bool = False,
) -> ReleaseManifest:
    """Write the release of ``snapshot`` from the ledger. Returns the stored manifest when a
    release built from the same inputs exists (unless ``new_revision`` forces one). A release
    built from other inputs is never replaced: with ``revise_on_change`` (the flows) or
    ``new_revision`` (``--force``) a new revision is written and the old one is kept as
    ``<snapshot>.r<N>``; otherwise it is an error. Holds the workdir's release lock."""
    workdir = Path(workdir)
    with stage_lock(workdir, "release"):
        recover_releases(workdir)
        return _build_release(
            workdir,
            snapshot,
            config=redact_config(config),
            config_hash=config_hash,
            new_revision=new_revision,
            revise_on_change=revise_on_change,
        )


def _build_release(
    workdir: Path,
    snapshot: str,
    *,
    config: dict[str, Any],
    config_hash: str,
    new_revision: bool,
    revise_on_change: bool,
) -> ReleaseManifest:
    if not (ledger_dir(workdir, snapshot) / "state.json").exists():
        raise WikidriftError(
            f"the ledger has no state for {snapshot}: generate items and update the ledger first "
            "(`wikidrift run` does every stage)"
        )
    previous = previous_snapshot(workdir, snapshot)
    inputs = verified_inputs(workdir, _input_files(workdir, snapshot, previous))
    digest = _inputs_digest(workdir, snapshot, config_hash)
    out = release_dir(workdir, snapshot)
    revision = 1
    if out.exists():
        existing = own_marker(out / "manifest.json", ReleaseManifest)
        intact = existing is not None and outputs_intact(
            out, {n: f["sha256"] for n, f in existing.files.items()}
        )
        if intact and existing.inputs_digest == digest and not new_revision:
            existing.already_built = True
            return existing
        if not (new_revision or revise_on_change):
            why = "was built from other inputs" if intact else "is damaged (its files or manifest)"
            raise WikidriftError(
                f"release {snapshot} {why}; releases are never overwritten: "
                f"`wikidrift release --snapshot {snapshot} --workdir {workdir} --force` writes "
                "a new revision"
            )
        revision = existing.revision + 1 if existing else _next_revision(workdir, snapshot)

    aside = releases_root(workdir) / f"{snapshot}.r{revision - 1}"
    if revision > 1 and aside.exists():
        raise WikidriftError(
            f"{aside} exists, but revision {revision - 1} is the current release: move that "
            "folder away, then run this again"
        )
    prev_release = previous if previous in list_releases(workdir) else None
    tables = release_item_tables(workdir, snapshot)
    tables["sentence_labels"] = (
        read_labels(workdir, previous, snapshot).cast(LABELS_SCHEMA)
        if previous is not None
        else _initial_labels(workdir, snapshot)
    )
    tables |= temporal_tables(workdir, snapshot, tables["quadruples"])
    labeling_rule = "initial"
    if previous is not None:
        settings = read_label_summary(workdir, previous, snapshot).settings
        labeling_rule = "growover_faithful" if settings.get("faithful") else "fact_guarded"
    prompt_hashes = dict(
        sorted(
            Counter(
                h
                for t in ("qa", "dialogue", "quadruples")
                for h in tables[t]["prompt_hash"].to_pylist()
            ).items()
        )
    )
    manifest = ReleaseManifest(
        release_id=f"wikidrift-{snapshot}" + (f".r{revision}" if revision > 1 else ""),
        snapshot=snapshot,
        revision=revision,
        previous_release=prev_release,
        schema_version=SCHEMA_VERSION,
        inputs_digest=digest,
        config=config,
        config_hash=config_hash,
        models=_models(workdir, snapshot, previous),
        prompt_hashes={h: str(n) for h, n in prompt_hashes.items()},
        labeling_rule=labeling_rule,
        counts=_counts(tables),
        inputs=inputs,
    )

    root = releases_root(workdir)
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{snapshot}.", dir=root))
    try:
        for name, table in tables.items():
            table_name = name if name == "sentence_labels" else f"release_{name}"
            write_parquet_atomic(
                table,
                tmp / f"{name}.parquet",
                table_name=table_name,
                schema_version=SCHEMA_VERSION,
            )
        history = [read_manifest(workdir, s) for s in list_releases(workdir) if s < snapshot]
        _write_growth_plot(tmp / "growth.png", [*history, manifest])
        figure = write_timeline_plot(tmp / "timeline.png", tables["quadruples"])
        card = dataset_card(manifest, history, timeline_figure=figure)
        write_text_atomic(tmp / "README.md", card)
        manifest.files = {
            p.name: {
                "sha256": file_sha256(p),
                "bytes": p.stat().st_size,
                **({"rows": pq.read_metadata(p).num_rows} if p.suffix == ".parquet" else {}),
            }
            for p in sorted(tmp.iterdir())
        }
        write_json_atomic(tmp / "manifest.json", _manifest_dict(manifest))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    # From here on tmp is complete: a failure leaves it for the next run's recovery, which
    # knows from its manifest whether it is the new release or the one it replaced.
    publish_dir(tmp, out, root / f"{snapshot}.r{revision - 1}")
    return manifest


def _next_revision(workdir: Path, snapshot: str) -> int:
    """A revision number above every kept one, for a release whose manifest is unreadable
    (its own number is unknown, but it is newer than every ``<snapshot>.r<N>``)."""
    kept = [
        int(m.group(2))
        for p in releases_root(workdir).iterdir()
        if (m := _REVISION.match(p.name)) and m.group(1) == snapshot
    ]
    return max(kept, default=0) + 2


_HIDDEN = re.compile(r"^\.(\d{4}-\d{2}-\d{2})\.")
_REVISION = re.compile(r"^(\d{4}-\d{2}-\d{2})\.r(\d+)$")


def _revision_of(path: Path) -> int | None:
    try:
        return int(json.loads((path / "manifest.json").read_text())["revision"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def recover_releases(workdir: str | Path) -> list[str]:
    """Repair what a killed or failed release run left in ``releases/`` (call under the
    release lock); returns one line per repair. A snapshot whose current release was moved
    aside but not replaced gets its newest revision back; a hidden ``.<snapshot>.*`` folder
    holding the revision that a swap displaced becomes ``<snapshot>.r<N>``; any other hidden
    folder (an unfinished or unpublished build) is deleted."""
    root = releases_root(workdir)
    if not root.is_dir():
        return []
    done: list[str] = []
    revisions: dict[str, list[tuple[int, Path]]] = {}
    for p in root.iterdir():
        m = _REVISION.match(p.name)
        if m and p.is_dir():
            revisions.setdefault(m.group(1), []).append((int(m.group(2)), p))
    for snap, revs in sorted(revisions.items()):
        out = root / snap
        if not out.exists():
            _, newest = max(revs)
            newest.rename(out)
            done.append(f"restored release {snap} from {newest.name}")
    for p in sorted(root.iterdir()):
        m = _HIDDEN.match(p.name)
        if not (m and p.is_dir()):
            continue
        snap = m.group(1)
        rev, current = _revision_of(p), _revision_of(root / snap)
        if rev is not None and current is not None and rev < current:
            aside = root / f"{snap}.r{rev}"
            if aside.exists():  # never delete a whole earlier revision: keep both
                aside = root / f"{aside.name}{p.name[len(snap) + 1 :]}"
            p.rename(aside)
            done.append(f"kept revision {rev} of {snap} as {aside.name}")
        else:
            shutil.rmtree(p, ignore_errors=True)
            done.append(f"removed the leftover temp folder {p.name}")
    for line in done:
        log.warning("releases: %s", line)
    return done


def _manifest_dict(manifest: ReleaseManifest) -> dict[str, Any]:
    data = dict(vars(manifest))
    data.pop("already_built")
    return data


def _write_growth_plot(path: Path, manifests: list[ReleaseManifest]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    snaps = [m.snapshot for m in manifests]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    series = (
        ("QA pairs", "qa", ("unchanged", "new", "changed")),
        ("Dialogue turns", "dialogue_turns", ("unchanged", "new", "changed")),
        ("Quadruples", "quadruples", ("current", "superseded")),
    )
    for ax, (title, key, parts) in zip(axes, series, strict=True):
        bottom = [0] * len(snaps)
        for part in parts:
            values = [m.counts[key].get(part, 0) for m in manifests]
            ax.bar(snaps, values, bottom=bottom, label=part)
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        ax.set_title(title)
        ax.tick_params(axis="x", rotation=45)
        ax.legend(fontsize=7)
    fig.suptitle("wikidrift: items per release")
    fig.tight_layout()
    # No metadata: the same releases give a byte-identical PNG (stable checksums).
    fig.savefig(path, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)


def _stats_table(manifests: list[ReleaseManifest], key: str) -> str:
    lines = [
        "| Release | Unchanged | New | Changed | Deleted | Total |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for m in manifests:
        c = m.counts[key]
        lines.append(
            f"| {m.snapshot} | {c['unchanged']:,} | {c['new']:,} | {c['changed']:,} | "
            f"{c['deleted']:,} | {c['total']:,} |"
        )
    return "\n".join(lines)


def _temporal_section(manifests: list[ReleaseManifest], timeline_figure: bool) -> str:
    with_tables = [m for m in manifests if "temporal_qa" in m.counts]
    lines = [
        "| Release | C1 | C2 | C3 | New | Total | Timeline questions | Intervals |"
        " Updates | Contradicts | Supports |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for m in with_tables:
        t, tl, r = m.counts["temporal_qa"], m.counts["timelines"], m.counts["relations"]
        lines.append(
            f"| {m.snapshot} | {t['C1']:,} | {t['C2']:,} | {t['C3']:,} | {t['new']:,} | "
            f"{t['total']:,} | {tl['questions']:,} | {tl['intervals']:,} | {r['updates']:,} | "
            f"{r['contradicts']:,} | {r['supports']:,} |"
        )
    figure = "\n\n![timelines](timeline.png)" if timeline_figure else ""
    return (
        "## Temporal layer\n\n"
        + "\n".join(lines)
        + """

`temporal_qa.parquet`: Chronos-style questions over the quadruples, answers chosen from the
data (the LLM only phrases the question): C1 one dated fact; C2 every object of one subject
and relation over a time span (`answer_mode = "all"`); C3 two facts of different subjects
joined through a shared entity. `as_of` is the date or ISO interval the question names;
`valid_from` / `valid_to` when its answer holds. `timelines.parquet`: questions re-asked at
every release, one row per interval with the answer valid then (changed QA pairs and
supersession chains). `relations.parquet`: edges newer -> older between sentences and
quadruples, typed `updates`, `contradicts` (confirmed by the contradiction check) or
`supports`."""
        + figure
    )


def dataset_card(
    manifest: ReleaseManifest, history: list[ReleaseManifest], *, timeline_figure: bool = False
) -> str:
    """The release's README.md: what it is, statistics across releases, how to load it."""
    all_releases = [*history, manifest]
    q = manifest.counts["quadruples"]
    return f"""# wikidrift release {manifest.release_id}

A growing benchmark of real-world knowledge change built from Wikipedia snapshots with the
GrowOVER method (sentence labeling by similarity + NLI, evidence-based maintenance) and
Chronos-style time-stamped knowledge quadruples. Snapshot **{manifest.snapshot}**, revision
{manifest.revision}; previous release: {manifest.previous_release or "none (initial release)"}.

Every item carries its evidence (sentence indices and text of the article as of this
snapshot) and its type at this snapshot: *unchanged* (made earlier, evidence still
unchanged), *new* or *changed* (made from sentences that are new or changed since the previous
snapshot). *Deleted* counts items retired at this snapshot (see `retired.parquet`).

## QA pairs

{_stats_table(all_releases, "qa")}

## Dialogue turns (evaluated)

{_stats_table(all_releases, "dialogue_turns")}

Dialogues: {manifest.counts["dialogues"]["total"]:,}. Turns whose evidence changed stay in
their dialogue as context (`evaluate = false`).

## Knowledge quadruples

{_stats_table(all_releases, "quadruples")}

Current facts: {q["current"]:,}; superseded (kept with their validity interval):
{q["superseded"]:,}. `timestamp` is valid time (when the fact holds, from the text),
`observed_at` transaction time (the snapshot that saw it).

![growth](growth.png)

{_temporal_section(all_releases, timeline_figure)}

## Files

`qa.parquet`, `dialogue.parquet`, `quadruples.parquet`, `sentence_labels.parquet` (the
sentence labels that maintained this release), `retired.parquet` (items that left here, with
the reason), `temporal_qa.parquet`, `timelines.parquet`, `relations.parquet`;
`manifest.json` lists every file with its sha256 (`wikidrift verify`).

Labeling rule: `{manifest.labeling_rule}`. Config hash: `{manifest.config_hash}`. Models:
`{json.dumps(manifest.models, sort_keys=True)}`.

## Loading

```python
import pandas as pd
qa = pd.read_parquet("qa.parquet")
```

or export with `wikidrift export-hf --release {manifest.snapshot}` and load with
`datasets.load_dataset(DIR, "qa")`.

Text from Wikipedia, licensed CC BY-SA 4.0; attribute the articles' authors via the revision
ids in the source snapshot.
"""


# --------------------------------------------------------------------------- diff & verify
def _item_ids(workdir: Path, snapshot: str) -> dict[str, set[str]]:
    qa = read_release_table(workdir, snapshot, "qa")
    dialogue = read_release_table(workdir, snapshot, "dialogue")
    quads = read_release_table(workdir, snapshot, "quadruples")
    return {
        "qa": set(qa["item_id"].to_pylist()),
        "dialogue_turn": {
            t
            for t, e in zip(
                dialogue["turn_id"].to_pylist(), dialogue["evaluate"].to_pylist(), strict=True
            )
            if e
        },
        "quadruple": {
            i
            for i, s in zip(quads["item_id"].to_pylist(), quads["status"].to_pylist(), strict=True)
            if s == "current"
        },
    }


def release_diff(workdir: str | Path, a: str, b: str) -> dict[str, dict[str, Any]]:
    """Per kind: items added in ``b``, kept from ``a``, and retired between them (by reason)."""
    workdir = Path(workdir)
    ids_a, ids_b = _item_ids(workdir, a), _item_ids(workdir, b)
    retired_reason: dict[str, str] = {}
    for snap in list_releases(workdir):
        if a < snap <= b:
            r = read_release_table(workdir, snap, "retired")
            retired_reason.update(
                zip(r["item_id"].to_pylist(), r["reason"].to_pylist(), strict=True)
            )
    out = {}
    for kind in ids_a:
        gone = ids_a[kind] - ids_b[kind]
        out[kind] = {
            "added": len(ids_b[kind] - ids_a[kind]),
            "kept": len(ids_a[kind] & ids_b[kind]),
            "retired": len(gone),
            "retired_by_reason": dict(
                sorted(Counter(retired_reason.get(i, "unknown") for i in gone).items())
            ),
        }
    if all(read_manifest(workdir, s).schema_version >= 2 for s in (a, b)):
        out |= _temporal_diff(workdir, a, b)
    return out


_TEMPORAL_IDS = {
    "temporal_qa": "question_id",
    "timelines": "question_id",
    "relations": "relation_id",
}


def _temporal_diff(workdir: Path, a: str, b: str) -> dict[str, dict[str, Any]]:
    """Temporal questions, timeline questions and relations added / kept / gone between two
    releases; a question leaves when one of its facts left (``fact_gone``) or the facts no
    longer give its answer (``answer_changed``)."""
    facts_b = set(read_release_table(workdir, b, "quadruples")["item_id"].to_pylist())
    out = {}
    for name, column in _TEMPORAL_IDS.items():
        ta, tb = read_release_table(workdir, a, name), read_release_table(workdir, b, name)
        ids_a, ids_b = set(ta[column].to_pylist()), set(tb[column].to_pylist())
        gone = ids_a - ids_b
        reasons: Counter[str] = Counter()
        if name == "temporal_qa":
            for r in ta.to_pylist():
                if r["question_id"] in gone:
                    lost = any(i not in facts_b for i in r["quadruple_ids"])
                    reasons["fact_gone" if lost else "answer_changed"] += 1
        out[name] = {
            "added": len(ids_b - ids_a),
            "kept": len(ids_a & ids_b),
            "retired": len(gone),
            "retired_by_reason": dict(sorted(reasons.items())),
        }
    return out


def previous_release_of(workdir: str | Path, snapshot: str) -> str | None:
    """The release before ``snapshot`` as ``releases/`` holds them (not as a manifest says)."""
    earlier = [s for s in list_releases(workdir) if s < snapshot]
    return earlier[-1] if earlier else None


def verify_release(workdir: str | Path, snapshot: str) -> list[str]:
    """Every violation found in the release of ``snapshot`` (empty = good): checksums, schemas,
    counts, the config hash, the ledger invariant against the previous release in
    ``releases/``, the release against the ledger, and evidence text. Nothing the manifest
    says is taken on trust where it can be recomputed."""
    workdir = Path(workdir)
    problems: list[str] = []
    out = release_dir(workdir, snapshot)
    try:
        manifest = read_manifest(workdir, snapshot)
    except WikidriftError as exc:
        return [str(exc)]
    except (json.JSONDecodeError, TypeError) as exc:
        return [f"{out / 'manifest.json'}: unreadable manifest ({exc})"]
    try:
        recomputed = compute_config_hash(manifest.config)
    except (AttributeError, KeyError, TypeError) as exc:
        recomputed = f"unreadable config ({exc!r})"
    # Manifest fields that can be recomputed; reported with whatever else is found.
    header: list[str] = []
    if recomputed != manifest.config_hash:
        header.append(
            f"{out / 'manifest.json'}: config_hash {manifest.config_hash} does not match its "
            f"config ({recomputed})"
        )
    try:
        digest = _inputs_digest(workdir, snapshot, manifest.config_hash)
    except (WikidriftError, OSError) as exc:
        digest = f"unreadable ({exc})"
    # Ledger rows the release does not show (evidence of earlier snapshots, retired items)
    # can only be checked through the digest, which covers the config hash: a wrong hash is
    # reported above, once.
    if recomputed == manifest.config_hash and digest != manifest.inputs_digest:
        header.append(
            f"{ledger_dir(workdir, snapshot)}: the ledger or the temporal questions differ "
            f"from those release {snapshot} was built from (inputs digest {digest}, manifest "
            f"{manifest.inputs_digest}); rebuild: wikidrift release --snapshot {snapshot} "
            "--force"
        )
    previous = previous_release_of(workdir, snapshot)
    if manifest.previous_release != previous:
        header.append(
            f"{out / 'manifest.json'}: previous_release is {manifest.previous_release}, but "
            f"the release before {snapshot} in {releases_root(workdir)} is {previous} "
            "(the ledger invariant is checked against the latter)"
        )
    on_disk = {p.name for p in out.iterdir() if p.name != "manifest.json"}
    for name in sorted(on_disk - set(manifest.files)):
        problems.append(f"{out / name}: file not listed in manifest.json")
    for name, meta in sorted(manifest.files.items()):
        path = out / name
        if not path.exists():
            problems.append(f"{path}: listed in manifest.json but missing")
        elif file_sha256(path) != meta["sha256"]:
            problems.append(f"{path}: sha256 {file_sha256(path)} != manifest {meta['sha256']}")
    if problems:
        return header + problems  # tables cannot be trusted past a checksum failure
    tables: dict[str, pa.Table] = {}
    names = V1_FILES if manifest.schema_version == 1 else DATA_FILES
    for name in names:
        schema = SCHEMAS[name]
        try:
            tables[name] = read_release_table(workdir, snapshot, name)
        except Exception as exc:  # noqa: BLE001 - report every unreadable table, keep going
            problems.append(f"{out / (name + '.parquet')}: {exc}")
            continue
        if not tables[name].schema.remove_metadata().equals(schema):
            problems.append(
                f"{out / (name + '.parquet')}: columns differ from schema "
                f"v{manifest.schema_version}"
            )
    if problems:
        return header + problems
    if _counts(tables) != manifest.counts:
        problems.append(f"{out / 'manifest.json'}: counts do not match the tables")
    problems += _check_against_ledger(workdir, snapshot, tables)
    if "temporal_qa" in tables:
        problems += temporal_problems(workdir, snapshot, tables)

    # Ledger invariant: whatever was valid in the previous release is here or retired here.
    if previous:
        before = _item_ids(workdir, previous)
        now = _item_ids(workdir, snapshot)
        quads = tables["quadruples"]
        superseded_here = set(quads["item_id"].to_pylist())
        retired = dict(
            zip(
                tables["retired"]["item_id"].to_pylist(),
                tables["retired"]["reason"].to_pylist(),
                strict=True,
            )
        )
        for kind, ids in before.items():
            for item_id in sorted(ids):
                if item_id in now[kind] or (kind == "quadruple" and item_id in superseded_here):
                    continue
                if not retired.get(item_id):
                    problems.append(
                        f"{kind} {item_id}: valid in release {previous} but "
                        f"neither in release {snapshot} nor retired here with a reason"
                    )

    # Evidence indices must point at the same text in the snapshot they refer to.
    checks: list[tuple[str, str, int, list[int], str]] = []
    for name, id_col in (("qa", "item_id"), ("dialogue", "turn_id"), ("quadruples", "item_id")):
        t = tables[name].to_pylist()
        for r in t:
            snap = r.get("evidence_snapshot") or snapshot
            checks.append(
                (
                    f"{name} {r[id_col]}",
                    snap,
                    r["page_id"],
                    r["evidence_sent_idx"],
                    r["evidence_text"],
                )
            )
    by_snapshot: dict[str, set[int]] = {}
    for _, snap, page, _, _ in checks:
        by_snapshot.setdefault(snap, set()).add(page)
    texts = {
        (snap, p, i): txt
        for snap, pages in by_snapshot.items()
        for (p, i), txt in sentence_texts(workdir, snap, pages).items()
    }
    for label, snap, page, idx, text in checks:
        if not idx:
            problems.append(f"{label}: no evidence indices")
            continue
        got = [texts.get((snap, page, i)) for i in idx]
        if any(g is None for g in got):
            problems.append(f"{label}: evidence index out of range in snapshot {snap} page {page}")
        elif " ".join(got) != text:  # type: ignore[arg-type]
            problems.append(
                f"{label}: evidence indices {idx} do not point at its evidence text in "
                f"snapshot {snap} page {page}"
            )
    return header + problems


_LEDGER_ID_COLUMNS = {
    "dialogue": ("turn_id",),
    "temporal_qa": ("question_id",),
    "timelines": ("question_id", "interval_idx"),
    "relations": ("relation_id",),
}


def _check_against_ledger(workdir: Path, snapshot: str, tables: dict[str, pa.Table]) -> list[str]:
    """The release must be exactly what the ledger at ``snapshot`` gives: rebuild its item
    tables from the ledger and compare them row by row (a deleted or edited ledger row, or a
    release table edited to match, shows up here)."""
    try:
        expected = release_item_tables(workdir, snapshot)
        if "temporal_qa" in tables:
            expected |= temporal_tables(workdir, snapshot, expected["quadruples"])
    except Exception as exc:  # noqa: BLE001 - an unreadable ledger is a finding, not a crash
        return [f"{ledger_dir(workdir, snapshot)}: the ledger cannot be read ({exc})"]
    problems: list[str] = []
    where = ledger_dir(workdir, snapshot)
    for name, table in expected.items():
        id_cols = _LEDGER_ID_COLUMNS.get(name, ("item_id",))

        def key(r: dict, id_cols: tuple[str, ...] = id_cols) -> str:
            return ":".join(str(r[c]) for c in id_cols)

        want = {key(r): r for r in table.to_pylist()}
        have = {key(r): r for r in tables[name].to_pylist()}
        missing = sorted(set(have) - set(want))
        extra = sorted(set(want) - set(have))
        differ = sorted(i for i in set(want) & set(have) if want[i] != have[i])
        for label, ids in (
            ("in the release but not in the ledger", missing),
            ("in the ledger but not in the release", extra),
            ("different in the ledger and the release", differ),
        ):
            if ids:
                shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
                problems.append(f"{name}: {len(ids)} row(s) {label} ({where}): {shown}")
    return problems


# --------------------------------------------------------------------------- summary
_SUMMARY_KINDS = (
    ("qa", "QA pairs"),
    ("dialogue_turns", "dialogue turns"),
    ("quadruples", "quadruples"),
)


def run_summary(workdir: str | Path, snapshots: list[str]) -> str:
    """The end-of-run table: per release and kind, items new / changed / unchanged, retired
    at that release and in all; then where the files are and how to load them."""
    manifests = [read_manifest(workdir, snapshot) for snapshot in snapshots]
    width = max(len("release"), *(len(m.release_id) for m in manifests)) + 2
    header = f"{'release':<{width}}{'kind':<16}{'new':>7}{'changed':>9}{'unchanged':>11}"
    header += f"{'retired':>9}{'total':>8}"
    lines = [header, "-" * len(header)]
    for manifest in manifests:
        for i, (key, name) in enumerate(_SUMMARY_KINDS):
            c = manifest.counts[key]
            lines.append(
                f"{manifest.release_id if i == 0 else '':<{width}}{name:<16}{c['new']:>7}"
                f"{c['changed']:>9}{c['unchanged']:>11}{c['deleted']:>9}{c['total']:>8}"
            )
    for manifest in manifests:
        if "temporal_qa" in manifest.counts:
            t, tl = manifest.counts["temporal_qa"], manifest.counts["timelines"]
            r = manifest.counts["relations"]
            lines.append(
                f"{manifest.release_id}: temporal questions C1={t['C1']} C2={t['C2']} "
                f"C3={t['C3']}, timeline questions={tl['questions']} "
                f"({tl['intervals']} intervals), relations updates={r['updates']} "
                f"contradicts={r['contradicts']} supports={r['supports']}"
            )
    last = release_dir(workdir, snapshots[-1])
    lines += [
        "",
        f"releases: {releases_root(workdir)}/<date>/ (qa, dialogue, quadruples, sentence_labels,"
        " retired, temporal_qa, timelines, relations .parquet; manifest.json; README.md)",
        f"growth plot: {last / 'growth.png'}",
        f"load: python -c \"import pandas as pd; print(pd.read_parquet('{last / 'qa.parquet'}'))\"",
        f"   or: wikidrift export-hf --release {snapshots[-1]} --workdir {workdir} --out hf/ "
        "then datasets.load_dataset('hf/', 'qa')",
        f"check: wikidrift verify --release {snapshots[-1]} --workdir {workdir}",
    ]
    return "\n".join(lines)
