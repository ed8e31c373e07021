"""A persistent cache of LLM answers, so a re-run or a resumed run never pays twice.

:class:`LLMCallCache` is one SQLite file (WAL mode, busy timeout: Prefect workers and a re-run
may share it) keyed by :meth:`LLMRequest.cache_key`, which hashes the backend, the model, the
prompt template hash, the messages, the schema and the decoding parameters. It stores the whole
answer (text, parsed JSON, token usage, cost, the model that answered) so a hit is as good as
the original call. :class:`CachedLLM` puts it in front of any backend: only misses reach the
backend, and only successful answers are stored (a failure is retried on the next run).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Self

from pipeline.models.llm.base import (
    EndpointIdentity,
    LLMBackend,
    LLMRequest,
    LLMResponse,
    OnResponse,
    endpoint_identity,
)
from pipeline.storage import enable_wal

_BUSY_TIMEOUT_MS = 60_000
# Below SQLite's smallest host-parameter limit (999) for `IN (...)` lookups.
_CHUNK = 900
_SCHEMA = """
CREATE TABLE IF NOT EXISTS llm_calls (
    key TEXT PRIMARY KEY,
    backend_id TEXT NOT NULL,
    model TEXT NOT NULL,
    purpose TEXT NOT NULL,
    text TEXT NOT NULL,
    parsed TEXT,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cost_usd REAL NOT NULL,
    meta TEXT NOT NULL,
    created_at REAL NOT NULL
)
"""


class LLMCallCache:
    """SQLite store of successful LLM answers keyed by ``LLMRequest.cache_key``."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self._connection()  # a bad path fails here, not in the middle of a run

    def _connection(self) -> sqlite3.Connection:
        # A connection must never cross a fork: reopen in a child process.
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
        enable_wal(conn)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(_SCHEMA)
        conn.commit()
        self._conn = conn
        self._pid = os.getpid()
        return conn

    def get(self, key: str) -> LLMResponse | None:
        """The stored answer for ``key`` (with ``cached=True``), or None."""
        return self.get_many([key]).get(key)

    def get_many(self, keys: Iterable[str]) -> dict[str, LLMResponse]:
        """Stored answers for the keys that have one."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, LLMResponse] = {}
        with self._lock:
            conn = self._connection()
            for start in range(0, len(wanted), _CHUNK):
                chunk = wanted[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    "SELECT key, model, text, parsed, prompt_tokens, completion_tokens, "
                    f"cost_usd, meta FROM llm_calls WHERE key IN ({marks})",
                    chunk,
                ).fetchall()
                for key, model, text, parsed, p_tok, c_tok, cost, meta in rows:
                    found[key] = LLMResponse(
                        text=text,
                        model=model,
                        parsed=json.loads(parsed) if parsed is not None else None,
                        prompt_tokens=int(p_tok),
                        completion_tokens=int(c_tok),
                        cost_usd=float(cost),
                        cached=True,
                        meta=json.loads(meta),
                    )
        return found

    def put(self, key: str, response: LLMResponse, *, backend_id: str, purpose: str = "") -> bool:
        """Store one answer; returns False (and stores nothing) for a failed one."""
        return self.put_many([(key, response, purpose)], backend_id=backend_id) == 1

    def put_many(self, items: Sequence[tuple[str, LLMResponse, str]], *, backend_id: str) -> int:
        """Store ``(key, response, purpose)`` rows in one transaction; failed responses
        (``error`` set) are skipped. Returns how many were stored."""
        rows: list[tuple[Any, ...]] = []
        now = time.time()
        for key, response, purpose in items:
            if response.error is not None:
                continue
            rows.append(
                (
                    key,
                    backend_id,
                    response.model,
                    purpose,
                    response.text,
                    json.dumps(response.parsed, ensure_ascii=False)
                    if response.parsed is not None
                    else None,
                    int(response.prompt_tokens),
                    int(response.completion_tokens),
                    float(response.cost_usd),
                    json.dumps(response.meta, ensure_ascii=False, default=str),
                    now,
                )
            )
        if not rows:
            return 0
        with self._lock:
            conn = self._connection()
            with conn:
                conn.executemany(
                    "INSERT OR REPLACE INTO llm_calls (key, backend_id, model, purpose, text, "
                    "parsed, prompt_tokens, completion_tokens, cost_usd, meta, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
        return len(rows)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def __len__(self) -> int:
        with self._lock:
            return int(self._connection().execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0])

    def close(self) -> None:
        """Close this process's connection (a later call reopens it)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CachedLLM:
    """An :class:`LLMBackend` that answers from an :class:`LLMCallCache` and sends only the
    misses to the wrapped backend (identical requests within one call are sent once).

    ``calls_made`` counts requests that reached the backend, ``hits`` requests answered from
    the cache. Keys and provenance follow the backend's :class:`EndpointIdentity` (asked once,
    on first use): for a server, its ``host:port`` and the model it reports, so a dead or
    different server is never answered from another server's entries. ``model`` is the
    model as the server reports it (the configured name when it cannot tell).
    """

    def __init__(self, backend: LLMBackend, cache: LLMCallCache) -> None:
        self.backend = backend
        self.cache = cache
        self.calls_made = 0
        self.hits = 0
        self._identity: EndpointIdentity | None = None

    @property
    def identity(self) -> EndpointIdentity:
        """What answers: backend, server address and served model (probed once)."""
        if self._identity is None:
            self._identity = endpoint_identity(self.backend)
        return self._identity

    @property
    def backend_id(self) -> str:
        """The wrapped backend's id."""
        return self.backend.backend_id

    @property
    def model(self) -> str:
        """The model that answers, as its server reports it."""
        return self.identity.model

    @property
    def provenance(self) -> str:
        """``backend:model@host:port`` of what answers (no address for in-process models)."""
        return self.identity.label()

    def key(self, request: LLMRequest) -> str:
        """The cache key of ``request`` for the wrapped backend's endpoint and model."""
        ident = self.identity
        return request.cache_key(ident.backend, ident.model, ident.address)

    def misses(self, requests: Sequence[LLMRequest]) -> list[LLMRequest]:
        """The distinct requests that would reach the backend (for dry-run cost estimates)."""
        keys = [self.key(r) for r in requests]
        found = self.cache.get_many(keys)
        unique: dict[str, LLMRequest] = {}
        for key, request in zip(keys, requests, strict=True):
            if key not in found:
                unique.setdefault(key, request)
        return list(unique.values())

    def complete_many(
        self, requests: list[LLMRequest], *, on_response: OnResponse | None = None
    ) -> list[LLMResponse]:
        """Answer from the cache where possible; send the rest; store every successful answer
        the moment it arrives, so an interrupted call loses nothing already paid for."""
        keys = [self.key(r) for r in requests]
        found = self.cache.get_many(keys)
        to_send: dict[str, LLMRequest] = {}
        indices: dict[str, list[int]] = {}
        for index, (key, request) in enumerate(zip(keys, requests, strict=True)):
            if key in found:
                if on_response is not None:
                    on_response(index, found[key])
            else:
                to_send.setdefault(key, request)
                indices.setdefault(key, []).append(index)
        self.hits += sum(1 for key in keys if key in found)
        fresh: dict[str, LLMResponse] = {}
        send_keys = list(to_send)

        label = self.identity.label()

        def arrived(index: int, answer: LLMResponse) -> None:
            key = send_keys[index]
            answer.meta.setdefault("endpoint", label)  # provenance: what answered
            fresh[key] = answer
            self.calls_made += 1
            if answer.error is None:
                self.cache.put_many(
                    [(key, answer, to_send[key].purpose)], backend_id=self.backend.backend_id
                )
            if on_response is not None:
                for original in indices[key]:
                    on_response(original, answer)

        if send_keys:
            # BudgetExceededError propagates: what arrived before it is already stored.
            self.backend.complete_many([to_send[k] for k in send_keys], on_response=arrived)
        return [found[key] if key in found else fresh[key] for key in keys]
