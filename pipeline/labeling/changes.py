"""Is a revised sentence an update of its old version? The offline answer to GrowOVER's
"contradiction" step.

The definitions (README "What `changed` means", and the gold set in ``benchmarks/data/``):

- **update**: a value the old sentence states is replaced (number, date, name, place, title,
  count, record, status), so a question answered from the old sentence gets another answer
  from the new one. Corrections count. Only this is ``changed``.
- **elaboration**: everything the old sentence says still holds; detail was added.
- **rewording**: the same facts in other words, or detail dropped with nothing contradicted.
- **different**: the pairing is accidental; the new sentence says something else.

:func:`classify_pair` decides from the word alignment of the two sentences
(:func:`pipeline.slots.compare_slots`): a number or point in time replaced in its own role,
with most of the sentence around it unchanged, is an update; so is a named entity replaced by
another entity of the same type whose name shares nothing with it ("macOS Ventura" ->
"macOS Sonoma", not "Dan" -> "Daniel Lin"). Additions and removals alone are never an update.
What the alignment cannot settle (an entity replaced by a description, a status word changed,
"will play" -> "played", a time removed in one place and another added elsewhere) is
``uncertain``: the :class:`UpdateJudge` (an LLM asked a short extractive question) may settle
it, and what nobody settles stays ``unlabeled``: a wrong ``changed`` poisons items, relations,
timelines and scores, a missed one only loses an item.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.facts import abbreviates, fold, name_words, same_value, sentence_values
from pipeline.models.llm.base import LLMBackend
from pipeline.slots import Replacement, SlotDiff

UPDATE, ELABORATION, REWORDING, DIFFERENT, UNCERTAIN = (
    "update",
    "elaboration",
    "rewording",
    "different",
    "uncertain",
)

# Raised whenever a rule below decides a pair differently: the labeling stage's digest holds
# it, so labels made by older rules are rebuilt, not reused.
RULES_VERSION = 6

# Share of each sentence's words that must stay in place for a replaced value to be read as
# an update of the same statement (measured on the gold set: below it, most "replacements"
# are between sentences that say different things).
VALUE_FRAME = 0.6
ENTITY_FRAME = 0.75
# Below VALUE_FRAME a replaced number or time is only an update if the judge says so; below
# this, the sentences share too little for its answer to mean anything.
JUDGE_FRAME = 0.3
# Share of the old sentence's words that must survive for a pair without a replaced value
# to count as the same statement (rewording or elaboration).
SAME_STATEMENT = 0.6

# Status words: what was planned, possible or ongoing, and what ended or happened.
_PLANNED = re.compile(
    r"\b(will|shall|plans?|planned|planning|set to|scheduled|expected|upcoming|forthcoming|"
    r"(?-i:may)|might|could|intends?|proposed|likely)\b",  # "May 1, 2020" plans nothing
    re.I,
)
_ONGOING = re.compile(r"\b(currently|still|now|ongoing|continues?|remains?|since|as of)\b", re.I)
_ENDED = re.compile(
    r"\b(except|until|formerly|former|no longer|previously|later|before|overturned|ended|"
    r"defunct|discontinued|replaced|resigned|retired|withdrew|suspended|cancell?ed|"
    r"dissolved|died|sold|left|stepped down|lost|became|now)\b",
    re.I,
)
_HAPPENED = re.compile(
    r"\b(\w{3,}ed|began|became|won|led|made|took|went|came|ran|sold|left|held|met|beat|grew|"
    r"built|wrote|was|were|is now)\b",
    re.I,
)
_PRESENT = re.compile(r"\b(is|are|has|have)\b", re.I)
_REPORTED = re.compile(r"\b(would|could)\b", re.I)
_PAST = re.compile(r"\b(was|were|had)\b", re.I)
_NEGATION = re.compile(r"\b(not|never|no|none|neither|nor|without)\b", re.I)
_ACRONYM = re.compile(r"\b[A-Z][A-Z0-9]{1,5}\b")
_STOPWORDS = frozenset(["the", "a", "an", "of", "and", "or", "for", "in", "on", "at", "to", "by"])
# Abbreviations inside names ("St. Paul" / "Saint Paul").
_NAME_ALIASES = {"st": "saint", "mt": "mount", "ft": "fort", "jr": "junior", "sr": "senior"}


@dataclass(frozen=True)
class PairClass:
    """What a (old, new) pair is, by which rule, and why (one line for the label's reason)."""

    kind: str  # UPDATE | ELABORATION | REWORDING | DIFFERENT | UNCERTAIN
    rule: str
    detail: str = ""


def _name_words(text: str) -> list[str]:
    words = re.findall(r"[a-z0-9]+", fold(text))
    return [_NAME_ALIASES.get(w, w) for w in words if w not in _STOPWORDS]


def _content_words(text: str) -> list[str]:
    return [w for w in re.findall(r"\w+", text.lower()) if w not in _STOPWORDS]


def _related(a: str, b: str) -> bool:
    """Two name words that may be one name spelled or shortened differently."""
    if a == b or (len(a) >= 3 and len(b) >= 3 and (a.startswith(b) or b.startswith(a))):
        return True
    return min(len(a), len(b)) >= 4 and a[:4] == b[:4]


def distinct_entities(r: Replacement) -> bool:
    """Whether an entity replacement names another thing, not the same one differently: the
    two names are all that changed in their stretch of the sentence (not "in Davos" -> "at
    the World Economic Forum"), both are real names (not notation such as "p(x"), and no word
    of one is related to a word of the other ("Slovakian" / "Slovak", "Dan" / "Daniel Lin",
    "St. Paul" / "Saint Paul"). NER types are not compared: the small model's are too often
    wrong ("macOS Ventura" as a person)."""
    if r.kind != "entity" or not r.swap:
        return False
    old, new = _name_words(r.old), _name_words(r.new)
    real = [any(len(w) >= 2 and w.isalpha() for w in words) for words in (old, new)]
    if not all(real):
        return False
    gone = [w for w in old if w not in new]
    came = [w for w in new if w not in old]
    if not (gone and came) or any(_related(a, b) for a in gone for b in came):
        return False
    return not is_alias(r.old, r.new)


def is_alias(a: str, b: str) -> bool:
    """Whether one name is an abbreviation of the other ("IEA" / "International Energy
    Agency", "U.S." / "United States", "F1" / "Formula One"): one thing, two names."""
    wa, wb = name_words(a), name_words(b)
    for short, long in ((wa, wb), (wb, wa)):
        if len(short) == 1 and abbreviates(short[0], long):
            return True
    return False


# "X (formerly Y)", "X, previously known as Y": the old name written beside the new one.
_FORMER_NAME = re.compile(r"\b(formerly|previously|originally|née|known as|then called)\b", re.I)


def former_name_beside(r: Replacement, slots: SlotDiff) -> bool:
    """Whether the new sentence still names the replaced entity as the other one's former or
    other name ("Meta (formerly Facebook)"): the same entity, not a replacement."""
    if not _FORMER_NAME.search(slots.inserted_words):
        return False
    inserted = set(_name_words(slots.inserted_words))
    old_words = _name_words(r.old)
    return bool(old_words) and all(w in inserted for w in old_words)


def status_signal(slots: SlotDiff) -> str | None:
    """A change of status the values do not show, or None: something planned that happened
    ("will play" -> "played"), an ongoing state that ended, a negation that came or went."""
    gone, came = slots.deleted_words, slots.inserted_words
    # A plan whose words were replaced by others, not by reported speech ("will remain" ->
    # "would remain"): maybe done ("played"), maybe now so ("will have" -> "has").
    plan_gone = _PLANNED.search(gone) and not _PLANNED.search(came) and came.strip()
    if plan_gone and not _REPORTED.search(came):
        return "planned_to_done"
    if _ENDED.search(came):
        return "ended_or_excepted"
    if _ONGOING.search(gone):
        return "ongoing_word_gone"
    if bool(_NEGATION.search(gone)) != bool(_NEGATION.search(came)):
        return "negation_changed"
    if _PRESENT.search(gone) and _PAST.search(came) or _tense_flipped(gone, came):
        return "present_to_past"
    return None


def _tense_flipped(gone: str, came: str) -> bool:
    """Whether a verb of the old words in the present ("plays", "starts", "marries") stands
    in the new words in the past ("played", "started", "married"): a state or a schedule
    that may have ended, or only tense harmonised; the words alone cannot tell."""
    came_words = set(re.findall(r"[a-z]+", came.lower()))
    for word in re.findall(r"[a-z]+s\b", gone.lower()):
        stems = {word[:-1], word[:-2], word[:-3] + "y"} if len(word) > 3 else set()
        if any(past_forms(stem) & came_words for stem in stems if len(stem) > 1):
            return True
    return False


# A firm plan (not "may", "might", "could": a rumour that came true is another statement) and
# the verb it plans, adverbs skipped; a passive plan ("will be released") is left to the judge.
_FIRM_PLAN = re.compile(
    r"\b(?:will|shall|set to|scheduled to|expected to|plans? to|planned to|intends? to)"
    r"(?:\s+(?:also|next|soon|then|later|first|now))*\s+(?!be\b)([a-z]+)\b",
    re.I,
)
_IRREGULAR_PAST = {
    "be": ("was", "were"),
    "become": ("became",),
    "begin": ("began",),
    "build": ("built",),
    "buy": ("bought",),
    "come": ("came",),
    "do": ("did",),
    "get": ("got",),
    "give": ("gave",),
    "go": ("went",),
    "have": ("had",),
    "hold": ("held",),
    "join": ("joined",),
    "keep": ("kept",),
    "lead": ("led",),
    "leave": ("left",),
    "lose": ("lost",),
    "make": ("made",),
    "meet": ("met",),
    "pay": ("paid",),
    "run": ("ran",),
    "see": ("saw",),
    "sell": ("sold",),
    "send": ("sent",),
    "set": ("set",),
    "spend": ("spent",),
    "take": ("took",),
    "win": ("won",),
    "write": ("wrote",),
}


def _present_forms(verb: str) -> set[str]:
    """The third person present of a verb ("connect" -> "connects", "have" -> "has")."""
    v = verb.lower()
    irregular = {"have": {"has"}, "be": {"is", "are"}, "do": {"does"}, "go": {"goes"}}
    if v in irregular:
        return irregular[v]
    if v.endswith(("s", "sh", "ch", "x", "z", "o")):
        return {v + "es"}
    if len(v) > 2 and v.endswith("y") and v[-2] not in "aeiou":
        return {v[:-1] + "ies"}
    return {v + "s"}


def past_forms(verb: str) -> set[str]:
    """The simple past a verb may take ("play" -> "played", "star" -> "starred", "supply" ->
    "supplied", "receive" -> "received", irregular verbs from a short table)."""
    v = verb.lower()
    forms = {v + "ed", *_IRREGULAR_PAST.get(v, ())}
    if v.endswith("e"):
        forms.add(v + "d")
    if len(v) > 2 and v.endswith("y") and v[-2] not in "aeiou":
        forms.add(v[:-1] + "ied")
    if len(v) > 2 and v[-1] not in "aeiouwxy" and v[-2] in "aeiou" and v[-3] not in "aeiou":
        forms.add(v + v[-1] + "ed")
    return forms


def carried_out(slots: SlotDiff) -> str | None:
    """The plan and its deed when the old sentence's words planned something ("will play",
    "is set to join") and the new sentence's words in their place say it was done or is so
    now ("played", "joined", "will have" -> "has", "will connect" -> "connects"): the status
    of the statement was replaced. None otherwise."""
    plan = _FIRM_PLAN.search(slots.deleted_words)
    if plan is None:
        return None
    came = set(re.findall(r"[a-z]+", slots.inserted_words.lower()))
    deed = (past_forms(plan[1]) | _present_forms(plan[1])) & came
    return f"{plan.group()!r} -> {min(deed)!r}" if deed else None


def _acronym_swap(slots: SlotDiff) -> bool:
    return bool(_ACRONYM.search(slots.deleted_words) and _ACRONYM.search(slots.inserted_words))


def classify_pair(slots: SlotDiff, similarity: float) -> PairClass:
    """Update, elaboration, rewording, different or uncertain, from the word alignment of a
    pair (``slots``) and its embedding ``similarity`` (see the module docstring)."""
    frame = min(slots.kept_old, slots.kept_new)
    values = [r for r in slots.replaced if r.kind in ("time", "number")]
    if values and frame >= VALUE_FRAME:
        r = values[0]
        return PairClass(UPDATE, "value_replaced", f"{r.kind} {r.old!r} -> {r.new!r}")
    names = [r for r in slots.replaced if distinct_entities(r) and not former_name_beside(r, slots)]
    if names and frame >= ENTITY_FRAME:
        r = names[0]
        return PairClass(UPDATE, "entity_replaced", f"{r.old_label} {r.old!r} -> {r.new!r}")
    if slots.replaced:
        r = slots.replaced[0]
        return PairClass(UNCERTAIN, "value_replaced_loosely", f"{r.kind} {r.old!r} -> {r.new!r}")
    status = status_signal(slots)
    if status and slots.kept_old >= 0.4:
        done = carried_out(slots) if status == "planned_to_done" else None
        if done:
            return PairClass(UPDATE, "plan_carried_out", done)
        return PairClass(UNCERTAIN, status, f"{slots.deleted_words!r} -> {slots.inserted_words!r}")
    swap = f"{slots.deleted_words!r} -> {slots.inserted_words!r}"
    if _acronym_swap(slots) and frame >= ENTITY_FRAME:
        return PairClass(UNCERTAIN, "name_swapped", swap)
    moved = {v.kind for v in slots.removed} & {v.kind for v in slots.added}
    if moved:  # one time (or number, name) gone here, another come there: maybe replaced
        return PairClass(UNCERTAIN, "value_moved_and_changed", swap)
    if slots.kept_old >= SAME_STATEMENT and slots.name_edges:
        # "HBO Max" -> "Max", "MacBook" -> "MacBook Air": a renamed or another thing, or the
        # same thing named more fully; not for the words to say it is unchanged
        return PairClass(UNCERTAIN, "name_extended", ", ".join(slots.name_edges))
    if slots.kept_old >= SAME_STATEMENT and slots.displaced:
        # a value gone and one of another kind in its place: not an elaboration
        r = slots.displaced[0]
        return PairClass(UNCERTAIN, "value_displaced", f"{r.kind} {r.old!r} -> {r.new!r}")
    if slots.kept_old >= SAME_STATEMENT:
        more_words = len(_content_words(slots.inserted_words)) - len(
            _content_words(slots.deleted_words)
        )
        if slots.added or slots.refined or more_words >= 2:
            added = ", ".join(v.text for v in (*slots.added, *slots.refined))
            return PairClass(ELABORATION, "details_added", added)
        return PairClass(REWORDING, "same_facts", ", ".join(v.text for v in slots.removed))
    return PairClass(DIFFERENT, "other_statement")


def one_name(verdict: PairClass, slots: SlotDiff, pages: Sequence[Sequence[str]]) -> PairClass:
    """An ``entity_replaced`` update made uncertain when the two names are parts of one name
    that the articles (``pages``: the sentences of each) write out ("Yimou" -> "Zhang", and
    "Zhang Yimou" elsewhere in the article): the same person called another way. Other
    verdicts pass unchanged, without a look at the pages."""
    if verdict.rule != "entity_replaced":
        return verdict
    r = next(r for r in slots.replaced if distinct_entities(r) and not former_name_beside(r, slots))
    for whole in (f"{r.old} {r.new}", f"{r.new} {r.old}"):
        if any(whole in t for page in pages for t in page):
            return PairClass(UNCERTAIN, "name_variant", f"{r.old!r} / {r.new!r}: {whole!r}")
    return verdict


def label_of(verdict: PairClass, rounded_similarity: float, new_max_similarity: float) -> str:
    """The sentence label a pair's class gives on the default path: an update is ``changed``,
    an elaboration or a rewording ``unchanged``, another statement ``new`` when it is no more
    similar than ``new_max_similarity`` (GrowOVER's rule) and ``unlabeled`` otherwise, as is
    whatever stays uncertain."""
    if verdict.kind == UPDATE:
        return "changed"
    if verdict.kind in (ELABORATION, REWORDING):
        return "unchanged"
    if verdict.kind == DIFFERENT and rounded_similarity <= new_max_similarity:
        return "new"
    return "unlabeled"


# --------------------------------------------------------------------------- the judge
@dataclass(frozen=True)
class JudgeQuestion:
    """What the judge asks about one uncertain pair: the part of the old sentence to find in
    the new one, and how to read what comes back."""

    old_marked: str  # the old sentence with the part between [[ and ]]
    new: str
    part: str  # the marked words
    kind: str  # "time" | "number" | "status"
    pair_class: str  # "<rule>:<kind>", one of ASKABLE_CLASSES


# Every class of uncertain pair a question can be written for ("<rule>:<kind>": the rule that
# left the pair uncertain and the kind of the part marked in the old sentence) ...
ASKABLE_CLASSES = (
    "value_replaced_loosely:time",
    "value_replaced_loosely:number",
    "value_moved_and_changed:time",
    "value_moved_and_changed:number",
    "planned_to_done:status",
)
# ... and those a judge is asked about unless configured otherwise (`align.judge_classes`):
# a replaced number or time, the only classes where a model's answer can be read at all (the
# packaged 1.5B model gave no usable answer about a plan; `bench_changed --judge-only` prints
# the figures per class for the judge at hand).
JUDGE_CLASSES = ("value_replaced_loosely:time", "value_replaced_loosely:number")
# A planned word and the verb it plans ("will release", "set to be released").
_PLANNED_PHRASE = re.compile(
    _PLANNED.pattern + r"(?:\s+(?:to|be|next|also|soon|then|later|not|never|first))*\s+\w+", re.I
)


def askable(classes: Sequence[str]) -> tuple[str, ...]:
    """``classes`` as a tuple, or ValueError naming those no question is written for."""
    unknown = sorted(set(classes) - set(ASKABLE_CLASSES))
    if unknown:
        raise ValueError(f"no judge question is written for {unknown}; use {ASKABLE_CLASSES}")
    return tuple(classes)


def _marked(old: str, part: str) -> str:
    at = old.index(part)
    return f"{old[:at]}[[{part}]]{old[at + len(part) :]}"


def judge_question(
    old: str,
    new: str,
    verdict: PairClass,
    slots: SlotDiff,
    classes: Sequence[str] = JUDGE_CLASSES,
) -> JudgeQuestion | None:
    """The question for an uncertain pair of one of ``classes`` (see :data:`ASKABLE_CLASSES`),
    or None: a number or point in time replaced in a sentence that changed around it, or gone
    from one place while another of its kind came elsewhere (the old one is marked), or a plan
    that may have been carried out (the planned words are marked). Pairs with less than
    ``JUDGE_FRAME`` of their words in place share too little for an answer to mean anything."""
    if min(slots.kept_old, slots.kept_new) < JUDGE_FRAME:
        return None
    part, kind = None, ""
    if verdict.rule == "value_replaced_loosely" and slots.replaced:
        part, kind = slots.replaced[0].old, slots.replaced[0].kind
    elif verdict.rule == "value_moved_and_changed":
        came = {v.kind for v in slots.added}
        gone = [v for v in slots.removed if v.kind in came and v.kind in ("time", "number")]
        if gone:
            part, kind = gone[0].text, gone[0].kind
    elif verdict.rule == "planned_to_done":
        plan = _PLANNED_PHRASE.search(old)
        if plan:
            part, kind = plan.group(), "status"
    pair_class = f"{verdict.rule}:{kind}"
    if part is None or pair_class not in classes or part not in old:
        return None
    return JudgeQuestion(_marked(old, part), new, part, kind, pair_class)


def read_span(question: JudgeQuestion, span: str | None) -> bool | None:
    """True when the span the judge copied from the new sentence holds another value of the
    marked one's kind (for a plan: words of something done, not planned), False when it holds
    the same value (more or less precise; the plan still a plan), None when it tells nothing
    (NONE, words that are not in the new sentence, no value of that kind)."""
    if span is None:
        return None
    span = span.strip().strip("\"'")
    if not span or span.upper() == "NONE" or span not in question.new:
        return None
    if question.kind == "status":
        if _PLANNED.search(span):
            return False
        return True if _HAPPENED.search(span) else None
    old_values = [v for v in sentence_values(question.part) if v.kind == question.kind]
    new_values = [v for v in sentence_values(span) if v.kind == question.kind]
    if not old_values or not new_values:
        return None
    return not any(same_value(a, b) for a in old_values for b in new_values)


class UpdateJudge:
    """Settles uncertain pairs with one short extractive question to an LLM each
    (``prompts/update_check.md``): which words of the new sentence stand where the marked
    part of the old one stood? Code, not the model, compares the two. All questions of a call
    go to the backend together (cached by the backend's call cache)."""

    def __init__(self, backend: LLMBackend, classes: Sequence[str] = JUDGE_CLASSES) -> None:
        # Imported here: the generate package imports the labeling stage, which imports us.
        from pipeline.generate.prompts import load_prompt

        self.backend = backend
        self.classes = askable(classes)  # the classes of uncertain pair it is asked about
        self.template = load_prompt("update_check")
        # The prompt hash is part of the id: a reworded question is a different judge.
        self.model_id = f"{backend.backend_id}:{backend.model}:{self.template.prompt_hash}"
        self.calls = 0

    def settle(self, questions: Sequence[JudgeQuestion]) -> list[bool | None]:
        """For each question: True = an update, False = not one, None = still uncertain."""
        if not questions:
            return []
        requests = [
            self.template.request(old_marked=q.old_marked, new_sentence=q.new) for q in questions
        ]
        responses = self.backend.complete_many(requests)
        self.calls += len(requests)
        out: list[bool | None] = []
        for question, response in zip(questions, responses, strict=True):
            parsed = response.parsed if isinstance(response.parsed, dict) else {}
            span = parsed.get("span") if not response.error else None
            out.append(read_span(question, span if isinstance(span, str) else None))
        return out
