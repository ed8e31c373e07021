"""``sources.parquet`` and the revision of every row: attribution that ``verify`` checks, and
releases of an earlier schema version (no sources, no revision columns) that still load."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.layout import (
    read_manifest,
    read_release_table,
    release_dir,
    sentence_texts,
)
from pipeline.release import release_inputs_digest
from pipeline.release_card import write_growth_plot
from pipeline.release_diff import release_diff, release_diff_items
from pipeline.release_sources import (
    REVISION_COLUMNS,
    Revisions,
    first_release,
    oldid_url,
    wiki_site,
)
from pipeline.release_verify import verify_release
from pipeline.schemas import RELEASE_TABLES, WIKIPEDIA_LICENSE, release_files
from pipeline.storage import write_json_atomic, write_parquet_atomic
from tests.conftest import (
    STAGE_DATES,
    copy_workdir,
    load_wikisnap_revision,
    reseal_release,
    scripted_config_file,
)
from wikidrift.cli import main

A, B, C = STAGE_DATES


def _revisions_used(tables: dict[str, pa.Table]) -> set[int]:
    used: set[int] = set()
    for name, columns in REVISION_COLUMNS.items():
        for column in columns:
            for value in tables[name][column].to_pylist():
                used.update(value if isinstance(value, list) else [value])
    return used


def test_wiki_site_and_oldid_url() -> None:
    assert wiki_site({"snapshot": {"source": "revisions-dir"}}) == "https://en.wikipedia.org"
    api = {"snapshot": {"source": "api"}, "api": {"endpoint": "https://de.wikipedia.org/w/api.php"}}
    assert wiki_site(api) == "https://de.wikipedia.org"
    assert wiki_site({"snapshot": {"source": "dump"}, "dump": {"wiki": "frwiki"}}) == (
        "https://fr.wikipedia.org"
    )
    assert oldid_url("https://en.wikipedia.org", 42) == (
        "https://en.wikipedia.org/w/index.php?oldid=42"
    )
    assert first_release("2024-06-01") == "wikidrift-2024-06-01"


def test_every_row_names_its_revision_and_sources_list_them(released_workdir: Path) -> None:
    """(page_id, revision_id, evidence_sent_idx) locates each evidence sentence; the revision
    is the one the raw article file holds; sources.parquet lists exactly the revisions used."""
    for snap in STAGE_DATES:
        tables = {n: read_release_table(released_workdir, snap, n) for n in release_files(3)}
        sources = tables["sources"].to_pylist()
        listed = {r["revision_id"]: r for r in sources}
        assert len(listed) == len(sources) > 0
        used = _revisions_used(tables)
        assert None not in used and used <= set(listed)
        for r in sources:
            raw = load_wikisnap_revision(r["page_id"], _date_of(released_workdir, r))
            assert raw["revision_id"] == r["revision_id"] and raw["title"] == r["title"]
            assert r["url"] == f"https://en.wikipedia.org/w/index.php?oldid={r['revision_id']}"
            assert r["license"] == WIKIPEDIA_LICENSE and r["revision_timestamp"]
        for name in ("qa", "dialogue", "quadruples"):
            for row in tables[name].to_pylist():
                at = row.get("evidence_snapshot") or snap
                raw = load_wikisnap_revision(row["page_id"], at)
                assert row["revision_id"] == raw["revision_id"]
                assert row["first_release"] == f"wikidrift-{row['created_snapshot']}"
                texts = sentence_texts(released_workdir, at, [row["page_id"]])
                got = " ".join(texts[(row["page_id"], i)] for i in row["evidence_sent_idx"])
                assert got == row["evidence_text"]
    manifest = read_manifest(released_workdir, C)
    n = manifest.counts["sources"]["revisions"]
    assert n == len(read_release_table(released_workdir, C, "sources"))
    card = " ".join((release_dir(released_workdir, C) / "README.md").read_text().split())
    assert "## Sources and licence" in card and f"lists the {n:,} article revisions" in card
    # relations and temporal rows name revisions on both ends / per quadruple
    relations = read_release_table(released_workdir, C, "relations").to_pylist()
    assert relations and all(r["source_revision_id"] and r["target_revision_id"] for r in relations)


def _date_of(workdir: Path, source_row: dict) -> str:
    """A snapshot date whose stored article has this revision."""
    revisions = Revisions(workdir)
    page, rev = source_row["page_id"], source_row["revision_id"]
    return next(d for d in STAGE_DATES if revisions.of(d, page) == rev)


def _rewrite(workdir: Path, snapshot: str, name: str, table: pa.Table) -> None:
    path = release_dir(workdir, snapshot) / f"{name}.parquet"
    version = read_manifest(workdir, snapshot).schema_version
    write_parquet_atomic(
        table, path, table_name=RELEASE_TABLES[name].stored_name, schema_version=version
    )
    reseal_release(workdir, snapshot)


def test_verify_finds_a_revision_missing_from_sources(
    released_workdir: Path, tmp_path: Path
) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    sources = read_release_table(workdir, C, "sources")
    qa = read_release_table(workdir, C, "qa")
    victim = qa["revision_id"][0].as_py()
    _rewrite(workdir, C, "sources", sources.filter(pc.not_equal(sources["revision_id"], victim)))
    problems = verify_release(workdir, C)
    assert any("not in sources.parquet" in p and str(victim) in p for p in problems), problems


def test_verify_finds_a_row_with_another_revision(released_workdir: Path, tmp_path: Path) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    rows = read_release_table(workdir, C, "qa").to_pylist()
    rows[0]["revision_id"] += 1
    _rewrite(workdir, C, "qa", pa.Table.from_pylist(rows, schema=RELEASE_TABLES["qa"].schema))
    problems = verify_release(workdir, C)
    assert any(rows[0]["item_id"] in p and "is not the revision of page" in p for p in problems), (
        problems
    )


def downgrade_to_v2(workdir: Path, snapshot: str) -> None:
    """Make a release what schema v2 wrote: no sources.parquet, no revision / first_release
    columns, version 2 in its files and manifest, the v2 inputs digest."""
    out = release_dir(workdir, snapshot)
    (out / "sources.parquet").unlink()
    for name in release_files(2):
        table = pq.read_table(out / f"{name}.parquet")
        keep = RELEASE_TABLES[name].schema_at(2).names
        write_parquet_atomic(
            table.select(keep),
            out / f"{name}.parquet",
            table_name=RELEASE_TABLES[name].stored_name,
            schema_version=2,
        )
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["schema_version"] = 2
    manifest["counts"].pop("sources")
    manifest["inputs_digest"] = release_inputs_digest(workdir, snapshot, manifest["config_hash"], 2)
    write_json_atomic(out / "manifest.json", manifest)
    reseal_release(workdir, snapshot)


def test_releases_of_schema_v2_still_load(released_workdir: Path, tmp_path: Path, capsys) -> None:
    """verify, release diff (--items), evaluate and the growth plot on v2 releases next to a
    v3 one."""
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    for snap in (B, C):
        downgrade_to_v2(workdir, snap)
        assert read_manifest(workdir, snap).schema_version == 2
        assert "revision_id" not in read_release_table(workdir, snap, "qa").column_names
        assert verify_release(workdir, snap) == []
    assert verify_release(workdir, A) == []  # v3, its successor v2

    diff = release_diff(workdir, A, B)  # v3 -> v2
    ids = release_diff_items(workdir, A, B)
    for kind, groups in ids.items():
        assert [len(groups[k]) for k in ("added", "kept", "retired")] == [
            diff[kind][k] for k in ("added", "kept", "retired")
        ]
    common = ["--workdir", str(workdir), "--profile", "offline"]
    common += ["--config", str(scripted_config_file(tmp_path))]
    assert main(["release", "diff", B, C, "--items", *common]) == 0
    out = capsys.readouterr().out.splitlines()
    kept = read_release_table(workdir, C, "qa")["item_id"].to_pylist()
    assert any(x.startswith("qa: added=") for x in out)
    listed = {x.split()[2] for x in out if x.startswith(("qa kept ", "qa added "))}
    assert listed == set(kept)
    assert main(["verify", "--release", B, *common]) == 0

    from pipeline.evaluate.harness import evaluate_release
    from pipeline.models.llm.scripted import ScriptedBackend

    run = evaluate_release(
        workdir,
        C,
        backend=ScriptedBackend(lambda request: '{"answer": "x", "reply": "x"}'),
        kinds=["qa", "dialogue", "temporal_qa", "timelines"],
    )
    assert run.counts["qa"]["all"] == len(kept)
    write_growth_plot(tmp_path / "growth.png", [read_manifest(workdir, s) for s in STAGE_DATES])
    assert (tmp_path / "growth.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_release_diff_items(released_workdir: Path, tmp_path: Path, capsys) -> None:
    common = ["--workdir", str(released_workdir), "--profile", "offline"]
    common += ["--config", str(scripted_config_file(tmp_path))]
    assert main(["release", "diff", A, B, "--items", *common]) == 0
    lines = capsys.readouterr().out.splitlines()
    ids = release_diff_items(released_workdir, A, B)
    for kind, groups in ids.items():
        for status, found in groups.items():
            assert sorted(x.split()[2] for x in lines if x.startswith(f"{kind} {status} ")) == (
                found
            )
    assert ids["qa"]["added"] and ids["qa"]["kept"]
    assert main(["release", "--snapshot", B, "--items", *common]) == 2
    assert "--items belongs to" in capsys.readouterr().err
