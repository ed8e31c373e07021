"""The table of stage folders: which stage writes which folder of a workdir, the folder's
name, its done-marker and the record the marker holds, and which command rebuilds a file in it.

Errors about a file (:class:`pipeline.errors.WikidriftError` with a ``path``) say only what is
wrong with its bytes; :func:`rebuild_advice` adds, where the CLI prints them, what to run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipeline.markers import (
    GenerationSummary,
    LabelSummary,
    LedgerSummary,
    ReleaseManifest,
    SnapshotSummary,
    TemporalSummary,
)

# Each stage's done-marker: the file written last into its folder, which says the folder is
# whole (the release's is also its published manifest).
SNAPSHOT_MARKER = "snapshot.json"
LABEL_MARKER = "summary.json"
GENERATION_MARKER = "run.json"
LEDGER_MARKER = "state.json"
TEMPORAL_MARKER = "state.json"
RELEASE_MANIFEST = "manifest.json"


_DATE = "<date>"
_PAIR = "<old>__<new>"


@dataclass(frozen=True)
class StageFolder:
    """One kind of stage folder (``<workdir>/<root>/<key>/``): the stage that writes it, how its
    folders are named, its done-marker and the record class the marker holds, and how to
    rebuild a file in it."""

    root: str
    stage: str
    key: str  # the folder name's format: _DATE or _PAIR
    marker: str
    record: type
    rebuild: str  # {workdir}, {key} (the folder name), {old} / {new} for label pairs
    note: str = ""  # what the command needs besides

    def path(self, workdir: str | Path, key: str = "") -> Path:
        """The folder of ``key`` (a date, or "<old>__<new>") in ``workdir``; without a key,
        the root that holds them all."""
        return Path(workdir) / self.root / key


_RELEASE = "wikidrift release --snapshot {key} --workdir {workdir}"
STAGE_FOLDERS: dict[str, StageFolder] = {
    folder.root: folder
    for folder in (
        StageFolder(
            "snapshots", "snapshot", _DATE, SNAPSHOT_MARKER, SnapshotSummary,
            "wikidrift snapshot --date {key} --workdir {workdir} --force",
            " (with the --source / --input / --config it was built from)",
        ),
        StageFolder(
            "labels", "label", _PAIR, LABEL_MARKER, LabelSummary,
            "wikidrift label --old {old} --new {new} --workdir {workdir} --force",
        ),
        StageFolder(
            "generated", "generate", _DATE, GENERATION_MARKER, GenerationSummary,
            "wikidrift generate --snapshot {key} --workdir {workdir} --force",
        ),
        # `wikidrift release` brings the ledger and the temporal questions up to date first,
        # and each of them rebuilds its own damaged files.
        StageFolder("ledger", "ledger", _DATE, LEDGER_MARKER, LedgerSummary, _RELEASE),
        StageFolder("temporal", "temporal", _DATE, TEMPORAL_MARKER, TemporalSummary, _RELEASE),
        StageFolder(
            "releases", "release", _DATE, RELEASE_MANIFEST, ReleaseManifest, _RELEASE + " --force"
        ),
    )
}  # fmt: skip


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

    def advice(self, remedy: str = "rebuild") -> str:
        """``"; rebuild it with `<command>`"`` (``remedy``: "rebuild", "build", "or rebuild"),
        for the end of a one-line message."""
        return f"; {remedy} it with `{self.rebuild_command()}`{self.kind.note}"


def stage_file(path: str | Path) -> StageFile | None:
    """Which stage folder ``path`` lies directly in, or None outside every stage folder."""
    path = Path(path)
    folder = path.parent
    kind = STAGE_FOLDERS.get(folder.parent.name)
    if kind is None or folder.name.startswith((".", "_")):
        return None
    return StageFile(folder.parent.parent, kind, folder.name, path)


def rebuild_advice(error: BaseException) -> str:
    """What to run about the file an error names (its ``path``), for the end of the error's
    one line: ``"; rebuild it with `<command>`"``; "" when the error names no file of a stage
    folder or its kind has no remedy."""
    path = getattr(error, "path", None)
    remedy = getattr(error, "remedy", "")
    where = stage_file(path) if path is not None and remedy else None
    return where.advice(remedy) if where is not None else ""
