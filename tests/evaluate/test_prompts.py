"""The evaluation prompts: placeholders, the JSON answer they ask for, passages and history."""

from __future__ import annotations

import pytest

from pipeline.evaluate.corpus import Passage
from pipeline.evaluate.harness import NO_PASSAGES, EvalItem, build_request, prediction_of
from pipeline.evaluate.retrievers import Hit
from pipeline.generate.prompts import load_prompt
from pipeline.models.llm.base import LLMResponse

PLACEHOLDERS = {
    "evaluate_qa": {"date", "passages", "question"},
    "evaluate_dialogue": {"date", "passages", "history", "user"},
    "evaluate_temporal_qa": {"date", "passages", "question"},
}


@pytest.mark.parametrize("name", sorted(PLACEHOLDERS))
def test_prompt_placeholders(name: str) -> None:
    template = load_prompt(name)
    assert template.placeholders == PLACEHOLDERS[name]
    assert "JSON" in template.system and "Reply as {" in template.user


def _item(kind: str, values: dict[str, str]) -> EvalItem:
    return EvalItem(kind, "i1", "new", "q", values, "2025-01-01", ["x"], ["e"])


def test_request_carries_passages_date_and_schema() -> None:
    passage = Passage(
        "p1", 1, "Andrej Karpathy", ("He founded Eureka Labs.",), ("2024-06-01",), False
    )
    request = build_request(_item("qa", {"question": "What did he found?"}), [Hit(passage, 1.0)])
    system, user = (m["content"] for m in request.messages)
    assert "Today is 2025-01-01." in system
    assert "[1] Andrej Karpathy (2024-06-01): He founded Eureka Labs." in user
    assert user.rstrip().endswith('Reply as {"answer": "..."}')
    assert request.json_schema["required"] == ["answer"] and request.purpose == "evaluate_qa"
    closed = build_request(_item("qa", {"question": "What did he found?"}), [])
    assert NO_PASSAGES in closed.messages[-1]["content"]
    turn = build_request(
        _item("dialogue", {"history": "User: hi\nAssistant: hello", "user": "more?"}), []
    )
    assert "User: hi\nAssistant: hello\nUser: more?" in turn.messages[-1]["content"]
    assert turn.json_schema["required"] == ["reply"]


def test_prediction_of_a_response() -> None:
    assert (
        prediction_of("qa", LLMResponse('{"answer": " Paris "}', "m", parsed={"answer": " Paris "}))
        == "Paris"
    )
    assert prediction_of("dialogue", LLMResponse("plain text", "m")) == "plain text"
    assert prediction_of("qa", LLMResponse("", "m", error="HTTP 500")) == ""
