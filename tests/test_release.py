"""Releases over three real snapshots: files, manifest, immutability, diff and verify."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow.compute as pc
import pytest

from pipeline.errors import WikidriftError
from pipeline.layout import list_releases, read_manifest, read_release_table, release_dir
from pipeline.release import build_release, manifest_config
from pipeline.release_diff import release_diff
from pipeline.release_verify import verify_release
from pipeline.schemas import RELEASE_SCHEMA_VERSION, RELEASE_TABLES
from pipeline.storage import write_json_atomic, write_parquet_atomic
from tests.conftest import STAGE_DATES, copy_workdir, scripted_config, scripted_config_file
from wikidrift.cli import main

A, B, C = STAGE_DATES


def test_layout_and_manifest(released_workdir: Path) -> None:
    assert list_releases(released_workdir) == list(STAGE_DATES)
    out = release_dir(released_workdir, B)
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(
        ["README.md", "growth.png", "timeline.png", "manifest.json"]
        + [f"{n}.parquet" for n in RELEASE_TABLES]
    )
    m = read_manifest(released_workdir, B)
    assert m.release_id == f"wikidrift-{B}" and m.revision == 1 and m.previous_release == A
    assert m.schema_version == RELEASE_SCHEMA_VERSION == 3 and m.labeling_rule == "fact_guarded"
    assert m.config["profile"] == "offline" and len(m.config_hash) == 16
    assert "workdir" not in m.config
    assert m.models["labeling"]["embedder"] == "packaged:all-MiniLM-L6-v2"
    assert m.models["generator"].startswith("scripted")
    assert m.prompt_hashes
    for name, meta in m.files.items():
        assert meta["sha256"] == hashlib.sha256((out / name).read_bytes()).hexdigest()
    # GrowOVER Tables 13/14 layout.
    for key in ("qa", "dialogue_turns"):
        c = m.counts[key]
        assert {"unchanged", "new", "changed", "deleted", "total"} <= set(c)
        assert c["total"] == c["unchanged"] + c["new"] + c["changed"]
    assert m.counts["qa"]["unchanged"] > 0 and m.counts["qa"]["new"] > 0
    assert read_manifest(released_workdir, A).previous_release is None
    assert read_manifest(released_workdir, A).counts["qa"]["unchanged"] == 0
    card = (out / "README.md").read_text()
    assert "| Release | Unchanged | New | Changed | Deleted | Total |" in card
    assert f"| {A} |" in card and f"| {B} |" in card and "growth.png" in card
    assert (out / "growth.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_release_rows_carry_their_type_at_the_snapshot(released_workdir: Path) -> None:
    qa = read_release_table(released_workdir, C, "qa").to_pylist()
    for r in qa:
        expected = "unchanged" if r["created_snapshot"] < C else r["type_at_creation"]
        assert r["type"] == expected
    dialogue = read_release_table(released_workdir, C, "dialogue").to_pylist()
    excluded = [t for t in dialogue if not t["evaluate"]]
    assert excluded and all(t["excluded_reason"] and t["excluded_at"] for t in excluded)
    quads = read_release_table(released_workdir, C, "quadruples").to_pylist()
    # a quadruple is superseded only by a fact of the same subject and relation with another
    # object, from a sentence labeled changed
    by_id = {q["item_id"]: q for q in quads}
    assert "current" in {q["status"] for q in quads}
    for q in quads:
        assert (q["status"] == "superseded") == bool(q["superseded_by"])
        if q["superseded_by"]:
            newer = by_id[q["superseded_by"]]
            assert newer["type_at_creation"] == "changed"
            assert (newer["subject"], newer["relation"]) == (q["subject"], q["relation"])
            assert newer["object"] != q["object"]
    labels = read_release_table(released_workdir, A, "sentence_labels")
    assert set(labels["label"].to_pylist()) == {"new"}


def test_existing_release_is_never_overwritten(released_workdir: Path, tmp_path: Path) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    cfg = scripted_config()
    kw = {"config": manifest_config(cfg), "config_hash": cfg.stable_hash()}
    same = build_release(workdir, B, **kw)
    assert same.already_done
    changed = scripted_config(seed=7)
    other = {"config": manifest_config(changed), "config_hash": changed.stable_hash()}
    with pytest.raises(WikidriftError, match="never overwritten"):
        build_release(workdir, B, **other)
    old_sha = read_manifest(workdir, B).files["qa.parquet"]["sha256"]
    second = build_release(workdir, B, **other, new_revision=True)
    assert second.revision == 2 and second.release_id == f"wikidrift-{B}.r2"
    kept = json.loads((workdir / "releases" / f"{B}.r1" / "manifest.json").read_text())
    assert kept["revision"] == 1 and kept["files"]["qa.parquet"]["sha256"] == old_sha
    assert list_releases(workdir) == list(STAGE_DATES)
    assert verify_release(workdir, B) == []


def test_verify_passes_on_good_releases(released_workdir: Path) -> None:
    for snap in STAGE_DATES:
        assert verify_release(released_workdir, snap) == []


def test_verify_fails_on_a_tampered_file(released_workdir: Path, tmp_path: Path) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    path = release_dir(workdir, B) / "qa.parquet"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    problems = verify_release(workdir, B)
    assert len(problems) == 1 and "qa.parquet: sha256" in problems[0]


def test_verify_names_a_file_listed_without_its_sha256(
    released_workdir: Path, tmp_path: Path
) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    path = release_dir(workdir, B) / "manifest.json"
    manifest = json.loads(path.read_text())
    del manifest["files"]["qa.parquet"]["sha256"]
    path.write_text(json.dumps(manifest))
    assert verify_release(workdir, B) == [f"{path}: qa.parquet is listed without its sha256"]


def _rewrite(workdir: Path, snapshot: str, name: str, table) -> None:
    out = release_dir(workdir, snapshot)
    path = out / f"{name}.parquet"
    write_parquet_atomic(
        table, path, table_name=f"release_{name}", schema_version=RELEASE_SCHEMA_VERSION
    )
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["files"][path.name]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    write_json_atomic(out / "manifest.json", manifest)


def test_verify_fails_on_a_deleted_item(released_workdir: Path, tmp_path: Path) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    qa = read_release_table(workdir, B, "qa")
    kept = qa.filter(pc.equal(qa["type"], "unchanged"))
    victim = kept["item_id"][0].as_py()
    # A forger who also fixes the checksum is still caught by the ledger invariant.
    _rewrite(workdir, B, "qa", qa.filter(pc.not_equal(qa["item_id"], victim)))
    problems = verify_release(workdir, B)
    assert any(victim in p and "neither in release" in p for p in problems)
    assert any("counts do not match" in p for p in problems)


def test_verify_fails_when_evidence_points_elsewhere(
    released_workdir: Path, tmp_path: Path
) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    qa = read_release_table(workdir, C, "qa").to_pylist()
    qa[0]["evidence_sent_idx"] = [i + 1 for i in qa[0]["evidence_sent_idx"]]
    import pyarrow as pa

    _rewrite(workdir, C, "qa", pa.Table.from_pylist(qa, schema=RELEASE_TABLES["qa"].schema))
    problems = verify_release(workdir, C)
    assert any(qa[0]["item_id"] in p and "do not point at" in p for p in problems)


def test_diff_counts_added_kept_retired(released_workdir: Path) -> None:
    diff = release_diff(released_workdir, A, B)
    m_a, m_b = read_manifest(released_workdir, A), read_manifest(released_workdir, B)
    qa = diff["qa"]
    assert qa["kept"] + qa["retired"] == m_a.counts["qa"]["total"]
    assert qa["kept"] + qa["added"] == m_b.counts["qa"]["total"]
    assert sum(qa["retired_by_reason"].values()) == qa["retired"]
    assert "unknown" not in qa["retired_by_reason"]


def test_cli_release_verify_and_diff(released_workdir: Path, tmp_path: Path, capsys) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    common = ["--workdir", str(workdir), "--profile", "offline"]
    common += ["--config", str(scripted_config_file(tmp_path))]
    assert main(["release", "--snapshot", B, *common]) == 0
    out = capsys.readouterr().out
    assert "(already applied)" in out and "(already built)" in out
    assert main(["verify", "--release", B, *common]) == 0
    assert f"release {B}: OK" in capsys.readouterr().out
    assert main(["release", "diff", A, B, *common]) == 0
    assert "qa: added=" in capsys.readouterr().out
    (release_dir(workdir, B) / "growth.png").write_bytes(b"not a png")
    assert main(["verify", "--release", B, *common]) == 1
    captured = capsys.readouterr()
    assert "FAIL" in captured.out and "growth.png: sha256" in captured.out
    assert main(["release", *common]) == 2
    assert "needs --snapshot" in capsys.readouterr().err
