"""GrowOVER-QA: the item, the answers the model writes, the requests, their parsing and the
checks, answer first.

Three prompts: ``qa_initial`` (one selected paragraph) and ``qa_new`` (a group of new
sentences, optionally with the text around them) offer the answer spans code found in the
sentences (:mod:`pipeline.generate.answer_spans`); the model chooses one, constrained by the
schema, and writes the question for it; the span's sentence is the evidence. ``qa_changed``
(an old sentence and the sentence that replaced it) gives the replaced value and its
replacement as the two answers and asks only for the question; the evidence is the new
sentence, the old one is kept beside it. Nothing to ask (no span, no value replaced in place)
makes no request.

Parsing never raises: an unusable answer becomes a :class:`Reject` with a reason code. A
parsed item is scored by :class:`QAChecks` (``ItemValidator.score_qa``) and, when every check
passes and ``qa_answer_check`` is on, asked back (:mod:`pipeline.generate.answer_check`); a
question already kept for the article (:func:`question_key`) is a duplicate.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from pipeline.config import GenerationConfig
from pipeline.generate.answer_check import answer_checks, disagreements
from pipeline.generate.answer_spans import (
    AnswerSpan,
    answer_spans,
    changed_values,
    list_part,
    name_part,
    range_part,
)
from pipeline.generate.grammar_checks import (
    answer_attachment,
    is_cut_off,
    names_no_subject,
    premise_problem,
    side_problem,
    year_missing,
)
from pipeline.generate.items import (
    FieldError,
    Reject,
    field_reject,
    make_item_id,
    response_reject,
    text_field,
)
from pipeline.generate.kinds import Batch, ItemGenerator, KindOutput, reject_of
from pipeline.generate.prompts import (
    MAX_CHARS,
    AnswerModel,
    load_prompt,
    number_sentences,
    register_answer_models,
)
from pipeline.generate.selection import (
    Article,
    ArticleParagraph,
    ChangedPair,
    NewGroup,
    changed_pairs,
    group_new_sentences,
    is_statement,
    source_context,
)
from pipeline.generate.validate import (
    REASONS,
    Check,
    Verdict,
    evidence_checks,
    script_check,
    split_duplicates,
    url_check,
)
from pipeline.models.llm.base import LLMRequest, LLMResponse
from pipeline.syntax import actor_problem
from pipeline.text_checks import (
    abbreviates_question_words,
    about_evidence,
    contains_normalized,
    dangling_reference,
    gives_answer_away,
    is_grounded,
    leaning_phrase,
    normalize_answer,
    undated_figure,
)

# Field order is the order the model writes them in: the answer (one of the offered spans)
# first, then the question whose answer it is.


class QAAnswer(AnswerModel):
    """Answer of ``qa_initial`` and ``qa_new``: one of the offered answers, then the question
    it answers (the request's schema narrows ``answer`` to the offered spans)."""

    answer: str
    question: str


class ChangedQAAnswer(AnswerModel):
    """Answer of ``qa_changed``: the question whose earlier and current answers the request
    gives."""

    question: str


class CheckAnswer(AnswerModel):
    """Answer of ``qa_check``: the question answered again from its evidence sentence."""

    answer: str


register_answer_models(
    {
        "qa_initial": QAAnswer,
        "qa_new": QAAnswer,
        "qa_changed": ChangedQAAnswer,
        "qa_check": CheckAnswer,
    }
)


@dataclass
class QAItem:
    """One question with its short answer (and, for a changed fact, the earlier answer)."""

    page_id: int
    title: str
    snapshot: str
    type: str
    origin: str
    question: str
    answer: str
    evidence_sent_idx: list[int]
    evidence_text: str
    prompt_hash: str
    generator: str
    raw_output: str
    previous_answer: str | None = None
    old_evidence_sent_idx: list[int] = field(default_factory=list)
    old_evidence_text: str | None = None
    previous_snapshot: str | None = None
    item_id: str = ""

    def __post_init__(self) -> None:
        if not self.item_id:
            self.item_id = make_item_id(
                "qa",
                self.page_id,
                self.snapshot,
                self.evidence_sent_idx,
                [self.question, self.answer, self.previous_answer],
            )

    def row(self) -> dict[str, Any]:
        """The Parquet row."""
        return asdict(self)


NO_CONTEXT = "(none)"

# What a rejected QA item is told before its second try, in words a small model acts on
# (the reason codes' own descriptions are written for people reading the rejects table).
RETRY_HINTS: dict[str, str] = {
    "answer_in_question": "its answer already appears in the question.",
    "answerable_from_question": "the question gives its answer away.",
    "answer_abbreviates_question": "its answer is the initials of a name the question spells out.",
    "answer_not_grounded": "its answer is not copied word for word from the sentence.",
    "previous_answer_not_grounded": "the earlier answer is not copied word for word from the "
    "old sentence.",
    "answer_too_long": "its answer is too long: give a short name, place, date, number or title.",
    "yes_no_answer": "it is a yes/no question.",
    "question_not_standalone": "the question says he, she, it, this, these or 'the film' where "
    "it must name who or what it is about.",
    "question_leans_on_text": "the question mentions the text or the article, which the quiz "
    "player never sees.",
    "question_not_about_evidence": "the question is not about the sentence it cites.",
    "answer_check_failed": "asked with only the sentence in view, the question gets another "
    "answer. Ask about a fact the sentence states plainly, with exactly one answer.",
    "question_names_nothing": "the question does not name who or what it is about.",
    "question_cut_off": "the question stops mid-phrase: write a shorter question that ends "
    "with a question mark.",
    "question_premise_unstated": "the question says something its sentence does not say. Use "
    "only the sentence's own words and facts.",
    "question_side_unstated": "the question puts someone on the wrong side: keep who did what "
    "to whom as the sentence says it.",
    "question_actor_swapped": "the question says someone did (or underwent) what the sentence "
    "says someone else did: keep who did what as the sentence says it.",
    "question_drops_date": "the sentence gives its figure as of a date: the question says "
    "that date.",
    "answer_lacks_year": "a question asking when needs an answer with its year: ask about "
    "another part of the sentence.",
    "answer_part_of_range": "the answer is only one end of a range or a score: the answer is "
    "the whole of it, as the sentence writes it.",
    "answer_not_attached": "the question asks about another action of the sentence than the "
    "one its answer belongs to. Use the verb the answer goes with.",
    "answers_identical": "the earlier and the current answer are the same.",
    "answer_did_not_change": "that answer is in both sentences: ask about what changed.",
}
ANSWER_CUE = "Answer:"
# Sampled, so that the second answer can differ; low, because retried pairs sampled at 0.7 were
# right less often (5 of 7 on real articles) than at 0.3 (6 of 7).
RETRY_TEMPERATURE = 0.3
# Not worth a second request: the backend failed, or the question was already kept.
NO_RETRY = frozenset({"llm_error", "duplicate"})


@dataclass(eq=False)
class QATask:
    """One QA request and what is needed to turn its answer into an item."""

    purpose: str  # "qa_initial" | "qa_new" | "qa_changed"
    article: Article
    offered: tuple[int, ...]  # sentence indices shown to the model as citable
    request: LLMRequest
    pair: ChangedPair | None = None
    previous_snapshot: str | None = None
    spans: tuple[AnswerSpan, ...] = ()  # the answers it may choose from (new items)
    values: tuple[str, str] | None = None  # (previous, current) answer of a changed item

    def span(self, answer: str) -> AnswerSpan | None:
        """The offered span ``answer`` names (case, accents and punctuation aside)."""
        key = normalize_answer(answer)
        return next((s for s in self.spans if normalize_answer(s.text) == key), None)


def _context(article: Article, para_idx: int, cover: tuple[int, ...], cfg: GenerationConfig) -> str:
    if not cfg.source_context:
        return NO_CONTEXT
    text = source_context(article, para_idx, cover, cfg.source_context_max_chars)
    return text or NO_CONTEXT


def _choice_schema(spans: tuple[AnswerSpan, ...]) -> dict[str, Any]:
    """The answer must be one of the offered spans; it comes first, the question is written
    for it."""
    return {
        "type": "object",
        "properties": {
            "answer": {"type": "string", "enum": list(dict.fromkeys(s.text for s in spans))},
            "question": {"type": "string", "maxLength": MAX_CHARS["question"]},
        },
        "required": ["answer", "question"],
        "additionalProperties": False,
    }


def _candidates(spans: tuple[AnswerSpan, ...]) -> str:
    """The offered spans as prompt lines, one line per sentence: ``[3] "AMD" | "2012"``."""
    by_sentence: dict[int, list[str]] = {}
    for span in spans:
        by_sentence.setdefault(span.sent_idx, []).append(f'"{span.text}"')
    return "\n".join(f"[{i}] {' | '.join(texts)}" for i, texts in by_sentence.items())


def _spans(article: Article, indices: tuple[int, ...]) -> tuple[AnswerSpan, ...]:
    kept = [i for i in indices if is_statement(article.texts[i])]
    return tuple(answer_spans(kept, [article.texts[i] for i in kept], article.title))


def initial_qa_task(
    article: Article, paragraph: ArticleParagraph, cfg: GenerationConfig
) -> QATask | None:
    """A ``qa_initial`` request for one selected paragraph (None: nothing in it to ask for)."""
    spans = _spans(article, paragraph.sent_idx)
    if not spans:
        return None
    request = load_prompt("qa_initial").request(
        schema=_choice_schema(spans),
        title=article.title,
        sentences=number_sentences(paragraph.sent_idx, paragraph.texts),
        candidates=_candidates(spans),
    )
    return QATask("qa_initial", article, paragraph.sent_idx, request, spans=spans)


def new_qa_task(article: Article, group: NewGroup, cfg: GenerationConfig) -> QATask | None:
    """A ``qa_new`` request for one group of consecutive new sentences (None: nothing in
    them to ask for)."""
    spans = _spans(article, group.sent_idx)
    if not spans:
        return None
    request = load_prompt("qa_new").request(
        schema=_choice_schema(spans),
        title=article.title,
        sentences=number_sentences(group.sent_idx, group.texts),
        context=_context(article, group.para_idx, group.sent_idx, cfg),
        candidates=_candidates(spans),
    )
    return QATask("qa_new", article, group.sent_idx, request, spans=spans)


def changed_qa_task(
    article: Article, pair: ChangedPair, cfg: GenerationConfig, previous_snapshot: str
) -> QATask | None:
    """A ``qa_changed`` request for one changed sentence and its old counterpart: the
    replaced value and its replacement are the two answers; the model writes the question
    (None: no value was replaced in place)."""
    values = changed_values(pair.old_text, pair.new_text)
    if values is None:
        return None
    request = load_prompt("qa_changed").request(
        title=article.title,
        old_sentence=pair.old_text,
        new_sentence=pair.new_text,
        previous=values[0],
        answer=values[1],
        context=_context(article, pair.para_idx, (pair.new_idx,), cfg),
    )
    return QATask(
        "qa_changed",
        article,
        (pair.new_idx,),
        request,
        pair=pair,
        previous_snapshot=previous_snapshot,
        values=values,
    )


def retry_qa_task(task: QATask, reason: str, *, seed: int = 0) -> QATask | None:
    """``task`` asked once more, told what was wrong with its first answer (``reason``, a
    reject code), sampled at :data:`RETRY_TEMPERATURE`; None when a retry cannot help.

    The rejected answer is not shown: a small model shown its own answer repeats it (22 of
    23 retries on real articles came back identical), and at temperature 0 the same prompt
    gives the same answer."""
    if reason in NO_RETRY:
        return None
    problem = RETRY_HINTS.get(reason, f"it breaks a rule ({REASONS.get(reason, reason)}).")
    follow_up = load_prompt("qa_retry")
    (note,) = follow_up.render(problem=problem)
    *before, last = task.request.messages
    text = last["content"]
    # The note goes right before the closing "Answer:" cue, where the model reads it last.
    head, cue, _ = text.rpartition(ANSWER_CUE)
    content = f"{head.rstrip()}\n{note['content']}\n{cue}" if cue else f"{text}\n{note['content']}"
    request = replace(
        task.request,
        messages=(*before, {"role": last["role"], "content": content}),
        prompt_hash=f"{task.request.prompt_hash}+{follow_up.prompt_hash}",
        purpose="qa_retry",  # the schema keeps the first request's name and shape
        temperature=RETRY_TEMPERATURE,
        seed=seed,
    )
    return replace(task, request=request)


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
        if task.values is not None:
            previous, answer = task.values
            evidence = list(task.offered)
        else:
            previous = None
            answer = text_field(parsed, "answer")
            span = task.span(answer)
            if span is not None:
                answer, evidence = span.text, [span.sent_idx]
            else:  # a backend that ignored the choices: the sentence that holds the answer
                holding = [
                    i
                    for i in task.offered
                    if i < article.n_sentences and is_grounded(answer, article.texts[i])
                ]
                evidence = holding[:1] or list(task.offered)
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


_YES_NO = {"yes", "no", "true", "false", "yes it is", "no it is not"}


class QAChecks:
    """The checks of a QA item: ``score_qa`` of
    :class:`pipeline.generate.validator.ItemValidator`, which holds these limits."""

    answer_max_words: int
    question_min_share: float
    question_grammar: bool

    @staticmethod
    def _grounded(name: str, answer: str, evidence: str) -> Check:
        if is_grounded(answer, evidence):
            return Check(name, True, "string")
        return Check(name, False, f"{answer!r} not in evidence")

    def _answer_checks(self, question: str, answer: str) -> list[Check]:
        n_words = len(answer.split())
        yes_no = normalize_answer(answer) in _YES_NO
        in_question = contains_normalized(answer, question)
        # only asked when the whole answer is not in the question, so one detail per item
        away = "" if in_question else gives_answer_away(question, answer)
        initials = not in_question and abbreviates_question_words(question, answer)
        return [
            Check(
                "answer_too_long",
                n_words <= self.answer_max_words,
                f"{n_words} words > {self.answer_max_words}"
                if n_words > self.answer_max_words
                else "",
            ),
            Check("yes_no_answer", not yes_no, answer if yes_no else ""),
            Check("answer_in_question", not in_question, answer if in_question else ""),
            Check("answerable_from_question", not away, away),
            Check("answer_abbreviates_question", not initials, answer if initials else ""),
        ]

    def score_qa(
        self, item: QAItem, *, n_sentences: int, allowed: Collection[int] | None = None
    ) -> Verdict:
        """Checks of a QA item; ``allowed`` = the sentence indices its prompt offered."""
        changed = item.type == "changed"
        texts = [("question", item.question), ("answer", item.answer)]
        if changed:
            texts.append(("previous_answer", item.previous_answer or ""))
        empty = [name for name, value in texts if not value.strip()]
        checks = [Check("empty_field", not empty, ", ".join(empty))]
        evidence = [("evidence", item.evidence_text)]
        if changed:
            evidence.append(("old evidence", item.old_evidence_text or ""))
        checks.append(url_check(texts, evidence))
        checks.append(script_check(texts, evidence))
        checks += evidence_checks(item.evidence_sent_idx, n_sentences, allowed)
        phrase = leaning_phrase(item.question)
        checks.append(Check("question_leans_on_text", phrase is None, phrase or ""))
        dangling = dangling_reference(item.question)
        checks.append(Check("question_not_standalone", dangling is None, dangling or ""))
        off_topic = about_evidence(
            item.question,
            [text for _, text in evidence] + [item.title],
            self.question_min_share,
        )
        checks.append(Check("question_not_about_evidence", not off_topic, off_topic))
        checks += self._answer_checks(item.question, item.answer)
        checks.append(self._grounded("answer_not_grounded", item.answer, item.evidence_text))
        if changed:
            previous = item.previous_answer or ""
            checks += self._answer_checks(item.question, previous)
            checks.append(
                self._grounded(
                    "previous_answer_not_grounded", previous, item.old_evidence_text or ""
                )
            )
            same = normalize_answer(previous) == normalize_answer(item.answer)
            checks.append(Check("answers_identical", not same, previous if same else ""))
            # What changed is the answer: the current one must be new to the old sentence
            # and the earlier one gone from the current sentence ("Williams" was in both
            # lists of engine customers; "the Silver Arrows" only gained a translation).
            stayed = [
                f"{name} {value!r} is in the {where} sentence too"
                for name, value, where, text in (
                    ("answer", item.answer, "earlier", item.old_evidence_text or ""),
                    ("previous_answer", previous, "current", item.evidence_text),
                )
                if value.strip() and is_grounded(value, text)
            ]
            checks.append(Check("answer_did_not_change", not stayed, "; ".join(stayed)))
        if self.question_grammar:
            checks += self._question_grammar(item)
        return Verdict(tuple(checks))

    def _question_grammar(self, item: QAItem) -> list[Check]:
        sources = [item.evidence_text, item.title]
        if item.type == "changed":
            sources.append(item.old_evidence_text or "")
        cut = is_cut_off(item.question, MAX_CHARS["question"])
        unnamed = names_no_subject(item.question, item.title)
        unstated = premise_problem(item.question, sources)
        sided = side_problem(item.question, sources)
        swapped = actor_problem(item.question, item.evidence_text, item.title)
        undated = undated_figure(f"{item.question} {item.answer}", item.evidence_text)
        yearless = year_missing(item.question, item.answer)
        halved = range_part(item.answer, item.evidence_text, item.question)
        named = name_part(item.answer, item.evidence_text)
        listed = list_part(item.answer, item.evidence_text)
        detached = answer_attachment(item.question, item.answer, [item.evidence_text])
        if not detached and item.type == "changed":
            detached = answer_attachment(
                item.question, item.previous_answer or "", [item.old_evidence_text or ""]
            )
        return [
            Check("question_cut_off", not cut, item.question[-40:] if cut else ""),
            Check("question_names_nothing", not unnamed, unnamed),
            Check("question_premise_unstated", not unstated, unstated),
            Check("question_side_unstated", not sided, sided),
            Check("question_actor_swapped", not swapped, swapped),
            Check("question_drops_date", not undated, undated),
            Check("answer_lacks_year", not yearless, yearless),
            Check("answer_part_of_range", not halved, f"the evidence says {halved!r}"),
            Check("answer_part_of_name", not named, f"the evidence says {named!r}"),
            Check("answer_part_of_list", not listed, f"the evidence says {listed!r}"),
            Check("answer_not_attached", not detached, detached),
        ]


def question_key(item: QAItem) -> str:
    """Duplicate key of a QA item: its normalized question."""
    return normalize_answer(item.question)


_QA_PURPOSE = {"initial": "qa_initial", "new_sentences": "qa_new", "changed_sentence": "qa_changed"}


@dataclass
class _QARound:
    """One round of QA requests: the kept items and the rejects, each with its task."""

    kept: list[tuple[QATask, QAItem]] = field(default_factory=list)
    failed: list[tuple[QATask, Reject]] = field(default_factory=list)
    checks: int = 0


def _qa_round(tasks: list[QATask], batch: Batch, check: bool) -> _QARound:
    """Ask ``tasks``, validate every answer and (``check``) ask each valid pair back."""
    out = _QARound()
    responses = batch.complete([t.request for t in tasks])
    for task, response in zip(tasks, responses, strict=True):
        item = parse_qa(task, response, batch.generator)
        if isinstance(item, Reject):
            out.failed.append((task, item))
            continue
        v = batch.validator.score_qa(
            item, n_sentences=task.article.n_sentences, allowed=task.offered
        )
        if v.keep:
            out.kept.append((task, item))
        else:
            reject = reject_of(
                "qa", task.purpose, item.row(), response.text, v.reason or "", v.detail
            )
            out.failed.append((task, reject))
    if not (check and out.kept):
        return out
    checks = answer_checks([item for _, item in out.kept])
    out.checks = len(checks)
    failed = disagreements(checks, batch.complete([c.request for c in checks]))
    for task, item in [pair for pair in out.kept if id(pair[1]) in failed]:
        detail = f"answer_check_failed: {failed[id(item)]}"
        reject = reject_of(
            "qa", task.purpose, item.row(), item.raw_output, "answer_check_failed", detail
        )
        out.failed.append((task, reject))
    out.kept = [pair for pair in out.kept if id(pair[1]) not in failed]
    return out


def _unique_questions(items: list[QAItem]) -> tuple[list[QAItem], list[Reject]]:
    """``items`` without the questions already kept for the same article."""
    kept, dups = split_duplicates(items, question_key, lambda q: q.page_id)
    rejects = [
        reject_of(
            "qa", _QA_PURPOSE[item.origin], item.row(), item.raw_output, "duplicate", item.question
        )
        for item in dups
    ]
    return kept, rejects


def run_qa(tasks: list[QATask], batch: Batch) -> KindOutput:
    """Ask, check and (``qa_answer_check``) ask back every QA task of a shard; one more try
    for each rejected one (``qa_retry``); then drop repeated questions."""
    cfg = batch.cfg
    first = _qa_round(tasks, batch, cfg.qa_answer_check)
    retries = [
        r
        for task, reject in (first.failed if cfg.qa_retry else [])
        if (r := retry_qa_task(task, reject.reason, seed=cfg.seed)) is not None
    ]
    second = _QARound()
    if retries:
        batch.note(f"shard {batch.index}: qa retry {len(retries)} requests")
        second = _qa_round(retries, batch, cfg.qa_answer_check)
    kept, rejects = _unique_questions([item for _, item in first.kept + second.kept])
    rejects += [reject for _, reject in first.failed + second.failed]
    n_checks = first.checks + second.checks
    requests = (
        dict(Counter(t.purpose for t in tasks))
        | ({"qa_check": n_checks} if n_checks else {})
        | ({"qa_retry": len(retries)} if retries else {})
    )
    return KindOutput([q.row() for q in kept], rejects, requests)


def _update_tasks(article: Article, cfg: GenerationConfig, previous: str) -> list[QATask]:
    tasks = [
        new_qa_task(article, group, cfg)
        for group in group_new_sentences(article, cfg.new_group_max_sentences)
    ] + [changed_qa_task(article, pair, cfg, previous) for pair in changed_pairs(article)]
    return [t for t in tasks if t is not None]


QA_GENERATOR = ItemGenerator(
    table="qa",
    prompts=("qa_initial", "qa_new", "qa_changed", "qa_check"),
    follow_ups=("qa_retry",),
    initial_tasks=lambda article, paragraphs, cfg: [
        t for t in (initial_qa_task(article, para, cfg) for para in paragraphs) if t is not None
    ],
    update_tasks=_update_tasks,
    run=run_qa,
)
