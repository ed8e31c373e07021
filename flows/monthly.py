"""Prefect flows: one release per snapshot date, on a schedule, resumable, scaling out on Dask.

The flows only wire ``pipeline`` functions together. Each heavy stage is planned as shards of
articles (``snapshot.shard_size``); one task per shard fans out on the task runner (threads in
one process by default, a Dask cluster with ``flow.task_runner = "dask"``). Tasks receive plain
data (the config as a dict, job descriptions, shard indices), never live models: each worker
process builds its models once and keeps them.

Every stage is idempotent on its own: a shard whose output exists for the same inputs is
skipped, a stage whose digest of inputs (snapshot files, labels, prompt hashes, model ids,
config) is unchanged is not redone, and every LLM answer is cached as it arrives. A crashed
run therefore resumes where it stopped without paying twice, and a changed prompt, model or
threshold rebuilds only the stages it affects and writes a new revision of the release.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from pipeline import progress
from pipeline.config import Config
from pipeline.errors import ConfigError, UnknownHostError
from pipeline.generate.stage import GENERATE_STAGE, plan_generation
from pipeline.labeling.stage import LABEL_STAGE, make_labeler, plan_labels
from pipeline.layout import claim_workdir, previous_release
from pipeline.ledger import update_ledger
from pipeline.release import build_release, manifest_config
from pipeline.snapshot import SNAPSHOT_STAGE, plan_snapshot
from pipeline.stage import PartMapper, Stage, Tools, run_stage

# --------------------------------------------------------------------------- per-worker models


class _Runtime:
    """The models of one config in one worker thread, built lazily and kept for the process."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.workdir = Path(cfg.workdir)
        self._parts: dict[str, Any] = {}

    def _get(self, name: str, build: Any) -> Any:
        if name not in self._parts:
            self._parts[name] = build()
        return self._parts[name]

    @property
    def splitter(self) -> Any:
        from pipeline.text import SentenceSplitter

        cfg = self.cfg
        return self._get(
            "splitter",
            lambda: SentenceSplitter(cfg.text.spacy_model or None, batch_size=cfg.text.batch_size),
        )

    @property
    def embedder(self) -> Any:
        from pipeline.runtime import base_embedder

        return self._get("embedder", lambda: base_embedder(self.cfg))

    @property
    def cached_embedder(self) -> Any:
        from pipeline.runtime import cached_embedder

        return self._get("cached_embedder", lambda: cached_embedder(self.embedder, self.workdir))

    @property
    def llm(self) -> Any:
        from pipeline.runtime import llm_from_config

        return self._get("llm", lambda: llm_from_config(self.cfg, self.workdir))

    @property
    def labeler(self) -> Any:
        from pipeline.runtime import checker_from_config, judge_from_config

        return self._get(
            "labeler",
            lambda: make_labeler(
                self.cfg,
                self.workdir,
                embedder=self.embedder,
                checker=checker_from_config(self.cfg, self.llm),
                judge=judge_from_config(self.cfg, self.llm),
            ),
        )

    def source(self, snapshot: str) -> Any:
        from pipeline.sources.factory import make_source

        return make_source(self.cfg, self.workdir, snapshot_date=date.fromisoformat(snapshot))[0]


# One runtime per (config, thread): spaCy pipelines and SQLite connections are not shared
# across threads, and the models are loaded once per worker thread, not once per task. Sized
# from flow.workers (and the flow's own thread), so that no worker's models are evicted and
# loaded again while the flow runs; the least recently used go first.
_RUNTIMES: OrderedDict[tuple[str, int], _Runtime] = OrderedDict()
_RUNTIMES_LOCK = threading.Lock()


def runtime(config: dict[str, Any]) -> _Runtime:
    """The models for ``config`` in the calling worker thread."""
    cfg = Config.model_validate(config)
    key = (cfg.model_dump_json(), threading.get_ident())
    with _RUNTIMES_LOCK:
        if key in _RUNTIMES:
            _RUNTIMES.move_to_end(key)
            return _RUNTIMES[key]
    made = _Runtime(cfg)  # outside the lock: only this thread builds its own
    with _RUNTIMES_LOCK:
        _RUNTIMES[key] = made
        while len(_RUNTIMES) > cfg.flow.workers + 1:
            _RUNTIMES.popitem(last=False)
    return made


# --------------------------------------------------------------------------- stage parts

STAGES: dict[str, Stage] = {s.name: s for s in (SNAPSHOT_STAGE, LABEL_STAGE, GENERATE_STAGE)}


# How a worker's runtime makes each field of Tools.
_TOOL_MAKERS: dict[str, Callable[[_Runtime, Any], Any]] = {
    "source": lambda rt, job: rt.source(job.snapshot),
    "splitter": lambda rt, job: rt.splitter,
    "labeler": lambda rt, job: rt.labeler,
    "backend": lambda rt, job: rt.llm.backend,
    "embedder": lambda rt, job: rt.cached_embedder,
    "generation": lambda rt, job: rt.cfg.generation,
}


def stage_tools(rt: _Runtime, stage: str, job: Any) -> Tools:
    """What the parts of ``stage`` work with (the tools it names), from a worker's runtime."""
    return Tools(**{name: _TOOL_MAKERS[name](rt, job) for name in STAGES[stage].tools})


@task(name="stage-part", cache_policy=NO_CACHE)
def stage_part(config: dict[str, Any], stage: str, job: Any, index: int) -> Any:
    """Run one part (a shard of articles) of a stage in a worker; its models are the
    worker's own. A part whose output exists is skipped."""
    found = STAGES[stage]
    result = found.run_part(job, index, stage_tools(runtime(config), stage, job))
    progress.advance(found.part_sizes(job)[index])
    return result


def worth_retrying(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect retry condition for network tasks: not when retrying cannot help (a host that
    does not resolve, a bad config value)."""
    try:
        exc = state.result(raise_on_failure=False)
    except Exception:  # the result could not be read back: keep the retry policy
        return True
    return not isinstance(exc, UnknownHostError | ConfigError)


def prefect_parts(config: dict[str, Any], *, network_retries: int = 0) -> PartMapper:
    """Fan a stage's parts out as one Prefect task each (threads, or a Dask cluster), with
    ``network_retries`` retries for parts that fetch over the network."""

    def mapper(stage: Stage, job: Any, tools: Any) -> Any:
        options: dict[str, Any] = {"name": f"{stage.name}-shard"}
        if network_retries:
            options |= {
                "retries": network_retries,
                "retry_delay_seconds": [10, 60, 300],
                "retry_condition_fn": worth_retrying,
            }
        part = stage_part.with_options(**options)

        def run(indices: Any) -> list[Any]:
            futures = [part.submit(config, stage.name, job, i) for i in indices]
            return [f.result() for f in futures]

        return run

    return mapper


def _run(config: dict[str, Any], stage: Stage, plan: Any, label: str, **options: Any) -> Any:
    """Run ``stage`` through the one driver, its parts as Prefect tasks."""
    rt = runtime(config)
    return run_stage(
        stage,
        plan,
        workdir=rt.cfg.workdir,
        tools=None,  # the parts build their own, in their worker
        label=label,
        map_parts=prefect_parts(config, **options),
    )


# --------------------------------------------------------------------------- stages


def _snapshot_stage(cfg: Config, config: dict[str, Any], snapshot: str) -> dict[str, Any]:
    from pipeline.sources.factory import resolve_selection

    log = get_run_logger()
    started = time.monotonic()
    rt = runtime(config)
    selection = resolve_selection(cfg)
    source_description = _source_description(cfg, snapshot)
    stored = _run(
        config,
        SNAPSHOT_STAGE,
        lambda: plan_snapshot(
            cfg.workdir,
            snapshot,
            selection,
            splitter=rt.splitter,
            source_description=source_description,
            shard_size=cfg.snapshot.shard_size,
        ),
        f"{snapshot} snapshot",
        network_retries=cfg.flow.network_retries,
    )
    log.info("snapshot %s: %s", snapshot, stored.line())
    return {
        "articles": stored.articles,
        "sentences": stored.sentences,
        "seconds": round(time.monotonic() - started, 2),
    }


def _source_description(cfg: Config, snapshot: str) -> str:
    from pipeline.sources.factory import make_source

    return make_source(cfg, Path(cfg.workdir), snapshot_date=date.fromisoformat(snapshot))[1]


def _label_stage(config: dict[str, Any], previous: str, snapshot: str) -> dict[str, Any]:
    log = get_run_logger()
    started = time.monotonic()
    rt = runtime(config)
    stored = _run(
        config,
        LABEL_STAGE,
        lambda: plan_labels(
            rt.cfg.workdir, previous, snapshot, rt.labeler, shard_pages=rt.cfg.snapshot.shard_size
        ),
        f"{snapshot} label",
    )
    log.info("labels %s", stored.line())
    return {
        "counts": stored.counts,
        "model_calls": stored.model_calls,
        "seconds": round(time.monotonic() - started, 2),
    }


def _generate_stage(config: dict[str, Any], previous: str | None, snapshot: str) -> dict[str, Any]:
    log = get_run_logger()
    started = time.monotonic()
    rt = runtime(config)
    stored = _run(
        config,
        GENERATE_STAGE,
        lambda: plan_generation(
            rt.cfg.workdir,
            snapshot,
            previous=previous,
            backend=rt.llm.backend,
            embedder=rt.cached_embedder,
            cfg=rt.cfg.generation,
            shard_pages=rt.cfg.snapshot.shard_size,
        ),
        f"{snapshot} generate",
    )
    log.info("generate %s", stored.line())
    return {
        "counts": stored.counts,
        "llm": stored.llm,
        "seconds": round(time.monotonic() - started, 2),
    }


@task(name="ledger", cache_policy=NO_CACHE)
def ledger_task(config: dict[str, Any], snapshot: str, previous: str | None) -> str:
    """Maintain the item ledger (keep / retire / supersede) and add the new items."""
    return update_ledger(Config.model_validate(config).workdir, snapshot, previous).line()


@task(name="temporal", cache_policy=NO_CACHE)
def temporal_task(config: dict[str, Any], snapshot: str) -> str:
    """Phrase the temporal questions the ledger's facts newly allow."""
    from pipeline.temporal.stage import phrase_temporal_questions

    rt = runtime(config)
    return phrase_temporal_questions(
        rt.cfg.workdir,
        snapshot,
        rt.llm.backend,
        max_new=rt.cfg.temporal.max_new_questions,
        phrasing=rt.cfg.temporal.phrasing,
        c2=rt.cfg.temporal.c2,
    ).line()


@task(name="release", cache_policy=NO_CACHE)
def release_task(config: dict[str, Any], snapshot: str) -> dict[str, Any]:
    """Write the release; inputs that changed since an existing release make a new revision."""
    cfg = Config.model_validate(config)
    manifest = build_release(
        cfg.workdir,
        snapshot,
        config=manifest_config(cfg),
        config_hash=cfg.stable_hash(),
        revise_on_change=True,
    )
    return {
        "release_id": manifest.release_id,
        "counts": manifest.counts,
        "already_done": manifest.already_done,
    }


@task(name="export-hf", cache_policy=NO_CACHE)
def export_task(config: dict[str, Any], snapshot: str) -> str:
    """Export the release in the Hugging Face datasets layout."""
    from pipeline.export_hf import export_hf

    cfg = Config.model_validate(config)
    out = Path(cfg.flow.export_hf_dir) / snapshot
    if out.exists() and any(out.iterdir()):
        return str(out)
    return str(export_hf(cfg.workdir, snapshot, out))


# --------------------------------------------------------------------------- the LLM

# What to call once, just before the first stage that may ask the LLM (labeling's update
# judge, generation): ``wikidrift run`` starts its local server there, so a snapshot that
# fails first (offline, a bad source) never waits for a model to load.
_LLM_STARTERS: list[Callable[[], None]] = []


def start_llm_before_first_use(starter: Callable[[], None] | None) -> None:
    """Register ``starter`` (None: drop the one registered) to be called once, before the
    first stage of a flow run in this process that may need the LLM."""
    _LLM_STARTERS.clear()
    if starter is not None:
        _LLM_STARTERS.append(starter)


def _llm_may_be_needed() -> None:
    while _LLM_STARTERS:
        _LLM_STARTERS.pop()()


# --------------------------------------------------------------------------- flows


def _release_for(config: dict[str, Any], snapshot: str, previous: str | None) -> dict[str, Any]:
    log = get_run_logger()
    cfg = Config.model_validate(config)
    claim_workdir(cfg.workdir)  # a workdir laid out by a newer wikidrift is refused here
    # Every stage runs under the workdir's lock for it (pipeline.stage.run_stage, shared with
    # the CLI commands): a second writer of the stage waits.
    stages: dict[str, Any] = {}
    stages["snapshot"] = _snapshot_stage(cfg, config, snapshot)
    _llm_may_be_needed()
    if previous is not None:
        stages["label"] = _label_stage(config, previous, snapshot)
    stages["generate"] = _generate_stage(config, previous, snapshot)
    stages["ledger"] = ledger_task(config, snapshot, previous)
    if cfg.temporal.questions:
        stages["temporal"] = temporal_task(config, snapshot)
    stages["release"] = release_task(config, snapshot)
    if cfg.flow.export_hf_dir:
        stages["export_hf"] = export_task(config, snapshot)
    log.info("release %s: %s", snapshot, stages["release"])
    return stages


@flow(name="wikidrift-initial", log_prints=True)
def initial_flow(snapshot: str, config: dict[str, Any]) -> dict[str, Any]:
    """The first release: snapshot -> initial QA / dialogues / quadruples -> release."""
    return _release_for(config, snapshot, None)


@flow(name="wikidrift-monthly", log_prints=True)
def monthly_flow(
    snapshot: str | None = None, previous: str | None = None, config: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One month: snapshot -> labels against the previous release's snapshot -> maintenance
    -> generation -> validation -> release (-> Hugging Face export). ``snapshot`` defaults to
    today (UTC) so a schedule needs no parameters; ``previous`` to the latest older release
    (none: this is the initial release)."""
    from pipeline.config import load_config

    cfg = Config.model_validate(config) if config is not None else load_config()
    config = cfg.model_dump(mode="json")
    snapshot = snapshot or date.today().isoformat()
    previous = previous or previous_release(cfg.workdir, snapshot)
    return _release_for(config, snapshot, previous)


def monthly_dates(start: str, end: str) -> list[str]:
    """Snapshot dates from ``start`` to ``end`` inclusive, one a month on ``start``'s day."""
    first, last = date.fromisoformat(start), date.fromisoformat(end)
    if first > last:
        raise ValueError(f"backfill range is empty: {start} > {end}")
    out, current = [], first
    while current <= last:
        out.append(current.isoformat())
        month = current.month % 12 + 1
        year = current.year + (current.month == 12)
        current = current.replace(year=year, month=month, day=min(current.day, 28))
    return out


@flow(name="wikidrift-run", log_prints=True)
def run_flow(dates: list[str], config: dict[str, Any]) -> dict[str, Any]:
    """Releases for ``dates`` in order, each against the release before it."""
    return _run_dates(config, dates)


@flow(name="wikidrift-backfill", log_prints=True)
def backfill_flow(start: str, end: str, config: dict[str, Any]) -> dict[str, Any]:
    """Every monthly snapshot date in ``start..end``, in order, each against the one before."""
    return _run_dates(config, monthly_dates(start, end))


def _run_dates(config: dict[str, Any], dates: list[str]) -> dict[str, Any]:
    workdir = Config.model_validate(config).workdir
    results = {}
    for snapshot in sorted(dates):
        results[snapshot] = _release_for(config, snapshot, previous_release(workdir, snapshot))
    return results
