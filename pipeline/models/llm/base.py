"""The one interface every LLM backend implements, and the records that cross it.

A stage builds :class:`LLMRequest` objects (chat messages, an optional JSON schema for the
answer, decoding parameters, the hash of the prompt template that made them) and hands a list
to :meth:`LLMBackend.complete_many`, which returns one :class:`LLMResponse` per request in the
same order. Backends batch / parallelize internally; a failed request comes back with
``error`` set instead of raising, so one bad answer never loses the others.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pipeline.errors import WikidriftError


@dataclass(frozen=True)
class LLMRequest:
    """One chat completion to make."""

    messages: tuple[dict[str, str], ...]  # ({"role": "system"|"user"|"assistant", "content": ...})
    prompt_hash: str  # hash of the prompt template file that produced the messages
    purpose: str  # "qa_initial", "qa_new", "qa_changed", "dialogue", "quadruples", "contradiction"
    json_schema: dict[str, Any] | None = None  # JSON schema the answer must follow, if any
    schema_name: str = "answer"
    temperature: float = 0.0
    max_tokens: int = 256
    seed: int | None = None  # sampling seed, for a temperature above 0 that must repeat

    def cache_key(self, backend_id: str, model: str, endpoint: str = "") -> str:
        """sha256 over everything that determines the answer (backend, model, prompt, params)
        and, for a remote server, its ``host:port`` (``endpoint``). In-process backends pass
        no endpoint and keep the keys they always had."""
        identity: dict[str, str] = {"backend": backend_id, "model": model}
        if endpoint:
            identity["endpoint"] = endpoint
        blob = json.dumps(
            {
                **identity,
                "prompt_hash": self.prompt_hash,
                "messages": list(self.messages),
                "schema": self.json_schema,
                "schema_name": self.schema_name,
                "temperature": self.temperature,
                "max_tokens": self.max_tokens,
                # only when set: the keys of every unseeded request stay what they were
                **({"seed": self.seed} if self.seed is not None else {}),
            },
            sort_keys=True,
            ensure_ascii=False,
        )
        return hashlib.sha256(blob.encode()).hexdigest()


@dataclass
class LLMResponse:
    """The answer to one request. ``parsed`` is the JSON object found in ``text`` (None when
    the text holds no usable JSON); ``error`` is set when the request failed for good."""

    text: str
    model: str
    parsed: dict[str, Any] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cached: bool = False
    error: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


class LLMUnavailableError(WikidriftError):
    """The LLM endpoint did not answer (see :func:`require_answered`)."""


# ``LLMResponse.meta`` key set on a failure where the endpoint gave no answer at all: refused
# or timed-out connections, 408 / 409 / 429 / 5xx after every retry.
UNANSWERED = "unanswered"


def require_answered(responses: list[LLMResponse], backend: LLMBackend) -> None:
    """Raise :class:`LLMUnavailableError` when some requests got no answer from the endpoint
    (not a bad answer: none). Recording those as failed items would lose them for good; the
    answers that did arrive were cached as they came, so a re-run asks only for the rest."""
    missing = [r for r in responses if r.error is not None and r.meta.get(UNANSWERED)]
    if missing:
        raise LLMUnavailableError(
            f"the LLM ({backend.backend_id}:{backend.model}) did not answer {len(missing)} of "
            f"{len(responses)} requests ({missing[0].error}); the answers that arrived are "
            "cached: re-run to resume"
        )


class LLMBackend(Protocol):
    """A chat model. ``backend_id`` ("openai", "transformers", "scripted") and ``model`` go
    into cache keys and into every generated item's provenance."""

    backend_id: str
    model: str

    def complete_many(
        self, requests: list[LLMRequest], *, on_response: OnResponse | None = None
    ) -> list[LLMResponse]:
        """Answer every request, in order; failures come back with ``error`` set.
        ``on_response(index, response)`` is called as each answer arrives, so a caller can
        persist answers before the whole call returns (a crash then loses none of them)."""
        ...


OnResponse = Callable[[int, "LLMResponse"], None]


@dataclass(frozen=True)
class EndpointIdentity:
    """What answers a backend's requests: the kind of backend, the server (``host:port``,
    "" in process) and the model as that server reports it. Cache keys and provenance use it,
    so answers of one server are never served as another's."""

    backend: str
    address: str
    model: str

    def label(self) -> str:
        """``backend:model`` plus ``@host:port`` for a remote server (provenance)."""
        return f"{self.backend}:{self.model}" + (f"@{self.address}" if self.address else "")


def endpoint_identity(backend: Any) -> EndpointIdentity:
    """The backend's :class:`EndpointIdentity`: its own ``endpoint_identity()`` when it has
    one (remote servers), else its ``backend_id`` and ``model`` with no address."""
    probe = getattr(backend, "endpoint_identity", None)
    if callable(probe):
        found = probe()
        if isinstance(found, EndpointIdentity):
            return found
    return EndpointIdentity(str(backend.backend_id), "", str(backend.model))
