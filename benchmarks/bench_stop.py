"""How fast ``wikidrift run`` stops on SIGTERM, and what a SIGKILL leaves behind.

Runs ``wikidrift run`` on the shipped sample (``data/sample``, the ``make run`` articles, one
date, a fresh workdir each time) and signals it at seeded random points between the start and
the end of an uninterrupted run: SIGTERM ``--term`` times (seconds to exit, exit code, processes
left), then SIGKILL ``--kill`` times (processes left 5 s later: the llama.cpp server and the
Prefect API server of that run). Prints one line per signal and the worst figures.

    .venv/bin/python -m benchmarks.bench_stop [--term 10 --kill 3 --seed 1]
        [--model packaged:SmolLM2-135M-Instruct]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MARKERS = ("pipeline.models.llm.llamacpp_server", "prefect.server.api.server")


def _config(folder: Path, model: str) -> Path:
    config = folder / "wikidrift.toml"
    config.write_text(
        f"""profile = "offline"
[snapshot]
source = "revisions-dir"
input = "{REPO / "data" / "sample"}"
dates = ["2024-01-01"]
[generation]
paragraphs_per_article = 1
[llm]
local_model = "{model}"
"""
    )
    return config


def _left(folder: Path) -> list[str]:
    """Processes of a run in ``folder``: its servers (by argv) whose environment or argv
    names the folder."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().decode(errors="replace")
            environ = (proc / "environ").read_bytes().decode(errors="replace")
            state = (proc / "stat").read_text().split()[2]
        except OSError:
            continue
        if state != "Z" and str(folder) in argv + environ:
            found += [m.split(".")[-1] for m in MARKERS if m in argv]
    return found


def _start(folder: Path, config: Path) -> subprocess.Popen[bytes]:
    env = os.environ | {"PREFECT_HOME": str(folder / "prefect"), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "wikidrift.cli", "run", "--config", str(config)]
    return subprocess.Popen(
        [*command, "--workdir", str(folder / "work")],
        env=env,
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--term", type=int, default=10)
    parser.add_argument("--kill", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--model", default="packaged:SmolLM2-135M-Instruct")
    args = parser.parse_args()
    rng = random.Random(args.seed)

    with tempfile.TemporaryDirectory(prefix="bench_stop_") as tmp:
        base = Path(tmp)
        full = base / "full"
        full.mkdir()
        t0 = time.monotonic()
        code = _start(full, _config(full, args.model)).wait()
        length = time.monotonic() - t0
        print(f"uninterrupted run: {length:.0f}s, exit {code}", flush=True)
        worst_exit, worst_left = 0.0, 0
        for n, sig in enumerate([signal.SIGTERM] * args.term + [signal.SIGKILL] * args.kill):
            folder = base / f"run{n}"
            folder.mkdir()
            proc = _start(folder, _config(folder, args.model))
            at = rng.uniform(2.0, max(3.0, length - 2.0))
            time.sleep(at)
            if proc.poll() is not None:
                print(f"{sig.name} at {at:.1f}s: the run had finished", flush=True)
                continue
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
            print(
                f"{sig.name} at {at:.1f}s: exit {code} after {took:.2f}s, left {left or 'none'}",
                flush=True,
            )
            if sig == signal.SIGTERM:
                worst_exit = max(worst_exit, took)
            worst_left = max(worst_left, len(left))
        print(f"worst SIGTERM exit: {worst_exit:.2f}s; most processes left: {worst_left}")


if __name__ == "__main__":
    main()
