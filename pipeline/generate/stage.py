"""The generation stage: a snapshot (and its labels against the previous one) in, candidate
benchmark items out, under ``<workdir>/generated/<snapshot>/``::

    qa.parquet          one row per kept question (new / changed)
    dialogue.parquet    one row per turn of each kept dialogue
    quadruples.parquet  one row per kept (subject, relation, object, timestamp) fact
    rejects.parquet     everything the LLM returned that was not kept, with reason and output
    run.json            counts, rejects per reason, LLM usage, digest of the inputs; last = done

First snapshot (``previous=None``), and any article absent from the previous snapshot: the
initial generation of GrowOVER §3.1: up to four selected paragraphs, each giving one QA
request, one dialogue request and one quadruple request. Later snapshots (§3.3): one QA per
group of consecutive new sentences, one changed QA per changed sentence, one dialogue per
informative paragraph holding changed / new sentences, quadruples from new and changed
sentences. All requests of one kind go to the backend in a single ``complete_many`` call, so
the backend can batch, parallelize and cache them. What each kind asks, and how its answers
are parsed and checked, is its :class:`~pipeline.generate.kinds.ItemGenerator`'s; this module
plans every registered generator's tasks, runs them shard by shard and merges the tables.

A finished run is not redone when the digest of its inputs (snapshot and label files, prompt
hashes, generation config, backend model, embedder, article filter) is unchanged.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline.config import GenerationConfig
from pipeline.errors import WikidriftError
from pipeline.generate.items import Reject, rows_table
from pipeline.generate.kinds import Batch, generation_prompt_names, item_generators
from pipeline.generate.prompts import prompt_hashes
from pipeline.generate.selection import Article, select_paragraphs
from pipeline.generate.validator import ItemValidator
from pipeline.layout import (
    done_before,
    generated_dir,
    is_complete,
    labels_dir,
    read_generated,
    read_labels,
    read_snapshot_table,
    snapshot_dir,
    verified_inputs,
)
from pipeline.markers import GenerationSummary
from pipeline.models.embedder import Embedder
from pipeline.models.llm.base import LLMBackend, LLMRequest
from pipeline.schemas import GENERATED_SCHEMA_VERSION, GENERATED_TABLES
from pipeline.shards import MergedParts, ShardedFolder, ShardedOutput, chunk_sizes, chunked
from pipeline.stage import Stage, Tools, job_digest, run_stage
from pipeline.stage_folders import GENERATION_MARKER, LABEL_MARKER

log = logging.getLogger(__name__)

# Bump when parsing / validation changes what a run keeps, so stored runs are not reused.
GENERATOR_VERSION = "generate-15"

GENERATED_FOLDER = ShardedFolder(
    GENERATION_MARKER, GenerationSummary, tuple(f"{name}.parquet" for name in GENERATED_TABLES)
)


def _inputs_digest(
    workdir: Path,
    snapshot: str,
    previous: str | None,
    backend: LLMBackend,
    embedder: Embedder,
    cfg: GenerationConfig,
    page_ids: list[int] | None,
) -> tuple[str, dict[str, str]]:
    """The digest of everything that decides the run's output, and the input files' sha256."""
    for date in (snapshot, previous):
        if date is not None and not is_complete(workdir, date):
            raise WikidriftError(
                f"no complete snapshot {date} in {workdir} (run `wikidrift snapshot`)"
            )
    if (
        previous is not None
        and not (labels_dir(workdir, previous, snapshot) / LABEL_MARKER).exists()
    ):
        raise WikidriftError(
            f"no labels {previous} -> {snapshot} in {workdir} (run `wikidrift label`)"
        )
    snap = snapshot_dir(workdir, snapshot)
    paths = [snap / "articles.parquet", snap / "sentences.parquet"]
    if previous is not None:
        paths += [
            snapshot_dir(workdir, previous) / "articles.parquet",
            labels_dir(workdir, previous, snapshot) / "sentence_labels.parquet",
        ]
    inputs = verified_inputs(workdir, paths)
    blob = {
        "version": GENERATOR_VERSION,
        "snapshot": snapshot,
        "previous": previous,
        "files": inputs,
        "prompts": prompt_hashes(generation_prompt_names()),
        "rules": {g.table: g.rules for g in item_generators() if g.rules},
        "config": cfg.model_dump(mode="json"),
        "backend": f"{backend.backend_id}:{backend.model}",
        "embedder": getattr(embedder, "model_id", type(embedder).__name__),
        "page_ids": sorted(page_ids) if page_ids is not None else None,
    }
    return job_digest(blob), inputs


def load_articles(
    workdir: str | Path, snapshot: str, page_ids: list[int] | None = None
) -> list[Article]:
    """The articles of a snapshot with their sentences, in the snapshot's article order."""
    arts = read_snapshot_table(
        workdir, snapshot, "articles", page_ids=page_ids, columns=["page_id", "title"]
    )
    sents = read_snapshot_table(
        workdir,
        snapshot,
        "sentences",
        page_ids=page_ids,
        columns=["page_id", "sent_idx", "para_idx", "section", "text"],
    ).to_pylist()
    by_page: dict[int, list[dict[str, Any]]] = {}
    for row in sents:
        by_page.setdefault(row["page_id"], []).append(row)
    articles = []
    for pid, title in zip(arts["page_id"].to_pylist(), arts["title"].to_pylist(), strict=True):
        rows = sorted(by_page.get(pid, []), key=lambda r: r["sent_idx"])
        if [r["sent_idx"] for r in rows] != list(range(len(rows))):
            raise WikidriftError(f"snapshot {snapshot}: page {pid} sentence indices are not 0..n-1")
        articles.append(
            Article(
                page_id=pid,
                title=title,
                snapshot=snapshot,
                texts=[r["text"] for r in rows],
                para_of=[r["para_idx"] for r in rows],
                section_of=[r["section"] or "" for r in rows],
            )
        )
    return articles


def attach_labels(
    workdir: str | Path, previous: str, snapshot: str, articles: list[Article]
) -> tuple[list[Article], list[Article], int]:
    """Split articles into (initial: absent from ``previous``, updated: labels attached,
    count of articles skipped for lack of labels)."""
    old_ids = set(
        read_snapshot_table(workdir, previous, "articles", columns=["page_id"])[
            "page_id"
        ].to_pylist()
    )
    labels = read_labels(
        workdir, previous, snapshot, page_ids=[a.page_id for a in articles]
    ).to_pylist()
    by_page: dict[int, list[dict[str, Any]]] = {}
    for row in labels:
        if row["new_idx"] is not None:
            by_page.setdefault(row["page_id"], []).append(row)
    initial, updated, missing = [], [], 0
    for art in articles:
        if art.page_id not in old_ids:
            initial.append(art)
            continue
        rows = by_page.get(art.page_id)
        if not rows and art.n_sentences:
            # Cannot tell new from unchanged without labels: generate nothing for this page.
            log.warning("page %s has no labels %s -> %s; skipped", art.page_id, previous, snapshot)
            missing += 1
            continue
        art.initial = False
        for row in rows or []:
            art.labels[row["new_idx"]] = row["label"]
            if row["label"] == "changed" and row["old_idx"]:
                art.old_of[row["new_idx"]] = (row["old_idx"][0], row["old_text"] or "")
        updated.append(art)
    return initial, updated, missing


Tasks = dict[str, list[Any]]  # generated table -> its tasks, in article order


def _plan(
    initial: list[Article],
    updated: list[Article],
    previous: str | None,
    embedder: Embedder,
    cfg: GenerationConfig,
) -> Tasks:
    """Every request of the run, per kind, articles in snapshot order."""
    gens = [g for g in item_generators() if getattr(cfg, g.table)]
    tasks: Tasks = {g.table: [] for g in item_generators()}
    selected = select_paragraphs(initial, embedder, cfg) if initial else {}
    for art in initial:
        for g in gens:
            tasks[g.table] += g.initial_tasks(art, selected.get(art.page_id, []), cfg)
    for art in updated:
        for g in gens:
            tasks[g.table] += g.update_tasks(art, cfg, previous or "")
    return tasks


def plan_tasks(
    workdir: Path,
    snapshot: str,
    previous: str | None,
    embedder: Embedder,
    cfg: GenerationConfig,
    page_ids: list[int] | None,
) -> tuple[list[Article], list[Article], list[Article], int, Tasks]:
    """(articles, initial ones, updated ones, how many lack labels, every kind's tasks) of
    one generation run over ``page_ids`` (None: every article of the snapshot)."""
    articles = load_articles(workdir, snapshot, page_ids)
    if previous is None:
        initial, updated, without_labels = articles, [], 0
    else:
        initial, updated, without_labels = attach_labels(workdir, previous, snapshot, articles)
    return (
        articles,
        initial,
        updated,
        without_labels,
        _plan(initial, updated, previous, embedder, cfg),
    )


def plan_requests(
    workdir: str | Path,
    snapshot: str,
    *,
    previous: str | None,
    embedder: Embedder,
    cfg: GenerationConfig,
    page_ids: list[int] | None = None,
) -> list[LLMRequest]:
    """Every generation request :func:`generate_items` would send (for dry runs: the CLI
    estimates tokens and cost from them without calling any model). The round-trip checks
    come on top, one short request per valid QA answer, and one retry per rejected QA
    request (``qa_retry``): both unknown before generation. Items code writes without a
    model (parsed quadruples) send none."""
    *_, tasks = plan_tasks(Path(workdir), str(snapshot), previous, embedder, cfg, page_ids)
    return [t.request for kind_tasks in tasks.values() for t in kind_tasks if t.request is not None]


@dataclass(frozen=True)
class GenerationJob:
    """One generation run, as plain data (a Prefect or Dask worker can receive it). Articles
    are generated in shards; every shard sends its requests of each kind in one call."""

    workdir: str
    snapshot: str
    previous: str | None
    inputs_digest: str
    page_order: tuple[int, ...]
    shard_pages: int = 200
    inputs: dict[str, str] = field(default_factory=dict)  # workdir path -> sha256
    generator: str = ""  # "<backend id>:<model>", recorded in run.json
    embedder_id: str = ""  # the embedder that selected sentences, recorded in run.json

    @property
    def out(self) -> Path:
        return generated_dir(self.workdir, self.snapshot)

    def parts(self) -> list[list[int]]:
        """Page ids of each planned shard, in order."""
        return chunked(self.page_order, self.shard_pages)

    def shards(self, *, attach: bool = False) -> ShardedOutput:
        return ShardedOutput(
            self.out,
            dict(GENERATED_TABLES),
            schema_version=GENERATED_SCHEMA_VERSION,
            request={"inputs_digest": self.inputs_digest, "shard_pages": self.shard_pages},
            attach=attach,
            table_prefix="generated_",
        )


def plan_generation(
    workdir: str | Path,
    snapshot: str,
    *,
    previous: str | None,
    backend: LLMBackend,
    embedder: Embedder,
    cfg: GenerationConfig,
    page_ids: list[int] | None = None,
    shard_pages: int = 200,
) -> GenerationJob:
    """Describe the generation of ``snapshot`` (``previous=None``: initial generation)."""
    workdir = Path(workdir)
    snapshot, previous = str(snapshot), (str(previous) if previous is not None else None)
    if previous is not None and previous >= snapshot:
        raise WikidriftError(f"previous snapshot {previous} is not older than {snapshot}")
    digest, inputs = _inputs_digest(workdir, snapshot, previous, backend, embedder, cfg, page_ids)
    order = read_snapshot_table(workdir, snapshot, "articles", columns=["page_id"])[
        "page_id"
    ].to_pylist()
    if page_ids is not None:
        wanted = set(page_ids)
        order = [p for p in order if p in wanted]
    return GenerationJob(
        str(workdir),
        snapshot,
        previous,
        digest,
        tuple(order),
        shard_pages,
        inputs=inputs,
        generator=f"{backend.backend_id}:{backend.model}",
        embedder_id=getattr(embedder, "model_id", type(embedder).__name__),
    )


def prepare_generation(job: GenerationJob, *, force: bool = False) -> GenerationSummary | None:
    """The stored summary when this generation ran with the same inputs (and not ``force``);
    otherwise set up the work area (keeping finished shards) and return None."""
    # The tables too: a marker from before markers recorded their outputs vouches for none.
    done = all((job.out / f"{name}.parquet").exists() for name in GENERATED_TABLES)
    stored = GENERATED_FOLDER.prepare(
        job, force, lambda stored: done and done_before(stored, job.inputs_digest, job.out)
    )
    if stored is not None:
        stored.already_done = True
    return stored


def generate_part(
    job: GenerationJob,
    index: int,
    *,
    backend: LLMBackend,
    embedder: Embedder,
    cfg: GenerationConfig,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Generate and validate planned shard ``index`` (skipped when done); returns its counts.
    Every answer is cached by the backend as it arrives, so a shard cut short by a crash
    costs nothing to redo."""
    shards = job.shards(attach=True)
    if (done := shards.finished(index)) is not None:
        return done
    workdir = Path(job.workdir)
    page_ids = job.parts()[index]
    articles, initial, updated, without_labels, tasks = plan_tasks(
        workdir, job.snapshot, job.previous, embedder, cfg, page_ids
    )
    usage: Counter = Counter()
    batch = Batch(
        backend=backend,
        usage=usage,
        generator=f"{backend.backend_id}:{backend.model}",
        validator=ItemValidator.from_config(cfg),
        cfg=cfg,
        note=progress or (lambda _: None),
        index=index,
    )
    tables: dict[str, pa.Table] = {}
    rejects: list[Reject] = []
    requests: dict[str, int] = {}
    extra: dict[str, Any] = {}
    for g in item_generators():
        batch.note(f"shard {index}: {g.table} {len(tasks[g.table])} requests")
        out = g.run(tasks[g.table], batch)
        tables[g.table] = rows_table(out.rows, g.table)
        rejects += out.rejects
        requests |= out.requests
        extra |= out.meta
    tables["rejects"] = rows_table([r.row() for r in rejects], "rejects")
    meta = {
        "page_ids": page_ids,
        "articles": {
            "total": len(articles),
            "initial": len(initial),
            "updated": len(updated),
            "without_labels": without_labels,
        },
        "requests": requests,
        "usage": dict(usage),
    } | extra
    shards.write_part(tables, meta, index=index)
    return meta


def _type_counts(table: pa.Table) -> dict[str, int]:
    return dict(Counter(table["type"].to_pylist())) | {"total": table.num_rows}


def finalize_generation(job: GenerationJob, *, seconds: float = 0.0) -> GenerationSummary:
    """Merge the finished shards into the output tables and write ``run.json`` (last)."""

    def summarize(merged: MergedParts) -> GenerationSummary:
        tables = {
            name: read_generated(job.workdir, job.snapshot, name) for name in GENERATED_TABLES
        }
        usage = Counter(merged.total("usage", {}))
        articles = merged.total("articles", {})
        rejects = tables["rejects"].to_pylist()
        by_kind: dict[str, Counter] = {}
        for r in rejects:
            by_kind.setdefault(r["kind"], Counter())[r["reason"]] += 1
        return GenerationSummary(
            snapshot=job.snapshot,
            previous=job.previous,
            inputs_digest=job.inputs_digest,
            articles={
                k: articles.get(k, 0) for k in ("total", "initial", "updated", "without_labels")
            },
            requests=merged.total("requests", {}),
            counts={
                g.table: _type_counts(tables[g.table]) | g.counts(tables[g.table], merged.parts)
                for g in item_generators()
            },
            rejects=dict(sorted(Counter(r["reason"] for r in rejects).items())),
            rejects_by_kind={k: dict(sorted(v.items())) for k, v in sorted(by_kind.items())},
            llm={
                "generator": job.generator,
                "batches": usage["batches"],
                "requests": usage["requests"],
                "prompt_tokens": usage["prompt_tokens"],
                "completion_tokens": usage["completion_tokens"],
                "cost_usd": usage["cost_usd_micro"] / 1_000_000,
                "cached": usage["cached"],
                "errors": usage["errors"],
            },
            prompt_hashes=prompt_hashes(generation_prompt_names()),
            embedder=job.embedder_id,
            seconds=round(seconds, 3),
            inputs=job.inputs,
        )

    return GENERATED_FOLDER.finish(job, f"generation {job.snapshot}", summarize)


GENERATE_STAGE: Stage[GenerationJob, GenerationSummary] = Stage(
    name="generate",
    unit="LLM request",  # the backend reports requests as they are planned and answered
    tools=("backend", "embedder", "generation"),
    prepare=lambda job, force: prepare_generation(job, force=force),
    part_sizes=lambda job: [0] * len(chunk_sizes(len(job.page_order), job.shard_pages)),
    run_part=lambda job, index, tools: generate_part(
        job,
        index,
        backend=tools.backend,
        embedder=tools.embedder,
        cfg=tools.generation,
        progress=tools.notes,
    ),
    finalize=lambda job, results, seconds: finalize_generation(job, seconds=seconds),
)


def generate_items(
    workdir: str | Path,
    snapshot: str,
    *,
    previous: str | None,
    backend: LLMBackend,
    embedder: Embedder,
    cfg: GenerationConfig,
    page_ids: list[int] | None = None,
    force: bool = False,
    progress: Callable[[str], None] | None = None,
    shard_pages: int = 200,
) -> GenerationSummary:
    """Generate, validate and store the QA, dialogue and quadruple items of ``snapshot`` (the
    generate stage, run in this process). ``previous=None`` = first snapshot (initial
    generation for every article); a finished run with the same inputs is returned as stored
    (``skipped``) unless ``force``; an interrupted run resumes at its first unfinished shard
    (the Prefect flow runs shards in parallel). ``progress`` receives a note per request
    batch."""
    return run_stage(
        GENERATE_STAGE,
        lambda: plan_generation(
            workdir,
            snapshot,
            previous=previous,
            backend=backend,
            embedder=embedder,
            cfg=cfg,
            page_ids=page_ids,
            shard_pages=shard_pages,
        ),
        workdir=workdir,
        tools=Tools(
            backend=backend,
            embedder=embedder,
            generation=cfg,
            notes=progress,
        ),
        label=f"{snapshot} generate",
        force=force,
    )
