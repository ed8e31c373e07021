"""A local llama.cpp server (``xllamacpp``) that wikidrift starts, watches and always stops.

The server is llama.cpp's own OpenAI-compatible HTTP server, embedded in the ``xllamacpp``
wheel, run in a child process so that its verbose log goes to a file (never the console), a
crash of the native code cannot take wikidrift down with it, and stopping it always frees its
memory and port. It listens on 127.0.0.1 on a free port with several parallel slots
(continuous batching) and prompt caching; the pipeline talks to it through
:class:`~pipeline.models.llm.openai_backend.OpenAIBackend`, the same wire path as OpenAI, vLLM
or Ollama.

The child reports its address (or its load error) through a pipe once the model is loaded; the
parent then waits for ``GET /health`` to answer 200. The child dies with its parent (Linux
``PR_SET_PDEATHSIG`` plus a watchdog thread), so not even ``kill -9`` of wikidrift leaves a
server behind. One server per model is shared by every thread of a process
(:func:`shared_server`) and announced to child processes (Dask workers) in
:data:`SERVER_ENV`, so they attach to it instead of loading the model again.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pipeline.errors import WikidriftError
from pipeline.processes import die_with_parent

log = logging.getLogger(__name__)

SERVER_ENV = "WIKIDRIFT_LLM_SERVER"
_STOP_GRACE_S = 5.0


class LocalServerError(WikidriftError):
    """The local LLM server could not start, or stopped while it was needed."""


@dataclass(frozen=True)
class ServerSettings:
    """How to run one llama.cpp server."""

    model_path: str
    alias: str  # the model name clients send and items record
    parallel: int = 4  # slots decoding at once (continuous batching)
    ctx_per_slot: int = 4096  # tokens of context each slot holds (prompt + answer)
    threads: int = 0  # 0 = every CPU this process may use
    log_path: str = ""  # "" = the child's output is discarded
    startup_timeout_s: float = 300.0

    def resolved_threads(self) -> int:
        """CPU threads for decoding: the configured number, else the usable cores."""
        return self.threads or len(os.sched_getaffinity(0))


def log_tail(path: str | Path, lines: int = 5) -> str:
    """The last lines of a log file, for error messages ("" when unreadable)."""
    try:
        with Path(path).open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text.splitlines()[-lines:] if line.strip())


def health(base_url: str, timeout_s: float = 2.0) -> bool:
    """True when the server at ``base_url`` (``http://host:port/v1``) answers /health with 200."""
    root = base_url.removesuffix("/").removesuffix("/v1")
    try:
        with urllib.request.urlopen(f"{root}/health", timeout=timeout_s) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError, ValueError):
        return False


class LlamaServer:
    """One llama.cpp server child process (see the module docstring). ``start()`` returns the
    OpenAI base URL; ``stop()`` is idempotent; ``require_alive()`` raises a clear
    :class:`LocalServerError` (exit code, log tail) once the child has died."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self.base_url = ""
        self.load_seconds = 0.0
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs."""
        return self._process.pid if self._process is not None else None

    @property
    def alive(self) -> bool:
        """True while the child process runs."""
        return self._process is not None and self._process.poll() is None

    def start(self) -> str:
        """Start the server and wait until it serves; returns its ``/v1`` base URL."""
        with self._lock:
            if self.alive:
                return self.base_url
            s = self.settings
            if not Path(s.model_path).is_file():
                raise LocalServerError(f"local LLM: model file {s.model_path} does not exist")
            started = time.monotonic()
            read_fd, write_fd = os.pipe()
            log_file = self._open_log()
            try:
                self._process = subprocess.Popen(
                    [sys.executable, "-m", __name__, json.dumps(asdict(s)), str(write_fd)],
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=log_file,
                    pass_fds=(write_fd,),
                    # Its own process group: Ctrl-C in a terminal reaches wikidrift, which then
                    # stops the server in order instead of both dying at once.
                    start_new_session=True,
                    env=os.environ | {"PYTHONUNBUFFERED": "1"},
                )
            finally:
                os.close(write_fd)
                if log_file is not subprocess.DEVNULL:
                    log_file.close()
            try:
                message = self._read_ready(read_fd, started)
            except BaseException:
                self._kill()
                raise
            finally:
                os.close(read_fd)
            if "error" in message:
                self._kill()
                raise LocalServerError(
                    f"local LLM server could not load {s.model_path}: {message['error']}"
                    + self._log_hint()
                )
            self.base_url = str(message["url"]).rstrip("/") + "/v1"
            try:
                self._wait_healthy(started)
            except BaseException:
                self._kill()
                raise
            self.load_seconds = time.monotonic() - started
            log.info(
                "local LLM server %s (%d slots) on %s in %.1fs, pid %s",
                s.alias,
                s.parallel,
                self.base_url,
                self.load_seconds,
                self.pid,
            )
            return self.base_url

    def _open_log(self) -> Any:
        if not self.settings.log_path:
            return subprocess.DEVNULL
        path = Path(self.settings.log_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        return path.open("ab")

    def _log_hint(self) -> str:
        path = self.settings.log_path
        if not path:
            return ""
        tail = log_tail(path)
        return f" (log {path}" + (f": ...{tail[-400:]}" if tail else "") + ")"

    def _read_ready(self, read_fd: int, started: float) -> dict[str, Any]:
        deadline = started + self.settings.startup_timeout_s
        buffer = b""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LocalServerError(
                    f"local LLM server did not load {self.settings.alias} within "
                    f"{self.settings.startup_timeout_s:.0f}s" + self._log_hint()
                )
            ready, _, _ = select.select([read_fd], [], [], min(remaining, 0.5))
            if ready:
                chunk = os.read(read_fd, 65536)
                buffer += chunk
                if b"\n" in buffer:
                    return json.loads(buffer.split(b"\n", 1)[0])
                if chunk:
                    continue
            assert self._process is not None
            code = self._process.poll()
            if code is not None:
                raise LocalServerError(
                    f"local LLM server exited with code {code} while loading "
                    f"{self.settings.alias}" + self._log_hint()
                )

    def _wait_healthy(self, started: float) -> None:
        deadline = started + self.settings.startup_timeout_s
        while not health(self.base_url):
            self.require_alive()
            if time.monotonic() > deadline:
                raise LocalServerError(
                    f"local LLM server at {self.base_url} never became healthy" + self._log_hint()
                )
            time.sleep(0.2)

    def require_alive(self) -> None:
        """Raise :class:`LocalServerError` when the server is not running (any more)."""
        process = self._process
        if process is None:
            raise LocalServerError("local LLM server is not started")
        code = process.poll()
        if code is not None:
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
            raise LocalServerError(
                f"local LLM server {self.settings.alias} {how}" + self._log_hint() + "; "
                "answers received so far are cached: re-run the same command to resume"
            )

    def stop(self, grace_s: float = _STOP_GRACE_S) -> None:
        """Stop the server (SIGTERM, then SIGKILL after ``grace_s``; 0: SIGKILL at once) and
        reap it."""
        with self._lock:
            self._kill(grace_s)

    def _kill(self, grace_s: float = _STOP_GRACE_S) -> None:
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                if grace_s <= 0:  # busy in native code, it may not see a SIGTERM for seconds
                    process.kill()
                else:
                    process.terminate()
            try:
                process.wait(timeout=max(grace_s, 0.1))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                process.wait()
        self._process = None
        log.info("local LLM server %s stopped", self.settings.alias)

    def __enter__(self) -> LlamaServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --------------------------------------------------------------------------- process-wide

_shared: dict[ServerSettings, LlamaServer] = {}
_shared_lock = threading.Lock()


def shared_server(settings: ServerSettings) -> LlamaServer:
    """The one running server for ``settings`` in this process, started on first use and
    stopped at exit (or by :func:`stop_shared_servers`). Child processes started afterwards
    find it through :data:`SERVER_ENV`."""
    with _shared_lock:
        server = _shared.get(settings)
        if server is None or not server.alive:
            if not _shared:
                atexit.register(stop_shared_servers)
            server = LlamaServer(settings)
            _shared[settings] = server
        url = server.start()
        os.environ[SERVER_ENV] = json.dumps({"url": url, "alias": settings.alias})
        return server


def announced_server(alias: str) -> str | None:
    """The base URL of a healthy server for ``alias`` that a parent process announced."""
    raw = os.environ.get(SERVER_ENV)
    if not raw:
        return None
    try:
        info = json.loads(raw)
    except ValueError:
        return None
    url = info.get("url") if isinstance(info, dict) else None
    if info.get("alias") != alias or not url or url in {s.base_url for s in _shared.values()}:
        return None
    return str(url) if health(str(url)) else None


def stop_shared_servers(grace_s: float = _STOP_GRACE_S) -> None:
    """Stop every server this process started (idempotent; registered with atexit);
    ``grace_s`` 0 kills them at once (a stop on a signal: their answers in flight are not
    needed)."""
    with _shared_lock:
        servers = list(_shared.values())
        _shared.clear()
        os.environ.pop(SERVER_ENV, None)
    for server in servers:
        server.stop(grace_s)


# --------------------------------------------------------------------------- child process


def _watch_parent(parent: int) -> None:
    # PDEATHSIG fires when the parent *thread* exits; this covers the rest (and non-Linux).
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def _child_main(settings_json: str, ready_fd: int) -> None:
    parent = os.getppid()
    die_with_parent()
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    # The native server threads do not stop on Python exceptions: exit the process at once.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    s = ServerSettings(**json.loads(settings_json))
    with os.fdopen(ready_fd, "w") as ready:
        try:
            import xllamacpp

            params = xllamacpp.CommonParams()
            params.model.path = s.model_path
            params.model_alias = {s.alias}  # a set of names: a bare str would be split
            params.hostnames = ["127.0.0.1"]
            params.port = 0  # any free port; the server reports the one it bound
            params.n_parallel = s.parallel
            params.n_ctx = s.parallel * s.ctx_per_slot
            params.cpuparams.n_threads = s.resolved_threads()
            params.cpuparams_batch.n_threads = s.resolved_threads()
            params.cache_prompt = True
            params.cont_batching = True
            params.endpoint_metrics = True
            params.warmup = False
            server = xllamacpp.Server(params)
            ready.write(json.dumps({"url": server.listening_address}) + "\n")
        except Exception as exc:  # reported to the parent, which raises a clear error
            ready.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"}) + "\n")
            ready.flush()
            os._exit(1)
    while True:  # the server runs in native threads; this thread only waits to be stopped
        time.sleep(3600)


if __name__ == "__main__":
    _child_main(sys.argv[1], int(sys.argv[2]))
