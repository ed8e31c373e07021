"""Prompt templates: loading, hashing, rendering, the answer schemas they carry."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from pipeline.generate.kinds import SHARED_PROMPTS, generation_prompt_names, item_generators
from pipeline.generate.prompts import (
    ANSWER_MODELS,
    LABELING_PROMPT_NAMES,
    PROMPTS_DIR,
    TEMPORAL_PROMPT_NAMES,
    answer_schema,
    load_prompt,
    number_sentences,
    parse_template,
    prompt_hash,
    prompt_hashes,
)

PLACEHOLDERS = {
    "qa_initial": {"title", "sentences", "candidates"},
    "qa_new": {"title", "sentences", "context", "candidates"},
    "qa_changed": {"title", "old_sentence", "new_sentence", "previous", "answer", "context"},
    "qa_check": {"title", "sentence", "question"},
    "dialogue": {"title", "sentences", "min_turns", "max_turns"},
    "quadruples": {"title", "sentences", "max_per_sentence"},
    "contradiction": {"old_sentence", "new_sentence"},
    "temporal_question": {"facts", "answer", "time", "kind"},
    "update_check": {"old_marked", "new_sentence"},
}
# Every template with a system part and an answer schema (follow-up turns have neither).
KIND_PROMPTS = tuple(p for g in item_generators() for p in g.prompts)
ALL_PROMPTS = KIND_PROMPTS + SHARED_PROMPTS + TEMPORAL_PROMPT_NAMES + LABELING_PROMPT_NAMES
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


@pytest.mark.parametrize("name", ALL_PROMPTS)
def test_template_loads_with_hash_of_file_bytes(name: str) -> None:
    template = load_prompt(name)
    data = (PROMPTS_DIR / f"{name}.md").read_bytes()
    assert template.prompt_hash == hashlib.sha256(data).hexdigest()[:16]
    assert prompt_hash(name) == template.prompt_hash
    assert template.system and template.user
    assert template.placeholders == PLACEHOLDERS[name]


@pytest.mark.parametrize("name", ALL_PROMPTS)
def test_prompt_names_every_schema_key_and_asks_for_one_json_object(name: str) -> None:
    template = load_prompt(name)
    schema = answer_schema(name)
    text = template.system + template.user
    for key in _schema_keys(schema):
        assert f'"{key}"' in text, f"{name}: key {key} not spelled out in the prompt"
    assert "one JSON object" in text


@pytest.mark.parametrize("name", ALL_PROMPTS)
def test_prompts_are_in_our_own_words(name: str) -> None:
    text = (PROMPTS_DIR / f"{name}.md").read_text()
    for phrase in PAPER_PHRASES:
        assert phrase.lower() not in text.lower(), f"{name} reuses the paper's {phrase!r}"


@pytest.mark.parametrize("name", ALL_PROMPTS)
def test_request_carries_schema_hash_and_purpose(name: str) -> None:
    request = load_prompt(name).request(**_values(name))
    assert request.purpose == name
    assert request.prompt_hash == prompt_hash(name)
    assert request.json_schema == answer_schema(name)
    assert list(request.json_schema["properties"]) == list(ANSWER_MODELS[name].model_fields)
    assert request.json_schema["additionalProperties"] is False
    assert set(request.json_schema["required"]) == set(request.json_schema["properties"])
    roles = [m["role"] for m in request.messages]
    assert roles == ["system", "user"]
    for key in PLACEHOLDERS[name]:
        assert f"<{key}>" in request.messages[1]["content"]
    assert not re.search(r"\{[a-z_]+\}", request.messages[1]["content"])


def test_render_is_single_pass_and_strict() -> None:
    template = load_prompt("qa_initial")
    messages = template.render(title="{sentences}", sentences="[0] a {b}", candidates='[0] "a"')
    user = messages[-1]["content"]
    assert "Article title: {sentences}" in user  # inserted text is not expanded again
    assert "[0] a {b}" in user
    assert user.endswith('[0] a {b}\nCandidate answers:\n[0] "a"\nAnswer:')  # the article last
    with pytest.raises(KeyError, match="missing"):
        template.render(title="x", sentences="y")
    with pytest.raises(KeyError, match="unknown"):
        template.render(title="x", sentences="y", candidates="z", colour="red")


@pytest.mark.parametrize("name", ALL_PROMPTS)
def test_the_article_comes_after_everything_fixed(name: str) -> None:
    """Instructions and the worked example come first, so that every request of a kind
    shares one prefix the local server keeps cached; the article's text comes last."""
    user = load_prompt(name).user
    data = PLACEHOLDERS[name] & {
        "title",
        "sentences",
        "context",
        "old_sentence",
        "new_sentence",
        "facts",
        "candidates",
        "previous",
        "answer",
    }
    first = min(user.index("{" + p + "}") for p in data)
    assert "Now the real input." in user[:first]
    assert "Example" in user[:first]


def test_answer_schema_pins_indices_sizes_and_lengths() -> None:
    schema = answer_schema("dialogue", indices=(8, 3, 3), min_items=3, max_items=4)
    turns = schema["properties"]["turns"]
    assert (turns["minItems"], turns["maxItems"]) == (3, 4)
    turn = schema["$defs"]["DialogueTurnAnswer"]["properties"]
    assert turn["sentence"]["enum"] == [3, 8]
    assert turn["expert"]["maxLength"] > turn["user"]["maxLength"] > 0
    assert list(answer_schema("qa_initial")["properties"]) == ["answer", "question"]
    assert list(answer_schema("qa_changed")["properties"]) == ["question"]
    quads = answer_schema("quadruples")["$defs"]["QuadrupleAnswer"]["properties"]
    assert {"type": "null"} in quads["timestamp"]["anyOf"]
    assert "title" not in json.dumps(schema) and "description" not in json.dumps(schema)


def test_edited_template_gets_a_new_hash(tmp_path: Path) -> None:
    source = (PROMPTS_DIR / "qa_new.md").read_bytes()
    (tmp_path / "qa_new.md").write_bytes(source)
    assert prompt_hash("qa_new", tmp_path) == prompt_hash("qa_new")
    (tmp_path / "qa_new.md").write_bytes(source + b"\nOne more rule.\n")
    assert prompt_hash("qa_new", tmp_path) != prompt_hash("qa_new")
    names = generation_prompt_names()
    assert list(prompt_hashes(names)) == [*KIND_PROMPTS, *SHARED_PROMPTS, "qa_retry"]


def test_template_without_sections_is_all_user_text() -> None:
    template = parse_template("plain", b"Say {thing}.")
    assert template.system == ""
    assert template.render(thing="hi") == ({"role": "user", "content": "Say hi."},)
    with pytest.raises(ValueError, match="user"):
        parse_template("broken", b"<!-- system -->\nonly a system part")


def test_number_sentences_uses_article_indices() -> None:
    assert number_sentences((7, 8), ("A.", "B.")) == "[7] A.\n[8] B."


def test_a_kind_brings_its_own_answer_model_and_limits() -> None:
    from pydantic import BaseModel, ConfigDict

    class Pick(BaseModel):
        model_config = ConfigDict(extra="forbid")
        sentence: int
        blank: str
        answer: str

    class Picks(BaseModel):
        model_config = ConfigDict(extra="forbid")
        items: list[Pick]

    schema = answer_schema(Picks, indices=[4, 2], max_items=2, max_chars={"blank": 30})
    pick = schema["$defs"]["Pick"]["properties"]
    assert pick["sentence"]["enum"] == [2, 4]
    assert pick["blank"]["maxLength"] == 30  # its own field
    assert pick["answer"]["maxLength"] == 80  # the shared cap
    assert schema["properties"]["items"]["maxItems"] == 2
    request = load_prompt("quadruples").request(
        schema=schema, max_tokens=123, **_values("quadruples")
    )
    assert request.max_tokens == 123 and request.json_schema == schema
    assert load_prompt("quadruples").request(**_values("quadruples")).max_tokens == 900
