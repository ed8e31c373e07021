"""Progress of long stages, for the CLI's progress bar.

Flow tasks call :func:`report` as shards finish; the ``wikidrift run`` command installs a
reporter that advances a bar. Runs on a Dask cluster report in the worker processes, where
no reporter is installed: the flow logs carry per-stage counts and timings instead.
"""

from __future__ import annotations

from collections.abc import Callable

_reporter: Callable[[str, int], None] | None = None


def set_reporter(reporter: Callable[[str, int], None] | None) -> None:
    """Install (or remove, with None) the function called as ``reporter(stage, articles)``."""
    global _reporter
    _reporter = reporter


def report(stage: str, articles: int) -> None:
    """Tell the installed reporter that ``articles`` more articles finished ``stage``."""
    if _reporter is not None:
        _reporter(stage, articles)
