"""Tolerant JSON extraction from model output, and the prompt note that asks for JSON.

Models wrap JSON in Markdown fences, put prose around it, leave trailing commas or answer with
Python-style dicts (single quotes, ``True``/``None``). :func:`extract_json` finds the first JSON
*object* in such text and repairs only what can be repaired without guessing: it never invents
closing braces for a truncated answer (a cut-off answer is not trusted) and returns ``None``
instead of raising. Top-level arrays are not returned as such: every schema in the pipeline has
an object at its root (OpenAI structured outputs require that too), so for ``[{...}, {...}]``
the first object inside is returned.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

# ```json ... ``` or ``` ... ``` (any info string); DOTALL so the body may span lines.
_FENCE = re.compile(r"```[ \t]*[A-Za-z0-9_+-]*[ \t]*\r?\n?(.*?)```", re.DOTALL)
_PYTHON_LITERALS = {"True": "true", "False": "false", "None": "null"}
# Bounds the work on adversarial text (many unmatched braces): each start scans to the end,
# so the characters scanned in all are capped too (model answers are far smaller).
_MAX_CANDIDATES = 64
_MAX_SCAN_STEPS = 400_000
_MAX_TEXT_CHARS = 1_000_000


def extract_json(text: str | None) -> dict[str, Any] | None:
    """Return the first JSON object found in ``text`` (fences stripped, prose ignored, trailing
    commas / single quotes / Python literals repaired where unambiguous), or ``None``."""
    if not text or not isinstance(text, str):
        return None
    text = text[:_MAX_TEXT_CHARS]
    # Fenced blocks first: when a model fences its answer, the fence is the answer.
    for block in _FENCE.findall(text):
        found = _first_object(block)
        if found is not None:
            return found
    return _first_object(text)


def _first_object(text: str) -> dict[str, Any] | None:
    stripped = text.strip()
    if stripped.startswith("{"):
        whole = _loads_object(stripped)
        if whole is not None:
            return whole
    for tries, candidate in enumerate(_balanced_objects(text), start=1):
        found = _loads_object(candidate) or _loads_object(_repair(candidate))
        if found is not None:
            return found
        if tries >= _MAX_CANDIDATES:
            break
    return None


def _loads_object(candidate: str) -> dict[str, Any] | None:
    try:
        value = json.loads(candidate)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _balanced_objects(text: str) -> Iterator[str]:
    """Yield every balanced ``{...}`` span, by start position, ignoring braces inside strings."""
    budget = [_MAX_SCAN_STEPS]
    start = text.find("{")
    while start != -1 and budget[0] > 0:
        end = _matching_brace(text, start, quotes="\"'", budget=budget)
        if end is None:
            # An apostrophe in an unquoted value ("it's") can look like an unterminated
            # single-quoted string; try again honouring double quotes only.
            end = _matching_brace(text, start, quotes='"', budget=budget)
        if end is not None:
            yield text[start : end + 1]
        start = text.find("{", start + 1)


def _matching_brace(text: str, start: int, *, quotes: str, budget: list[int]) -> int | None:
    """Index of the brace closing the one at ``start``; ``budget[0]`` is decremented by the
    characters scanned."""
    depth = 0
    quote: str | None = None
    i = start
    n = len(text)
    try:
        while i < n:
            ch = text[i]
            if quote is not None:
                if ch == "\\":
                    i += 2
                    continue
                if ch == quote:
                    quote = None
            elif ch in quotes:
                quote = ch
            elif ch in "{[":
                depth += 1
            elif ch in "}]":
                depth -= 1
                if depth == 0:
                    return i if ch == "}" else None
                if depth < 0:
                    return None
            i += 1
        return None
    finally:
        budget[0] -= i - start + 1


def _repair(candidate: str) -> str:
    """Rewrite JSON-ish text as JSON: single-quoted strings -> double-quoted, trailing commas
    dropped, ``True``/``False``/``None`` -> JSON literals, bare identifier keys quoted."""
    out: list[str] = []
    i = 0
    n = len(candidate)
    while i < n:
        ch = candidate[i]
        if ch == '"':
            end = _string_end(candidate, i, '"')
            out.append(candidate[i : end + 1])
            i = end + 1
        elif ch == "'":
            end = _string_end(candidate, i, "'")
            out.append(_requote(candidate[i + 1 : end]))
            i = end + 1
        elif ch == ",":
            j = i + 1
            while j < n and candidate[j].isspace():
                j += 1
            if j < n and candidate[j] in "}]":
                i += 1  # trailing comma: drop it
            else:
                out.append(ch)
                i += 1
        elif ch.isalpha() or ch == "_":
            j = i
            while j < n and (candidate[j].isalnum() or candidate[j] == "_"):
                j += 1
            word = candidate[i:j]
            k = j
            while k < n and candidate[k].isspace():
                k += 1
            previous = _last_significant(out)
            if k < n and candidate[k] == ":" and previous in ("{", ","):
                out.append(json.dumps(word))  # bare key: {answer: "x"}
            else:
                out.append(_PYTHON_LITERALS.get(word, word))
            i = j
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _string_end(text: str, start: int, quote: str) -> int:
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == quote:
            return i
        i += 1
    return len(text) - 1


def _requote(body: str) -> str:
    # Escapes inside a single-quoted string are JSON escapes except \' (not valid JSON).
    unescaped = body.replace("\\'", "'")
    parts: list[str] = []
    i = 0
    while i < len(unescaped):
        ch = unescaped[i]
        if ch == "\\" and i + 1 < len(unescaped):
            parts.append(unescaped[i : i + 2])
            i += 2
            continue
        parts.append('\\"' if ch == '"' else ch)
        i += 1
    return '"' + "".join(parts) + '"'


def _last_significant(parts: Sequence[str]) -> str:
    for part in reversed(parts):
        stripped = part.rstrip()
        if stripped:
            return stripped[-1]
    return ""


def json_instruction(schema: dict[str, Any] | None) -> str:
    """The note appended to a prompt when the server cannot enforce a schema itself."""
    note = "Answer with exactly one JSON object and nothing else (no prose, no Markdown fences)."
    if schema:
        compact = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
        note += f" The object must follow this JSON schema:\n{compact}"
    return note


def with_json_instruction(
    messages: Sequence[dict[str, str]], schema: dict[str, Any] | None
) -> list[dict[str, str]]:
    """Copy of ``messages`` with :func:`json_instruction` appended to the last user message
    (small models follow an instruction next to the question better than a system note)."""
    out = [dict(m) for m in messages]
    note = json_instruction(schema)
    for message in reversed(out):
        if message.get("role") == "user":
            message["content"] = f"{message.get('content', '')}\n\n{note}"
            return out
    out.append({"role": "user", "content": note})
    return out
