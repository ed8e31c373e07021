"""The vocabulary of item checks and the checks every item kind shares.

Each kind's own checks live in its module (:mod:`pipeline.generate.qa`,
:mod:`~pipeline.generate.dialogue`, :mod:`~pipeline.generate.quadruples`);
:class:`pipeline.generate.validator.ItemValidator` runs them with the configured limits.
Scoring is separate from the keep decision: ``ItemValidator.score_*`` runs every check and
returns a :class:`Verdict` holding each :class:`Check` (name, passed, detail); the verdict
keeps the item only when all passed, and its ``reason`` is the first failed check's name, a
stable code from :data:`REASONS` that the rejects table and the run summary count.

Grounding is lexical (:func:`pipeline.text_checks.is_grounded`, where the text predicates
live).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pipeline.text_checks import find_url, is_latin

T = TypeVar("T")

REASONS: dict[str, str] = {
    # answers the parser could not use (raised in pipeline.generate.*)
    "llm_error": "the backend gave up on the request",
    "no_json": "the output holds no JSON object",
    "missing_field": "a required key is absent",
    "wrong_type": "a key holds the wrong kind of value",
    # decided in pipeline.generate.answer_check, after these checks passed
    "answer_check_failed": "asked back with only its evidence in view, the model gave another "
    "answer",
    # content checks (pipeline.generate.qa / dialogue / quadruples and this module)
    "empty_field": "a required text is empty",
    "contains_url": "the item or its evidence holds a URL, a web domain or an e-mail address",
    "evidence_out_of_range": "an evidence index is not a sentence of the article",
    "evidence_outside_input": "an evidence index names a sentence that was not in the prompt",
    "evidence_unlabeled": "a dialogue turn rests on a sentence without a decided label",
    "question_leans_on_text": "the question points at the source text",
    "question_not_standalone": "the question says 'this' / 'these', 'the film' / 'the series' with "
    "no name after it, or a pronoun before any name",
    "question_not_about_evidence": "the question shares too few content words with the evidence "
    "or title, or ranks its answer ('the main ...', 'the first ...') where the evidence does not",
    "turn_leans_on_text": "a dialogue utterance points at the source text",
    "turn_not_grounded": "an expert utterance says things its cited sentence does not",
    "answer_too_long": "the answer has more words than allowed",
    "yes_no_answer": "the answer is yes/no instead of an entity",
    "answer_in_question": "the question already contains the answer",
    "answerable_from_question": "it gives the answer away (all its words, or as a choice)",
    "answer_abbreviates_question": "the answer is the initials of words the question spells out",
    "answer_not_grounded": "the answer is not found in the evidence",
    "previous_answer_not_grounded": "the earlier answer is not found in the old sentence",
    "answers_identical": "earlier and current answers are the same after normalization",
    "bad_turn_count": "the dialogue has too few or too many turns",
    "bad_timestamp": "the timestamp is not YYYY, YYYY-MM or YYYY-MM-DD",
    "timestamp_not_in_evidence": "the timestamp's year, month or day is not in the evidence",
    "relation_too_long": "the relation has more words than allowed",
    "subject_equals_object": "subject and object are the same after normalization (or the "
    "object is a part of the subject)",
    "quadruple_not_grounded": "the subject (or the title) or the object is not in the evidence",
    "question_cut_off": "a QA question stops mid-phrase (no closing punctuation, or it filled "
    "its length cap)",
    "question_names_nothing": "the question names no one and nothing (no name, no word of "
    "the title): it leans on a page the player does not see",
    "question_premise_unstated": "the question says a thing, name, number or action its "
    "evidence does not state (a false premise)",
    "question_side_unstated": "the question sets something against someone its evidence sets "
    'nothing against ("the case against Smith" where Smith brought it)',
    "question_actor_swapped": "the question gives an action of its evidence to another named "
    'actor than the evidence does ("When was OpenAI accused?" where Altman was)',
    "question_drops_date": "the evidence gives its figure 'as of' a year the question and "
    "answer leave out, so it reads as true today",
    "answer_lacks_year": 'a "when" / "which year" question whose answer holds no year '
    '("November", "11 years old")',
    "answer_part_of_range": 'the answer is one end of a range or a score ("19" of "65–19")',
    "answer_not_attached": "the answer belongs to another action of its sentence than the one "
    "the question asks about (its verb, or the noun a count counts, is not in the question)",
    "answer_did_not_change": "a changed QA's answer was already in the old sentence (or the "
    "earlier answer is still in the new one)",
    "turn_premise_unstated": "a user turn names a name or number, or ranks its answer or ties "
    "it to the present ('most recent', 'current'), where the sentence, the title and the "
    "turns before it do not",
    "turn_cut_off": "a dialogue utterance stops mid-phrase (no closing punctuation, or it filled "
    "its length cap)",
    "turn_adds_claims": "an expert reply says a thing, name, number or quality that its "
    "sentence, the title and the user's words do not",
    "turn_open_question": "a user turn asks for a list or a story one sentence does not give "
    "('What other agencies ...?', 'What happened after the rain?')",
    "turn_drops_date": "an expert reply repeats a figure its sentence gives 'as of' a year, "
    "without that year",
    "turn_not_answered": "the user asks when / how many / who / where / what price and the "
    "expert's reply holds no date / number / name / amount of money",
    "generic_subject": "a quadruple's subject names no one and nothing in particular (no name, "
    "no number, no word of the title): 'Analysts', 'the collaboration'",
    "repeated_turn": "an expert reply says little that an earlier reply of the same dialogue "
    "did not (most of its content words are in one earlier reply)",
    "garbled_text": "a letter of a script that the evidence does not use (a decoding glitch)",
    "duplicate": "the same question / fact was already kept for this article",
    "object_too_long": "a quadruple's object is a clause rather than an entity or value",
    "object_is_date": "a quadruple's object is a date or a time phrase ('shortly after the "
    "title'): dates belong in the timestamp",
    "relation_not_stated": "the sentence does not state that relation of that subject: it says "
    "'not' before the verb, another name does it, the roles are reversed ('was indicted' where "
    "the sentence indicts the object), the relation is no verb phrase (a linking word, a name "
    "in it), or a field is cut off or repeats the object",
    "vague_entity": "a quadruple's subject or object is 'he', 'the company' or 'its <noun>', "
    "not a name",
    "grammar_mismatch": "the sentence's dependency parse does not carry the quadruple: no word "
    "of the relation is in the sentence or none is a verb there, another subject does the verb "
    "('his family sought refuge' as a fact of Pascal), or the object belongs to another clause, "
    "sits behind a place or time preposition the relation leaves out, or is itself a clause",
}


def url_check(fields: Sequence[tuple[str, str]], evidence: Sequence[tuple[str, str]]) -> Check:
    """``contains_url`` over the item's own texts and (strong links only) its evidence: a
    sentence carrying a link is injected or boilerplate text, not a fact to ask about."""
    found = [f"{name}: {url}" for name, text in fields if (url := find_url(text))]
    found += [
        f"{name}: {url}" for name, text in evidence if (url := find_url(text, strong_only=True))
    ]
    return Check("contains_url", not found, "; ".join(found))


def script_check(fields: Sequence[tuple[str, str]], evidence: Sequence[tuple[str, str]]) -> Check:
    """``garbled_text``: a letter of a script (Chinese, Cyrillic, ...) that the evidence does
    not use. A small model pushed to end a capped string sometimes emits one ("steatotic肝")."""
    seen = {c for _, text in evidence for c in text}
    odd = [
        f"{name}: {c!r}"
        for name, text in fields
        for c in dict.fromkeys(text)
        if c.isalpha() and not c.isascii() and c not in seen and not is_latin(c)
    ]
    return Check("garbled_text", not odd, "; ".join(odd))


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


def evidence_checks(
    indices: Sequence[int], n_sentences: int, allowed: Collection[int] | None
) -> list[Check]:
    """``empty_field``, ``evidence_out_of_range`` and ``evidence_outside_input`` for an item's
    evidence indices (``allowed``: the indices its prompt offered)."""
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
