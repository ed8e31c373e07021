"""Document preparation for the wikidrift lm-evaluation-harness tasks.

The Hugging Face export copies this file next to its task YAMLs as ``wikidrift_docs.py``
(the YAMLs name it with ``!function``), so it imports nothing but the standard library: a user
of the export needs lm-evaluation-harness, not wikidrift.
"""

from __future__ import annotations

from typing import Any


def dialogue_docs(dataset: Any) -> Any:
    """The dialogue turns to evaluate (``evaluate`` is true), each with the earlier turns of
    its dialogue as ``history`` ("User: ...\\nAssistant: ...\\n" per turn)."""
    turns: dict[str, list[tuple[int, str, str]]] = {}
    for row in dataset:
        turns.setdefault(row["dialogue_id"], []).append(
            (row["turn_idx"], row["user"], row["expert"])
        )

    def with_history(row: dict[str, Any]) -> dict[str, str]:
        earlier = sorted(t for t in turns[row["dialogue_id"]] if t[0] < row["turn_idx"])
        return {"history": "".join(f"User: {u}\nAssistant: {e}\n" for _, u, e in earlier)}

    return dataset.filter(lambda row: bool(row["evaluate"])).map(with_history)
