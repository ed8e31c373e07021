"""Answer spans for answer-first QA: the names, dates, numbers and places of a sentence that a
quiz question can ask for, found with spaCy's named entities and dependency parse.

A small model asked for a question *and* its answer often pairs a question with a span of the
sentence that belongs to another event ("When did X become chief?" -> the year of the job
before). Here code picks the spans first; the model only chooses one of them and phrases the
question. Each span also carries its *anchor*: the verb of the sentence it is an argument of
(and, for a count, the noun it counts), which the question has to ask about
(:func:`attachment_problem`).

A span is offered when it is a named entity of a kind a question can ask for, at most six
words, written once in its sentence, outside brackets and quotes, and not a name of the
article's own entity (its title).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.dates import MONTH_NAMES
from pipeline.syntax import parse
from pipeline.text_checks import content_words, normalize_answer, title_core

# spaCy entity label -> what kind of answer it is
ENTITY_KINDS: dict[str, str] = {
    "DATE": "date",
    "MONEY": "amount",
    "PERCENT": "amount",
    "QUANTITY": "amount",
    "CARDINAL": "count",
    "PERSON": "person",
    "ORG": "organization",
    "GPE": "place",
    "LOC": "place",
    "FAC": "place",
    "EVENT": "name",
    "WORK_OF_ART": "title",
    "PRODUCT": "name",
    "LAW": "name",
    "NORP": "group",
}
MAX_SPAN_WORDS = 6
_MONTH = re.compile(r"\b(?:" + "|".join(MONTH_NAMES) + r")\b")
_DIGIT = re.compile(r"\d")
_LIGHT = frozenset({"be", "have", "do"})
_PAIRS = (("(", ")"), ("[", "]"), ("\u201c", "\u201d"))
# One end of a range or a score: "65–19", "2005–2006", "July to early August".
_RANGE_END = r"(?:\d(?:[\d,.]*\d)?|" + "|".join(MONTH_NAMES) + r")"
_RANGE_LINK = r"(?:–|—|-|to|through)"
_RANGE_LINK_WORDS = re.compile(r"\b(?:to|through|early|late|mid)\b")
_RANGE_BEFORE = re.compile(_RANGE_END + r"\s*" + _RANGE_LINK + r"\s*$")
_RANGE_AFTER = re.compile(r"^\s*" + _RANGE_LINK + r"\s*(?:early |late |mid-?)?" + _RANGE_END)


@dataclass(frozen=True)
class AnswerSpan:
    """One askable value of one sentence."""

    sent_idx: int
    text: str  # as written in the sentence
    kind: str  # ENTITY_KINDS value
    anchor: str  # lemma of the verb it is an argument of ("" when none)
    counted: str = ""  # for a count: the noun it counts ("speakers" for "6 speakers")


def range_part(text: str, sentence: str, question: str = "") -> str:
    """The range or score of ``sentence`` that ``text`` is only one end of ("19" of the
    record "65–19", "2006" of "2005–2006"), or "": asked alone, it is half an answer. Not
    when the ``question`` names the other end ("From what through 1992–93 ...?" -> "1982–83"
    asks for one end on purpose)."""
    text = text.strip()
    if not (_DIGIT.search(text) or _MONTH.search(text)):
        return ""  # "Boeing" of "Boeing-737" is a name, not a range's end
    for match in re.finditer(rf"(?<!\w){re.escape(text)}(?!\w)", sentence):
        before, after = sentence[: match.start()], sentence[match.end() :]
        start = _RANGE_BEFORE.search(before)
        if start and not re.search(r"[^\W\d]-\s*$", before):
            whole, other = before[start.start() :] + text, before[start.start() : start.end()]
        elif end := _RANGE_AFTER.match(after):
            whole, other = text + end.group(0), end.group(0)
        else:
            continue
        other_end = _RANGE_LINK_WORDS.sub("", other).strip(" –—-")
        if question and other_end and other_end in question:
            continue
        return whole
    return ""


_FIGURE = re.compile(r"\d[\d,.]*")


def name_part(text: str, sentence: str) -> str:
    """The name that the figure ``text`` is only the end of in ``sentence`` ("500" of the
    "Fortune 500 list", "5" of "Game 5", "3" of "Model 3"), or "": asked alone, it answers
    "Which list?" with a number. The word before is capitalised, not the sentence's first
    word and no month ("July 4" is a date)."""
    text = text.strip()
    if not _FIGURE.fullmatch(text):
        return ""
    for match in re.finditer(rf"(?<=[^\W\d_]) {re.escape(text)}(?![\w,.]\w)", sentence):
        word = re.search(r"(\S+)$", sentence[: match.start()])
        if word is None or word.start() == 0:
            continue
        before = word.group(1)
        if before[:1].isupper() and before.isalpha() and not _MONTH.fullmatch(before):
            return f"{before}{match.group(0)}"
    return ""


def _listed(span: Any) -> bool:
    """The tokens ``span`` are one member of a list ("Oklo Inc." of "Oklo Inc. and Helion
    Energy"), not the whole list."""
    root, inside = span.root, range(span.start, span.end)
    return (root.dep_ == "conj" and root.head.i not in inside) or any(
        c.dep_ == "conj" and c.i not in inside for c in root.children
    )


def list_part(text: str, sentence: str) -> str:
    """The list of ``sentence`` that ``text`` is one member of, or "": asked alone, the other
    members answer the question as well ("What are the clean energy companies Altman
    chairs?" -> "Oklo Inc.", of "Oklo Inc. and Helion Energy")."""
    from pipeline.syntax import find_span

    span = find_span(parse(sentence), text)
    if span is None or not _listed(span):
        return ""
    head = span.root
    while head.dep_ == "conj":
        head = head.head
    members = [head, *(t for t in head.subtree if t.dep_ == "conj" and t.head.i >= head.i)]
    start = min(m.left_edge.i for m in members)
    end = max(m.right_edge.i for m in members)
    return span.doc[start : end + 1].text


def _inside_brackets(doc: Any, start: int, end: int) -> bool:
    text = doc.text
    before, after = text[: doc[start].idx], text[doc[end - 1].idx + len(doc[end - 1]) :]
    for a, b in _PAIRS:
        if before.count(a) > before.count(b) and after.count(b) > after.count(a):
            return True
    return before.count('"') % 2 == 1 and '"' in after


# Units the entity recognizer leaves outside a number ("4.5 m" is CARDINAL "4.5")
_UNITS = frozenset(
    "m km cm mm nm ft mi kg mg lb lbs GB TB MB kB W kW MW GW Hz kHz MHz GHz mph km/h °C °F "  # noqa: SIM905
    "ms".split()
)
_OR_SO = frozenset({"or more", "or less", "or fewer", "or higher", "or lower", "or so"})
_BOUNDS = frozenset(
    {"over", "under", "about", "around", "nearly", "almost", "approximately", "roughly", "some",
     "well over", "more than", "less than", "fewer than", "up to", "at least", "at most",
     "just over", "just under"}
)  # fmt: skip


def _anchor(token: Any) -> Any | None:
    """The verb ``token`` is an argument of: up through prepositions, nouns it modifies and
    conjuncts to the first verb (a light "be" / "have" counts)."""
    node = token
    for _ in range(12):
        if node.head.i == node.i:
            return node if node.pos_ in ("VERB", "AUX") else None
        node = node.head
        if node.pos_ == "VERB" or (node.pos_ == "AUX" and node.dep_ not in ("aux", "auxpass")):
            return node
    return None


def _clean(text: str) -> str:
    return text.strip().strip(",;:").strip()


def _is_title(text: str, title: str) -> bool:
    span, name = normalize_answer(text), normalize_answer(title_core(title))
    if not span or not name:
        return False
    return f" {span} " in f" {name} " or f" {name} " in f" {span} "


def _whole_figure(doc: Any, ent: Any) -> tuple[Any, bool]:
    """A count or amount with what the recognizer left outside it: its unit ("4.5 m", not
    "4.5"), its bound after it ("40% or more": without it, another claim) or before it ("well
    over 2 million", "about 220"); and whether a unit was added (a measure, no count)."""
    start, end = ent.start, ent.end
    measured = end < len(doc) and doc[end].text in _UNITS
    if measured:
        end += 1
    if doc[end : end + 2].text.lower() in _OR_SO:
        end += 2
    for width in (2, 1):
        if start >= width and doc[start - width : start].text.lower() in _BOUNDS:
            start -= width
            break
    return doc[start:end], measured


def _date_alone(doc: Any, ent: Any) -> Any:
    """A date without the name the recognizer ran into it ("In late February 2024 Musk sued
    ..." -> "late February 2024")."""
    end = ent.end
    while (
        end - ent.start > 1
        and doc[end - 1].pos_ == "PROPN"
        and not _MONTH.search(doc[end - 1].text)
    ):
        end -= 1
    return doc[ent.start : end]


def spans_of(sent_idx: int, doc: Any, title: str) -> list[AnswerSpan]:
    """The answer spans of one parsed sentence, in sentence order."""
    out: list[AnswerSpan] = []
    for ent in doc.ents:
        kind = ENTITY_KINDS.get(ent.label_)
        if ent.start > 0 and doc[ent.start - 1].is_currency:
            ent = doc[ent.start - 1 : ent.end]  # "$3,000", not "3,000": the unit is the answer's
        if kind in ("count", "amount"):
            ent, measured = _whole_figure(doc, ent)
            kind = "amount" if measured else kind
        elif kind == "date":
            ent = _date_alone(doc, ent)
        text = _clean(ent.text)
        if kind is None or not text or len(text.split()) > MAX_SPAN_WORDS:
            continue
        if any(text.count(a) != text.count(b) for a, b in _PAIRS) or text.count('"') % 2:
            continue  # cut through a bracket: the entity recognizer misread the span
        if kind == "date" and not (_DIGIT.search(text) or _MONTH.search(text)):
            continue  # "annual", "the following year": no date to ask for
        if kind == "count" and not _DIGIT.search(text) and ent.root.dep_ != "nummod":
            continue
        if _is_title(text, title) or _inside_brackets(doc, ent.start, ent.end):
            continue
        if range_part(text, doc.text) or name_part(text, doc.text) or _listed(ent):
            continue  # part of a range, a score, a name or a list: asked alone, half an answer
        if len(re.findall(rf"(?<!\w){re.escape(text)}(?!\w)", doc.text)) != 1:
            continue  # written twice: which one a question asks for is unclear
        verb = _anchor(ent.root)
        counted = ent.root.head.lemma_ if ent.root.dep_ == "nummod" else ""
        out.append(
            AnswerSpan(sent_idx, text, kind, verb.lemma_.lower() if verb is not None else "",
                       counted.lower())
        )  # fmt: skip
    return out


def answer_spans(indices: Sequence[int], texts: Sequence[str], title: str) -> list[AnswerSpan]:
    """The answer spans of several sentences; a text found in two sentences is dropped (the
    answer alone could not say which sentence is its evidence)."""
    spans = [
        s for i, text in zip(indices, texts, strict=True) for s in spans_of(i, parse(text), title)
    ]
    seen: dict[str, int] = {}
    for s in spans:
        key = normalize_answer(s.text)
        seen[key] = seen.get(key, 0) + 1
    return [s for s in spans if seen[normalize_answer(s.text)] == 1]


def _stems(words: Iterable[str]) -> set[str]:
    return {w[:5] for w in words if len(w) >= 3}


def question_words(question: str) -> set[str]:
    """What a question says, for :func:`attachment_problem`: the 5-letter stems of its words
    and of their lemmas ("became" -> "become")."""
    doc = parse(question)
    words = [t.lower_ for t in doc] + [t.lemma_.lower() for t in doc]
    return _stems(words) | _stems(content_words(question))


def attachment_problem(question: str, span: AnswerSpan) -> str:
    """Why ``question`` does not ask about the event its answer span belongs to, or "": the
    question must say the span's verb (any form: "appointed" / "appointment") unless that
    verb is a light "be" / "have", and for a count the noun counted."""
    asked = question_words(question)
    if span.anchor and span.anchor not in _LIGHT and span.anchor[:5] not in asked:
        return f"the answer belongs to {span.anchor!r}, which the question does not say"
    if span.counted and span.counted[:5] not in asked:
        return f"the answer counts {span.counted!r}, which the question does not name"
    return ""


def span_in(answer: str, sent_idx: int, sentence: str) -> AnswerSpan | None:
    """The answer as a span of ``sentence`` with its anchor, or None when the sentence does
    not spell it out (a model's answer, not one picked by code)."""
    from pipeline.syntax import find_span

    doc = parse(sentence)
    span = find_span(doc, answer)
    if span is None:
        return None
    root = span.root
    verb = _anchor(root)
    counted = root.head.lemma_.lower() if root.dep_ == "nummod" and len(span) == 1 else ""
    label = next((e.label_ for e in doc.ents if e.start <= root.i < e.end), "")
    return AnswerSpan(
        sent_idx, span.text, ENTITY_KINDS.get(label, "phrase"),
        verb.lemma_.lower() if verb is not None else "", counted,
    )  # fmt: skip


_KIND_ORDER = {"time": 0, "number": 1, "entity": 2}


def _entities(doc: Any) -> list[tuple[int, int, str]]:
    return [(e.start_char, e.end_char, e.label_) for e in doc.ents]


def changed_values(old: str, new: str) -> tuple[str, str] | None:
    """(previous, current) answer of a changed sentence pair: a value of the old sentence
    and the value of the same kind that took its place (a date, number or name), written
    as each sentence has it; None when no value was replaced in place. A clean swap (all
    that differs in its stretch of the sentence) comes first, then times, numbers, names;
    a value still found in the other sentence is no answer (the answer did not change)."""
    from pipeline.slots import compare_slots
    from pipeline.text_checks import is_grounded

    slots = compare_slots(old, new, _entities(parse(old)), _entities(parse(new)))
    ranked = sorted(slots.replaced, key=lambda r: (not r.swap, _KIND_ORDER.get(r.kind, 3)))
    for r in ranked:
        if is_grounded(r.old, new) or is_grounded(r.new, old):
            continue
        if normalize_answer(r.old) == normalize_answer(r.new):
            continue
        # a year of a season is half of it: the answer is the season ("1982" of "1982–83")
        previous = _clean(r.old)
        current = _clean(r.new)
        return range_part(previous, old) or previous, range_part(current, new) or current
    return None
