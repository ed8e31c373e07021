"""The LLM double-check of candidate changed pairs (GrowOVER §3.2), as a
:class:`pipeline.labeling.align.ContradictionChecker` over any :class:`LLMBackend`."""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.generate.items import FieldError, field_value
from pipeline.generate.prompts import load_prompt
from pipeline.models.llm.base import LLMBackend, LLMResponse

_TRUE = {"true", "yes", "y", "1", "contradiction", "contradicts"}
_FALSE = {"false", "no", "n", "0", "no contradiction"}


def read_verdict(response: LLMResponse) -> bool | None:
    """``contradicts`` of a response as a bool; None for an error, no JSON or an unusable
    value (a model writing "yes"/"no" or "true"/"false" as text is accepted)."""
    if response.error or not isinstance(response.parsed, dict):
        return None
    try:
        value = field_value(response.parsed, "contradicts")
    except FieldError:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower().rstrip(".")
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    return None


class LLMContradictionChecker:
    """Asks the backend whether each (old, new) sentence pair contradicts; all pairs of a call
    go to the backend in one ``complete_many``."""

    def __init__(self, backend: LLMBackend, *, temperature: float = 0.0) -> None:
        self.backend = backend
        self.temperature = temperature
        self.template = load_prompt("contradiction")
        # The prompt hash is part of the id: a reworded prompt is a different checker.
        self.model_id = f"{backend.backend_id}:{backend.model}:{self.template.prompt_hash}"
        self.calls = 0
        self.last_responses: list[LLMResponse] = []

    def check(self, pairs: Sequence[tuple[str, str]]) -> list[bool | None]:
        """For each (old, new) pair: True = contradiction, False = none, None = no usable
        answer."""
        if not pairs:
            return []
        requests = [
            self.template.request(temperature=self.temperature, old_sentence=old, new_sentence=new)
            for old, new in pairs
        ]
        responses = self.backend.complete_many(requests)
        self.calls += 1
        self.last_responses = responses
        return [read_verdict(r) for r in responses]
