"""What people read about releases: the dataset card (``README.md``) with its statistics and
growth plot, and the end-of-run table the CLI prints."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from pipeline.item_kinds import LEDGER_KINDS
from pipeline.layout import read_manifest, release_dir, releases_root
from pipeline.markers import ReleaseManifest
from pipeline.schemas import RELEASE_SCHEMA_VERSION, WIKIPEDIA_LICENSE, release_files


def write_growth_plot(path: Path, manifests: list[ReleaseManifest]) -> None:
    """Draw items per type across releases (one panel per ledger kind) into ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    snaps = [m.snapshot for m in manifests]
    fig, axes = plt.subplots(1, len(LEDGER_KINDS), figsize=(4 * len(LEDGER_KINDS), 3.6))
    for ax, kind in zip(axes, LEDGER_KINDS, strict=True):
        bottom = [0] * len(snaps)
        for part in kind.growth:
            values = [m.counts.get(kind.count_key, {}).get(part, 0) for m in manifests]
            ax.bar(snaps, values, bottom=bottom, label=part)
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        ax.set_title(kind.label[0].upper() + kind.label[1:])
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
        if key not in m.counts:  # a release from before the kind existed
            continue
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


def _kind_sections(manifest: ReleaseManifest, all_releases: list[ReleaseManifest]) -> str:
    """One section per ledger kind: its statistics across releases and its note."""
    sections = []
    for kind in LEDGER_KINDS:
        if kind.count_key not in manifest.counts:
            continue
        text = f"## {kind.card_title}\n\n{_stats_table(all_releases, kind.count_key)}"
        if kind.card_note:
            text += "\n\n" + kind.card_note.format(**manifest.counts)
        sections.append(text)
    return "\n\n".join(sections)


_FILE_NOTES = {
    "sentence_labels": "the sentence labels that maintained this release",
    "retired": "items that left here, with the reason",
    "sources": "the article revisions quoted, for attribution",
}


def _files(manifest: ReleaseManifest) -> str:
    """The release's files, wrapped like the rest of the card."""
    names = [
        f"`{name}.parquet`" + (f" ({_FILE_NOTES[name]})" if name in _FILE_NOTES else "")
        for name in release_files(manifest.schema_version)
    ]
    text = ", ".join(names) + "; `manifest.json` lists every file with its sha256 "
    return textwrap.fill(text + "(`wikidrift verify`).", width=92, break_on_hyphens=False)


def dataset_card(
    manifest: ReleaseManifest, history: list[ReleaseManifest], *, timeline_figure: bool = False
) -> str:
    """The release's README.md: what it is, statistics across releases, how to load it."""
    all_releases = [*history, manifest]
    return f"""# wikidrift release {manifest.release_id}

A growing benchmark of real-world knowledge change built from Wikipedia snapshots with the
GrowOVER method (sentence labeling by similarity + NLI, evidence-based maintenance) and
Chronos-style time-stamped knowledge quadruples. Snapshot **{manifest.snapshot}**, revision
{manifest.revision}; previous release: {manifest.previous_release or "none (initial release)"}.

Every item carries its evidence (sentence indices and text of the article as of this
snapshot) and its type at this snapshot: *unchanged* (made earlier, evidence still
unchanged), *new* or *changed* (made from sentences that are new or changed since the previous
snapshot). *Deleted* counts items retired at this snapshot (see `retired.parquet`).

{_kind_sections(manifest, all_releases)}

![growth](growth.png)

{_temporal_section(all_releases, timeline_figure)}

## Files

{_files(manifest)}

Labeling rule: `{manifest.labeling_rule}`. Config hash: `{manifest.config_hash}`. Models:
`{json.dumps(manifest.models, sort_keys=True)}`.

## Loading

```python
import pandas as pd
qa = pd.read_parquet("qa.parquet")
```

or export with `wikidrift export-hf --release {manifest.snapshot}` and load with
`datasets.load_dataset(DIR, "qa")`.

{_licence(manifest)}
"""


def _licence(manifest: ReleaseManifest) -> str:
    """How to attribute the Wikipedia text: through ``sources.parquet`` when the release has
    one (schema v3 on)."""
    sources = manifest.counts.get("sources")
    if sources is None:
        return (
            "Text from Wikipedia, licensed CC BY-SA 4.0; attribute the articles' authors via "
            "the revision\nids in the source snapshot."
        )
    text = (
        f"Text from Wikipedia, licensed {WIKIPEDIA_LICENSE} "
        "(https://creativecommons.org/licenses/by-sa/4.0/). "
        f"`sources.parquet` lists the {sources['revisions']:,} article revisions "
        f"({sources['articles']:,} articles) whose text this release quotes, each with its "
        "title, timestamp, `oldid` URL (the article's history there names its authors) and "
        "licence; every item row names its revision in `revision_id`, so (`page_id`, "
        "`revision_id`, `evidence_sent_idx`) locates its evidence sentence. To re-publish "
        'this text: credit "Wikipedia contributors", link the revisions (the URLs of '
        "`sources.parquet`), name the licence and share what you derive from it under the same "
        "licence."
    )
    return "## Sources and licence\n\n" + textwrap.fill(
        text, width=92, break_on_hyphens=False, break_long_words=False
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
        kinds = [k for k in LEDGER_KINDS if k.count_key in manifest.counts]
        for i, kind in enumerate(kinds):
            c, name = manifest.counts[kind.count_key], kind.label
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
        f"releases: {releases_root(workdir)}/<date>/ "
        f"({', '.join(release_files(RELEASE_SCHEMA_VERSION))} .parquet; manifest.json; README.md)",
        f"growth plot: {last / 'growth.png'}",
        f"load: python -c \"import pandas as pd; print(pd.read_parquet('{last / 'qa.parquet'}'))\"",
        f"   or: wikidrift export-hf --release {snapshots[-1]} --workdir {workdir} --out hf/ "
        "then datasets.load_dataset('hf/', 'qa')",
        f"check: wikidrift verify --release {snapshots[-1]} --workdir {workdir}",
    ]
    return "\n".join(lines)
