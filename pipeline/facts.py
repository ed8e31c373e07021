"""Checkable facts in a sentence: numbers, dates and named entities, normalized for comparison.

Two sentences can be 0.99-similar to a sentence embedder and still state different facts
("as of March 29, 2022" vs "as of May 8, 2024"). :func:`fact_differences` lists what differs,
so the labeling engine can refuse to call such a pair unchanged.

Normalization: "1,998" = "1998", "2.5 million" = 2500000, "5%" = 5; "May 8, 2024" =
"8 May 2024" = "2024-05-08", "May 2024" = "2024-05"; entities case-folded. Formatting-only
edits (casing, commas, whitespace) produce no difference.
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


def _fold(text: str) -> str:
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
    return _EDGE_PUNCT.sub("", " ".join(_fold(text).split()))


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
    folded = _DOTTED_ACRONYM.sub(lambda m: m.group().replace(".", ""), _fold(text))
    words = (w for w in _TOKEN.findall(folded) if w not in _STOPWORDS)
    return [_WORD_ALIASES.get(w, w) for w in words]


def _initials(words: list[str], shortest: int = 2) -> set[str]:
    """Initials of every run of ``shortest`` to _MAX_INITIALS consecutive words."""
    return {
        "".join(w[0] for w in words[i:j])
        for i in range(len(words))
        for j in range(i + shortest, min(i + _MAX_INITIALS, len(words)) + 1)
    }


def _covers(words: list[str], name: list[str]) -> bool:
    """Whether every word of ``name`` is one of ``words`` or the initials of a run of them
    ("fda" in "Food and Drug Administration", "us" in "United States")."""
    present = set(words)
    missing = [w for w in name if w not in present]
    return not missing or set(missing) <= _initials(words)


def _still_named(name: list[str], words: list[str]) -> bool:
    """Whether a sentence with ``words`` names the entity ``name``: in full, or by an acronym of
    three letters or more ("FDA" for the "US Food and Drug Administration"; two letters would
    take the pronoun "us" for the "United States")."""
    return _covers(words, name) or not _initials(name, shortest=3).isdisjoint(words)


def _renamed(entity: str, others: frozenset[str]) -> bool:
    """Whether ``entity`` and one of ``others`` are two names for one thing: one name inside
    the other ("FC Porto" / "Porto", "Hulu.com" / "Hulu"), an acronym of it ("FDA") or the same
    letters spaced differently ("NBCUniversal" / "NBC Universal")."""
    words = _name_words(entity)
    for other in others:
        other_words = _name_words(other)
        if not (words and other_words):
            continue
        if _covers(words, other_words) or _covers(other_words, words):
            return True
        if "".join(words) == "".join(other_words):
            return True
    return False


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
    for kind in ("numbers", "dates"):
        a, b = getattr(old_facts, kind), getattr(new_facts, kind)
        if a != b:
            diffs.append(f"{kind}: {sorted(a - b)} -> {sorted(b - a)}")
    only_old = old_facts.entities - new_facts.entities
    only_new = new_facts.entities - old_facts.entities
    if not (only_old or only_new):
        return diffs  # the common case: no sentence needs tokenizing
    old_words, new_words = _name_words(old), _name_words(new)
    gone = sorted(
        e
        for e in only_old
        if not _still_named(_name_words(e), new_words) and not _renamed(e, only_new)
    )
    added = sorted(
        e
        for e in only_new
        if not _still_named(_name_words(e), old_words) and not _renamed(e, only_old)
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
        if not self._use_ner:
            return [extract_facts(t) for t in texts]
        if self._nlp is None:
            self._load()
        assert self._nlp is not None
        return [
            extract_facts(t, [(e.text, e.label_) for e in doc.ents])
            for t, doc in zip(texts, self._nlp.pipe(texts, batch_size=64), strict=True)
        ]
