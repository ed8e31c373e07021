"""Checks every generated item must pass before it enters a benchmark.

Scoring is separate from the keep decision: ``ItemValidator.score_*`` runs every check and
returns a :class:`Verdict` holding each :class:`Check` (name, passed, detail); the verdict
keeps the item only when all passed, and its ``reason`` is the first failed check's name, a
stable code from :data:`REASONS` that the rejects table and the run summary count.

Grounding is lexical by default: the normalized answer (lowercase, accents, punctuation and
articles stripped, number words, thousands separators, dashes, quotes, possessives and acronym
dots normalized, a minus sign kept) must occur in the normalized evidence, as a whole or part
by part for a list answer ("X and Y"). When a model is available,
``grounding_nli(premise, hypothesis) -> bool`` gets a second say on answers the string test
misses (premise = evidence text, hypothesis = question + answer).

Topic, give-away and dialogue-grounding checks compare *content words*: normalized tokens that
are numbers, or at least three letters long and not a stopword / question word, with a light
plural strip; words match when equal or when they share a long prefix ("founded" ~ "founder").
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, TypeVar

from pipeline.config import GenerationConfig
from pipeline.syntax import BACK_NOUNS, RelationParser

if TYPE_CHECKING:  # runtime import would be circular (pipeline.generate imports this module)
    from pipeline.generate.items import Dialogue, DialogueTurn, QAItem, Quadruple

GroundingNLI = Callable[[str, str], bool]
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
    "answer_did_not_change": "a changed QA's answer was already in the old sentence (or the "
    "earlier answer is still in the new one)",
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
_MONTH_NAMES = (
    "january|february|march|april|may|june|july|august|september|october|november|december"
)
# An object that is only a date ("January 2008", "2014", "8 May 2024") repeats the timestamp.
_DATE_ONLY = re.compile(
    rf"^(?:(?:in|on|since|by|until|to|(?:to )?at (?:least|most)|as (?:early|late) as) )?"
    rf"(?:\d{{1,2}} )?(?:(?:{_MONTH_NAMES})\.? )?(?:\d{{1,2}}, )?"
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
# A comma between digits is a thousands separator ("1,998"), not a list separator.
_PART_SPLIT = re.compile(r"\s*(?:(?<!\d),|,(?!\d)|;|/|&|\band\b|\bor\b)\s*", re.IGNORECASE)

# Thousands groups with one separator used throughout: "1,998", "12 000" (no-break / thin /
# figure space; a plain space is left alone, "in 1995 200 people" is two numbers).
_GROUPED = re.compile(r"(?<![\d.,])\d{1,3}([,\u00a0\u2007\u2009\u202f])\d{3}(?:\1\d{3})*(?!\d)")
# Dotted thousands only with two or more groups: "1.234.567"; "1.234" may be a decimal.
_DOTTED = re.compile(r"(?<![\d.,])\d{1,3}(?:\.\d{3}){2,}(?!\.?\d)")
# A dash right before a digit and not after a word or number is a minus sign ("-12.4",
# "−12.4", "–12.4"); "2019–2020" and "COVID-19" are ranges / names.
_DASHES = "\u002d\u2010\u2011\u2012\u2013\u2014\u2015\u2212"
_MINUS = re.compile(rf"(?<![\w.,]|[{_DASHES}])[{_DASHES}](?=\d)")
_POSSESSIVE = re.compile(r"(?<=\w)['\u2018\u2019\u02bc`]s\b", re.IGNORECASE)
_ACRONYM = re.compile(r"\b(?:[^\W\d_]\.){2,}")  # U.S. -> US, U.S.A. -> USA
_DECIMAL, _SIGN = "\0", "\1"  # placeholders that survive punctuation removal
# "15 May 2021" and "May 15, 2021" are one date: both become "may 15 2021".
_DAY_MONTH = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)? ({_MONTH_NAMES})\b", re.IGNORECASE)


def normalize_answer(text: str) -> str:
    """Lowercase, accents / punctuation / articles stripped, numbers in one spelling.

    Equal after normalization: dashes of every kind, curly and straight quotes, a possessive
    "'s" and none, "U.S." and "US", "80%" / "80 percent" / "80 per cent", "1,998" / "1998",
    "12 000" (no-break or thin space) / "12000", "two" / "2", "15 May 2021" / "May 15, 2021".
    A minus sign is kept ("-12.4"
    differs from "12.4") and so is a decimal point ("2.5" differs from "25").
    """
    t = _GROUPED.sub(lambda m: re.sub(r"\D", "", m.group(0)), text or "")
    t = _DOTTED.sub(lambda m: m.group(0).replace(".", ""), t)
    t = unicodedata.normalize("NFKD", t)
    t = "".join(c for c in t if not unicodedata.combining(c)).lower()
    t = _POSSESSIVE.sub("", t)
    t = _DAY_MONTH.sub(r"\2 \1", t)
    t = _ACRONYM.sub(lambda m: m.group(0).replace(".", ""), t)
    t = _MINUS.sub(_SIGN, t)
    t = re.sub(r"(?<=\d)(?:st|nd|rd|th)\b", "", t)  # 21st -> 21
    t = t.replace("%", " percent ").replace("per cent", "percent").replace("&", " and ")
    t = re.sub(r"(?<=\d)\.(?=\d)", _DECIMAL, t)
    t = re.sub(rf"[^\w{_DECIMAL}{_SIGN}]+|_", " ", t)
    t = re.sub(rf"{_SIGN}+(?!\d)", " ", t).replace(_DECIMAL, ".").replace(_SIGN, "-")
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


# "these tests", "this model": only a reader of the paragraph knows what is meant.
_DEMONSTRATIVE = re.compile(r"\b(?:this|these)\b(?: \w+)?", re.IGNORECASE)
_PRONOUN = re.compile(r"\b(?:he|she|they|him|her|his|their|them|its|it)\b", re.IGNORECASE)
_NAME_WORD = re.compile(r"(?<=\s)[A-Z][\w'.-]*")


def dangling_reference(question: str) -> str | None:
    """The word of ``question`` that points at something it never names, or None: a
    demonstrative ("these tests") or a pronoun before any name ("When did he join Ferrari?";
    "Which team did Russell join after he left Williams?" names him first)."""
    m = _DEMONSTRATIVE.search(question)
    if m:
        return m.group(0)
    pronoun = _PRONOUN.search(question)
    if pronoun is None:
        return None
    name = _NAME_WORD.search(" " + question[1:])  # the capitalized first word proves nothing
    if name is None or name.start() > pronoun.start():
        return pronoun.group(0)
    return None


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


# ---- content words -------------------------------------------------------------------------

# Function words, question words, words every question may use ("year", "name") and chat filler
# ("sure", "indeed"): sharing one of them says nothing about what a text is about.
_STOPWORD_TEXT = """
    about above after again against all also among and any are around because been before
    being below between both but can could did does doing done down during each either else
    ever every few for from further had has have having her here hers herself him himself his
    how into its itself just least less let like many may might more most much must myself
    neither nor not now off once only onto other others our ours out over own per same
    she should since some such than that their theirs them themselves then there these they
    this those though through thus too toward towards under until upon very was were what
    whatever when whenever where whereas wherever whether which while who whoever whom whose
    why will with within without would yet you your yours
    called date day give kind known name named number percent say says said tell time type
    year years new first last
    yes sure okay indeed well actually really great interesting course
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def _is_number(token: str) -> bool:
    return any(c.isdigit() for c in token)


def _stem(token: str) -> str:
    """Plural-light stem: "companies" -> "company", "headquarters" -> "headquarter"."""
    if _is_number(token):
        return token
    if len(token) > 4 and token.endswith("ies"):
        return token[:-3] + "y"
    if len(token) > 3 and token.endswith("s") and not token.endswith(("ss", "us", "is")):
        return token[:-1]
    return token


def content_words(text: str) -> list[str]:
    """Distinct content words of ``text`` (stems, numbers as normalized), in order."""
    tokens = normalize_answer(text).split()
    words = (_stem(t) for t in tokens if _is_number(t) or (len(t) >= 3 and t not in _STOPWORDS))
    return list(dict.fromkeys(words))


def _same_word(a: str, b: str) -> bool:
    """Equal, or (for words, never numbers) a long shared prefix: "founded" ~ "founder",
    "elected" ~ "election", "acquired" ~ "acquisition"."""
    if a == b:
        return True
    if _is_number(a) or _is_number(b) or min(len(a), len(b)) < 5:
        return False
    shared = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
    shared = min(len(a), len(b)) if shared is None else shared
    return shared >= max(5, min(len(a), len(b)) - 3)


def _found(word: str, pool: Iterable[str]) -> bool:
    return any(_same_word(word, p) for p in pool)


def _title_core(title: str) -> str:
    """The title without a disambiguator: "Mercury (planet)" -> "Mercury"."""
    return re.sub(r"\s*\([^)]*\)\s*$", "", title or "").strip()


# Words that rank the answer among others ("the main biomarker"): a question may use one only
# where its evidence does. Lowercase only, so that titles ("The Last of Us") do not count.
_RANKING = re.compile(
    r"\b(?:main|only|first|last|largest|biggest|highest|lowest|most|least|best|worst|primary|"
    r"sole|oldest|youngest|earliest|latest|leading|top)\b"
)


def _about_evidence(question: str, sources: Sequence[str], min_share: float) -> str:
    """Why the question is not about its sources (evidence, title), or "" when it is: at
    least ``min_share`` of its content words (and at least one) must come from them, and a
    word that ranks the answer ("main", "first", "largest") must be theirs too. A question
    that brings in its own names ("... at the time of the merger?") or ranks what the
    evidence only lists is about something the evidence does not say."""
    words = content_words(question)
    if not words:
        return "no content word in the question"
    pool = {w for s in sources for w in content_words(s)}
    foreign = [w for w in words if not _found(w, pool)]
    if len(foreign) == len(words) or len(words) - len(foreign) < min_share * len(words):
        return f"{foreign} of {words} not in the evidence or title"
    said = " ".join(sources).lower()
    for m in _RANKING.finditer(question):
        if not re.search(rf"\b{m.group(0)}\b", said):
            return f"the question says {m.group(0)!r}, its evidence does not"
    return ""


def _choice_options(question: str) -> list[set[str]]:
    """Content words of each alternative next to an "or" ("Menlo Park or Paris?")."""
    options: list[set[str]] = []
    for clause in re.split(r"[,;:?!()\[\]\"\u201c\u201d]", question):
        tokens = normalize_answer(clause).split()
        for i, tok in enumerate(tokens):
            if tok != "or":
                continue
            # an alternative is the run of content words right before / after "or"
            for run in (reversed(tokens[:i]), tokens[i + 1 :]):
                option: set[str] = set()
                for t in run:
                    if not (_is_number(t) or (len(t) >= 3 and t not in _STOPWORDS)):
                        break
                    option.add(_stem(t))
                if option:
                    options.append(option)
    # an Oxford comma puts the last alternative before "or" in a clause of its own
    if re.search(r",\s+or\b", question, re.IGNORECASE):
        for clause in re.split(r",\s+or\b", question, flags=re.IGNORECASE)[:-1]:
            last = clause.rsplit(",", 1)[-1]
            if option := set(content_words(last)):
                options.append(option)
    return options


def gives_answer_away(question: str, answer: str) -> str:
    """Why the question alone reveals the answer, or "" when it does not.

    The whole answer string inside the question is ``answer_in_question``; this catches the
    rest: every content word of the answer scattered over the question, the answer offered
    as one of the alternatives of an "X or Y" question (an alternative holding at least half
    of the answer's content words), or two thirds of a longer answer's words in the question.
    """
    words = set(content_words(answer))
    if not words:
        return ""
    asked = set(content_words(question))
    if words <= asked:
        return f"every word of {answer!r} is in the question"
    for option in _choice_options(question):
        # a choice that is most of the answer gives it away; one word of a longer answer
        # ("Inc." for "Meta Platforms, Inc.") does not
        if option <= words and 2 * len(option) >= len(words):
            return f"the question offers {answer!r} as a choice"
    # "What does semaglutide do to blood sugar levels?" -> "decreases blood sugar levels"
    if len(words) >= 3 and 3 * len(words & asked) >= 2 * len(words):
        return f"most words of {answer!r} are in the question"
    return ""


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


# Half the content words of an expert reply must come from its sentence: at 0.4, "The outcome
# of the lawsuit is not yet known, but it is expected to be a victory for James" passed on
# "lawsuit" and "James"; no other reply of ~150 kept on 11 real articles is under 0.5.
TURN_MIN_SHARE = 0.5


def supporting_sentence(
    expert: str,
    cited: int,
    candidates: Mapping[int, str],
    title: str,
    min_share: float = TURN_MIN_SHARE,
) -> int:
    """The sentence an expert reply rests on: ``cited`` when it supports the reply, else the
    one other candidate (the sentences of the dialogue's paragraph) that supports it best, or
    ``cited`` when none does, or when ``cited`` is not a candidate at all (a broken answer,
    left for validation to reject). Small models write the right reply but cite its
    neighbour."""
    if cited not in candidates or not _turn_support(expert, candidates[cited], title, min_share):
        return cited
    words = content_words(expert)
    best, best_shared = cited, -1
    for idx, text in candidates.items():
        if idx == cited or _turn_support(expert, text, title, min_share):
            continue
        shared = sum(_found(w, content_words(text)) for w in words)
        if shared > best_shared:
            best, best_shared = idx, shared
    return best


def answer_sentence(answer: str, cited: Sequence[int], candidates: Mapping[int, str]) -> list[int]:
    """The evidence of a QA answer: the cited sentences when they hold the answer (or when one
    was not offered at all: a broken answer, left for validation), else the only candidate
    sentence (of those the prompt offered) that holds it, else ``cited``."""
    if not set(cited) <= candidates.keys() or is_grounded(
        answer, " ".join(candidates[i] for i in cited)
    ):
        return list(cited)
    holding = [i for i, text in candidates.items() if is_grounded(answer, text)]
    return holding if len(holding) == 1 else list(cited)


def _turn_support(expert: str, sentence: str, title: str, min_share: float) -> str:
    """Why an expert utterance is not grounded in its cited sentence, or "" when it is.

    Numbers count double and must all be in the sentence; words of the title that the
    sentence lacks are neutral (the utterance may name the entity the sentence calls "he").
    """
    # "one" as a pronoun ("one of the founders") is not a claim about the number 1
    words = content_words(re.sub(r"\bone\b", " ", expert, flags=re.IGNORECASE))
    sent = content_words(sentence)
    title_words = content_words(title)
    missing = [w for w in words if _is_number(w) and w not in sent and w not in title_words]
    if missing:
        return f"number {', '.join(missing)} not in its sentence"
    matched = [w for w in words if _found(w, sent)]
    unmatched = [w for w in words if w not in matched and not _found(w, title_words)]
    weight = sum(2 if _is_number(w) else 1 for w in matched)
    total = weight + sum(2 if _is_number(w) else 1 for w in unmatched)
    considered = len(matched) + len(unmatched)
    if weight >= min_share * total and len(matched) >= min(2, considered):
        return ""
    return f"{len(matched)}/{considered} content words in its sentence, missing {unmatched}"


# ---- URLs ----------------------------------------------------------------------------------

_TLDS = (
    "com|net|org|edu|gov|info|biz|io|ai|co|uk|us|de|fr|ru|cn|jp|in|tv|me|ly|xyz|top|site|"
    "online|app|dev|example"
)
# Links an item should never carry: a scheme, "www.", an e-mail address, a domain with a path.
_URL_STRONG = re.compile(
    r"(?i:\b[a-z][a-z0-9+.-]{1,15}://\S+)"
    r"|(?i:\bwww\d{0,3}\.\S+)"
    r"|[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,24}\b"
    r"|\b[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,24}/\S*"
)
# A bare lowercase domain ("visit evil.com"); capitalized "Amazon.com" / "Booking.com" are
# company names that real articles and answers use, so they stay allowed.
_URL_BARE = re.compile(rf"\b[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:{_TLDS})\b(?![.-]?\w)")


def find_url(text: str, *, strong_only: bool = False) -> str | None:
    """The first URL, web domain or e-mail address in ``text``, or None; ``strong_only``
    skips bare lowercase domains (used on evidence, where prose may name a website)."""
    m = _URL_STRONG.search(text or "")
    if m is None and not strong_only:
        m = _URL_BARE.search(text or "")
    return m.group(0) if m else None


def _url_check(fields: Sequence[tuple[str, str]], evidence: Sequence[tuple[str, str]]) -> Check:
    """``contains_url`` over the item's own texts and (strong links only) its evidence: a
    sentence carrying a link is injected or boilerplate text, not a fact to ask about."""
    found = [f"{name}: {url}" for name, text in fields if (url := find_url(text))]
    found += [
        f"{name}: {url}" for name, text in evidence if (url := find_url(text, strong_only=True))
    ]
    return Check("contains_url", not found, "; ".join(found))


def _script_check(fields: Sequence[tuple[str, str]], evidence: Sequence[tuple[str, str]]) -> Check:
    """``garbled_text``: a letter of a script (Chinese, Cyrillic, ...) that the evidence does
    not use. A small model pushed to end a capped string sometimes emits one ("steatotic肝")."""
    seen = {c for _, text in evidence for c in text}
    odd = [
        f"{name}: {c!r}"
        for name, text in fields
        for c in dict.fromkeys(text)
        if c.isalpha() and not c.isascii() and c not in seen and not _latin(c)
    ]
    return Check("garbled_text", not odd, "; ".join(odd))


def _latin(char: str) -> bool:
    """Latin letters with accents ("é", "ø") are ordinary in names; other scripts are not."""
    return unicodedata.name(char, "").startswith("LATIN")


def date_in_text(iso: str, text: str) -> bool:
    """Every part of an ISO timestamp is written in ``text``: the year, the month's name (or
    the ISO form itself) and the day, so a model cannot pad "2013" to "2013-01-01"."""
    if iso in text:
        return True
    year, _, rest = iso.partition("-")
    if not re.search(rf"\b{year}\b", text):
        return False
    if not rest:
        return True
    month, _, day = rest.partition("-")
    name = _MONTH_NAMES.split("|")[int(month) - 1]
    if not re.search(rf"\b{name[:3]}", text, re.IGNORECASE):
        return False
    return not day or re.search(rf"\b{int(day)}\b", text) is not None


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


def _names_title(subject: str, title: str) -> bool:
    """The subject is the article's entity: the title, a part of it ("Meta" for "Meta
    Platforms"), a phrase holding it ("Meta Platforms, Inc.") or a longer form of the name
    ("José Pedro Balmaceda Pascal" for "Pedro Pascal")."""
    s = normalize_answer(subject)
    if not s:
        return False
    for name in {normalize_answer(title), normalize_answer(_title_core(title))} - {""}:
        if f" {s} " in f" {name} " or f" {name} " in f" {s} ":
            return True
        rest = iter(s.split())  # the title's words in order, others between them
        if len(name.split()) > 1 and all(w in rest for w in name.split()):
            return True
    return False


def _names_title_by_its_head(sentence: str, title: str) -> bool:
    """The sentence calls the article's entity by the last word of its name, as articles do
    after the first mention ("James filed", "Pascal was raised", "the Model Y")."""
    words = _title_core(title).split()
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
        grounding_nli: GroundingNLI | None = None,
        grammar: RelationParser | None = None,
    ) -> None:
        self.answer_max_words = answer_max_words
        self.dialogue_min_turns = dialogue_min_turns
        self.dialogue_max_turns = dialogue_max_turns
        self.relation_max_words = relation_max_words
        self.object_max_words = object_max_words
        self.turn_min_share = turn_min_share
        self.question_min_share = question_min_share
        self.grounding_nli = grounding_nli
        self.grammar = grammar

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
            grammar=RelationParser() if cfg.quadruple_grammar_check else None,
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
        checks.append(_url_check(texts, evidence))
        checks.append(_script_check(texts, evidence))
        checks += _evidence_checks(item.evidence_sent_idx, n_sentences, allowed)
        phrase = leaning_phrase(item.question)
        checks.append(Check("question_leans_on_text", phrase is None, phrase or ""))
        dangling = dangling_reference(item.question)
        checks.append(Check("question_not_standalone", dangling is None, dangling or ""))
        off_topic = _about_evidence(
            item.question,
            [text for _, text in evidence] + [item.title],
            self.question_min_share,
        )
        checks.append(Check("question_not_about_evidence", not off_topic, off_topic))
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
        texts = [
            (f"turn {t.turn_idx} {side}", text)
            for t in dialogue.turns
            for side, text in (("user", t.user), ("expert", t.expert))
        ]
        empty = [name for name, text in texts if not text.strip()]
        checks.append(Check("empty_field", not empty, ", ".join(empty)))
        checks.append(
            _url_check(
                texts, [(f"turn {t.turn_idx} evidence", t.evidence_text) for t in dialogue.turns]
            )
        )
        checks.append(
            _script_check(texts, [(f"turn {t.turn_idx}", t.evidence_text) for t in dialogue.turns])
        )
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
        share = self.turn_min_share
        unsupported = [
            f"turn {t.turn_idx}: {why}"
            for t in dialogue.turns
            if (why := _turn_support(t.expert, t.evidence_text, dialogue.title, share))
        ]
        checks.append(Check("turn_not_grounded", not unsupported, "; ".join(unsupported)))
        repeats = _repeated_turns(dialogue.turns)
        checks.append(Check("repeated_turn", not repeats, repeats))
        return Verdict(tuple(checks))

    def score_quadruple(
        self, quad: Quadruple, *, n_sentences: int, allowed: Collection[int] | None = None
    ) -> Verdict:
        """Checks of one quadruple; ``allowed`` = the sentence indices its prompt offered."""
        texts = [("subject", quad.subject), ("relation", quad.relation), ("object", quad.object)]
        empty = [name for name, value in texts if not value.strip()]
        checks = [Check("empty_field", not empty, ", ".join(empty))]
        checks.append(_url_check(texts, [("evidence", quad.evidence_text)]))
        checks.append(_script_check(texts, [("evidence", quad.evidence_text)]))
        checks += _evidence_checks(quad.evidence_sent_idx, n_sentences, allowed)
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
