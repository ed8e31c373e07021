"""Evaluate a model on one release: retrieve, ask, score.

Each kind of item becomes :class:`EvalItem` objects (``qa``: one per question; ``dialogue``:
one per turn marked ``evaluate``, the earlier turns of its dialogue as the conversation so
far; ``temporal_qa``: one per question; ``timelines``: one per interval that starts on or
before the release, asked as of that interval's start with the corpus cut there). The
retriever finds the top-k passages of the item's corpus, the model answers through the LLM
layer (every answer cached the moment it arrives, so a killed run resumes without repeating a
call) and :mod:`pipeline.evaluate.metrics` scores the answers per item type.

An :class:`ItemFilter` keeps only items created (or, for a timeline interval, whose answer
began) after a date, and / or of some types: to score a model only on what is newer than its
training cutoff.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pipeline.evaluate.metrics as metrics
from pipeline import progress
from pipeline.config import EvaluateConfig
from pipeline.errors import WikidriftError
from pipeline.evaluate.corpus import build_corpus, corpus_snapshots
from pipeline.evaluate.retrievers import Hit, make_retriever
from pipeline.generate.prompts import load_prompt
from pipeline.item_kinds import KINDS
from pipeline.layout import check_release, read_release_table, release_dir
from pipeline.models.embedder import Embedder
from pipeline.models.llm.base import LLMBackend, LLMRequest, LLMResponse

# The release tables an evaluation asks, by kind.
EVALUATED_TABLES = tuple(k.table for k in KINDS if k.evaluated)
TYPES = ("unchanged", "new", "changed")
NO_PASSAGES = "(none: answer from what you know)"
CONVERSATION_START = "(the conversation starts here)"
_ANSWER_FIELD = {
    "qa": "answer",
    "dialogue": "reply",
    "temporal_qa": "answer",
    "timelines": "answer",
}
_PROMPT = {
    "qa": "evaluate_qa",
    "dialogue": "evaluate_dialogue",
    "temporal_qa": "evaluate_temporal_qa",
    "timelines": "evaluate_qa",
}
_MAX_TOKENS = {"qa": 64, "dialogue": 200, "temporal_qa": 128, "timelines": 64}
_MAX_CHARS = {"qa": 120, "dialogue": 480, "temporal_qa": 300, "timelines": 120}


@dataclass
class EvalItem:
    """One model call to make and what its answer is scored against."""

    kind: str
    item_id: str
    group: str  # unchanged / new / changed; timelines: the interval index
    query: str  # what the retriever searches for
    values: dict[str, str]  # prompt values besides the passages and the date
    as_of: str  # the date the model is told; the corpus holds snapshots up to it
    gold: list[str]
    evidence: list[str]
    previous: str | None = None
    mode: str = "any"
    extra: dict[str, Any] = field(default_factory=dict)
    # The snapshot that made the item (a timeline interval: the date its answer began).
    created: str | None = None


@dataclass(frozen=True)
class ItemFilter:
    """Which items an evaluation scores: those created after ``created_after`` (a date,
    exclusive: an item made at that snapshot is out) and of ``types`` (None: any)."""

    created_after: str | None = None
    types: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.types or ()) - set(TYPES))
        if unknown or self.types == ():
            raise WikidriftError(f"--types {unknown or '(none)'}: allowed: {', '.join(TYPES)}")

    @property
    def active(self) -> bool:
        """Whether it leaves any item out."""
        return self.created_after is not None or (
            self.types is not None and set(self.types) != set(TYPES)
        )

    def record(self) -> dict[str, Any] | None:
        """What ``results.json`` and the leaderboard record (None: every item)."""
        if not self.active:
            return None
        return {
            "created_after": self.created_after,
            "types": sorted(self.types, key=TYPES.index) if self.types else None,
        }

    def keeps(self, item: EvalItem) -> bool:
        """Whether ``item`` is scored."""
        if self.created_after is not None and not (item.created or "") > self.created_after:
            return False
        return self.types is None or item.kind == "timelines" or item.group in self.types

    def skips_kind(self, kind: str) -> str | None:
        """Why a whole kind is left out, or None: timeline intervals have no item type."""
        if kind == "timelines" and self.types is not None and set(self.types) != set(TYPES):
            return "timeline intervals have no item type (--types)"
        return None


@dataclass
class EvalRun:
    """Everything one evaluation produced (written out by :mod:`pipeline.evaluate.report`)."""

    release: str
    release_id: str
    retriever: str
    k: int
    kinds: list[str]
    skipped: dict[str, str]
    counts: dict[str, dict[str, int]]
    metrics: dict[str, Any]
    predictions: list[dict[str, Any]]
    model_calls: int
    cache_hits: int
    failed: int
    retrieval_ms_per_query: float | None
    seconds: float
    prompt_hashes: dict[str, str]
    filter: dict[str, Any] | None = None  # ItemFilter.record(): None when every item counts


# --------------------------------------------------------------------------- items
def _optional_table(workdir: Path, release: str, name: str) -> list[dict[str, Any]] | None:
    path = release_dir(workdir, release) / f"{name}.parquet"
    return read_release_table(workdir, release, name).to_pylist() if path.exists() else None


def qa_items(workdir: Path, release: str) -> list[EvalItem]:
    """One item per release QA pair."""
    return [
        EvalItem(
            kind="qa",
            item_id=r["item_id"],
            group=r["type"],
            query=r["question"],
            values={"question": r["question"]},
            as_of=release,
            gold=[r["answer"]],
            evidence=[r["evidence_text"] or ""],
            previous=r["previous_answer"],
            created=r.get("created_snapshot"),
        )
        for r in read_release_table(workdir, release, "qa").to_pylist()
    ]


def _history(turns: list[dict[str, Any]]) -> str:
    if not turns:
        return CONVERSATION_START
    return "\n".join(f"User: {t['user']}\nAssistant: {t['expert']}" for t in turns)


def dialogue_items(workdir: Path, release: str) -> list[EvalItem]:
    """One item per dialogue turn to evaluate, with the dialogue's earlier turns as history."""
    rows = read_release_table(workdir, release, "dialogue").to_pylist()
    by_dialogue: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_dialogue.setdefault(r["dialogue_id"], []).append(r)
    items = []
    for turns in by_dialogue.values():
        turns.sort(key=lambda t: t["turn_idx"])
        for i, t in enumerate(turns):
            if not t["evaluate"]:
                continue
            items.append(
                EvalItem(
                    kind="dialogue",
                    item_id=t["turn_id"],
                    group=t["type"],
                    query=t["user"],
                    values={"history": _history(turns[:i]), "user": t["user"]},
                    as_of=release,
                    gold=[t["expert"]],
                    evidence=[t["evidence_text"] or ""],
                    created=t["created_snapshot"],
                )
            )
    return items


def temporal_qa_items(rows: list[dict[str, Any]], release: str) -> list[EvalItem]:
    """One item per temporal question (list answers, scored by their ``answer_mode``)."""
    return [
        EvalItem(
            kind="temporal_qa",
            item_id=r["question_id"],
            group=r["type"],
            query=r["question"],
            values={"question": r["question"]},
            as_of=release,
            gold=list(r["answer"] or []),
            evidence=list(r["evidence_text"] or []),
            mode=r["answer_mode"],
            extra={"category": r["category"]},
            created=r.get("created_snapshot"),
        )
        for r in rows
    ]


def timeline_items(
    rows: list[dict[str, Any]], release: str, snapshots: list[str]
) -> list[EvalItem]:
    """One item per interval that starts on or before ``release`` and after the first
    snapshot, asked as of the interval's start."""
    items = []
    for r in rows:
        start = str(r["interval_start"])
        if start > release or not any(s <= start for s in snapshots):
            continue
        evidence = r["evidence_text"]
        items.append(
            EvalItem(
                kind="timelines",
                item_id=f"{r['question_id']}@{r['interval_idx']}",
                group=str(r["interval_idx"]),
                query=r["question"],
                values={"question": r["question"]},
                as_of=start,
                gold=[r["answer"]],
                evidence=list(evidence) if isinstance(evidence, list) else [evidence or ""],
                extra={"question_id": r["question_id"], "interval_start": start},
                created=start,
            )
        )
    return items


def load_items(
    workdir: Path,
    release: str,
    kinds: Sequence[str],
    limit: int | None = None,
    item_filter: ItemFilter | None = None,
) -> tuple[dict[str, list[EvalItem]], dict[str, str]]:
    """The items of each kind of ``release`` that ``item_filter`` keeps (the first ``limit``
    of each), and the kinds skipped with the reason (a table this release does not have, a
    filter that does not apply)."""
    items: dict[str, list[EvalItem]] = {}
    skipped: dict[str, str] = {}
    snapshots = corpus_snapshots(workdir, release)
    item_filter = item_filter or ItemFilter()
    for kind in kinds:
        why = item_filter.skips_kind(kind)
        if why is not None:
            skipped[kind] = why
            continue
        if kind == "qa":
            found = qa_items(workdir, release)
        elif kind == "dialogue":
            found = dialogue_items(workdir, release)
        else:
            rows = _optional_table(workdir, release, kind)
            if rows is None:
                skipped[kind] = f"release {release} has no {kind}.parquet"
                continue
            if kind == "temporal_qa":
                found = temporal_qa_items(rows, release)
            else:
                found = timeline_items(rows, release, snapshots)
        found = [it for it in found if item_filter.keeps(it)]
        items[kind] = found[:limit] if limit is not None else found
    return items, skipped


# --------------------------------------------------------------------------- retrieval
def superseded_evidence(workdir: Path, date: str) -> list[str]:
    """Evidence sentences of the facts the release of ``date`` marks superseded (none when
    there is no release of that date)."""
    path = release_dir(workdir, date) / "quadruples.parquet"
    if not path.exists():
        return []
    table = read_release_table(workdir, date, "quadruples").to_pylist()
    return [r["evidence_text"] for r in table if r["status"] == "superseded" and r["evidence_text"]]


def retrieve(
    workdir: Path,
    items: Sequence[EvalItem],
    retriever: str,
    embedder: Embedder | None,
    settings: EvaluateConfig,
) -> tuple[list[list[Hit]], float | None]:
    """Top-k hits per item (empty lists for ``none``), each item searched in the corpus of its
    ``as_of`` date, and the mean search time per query in milliseconds."""
    if retriever == "none":
        return [[] for _ in items], None
    hits: list[list[Hit]] = [[] for _ in items]
    by_date: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        by_date.setdefault(item.as_of, []).append(i)
    seconds = 0.0
    for date, indices in sorted(by_date.items()):
        found = make_retriever(
            retriever,
            build_corpus(workdir, date),
            embedder=embedder,
            superseded_evidence=superseded_evidence(workdir, date),
            settings=settings,
        )
        assert found is not None
        start = time.perf_counter()
        results = found.search([items[i].query for i in indices], settings.k)
        seconds += time.perf_counter() - start
        for i, result in zip(indices, results, strict=True):
            hits[i] = result
    return hits, 1000 * seconds / len(items) if items else None


def _clip(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    return text[:max_chars].rsplit(" ", 1)[0] + " ..."


def format_passages(hits: Sequence[Hit], max_chars: int) -> str:
    """Numbered passages for a prompt, each with its article and its latest snapshot date,
    cut to ``max_chars``."""
    if not hits:
        return NO_PASSAGES
    return "\n".join(
        f"[{n}] {h.passage.title} ({h.passage.last_seen}): {_clip(h.passage.text, max_chars)}"
        for n, h in enumerate(hits, 1)
    )


# --------------------------------------------------------------------------- asking
def answer_schema(kind: str) -> dict[str, Any]:
    """The JSON object the model answers with: one string field."""
    name = _ANSWER_FIELD[kind]
    return {
        "type": "object",
        "properties": {name: {"type": "string", "maxLength": _MAX_CHARS[kind]}},
        "required": [name],
        "additionalProperties": False,
    }


def build_request(
    item: EvalItem, hits: Sequence[Hit], max_passage_chars: int = EvaluateConfig().max_passage_chars
) -> LLMRequest:
    """The chat request that asks ``item`` with its retrieved passages."""
    template = load_prompt(_PROMPT[item.kind])
    passages = format_passages(hits, max_passage_chars)
    messages = template.render(date=item.as_of, passages=passages, **item.values)
    return LLMRequest(
        messages=messages,
        prompt_hash=template.prompt_hash,
        purpose=template.name,
        json_schema=answer_schema(item.kind),
        schema_name=template.name,
        max_tokens=_MAX_TOKENS[item.kind],
    )


def prediction_of(kind: str, response: LLMResponse) -> str:
    """The answer text of a response ("" for a failed one)."""
    if response.error is not None:
        return ""
    parsed = response.parsed
    value = parsed.get(_ANSWER_FIELD[kind]) if isinstance(parsed, dict) else None
    return (value if isinstance(value, str) else response.text).strip()


def ask(backend: LLMBackend, requests: list[LLMRequest], batch_size: int) -> list[LLMResponse]:
    """Answers to ``requests`` in batches, reporting progress as each arrives."""
    answers: list[LLMResponse] = []
    for start in range(0, len(requests), batch_size):
        batch = requests[start : start + batch_size]
        answers += backend.complete_many(batch, on_response=lambda _i, _r: progress.advance(1))
    return answers


# --------------------------------------------------------------------------- scoring
def _pct(value: float | None) -> float | None:
    return None if value is None else round(100 * value, 2)


def score_item(item: EvalItem, prediction: str, hits: Sequence[Hit]) -> dict[str, Any]:
    """Per-item scores: EM / F1 (QA kinds), interval correctness (timelines), outdated
    (changed QA), evidence recall of the retrieved passages."""
    row: dict[str, Any] = {"kind": item.kind, "item_id": item.item_id, "type": item.group}
    if item.kind == "temporal_qa":
        em, f1 = metrics.list_em_f1(prediction, item.gold, item.mode)
    else:
        em, f1 = metrics.best_em_f1(prediction, item.gold)
    row.update(em=em, f1=f1)
    if item.kind == "timelines":
        row["correct"] = metrics.interval_correct(prediction, item.gold[0])
    if item.kind == "qa" and item.group == "changed" and item.previous:
        row["outdated"] = metrics.is_outdated(prediction, item.gold[0], item.previous)
    if hits:
        passages = [h.passage.sentences for h in hits]
        row["recall"] = metrics.evidence_recall(item.evidence, passages)
    return row


def _group_metrics(
    kind: str, items: list[EvalItem], scored: list[dict[str, Any]], preds: list[str]
) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(scored)}
    out["em"] = _pct(metrics.mean(s["em"] for s in scored))
    out["f1"] = _pct(metrics.mean(s["f1"] for s in scored))
    if kind == "dialogue":
        out["bleu"] = metrics.corpus_bleu(preds, [it.gold[0] for it in items])
        out["bleu"] = None if out["bleu"] is None else round(out["bleu"], 2)
    if kind == "timelines":
        out["accuracy"] = _pct(metrics.mean(float(s["correct"]) for s in scored))
    recalls = [s["recall"] for s in scored if "recall" in s]
    if recalls:
        out["recall"] = _pct(metrics.mean(recalls))
    return out


def aggregate(
    kind: str,
    items: list[EvalItem],
    scored: list[dict[str, Any]],
    preds: list[str],
    retrieved: bool,
) -> dict[str, Any]:
    """Metrics of one kind: per type (or interval), ``all``, and the kind's extras."""
    groups: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        groups.setdefault(item.group or "unknown", []).append(i)
    order = sorted(groups, key=lambda g: (TYPES.index(g) if g in TYPES else len(TYPES), g))
    result: dict[str, Any] = {}
    for name in [*order, "all"]:
        idx = groups[name] if name != "all" else list(range(len(items)))
        result[name] = _group_metrics(
            kind, [items[i] for i in idx], [scored[i] for i in idx], [preds[i] for i in idx]
        )
    if kind == "qa":
        flags = [s["outdated"] for s in scored if "outdated" in s]
        result["outdated_rate"] = _pct(metrics.mean(float(f) for f in flags))
        result["outdated_n"] = len(flags)
    if kind == "temporal_qa":
        categories: dict[str, list[int]] = {}
        for i, item in enumerate(items):
            categories.setdefault(str(item.extra.get("category")), []).append(i)
        result["by_category"] = {
            c: _group_metrics(
                kind, [items[i] for i in idx], [scored[i] for i in idx], [preds[i] for i in idx]
            )
            for c, idx in sorted(categories.items())
        }
    if not retrieved:
        for value in result.values():
            if isinstance(value, dict):
                value.pop("recall", None)
    return result


# --------------------------------------------------------------------------- the run
def evaluate_release(
    workdir: str | Path,
    release: str,
    *,
    backend: LLMBackend,
    retriever: str = "none",
    embedder: Embedder | None = None,
    kinds: Sequence[str] = EVALUATED_TABLES,
    limit: int | None = None,
    settings: EvaluateConfig | None = None,
    item_filter: ItemFilter | None = None,
) -> EvalRun:
    """Evaluate ``backend`` on the release of ``release`` with ``retriever`` (the top
    ``settings.k`` passages; ``settings``: the ``[evaluate]`` config, default its defaults),
    on the items ``item_filter`` keeps (default: all)."""
    workdir = Path(workdir)
    settings = settings or EvaluateConfig()
    unknown = sorted(set(kinds) - set(EVALUATED_TABLES))
    if unknown:
        raise WikidriftError(f"unknown kinds {unknown}: allowed: {', '.join(EVALUATED_TABLES)}")
    if limit is not None and limit < 1:
        raise WikidriftError(f"--limit {limit}: must be at least 1")
    started = time.monotonic()
    manifest = check_release(workdir, release)
    item_filter = item_filter or ItemFilter()
    items_by_kind, skipped = load_items(workdir, release, kinds, limit, item_filter)
    items = [it for kind in items_by_kind for it in items_by_kind[kind]]
    hits, retrieval_ms = retrieve(workdir, items, retriever, embedder, settings)
    requests = [
        build_request(it, h, settings.max_passage_chars) for it, h in zip(items, hits, strict=True)
    ]
    calls0, hits0 = getattr(backend, "calls_made", 0), getattr(backend, "hits", 0)
    progress.stage(f"{release} evaluate", len(requests), "item")
    responses = ask(backend, requests, settings.batch_size)
    preds = [prediction_of(it.kind, r) for it, r in zip(items, responses, strict=True)]
    scored = [score_item(it, p, h) for it, p, h in zip(items, preds, hits, strict=True)]
    results: dict[str, Any] = {}
    counts: dict[str, dict[str, int]] = {}
    offset = 0
    for kind, kind_items in items_by_kind.items():
        part = slice(offset, offset + len(kind_items))
        offset += len(kind_items)
        results[kind] = aggregate(kind, kind_items, scored[part], preds[part], retriever != "none")
        counts[kind] = {
            g: v["n"] for g, v in results[kind].items() if isinstance(v, dict) and "n" in v
        }
    predictions = [
        {
            **s,
            "prediction": p,
            "gold": it.gold,
            "previous_answer": it.previous,
            "as_of": it.as_of,
            "retrieved": [
                {
                    "passage_id": h.passage.passage_id,
                    "snapshot": h.passage.last_seen,
                    "current": h.passage.current,
                    "score": round(h.score, 4),
                }
                for h in hs
            ],
            "error": r.error,
        }
        for it, s, p, hs, r in zip(items, scored, preds, hits, responses, strict=True)
    ]
    return EvalRun(
        release=release,
        release_id=manifest.release_id,
        retriever=retriever,
        k=settings.k,
        kinds=list(items_by_kind),
        skipped=skipped,
        counts=counts,
        metrics=results,
        predictions=predictions,
        model_calls=getattr(backend, "calls_made", 0) - calls0,
        cache_hits=getattr(backend, "hits", 0) - hits0,
        failed=sum(r.error is not None for r in responses),
        retrieval_ms_per_query=None if retrieval_ms is None else round(retrieval_ms, 3),
        seconds=round(time.monotonic() - started, 2),
        prompt_hashes={
            name: load_prompt(name).prompt_hash for name in sorted(set(_PROMPT.values()))
        },
        filter=item_filter.record(),
    )
