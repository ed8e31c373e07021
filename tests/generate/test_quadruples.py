"""Quadruples: timestamp normalization, request chunks, tolerant parsing, types from labels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.config import GenerationConfig
from pipeline.generate.items import FieldError
from pipeline.generate.quadruples import (
    normalize_timestamp,
    parse_quadruples,
    quadruple_task,
    update_sentence_chunks,
)
from pipeline.generate.selection import Article
from pipeline.generate.stage import attach_labels, load_articles
from pipeline.models.llm.scripted import ScriptedBackend
from pipeline.text_checks import is_iso_timestamp
from tests.generate.conftest import NEW, OLD
from tests.scripted_llm import good_answer, user_text

CFG = GenerationConfig()
GEN = "scripted:scripted"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2024-02-13", "2024-02-13"),
        ("2024-2-3", "2024-02-03"),
        ("2024/02/13", "2024-02-13"),
        ("2024-02", "2024-02"),
        ("2024", "2024"),
        (2024, "2024"),
        (2024.0, "2024"),
        ("13 February 2024", "2024-02-13"),
        ("13th Feb. 2024", "2024-02-13"),
        ("February 13, 2024", "2024-02-13"),
        ("Sept 1 2023", "2023-09-01"),
        ("March 2024", "2024-03"),
        ("march, 2024", "2024-03"),
        ("2024-02-13T10:00:00Z", "2024-02-13"),
        ("2024-02-13 10:00", "2024-02-13"),
        (None, None),
        ("", None),
        ("null", None),
        ("Unknown", None),
        ("N/A", None),
        ("early 2024", "early 2024"),  # kept as written: validation rejects it
        ("2024-02-30", "2024-02-30"),
        ("Smarch 2024", "Smarch 2024"),
    ],
)
def test_normalize_timestamp(raw: object, expected: str | None) -> None:
    assert normalize_timestamp(raw) == expected
    if expected in ("early 2024", "2024-02-30", "Smarch 2024"):
        assert not is_iso_timestamp(expected)
    elif expected is not None:
        assert is_iso_timestamp(expected)


@pytest.mark.parametrize("raw", [True, ["2024"], {"year": 2024}])
def test_non_scalar_timestamp_is_wrong_type(raw: object) -> None:
    with pytest.raises(FieldError) as err:
        normalize_timestamp(raw)
    assert err.value.reason == "wrong_type"


def _article(labels: list[str], paras: list[int]) -> Article:
    n = len(labels)
    return Article(
        page_id=3,
        title="Acme Corp",
        snapshot=NEW,
        texts=[f"In {2000 + i} Acme Corp hired Person{i}." for i in range(n)],
        para_of=paras,
        section_of=[""] * n,
        labels=dict(enumerate(labels)),
        initial=False,
    )


def test_update_chunks_hold_new_and_changed_sentences_per_paragraph() -> None:
    art = _article(
        ["new"] * 8 + ["unchanged", "changed", "unlabeled", "new"] + ["changed"],
        [0] * 8 + [1, 1, 1, 1] + [2],
    )
    assert update_sentence_chunks(art, 6) == [(0, 1, 2, 3, 4, 5), (6, 7), (9, 11), (12,)]


def test_parse_keeps_good_records_and_rejects_bad_ones_alone() -> None:
    art = _article(["new", "changed", "unchanged"], [0, 0, 0])
    task = quadruple_task(art, (0, 1), CFG)
    assert "[0] In 2000 Acme Corp hired Person0." in user_text(task.request)
    instructions = task.request.messages[-1]["content"]
    assert f"At most {CFG.quadruples_per_sentence} records" in instructions
    records = [
        {
            "subject": "Acme Corp",
            "relation": "hired",
            "object": "Person0",
            "timestamp": "2000",
            "sentence": 0,
        },
        {"Subject": "Acme Corp", "Relation": "hired", "Object": "Person1", "sentence": "1"},
        {"subject": "Acme Corp", "object": "Person1", "timestamp": None, "sentence": 1},
        "Acme hired people",
        {
            "subject": "Acme Corp",
            "relation": "hired",
            "object": "X",
            "timestamp": [1],
            "sentence": 1,
        },
    ]
    payload = "Facts:\n" + json.dumps({"quadruples": records})
    response = ScriptedBackend(lambda _: payload).complete_many([task.request])[0]
    quads, rejects = parse_quadruples(task, response, GEN)
    assert [(q.object, q.timestamp, q.type) for q in quads] == [
        ("Person0", "2000", "new"),
        ("Person1", None, "changed"),  # omitted timestamp = null; type from the label
    ]
    assert all(q.observed_at == NEW == q.snapshot for q in quads)
    assert quads[1].evidence_sent_idx == [1] and quads[1].evidence_text == art.texts[1]
    assert [r.reason for r in rejects] == ["missing_field", "wrong_type", "wrong_type"]
    assert all(r.raw_output == payload and r.kind == "quadruple" for r in rejects)
    assert quads[0].item_id != quads[1].item_id


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ("no facts here", "no_json"),
        ('{"facts": []}', "missing_field"),
        ('{"quadruples": {"subject": "A"}}', "wrong_type"),
    ],
)
def test_unusable_quadruple_answers(payload: str, reason: str) -> None:
    art = _article(["new"], [0])
    task = quadruple_task(art, (0,), CFG)
    response = ScriptedBackend(lambda _: payload).complete_many([task.request])[0]
    quads, rejects = parse_quadruples(task, response, GEN)
    assert quads == [] and [r.reason for r in rejects] == [reason]


def test_empty_list_is_no_fact_and_no_reject() -> None:
    art = _article(["new"], [0])
    task = quadruple_task(art, (0,), CFG)
    response = ScriptedBackend(lambda _: '{"quadruples": []}').complete_many([task.request])[0]
    assert parse_quadruples(task, response, GEN) == ([], [])


@pytest.mark.slow
def test_real_dates_are_normalized(gen_source_workdir: Path) -> None:
    _, updated, _ = attach_labels(
        gen_source_workdir, OLD, NEW, load_articles(gen_source_workdir, NEW)
    )
    stamps = []
    for art in updated:
        for chunk in update_sentence_chunks(art, 6):
            task = quadruple_task(art, chunk, CFG)
            response = ScriptedBackend(good_answer).complete_many([task.request])[0]
            quads, rejects = parse_quadruples(task, response, GEN)
            assert rejects == []
            assert {q.type for q in quads} <= {"new", "changed"}
            stamps += [q.timestamp for q in quads if q.timestamp]
    assert stamps and all(is_iso_timestamp(s) for s in stamps)
    assert any(len(s) == 10 for s in stamps)  # "April 22, 1985"-style dates became YYYY-MM-DD
