"""Releases under attack and faults: concurrent writers, crashes while publishing, leftover
temp folders, a tampered ledger or manifest, and secrets that must not be published."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import pipeline.storage as storage
from pipeline.config import load_config
from pipeline.export_hf import export_hf
from pipeline.layout import (
    ledger_dir,
    list_releases,
    read_evidence,
    read_items,
    read_manifest,
    read_release_table,
    release_dir,
    releases_root,
)
from pipeline.release import build_release, manifest_config
from pipeline.release_verify import verify_release
from pipeline.storage import write_json_atomic, write_parquet_atomic
from tests.conftest import (
    SCRIPTED_GENERATION,
    SCRIPTED_TEMPORAL,
    STAGE_DATES,
    copy_workdir,
    scripted_config,
    scripted_config_file,
)
from tests.test_release import _rewrite

A, B, C = STAGE_DATES
REPO = Path(__file__).resolve().parents[1]

# Slows the manifest write (inside the build, before publishing) so that two processes
# started together are certain to overlap.
_SLOW_RELEASE = """
import sys, time
import pipeline.release as release
real = release.write_json_atomic
def slow(*args, **kwargs):
    time.sleep(3)
    return real(*args, **kwargs)
release.write_json_atomic = slow
from wikidrift.cli import main
raise SystemExit(main(sys.argv[1:]))
"""


def _kw(cfg=None) -> dict:
    cfg = cfg or scripted_config()
    return {"config": manifest_config(cfg), "config_hash": cfg.stable_hash()}


def test_two_concurrent_release_processes_publish_one_release(
    released_workdir: Path, tmp_path: Path
) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    shutil.rmtree(release_dir(workdir, C))
    args = ["release", "--snapshot", C, "--workdir", str(workdir), "--profile", "offline"]
    args += ["--config", str(scripted_config_file(tmp_path))]
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _SLOW_RELEASE, *args],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    for rc, _, err in results:
        assert rc == 0, err
    # The second writer waited for the first and found its release: nothing displaced.
    assert sum("(already built)" in out for _, out, _ in results) == 1
    names = sorted(p.name for p in releases_root(workdir).iterdir())
    assert names == sorted(STAGE_DATES), names
    assert read_manifest(workdir, C).revision == 1
    assert verify_release(workdir, C) == []


class _Crash(BaseException):
    """A kill in the middle of publishing (not an Exception: nothing may catch it)."""


@pytest.mark.parametrize("swap", [True, False], ids=["atomic-swap", "two-renames"])
@pytest.mark.parametrize("crash_at", [1, 2])
def test_a_crash_while_publishing_never_loses_the_release(
    released_workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swap, crash_at
) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    changed = scripted_config(seed=7)
    if not swap:  # a file system without renameat2(RENAME_EXCHANGE)
        monkeypatch.setattr(storage, "exchange_paths", lambda a, b: False)
    real_rename, calls = os.rename, []

    def crashing_rename(src, dst, *args, **kwargs):
        calls.append(dst)
        if len(calls) == crash_at:
            raise _Crash
        return real_rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "rename", crashing_rename)
    with contextlib.suppress(_Crash):
        build_release(workdir, B, **_kw(changed), new_revision=True)
    monkeypatch.setattr(os, "rename", real_rename)
    # Whatever happened, a release of B is there and whole.
    assert (release_dir(workdir, B) / "manifest.json").exists()
    assert verify_release(workdir, B) == []
    # The next run repairs and writes a new revision; nothing hidden is left behind.
    again = build_release(workdir, B, **_kw(), new_revision=True)
    assert again.revision == max(read_manifest(workdir, B).revision, 2)
    hidden = [p.name for p in releases_root(workdir).iterdir() if p.name.startswith(".")]
    assert hidden == []
    revisions = sorted(p.name for p in releases_root(workdir).glob(f"{B}.r*"))
    assert revisions == [f"{B}.r{n}" for n in range(1, again.revision)]
    assert list_releases(workdir) == list(STAGE_DATES)
    assert verify_release(workdir, B) == []


def test_a_kill_between_two_renames_is_repaired_by_the_next_run(
    released_workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    changed = scripted_config(seed=7)
    monkeypatch.setattr(storage, "exchange_paths", lambda a, b: False)
    real_rename, calls = os.rename, []

    def killed_after_first_rename(src, dst, *args, **kwargs):
        calls.append(dst)
        if len(calls) > 1:  # the process is gone: nothing after the first rename happens
            raise _Crash
        return real_rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "rename", killed_after_first_rename)
    with pytest.raises(_Crash):
        build_release(workdir, B, **_kw(changed), new_revision=True)
    monkeypatch.setattr(os, "rename", real_rename)
    assert not release_dir(workdir, B).exists()  # moved aside to B.r1, new one unpublished
    # The next run (same inputs as the surviving release) puts revision 1 back.
    again = build_release(workdir, B, **_kw())
    assert again.already_done and again.revision == 1
    assert sorted(p.name for p in releases_root(workdir).iterdir()) == sorted(STAGE_DATES)
    assert verify_release(workdir, B) == []


def test_leftover_temp_folders_are_cleaned_on_the_next_run(
    released_workdir: Path, tmp_path: Path
) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    junk = releases_root(workdir) / f".{B}.k1ll3d"  # a killed run's unfinished build
    junk.mkdir()
    (junk / "qa.parquet").write_bytes(b"partial")
    assert build_release(workdir, B, **_kw()).already_done
    assert not junk.exists()


def test_verify_derives_the_previous_release_from_the_directory(
    released_workdir: Path, tmp_path: Path
) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    qa = read_release_table(workdir, B, "qa")
    victim = qa.filter(pc.equal(qa["type"], "unchanged"))["item_id"][0].as_py()
    _rewrite(workdir, B, "qa", qa.filter(pc.not_equal(qa["item_id"], victim)))
    path = release_dir(workdir, B) / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["previous_release"] = None  # hide the release the deleted item came from
    write_json_atomic(path, manifest)
    problems = verify_release(workdir, B)
    assert any(victim in p and "neither in release" in p for p in problems)
    assert any("previous_release is None" in p and A in p for p in problems)


def _overwrite_ledger_table(workdir: Path, name: str, table: pa.Table) -> None:
    """Replace the ledger's ``name`` table of snapshot B, as the ledger writes it."""
    path = ledger_dir(workdir, B) / f"{name}.parquet"
    write_parquet_atomic(table, path, table_name=f"ledger_{name}", schema_version=1)


def test_verify_fails_when_ledger_rows_are_deleted(released_workdir: Path, tmp_path: Path) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    items = read_items(workdir, B)
    valid = items.filter(pc.is_null(items["valid_to"]))
    gone = valid["item_id"].to_pylist()[:5]
    mask = pc.invert(pc.is_in(items["item_id"], value_set=valid["item_id"].slice(0, 5)))
    _overwrite_ledger_table(workdir, "items", items.filter(mask))
    problems = verify_release(workdir, B)
    assert problems
    assert any("not in the ledger" in p for p in problems)
    assert any(any(i in p for i in gone) for p in problems)


def test_verify_fails_when_ledger_evidence_rows_are_deleted(
    released_workdir: Path, tmp_path: Path
) -> None:
    """Evidence of earlier snapshots is not in the release; the inputs digest covers it."""
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    assert verify_release(workdir, B) == []
    evidence = read_evidence(workdir, B)
    old = pc.not_equal(evidence["snapshot"], B)
    assert pc.sum(old.cast("int64")).as_py() >= 5  # rows the release itself never shows
    keep = pc.invert(pc.and_(old, pc.less(pc.cumulative_sum(old.cast("int64")), 6)))
    _overwrite_ledger_table(workdir, "evidence", evidence.filter(keep))
    problems = verify_release(workdir, B)
    assert any("the ledger or the temporal questions differ" in p for p in problems), problems


@pytest.mark.parametrize("field", ["config_hash", "config"])
def test_verify_checks_the_config_hash(released_workdir: Path, tmp_path: Path, field: str) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    path = release_dir(workdir, B) / "manifest.json"
    manifest = json.loads(path.read_text())
    if field == "config_hash":
        manifest["config_hash"] = "0" * 16
    else:  # the recorded settings changed, the hash left alone
        manifest["config"]["align"]["unchanged_threshold"] = 0.5
    write_json_atomic(path, manifest)
    problems = verify_release(workdir, B)
    assert len(problems) == 1 and "config_hash" in problems[0], problems


@pytest.mark.usefixtures("exports_share_the_session_embedder")
def test_manifest_card_and_export_publish_nothing_private(
    released_workdir: Path, tmp_path: Path
) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    secrets = [
        "alice@example.org",
        "hunter2",
        "bob:",
        "10.9.8.7",
        "/home/alice",
        "/srv/private",
        "tok3n",
        str(workdir),
    ]
    cfg = load_config(
        profile="offline",
        overrides={
            "api": {"user_agent": "bench/1 (https://x.example; alice@example.org)"},
            "llm": {
                "base_url": "http://bob:hunter2@llm.example:8080/v1?key=tok3n",
                "local_model": "/home/alice/models/q4.gguf",
            },
            "flow": {"dask_address": "tcp://10.9.8.7:8786", "export_hf_dir": "/home/alice/hf"},
            "snapshot": {"input": "/srv/private/dumps/enwiki.xml.bz2"},
            "dump": {"cache_dir": "/srv/private/cache"},
            "generation": SCRIPTED_GENERATION,
            "temporal": SCRIPTED_TEMPORAL,
        },
    )
    manifest = build_release(workdir, B, **_kw(cfg), new_revision=True)
    out = export_hf(workdir, B, tmp_path / "hf")
    texts = {
        "manifest": (release_dir(workdir, B) / "manifest.json").read_text(),
        "card": (release_dir(workdir, B) / "README.md").read_text(),
        "hf manifest": (out / "manifest.json").read_text(),
        "hf card": (out / "README.md").read_text(),
    }
    for where, text in texts.items():
        for secret in secrets:
            assert secret not in text, (where, secret)
    # What stays is still useful: the LLM host and the model's file name.
    assert manifest.config["llm"]["base_url"] == "http://llm.example:8080/v1"
    assert manifest.config["llm"]["local_model"] == "<local>/q4.gguf"
    assert manifest.config_hash == cfg.stable_hash()
    assert verify_release(workdir, B) == []
