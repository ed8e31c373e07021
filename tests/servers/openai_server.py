"""A local OpenAI-compatible server on 127.0.0.1, for testing the real client over real HTTP.

It speaks the subset of the OpenAI REST API the pipeline uses, in the same wire format:

- ``POST /v1/chat/completions``: the answer text comes from ``responder(body)`` (a function of
  the request JSON); ``response_format`` is honoured and recorded (``json_schema`` can be
  switched off to answer 400 like servers without structured outputs; ``json_object`` demands
  the word "json" in the messages, as OpenAI does); a ``usage`` block is always included.
- ``GET /v1/models`` when :attr:`OpenAIServer.models` is set (the served model ids).
- ``POST /v1/files`` (multipart upload), ``GET /v1/files/{id}``, ``GET /v1/files/{id}/content``.
- ``POST /v1/batches``, ``GET /v1/batches/{id}``, ``GET /v1/batches``: a batch goes
  validating -> in_progress -> completed (or expired / failed, see ``batch_outcome``) as it is
  polled, then offers ``output_file_id`` / ``error_file_id`` JSONL files whose lines are
  ``{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}``.

Failure knobs: :meth:`fail_next` (the next chat requests answer 429 / 5xx with ``Retry-After``
or ``retry-after-ms``), :meth:`malformed_next` (the next answers' content is broken JSON),
``reject`` (a predicate that turns matching requests into 400s, in batches too) and
``latency_s`` (to observe concurrency). Every request is recorded::

    with OpenAIServer(lambda body: '{"answer": "Paris"}') as srv:
        backend = OpenAIBackend("gpt-4o-mini", base_url=srv.url, api_key="test")
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

Responder = Callable[[dict[str, Any]], str]
BATCH_ENDPOINTS = ("/v1/chat/completions",)
MALFORMED_CONTENT = '{"answer": "unterminated, "evidence": [1, 2'


def last_user_text(body: dict[str, Any]) -> str:
    """The content of the last user message of a chat completion body."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


def echo_responder(body: dict[str, Any]) -> str:
    """Default answer: a JSON object echoing the start of the last user message."""
    return json.dumps({"answer": last_user_text(body)[:40]})


@dataclass
class RecordedRequest:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.monotonic)

    @property
    def json(self) -> Any:
        """The body parsed as JSON, or None."""
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None


@dataclass(frozen=True)
class _Failure:
    status: int
    retry_after: float | None
    retry_after_ms: float | None
    message: str


class _HttpError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        kind: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.payload = {"error": {"message": message, "type": kind, "param": param, "code": code}}


class OpenAIServer:
    """A scripted OpenAI-compatible HTTP server (see the module docstring)."""

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        latency_s: float = 0.0,
        batch_polls: int = 2,
    ) -> None:
        self.responder: Responder = responder or echo_responder
        self.latency_s = latency_s
        self.supports_json_schema = True
        self.supports_json_object = True
        # Polls of GET /v1/batches/{id} before a batch reaches its final status.
        self.batch_polls = batch_polls
        self.batch_outcome = "completed"  # "completed" | "expired" | "failed"
        # GET /v1/models lists these ids (None: 404, as a server without the endpoint).
        self.models: list[str] | None = None
        self.batch_expire_after: int | None = None  # lines answered before "expired"
        # body -> None (answer normally) or a message for a 400 answer.
        self.reject: Callable[[dict[str, Any]], str | None] | None = None
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        # Crash tests: once this many chat answers went out, later chat requests are held
        # (never answered; dropped with a 503 when released) so a client can be killed with
        # requests in flight that it provably never received.
        self.hold_after: int | None = None
        self._answered: list[str] = []
        self._failures: list[_Failure] = []
        self._malformed = 0
        self._in_flight = 0
        self.max_concurrent = 0
        self._ids = itertools.count(1)
        self.files: dict[str, dict[str, Any]] = {}
        self._file_bytes: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self._batch_polls_seen: dict[str, int] = {}
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The base URL to give the client (``http://127.0.0.1:PORT/v1``)."""
        if self._httpd is None:
            raise RuntimeError("server not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> OpenAIServer:
        """Bind 127.0.0.1 on a free port and serve in a background thread."""
        if self._httpd is not None:
            return self
        handler = type("BoundHandler", (_Handler,), {"server_state": self})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        # A short poll interval makes stop() quick (the default 0.5 s adds up over many tests).
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="openai-test-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._httpd = None

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- knobs and inspection ----------------------------------------------------------------

    def fail_next(
        self,
        n: int,
        status: int = 429,
        *,
        retry_after: float | None = None,
        retry_after_ms: float | None = None,
        message: str = "simulated failure",
    ) -> None:
        """Answer the next ``n`` chat completion requests with ``status`` (and headers)."""
        with self._lock:
            self._failures.extend(
                _Failure(status, retry_after, retry_after_ms, message) for _ in range(n)
            )

    def malformed_next(self, n: int) -> None:
        """Make the content of the next ``n`` chat answers broken JSON (HTTP 200)."""
        with self._lock:
            self._malformed += n

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    def requests_to(self, path: str, method: str = "POST") -> list[RecordedRequest]:
        """Requests with this exact method and path (``/v1/chat/completions``...)."""
        return [r for r in self.requests if r.path == path and r.method == method]

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        """JSON bodies of every chat completion request (including failed ones)."""
        return [r.json for r in self.requests_to("/v1/chat/completions")]

    def file_bytes(self, file_id: str) -> bytes:
        """The stored content of an uploaded or generated file."""
        with self._lock:
            return self._file_bytes[file_id]

    def clear(self) -> None:
        """Forget recorded requests (files and batches stay)."""
        with self._lock:
            self._requests.clear()

    # -- request handling ----------------------------------------------------------------------

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids):06d}"

    def handle(self, rec: RecordedRequest) -> tuple[int, dict[str, str], bytes]:
        """Route one request; returns (status, headers, body)."""
        with self._lock:
            self._requests.append(rec)
        try:
            if not rec.headers.get("authorization", "").startswith("Bearer "):
                raise _HttpError(401, "You didn't provide an API key.", code="invalid_api_key")
            path = urlsplit(rec.path).path
            parts = [p for p in path.split("/") if p]
            if rec.method == "POST" and path == "/v1/chat/completions":
                return self._http_chat(rec)
            if rec.method == "POST" and path == "/v1/files":
                return _json(200, self._upload(rec))
            if rec.method == "GET" and path == "/v1/models" and self.models is not None:
                listed = [{"id": m, "object": "model", "owned_by": "test"} for m in self.models]
                return _json(200, {"object": "list", "data": listed})
            if rec.method == "GET" and len(parts) == 3 and parts[:2] == ["v1", "files"]:
                return _json(200, self._file_object(parts[2]))
            if rec.method == "GET" and len(parts) == 4 and parts[:2] == ["v1", "files"]:
                if parts[3] != "content":
                    raise _HttpError(404, f"unknown path {path}")
                self._file_object(parts[2])
                return 200, {"Content-Type": "application/octet-stream"}, self._file_bytes[parts[2]]
            if rec.method == "POST" and path == "/v1/batches":
                return _json(200, self._create_batch(rec))
            if rec.method == "GET" and path == "/v1/batches":
                return _json(200, self._list_batches(rec))
            if rec.method == "GET" and len(parts) == 3 and parts[:2] == ["v1", "batches"]:
                return _json(200, self._poll_batch(parts[2]))
            raise _HttpError(404, f"Unknown request URL: {rec.method} {path}.")
        except _HttpError as exc:
            return _json(exc.status, exc.payload)

    def _http_chat(self, rec: RecordedRequest) -> tuple[int, dict[str, str], bytes]:
        with self._lock:
            self._in_flight += 1
            self.max_concurrent = max(self.max_concurrent, self._in_flight)
            failure = self._failures.pop(0) if self._failures else None
        try:
            if self.latency_s:
                time.sleep(self.latency_s)
            if failure is not None:
                headers: dict[str, str] = {}
                if failure.retry_after is not None:
                    headers["Retry-After"] = _number(failure.retry_after)
                if failure.retry_after_ms is not None:
                    headers["retry-after-ms"] = _number(failure.retry_after_ms)
                kind = "rate_limit_exceeded" if failure.status == 429 else "server_error"
                status, _, body = _json(
                    failure.status,
                    {
                        "error": {
                            "message": failure.message,
                            "type": kind,
                            "param": None,
                            "code": None,
                        }
                    },
                )
                return status, {**headers, "Content-Type": "application/json"}, body
            body_json = rec.json
            if not isinstance(body_json, dict):
                raise _HttpError(400, "We could not parse the JSON body of your request.")
            if self._held():
                raise _HttpError(503, "held request dropped")
            with self._lock:
                malformed = self._malformed > 0
                self._malformed -= 1 if malformed else 0
            status, payload = self.chat_result(body_json, malformed=malformed)
            if status == 200:
                with self._lock:
                    self._answered.append(json.dumps(body_json, sort_keys=True))
            return _json(status, payload)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _held(self) -> bool:
        """Wait while requests are held; True when this request must be dropped."""
        with self._lock:
            if self.hold_after is None or len(self._answered) < self.hold_after:
                return False
        while self.hold_after is not None and self._httpd is not None:
            time.sleep(0.05)
        return True

    def answered_bodies(self) -> list[str]:
        """Canonical JSON of every chat request answered with 200, in answer order."""
        with self._lock:
            return list(self._answered)

    def chat_result(
        self, body: dict[str, Any], *, malformed: bool = False
    ) -> tuple[int, dict[str, Any]]:
        """The (status, JSON) answer to a chat completion body (shared with batches)."""
        try:
            model = body.get("model")
            messages = body.get("messages")
            if not model or not isinstance(messages, list) or not messages:
                raise _HttpError(400, "'model' and a non-empty 'messages' are required.")
            fmt = body.get("response_format") or {}
            kind = fmt.get("type", "text") if isinstance(fmt, dict) else "text"
            if kind == "json_schema":
                if not self.supports_json_schema:
                    raise _HttpError(
                        400,
                        "Invalid parameter: 'response_format' of type 'json_schema' is not "
                        "supported with this model.",
                        param="response_format",
                    )
                spec = fmt.get("json_schema") or {}
                if not spec.get("name") or not isinstance(spec.get("schema"), dict):
                    raise _HttpError(
                        400,
                        "Invalid schema for response_format: missing name or schema.",
                        param="response_format",
                    )
            elif kind == "json_object":
                if not self.supports_json_object:
                    raise _HttpError(
                        400,
                        "Invalid parameter: 'response_format' of type 'json_object' is not "
                        "supported with this model.",
                        param="response_format",
                    )
                if "json" not in json.dumps(messages).lower():
                    raise _HttpError(
                        400,
                        "'messages' must contain the word 'json' in some form, to use "
                        "'response_format' of type 'json_object'.",
                        param="messages",
                    )
            if self.reject is not None:
                why = self.reject(body)
                if why:
                    raise _HttpError(400, why)
            text = MALFORMED_CONTENT if malformed else self.responder(body)
        except _HttpError as exc:
            return exc.status, exc.payload
        chars = sum(len(str(m.get("content") or "")) for m in messages)
        prompt_tokens = max(1, math.ceil(chars / 4)) + 4 * len(messages) + 3
        completion_tokens = max(1, math.ceil(len(text) / 4))
        limit = body.get("max_tokens") or body.get("max_completion_tokens")
        finish = "stop"
        if limit and completion_tokens > int(limit):
            completion_tokens, finish = int(limit), "length"
        return 200, {
            "id": self._new_id("chatcmpl"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "refusal": None},
                    "logprobs": None,
                    "finish_reason": finish,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
            "system_fingerprint": "fp_local",
        }

    # -- files ---------------------------------------------------------------------------------

    def _upload(self, rec: RecordedRequest) -> dict[str, Any]:
        content_type = rec.headers.get("content-type", "")
        if not content_type.startswith("multipart/form-data"):
            raise _HttpError(400, "Expected multipart/form-data.")
        raw = b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + rec.body
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(raw)
        fields: dict[str, bytes] = {}
        filename = "upload.jsonl"
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True) or b""
            if name == "file":
                filename = part.get_filename() or filename
            if name:
                fields[str(name)] = payload
        if "file" not in fields:
            raise _HttpError(400, "Missing file.", param="file")
        purpose = fields.get("purpose", b"").decode()
        if purpose not in ("batch", "fine-tune", "assistants", "user_data", "vision", "evals"):
            raise _HttpError(400, f"Invalid purpose {purpose!r}.", param="purpose")
        return self._store_file(fields["file"], purpose, filename)

    def _store_file(self, data: bytes, purpose: str, filename: str) -> dict[str, Any]:
        file_id = self._new_id("file")
        obj = {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
            "expires_at": None,
            "status_details": None,
        }
        with self._lock:
            self.files[file_id] = obj
            self._file_bytes[file_id] = data
        return obj

    def _file_object(self, file_id: str) -> dict[str, Any]:
        with self._lock:
            obj = self.files.get(file_id)
        if obj is None:
            raise _HttpError(404, f"No such File object: {file_id}", param="id")
        return obj

    # -- batches -------------------------------------------------------------------------------

    def _create_batch(self, rec: RecordedRequest) -> dict[str, Any]:
        body = rec.json
        if not isinstance(body, dict):
            raise _HttpError(400, "We could not parse the JSON body of your request.")
        endpoint = body.get("endpoint")
        if endpoint not in BATCH_ENDPOINTS:
            raise _HttpError(400, f"Unsupported endpoint {endpoint!r}.", param="endpoint")
        if body.get("completion_window") != "24h":
            raise _HttpError(400, "completion_window must be '24h'.", param="completion_window")
        input_id = str(body.get("input_file_id") or "")
        obj = self._file_object(input_id)
        if obj["purpose"] != "batch":
            raise _HttpError(400, "The input file must be uploaded with purpose 'batch'.")
        batch_id = self._new_id("batch")
        now = int(time.time())
        batch = {
            "id": batch_id,
            "object": "batch",
            "endpoint": endpoint,
            "errors": None,
            "input_file_id": input_id,
            "completion_window": "24h",
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": now,
            "in_progress_at": None,
            "expires_at": now + 86400,
            "finalizing_at": None,
            "completed_at": None,
            "failed_at": None,
            "expired_at": None,
            "cancelling_at": None,
            "cancelled_at": None,
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
            "metadata": body.get("metadata"),
        }
        with self._lock:
            self.batches[batch_id] = batch
            self._batch_polls_seen[batch_id] = 0
        return dict(batch)

    def _list_batches(self, rec: RecordedRequest) -> dict[str, Any]:
        query = parse_qs(urlsplit(rec.path).query)
        limit = int(query.get("limit", ["20"])[0])
        with self._lock:
            data = [dict(b) for b in reversed(self.batches.values())][:limit]
        return {
            "object": "list",
            "data": data,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
            "has_more": False,
        }

    def _poll_batch(self, batch_id: str) -> dict[str, Any]:
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                raise _HttpError(404, f"No batch found with id '{batch_id}'.")
            self._batch_polls_seen[batch_id] += 1
            polls = self._batch_polls_seen[batch_id]
            status = batch["status"]
        if status in ("completed", "failed", "expired", "cancelled"):
            return dict(batch)
        if polls >= self.batch_polls:
            self._finish_batch(batch)
        elif status == "validating":
            batch.update(status="in_progress", in_progress_at=int(time.time()))
        return dict(batch)

    def _finish_batch(self, batch: dict[str, Any]) -> None:
        now = int(time.time())
        lines = self._file_bytes[batch["input_file_id"]].decode().splitlines()
        requests: list[dict[str, Any]] = []
        problems: list[dict[str, Any]] = []
        seen: set[str] = set()
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except ValueError:
                problems.append(
                    {
                        "code": "invalid_json_line",
                        "message": "invalid JSON",
                        "param": None,
                        "line": number,
                    }
                )
                continue
            custom_id = item.get("custom_id")
            if (
                not custom_id
                or item.get("method") != "POST"
                or item.get("url") != batch["endpoint"]
                or not isinstance(item.get("body"), dict)
            ):
                problems.append(
                    {
                        "code": "invalid_request",
                        "message": "bad line",
                        "param": None,
                        "line": number,
                    }
                )
            elif custom_id in seen:
                problems.append(
                    {
                        "code": "duplicate_custom_id",
                        "message": "duplicate",
                        "param": "custom_id",
                        "line": number,
                    }
                )
            else:
                seen.add(custom_id)
                requests.append(item)
        if problems or self.batch_outcome == "failed":
            batch.update(
                status="failed",
                failed_at=now,
                errors={
                    "object": "list",
                    "data": problems
                    or [
                        {
                            "code": "simulated",
                            "message": "batch failed",
                            "param": None,
                            "line": None,
                        }
                    ],
                },
            )
            return
        answered = len(requests)
        if self.batch_outcome == "expired" and self.batch_expire_after is not None:
            answered = min(answered, self.batch_expire_after)
        out_lines: list[str] = []
        err_lines: list[str] = []
        for position, item in enumerate(requests):
            line_id = self._new_id("batch_req")
            if position < answered:
                status, payload = self.chat_result(item["body"])
                record = {
                    "id": line_id,
                    "custom_id": item["custom_id"],
                    "response": {
                        "status_code": status,
                        "request_id": self._new_id("req"),
                        "body": payload,
                    },
                    "error": None,
                }
                (out_lines if status == 200 else err_lines).append(json.dumps(record))
            else:
                err_lines.append(
                    json.dumps(
                        {
                            "id": line_id,
                            "custom_id": item["custom_id"],
                            "response": None,
                            "error": {
                                "code": "batch_expired",
                                "message": "This request could not be "
                                "executed before the completion window expired.",
                            },
                        }
                    )
                )
        output = (
            self._store_file(
                ("\n".join(out_lines) + "\n").encode(), "batch_output", "batch_output.jsonl"
            )
            if out_lines
            else None
        )
        errors = (
            self._store_file(
                ("\n".join(err_lines) + "\n").encode(), "batch_output", "batch_errors.jsonl"
            )
            if err_lines
            else None
        )
        final = "expired" if self.batch_outcome == "expired" else "completed"
        batch.update(
            status=final,
            finalizing_at=now,
            output_file_id=output["id"] if output else None,
            error_file_id=errors["id"] if errors else None,
            request_counts={
                "total": len(requests),
                "completed": len(out_lines),
                "failed": len(err_lines),
            },
        )
        batch["completed_at" if final == "completed" else "expired_at"] = now


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _json(status: int, payload: Any) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "application/json"}, json.dumps(payload).encode()


class _Handler(BaseHTTPRequestHandler):
    server_state: OpenAIServer
    protocol_version = "HTTP/1.1"

    def _serve(self) -> None:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            body = self._read_chunked()
        else:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
        rec = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        status, headers, payload = self.server_state.handle(rec)
        try:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client is gone (a crash test killed it): nothing to answer

    def _read_chunked(self) -> bytes:
        chunks: list[bytes] = []
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                self.rfile.readline()  # the blank line after the last chunk
                return b"".join(chunks)
            chunks.append(self.rfile.read(size))
            self.rfile.readline()

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self._serve()

    def do_POST(self) -> None:  # noqa: N802
        self._serve()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # keep test output clean
