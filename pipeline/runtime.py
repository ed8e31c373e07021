"""Build the configured runtime objects (embedder, LLM backend, contradiction checker) from a
:class:`~pipeline.config.Config`, with their on-disk caches under ``<workdir>/cache``.

Shared by the CLI and the Prefect flows so both run the same models the same way. Nothing
is opened or started before it is needed: a stage re-run with nothing to do (on a read-only
workdir, say) neither opens the LLM call cache nor starts the local LLM server.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.config import Config
from pipeline.errors import ConfigError, WikidriftError
from pipeline.generate.contradiction import LLMContradictionChecker
from pipeline.generate.stage import plan_requests
from pipeline.labeling.changes import UpdateJudge
from pipeline.layout import EMBEDDING_CACHE, LLM_CACHE, cache_dir, logs_dir
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
from pipeline.models.llm.base import EndpointIdentity
from pipeline.models.llm.llamacpp import LlamaCppBackend, start_local_llm
from pipeline.models.llm.packaged import model_name, packaged_model, part_files
from pipeline.models.vector_cache import VectorCache

log = logging.getLogger(__name__)


def base_embedder(cfg: Config) -> Embedder:
    """The configured sentence embedder (the model itself; loaded on first use)."""
    return load_embedder(
        cfg.models.embedder, device=cfg.models.device, batch_size=cfg.models.embed_batch_size
    )


def retrieval_embedder_spec(cfg: Config) -> str:
    """The dense retriever's embedder spec: ``evaluate.retriever_embedder``, else the labeling
    one (``models.embedder``)."""
    return cfg.evaluate.retriever_embedder or cfg.models.embedder


def retrieval_embedder(cfg: Config) -> Embedder:
    """The dense retriever's embedder (:func:`retrieval_embedder_spec`)."""
    return load_embedder(
        retrieval_embedder_spec(cfg),
        device=cfg.models.device,
        batch_size=cfg.models.embed_batch_size,
    )


def cached_embedder(embedder: Embedder, workdir: str | Path) -> Embedder:
    """``embedder`` behind the workdir's on-disk embedding cache."""
    return CachedEmbedder(embedder, VectorCache(cache_dir(workdir) / EMBEDDING_CACHE))


@dataclass
class LLMSetup:
    """The generation backend (cached) and, for paid APIs, the cost ledger behind it."""

    backend: LLMBackend
    ledger: CostLedger | None
    kind: str  # "openai", "openai-batch", "local", "transformers"


def resolve_llm_kind(cfg: Config) -> str:
    """``auto``: an OpenAI-compatible ``base_url`` when one is configured, else OpenAI's API
    when ``OPENAI_API_KEY`` is set (never under the ``offline`` profile), else the local
    llama.cpp model."""
    kind = cfg.llm.backend
    if kind == "auto":
        if cfg.llm.base_url or cfg.openai_api_key and cfg.profile != "offline":
            kind = "openai"
        else:
            kind = "local"
    return kind


class _OnFirstUse:
    """Builds an object on its first attribute access and hands every access to it."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self._build = build
        self._target: Any = None
        self._lock = threading.Lock()

    def _built(self) -> Any:
        with self._lock:
            if self._target is None:
                self._target = self._build()
            return self._target

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # copy/pickle probes, or a half-built object: no recursion
            raise AttributeError(name)
        return getattr(self._built(), name)


class LazyCallCache(_OnFirstUse):
    """The LLM call cache, opened (file created, WAL set up) on first use."""

    def __init__(self, path: Path) -> None:
        super().__init__(lambda: LLMCallCache(path))


class LazyLocalLLM(_OnFirstUse):
    """The local llama.cpp backend with its server started by the first request that needs
    it: its id and model name are known without starting anything (cache keys, digests)."""

    backend_id = LlamaCppBackend.backend_id

    def __init__(self, cfg: Config, workdir: str | Path) -> None:
        super().__init__(lambda: local_llm(cfg, workdir))
        self.model = model_name(cfg.llm.local_model)

    def endpoint_identity(self) -> EndpointIdentity:
        """What answers (cache keys, provenance): the running backend's own identity when it
        has one (it asks its server, so the server starts), else id and model, with no
        address, exactly as for the started backend."""
        if callable(getattr(LlamaCppBackend, "endpoint_identity", None)):
            return self._built().endpoint_identity()
        return EndpointIdentity(self.backend_id, "", self.model)

    def complete_many(self, requests: list[Any], **kwargs: Any) -> list[Any]:
        """Answer ``requests`` (no request: no server)."""
        if not requests:
            return []
        return self._built().complete_many(requests, **kwargs)


def local_llm(cfg: Config, workdir: str | Path, *, start: bool = True) -> LlamaCppBackend:
    """The local llama.cpp backend of ``cfg``, its server started now if not running;
    ``start=False``: a backend that only knows its name (for cache look-ups in dry runs)."""
    if not start:
        return LlamaCppBackend(model_name(cfg.llm.local_model), "")
    return start_local_llm(
        cfg.llm.local_model,
        log_path=logs_dir(workdir) / "llama-server.log",
        parallel=cfg.llm.local_parallel,
        ctx_per_slot=cfg.llm.local_ctx,
        threads=cfg.llm.local_threads,
        timeout_s=cfg.llm.local_timeout_s,
    )


def llm_from_config(cfg: Config, workdir: str | Path, *, start: bool = True) -> LLMSetup:
    """The configured LLM: every call through the SQLite call cache, OpenAI calls priced and
    stopped before ``max_cost_usd``, the Batch API when ``batch_api`` is set. ``start=False``
    leaves a local server unstarted (dry runs only look at the cache); otherwise it starts
    with the first request that misses the cache."""
    cache = LazyCallCache(cache_dir(workdir) / LLM_CACHE)
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
            trust_base_url=cfg.llm.trust_base_url,
            ledger=ledger,
        )
        if cfg.llm.batch_api:
            runner = OpenAIBatchRunner(
                backend, state_dir=cache_dir(workdir) / "openai_batch", cache=cache
            )
            return LLMSetup(runner, ledger, "openai-batch")
        return LLMSetup(CachedLLM(backend, cache), ledger, "openai")
    if kind == "local":
        backend = LazyLocalLLM(cfg, workdir) if start else local_llm(cfg, workdir, start=False)
        return LLMSetup(CachedLLM(backend, cache), None, "local")
    if kind != "transformers":
        raise ConfigError(f"llm.backend = {kind!r}: allowed: auto, openai, local, transformers")
    local = TransformersBackend(
        cfg.llm.local_model,
        device=cfg.models.device,
        batch_size=cfg.llm.local_batch_size,
        max_new_tokens=cfg.llm.local_max_new_tokens,
    )
    return LLMSetup(CachedLLM(local, cache), None, "transformers")


def judge_from_config(cfg: Config, llm: LLMSetup) -> UpdateJudge | None:
    """The update judge of the offline labeling path (no NLI model, not faithful mode), unless
    switched off or the only model at hand is the packaged 135M one (it cannot copy the right
    words: uncertain pairs then stay unlabeled)."""
    if not cfg.align.update_judge or cfg.models.nli or cfg.align.faithful:
        return None
    if llm.kind in ("local", "transformers") and cfg.llm.local_model == PACKAGED_SMOLLM2:
        log.info("no capable LLM configured: uncertain sentence pairs stay unlabeled")
        return None
    if llm.kind == "local" and cfg.llm.local_model.startswith("packaged:"):
        try:  # the default model is a separate download: label without it, and say so
            part_files(packaged_model(cfg.llm.local_model))
        except WikidriftError as exc:
            log.warning("update judge off: %s; uncertain sentence pairs stay unlabeled", exc)
            return None
    return UpdateJudge(llm.backend, cfg.align.judge_classes)


def checker_from_config(cfg: Config, llm: LLMSetup) -> LLMContradictionChecker | None:
    """GrowOVER's LLM double-check of changed pairs, unless switched off or the only model
    at hand is the packaged 135M one (it cannot judge contradictions: changes then stay
    ``verified = false``, as when no LLM is configured)."""
    if not cfg.llm.verify_contradictions:
        return None
    if llm.kind in ("local", "transformers") and cfg.llm.local_model == PACKAGED_SMOLLM2:
        log.info("no capable LLM configured: changed sentences stay unverified")
        return None
    return LLMContradictionChecker(llm.backend)


def dry_run_line(
    cfg: Config,
    workdir: str | Path,
    snapshot: str,
    *,
    previous: str | None,
    embedder: Embedder,
    llm: LLMSetup,
) -> str:
    """What generating ``snapshot`` would ask and cost, without asking: the requests, those
    the LLM cache lacks, and for a paid API the tokens and dollars at most (one line)."""
    requests = plan_requests(
        workdir, snapshot, previous=previous, embedder=embedder, cfg=cfg.generation
    )
    misses = getattr(llm.backend, "misses", None)  # CachedLLM: what the cache lacks
    todo = misses(requests) if misses else requests
    line = f"dry run {snapshot}: requests={len(requests)} not_cached={len(todo)}"
    if llm.kind == "openai-batch":
        prompt, completion, usd = llm.backend.estimate(requests)  # batch prices, misses only
    elif llm.ledger is not None:
        prompt, completion, usd = llm.ledger.estimate(todo)
    if llm.ledger is not None:
        line += f" prompt_tokens~{prompt} completion_tokens<={completion} cost_usd<={usd:.4f}"
    else:
        line += f" (local model {cfg.llm.local_model}: no cost)"
    return line
