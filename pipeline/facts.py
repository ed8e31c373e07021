"""Checkable facts in a sentence: numbers, dates and named entities, normalized for comparison.

Two sentences can be 0.99-similar to a sentence embedder and still state different facts
("as of March 29, 2022" vs "as of May 8, 2024"). :func:`fact_differences` lists what differs,
so the labeling engine can refuse to call such a pair unchanged.

Normalization: "1,998" = "1998", "2.5 million" = 2500000, "5%" = 5; "May 8, 2024" =
"8 May 2024" = "2024-05-08", "May 2024" = "2024-05"; a day-month date without a year equals
the full date of the same day ("5 September" = "September 5, 2020"); entities case-folded,
with spelling variants ("Guptas" / "Gupta", "Pete" / "Peter") and capitals abbreviations
("F1" / "Formula One") of one name counted as the same. Formatting-only edits (casing, commas,
whitespace) produce no difference.

:func:`sentence_values` lists a sentence's values with their places (what
:mod:`pipeline.slots` aligns between two revisions) and :func:`same_value` says whether two of
them can be one value.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from pipeline.dates import MONTH_NUMBERS

_MONTH_RE = r"(?:" + "|".join(sorted(MONTH_NUMBERS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?"
_YEAR = r"(?:1\d{3}|20\d{2}|2100)"


def _month(name: str) -> int:
    return MONTH_NUMBERS[name.lower().rstrip(".")]


def _day(text: str) -> int:
    return int(re.sub(r"\D", "", text))


_DATE_PATTERNS: list[tuple[re.Pattern[str], Callable[[re.Match[str]], str]]] = [
    (
        re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b"),
        lambda m: f"{m[1]}-{m[2]}-{m[3]}",
    ),
    (  # May 8, 2024 / May 8 2024
        re.compile(rf"\b({_MONTH_RE})\s+({_DAY}),?\s+({_YEAR})\b", re.I),
        lambda m: _iso(m[3], m[1], m[2]),
    ),
    (  # 8 May 2024
        re.compile(rf"\b({_DAY})\s+({_MONTH_RE}),?\s+({_YEAR})\b", re.I),
        lambda m: _iso(m[3], m[2], m[1]),
    ),
    (  # May 2024
        re.compile(rf"\b({_MONTH_RE}),?\s+({_YEAR})\b", re.I),
        lambda m: f"{m[2]}-{_month(m[1]):02d}",
    ),
    (  # May 8 (no year): still a fact that can change
        re.compile(rf"\b({_MONTH_RE})\s+({_DAY})\b(?!\s*,?\s*\d)", re.I),
        lambda m: f"--{_month(m[1]):02d}-{_day(m[2]):02d}",
    ),
    (  # 8 May (no year)
        re.compile(rf"\b({_DAY})\s+({_MONTH_RE})\b", re.I),
        lambda m: f"--{_month(m[2]):02d}-{_day(m[1]):02d}",
    ),
]
# "1948–50" is 1948 to 1950: expand abbreviated year ranges before reading numbers.
_YEAR_RANGE = re.compile(r"\b(1\d|20)(\d\d)\s*[–—-]\s*(\d\d)\b(?![.,]?\d)")
_SCALES = {
    "thousand": Decimal(10**3),
    "million": Decimal(10**6),
    "billion": Decimal(10**9),
    "trillion": Decimal(10**12),
    "k": Decimal(10**3),
    "m": Decimal(10**6),
    "bn": Decimal(10**9),
}
# Digits glued to letters count too ("NCT02054897" = "NCT #02054897", "RX7900"); an ordinal
# suffix is dropped ("8th" = 8).
_NUMBER_RE = re.compile(
    r"(?<![\d.,])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?:st|nd|rd|th)?"
    r"(?:\s*(thousand|million|billion|trillion|bn|k|m)\b)?",
    re.I,
)
_WORD_NUMBERS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "hundred": 100,
    "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8,
    "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12,
}  # fmt: skip
_WORD_NUMBER_RE = re.compile(r"\b(" + "|".join(_WORD_NUMBERS) + r")\b", re.I)
# Entity types already covered by the number and date extractors.
_NUMERIC_ENTITY_TYPES = {"DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL"}


def _iso(year: str, month: str, day: str) -> str:
    return f"{year}-{_month(month):02d}-{_day(day):02d}"


@dataclass(frozen=True)
class Facts:
    """The normalized facts of one sentence."""

    numbers: frozenset[str]
    dates: frozenset[str]
    entities: frozenset[str]


def _normalize_number(integer: str, fraction: str | None, scale: str | None) -> str | None:
    try:
        value = Decimal(integer.replace(",", "") + (fraction or ""))
    except InvalidOperation:
        return None
    if scale:
        value *= _SCALES[scale.lower()]
    value = value.normalize()
    return format(value, "f")


def extract_dates(text: str) -> tuple[set[str], str]:
    """ISO-normalized dates in ``text`` and the text with those dates blanked out."""
    found: set[str] = set()
    for pattern, to_iso in _DATE_PATTERNS:

        def _take(m: re.Match[str], to_iso: Callable[[re.Match[str]], str] = to_iso) -> str:
            found.add(to_iso(m))
            return " "

        text = pattern.sub(_take, text)
    return found, text


def extract_numbers(text: str) -> set[str]:
    """Normalized numbers in ``text`` (commas dropped, scale words applied, ordinal suffixes
    dropped, abbreviated year ranges expanded, spelled-out small numbers included)."""
    text = _YEAR_RANGE.sub(lambda m: f"{m[1]}{m[2]} to {m[1]}{m[3]}", text)
    numbers = set()
    for m in _NUMBER_RE.finditer(text):
        value = _normalize_number(m[1], m[2], m[3])
        if value is not None:
            numbers.add(value)
    numbers.update(str(_WORD_NUMBERS[m[1].lower()]) for m in _WORD_NUMBER_RE.finditer(text))
    return numbers


_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-"})
_EDGE_PUNCT = re.compile(r"^(?:the |a |an )?[\W_]*|(?:'s)?[\W_]*$")


def fold(text: str) -> str:
    """Case-folded, quotes unified, accents dropped ("Hülkenberg" = "Hulkenberg")."""
    text = unicodedata.normalize("NFKD", text.translate(_QUOTES))
    return "".join(c for c in text if not unicodedata.combining(c)).casefold()


_STOPWORDS = frozenset(
    ["the", "a", "an", "of", "and", "or", "for", "in", "on", "at", "to", "by", "de", "la", "le"]
)
_TOKEN = re.compile(r"\w+")


def normalize_entity(text: str) -> str:
    """Case-folded entity text with typographic quotes unified and a leading article, a
    possessive "'s" and edge punctuation dropped: "Cisco Systems Inc’s" -> "cisco systems inc",
    "the Russian Federation" -> "russian federation"."""
    return _EDGE_PUNCT.sub("", " ".join(fold(text).split()))


def extract_facts(text: str, entities: Iterable[tuple[str, str]] = ()) -> Facts:
    """Facts of a sentence. ``entities`` are (text, label) pairs from a NER model, if any."""
    dates, rest = extract_dates(text)
    ents = {
        normalize_entity(e)
        for e, label in entities
        if label not in _NUMERIC_ENTITY_TYPES and normalize_entity(e)
    }
    return Facts(frozenset(extract_numbers(rest)), frozenset(dates), frozenset(ents))


# "U.S." and "U.S.A." are one word each ("us", "usa") before the words are compared.
_DOTTED_ACRONYM = re.compile(r"\b[^\W\d_](?:\.[^\W\d_])+\.?")
# The one alias that initials cannot explain and that real edits swap back and forth.
_WORD_ALIASES = {"usa": "us"}
_MAX_INITIALS = 6  # the longest run of words an acronym is looked up in


def _name_words(text: str) -> list[str]:
    """Content words in order, dotted acronyms joined ("U.S. Capitol" -> ["us", "capitol"])."""
    folded = _DOTTED_ACRONYM.sub(lambda m: m.group().replace(".", ""), fold(text))
    words = (w for w in _TOKEN.findall(folded) if w not in _STOPWORDS)
    return [_WORD_ALIASES.get(w, w) for w in words]


# A short all-capitals token, letters and digits ("EU", "F1", "FBI", "NASA").
_ACRONYM_TOKEN = re.compile(r"\b[A-Z][A-Z0-9]{1,4}\b")
_DIGIT_WORDS = {"one": "1", "two": "2", "three": "3", "four": "4", "five": "5"}


def _acronyms(text: str) -> set[str]:
    """Case-folded short all-capitals tokens of a sentence."""
    return {t.casefold() for t in _ACRONYM_TOKEN.findall(text)}


def abbreviates(short: str, name: list[str]) -> bool:
    """Whether ``short`` can abbreviate the multi-word ``name`` (Schwartz & Hearst's test):
    its first character starts the name and the rest appear in order after it ("eu" in
    "european commission", "f1" in "formula one", "fbi" in "federal bureau investigation")."""
    if len(name) < 2 or not 2 <= len(short) <= 5:
        return False
    long = " ".join(_DIGIT_WORDS.get(w, w) for w in name)
    if short[0] != long[0]:
        return False
    pos = 1
    for ch in short[1:]:
        pos = long.find(ch, pos) + 1
        if pos == 0:
            return False
    return True


def _edit_distance_at_most_one(a: str, b: str) -> bool:
    """One substitution, insertion, deletion or swap of neighbours turns ``a`` into ``b``."""
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [k for k in range(len(a)) if a[k] != b[k]]
        return len(diff) <= 1 or (
            len(diff) == 2
            and diff[1] == diff[0] + 1
            and a[diff[0]] == b[diff[1]]
            and a[diff[1]] == b[diff[0]]
        )
    short, long = (a, b) if len(a) < len(b) else (b, a)
    k = next((k for k in range(len(short)) if short[k] != long[k]), len(short))
    return short[k:] == long[k + 1 :]


def _same_word(a: str, b: str) -> bool:
    """Two spellings of one name word: equal, plural and singular ("guptas" / "gupta"), a
    shortened or completed first name ("pete" / "peter") or a one-letter typo in a longer word
    ("hulkenburg" / "hulkenberg"). Short words must match exactly ("bob" is not "rob")."""
    if a == b:
        return True
    short, long = (a, b) if len(a) < len(b) else (b, a)
    if len(short) < 4 or not short.isalpha() or not long.isalpha():
        return False
    if long in (short + "s", short + "es"):
        return True
    if long.startswith(short) and len(long) - len(short) <= 2:
        return True
    return len(short) >= 5 and _edit_distance_at_most_one(a, b)


def name_words(text: str) -> list[str]:
    """Case-folded content words of a text as entity names are compared (see
    ``fact_differences``): two texts with the same set cannot differ in named entities."""
    return _name_words(text)


def _initials(words: list[str], shortest: int = 2) -> set[str]:
    """Initials of every run of ``shortest`` to _MAX_INITIALS consecutive words."""
    return {
        "".join(w[0] for w in words[i:j])
        for i in range(len(words))
        for j in range(i + shortest, min(i + _MAX_INITIALS, len(words)) + 1)
    }


def _abbreviated_words(words: list[str], acronyms: set[str]) -> set[str]:
    """Words of runs of two to four ``words`` that one of ``acronyms`` abbreviates: the words
    of "Formula One" when the other sentence writes "F1"."""
    out: set[str] = set()
    for a in acronyms:
        for i in range(len(words)):
            if words[i][0] != a[0]:
                continue
            for j in range(i + 2, min(i + 4, len(words)) + 1):
                if abbreviates(a, words[i:j]):
                    out.update(words[i:j])
    return out


def _covers(words: list[str], name: list[str], acronyms: set[str] = frozenset()) -> bool:
    """Whether every word of ``name`` is one of ``words`` (spelling variants allowed), the
    initials of a run of them ("fda" in "Food and Drug Administration", "us" in "United
    States") or, for a word written in capitals (``acronyms``), an abbreviation of a run of
    two to four of them ("f1" in "Formula One World Championship")."""
    present = set(words)
    missing = {w for w in name if w not in present and not any(_same_word(w, x) for x in words)}
    missing -= _initials(words)
    return all(
        m in acronyms
        and any(
            abbreviates(m, words[i:j])
            for i in range(len(words))
            if words[i][0] == m[0]
            for j in range(i + 2, min(i + 4, len(words)) + 1)
        )
        for m in missing
    )


def _still_named(
    name: list[str],
    words: list[str],
    acronyms: set[str] = frozenset(),
    own: set[str] = frozenset(),
    abbreviated: set[str] = frozenset(),
) -> bool:
    """Whether a sentence with ``words`` names the entity ``name``: in full (spelling variants
    of a word allowed, see ``_same_word``), by an acronym of three letters or more ("FDA" for
    the "US Food and Drug Administration"; two letters would take the pronoun "us" for the
    "United States"), or by one of its all-capitals ``acronyms`` that abbreviates the name
    ("F1" for "Formula One", "EU" for "European Commission"); ``own`` are the capitals tokens
    of the sentence the name comes from ("F1 World Championship" is still named by "Formula
    One World Championship"); words in ``abbreviated`` (``_abbreviated_words``) need not be
    named at all ("One World Championship", tagged inside "Formula One World Championship",
    is still named by "F1 World Championship")."""
    rest = [w for w in name if w not in abbreviated]
    return (
        not rest
        or _covers(words, rest, own)
        or not _initials(name, shortest=3).isdisjoint(words)
        or any(abbreviates(a, name) for a in acronyms)
    )


def _renamed(entity: str, others: frozenset[str], acronyms: set[str] = frozenset()) -> bool:
    """Whether ``entity`` and one of ``others`` are two names for one thing: one name inside
    the other ("FC Porto" / "Porto", "Hulu.com" / "Hulu"), an acronym of it ("FDA", or an
    all-capitals token of either sentence in ``acronyms`` that abbreviates it: "EU" for
    "European Commission") or the same letters spaced differently ("NBCUniversal" / "NBC
    Universal")."""
    words = _name_words(entity)
    for other in others:
        other_words = _name_words(other)
        if not (words and other_words):
            continue
        if _covers(words, other_words) or _covers(other_words, words):
            return True
        if "".join(words) == "".join(other_words):
            return True
        for short, name in ((words, other_words), (other_words, words)):
            if len(short) == 1 and short[0] in acronyms and abbreviates(short[0], name):
                return True
    return False


def _same_dates(a: frozenset[str], b: frozenset[str]) -> tuple[set[str], set[str]]:
    """Dates only in ``a`` and only in ``b``, where a day and month without a year ("--09-05")
    equals a full date of the same day and month ("2020-09-05") on the other side: adding
    the year to a date is not a change of date."""
    only_a, only_b = set(a - b), set(b - a)
    for partial in [d for d in only_a if d.startswith("--")]:
        full = {d for d in only_b if len(d) == 10 and d.endswith(partial[1:])}
        if full:
            only_a.discard(partial)
            only_b -= full
    for partial in [d for d in only_b if d.startswith("--")]:
        full = {d for d in only_a if len(d) == 10 and d.endswith(partial[1:])}
        if full:
            only_b.discard(partial)
            only_a -= full
    return only_a, only_b


def fact_differences(old: str, new: str, old_facts: Facts, new_facts: Facts) -> list[str]:
    """What differs between the facts of two sentences, as short human-readable strings; empty
    when they state the same numbers, dates and entities.

    An entity tagged in one sentence only counts as differing when the other sentence neither
    still names it (its content words, case-folded, accents dropped, ignoring "the", "of"...,
    their initials, or its acronym: NER tags "East Division" but not "East division", "U.S.
    Capitol" is the "United States Capitol") nor tags a variant of its name in its place
    ("FC Porto" -> "Porto", "US Food and Drug Administration" -> "FDA", "USA" -> "US"). A
    variant only counts when the old name is no longer tagged: "Warner Bros. Games" added next
    to a "Warner Bros." that stays is a new entity."""
    diffs = []
    if old_facts.numbers != new_facts.numbers:
        a, b = old_facts.numbers, new_facts.numbers
        diffs.append(f"numbers: {sorted(a - b)} -> {sorted(b - a)}")
    gone_dates, added_dates = _same_dates(old_facts.dates, new_facts.dates)
    if gone_dates or added_dates:
        diffs.append(f"dates: {sorted(gone_dates)} -> {sorted(added_dates)}")
    only_old = old_facts.entities - new_facts.entities
    only_new = new_facts.entities - old_facts.entities
    if not (only_old or only_new):
        return diffs  # the common case: no sentence needs tokenizing
    old_words, new_words = _name_words(old), _name_words(new)
    old_acr, new_acr = _acronyms(old), _acronyms(new)
    old_abbr, new_abbr = (
        _abbreviated_words(old_words, new_acr),
        _abbreviated_words(new_words, old_acr),
    )
    gone = sorted(
        e
        for e in only_old
        if not _still_named(_name_words(e), new_words, new_acr, old_acr, old_abbr)
        and not _renamed(e, only_new, old_acr | new_acr)
    )
    added = sorted(
        e
        for e in only_new
        if not _still_named(_name_words(e), old_words, old_acr, new_acr, new_abbr)
        and not _renamed(e, only_old, old_acr | new_acr)
    )
    if gone or added:
        diffs.append(f"entities: {gone} -> {added}")
    return diffs


class FactExtractor:
    """Extracts :class:`Facts` for many sentences, with spaCy NER when a model is available."""

    def __init__(self, spacy_model: str | None = None, *, use_ner: bool = True) -> None:
        self._model_name = spacy_model
        self._use_ner = use_ner
        self._nlp = None
        self.model_name = "regex"

    def _load(self) -> None:
        from pipeline.text import load_spacy

        self._nlp, name = load_spacy(self._model_name, keep=("ner",))
        self.model_name = f"regex+ner:{name}"

    def extract_many(self, texts: list[str]) -> list[Facts]:
        """Facts for each text, running NER over all of them in one batched pass."""
        spans = self.entity_spans_many(texts)
        return [
            extract_facts(t, [(t[a:b], label) for a, b, label in ents])
            for t, ents in zip(texts, spans, strict=True)
        ]

    def entity_spans_many(self, texts: list[str]) -> list[list[tuple[int, int, str]]]:
        """Named-entity character spans (start, end, label) of each text, one batched NER
        pass; empty lists without NER."""
        if not self._use_ner:
            return [[] for _ in texts]
        if self._nlp is None:
            self._load()
        assert self._nlp is not None
        return [
            [(e.start_char, e.end_char, e.label_) for e in doc.ents]
            for doc in self._nlp.pipe(texts, batch_size=64)
        ]


# --------------------------------------------------------------------------- values
_YEAR_VALUE = re.compile(r"^(1[5-9]\d\d|20\d\d|2100)$")
_MORE_WORD_NUMBERS = {
    "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17,
    "eighteen": 18, "nineteen": 19, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
}  # fmt: skip
_ALL_WORD_NUMBERS = _WORD_NUMBERS | _MORE_WORD_NUMBERS
_ANY_WORD_NUMBER = re.compile(r"\b(" + "|".join(_ALL_WORD_NUMBERS) + r")\b", re.I)
_MATH = re.compile(r"[_^=√∑∫∇‖⋅∂]")


@dataclass(frozen=True)
class Value:
    """One checkable value of a sentence: a point in time, a number or a named entity."""

    kind: str  # "time" | "number" | "entity"
    norm: str  # ISO date or year, normalized number, folded entity name
    text: str  # as written
    start: int
    end: int
    label: str = ""  # the NER label of an entity ("PERSON", "ORG", ...)


def sentence_values(text: str, entities: Iterable[tuple[int, int, str]] = ()) -> list[Value]:
    """The values of ``text``: dates (ISO, partial dates kept partial), numbers (years as
    ``time``), spelled-out numbers, and the named entities whose character spans ``entities``
    gives as (start, end, NER label)."""
    values: list[Value] = []
    blanked = text
    for pattern, to_iso in _DATE_PATTERNS:
        for m in pattern.finditer(blanked):
            values.append(Value("time", to_iso(m), m.group(), m.start(), m.end()))
        blanked = pattern.sub(lambda m: " " * len(m.group()), blanked)
    for m in _YEAR_RANGE.finditer(blanked):  # "2023–24": 2023 and 2024, each where written
        values.append(Value("time", m[1] + m[2], m[1] + m[2], m.start(1), m.end(2)))
        values.append(Value("time", m[1] + m[3], m[3], m.start(3), m.end(3)))
    blanked = _YEAR_RANGE.sub(lambda m: " " * len(m.group()), blanked)
    # Digits inside a formula are notation ("(1-ᾱ_t)", "σ_t^2"), not values of the world.
    numbers = [] if len(_MATH.findall(text)) >= 2 else list(_NUMBER_RE.finditer(blanked))
    for m in numbers:
        norm = _normalize_number(m[1], m[2], m[3])
        if norm is None:
            continue
        kind = "time" if _YEAR_VALUE.match(norm) and not m[3] else "number"
        values.append(Value(kind, norm, m.group(), m.start(), m.end()))
    for m in _ANY_WORD_NUMBER.finditer(blanked):
        values.append(Value("number", str(_ALL_WORD_NUMBERS[m[1].lower()]), m[1], *m.span()))
    taken = [(v.start, v.end) for v in values]
    for start, end, label in entities:
        if label in _NUMERIC_ENTITY_TYPES or any(s < end and start < e for s, e in taken):
            continue
        norm = normalize_entity(text[start:end])
        if norm:
            values.append(Value("entity", norm, text[start:end], start, end, label))
    return sorted(values, key=lambda v: (v.start, v.end))


def _same_time(a: str, b: str) -> bool:
    """Two times that can be the same point: equal, one a coarser form of the other
    ("2021" / "2021-09" / "2021-09-05"), or a day and month with and without a year."""
    if a == b or a.startswith(b) or b.startswith(a):
        return True
    return (a.startswith("--") and b.endswith(a[1:])) or (b.startswith("--") and a.endswith(b[1:]))


def same_value(a: Value, b: Value) -> bool:
    """Two values of one kind that can be the same: equal times, or one a coarser form of the
    other; equal numbers; one name, or a name and its short or other form."""
    if a.kind != b.kind:
        return False
    if a.kind == "time":
        return _same_time(a.norm, b.norm)
    if a.kind == "number":
        return a.norm == b.norm
    return a.norm == b.norm or _renamed(a.norm, frozenset([b.norm]))
