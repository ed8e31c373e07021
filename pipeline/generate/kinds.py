"""The item generators: one per ledger kind (QA, dialogue turn, quadruple), each saying how its
items are asked for, parsed, checked and counted.

A kind's :class:`ItemGenerator` lives in its own module (``pipeline/generate/qa.py``, ...) and
is named by its :class:`pipeline.item_kinds.Kind` (``generator="module:attribute"``), so the
generation stage knows no kind by name: it plans every generator's tasks over the articles,
runs each generator on its tasks shard by shard (in :data:`pipeline.item_kinds.LEDGER_KINDS`
order), stores each generator's rows as its kind's generated table and counts them. Adding a
kind is its generator, its prompt, its schemas and ``Kind`` and its config switch
(docs/development.md, "Recipe: add an item kind").
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pipeline import progress
from pipeline.config import GenerationConfig
from pipeline.errors import WikidriftError
from pipeline.generate.items import Reject, to_json
from pipeline.generate.selection import Article, ArticleParagraph
from pipeline.generate.validate import REASONS
from pipeline.item_kinds import LEDGER_KINDS
from pipeline.models.llm.base import LLMBackend, LLMRequest, LLMResponse, require_answered

if TYPE_CHECKING:  # annotations only: ItemValidator takes its checks from the kinds' modules
    from pipeline.generate.validator import ItemValidator

# Prompts the generation stage's digest covers that belong to no kind: the contradiction
# check the ledger's relations use.
SHARED_PROMPTS = ("contradiction",)


def complete(backend: LLMBackend, requests: list[LLMRequest], usage: Counter) -> list[LLMResponse]:
    """Send ``requests`` in one ``complete_many`` call (the backend batches, parallelizes and
    caches them), moving the progress display and adding to ``usage``."""
    if not requests:
        return []
    progress.add_total(len(requests))
    responses = backend.complete_many(requests, on_response=lambda _i, _r: progress.advance())
    if len(responses) != len(requests):
        raise WikidriftError(
            f"backend {backend.backend_id} answered {len(responses)} of {len(requests)} requests"
        )
    require_answered(responses, backend)
    usage["batches"] += 1
    usage["requests"] += len(requests)
    for r in responses:
        usage["prompt_tokens"] += r.prompt_tokens
        usage["completion_tokens"] += r.completion_tokens
        usage["cost_usd_micro"] += round(r.cost_usd * 1_000_000)
        usage["cached"] += int(r.cached)
        usage["errors"] += int(r.error is not None)
    return responses


def reject_of(
    kind: str, purpose: str, item: dict[str, Any], raw: str | None, reason: str, detail: str
) -> Reject:
    """The reject row of a parsed item that failed a check (``reason``: the check's code)."""
    row = {k: v for k, v in item.items() if k != "raw_output"}
    return Reject(
        kind=kind,
        page_id=row.get("page_id"),
        snapshot=row.get("snapshot", ""),
        reason=reason,
        detail=detail,
        purpose=purpose,
        item_json=to_json(row),
        raw_output=raw,
        prompt_hash=row.get("prompt_hash", ""),
    )


@dataclass
class Batch:
    """What a generator works with in one shard: the backend (through :meth:`complete`), the
    validator, the config, where to say what it is doing."""

    backend: LLMBackend
    usage: Counter
    generator: str  # "<backend id>:<model>", stamped on every item
    validator: ItemValidator
    cfg: GenerationConfig
    note: Callable[[str], None]
    index: int  # the shard's

    def complete(self, requests: list[LLMRequest]) -> list[LLMResponse]:
        """Answers to ``requests``, in order."""
        return complete(self.backend, requests, self.usage)


@dataclass
class KindOutput:
    """What a generator made of one shard's tasks."""

    rows: list[dict[str, Any]]  # rows of its generated table
    rejects: list[Reject]
    requests: dict[str, int]  # requests sent, per purpose (the run summary's ``requests``)
    meta: dict[str, Any] = field(default_factory=dict)  # more of the shard's counts


def _no_counts(_table: pa.Table, _parts: list[dict[str, Any]]) -> dict[str, int]:
    return {}


@dataclass(frozen=True)
class ItemGenerator:
    """How one kind of item is generated.

    ``initial_tasks(article, paragraphs, cfg)``: the tasks (objects with a ``request``; None
    for items code writes without a model) for an article seen for the first time, given the
    paragraphs selected for it; ``update_tasks(article, cfg, previous)``: the tasks for an
    article whose sentences carry labels against ``previous``;
    ``run(tasks, batch)``: ask, parse, check and drop duplicates. ``counts(table, parts)``:
    the run summary's counts beyond the per-type ones (``parts``: the shards' metadata)."""

    table: str  # its generated table, as in GENERATED_TABLES, and its config switch
    prompts: tuple[str, ...]  # its templates (their hashes enter the generation digest)
    initial_tasks: Callable[[Article, list[ArticleParagraph], GenerationConfig], list[Any]]
    update_tasks: Callable[[Article, GenerationConfig, str], list[Any]]
    run: Callable[[list[Any], Batch], KindOutput]
    follow_ups: tuple[str, ...] = ()  # follow-up turns appended to its prompts' conversations
    counts: Callable[[pa.Table, list[dict[str, Any]]], dict[str, int]] = _no_counts
    reasons: Mapping[str, str] = field(default_factory=dict)  # reject codes of its own checks
    # version of the code that writes its items without a model (enters the generation digest)
    rules: str = ""


def _resolve(target: str) -> ItemGenerator:
    module, _, attribute = target.partition(":")
    found = getattr(importlib.import_module(module), attribute)
    if not isinstance(found, ItemGenerator):
        raise TypeError(f"{target} is not an ItemGenerator")
    return found


@cache
def item_generators() -> tuple[ItemGenerator, ...]:
    """The generator of every ledger kind, in kind order."""
    return tuple(_resolve(kind.generator) for kind in LEDGER_KINDS)


def generation_prompt_names() -> tuple[str, ...]:
    """Every template the generation stage uses: the kinds' prompts, the shared ones, then
    the follow-up turns."""
    gens = item_generators()
    return (
        *(p for g in gens for p in g.prompts),
        *SHARED_PROMPTS,
        *(f for g in gens for f in g.follow_ups),
    )


def reject_reasons() -> dict[str, str]:
    """Every reject code generation can record, with what it means."""
    reasons = dict(REASONS)
    for g in item_generators():
        reasons |= g.reasons
    return reasons
