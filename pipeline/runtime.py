"""Build the configured runtime objects (embedder, LLM backend, contradiction checker) from a
:class:`~pipeline.config.Config`, with their on-disk caches under ``<workdir>/cache``.

Shared by the CLI and the Prefect flows so both run the same models the same way.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from pipeline.config import Config
from pipeline.errors import ConfigError
from pipeline.generate.contradiction import LLMContradictionChecker
from pipeline.models.embedder import CachedEmbedder, Embedder, load_embedder
from pipeline.models.llm import (
    PACKAGED_SMOLLM2,
    CachedLLM,
    CostLedger,
    LLMBackend,
    LLMCallCache,
    OpenAIBackend,
    OpenAIBatchRunner,
    TransformersBackend,
)
from pipeline.models.vector_cache import VectorCache
from pipeline.storage import EMBEDDING_CACHE, LLM_CACHE, cache_dir

log = logging.getLogger(__name__)


def base_embedder(cfg: Config) -> Embedder:
    """The configured sentence embedder (the model itself; loaded on first use)."""
    return load_embedder(
        cfg.models.embedder, device=cfg.models.device, batch_size=cfg.models.embed_batch_size
    )


def cached_embedder(embedder: Embedder, workdir: str | Path) -> Embedder:
    """``embedder`` behind the workdir's on-disk embedding cache."""
    return CachedEmbedder(embedder, VectorCache(cache_dir(workdir) / EMBEDDING_CACHE))


@dataclass
class LLMSetup:
    """The generation backend (cached) and, for paid APIs, the cost ledger behind it."""

    backend: LLMBackend
    ledger: CostLedger | None
    kind: str  # "openai", "openai-batch", "transformers"


def resolve_llm_kind(cfg: Config) -> str:
    """``auto`` means the OpenAI model when ``OPENAI_API_KEY`` (or an OpenAI-compatible
    ``base_url``) is configured, else the local offline model."""
    kind = cfg.llm.backend
    if kind == "auto":
        kind = "openai" if (cfg.openai_api_key or cfg.llm.base_url) else "transformers"
    return kind


def llm_from_config(cfg: Config, workdir: str | Path) -> LLMSetup:
    """The configured LLM: every call through the SQLite call cache, OpenAI calls priced and
    stopped before ``max_cost_usd``, the Batch API when ``batch_api`` is set."""
    cache = LLMCallCache(cache_dir(workdir) / LLM_CACHE)
    kind = resolve_llm_kind(cfg)
    if kind == "openai":
        ledger = CostLedger(
            max_cost_usd=cfg.llm.max_cost_usd or None, default_model=cfg.llm.openai_model
        )
        backend = OpenAIBackend(
            cfg.llm.openai_model,
            base_url=cfg.llm.base_url or None,
            api_key=cfg.openai_api_key,
            max_concurrency=cfg.llm.max_concurrency,
            requests_per_minute=cfg.llm.requests_per_minute or None,
            max_retries=cfg.llm.max_retries,
            timeout_s=cfg.llm.timeout_s,
            structured_outputs=cfg.llm.structured_outputs,
            ledger=ledger,
        )
        if cfg.llm.batch_api:
            runner = OpenAIBatchRunner(
                backend, state_dir=cache_dir(workdir) / "openai_batch", cache=cache
            )
            return LLMSetup(runner, ledger, "openai-batch")
        return LLMSetup(CachedLLM(backend, cache), ledger, "openai")
    if kind != "transformers":
        raise ConfigError(f"llm.backend = {kind!r}: allowed: auto, openai, transformers")
    local = TransformersBackend(
        cfg.llm.local_model,
        device=cfg.models.device,
        batch_size=cfg.llm.local_batch_size,
        max_new_tokens=cfg.llm.local_max_new_tokens,
    )
    return LLMSetup(CachedLLM(local, cache), None, "transformers")


def checker_from_config(cfg: Config, llm: LLMSetup) -> LLMContradictionChecker | None:
    """GrowOVER's LLM double-check of changed pairs, unless switched off or the only model
    at hand is the packaged 135M one (it cannot judge contradictions: changes then stay
    ``verified = false``, as when no LLM is configured)."""
    if not cfg.llm.verify_contradictions:
        return None
    if llm.kind == "transformers" and cfg.llm.local_model == PACKAGED_SMOLLM2:
        log.info("no capable LLM configured: changed sentences stay unverified")
        return None
    return LLMContradictionChecker(llm.backend)
