"""Tolerant JSON extraction from model output."""

from __future__ import annotations

import time

import pytest

from pipeline.models.llm.parsing import extract_json, json_instruction, with_json_instruction


def test_plain_object() -> None:
    assert extract_json('{"question": "Who?", "answer": "Ada"}') == {
        "question": "Who?",
        "answer": "Ada",
    }


def test_json_fence_with_prose_around() -> None:
    text = 'Sure! Here it is:\n```json\n{"answer": "Paris", "n": 3}\n```\nHope this helps.'
    assert extract_json(text) == {"answer": "Paris", "n": 3}


def test_bare_fence_without_language() -> None:
    assert extract_json('```\n{"a": [1, 2]}\n```') == {"a": [1, 2]}


def test_prose_before_and_after_without_fence() -> None:
    text = 'The answer, as JSON, is {"answer": "1999", "evidence": [2, 3]} -- done.'
    assert extract_json(text) == {"answer": "1999", "evidence": [2, 3]}


def test_nested_braces_and_quotes_inside_strings() -> None:
    text = 'Result: {"q": "What does {x} mean in \\"set {y}\\"?", "inner": {"k": "}"}} trailing'
    assert extract_json(text) == {
        "q": 'What does {x} mean in "set {y}"?',
        "inner": {"k": "}"},
    }


def test_trailing_commas_are_dropped() -> None:
    assert extract_json('{"a": [1, 2, 3,], "b": {"c": 1,},}') == {"a": [1, 2, 3], "b": {"c": 1}}


def test_trailing_comma_inside_string_is_kept() -> None:
    assert extract_json('{"a": "x,}", "b": 1,}') == {"a": "x,}", "b": 1}


def test_single_quotes_and_python_literals() -> None:
    text = "{'answer': 'it\\'s \"fine\"', 'ok': True, 'missing': None, 'n': 1.5e3}"
    assert extract_json(text) == {
        "answer": 'it\'s "fine"',
        "ok": True,
        "missing": None,
        "n": 1500.0,
    }


def test_apostrophe_in_double_quoted_string() -> None:
    assert extract_json('Here\'s mine: {"answer": "it\'s Ada\'s"}') == {"answer": "it's Ada's"}


def test_bare_keys_are_quoted() -> None:
    assert extract_json('{answer: "Paris", year: 2024}') == {"answer": "Paris", "year": 2024}


def test_skips_brace_prose_before_the_json() -> None:
    text = 'Note {citation needed} then {"answer": "ok"}'
    assert extract_json(text) == {"answer": "ok"}


def test_first_object_of_a_top_level_array() -> None:
    assert extract_json('[{"s": "a"}, {"s": "b"}]') == {"s": "a"}


@pytest.mark.parametrize(
    "text",
    [
        "",
        None,
        "no json here at all",
        "[1, 2, 3]",
        '{"answer": "cut off by max_tokens',
        '{"a": 1',
        "}}{{",
        "```json\n```",
    ],
)
def test_no_usable_json_returns_none(text: str | None) -> None:
    assert extract_json(text) is None


def test_unicode_and_escapes_survive() -> None:
    assert extract_json('{"name": "Zoë \\u00e9", "emoji": "🙂"}') == {
        "name": "Zoë é",
        "emoji": "🙂",
    }


def test_many_unbalanced_braces_stay_fast() -> None:
    text = "{" * 5000 + ' {"a": 1}'
    started = time.perf_counter()
    assert extract_json(text) in (None, {"a": 1})  # giving up on adversarial text is fine
    assert time.perf_counter() - started < 2.0


def test_json_instruction_appended_to_last_user_message() -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    messages = ({"role": "system", "content": "sys"}, {"role": "user", "content": "Q?"})
    out = with_json_instruction(messages, schema)
    assert out[0] == {"role": "system", "content": "sys"}
    assert out[1]["content"].startswith("Q?\n\n")
    assert '"answer"' in out[1]["content"] and "JSON" in out[1]["content"]
    assert messages[1]["content"] == "Q?"  # the input is not modified
    assert "JSON" in json_instruction(None)
