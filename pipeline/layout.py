"""The workdir: which stage writes which folder, which files a stage was built from, and what
rebuilds a file that is missing or damaged.

Every stage folder (``snapshots/<date>``, ``labels/<old>__<new>``, ``generated/<date>``,
``ledger/<date>``, ``temporal/<date>``, ``releases/<date>``) ends with a done-marker (a JSON
file) that records the sha256 of every input file the stage read (``inputs``, keyed by path
relative to the workdir) and of every file it wrote (``outputs``). So:

- a stage whose recorded inputs still have the same bytes, and whose outputs are intact, is
  done and is skipped; if an input changed it runs again;
- a file whose bytes differ from what its own stage recorded was damaged or edited after it was
  written: a stage that would read it stops with one line naming the file and the command that
  rebuilds it (:class:`DamagedFileError`), and the stage that wrote it rebuilds it on its next
  run instead of answering "already done".

A workdir also records the layout version that wrote it (``wikidrift.json``): an older
wikidrift refuses a workdir laid out by a newer one, in one line, instead of misreading it.
"""

from __future__ import annotations

import errno
import json
from collections.abc import Iterable
from dataclasses import dataclass, fields
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from pipeline.errors import DamagedFileError, NewerWorkdirError, WikidriftError
from pipeline.storage import file_sha256, write_json_atomic

WORKDIR_VERSION = 1
VERSION_FILE = "wikidrift.json"


@dataclass(frozen=True)
class StageFolder:
    """One kind of stage folder: the stage that writes it, its done-marker, how to rebuild it."""

    stage: str
    marker: str
    rebuild: str  # {workdir}, {key} (the folder name), {old} / {new} for label pairs
    note: str = ""  # what the command needs besides


STAGE_FOLDERS: dict[str, StageFolder] = {
    "snapshots": StageFolder(
        "snapshot",
        "snapshot.json",
        "wikidrift snapshot --date {key} --workdir {workdir} --force",
        " (with the --source / --input / --config it was built from)",
    ),
    "labels": StageFolder(
        "label",
        "summary.json",
        "wikidrift label --old {old} --new {new} --workdir {workdir} --force",
    ),
    "generated": StageFolder(
        "generate", "run.json", "wikidrift generate --snapshot {key} --workdir {workdir} --force"
    ),
    # `wikidrift release` brings the ledger and the temporal questions up to date first, and
    # each of them rebuilds its own damaged files.
    "ledger": StageFolder(
        "ledger", "state.json", "wikidrift release --snapshot {key} --workdir {workdir}"
    ),
    "temporal": StageFolder(
        "temporal", "state.json", "wikidrift release --snapshot {key} --workdir {workdir}"
    ),
    "releases": StageFolder(
        "release",
        "manifest.json",
        "wikidrift release --snapshot {key} --workdir {workdir} --force",
    ),
}


@dataclass(frozen=True)
class StageFile:
    """A file inside a stage folder of a workdir."""

    workdir: Path
    kind: StageFolder
    key: str  # the stage folder's name: a date, or "<old>__<new>"
    path: Path

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def marker(self) -> Path:
        return self.folder / self.kind.marker

    def rebuild_command(self) -> str:
        """The command that writes this file again."""
        old, _, new = self.key.partition("__")
        return self.kind.rebuild.format(workdir=self.workdir, key=self.key, old=old, new=new)

    def advice(self) -> str:
        """``"; rebuild it with `<command>`"``, for the end of a one-line message."""
        return f"; rebuild it with `{self.rebuild_command()}`{self.kind.note}"


def stage_file(path: str | Path) -> StageFile | None:
    """Which stage folder ``path`` lies directly in, or None outside every stage folder."""
    path = Path(path)
    folder = path.parent
    kind = STAGE_FOLDERS.get(folder.parent.name)
    if kind is None or folder.name.startswith((".", "_")):
        return None
    return StageFile(folder.parent.parent, kind, folder.name, path)


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
        return cls(**{k: v for k, v in data.items() if k in known})
    except (ValueError, TypeError, UnicodeDecodeError) as exc:
        where = stage_file(path)
        hint = where.advice() if where else ""
        raise DamagedFileError(f"{path} is damaged ({type(exc).__name__}: {exc}){hint}") from None


def own_marker(path: str | Path, cls: type[Marker]) -> Marker | None:
    """A stage's own done-marker, or None when it is missing or damaged (the stage then
    simply runs again: nothing else depends on a marker its own stage rewrites)."""
    if not Path(path).is_file():
        return None
    try:
        return read_marker(path, cls)
    except DamagedFileError:
        return None


def _recorded_outputs(marker: Path) -> dict[str, str] | None:
    """The ``outputs`` a done-marker records (file name -> sha256), or None when the marker is
    missing, unreadable or from before markers recorded them."""
    try:
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if isinstance(data, dict) and "files" in data and "outputs" not in data:
        # A release manifest: {name: {"sha256": ..., "bytes": ..., "rows": ...}}.
        return {name: f.get("sha256", "") for name, f in data["files"].items()}
    outputs = data.get("outputs") if isinstance(data, dict) else None
    return outputs if isinstance(outputs, dict) and outputs else None


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
    file is missing or damaged and which command rebuilds it."""
    workdir = Path(workdir)
    found: dict[str, str] = {}
    for path in map(Path, paths):
        where = stage_file(path)
        if not path.is_file():
            hint = where.advice().replace("rebuild", "build", 1) if where else ""
            raise WikidriftError(f"{path} is missing{hint}")
        sha = file_sha256(path)
        recorded = _recorded_outputs(where.marker) if where else None
        if recorded is not None and path.name in recorded and recorded[path.name] != sha:
            raise DamagedFileError(
                f"{path} is not the file `wikidrift {where.kind.stage}` wrote (its sha256 "
                f"differs from {where.marker.name}): it was damaged or edited{where.advice()}"
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
