"""GrowOVER-QA requests and answer parsing.

Three prompts: ``qa_initial`` (one selected paragraph -> a question, a short answer and the
evidence sentences), ``qa_new`` (a group of new sentences, optionally with the text around
them -> a question answered by those sentences) and ``qa_changed`` (an old sentence and the
sentence that replaced it -> one question with two conflicting answers; the evidence is the
new sentence, the old one is kept beside it). Sentences are shown with their article-level
index, which the model cites back, so no re-mapping is needed.

Parsing never raises: an unusable answer becomes a :class:`Reject` with a reason code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.config import GenerationConfig
from pipeline.generate.items import (
    FieldError,
    QAItem,
    Reject,
    field_reject,
    index_list_field,
    response_reject,
    text_field,
)
from pipeline.generate.prompts import answer_schema, load_prompt, number_sentences
from pipeline.generate.selection import Article, ChangedPair, NewGroup, Paragraph, source_context
from pipeline.models.llm.base import LLMRequest, LLMResponse
from pipeline.validate import answer_sentence

NO_CONTEXT = "(none)"


@dataclass(eq=False)
class QATask:
    """One QA request and what is needed to turn its answer into an item."""

    purpose: str  # "qa_initial" | "qa_new" | "qa_changed"
    article: Article
    offered: tuple[int, ...]  # sentence indices shown to the model as citable
    request: LLMRequest
    pair: ChangedPair | None = None
    previous_snapshot: str | None = None


def _context(article: Article, para_idx: int, cover: tuple[int, ...], cfg: GenerationConfig) -> str:
    if not cfg.source_context:
        return NO_CONTEXT
    text = source_context(article, para_idx, cover, cfg.source_context_max_chars)
    return text or NO_CONTEXT


def _evidence_schema(name: str, offered: tuple[int, ...]) -> dict[str, Any]:
    # One fact, so one or two sentences of evidence: a longer list is a model listing all.
    return answer_schema(name, indices=offered, min_items=1, max_items=min(2, len(offered)))


def initial_qa_task(article: Article, paragraph: Paragraph, cfg: GenerationConfig) -> QATask:
    """A ``qa_initial`` request for one selected paragraph."""
    request = load_prompt("qa_initial").request(
        schema=_evidence_schema("qa_initial", paragraph.sent_idx),
        title=article.title,
        sentences=number_sentences(paragraph.sent_idx, paragraph.texts),
        max_words=cfg.answer_max_words,
    )
    return QATask("qa_initial", article, paragraph.sent_idx, request)


def new_qa_task(article: Article, group: NewGroup, cfg: GenerationConfig) -> QATask:
    """A ``qa_new`` request for one group of consecutive new sentences."""
    request = load_prompt("qa_new").request(
        schema=_evidence_schema("qa_new", group.sent_idx),
        title=article.title,
        sentences=number_sentences(group.sent_idx, group.texts),
        context=_context(article, group.para_idx, group.sent_idx, cfg),
        max_words=cfg.answer_max_words,
    )
    return QATask("qa_new", article, group.sent_idx, request)


def changed_qa_task(
    article: Article, pair: ChangedPair, cfg: GenerationConfig, previous_snapshot: str
) -> QATask:
    """A ``qa_changed`` request for one changed sentence and its old counterpart."""
    request = load_prompt("qa_changed").request(
        title=article.title,
        old_sentence=pair.old_text,
        new_sentence=pair.new_text,
        context=_context(article, pair.para_idx, (pair.new_idx,), cfg),
        max_words=cfg.answer_max_words,
    )
    return QATask(
        "qa_changed",
        article,
        (pair.new_idx,),
        request,
        pair=pair,
        previous_snapshot=previous_snapshot,
    )


def parse_qa(task: QATask, response: LLMResponse, generator: str) -> QAItem | Reject:
    """Turn one response into a candidate QA item (validated later) or a reject."""
    prompt_hash = task.request.prompt_hash
    article = task.article
    where = ("qa", task.purpose, article.page_id, article.snapshot)
    rejected = response_reject(*where, response, prompt_hash)
    if rejected is not None:
        return rejected
    parsed = response.parsed or {}
    try:
        question = text_field(parsed, "question")
        answer = text_field(parsed, "answer")
        if task.purpose == "qa_changed":
            previous = text_field(parsed, "previous_answer")
            evidence = list(task.offered)
        else:
            previous = None
            offered = {i: article.texts[i] for i in task.offered if 0 <= i < article.n_sentences}
            evidence = answer_sentence(answer, index_list_field(parsed, "evidence"), offered)
    except FieldError as err:
        return field_reject(*where, response, prompt_hash, err, parsed)
    in_range = [i for i in evidence if 0 <= i < article.n_sentences]
    common = {
        "page_id": article.page_id,
        "title": article.title,
        "snapshot": article.snapshot,
        "question": question,
        "answer": answer,
        "evidence_sent_idx": evidence,
        # Out-of-range indices have no text; validation rejects the item for them.
        "evidence_text": article.evidence_text(in_range),
        "prompt_hash": prompt_hash,
        "generator": generator,
        "raw_output": response.text,
    }
    if task.pair is not None:
        return QAItem(
            type="changed",
            origin="changed_sentence",
            previous_answer=previous,
            old_evidence_sent_idx=[task.pair.old_idx],
            old_evidence_text=task.pair.old_text,
            previous_snapshot=task.previous_snapshot,
            **common,
        )
    origin = "initial" if task.purpose == "qa_initial" else "new_sentences"
    return QAItem(type="new", origin=origin, **common)
