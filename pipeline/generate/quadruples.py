"""Chronos-style knowledge quadruples (subject, relation, object, timestamp): the item, the
answer the model writes, the tasks, their parsing and the checks.

Two times per fact (bi-temporal): ``timestamp`` is the *valid time*, when the fact began or the
event happened, as the text itself dates it, and ``observed_at`` the *transaction time*, the
snapshot it was read from (always set). Timestamp precision follows the text and is never
padded: "YYYY-MM-DD" when the text names the day, "YYYY-MM" for a month, "YYYY" for a year
only, None when it gives no date. Padding "2024" to "2024-01-01" would invent a precision the
source does not have, and a downstream time filter can still compare prefixes.

Tasks: at the first snapshot (or for an article new to the workdir) one per selected
paragraph; later, the new and changed sentences of each paragraph, at most
``new_group_max_sentences`` per task. Each quadruple's type is its sentence's label.

Who writes them is ``generation.quadruple_source``: ``"llm"`` asks the model (one request
per task; a record without a ``timestamp`` key is read as null, as models drop null keys; any
other missing key rejects the record), ``"parse"`` reads them off the dependency parse
(:mod:`pipeline.generate.quadruple_parse`, no model; the offline profile's default: the
packaged 1.5B model's quadruples were right 12 times in 84). Both go through the same checks
(:class:`QuadrupleChecks`: ``ItemValidator.score_quadruple``); a fact already kept for the
article (:func:`quadruple_key`) is a duplicate.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from pipeline.config import GenerationConfig
from pipeline.dates import iso_date
from pipeline.generate.grammar_checks import generic_subject
from pipeline.generate.items import (
    FieldError,
    Reject,
    field_reject,
    field_value,
    index_field,
    make_item_id,
    response_reject,
    text_field,
)
from pipeline.generate.kinds import Batch, ItemGenerator, KindOutput, reject_of
from pipeline.generate.prompts import (
    AnswerModel,
    answer_schema,
    load_prompt,
    number_sentences,
    register_answer_models,
)
from pipeline.generate.quadruple_parse import PARSE_RULES, TitleReferent, facts_of, parser_id
from pipeline.generate.selection import CHANGED, NEW, Article, ArticleParagraph, is_statement
from pipeline.generate.validate import (
    Check,
    Verdict,
    evidence_checks,
    script_check,
    split_duplicates,
    url_check,
)
from pipeline.models.llm.base import LLMRequest, LLMResponse
from pipeline.syntax import BACK_NOUNS, RelationParser, parse
from pipeline.text_checks import (
    MONTH_ALTERNATION,
    contains_normalized,
    date_in_text,
    is_grounded,
    is_iso_timestamp,
    normalize_answer,
    title_core,
)


class QuadrupleAnswer(AnswerModel):
    """One (subject, relation, object, timestamp) fact and the sentence index it came from."""

    sentence: int
    subject: str
    relation: str
    object: str
    timestamp: str | None


class QuadruplesAnswer(AnswerModel):
    """Answer of ``quadruples``."""

    quadruples: list[QuadrupleAnswer]


register_answer_models({"quadruples": QuadruplesAnswer})


@dataclass
class Quadruple:
    """A (subject, relation, object, timestamp) fact: ``timestamp`` is when it became true (as
    the text dates it, or None), ``observed_at`` the snapshot it was read from."""

    page_id: int
    title: str
    snapshot: str
    subject: str
    relation: str
    object: str
    timestamp: str | None
    evidence_sent_idx: list[int]
    evidence_text: str
    type: str
    prompt_hash: str
    generator: str
    observed_at: str = ""
    item_id: str = ""

    def __post_init__(self) -> None:
        if not self.observed_at:
            self.observed_at = self.snapshot
        if not self.item_id:
            self.item_id = make_item_id(
                "quadruple",
                self.page_id,
                self.snapshot,
                self.evidence_sent_idx,
                [self.subject, self.relation, self.object, self.timestamp],
            )

    def row(self) -> dict[str, Any]:
        """The Parquet row."""
        return asdict(self)


_NULLS = {"", "null", "none", "n/a", "na", "unknown", "not given", "no date", "-"}


def normalize_timestamp(value: Any) -> str | None:
    """ISO ``YYYY`` / ``YYYY-MM`` / ``YYYY-MM-DD`` (the precision given) from what a model
    wrote: "2024-3-5", "5 March 2024", "March 5, 2024", "March 2024", 2024, an ISO datetime...
    Null-like values give None; anything else comes back as the stripped text, which
    validation then rejects as ``bad_timestamp``. Raises :class:`FieldError` for non-scalars."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise FieldError("wrong_type", f"'timestamp' = {value!r} is not a date")
    if isinstance(value, int | float):
        value = str(int(value)) if float(value).is_integer() else str(value)
    if " ".join(value.strip().lower().split()) in _NULLS:
        return None
    found = iso_date(value)
    if found is not None:
        return found
    try:  # last resort: a full ISO datetime with zone, e.g. "2024-02-13T00:00:00+00:00"
        return datetime.fromisoformat(value.strip().replace("Z", "+00:00")).date().isoformat()
    except ValueError:
        return value.strip()


@dataclass(eq=False)
class QuadrupleTask:
    """The sentences to read quadruples from, and the request that asks the model for them
    (None: they are read off the parse)."""

    article: Article
    offered: tuple[int, ...]
    request: LLMRequest | None


def quadruple_task(
    article: Article, sent_idx: tuple[int, ...], cfg: GenerationConfig
) -> QuadrupleTask:
    """The quadruples task of the given sentences of an article: a ``quadruples`` request,
    or none when ``cfg.quadruple_source`` is ``"parse"``."""
    if cfg.quadruple_source == "parse":
        return QuadrupleTask(article, sent_idx, None)
    request = load_prompt("quadruples").request(
        schema=answer_schema(
            "quadruples", indices=sent_idx, max_items=cfg.quadruples_per_sentence * len(sent_idx)
        ),
        title=article.title,
        sentences=number_sentences(sent_idx, [article.texts[i] for i in sent_idx]),
        max_per_sentence=cfg.quadruples_per_sentence,
    )
    return QuadrupleTask(article, sent_idx, request)


def initial_quadruple_tasks(
    article: Article, paragraphs: list[ArticleParagraph], cfg: GenerationConfig
) -> list[QuadrupleTask]:
    """An article's first quadruple tasks: one per selected paragraph; read off the parse,
    which costs no model time, one per paragraph of the article (its statements)."""
    if cfg.quadruple_source == "parse":
        paragraphs = article.paragraphs()
    return [quadruple_task(article, para.sent_idx, cfg) for para in paragraphs]


def update_sentence_chunks(article: Article, max_sentences: int) -> list[tuple[int, ...]]:
    """The new and changed statements of each paragraph, in chunks of ``max_sentences``."""
    by_para: dict[int, list[int]] = {}
    for i in range(article.n_sentences):
        if article.labels.get(i) in (NEW, CHANGED) and is_statement(article.texts[i]):
            by_para.setdefault(article.para_of[i], []).append(i)
    return [
        tuple(idx[start : start + max_sentences])
        for idx in by_para.values()
        for start in range(0, len(idx), max_sentences)
    ]


def _quadruple(
    article: Article,
    idx: int,
    fact: tuple[str, str, str, str | None],
    prompt_hash: str,
    generator: str,
) -> Quadruple:
    """The quadruple (subject, relation, object, timestamp) ``fact`` of sentence ``idx``
    (an index outside the article keeps no evidence and no label: validation rejects it)."""
    in_range = 0 <= idx < article.n_sentences
    subject, relation, obj, timestamp = fact
    return Quadruple(
        page_id=article.page_id,
        title=article.title,
        snapshot=article.snapshot,
        subject=subject,
        relation=relation,
        object=obj,
        timestamp=timestamp,
        evidence_sent_idx=[idx],
        evidence_text=article.texts[idx] if in_range else "",
        type=article.label_of(idx) if in_range else "unlabeled",
        prompt_hash=prompt_hash,
        generator=generator,
    )


def parse_quadruples(
    task: QuadrupleTask, response: LLMResponse, generator: str
) -> tuple[list[Quadruple], list[Reject]]:
    """Candidate quadruples (validated later) and rejects of one response; a bad record is
    rejected alone, the others are kept."""
    article = task.article
    prompt_hash = task.request.prompt_hash
    where = ("quadruple", "quadruples", article.page_id, article.snapshot)
    rejected = response_reject(*where, response, prompt_hash)
    if rejected is not None:
        return [], [rejected]
    parsed = response.parsed or {}
    try:
        records = field_value(parsed, "quadruples")
        if not isinstance(records, list):
            raise FieldError("wrong_type", "'quadruples' is not a list")
    except FieldError as err:
        return [], [field_reject(*where, response, prompt_hash, err, parsed)]
    quads: list[Quadruple] = []
    rejects: list[Reject] = []
    for record in records:
        try:
            if not isinstance(record, dict):
                raise FieldError("wrong_type", f"quadruple {record!r} is not an object")
            idx = index_field(record, "sentence")
            # An omitted timestamp says the same as null: the text gives no date.
            raw_ts = record.get("timestamp", record.get("Timestamp"))
            timestamp = normalize_timestamp(raw_ts)
            fact = (text_field(record, "subject"), text_field(record, "relation"),
                    text_field(record, "object"), timestamp)  # fmt: skip
            quads.append(_quadruple(article, idx, fact, prompt_hash, generator))
        except FieldError as err:
            rejects.append(field_reject(*where, response, prompt_hash, err, record))
    return quads, rejects


def parsed_quadruples(task: QuadrupleTask, per_sentence: int) -> list[Quadruple]:
    """The quadruples the parse reads off the task's sentences, at most ``per_sentence`` each
    ("he" / "the company" is the article's entity where :class:`TitleReferent` says so)."""
    article = task.article
    referent = TitleReferent.of(article.title, article.texts[0] if article.texts else "")
    generator = parser_id()
    quads: list[Quadruple] = []
    for idx in task.offered:
        doc = parse(article.texts[idx])
        same_paragraph = idx > 0 and article.para_of[idx - 1] == article.para_of[idx]
        previous = parse(article.texts[idx - 1]) if same_paragraph else None
        for f in facts_of(doc, referent, previous)[:per_sentence]:
            fact = (f.subject, f.relation, f.object, f.timestamp)
            quads.append(_quadruple(article, idx, fact, PARSE_RULES, generator))
    return quads


# An object that is only a date ("January 2008", "2014", "8 May 2024") repeats the timestamp.
_DATE_ONLY = re.compile(
    rf"^(?:(?:in|on|since|by|until|to|(?:to )?at (?:least|most)|as (?:early|late) as) )?"
    rf"(?:\d{{1,2}} )?(?:(?:{MONTH_ALTERNATION})\.? )?(?:\d{{1,2}}, )?"
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


def _names_title(subject: str, title: str) -> bool:
    """The subject is the article's entity: the title, a part of it ("Meta" for "Meta
    Platforms"), a phrase holding it ("Meta Platforms, Inc.") or a longer form of the name
    ("José Pedro Balmaceda Pascal" for "Pedro Pascal")."""
    s = normalize_answer(subject)
    if not s:
        return False
    for name in {normalize_answer(title), normalize_answer(title_core(title))} - {""}:
        if f" {s} " in f" {name} " or f" {name} " in f" {s} ":
            return True
        rest = iter(s.split())  # the title's words in order, others between them
        if len(name.split()) > 1 and all(w in rest for w in name.split()):
            return True
    return False


def _names_title_by_its_head(sentence: str, title: str) -> bool:
    """The sentence calls the article's entity by the last word of its name, as articles do
    after the first mention ("James filed", "Pascal was raised", "the Model Y")."""
    words = title_core(title).split()
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


class QuadrupleChecks:
    """The checks of a quadruple: ``score_quadruple`` of
    :class:`pipeline.generate.validator.ItemValidator`, which holds these limits (``grammar``:
    the dependency-parse check, None when off)."""

    relation_max_words: int
    object_max_words: int
    grammar: RelationParser | None
    question_grammar: bool

    def score_quadruple(
        self, quad: Quadruple, *, n_sentences: int, allowed: Collection[int] | None = None
    ) -> Verdict:
        """Checks of one quadruple; ``allowed`` = the sentence indices its prompt offered."""
        texts = [("subject", quad.subject), ("relation", quad.relation), ("object", quad.object)]
        empty = [name for name, value in texts if not value.strip()]
        checks = [Check("empty_field", not empty, ", ".join(empty))]
        checks.append(url_check(texts, [("evidence", quad.evidence_text)]))
        checks.append(script_check(texts, [("evidence", quad.evidence_text)]))
        checks += evidence_checks(quad.evidence_sent_idx, n_sentences, allowed)
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
        if self.question_grammar:
            generic = generic_subject(quad.subject, quad.title)
            checks.append(Check("generic_subject", not generic, generic))
        return Verdict(tuple(checks))


def quadruple_key(quad: Quadruple) -> tuple[str, str, str, str | None]:
    """Duplicate key of a quadruple: normalized subject, relation, object and timestamp."""
    return (
        normalize_answer(quad.subject),
        normalize_answer(quad.relation),
        normalize_answer(quad.object),
        quad.timestamp,
    )


def run_quadruples(tasks: list[QuadrupleTask], batch: Batch) -> KindOutput:
    """Ask every quadruple task of a shard (or read it off the parse), keep the facts that
    pass every check, then drop the ones already kept for the same article."""
    kept: list[Quadruple] = []
    rejects: list[Reject] = []
    raw_of: dict[int, str | None] = {}  # id(quadruple) -> the output it came from, for duplicates
    asked = [t for t in tasks if t.request is not None]
    answers = dict(zip(map(id, asked), batch.complete([t.request for t in asked]), strict=True))
    for task in tasks:
        response = answers.get(id(task))
        if response is None:
            found = parsed_quadruples(task, batch.cfg.quadruples_per_sentence)
            raw = None
        else:
            found, bad = parse_quadruples(task, response, batch.generator)
            rejects.extend(bad)
            raw = response.text
        for quad in found:
            v = batch.validator.score_quadruple(
                quad, n_sentences=task.article.n_sentences, allowed=task.offered
            )
            if v.keep:
                kept.append(quad)
                raw_of[id(quad)] = raw
            else:
                reason, detail = v.reason or "", v.detail
                rejects.append(
                    reject_of("quadruple", "quadruples", quad.row(), raw, reason, detail)
                )
    kept, dups = split_duplicates(kept, quadruple_key, lambda q: q.page_id)
    for quad in dups:
        detail = f"{quad.subject} | {quad.relation} | {quad.object} | {quad.timestamp}"
        rejects.append(
            reject_of("quadruple", "quadruples", quad.row(), raw_of[id(quad)], "duplicate", detail)
        )
    return KindOutput([q.row() for q in kept], rejects, {"quadruples": len(asked)})


QUADRUPLE_GENERATOR = ItemGenerator(
    table="quadruples",
    prompts=("quadruples",),
    initial_tasks=initial_quadruple_tasks,
    update_tasks=lambda article, cfg, _previous: [
        quadruple_task(article, chunk, cfg)
        for chunk in update_sentence_chunks(article, cfg.new_group_max_sentences)
    ],
    run=run_quadruples,
    rules=PARSE_RULES,
    counts=lambda table, _parts: {
        "dated": sum(t is not None for t in table["timestamp"].to_pylist())
    },
)
