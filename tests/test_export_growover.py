"""GrowOVER JSONL export: the authors' layout, and a lossless round trip of what it holds."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.export_growover import QA_TYPE, TURN_TYPE, export_growover, read_growover
from pipeline.layout import read_release_table
from tests.conftest import STAGE_DATES
from wikidrift.cli import main

C = STAGE_DATES[2]


def test_layout_matches_the_published_format(released_workdir: Path, tmp_path: Path) -> None:
    out = export_growover(released_workdir, C, tmp_path / "g")
    for name in ("qa", "article_dialogue", "dialogue", "turn"):
        lines = (out / f"{name}.jsonl").read_text().splitlines()
        assert lines and all(len(json.loads(line)) == 1 for line in lines)  # keyed records
    first = json.loads((out / "qa.jsonl").read_text().splitlines()[0])
    article_id, qas = next(iter(first.items()))
    assert article_id.isdigit()
    assert set(qas[0]) >= {
        "title",
        "type",
        "generated_month",
        "question",
        "answer",
        "grounded_text",
        "start_idx",
        "end_idx",
    }
    turn = json.loads((out / "turn.jsonl").read_text().splitlines()[0])
    assert set(next(iter(turn.values()))) >= {
        "dialogue_id",
        "turn_number",
        "user",
        "expert",
        "grounded_sentence",
        "sentence_type",
        "sentence_index",
        "created_month",
        "created_type",
    }


def test_round_trip(released_workdir: Path, tmp_path: Path) -> None:
    out = export_growover(released_workdir, C, tmp_path / "g")
    back = read_growover(out)
    qa = read_release_table(released_workdir, C, "qa").to_pylist()
    flat = {q["item_id"]: (aid, q) for aid, items in back["qa"].items() for q in items}
    assert len(flat) == len(qa)
    for r in qa:
        aid, q = flat[r["item_id"]]
        assert aid == str(r["page_id"])
        assert (q["question"], q["answer"], q["grounded_text"]) == (
            r["question"],
            r["answer"],
            r["evidence_text"],
        )
        assert q["type"] == QA_TYPE[r["type"]]
        assert (q["start_idx"], q["end_idx"]) == (
            min(r["evidence_sent_idx"]),
            max(r["evidence_sent_idx"]),
        )
        assert q.get("previous_answer") == r["previous_answer"]
    turns = [
        t for t in read_release_table(released_workdir, C, "dialogue").to_pylist() if t["evaluate"]
    ]
    assert len(back["turn"]) == len(turns)
    for t in turns:
        got = back["turn"][t["turn_id"]]
        assert (got["user"], got["expert"], got["grounded_sentence"]) == (
            t["user"],
            t["expert"],
            t["evidence_text"],
        )
        assert got["sentence_type"] == TURN_TYPE[t["type"]]
        dialogue = back["dialogue"][t["dialogue_id"]]
        assert dialogue["turn"][str(t["turn_idx"])] == t["turn_id"]
        assert t["dialogue_id"] in back["article_dialogue"][dialogue["article_id"]]


def test_cli_export_growover(released_workdir: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "g"
    assert (
        main(
            [
                "export-growover",
                "--release",
                C,
                "--workdir",
                str(released_workdir),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert (out / "turn.jsonl").exists()
