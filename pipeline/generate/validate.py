"""Checks every generated item must pass before it enters a benchmark.

Scoring is separate from the keep decision: ``ItemValidator.score_*`` runs every check and
returns a :class:`Verdict` holding each :class:`Check` (name, passed, detail); the verdict
keeps the item only when all passed, and its ``reason`` is the first failed check's name, a
stable code from :data:`REASONS` that the rejects table and the run summary count.

Grounding is lexical (:func:`pipeline.text_checks.is_grounded`, where the text predicates
live).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pipeline.config import GenerationConfig
from pipeline.generate.answer_spans import range_part
from pipeline.generate.grammar_checks import (
    answer_attachment,
    answers_kind,
    asks_for,
    generic_subject,
    is_cut_off,
    names_no_subject,
    premise_problem,
    reply_additions,
    side_problem,
)
from pipeline.generate.items import Dialogue, DialogueTurn, QAItem, Quadruple
from pipeline.generate.prompts import MAX_CHARS
from pipeline.syntax import BACK_NOUNS, RelationParser, actor_problem
from pipeline.text_checks import (
    MONTH_ALTERNATION,
    TURN_MIN_SHARE,
    about_evidence,
    contains_normalized,
    content_words,
    dangling_reference,
    date_in_text,
    find_url,
    gives_answer_away,
    is_grounded,
    is_iso_timestamp,
    is_latin,
    leaning_phrase,
    normalize_answer,
    title_core,
    turn_support,
)

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
    # content checks (this module)
    "empty_field": "a required text is empty",
    "contains_url": "the item or its evidence holds a URL, a web domain or an e-mail address",
    "evidence_out_of_range": "an evidence index is not a sentence of the article",
    "evidence_outside_input": "an evidence index names a sentence that was not in the prompt",
    "evidence_unlabeled": "a dialogue turn rests on a sentence without a decided label",
    "question_leans_on_text": "the question points at the source text",
    "question_not_standalone": "the question says 'this' / 'these' or a pronoun before any name",
    "question_not_about_evidence": "the question shares too few content words with the evidence "
    "or title, or ranks its answer ('the main ...', 'the first ...') where the evidence does not",
    "turn_leans_on_text": "a dialogue utterance points at the source text",
    "turn_not_grounded": "an expert utterance says things its cited sentence does not",
    "answer_too_long": "the answer has more words than allowed",
    "yes_no_answer": "the answer is yes/no instead of an entity",
    "answer_in_question": "the question already contains the answer",
    "answerable_from_question": "it gives the answer away (all its words, or as a choice)",
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
    "question_names_nothing": "the question names no one and nothing (no name, no word of "
    "the title): it leans on a page the player does not see",
    "question_premise_unstated": "the question says a thing, name, number or action its "
    "evidence does not state (a false premise)",
    "question_side_unstated": "the question sets something against someone its evidence sets "
    'nothing against ("the case against Smith" where Smith brought it)',
    "question_actor_swapped": "the question gives an action of its evidence to another named "
    'actor than the evidence does ("When was OpenAI accused?" where Altman was)',
    "answer_part_of_range": 'the answer is one end of a range or a score ("19" of "65–19")',
    "answer_not_attached": "the answer belongs to another action of its sentence than the one "
    "the question asks about (its verb, or the noun a count counts, is not in the question)",
    "answer_did_not_change": "a changed QA's answer was already in the old sentence (or the "
    "earlier answer is still in the new one)",
    "turn_cut_off": "a dialogue utterance stops mid-phrase (no closing punctuation, or it filled "
    "its length cap)",
    "turn_adds_claims": "an expert reply says a thing, name, number or quality that its "
    "sentence, the title and the user's words do not",
    "turn_not_answered": "the user asks when / how many / who / where and the expert's reply "
    "holds no date / number / name",
    "generic_subject": "a quadruple's subject names no one and nothing in particular (no name, "
    "no number, no word of the title): 'Analysts', 'the collaboration'",
    "repeated_turn": "an expert reply repeats an earlier reply of the same dialogue",
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


# An object that is only a date ("January 2008", "2014", "8 May 2024") repeats the timestamp.
_DATE_ONLY = re.compile(
    rf"^(?:(?:in|on|since|by|until|to|(?:to )?at (?:least|most)|as (?:early|late) as) )?"
    rf"(?:\d{{1,2}} )?(?:(?:{MONTH_ALTERNATION})\.? )?(?:\d{{1,2}}, )?"
    r"\d{4}(?:-\d{2}(?:-\d{2})?)?$",
    re.IGNORECASE,
)


# Stand-ins for a name ("he", "the company"): a fact about them cannot be joined with others.
_VAGUE_ENTITY = re.compile(
    r"^(?:he|she|it|they|him|her|his|its|their|them|we|this|that|these|those|"
    r"the (?:company|firm|team|club|band|group|film|movie|series|show|album|song|game|device|"
    r"product|phone|model|car|drug|organi[sz]ation|agency|department|party|university|city|"
    r"country|state|person|player|driver|singer|actor|actress|author)"
    # "its dissolution": whose, the sentence says elsewhere
    r"|(?:its|his|her|their) [\w-]+)$",
    re.IGNORECASE,
)


_YES_NO = {"yes", "no", "true", "false", "yes it is", "no it is not"}


def _repeated_turns(turns: Sequence[DialogueTurn]) -> str:
    """Which expert replies say (almost) the same as an earlier one: 80% of their content
    words shared both ways. A short paragraph may serve two turns from one sentence, but
    then each must bring a different detail."""
    seen: list[tuple[int, set[str]]] = []
    for t in turns:
        words = set(content_words(t.expert))
        for idx, earlier in seen:
            shared = len(words & earlier)
            if words and earlier and shared >= 0.8 * max(len(words), len(earlier)):
                return f"turn {t.turn_idx} repeats turn {idx}"
        seen.append((t.turn_idx, words))
    return ""


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


def _names_title(subject: str, title: str) -> bool:
    """The subject is the article's entity: the title, a part of it ("Meta" for "Meta
    Platforms"), a phrase holding it ("Meta Platforms, Inc.") or a longer form of the name
    ("José Pedro Balmaceda Pascal" for "Pedro Pascal")."""
    s = normalize_answer(subject)
    if not s:
        return False
    for name in {normalize_answer(title), normalize_answer(title_core(title))} - {""}:
        if f" {s} " in f" {name} " or f" {name} " in f" {s} ":
            return True
        rest = iter(s.split())  # the title's words in order, others between them
        if len(name.split()) > 1 and all(w in rest for w in name.split()):
            return True
    return False


def _names_title_by_its_head(sentence: str, title: str) -> bool:
    """The sentence calls the article's entity by the last word of its name, as articles do
    after the first mention ("James filed", "Pascal was raised", "the Model Y")."""
    words = title_core(title).split()
    if not words:
        return False
    head = words[-1] if len(words[-1]) >= 3 or len(words) == 1 else " ".join(words[-2:])
    if not (head[0].isupper() or head[0].isdigit()):  # "energy" of "Dark energy" is no name
        return False
    return re.search(rf"(?<!\w){re.escape(head)}(?!\w)", sentence) is not None


_BACK_REFERENCE = re.compile(
    r"\b(?:he|she|it|they|his|her|its|their|him|them)\b"
    rf"|\bthe (?:{'|'.join(sorted(BACK_NOUNS))})\b",
    re.IGNORECASE,
)


# Objects that say when, not what: "shortly after winning the title", "since the 2007 act".
_TIME_PHRASE = re.compile(
    r"^(?:shortly |soon |just |long )?(?:after|before|since|until|till|during|when|while|"
    r"following|prior to|upon)\b",
    re.IGNORECASE,
)
_AUXILIARIES = frozenset(
    "is are was were be been being has have had will would shall should can could may might "  # noqa: SIM905
    "must do does did not also then the a an its his her their to".split()
)
_NEGATIONS = frozenset({"not", "never", "no", "neither", "nor"})
_WORD = re.compile(r"[\w'’-]+")
# Words that cannot carry a relation on their own ("with", "including": a list's glue).
_FUNCTION_WORDS = frozenset(
    "with including of in on at for as by from to and or like such than into about over under "  # noqa: SIM905
    "between among via per plus the a an".split()
)
# "was indicted": a passive relation whose subject undergoes the verb.
_PASSIVE = re.compile(r"^(?:(?:has|have|had) been|was|were|is|are|be|been|being)\s+(\w+)\b", re.I)
_BE_FORMS = frozenset("is are was were be been being".split())  # noqa: SIM905
_BRACKETS = (("(", ")"), ("[", "]"), ("{", "}"))


def _cut_off(text: str) -> bool:
    """An opening bracket that is never closed: the field ran into its length cap."""
    return any(text.count(a) > text.count(b) for a, b in _BRACKETS)


def _verb_sites(relation: str, sentence: str) -> list[tuple[list[str], int]]:
    """Where the relation's main word (its first word that is not an auxiliary) occurs in
    ``sentence``: (sentence words, position) for each occurrence, the word matched on a
    shared stem ("debut" ~ "debuted")."""
    main = next((w for w in relation.lower().split() if w not in _AUXILIARIES), "")
    if len(main) < 3:
        return []
    stem = main[: max(3, len(main) - 2)]
    words = _WORD.findall(sentence)
    return [(words, i) for i, w in enumerate(words) if w.lower().startswith(stem)]


def _relation_not_stated(quad: Quadruple, subject_in_text: bool) -> str:
    """Why the evidence does not state ``quad``'s relation of its subject, or ""."""
    for name, value in (("relation", quad.relation), ("object", quad.object)):
        if _cut_off(value):
            return f"{name} {value!r} is cut off"
    if "," in quad.relation:  # a verb phrase has no comma: it ran into a list of the sentence
        return f"relation {quad.relation!r} runs into a list"
    if contains_normalized(quad.object, quad.relation):
        return f"relation {quad.relation!r} already holds the object"
    rel_words = _WORD.findall(quad.relation)
    if rel_words and all(w.lower() in _FUNCTION_WORDS for w in rel_words):
        return f"relation {quad.relation!r} is only a linking word"
    # A relation is a lowercase verb phrase; a name in it belongs in the subject or object
    # ("Jack Smith | U. S. representative Rick Renzi | ..."). Acronyms such as CEO pass.
    named = [w for w in rel_words[1:] if not w.islower() and not (w.isupper() and len(w) <= 4)]
    if named:
        return f"relation {quad.relation!r} holds a name ({named[0]})"
    inverted = _inverted_passive(quad)
    if inverted:
        return inverted
    negated = {w.lower() for w in quad.relation.split()} & _NEGATIONS
    # "Mercedes supplies" names the subject "Mercedes-Benz" (title "Mercedes-Benz in F1")
    own_words = {w.lower() for w in re.findall(r"\w+", f"{quad.title} {quad.subject}")}
    for words, i in _verb_sites(quad.relation, quad.evidence_text):
        before = [w.lower() for w in words[max(0, i - 2) : i]]
        if not negated and (set(before) & _NEGATIONS or any(w.endswith("n't") for w in before)):
            return f"the sentence says {' '.join(words[max(0, i - 2) : i + 1])!r}"
        # a title standing in for "he" / "it" is wrong where a named other does the verb
        # ("driver Juan Manuel Fangio won another three Grands Prix": not the team)
        doer = words[i - 1] if i > 1 else ""
        named = doer[:1].isupper() and not set(re.findall(r"\w+", doer.lower())) <= own_words
        if not subject_in_text and named:
            return f"{doer!r} does it in the sentence ({doer} {words[i]})"
    return ""


def _inverted_passive(quad: Quadruple) -> str:
    """Why a passive relation ("was indicted") reverses the sentence's roles, or "": the
    sentence puts the verb in the active, right before the object ("a grand jury indicted
    Trump" read as "Jack Smith | was indicted | Trump")."""
    m = _PASSIVE.match(quad.relation.strip())
    if not m or "by" in quad.relation.lower().split():
        return ""
    verb = m.group(1).lower()
    obj = [w.lower() for w in _WORD.findall(quad.object) if w.lower() not in ("the", "a", "an")]
    if not obj:
        return ""
    words = [w.lower() for w in _WORD.findall(quad.evidence_text)]
    for i, w in enumerate(words[:-1]):
        if w != verb or (i and words[i - 1] in _BE_FORMS):
            continue
        after = [x for x in words[i + 1 : i + 3] if x not in ("the", "a", "an")]
        if after and after[0] == obj[0]:
            return f"the sentence says {w} {quad.object!r} in the active: the roles are reversed"
    return ""


def _refers_back(sentence: str) -> bool:
    """The sentence names its subject by a pronoun or "the company" (the article's entity)."""
    return _BACK_REFERENCE.search(sentence) is not None


class ItemValidator:
    """Scores QA items, dialogues and quadruples against the evidence they cite."""

    def __init__(
        self,
        *,
        answer_max_words: int = 10,
        dialogue_min_turns: int = 3,
        dialogue_max_turns: int = 4,
        relation_max_words: int = 8,
        object_max_words: int = 8,
        turn_min_share: float = TURN_MIN_SHARE,
        question_min_share: float = 0.34,
        grammar: RelationParser | None = None,
        question_grammar: bool = False,
    ) -> None:
        self.answer_max_words = answer_max_words
        self.dialogue_min_turns = dialogue_min_turns
        self.dialogue_max_turns = dialogue_max_turns
        self.relation_max_words = relation_max_words
        self.object_max_words = object_max_words
        self.turn_min_share = turn_min_share
        self.question_min_share = question_min_share
        self.grammar = grammar
        self.question_grammar = question_grammar

    @classmethod
    def from_config(cls, cfg: GenerationConfig) -> ItemValidator:
        """A validator with the limits of a generation config."""
        return cls(
            answer_max_words=cfg.answer_max_words,
            dialogue_min_turns=cfg.dialogue_min_turns,
            dialogue_max_turns=cfg.dialogue_max_turns,
            grammar=RelationParser() if cfg.quadruple_grammar_check else None,
            question_grammar=cfg.qa_grammar_check,
        )

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
        unnamed = names_no_subject(item.question, item.title)
        unstated = premise_problem(item.question, sources)
        sided = side_problem(item.question, sources)
        swapped = actor_problem(item.question, item.evidence_text, item.title)
        halved = range_part(item.answer, item.evidence_text)
        detached = answer_attachment(item.question, item.answer, [item.evidence_text])
        if not detached and item.type == "changed":
            detached = answer_attachment(
                item.question, item.previous_answer or "", [item.old_evidence_text or ""]
            )
        return [
            Check("question_names_nothing", not unnamed, unnamed),
            Check("question_premise_unstated", not unstated, unstated),
            Check("question_side_unstated", not sided, sided),
            Check("question_actor_swapped", not swapped, swapped),
            Check("answer_part_of_range", not halved, f"the evidence says {halved!r}"),
            Check("answer_not_attached", not detached, detached),
        ]

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
        texts = [
            (f"turn {t.turn_idx} {side}", text)
            for t in dialogue.turns
            for side, text in (("user", t.user), ("expert", t.expert))
        ]
        empty = [name for name, text in texts if not text.strip()]
        checks.append(Check("empty_field", not empty, ", ".join(empty)))
        checks.append(
            url_check(
                texts, [(f"turn {t.turn_idx} evidence", t.evidence_text) for t in dialogue.turns]
            )
        )
        checks.append(
            script_check(texts, [(f"turn {t.turn_idx}", t.evidence_text) for t in dialogue.turns])
        )
        indices = [i for t in dialogue.turns for i in t.evidence_sent_idx]
        one_each = all(len(t.evidence_sent_idx) == 1 for t in dialogue.turns)
        checks += evidence_checks(indices if one_each else [], n_sentences, allowed)
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
        share = self.turn_min_share
        unsupported = [
            f"turn {t.turn_idx}: {why}"
            for t in dialogue.turns
            if (why := turn_support(t.expert, t.evidence_text, dialogue.title, share))
        ]
        checks.append(Check("turn_not_grounded", not unsupported, "; ".join(unsupported)))
        repeats = _repeated_turns(dialogue.turns)
        checks.append(Check("repeated_turn", not repeats, repeats))
        return Verdict(tuple(checks))

    def score_turns(self, dialogue: Dialogue) -> list[Verdict]:
        """The checks of each turn on its own (its texts, its sentence, the turns before it),
        one verdict per turn, in turn order."""
        verdicts = []
        for k, t in enumerate(dialogue.turns):
            texts = [("user", t.user), ("expert", t.expert)]
            evidence = [("evidence", t.evidence_text)]
            phrases = [p for p in (leaning_phrase(t.user), leaning_phrase(t.expert)) if p]
            support = turn_support(t.expert, t.evidence_text, dialogue.title, self.turn_min_share)
            repeats = _repeated_turns(dialogue.turns[: k + 1])
            checks = [
                url_check(texts, evidence),
                script_check(texts, evidence),
                Check("turn_leans_on_text", not phrases, ", ".join(phrases)),
                Check("turn_not_grounded", not support, support),
                Check("repeated_turn", not repeats, repeats),
            ]
            if self.question_grammar:
                cut = [side for side, text in texts if is_cut_off(text, MAX_CHARS[side])]
                added = reply_additions(t.expert, [t.evidence_text, dialogue.title, t.user])
                kind = asks_for(t.user)
                unanswered = kind is not None and not answers_kind(t.expert, kind)
                checks += [
                    Check("turn_cut_off", not cut, ", ".join(cut)),
                    Check("turn_adds_claims", not added, added),
                    Check("turn_not_answered", not unanswered,
                          f"asked {kind!r}, the reply gives none" if unanswered else ""),
                ]  # fmt: skip
            verdicts.append(Verdict(tuple(checks)))
        return verdicts

    def turns_to_keep(
        self, dialogue: Dialogue, *, n_sentences: int, allowed: Collection[int] | None = None
    ) -> tuple[int, Verdict]:
        """How many leading turns of ``dialogue`` to keep, and the verdict that decided: a
        failed check of the dialogue as a whole keeps none; else every turn before the first
        one that fails its own checks, when at least the minimum number remain (later turns
        build on the bad one). The verdict is the whole dialogue's when it failed or every
        turn passed, else the first failing turn's."""
        whole = self.score_dialogue(dialogue, n_sentences=n_sentences, allowed=allowed)
        shared = Verdict(tuple(c for c in whole.checks if c.name in DIALOGUE_CHECKS))
        if not shared.keep:
            return 0, shared
        per_turn = self.score_turns(dialogue)
        first_bad = next((v for v in per_turn if not v.keep), shared)
        return good_turns(per_turn, self.dialogue_min_turns), first_bad

    def score_quadruple(
        self, quad: Quadruple, *, n_sentences: int, allowed: Collection[int] | None = None
    ) -> Verdict:
        """Checks of one quadruple; ``allowed`` = the sentence indices its prompt offered."""
        texts = [("subject", quad.subject), ("relation", quad.relation), ("object", quad.object)]
        empty = [name for name, value in texts if not value.strip()]
        checks = [Check("empty_field", not empty, ", ".join(empty))]
        checks.append(url_check(texts, [("evidence", quad.evidence_text)]))
        checks.append(script_check(texts, [("evidence", quad.evidence_text)]))
        checks += evidence_checks(quad.evidence_sent_idx, n_sentences, allowed)
        ts = quad.timestamp
        valid_ts = ts is None or is_iso_timestamp(ts)
        checks.append(Check("bad_timestamp", valid_ts, "" if valid_ts else repr(ts)))
        dated = ts is None or not valid_ts or date_in_text(ts, quad.evidence_text)
        checks.append(Check("timestamp_not_in_evidence", dated, "" if dated else ts or ""))
        n_rel = len(quad.relation.split())
        checks.append(
            Check(
                "relation_too_long",
                n_rel <= self.relation_max_words,
                f"{n_rel} words > {self.relation_max_words}"
                if n_rel > self.relation_max_words
                else "",
            )
        )
        n_obj = len(quad.object.split())
        checks.append(
            Check(
                "object_too_long",
                n_obj <= self.object_max_words,
                f"{n_obj} words > {self.object_max_words}" if n_obj > self.object_max_words else "",
            )
        )
        dated = bool(_DATE_ONLY.match(quad.object.strip()) or _TIME_PHRASE.match(quad.object))
        checks.append(Check("object_is_date", not dated, quad.object if dated else ""))
        vague = [v for v in (quad.subject, quad.object) if _VAGUE_ENTITY.match(v.strip())]
        checks.append(Check("vague_entity", not vague, ", ".join(vague)))
        # "the main candidates | are | candidates": an object inside its subject says nothing
        subject_words = f" {normalize_answer(quad.subject)} "
        same = bool(subject_words.strip()) and f" {normalize_answer(quad.object)} " in subject_words
        checks.append(Check("subject_equals_object", not same, quad.object if same else ""))
        # the prompt has the model write the entity for "he" / "the company" (or for the last
        # word of its name), so the subject may be the article's title rather than a span of
        # the sentence, but only where the sentence refers back like that ("Russell finished
        # 8th" is not about the team)
        subject_in_text = is_grounded(quad.subject, quad.evidence_text)
        subject_ok = subject_in_text or (
            _names_title(quad.subject, quad.title)
            and (
                _refers_back(quad.evidence_text)
                or _names_title_by_its_head(quad.evidence_text, quad.title)
            )
        )
        unstated = _relation_not_stated(quad, subject_in_text)
        checks.append(Check("relation_not_stated", not unstated, unstated))
        object_ok = is_grounded(quad.object, quad.evidence_text)
        missing = [
            f"{name} {value!r}"
            for name, value, ok in (
                ("subject", quad.subject, subject_ok),
                ("object", quad.object, object_ok),
            )
            if not ok
        ]
        checks.append(Check("quadruple_not_grounded", not missing, ", ".join(missing)))
        if self.grammar is not None and not missing and not unstated:
            mismatch = self.grammar.problem(
                quad.subject, quad.relation, quad.object, quad.evidence_text, quad.title
            )
            checks.append(Check("grammar_mismatch", not mismatch, mismatch))
        if self.question_grammar:
            generic = generic_subject(quad.subject, quad.title)
            checks.append(Check("generic_subject", not generic, generic))
        return Verdict(tuple(checks))


# Checks of a dialogue as a whole: a failure rejects every turn.
DIALOGUE_CHECKS = frozenset(
    {"bad_turn_count", "empty_field", "evidence_out_of_range", "evidence_outside_input",
     "evidence_unlabeled"}
)  # fmt: skip


def good_turns(turn_verdicts: Sequence[Verdict], min_turns: int) -> int:
    """How many turns of a dialogue to keep: every turn before the first that fails a check
    (later turns build on it), or none when fewer than ``min_turns`` remain."""
    n = next((k for k, v in enumerate(turn_verdicts) if not v.keep), len(turn_verdicts))
    return n if n >= min_turns else 0


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
