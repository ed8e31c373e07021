"""The labeling stage: two snapshots on disk in, ``labels/<old>__<new>/`` out.

Writes ``sentence_labels.parquet`` (one row per new sentence plus one per deleted old
sentence, with evidence: matched old indices, similarity, NLI probabilities, the rule and the
model that decided) and ``summary.json`` (counts per label in the layout of GrowOVER Appendix
E, per-page counts, model calls, settings). Pages are processed in shards; a finished shard
survives a crash. A pair already labeled with the same inputs and settings is not redone.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa

from pipeline.config import Config
from pipeline.errors import WikidriftError
from pipeline.facts import FactExtractor
from pipeline.labeling.align import (
    AlignSettings,
    ContradictionChecker,
    LabelingStats,
    PageSentences,
    SentenceLabel,
    SentenceLabeler,
)
from pipeline.labeling.changes import RULES_VERSION, UpdateJudge
from pipeline.layout import (
    EMBEDDING_CACHE,
    NLI_CACHE,
    cache_dir,
    done_before,
    labels_dir,
    read_snapshot_table,
    snapshot_dir,
    verified_inputs,
)
from pipeline.markers import LabelSummary
from pipeline.models.batching import cache_namespace
from pipeline.models.embedder import CachedEmbedder, Embedder, load_embedder
from pipeline.models.nli import CachedNLIClassifier, NLIClassifier, load_nli
from pipeline.models.vector_cache import ResultCache, VectorCache
from pipeline.schemas import LABELS, LABELS_SCHEMA, LABELS_SCHEMA_VERSION
from pipeline.shards import MergedParts, ShardedFolder, ShardedOutput, chunk_sizes, chunked
from pipeline.stage import Stage, Tools, job_digest, run_stage
from pipeline.stage_folders import LABEL_MARKER
from pipeline.storage import (
    read_parquet,
    write_json_atomic,
)
from pipeline.update_classifier import UpdateClassifier, load_update_classifier

log = logging.getLogger(__name__)

# The snapshot tables a labeling run reads, and the files it writes besides summary.json.
_INPUT_TABLES = ("articles", "sentences")
LABEL_FILES = ("sentence_labels.parquet", "fact_guard_flips.json")
LABEL_FOLDER = ShardedFolder(LABEL_MARKER, LabelSummary, LABEL_FILES)


def _input_files(workdir: Path, old: str, new: str) -> list[Path]:
    return [snapshot_dir(workdir, d) / f"{t}.parquet" for d in (old, new) for t in _INPUT_TABLES]


def _pages(workdir: Path, date: str, page_ids: list[int]) -> dict[int, PageSentences]:
    arts = read_snapshot_table(workdir, date, "articles", page_ids=page_ids).to_pylist()
    sents = read_snapshot_table(workdir, date, "sentences", page_ids=page_ids)
    pages = {
        a["page_id"]: PageSentences(a["page_id"], a["title"], a["revision_id"], [], [])
        for a in arts
    }
    for pid, idx, text, h in zip(
        sents["page_id"].to_pylist(),
        sents["sent_idx"].to_pylist(),
        sents["text"].to_pylist(),
        sents["text_hash"].to_pylist(),
        strict=True,
    ):
        page = pages[pid]
        if idx != len(page.texts):
            raise WikidriftError(f"snapshot {date}: page {pid} sentence indices are not 0..n-1")
        page.texts.append(text)
        page.hashes.append(h)
    return pages


def make_labeler(
    cfg: Config,
    workdir: str | Path,
    *,
    naive: bool = False,
    checker: ContradictionChecker | None = None,
    embedder: Embedder | None = None,
    nli: NLIClassifier | None = None,
    judge: UpdateJudge | None = None,
    classifier: UpdateClassifier | None = None,
) -> SentenceLabeler:
    """A labeler with the configured models (or the given ones) behind the workdir's on-disk
    caches. ``naive`` (reference mode for benchmarks) uses no cache and no shortcut. The update
    classifier (``align.update_classifier``, or the given one) only serves the offline path:
    not with an NLI model, never in faithful mode."""
    cache = cache_dir(workdir)
    base = embedder or load_embedder(
        cfg.models.embedder, device=cfg.models.device, batch_size=cfg.models.embed_batch_size
    )
    nli_model = (
        nli
        if nli is not None
        else load_nli(
            cfg.models.nli or None, device=cfg.models.device, batch_size=cfg.models.nli_batch_size
        )
    )
    if not naive:
        base = CachedEmbedder(base, VectorCache(cache / EMBEDDING_CACHE))
        if nli_model is not None:
            nli_model = CachedNLIClassifier(nli_model, ResultCache(cache / NLI_CACHE))
    settings = AlignSettings(
        unchanged_threshold=cfg.align.unchanged_threshold,
        changed_min_similarity=cfg.align.changed_min_similarity,
        new_max_similarity=cfg.align.new_max_similarity,
        max_span=cfg.align.max_span,
        faithful=cfg.align.faithful,
    )
    offline = not (cfg.align.faithful or cfg.models.nli)
    if classifier is None and cfg.align.update_classifier and offline:
        classifier = load_update_classifier()
    return SentenceLabeler(
        base,
        nli=nli_model,
        checker=checker,
        settings=settings,
        facts=FactExtractor(cfg.text.spacy_model or None),
        naive=naive,
        judge=judge,
        classifier=classifier if offline else None,
    )


def _model_counters(labeler: SentenceLabeler) -> dict[str, int]:
    """Cumulative work counters of the labeler's models (cache wrappers unwrapped)."""
    emb = labeler.embedder
    nli = labeler.nli
    return {
        "texts_embedded": getattr(getattr(emb, "embedder", emb), "texts_embedded", 0),
        "embedding_cache_hits": getattr(emb, "hits", 0),
        "nli_pairs_computed": getattr(getattr(nli, "classifier", nli), "pairs_classified", 0),
    }


def _stat_calls(stats: LabelingStats) -> dict[str, int]:
    return {
        "nli_pairs": stats.nli_pairs,
        "llm_checks": stats.llm_checks,
        "judge_questions": stats.judge_questions,
        "exact_matches": stats.exact_matches,
        "similarity_pairs": stats.similarity_pairs,
        "span_texts": stats.span_texts,
    }


def _rows_table(rows: list[SentenceLabel]) -> pa.Table:
    # vars(), not asdict(): asdict deep-copies every field of ~5k rows a pair (0.3 s).
    return pa.Table.from_pylist([vars(r) for r in rows], schema=LABELS_SCHEMA)


@dataclass(frozen=True)
class LabelJob:
    """One labeling run, as plain data (a Prefect or Dask worker can receive it)."""

    workdir: str
    old: str
    new: str
    inputs_digest: str
    settings: dict
    models: dict[str, str | None]
    page_order: tuple[int, ...]
    shard_pages: int = 200
    inputs: dict[str, str] = field(default_factory=dict)  # workdir path -> sha256

    @property
    def out(self) -> Path:
        return labels_dir(self.workdir, self.old, self.new)

    def parts(self) -> list[list[int]]:
        """Page ids of each planned shard, in order."""
        return chunked(self.page_order, self.shard_pages)

    def shards(self, *, attach: bool = False) -> ShardedOutput:
        return ShardedOutput(
            self.out,
            {"sentence_labels": LABELS_SCHEMA},
            schema_version=LABELS_SCHEMA_VERSION,
            request={"inputs_digest": self.inputs_digest, "shard_pages": self.shard_pages},
            attach=attach,
        )


def plan_labels(
    workdir: str | Path, old: str, new: str, labeler: SentenceLabeler, *, shard_pages: int = 200
) -> LabelJob:
    """Describe the labeling of ``new`` against ``old`` (pages of the new snapshot first, then
    pages only the old one has) and the digest of everything that decides its answers."""
    workdir = Path(workdir)
    if old >= new:
        raise WikidriftError(f"labels go from an older to a newer snapshot, got {old} -> {new}")
    settings = asdict(labeler.settings) | {"naive": labeler.naive, "rules": RULES_VERSION}
    models: dict[str, str | None] = {
        "embedder": labeler.embedder.model_id,
        "nli": labeler.nli.model_id if labeler.nli else None,
        "contradiction_checker": labeler.checker.model_id if labeler.checker else None,
        "update_judge": labeler.judge.model_id if labeler.judge else None,
        "judge_classes": ",".join(labeler.judge.classes) if labeler.judge else None,
    }
    if labeler.classifier is not None:
        # The weights' digest: labels made with other weights are recomputed.
        alone = ":alone" if labeler.classifier_alone else ""
        models["update_classifier"] = labeler.classifier.model_id + alone
    inputs = verified_inputs(workdir, _input_files(workdir, old, new))
    digest = job_digest(
        {
            "inputs": inputs,
            "settings": settings,
            "models": models,
            # Vectors depend on the device kind and block size too (models.batching).
            "vectors": cache_namespace(labeler.embedder),
        }
    )
    old_ids = read_snapshot_table(workdir, old, "articles", columns=["page_id"])[
        "page_id"
    ].to_pylist()
    new_ids = read_snapshot_table(workdir, new, "articles", columns=["page_id"])[
        "page_id"
    ].to_pylist()
    new_set = set(new_ids)
    order = tuple(new_ids + [p for p in old_ids if p not in new_set])
    return LabelJob(
        str(workdir), old, new, digest, settings, models, order, shard_pages, inputs=inputs
    )


def prepare_labels(job: LabelJob, *, force: bool = False) -> LabelSummary | None:
    """The stored summary when these labels exist for the same inputs (and not ``force``);
    otherwise set up the work area (keeping finished shards) and return None."""
    stored = LABEL_FOLDER.prepare(
        job, force, lambda stored: done_before(stored, job.inputs_digest, job.out)
    )
    if stored is not None:
        stored.already_done = True
    return stored


def label_part(job: LabelJob, labeler: SentenceLabeler, index: int) -> dict:
    """Label planned shard ``index`` (skipped when done); returns its work counts."""
    shards = job.shards(attach=True)
    if (done := shards.finished(index)) is not None:
        return done
    ids = job.parts()[index]
    before = _model_counters(labeler)
    olds = _pages(Path(job.workdir), job.old, ids)
    news = _pages(Path(job.workdir), job.new, ids)
    rows, stats = labeler.label_pages([(olds.get(p), news.get(p)) for p in ids])
    after = _model_counters(labeler)
    stats_dict = asdict(stats)
    stats_dict["flipped_examples"] = [list(x) for x in stats.flipped_examples]
    meta = {
        "page_ids": ids,
        "stats": stats_dict,
        "model_calls": {k: after[k] - before[k] for k in after},
        "facts": labeler.facts.model_name,
    }
    shards.write_part({"sentence_labels": _rows_table(rows)}, meta, index=index)
    return meta


def finalize_labels(job: LabelJob, *, seconds: float = 0.0) -> LabelSummary:
    """Merge the finished shards and write ``summary.json`` and ``fact_guard_flips.json``."""

    def summarize(merged: MergedParts) -> LabelSummary:
        table = read_parquet(
            job.out / "sentence_labels.parquet",
            expected_table="sentence_labels",
            max_schema_version=LABELS_SCHEMA_VERSION,
        )
        counts = dict.fromkeys(LABELS, 0)
        per_page: dict[str, dict[str, int]] = {}
        for pid, label in zip(
            table["page_id"].to_pylist(), table["label"].to_pylist(), strict=True
        ):
            counts[label] += 1
            page = per_page.setdefault(str(pid), dict.fromkeys(LABELS, 0))
            page[label] += 1
        totals = LabelingStats(**merged.total("stats", {}))
        facts = next((p["facts"] for p in merged.parts), "regex")
        write_json_atomic(
            job.out / "fact_guard_flips.json",
            [
                {"page_id": p, "old": o, "new": n, "differences": d}
                for p, o, n, d in totals.flipped_examples
            ],
        )
        return LabelSummary(
            old=job.old,
            new=job.new,
            inputs_digest=job.inputs_digest,
            counts=counts,
            pages={
                "total": len(job.page_order),
                "identical": totals.pages_identical,
                "new": totals.pages_new,
                "deleted": totals.pages_deleted,
            },
            model_calls=merged.total("model_calls", {}) | _stat_calls(totals),
            settings=job.settings,
            models=job.models | {"facts": facts},
            seconds=round(seconds, 3),
            fact_guard_flips=totals.fact_guard_flips,
            per_page=per_page,
            inputs=job.inputs,
        )

    return LABEL_FOLDER.finish(job, f"labels {job.old} -> {job.new}", summarize)


LABEL_STAGE: Stage[LabelJob, LabelSummary] = Stage(
    name="label",
    unit="article",
    tools=("labeler",),
    prepare=lambda job, force: prepare_labels(job, force=force),
    part_sizes=lambda job: chunk_sizes(len(job.page_order), job.shard_pages),
    run_part=lambda job, index, tools: label_part(job, tools.labeler, index),
    finalize=lambda job, results, seconds: finalize_labels(job, seconds=seconds),
    total=lambda job: len(job.page_order),
)


def label_snapshots(
    workdir: str | Path,
    old: str,
    new: str,
    labeler: SentenceLabeler,
    *,
    shard_pages: int = 200,
    force: bool = False,
) -> LabelSummary:
    """Label every sentence of snapshot ``new`` against snapshot ``old`` and store the result
    (the label stage, run in this process: shard by shard, resumable; the Prefect flow runs
    the same shards in parallel)."""
    return run_stage(
        LABEL_STAGE,
        lambda: plan_labels(workdir, old, new, labeler, shard_pages=shard_pages),
        workdir=workdir,
        tools=Tools(labeler=labeler),
        label=f"{new} label",
        force=force,
    )
