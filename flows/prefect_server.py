"""The Prefect API server of one ``wikidrift run``, started so that it dies with the command.

Without ``PREFECT_API_URL`` Prefect starts a temporary server (uvicorn in a child process) on
first use and stops it at exit; a ``kill -9`` of wikidrift skips that and leaves the server
running, re-parented to init (about 230 MB each, one more per killed run). Here the same
server is started by wikidrift itself, with Linux's parent-death signal set in the child, and
announced through ``PREFECT_API_URL``: Prefect then uses it instead of starting its own, and
no kill of the command leaves it behind. A user's own ``PREFECT_API_URL`` (a real Prefect
server) is left alone.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import os
import queue
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO

from pipeline.errors import WikidriftError
from pipeline.processes import die_with_parent

API_URL_ENV = "PREFECT_API_URL"
# What Prefect's own temporary server runs with (prefect.server.api.server,
# SubprocessASGIServer): no UI, an ephemeral, final database setup.
_SERVER_ENV = {
    "PREFECT_UI_ENABLED": "0",
    "PREFECT__SERVER_EPHEMERAL": "1",
    "PREFECT__SERVER_FINAL": "1",
}
_STOP_GRACE_S = 5.0


def _free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _prefect_folder() -> Path:
    spec = importlib.util.find_spec("prefect")
    if spec is None or not spec.submodule_search_locations:
        raise WikidriftError("prefect is not installed")
    return Path(list(spec.submodule_search_locations)[0])


class PrefectServer:
    """One Prefect API server process on 127.0.0.1 (start, health, stop)."""

    def __init__(self, log_path: Path | None = None) -> None:
        self.log_path = log_path
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._parent_stopped: threading.Event | None = None

    @property
    def api_url(self) -> str:
        """Where Prefect's client talks to it."""
        return f"http://127.0.0.1:{self.port}/api"

    def _spawn(self) -> subprocess.Popen[bytes]:
        """Start the process from a thread of its own that lives until :meth:`stop` (or the
        end of wikidrift): the parent-death signal fires when the *thread* that started a
        child exits, and the command's own thread ends before Prefect sends its last logs."""
        if self._parent_stopped is not None:
            self._parent_stopped.set()  # an earlier try's process exited: let its thread go
        started: queue.Queue[subprocess.Popen[bytes] | BaseException] = queue.Queue()
        stopped = threading.Event()

        def parent() -> None:
            try:
                started.put(self._popen())
            except BaseException as exc:  # noqa: BLE001 - raised again by the caller
                started.put(exc)
                return
            stopped.wait()

        threading.Thread(target=parent, name="prefect-server-parent", daemon=True).start()
        self._parent_stopped = stopped
        result = started.get()
        if isinstance(result, BaseException):
            raise result
        return result

    def _popen(self) -> subprocess.Popen[bytes]:
        log: IO[bytes] | int = subprocess.DEVNULL
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            log = self.log_path.open("ab")
        try:
            return subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "uvicorn",
                    "--app-dir",
                    str(_prefect_folder().parent),
                    "--factory",
                    "prefect.server.api.server:create_app",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--log-level",
                    "error",
                    "--lifespan",
                    "on",
                ],  # fmt: skip
                env=os.environ | _SERVER_ENV,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                preexec_fn=die_with_parent,  # noqa: PLW1509 - only prctl, before exec
                # Its own process group: Ctrl-C in a terminal reaches wikidrift, which stops
                # the server itself, after the flow.
                start_new_session=True,
            )
        finally:
            if not isinstance(log, int):
                log.close()

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.api_url}/health", timeout=2) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def start(self, timeout_s: float = 60.0) -> None:
        """Start it and wait until ``/api/health`` answers; a port taken meanwhile by another
        process is replaced by a fresh one."""
        deadline = time.monotonic() + timeout_s
        for _attempt in range(3):
            self.port = _free_port()
            self.process = self._spawn()
            while time.monotonic() < deadline:
                if self._healthy():
                    # Registered before Prefect is imported, so it runs after Prefect's own exit
                    # handlers, which send the last log records to this server.
                    atexit.register(self.stop)
                    return
                if self.process.poll() is not None:
                    break  # exited (port taken, broken install): try again or give up
                time.sleep(0.1)
            else:
                break
        code = self.process.poll() if self.process is not None else None
        self.stop()
        where = f"; see {self.log_path}" if self.log_path else ""
        state = f"exited with code {code}" if code is not None else f"no answer in {timeout_s:.0f}s"
        raise WikidriftError(f"the Prefect API server did not start ({state}{where})")

    def stop(self, grace_s: float = _STOP_GRACE_S) -> None:
        """Stop it (idempotent): SIGTERM, then SIGKILL after ``grace_s`` (at once with 0)."""
        with self._lock:
            process, self.process = self.process, None
            parent, self._parent_stopped = self._parent_stopped, None
        try:
            self._end(process, grace_s)
        finally:
            if parent is not None:
                parent.set()

    @staticmethod
    def _end(process: subprocess.Popen[bytes] | None, grace_s: float) -> None:
        if process is None or process.poll() is not None:
            return
        if grace_s <= 0:
            process.kill()
            process.wait()
            return
        process.terminate()
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


_current: PrefectServer | None = None


def start_prefect_server(log_path: Path | None = None) -> PrefectServer | None:
    """Start this command's Prefect API server and point Prefect at it; None (nothing
    started) when ``PREFECT_API_URL`` already names a server or Prefect is already imported.
    Call before importing Prefect, which reads its settings from the environment then."""
    global _current
    # A server is named already, or Prefect is loaded and has read its settings (a test
    # harness's server, a flow run in this process before): nothing to start.
    if os.environ.get(API_URL_ENV) or "prefect" in sys.modules:
        return None
    timeout = float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "60"))
    server = PrefectServer(log_path)
    server.start(timeout)
    os.environ[API_URL_ENV] = server.api_url
    _current = server
    return server


def stop_prefect_server(grace_s: float = _STOP_GRACE_S) -> None:
    """Stop the server :func:`start_prefect_server` started, if any, and forget its address;
    ``grace_s`` 0 kills it at once (a stop on a signal: its flow-run records are not needed)."""
    global _current
    server, _current = _current, None
    if server is not None:
        server.stop(grace_s)
        if os.environ.get(API_URL_ENV) == server.api_url:
            del os.environ[API_URL_ENV]
