"""Round-trip check of QA pairs: the model answers each question again from its evidence.

A small model often writes a question that its own answer does not fit ("What was the result
of the lawsuit?" -> "multi-billion dollar fraud") or one that asks for something else in the
sentence. Asking the question back, with only the evidence sentence in view, and keeping the
pair only when both answers agree filters those (round-trip consistency, as used to filter
synthetic QA corpora). A changed QA pair is asked twice: its current answer against the new
sentence and its earlier answer against the old one, since the question must fit both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipeline.generate.prompts import load_prompt
from pipeline.models.llm.base import LLMRequest, LLMResponse
from pipeline.text_checks import normalize_answer

if TYPE_CHECKING:  # annotations only: pipeline.generate.qa imports this module
    from pipeline.generate.qa import QAItem

# Token F1 at which a differently cut answer ("the Ballon d'Or" / "Ballon d'Or 2023") counts
# as the same answer; SQuAD-style evaluations use the same measure.
AGREEMENT_F1 = 0.5


@dataclass(eq=False)
class AnswerCheck:
    """One check request: ``item``'s ``field`` ("answer" / "previous_answer") asked back."""

    item: QAItem
    field: str
    request: LLMRequest

    @property
    def expected(self) -> str:
        """The answer the pair claims."""
        return (self.item.answer if self.field == "answer" else self.item.previous_answer) or ""


def answer_checks(items: Sequence[QAItem]) -> list[AnswerCheck]:
    """The check requests of ``items``: one per answer (two for a changed pair)."""
    template = load_prompt("qa_check")
    checks = []
    for item in items:
        sides = [("answer", item.evidence_text)]
        if item.type == "changed":
            sides.append(("previous_answer", item.old_evidence_text or ""))
        for name, sentence in sides:
            request = template.request(title=item.title, sentence=sentence, question=item.question)
            checks.append(AnswerCheck(item, name, request))
    return checks


def answers_agree(expected: str, got: str) -> bool:
    """Whether the checker's answer ``got`` is the pair's answer ``expected``: one holds the
    other after normalization, or their tokens overlap with F1 >= :data:`AGREEMENT_F1`."""
    a, b = normalize_answer(expected), normalize_answer(got)
    if not a or not b or b == "none":
        return False
    if f" {a} " in f" {b} " or f" {b} " in f" {a} ":
        return True
    ta, tb = a.split(), b.split()
    common = sum(min(ta.count(t), tb.count(t)) for t in set(ta))
    if common == 0:
        return False
    precision, recall = common / len(tb), common / len(ta)
    return 2 * precision * recall / (precision + recall) >= AGREEMENT_F1


def disagreements(
    checks: Sequence[AnswerCheck], responses: Sequence[LLMResponse]
) -> dict[int, str]:
    """``id(item) -> detail`` for every item whose question was answered differently (or not
    at all) from its evidence. An errored or unparsable check answer fails the item too: an
    unchecked pair is not known to be right."""
    failed: dict[int, str] = {}
    for check, response in zip(checks, responses, strict=True):
        parsed = response.parsed if response.error is None else None
        got = parsed.get("answer") if isinstance(parsed, dict) else None
        if isinstance(got, str) and answers_agree(check.expected, got):
            continue
        said = repr(got) if isinstance(got, str) else f"no answer ({response.error or 'no JSON'})"
        detail = f"{check.field} {check.expected!r}: asked back, the model answered {said}"
        key = id(check.item)
        failed[key] = f"{failed[key]}; {detail}" if key in failed else detail
    return failed
