"""Temporal questions chosen by code from the time-stamped quadruples (Chronos C1 / C2 / C3).

The facts a release knows are its quadruples, current and superseded. From them code picks
what to ask and the answer; the LLM (:mod:`pipeline.temporal.phrasing`) or a template over
the facts' words (:mod:`pipeline.temporal.templates`) only phrases the question afterwards,
so every answer is a value of the data. Only facts with a time of their own take part
(:func:`timed`):

- **C1** (one timestamp): one fact with a date from the text, or one fact of a supersession
  chain (then dated by the snapshot that saw it). Answer: its object.
- **C2** (several timestamps, one entity): two or more different objects of one normalized
  (subject, relation) at two or more different times, one superseding another. Answer: every
  object over the interval from the first to the last time (``answer_mode = "all"``).
- **C3** (several entities and timestamps): two facts of different subjects joined through a
  shared entity, either a bridge (the first fact's object is the second fact's subject) or a
  shared object. Answer: the shared entity.
- **timeline**: a supersession chain asked without a time ("What is ... now?"); its answer at
  every release is the fact current then (OAKS's fixed probe, see
  :mod:`pipeline.temporal.timelines`).

A fact's time is its valid time (``timestamp``) when the text gives one; for a fact of a
supersession chain without one, the snapshot that first saw it (Wikipedia asserted it then).
Other undated facts are never asked about with a time: their snapshot is not when they
happened. A question's id hashes its category, facts and
answer, so a question whose answer the data no longer gives is a different question.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pipeline.dates import MONTH_NAMES
from pipeline.fact_keys import normalize_key

CATEGORIES = ("C1", "C2", "C3")
# Bridges through one entity grow as in-degree x out-degree; a hub (the article's own
# subject) would otherwise yield hundreds of near-identical C3 questions.
C3_PER_ENTITY = 2


@dataclass(frozen=True)
class Fact:
    """One quadruple of a release (the columns the temporal layer reads)."""

    item_id: str
    page_id: int
    title: str
    subject: str
    relation: str
    object: str
    timestamp: str | None
    observed_at: str
    status: str  # "current" | "superseded"
    superseded_by: str | None
    fact_valid_until: str | None
    evidence_text: str

    @property
    def time(self) -> str:
        """Valid time if the text gave one, else the snapshot that saw the fact."""
        return self.timestamp or self.observed_at

    @property
    def dated(self) -> bool:
        """Whether the text itself dates the fact."""
        return bool(self.timestamp)

    @property
    def key(self) -> tuple[str, str]:
        """Normalized (subject, relation): what supersession and C2 group by."""
        return normalize_key(self.subject), normalize_key(self.relation)


def facts_from_rows(rows: Iterable[dict]) -> list[Fact]:
    """Facts from rows of a release's ``quadruples`` table."""
    return [
        Fact(
            item_id=r["item_id"],
            page_id=r["page_id"],
            title=r["title"],
            subject=r["subject"],
            relation=r["relation"],
            object=r["object"],
            timestamp=r["timestamp"],
            observed_at=r["observed_at"],
            status=r["status"],
            superseded_by=r["superseded_by"],
            fact_valid_until=r["fact_valid_until"],
            evidence_text=r["evidence_text"],
        )
        for r in rows
    ]


@dataclass(frozen=True)
class QuestionSpec:
    """A question decided by code, before phrasing: its facts, answer and time."""

    question_id: str
    category: str  # C1 | C2 | C3 | timeline
    shape: str  # fact | history | bridge | shared_object | chain
    facts: tuple[Fact, ...]
    answer: tuple[str, ...]
    answer_mode: str  # "any": one of the answers is enough; "all": every one is needed
    as_of: str | None  # "2024-05", or an ISO interval "2021/2024-05"; None for a timeline
    valid_from: str
    valid_to: str | None

    @property
    def time_phrase(self) -> str:
        """How the question must name its time ("in May 2024", "between 2021 and 2024")."""
        if self.as_of is None:
            return ""
        if "/" in self.as_of:
            start, end = self.as_of.split("/")
            return f"between {spoken_date(start)} and {spoken_date(end)}"
        return time_phrase_of(self.facts[0]) if self.category == "C1" else spoken_date(self.as_of)


def spoken_date(value: str) -> str:
    """``2024`` -> "2024", ``2024-05`` -> "May 2024", ``2024-05-08`` -> "8 May 2024"."""
    parts = value.split("-")
    if len(parts) == 1:
        return parts[0]
    month = MONTH_NAMES[int(parts[1]) - 1]
    if len(parts) == 2:
        return f"{month} {parts[0]}"
    return f"{int(parts[2])} {month} {parts[0]}"


def time_phrase_of(fact: Fact) -> str:
    """The time of one fact as a question names it."""
    if fact.dated:
        prefix = "on" if len(fact.time.split("-")) == 3 else "in"
        return f"{prefix} {spoken_date(fact.time)}"
    return f"as of {spoken_date(fact.observed_at[:7])}"


def _question_id(category: str, facts: Sequence[Fact], answer: Sequence[str], as_of: str) -> str:
    blob = "|".join(
        [category, as_of or "", *sorted(f.item_id for f in facts), *map(normalize_key, answer)]
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _spec(
    category: str,
    shape: str,
    facts: Sequence[Fact],
    answer: Sequence[str],
    mode: str,
    as_of: str | None,
    valid_from: str,
    valid_to: str | None,
) -> QuestionSpec:
    return QuestionSpec(
        question_id=_question_id(category, facts, answer, as_of or ""),
        category=category,
        shape=shape,
        facts=tuple(facts),
        answer=tuple(answer),
        answer_mode=mode,
        as_of=as_of,
        valid_from=valid_from,
        valid_to=valid_to,
    )


def _distinct(values: Iterable[str]) -> list[str]:
    seen: dict[str, str] = {}
    for v in values:
        seen.setdefault(normalize_key(v), v)
    return list(seen.values())


# --------------------------------------------------------------------------- C1
def c1_spec(fact: Fact) -> QuestionSpec:
    """The single-timestamp question on ``fact``."""
    return _spec(
        "C1",
        "fact",
        [fact],
        [fact.object],
        "any",
        fact.time if fact.dated else fact.observed_at[:7],
        fact.time,
        fact.fact_valid_until,
    )


def _in_chain(facts: Sequence[Fact]) -> set[str]:
    ids = {f.superseded_by for f in facts if f.superseded_by}
    return ids | {f.item_id for f in facts if f.superseded_by}


# --------------------------------------------------------------------------- C2
def c2_answer(facts: Sequence[Fact], key: tuple[str, str], start: str, end: str) -> list[str]:
    """Every object of ``key`` whose fact's time lies in ``[start, end]``, in time order."""
    inside = [f for f in facts if f.key == key and start <= f.time <= end]
    return _distinct(f.object for f in sorted(inside, key=lambda f: (f.time, f.item_id)))


def timed(facts: Sequence[Fact]) -> list[Fact]:
    """The facts whose time a question may name: dated by the text, or one step of a
    supersession chain (dated by the snapshot that saw it). An undated fact's snapshot is
    not its time: "Mudiay was drafted" seen in 2024 happened in 2015."""
    chained = _in_chain(facts)
    return [f for f in facts if f.dated or f.item_id in chained]


def c2_specs(facts: Sequence[Fact], c2: str = "successions") -> list[QuestionSpec]:
    """One question per (subject, relation) with two or more objects at two or more times,
    over the :func:`timed` facts. With ``c2 = "successions"`` only where one of them
    superseded another: a slot whose values followed each other (head coaches), not a list
    the text may give only in part (what a company acquired over thirty years: the item gold's
    readers found every such list read off Wikipedia sentences incomplete). ``"all"`` asks
    every list, for facts from a source known to be complete."""
    facts = timed(facts)
    groups: dict[tuple[str, str], list[Fact]] = defaultdict(list)
    for f in facts:
        groups[f.key].append(f)
    out = []
    for key, group in sorted(groups.items()):
        if len({normalize_key(f.object) for f in group}) < 2 or len({f.time for f in group}) < 2:
            continue
        ids = {f.item_id for f in group}
        if c2 == "successions" and not any(f.superseded_by in ids for f in group):
            continue
        group.sort(key=lambda f: (f.time, f.item_id))
        start, end = group[0].time, group[-1].time
        answer = c2_answer(facts, key, start, end)
        out.append(_spec("C2", "history", group, answer, "all", f"{start}/{end}", start, None))
    return out


# --------------------------------------------------------------------------- C3
def c3_answer(first: Fact, second: Fact, shape: str) -> list[str] | None:
    """The shared entity of two facts of different subjects, or None if they share none."""
    if normalize_key(first.subject) == normalize_key(second.subject):
        return None
    if shape == "bridge":
        if normalize_key(first.object) != normalize_key(second.subject):
            return None
        if normalize_key(second.object) == normalize_key(first.subject):
            return None  # the same relation read both ways, not two facts
        return _distinct([first.object, second.subject])
    if normalize_key(first.object) != normalize_key(second.object):
        return None
    return _distinct([first.object, second.object])


def _c3(first: Fact, second: Fact, shape: str, answer: list[str]) -> QuestionSpec:
    start, end = sorted((first.time, second.time))
    return _spec("C3", shape, [first, second], answer, "any", f"{start}/{end}", start, None)


def c3_specs(facts: Sequence[Fact]) -> list[QuestionSpec]:
    """Questions joining two :func:`timed` facts of different subjects through a shared
    entity, at two different times; at most :data:`C3_PER_ENTITY` per entity, dated pairs
    first."""
    facts = timed(facts)
    by_subject: dict[str, list[Fact]] = defaultdict(list)
    by_object: dict[str, list[Fact]] = defaultdict(list)
    for f in facts:
        by_subject[normalize_key(f.subject)].append(f)
        by_object[normalize_key(f.object)].append(f)
    candidates: dict[str, list[tuple[tuple, QuestionSpec]]] = defaultdict(list)
    for entity, incoming in by_object.items():
        pairs = [(a, b, "bridge") for a in incoming for b in by_subject.get(entity, [])]
        pairs += [
            (a, b, "shared_object") for a in incoming for b in incoming if a.item_id < b.item_id
        ]
        for a, b, shape in pairs:
            if a.time == b.time or not (a.dated or b.dated):
                continue
            answer = c3_answer(a, b, shape)
            if answer is None:
                continue
            rank = (-(a.dated + b.dated), a.time, b.time, a.item_id, b.item_id)
            candidates[entity].append((rank, _c3(a, b, shape, answer)))
    out = []
    for entity in sorted(candidates):
        ranked = sorted(candidates[entity], key=lambda c: c[0])
        out += [spec for _, spec in ranked[:C3_PER_ENTITY]]
    return out


# --------------------------------------------------------------------------- chains
def supersession_chains(facts: Sequence[Fact]) -> list[list[Fact]]:
    """Each chain of facts linked by ``superseded_by``, oldest first."""
    by_id = {f.item_id: f for f in facts}
    successors = {f.superseded_by for f in facts if f.superseded_by}
    chains = []
    for f in sorted(facts, key=lambda f: f.item_id):
        if f.item_id in successors or not f.superseded_by:
            continue  # not the head of a chain
        chain = [f]
        while chain[-1].superseded_by in by_id and len(chain) <= len(facts):
            chain.append(by_id[chain[-1].superseded_by])  # type: ignore[index]
        if len(chain) > 1:
            chains.append(chain)
    return chains


def timeline_spec(chain: Sequence[Fact]) -> QuestionSpec:
    """The question a supersession chain answers differently over time, asked without a
    time; its answer here is the newest fact's object. Its id depends on the chain's first
    fact only: a chain that grows keeps its question (the same probe at every release)."""
    head = chain[0]
    return QuestionSpec(
        question_id=hashlib.sha256(f"timeline|{head.item_id}".encode()).hexdigest()[:16],
        category="timeline",
        shape="chain",
        facts=tuple(chain),
        answer=(chain[-1].object,),
        answer_mode="any",
        as_of=None,
        valid_from=head.time,
        valid_to=None,
    )


# --------------------------------------------------------------------------- all
def question_specs(facts: Sequence[Fact], c2: str = "successions") -> list[QuestionSpec]:
    """Every question the facts allow: C1 for every dated fact and every fact of a
    supersession chain, C2, C3, and one timeline question per chain."""
    c1 = [c1_spec(f) for f in sorted(timed(facts), key=lambda f: (f.time, f.item_id))]
    timelines = [timeline_spec(chain) for chain in supersession_chains(facts)]
    return [*c1, *c2_specs(facts, c2), *c3_specs(facts), *timelines]


def current_spec(
    category: str,
    shape: str,
    quadruple_ids: Sequence[str],
    as_of: str | None,
    answer: Sequence[str],
    facts: Sequence[Fact],
) -> QuestionSpec | None:
    """An earlier question rebuilt from the facts known now; None when one of its facts is
    gone or the data no longer gives its answer (the question then leaves the release)."""
    by_id = {f.item_id: f for f in facts}
    if any(i not in by_id for i in quadruple_ids):
        return None
    own = [by_id[i] for i in quadruple_ids]
    if category == "timeline":
        heads = {c[0].item_id: c for c in supersession_chains(facts)}
        chain = heads.get(own[0].item_id)
        return timeline_spec(chain) if chain is not None else None
    if category == "C1":
        spec = c1_spec(own[0])
    elif category == "C2":
        start, end = (as_of or "/").split("/")
        now = c2_answer(timed(facts), own[0].key, start, end)
        spec = _spec("C2", shape, own, now, "all", as_of, start, None)
    elif category == "C3" and len(own) == 2:
        now = c3_answer(own[0], own[1], shape)
        if now is None:
            return None
        spec = _c3(own[0], own[1], shape, now)
    else:
        return None
    same = [normalize_key(a) for a in spec.answer] == [normalize_key(a) for a in answer]
    return spec if same and spec.as_of == as_of else None
