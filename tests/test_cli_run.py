"""``wikidrift run`` as a user runs it: a real process on the shipped sample (data/sample) with
the real local LLM server (SmolLM2-135M from its wheel, for speed). The console shows our lines
and the summary only (Prefect and llama.cpp write to log files), every release verifies, no
server outlives the command (not even a SIGKILL leaves one), and SIGTERM stops it within
seconds with a resumable state, LLM requests in flight or not."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipeline.processes import live_processes

REPO = Path(__file__).resolve().parents[1]
SERVER_MODULE = "pipeline.models.llm.llamacpp_server"

pytestmark = pytest.mark.slow


def write_config(tmp_path: Path, dates: list[str]) -> Path:
    articles = tmp_path / "articles.txt"
    articles.write_text("Andrej Karpathy\nArvind Krishna\n")
    config = tmp_path / "wikidrift.toml"
    config.write_text(
        f"""profile = "offline"
[snapshot]
source = "revisions-dir"
input = "{REPO / "data" / "sample"}"
dates = {dates!r}
articles = "{articles}"
[generation]
paragraphs_per_article = 1
# QA requests only: the 135M model rambles to the 900-token cap of a dialogue, which made
# each run 45 s longer and tests nothing the QA requests do not.
dialogue = false
[llm]
local_model = "packaged:SmolLM2-135M-Instruct"
local_parallel = 2
local_ctx = 2048
local_threads = 1
"""
    )
    return config


def env(tmp_path: Path) -> dict[str, str]:
    # One thread for torch and for llama.cpp (local_threads above): the suite's other worker
    # shares the two cores, and spinning threads on a busy core only slow both.
    return os.environ | {
        "PREFECT_HOME": str(tmp_path / "prefect"),
        "HF_HUB_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": "1",
    }


def wikidrift(*args: str) -> list[str]:
    return [sys.executable, "-m", "wikidrift.cli", *args]


def servers_of(workdir: Path) -> list[int]:
    """Running llama.cpp server processes started for ``workdir`` (its log path is in argv)."""
    return live_processes(SERVER_MODULE, str(workdir))


def prefect_servers_of(tmp_path: Path) -> list[int]:
    """Running Prefect API servers whose PREFECT_HOME lies under ``tmp_path``."""
    return live_processes("prefect.server.api.server", str(tmp_path), in_environ=True)


def start_until(command: list[str], tmp_path: Path, ready: str) -> subprocess.Popen[str]:
    """Start ``command`` and read its stderr up to the first line holding ``ready``."""
    proc = subprocess.Popen(
        command, env=env(tmp_path), stderr=subprocess.PIPE, text=True, cwd=tmp_path
    )
    assert proc.stderr is not None
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if ready in line:
            return proc
    raise AssertionError(f"never saw {ready!r}:\n{''.join(lines)}")


def requests_in_flight(workdir: Path, after: int = 0, timeout_s: float = 120) -> None:
    """Wait until the local LLM server is decoding answers for the run (its log says so past
    byte ``after``: an earlier try's lines do not count)."""
    log = workdir / "logs" / "llama-server.log"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if log.exists() and b"processing task" in log.read_bytes()[after:]:
            return
        time.sleep(0.2)
    raise AssertionError("no LLM request was being answered")


def release_digests(workdir: Path) -> dict[str, str]:
    """sha256 of every file of every release in ``workdir``."""
    releases = workdir / "releases"
    return {
        str(path.relative_to(releases)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(releases.rglob("*"))
        if path.is_file()
    }


@dataclass(frozen=True)
class Run:
    """A finished ``wikidrift run`` of two dates that nobody stopped."""

    tmp_path: Path
    workdir: Path
    done: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One real run for the module: its console is checked, and its releases are what a
    stopped and resumed run must write."""
    tmp_path = tmp_path_factory.mktemp("uninterrupted")
    workdir = tmp_path / "work"
    config = write_config(tmp_path, ["2024-01-01", "2024-06-01"])
    done = subprocess.run(
        wikidrift("run", "--config", str(config), "--workdir", str(workdir)),
        env=env(tmp_path),
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return Run(tmp_path, workdir, done)


def test_run_builds_verified_releases_and_keeps_the_console_clean(uninterrupted: Run) -> None:
    tmp_path, workdir, done = uninterrupted.tmp_path, uninterrupted.workdir, uninterrupted.done
    for date in ("2024-01-01", "2024-06-01"):
        assert f"wikidrift-{date}" in done.stdout
    assert "QA pairs" in done.stdout and "growth plot:" in done.stdout
    console = done.stdout + done.stderr
    chatter_words = ("Traceback", "slot ", "llama_", "flow run", "prefect", "Loading weights",
                     "Error logging")  # fmt: skip
    for chatter in chatter_words:
        assert chatter not in console, f"{chatter!r} on the console:\n{console[-2000:]}"
    assert "local LLM SmolLM2-135M-Instruct ready at http://127.0.0.1:" in done.stderr
    # one line per finished stage (no terminal here, so no bars)
    assert "2024-01-01 snapshot: 2 articles in " in done.stderr
    assert "2024-06-01 generate" in done.stderr  # (no requests: nothing new to ask about)
    assert "prefect.flow_runs" in (workdir / "logs" / "run.log").read_text()
    assert "listening on" in (workdir / "logs" / "llama-server.log").read_text()
    for date in ("2024-01-01", "2024-06-01"):
        verify = subprocess.run(
            wikidrift("verify", "--release", date, "--workdir", str(workdir)),
            env=env(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert verify.returncode == 0, verify.stdout + verify.stderr
    assert servers_of(workdir) == []


def test_sigkill_then_sigterm_leave_nothing_and_the_rerun_writes_the_same_release(
    tmp_path: Path, uninterrupted: Run
) -> None:
    """What a scheduler does, while LLM requests are being answered: SIGKILL (nothing may
    outlive it), then on the next try SIGTERM (exit 143 within 10 s, nothing left); the third
    try resumes and ends with the very release bytes of a run nobody stopped."""
    workdir = tmp_path / "work"
    config = write_config(tmp_path, ["2024-01-01", "2024-06-01"])
    command = wikidrift("run", "--config", str(config), "--workdir", str(workdir))
    proc = start_until(command, tmp_path, "ready at")
    requests_in_flight(workdir)
    proc.kill()
    proc.wait(timeout=10)
    deadline = time.monotonic() + 5
    while (servers_of(workdir) or prefect_servers_of(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert servers_of(workdir) == [] and prefect_servers_of(tmp_path) == []

    seen = (workdir / "logs" / "llama-server.log").stat().st_size
    proc = start_until(command, tmp_path, "ready at")
    assert servers_of(workdir) and prefect_servers_of(tmp_path)
    requests_in_flight(workdir, after=seen)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=30)
    waited = time.monotonic() - sent
    assert proc.stderr is not None
    rest = proc.stderr.read()
    assert code == 143, rest
    assert waited < 10 and "terminated; finished work is kept" in rest
    assert servers_of(workdir) == [] and prefect_servers_of(tmp_path) == []

    again = subprocess.run(command, env=env(tmp_path), capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "wikidrift-2024-06-01" in again.stdout
    assert release_digests(workdir) == release_digests(uninterrupted.workdir)
