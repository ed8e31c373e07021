"""``wikidrift verify``: a release checked against its manifest, its schemas and the ledger
it was built from (every table recomputed and compared). A release of an earlier schema
version is checked as what it was built as: its own files and columns, its own digest."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa

from pipeline.config import config_hash as compute_config_hash
from pipeline.errors import WikidriftError
from pipeline.item_kinds import LEDGER_KINDS
from pipeline.layout import (
    ledger_dir,
    ledger_previous,
    previous_release,
    read_manifest,
    read_release_table,
    release_dir,
    releases_root,
    sentence_texts,
)
from pipeline.release import release_inputs_digest
from pipeline.release_items import release_counts, release_item_ids, release_item_tables
from pipeline.release_sources import (
    REVISION_COLUMNS,
    Revisions,
    sources_table,
    used_revisions,
    wiki_site,
)
from pipeline.schemas import RELEASE_TABLES, release_files
from pipeline.stage_folders import RELEASE_MANIFEST
from pipeline.storage import file_sha256
from pipeline.temporal.checks import temporal_problems
from pipeline.temporal.tables import temporal_tables


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
        digest = release_inputs_digest(
            workdir, snapshot, manifest.config_hash, manifest.schema_version
        )
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
    previous = previous_release(workdir, snapshot)
    if manifest.previous_release != previous:
        header.append(
            f"{out / 'manifest.json'}: previous_release is {manifest.previous_release}, but "
            f"the release before {snapshot} in {releases_root(workdir)} is {previous} "
            "(the ledger invariant is checked against the latter)"
        )
    on_disk = {p.name for p in out.iterdir() if p.name != RELEASE_MANIFEST}
    for name in sorted(on_disk - set(manifest.files)):
        problems.append(f"{out / name}: file not listed in manifest.json")
    for name, meta in sorted(manifest.files.items()):
        path = out / name
        if not path.exists():
            problems.append(f"{path}: listed in manifest.json but missing")
        elif name not in manifest.outputs:
            problems.append(f"{out / RELEASE_MANIFEST}: {name} is listed without its sha256")
        elif file_sha256(path) != manifest.outputs[name]:
            problems.append(f"{path}: sha256 {file_sha256(path)} != manifest {meta['sha256']}")
    if problems:
        return header + problems  # tables cannot be trusted past a checksum failure
    tables: dict[str, pa.Table] = {}
    for name in release_files(manifest.schema_version):
        schema = RELEASE_TABLES[name].schema_at(manifest.schema_version)
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
    if release_counts(tables) != manifest.counts:
        problems.append(f"{out / 'manifest.json'}: counts do not match the tables")
    revisions = Revisions(workdir)
    problems += _check_against_ledger(workdir, snapshot, tables, manifest.schema_version, revisions)
    if "temporal_qa" in tables:
        problems += temporal_problems(workdir, snapshot, tables)
    if "sources" in tables:
        problems += _source_problems(workdir, snapshot, tables, manifest.config, revisions)

    # Ledger invariant: whatever was valid in the previous release is here or retired here.
    if previous:
        before = release_item_ids(workdir, previous)
        now = release_item_ids(workdir, snapshot)
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

    # Evidence indices must point at the same text in the snapshot they refer to, and (v3
    # on) the row's revision must be the one that snapshot stores for its page.
    checks: list[tuple[str, str, int, list[int], str]] = []
    for name, id_col in ((k.table, k.id_column) for k in LEDGER_KINDS):
        t = tables[name].to_pylist()
        for r in t:
            snap = r.get("evidence_snapshot") or snapshot
            label = f"{name} {r[id_col]}"
            checks.append((label, snap, r["page_id"], r["evidence_sent_idx"], r["evidence_text"]))
            if "revision_id" in r and r["revision_id"] != revisions.of(snap, r["page_id"]):
                problems.append(
                    f"{label}: revision_id {r['revision_id']} is not the revision of page "
                    f"{r['page_id']} in snapshot {snap} "
                    f"({revisions.of(snap, r['page_id'])})"
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


def _check_against_ledger(
    workdir: Path,
    snapshot: str,
    tables: dict[str, pa.Table],
    schema_version: int,
    revisions: Revisions,
) -> list[str]:
    """The release must be exactly what the ledger at ``snapshot`` gives: rebuild its item
    tables from the ledger (in the columns of the release's ``schema_version``) and compare
    them row by row (a deleted or edited ledger row, or a release table edited to match,
    shows up here)."""
    try:
        expected = release_item_tables(workdir, snapshot, revisions)
        if "temporal_qa" in tables:
            expected |= temporal_tables(workdir, snapshot, expected["quadruples"], revisions)
    except Exception as exc:  # noqa: BLE001 - an unreadable ledger is a finding, not a crash
        return [f"{ledger_dir(workdir, snapshot)}: the ledger cannot be read ({exc})"]
    problems: list[str] = []
    where = ledger_dir(workdir, snapshot)
    for name, table in expected.items():
        if name in RELEASE_TABLES:  # an older release lacks the columns added since
            table = table.select(RELEASE_TABLES[name].schema_at(schema_version).names)
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


def _source_problems(
    workdir: Path,
    snapshot: str,
    tables: dict[str, pa.Table],
    config: dict,
    revisions: Revisions,
) -> list[str]:
    """``sources.parquet`` must list exactly the revisions the release's rows use (each once,
    with the title, timestamp and URL its snapshot records): a row quoting a revision that is
    not listed, or a listed revision nothing uses, is a violation."""
    out = release_dir(workdir, snapshot) / "sources.parquet"
    sources = tables["sources"]
    listed = sources["revision_id"].to_pylist()
    problems: list[str] = []
    if len(set(listed)) != len(listed):
        problems.append(f"{out}: a revision is listed more than once")
    listed_set = set(listed)
    for name, columns in REVISION_COLUMNS.items():
        if name not in tables:
            continue
        for column in columns:
            values = tables[name][column].to_pylist()
            flat = [v for value in values for v in (value if isinstance(value, list) else [value])]
            if any(v is None for v in flat):
                problems.append(f"{name}: {column} is empty on some row")
            missing = sorted({v for v in flat if v is not None} - listed_set)
            if missing:
                shown = ", ".join(map(str, missing[:5]))
                problems.append(
                    f"{name}: {len(missing)} revision(s) in {column} not in {out.name}: {shown}"
                )
    try:
        previous = ledger_previous(workdir, snapshot)
        want = sources_table(
            workdir, snapshot, previous, tables, site=wiki_site(config), revisions=revisions
        )
    except (WikidriftError, ValueError) as exc:
        return [*problems, f"{out}: cannot be recomputed ({exc})"]
    unused = sorted(listed_set - used_revisions(tables, revisions, snapshot, previous))
    if unused:
        problems.append(f"{out}: {len(unused)} revision(s) no row uses: {unused[:5]}")
    if not problems and want.to_pylist() != sources.to_pylist():
        problems.append(
            f"{out}: differs from the revisions the stored snapshots record for its rows"
        )
    return problems
