"""Prompt templates: loading, hashing, rendering, the answer schemas they carry."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from pipeline.generate.prompts import (
    ANSWER_MODELS,
    PROMPT_NAMES,
    PROMPTS_DIR,
    answer_schema,
    load_prompt,
    number_sentences,
    parse_template,
    prompt_hash,
    prompt_hashes,
)

PLACEHOLDERS = {
    "qa_initial": {"title", "sentences", "max_words"},
    "qa_new": {"title", "sentences", "context", "max_words"},
    "qa_changed": {"title", "old_sentence", "new_sentence", "context", "max_words"},
    "dialogue": {"title", "sentences", "min_turns", "max_turns"},
    "quadruples": {"title", "sentences", "max_per_sentence"},
    "contradiction": {"old_sentence", "new_sentence"},
}
# Distinctive wording of the GrowOVER prompts (Appendix H): ours must say it differently.
PAPER_PHRASES = [
    "NOT DIRECTLY VISIBLE",
    "bounding box",
    "Be sure to follow the following format",
    "Information Dialogue Dataset",
    "Generate a Q&A pair",
    "parrot",
    "SHORT ANSWER",
    "Provide a question, an answer",
]


def _values(name: str) -> dict[str, object]:
    return {k: f"<{k}>" for k in PLACEHOLDERS[name]}


def _schema_keys(schema: dict) -> set[str]:
    keys = set(schema.get("properties", {}))
    for sub in schema.get("$defs", {}).values():
        keys |= set(sub.get("properties", {}))
    return keys


@pytest.mark.parametrize("name", PROMPT_NAMES)
def test_template_loads_with_hash_of_file_bytes(name: str) -> None:
    template = load_prompt(name)
    data = (PROMPTS_DIR / f"{name}.md").read_bytes()
    assert template.prompt_hash == hashlib.sha256(data).hexdigest()[:16]
    assert prompt_hash(name) == template.prompt_hash
    assert template.system and template.user
    assert template.placeholders == PLACEHOLDERS[name]


@pytest.mark.parametrize("name", PROMPT_NAMES)
def test_prompt_names_every_schema_key_and_asks_for_one_json_object(name: str) -> None:
    template = load_prompt(name)
    schema = answer_schema(name)
    text = template.system + template.user
    for key in _schema_keys(schema):
        assert f'"{key}"' in text, f"{name}: key {key} not spelled out in the prompt"
    assert "one JSON object" in text


@pytest.mark.parametrize("name", PROMPT_NAMES)
def test_prompts_are_in_our_own_words(name: str) -> None:
    text = (PROMPTS_DIR / f"{name}.md").read_text()
    for phrase in PAPER_PHRASES:
        assert phrase.lower() not in text.lower(), f"{name} reuses the paper's {phrase!r}"


@pytest.mark.parametrize("name", PROMPT_NAMES)
def test_request_carries_schema_hash_and_purpose(name: str) -> None:
    request = load_prompt(name).request(**_values(name))
    assert request.purpose == name
    assert request.prompt_hash == prompt_hash(name)
    assert request.json_schema == ANSWER_MODELS[name].model_json_schema()
    assert request.json_schema["additionalProperties"] is False
    assert set(request.json_schema["required"]) == set(request.json_schema["properties"])
    roles = [m["role"] for m in request.messages]
    assert roles == ["system", "user"]
    for key in PLACEHOLDERS[name]:
        assert f"<{key}>" in request.messages[1]["content"]
    assert not re.search(r"\{[a-z_]+\}", request.messages[1]["content"])


def test_render_is_single_pass_and_strict() -> None:
    template = load_prompt("qa_initial")
    messages = template.render(title="{sentences}", sentences="[0] a {b}", max_words=10)
    user = messages[-1]["content"]
    assert "Article title: {sentences}" in user  # inserted text is not expanded again
    assert "[0] a {b}" in user
    assert '{"question": "...", "answer": "...", "evidence": [index, ...]}' in user
    with pytest.raises(KeyError, match="missing"):
        template.render(title="x", sentences="y")
    with pytest.raises(KeyError, match="unknown"):
        template.render(title="x", sentences="y", max_words=3, colour="red")


def test_edited_template_gets_a_new_hash(tmp_path: Path) -> None:
    source = (PROMPTS_DIR / "qa_new.md").read_bytes()
    (tmp_path / "qa_new.md").write_bytes(source)
    assert prompt_hash("qa_new", tmp_path) == prompt_hash("qa_new")
    (tmp_path / "qa_new.md").write_bytes(source + b"\nOne more rule.\n")
    assert prompt_hash("qa_new", tmp_path) != prompt_hash("qa_new")
    assert set(prompt_hashes()) == set(PROMPT_NAMES)


def test_template_without_sections_is_all_user_text() -> None:
    template = parse_template("plain", b"Say {thing}.")
    assert template.system == ""
    assert template.render(thing="hi") == ({"role": "user", "content": "Say hi."},)
    with pytest.raises(ValueError, match="user"):
        parse_template("broken", b"<!-- system -->\nonly a system part")


def test_number_sentences_uses_article_indices() -> None:
    assert number_sentences((7, 8), ("A.", "B.")) == "[7] A.\n[8] B."
