"""The OpenAI Batch API for large months: same answers as the sync path, half the price.

:class:`OpenAIBatchRunner` sends only cache misses. It writes them as Batch API JSONL (one
``{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body"}`` line per request,
``custom_id`` = the request's cache key), uploads the file (``purpose="batch"``), creates the
batch (``completion_window="24h"``) and polls it until it is completed, failed, expired or
cancelled; then it downloads the output and error files and stores every successful answer in
the :class:`LLMCallCache` under the same key a :class:`CachedLLM` over an
:class:`OpenAIBackend` of the same model uses, so the sync path finds them as hits.

Nothing is paid twice: before polling, the batch id and the request list are written to
``state_dir/batch.json`` (atomically: temp file + rename), as is the uploaded file id before
the batch is created. A new runner on the same ``state_dir`` resumes the pending batch (no
second upload, no second create); if a crash came between upload and create, it looks for a
batch already made from that file before creating one. A finished batch's state is archived
as ``batch-<id>.json``.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.errors import ConfigError, WikidriftError
from pipeline.models.llm.base import EndpointIdentity, LLMRequest, LLMResponse, OnResponse
from pipeline.models.llm.cache import LLMCallCache
from pipeline.models.llm.costs import CostLedger
from pipeline.models.llm.openai_backend import (
    OpenAIBackend,
    chat_body,
    endpoint_address,
    response_from_completion,
)

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

ENDPOINT = "/v1/chat/completions"
TERMINAL_STATUSES = frozenset({"completed", "failed", "expired", "cancelled"})
# OpenAI's limits per batch input file: 50,000 requests and 200 MB (kept under, for headroom).
MAX_REQUESTS_PER_BATCH = 50_000
MAX_BYTES_PER_BATCH = 190 * 1024 * 1024
STATE_FILE = "batch.json"
STATE_VERSION = 1


def _write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so a crash leaves the old file or the new one, never half."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def request_to_dict(request: LLMRequest) -> dict[str, Any]:
    """A JSON-able form of an LLMRequest (for the batch state file)."""
    data = asdict(request)
    data["messages"] = [dict(m) for m in request.messages]
    return data


def request_from_dict(data: dict[str, Any]) -> LLMRequest:
    """Inverse of :func:`request_to_dict`."""
    fields = dict(data)
    fields["messages"] = tuple(dict(m) for m in fields["messages"])
    return LLMRequest(**fields)


class OpenAIBatchRunner:
    """Runs LLM requests through the OpenAI Batch API, resumably (see the module docstring).

    ``client_or_backend`` is an :class:`OpenAIBackend` (its model, endpoint, key, ledger and
    remembered response format are used) or an ``openai.OpenAI`` client (then ``model`` is
    required). ``sleep`` replaces ``time.sleep`` between polls; ``max_wait_s`` bounds one
    call's polling (the batch stays pending and a later call resumes it).
    """

    backend_id = "openai"

    def __init__(
        self,
        client_or_backend: OpenAIBackend | openai.OpenAI,
        *,
        state_dir: Path | str,
        cache: LLMCallCache | None = None,
        model: str | None = None,
        ledger: CostLedger | None = None,
        poll_interval_s: float = 30.0,
        max_wait_s: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
        max_requests_per_batch: int = MAX_REQUESTS_PER_BATCH,
        max_bytes_per_batch: int = MAX_BYTES_PER_BATCH,
    ) -> None:
        if isinstance(client_or_backend, OpenAIBackend):
            backend = client_or_backend
            if model is not None and model != backend.model:
                raise ConfigError(f"model {model!r} differs from the backend's {backend.model!r}")
            self.model = backend.model
            self._identify: Callable[[], EndpointIdentity] = backend.endpoint_identity
            self.client = backend.make_sync_client()
            self.ledger = ledger if ledger is not None else backend.ledger
            self._body: Callable[[LLMRequest], dict[str, Any]] = backend.request_body
        else:
            if not model:
                raise ConfigError("OpenAIBatchRunner needs model=... when given a bare client")
            self.model = model
            address = endpoint_address(str(client_or_backend.base_url))
            identity = EndpointIdentity(self.backend_id, address, model)
            self._identify = lambda: identity
            self.client = client_or_backend
            self.ledger = ledger if ledger is not None else CostLedger(default_model=model)
            self._body = lambda request: chat_body(model, request)
        if max_requests_per_batch < 1 or max_bytes_per_batch < 1:
            raise ConfigError("max_requests_per_batch and max_bytes_per_batch must be >= 1")
        self.state_dir = Path(state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.cache = cache if cache is not None else LLMCallCache(self.state_dir / "llm_cache.db")
        self.poll_interval_s = poll_interval_s
        self.max_wait_s = max_wait_s
        self._sleep = sleep
        self.max_requests_per_batch = max_requests_per_batch
        self.max_bytes_per_batch = max_bytes_per_batch
        # Counters for run records and tests.
        self.uploads = 0
        self.batches_created = 0
        self.batches_resumed = 0
        self.polls = 0
        self._reservations: dict[str, float] = {}

    # -- public API --------------------------------------------------------------------------

    @property
    def state_path(self) -> Path:
        """Where the pending batch's state lives."""
        return self.state_dir / STATE_FILE

    @property
    def pending_batch_id(self) -> str | None:
        """The id of a submitted batch whose results were not collected yet, if any."""
        state = self._load_state()
        return state.get("batch_id") if state else None

    def key(self, request: LLMRequest) -> str:
        """The cache key (and ``custom_id``) of ``request``: the one a :class:`CachedLLM`
        over the same backend uses (endpoint and served model included)."""
        ident = self._identify()
        return request.cache_key(ident.backend, ident.model, ident.address)

    def estimate(self, requests: Sequence[LLMRequest]) -> tuple[int, int, float]:
        """Dry run at batch prices, counting only cache misses: (prompt, completion, usd)."""
        return self.ledger.estimate(self._misses(requests).values(), self.model, batch=True)

    def run(self, requests: Sequence[LLMRequest]) -> list[LLMResponse]:
        """Answer ``requests`` in order: finish a pending batch first, send the misses as new
        batches, wait for them, and return answers (failed ones with ``error`` set)."""
        keys = [self.key(r) for r in requests]
        fresh: dict[str, LLMResponse] = {}
        errors: dict[str, str] = {}
        state = self._load_state()
        if state is not None:
            self.batches_resumed += 1
            log.info("resuming batch state in %s (batch %s)", self.state_dir, state.get("batch_id"))
            self._complete(state, fresh, errors)
        misses = self._misses(requests)
        for chunk in self._chunks(list(misses.items())):
            state = self._submit(chunk)
            self._complete(state, fresh, errors)
        found = self.cache.get_many(k for k in keys if k not in fresh)
        out: list[LLMResponse] = []
        for key in keys:
            if key in fresh:
                out.append(fresh[key])
            elif key in found:
                out.append(found[key])
            else:
                reason = errors.get(key, "no answer for this request in the batch output")
                out.append(LLMResponse(text="", model=self.model, error=reason))
        return out

    def complete_many(
        self, requests: list[LLMRequest], *, on_response: OnResponse | None = None
    ) -> list[LLMResponse]:
        """LLMBackend-style alias of :meth:`run`. Answers are stored in the cache as each
        batch's output file is ingested, so ``on_response`` is only a notification."""
        answers = self.run(requests)
        if on_response is not None:
            for index, answer in enumerate(answers):
                on_response(index, answer)
        return answers

    # -- submitting --------------------------------------------------------------------------

    def _misses(self, requests: Sequence[LLMRequest]) -> dict[str, LLMRequest]:
        keys = [self.key(r) for r in requests]
        found = self.cache.get_many(keys)
        misses: dict[str, LLMRequest] = {}
        for key, request in zip(keys, requests, strict=True):
            if key not in found:
                misses.setdefault(key, request)
        return misses

    def _line(self, key: str, request: LLMRequest) -> bytes:
        line = {"custom_id": key, "method": "POST", "url": ENDPOINT, "body": self._body(request)}
        return (json.dumps(line, ensure_ascii=False) + "\n").encode()

    def _chunks(
        self, items: list[tuple[str, LLMRequest]]
    ) -> Iterator[list[tuple[str, LLMRequest]]]:
        chunk: list[tuple[str, LLMRequest]] = []
        size = 0
        for key, request in items:
            line_size = len(self._line(key, request))
            full = len(chunk) >= self.max_requests_per_batch
            if chunk and (full or size + line_size > self.max_bytes_per_batch):
                yield chunk
                chunk, size = [], 0
            chunk.append((key, request))
            size += line_size
        if chunk:
            yield chunk

    def _submit(self, chunk: list[tuple[str, LLMRequest]]) -> dict[str, Any]:
        """Persist the request list, upload it, create the batch; returns the saved state."""
        # Refuse before anything is uploaded if the worst case would pass the budget.
        reserved = self.ledger.check_budget(self.model, [r for _, r in chunk], batch=True)
        state: dict[str, Any] = {
            "version": STATE_VERSION,
            "model": self.model,
            "status": "prepared",
            "created_at": time.time(),
            "input_file_id": None,
            "batch_id": None,
            "requests": [
                {"custom_id": key, "purpose": request.purpose, "request": request_to_dict(request)}
                for key, request in chunk
            ],
        }
        try:
            self._save_state(state)
            state = self._upload_and_create(state)
        except BaseException:
            self.ledger.release(reserved)
            raise
        # Held until the answers are recorded, so concurrent spending sees this batch.
        self._reservations[state["batch_id"]] = reserved
        return state

    def _upload_and_create(self, state: dict[str, Any]) -> dict[str, Any]:
        uploaded_now = not state.get("input_file_id")
        if uploaded_now:
            payload = b"".join(
                self._line(item["custom_id"], request_from_dict(item["request"]))
                for item in state["requests"]
            )
            name = f"wikidrift-batch-{int(state['created_at'])}.jsonl"
            # Kept beside the state while the batch runs, for inspection; removed when done.
            _write_atomic(self.state_dir / name, payload)
            state["input_path"] = name
            uploaded = self.client.files.create(
                file=(name, payload, "application/jsonl"), purpose="batch"
            )
            self.uploads += 1
            state.update(input_file_id=uploaded.id, status="uploaded")
            self._save_state(state)
        if not state.get("batch_id"):
            # Only a file uploaded by an earlier, interrupted run can already have a batch.
            batch_id = None if uploaded_now else self._existing_batch_for(state["input_file_id"])
            if batch_id is None:
                batch = self.client.batches.create(
                    input_file_id=state["input_file_id"],
                    endpoint=ENDPOINT,
                    completion_window="24h",
                    metadata={"source": "wikidrift", "requests": str(len(state["requests"]))},
                )
                self.batches_created += 1
                batch_id = batch.id
            state.update(batch_id=batch_id, status="submitted")
            self._save_state(state)
            log.info("submitted batch %s (%d requests)", batch_id, len(state["requests"]))
        return state

    def _existing_batch_for(self, input_file_id: str) -> str | None:
        """A batch already created from this file (a crash between create and saving its id)."""
        try:
            page = self.client.batches.list(limit=100)
        except Exception as exc:  # listing is an optimisation; creating is still correct
            log.warning("could not list batches to look for %s: %r", input_file_id, exc)
            return None
        for batch in page.data:
            if batch.input_file_id == input_file_id and batch.status != "cancelled":
                return batch.id
        return None

    # -- polling and collecting ----------------------------------------------------------------

    def _complete(
        self, state: dict[str, Any], fresh: dict[str, LLMResponse], errors: dict[str, str]
    ) -> None:
        if state.get("model") != self.model:
            raise ConfigError(
                f"{self.state_path} holds a batch for model {state.get('model')!r}, not "
                f"{self.model!r}: use another state_dir or finish that batch with its model"
            )
        if not state.get("batch_id"):
            state = self._upload_and_create(state)
        batch = self._wait(state["batch_id"])
        self._collect(state, batch, fresh, errors)
        self.ledger.release(self._reservations.pop(state["batch_id"], 0.0))
        state["status"] = "done"
        state["final_status"] = batch.status
        self._save_state(state)
        os.replace(self.state_path, self.state_dir / f"batch-{state['batch_id']}.json")
        if state.get("input_path"):
            (self.state_dir / state["input_path"]).unlink(missing_ok=True)

    def _wait(self, batch_id: str) -> Any:
        started = time.monotonic()
        while True:
            batch = self.client.batches.retrieve(batch_id)
            self.polls += 1
            if batch.status in TERMINAL_STATUSES:
                return batch
            waited = time.monotonic() - started
            if self.max_wait_s is not None and waited >= self.max_wait_s:
                raise WikidriftError(
                    f"batch {batch_id} is still {batch.status} after {waited:.0f}s; its id is "
                    f"saved in {self.state_path}: run again later to collect it"
                )
            self._sleep(self.poll_interval_s)

    def _download(self, file_id: str | None) -> list[dict[str, Any]]:
        if not file_id:
            return []
        text = self.client.files.content(file_id).text
        rows: list[dict[str, Any]] = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except ValueError:
                log.warning("skipping unreadable line %d of batch file %s", number, file_id)
        return rows

    def _collect(
        self,
        state: dict[str, Any],
        batch: Any,
        fresh: dict[str, LLMResponse],
        errors: dict[str, str],
    ) -> None:
        """Download output and error files; cache answers; note why the others failed."""
        purposes = {item["custom_id"]: item["purpose"] for item in state["requests"]}
        batch_id = state["batch_id"]
        stored: list[tuple[str, LLMResponse, str]] = []
        rows = self._download(batch.output_file_id) + self._download(batch.error_file_id)
        for row in rows:
            key = row.get("custom_id")
            if key not in purposes:
                continue
            answer = row.get("response") or {}
            status = answer.get("status_code")
            body = answer.get("body") or {}
            if status == 200 and isinstance(body, dict):
                response = response_from_completion(
                    body,
                    model=self.model,
                    ledger=self.ledger,
                    batch=True,
                    meta={"batch_id": batch_id, "request_id": answer.get("request_id")},
                )
                if response.error is None:
                    fresh[key] = response
                    stored.append((key, response, purposes[key]))
                else:
                    errors[key] = response.error
                continue
            problem = row.get("error") or (body.get("error") if isinstance(body, dict) else None)
            message = problem.get("message") if isinstance(problem, dict) else problem
            code = problem.get("code") if isinstance(problem, dict) else None
            prefix = f"HTTP {status}: " if status else ""
            errors[key] = f"batch {batch_id}: {prefix}{code or 'error'}: {message or 'failed'}"
        self.cache.put_many(stored, backend_id=self.backend_id)
        missing = [k for k in purposes if k not in fresh and k not in errors]
        if missing:
            reason = f"batch {batch_id} ended {batch.status} before this request ran"
            if batch.status == "failed" and batch.errors and batch.errors.data:
                details = "; ".join(
                    f"line {e.line}: {e.message}" if e.line else str(e.message)
                    for e in batch.errors.data[:5]
                )
                reason = f"batch {batch_id} failed: {details}"
            for key in missing:
                errors[key] = reason
        log.info(
            "batch %s %s: %d answers cached, %d failed",
            batch_id,
            batch.status,
            len(stored),
            len([k for k in purposes if k in errors]),
        )

    # -- state -------------------------------------------------------------------------------

    def _load_state(self) -> dict[str, Any] | None:
        try:
            state = json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return None
        except ValueError as exc:
            raise WikidriftError(f"batch state {self.state_path} is unreadable: {exc}") from exc
        if state.get("status") == "done":
            return None
        return state

    def _save_state(self, state: dict[str, Any]) -> None:
        _write_atomic(self.state_path, json.dumps(state, ensure_ascii=False).encode())
