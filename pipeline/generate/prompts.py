"""Prompt templates (``prompts/<name>.md``) and the JSON shape each answer must take.

A template file holds a system part and a user part, each introduced by an HTML comment line
(``<!-- system -->`` / ``<!-- user -->``) so the file still reads as Markdown. Placeholders
are ``{lowercase_name}``; any other brace (the JSON examples in the templates) is literal, so
templates need no brace escaping. A template is versioned by content: ``prompt_hash`` is the
first 16 hex digits of the sha256 of the file's bytes, and every request and item carries it.

Each answer type is a pydantic model (an :class:`AnswerModel`); its JSON schema travels with
the request so a backend with structured outputs can enforce it, while the others get the same
keys from the prompt text and are parsed tolerantly. An item kind's answer models live in its
module, which adds them to :data:`ANSWER_MODELS` (:func:`register_answer_models`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from pipeline import package_path
from pipeline.dates import MONTH_NAMES
from pipeline.models.llm.base import LLMRequest

PROMPTS_DIR = package_path("prompts")
# The generation stage's templates are named by the item kinds' generators
# (pipeline.generate.kinds.generation_prompt_names).
# Prompts of later stages: not part of the generation stage's prompt hashes.
TEMPORAL_PROMPT_NAMES = ("temporal_question",)
# The labeling stage's update judge (pipeline.labeling.changes): hashed into the labels' digest.
LABELING_PROMPT_NAMES = ("update_check",)

_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
_SECTION = re.compile(r"^<!--\s*(system|user)\s*-->\s*$", re.MULTILINE)


class AnswerModel(BaseModel):
    """The base of every answer model."""

    # extra="forbid" puts additionalProperties: false in the schema (strict structured outputs).
    model_config = ConfigDict(extra="forbid")


# Field order is the order the model writes them in (constrained decoding follows the schema):
# the sentence is chosen first, then the text written from it; a verdict comes after its
# reason.


class ContradictionAnswer(AnswerModel):
    """Answer of ``contradiction``."""

    reason: str
    contradicts: bool


class UpdateCheckAnswer(AnswerModel):
    """Answer of ``update_check``: the words of the new sentence in the marked value's place."""

    span: str


class TemporalQuestionAnswer(AnswerModel):
    """Answer of ``temporal_question``: the question phrased for facts and an answer."""

    question: str


# The answer model of every template, by name: the ones of no item kind here, each item kind's
# added by its module (pipeline.generate.qa, dialogue, quadruples), which importing
# pipeline.generate (or any of its modules) imports.
ANSWER_MODELS: dict[str, type[BaseModel]] = {
    "contradiction": ContradictionAnswer,
    "update_check": UpdateCheckAnswer,
    "temporal_question": TemporalQuestionAnswer,
}


def register_answer_models(models: Mapping[str, type[BaseModel]]) -> None:
    """Add an item kind's answer models, by template name, to :data:`ANSWER_MODELS`."""
    ANSWER_MODELS.update(models)


# Dialogues and quadruple lists are long answers; a QA pair or a verdict is a few dozen tokens.
MAX_TOKENS: dict[str, int] = {
    "qa_initial": 256,
    "qa_new": 256,
    "qa_changed": 128,
    "qa_check": 64,
    "dialogue": 900,
    "quadruples": 900,
    "contradiction": 160,
    "update_check": 64,
    "temporal_question": 96,
}


@dataclass(frozen=True)
class PromptTemplate:
    """One loaded template: its name, content hash, system and user text, placeholders."""

    name: str
    prompt_hash: str
    system: str
    user: str

    @property
    def placeholders(self) -> frozenset[str]:
        """The placeholder names the template uses."""
        return frozenset(_PLACEHOLDER.findall(self.system) + _PLACEHOLDER.findall(self.user))

    def render(self, **values: object) -> tuple[dict[str, str], ...]:
        """Chat messages with every placeholder filled; a missing or unknown name raises."""
        wanted = self.placeholders
        missing = wanted - values.keys()
        extra = values.keys() - wanted
        if missing or extra:
            raise KeyError(
                f"prompt {self.name!r}: missing values {sorted(missing)}, unknown {sorted(extra)}"
            )
        # One pass with a function: text put in is never scanned again for placeholders.
        fill = lambda m: str(values[m.group(1)])  # noqa: E731
        messages = []
        if self.system:
            messages.append({"role": "system", "content": _PLACEHOLDER.sub(fill, self.system)})
        messages.append({"role": "user", "content": _PLACEHOLDER.sub(fill, self.user)})
        return tuple(messages)

    def request(
        self,
        *,
        temperature: float = 0.0,
        schema: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        **values: object,
    ) -> LLMRequest:
        """An :class:`LLMRequest` for this template with its answer schema attached
        (``schema``, e.g. from :func:`answer_schema` with the offered indices, or the plain
        schema of the template's answer) and its token cap (``max_tokens``, else
        :data:`MAX_TOKENS`' entry)."""
        return LLMRequest(
            messages=self.render(**values),
            prompt_hash=self.prompt_hash,
            purpose=self.name,
            json_schema=schema if schema is not None else answer_schema(self.name),
            schema_name=self.name,
            temperature=temperature,
            max_tokens=max_tokens or MAX_TOKENS.get(self.name, 256),
        )


def parse_template(name: str, data: bytes) -> PromptTemplate:
    """Build a template from file bytes (system part optional, user part required)."""
    text = data.decode("utf-8")
    parts = _SECTION.split(text)
    # split() with one group gives [before, tag, body, tag, body, ...]
    sections = {parts[i]: parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}
    if "user" not in sections:
        if _SECTION.search(text):
            raise ValueError(f"prompt {name!r} has no '<!-- user -->' section")
        sections = {"user": text.strip()}
    return PromptTemplate(
        name=name,
        prompt_hash=hashlib.sha256(data).hexdigest()[:16],
        system=sections.get("system", ""),
        user=sections["user"],
    )


@lru_cache(maxsize=64)
def _load_cached(name: str, directory: str, mtime_ns: int) -> PromptTemplate:
    return parse_template(name, (Path(directory) / f"{name}.md").read_bytes())


def load_prompt(name: str, directory: str | Path | None = None) -> PromptTemplate:
    """Load ``<directory>/<name>.md`` (default: the prompts shipped in the package)."""
    folder = Path(directory) if directory is not None else PROMPTS_DIR
    path = folder / f"{name}.md"
    if not path.exists():
        raise FileNotFoundError(f"no prompt template {path}")
    # The mtime in the cache key means an edited template is re-read (and re-hashed).
    return _load_cached(name, str(folder), path.stat().st_mtime_ns)


def prompt_hash(name: str, directory: str | Path | None = None) -> str:
    """Content hash (16 hex) of a template file."""
    return load_prompt(name, directory).prompt_hash


def prompt_hashes(names: Sequence[str], directory: str | Path | None = None) -> dict[str, str]:
    """Hashes of the templates ``names`` (the generation stage's: from
    :func:`pipeline.generate.kinds.generation_prompt_names`)."""
    return {name: prompt_hash(name, directory) for name in names}


def _lean(node: Any) -> Any:
    """The schema without titles and descriptions (tokens a paid API bills, a grammar ignores)."""
    if isinstance(node, dict):
        return {
            k: _lean(v)
            for k, v in node.items()
            if k not in ("title", "description") or not isinstance(v, str)
        }
    if isinstance(node, list):
        return [_lean(v) for v in node]
    return node


@lru_cache(maxsize=32)
def _schema(model: type[BaseModel]) -> str:
    # Key order is kept: a grammar-constrained server writes properties in schema order.
    return json.dumps(_lean(model.model_json_schema()))


# Longest text each field may hold. With a grammar-constrained server these caps also stop a
# small model that starts repeating itself; real values are far shorter.
MAX_CHARS: dict[str, int] = {
    "question": 240,
    "answer": 80,
    "previous_answer": 80,
    "user": 240,
    "expert": 360,
    "subject": 80,
    "relation": 48,
    "object": 64,
    "timestamp": 40,
    "reason": 240,
}
_MONTHS = "(" + "|".join(MONTH_NAMES) + ")"  # a regex group of the month names
# A quadruple's timestamp as English prose writes a date (pipeline.generate.quadruples turns it
# into ISO): free text lets a small model put "2013 to 2016" in the field, and an ISO form lets
# it pad "2013" to "2013-01-01". Digits are spelled [0-9]: llama.cpp's grammar converter
# silently drops a pattern that uses \d.
TIMESTAMP_PATTERN = (
    rf"^([0-9]{{4}}|{_MONTHS} [0-9]{{4}}|[0-9]{{1,2}} {_MONTHS} [0-9]{{4}}"
    rf"|{_MONTHS} [0-9]{{1,2}}, [0-9]{{4}})$"
)


def _string_branch(prop: dict[str, Any]) -> dict[str, Any] | None:
    if prop.get("type") == "string":
        return prop
    return next((b for b in prop.get("anyOf", ()) if b.get("type") == "string"), None)


def answer_schema(
    answer: str | type[BaseModel],
    *,
    indices: Sequence[int] | None = None,
    min_items: int | None = None,
    max_items: int | None = None,
    max_chars: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """JSON schema of the answer a template asks for (a fresh copy each call): ``answer`` is
    the template's name in :data:`ANSWER_MODELS` or the answer model itself (an item kind
    keeps its own). Tightened for constrained decoding: every string named in
    :data:`MAX_CHARS` (or ``max_chars``, which adds to it) has a maximum length, sentence
    numbers (``evidence``, ``sentence``) must be among ``indices`` (the ones the prompt
    offered) and the answer's lists hold ``min_items``..``max_items`` entries."""
    model = ANSWER_MODELS[answer] if isinstance(answer, str) else answer
    limits = {**MAX_CHARS, **(max_chars or {})}
    schema = json.loads(_schema(model))
    objects = [schema, *schema.get("$defs", {}).values()]
    for obj in objects:
        for key, prop in obj.get("properties", {}).items():
            text = _string_branch(prop)
            if text is not None and key in limits:
                text["maxLength"] = limits[key]
            if text is not None and key == "timestamp":
                text["pattern"] = TIMESTAMP_PATTERN
            numbers = prop.get("items", prop) if key in ("evidence", "sentence") else None
            if numbers is not None and indices:
                numbers["enum"] = sorted(set(int(i) for i in indices))
            if prop.get("type") == "array":
                if min_items is not None:
                    prop["minItems"] = min_items
                if max_items is not None:
                    prop["maxItems"] = max_items
    return schema


def number_sentences(
    indices: list[int] | tuple[int, ...], texts: list[str] | tuple[str, ...]
) -> str:
    """Sentences as prompt lines ``[index] text``: the index the model must cite back."""
    return "\n".join(f"[{i}] {t}" for i, t in zip(indices, texts, strict=True))
