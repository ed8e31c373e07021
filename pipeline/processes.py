"""Child processes that never outlive wikidrift."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask Linux to SIGKILL the calling process when the thread that started it exits (the
    whole parent, when that is its main thread); a no-op elsewhere. Call it in the child: as
    its first step, or as ``preexec_fn`` (the setting survives ``exec``)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def live_processes(module: str, marker: str, in_environ: bool = False) -> list[int]:
    """Pids of live (not zombie) processes whose command line holds ``module`` and whose command
    line (or, ``in_environ``, environment) holds ``marker``: how a test or a benchmark finds the
    servers a run left behind. Linux only (reads /proc); elsewhere an empty list."""
    found = []
    proc_root = Path("/proc")
    for proc in proc_root.iterdir() if proc_root.is_dir() else []:
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().decode(errors="replace")
            where = (proc / "environ").read_bytes().decode(errors="replace") if in_environ else argv
            state = (proc / "stat").read_text().split()[2]
        except OSError:
            continue
        if module in argv and marker in where and state != "Z":
            found.append(int(proc.name))
    return found


def _parent_of(stat: str) -> int:
    # /proc/PID/stat: "pid (comm) state ppid ...", where comm may hold spaces and brackets.
    return int(stat.rsplit(")", 1)[1].split()[1])


def descendants(pid: int | None = None) -> list[int]:
    """Pids of every live descendant of ``pid`` (default: this process), parents before their
    children. Linux only (reads /proc); elsewhere an empty list."""
    root = os.getpid() if pid is None else pid
    children: dict[int, list[int]] = {}
    proc_root = Path("/proc")
    for proc in proc_root.iterdir() if proc_root.is_dir() else []:
        if not proc.name.isdigit():
            continue
        try:
            children.setdefault(_parent_of((proc / "stat").read_text()), []).append(int(proc.name))
        except (OSError, ValueError, IndexError):
            continue
    found: list[int] = []
    queue = list(children.get(root, []))
    while queue:
        child = queue.pop(0)
        found.append(child)
        queue.extend(children.get(child, []))
    return found


def kill_descendants() -> None:
    """SIGKILL every descendant of this process, parents first (so none starts another): the
    last step of a stop on a signal, for helpers that do not watch their parent (a Dask
    cluster's nannies and workers, a multiprocessing resource tracker). Takes no lock: safe in
    a signal handler."""
    for pid in descendants():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
