"""The Prefect API server of ``wikidrift run``: it answers, stops, and dies with its parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flows.prefect_server import API_URL_ENV, PrefectServer, start_prefect_server

pytestmark = pytest.mark.slow  # starts uvicorn with Prefect's app

REPO = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


def test_the_server_answers_and_stops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    server = PrefectServer(tmp_path / "logs" / "prefect-server.log")
    server.start(timeout_s=120)
    try:
        assert server._healthy() and server.api_url.startswith("http://127.0.0.1:")
        assert server.process is not None
        pid = server.process.pid
    finally:
        server.stop()
    assert not _alive(pid) and not server._healthy()
    server.stop()  # idempotent


def test_nothing_is_started_when_a_server_is_named_or_prefect_is_loaded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(API_URL_ENV, "http://127.0.0.1:4200/api")
    assert start_prefect_server() is None
    monkeypatch.delenv(API_URL_ENV)
    import prefect  # noqa: F401 - loaded: it has read its settings already

    assert start_prefect_server() is None and API_URL_ENV not in os.environ


def test_the_server_dies_with_a_killed_parent(tmp_path: Path) -> None:
    """A parent started in a fresh interpreter (Prefect not loaded) starts the server, prints
    its pid, and is killed with SIGKILL: the server goes too."""
    script = (
        "import sys, time\n"
        "from flows.prefect_server import start_prefect_server\n"
        "server = start_prefect_server()\n"
        "print(server.process.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    env = os.environ | {"PREFECT_HOME": str(tmp_path / "prefect"), "PYTHONPATH": str(REPO)}
    env.pop(API_URL_ENV, None)
    parent = subprocess.Popen(
        [sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    assert parent.stdout is not None
    pid = int(parent.stdout.readline())
    assert _alive(pid)
    parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=10)
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)
