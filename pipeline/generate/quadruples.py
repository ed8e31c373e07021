"""Chronos-style knowledge quadruples (subject, relation, object, timestamp).

Two times per fact (bi-temporal): ``timestamp`` is the *valid time*, when the fact began or the
event happened, as the text itself dates it, and ``observed_at`` the *transaction time*, the
snapshot it was read from (always set). Timestamp precision follows the text and is never
padded: "YYYY-MM-DD" when the text names the day, "YYYY-MM" for a month, "YYYY" for a year
only, None when it gives no date. Padding "2024" to "2024-01-01" would invent a precision the
source does not have, and a downstream time filter can still compare prefixes.

Tasks: at the first snapshot (or for an article new to the workdir) one per selected
paragraph; later, the new and changed sentences of each paragraph, at most
``new_group_max_sentences`` per task. Each quadruple's type is its sentence's label.

Who writes them is ``generation.quadruple_source``: ``"llm"`` asks the model (one request
per task; a record without a ``timestamp`` key is read as null, as models drop null keys; any
other missing key rejects the record), ``"parse"`` reads them off the dependency parse
(:mod:`pipeline.generate.quadruple_parse`, no model; the offline profile's default: the
packaged 1.5B model's quadruples were right 12 times in 84). Both go through the same checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pipeline.config import GenerationConfig
from pipeline.dates import iso_date
from pipeline.generate.items import (
    FieldError,
    Quadruple,
    Reject,
    field_reject,
    field_value,
    index_field,
    response_reject,
    text_field,
)
from pipeline.generate.kinds import Batch, ItemGenerator, KindOutput, reject_of
from pipeline.generate.prompts import answer_schema, load_prompt, number_sentences
from pipeline.generate.quadruple_parse import PARSE_RULES, TitleReferent, facts_of, parser_id
from pipeline.generate.selection import CHANGED, NEW, Article, ArticleParagraph, is_statement
from pipeline.generate.validate import quadruple_key, split_duplicates
from pipeline.models.llm.base import LLMRequest, LLMResponse
from pipeline.syntax import parse

_NULLS = {"", "null", "none", "n/a", "na", "unknown", "not given", "no date", "-"}


def normalize_timestamp(value: Any) -> str | None:
    """ISO ``YYYY`` / ``YYYY-MM`` / ``YYYY-MM-DD`` (the precision given) from what a model
    wrote: "2024-3-5", "5 March 2024", "March 5, 2024", "March 2024", 2024, an ISO datetime...
    Null-like values give None; anything else comes back as the stripped text, which
    validation then rejects as ``bad_timestamp``. Raises :class:`FieldError` for non-scalars."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise FieldError("wrong_type", f"'timestamp' = {value!r} is not a date")
    if isinstance(value, int | float):
        value = str(int(value)) if float(value).is_integer() else str(value)
    if " ".join(value.strip().lower().split()) in _NULLS:
        return None
    found = iso_date(value)
    if found is not None:
        return found
    try:  # last resort: a full ISO datetime with zone, e.g. "2024-02-13T00:00:00+00:00"
        return datetime.fromisoformat(value.strip().replace("Z", "+00:00")).date().isoformat()
    except ValueError:
        return value.strip()


@dataclass(eq=False)
class QuadrupleTask:
    """The sentences to read quadruples from, and the request that asks the model for them
    (None: they are read off the parse)."""

    article: Article
    offered: tuple[int, ...]
    request: LLMRequest | None


def quadruple_task(
    article: Article, sent_idx: tuple[int, ...], cfg: GenerationConfig
) -> QuadrupleTask:
    """The quadruples task of the given sentences of an article: a ``quadruples`` request,
    or none when ``cfg.quadruple_source`` is ``"parse"``."""
    if cfg.quadruple_source == "parse":
        return QuadrupleTask(article, sent_idx, None)
    request = load_prompt("quadruples").request(
        schema=answer_schema(
            "quadruples", indices=sent_idx, max_items=cfg.quadruples_per_sentence * len(sent_idx)
        ),
        title=article.title,
        sentences=number_sentences(sent_idx, [article.texts[i] for i in sent_idx]),
        max_per_sentence=cfg.quadruples_per_sentence,
    )
    return QuadrupleTask(article, sent_idx, request)


def initial_quadruple_tasks(
    article: Article, paragraphs: list[ArticleParagraph], cfg: GenerationConfig
) -> list[QuadrupleTask]:
    """An article's first quadruple tasks: one per selected paragraph; read off the parse,
    which costs no model time, one per paragraph of the article (its statements)."""
    if cfg.quadruple_source == "parse":
        paragraphs = article.paragraphs()
    return [quadruple_task(article, para.sent_idx, cfg) for para in paragraphs]


def update_sentence_chunks(article: Article, max_sentences: int) -> list[tuple[int, ...]]:
    """The new and changed statements of each paragraph, in chunks of ``max_sentences``."""
    by_para: dict[int, list[int]] = {}
    for i in range(article.n_sentences):
        if article.labels.get(i) in (NEW, CHANGED) and is_statement(article.texts[i]):
            by_para.setdefault(article.para_of[i], []).append(i)
    return [
        tuple(idx[start : start + max_sentences])
        for idx in by_para.values()
        for start in range(0, len(idx), max_sentences)
    ]


def _quadruple(
    article: Article,
    idx: int,
    fact: tuple[str, str, str, str | None],
    prompt_hash: str,
    generator: str,
) -> Quadruple:
    """The quadruple (subject, relation, object, timestamp) ``fact`` of sentence ``idx``
    (an index outside the article keeps no evidence and no label: validation rejects it)."""
    in_range = 0 <= idx < article.n_sentences
    subject, relation, obj, timestamp = fact
    return Quadruple(
        page_id=article.page_id,
        title=article.title,
        snapshot=article.snapshot,
        subject=subject,
        relation=relation,
        object=obj,
        timestamp=timestamp,
        evidence_sent_idx=[idx],
        evidence_text=article.texts[idx] if in_range else "",
        type=article.label_of(idx) if in_range else "unlabeled",
        prompt_hash=prompt_hash,
        generator=generator,
    )


def parse_quadruples(
    task: QuadrupleTask, response: LLMResponse, generator: str
) -> tuple[list[Quadruple], list[Reject]]:
    """Candidate quadruples (validated later) and rejects of one response; a bad record is
    rejected alone, the others are kept."""
    article = task.article
    prompt_hash = task.request.prompt_hash
    where = ("quadruple", "quadruples", article.page_id, article.snapshot)
    rejected = response_reject(*where, response, prompt_hash)
    if rejected is not None:
        return [], [rejected]
    parsed = response.parsed or {}
    try:
        records = field_value(parsed, "quadruples")
        if not isinstance(records, list):
            raise FieldError("wrong_type", "'quadruples' is not a list")
    except FieldError as err:
        return [], [field_reject(*where, response, prompt_hash, err, parsed)]
    quads: list[Quadruple] = []
    rejects: list[Reject] = []
    for record in records:
        try:
            if not isinstance(record, dict):
                raise FieldError("wrong_type", f"quadruple {record!r} is not an object")
            idx = index_field(record, "sentence")
            # An omitted timestamp says the same as null: the text gives no date.
            raw_ts = record.get("timestamp", record.get("Timestamp"))
            timestamp = normalize_timestamp(raw_ts)
            fact = (text_field(record, "subject"), text_field(record, "relation"),
                    text_field(record, "object"), timestamp)  # fmt: skip
            quads.append(_quadruple(article, idx, fact, prompt_hash, generator))
        except FieldError as err:
            rejects.append(field_reject(*where, response, prompt_hash, err, record))
    return quads, rejects


def parsed_quadruples(task: QuadrupleTask, per_sentence: int) -> list[Quadruple]:
    """The quadruples the parse reads off the task's sentences, at most ``per_sentence`` each
    ("he" / "the company" is the article's entity where :class:`TitleReferent` says so)."""
    article = task.article
    referent = TitleReferent.of(article.title, article.texts[0] if article.texts else "")
    generator = parser_id()
    quads: list[Quadruple] = []
    for idx in task.offered:
        doc = parse(article.texts[idx])
        same_paragraph = idx > 0 and article.para_of[idx - 1] == article.para_of[idx]
        previous = parse(article.texts[idx - 1]) if same_paragraph else None
        for f in facts_of(doc, referent, previous)[:per_sentence]:
            fact = (f.subject, f.relation, f.object, f.timestamp)
            quads.append(_quadruple(article, idx, fact, PARSE_RULES, generator))
    return quads


def run_quadruples(tasks: list[QuadrupleTask], batch: Batch) -> KindOutput:
    """Ask every quadruple task of a shard (or read it off the parse), keep the facts that
    pass every check, then drop the ones already kept for the same article."""
    kept: list[Quadruple] = []
    rejects: list[Reject] = []
    raw_of: dict[int, str | None] = {}  # id(quadruple) -> the output it came from, for duplicates
    asked = [t for t in tasks if t.request is not None]
    answers = dict(zip(map(id, asked), batch.complete([t.request for t in asked]), strict=True))
    for task in tasks:
        response = answers.get(id(task))
        if response is None:
            found = parsed_quadruples(task, batch.cfg.quadruples_per_sentence)
            raw = None
        else:
            found, bad = parse_quadruples(task, response, batch.generator)
            rejects.extend(bad)
            raw = response.text
        for quad in found:
            v = batch.validator.score_quadruple(
                quad, n_sentences=task.article.n_sentences, allowed=task.offered
            )
            if v.keep:
                kept.append(quad)
                raw_of[id(quad)] = raw
            else:
                reason, detail = v.reason or "", v.detail
                rejects.append(
                    reject_of("quadruple", "quadruples", quad.row(), raw, reason, detail)
                )
    kept, dups = split_duplicates(kept, quadruple_key, lambda q: q.page_id)
    for quad in dups:
        detail = f"{quad.subject} | {quad.relation} | {quad.object} | {quad.timestamp}"
        rejects.append(
            reject_of("quadruple", "quadruples", quad.row(), raw_of[id(quad)], "duplicate", detail)
        )
    return KindOutput([q.row() for q in kept], rejects, {"quadruples": len(asked)})


QUADRUPLE_GENERATOR = ItemGenerator(
    table="quadruples",
    prompts=("quadruples",),
    initial_tasks=initial_quadruple_tasks,
    update_tasks=lambda article, cfg, _previous: [
        quadruple_task(article, chunk, cfg)
        for chunk in update_sentence_chunks(article, cfg.new_group_max_sentences)
    ],
    run=run_quadruples,
    rules=PARSE_RULES,
    counts=lambda table, _parts: {
        "dated": sum(t is not None for t in table["timestamp"].to_pylist())
    },
)
