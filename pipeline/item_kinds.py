"""The kinds of item a release holds (QA pairs, dialogue turns, quadruples, temporal and
timeline questions, relations), each one :class:`Kind` record.

The ledger, the release tables and counts, ``verify``, the dataset card, the growth plot, the
run table, the Hugging Face export and evaluation read them from here, so a kind is defined
once; its tables' schemas are in :mod:`pipeline.schemas`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    """A kind of item a release holds: where it is stored, how it is spelled there and (ledger
    kinds) how it is generated, released, counted and described. The ledger, the release
    tables and counts, ``verify``, the dataset card, the growth plot, the run table, the
    Hugging Face export and evaluation all read this record, so a new kind is one ``Kind``
    here plus its generator (see docs/development.md, "Recipe: add an item kind")."""

    name: str  # the ``kind`` of a ledger item, a retired row, an annotation
    table: str  # its release file / generated table / Hugging Face config / config switch
    count_key: str  # its key in a release manifest's ``counts``
    label: str  # how summaries and the dataset card name it
    in_ledger: bool  # maintained by the ledger (else derived by the temporal stage)
    evaluated: bool  # asked by ``wikidrift evaluate``
    id_column: str = "item_id"  # its id in the generated and release tables (ledger kinds)
    payload: tuple[str, ...] = ()  # the generated columns the ledger keeps (ledger kinds)
    growth: tuple[str, ...] = ()  # the counts the growth plot stacks (ledger kinds)
    # ledger kinds: "module:attribute" of its ItemGenerator (pipeline.generate.kinds)
    generator: str = ""
    # Release rows (pipeline.release_items): the items valid at the release, plus superseded
    # ones (``keep_superseded``, their ``status`` column says which) or, with ``group_column``,
    # every row of a group one of whose rows is valid (an ``evaluate`` column says which).
    keep_superseded: bool = False
    group_column: str | None = None
    release_order: tuple[str, ...] = ()  # sort of the release rows (else ledger order)
    # Release counts beyond the per-type ones: valid rows, the other rows, the groups.
    live_count: str | None = None
    other_count: str | None = None
    group_count: str | None = None
    # The dataset card: its section's title and a note under the table (``str.format`` over
    # the release's ``counts``).
    card_title: str = ""
    card_note: str = ""


_TYPES = ("unchanged", "new", "changed")
QA = Kind(
    "qa",
    "qa",
    "qa",
    "QA pairs",
    in_ledger=True,
    evaluated=True,
    payload=("origin", "question", "answer", "previous_answer"),
    growth=_TYPES,
    generator="pipeline.generate.qa:QA_GENERATOR",
    card_title="QA pairs",
)
DIALOGUE_TURN = Kind(
    "dialogue_turn",
    "dialogue",
    "dialogue_turns",
    "dialogue turns",
    in_ledger=True,
    evaluated=True,
    id_column="turn_id",
    payload=("dialogue_id", "turn_idx", "user", "expert"),
    growth=_TYPES,
    generator="pipeline.generate.dialogue:DIALOGUE_GENERATOR",
    group_column="dialogue_id",
    release_order=("created_snapshot", "dialogue_id", "turn_idx"),
    other_count="context_only",
    group_count="dialogues",
    card_title="Dialogue turns (evaluated)",
    card_note="Dialogues: {dialogues[total]:,}. Turns whose evidence changed stay in\n"
    "their dialogue as context (`evaluate = false`).",
)
QUADRUPLE = Kind(
    "quadruple",
    "quadruples",
    "quadruples",
    "quadruples",
    in_ledger=True,
    evaluated=False,
    payload=("subject", "relation", "object", "timestamp", "observed_at"),
    growth=("current", "superseded"),
    generator="pipeline.generate.quadruples:QUADRUPLE_GENERATOR",
    keep_superseded=True,
    live_count="current",
    other_count="superseded",
    card_title="Knowledge quadruples",
    card_note="Current facts: {quadruples[current]:,}; superseded (kept with their validity "
    "interval):\n{quadruples[superseded]:,}. `timestamp` is valid time (when the fact holds, "
    "from the text),\n`observed_at` transaction time (the snapshot that saw it).",
)
TEMPORAL_QUESTION = Kind(
    "temporal_question",
    "temporal_qa",
    "temporal_qa",
    "temporal questions",
    in_ledger=False,
    evaluated=True,
)
TIMELINE_ROW = Kind(
    "timeline_row", "timelines", "timelines", "timeline questions", in_ledger=False, evaluated=True
)
RELATION = Kind("relation", "relations", "relations", "relations", in_ledger=False, evaluated=False)

KINDS: tuple[Kind, ...] = (QA, DIALOGUE_TURN, QUADRUPLE, TEMPORAL_QUESTION, TIMELINE_ROW, RELATION)
LEDGER_KINDS: tuple[Kind, ...] = tuple(k for k in KINDS if k.in_ledger)
