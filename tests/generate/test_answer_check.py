"""Round-trip check: which answers agree, which requests are built, what fails an item."""

from __future__ import annotations

import pytest

from pipeline.generate.answer_check import answer_checks, answers_agree, disagreements
from pipeline.generate.qa import QAItem
from pipeline.models.llm.base import LLMResponse
from tests.generate.test_validate import qa

NEW_SENTENCE = "Mercedes finished 2023 second in the Constructors' Championship."
OLD_SENTENCE = "Mercedes finished 2022 third in the Constructors' Championship."


def item(**over: object) -> QAItem:
    """A QA item about the new sentence (the validator tests' builder, other text)."""
    base = {
        "title": "Mercedes-Benz in Formula One",
        "question": "Where did Mercedes finish in the 2023 Constructors' Championship?",
        "answer": "second",
        "evidence_sent_idx": [4],
        "evidence_text": NEW_SENTENCE,
    }
    return qa(**(base | over))


def changed_item() -> QAItem:
    return item(
        type="changed",
        origin="changed_sentence",
        question="Where did Mercedes finish in the Constructors' Championship?",
        previous_answer="third",
        old_evidence_sent_idx=[4],
        old_evidence_text=OLD_SENTENCE,
        previous_snapshot="2024-01-01",
    )


def answered(text: str | None, error: str | None = None) -> LLMResponse:
    parsed = None if text is None else {"answer": text}
    return LLMResponse(text=text or "", model="scripted", parsed=parsed, error=error)


@pytest.mark.parametrize(
    ("expected", "got"),
    [
        ("second", "second"),
        ("October 2014", "in October 2014"),  # the checker copied a preposition along
        ("Ballon d'Or 2023", "the Ballon d'Or"),  # token F1 2/3
        ("80 percent", "80%"),
        ("RCA Records", "RCA"),
    ],
)
def test_answers_that_agree(expected: str, got: str) -> None:
    assert answers_agree(expected, got)


@pytest.mark.parametrize(
    ("expected", "got"),
    [
        ("multi-billion dollar fraud", "a federal court in Miami"),
        ("second", "none"),
        ("second", ""),
        ("$936", "$169"),
    ],
)
def test_answers_that_do_not(expected: str, got: str) -> None:
    assert not answers_agree(expected, got)


def test_a_changed_pair_is_asked_against_both_sentences() -> None:
    checks = answer_checks([item(), changed_item()])
    assert [(c.field, c.expected) for c in checks] == [
        ("answer", "second"),
        ("answer", "second"),
        ("previous_answer", "third"),
    ]
    user = [m["content"] for m in checks[2].request.messages if m["role"] == "user"][0]
    real = user.rpartition("Now the real input.")[2]
    assert OLD_SENTENCE in real and NEW_SENTENCE not in real
    assert "Mercedes-Benz in Formula One" in real
    assert checks[2].request.purpose == "qa_check"
    assert checks[2].request.json_schema["required"] == ["answer"]


def test_disagreement_on_either_side_fails_the_item() -> None:
    new, changed = item(), changed_item()
    checks = answer_checks([new, changed])
    failed = disagreements(
        checks, [answered("second"), answered("second"), answered("second place")]
    )
    assert set(failed) == {id(changed)}
    assert "previous_answer 'third'" in failed[id(changed)]
    assert "'second place'" in failed[id(changed)]


def test_an_unanswered_check_fails_its_item() -> None:
    new = item()
    checks = answer_checks([new])
    failed = disagreements(checks, [answered(None, error="timeout")])
    assert "no answer (timeout)" in failed[id(new)]
