"""Phrasing temporal questions: the request, and every reason a phrasing is rejected."""

from __future__ import annotations

import json

import pytest

from pipeline.models.llm.scripted import ScriptedBackend
from pipeline.temporal.phrasing import REASONS, phrase_questions, phrasing_request, question_problem
from pipeline.temporal.questions import c2_specs, c3_specs, question_specs
from tests.scripted_llm import TEMPORAL_FAULTS, TEMPORAL_REASONS, good_answer, temporal_fault
from tests.temporal.test_questions import COACHES, fact

C2 = c2_specs(COACHES)[0]
C1 = [s for s in question_specs(COACHES) if s.category == "C1"][0]
TIMELINE = [s for s in question_specs(COACHES) if s.category == "timeline"][0]
C3 = c3_specs(
    [
        fact("n", "Adrian Newey", "will join", "Aston Martin", "2025-03"),
        fact("h", "Aston Martin", "will partner with", "Honda", "2026"),
    ]
)[0]

DAY = [s for s in question_specs([fact("d", "Lisa Su", "became CEO of", "AMD", "2014-10-08")])][0]

CASES = [
    (DAY, "Which company did Lisa Su become CEO of in October 2014?", None),  # the day may go
    (DAY, "Which company did Lisa Su become CEO of in 2014?", "time_not_named"),
    (C1, "Who was head coach of Chelsea F.C. in September 2022?", None),
    (C2, "Who coached Chelsea F.C. between September 2022 and July 2023?", None),
    (C3, "Which team will Adrian Newey join in March 2025 that partners with Honda in 2026?", None),
    (TIMELINE, "Who is the head coach of Chelsea F.C. now?", None),
    (C1, "Chelsea F.C. head coach in September 2022", "not_a_question"),
    (C1, "Who " + "really " * 40 + "coached Chelsea F.C. in September 2022?", "too_long"),
    (C1, "Was Graham Potter head coach of Chelsea F.C. in September 2022?", "answer_leaked"),
    (C2, "Did Potter or Mauricio Pochettino coach Chelsea F.C. in September 2022 - July 2023?",
     "answer_leaked"),
    (C1, "Who was head coach of Chelsea F.C. in 2022?", "time_not_named"),
    (C2, "Who coached Chelsea F.C. in September 2022?", "time_not_named"),
    (TIMELINE, "Who was the head coach of Chelsea F.C. in 2023?", "names_a_time"),
    (C1, "Who was the head coach in September 2022?", "entity_not_named"),
    (C3, "Which team will Adrian Newey join in March 2025 that partners in 2026?",
     "entity_not_named"),
    (C1, "Who was their head coach at Chelsea F.C. in September 2022?", "question_not_standalone"),
    (C1, "When did Chelsea F.C. appoint a head coach in September 2022?",
     "asks_for_another_kind"),
    (C1, "How many head coaches did Chelsea F.C. have in September 2022?",
     "asks_for_another_kind"),
    (C1, "In which year did Chelsea F.C. appoint a head coach, in September 2022?",
     "asks_for_another_kind"),
]  # fmt: skip


@pytest.mark.parametrize(("spec", "question", "reason"), CASES)
def test_question_problem(spec, question: str, reason: str | None) -> None:  # noqa: ANN001
    problem = question_problem(spec, question)
    assert (problem[0] if problem else None) == reason


def test_every_reason_is_exercised() -> None:
    # "no_template" and "ambiguous": tests/temporal/test_templates.py
    covered = {r for _, _, r in CASES if r} | set(TEMPORAL_REASONS.values())
    covered |= {"no_template", "ambiguous"}
    assert covered == set(REASONS)


def test_request_names_facts_answer_time_and_carries_the_schema() -> None:
    request = phrasing_request(C2)
    user = request.messages[-1]["content"].split("Now the real input.")[1]
    assert "1. Chelsea F.C. | head coach | Graham Potter | September 2022" in user
    assert "ANSWER: Graham Potter; Mauricio Pochettino" in user
    assert "TIME: between September 2022 and July 2023" in user
    assert request.json_schema["required"] == ["question"]
    assert request.purpose == "temporal_question"
    assert "TIME: now" in phrasing_request(TIMELINE).messages[-1]["content"]


def test_scripted_phrasings_pass_and_each_fault_is_rejected_with_its_reason() -> None:
    specs = [C1, C2, C3, TIMELINE]
    good = phrase_questions(specs, ScriptedBackend(good_answer))
    assert [p.reason for p in good] == [None] * 4, [(p.question, p.detail) for p in good]
    for fault in TEMPORAL_FAULTS:
        spec = TIMELINE if fault == "dated_now" else C1
        backend = ScriptedBackend(lambda r, fault=fault: temporal_fault(fault, r))
        (got,) = phrase_questions([spec], backend)
        assert got.reason == TEMPORAL_REASONS[fault], (fault, got)
    broken = ScriptedBackend(lambda r: json.dumps({"text": "no question key"}))
    assert phrase_questions([C1], broken)[0].reason == "no_usable_answer"
