"""Quadruples read off the dependency parse, without a model.

Asked for (subject, relation, object, timestamp) facts, the packaged 1.5B model writes
clause fragments as relations, generic subjects, the wrong actor and definitions: of the
quadruples it wrote for the item gold set's test articles, 12 of 84 were right. A sentence's
parse already says who does what to whom: this module takes each main-clause verb of a
sentence, its named subject, the named thing or value it acts on, and the date that hangs
below it, and writes them down as the sentence says them.

What is kept, precision first (every rule with its example: docs/method.md, "Quadruples from
the parse"):
- the verb heads a main clause (the sentence's root or a verb joined to it by "and"); reported
  speech, conditions and relative clauses are not facts of the sentence; a negated, hedged or
  listing verb ("no longer", "may", "reportedly", "have included") states no fact;
- the subject is the verb's own (or, for a joined verb, the first verb's) and names something:
  a named entity, a proper noun or a word of the title, or "he" / "the company" where the
  article's own entity is the only one it can be;
- the object is the verb's direct object, the complement of "became" / "was named", the
  object of a preposition after the verb ("starred in", "was acquired by") or of an infinitive
  ("agreed to buy"); it names something or gives a value, has at most eight words and no verb;
- the timestamp is a date the verb governs in its own clause ("joined X *in 2019*"), written
  at the precision the text gives; with two dates that disagree and no "from" / "since",
  there is none; a fact whose clause gives a date no single timestamp writes ("in the
  1990s", "until 1985", "in 2016, 2022 and 2023") is not written: undated, it would read as
  timeless.

Why one long module: the rules are one reading of one parse (subject, verb, object, date and
the clauses that withhold a fact), each a few lines over the same tokens; split apart, every
part would import the others' private helpers.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

from pipeline.dates import MONTH_NUMBERS, iso_date
from pipeline.syntax import parse, parser_package

# Bump when a change of the rules changes which quadruples are read: stored generation runs
# are then redone (the generation digest covers it) and items name the rules they came from.
PARSE_RULES = "quadruple-parse-7"

_SUBJECTS = ("nsubj", "nsubjpass")
_FINITE = frozenset({"VBD", "VBZ"})  # not VBP: the tagger gives it to "would ... and assume"
_HEDGES = frozenset({"may", "might", "could", "would", "should", "can"})
_NEGATIONS = frozenset({"not", "never", "no", "longer", "neither", "nor"})
# Verbs whose second complement says what the fact is: "led the Dolphins | to five titles",
# "credited X | for ...", "ranked X | at number four", "donated $250k | to X", "overtook Intel
# | in market capitalization"
_SECOND_COMPLEMENT: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("lead", "carry", "guide", "bring", "help", "drive", "push", "steer"), ("to",)),
    **dict.fromkeys(("take", "donate", "give", "grant", "lend", "pledge"), ("to",)),
    **dict.fromkeys(("credit", "praise", "commend", "criticize", "criticise", "blame"), ("for",)),
    **dict.fromkeys(("thank", "laud", "hail"), ("for",)),
    **dict.fromkeys(("rank", "place"), ("at", "among")),
    **dict.fromkeys(("overtake", "surpass", "outsell", "outperform"), ("in",)),
}
_HEDGING_ADVERBS = frozenset(
    "reportedly allegedly reputedly supposedly purportedly apparently possibly probably "  # noqa: SIM905
    "likely rumoredly".split()
)
_CLAUSE_DEPS = frozenset(
    {"ccomp", "advcl", "relcl", "acl", "csubj", "parataxis", "xcomp", "pcomp", "conj"}
)
# Parts of a noun's subtree that describe it rather than name it.
_NOT_NAME = frozenset(
    {"relcl", "acl", "advcl", "appos", "punct", "cc", "conj", "parataxis", "prep", "npadvmod",
     "preconj"}
)  # fmt: skip
_ARTICLES = frozenset({"the", "a", "an"})
_OBJECT_PREPS = frozenset(
    "to by from as with against into for of in at on over under onto behind".split()  # noqa: SIM905
)
_START_PREPS = frozenset({"from", "since", "starting"})
# Words that open a clause saying when: "after it acquired ...", "before joining ..."
_TIME_WORDS = frozenset(
    {"after", "before", "when", "once", "until", "till", "since", "upon", "following"}
)
# "as of"; "around April 7, 2023" dates the event as closely as the text can
_WHEN_PREPS = frozenset({"in", "on", "at", "during", "as", "around", "circa"}) | _START_PREPS
_EVENT_PREPS = _WHEN_PREPS | {"of"}  # "in the summer of 2019"
# Nouns that make a preposition of a phrase: "in excess of", "as the result of", "in
# response to" say how, not what.
_LINK_NOUNS = frozenset(
    "result part means excess addition response favor favour spite terms behalf front place "  # noqa: SIM905
    "lieu light case advance association accordance support charge exchange honor honour".split()
)
_RANGE = re.compile(r"\s*(?:\bto\b|\buntil\b|–|—|-)\s*")
_MAX_OBJECT_WORDS = 8
_ORDINAL = re.compile(
    r"^(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|\d+(?:st|nd|rd|th))$",
    re.IGNORECASE,
)
_SCORE = re.compile(r"\d+\s*[–-]\s*\d+")
_MAX_SUBJECT_WORDS = 6
_MAX_JOIN_DISTANCE = 12
_YEAR = re.compile(r"(?<!\d)(1[0-9]{3}|20[0-9]{2})(?!\d)")
_DIGITS = re.compile(r"\d+")
_YEAR_OR_DECADE = re.compile(r"(?:1[0-9]{3}|20[0-9]{2})(?:s|[–-]\d{2,4})?|'\d0s")
_WAR = re.compile(r"\bWar\b")
_NOUN_MODIFIERS = frozenset({"nummod", "compound", "amod", "nmod"})
# "The FOV was also increased to approx.": the splitter took the abbreviation's dot for an end
_CUT_AT_ABBREVIATION = re.compile(r"\b(?:approx|e\.g|i\.e|vs|viz)\.$", re.IGNORECASE)
_APPROXIMATELY = re.compile(r"^(?:around|about|circa|approximately|c\.)\s+", re.IGNORECASE)
_MONTHS = re.compile(r"\b(" + "|".join(MONTH_NUMBERS) + r")\b", re.IGNORECASE)


def parser_id() -> str:
    """The generator stamped on parsed quadruples: the rules and the spaCy package."""
    return f"parse:{PARSE_RULES}:{parser_package()}"


@dataclass(frozen=True)
class ParsedFact:
    """One fact of a sentence, its words as the sentence writes them."""

    subject: str
    relation: str
    object: str
    timestamp: str | None


def timestamp_of(text: str) -> str | None:
    """ISO ``YYYY`` / ``YYYY-MM`` / ``YYYY-MM-DD`` of a date phrase, at the precision it gives
    ("5 March 2024", "March 2024", "early 2024", "the 2023 season"); None when it names no
    single year ("2023-24", "the 1990s", "last year")."""
    text = " ".join(text.split()).strip(" ,.")
    text = _APPROXIMATELY.sub("", text)  # "around April 7, 2023": the closest the text gives
    if text.lower().startswith("the "):
        text = text[4:]
    months = _MONTHS.findall(text)
    # A date written with its month's name, whole; figures alone ("2004-05") are a span in
    # prose more often than a month.
    exact = iso_date(text) if months else None
    if exact is not None:
        return exact
    years = _YEAR.findall(text)
    numbers = _DIGITS.findall(text)
    if len(years) != 1 or len(numbers) != 1 or re.search(r"\d0s\b", text):
        return None
    if len(months) == 1 and re.search(rf"\b{months[0]}\b,? {years[0]}", text):
        return f"{years[0]}-{MONTH_NUMBERS[months[0].lower()]:02d}"
    return years[0] if not months else None


def _words(tokens: list[Any]) -> str:
    """The tokens' text as the sentence writes it, a leading article dropped unless it is
    part of a title ("The Bubble" in mid-sentence)."""
    if tokens and tokens[0].lower_ in _ARTICLES and (tokens[0].is_lower or tokens[0].is_sent_start):
        tokens = tokens[1:]
    return "".join(t.text_with_ws for t in tokens).strip()


def _name_tokens(token: Any, complements: bool = False) -> list[Any]:
    """The words that name ``token``'s thing: its subtree without clauses, appositions,
    conjuncts and prepositional phrases other than "of" ones (with ``complements``, a common
    noun keeps them: "40% shareholding in the McLaren Group", "30.7 points per game")."""
    keep = _COMPLEMENT_PREPS if complements and token.pos_ == "NOUN" else {"of"}
    skip: set[int] = set()
    for child in token.children:
        if child.tag_ == "HYPH" or (
            child.dep_ == "prep" and child.lower_ in keep and not _holds_a_date(child)
        ):
            continue
        if child.dep_ in _NOT_NAME:
            skip.update(t.i for t in child.subtree)
    kept = [t for t in token.subtree if t.i not in skip]
    doc = token.doc
    # spaCy splits "3M" into "3" and "M" and "Dodd–Frank" in three: take back what is glued
    # to the phrase
    while kept[0].i > 0 and _glued(doc[kept[0].i - 1], kept[0]):
        kept.insert(0, doc[kept[0].i - 1])
    while kept[-1].i + 1 < len(doc) and _glued(kept[-1], doc[kept[-1].i + 1]):
        kept.append(doc[kept[-1].i + 1])
    if kept[0].text in _DASHES:
        kept = kept[1:]
    if kept and kept[-1].text in _DASHES:
        kept = kept[:-1]
    return kept


def _glued(left: Any, right: Any) -> bool:
    """``left`` and ``right`` are written as one word ("3M", "Dodd–Frank")."""
    if left.whitespace_:
        return False
    if right.text in _DASHES:  # "Dodd" + "–Frank"
        nxt = right.nbor() if right.i + 1 < len(right.doc) else None
        return left.is_alpha and not right.whitespace_ and nxt is not None and nxt.is_alpha
    if left.text in _DASHES:  # "Dodd–" + "Frank"
        return right.is_alpha and left.i > 0 and left.nbor(-1).is_alpha
    return not left.is_punct and not right.is_punct


_NAME_ENTITIES = frozenset(
    {"PERSON", "ORG", "GPE", "NORP", "FAC", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW",
     "LANGUAGE", "MONEY", "PERCENT", "QUANTITY"}
)  # fmt: skip
_AMOUNTS = frozenset({"MONEY", "PERCENT", "QUANTITY"})
_DASHES = frozenset({"-", "–", "—"})
_COMPLEMENT_PREPS = frozenset("of in to from for at on with per into".split())  # noqa: SIM905
# Subjects that are a share of something ("Most Barclays branches") and verbs that list
# ("3M's CEOs have included: Cross (1966–1970), ..."): one member is no fact of the whole.
_QUANTIFIERS = frozenset("most many some all several few each every both".split())  # noqa: SIM905
_LISTING_VERBS = frozenset({"include", "comprise"})
# One of these alone names no one: "the Court ruled" (which court?)
_INSTITUTIONS = frozenset(
    "court board commission committee council panel department bureau agency company "  # noqa: SIM905
    "government administration ministry office league club team band group".split()
)
_NOT_NAMES = frozenset({"DATE", "TIME", "CARDINAL", "ORDINAL"}) | _AMOUNTS


def _names_something(tokens: list[Any]) -> bool:
    """A proper noun, a number written in digits, or a named entity / amount."""
    return any(
        t.pos_ == "PROPN"
        or t.ent_type_ in _NAME_ENTITIES
        or (t.like_num and _DIGITS.search(t.text))
        for t in tokens
    )


def _names_a_thing(tokens: list[Any], title: str) -> bool:
    """A subject names a thing: a named entity, a proper noun, a word of the article's
    title; not a bare number. A capitalized first word the tagger calls a proper noun is
    not enough ("Thickness") unless a second proper noun follows it."""
    title_words = set(title.split())
    propn = [t for t in tokens if t.pos_ == "PROPN"]
    return (
        any(t.ent_type_ in _NAME_ENTITIES - _AMOUNTS for t in tokens)
        or any(not t.is_sent_start for t in propn)
        or len(propn) > 1
        or any(t.text in title_words for t in propn)
    )


def _whole_phrase(tokens: list[Any], listed: bool = False) -> bool:
    """The tokens are one run of the sentence that does not stop inside a noun phrase (a
    parse that splits "University of Notre Dame forward LaPhonso Ellis" in two is wrong);
    ``listed``: they are a member of a list, so an "and" before them is the list's."""
    first, last = tokens[0].i, tokens[-1].i
    if last - first + 1 != len(tokens):
        return False
    doc = tokens[0].doc
    before = doc[first - 1] if first > 0 else None
    after = doc[last + 1] if last + 1 < len(doc) else None
    if (before is not None and before.pos_ in ("PROPN", "NOUN") and before.dep_ != "nsubj") or (
        after is not None and after.pos_ in ("PROPN", "NOUN")
    ):
        return False
    # "Tools" of "Tools For Humanity": a capitalized "For" / "Of" goes on with the name
    if after is not None and after.is_title and after.pos_ in ("ADP", "CCONJ", "DET"):
        return False
    # "Jokić and Aaron Gordon", "Immigration and Naturalization Service": part of a coordination
    if (before is not None and before.lower_ in (("&",) if listed else ("and", "or", "&"))) or (
        after is not None and after.lower_ in ("&",)
    ):
        return False
    # "Reed Richards / Mister Fantastic", "(and Model 3s)": one of several names, or an aside
    if (before is not None and before.text in "/(") or (after is not None and after.text in "/)"):
        return False
    opened = sum(t.text == "(" for t in doc[:first]) - sum(t.text == ")" for t in doc[:first])
    return opened == 0


def _well_formed(tokens: list[Any], limit: int, listed: bool = False) -> bool:
    text = "".join(t.text_with_ws for t in tokens)
    return (
        0 < len(tokens) <= limit
        and _whole_phrase(tokens, listed)
        and "," not in text
        and not any(t.pos_ in ("VERB", "AUX", "PRON") for t in tokens)
        and text.count("(") == text.count(")")
        and text.count('"') % 2 == 0
    )


def _subject(verb: Any) -> Any | None:
    node = verb
    for _ in range(4):
        found = [c for c in node.children if c.dep_ in _SUBJECTS]
        if found:
            return found[0] if len(found) == 1 else None  # two subjects: a misparse
        if node.dep_ != "conj" or node.head.i == node.i:
            return None
        node = node.head
    return None


def _main_verbs(doc: Any) -> list[Any]:
    """Verbs heading a main clause: the root, and verbs joined to a main verb by "and"."""
    out: list[Any] = []
    for sent in doc.sents:
        stack = [sent.root]
        while stack:
            verb = stack.pop(0)
            if verb.pos_ == "VERB" and verb.tag_.startswith("VB") and not _quoted(verb):
                out.append(verb)
            stack += [c for c in verb.children if c.dep_ == "conj" and c.pos_ in ("VERB", "AUX")]
    return out


def _quoted(token: Any) -> bool:
    """Inside quotation marks: someone's words, not the sentence's fact."""
    before = token.doc[: token.i].text
    return before.count('"') % 2 == 1 or before.count("\u201c") > before.count("\u201d")


def _governs(verb: Any, token: Any) -> bool:
    """``token`` hangs below ``verb`` without crossing into another clause."""
    node = token
    for _ in range(12):
        if node.head.i == node.i:
            return False
        if node.head == verb:
            return node.dep_ not in _CLAUSE_DEPS
        if node.dep_ in _CLAUSE_DEPS:
            return False
        node = node.head
    return False


def _is_year(token: Any) -> bool:
    return token.like_num and bool(_YEAR.fullmatch(token.text))


def _timestamp(verb: Any, obj: Any) -> str | None:
    """The date ``verb`` governs in its own clause outside its object ``obj`` (the season of
    "replacement for the 2017 season" dates the replacement, not the announcement), or None
    (none, or two without "from"). A date entity, or a bare year after a preposition (the
    small parser misses "From 2013"). "In 1910" right after the object is the verb's even
    when the parser hangs it on the object ("moved to Saint Paul in 1910")."""
    doc = verb.doc
    found = [(e.root, e.text) for e in doc.ents if e.label_ == "DATE"]
    found += [(t, t.text) for t in doc if not t.ent_type_ and _is_year(t) and t.dep_ == "pobj"]
    inside = {t.i for t in obj.subtree}
    dates = [
        (r, text) for r, text in found
        if _misattached(r, obj)
        or (
            r.i not in inside and _governs(verb, r) and _dates_the_event(verb, r)
            and not _verb_between(verb, r)
        )
    ]  # fmt: skip
    if not dates and verb.dep_ == "conj" and verb.head.i < verb.i:
        # "In 2023, the Nuggets reached the Finals and defeated the Heat": the date before
        # the first verb dates the verbs joined to it
        dates = [(r, t) for r, t in found if r.i < verb.head.i and _governs(verb.head, r)]
    starts = [(root, text) for root, text in dates if root.head.lower_ in _START_PREPS]
    if len(starts) == 1:
        return _date_value(*starts[0])
    values = {v for v in (_date_value(*d) for d in dates) if v is not None}
    # "at the 2008 Macworld conference on January 15, 2008": one date, said twice
    precise = max(values, key=len, default=None)
    return precise if precise and all(precise.startswith(v) for v in values) else None


def _date_mentions(doc: Any) -> list[Any]:
    """Tokens that say when: a year, a decade ("the 1990s"), a season ("2002–03"), a war."""
    found = [
        t for t in doc
        if _YEAR_OR_DECADE.fullmatch(t.text) and t.ent_type_ not in _AMOUNTS | {"CARDINAL"}
    ]  # fmt: skip
    return found + [e.root for e in doc.ents if e.label_ == "EVENT" and _WAR.search(e.text)]


def _dates_the_clause(verb: Any, obj: Any, token: Any) -> bool:
    """``token`` (a date mention) says when ``verb``'s event happened: it hangs below the
    verb in its own clause, not inside an apposition ("Dune: Part Two, a sequel to the 2021
    film"); a year that describes a noun ("the 2024 film", "Brawn's 2009 drivers") only when
    that noun follows a preposition ("in the 2024 film Thunderbolts", "for the 2012–13
    season"), not an "of" on the verb itself; inside the object, only below "in" / "on" /
    "during" ("the role of Yelena Belova in the 2025 film"; not "the Homeland Security Act of
    2002")."""
    path = []
    node = token
    while node != verb:
        # an infinitive carries the verb's own event ("was invited to attend X in 2016")
        if node.head.i == node.i or (
            node.dep_ in _CLAUSE_DEPS and node.dep_ != "xcomp" and not _sets_the_time(node, verb)
        ):
            return False
        path.append(node)
        node = node.head
    if any(n.dep_ == "appos" for n in path):
        return False
    if token.dep_ in _NOUN_MODIFIERS and not _MONTHS.fullmatch(token.head.text):
        phrase = token.head
        while phrase.dep_ in _NOUN_MODIFIERS and phrase.head.i != phrase.i:
            phrase = phrase.head  # "the 2024 film Thunderbolts": the phrase's head noun
        # "Of Brawn's 2009 drivers, Button signed ...": a partitive on the verb names a group;
        # "over the course of the 2016 NBA draft" dates the event, and so does the object of
        # a clause that says when ("After finishing the 1996–97 season, ...")
        timing_object = phrase.dep_ == "dobj" and _sets_the_time(phrase.head, verb)
        if (phrase.dep_ != "pobj" and not timing_object) or (
            phrase.head.lower_ == "of" and phrase.head.head == verb
        ):
            return False
    if obj in path:
        return any(n.dep_ == "prep" and n.lower_ in _WHEN_PREPS for n in path)
    return True


def _sets_the_time(clause: Any, verb: Any) -> bool:
    """``clause`` tells when ``verb``'s event happened, so a date inside it dates the fact
    too: a participle or infinitive on the verb ("..., graduating in 1986", "Entering the
    2015 NBA draft, ..."), a clause opened by "after" / "when" / "by the time" ("By the time
    the company went public in 1990, ..."), a gerund after such a preposition ("After
    finishing the 1996–97 season, ..."), or a clause naming the period of a "during" ("during
    the year ended 31 March 2022"). A clause with its own subject and no such word ("whilst
    X moved ... for 2010") is another event."""
    head = clause.head
    if clause.dep_ == "acl":
        return head.dep_ == "pobj" and head.head.lower_ in _WHEN_PREPS
    if clause.dep_ == "pcomp":
        return head.dep_ == "prep" and head.head == verb and head.lower_ in _TIME_WORDS
    if clause.dep_ not in ("advcl", "ccomp") or head != verb:
        return False
    opened = [c for c in clause.children if c.i < clause.i]
    if any(c.dep_ in ("mark", "advmod") and c.lower_ in _TIME_WORDS for c in opened) or any(
        c.dep_ == "prep" and c.lower_ == "by" and any(g.lower_ == "time" for g in c.children)
        for c in opened
    ):
        return True
    has_subject = any(c.dep_ in ("nsubj", "nsubjpass") for c in clause.children)
    return not has_subject and clause.tag_ in ("VBG", "VBN", "VB")


def _dated_unwritably(verb: Any, obj: Any, objects: list[str]) -> bool:
    """The verb's own clause dates its fact with words no single timestamp can write ("from
    the 1940s to 2002", "in 2016, 2022 and 2023", "until her retirement in 1970", "for the
    2012–13 season", "during World War II"): written undated, the fact would read as
    timeless, so it is not written at all (:func:`_dates_the_clause` says which mentions
    count; a date in the object's own words, "won the 2019 title", does not). For a verb
    joined to an earlier one, so does a date the first verb governs before it ("In the 1990s,
    X grew and bought ...")."""
    first = verb.head if verb.dep_ == "conj" and verb.head.i < verb.i else None
    for token in _date_mentions(verb.doc):
        if any(token.text in written for written in objects):
            continue
        if _dates_the_clause(verb, obj, token) or (
            first is not None and token.i < first.i and _dates_the_clause(first, obj, token)
        ):
            return True
    return False


def _verb_between(verb: Any, date: Any) -> bool:
    """Another clause's verb stands between ``verb`` and ``date``: the parse that hangs the
    date on ``verb`` is likely wrong ("moved to Saint Paul in 1910, where it remained ...
    before moving to its current headquarters ... in 1962"). "following" used as a
    preposition is no clause."""
    low, high = sorted((verb.i, date.i))
    return any(t.pos_ == "VERB" and t.dep_ in _CLAUSE_DEPS for t in verb.doc[low + 1 : high])


def _misattached(date: Any, obj: Any) -> bool:
    """A date hanging from the object through "in" / "on" / "during" (a prepositional
    phrase the small parser attached to the nearest noun)."""
    prep = date.head
    return date.dep_ == "pobj" and prep.lower_ in _WHEN_PREPS and prep.head == obj


def _dates_the_event(verb: Any, root: Any) -> bool:
    """The date says when the verb's event happened or began ("in 2019", "on 5 May", "from
    2004"), not a bound ("until her retirement in 1970", "prior to the 2022 Grand Prix")."""
    node = root
    while node.head != verb and node.head.i != node.i:
        if node.dep_ == "pobj" and node.head.lower_ not in _EVENT_PREPS:
            return False
        node = node.head
    return node.dep_ != "prep" or node.lower_ in _WHEN_PREPS


def _date_value(root: Any, text: str) -> str | None:
    """A date phrase's timestamp; for a period after "from" / "since", its start."""
    value = timestamp_of(text)
    if value is None and root.head.lower_ in _START_PREPS:
        value = timestamp_of(_RANGE.split(text)[0])
    return value


def _relation_head(verb: Any) -> list[Any]:
    """The verb with its auxiliaries and particle ("has been taken over")."""

    def auxiliaries(v: Any) -> list[Any]:
        return [c for c in v.children if c.dep_ in ("aux", "auxpass") and c.lower_ != "to"]

    parts = auxiliaries(verb)
    # "has been discontinued and replaced by"; a finite verb has its own tense ("does not
    # own ... and took over" is not "does took over")
    if not parts and verb.dep_ == "conj" and verb.tag_ not in _FINITE:
        parts = auxiliaries(verb.head)
    parts += [c for c in verb.children if c.dep_ == "prt"]
    return sorted([verb, *parts], key=lambda t: t.i)


def _objects(verb: Any) -> list[tuple[list[Any], Any]]:
    """(extra relation words, object token) pairs of ``verb``: its direct object or
    complement; without one, the objects of the first preposition after it ("starred in X",
    "was acquired by X"); for "agreed to buy X", the infinitive's object. A verb with a
    direct object takes no prepositional object:
    "performed cover songs under the name X" is not "performed X". Two direct objects are a
    misparse."""
    direct = [c for c in verb.children if c.dep_ in ("dobj", "attr", "oprd")]
    if len(direct) > 1 or verb.lemma_ == "be":
        return []
    infinitive = [
        x for x in verb.children
        if x.dep_ == "xcomp" and x.tag_ == "VB" and x.i > verb.i
        and any(c.dep_ == "aux" and c.lower_ == "to" for c in x.children)
    ]  # fmt: skip
    if infinitive and not direct:  # "agreed to buy X": the relation is "agreed to buy"
        x = infinitive[0]
        words = [c for c in x.children if (c.dep_ == "aux" and c.lower_ == "to") or c.dep_ == "prt"]
        return [([*words, x, *extra], obj) for extra, obj in _objects(x)]
    after = verb.doc[verb.i + 1 : min([c.i for c in direct] or [len(verb.doc)])]
    if any(t.ent_type_ == "ORDINAL" or _ORDINAL.match(t.text) for t in after):
        return []  # "finished 2023 third in the championship": the rank is the fact
    preps = [c for c in verb.children if c.dep_ in ("prep", "agent") and c.i > verb.i]
    if direct:
        # "accused Sony of not promoting", "described X as unacceptable", "charged X with",
        # "asked the court to free her", "led the Dolphins to five titles", "credited Pugh for
        # being terrific", "ranked Cisco at number four", "donated $250k to X": the verb's
        # meaning needs the phrase after its object
        needs = ("of", "as", "with", *_SECOND_COMPLEMENT.get(verb.lemma_, ()))
        if any(p.lower_ in needs and p.i > direct[0].i for p in preps) or any(
            c.dep_ in ("xcomp", "ccomp") and c.i > direct[0].i for c in verb.children
        ):
            return []
        return [([], direct[0])]
    if verb.lemma_ == "have":
        return []
    if not preps or preps[0].lower_ not in _OBJECT_PREPS:
        return []  # only the first: "is headed by X with the assistance of Y"
    if any(c.dep_ == "ccomp" for c in verb.children):
        return []  # "allows Intel Macs to dual-boot Windows": the object is in the clause
    if preps[0].dep_ == "agent" and any(p.lower_ == "as" for p in preps[1:]):
        return []  # "was named by X as an honoree of Y": who named is not the fact
    objects = [g for g in preps[0].children if g.dep_ == "pobj"]
    first = next((t for t in verb.doc[preps[0].i + 1 :] if t.pos_ != "DET"), None)
    if first is not None and first.lower_ in _LINK_NOUNS:
        return []  # "in excess of 115 points", "as the result of"
    if any(p.lower_ == "as" for p in preps[1:]):
        return []  # "referred to the U.S. as "the nation"": the meaning is in the "as"
    return [([preps[0]], g) for g in objects]


def _coordinated(verb: Any) -> bool:
    """A joined verb has its "and" / "or" (on it or on the verb it joins) or a comma before
    it."""
    if any(c.dep_ == "cc" for c in (*verb.children, *verb.head.children)):
        return True
    return any(t.text in (",", ";") for t in verb.doc[verb.head.i + 1 : verb.i])


def _words_between(verb: Any, relation: list[Any], obj: Any) -> list[Any]:
    """The verb's own words the relation would skip between it and its object: "went
    *public* with", "has grown *increasingly popular* in", "filed to *trademark*" (an
    adjective, a verb, an adverb of such an adjective). Nothing when a noun or a number
    stands there (that is not the relation's to say)."""
    kept = {t.i for t in relation}
    start = obj.left_edge.i if obj.left_edge.i > verb.i else obj.i
    gap = [
        t for t in verb.doc[verb.i + 1 : start]
        if t.i not in kept and not t.is_punct and t.pos_ != "DET"
    ]  # fmt: skip
    if any(t.pos_ in ("NOUN", "PROPN", "NUM", "PRON") for t in gap):
        return []
    content = [t for t in gap if t.pos_ in ("ADJ", "VERB", "PART") or t.lower_ == "to"]
    content += [t for t in gap if t.pos_ == "ADV" and t.head in content]
    return content


def _conjuncts(token: Any) -> list[Any]:
    """``token`` and the names joined to it by "and"; none when a joined phrase is no name
    of its own ("the Working Families and the Democratic parties' nominations")."""
    out = [token]
    for _ in range(6):
        nxt = [c for c in out[-1].children if c.dep_ == "conj"]
        if not nxt:
            break
        out.append(nxt[0])
    if len(out) > 1 and any(t.pos_ != "PROPN" for t in out):
        return []
    # "Immigration and Naturalization Service": one name the parser split in two
    spans = {t.i: (e.start, e.end) for e in token.doc.ents for t in e}
    if any(spans.get(a.i, a.i) == spans.get(b.i, b.i) for a, b in itertools.pairwise(out)):
        return []
    return out


def _members(obj: Any) -> list[Any]:
    """The objects a verb's object stands for: itself and the names joined to it, also where
    the parser hangs the list on an apposition: "acquired the following companies: Valtix,
    Lightspin, and Armorblox" (the names), "acquired CloudCherry, a ... company, and Voicea,
    an ... company" (the name after the first one's description)."""
    names = [c for c in obj.children if c.dep_ == "appos" and c.pos_ == "PROPN"]
    if obj.pos_ == "NOUN" and len(names) == 1 and len(_conjuncts(names[0])) > 1:
        return _conjuncts(names[0])
    described = [c for c in obj.children if c.dep_ == "appos" and c.pos_ == "NOUN"]
    if obj.pos_ == "PROPN" and len(described) == 1:
        joined = [c for c in described[0].children if c.dep_ == "conj" and c.pos_ == "PROPN"]
        if len(joined) == 1 and len(_conjuncts(obj)) == 1:
            return [obj, *_conjuncts(joined[0])]
    return _conjuncts(obj)


def _unasserted(verb: Any) -> bool:
    """The sentence does not assert the verb's fact: negated ("no longer"), hedged ("may",
    "would", "reportedly"), or attributed to a source ("According to Global Witness, ...")."""
    if any(t.dep_ == "neg" or t.lower_ in _HEDGES for t in _relation_head(verb)):
        return True
    if any(c.lower_ == "according" for c in verb.children):
        return True
    before = [t for c in verb.children if c.i < verb.i for t in c.subtree]
    adverbs = [c for c in verb.children if c.dep_ == "advmod"]
    return any(t.dep_ == "neg" or t.lower_ in _NEGATIONS for t in before) or any(
        t.lower_ in _HEDGING_ADVERBS for t in [*before, *adverbs]
    )


def _incomplete(token: Any) -> bool:
    """An object whose meaning goes on in a clause: an infinitive ("the first driver to win")
    or a first / best / only one described by a clause ("the first German driver driving a
    German vehicle to win ..."); cut before it, the fact is wrong."""
    clauses = [c for c in token.children if c.dep_ in ("acl", "relcl")]
    ranked = any(
        t.ent_type_ == "ORDINAL" or t.tag_ == "JJS" or t.lower_ == "only" for t in token.lefts
    )
    if token.lower_ == "one" and not ranked:  # "one of the first teams ... to sell"
        ranked = any(
            t.ent_type_ == "ORDINAL" or t.tag_ == "JJS" or t.lower_ == "only" for t in token.subtree
        )
        # the parser often hangs the infinitive on the verb
        clauses += [c for c in token.head.children if c.dep_ == "advcl" and c.i > token.i]
    return (ranked and bool(clauses)) or any(
        g.lower_ == "to" and g.dep_ == "aux" for c in clauses for g in c.children
    )


def _qualified_count(token: Any) -> bool:
    """A count ("9 races", "71 points") of a verb that says where or when it counted ("in the
    opening two games", "during this first period", "post-trade"): the number alone misleads.
    """
    if token.pos_ != "NOUN" or not any(c.dep_ == "nummod" for c in token.children):
        return False
    verb = token.head if token.dep_ != "pobj" else token.head.head
    return any(
        (c.dep_ == "prep" and c.i != token.head.i and not _holds_a_date(c)) or c.dep_ == "npadvmod"
        for c in verb.children
    )


def _holds_a_date(prep: Any) -> bool:
    """The phrase names a date: a year, a month, a date entity with a figure ("of the Year"
    in an award's name is no date)."""
    return any(
        _is_year(t) or (t.ent_type_ == "DATE" and (t.like_num or _MONTHS.fullmatch(t.text)))
        for t in prep.subtree
    )


def _object_text(token: Any, subject: str) -> str:
    """The object's words, or "" when they are no fact's object (see the module docstring).
    A common noun with a name beside it stands for that name ("a US affiliate, Barclays
    Bank of California")."""
    names = [c for c in token.children if c.dep_ == "appos" and c.pos_ == "PROPN"]
    if token.pos_ == "NOUN" and len(names) == 1:
        between = token.doc[token.i + 1 : names[0].i]
        if not any(c.dep_ in ("det", "poss") for c in token.children) and not any(
            t.text in (",", ":", "–", "—") for t in between
        ):
            return ""  # "filed to trademark "Model Y"": a verb the parser read as a noun
        token = names[0]
    if _qualified_count(token):
        return ""
    tokens = _name_tokens(token, complements=True)
    listed = token.dep_ == "conj"
    if not _well_formed(tokens, _MAX_OBJECT_WORDS, listed) or not _names_something(tokens):
        return ""
    if _incomplete(token) or any(t.ent_type_ in ("DATE", "TIME") or _is_year(t) for t in tokens):
        return ""
    if all(t.pos_ in ("NUM", "PUNCT", "SYM") and t.ent_type_ not in _AMOUNTS for t in tokens):
        return ""  # "won 44 of them": a bare number says nothing without what it counts
    if _SCORE.search(text := _words(tokens)):
        return ""  # "won 120–107", "defeated X 4–1": a score, not a thing
    if all(t.ent_type_ == "ORDINAL" or t.is_punct for t in tokens):
        return ""  # "finished 6th": in what?
    if all(t.ent_type_ in _AMOUNTS or t.is_punct for t in tokens) and any(
        c.dep_ == "prep" and c.i > token.i for c in token.head.children
    ):
        return ""  # "made $35.4 billion in sales": the amount of what is said after it
    joined = [t for t in tokens if t.lower_ in ("and", "or")]
    if any(t.i == 0 or t.nbor(-1).pos_ != "PROPN" or t.nbor().pos_ != "PROPN" for t in joined):
        return ""  # "Game 1 and home-court advantage": two things, not one name
    lead = next((t for t in tokens if t.dep_ != "det"), None)
    if lead is not None and lead.dep_ == "poss" and lead.pos_ == "NOUN":
        return ""  # "the team's jersey sponsor": whose team only the page says
    return "" if text == subject else text


# What an article about one kind of thing calls it without its name: "the company" in an
# article whose first sentence says it is a conglomerate.
_BACK_NOUNS: dict[str, frozenset[str]] = {
    "company": frozenset({"company", "corporation", "conglomerate", "firm", "bank", "label"}),
    "team": frozenset({"team", "club", "franchise"}),
    "drug": frozenset({"medication", "drug"}),
    "agency": frozenset({"agency", "department", "bureau"}),
}


@dataclass(frozen=True)
class TitleReferent:
    """How sentences of one article name its own entity without the name: "he" / "she" for
    a person (the first sentence gives a birth: "(born 3 January 1996)"), "the <noun>" for
    what the first sentence says the entity is ("The Denver Nuggets are an American
    professional basketball team": "the team", "the club")."""

    title: str
    person: bool
    nouns: frozenset[str]

    @classmethod
    def of(cls, title: str, first_sentence: str) -> TitleReferent:
        """The referent of an article from its title and first sentence."""
        doc = parse(first_sentence)
        person = "(born " in first_sentence[:200]
        nouns: set[str] = set()
        root = next(iter(doc.sents)).root if len(doc) else None
        if root is not None and root.lemma_ == "be" and not person:
            for attr in (c for c in root.children if c.dep_ == "attr"):
                head = attr.lemma_.lower()
                nouns.add(head)
                nouns.update(*(words for words in _BACK_NOUNS.values() if head in words))
        return cls(title, person, frozenset(nouns))

    def names(self, subject: Any, doc: Any, previous: Any | None) -> bool:
        """The subject token ``subject`` stands for the article's entity: a pronoun or "the
        <noun>" the article uses for it, and neither the sentence ``doc`` nor the one before
        it in its paragraph (``previous``) names someone (for "he" / "she") or something
        (for "the company") else."""
        title_words = set(self.title.split())
        if subject.lower_ in ("he", "she"):
            people = [e for d in (doc, previous) if d is not None for e in d.ents]
            return self.person and not any(
                e.label_ == "PERSON" and not set(e.text.split()) <= title_words for e in people
            )
        if subject.pos_ != "NOUN" or subject.lemma_.lower() not in self.nouns:
            return False
        if [c.lower_ for c in subject.children] != ["the"]:
            return False
        # Any other name may be the company meant: the recognizer's labels are too unreliable
        # ("Kobalt" a place, "AWAL" nothing) to tell companies from the rest.
        others = [*(previous or []), *(t for t in doc if t.i < subject.i)]
        return not any(
            t.pos_ == "PROPN" and t.text not in title_words and t.ent_type_ not in _NOT_NAMES
            for t in others
        )


def _subject_text(subj: Any, doc: Any, referent: TitleReferent | None, previous: Any | None) -> str:
    """The subject's words, or "" when they name no one and nothing in particular (see the
    module docstring)."""
    if any(c.dep_ == "conj" for c in subj.children):
        return ""  # "Jokić and Aaron Gordon carried the Nuggets"
    if referent is not None and referent.names(subj, doc, previous):
        return referent.title
    if subj.pos_ == "PRON" or any(c.dep_ == "appos" for c in subj.children):
        return ""  # "In the 2015 movie, Bloodsucking Bastards, Pascal portrayed": misparse
    if subj.pos_ == "NOUN" and any(c.dep_ == "poss" for c in subj.children):
        return ""  # "Sony Music Entertainment LLC's revenue": an attribute, not a thing
    tokens = _name_tokens(subj)
    named = [t for t in tokens if t.lower_ not in _ARTICLES]
    if named and (
        named[0].lower_ in _QUANTIFIERS or (len(named) == 1 and named[0].lower_ in _INSTITUTIONS)
    ):
        return ""  # "Most Barclays branches", "the Court"
    title = referent.title if referent is not None else ""
    if not (_well_formed(tokens, _MAX_SUBJECT_WORDS) and _names_a_thing(tokens, title)):
        return ""
    return _words(tokens)


def facts_of(
    doc: Any, referent: TitleReferent | None = None, previous: Any | None = None
) -> list[ParsedFact]:
    """The facts of a parsed sentence, in sentence order (see the module docstring). With
    the article's ``referent`` (and the sentence before, ``previous``), "he" / "the company"
    as a subject is the article's title where :meth:`TitleReferent.names` says so."""
    facts: list[ParsedFact] = []
    text = doc.text.rstrip()
    if not text.endswith((".", "!", '"', "\u201d", ")")) or _CUT_AT_ABBREVIATION.search(text):
        return facts  # a sentence cut off by the splitter or the article's markup
    for verb in _main_verbs(doc):
        if _unasserted(verb) or verb.lemma_ in _LISTING_VERBS:
            continue
        # A joined verb far from the verb whose subject it would share, or joined by no "and"
        # or comma ("agreed to buy business intelligence startup X"), is often a misparse.
        if verb.dep_ == "conj" and (
            verb.i - verb.head.i > _MAX_JOIN_DISTANCE or not _coordinated(verb)
        ):
            continue
        subj = _subject(verb)
        subject = _subject_text(subj, doc, referent, previous) if subj is not None else ""
        if not subject:
            continue
        head = _relation_head(verb)
        for extra, obj in _objects(verb):
            words = head + extra
            words += _words_between(verb, words, obj)
            relation = " ".join(
                "".join(t.text_with_ws for t in sorted(words, key=lambda t: t.i)).split()
            )
            timestamp = _timestamp(verb, obj)
            objects = [_object_text(token, subject) for token in _members(obj)]
            if len(objects) > 1 and not all(objects):
                continue  # a list the parser split where it should not have
            if timestamp is None and _dated_unwritably(verb, obj, objects):
                continue
            facts += [ParsedFact(subject, relation, o, timestamp) for o in objects if o]
    return facts
