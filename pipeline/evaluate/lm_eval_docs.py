"""Document preparation for the wikidrift lm-evaluation-harness tasks.

The Hugging Face export copies this file next to its task YAMLs as ``wikidrift_docs.py``
(the YAMLs name it with ``!function``), so it imports nothing but the standard library: a user
of the export needs lm-evaluation-harness, not wikidrift.

``wikidrift export-hf --created-after DATE --types T1,T2`` writes its filter into the two
constants below (and every task then names its ``*_docs`` function), so the exported tasks
score the same items as ``wikidrift evaluate`` with those options.
"""

from __future__ import annotations

from typing import Any

# Only rows made at a snapshot after this date (timeline intervals: begun after it); None: all.
CREATED_AFTER: str | None = None
# Only rows of these types (new, changed, unchanged); None: all.
TYPES: tuple[str, ...] | None = None


def kept(row: dict[str, Any]) -> bool:
    """Whether the export's filter keeps ``row``."""
    if CREATED_AFTER is not None:
        made = row.get("created_snapshot") or row.get("interval_start") or ""
        if not str(made) > CREATED_AFTER:
            return False
    return TYPES is None or row.get("type") in TYPES


def qa_docs(dataset: Any) -> Any:
    """The rows the filter keeps (QA pairs, temporal questions, timeline intervals)."""
    return dataset.filter(kept)


temporal_qa_docs = qa_docs
timelines_docs = qa_docs


def dialogue_docs(dataset: Any) -> Any:
    """The dialogue turns to evaluate (``evaluate`` is true, kept by the filter), each with
    the earlier turns of its dialogue as ``history`` ("User: ...\\nAssistant: ...\\n" per turn)."""
    turns: dict[str, list[tuple[int, str, str]]] = {}
    for row in dataset:
        turns.setdefault(row["dialogue_id"], []).append(
            (row["turn_idx"], row["user"], row["expert"])
        )

    def with_history(row: dict[str, Any]) -> dict[str, str]:
        earlier = sorted(t for t in turns[row["dialogue_id"]] if t[0] < row["turn_idx"])
        return {"history": "".join(f"User: {u}\nAssistant: {e}\n" for _, u, e in earlier)}

    return dataset.filter(lambda row: bool(row["evaluate"]) and kept(row)).map(with_history)
