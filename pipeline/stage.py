"""The one stage contract and the one driver that runs every stage.

A stage (snapshot, label, generate, ledger, temporal, release) is described by a
:class:`Stage`: how to tell that a planned job is already done (``prepare``: the stored
summary when the job's inputs digest matches its done-marker and the outputs are intact, else
None after setting up the work area), which parts the job has, how to run one part, and how to
finalize (merge the parts, write the done-marker last: never a part). The sharded stages
(snapshot, label, generate) share that plumbing through :class:`pipeline.shards.ShardedFolder`.
A *job* is plain data (a frozen dataclass naming the workdir, the dates and the digest of the
input files and settings), so a Prefect or Dask worker can receive it.

:func:`run_stage` is the only loop: under the workdir's lock for the stage it repairs what a
killed run left, plans the job, skips it when done, reports progress, runs the unfinished
parts (one after another, or through ``map_parts``: the Prefect flow fans them out as tasks)
and finalizes. Parts are resumable on their own: a part whose output exists is skipped.

What a part works with (the sentence splitter, the labeler, the LLM backend, ...) comes in
``tools``: built once per process for a run here (:class:`Tools`), or once per worker thread
by the flow; never shipped inside a job.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pipeline import progress
from pipeline.errors import WikidriftError
from pipeline.layout import locks_dir

if TYPE_CHECKING:  # annotations only: the stages import this module
    from pipeline.config import GenerationConfig
    from pipeline.labeling.align import SentenceLabeler
    from pipeline.models.embedder import Embedder
    from pipeline.models.llm.base import LLMBackend
    from pipeline.sources import SnapshotSource
    from pipeline.text import SentenceSplitter

log = logging.getLogger(__name__)

Job = TypeVar("Job")
Summary = TypeVar("Summary")


class StageBusyError(WikidriftError):
    """Another process holds the lock of a workdir stage for longer than we wait."""


@contextmanager
def stage_lock(workdir: str | Path, stage: str, *, wait_s: float = 600.0) -> Iterator[None]:
    """Hold ``<workdir>/locks/<stage>.lock`` (an exclusive ``flock``) for the block, so two
    writers of one stage (two processes, or two threads) never publish at the same time. A
    second writer waits up to ``wait_s`` seconds, then fails with one clear message. The
    kernel drops the lock when its holder dies, so a killed run never blocks the next one.
    On a read-only workdir nobody can write, so there is nothing to lock: the block runs."""
    path = locks_dir(workdir) / f"{stage}.lock"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            yield
            return
        raise
    try:
        deadline = time.monotonic() + wait_s
        waiting = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = _lock_holder(fd)
                if time.monotonic() >= deadline:
                    raise StageBusyError(
                        f"the {stage} stage of {workdir} is in use by another wikidrift process"
                        f"{holder}; wait for it to finish (or stop it), then run this again"
                    ) from None
                if not waiting:
                    log.warning("waiting for another wikidrift process%s (%s)", holder, stage)
                    waiting = True
                time.sleep(0.2)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _lock_holder(fd: int) -> str:
    try:
        pid = os.pread(fd, 32, 0).decode().strip()
    except OSError:
        return ""
    return f" (pid {pid})" if pid.isdigit() else ""


def job_digest(blob: Any) -> str:
    """The digest a job is known by: sha256 of what decides its output (its input files'
    sha256 and its settings), as sorted JSON, 16 hex digits."""
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class Tools:
    """What the parts of a stage work with (the ones a stage does not use stay None)."""

    source: SnapshotSource | None = None  # snapshot
    splitter: SentenceSplitter | None = None  # snapshot
    labeler: SentenceLabeler | None = None  # label
    backend: LLMBackend | None = None  # generate, temporal
    embedder: Embedder | None = None  # generate
    generation: GenerationConfig | None = None  # generate
    notes: Callable[[str], None] | None = None  # receives a note per step of a part


@dataclass(frozen=True)
class Stage(Generic[Job, Summary]):
    """One stage as the driver sees it."""

    name: str  # its lock and its word in progress labels
    unit: str | None  # what its progress counts (None: a quick step, no progress line)
    prepare: Callable[[Job, bool], Summary | None]  # (job, force) -> stored summary or None
    part_sizes: Callable[[Job], list[int]]  # one entry per part: progress units it finishes
    run_part: Callable[[Job, int, Tools], Any]  # (job, index, tools) -> the part's result
    finalize: Callable[[Job, list[Any], float], Summary]  # (job, part results, seconds)
    total: Callable[[Job], int | None] = lambda job: 0  # progress units planned (None: unknown)
    recover: Callable[[Path], list[str]] | None = None  # repairs a killed run (under the lock)
    tools: tuple[str, ...] = ()  # the fields of Tools its parts use (a worker builds those)


def serial_parts(stage: Stage, job: Any, tools: Tools) -> Callable[[Sequence[int]], list[Any]]:
    """Run parts one after another in this process, reporting each part's progress."""
    sizes = stage.part_sizes(job)

    def run(indices: Sequence[int]) -> list[Any]:
        results = []
        for index in indices:
            results.append(stage.run_part(job, index, tools))
            progress.advance(sizes[index])
        return results

    return run


PartMapper = Callable[[Stage, Any, Tools], Callable[[Sequence[int]], list[Any]]]


def run_stage(
    stage: Stage[Job, Summary],
    plan: Callable[[], Job],
    *,
    workdir: str | Path,
    tools: Tools,
    label: str,
    force: bool = False,
    map_parts: PartMapper = serial_parts,
) -> Summary:
    """Run one stage to completion, or return its stored summary when its job is done.

    Under the workdir's lock for ``stage.name`` (a second writer waits): repair what a killed
    run left, plan the job (``plan``), check whether it is done, report ``label`` and the
    job's planned units to :mod:`pipeline.progress`, run every part (``map_parts`` decides
    where) and finalize. ``force`` redoes a job that is done."""
    started = time.monotonic()
    with stage_lock(workdir, stage.name):
        if stage.recover is not None:
            stage.recover(Path(workdir))
        job = plan()
        stored = stage.prepare(job, force)
        if stored is not None:
            if stage.unit is not None:
                progress.stage(f"{label} (up to date)", 0, stage.unit)
            return stored
        if stage.unit is not None:
            progress.stage(label, stage.total(job), stage.unit)
        n_parts = len(stage.part_sizes(job))
        results = map_parts(stage, job, tools)(range(n_parts))
        return stage.finalize(job, results, time.monotonic() - started)
