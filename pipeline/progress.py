"""Progress of long stages: the library reports, whoever runs it draws.

Stages call :func:`stage` when they start (a label such as ``2024-06-01 generate``, a total
and a unit), :func:`add_total` when more work is planned (the LLM requests of each shard) and
:func:`advance` as units finish (articles, answered requests). Nothing is drawn unless a
reporter is installed with :func:`set_reporter`: the ``wikidrift`` CLI installs
:class:`ConsoleProgress`, one bar per stage on stderr with a rate and an ETA. Reports come
from worker threads; on a Dask cluster they happen in other processes and are not shown.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Protocol


class Reporter(Protocol):
    """Receives progress reports."""

    def stage(self, label: str, total: int | None, unit: str) -> None:
        """A stage starts (``total`` None = unknown)."""

    def add_total(self, n: int) -> None:
        """``n`` more units of work were planned in the current stage."""

    def advance(self, n: int = 1) -> None:
        """``n`` units of the current stage finished."""


_reporter: Reporter | None = None
_BAR = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} {unit}s [{elapsed}<{remaining}]"


def set_reporter(reporter: Reporter | None) -> None:
    """Install (or remove, with None) the reporter."""
    global _reporter
    _reporter = reporter


def stage(label: str, total: int | None = None, unit: str = "article") -> None:
    """Report that a stage starts."""
    if _reporter is not None:
        _reporter.stage(label, total, unit)


def add_total(n: int) -> None:
    """Report ``n`` more planned units in the current stage."""
    if _reporter is not None and n:
        _reporter.add_total(n)


def note(line: str) -> None:
    """Show one line between stages (the stage before it is finished first, so its line
    comes first); without a reporter, or one that draws no lines, it goes to stderr."""
    show = getattr(_reporter, "note", None)
    if show is not None:
        show(line)
        return
    # write(), not print(): a Prefect flow with log_prints turns print() into log records
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def advance(n: int = 1) -> None:
    """Report ``n`` finished units in the current stage."""
    if _reporter is not None and n:
        _reporter.advance(n)


class ConsoleProgress:
    """One tqdm bar per stage on a terminal (a finished stage stays on screen as one line);
    elsewhere (a pipe, a CI log) one plain line when a stage ends, with its count and time."""

    def __init__(self, file: Any = None, *, bars: bool | None = None) -> None:
        self.file = file or sys.stderr
        isatty = getattr(self.file, "isatty", None)
        self.bars = bars if bars is not None else bool(isatty and isatty())
        self._bar: Any = None
        self._line: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def stage(self, label: str, total: int | None, unit: str) -> None:
        with self._lock:
            self._close()
            if not self.bars:
                self._line = {"label": label, "unit": unit, "n": 0, "start": time.monotonic()}
                return
            from tqdm import tqdm

            self._bar = tqdm(
                total=total,
                desc=label,
                unit=unit,
                file=self.file,
                dynamic_ncols=True,
                bar_format=_BAR if total else None,
            )

    def add_total(self, n: int) -> None:
        with self._lock:
            if self._bar is not None:
                self._bar.total = (self._bar.total or 0) + n
                self._bar.bar_format = _BAR
                self._bar.refresh()

    def advance(self, n: int = 1) -> None:
        with self._lock:
            if self._bar is not None:
                self._bar.update(n)
            elif self._line is not None:
                self._line["n"] += n

    def _close(self, finished: bool = True) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self._line is not None:
            line, self._line = self._line, None
            if not finished:
                return  # the error that stopped it is the line to read
            took = time.monotonic() - line["start"]
            done = f": {line['n']} {line['unit']}s" if line["n"] else ""
            # write(), not print(): a Prefect flow with log_prints turns print() into log records
            self.file.write(f"{line['label']}{done} in {took:.0f}s\n")
            self.file.flush()

    def note(self, line: str) -> None:
        """Finish the current stage, then show ``line``."""
        with self._lock:
            self._close()
            self.file.write(line + "\n")
            self.file.flush()

    def close(self, *, finished: bool = True) -> None:
        """Finish the last stage (one that did not finish prints no "done" line)."""
        with self._lock:
            self._close(finished)
