"""Dialogue requests over real paragraphs; turns typed from the labels of their sentences."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.config import GenerationConfig
from pipeline.generate.dialogue import DialogueTask, dialogue_task, parse_dialogue
from pipeline.generate.items import Dialogue, Reject
from pipeline.generate.prompts import prompt_hash
from pipeline.generate.selection import Article, dialogue_paragraphs, informative_paragraphs
from pipeline.generate.stage import attach_labels, load_articles
from pipeline.generate.validate import ItemValidator
from pipeline.models.llm.scripted import ScriptedBackend
from tests.generate.conftest import NEW, OLD
from tests.scripted_llm import good_answer, user_text

pytestmark = pytest.mark.slow  # builds and labels a real workdir (spaCy, MiniLM)

CFG = GenerationConfig()
GEN = "scripted:scripted"


@pytest.fixture(scope="module")
def split(gen_source_workdir: Path) -> tuple[list[Article], list[Article]]:
    initial, updated, _ = attach_labels(
        gen_source_workdir, OLD, NEW, load_articles(gen_source_workdir, NEW)
    )
    return initial, updated


def _run(task: DialogueTask, responder) -> Dialogue | Reject:  # noqa: ANN001
    return parse_dialogue(task, ScriptedBackend(responder).complete_many([task.request])[0], GEN)


def _turn(user: str, expert: str, sentence: object) -> dict[str, object]:
    return {"user": user, "expert": expert, "sentence": sentence}


def test_request_shows_the_paragraph_and_turn_limits(
    split: tuple[list[Article], list[Article]],
) -> None:
    art = split[0][0]
    para = informative_paragraphs(art, CFG)[0]
    task = dialogue_task(art, para, CFG)
    text = user_text(task.request)
    assert f"Topic: {art.title}" in text
    for i, t in zip(para.sent_idx, para.texts, strict=True):
        assert f"[{i}] {t}" in text
    assert "3 to 4 turns" in text
    assert task.offered == para.sent_idx
    assert task.request.prompt_hash == prompt_hash("dialogue")


def test_turns_are_typed_from_sentence_labels(split: tuple[list[Article], list[Article]]) -> None:
    _, updated = split
    seen: set[str] = set()
    validator = ItemValidator.from_config(CFG)
    for art in updated:
        for para in dialogue_paragraphs(art, CFG):
            task = dialogue_task(art, para, CFG)
            dialogue = _run(task, good_answer)
            assert isinstance(dialogue, Dialogue)
            assert validator.score_dialogue(
                dialogue, n_sentences=art.n_sentences, allowed=task.offered
            ).keep
            for turn in dialogue.turns:
                (idx,) = turn.evidence_sent_idx
                assert turn.type == art.labels[idx]
                assert turn.evidence_text == art.texts[idx]
                seen.add(turn.type)
            rows = dialogue.rows()
            assert [r["turn_id"] for r in rows] == [
                f"{dialogue.dialogue_id}:{k}" for k in range(len(rows))
            ]
            assert {r["para_idx"] for r in rows} == {para.para_idx}
            assert all(r["n_turns"] == len(rows) for r in rows)
    assert "new" in seen and len(seen) >= 2  # the real labels give more than one type


def test_from_scratch_articles_have_new_turns_only(
    split: tuple[list[Article], list[Article]],
) -> None:
    art = split[0][0]
    paragraphs = informative_paragraphs(art, CFG)
    assert paragraphs
    for para in paragraphs:
        dialogue = _run(dialogue_task(art, para, CFG), good_answer)
        assert isinstance(dialogue, Dialogue)
        assert {t.type for t in dialogue.turns} == {"new"}


def test_tolerant_turn_parsing(split: tuple[list[Article], list[Article]]) -> None:
    art = split[0][0]
    para = informative_paragraphs(art, CFG)[0]
    i = para.sent_idx[-1]
    turns = [
        {"User": "Hi", "Expert": "Hello.", "Sentence": f"[{i}]"},
        _turn("So?", "Indeed.", [i]),
        _turn("And?", "Yes.", float(i)),
    ]
    dialogue = _run(dialogue_task(art, para, CFG), lambda _: json.dumps({"turns": turns}))
    assert isinstance(dialogue, Dialogue)
    assert [t.evidence_sent_idx for t in dialogue.turns] == [[i]] * 3
    assert [t.user for t in dialogue.turns] == ["Hi", "So?", "And?"]
    assert (
        dialogue.dialogue_id
        == _run(dialogue_task(art, para, CFG), lambda _: json.dumps({"turns": turns})).dialogue_id
    )  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ("Let me write a dialogue for you.", "no_json"),
        (json.dumps({"dialogue": []}), "missing_field"),
        (json.dumps({"turns": "user asks"}), "wrong_type"),
        (json.dumps({"turns": [_turn("a", "b", 0), "c"]}), "wrong_type"),
        (json.dumps({"turns": [{"user": "a", "sentence": 0}]}), "missing_field"),
        (json.dumps({"turns": [_turn("a", "b", "the first one")]}), "wrong_type"),
    ],
)
def test_unusable_dialogues_are_rejected_whole(
    split: tuple[list[Article], list[Article]], payload: str, reason: str
) -> None:
    art = split[0][0]
    rejected = _run(dialogue_task(art, informative_paragraphs(art, CFG)[0], CFG), lambda _: payload)
    assert isinstance(rejected, Reject)
    assert (rejected.kind, rejected.reason, rejected.raw_output) == ("dialogue", reason, payload)


def test_out_of_range_turn_is_typed_unlabeled_and_rejected(
    split: tuple[list[Article], list[Article]],
) -> None:
    art = split[0][0]
    para = informative_paragraphs(art, CFG)[0]
    turns = [_turn("a", "b", para.sent_idx[0]), _turn("c", "d", 999), _turn("e", "f", 0)]
    dialogue = _run(dialogue_task(art, para, CFG), lambda _: json.dumps({"turns": turns}))
    assert isinstance(dialogue, Dialogue)
    assert dialogue.turns[1].type == "unlabeled" and dialogue.turns[1].evidence_text == ""
    verdict = ItemValidator().score_dialogue(
        dialogue, n_sentences=art.n_sentences, allowed=para.sent_idx
    )
    assert verdict.reason == "evidence_out_of_range"
