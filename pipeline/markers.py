"""What each stage's done-marker holds: the summary a stage writes beside its outputs
(``snapshot.json``, ``summary.json``, ``run.json``, ``state.json``, ``manifest.json``) and
prints as its one CLI line.

The records live here, not in their stages, so that readers (:mod:`pipeline.layout`) and
later stages can read a marker without importing the stage that wrote it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.schemas import LABELS


@dataclass(kw_only=True)
class StageRecord:
    """What every stage's done-marker holds besides its own figures. ``already_done`` is set
    when a run found the stage done and only read its marker back; it is written as false."""

    seconds: float = 0.0
    inputs: dict[str, str] = field(default_factory=dict)  # workdir path -> sha256
    outputs: dict[str, str] = field(default_factory=dict)  # file name -> sha256
    already_done: bool = False


@dataclass
class SnapshotSummary(StageRecord):
    """What a snapshot build produced (also stored as ``snapshot.json``)."""

    snapshot: str
    source: str
    selection_digest: str
    text_version: str
    articles: int = 0
    sentences: int = 0
    parsed_articles: int = 0
    reused_articles: int = 0
    resumed_articles: int = 0
    not_delivered: list[str] = field(default_factory=list)

    def line(self) -> str:
        """The one-line summary the CLI prints."""
        extra = f" reused={self.reused_articles}" if self.reused_articles else ""
        if self.resumed_articles:
            extra += f" resumed={self.resumed_articles}"
        if self.not_delivered:
            extra += f" not_delivered={len(self.not_delivered)}"
        state = " (already built)" if self.already_done else f" in {self.seconds:.1f}s"
        return f"articles={self.articles} sentences={self.sentences}{extra}{state}"


@dataclass
class LabelSummary(StageRecord):
    """What a labeling run found (also ``summary.json``)."""

    old: str
    new: str
    inputs_digest: str
    counts: dict[str, int]
    pages: dict[str, int]
    model_calls: dict[str, int]
    settings: dict
    models: dict[str, str | None]
    fact_guard_flips: int = 0
    per_page: dict[str, dict[str, int]] = field(default_factory=dict)

    def line(self) -> str:
        """One line for the CLI."""
        counts = " ".join(f"{k}={self.counts.get(k, 0)}" for k in LABELS)
        state = " (already labeled)" if self.already_done else f" in {self.seconds:.1f}s"
        return f"{self.old} -> {self.new}: {counts}{state}"

    def table(self) -> str:
        """Counts as a Markdown table in the layout of GrowOVER Appendix E."""
        c = self.counts
        total = sum(c.get(k, 0) for k in ("unchanged", "new", "changed"))
        return (
            "| pair | Unchanged | New | Changed | Deleted | Unlabeled | Total |\n"
            "|---|---:|---:|---:|---:|---:|---:|\n"
            f"| {self.old} -> {self.new} | {c.get('unchanged', 0)} | {c.get('new', 0)} | "
            f"{c.get('changed', 0)} | {c.get('deleted', 0)} | {c.get('unlabeled', 0)} | {total} |"
        )


@dataclass
class GenerationSummary(StageRecord):
    """What a generation run made (also ``run.json``)."""

    snapshot: str
    previous: str | None
    inputs_digest: str
    articles: dict[str, int] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    rejects: dict[str, int] = field(default_factory=dict)
    rejects_by_kind: dict[str, dict[str, int]] = field(default_factory=dict)
    llm: dict[str, Any] = field(default_factory=dict)
    prompt_hashes: dict[str, str] = field(default_factory=dict)
    embedder: str = ""

    @property
    def kept(self) -> int:
        """Items kept, of every kind (questions, dialogue turns, quadruples)."""
        return sum(c.get("total", 0) for c in self.counts.values())

    def line(self) -> str:
        """One line for the CLI."""
        c = self.counts
        state = " (already generated)" if self.already_done else f" in {self.seconds:.1f}s"
        return (
            f"{self.snapshot}: qa={c.get('qa', {}).get('total', 0)} "
            f"dialogues={c.get('dialogue', {}).get('dialogues', 0)} "
            f"turns={c.get('dialogue', {}).get('total', 0)} "
            f"quadruples={c.get('quadruples', {}).get('total', 0)} "
            f"rejects={sum(self.rejects.values())} "
            f"llm_requests={self.llm.get('requests', 0)}{state}"
        )


@dataclass
class LedgerSummary(StageRecord):
    """What one maintenance step did (also ``state.json``)."""

    snapshot: str
    previous: str | None
    inputs_digest: str
    kept: dict[str, int] = field(default_factory=dict)
    added: dict[str, int] = field(default_factory=dict)
    retired: dict[str, dict[str, int]] = field(default_factory=dict)
    superseded: int = 0
    restated_quadruples_skipped: int = 0

    def line(self) -> str:
        """One line for logs and the CLI."""
        kept, added = sum(self.kept.values()), sum(self.added.values())
        retired = sum(sum(v.values()) for v in self.retired.values())
        state = " (already applied)" if self.already_done else ""
        return (
            f"ledger {self.snapshot}: kept={kept} added={added} retired={retired} "
            f"superseded={self.superseded}{state}"
        )


@dataclass
class TemporalSummary(StageRecord):
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


@dataclass
class ReleaseManifest:
    """Everything needed to identify, reproduce and check a release (``manifest.json``).
    Not a :class:`StageRecord`: the manifest is part of the published release, whose bytes
    hold no run time, and it lists its ``files`` with sizes and rows where stages list
    ``outputs``; ``already_done`` is never written into it."""

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
    already_done: bool = False

    @property
    def outputs(self) -> dict[str, str]:
        """The sha256 of each file it lists, by file name (a stage record's ``outputs``)."""
        return {
            name: f["sha256"]
            for name, f in self.files.items()
            if isinstance(f, dict) and isinstance(f.get("sha256"), str)
        }

    def line(self) -> str:
        """One line for the CLI."""

        def count(kind: str, key: str) -> int | str:
            return self.counts.get(kind, {}).get(key, "?")

        state = " (already built)" if self.already_done else ""
        return (
            f"release {self.release_id}: qa={count('qa', 'total')} "
            f"dialogue_turns={count('dialogue_turns', 'total')} "
            f"quadruples={count('quadruples', 'current')}{state}"
        )
