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
the backend can batch, parallelize and cache them.

A finished run is not redone when the digest of its inputs (snapshot and label files, prompt
hashes, generation config, backend model, embedder, article filter) is unchanged.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline import progress
from pipeline.config import GenerationConfig
from pipeline.errors import WikidriftError
from pipeline.generate.answer_check import answer_checks, disagreements
from pipeline.generate.dialogue import DialogueTask, dialogue_task, parse_dialogue
from pipeline.generate.items import Dialogue, QAItem, Quadruple, Reject, rows_table, to_json
from pipeline.generate.prompts import prompt_hashes
from pipeline.generate.qa import (
    QATask,
    changed_qa_task,
    initial_qa_task,
    new_qa_task,
    parse_qa,
    retry_qa_task,
)
from pipeline.generate.quadruples import (
    QuadrupleTask,
    parse_quadruples,
    quadruple_task,
    update_sentence_chunks,
)
from pipeline.generate.selection import (
    Article,
    changed_pairs,
    dialogue_paragraphs,
    group_new_sentences,
    select_paragraphs,
)
from pipeline.generate.validate import (
    GroundingNLI,
    ItemValidator,
    quadruple_key,
    question_key,
    split_duplicates,
)
from pipeline.layout import (
    done_before,
    generated_dir,
    is_complete,
    labels_dir,
    output_fingerprints,
    own_marker,
    read_generated,
    read_labels,
    read_snapshot_table,
    snapshot_dir,
    verified_inputs,
)
from pipeline.markers import GenerationSummary
from pipeline.models.embedder import Embedder
from pipeline.models.llm.base import LLMBackend, LLMRequest, LLMResponse, require_answered
from pipeline.schemas import GENERATED_SCHEMA_VERSION, GENERATED_TABLES
from pipeline.shards import ShardedOutput, chunked
from pipeline.stage import Stage, Tools, job_digest, run_stage
from pipeline.storage import write_json_atomic

log = logging.getLogger(__name__)

# Bump when parsing / validation changes what a run keeps, so stored runs are not reused.
GENERATOR_VERSION = "generate-3"


def _inputs_digest(
    workdir: Path,
    snapshot: str,
    previous: str | None,
    backend: LLMBackend,
    embedder: Embedder,
    cfg: GenerationConfig,
    page_ids: list[int] | None,
    grounding_nli: GroundingNLI | None,
) -> tuple[str, dict[str, str]]:
    """The digest of everything that decides the run's output, and the input files' sha256."""
    for date in (snapshot, previous):
        if date is not None and not is_complete(workdir, date):
            raise WikidriftError(
                f"no complete snapshot {date} in {workdir} (run `wikidrift snapshot`)"
            )
    if (
        previous is not None
        and not (labels_dir(workdir, previous, snapshot) / "summary.json").exists()
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
        "prompts": prompt_hashes(),
        "config": cfg.model_dump(mode="json"),
        "backend": f"{backend.backend_id}:{backend.model}",
        "embedder": getattr(embedder, "model_id", type(embedder).__name__),
        "page_ids": sorted(page_ids) if page_ids is not None else None,
        "grounding_nli": None
        if grounding_nli is None
        else getattr(grounding_nli, "model_id", getattr(grounding_nli, "__qualname__", "nli")),
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


def _complete(backend: LLMBackend, requests: list[LLMRequest], usage: Counter) -> list[LLMResponse]:
    if not requests:
        return []
    progress.add_total(len(requests))
    responses = backend.complete_many(requests, on_response=lambda _i, _r: progress.advance())
    if len(responses) != len(requests):
        raise WikidriftError(
            f"backend {backend.backend_id} answered {len(responses)} of {len(requests)} requests"
        )
    require_answered(responses, backend)
    usage["batches"] += 1
    usage["requests"] += len(requests)
    for r in responses:
        usage["prompt_tokens"] += r.prompt_tokens
        usage["completion_tokens"] += r.completion_tokens
        usage["cost_usd_micro"] += round(r.cost_usd * 1_000_000)
        usage["cached"] += int(r.cached)
        usage["errors"] += int(r.error is not None)
    return responses


def _reject_of(
    kind: str, purpose: str, item: dict[str, Any], raw: str | None, reason: str, detail: str
) -> Reject:
    row = {k: v for k, v in item.items() if k != "raw_output"}
    return Reject(
        kind=kind,
        page_id=row.get("page_id"),
        snapshot=row.get("snapshot", ""),
        reason=reason,
        detail=detail,
        purpose=purpose,
        item_json=to_json(row),
        raw_output=raw,
        prompt_hash=row.get("prompt_hash", ""),
    )


_QA_PURPOSE = {"initial": "qa_initial", "new_sentences": "qa_new", "changed_sentence": "qa_changed"}


@dataclass
class _Tasks:
    qa: list[QATask] = field(default_factory=list)
    dialogue: list[DialogueTask] = field(default_factory=list)
    quadruples: list[QuadrupleTask] = field(default_factory=list)


def _plan(
    initial: list[Article],
    updated: list[Article],
    previous: str | None,
    embedder: Embedder,
    cfg: GenerationConfig,
) -> _Tasks:
    """Every request of the run, articles in snapshot order."""
    tasks = _Tasks()
    selected = select_paragraphs(initial, embedder, cfg) if initial else {}
    for art in initial:
        for para in selected.get(art.page_id, []):
            if cfg.qa:
                tasks.qa.append(initial_qa_task(art, para, cfg))
            if cfg.dialogue:
                tasks.dialogue.append(dialogue_task(art, para, cfg))
            if cfg.quadruples:
                tasks.quadruples.append(quadruple_task(art, para.sent_idx, cfg))
    for art in updated:
        if cfg.qa:
            for group in group_new_sentences(art, cfg.new_group_max_sentences):
                tasks.qa.append(new_qa_task(art, group, cfg))
            for pair in changed_pairs(art):
                tasks.qa.append(changed_qa_task(art, pair, cfg, previous or ""))
        if cfg.dialogue:
            for para in dialogue_paragraphs(art, cfg):
                tasks.dialogue.append(dialogue_task(art, para, cfg))
        if cfg.quadruples:
            for chunk in update_sentence_chunks(art, cfg.new_group_max_sentences):
                tasks.quadruples.append(quadruple_task(art, chunk, cfg))
    return tasks


@dataclass
class _QARound:
    """One round of QA requests: the kept items and the rejects, each with its task."""

    kept: list[tuple[QATask, QAItem]] = field(default_factory=list)
    failed: list[tuple[QATask, Reject]] = field(default_factory=list)
    checks: int = 0


def _qa_round(
    tasks: list[QATask],
    backend: LLMBackend,
    usage: Counter,
    generator: str,
    validator: ItemValidator,
    check: bool,
) -> _QARound:
    """Ask ``tasks``, validate every answer and (``check``) ask each valid pair back."""
    out = _QARound()
    responses = _complete(backend, [t.request for t in tasks], usage)
    for task, response in zip(tasks, responses, strict=True):
        item = parse_qa(task, response, generator)
        if isinstance(item, Reject):
            out.failed.append((task, item))
            continue
        v = validator.score_qa(item, n_sentences=task.article.n_sentences, allowed=task.offered)
        if v.keep:
            out.kept.append((task, item))
        else:
            reject = _reject_of(
                "qa", task.purpose, item.row(), response.text, v.reason or "", v.detail
            )
            out.failed.append((task, reject))
    if not (check and out.kept):
        return out
    checks = answer_checks([item for _, item in out.kept])
    out.checks = len(checks)
    failed = disagreements(checks, _complete(backend, [c.request for c in checks], usage))
    for task, item in [pair for pair in out.kept if id(pair[1]) in failed]:
        detail = f"answer_check_failed: {failed[id(item)]}"
        reject = _reject_of(
            "qa", task.purpose, item.row(), item.raw_output, "answer_check_failed", detail
        )
        out.failed.append((task, reject))
    out.kept = [pair for pair in out.kept if id(pair[1]) not in failed]
    return out


def _unique_questions(items: list[QAItem]) -> tuple[list[QAItem], list[Reject]]:
    """``items`` without the questions already kept for the same article."""
    kept, dups = split_duplicates(items, question_key, lambda q: q.page_id)
    rejects = [
        _reject_of(
            "qa", _QA_PURPOSE[item.origin], item.row(), item.raw_output, "duplicate", item.question
        )
        for item in dups
    ]
    return kept, rejects


def _dialogues(
    tasks: list[DialogueTask],
    responses: list[LLMResponse],
    generator: str,
    validator: ItemValidator,
) -> tuple[list[Dialogue], list[Reject]]:
    kept: list[Dialogue] = []
    rejects: list[Reject] = []
    for task, response in zip(tasks, responses, strict=True):
        dialogue = parse_dialogue(task, response, generator)
        if isinstance(dialogue, Reject):
            rejects.append(dialogue)
            continue
        v = validator.score_dialogue(
            dialogue, n_sentences=task.article.n_sentences, allowed=task.offered
        )
        if v.keep:
            kept.append(dialogue)
        else:
            row = dialogue.as_json()
            rejects.append(
                _reject_of("dialogue", "dialogue", row, response.text, v.reason or "", v.detail)
            )
    return kept, rejects


def _quadruples(
    tasks: list[QuadrupleTask],
    responses: list[LLMResponse],
    generator: str,
    validator: ItemValidator,
) -> tuple[list[Quadruple], list[Reject]]:
    kept: list[Quadruple] = []
    rejects: list[Reject] = []
    raw_of: dict[int, str] = {}  # id(quadruple) -> the output it came from, for duplicates
    for task, response in zip(tasks, responses, strict=True):
        found, bad = parse_quadruples(task, response, generator)
        rejects.extend(bad)
        for quad in found:
            v = validator.score_quadruple(
                quad, n_sentences=task.article.n_sentences, allowed=task.offered
            )
            if v.keep:
                kept.append(quad)
                raw_of[id(quad)] = response.text
            else:
                rejects.append(
                    _reject_of(
                        "quadruple",
                        "quadruples",
                        quad.row(),
                        response.text,
                        v.reason or "",
                        v.detail,
                    )
                )
    kept, dups = split_duplicates(kept, quadruple_key, lambda q: q.page_id)
    for quad in dups:
        detail = f"{quad.subject} | {quad.relation} | {quad.object} | {quad.timestamp}"
        rejects.append(
            _reject_of("quadruple", "quadruples", quad.row(), raw_of[id(quad)], "duplicate", detail)
        )
    return kept, rejects


def _tasks_for(
    workdir: Path,
    snapshot: str,
    previous: str | None,
    embedder: Embedder,
    cfg: GenerationConfig,
    page_ids: list[int] | None,
) -> tuple[list[Article], list[Article], list[Article], int, _Tasks]:
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
    request (``qa_retry``): both unknown before generation."""
    *_, tasks = _tasks_for(Path(workdir), str(snapshot), previous, embedder, cfg, page_ids)
    return [t.request for t in (*tasks.qa, *tasks.dialogue, *tasks.quadruples)]


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
    grounding_nli: GroundingNLI | None = None,
    shard_pages: int = 200,
) -> GenerationJob:
    """Describe the generation of ``snapshot`` (``previous=None``: initial generation)."""
    workdir = Path(workdir)
    snapshot, previous = str(snapshot), (str(previous) if previous is not None else None)
    if previous is not None and previous >= snapshot:
        raise WikidriftError(f"previous snapshot {previous} is not older than {snapshot}")
    digest, inputs = _inputs_digest(
        workdir, snapshot, previous, backend, embedder, cfg, page_ids, grounding_nli
    )
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
    done = all((job.out / f"{name}.parquet").exists() for name in GENERATED_TABLES)
    stored = own_marker(job.out / "run.json", GenerationSummary) if done and not force else None
    if done_before(stored, job.inputs_digest, job.out):
        stored.skipped = True
        return stored
    # The marker goes first: a run that dies below leaves no "done" state behind.
    (job.out / "run.json").unlink(missing_ok=True)
    job.shards()
    return None


def generate_part(
    job: GenerationJob,
    index: int,
    *,
    backend: LLMBackend,
    embedder: Embedder,
    cfg: GenerationConfig,
    grounding_nli: GroundingNLI | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Generate and validate planned shard ``index`` (skipped when done); returns its counts.
    Every answer is cached by the backend as it arrives, so a shard cut short by a crash
    costs nothing to redo."""
    shards = job.shards(attach=True)
    if shards.is_done(index):
        return next(m for m in shards.completed() if m["_index"] == index) | {"skipped": True}
    workdir = Path(job.workdir)
    articles, initial, updated, without_labels, tasks = _tasks_for(
        workdir, job.snapshot, job.previous, embedder, cfg, job.parts()[index]
    )
    usage: Counter = Counter()
    generator = f"{backend.backend_id}:{backend.model}"
    validator = ItemValidator.from_config(cfg, grounding_nli)
    say = progress or (lambda _: None)
    say(f"shard {index}: qa {len(tasks.qa)} requests")
    check = cfg.qa_answer_check
    first = _qa_round(tasks.qa, backend, usage, generator, validator, check)
    retries = [
        r
        for task, reject in (first.failed if cfg.qa_retry else [])
        if (r := retry_qa_task(task, reject.reason, seed=cfg.seed)) is not None
    ]
    second = _QARound()
    if retries:
        say(f"shard {index}: qa retry {len(retries)} requests")
        second = _qa_round(retries, backend, usage, generator, validator, check)
    qa_kept, qa_rejects = _unique_questions([item for _, item in first.kept + second.kept])
    qa_rejects += [reject for _, reject in first.failed + second.failed]
    n_checks = first.checks + second.checks
    say(f"shard {index}: dialogue {len(tasks.dialogue)} requests")
    dialogues, dialogue_rejects = _dialogues(
        tasks.dialogue,
        _complete(backend, [t.request for t in tasks.dialogue], usage),
        generator,
        validator,
    )
    say(f"shard {index}: quadruples {len(tasks.quadruples)} requests")
    quads, quad_rejects = _quadruples(
        tasks.quadruples,
        _complete(backend, [t.request for t in tasks.quadruples], usage),
        generator,
        validator,
    )
    tables = {
        "qa": rows_table([q.row() for q in qa_kept], "qa"),
        "dialogue": rows_table([r for d in dialogues for r in d.rows()], "dialogue"),
        "quadruples": rows_table([q.row() for q in quads], "quadruples"),
        "rejects": rows_table(
            [r.row() for r in qa_rejects + dialogue_rejects + quad_rejects], "rejects"
        ),
    }
    meta = {
        "page_ids": job.parts()[index],
        "articles": {
            "total": len(articles),
            "initial": len(initial),
            "updated": len(updated),
            "without_labels": without_labels,
        },
        "requests": dict(Counter(t.purpose for t in tasks.qa))
        | ({"qa_check": n_checks} if n_checks else {})
        | ({"qa_retry": len(retries)} if retries else {})
        | {"dialogue": len(tasks.dialogue), "quadruples": len(tasks.quadruples)},
        "usage": dict(usage),
        "dialogues": len(dialogues),
    }
    shards.write_part(tables, meta, index=index)
    return meta


def _type_counts(table: pa.Table) -> dict[str, int]:
    return dict(Counter(table["type"].to_pylist())) | {"total": table.num_rows}


def finalize_generation(job: GenerationJob, *, seconds: float = 0.0) -> GenerationSummary:
    """Merge the finished shards into the output tables and write ``run.json`` (last)."""
    shards = job.shards(attach=True)
    parts = shards.completed()
    if len(parts) < len(job.parts()):
        raise WikidriftError(
            f"generation {job.snapshot}: {len(job.parts()) - len(parts)} shard(s) not finished"
        )
    shards.finalize()
    tables = {name: read_generated(job.workdir, job.snapshot, name) for name in GENERATED_TABLES}
    usage: Counter = Counter()
    articles: Counter = Counter()
    requests: Counter = Counter()
    for p in parts:
        usage.update(p["usage"])
        articles.update(p["articles"])
        requests.update(p["requests"])
    rejects = tables["rejects"].to_pylist()
    by_kind: dict[str, Counter] = {}
    for r in rejects:
        by_kind.setdefault(r["kind"], Counter())[r["reason"]] += 1
    quads = tables["quadruples"]
    summary = GenerationSummary(
        snapshot=job.snapshot,
        previous=job.previous,
        inputs_digest=job.inputs_digest,
        articles={k: articles.get(k, 0) for k in ("total", "initial", "updated", "without_labels")},
        requests=dict(requests),
        counts={
            "qa": _type_counts(tables["qa"]),
            "dialogue": _type_counts(tables["dialogue"])
            | {"dialogues": sum(p["dialogues"] for p in parts)},
            "quadruples": _type_counts(quads)
            | {"dated": sum(t is not None for t in quads["timestamp"].to_pylist())},
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
        prompt_hashes=prompt_hashes(),
        embedder=job.embedder_id,
        seconds=round(seconds, 3),
        inputs=job.inputs,
        outputs=output_fingerprints(job.out, [f"{name}.parquet" for name in GENERATED_TABLES]),
    )
    write_json_atomic(job.out / "run.json", asdict(summary))
    shards.cleanup()
    return summary


GENERATE_STAGE: Stage[GenerationJob, GenerationSummary] = Stage(
    name="generate",
    unit="LLM request",  # the backend reports requests as they are planned and answered
    prepare=lambda job, force: prepare_generation(job, force=force),
    part_sizes=lambda job: [0] * len(job.parts()),
    run_part=lambda job, index, tools: generate_part(
        job,
        index,
        backend=tools.backend,
        embedder=tools.embedder,
        cfg=tools.generation,
        grounding_nli=tools.grounding_nli,
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
    grounding_nli: GroundingNLI | None = None,
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
            grounding_nli=grounding_nli,
            shard_pages=shard_pages,
        ),
        workdir=workdir,
        tools=Tools(
            backend=backend,
            embedder=embedder,
            generation=cfg,
            grounding_nli=grounding_nli,
            notes=progress,
        ),
        label=f"{snapshot} generate",
        force=force,
    )
