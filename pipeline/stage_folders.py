"""Which stage writes which folder of a workdir and which command rebuilds a file in it.

Kept apart from :mod:`pipeline.layout` because the lowest layer (:mod:`pipeline.storage`)
names the rebuild command in its one-line errors about damaged files, and layout itself reads
and writes through storage.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# Each stage's done-marker: the file written last into its folder, which says the folder is
# whole (the release's is also its published manifest).
SNAPSHOT_MARKER = "snapshot.json"
LABEL_MARKER = "summary.json"
GENERATION_MARKER = "run.json"
LEDGER_MARKER = "state.json"
TEMPORAL_MARKER = "state.json"
RELEASE_MANIFEST = "manifest.json"


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
        SNAPSHOT_MARKER,
        "wikidrift snapshot --date {key} --workdir {workdir} --force",
        " (with the --source / --input / --config it was built from)",
    ),
    "labels": StageFolder(
        "label",
        LABEL_MARKER,
        "wikidrift label --old {old} --new {new} --workdir {workdir} --force",
    ),
    "generated": StageFolder(
        "generate",
        GENERATION_MARKER,
        "wikidrift generate --snapshot {key} --workdir {workdir} --force",
    ),
    # `wikidrift release` brings the ledger and the temporal questions up to date first, and
    # each of them rebuilds its own damaged files.
    "ledger": StageFolder(
        "ledger", LEDGER_MARKER, "wikidrift release --snapshot {key} --workdir {workdir}"
    ),
    "temporal": StageFolder(
        "temporal", TEMPORAL_MARKER, "wikidrift release --snapshot {key} --workdir {workdir}"
    ),
    "releases": StageFolder(
        "release",
        RELEASE_MANIFEST,
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
