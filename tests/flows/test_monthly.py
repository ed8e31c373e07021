"""The Prefect flows end to end on real wikisnap articles: releases, idempotent re-runs,
regeneration of only what changed, a run killed in any stage resumed without paying twice,
Dask scale-out."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from flows.monthly import monthly_dates, run_flow
from flows.runner import task_runner
from pipeline.config import Config
from pipeline.layout import list_releases, read_label_summary, read_manifest, release_dir
from pipeline.release_verify import verify_release
from tests.conftest import REPO_ROOT, WIKISNAP
from tests.flows.conftest import flow_config

DATES = ["2024-01-01", "2024-06-01", "2025-01-01"]

# The update judge on (the scripted server answers its questions): the module-scoped reference
# and the `wikidrift run` subprocesses run with it, and every compared run must too.
pytestmark = [pytest.mark.usefixtures("prefect_harness"), pytest.mark.update_judge]


@pytest.fixture(autouse=True)
def _openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test-server")


def _run(config: dict, dates: list[str]) -> dict:
    runner = task_runner(Config.model_validate(config))
    return run_flow.with_options(task_runner=runner)(dates=dates, config=config)


def checksums(workdir: Path) -> dict[str, str]:
    """sha256 of every file of every release but its manifest (which records the settings
    that differ between the runs compared: runner, shard size)."""
    out = {}
    for snap in list_releases(workdir):
        for path in sorted(release_dir(workdir, snap).iterdir()):
            if path.name != "manifest.json":
                out[f"{snap}/{path.name}"] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, llm_server, prefect_harness) -> dict:
    """An uninterrupted run over three dates: releases, checksums, LLM requests made."""
    os.environ["OPENAI_API_KEY"] = "sk-local-test-server"
    workdir = tmp_path_factory.mktemp("flow_reference") / "w"
    config = flow_config(workdir, llm_server)
    before = len(llm_server.answered_bodies())
    results = _run(config, DATES)
    return {
        "workdir": workdir,
        "config": config,
        "results": results,
        "checksums": checksums(workdir),
        "requests": Counter(llm_server.answered_bodies()[before:]),
    }


def test_three_releases_are_produced_and_verified(reference: dict) -> None:
    workdir = reference["workdir"]
    assert list_releases(workdir) == DATES
    for snap in DATES:
        assert verify_release(workdir, snap) == []
    totals = [read_manifest(workdir, s).counts["qa"]["total"] for s in DATES]
    assert totals[0] > 0 and totals[2] > totals[0]
    stages = reference["results"]["2024-06-01"]
    assert {"snapshot", "label", "generate", "ledger", "release"} <= set(stages)
    assert stages["snapshot"]["articles"] == 3 and stages["generate"]["llm"]["requests"] > 0
    assert sum(reference["requests"].values()) == len(reference["requests"])  # none twice


def test_rerun_with_nothing_changed_does_no_work(reference: dict, llm_server) -> None:
    before = len(llm_server.answered_bodies())
    results = _run(reference["config"], DATES)
    assert len(llm_server.answered_bodies()) == before
    assert all(r["release"]["already_done"] for r in results.values())
    assert checksums(reference["workdir"]) == reference["checksums"]


def test_changing_a_threshold_rebuilds_only_what_depends_on_it(
    reference: dict, llm_server, tmp_path: Path
) -> None:
    import shutil

    workdir = tmp_path / "w"
    shutil.copytree(reference["workdir"], workdir)
    config = json.loads(json.dumps(reference["config"]))
    config["workdir"] = str(workdir)
    first_labels = read_label_summary(workdir, DATES[0], DATES[1])
    # A generation setting: labels stay, generation and the release are redone.
    config["generation"]["quadruples_per_sentence"] = 2
    before = len(llm_server.answered_bodies())
    results = _run(config, DATES[:2])
    assert read_label_summary(workdir, DATES[0], DATES[1]).inputs_digest == (
        first_labels.inputs_digest
    )
    assert results[DATES[1]]["label"]["seconds"] < 5  # not relabeled
    # The quadruple prompt states the limit, so generation really asked the LLM again.
    assert len(llm_server.answered_bodies()) > before
    for snap in DATES[:2]:
        manifest = read_manifest(workdir, snap)
        assert manifest.revision == 2
        assert manifest.config["generation"]["quadruples_per_sentence"] == 2
        assert (workdir / "releases" / f"{snap}.r1" / "manifest.json").exists()
        assert verify_release(workdir, snap) == []
    # A labeling threshold: the labels are redone too.
    config["align"]["new_max_similarity"] = 0.65
    _run(config, DATES[:2])
    relabeled = read_label_summary(workdir, DATES[0], DATES[1])
    assert relabeled.inputs_digest != first_labels.inputs_digest
    assert read_manifest(workdir, DATES[1]).revision == 3


# Each run is killed one step further into the second date, in the order the flow gets there:
# in a sharded stage once a part is done, then in every stage with its parts done and its
# done-marker not yet written.
# Every stage once, and a sharded stage both after a part and in its finalize (the shared
# driver writes parts and markers the same way for every sharded stage).
KILL_POINTS = [
    f"{stage}:{point}:{DATES[1]}"
    for stage, point in (
        ("snapshot", "part"), ("label", "finalize"), ("generate", "part"),
        ("generate", "finalize"), ("ledger", "finalize"), ("temporal", "finalize"),
        ("release", "finalize"),
    )
]  # fmt: skip


def _kill_mid_generation(llm_server, command: list[str], env: dict[str, str]) -> None:
    """Run until 20 LLM answers went out, hold every later one, then SIGKILL the run while
    its requests are in flight."""
    start = len(llm_server.answered_bodies())
    llm_server.hold_after = start + 20
    proc = subprocess.Popen(command, cwd=REPO_ROOT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while len(llm_server.answered_bodies()) < start + 20 and time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"the run ended (code {proc.returncode}) before it could be killed")
            time.sleep(0.2)
        time.sleep(1.0)  # let the client send its next requests, which are held
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        llm_server.hold_after = None
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert len(llm_server.answered_bodies()) - start >= 20


def test_a_run_killed_anywhere_resumes_where_it_stopped(
    reference: dict, llm_server, tmp_path: Path
) -> None:
    """SIGKILL (the flow and its workers) first mid-generation with requests in flight, then
    inside each stage in turn, each rerun going one step further; the last run finishes with
    the reference's releases, and no LLM request was answered twice across all of them."""
    from prefect.settings import PREFECT_API_URL

    workdir = tmp_path / "w"
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(flow_config(workdir, llm_server)))
    # The session's Prefect server: a run need not start (and lose, when killed) its own.
    env = os.environ | {"PYTHONPATH": str(REPO_ROOT), "PREFECT_API_URL": PREFECT_API_URL.value()}
    env["OMP_NUM_THREADS"] = "1"  # torch in each run: one thread, as in the suite's workers
    start = len(llm_server.answered_bodies())

    def command(target: str) -> list[str]:
        return [sys.executable, "-m", "tests.flows.kill_at", str(config_file), target, *DATES]

    _kill_mid_generation(llm_server, command("none:none:none"), env)
    assert list_releases(workdir) != DATES
    for point in KILL_POINTS:
        (workdir / "killed_at").unlink(missing_ok=True)
        # Its own process group: the kill takes down whatever the run started.
        run = subprocess.run(
            command(point), cwd=REPO_ROOT, env=env, timeout=600, start_new_session=True
        )
        assert run.returncode == -signal.SIGKILL, point
        assert (workdir / "killed_at").read_text() == point
    finished = subprocess.run(command("none:none:none"), cwd=REPO_ROOT, env=env, timeout=600)
    assert finished.returncode == 0
    answered = Counter(llm_server.answered_bodies()[start:])
    assert max(answered.values()) == 1  # no request was answered twice
    assert set(answered) == set(reference["requests"])
    assert checksums(workdir) == reference["checksums"]
    for snapshot in DATES:
        assert verify_release(workdir, snapshot) == []


def _warm_embedding_cache(reference: dict, workdir: Path) -> None:
    """An embedding cache holding a quarter of the reference's sentences, embedded in other
    company (shuffled groups of 5): the run mixes cached vectors with vectors it computes
    itself."""
    import random

    from pipeline.layout import read_snapshot_table
    from pipeline.models.embedder import PACKAGED_MINILM, CachedEmbedder, load_embedder
    from pipeline.models.vector_cache import VectorCache

    texts = sorted(
        {
            t
            for d in DATES
            for t in read_snapshot_table(reference["workdir"], d, "sentences")["text"].to_pylist()
        }
    )
    random.Random(3).shuffle(texts)
    cache = VectorCache(workdir / "cache" / "embeddings.sqlite")
    embedder = CachedEmbedder(load_embedder(PACKAGED_MINILM), cache)
    some = texts[::4]
    for start in range(0, len(some), 5):
        embedder.embed(some[start : start + 5])
    assert embedder.texts_embedded == len(some)


# Dask's worker processes, shards of one article and a warm cache share one whole flow run
# (~60 s on two cores): any one of them changing a byte fails it.
def test_releases_are_byte_identical_on_dask_with_shards_of_1_and_a_warm_cache(
    reference: dict, llm_server, tmp_path: Path
) -> None:
    workdir = tmp_path / "w"
    config = flow_config(
        workdir,
        llm_server,
        flow={"task_runner": "dask", "dask_workers": 2},
        snapshot={"shard_size": 1},
    )
    _warm_embedding_cache(reference, workdir)
    _run(config, DATES)
    assert checksums(workdir) == reference["checksums"]


def test_monthly_dates() -> None:
    assert monthly_dates("2023-11-21", "2024-02-21") == [
        "2023-11-21",
        "2023-12-21",
        "2024-01-21",
        "2024-02-21",
    ]
    with pytest.raises(ValueError, match="empty"):
        monthly_dates("2024-02-01", "2024-01-01")


def test_cli_run_builds_the_configured_dates(
    reference: dict, llm_server, tmp_path: Path, capsys
) -> None:
    from wikidrift.cli import main

    config = tmp_path / "c.toml"
    config.write_text(
        f'[llm]\nbackend = "openai"\nbase_url = "{llm_server.url}"\n[snapshot]\nshard_size = 2\n'
    )
    articles = tmp_path / "articles.txt"
    articles.write_text("Sam Altman\nDenver Nuggets\nSony Music\n")
    code = main(
        [
            "run",
            "--source",
            "revisions-dir",
            "--input",
            str(WIKISNAP),
            "--dates",
            "2024-01-01",
            "--articles",
            str(articles),
            "--workdir",
            str(tmp_path / "w"),
            "--profile",
            "offline",
            "--config",
            str(config),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "wikidrift-2024-01-01" in out and "QA pairs" in out  # the summary table
    assert verify_release(tmp_path / "w", "2024-01-01") == []
    # Same articles, same answers: the release equals the flow's reference release.
    ref = reference["checksums"]
    got = checksums(tmp_path / "w")
    assert got["2024-01-01/qa.parquet"] == ref["2024-01-01/qa.parquet"]


def test_initial_and_backfill_flows(llm_server, tmp_path: Path) -> None:
    from flows.monthly import backfill_flow, initial_flow

    workdir = tmp_path / "w"
    config = flow_config(workdir, llm_server)
    first = initial_flow(snapshot="2024-01-01", config=config)
    assert first["release"]["release_id"] == "wikidrift-2024-01-01"
    assert "label" not in first  # nothing to compare the first snapshot with
    months = backfill_flow(start="2024-01-01", end="2024-03-01", config=config)
    assert list(months) == ["2024-01-01", "2024-02-01", "2024-03-01"]
    assert months["2024-01-01"]["release"]["already_done"]
    # wikisnap holds no revision between 2024-01-01 and 2024-06-01: the later months change
    # nothing, so every item is kept as unchanged and nothing new is generated.
    march = read_manifest(workdir, "2024-03-01")
    assert march.previous_release == "2024-02-01"
    assert march.counts["qa"]["new"] == march.counts["qa"]["changed"] == 0
    assert march.counts["qa"]["unchanged"] == march.counts["qa"]["total"] > 0
    assert months["2024-03-01"]["label"]["counts"]["changed"] == 0


def test_the_local_llm_starts_after_the_snapshot_and_never_for_a_failed_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``wikidrift run``'s starter (flows.monthly.start_llm_before_first_use) runs once, after
    the first snapshot and before the first stage that may ask the LLM; a snapshot that fails
    (offline, a bad source) stops the run before any model is loaded."""
    import logging

    import flows.monthly as monthly
    from pipeline.config import load_config
    from pipeline.errors import WikidriftError

    calls: list[str] = []
    monkeypatch.setattr(monthly, "get_run_logger", lambda: logging.getLogger("test"))
    monkeypatch.setattr(monthly, "_snapshot_stage", lambda *a: calls.append("snapshot") or {})
    for name in ("_label_stage", "_generate_stage", "ledger_task", "temporal_task"):
        monkeypatch.setattr(monthly, name, lambda *a, name=name: calls.append(name) or {})
    monkeypatch.setattr(monthly, "release_task", lambda *a: calls.append("release") or {})
    cfg = load_config(profile="offline").model_copy(update={"workdir": str(tmp_path)})
    config = cfg.model_dump(mode="json")
    monthly.start_llm_before_first_use(lambda: calls.append("llm"))
    try:
        monthly._release_for(config, "2024-01-01", None)
        monthly._release_for(config, "2024-06-01", "2024-01-01")
    finally:
        monthly.start_llm_before_first_use(None)
    assert calls[:3] == ["snapshot", "llm", "_generate_stage"] and calls.count("llm") == 1

    def offline(*args: object) -> None:
        raise WikidriftError("cannot reach the source")

    calls.clear()
    monkeypatch.setattr(monthly, "_snapshot_stage", offline)
    monthly.start_llm_before_first_use(lambda: calls.append("llm"))
    try:
        with pytest.raises(WikidriftError):
            monthly._release_for(config, "2025-01-01", "2024-06-01")
    finally:
        monthly.start_llm_before_first_use(None)
    assert calls == []


def test_each_worker_thread_keeps_its_models_for_the_run(tmp_path: Path) -> None:
    """One runtime per worker thread and config, as many as flow.workers allows plus the
    flow's own thread: a worker's models are never evicted while its flow runs."""
    import threading

    from flows.monthly import _RUNTIMES, runtime

    _RUNTIMES.clear()
    config = Config.model_validate({"workdir": str(tmp_path), "flow": {"workers": 3}})
    config = config.model_dump(mode="json")
    got: list[object] = []
    ready, done = threading.Semaphore(0), threading.Event()

    def worker() -> None:  # alive until the end, as a flow's worker threads are
        got.extend([runtime(config), runtime(config)])  # the same thread: the same models
        ready.release()
        done.wait()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads[:3]:
        t.start()
    for _ in range(3):
        ready.acquire()
    main = runtime(config)
    assert len({id(r) for r in got}) == 3 and all(got[i] is got[i + 1] for i in (0, 2, 4))
    assert len(_RUNTIMES) == 4 and main is runtime(config)
    # a fifth thread is beyond workers + 1: the least recently used runtime goes
    threads[3].start()
    ready.acquire()
    done.set()
    for t in threads:
        t.join()
    assert len(_RUNTIMES) == 4 and main in _RUNTIMES.values() and got[0] not in _RUNTIMES.values()
    _RUNTIMES.clear()


def test_every_sharded_stage_names_tools_a_worker_can_make() -> None:
    from dataclasses import fields

    from flows.monthly import _TOOL_MAKERS, STAGES
    from pipeline.stage import Tools

    names = {f.name for f in fields(Tools)}
    assert set(STAGES) == {"snapshot", "label", "generate"}
    for stage in STAGES.values():
        assert stage.tools and set(stage.tools) <= set(_TOOL_MAKERS) <= names, stage.name
