"""Export a release in the JSONL layout the GrowOVER authors published, and read it back.

Files (one JSON object per line):

- ``qa.jsonl``: ``{article_id: [qa, ...]}`` per article; each qa has ``title``, ``type``
  (``CHANGED`` / ``NEW`` / ``SAME``), ``generated_month`` ("08"-style), ``question``,
  ``answer``, ``grounded_text``, ``start_idx``, ``end_idx``; wikidrift adds
  ``previous_answer`` (changed QA), ``generated_snapshot`` and ``item_id``.
- ``article_dialogue.jsonl``: ``{article_id: [dialogue_id, ...]}``.
- ``dialogue.jsonl``: ``{dialogue_id: {article_id, created_month, last_modified_month,
  dialogue_type, turn: {turn_number: turn_id}}}``.
- ``turn.jsonl``: ``{turn_id: {dialogue_id, turn_number, user, expert, grounded_sentence,
  sentence_type (CONTRADICT / NEW / SAME), sentence_index, created_month, created_type}}``.

Only turns evaluated at the release are exported (GrowOVER drops excluded turns); months are
the snapshot's month, as GrowOVER's monthly snapshots were.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from pipeline.errors import WikidriftError
from pipeline.layout import check_release, read_release_table
from pipeline.storage import write_text_atomic

QA_TYPE = {"changed": "CHANGED", "new": "NEW", "unchanged": "SAME"}
TURN_TYPE = {"changed": "CONTRADICT", "new": "NEW", "unchanged": "SAME"}


def _month(snapshot: str) -> str:
    return snapshot[5:7]


def _jsonl(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def export_growover(workdir: str | Path, snapshot: str, out: str | Path) -> Path:
    """Write the GrowOVER JSONL files of the release of ``snapshot`` into ``out``."""
    check_release(workdir, snapshot)
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise WikidriftError(f"{out} is not empty; export into a new or empty folder")
    out.mkdir(parents=True, exist_ok=True)

    by_article: dict[str, list[dict]] = defaultdict(list)
    for r in read_release_table(workdir, snapshot, "qa").to_pylist():
        idx = r["evidence_sent_idx"]
        qa = {
            "title": r["title"],
            "type": QA_TYPE[r["type"]],
            "generated_month": _month(r["created_snapshot"]),
            "question": r["question"],
            "answer": r["answer"],
            "grounded_text": r["evidence_text"],
            "start_idx": min(idx),
            "end_idx": max(idx),
            "generated_snapshot": r["created_snapshot"],
            "item_id": r["item_id"],
        }
        if r["previous_answer"] is not None:
            qa["previous_answer"] = r["previous_answer"]
        by_article[str(r["page_id"])].append(qa)
    write_text_atomic(out / "qa.jsonl", _jsonl([{k: v} for k, v in by_article.items()]))

    turns = [
        t for t in read_release_table(workdir, snapshot, "dialogue").to_pylist() if t["evaluate"]
    ]
    dialogues: dict[str, dict] = {}
    article_dialogues: dict[str, list[str]] = defaultdict(list)
    turn_records = []
    for t in turns:
        d = dialogues.get(t["dialogue_id"])
        if d is None:
            d = dialogues[t["dialogue_id"]] = {
                "article_id": str(t["page_id"]),
                "created_month": int(_month(t["created_snapshot"])),
                "last_modified_month": int(_month(snapshot)),
                "dialogue_type": "SAME" if t["created_snapshot"] < snapshot else "NEW",
                "turn": {},
                "created_snapshot": t["created_snapshot"],
            }
            article_dialogues[str(t["page_id"])].append(t["dialogue_id"])
        d["turn"][str(t["turn_idx"])] = t["turn_id"]
        turn_records.append(
            {
                t["turn_id"]: {
                    "dialogue_id": t["dialogue_id"],
                    "turn_number": t["turn_idx"],
                    "user": t["user"],
                    "expert": t["expert"],
                    "grounded_sentence": t["evidence_text"],
                    "sentence_type": TURN_TYPE[t["type"]],
                    "sentence_index": min(t["evidence_sent_idx"]),
                    "created_month": int(_month(t["created_snapshot"])),
                    "created_type": TURN_TYPE.get(t["type_at_creation"], "NEW"),
                }
            }
        )
    write_text_atomic(
        out / "article_dialogue.jsonl", _jsonl([{k: v} for k, v in article_dialogues.items()])
    )
    write_text_atomic(out / "dialogue.jsonl", _jsonl([{k: v} for k, v in dialogues.items()]))
    write_text_atomic(out / "turn.jsonl", _jsonl(turn_records))
    return out


def _read_keyed(path: Path) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise WikidriftError(f"{path}:{n}: not JSON ({exc})") from exc
            merged.update(record)
    return merged


def read_growover(folder: str | Path) -> dict[str, dict[str, Any]]:
    """Read a GrowOVER-layout folder back: ``{"qa": {article_id: [...]}, "article_dialogue":
    ..., "dialogue": ..., "turn": ...}``."""
    folder = Path(folder)
    return {
        name: _read_keyed(folder / f"{name}.jsonl")
        for name in ("qa", "article_dialogue", "dialogue", "turn")
    }
