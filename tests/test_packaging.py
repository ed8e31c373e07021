"""The installable package: a wheel built from the repository carries the prompt templates,
the default configuration and the ``make run`` sample, and loads them from wherever it is
installed (no repository beside it)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

# What the build needs of the repository; the rest (tests, benchmarks, the venv) stays out.
_BUILD_INPUTS = (
    "pyproject.toml",
    "README.md",
    "pipeline",
    "flows",
    "wikidrift",
    "prompts",
    "data",
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built offline from a copy of the repository's build inputs."""
    src = tmp_path_factory.mktemp("src")
    for name in _BUILD_INPUTS:
        path = REPO_ROOT / name
        if path.is_dir():
            shutil.copytree(
                path, src / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(path, src / name)
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation"]
        + ["--no-index", "-q", "-w", str(dist)],
        check=True,
        capture_output=True,
    )
    (built,) = dist.glob("wikidrift-*.whl")
    return built


def test_wheel_holds_prompts_config_and_sample(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    prompts = sorted(p.name for p in (REPO_ROOT / "prompts").glob("*.md"))
    assert prompts and all(f"pipeline/prompts/{p}" in names for p in prompts)
    for name in ("wikidrift.toml", "paper.toml", "articles.txt"):
        assert f"pipeline/data/{name}" in names
    sample = [
        p.relative_to(REPO_ROOT).as_posix()
        for p in (REPO_ROOT / "data" / "sample").rglob("*")
        if p.is_file()
    ]
    assert len(sample) >= 19 and all(f"pipeline/{p}" in names for p in sample)
    assert "pipeline/annotate/static/annotate.js" in names
    assert "flows/monthly.py" in names and "wikidrift/cli.py" in names


def test_installed_wheel_loads_its_own_data_from_an_empty_folder(
    wheel: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    probe = textwrap.dedent(
        """
        import json, pipeline
        from pipeline.config import load_config
        from pipeline.generate.kinds import generation_prompt_names
        from pipeline.generate.prompts import load_prompt
        cfg = load_config()
        print(json.dumps({
            "package": pipeline.__file__,
            "profile": cfg.profile,
            "input": str(cfg.resolve_path(cfg.snapshot.input)),
            "articles": str(load_config(profile="paper").resolve_path("data/articles.txt")),
            "prompts": {n: load_prompt(n).prompt_hash for n in generation_prompt_names()},
        }))
        """
    )
    # The wheel's copy first on the path, ahead of the repository's editable install.
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=empty, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    assert Path(found["package"]).is_relative_to(site)
    assert found["profile"] == "offline"  # the shipped data/wikidrift.toml, not the defaults
    assert Path(found["input"]).is_relative_to(site)
    assert (Path(found["input"]) / "MANIFEST.json").exists()
    assert Path(found["articles"]).is_relative_to(site) and Path(found["articles"]).exists()
    from pipeline.generate.kinds import generation_prompt_names
    from pipeline.generate.prompts import load_prompt

    assert found["prompts"] == {n: load_prompt(n).prompt_hash for n in generation_prompt_names()}
    help_text = subprocess.run(
        [sys.executable, "-m", "wikidrift.cli", "--help"],
        cwd=empty,
        env=env,
        capture_output=True,
        text=True,
    )
    assert help_text.returncode == 0 and "snapshot" in help_text.stdout, help_text.stderr
