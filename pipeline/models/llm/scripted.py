"""A deterministic LLM backend driven by a Python function, for tests of generation logic.

``ScriptedBackend(lambda request: '{"question": "...", "answer": "..."}')`` answers every
request with what the function returns (a string, or a full :class:`LLMResponse`), fills
``parsed`` with the same tolerant parser the real backends use, counts ``calls`` and keeps the
``requests`` it saw. A function that raises yields a response with ``error`` set, like a real
backend's failed request; pipeline errors (budget, configuration) still raise.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from pipeline.errors import WikidriftError
from pipeline.models.llm.base import LLMRequest, LLMResponse, OnResponse
from pipeline.models.llm.parsing import extract_json

Responder = Callable[[LLMRequest], "str | LLMResponse"]


def _rough_tokens(text: str) -> int:
    # The same 4-characters-per-token rule the cost ledger uses for estimates.
    return max(1, math.ceil(len(text) / 4)) if text else 0


class ScriptedBackend:
    """An LLMBackend whose answers come from ``responder(request)``."""

    def __init__(
        self,
        responder: Responder,
        *,
        model: str = "scripted",
        backend_id: str = "scripted",
    ) -> None:
        self.responder = responder
        self.model = model
        self.backend_id = backend_id
        self.calls = 0
        self.requests: list[LLMRequest] = []

    def complete_many(
        self, requests: list[LLMRequest], *, on_response: OnResponse | None = None
    ) -> list[LLMResponse]:
        """Answer each request with the responder, in order."""
        out = []
        for index, request in enumerate(requests):
            out.append(self._one(request))
            if on_response is not None:
                on_response(index, out[-1])
        return out

    def _one(self, request: LLMRequest) -> LLMResponse:
        self.calls += 1
        self.requests.append(request)
        try:
            answer = self.responder(request)
        except WikidriftError:
            raise
        except Exception as exc:  # a scripted failure stands for a failed request
            return LLMResponse(text="", model=self.model, error=f"{type(exc).__name__}: {exc}")
        if isinstance(answer, LLMResponse):
            if answer.parsed is None and answer.error is None:
                answer = replace(answer, parsed=extract_json(answer.text))
            return answer
        text = str(answer)
        prompt = "".join(m.get("content") or "" for m in request.messages)
        return LLMResponse(
            text=text,
            model=self.model,
            parsed=extract_json(text),
            prompt_tokens=_rough_tokens(prompt),
            completion_tokens=_rough_tokens(text),
        )
