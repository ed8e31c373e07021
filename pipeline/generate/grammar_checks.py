"""Checks of generated text against the grammar of its evidence (spaCy's parse, entities and
lemmas). A QA item: does the question assume only what the evidence says, does its answer
belong to the action the question asks about, does it name what it is about. A dialogue turn:
does the expert's reply say only what its sentence says, answer the kind of question asked,
end where a sentence ends.

A small model's questions go wrong in ways a word-overlap test cannot see, because most of
their words are in the sentence: "When did X become CEO?" from a sentence where X *fired* the
CEO (a false premise); "When did X become chief of litigation?" answered by the year of the
job before it (the answer attached to another verb); "How many experts were trained?" answered
by a count of speakers; "When did the league start?" (no name).
"""

from __future__ import annotations

import re

from pipeline.dates import MONTH_NUMBERS
from pipeline.generate.answer_spans import attachment_problem, span_in
from pipeline.syntax import parse, unsupported_words
from pipeline.text_checks import content_words, is_grounded, title_core, unstated_ranking

# A question may say things, names, numbers, qualities and actions only when the evidence does.
PREMISE_POS = ("NOUN", "PROPN", "NUM", "ADJ", "VERB")


def premise_problem(question: str, sources: list[str]) -> str:
    """Why the question assumes what its sources (evidence, title) do not say, or "": a
    thing, name, number, quality or action of the question that no source states in any
    form."""
    missing = unsupported_words(question, sources, PREMISE_POS)
    return f"the evidence does not say {', '.join(map(repr, missing))}" if missing else ""


def side_problem(question: str, sources: list[str]) -> str:
    """Why the question sets something against someone no source sets anything against, or
    "": "the case against Smith" where every word is in the sentence but Smith brought the
    case (the roles swapped)."""
    set_against = [
        " ".join(t.text for t in token.subtree)
        for source in sources
        if re.search(r"\bagainst\b", source, re.I)
        for token in parse(source)
        if token.lower_ == "against"
    ]
    for token in parse(question):
        if token.lower_ != "against":
            continue
        names = [t.text for t in token.subtree if t.pos_ == "PROPN"]
        if names and not any(all(n in phrase for n in names) for phrase in set_against):
            return f"the evidence does not set anything against {' '.join(names)}"
    return ""


def names_no_subject(question: str, title: str) -> str:
    """Why the question does not name what it is about, or "": it holds no name (a proper
    noun or an acronym after its first word; a month is no name: "What happened in March
    2009?") and no word of the article's title."""
    doc = parse(question)
    when = {t.i for ent in doc.ents if ent.label_ in ("DATE", "TIME") for t in ent}
    when |= {t.i for t in doc if t.lower_ in MONTH_NUMBERS}
    if any((t.pos_ == "PROPN" or (t.is_upper and len(t) > 1)) and t.i not in when for t in doc[1:]):
        return ""
    if set(content_words(title_core(title))) & set(content_words(question)):
        return ""
    return "the question names no one and nothing"


def generic_subject(subject: str, title: str) -> str:
    """Why a quadruple's subject is no particular entity, or "": it holds no name, no number
    and no word of the article's title ("Analysts", "the collaboration", "several experts")."""
    doc = parse(subject)
    if any(t.pos_ in ("PROPN", "NUM") or t.is_upper or t.text[:1].isupper() for t in doc[1:]):
        return ""
    if doc and (doc[0].pos_ in ("PROPN", "NUM") or doc[0].is_upper):
        return ""
    if set(content_words(title_core(title))) & set(content_words(subject)):
        return ""
    return f"{subject!r} names no particular entity"


def answer_attachment(question: str, answer: str, sentences: list[str]) -> str:
    """Why the answer belongs to another action of its sentence than the one the question
    asks about, or "" (also when no sentence spells the answer out: grounding judges that)."""
    for idx, sentence in enumerate(sentences):
        if not is_grounded(answer, sentence):
            continue
        span = span_in(answer, idx, sentence)
        if span is not None:
            return attachment_problem(question, span)
    return ""


# ------------------------------------------------------------------ dialogue turns

# "What are the main ...?" is how people ask in conversation, not a claim about the answer.
_CONVERSATIONAL_RANKS = frozenset({"main"})
_TERMINAL = tuple(".!?\"')]\u201d\u2019")
_WHEN = re.compile(r"^\s*(?:when\b|(?:in )?(?:what|which) (?:year|date|month|day)\b)", re.I)
_HOW_MANY = re.compile(r"^\s*how (?:many|much|long|old|big|large|far)\b", re.I)
_WHO = re.compile(r"^\s*(?:who|whom)\b", re.I)
_WHERE = re.compile(r"^\s*where\b", re.I)
# "What is the MacBook Air's price range?" is answered by an amount of money, not by "its
# lower prices relative to the MacBook Pro"
_PRICE = re.compile(r"^\s*what (?:is|was|are|were) [^?]{0,40}?\bprices?\b", re.I)
_MONEY = re.compile(
    r"[$\u20ac\u00a3\u00a5\u20b9]|\b(?:dollars?|euros?|pounds?|yen|rupees?)\b", re.I
)
_YEARISH = re.compile(r"\b\d{4}\b")
# A sentence that opens on its date ("In July 2022, the company announced ..."): the date of
# its main event, the answer to "When did the company announce ...?".
_OPENING_DATE = re.compile(
    r"^(?:In|On|By|As of|During|Since|From|Around)\s+[^,;]{0,40}?\b(\d{4})\b[^,;]{0,20},"
)
_ANSWER_ENTITIES = {
    "when": ("DATE", "TIME"),
    "how many": ("CARDINAL", "MONEY", "PERCENT", "QUANTITY", "DATE", "TIME", "ORDINAL"),
    "who": ("PERSON", "ORG", "NORP", "GPE"),
    "where": ("GPE", "LOC", "FAC", "ORG"),
    "price": ("MONEY",),
}


def is_cut_off(text: str, max_chars: int) -> bool:
    """The text stops mid-phrase: no closing punctuation, or it filled its length cap."""
    text = text.rstrip()
    return bool(text) and (not text.endswith(_TERMINAL) or len(text) >= max_chars - 1)


def asks_for(user: str) -> str | None:
    """What kind of value a user turn asks for ("when", "how many", "who", "where", "price"),
    read from the question word of its last question; None when it is no such question."""
    question = user.strip()
    if "?" not in question:
        return None
    # the last sentence that is a question: "Interesting. When did she join?" -> "When ..."
    last = re.split(r"(?<=[.!?])\s+", question.rsplit("?", 1)[0])[-1]
    for kind, pattern in (("when", _WHEN), ("how many", _HOW_MANY), ("who", _WHO),
                          ("where", _WHERE), ("price", _PRICE)):  # fmt: skip
        if pattern.match(last):
            return kind
    return None


# "What other agencies ...?", "What happened after the rain?": questions whose answer is a
# list or a story, which one sentence of the article does not give ("What else?" asks for
# any further fact, which it does)
_OPEN_QUESTION = re.compile(
    r"^\s*(?:(?:what|which|who) other\b|what happened (?:after|before|next|then|at|during)\b)",
    re.I,
)


def open_question(user: str) -> str:
    """The words that make a user turn an open question one sentence cannot answer, or ""."""
    found = _OPEN_QUESTION.match(user)
    return f"asks {found.group(0).strip()!r}: a list or a story" if found else ""


_ASKS_A_YEAR = re.compile(r"^\s*(?:when|(?:in |during )?(?:what|which) year)\b", re.I)


def year_missing(question: str, answer: str) -> str:
    """Why the answer to a "when" / "in which year" question is no answer, or "": it holds no
    year ("November" where the sentence says "In November, he signed ...", "11 years old").
    Such a question has one answer only with a year; a month-or-day question ("In which
    month ...?") is not asked here."""
    if not _ASKS_A_YEAR.match(question) or re.search(r"\d{4}", answer):
        return ""
    return f"asks when, the answer {answer!r} holds no year"


def user_premise_problem(user: str, sources: list[str]) -> str:
    """Why a user turn assumes what its sources (the turn's sentence, the title, the turns
    before it) do not say, or "": a name or number none of them has ("the lowest price in
    Europe" of a sentence about France), or a word that ranks the answer or ties it to the
    present ("his most recent recognition", "the current status"). Narrower than a QA
    question's premise check: a user may ask in words of their own ("What is her background
    in theatre?", "What are the main ...?"); a person's full name where a source has the
    surname passes."""
    missing = unsupported_words(user, sources, ("PROPN", "NUM"))
    for ent in parse(user).ents if missing else ():
        if ent.label_ == "PERSON" and any(t.text not in missing for t in ent):
            missing = [word for word in missing if word not in ent.text.split()]
    if missing:
        return f"the evidence does not say {', '.join(map(repr, missing))}"
    return unstated_ranking(user, sources, allowed=_CONVERSATIONAL_RANKS)


def reply_additions(expert: str, sources: list[str]) -> str:
    """Why the expert reply says more than its sources (evidence sentence, title, the user's
    words) state, or "": a thing, name, number or quality none of them says."""
    missing = unsupported_words(expert, sources)
    return f"the evidence does not say {', '.join(map(repr, missing))}" if missing else ""


def answers_kind(expert: str, kind: str, evidence: str = "") -> bool:
    """The reply holds a value of the kind asked for (a date for "when", a number for "how
    many", a name for "who" / "where"); to "when", the year the ``evidence`` opens on when it
    opens on a date (a reply that drops it answers with another event's date, or none)."""
    if kind == "when" and (opening := _OPENING_DATE.match(evidence.strip())):
        return opening.group(1) in expert
    doc = parse(expert)
    if any(ent.label_ in _ANSWER_ENTITIES[kind] for ent in doc.ents):
        return True
    if kind == "when":
        return _YEARISH.search(expert) is not None
    if kind == "price":
        return _MONEY.search(expert) is not None
    if kind == "how many":
        return any(t.like_num or t.pos_ == "NUM" for t in doc)
    return any(t.pos_ == "PROPN" for t in doc)
