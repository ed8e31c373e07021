"""What every kind of generated item shares: stable ids, the reject record, the generated
tables and the tolerant reading of answer fields. Each kind's item record lives in its module
(:mod:`pipeline.generate.qa`, :mod:`~pipeline.generate.dialogue`,
:mod:`~pipeline.generate.quadruples`).

Evidence indices are sentence indices of the article in the snapshot the item was made from
(``sentences.parquet`` ``sent_idx``); ``evidence_text`` is those sentences joined by a space.
An ``item_id`` is the first 16 hex digits of a sha256 over the kind, page, snapshot, evidence
indices and content, so the same item generated twice gets the same id.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa

from pipeline.models.llm.base import LLMResponse
from pipeline.schemas import GENERATED_TABLES


def make_item_id(
    kind: str, page_id: int, snapshot: str, evidence: Sequence[int], content: Sequence[object]
) -> str:
    """Stable id: sha256 of kind, page, snapshot, evidence indices and content (16 hex)."""
    blob = json.dumps(
        [kind, int(page_id), snapshot, [int(i) for i in evidence], list(content)],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass
class Reject:
    """Something the LLM returned that did not become an item, and why."""

    kind: str  # "qa" | "dialogue" | "quadruple" | "contradiction"
    page_id: int | None
    snapshot: str
    reason: str  # a stable code, counted in the run summary
    detail: str
    purpose: str
    item_json: str | None
    raw_output: str | None
    prompt_hash: str

    def row(self) -> dict[str, Any]:
        """The Parquet row."""
        return asdict(self)


def response_reject(
    kind: str,
    purpose: str,
    page_id: int,
    snapshot: str,
    response: LLMResponse,
    prompt_hash: str,
) -> Reject | None:
    """The reject for a response without a usable JSON object (None when it has one)."""
    if response.error:
        reason, detail = "llm_error", response.error
    elif not isinstance(response.parsed, dict):
        reason, detail = "no_json", "no JSON object in the output"
    else:
        return None
    return Reject(
        kind, page_id, snapshot, reason, detail, purpose, None, response.text, prompt_hash
    )


def field_reject(
    kind: str,
    purpose: str,
    page_id: int,
    snapshot: str,
    response: LLMResponse,
    prompt_hash: str,
    err: FieldError,
    payload: object,
) -> Reject:
    """The reject for an answer whose keys or values are unusable."""
    return Reject(
        kind,
        page_id,
        snapshot,
        err.reason,
        err.detail,
        purpose,
        to_json(payload),
        response.text,
        prompt_hash,
    )


def to_json(obj: Any) -> str:
    """Compact, key-sorted JSON of a record or anything JSON can hold."""
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, default=str)


def rows_table(rows: list[dict[str, Any]], name: str) -> pa.Table:
    """A table of ``name`` ("qa", "dialogue", "quadruples", "rejects") from row dicts."""
    schema = GENERATED_TABLES[name]
    return pa.Table.from_pylist([{k: r.get(k) for k in schema.names} for r in rows], schema=schema)


class FieldError(ValueError):
    """A parsed answer lacks a key or holds an unusable value; ``reason`` is a reject code."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


_ONE_INT = re.compile(r"^\D*?(-?\d+)\D*$")


def field_value(obj: dict[str, Any], key: str) -> Any:
    """``obj[key]``, matching the key case-insensitively (models capitalize keys)."""
    if key in obj:
        return obj[key]
    for k, v in obj.items():
        if isinstance(k, str) and k.strip().lower() == key:
            return v
    raise FieldError("missing_field", f"no {key!r} key (keys: {sorted(map(str, obj))})")


def text_field(obj: dict[str, Any], key: str) -> str:
    """A text value; numbers are accepted as text (an answer "2019" often comes as 2019)."""
    value = field_value(obj, key)
    if value is None:
        raise FieldError("missing_field", f"{key!r} is null")
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise FieldError("wrong_type", f"{key!r} is {type(value).__name__}, want text")
    return str(value).strip()


def as_index(value: Any, key: str) -> int:
    """One sentence index from an int, an integral float or a string such as "[12]"."""
    if isinstance(value, bool):
        raise FieldError("wrong_type", f"{key!r} is a boolean, want a sentence index")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list) and len(value) == 1:
        return as_index(value[0], key)
    if isinstance(value, str) and (m := _ONE_INT.match(value.strip())):
        return int(m.group(1))
    raise FieldError("wrong_type", f"{key!r} = {value!r} is not a sentence index")


def index_field(obj: dict[str, Any], key: str) -> int:
    """A single sentence index."""
    return as_index(field_value(obj, key), key)


def index_list_field(obj: dict[str, Any], key: str) -> list[int]:
    """Sentence indices, sorted and unique, from a list, a single index or "3, 4"."""
    value = field_value(obj, key)
    if isinstance(value, str) and "," in value:
        value = [v for v in value.split(",") if v.strip()]
    items = value if isinstance(value, list) else [value]
    return sorted({as_index(v, key) for v in items})
