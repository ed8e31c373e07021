"""The one stage driver: lock, recovery, skip when done, parts in order, resume after a crash,
finalize last, progress; and the six stages all go through it."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipeline import progress
from pipeline.generate.stage import GENERATE_STAGE
from pipeline.labeling.stage import LABEL_STAGE
from pipeline.layout import ledger_dir, release_dir, temporal_dir
from pipeline.ledger import LEDGER_STAGE, plan_ledger
from pipeline.models.llm.scripted import ScriptedBackend
from pipeline.release import RELEASE_STAGE, manifest_config, plan_release
from pipeline.snapshot import SNAPSHOT_STAGE
from pipeline.stage import Stage, Tools, run_stage
from pipeline.temporal.stage import TEMPORAL_STAGE, plan_temporal
from tests.conftest import STAGE_DATES, copy_workdir, scripted_config
from tests.scripted_llm import good_answer
from tests.test_progress import Recorder


@dataclass(frozen=True)
class CountJob:
    """Write one file per part, then a marker: the shape of every sharded stage."""

    out: str
    parts: int


def _prepare(job: CountJob, force: bool) -> dict | None:
    marker = Path(job.out) / "done.json"
    if marker.exists() and not force:
        return json.loads(marker.read_text()) | {"stored": True}
    marker.unlink(missing_ok=True)
    Path(job.out).mkdir(parents=True, exist_ok=True)
    return None


def _run_part(job: CountJob, index: int, tools: dict) -> dict:
    part = Path(job.out) / f"part-{index}"
    if part.exists():
        return {"index": index, "skipped": True}
    if tools.get("crash_at") == index:
        raise RuntimeError(f"crash in part {index}")
    part.write_text(str(index))
    tools.setdefault("ran", []).append(index)
    return {"index": index}


def _finalize(job: CountJob, results: list[dict], seconds: float) -> dict:
    summary = {"parts": len(results), "skipped": sum(bool(r.get("skipped")) for r in results)}
    (Path(job.out) / "done.json").write_text(json.dumps(summary))
    return summary


COUNT = Stage(
    name="count",
    unit="part",
    prepare=_prepare,
    part_sizes=lambda job: [1] * job.parts,
    run_part=_run_part,
    finalize=_finalize,
    total=lambda job: job.parts,
)


@pytest.fixture
def recorder() -> Recorder:
    rec = Recorder()
    progress.set_reporter(rec)
    yield rec
    progress.set_reporter(None)


def test_a_crashed_stage_resumes_at_its_first_unfinished_part(
    tmp_path: Path, recorder: Recorder
) -> None:
    job = CountJob(str(tmp_path / "out"), 4)
    tools: dict = {"crash_at": 2}
    with pytest.raises(RuntimeError, match="crash in part 2"):
        run_stage(COUNT, lambda: job, workdir=tmp_path, tools=tools, label="x count")
    assert tools["ran"] == [0, 1] and not (tmp_path / "out" / "done.json").exists()

    tools = {}
    recorder.events.clear()
    summary = run_stage(COUNT, lambda: job, workdir=tmp_path, tools=tools, label="x count")
    assert tools["ran"] == [2, 3] and summary == {"parts": 4, "skipped": 2}
    # serial_parts (the default) reports each part as it finishes, skipped ones included
    assert recorder.events == [("stage", "x count", 4, "part")] + [("advance", 1)] * 4

    again = run_stage(COUNT, lambda: job, workdir=tmp_path, tools={}, label="x count")
    assert again["stored"] is True  # done: no part runs
    assert recorder.events[-1] == ("stage", "x count (up to date)", 0, "part")

    forced = run_stage(COUNT, lambda: job, workdir=tmp_path, tools={}, label="x", force=True)
    assert forced == {"parts": 4, "skipped": 4}  # the stage's own parts decide what is redone


def test_the_driver_recovers_then_plans_under_the_stage_lock(tmp_path: Path) -> None:
    order: list[str] = []
    stage = Stage(
        name="count",
        unit=None,
        prepare=lambda job, force: order.append("prepare") or None,
        part_sizes=lambda job: [0],
        run_part=lambda job, index, tools: order.append("part") or "result",
        finalize=lambda job, results, seconds: order.append("finalize") or results[0],
        recover=lambda workdir: order.append(f"recover {workdir == tmp_path}") or [],
    )

    def plan() -> str:
        order.append("plan")
        assert (tmp_path / "locks" / "count.lock").exists()
        return "job"

    assert run_stage(stage, plan, workdir=tmp_path, tools=None, label="x") == "result"
    assert order == ["recover True", "plan", "prepare", "part", "finalize"]


def test_a_second_writer_of_a_stage_waits(tmp_path: Path) -> None:
    entered = threading.Event()
    release = threading.Event()
    times: dict[str, float] = {}

    def slow_part(job: CountJob, index: int, tools: dict) -> dict:
        entered.set()
        release.wait(10)
        return _run_part(job, index, tools)

    slow = Stage("count", "part", _prepare, lambda job: [1], slow_part, _finalize)
    first = threading.Thread(
        target=run_stage,
        args=(slow, lambda: CountJob(str(tmp_path / "a"), 1)),
        kwargs={"workdir": tmp_path, "tools": {}, "label": "a"},
    )
    first.start()
    assert entered.wait(10)

    def second() -> None:
        run_stage(
            COUNT, lambda: CountJob(str(tmp_path / "b"), 1), workdir=tmp_path, tools={}, label="b"
        )
        times["second_done"] = time.monotonic()

    waiter = threading.Thread(target=second)
    waiter.start()
    time.sleep(0.5)
    assert "second_done" not in times  # blocked on the stage lock
    times["released"] = time.monotonic()
    release.set()
    first.join(10)
    waiter.join(10)
    assert times["second_done"] >= times["released"]


def test_parts_can_run_elsewhere(tmp_path: Path) -> None:
    seen: list[list[int]] = []

    def mapper(stage: Stage, job: CountJob, tools: dict):  # what the flow does with Prefect
        def run(indices):
            seen.append(list(indices))
            return [stage.run_part(job, i, tools) for i in reversed(list(indices))]

        return run

    summary = run_stage(
        COUNT,
        lambda: CountJob(str(tmp_path / "out"), 3),
        workdir=tmp_path,
        tools={},
        label="x",
        map_parts=mapper,
    )
    assert seen == [[0, 1, 2]] and summary == {"parts": 3, "skipped": 0}


def test_every_stage_is_a_stage_with_its_own_lock() -> None:
    stages = [SNAPSHOT_STAGE, LABEL_STAGE, GENERATE_STAGE, LEDGER_STAGE, TEMPORAL_STAGE]
    stages.append(RELEASE_STAGE)
    assert [s.name for s in stages] == [
        "snapshot",
        "label",
        "generate",
        "ledger",
        "temporal",
        "release",
    ]
    assert all(isinstance(s, Stage) for s in stages)
    # The three with a workdir to repair after a kill say how.
    assert {s.name for s in stages if s.recover is not None} == {"ledger", "temporal", "release"}


@pytest.mark.parametrize("name", ["ledger", "temporal", "release"])
def test_a_one_part_stage_writes_its_outputs_and_marker_in_finalize(
    name: str, released_workdir: Path, tmp_path: Path
) -> None:
    """Ledger, temporal and release: their part only computes; finalize writes every
    output, the marker last (a forced run, so that there is an earlier state to keep)."""
    workdir = copy_workdir(released_workdir, tmp_path / "w")
    previous, snap = STAGE_DATES[-2:]
    cfg = scripted_config()
    stage, plan, out, marker = {
        "ledger": (
            LEDGER_STAGE,
            lambda: plan_ledger(workdir, snap, previous),
            ledger_dir(workdir, snap),
            "state.json",
        ),
        "temporal": (
            TEMPORAL_STAGE,
            lambda: plan_temporal(
                workdir, snap, max_new=200, phrasing=cfg.temporal.phrasing, c2=cfg.temporal.c2
            ),
            temporal_dir(workdir, snap),
            "state.json",
        ),
        "release": (
            RELEASE_STAGE,
            lambda: plan_release(
                workdir, snap, config=manifest_config(cfg), config_hash=cfg.stable_hash()
            ),
            release_dir(workdir, snap),
            "manifest.json",
        ),
    }[name]

    def files() -> dict[str, tuple[int, int]]:
        return {
            str(p.relative_to(out.parent)): (p.stat().st_ino, p.stat().st_mtime_ns)
            for p in out.parent.rglob("*")
        }

    before = files()

    def parts_write_nothing(stage: Stage, job, tools: Tools):
        def run(indices):
            results = [stage.run_part(job, i, tools) for i in indices]
            assert files() == before, "a part wrote into the stage's folder"
            return results

        return run

    tools = Tools(backend=ScriptedBackend(good_answer))
    run_stage(
        stage,
        plan,
        workdir=workdir,
        tools=tools,
        label=name,
        force=True,
        map_parts=parts_write_nothing,
    )
    after = files()
    written = [p for p in out.iterdir() if p.is_file()]
    assert after[f"{snap}/{marker}"] != before[f"{snap}/{marker}"]
    marker_time = (out / marker).stat().st_mtime_ns
    assert all(p.stat().st_mtime_ns <= marker_time for p in written)


def test_stage_lock_makes_a_second_writer_wait_then_fail_clearly(tmp_path: Path) -> None:
    import os
    import threading
    import time

    from pipeline.stage import StageBusyError, stage_lock

    order: list[str] = []
    held = threading.Event()

    def first() -> None:
        with stage_lock(tmp_path, "release"):
            held.set()
            time.sleep(0.6)
            order.append("first done")

    t = threading.Thread(target=first)
    t.start()
    held.wait(5)
    busy = rf"in use by another .*\(pid {os.getpid()}\)"
    with pytest.raises(StageBusyError, match=busy), stage_lock(tmp_path, "release", wait_s=0.1):
        pass
    with stage_lock(tmp_path, "release", wait_s=10):  # waits for the first to finish
        order.append("second")
    t.join()
    assert order == ["first done", "second"]
    with stage_lock(tmp_path, "ledger", wait_s=0):  # other stages are not blocked
        pass
