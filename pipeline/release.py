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
- ``sources.parquet`` (schema v3 on): every article revision the release's rows quote, with
  its ``oldid`` URL and licence (:mod:`pipeline.release_sources`); item rows name theirs in
  ``revision_id``;
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.config import Config
from pipeline.errors import WikidriftError
from pipeline.item_kinds import LEDGER_KINDS
from pipeline.layout import (
    LEDGER_FILES,
    labels_dir,
    ledger_dir,
    ledger_previous,
    ledger_snapshots,
    list_releases,
    outputs_intact,
    own_marker,
    read_generation_summary,
    read_label_summary,
    read_labels,
    read_ledger_summary,
    read_manifest,
    read_snapshot_table,
    release_dir,
    releases_root,
    snapshot_dir,
    temporal_dir,
    verified_inputs,
)
from pipeline.markers import ReleaseManifest
from pipeline.redact import redact_config, redact_value
from pipeline.release_card import dataset_card, write_growth_plot
from pipeline.release_items import release_counts, release_item_tables
from pipeline.release_sources import Revisions, sources_table, wiki_site
from pipeline.schemas import LABELS_SCHEMA, RELEASE_SCHEMA_VERSION, RELEASE_TABLES
from pipeline.stage import Stage, Tools, run_stage
from pipeline.stage_folders import LEDGER_MARKER, RELEASE_MANIFEST
from pipeline.storage import (
    file_sha256,
    publish_dir,
    write_json_atomic,
    write_parquet_atomic,
    write_text_atomic,
)
from pipeline.temporal.figure import write_timeline_plot
from pipeline.temporal.tables import temporal_tables

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- tables


def _initial_labels(workdir: Path, snapshot: str) -> pa.Table:
    """The first snapshot has nothing to compare with: every sentence is new."""
    sents = read_snapshot_table(
        workdir, snapshot, "sentences", columns=["page_id", "sent_idx", "text"]
    )
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


# --------------------------------------------------------------------------- build
def release_inputs_digest(
    workdir: Path, snapshot: str, config_hash: str, schema_version: int = RELEASE_SCHEMA_VERSION
) -> str:
    """What a release is built from, as a short hash: the schema version, the config hash, the
    ledger's inputs and files and the temporal questions (a changed one makes a new revision).
    ``verify`` passes the release's own schema version (an older release is checked as what
    it was built as)."""
    h = hashlib.sha256(f"v{schema_version}:{config_hash}".encode())
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
    # The article revisions of every snapshot up to this one (rows name them, sources list them).
    files += [
        snapshot_dir(workdir, s) / "articles.parquet"
        for s in ledger_snapshots(workdir)
        if s <= snapshot
    ]
    if previous is None:
        return [*files, snapshot_dir(workdir, snapshot) / "sentences.parquet"]
    for snap in ledger_snapshots(workdir):
        before = ledger_previous(workdir, snap) if snap <= snapshot else None
        if before is not None:
            files.append(labels_dir(workdir, before, snap) / "sentence_labels.parquet")
    return files


def _models(workdir: Path, snapshot: str, previous: str | None) -> dict[str, Any]:
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


@dataclass(frozen=True)
class ReleaseJob:
    """One release build, as plain data."""

    workdir: str
    snapshot: str
    previous: str | None  # the snapshot the ledger came from
    inputs_digest: str
    inputs: dict[str, str]  # workdir path -> sha256
    config: dict[str, Any]  # redacted
    config_hash: str
    revise_on_change: bool

    @property
    def out(self) -> Path:
        return release_dir(self.workdir, self.snapshot)


def plan_release(
    workdir: str | Path,
    snapshot: str,
    *,
    config: dict[str, Any],
    config_hash: str,
    revise_on_change: bool = False,
) -> ReleaseJob:
    """Describe the release of ``snapshot`` and the digest of what it is built from."""
    workdir = Path(workdir)
    if not (ledger_dir(workdir, snapshot) / LEDGER_MARKER).exists():
        raise WikidriftError(
            f"the ledger has no state for {snapshot}: generate items and update the ledger first "
            "(`wikidrift run` does every stage)"
        )
    previous = ledger_previous(workdir, snapshot)
    inputs = verified_inputs(workdir, _input_files(workdir, snapshot, previous))
    return ReleaseJob(
        str(workdir),
        snapshot,
        previous,
        release_inputs_digest(workdir, snapshot, config_hash),
        inputs,
        redact_config(config),
        config_hash,
        revise_on_change,
    )


def prepare_release(job: ReleaseJob, new_revision: bool) -> ReleaseManifest | None:
    """The current release when it was built from the same inputs; an error when another
    one is in the way and no new revision was asked for."""
    if not job.out.exists():
        return None
    existing = own_marker(job.out / RELEASE_MANIFEST, ReleaseManifest)
    # Every listed file must carry a digest: an entry without one is a damaged manifest.
    intact = (
        existing is not None
        and len(existing.outputs) == len(existing.files)
        and outputs_intact(job.out, existing.outputs)
    )
    if intact and existing.inputs_digest == job.inputs_digest and not new_revision:
        existing.already_done = True
        return existing
    if not (new_revision or job.revise_on_change):
        why = "was built from other inputs" if intact else "is damaged (its files or manifest)"
        raise WikidriftError(
            f"release {job.snapshot} {why}; releases are never overwritten: "
            f"`wikidrift release --snapshot {job.snapshot} --workdir {job.workdir} --force` "
            "writes a new revision"
        )
    return None


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
    return run_stage(
        RELEASE_STAGE,
        lambda: plan_release(
            workdir,
            snapshot,
            config=config,
            config_hash=config_hash,
            revise_on_change=revise_on_change,
        ),
        workdir=workdir,
        tools=Tools(),
        label=f"{snapshot} release",
        force=new_revision,
    )


def _release_contents(job: ReleaseJob) -> tuple[dict[str, pa.Table], ReleaseManifest]:
    """The release's tables and its manifest (without its files yet), in memory:
    :func:`_publish_release` writes them."""
    workdir, snapshot, previous, out = Path(job.workdir), job.snapshot, job.previous, job.out
    revision = 1
    if out.exists():
        existing = own_marker(out / RELEASE_MANIFEST, ReleaseManifest)
        revision = existing.revision + 1 if existing else _next_revision(workdir, snapshot)

    aside = releases_root(workdir) / f"{snapshot}.r{revision - 1}"
    if revision > 1 and aside.exists():
        raise WikidriftError(
            f"{aside} exists, but revision {revision - 1} is the current release: move that "
            "folder away, then run this again"
        )
    prev_release = previous if previous in list_releases(workdir) else None
    revisions = Revisions(workdir)
    tables = release_item_tables(workdir, snapshot, revisions)
    tables["sentence_labels"] = (
        read_labels(workdir, previous, snapshot).cast(LABELS_SCHEMA)
        if previous is not None
        else _initial_labels(workdir, snapshot)
    )
    tables |= temporal_tables(workdir, snapshot, tables["quadruples"], revisions)
    tables["sources"] = sources_table(
        workdir, snapshot, previous, tables, site=wiki_site(job.config), revisions=revisions
    )
    labeling_rule = "initial"
    if previous is not None:
        settings = read_label_summary(workdir, previous, snapshot).settings
        labeling_rule = "growover_faithful" if settings.get("faithful") else "fact_guarded"
    prompt_hashes = dict(
        sorted(
            Counter(
                h
                for t in (k.table for k in LEDGER_KINDS)
                for h in tables[t]["prompt_hash"].to_pylist()
            ).items()
        )
    )
    manifest = ReleaseManifest(
        release_id=f"wikidrift-{snapshot}" + (f".r{revision}" if revision > 1 else ""),
        snapshot=snapshot,
        revision=revision,
        previous_release=prev_release,
        schema_version=RELEASE_SCHEMA_VERSION,
        inputs_digest=job.inputs_digest,
        config=job.config,
        config_hash=job.config_hash,
        models=_models(workdir, snapshot, previous),
        prompt_hashes={h: str(n) for h, n in prompt_hashes.items()},
        labeling_rule=labeling_rule,
        counts=release_counts(tables),
        inputs=job.inputs,
    )
    return tables, manifest


def _publish_release(
    job: ReleaseJob, tables: dict[str, pa.Table], manifest: ReleaseManifest
) -> ReleaseManifest:
    """Write the release into a temporary folder, its manifest last, and swap it in (the
    current release, if any, moves aside as the previous revision)."""
    workdir, snapshot, out = Path(job.workdir), job.snapshot, job.out
    root = releases_root(workdir)
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{snapshot}.", dir=root))
    try:
        for name, table in tables.items():
            write_parquet_atomic(
                table,
                tmp / f"{name}.parquet",
                table_name=RELEASE_TABLES[name].stored_name,
                schema_version=RELEASE_SCHEMA_VERSION,
            )
        history = [read_manifest(workdir, s) for s in list_releases(workdir) if s < snapshot]
        write_growth_plot(tmp / "growth.png", [*history, manifest])
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
        write_json_atomic(tmp / RELEASE_MANIFEST, _manifest_dict(manifest))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    # From here on tmp is complete: a failure leaves it for the next run's recovery, which
    # knows from its manifest whether it is the new release or the one it replaced.
    publish_dir(tmp, out, root / f"{snapshot}.r{manifest.revision - 1}")
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
        return int(json.loads((path / RELEASE_MANIFEST).read_text())["revision"])
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
    data.pop("already_done")
    return data


# --------------------------------------------------------------------------- the stage
RELEASE_STAGE: Stage[ReleaseJob, ReleaseManifest] = Stage(
    name="release",
    unit=None,  # one quick step: no progress line
    prepare=prepare_release,
    part_sizes=lambda job: [0],
    run_part=lambda job, index, tools: _release_contents(job),
    finalize=lambda job, results, seconds: _publish_release(job, *results[0]),
    recover=recover_releases,
)
