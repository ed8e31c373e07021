"""Failures a user can meet give one clear line and exit 2, and the same command then resumes:
a corrupt cache database, a full disk, a missing stage output, a read-only workdir."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from pipeline.layout import read_manifest, releases_root
from pipeline.release_verify import verify_release
from tests.conftest import STAGE_DATES, copy_workdir, read_only, scripted_config_file
from wikidrift.cli import main

A, B, C = STAGE_DATES


def _common(workdir: Path) -> list[str]:
    # The config the workdir was built with (scripted_config), so finished stages stay done.
    config = scripted_config_file(workdir.parent)
    return ["--workdir", str(workdir), "--profile", "offline", "--config", str(config)]


def _one_error_line(err: str, *needles: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("wikidrift: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def test_corrupt_cache_database_is_one_line_and_a_rerun_resumes(
    released_workdir: Path, tmp_path: Path, capsys
) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    cache = workdir / "cache" / "embeddings.sqlite"
    cache.write_bytes(b"this is not an SQLite database, just garbage " * 100)
    args = ["label", "--old", A, "--new", B, "--force", *_common(workdir)]
    assert main(args) == 2
    _one_error_line(capsys.readouterr().err, "corrupt cache database", str(cache), "delete it")
    cache.unlink()  # what the message says to do
    assert main(args) == 0
    assert "2024-01-01 -> 2024-06-01: unchanged=" in capsys.readouterr().out


def test_full_disk_is_one_line_and_a_rerun_resumes(
    released_workdir: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow.parquet as pq

    workdir = copy_workdir(released_workdir, tmp_path / "w")
    real = pq.write_table

    def disk_full(*args, **kwargs) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pq, "write_table", disk_full)
    args = ["release", "--snapshot", B, "--force", *_common(workdir)]
    assert main(args) == 2
    _one_error_line(capsys.readouterr().err, "No space left on device", "free some space")
    # Nothing half-written is left, and the release that was there is untouched.
    assert [p.name for p in releases_root(workdir).iterdir() if p.name.startswith(".")] == []
    assert read_manifest(workdir, B).revision == 1 and verify_release(workdir, B) == []
    monkeypatch.setattr(pq, "write_table", real)
    assert main(args) == 0
    assert read_manifest(workdir, B).revision == 2 and verify_release(workdir, B) == []


def test_missing_stage_output_is_one_line(released_workdir: Path, tmp_path: Path, capsys) -> None:
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    (workdir / "releases" / B / "qa.parquet").unlink()
    assert (
        main(["export-hf", "--release", B, "--out", str(tmp_path / "hf"), *_common(workdir)]) == 2
    )
    _one_error_line(capsys.readouterr().err, "qa.parquet")
    (workdir / "ledger" / B / "items.parquet").unlink()
    assert main(["release", "--snapshot", B, "--force", *_common(workdir)]) == 0  # rebuilt
    assert verify_release(workdir, B) == []


def test_read_only_workdir_runs_what_has_nothing_to_do(
    released_workdir: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pipeline.runtime as runtime
    from pipeline.models.llm.scripted import ScriptedBackend
    from tests.scripted_llm import good_answer

    workdir = copy_workdir(released_workdir, tmp_path / "w")
    assert main(["annotate", "sample", "--release", B, "--per-label", "3", *_common(workdir)]) == 0
    real_llm = runtime.llm_from_config

    def scripted_llm(cfg, workdir, *, start=True):
        # The LLM the workdir was generated with; the call cache stays the real (lazy) one.
        setup = real_llm(cfg, workdir, start=start)
        setup.backend.backend = ScriptedBackend(good_answer)
        return setup

    monkeypatch.setattr(runtime, "llm_from_config", scripted_llm)
    with read_only(workdir):
        capsys.readouterr()
        for args in (
            ["label", "--old", A, "--new", B],
            ["generate", "--snapshot", B, "--previous", A],
            ["annotate", "sample", "--release", B, "--per-label", "3"],
            ["release", "--snapshot", B],
            ["verify", "--release", B],
        ):
            assert main([*args, *_common(workdir)]) == 0, (args, capsys.readouterr().err)
        assert main(["release", "--snapshot", B, "--force", *_common(workdir)]) == 2
        _one_error_line(capsys.readouterr().err, "read-only")
