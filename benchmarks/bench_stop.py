"""How fast ``wikidrift run`` stops on SIGTERM, and what a SIGKILL leaves behind.

Runs ``wikidrift run`` on the shipped sample (``data/sample``, the ``make run`` articles, the
``--dates`` given, a fresh workdir each time) and signals it at seeded random points between
the start and the end of an uninterrupted run: SIGTERM ``--term`` times (seconds to exit, exit
code, processes left), then SIGKILL ``--kill`` times (processes left 5 s later: the llama.cpp
server and the Prefect API server of that run; with ``--dask`` the Dask processes too). After
each of the first ``--reruns`` signals the same command runs again to the end and its releases
are compared file by file with the uninterrupted run's. Prints one line per signal (with the
last line the run had printed: where it was) and the worst figures.

    .venv/bin/python -m benchmarks.bench_stop [--term 10 --kill 3 --seed 1 --reruns 4]
        [--dates 2024-01-01,2024-06-01] [--dask] [--model packaged:SmolLM2-135M-Instruct]
        [--at-end]   # signal within 0.3 s after the run's last console line (its teardown)
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pipeline.processes import live_processes

REPO = Path(__file__).resolve().parents[1]
MARKERS = ("pipeline.models.llm.llamacpp_server", "prefect.server.api.server", "multiprocessing")


def _config(folder: Path, args: argparse.Namespace) -> Path:
    config = folder / "wikidrift.toml"
    config.write_text(
        f"""profile = "offline"
[snapshot]
source = "revisions-dir"
input = "{REPO / "data" / "sample"}"
dates = {args.dates.split(",")!r}
[generation]
paragraphs_per_article = 1
[llm]
local_model = "{args.model}"
[flow]
task_runner = "{"dask" if args.dask else "threads"}"
"""
    )
    return config


def _left(folder: Path) -> list[str]:
    """The servers of a run in ``folder`` still alive (their environment names the folder)."""
    return [m.split(".")[-1] for m in MARKERS for _ in live_processes(m, str(folder), True)]


def _start(folder: Path, config: Path) -> subprocess.Popen[bytes]:
    """Start the run; its console lines go to ``folder/console.txt``."""
    env = os.environ | {"PREFECT_HOME": str(folder / "prefect"), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "wikidrift.cli", "run", "--config", str(config)]
    with (folder / "console.txt").open("ab") as console:
        return subprocess.Popen(
            [*command, "--workdir", str(folder / "work")],
            env=env,
            cwd=folder,
            stdout=console,
            stderr=console,
        )


_LAST_LINE = "check: wikidrift verify"


def _last_line(folder: Path) -> str:
    lines = (folder / "console.txt").read_text(errors="replace").strip().splitlines()
    return lines[-1][:70] if lines else "(nothing yet)"


def _release_digests(folder: Path) -> dict[str, str]:
    """sha256 of every file of the run's releases."""
    releases = folder / "work" / "releases"
    return {
        str(path.relative_to(releases)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(releases.rglob("*"))
        if path.is_file()
    }


def _compare(folder: Path, reference: dict[str, str]) -> str:
    digests = _release_digests(folder)
    if not digests:
        return "rerun wrote no release"
    differ = sorted(
        n for n in reference.keys() | digests.keys() if reference.get(n) != digests.get(n)
    )
    return "rerun: same release bytes" if not differ else f"rerun: differs in {', '.join(differ)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--term", type=int, default=10)
    parser.add_argument("--kill", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--model", default="packaged:SmolLM2-135M-Instruct")
    parser.add_argument("--reruns", type=int, default=4)
    parser.add_argument("--dates", default="2024-01-01", help="the run's snapshot dates")
    parser.add_argument(
        "--at-end", action="store_true", help="signal just after the run's last console line"
    )
    parser.add_argument("--dask", action="store_true", help="the flow's tasks on a Dask cluster")
    args = parser.parse_args()
    rng = random.Random(args.seed)

    with tempfile.TemporaryDirectory(prefix="bench_stop_") as tmp:
        base = Path(tmp)
        full = base / "full"
        full.mkdir()
        t0 = time.monotonic()
        code = _start(full, _config(full, args)).wait()
        length = time.monotonic() - t0
        print(f"uninterrupted run: {length:.0f}s, exit {code}", flush=True)
        reference = _release_digests(full)
        worst_exit, worst_left, identical, reruns = 0.0, 0, 0, 0
        for n, sig in enumerate([signal.SIGTERM] * args.term + [signal.SIGKILL] * args.kill):
            folder = base / f"run{n}"
            folder.mkdir()
            proc = _start(folder, _config(folder, args))
            started = time.monotonic()
            if args.at_end:  # the summary is printed; what is left is the process's exit
                while proc.poll() is None and _LAST_LINE not in _last_line(folder):
                    time.sleep(0.01)
                time.sleep(rng.uniform(0.0, 0.3))
            else:
                time.sleep(rng.uniform(2.0, max(3.0, length - 2.0)))
            at = time.monotonic() - started
            if proc.poll() is not None:
                print(f"{sig.name} at {at:.1f}s: the run had finished", flush=True)
                continue
            where = _last_line(folder)
            sent = time.monotonic()
            proc.send_signal(sig)
            try:
                code = proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
            took = time.monotonic() - sent
            if sig == signal.SIGKILL:
                time.sleep(5)
            left = _left(folder)
            rerun = ""
            if reruns < args.reruns:
                rerun_code = _start(folder, _config(folder, args)).wait()
                rerun = f"; {_compare(folder, reference)} (exit {rerun_code})"
                reruns += 1
                identical += "same release bytes" in rerun
            print(
                f"{sig.name} at {at:.1f}s (after {where!r}): exit {code} after {took:.2f}s, "
                f"left {left or 'none'}{rerun}",
                flush=True,
            )
            if sig == signal.SIGTERM:
                worst_exit = max(worst_exit, took)
            worst_left = max(worst_left, len(left))
        print(f"worst SIGTERM exit: {worst_exit:.2f}s; most processes left: {worst_left}")
        if reruns:
            print(f"reruns with the uninterrupted run's release bytes: {identical} of {reruns}")


if __name__ == "__main__":
    main()
