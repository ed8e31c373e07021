"""Dialogue requests over real paragraphs; turns typed from the labels of their sentences; the
checks of a dialogue and of its turns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.config import GenerationConfig
from pipeline.generate.dialogue import (
    Dialogue,
    DialogueTask,
    DialogueTurn,
    dialogue_task,
    good_turns,
    parse_dialogue,
)
from pipeline.generate.items import Reject
from pipeline.generate.prompts import prompt_hash
from pipeline.generate.selection import Article, dialogue_paragraphs, informative_paragraphs
from pipeline.generate.stage import attach_labels, load_articles
from pipeline.generate.validator import ItemValidator
from pipeline.models.llm.scripted import ScriptedBackend
from tests.generate.conftest import NEW, OLD, assert_rejected_for
from tests.scripted_llm import good_answer, user_text

# The tests marked slow build and label a real workdir (spaCy, MiniLM); the checks' tests do not.

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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


# ---- the checks of a dialogue and its turns (ItemValidator.score_dialogue, score_turns) ---------


TURN_SENTENCES = {
    10: "In 2015, Karpathy joined OpenAI as a founding member, working on deep learning.",
    11: "In 2017, he became the director of artificial intelligence at Tesla.",
}
# Turn k replies from sentence 10 + k % 2; the third turn brings another detail of sentence 10.
TURN_EXPERTS = [
    "Karpathy joined OpenAI in 2015 as one of its founding members.",
    "He became Tesla's director of artificial intelligence in 2017.",
    "At OpenAI he worked on deep learning.",
    "Tesla hired him in 2017 to direct its artificial intelligence work.",
]


def dialogue(n: int = 3, **turn_over: object) -> Dialogue:
    turns = [
        DialogueTurn(
            turn_idx=k,
            user=("Tell me about Karpathy.", "And then?", "What else?", "Go on.")[k % 4],
            expert=TURN_EXPERTS[k % 4],
            evidence_sent_idx=[10 + k % 2],
            evidence_text=TURN_SENTENCES[10 + k % 2],
            type="new",
        )
        for k in range(n)
    ]
    for key, value in turn_over.items():
        setattr(turns[-1], key, value)
    return Dialogue(1, "Andrej Karpathy", "2024-06-01", 4, turns, "h", "g", "{}")


V = ItemValidator()
QUESTIONS = ItemValidator(question_grammar=True)


CASES = [
    (lambda: V.score_dialogue(dialogue(2), n_sentences=20), "bad_turn_count"),
    (lambda: V.score_dialogue(dialogue(5), n_sentences=20), "bad_turn_count"),
    (lambda: V.score_dialogue(dialogue(expert=""), n_sentences=20), "empty_field"),
    (
        lambda: V.score_dialogue(dialogue(evidence_sent_idx=[99]), n_sentences=20),
        "evidence_out_of_range",
    ),
    (
        lambda: V.score_dialogue(dialogue(evidence_sent_idx=[3]), n_sentences=20, allowed=[10, 11]),
        "evidence_outside_input",
    ),
    (lambda: V.score_dialogue(dialogue(type="unlabeled"), n_sentences=20), "evidence_unlabeled"),
    (
        lambda: V.score_dialogue(dialogue(user="As mentioned above, he left."), n_sentences=20),
        "turn_leans_on_text",
    ),
    (
        lambda: V.score_dialogue(
            dialogue(expert="Karpathy joined OpenAI as a founding member in 2016."),
            n_sentences=20,
        ),
        "turn_not_grounded",
    ),
    (
        lambda: V.score_dialogue(
            dialogue(expert="See http://evil.example for the full story."), n_sentences=20
        ),
        "contains_url",
    ),
    (
        lambda: V.score_dialogue(dialogue(expert=TURN_EXPERTS[0]), n_sentences=20),
        "repeated_turn",
    ),
    # the question grammar (spaCy): each turn of a dialogue
    (
        lambda: QUESTIONS.score_turns(
            dialogue(expert="In 2015, Karpathy joined OpenAI, working on deep learning and")
        )[-1],
        "turn_cut_off",
    ),
    (
        lambda: QUESTIONS.score_turns(
            dialogue(expert="In 2015, Karpathy became a founding member of OpenAI, a rare honour.")
        )[-1],
        "turn_adds_claims",
    ),
    (
        lambda: QUESTIONS.score_turns(dialogue(user="When did he join OpenAI?"))[-1],
        "turn_not_answered",
    ),
    (  # the figure is 2021's (dev gold, 3M)
        lambda: QUESTIONS.score_turns(
            dialogue(
                user="How many employees does the company have?",
                expert="The company has approximately 95,000 employees.",
                evidence_text="As of 2021, the company had approximately 95,000 employees and "
                "operations in more than 70 countries.",
            )
        )[-1],
        "turn_drops_date",
    ),
    (  # one sentence does not list the others (dev gold, Department of Homeland Security)
        lambda: QUESTIONS.score_turns(dialogue(user="What other labs did Karpathy join?"))[-1],
        "turn_open_question",
    ),
    (
        lambda: QUESTIONS.score_turns(dialogue(user="What is his most recent role at OpenAI?"))[-1],
        "turn_premise_unstated",
    ),
    # an opening question that names nothing (real, from a Warner Bros. Discovery dialogue)
    (
        lambda: QUESTIONS.score_turns(dialogue(1, user="What is the new company called?"))[0],
        "question_names_nothing",
    ),
    # a reply that says nothing an earlier reply did not (a part of it)
    (
        lambda: V.score_turns(dialogue(expert="He joined OpenAI as a founding member."))[-1],
        "repeated_turn",
    ),
]


@pytest.mark.parametrize(("score", "reason"), CASES)
def test_each_failure_has_its_reason(score, reason: str) -> None:  # noqa: ANN001
    assert_rejected_for(score(), reason)


def test_a_dialogue_is_cut_before_its_first_bad_turn() -> None:
    # the fourth reply says "work", which its sentence does not: three good turns remain
    four = dialogue(4)
    verdicts = QUESTIONS.score_turns(four)
    assert [v.keep for v in verdicts] == [True, True, True, False]
    assert good_turns(verdicts, 3) == 3 and good_turns(verdicts, 4) == 0
    n, verdict = QUESTIONS.turns_to_keep(four, n_sentences=20)
    assert (n, verdict.reason) == (3, "turn_adds_claims")
    # a bad second turn leaves too few: the later turns build on it
    bad_second = dialogue(3)
    bad_second.turns[1].expert += " Critics praised it."
    assert QUESTIONS.turns_to_keep(bad_second, n_sentences=20)[0] == 0
    # a failure of the dialogue as a whole keeps nothing, whatever its turns
    n, verdict = QUESTIONS.turns_to_keep(dialogue(3), n_sentences=20, allowed=[3])
    assert (n, verdict.reason) == (0, "evidence_outside_input")
    assert QUESTIONS.turns_to_keep(dialogue(3), n_sentences=20)[0] == 3


@pytest.mark.parametrize(
    "expert",
    [
        "He was a founding member of OpenAI.",
        "Sure! Andrej Karpathy joined OpenAI in 2015 as a founding member.",
        "Yes, in 2015.",
        "In 2015 Karpathy joined OpenAI, as one of the founders.",  # "one" is not a number
    ],
)
def test_grounded_expert_turns_pass(expert: str) -> None:
    verdict = V.score_dialogue(dialogue(expert=expert), n_sentences=20)
    assert "turn_not_grounded" not in {c.name for c in verdict.failures}, verdict.detail


@pytest.mark.parametrize(
    ("expert", "why"),
    [
        ("Karpathy joined OpenAI as a founding member in 2016.", "number 2016"),
        ("He joined OpenAI with 12 colleagues in 2015.", "number 12"),
        ("Karpathy joined Google DeepMind as a research scientist.", "content words"),
        ("He studied physics at the University of Toronto.", "0/4"),
    ],
)
def test_ungrounded_expert_turns_are_rejected(expert: str, why: str) -> None:
    verdict = V.score_dialogue(dialogue(expert=expert), n_sentences=20)
    assert verdict.reason == "turn_not_grounded"
    detail = next(c.detail for c in verdict.failures if c.name == "turn_not_grounded")
    assert "turn 2" in detail and why in detail
    assert "turn 0" not in detail and "turn 1" not in detail
