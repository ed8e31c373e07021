"""Item checks: normalization, grounding, leaning phrases, every rejection reason, dedup."""

from __future__ import annotations

import pytest

from pipeline.config import GenerationConfig
from pipeline.generate.items import Dialogue, DialogueTurn, QAItem, Quadruple
from pipeline.validate import (
    REASONS,
    ItemValidator,
    contains_normalized,
    is_grounded,
    is_iso_timestamp,
    leaning_phrase,
    normalize_answer,
    quadruple_key,
    question_key,
    split_duplicates,
)

EVIDENCE = (
    "A year later on February 13, 2024, an OpenAI spokesperson confirmed that Karpathy had "
    "left OpenAI. He had 1,200 students and two co-authors at Université de Montréal."
)
OLD = "He has been CEO of IBM since April 2020 and chairman since January 2021."
NEW = "He has been CEO of IBM since April 2020 and chairman since January 2022."


def qa(**over: object) -> QAItem:
    base: dict[str, object] = {
        "page_id": 1,
        "title": "Andrej Karpathy",
        "snapshot": "2024-06-01",
        "type": "new",
        "origin": "new_sentences",
        "question": "When did an OpenAI spokesperson confirm Karpathy's departure?",
        "answer": "February 13, 2024",
        "evidence_sent_idx": [13],
        "evidence_text": EVIDENCE,
        "prompt_hash": "h",
        "generator": "scripted:scripted",
        "raw_output": "{}",
    }
    return QAItem(**(base | over))  # type: ignore[arg-type]


def changed(**over: object) -> QAItem:
    return qa(
        **{
            "type": "changed",
            "origin": "changed_sentence",
            "question": "Since when has Arvind Krishna been chairman of IBM?",
            "previous_answer": "January 2021",
            "answer": "January 2022",
            "evidence_text": NEW,
            "old_evidence_sent_idx": [1],
            "old_evidence_text": OLD,
            "evidence_sent_idx": [1],
        }
        | over
    )


def quad(**over: object) -> Quadruple:
    base: dict[str, object] = {
        "page_id": 1,
        "title": "Andrej Karpathy",
        "snapshot": "2024-06-01",
        "subject": "Andrej Karpathy",
        "relation": "left",
        "object": "OpenAI",
        "timestamp": "2024-02-13",
        "evidence_sent_idx": [13],
        "evidence_text": EVIDENCE,
        "type": "new",
        "prompt_hash": "h",
        "generator": "g",
    }
    return Quadruple(**(base | over))  # type: ignore[arg-type]


def dialogue(n: int = 3, **turn_over: object) -> Dialogue:
    turns = [
        DialogueTurn(
            turn_idx=k,
            user=f"Tell me about point {k}.",
            expert="He left OpenAI in 2024.",
            evidence_sent_idx=[10 + k % 2],
            evidence_text="x",
            type="new",
        )
        for k in range(n)
    ]
    for key, value in turn_over.items():
        setattr(turns[-1], key, value)
    return Dialogue(1, "Andrej Karpathy", "2024-06-01", 4, turns, "h", "g", "{}")


V = ItemValidator()


def test_normalize_answer() -> None:
    assert normalize_answer("The 1,200 Students!") == "1200 students"
    assert normalize_answer("Université de Montréal") == "universite de montreal"
    assert normalize_answer("two co-authors") == "2 co authors"
    assert normalize_answer("21st") == "21"
    assert normalize_answer("3.5%") == "3.5 percent"
    assert normalize_answer("A & B") == "and b"  # "a" is an article
    assert normalize_answer("") == ""


def test_grounding_is_whole_token_and_list_aware() -> None:
    assert is_grounded("February 13, 2024", EVIDENCE)
    assert is_grounded("the OpenAI", EVIDENCE)
    assert is_grounded("1200 students", EVIDENCE)
    assert is_grounded("Universite de Montreal", EVIDENCE)
    assert is_grounded("OpenAI and Karpathy", EVIDENCE)  # each part is there
    assert not is_grounded("Open", EVIDENCE)  # not a whole token
    assert not is_grounded("Tesla", EVIDENCE)
    assert not is_grounded("", EVIDENCE)
    assert not contains_normalized("the", EVIDENCE)


@pytest.mark.parametrize(
    "question",
    [
        "According to the passage, who left OpenAI?",
        "according to this text, who left?",
        "In the paragraph, which company is named?",
        "Based on the context, when did he leave?",
        "Who is the person mentioned above?",
        "As stated, what did the spokesperson confirm?",
        "What does the new sentence say about the CEO?",
        "From the given article, who is the chairman?",
        "What does this passage describe?",
    ],
)
def test_leaning_questions_are_caught(question: str) -> None:
    assert leaning_phrase(question)


@pytest.mark.parametrize(
    "question",
    [
        "Who confirmed Karpathy's departure from OpenAI in 2024?",
        "Which article of the US Constitution covers impeachment?",
        "In which context was the Model Y first shown?",
        "What passage did Magellan find?",
        "When was the passage of the Affordable Care Act?",
    ],
)
def test_standalone_questions_pass(question: str) -> None:
    assert leaning_phrase(question) is None


def test_iso_timestamps() -> None:
    for ok in ("2024", "2024-02", "2024-02-29"):
        assert is_iso_timestamp(ok)
    for bad in ("2023-02-29", "2024-13", "24-02-01", "2024/02/01", "Feb 2024", "2024-2"):
        assert not is_iso_timestamp(bad)


def test_good_items_pass_every_check() -> None:
    for verdict in (
        V.score_qa(qa(), n_sentences=20, allowed=[12, 13]),
        V.score_qa(changed(), n_sentences=20, allowed=[1]),
        V.score_dialogue(dialogue(), n_sentences=20, allowed=[10, 11]),
        V.score_dialogue(dialogue(4), n_sentences=20, allowed=[10, 11]),
        V.score_quadruple(quad(), n_sentences=20, allowed=[13]),
        V.score_quadruple(quad(timestamp=None), n_sentences=20),
    ):
        assert verdict.keep, verdict.detail
        assert verdict.reason is None and verdict.detail == ""


CASES = [
    (lambda: V.score_qa(qa(question=""), n_sentences=20), "empty_field"),
    (lambda: V.score_qa(qa(evidence_sent_idx=[]), n_sentences=20), "empty_field"),
    (lambda: V.score_qa(qa(evidence_sent_idx=[20]), n_sentences=20), "evidence_out_of_range"),
    (lambda: V.score_qa(qa(), n_sentences=20, allowed=[1, 2]), "evidence_outside_input"),
    (
        lambda: V.score_qa(qa(question="According to the text, when?"), n_sentences=20),
        "question_leans_on_text",
    ),
    (
        lambda: V.score_qa(
            qa(
                answer="A year later an OpenAI spokesperson confirmed that Karpathy had left OpenAI"
            ),
            n_sentences=20,
        ),
        "answer_too_long",
    ),
    (lambda: V.score_qa(qa(answer="No"), n_sentences=20), "yes_no_answer"),
    (
        lambda: V.score_qa(
            qa(question="Did Karpathy leave OpenAI?", answer="OpenAI"), n_sentences=20
        ),
        "answer_in_question",
    ),
    (lambda: V.score_qa(qa(answer="Tesla"), n_sentences=20), "answer_not_grounded"),
    (
        lambda: V.score_qa(changed(previous_answer="March 2019"), n_sentences=20),
        "previous_answer_not_grounded",
    ),
    (
        lambda: V.score_qa(
            changed(previous_answer="April 2020", answer="april 2020."), n_sentences=20
        ),
        "answers_identical",
    ),
    (lambda: V.score_qa(changed(previous_answer=" "), n_sentences=20), "empty_field"),
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
    (lambda: V.score_quadruple(quad(relation=" "), n_sentences=20), "empty_field"),
    (lambda: V.score_quadruple(quad(timestamp="Feb 2024"), n_sentences=20), "bad_timestamp"),
    (
        lambda: V.score_quadruple(quad(timestamp="2019-05"), n_sentences=20),
        "timestamp_not_in_evidence",
    ),
    (
        lambda: V.score_quadruple(quad(subject="Tesla", object="Autopilot"), n_sentences=20),
        "quadruple_not_grounded",
    ),
    (
        lambda: V.score_quadruple(quad(evidence_sent_idx=[-1]), n_sentences=20),
        "evidence_out_of_range",
    ),
]


@pytest.mark.parametrize(("score", "reason"), CASES)
def test_each_failure_has_its_reason(score, reason: str) -> None:  # noqa: ANN001
    verdict = score()
    assert not verdict.keep
    assert verdict.reason == reason
    assert reason in verdict.detail
    assert reason in REASONS


def test_every_content_reason_is_exercised() -> None:
    parse_reasons = {"llm_error", "no_json", "missing_field", "wrong_type", "duplicate"}
    assert {reason for _, reason in CASES} == set(REASONS) - parse_reasons


def test_scores_are_kept_for_every_check() -> None:
    verdict = V.score_qa(
        qa(answer="Tesla Motors of Palo Alto in the state of California, USA, North America"),
        n_sentences=20,
    )
    failed = {c.name for c in verdict.failures}
    assert failed == {"answer_too_long", "answer_not_grounded"}
    assert len(verdict.checks) > len(failed)  # passed checks are recorded too


def test_nli_hook_decides_only_when_strings_do_not_match() -> None:
    calls: list[tuple[str, str]] = []

    def nli(premise: str, hypothesis: str) -> bool:
        calls.append((premise, hypothesis))
        return "departed" in hypothesis

    v = ItemValidator(grounding_nli=nli)
    assert v.score_qa(qa(), n_sentences=20).keep
    assert calls == []
    assert v.score_qa(qa(answer="departed"), n_sentences=20).keep
    assert calls == [(EVIDENCE, f"{qa().question} departed")]
    assert v.score_qa(qa(answer="Tesla"), n_sentences=20).reason == "answer_not_grounded"


def test_limits_come_from_the_config() -> None:
    v = ItemValidator.from_config(
        GenerationConfig(answer_max_words=2, dialogue_min_turns=2, dialogue_max_turns=2)
    )
    assert v.score_qa(qa(), n_sentences=20).reason == "answer_too_long"  # 3 words
    assert v.score_dialogue(dialogue(2), n_sentences=20).keep


def test_duplicates_within_an_article() -> None:
    items = [
        qa(),
        qa(question="When did an OpenAI spokesperson confirm Karpathy's departure"),
        qa(page_id=2),
        qa(question="Who left OpenAI?", answer="Karpathy"),
    ]
    kept, dups = split_duplicates(items, question_key, lambda q: q.page_id)
    assert kept == [items[0], items[2], items[3]]
    assert dups == [items[1]]
    quads = [quad(), quad(object="the OpenAI"), quad(timestamp=None)]
    kept_q, dups_q = split_duplicates(quads, quadruple_key, lambda q: q.page_id)
    assert kept_q == [quads[0], quads[2]] and dups_q == [quads[1]]
