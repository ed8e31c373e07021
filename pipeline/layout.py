"""The workdir: which stage writes which folder, which files a stage was built from, and what
rebuilds a file that is missing or damaged.

Every stage folder (``snapshots/<date>``, ``labels/<old>__<new>``, ``generated/<date>``,
``ledger/<date>``, ``temporal/<date>``, ``releases/<date>``) ends with a done-marker (a JSON
file) that records the sha256 of every input file the stage read (``inputs``, keyed by path
relative to the workdir) and of every file it wrote (``outputs``). So:

- a stage whose recorded inputs still have the same bytes, and whose outputs are intact, is
  done and is skipped; if an input changed it runs again;
- a file whose bytes differ from what its own stage recorded was damaged or edited after it was
  written: a stage that would read it stops with one line naming the file
  (:class:`DamagedFileError`, to which the CLI adds the command that rebuilds it, from
  :mod:`pipeline.stage_folders`), and the stage that wrote it rebuilds it on its next run
  instead of answering "already done".

A workdir also records the layout version that wrote it (``wikidrift.json``): an older
wikidrift refuses a workdir laid out by a newer one, in one line, instead of misreading it.
"""

from __future__ import annotations

import errno
import json
from collections.abc import Iterable
from dataclasses import fields
from datetime import date
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar, get_origin, get_type_hints

import pyarrow as pa

from pipeline.errors import DamagedFileError, MissingFileError, NewerWorkdirError, WikidriftError
from pipeline.markers import (
    GenerationSummary,
    LabelSummary,
    LedgerSummary,
    ReleaseManifest,
    SnapshotSummary,
)
from pipeline.schemas import (
    GENERATED_SCHEMA_VERSION,
    GENERATED_TABLES,
    LABELS_SCHEMA_VERSION,
    LEDGER_SCHEMA_VERSION,
    RELEASE_SCHEMA_VERSION,
    RELEASE_TABLES,
    SNAPSHOT_SCHEMA_VERSION,
    SNAPSHOT_TABLES,
    TEMPORAL_SCHEMA_VERSION,
)
from pipeline.stage_folders import (
    GENERATION_MARKER,
    LABEL_MARKER,
    LEDGER_MARKER,
    RELEASE_MANIFEST,
    SNAPSHOT_MARKER,
    STAGE_FOLDERS,
    StageFile,
    stage_file,
)
from pipeline.storage import file_sha256, read_parquet, write_json_atomic

WORKDIR_VERSION = 1
VERSION_FILE = "wikidrift.json"


# --------------------------------------------------------------------------- markers
Marker = TypeVar("Marker")


def read_marker(path: str | Path, cls: type[Marker]) -> Marker:
    """A stage's done-marker as ``cls`` (a dataclass). Keys this version does not know are
    left out (a marker may carry more than an older reader needs); a marker that is no JSON
    object raises :class:`DamagedFileError` with the command that rebuilds its folder."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        _check_containers(cls, data)
        return cls(**{k: v for k, v in data.items() if k in known})
    except (ValueError, TypeError, UnicodeDecodeError) as exc:
        raise DamagedFileError(
            f"{path} is damaged ({type(exc).__name__}: {exc})", path=path
        ) from None


@cache
def _container_fields(cls: type) -> dict[str, type]:
    """The fields a marker class declares a dict or a list, with that type."""
    kinds = {name: get_origin(hint) or hint for name, hint in get_type_hints(cls).items()}
    return {name: kind for name, kind in kinds.items() if kind in (dict, list)}


def _check_containers(cls: type, data: dict[str, Any]) -> None:
    """Raise ValueError when a field the class declares a dict or a list holds something
    else ("outputs": [...]): read further, such a marker fails deep inside a stage."""
    for name, kind in _container_fields(cls).items():
        if name in data and not isinstance(data[name], kind):
            raise ValueError(f"{name!r} is not a JSON {'object' if kind is dict else 'array'}")


def own_marker(path: str | Path, cls: type[Marker]) -> Marker | None:
    """A stage's own done-marker, or None when it is missing or damaged (the stage then
    simply runs again: nothing else depends on a marker its own stage rewrites)."""
    if not Path(path).is_file():
        return None
    try:
        return read_marker(path, cls)
    except DamagedFileError:
        return None


def _recorded_outputs(where: StageFile) -> dict[str, str]:
    """The ``outputs`` (file name -> sha256) that a stage folder's done-marker records; empty
    when the marker is missing, damaged or from before markers recorded them."""
    record = own_marker(where.marker, where.kind.record)
    return record.outputs if record is not None else {}


def output_fingerprints(folder: str | Path, names: Iterable[str]) -> dict[str, str]:
    """sha256 of the files a stage wrote into ``folder`` (its marker's ``outputs``)."""
    folder = Path(folder)
    return {name: file_sha256(folder / name) for name in sorted(names)}


def outputs_intact(folder: str | Path, recorded: dict[str, str]) -> bool:
    """Whether every file a marker records is there with the recorded bytes (a marker from
    before markers recorded outputs counts as intact)."""
    folder = Path(folder)
    for name, sha in recorded.items():
        path = folder / name
        if not path.is_file() or file_sha256(path) != sha:
            return False
    return True


def done_before(stored: Any, digest: str, folder: str | Path) -> bool:
    """Whether a stage's own marker (``stored``, None when missing) says it already ran on
    inputs of this ``digest`` and every file it wrote is still intact."""
    return (
        stored is not None
        and stored.inputs_digest == digest
        and outputs_intact(folder, stored.outputs)
    )


def verified_inputs(workdir: str | Path, paths: Iterable[str | Path]) -> dict[str, str]:
    """sha256 of the input files a stage is about to read, keyed by their path relative to
    the workdir (what its marker records as ``inputs``). Each file must exist and, where its
    own stage recorded it, hold the bytes that stage wrote; otherwise one line says which
    file is missing or damaged."""
    workdir = Path(workdir)
    found: dict[str, str] = {}
    for path in map(Path, paths):
        if not path.is_file():
            raise MissingFileError(f"{path} is missing", path=path)
        sha = file_sha256(path)
        where = stage_file(path)
        recorded = _recorded_outputs(where) if where else {}
        if recorded.get(path.name, sha) != sha:
            raise DamagedFileError(
                f"{path} is not the file `wikidrift {where.kind.stage}` wrote (its sha256 "
                f"differs from {where.marker.name}): it was damaged or edited",
                path=path,
            )
        found[_relative(path, workdir)] = sha
    return found


def _relative(path: Path, workdir: Path) -> str:
    try:
        return path.resolve().relative_to(workdir.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


# --------------------------------------------------------------------------- version
def _package_version() -> str:
    try:
        return metadata.version("wikidrift")
    except metadata.PackageNotFoundError:
        return "unknown"


def check_workdir(workdir: str | Path) -> None:
    """Refuse, in one line, a workdir laid out by a newer wikidrift."""
    path = Path(workdir) / VERSION_FILE
    if not path.is_file():
        return
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
        version = int(data["workdir_version"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DamagedFileError(
            f"{path} is damaged ({type(exc).__name__}); it only records the layout version: "
            f"delete it and run the command again"
        ) from None
    if version > WORKDIR_VERSION:
        raise NewerWorkdirError(
            f"{workdir} was laid out by a newer wikidrift ({data.get('written_by', '?')}, "
            f"workdir version {version}); this wikidrift {_package_version()} reads version "
            f"{WORKDIR_VERSION}: upgrade wikidrift, or use another workdir"
        )


def claim_workdir(workdir: str | Path) -> None:
    """Check the workdir's layout version and record ours when it has none yet (a stage is
    about to write into it)."""
    check_workdir(workdir)
    path = Path(workdir) / VERSION_FILE
    if path.exists() or not Path(workdir).is_dir():
        return  # a new workdir is claimed by the first command that finds it
    stamp = {"workdir_version": WORKDIR_VERSION, "written_by": f"wikidrift {_package_version()}"}
    try:
        write_json_atomic(path, stamp)
    except OSError as exc:
        # A read-only workdir: stages with nothing to do still run; one that must write
        # says so itself.
        if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise


# --------------------------------------------------------------- caches, logs, locks, reports
# File names of the caches under ``cache/`` that more than one stage shares.
EMBEDDING_CACHE = "embeddings.sqlite"
NLI_CACHE = "nli.sqlite"
LLM_CACHE = "llm_calls.sqlite"
SPLIT_CACHE = "sentence_splits.sqlite"


def cache_dir(workdir: str | Path, *, create: bool = True) -> Path:
    """``<workdir>/cache``: embeddings, NLI results, LLM calls, sentence splits, the dump
    index and downloads (``dumps/``), OpenAI batch state (``openai_batch/``)."""
    path = Path(workdir) / "cache"
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def logs_dir(workdir: str | Path) -> Path:
    """``<workdir>/logs``: the local LLM server's, the CLI's and Prefect's logs."""
    return Path(workdir) / "logs"


def locks_dir(workdir: str | Path) -> Path:
    """``<workdir>/locks``: one lock file per stage that publishes into the workdir."""
    return Path(workdir) / "locks"


def evaluations_dir(workdir: str | Path) -> Path:
    """``<workdir>/evaluations``: ``wikidrift evaluate`` runs, the leaderboard, plots."""
    return Path(workdir) / "evaluations"


def default_annotations_root(workdir: str | Path) -> Path:
    """``<workdir>/annotations``: annotation tasks and answers per release."""
    return Path(workdir) / "annotations"


# ---------------------------------------------------------------- stage folders and readers


def snapshot_dir(workdir: str | Path, snapshot_date: date | str) -> Path:
    """``<workdir>/snapshots/<YYYY-MM-DD>``."""
    return STAGE_FOLDERS["snapshots"].path(workdir, str(snapshot_date))


def is_complete(workdir: str | Path, snapshot_date: date | str) -> bool:
    """True when a snapshot finished building (its ``snapshot.json`` exists)."""
    return (snapshot_dir(workdir, snapshot_date) / SNAPSHOT_MARKER).exists()


def list_snapshots(workdir: str | Path) -> list[str]:
    """Dates of the complete snapshots in a workdir, ascending."""
    root = STAGE_FOLDERS["snapshots"].path(workdir)
    if not root.is_dir():
        return []
    # Hidden and underscore folders are work areas and copies, never snapshots.
    return sorted(
        p.name
        for p in root.iterdir()
        if not p.name.startswith((".", "_")) and (p / SNAPSHOT_MARKER).is_file()
    )


def read_snapshot_summary(workdir: str | Path, snapshot_date: date | str) -> SnapshotSummary:
    """The stored summary of a complete snapshot."""
    path = snapshot_dir(workdir, snapshot_date) / SNAPSHOT_MARKER
    if not path.exists():
        raise WikidriftError(
            f"no complete snapshot {snapshot_date} in {workdir} (run `wikidrift snapshot`)"
        )
    return read_marker(path, SnapshotSummary)


def read_snapshot_table(
    workdir: str | Path,
    snapshot_date: date | str,
    name: str,
    *,
    page_ids: Iterable[int] | None = None,
    columns: list[str] | None = None,
) -> pa.Table:
    """Read ``articles``, ``sentences`` or ``revisions`` of a complete snapshot, optionally only
    for some pages (pushed down to the Parquet reader)."""
    if name not in SNAPSHOT_TABLES:
        raise ValueError(f"unknown snapshot table {name!r}; one of {sorted(SNAPSHOT_TABLES)}")
    if not is_complete(workdir, snapshot_date):
        raise WikidriftError(
            f"no complete snapshot {snapshot_date} in {workdir} (run `wikidrift snapshot`)"
        )
    path = snapshot_dir(workdir, snapshot_date) / f"{name}.parquet"
    return read_parquet(
        path,
        expected_table=name,
        max_schema_version=SNAPSHOT_SCHEMA_VERSION,
        columns=columns,
        page_ids=page_ids,
    )


def sentence_texts(
    workdir: str | Path, snapshot_date: date | str, page_ids: Iterable[int]
) -> dict[tuple[int, int], str]:
    """``(page_id, sent_idx) -> text`` of some pages of a snapshot."""
    table = read_snapshot_table(
        workdir,
        snapshot_date,
        "sentences",
        page_ids=sorted(set(page_ids)),
        columns=["page_id", "sent_idx", "text"],
    )
    return {
        (p, i): t
        for p, i, t in zip(
            table["page_id"].to_pylist(),
            table["sent_idx"].to_pylist(),
            table["text"].to_pylist(),
            strict=True,
        )
    }


def labels_dir(workdir: str | Path, old: str, new: str) -> Path:
    """``<workdir>/labels/<old>__<new>``."""
    return STAGE_FOLDERS["labels"].path(workdir, f"{old}__{new}")


def read_labels(
    workdir: str | Path, old: str, new: str, *, page_ids: Iterable[int] | None = None
) -> pa.Table:
    """The sentence labels of a finished labeling run (optionally only some pages)."""
    path = labels_dir(workdir, old, new)
    if not (path / LABEL_MARKER).exists():
        raise WikidriftError(f"no labels {old} -> {new} in {workdir} (run `wikidrift label`)")
    return read_parquet(
        path / "sentence_labels.parquet",
        expected_table="sentence_labels",
        max_schema_version=LABELS_SCHEMA_VERSION,
        page_ids=page_ids,
    )


def read_label_summary(workdir: str | Path, old: str, new: str) -> LabelSummary:
    """The stored summary of a finished labeling run."""
    path = labels_dir(workdir, old, new) / LABEL_MARKER
    if not path.exists():
        raise WikidriftError(f"no labels {old} -> {new} in {workdir} (run `wikidrift label`)")
    return read_marker(path, LabelSummary)


def generated_dir(workdir: str | Path, snapshot: str) -> Path:
    """``<workdir>/generated/<snapshot>``."""
    return STAGE_FOLDERS["generated"].path(workdir, str(snapshot))


def read_generation_summary(workdir: str | Path, snapshot: str) -> GenerationSummary:
    """The stored summary of a finished generation run."""
    path = generated_dir(workdir, snapshot) / GENERATION_MARKER
    if not path.exists():
        raise WikidriftError(f"no generation run for {snapshot} in {workdir}")
    return read_marker(path, GenerationSummary)


def read_generated(workdir: str | Path, snapshot: str, name: str) -> pa.Table:
    """One output table (``qa``, ``dialogue``, ``quadruples``, ``rejects``) of a finished run."""
    if name not in GENERATED_TABLES:
        raise ValueError(f"unknown generated table {name!r}; one of {tuple(GENERATED_TABLES)}")
    return read_parquet(
        generated_dir(workdir, snapshot) / f"{name}.parquet",
        expected_table=f"generated_{name}",
        max_schema_version=GENERATED_SCHEMA_VERSION,
    )


LEDGER_FILES = ("items.parquet", "evidence.parquet")


def ledger_dir(workdir: str | Path, snapshot: str) -> Path:
    """``<workdir>/ledger/<snapshot>``."""
    return STAGE_FOLDERS["ledger"].path(workdir, snapshot)


def ledger_snapshots(workdir: str | Path) -> list[str]:
    """Snapshots the ledger has been brought to, ascending."""
    root = STAGE_FOLDERS["ledger"].path(workdir)
    if not root.is_dir():
        return []
    return sorted(
        p.name
        for p in root.iterdir()
        if not p.name.startswith(".") and (p / LEDGER_MARKER).exists()
    )


def read_items(workdir: str | Path, snapshot: str) -> pa.Table:
    """Every item known after ``snapshot`` (valid or retired)."""
    return read_parquet(
        ledger_dir(workdir, snapshot) / "items.parquet",
        expected_table="ledger_items",
        max_schema_version=LEDGER_SCHEMA_VERSION,
    )


def read_evidence(workdir: str | Path, snapshot: str) -> pa.Table:
    """Evidence rows of every item at every snapshot up to ``snapshot``."""
    return read_parquet(
        ledger_dir(workdir, snapshot) / "evidence.parquet",
        expected_table="ledger_evidence",
        max_schema_version=LEDGER_SCHEMA_VERSION,
    )


def read_ledger_summary(workdir: str | Path, snapshot: str) -> LedgerSummary:
    """The stored summary of a maintenance step."""
    path = ledger_dir(workdir, snapshot) / LEDGER_MARKER
    if not path.exists():
        raise WikidriftError(f"the ledger has not been brought to {snapshot} in {workdir}")
    return read_marker(path, LedgerSummary)


def ledger_previous(workdir: str | Path, snapshot: str) -> str | None:
    """The snapshot the ledger at ``snapshot`` was maintained from, as its summary recorded
    (None: the first). Which snapshot a new one is compared with is decided once, by
    :func:`previous_release`."""
    return read_ledger_summary(workdir, snapshot).previous


def temporal_dir(workdir: str | Path, snapshot: str) -> Path:
    """``<workdir>/temporal/<snapshot>``."""
    return STAGE_FOLDERS["temporal"].path(workdir, snapshot)


def read_questions(workdir: str | Path, snapshot: str) -> pa.Table | None:
    """Every temporal question phrased up to ``snapshot`` (None if the stage never ran)."""
    path = temporal_dir(workdir, snapshot) / "questions.parquet"
    if not path.exists():
        return None
    return read_parquet(
        path, expected_table="temporal_questions", max_schema_version=TEMPORAL_SCHEMA_VERSION
    )


def releases_root(workdir: str | Path) -> Path:
    """``<workdir>/releases``."""
    return STAGE_FOLDERS["releases"].path(workdir)


def release_dir(workdir: str | Path, snapshot: str) -> Path:
    """``<workdir>/releases/<snapshot>`` (the current revision)."""
    return releases_root(workdir) / snapshot


def list_releases(workdir: str | Path) -> list[str]:
    """Snapshots that have a current release, ascending."""
    root = releases_root(workdir)
    if not root.is_dir():
        return []
    return sorted(
        p.name for p in root.iterdir() if "." not in p.name and (p / RELEASE_MANIFEST).exists()
    )


def read_manifest(workdir: str | Path, snapshot: str) -> ReleaseManifest:
    """The manifest of the current release of ``snapshot``."""
    path = release_dir(workdir, snapshot) / RELEASE_MANIFEST
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
    if name not in RELEASE_TABLES:
        raise ValueError(f"unknown release table {name!r}; one of {list(RELEASE_TABLES)}")
    path = release_dir(workdir, snapshot) / f"{name}.parquet"
    verified_inputs(workdir, [path])
    return read_parquet(
        path,
        expected_table=RELEASE_TABLES[name].stored_name,
        max_schema_version=RELEASE_SCHEMA_VERSION,
    )


def previous_release(workdir: str | Path, snapshot: str) -> str | None:
    """The latest release older than ``snapshot``: what a new snapshot is compared with, by
    `wikidrift generate` (no --previous), `wikidrift run` and the flows alike. A snapshot
    taken but never released is skipped (its items never entered the ledger)."""
    earlier = [s for s in list_releases(workdir) if s < snapshot]
    return earlier[-1] if earlier else None
