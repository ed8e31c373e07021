"""The local LLM backend: a llama.cpp server (started by wikidrift, or one a parent process
announced) spoken to through the OpenAI backend, with JSON-schema constrained answers.

What it adds to :class:`OpenAIBackend`: the server must be alive. A dead server is not an
answer: instead of recording every request as a failed item, :meth:`complete_many` raises
:class:`LocalServerError` (exit code and log tail), after the answers that did arrive were
handed to ``on_response`` (and so cached): the re-run resumes without asking them again.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pipeline.models.llm.base import LLMRequest, LLMResponse, OnResponse
from pipeline.models.llm.llamacpp_server import (
    LlamaServer,
    LocalServerError,
    ServerSettings,
    announced_server,
    health,
    shared_server,
)
from pipeline.models.llm.openai_backend import LOCAL_API_KEY, OpenAIBackend
from pipeline.models.llm.packaged import resolve_gguf

log = logging.getLogger(__name__)


class LlamaCppBackend:
    """Chat completions from a local llama.cpp server (see the module docstring)."""

    backend_id = "llamacpp"

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        server: LlamaServer | None = None,
        max_concurrency: int = 4,
        timeout_s: float = 900.0,
        max_retries: int = 2,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.server = server
        self.client = OpenAIBackend(
            model,
            base_url=base_url,
            api_key=LOCAL_API_KEY,  # a real key never goes to a local server
            max_concurrency=max_concurrency,
            max_retries=max_retries,
            timeout_s=timeout_s,
            structured_outputs="on",
            backoff_base_s=0.5,
            backoff_max_s=5.0,
            backend_id=self.backend_id,
        )

    def require_alive(self) -> None:
        """Raise :class:`LocalServerError` when the server is gone."""
        if self.server is not None:
            self.server.require_alive()
        elif not health(self.base_url):
            raise LocalServerError(
                f"the local LLM server at {self.base_url} does not answer; re-run to resume"
            )

    def complete_many(
        self, requests: list[LLMRequest], *, on_response: OnResponse | None = None
    ) -> list[LLMResponse]:
        """Answer every request; raise instead of returning failures when the server died."""
        if not requests:
            return []
        self.require_alive()
        responses = self.client.complete_many(requests, on_response=on_response)
        if any(r.error is not None for r in responses):
            self.require_alive()
        return responses


def start_local_llm(
    spec: str,
    *,
    log_path: Path | str,
    parallel: int = 4,
    ctx_per_slot: int = 4096,
    threads: int = 0,
    timeout_s: float = 900.0,
) -> LlamaCppBackend:
    """A backend for local model ``spec`` (``packaged:<name>`` or a ``.gguf`` path): attached
    to the server a parent process announced for it, else to this process's shared server,
    started now if needed (the packaged model is assembled into the cache on first use)."""
    path, name = resolve_gguf(spec)
    url = announced_server(name)
    server = None
    if url is None:
        settings = ServerSettings(
            model_path=str(path),
            alias=name,
            parallel=parallel,
            ctx_per_slot=ctx_per_slot,
            threads=threads,
            log_path=str(log_path),
        )
        server = shared_server(settings)
        url = server.base_url
    else:
        log.info("using the local LLM server announced at %s", url)
    return LlamaCppBackend(name, url, server=server, max_concurrency=parallel, timeout_s=timeout_s)
