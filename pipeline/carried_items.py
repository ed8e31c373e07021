"""Whether an item carried to a new snapshot still fits its evidence sentence after an edit.

The labeler calls a sentence `unchanged` when the edit is small (similar enough, no value it
can see replaced), and the ledger carries the items resting on it. A small edit can still take
an item's answer away: the clause holding it deleted, a value renamed or updated in words the
labeler did not read as a replacement, a name that became one of a list. These functions say
why such an item (a QA pair, a dialogue turn, a quadruple) no longer fits (the ledger retires
it as ``answer_no_longer_fits``), or ""."""

from __future__ import annotations

import re

from pipeline.dates import iso_date
from pipeline.generate.answer_spans import answer_spans, list_part, name_part, range_part
from pipeline.text_checks import INITIALS_SKIP, is_grounded

# A "list" of more words than this is the parser joining clauses, not names.
_MAX_LIST_WORDS = 12
_YEAR = re.compile(r"^(\d{4})")


def qa_misfit(question: str, answer: str, old_sentence: str, new_sentence: str) -> str:
    """Why a QA answer that fit its evidence does not fit the edited sentence, or "": the edit
    took the answer out, or made it one member of a list, one end of a range or the end of a
    name, which the old sentence did not ("retain Fernando Alonso as one of their drivers" ->
    "retain Fernando Alonso and Lance Stroll as their drivers": "What driver will Aston Martin
    retain?" now has two answers)."""
    if not still_written(answer, new_sentence):
        return f"the edited evidence no longer holds {answer!r}"
    for part in (list_part, name_part, lambda a, s: range_part(a, s, question)):
        now = part(answer, new_sentence)
        if now and len(now.split()) <= _MAX_LIST_WORDS and not part(answer, old_sentence):
            return f"the edited evidence says {now!r}"
    return ""


def turn_misfit(expert: str, title: str, old_sentence: str, new_sentence: str) -> str:
    """Why a dialogue turn whose reply rested on its old sentence does not fit the edited one,
    or "": a name, date or number the reply states from the old sentence (an answer span of
    it) is gone from the new one ("The FDA expanded the approval in March 2024" after "In March
    2024, the FDA expanded ..." became "In the US semaglutide is indicated ...")."""
    gone = [
        span.text
        for span in answer_spans([0], [old_sentence], title)
        if still_written(span.text, expert) and not still_written(span.text, new_sentence)
    ]
    return f"the edited evidence no longer holds {', '.join(map(repr, gone))}" if gone else ""


def fact_misfit(timestamp: str | None, old_sentence: str, new_sentence: str) -> str:
    """Why a quadruple dated by its old sentence no longer fits the edited sentence, or "": the
    year of its timestamp is gone from it ("In May 2023, Pascal was cast ..." -> "In May,
    Pascal was cast ..."). Its object is not asked about: an object is a phrase, and edits
    reword phrases of facts that still hold ("president of Y Combinator" -> "president of YC",
    "garnered a nomination" -> "was nominated": 5 of the 6 such retirements on wikisnap)."""
    year = _YEAR.match(timestamp or "")
    if year and year[1] in old_sentence and year[1] not in new_sentence:
        return f"the edited evidence no longer gives {year[1]}"
    return ""


def still_written(text: str, sentence: str) -> bool:
    """``text`` is in the sentence: as a whole, spaced or cased otherwise ("25.6tbit" ->
    "25.6 Tbit", "NBCUniversal" -> "NBC Universal"), word for word with words between
    ("Florence Pugh" -> "Florence Rose Pugh"), as the same date ("December 13, 2022" -> "Dec
    13, 2022"), or as initials spelt out or a name cut to its initials ("AG" -> "Attorney
    General", "U.S. Environmental Protection Agency" -> "EPA")."""
    if is_grounded(text, sentence):
        return True

    def squashed(value: str) -> str:
        return re.sub(r"[\W_]+", "", value.casefold())

    if squashed(text) and squashed(text) in squashed(sentence):
        return True
    words = re.findall(r"\w+", sentence.casefold())
    wanted = re.findall(r"\w+", text.casefold())
    if wanted and all(w in words for w in wanted):
        return True
    return _same_date(text, sentence) or _same_initials(text, sentence)


def _same_date(text: str, sentence: str) -> bool:
    day = iso_date(text)
    if day is None or len(day) == 4:  # a bare year is is_grounded's
        return False
    tokens = re.findall(r"[A-Za-z]+\.?|\d+(?:st|nd|rd|th)?|,", sentence)
    return any(
        iso_date(" ".join(tokens[i : i + n]).replace(" ,", ",")) == day
        for n in (2, 3, 4)
        for i in range(len(tokens) - n + 1)
    )


def _initials(words: list[str]) -> str:
    return "".join(w[0] for w in words if w.lower() not in INITIALS_SKIP).upper()


def _same_initials(text: str, sentence: str) -> bool:
    """One side is 2-6 capitals and the other spells them out in words in a row."""
    short, long = text.replace(".", ""), sentence
    if not re.fullmatch(r"[A-Z]{2,6}", short):
        capitals = {t.replace(".", "") for t in sentence.split()}
        words = re.findall(r"[\w'-]+", text)
        return any(_initials(words[i:]) in capitals for i in range(len(words) - 1))
    words = re.findall(r"[\w'-]+|&", long)
    for start in range(len(words)):
        for end in range(start + 2, min(start + 12, len(words)) + 1):
            if words[end - 1].lower() in INITIALS_SKIP:
                continue
            got = _initials(words[start:end])
            if got == short:
                return True
            if not short.startswith(got):
                break
    return False
