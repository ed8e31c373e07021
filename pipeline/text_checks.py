"""Predicates over the text of generated items: is an answer in its evidence, does a
question refer back to a text the reader has not got, lean on its answer or give it away,
which words carry its content, does a field hold a URL or a date.

Grounding is lexical: the normalized answer (lowercase, accents, punctuation and articles
stripped, number words, thousands separators, dashes, quotes, possessives and acronym dots
normalized, a minus sign kept) must occur in the normalized evidence, as a whole or part by part
for a list answer ("X and Y").

Topic, give-away and dialogue-grounding checks compare *content words*: normalized tokens that
are numbers, or at least three letters long and not a stopword / question word, with a light
plural strip; words match when equal or when they share a long prefix ("founded" ~ "founder").

Item validation (:mod:`pipeline.generate.validate` and each item kind's checks in its module)
and the temporal questions (:mod:`pipeline.temporal.phrasing`) use them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import date
from typing import TYPE_CHECKING

from pipeline.dates import MONTH_NAMES

if TYPE_CHECKING:  # runtime import would be circular (pipeline.generate imports this module)
    pass


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
MONTH_ALTERNATION = "|".join(name.lower() for name in MONTH_NAMES)  # a regex alternation
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
_DAY_MONTH = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)? ({MONTH_ALTERNATION})\b", re.IGNORECASE)


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


# "these tests", "this model": only a reader of the paragraph knows what is meant; so "the
# film" / "the production" with no name after it
_DEMONSTRATIVE = re.compile(
    r"(?i:\b(?:this|these)\b(?: \w+)?)|\b(?i:the (?:film|movie|production|series|show|album|"
    r"song|book|play|novel|episode))\b(?! (?:of |that |which |whose |[A-Z\"'0-9]))",
)
_PRONOUN = re.compile(r"\b(?:he|she|they|him|her|his|their|them|its|it)\b", re.IGNORECASE)
_NAME_WORD = re.compile(r"(?<=\s)[A-Z][\w'.-]*")


def dangling_reference(question: str) -> str | None:
    """The word of ``question`` that points at something it never names, or None: a
    demonstrative ("these tests"), a work named by its kind only ("in the film"), or a pronoun
    before any name ("When did he join Ferrari?"; "Which team did Russell join after he left
    Williams?" names him first)."""
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


def title_core(title: str) -> str:
    """The title without a disambiguator: "Mercury (planet)" -> "Mercury"."""
    return re.sub(r"\s*\([^)]*\)\s*$", "", title or "").strip()


# Words that rank the answer among others ("the main biomarker") or tie it to the moment of
# reading ("the current CEO", "his most recent film": the answer drifts as the article grows):
# a question may use one only where its evidence does. Lowercase only, so that titles ("The
# Last of Us") do not count.
_RANKING = re.compile(
    r"\b(?:main|only|first|last|largest|biggest|highest|lowest|most|least|best|worst|primary|"
    r"sole|oldest|youngest|earliest|latest|leading|top|recent|recently|current|currently|"
    r"newest|popular)\b"
)


def unstated_ranking(
    question: str, sources: Sequence[str], allowed: Collection[str] = frozenset()
) -> str:
    """Why the question ranks its answer or ties it to the present where no source does
    ("the most recent recognition", "the current status"), or "" (``allowed``: words the
    caller lets pass)."""
    said = " ".join(sources).lower()
    for m in _RANKING.finditer(question):
        if m.group(0) not in allowed and not re.search(rf"\b{m.group(0)}\b", said):
            return f"the question says {m.group(0)!r}, its evidence does not"
    return ""


def about_evidence(question: str, sources: Sequence[str], min_share: float) -> str:
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
    return unstated_ranking(question, sources)


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


# Words an organisation's initials skip ("Department of Homeland Security" -> DHS).
INITIALS_SKIP = frozenset({"of", "and", "the", "for", "on", "in", "de", "&"})
_INITIALS_ANSWER = re.compile(r"(?:the\s+)?((?:[A-Z]\.?){2,6})", re.IGNORECASE)


def abbreviates_question_words(question: str, answer: str) -> bool:
    """True when the answer is the initials of capitalized words in a row of the question
    ("What is the name of the United States Department of Homeland Security?" -> "DHS" or
    "U.S."): the question names what it asks for in full."""
    shape = _INITIALS_ANSWER.fullmatch(answer.strip())
    if shape is None or not shape.group(1).replace(".", "").isupper():
        return False
    letters = shape.group(1).replace(".", "")
    words = re.findall(r"[\w'\u2019.-]+|&", question)
    for start, first in enumerate(words):
        if not first[0].isupper():
            continue
        initials = ""
        for word in words[start:]:
            if initials and word.lower() in INITIALS_SKIP:
                continue
            if not word[0].isupper():
                break
            initials += word[0]
            if not letters.startswith(initials):
                break
            if initials == letters:
                return True
    return False


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
    if cited not in candidates or not turn_support(expert, candidates[cited], title, min_share):
        return cited
    words = content_words(expert)
    best, best_shared = cited, -1
    for idx, text in candidates.items():
        if idx == cited or turn_support(expert, text, title, min_share):
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


def turn_support(expert: str, sentence: str, title: str, min_share: float) -> str:
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


def is_latin(char: str) -> bool:
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
    name = MONTH_NAMES[int(month) - 1].lower()
    if not re.search(rf"\b{name[:3]}", text, re.IGNORECASE):
        return False
    return not day or re.search(rf"\b{int(day)}\b", text) is not None


_AS_OF = re.compile(r"\bas of\b[^,.;]*?\b(\d{4})\b", re.IGNORECASE)
_FIGURE = re.compile(r"\d[\d,.–-]*\d|\d")


def undated_figure(text: str, evidence: str) -> str:
    """The evidence dates its figures ("As of 2021, the company had approximately 95,000
    employees") and ``text`` repeats one without that year, so it reads as true today ("3M
    has approximately 95,000 employees"). Returns what the evidence says, or ""."""
    found = _AS_OF.search(evidence)
    if found is None or re.search(rf"\b{found.group(1)}\b", text):
        return ""
    year = found.group(1)
    figures = {f for f in _FIGURE.findall(evidence) if f != year}
    if not any(f in figures for f in _FIGURE.findall(text)):
        return ""
    return f"the evidence says {found.group(0)!r}"
