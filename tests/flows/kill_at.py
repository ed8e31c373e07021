"""Run the monthly flow and SIGKILL it (with the Prefect server it started) at one point of
one stage: ``python -m tests.flows.kill_at CONFIG.json STAGE:POINT:DATE DATE...`` (STAGE
``none``: run to the end).

POINT is ``part`` (right after the stage's first part of DATE finished its work) or
``finalize`` (every part done, the done-marker not yet written). Before dying it writes
``<workdir>/killed_at`` so the test can tell the kill happened where it was asked for.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from flows.runner import configure_prefect


def _date_of(job: Any) -> str | None:
    return getattr(job, "snapshot", None) or getattr(job, "new", None)


def _kill(workdir: Path, where: str) -> None:
    (workdir / "killed_at").write_text(where)
    os.killpg(os.getpgrp(), signal.SIGKILL)


def _arm(stage_name: str, point: str, date: str, workdir: Path) -> None:
    from pipeline.generate.stage import GENERATE_STAGE
    from pipeline.labeling.stage import LABEL_STAGE
    from pipeline.ledger import LEDGER_STAGE
    from pipeline.release import RELEASE_STAGE
    from pipeline.snapshot import SNAPSHOT_STAGE
    from pipeline.temporal.stage import TEMPORAL_STAGE

    stages = (SNAPSHOT_STAGE, LABEL_STAGE, GENERATE_STAGE, LEDGER_STAGE, TEMPORAL_STAGE)
    stage = {s.name: s for s in (*stages, RELEASE_STAGE)}[stage_name]
    # Stage records are frozen; every module holds the same object, so arming it here arms
    # it for the flow's tasks too.
    if point == "part":
        run_part = stage.run_part

        def part_then_kill(job: Any, index: int, tools: Any) -> Any:
            result = run_part(job, index, tools)
            if _date_of(job) == date:
                _kill(workdir, f"{stage_name}:part:{date}")
            return result

        object.__setattr__(stage, "run_part", part_then_kill)
    else:
        finalize = stage.finalize

        def kill_before_finalize(job: Any, results: Any, seconds: float) -> Any:
            if _date_of(job) == date:
                _kill(workdir, f"{stage_name}:finalize:{date}")
            return finalize(job, results, seconds)

        object.__setattr__(stage, "finalize", kill_before_finalize)


def main(argv: list[str]) -> None:
    """Arm the kill, then run the flow over the dates."""
    config = json.loads(Path(argv[0]).read_text())
    stage_name, point, date = argv[1].split(":")
    configure_prefect()
    from flows.monthly import run_flow
    from flows.runner import task_runner
    from pipeline.config import Config

    if stage_name != "none":
        _arm(stage_name, point, date, Path(config["workdir"]))
    # The runner `wikidrift run` uses (flow.workers parts at a time: one), so that no LLM
    # request is in flight when a part has finished: a killed client cannot store an answer
    # still on its way, and the rerun would rightly ask again.
    runner = task_runner(Config.model_validate(config))
    run_flow.with_options(task_runner=runner)(dates=argv[2:], config=config)


if __name__ == "__main__":
    main(sys.argv[1:])
