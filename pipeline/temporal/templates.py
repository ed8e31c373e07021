"""Temporal questions written by code from the facts' own words (no model).

The packaged 1.5B model, asked to phrase a question, names kinds the evidence never gives
("Which video game did Pascal star in?" for a TV series), reverses roles ("Which company was
merged with American Decca?" stored with American Decca) and doubles prepositions; on the
item gold half of its questions were right. A fact read off the parse already says who did
what: its relation is the verb phrase as the sentence writes it, so the question is that verb
phrase turned around its missing object, with do-support or the auxiliary moved to the
front, and asks "who" only when the answer is a person:

- C1: "Barclays | acquired | Mercantile Credit | 1975-08" -> "What did Barclays acquire in
  August 1975?"; "Pugh | was awarded | Trophée Chopard | 2019" -> "What was Pugh awarded in
  2019?".
- C2: the same with the interval, "What did 3M acquire between 1980 and August 2010?".
- C3: the first fact's question with the second fact as a relative clause on the answer:
  a bridge "... that moved to Saint Paul in 1910?", a shared object "... that CBS
  Corporation founded in 2006?".
- timeline: "What did X receive most recently?"; a noun relation ("head coach", as LLM
  quadruples may have) "Who is the current head coach of Chelsea F.C.?".

A relation the parse cannot turn (no verb, a verb form that takes no do-support such as
"leading") gets no question (``no_template``). The questions then pass the same checks as
the model's (:func:`pipeline.temporal.phrasing.question_problem`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from pipeline.syntax import find_span, parse, parser_package
from pipeline.temporal.phrasing import Phrasing, recheck
from pipeline.temporal.questions import Fact, QuestionSpec, time_phrase_of

# Stamped on every templated question and part of the temporal stage's digest.
TEMPLATE_VERSION = "temporal-template-5"
_BE = frozenset("is are was were".split())  # noqa: SIM905
_AUXILIARIES = _BE | frozenset(
    "has have had will would can could may might must shall should".split()  # noqa: SIM905
)
_DO_SUPPORT = {"VBD": "did", "VBN": "did", "VBZ": "does", "VBP": "do"}


def template_id() -> str:
    """The generator stamped on templated questions: the template version and the parser."""
    return f"template:{TEMPLATE_VERSION}:{parser_package()}"


@dataclass(frozen=True)
class _Turned:
    """A fact's relation turned around its object: ``{wh} {aux} {subject} {rest}``."""

    wh: str
    aux: str  # "" for a noun relation
    subject: str
    rest: str
    noun: str  # the relation when it is a noun ("head coach"), else ""


def _span(name: str, evidence: str) -> Any | None:
    return find_span(parse(evidence), name) if evidence else None


def _with_article(name: str, evidence: str) -> str:
    """``name`` with the "the" its sentence gives it ("the Nuggets"); not one that belongs to
    a longer noun ("the Time Warner merger")."""
    span = _span(name, evidence)
    if span is None or span.start == 0 or name[:4].lower() == "the ":
        return name
    before = span.doc[span.start - 1]
    if before.lower_ == "the" and span.start <= before.head.i < span.end:
        return f"the {name}"
    return name


def _is_person(name: str, evidence: str) -> bool:
    """Whether the evidence's parse calls ``name`` a person: a PERSON entity of two words or
    more spelling the whole name, or its end after lowercase titles ("guard Allen Iverson").
    One capitalised word alone is too often a place or a firm the tagger took for a name."""
    span = _span(name, evidence)
    if span is None:
        return False
    named = [t for t in span if t.ent_type_ == "PERSON"]
    titles = span[: len(span) - len(named)]
    return (
        len(named) >= 2
        and all(t.ent_type_ == "PERSON" for t in span[len(titles) :])
        and all(t.is_lower and t.pos_ == "NOUN" for t in titles)
    )


def _relation_tokens(subject: str, relation: str, obj: str) -> list[Any]:
    """The relation's tokens in the parse of "subject relation object."."""
    doc = parse(f"{subject} {relation} {obj}.")
    start = len(subject) + 1
    return [t for t in doc if start <= t.idx < start + len(relation)]


def _full_name(subject: str, title: str) -> str:
    """The article's person named in full where the sentence uses the surname ("Altman" of
    "Sam Altman"): a question asked without the page needs the whole name. Only the last word
    of a title the parser calls a person ("Tesla" of "Tesla Model Y" is the company)."""
    name = re.sub(r"\s*\(.*\)$", "", title)
    names = name.split()
    if len(names) < 2 or subject != names[-1]:
        return subject
    people = [e for e in parse(name).ents if e.label_ == "PERSON"]
    return name if people and people[0].text == name else subject


def _subject(fact: Fact) -> str:
    """How a question names the fact's subject: with its sentence's "the" ("the Dolphins":
    no person, whatever the tagger makes of "Miami Dolphins"), else in full; a title's
    disambiguation goes before the name ("Jack Smith (lawyer)" -> "lawyer Jack Smith")."""
    with_article = _with_article(fact.subject, fact.evidence_text)
    if with_article != fact.subject:
        return with_article
    name = _full_name(fact.subject, fact.title)
    qualified = re.fullmatch(r"(.+?) \(([^()]+)\)", name)
    return f"{qualified[2]} {qualified[1]}" if qualified else name


_PLACE_PREPS = frozenset({"to", "in", "at", "into", "from"})
_PLACES = frozenset({"GPE", "LOC", "FAC"})


def _asks_who(fact: Fact) -> bool:
    """Whether the fact's object is a person, so that its question asks "who": a person the
    parse names in full, or the article's own person by surname ("Musk sued OpenAI and
    Altman" on the page "Sam Altman")."""
    # "moved to Saint Paul": a place, whatever the entity tagger says.
    to_place = fact.relation.split()[-1:][0].lower() in _PLACE_PREPS
    return not to_place and (_is_person(fact.object, fact.evidence_text) or _names_own_person(fact))


def _names_own_person(fact: Fact) -> bool:
    """The object is the surname of the article's person, written without "the". The tagger
    is no help here: it calls "Altman" of "Musk sued OpenAI and Altman" a place, and both the
    title "Miami Dolphins" and "the Dolphins" of "Saban coached the Dolphins" persons."""
    return (
        _full_name(fact.object, fact.title) != fact.object
        and _with_article(fact.object, fact.evidence_text) == fact.object
    )


def _asks_where(fact: Fact) -> bool:
    """Whether the fact's object is a place reached through "in" / "at" / "to" / "into"
    (every word of it a place entity of its sentence: "born in Santiago"), so that its
    question asks "where"."""
    # not "from": "took over from Hugo Boss" is a firm the tagger may call a place
    if fact.relation.split()[-1:][0].lower() not in _PLACE_PREPS - {"from"}:
        return False
    span = _span(fact.object, fact.evidence_text)
    return span is not None and all(t.ent_type_ in _PLACES for t in span)


def _object_noun(fact: Fact) -> str:
    """The common noun that ends the fact's object when words before it say which one
    ("award" of "Innovation Preparedness award", "configuration" of "Standard Range RWD
    configuration"), else "". "What did Cisco receive in 2011?" fits anything received;
    "What award ..." asks for the one the answer names."""
    span = _span(fact.object, fact.evidence_text)
    if span is None or len(span) < 2:
        return ""
    head = span[-1]
    says_which = any(t.pos_ not in ("DET", "PRON", "PUNCT") for t in span[:-1])
    # a value is asked as one ("$3.6m": not "What m"), whatever its last word
    valued = any(t.like_num or t.is_currency or t.pos_ in ("NUM", "SYM") for t in span)
    common = head.pos_ == "NOUN" and head.is_lower and head.is_alpha and len(head) >= 3
    if head.i != span.root.i or not common or valued or not says_which:
        return ""
    return head.text


def turn(fact: Fact) -> _Turned | None:
    """The fact's relation turned into a question about its object, or None."""
    words = _relation_tokens(fact.subject, fact.relation, fact.object)
    if not words:
        return None
    subject, wh = _subject(fact), "Who" if _asks_who(fact) else "What"
    verbs = [i for i, t in enumerate(words) if t.pos_ in ("VERB", "AUX")]
    if not verbs:
        return _Turned(wh, "", subject, "", fact.relation)
    if wh == "What" and (noun := _object_noun(fact)):
        wh = f"What {noun}"
    if _asks_where(fact):
        # "Where was X born?", "Where did X move to?": "in" / "at" go with "where"
        wh = "Where"
        if words[-1].lower_ in ("in", "at"):
            words = words[:-1]
    first = verbs[0]
    before = [t.text for t in words[:first]]  # "also", "officially": after the subject
    verb, after = words[first], [t.text for t in words[first + 1 :]]
    lower = verb.lower_
    if lower in _BE or (
        lower in _AUXILIARIES and any(t.pos_ == "VERB" for t in words[first + 1 :])
    ):
        return _Turned(wh, lower, subject, " ".join([*before, *after]), "")
    aux = _DO_SUPPORT.get(verb.tag_)
    if aux is None:
        return None
    return _Turned(wh, aux, subject, " ".join([*before, verb.lemma_.lower(), *after]), "")


def _join(*parts: str) -> str:
    return " ".join(p for p in parts if p)


def _main(turned: _Turned, time: str) -> str:
    if turned.noun:
        return _join(turned.wh, "was the", turned.noun, "of", turned.subject, time)
    if time and turned.rest.split()[-1:] == time.split()[:1]:
        # "What was X based in in 1965?" reads as a slip: the time goes first.
        asked = _join(turned.wh.lower(), turned.aux, turned.subject, turned.rest)
        return f"{time[0].upper()}{time[1:]}, {asked}"
    return _join(turned.wh, turned.aux, turned.subject, turned.rest, time)


def _relative(fact: Fact, shape: str) -> str | None:
    """The second fact of a C3 question as a clause on the shared entity: "that moved to
    Saint Paul in 1910" (bridge), "that CBS Corporation founded in 2006" (shared object)."""
    time = time_phrase_of(fact)
    if shape == "bridge":
        return _join("that", fact.relation, _with_article(fact.object, fact.evidence_text), time)
    words = _relation_tokens(fact.subject, fact.relation, fact.object)
    if not any(t.pos_ in ("VERB", "AUX") for t in words):
        return None
    return _join("that", _subject(fact), fact.relation, time)


def template_question(spec: QuestionSpec) -> str | None:
    """The question for ``spec`` built from its facts' words, or None when a relation
    cannot be turned into one."""
    first = spec.facts[0]
    turned = turn(first)
    if turned is None:
        return None
    if spec.category == "C2":
        places = {_asks_where(f) for f in spec.facts}
        if len(places) > 1:
            return None  # some places, some not: no one question word fits
        if turned.wh != "Where":
            nouns = {_object_noun(f) for f in spec.facts}
            what = f"What {nouns.pop()}" if len(nouns) == 1 and "" not in nouns else "What"
            turned = replace(turned, wh="Who" if all(map(_asks_who, spec.facts)) else what)
        text = _main(turned, spec.time_phrase)
    elif spec.category == "C3":
        clause = _relative(spec.facts[1], spec.shape)
        if clause is None:
            return None
        text = _join(_main(turned, time_phrase_of(first)), clause)
    elif spec.category == "timeline":
        if turned.noun:
            text = _join(turned.wh, "is the current", turned.noun, "of", turned.subject)
        else:
            text = _main(turned, "most recently")
    else:
        text = _main(turned, time_phrase_of(first))
    return text + "?"


def template_phrasings(specs: Sequence[QuestionSpec]) -> list[Phrasing]:
    """Every spec's templated question, checked as the model's are."""
    out = []
    for spec in specs:
        question = template_question(spec)
        checked = recheck(spec, question)
        out.append(
            checked or Phrasing(spec.question_id, None, "no_template", spec.facts[0].relation)
        )
    return out
