"""Checks every generated item must pass before it enters a benchmark.

Scoring is separate from the keep decision: ``ItemValidator.score_*`` runs every check and
returns a :class:`Verdict` holding each :class:`Check` (name, passed, detail); the verdict
keeps the item only when all passed, and its ``reason`` is the first failed check's name, a
stable code from :data:`REASONS` that the rejects table and the run summary count.

Grounding is lexical by default: the normalized answer (lowercase, accents, punctuation and
articles stripped, number words and thousands separators normalized) must occur in the
normalized evidence, as a whole or part by part for a list answer ("X and Y"). When a model is
available, ``grounding_nli(premise, hypothesis) -> bool`` gets a second say on answers the
string test misses (premise = evidence text, hypothesis = question + answer).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, TypeVar

from pipeline.config import GenerationConfig

if TYPE_CHECKING:  # runtime import would be circular (pipeline.generate imports this module)
    from pipeline.generate.items import Dialogue, QAItem, Quadruple

GroundingNLI = Callable[[str, str], bool]
T = TypeVar("T")

REASONS: dict[str, str] = {
    # answers the parser could not use (raised in pipeline.generate.*)
    "llm_error": "the backend gave up on the request",
    "no_json": "the output holds no JSON object",
    "missing_field": "a required key is absent",
    "wrong_type": "a key holds the wrong kind of value",
    # content checks (this module)
    "empty_field": "a required text is empty",
    "evidence_out_of_range": "an evidence index is not a sentence of the article",
    "evidence_outside_input": "an evidence index names a sentence that was not in the prompt",
    "evidence_unlabeled": "a dialogue turn rests on a sentence without a decided label",
    "question_leans_on_text": "the question points at the source text",
    "turn_leans_on_text": "a dialogue utterance points at the source text",
    "answer_too_long": "the answer has more words than allowed",
    "yes_no_answer": "the answer is yes/no instead of an entity",
    "answer_in_question": "the question already contains the answer",
    "answer_not_grounded": "the answer is not found in the evidence",
    "previous_answer_not_grounded": "the earlier answer is not found in the old sentence",
    "answers_identical": "earlier and current answers are the same after normalization",
    "bad_turn_count": "the dialogue has too few or too many turns",
    "bad_timestamp": "the timestamp is not YYYY, YYYY-MM or YYYY-MM-DD",
    "timestamp_not_in_evidence": "the timestamp's year does not occur in the evidence",
    "quadruple_not_grounded": "neither subject nor object occurs in the evidence",
    "duplicate": "the same question / fact was already kept for this article",
}

# Phrases that only make sense to a reader who has the source text in front of them.
_TEXT_NOUNS = (
    r"(?:paragraphs?|passages?|sentences?|text|article|context|excerpt|document|source|"
    r"snippet|information (?:given|provided)|(?:earlier|current|old|new|previous|revised|"
    r"updated|original) (?:version|sentence|text))"
)
_LEANING = re.compile(
    r"\b(?:"
    rf"according to (?:the |this |that |these |those )?(?:given |provided |above )?{_TEXT_NOUNS}"
    rf"|(?:in|from|based on|per|given) (?:the |this |that |these )(?:given |provided |above )?"
    rf"{_TEXT_NOUNS}"
    r"|(?:mentioned|described|stated|discussed|listed|noted|referenced|cited|shown) "
    r"(?:above|earlier|before|previously|here)"
    r"|as (?:mentioned|stated|described|noted|given)"
    r"|the (?:above|aforementioned)"
    rf"|(?:the|this|that) (?:given|provided|above|following) {_TEXT_NOUNS}"
    r"|(?:this|these) (?:paragraphs?|passages?|excerpts?|texts?|sentences?|article)"
    r"|(?:the|this) (?:earlier|current|old|new|previous|revised|updated|original) "
    r"(?:version|sentences?|text)"
    r")\b",
    re.IGNORECASE,
)
_YES_NO = {"yes", "no", "true", "false", "yes it is", "no it is not"}
_ARTICLES = {"a", "an", "the"}
_SMALL_NUMBERS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
)
_NUMBER_WORDS = {w: str(i) for i, w in enumerate(_SMALL_NUMBERS.split(" "))} | {
    w: str(10 * i)
    for i, w in enumerate(["thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"], 3)
}
_ISO = re.compile(r"^(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?$")
_PART_SPLIT = re.compile(r"\s*(?:,|;|/|&|\band\b|\bor\b)\s*", re.IGNORECASE)


def normalize_answer(text: str) -> str:
    """Lowercase, accents / punctuation / articles stripped, numbers in one spelling."""
    t = unicodedata.normalize("NFKD", text or "")
    t = "".join(c for c in t if not unicodedata.combining(c)).lower()
    t = re.sub(r"(?<=\d),(?=\d{3}\b)", "", t)  # 1,000,000 -> 1000000
    t = re.sub(r"(?<=\d)(?:st|nd|rd|th)\b", "", t)  # 21st -> 21
    t = t.replace("%", " percent ").replace("per cent", "percent").replace("&", " and ")
    t = re.sub(r"(?<=\d)\.(?=\d)", "\0", t)  # keep decimal points through punctuation removal
    t = re.sub(r"[^\w\0]+|_", " ", t).replace("\0", ".")
    tokens = [_NUMBER_WORDS.get(tok, tok) for tok in t.split() if tok not in _ARTICLES]
    return " ".join(tokens)


def contains_normalized(needle: str, haystack: str) -> bool:
    """True when normalized ``needle`` is a whole-token span of normalized ``haystack``."""
    n = normalize_answer(needle)
    return bool(n) and f" {n} " in f" {normalize_answer(haystack)} "


def is_grounded(answer: str, evidence: str) -> bool:
    """The answer occurs in the evidence as a whole or, for a list answer, part by part."""
    if contains_normalized(answer, evidence):
        return True
    parts = [p for p in _PART_SPLIT.split(answer) if normalize_answer(p)]
    return len(parts) > 1 and all(contains_normalized(p, evidence) for p in parts)


def leaning_phrase(text: str) -> str | None:
    """The phrase that makes ``text`` depend on seeing the source, or None."""
    m = _LEANING.search(text or "")
    return m.group(0) if m else None


def is_iso_timestamp(value: str) -> bool:
    """``YYYY``, ``YYYY-MM`` or ``YYYY-MM-DD`` naming a real calendar date."""
    m = _ISO.match(value)
    if not m:
        return False
    year, month, day = int(m.group(1)), int(m.group(2) or 1), int(m.group(3) or 1)
    try:
        date(year, month, day)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Check:
    """One scored property of an item."""

    name: str
    passed: bool
    detail: str = ""


@dataclass(frozen=True)
class Verdict:
    """All checks of one item; kept when every check passed."""

    checks: tuple[Check, ...]

    @property
    def keep(self) -> bool:
        """True when nothing failed."""
        return all(c.passed for c in self.checks)

    @property
    def failures(self) -> list[Check]:
        """The failed checks, in check order."""
        return [c for c in self.checks if not c.passed]

    @property
    def reason(self) -> str | None:
        """The first failed check's code (None when kept)."""
        failed = self.failures
        return failed[0].name if failed else None

    @property
    def detail(self) -> str:
        """Every failure with its detail, for the rejects table."""
        return "; ".join(f"{c.name}: {c.detail}" if c.detail else c.name for c in self.failures)


def _evidence_checks(
    indices: Sequence[int], n_sentences: int, allowed: Collection[int] | None
) -> list[Check]:
    outside_article = [i for i in indices if not 0 <= i < n_sentences]
    outside_input = (
        [i for i in indices if i not in allowed and i not in outside_article]
        if allowed is not None
        else []
    )
    return [
        Check("empty_field", bool(indices), "" if indices else "no evidence index"),
        Check(
            "evidence_out_of_range",
            not outside_article,
            f"{outside_article} not in 0..{n_sentences - 1}" if outside_article else "",
        ),
        Check(
            "evidence_outside_input",
            not outside_input,
            f"{outside_input} not among {sorted(allowed)}" if outside_input and allowed else "",
        ),
    ]


class ItemValidator:
    """Scores QA items, dialogues and quadruples against the evidence they cite."""

    def __init__(
        self,
        *,
        answer_max_words: int = 10,
        dialogue_min_turns: int = 3,
        dialogue_max_turns: int = 4,
        grounding_nli: GroundingNLI | None = None,
    ) -> None:
        self.answer_max_words = answer_max_words
        self.dialogue_min_turns = dialogue_min_turns
        self.dialogue_max_turns = dialogue_max_turns
        self.grounding_nli = grounding_nli

    @classmethod
    def from_config(
        cls, cfg: GenerationConfig, grounding_nli: GroundingNLI | None = None
    ) -> ItemValidator:
        """A validator with the limits of a generation config."""
        return cls(
            answer_max_words=cfg.answer_max_words,
            dialogue_min_turns=cfg.dialogue_min_turns,
            dialogue_max_turns=cfg.dialogue_max_turns,
            grounding_nli=grounding_nli,
        )

    def _grounded(self, name: str, question: str, answer: str, evidence: str) -> Check:
        if is_grounded(answer, evidence):
            return Check(name, True, "string")
        if self.grounding_nli is not None and answer.strip():
            entailed = bool(self.grounding_nli(evidence, f"{question} {answer}"))
            return Check(name, entailed, "nli" if entailed else f"{answer!r}: nli not entailed")
        return Check(name, False, f"{answer!r} not in evidence")

    def _answer_checks(self, question: str, answer: str) -> list[Check]:
        n_words = len(answer.split())
        yes_no = normalize_answer(answer) in _YES_NO
        in_question = contains_normalized(answer, question)
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
        ]

    def score_qa(
        self, item: QAItem, *, n_sentences: int, allowed: Collection[int] | None = None
    ) -> Verdict:
        """Checks of a QA item; ``allowed`` = the sentence indices its prompt offered."""
        changed = item.type == "changed"
        empty = [
            name
            for name, value in (
                ("question", item.question),
                ("answer", item.answer),
                *((("previous_answer", item.previous_answer or ""),) if changed else ()),
            )
            if not value.strip()
        ]
        checks = [Check("empty_field", not empty, ", ".join(empty))]
        checks += _evidence_checks(item.evidence_sent_idx, n_sentences, allowed)
        phrase = leaning_phrase(item.question)
        checks.append(Check("question_leans_on_text", phrase is None, phrase or ""))
        checks += self._answer_checks(item.question, item.answer)
        checks.append(
            self._grounded("answer_not_grounded", item.question, item.answer, item.evidence_text)
        )
        if changed:
            previous = item.previous_answer or ""
            checks += self._answer_checks(item.question, previous)
            checks.append(
                self._grounded(
                    "previous_answer_not_grounded",
                    item.question,
                    previous,
                    item.old_evidence_text or "",
                )
            )
            same = normalize_answer(previous) == normalize_answer(item.answer)
            checks.append(Check("answers_identical", not same, previous if same else ""))
        return Verdict(tuple(checks))

    def score_dialogue(
        self, dialogue: Dialogue, *, n_sentences: int, allowed: Collection[int] | None = None
    ) -> Verdict:
        """Checks of a whole dialogue; ``allowed`` = the sentence indices of its paragraph."""
        n = len(dialogue.turns)
        checks = [
            Check(
                "bad_turn_count",
                self.dialogue_min_turns <= n <= self.dialogue_max_turns,
                f"{n} turns, want {self.dialogue_min_turns}-{self.dialogue_max_turns}",
            )
        ]
        empty = [
            f"turn {t.turn_idx} {side}"
            for t in dialogue.turns
            for side, text in (("user", t.user), ("expert", t.expert))
            if not text.strip()
        ]
        checks.append(Check("empty_field", not empty, ", ".join(empty)))
        indices = [i for t in dialogue.turns for i in t.evidence_sent_idx]
        one_each = all(len(t.evidence_sent_idx) == 1 for t in dialogue.turns)
        checks += _evidence_checks(indices if one_each else [], n_sentences, allowed)
        unlabeled = [
            t.turn_idx for t in dialogue.turns if t.type not in ("new", "changed", "unchanged")
        ]
        checks.append(
            Check("evidence_unlabeled", not unlabeled, f"turns {unlabeled}" if unlabeled else "")
        )
        phrases = [
            p
            for t in dialogue.turns
            for p in (leaning_phrase(t.user), leaning_phrase(t.expert))
            if p
        ]
        checks.append(Check("turn_leans_on_text", not phrases, ", ".join(phrases)))
        return Verdict(tuple(checks))

    def score_quadruple(
        self, quad: Quadruple, *, n_sentences: int, allowed: Collection[int] | None = None
    ) -> Verdict:
        """Checks of one quadruple; ``allowed`` = the sentence indices its prompt offered."""
        empty = [
            name
            for name, value in (
                ("subject", quad.subject),
                ("relation", quad.relation),
                ("object", quad.object),
            )
            if not value.strip()
        ]
        checks = [Check("empty_field", not empty, ", ".join(empty))]
        checks += _evidence_checks(quad.evidence_sent_idx, n_sentences, allowed)
        ts = quad.timestamp
        valid_ts = ts is None or is_iso_timestamp(ts)
        checks.append(Check("bad_timestamp", valid_ts, "" if valid_ts else repr(ts)))
        year_seen = ts is None or not valid_ts or ts[:4] in quad.evidence_text
        checks.append(Check("timestamp_not_in_evidence", year_seen, "" if year_seen else ts or ""))
        grounded = contains_normalized(quad.subject, quad.evidence_text) or contains_normalized(
            quad.object, quad.evidence_text
        )
        checks.append(
            Check(
                "quadruple_not_grounded",
                grounded,
                "" if grounded else f"{quad.subject!r} / {quad.object!r}",
            )
        )
        return Verdict(tuple(checks))


def question_key(item: QAItem) -> str:
    """Duplicate key of a QA item: its normalized question."""
    return normalize_answer(item.question)


def quadruple_key(quad: Quadruple) -> tuple[str, str, str, str | None]:
    """Duplicate key of a quadruple: normalized subject, relation, object and timestamp."""
    return (
        normalize_answer(quad.subject),
        normalize_answer(quad.relation),
        normalize_answer(quad.object),
        quad.timestamp,
    )


def split_duplicates(
    items: Sequence[T], key: Callable[[T], Hashable], scope: Callable[[T], Hashable]
) -> tuple[list[T], list[T]]:
    """(first occurrences, later duplicates): items with the same ``key`` in the same
    ``scope`` (an article) are duplicates; order is kept."""
    seen: set[tuple[Hashable, Hashable]] = set()
    kept: list[T] = []
    dups: list[T] = []
    for item in items:
        k = (scope(item), key(item))
        if k in seen:
            dups.append(item)
        else:
            seen.add(k)
            kept.append(item)
    return kept, dups
