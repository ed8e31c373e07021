"""The LLM phrases each temporal question; code checks what it wrote.

The model sees the facts, the answer code chose and the time the question must name
(``prompts/temporal_question.md``, answer schema ``{"question": ...}``). A question is kept
only when it passes :func:`question_problem`: it must not give its answer away and must
name its time (a timeline question, asked at every release, must name none).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pipeline import progress
from pipeline.dates import MONTH_NAMES
from pipeline.generate.items import FieldError, field_value
from pipeline.generate.prompts import load_prompt
from pipeline.models.llm.base import LLMBackend, LLMRequest, LLMResponse, require_answered
from pipeline.temporal.questions import QuestionSpec, spoken_date
from pipeline.text_checks import (
    contains_normalized,
    content_words,
    dangling_reference,
    date_in_text,
    gives_answer_away,
)

PROMPT = "temporal_question"
# Part of the stage's digest: stored phrasings are checked again when the checks change.
CHECKS_VERSION = 4
MAX_WORDS = 40
REASONS = (
    "no_usable_answer",
    "not_a_question",
    "too_long",
    "answer_leaked",
    "time_not_named",
    "names_a_time",
    "entity_not_named",
    "question_not_standalone",
    "asks_for_another_kind",
    "no_template",
    "ambiguous",
)
AMBIGUOUS_DETAIL = "another answer has the same question"
_KIND = {
    "C1": "one fact",
    "C2": "every answer over the time span",
    "C3": "the entity that links the two facts",
    "timeline": "the fact that holds now",
}
_YEAR = re.compile(r"\b(1[5-9]\d\d|20\d\d)\b")
# What the wh-word asks for, and whether an answer is of that kind: "When did X join Y?"
# stored with "Y" asks for a date the answer is not.
_ASKS_WHEN = re.compile(
    r"^(?:when|(?:in |during )?(?:what|which) (?:year|month)"
    r"|(?:on )?(?:what|which) (?:date|day))\b",
    re.I,
)
_MONTH = re.compile(r"\b(?:" + "|".join(MONTH_NAMES) + r")\b", re.I)
_ASKS_HOW_MANY = re.compile(r"^how (?:many|much)\b", re.I)
_NUMBER = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|hundred|"
    r"thousand|million|billion)\b",
    re.I,
)


@dataclass(frozen=True)
class Phrasing:
    """The outcome for one question: its text, or why it was rejected."""

    question_id: str
    question: str | None
    reason: str | None  # None = kept
    detail: str = ""


def _fact_line(n: int, spec: QuestionSpec, k: int) -> str:
    f = spec.facts[k]
    when = spoken_date(f.timestamp) if f.dated else f"as of {spoken_date(f.observed_at[:7])}"
    return f"{n}. {f.subject} | {f.relation} | {f.object} | {when}"


def phrasing_request(spec: QuestionSpec) -> LLMRequest:
    """The phrasing request of one question."""
    return load_prompt(PROMPT).request(
        facts="\n".join(_fact_line(k + 1, spec, k) for k in range(len(spec.facts))),
        answer="; ".join(spec.answer),
        time=spec.time_phrase or "now",
        kind=_KIND[spec.category],
    )


def _time_parts(spec: QuestionSpec) -> list[str]:
    """The ISO dates the question must name: each end of the interval, or its one date."""
    if spec.as_of is None:
        return []
    return spec.as_of.split("/") if "/" in spec.as_of else [spec.as_of]


def _named_entities(spec: QuestionSpec) -> list[str]:
    """Who or what the question has to name: the subject (C1, C2, timeline); for C3 the two
    entities besides the shared one."""
    if spec.category == "C3":
        first, second = spec.facts
        if spec.shape == "bridge":
            return [first.subject, second.object]
        return [first.subject, second.subject]
    return [spec.facts[0].subject]


def question_problem(spec: QuestionSpec, question: str) -> tuple[str, str] | None:
    """(reason, detail) when ``question`` cannot stand for ``spec``; None when it can."""
    question = " ".join(question.split())
    if not question.endswith("?") or len(question) < 10:
        return "not_a_question", question
    if len(question.split()) > MAX_WORDS:
        return "too_long", f"{len(question.split())} words"
    for answer in spec.answer:
        if contains_normalized(answer, question):
            return "answer_leaked", answer
        given = gives_answer_away(question, answer)
        if given:
            return "answer_leaked", given
    if spec.category == "timeline":
        names = " ".join(f.subject for f in spec.facts)
        years = [y for y in _YEAR.findall(question) if y not in names]
        if years:
            return "names_a_time", years[0]
    else:
        for iso in _time_parts(spec):
            # Year and month must be named; the day may go ("in March 2025" for 1 March).
            if not date_in_text(iso[:7], question):
                return "time_not_named", spoken_date(iso[:7])
    asked = set(content_words(question))
    for entity in _named_entities(spec):
        words = set(content_words(entity))
        if words and not words & asked:
            return "entity_not_named", entity
    dangling = dangling_reference(question)
    if dangling:
        return "question_not_standalone", dangling
    wrong_kind = _answer_kind_problem(question, spec.answer)
    if wrong_kind:
        return "asks_for_another_kind", wrong_kind
    return None


def _answer_kind_problem(question: str, answers: Sequence[str]) -> str:
    """Why the stored answers cannot answer what the wh-word asks for ("When ...?" with no
    date among them, "How many ...?" with no number), or ""."""
    if _ASKS_WHEN.match(question) and not any(_YEAR.search(a) or _MONTH.search(a) for a in answers):
        return f"asks when, the answer is {answers[0]!r}"
    if _ASKS_HOW_MANY.match(question) and not any(_NUMBER.search(a) for a in answers):
        return f"asks how many, the answer is {answers[0]!r}"
    return ""


def recheck(spec: QuestionSpec, question: str | None) -> Phrasing | None:
    """A stored phrasing checked again (None when there is no text to check)."""
    if question is None:
        return None
    problem = question_problem(spec, question)
    if problem is not None:
        return Phrasing(spec.question_id, question, problem[0], problem[1])
    return Phrasing(spec.question_id, question, None)


def read_phrasing(spec: QuestionSpec, response: LLMResponse) -> Phrasing:
    """The checked question of one response."""
    if response.error or not isinstance(response.parsed, dict):
        return Phrasing(spec.question_id, None, "no_usable_answer", response.error or "no JSON")
    try:
        value = field_value(response.parsed, "question")
    except FieldError as exc:
        return Phrasing(spec.question_id, None, "no_usable_answer", str(exc))
    if not isinstance(value, str):
        return Phrasing(spec.question_id, None, "no_usable_answer", f"question = {value!r}")
    return recheck(spec, " ".join(value.split()))  # type: ignore[return-value]


def _asked(question: str) -> str:
    """A question's words without its wh-word: "Who did X hire in 2016?" and "What did X
    hire in 2016?" ask the same."""
    return re.sub(r"^(?:who|whom|what|which)\b\s*", "", question.lower())


def asked_keys(spec: QuestionSpec, question: str) -> tuple[str, ...]:
    """What a question asks, as keys two questions share when they ask the same: its words
    without the wh-word, and for a question about one fact, the fact's subject, relation and
    time, however it is worded ("Where was the sale approved on 21 September 2012?" and "What
    was the sale approved in on 21 September 2012?" ask the same)."""
    keys = [_asked(question)]
    if spec.category == "C1":
        subject, relation = spec.facts[0].key
        keys.append(f"\x00{subject}\x00{relation}\x00{spec.as_of}")
    return tuple(keys)


def ambiguous_questions(asked: Iterable[tuple[Sequence[str], Sequence[str]]]) -> set[str]:
    """The keys (:func:`asked_keys`) of ``(keys, answer)`` pairs that are asked for more
    than one answer ("What did 3M acquire in 2008?" for each of two acquisitions is right for
    neither)."""
    answers: dict[str, set[tuple[str, ...]]] = {}
    for keys, answer in asked:
        for key in keys:
            answers.setdefault(key, set()).add(tuple(answer))
    return {key for key, found in answers.items() if len(found) > 1}


def is_ambiguous(keys: Sequence[str], ambiguous: set[str]) -> bool:
    """Whether a question with these :func:`asked_keys` is asked for another answer too."""
    return any(key in ambiguous for key in keys)


def without_ambiguity(specs: Sequence[QuestionSpec], phrasings: list[Phrasing]) -> list[Phrasing]:
    """``phrasings`` with every kept question that another one also asks, for another answer,
    rejected as ``ambiguous``."""
    keys = [
        asked_keys(s, p.question) if p.question else ()
        for s, p in zip(specs, phrasings, strict=True)
    ]
    ambiguous = ambiguous_questions(
        (k, s.answer)
        for k, s, p in zip(keys, specs, phrasings, strict=True)
        if p.reason is None and p.question
    )
    return [
        Phrasing(p.question_id, p.question, "ambiguous", AMBIGUOUS_DETAIL)
        if p.reason is None and p.question and is_ambiguous(k, ambiguous)
        else p
        for k, p in zip(keys, phrasings, strict=True)
    ]


def phrase_questions(specs: Sequence[QuestionSpec], backend: LLMBackend) -> list[Phrasing]:
    """Phrase and check every spec; all requests go to the backend in one ``complete_many``
    (a local server answers them on its parallel slots)."""
    if not specs:
        return []
    progress.add_total(len(specs))
    responses = backend.complete_many(
        [phrasing_request(s) for s in specs], on_response=lambda _i, _r: progress.advance()
    )
    require_answered(responses, backend)
    return [read_phrasing(s, r) for s, r in zip(specs, responses, strict=True)]
