"""Snapshots on disk: articles, sentences and raw revisions of one date, as Parquet.

Layout under ``<workdir>/snapshots/<date>/``::

    articles.parquet    page_id, title, revision_id, revision_timestamp, snapshot,
                        wikitext_sha1, n_paragraphs, n_sentences, text_version
    sentences.parquet   page_id, sent_idx, para_idx, section, text, text_hash
    revisions.parquet   page_id, revision_id, wikitext   (so a re-parse needs no re-fetch)
    snapshot.json       what was asked for and what came out; written last = complete

A build streams the source in shards of articles; each finished shard is written (atomically)
to ``_work/`` so a crash or Ctrl-C loses at most one shard and a re-run resumes. An article
whose wikitext is byte-identical to the one in an earlier snapshot of the same workdir is not
parsed again: its sentences are copied.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipeline import progress
from pipeline.errors import WikidriftError
from pipeline.layout import (
    SPLIT_CACHE,
    cache_dir,
    list_snapshots,
    outputs_intact,
    read_snapshot_table,
    snapshot_dir,
)
from pipeline.markers import SnapshotSummary
from pipeline.models.vector_cache import ResultCache
from pipeline.records import RawRevision
from pipeline.schemas import (
    ARTICLES_SCHEMA,
    REVISIONS_SCHEMA,
    SENTENCES_SCHEMA,
    SNAPSHOT_SCHEMA_VERSION,
    SNAPSHOT_TABLES,
)
from pipeline.shards import (
    MergedParts,
    ShardedFolder,
    ShardedOutput,
    TableTransform,
    chunk_sizes,
    chunked,
)
from pipeline.sources import ArticleSelection, SnapshotSource, normalize_title
from pipeline.stage import Stage, Tools, run_stage
from pipeline.stage_folders import SNAPSHOT_MARKER
from pipeline.storage import write_json_atomic
from pipeline.text import SentenceSplitter, sentence_hash, wikitext_to_paragraphs

log = logging.getLogger(__name__)

# Bump when wikitext -> sentence extraction changes, so stored parses are not reused.
TEXT_PIPELINE_VERSION = "text-1"

SNAPSHOT_FOLDER = ShardedFolder(
    SNAPSHOT_MARKER, SnapshotSummary, tuple(f"{name}.parquet" for name in SNAPSHOT_TABLES)
)


def selection_digest(selection: ArticleSelection) -> str:
    """A short stable hash of an article selection (resume only continues the same request)."""
    blob = json.dumps(
        {"titles": [normalize_title(t) for t in selection.titles], "ids": list(selection.page_ids)}
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _chunks(items: Iterator[RawRevision], size: int) -> Iterator[list[RawRevision]]:
    chunk: list[RawRevision] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class _PreviousParses:
    """Sentences of byte-identical wikitext in the latest earlier snapshot, for reuse."""

    def __init__(self, workdir: Path, snapshot_date: date, text_version: str) -> None:
        self.workdir = workdir
        self.date: str | None = None
        self.sha1_by_page: dict[int, str] = {}
        earlier = [d for d in list_snapshots(workdir) if d < snapshot_date.isoformat()]
        if not earlier:
            return
        self.date = earlier[-1]
        arts = read_snapshot_table(workdir, self.date, "articles")
        for pid, sha, ver in zip(
            arts["page_id"].to_pylist(),
            arts["wikitext_sha1"].to_pylist(),
            arts["text_version"].to_pylist(),
            strict=True,
        ):
            if ver == text_version:
                self.sha1_by_page[pid] = sha

    def reusable(self, rev: RawRevision) -> bool:
        return self.sha1_by_page.get(rev.page_id) == rev.wikitext_sha1

    def sentences(self, page_ids: list[int]) -> pa.Table:
        assert self.date is not None
        return read_snapshot_table(self.workdir, self.date, "sentences", page_ids=page_ids)


class SplitCache:
    """Sentence splits of paragraphs already split for this workdir, keyed by the text pipeline
    version and the paragraph's hash: most paragraphs of an edited article do not change from
    one month to the next, and spaCy's parser is the dominant cost of a snapshot."""

    def __init__(self, workdir: str | Path, text_version: str) -> None:
        self.store = ResultCache(cache_dir(workdir) / SPLIT_CACHE)
        self.namespace = f"split:{text_version}"
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(paragraph: str) -> str:
        return hashlib.blake2b(paragraph.encode("utf-8"), digest_size=16).hexdigest()

    def split(self, paragraphs: list[str], splitter: SentenceSplitter) -> list[list[str]]:
        """Sentences of each paragraph, from the cache or from ``splitter`` (then stored)."""
        keys = [self.key(p) for p in paragraphs]
        found = self.store.get_many(self.namespace, keys)
        todo = {k: p for k, p in zip(keys, paragraphs, strict=True) if k not in found}
        self.hits += len(set(keys)) - len(todo)
        self.misses += len(todo)
        if todo:
            fresh = dict(zip(todo, splitter.split(list(todo.values())), strict=True))
            self.store.put_many(self.namespace, fresh)
            found.update(fresh)
        return [found[k] for k in keys]


def _article_row(rev: RawRevision, snap: str, n_par: int, n_sent: int, version: str) -> dict:
    return {
        "page_id": rev.page_id,
        "title": rev.title,
        "revision_id": rev.revision_id,
        "revision_timestamp": rev.revision_timestamp,
        "snapshot": snap,
        "wikitext_sha1": rev.wikitext_sha1,
        "n_paragraphs": n_par,
        "n_sentences": n_sent,
        "text_version": version,
    }


def parse_revisions(
    revisions: list[RawRevision],
    splitter: SentenceSplitter,
    split_cache: SplitCache | None = None,
) -> tuple[list[list[dict]], list[int]]:
    """Sentence rows (and paragraph counts) for each revision, splitting all paragraphs of the
    batch in one spaCy pass (only those not in ``split_cache``). Errors name the article that
    failed."""
    paragraphs_per_rev = []
    for rev in revisions:
        try:
            paragraphs_per_rev.append(wikitext_to_paragraphs(rev.wikitext))
        except Exception as exc:  # noqa: BLE001 - any parser failure must name its article
            raise WikidriftError(
                f"article {rev.title!r} (page {rev.page_id}, revision {rev.revision_id}): "
                f"wikitext could not be parsed: {exc}"
            ) from exc
    flat_texts = [p.text for paras in paragraphs_per_rev for p in paras]
    split_iter = iter(
        split_cache.split(flat_texts, splitter) if split_cache else splitter.split(flat_texts)
    )
    rows_per_rev: list[list[dict]] = []
    for rev, paras in zip(revisions, paragraphs_per_rev, strict=True):
        rows: list[dict] = []
        for para_idx, para in enumerate(paras):
            for sentence in next(split_iter):
                rows.append(
                    {
                        "page_id": rev.page_id,
                        "sent_idx": len(rows),
                        "para_idx": para_idx,
                        "section": para.section,
                        "text": sentence,
                        "text_hash": sentence_hash(sentence),
                    }
                )
        rows_per_rev.append(rows)
    return rows_per_rev, [len(p) for p in paragraphs_per_rev]


@dataclass(frozen=True)
class SnapshotJob:
    """One snapshot build, as plain data (a Prefect or Dask worker can receive it)."""

    workdir: str
    snapshot: str
    source_description: str
    selection: ArticleSelection
    text_version: str
    shard_size: int = 200

    @property
    def out(self) -> Path:
        return snapshot_dir(self.workdir, self.snapshot)

    def request(self) -> dict:
        """What identifies this build's unfinished work (resume only continues the same)."""
        return {
            "source": self.source_description,
            "selection": selection_digest(self.selection),
            "text_version": self.text_version,
            "shard_size": self.shard_size,
        }

    def parts(self) -> list[ArticleSelection]:
        """The planned shards of an explicit selection (titles, then page ids), in order;
        empty for "every article the source holds", which is streamed instead."""
        keys: list[tuple[str, str | int]] = [("t", t) for t in self.selection.titles]
        keys += [("i", p) for p in self.selection.page_ids]
        return [
            ArticleSelection(
                titles=tuple(str(v) for k, v in chunk if k == "t"),
                page_ids=tuple(int(v) for k, v in chunk if k == "i"),
            )
            for chunk in chunked(keys, self.shard_size)
        ]

    def shards(self, *, attach: bool = False) -> ShardedOutput:
        return ShardedOutput(
            self.out,
            SNAPSHOT_TABLES,
            schema_version=SNAPSHOT_SCHEMA_VERSION,
            request=self.request(),
            attach=attach,
        )


def plan_snapshot(
    workdir: str | Path,
    snapshot_date: date | str,
    selection: ArticleSelection,
    *,
    splitter: SentenceSplitter,
    source_description: str,
    shard_size: int = 200,
) -> SnapshotJob:
    """Describe a snapshot build (the text version comes from the splitter's spaCy model)."""
    return SnapshotJob(
        workdir=str(workdir),
        snapshot=str(snapshot_date),
        source_description=source_description,
        selection=selection,
        text_version=f"{TEXT_PIPELINE_VERSION}/{splitter.model_name}",
        shard_size=shard_size,
    )


def prepare_snapshot(job: SnapshotJob, *, force: bool = False) -> SnapshotSummary | None:
    """The stored summary when the snapshot is complete for the same articles and kind of
    source (and not ``force``); otherwise set up the work area (keeping finished shards of the
    same request) and return None."""

    def current(stored: SnapshotSummary) -> bool:
        same_kind = stored.source.split(":")[0] == job.source_description.split(":")[0]
        same = stored.selection_digest == selection_digest(job.selection) and same_kind
        if same and outputs_intact(job.out, stored.outputs):
            return True
        log.info(
            "snapshot %s was built for other articles or another source, or its files were "
            "damaged: rebuilding",
            job.snapshot,
        )
        return False

    stored = SNAPSHOT_FOLDER.prepare(job, force, current)
    if stored is not None:
        stored.already_done = True
    return stored


def _shard_tables(
    job: SnapshotJob,
    shard: list[RawRevision],
    splitter: SentenceSplitter,
    previous: _PreviousParses,
) -> tuple[dict[str, pa.Table], dict]:
    """Parse (or reuse) one shard of revisions into the three snapshot tables."""
    split_cache = SplitCache(job.workdir, job.text_version)
    reuse = [r for r in shard if previous.reusable(r)]
    fresh = [r for r in shard if not previous.reusable(r)]
    rows_by_page: dict[int, list[dict]] = {}
    n_par_by_page: dict[int, int] = {}
    if fresh:
        rows, n_pars = parse_revisions(fresh, splitter, split_cache)
        for rev, r, n in zip(fresh, rows, n_pars, strict=True):
            rows_by_page[rev.page_id] = r
            n_par_by_page[rev.page_id] = n
    if reuse:
        for row in previous.sentences([r.page_id for r in reuse]).to_pylist():
            rows_by_page.setdefault(row["page_id"], []).append(row)
        for rev in reuse:
            page_rows = sorted(rows_by_page.get(rev.page_id, []), key=lambda r: r["sent_idx"])
            rows_by_page[rev.page_id] = page_rows
            n_par_by_page[rev.page_id] = len({r["para_idx"] for r in page_rows})
    tables = {
        "articles": pa.Table.from_pylist(
            [
                _article_row(
                    r,
                    job.snapshot,
                    n_par_by_page[r.page_id],
                    len(rows_by_page[r.page_id]),
                    job.text_version,
                )
                for r in shard
            ],
            schema=ARTICLES_SCHEMA,
        ),
        "sentences": pa.Table.from_pylist(
            [row for r in shard for row in rows_by_page[r.page_id]], schema=SENTENCES_SCHEMA
        ),
        "revisions": pa.Table.from_pylist(
            [
                {"page_id": r.page_id, "revision_id": r.revision_id, "wikitext": r.wikitext}
                for r in shard
            ],
            schema=REVISIONS_SCHEMA,
        ),
    }
    meta = {
        "page_ids": [r.page_id for r in shard],
        "titles": [normalize_title(r.title) for r in shard],
        "parsed": len(fresh),
        "reused": len(reuse),
        "paragraphs_split": split_cache.misses,
        "paragraph_splits_cached": split_cache.hits,
    }
    return tables, meta


def build_snapshot_part(
    job: SnapshotJob,
    source: SnapshotSource,
    splitter: SentenceSplitter,
    index: int,
    *,
    attach: bool = True,
) -> dict:
    """Fetch and parse planned shard ``index`` of ``job.parts()`` (skipped when it is done);
    returns the shard's metadata, including what the source could not deliver."""
    shards = job.shards(attach=attach)
    if (done := shards.finished(index)) is not None:
        return done
    revisions = list(source.iter_revisions(job.parts()[index], date.fromisoformat(job.snapshot)))
    previous = _PreviousParses(
        Path(job.workdir), date.fromisoformat(job.snapshot), job.text_version
    )
    tables, meta = _shard_tables(job, revisions, splitter, previous)
    meta["not_delivered"] = source.not_delivered()
    shards.write_part(tables, meta, index=index)
    return meta


def stream_snapshot(
    job: SnapshotJob,
    source: SnapshotSource,
    splitter: SentenceSplitter,
    progress: Callable[[int], None] | None = None,
) -> None:
    """Build a snapshot of every article the source holds, shard by shard as they stream in;
    a resumed build skips the pages its finished shards hold."""
    shards = job.shards(attach=True)
    seen = {p for m in shards.completed() for p in m["page_ids"]}
    previous = _PreviousParses(
        Path(job.workdir), date.fromisoformat(job.snapshot), job.text_version
    )

    def fresh() -> Iterator[RawRevision]:
        for rev in source.iter_revisions(job.selection, date.fromisoformat(job.snapshot)):
            if rev.page_id not in seen:
                seen.add(rev.page_id)
                yield rev

    for shard in _chunks(fresh(), job.shard_size):
        tables, meta = _shard_tables(job, shard, splitter, previous)
        shards.write_part(tables, meta | {"not_delivered": []})
        if progress:
            progress(len(shard))
    last = {"not_delivered": source.not_delivered()}
    write_json_atomic(job.out / "_work" / "stream.json", last)


def _dedupe(parts: list[dict]) -> TableTransform:
    """Keep a page reached twice (e.g. through two redirecting titles) in its first shard."""
    keep: dict[int, list[int]] = {}
    seen: set[int] = set()
    for meta in parts:
        keep[meta["_index"]] = [p for p in meta["page_ids"] if p not in seen]
        seen.update(meta["page_ids"])

    def dedupe(name: str, meta: dict, table: pa.Table) -> pa.Table:
        if len(keep[meta["_index"]]) == len(meta["page_ids"]):
            return table
        return table.filter(pc.is_in(table["page_id"], pa.array(keep[meta["_index"]], pa.int64())))

    return dedupe


def finalize_snapshot(
    job: SnapshotJob, *, seconds: float = 0.0, resumed: int = 0
) -> SnapshotSummary:
    """Merge the finished shards into the final tables (a page reached twice is kept once)
    and mark the snapshot complete."""

    def summarize(merged: MergedParts) -> SnapshotSummary:
        not_delivered = merged.total("not_delivered", [])
        stream_file = job.out / "_work" / "stream.json"
        if stream_file.exists():
            not_delivered += json.loads(stream_file.read_text())["not_delivered"]
        return SnapshotSummary(
            snapshot=job.snapshot,
            source=job.source_description,
            selection_digest=selection_digest(job.selection),
            text_version=job.text_version,
            articles=merged.rows["articles"],
            sentences=merged.rows["sentences"],
            parsed_articles=merged.total("parsed", 0),
            reused_articles=merged.total("reused", 0),
            resumed_articles=resumed,
            not_delivered=not_delivered,
            seconds=round(seconds, 3),
        )

    return SNAPSHOT_FOLDER.finish(job, f"snapshot {job.snapshot}", summarize, transform=_dedupe)


def _part_sizes(job: SnapshotJob) -> list[int]:
    # "Every article the source holds" is one streamed part that reports its own progress.
    named = len(job.selection.titles) + len(job.selection.page_ids)
    return chunk_sizes(named, job.shard_size) or [0]


def _run_part(job: SnapshotJob, index: int, tools: Any) -> dict:
    source = tools.source
    if not job.selection.is_all:
        return build_snapshot_part(job, source, tools.splitter, index)
    resumed = sum(len(m["page_ids"]) for m in job.shards(attach=True).completed())
    stream_snapshot(job, source, tools.splitter, progress.advance)
    return {"resumed": resumed}


def _finalize(job: SnapshotJob, results: list[dict], seconds: float) -> SnapshotSummary:
    sizes = _part_sizes(job)
    resumed = sum(r.get("resumed", 0) for r in results)
    resumed += sum(size for size, r in zip(sizes, results, strict=True) if r.get("skipped"))
    return finalize_snapshot(job, seconds=seconds, resumed=resumed)


SNAPSHOT_STAGE: Stage[SnapshotJob, SnapshotSummary] = Stage(
    name="snapshot",
    unit="article",
    tools=("source", "splitter"),
    prepare=lambda job, force: prepare_snapshot(job, force=force),
    part_sizes=_part_sizes,
    run_part=_run_part,
    finalize=_finalize,
    total=lambda job: selection_size(job.selection),
)


def build_snapshot(
    source: SnapshotSource,
    selection: ArticleSelection,
    snapshot_date: date,
    workdir: str | Path,
    *,
    splitter: SentenceSplitter,
    source_description: str,
    shard_size: int = 200,
    force: bool = False,
) -> SnapshotSummary:
    """Fetch, parse and store the snapshot of ``selection`` at ``snapshot_date`` (the
    snapshot stage, run in this process).

    Idempotent: a complete snapshot is not rebuilt unless ``force``. Resumable: finished shards
    of an interrupted build of the same request are kept and their articles not fetched again.
    (The Prefect flow runs the same shards in parallel: see ``flows/``.)
    """
    return run_stage(
        SNAPSHOT_STAGE,
        lambda: plan_snapshot(
            workdir,
            snapshot_date,
            selection,
            splitter=splitter,
            source_description=source_description,
            shard_size=shard_size,
        ),
        workdir=workdir,
        tools=Tools(source=source, splitter=splitter),
        label=f"{snapshot_date} snapshot",
        force=force,
    )


def selection_size(selection: ArticleSelection) -> int | None:
    """How many articles a selection names (None: every article the source holds)."""
    return None if selection.is_all else len(selection.titles) + len(selection.page_ids)
