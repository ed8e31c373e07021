"""OpenAI chat completions (or any server speaking the same protocol) as an LLM backend.

The official ``openai`` client (``AsyncOpenAI``) sends the requests; this module owns the
policy around it: bounded concurrency (a semaphore), an optional requests-per-minute limiter,
retries with exponential backoff and jitter on 408/409/429/5xx, connection errors and timeouts
(honouring ``Retry-After`` / ``retry-after-ms``; the client's own retries are off so every try
is counted here), a cost budget checked *before* each send, and structured outputs with a
fallback for servers that lack them: ``response_format`` ``json_schema`` (strict) first; if the
server answers 400 saying the format is unsupported ("auto" mode) the backend remembers it and
uses ``{"type": "json_object"}``, then plain text, with the schema written into the prompt and
the answer parsed tolerantly. Failures come back as responses with ``error`` set; only budget
and configuration errors raise.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from pipeline.errors import ConfigError
from pipeline.http_retry import retry_after_seconds
from pipeline.models.llm.base import (
    UNANSWERED,
    EndpointIdentity,
    LLMRequest,
    LLMResponse,
    OnResponse,
)
from pipeline.models.llm.costs import BudgetExceededError, CostLedger
from pipeline.models.llm.parsing import extract_json, with_json_instruction

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

StructuredOutputs = Literal["auto", "on", "off"]
# Ways to ask for JSON, strongest first; "auto" walks down this list on "unsupported" 400s.
FORMATS = ("json_schema", "json_object", "text")
OPENAI_BASE_URL = "https://api.openai.com/v1"
RETRYABLE_STATUS = frozenset({408, 409, 429})
MAX_RETRY_AFTER_S = 300.0
_SCHEMA_NAME_BAD_CHARS = re.compile(r"[^A-Za-z0-9_-]")
# A placeholder key for local OpenAI-compatible servers, which ignore it.
LOCAL_API_KEY = "local-no-key"

Sleep = Callable[[float], Awaitable[None] | None]


def is_openai_endpoint(base_url: str | None) -> bool:
    """True when ``base_url`` is OpenAI's own API (which needs a real key)."""
    host = urlsplit(base_url or OPENAI_BASE_URL).hostname or ""
    return host == "api.openai.com" or host.endswith(".openai.com")


def key_may_go_to(base_url: str | None, *, trusted: bool = False) -> bool:
    """Whether an API key may be sent to ``base_url``: OpenAI's own API over https, or any
    server the user marked as trusted (``llm.trust_base_url``)."""
    if trusted:
        return True
    url = base_url or OPENAI_BASE_URL
    return urlsplit(url).scheme == "https" and is_openai_endpoint(url)


def endpoint_address(base_url: str | None) -> str:
    """``host:port`` of an OpenAI-compatible server (the cache key's endpoint)."""
    parts = urlsplit(base_url or OPENAI_BASE_URL)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme, 0)
    return f"{(parts.hostname or '').lower()}:{port}"


def _without_credentials(url: str) -> str:
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    return parts._replace(netloc=host).geturl()


def resolve_api_key(api_key: str | None, base_url: str | None, *, trusted: bool = False) -> str:
    """The key to send: the argument, else ``OPENAI_API_KEY``; a local server gets a
    placeholder; OpenAI's endpoint without a key is a :class:`ConfigError`.

    A real key only goes to OpenAI's API over https or to a trusted ``base_url``; any other
    server gets the placeholder and a warning (plain http would show it to the network, a
    third-party host would receive the user's OpenAI credentials)."""
    key = api_key or os.environ.get("OPENAI_API_KEY") or ""
    if key and key != LOCAL_API_KEY and not key_may_go_to(base_url, trusted=trusted):
        shown = _without_credentials(base_url or OPENAI_BASE_URL)
        if is_openai_endpoint(base_url):
            raise ConfigError(
                f"llm.base_url = {shown!r}: refusing to send the OpenAI API key over plain "
                "http; use https://api.openai.com/v1"
            )
        log.warning(
            "the OpenAI API key is withheld from %s (not OpenAI's API over https); set "
            "llm.trust_base_url = true if this server should receive it",
            shown,
        )
        return LOCAL_API_KEY
    if key:
        return key
    if is_openai_endpoint(base_url):
        raise ConfigError(
            "OPENAI_API_KEY is not set: the OpenAI backend needs an API key for "
            f"{base_url or OPENAI_BASE_URL} (export OPENAI_API_KEY=...; keys never go in the "
            "config file). Use a local OpenAI-compatible server via base_url to run without one."
        )
    return LOCAL_API_KEY


def schema_name(name: str) -> str:
    """A ``json_schema.name`` the API accepts (``^[A-Za-z0-9_-]{1,64}$``)."""
    cleaned = _SCHEMA_NAME_BAD_CHARS.sub("_", name or "answer")[:64]
    return cleaned or "answer"


def chat_body(
    model: str,
    request: LLMRequest,
    *,
    response_format: str = "json_schema",
    strict: bool = True,
    max_tokens_param: str = "max_tokens",
) -> dict[str, Any]:
    """The JSON body of a chat completion for ``request`` (also one Batch API line's body).

    ``response_format`` is how JSON is asked for when the request has a schema: "json_schema"
    (structured outputs), "json_object" or "text" (both with the schema in the prompt)."""
    if response_format not in FORMATS:
        raise ConfigError(f"response_format must be one of {FORMATS}, got {response_format!r}")
    messages = [dict(m) for m in request.messages]
    body: dict[str, Any] = {
        "model": model,
        "temperature": request.temperature,
        max_tokens_param: request.max_tokens,
    }
    if request.seed is not None:
        body["seed"] = request.seed
    if request.json_schema is not None:
        if response_format == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": schema_name(request.schema_name),
                    "schema": request.json_schema,
                    "strict": strict,
                },
            }
        else:
            # json_object mode needs the word "JSON" in the prompt; text mode needs the schema.
            messages = with_json_instruction(messages, request.json_schema)
            if response_format == "json_object":
                body["response_format"] = {"type": "json_object"}
    body["messages"] = messages
    return body


def response_from_completion(
    data: Mapping[str, Any],
    *,
    model: str,
    ledger: CostLedger | None,
    batch: bool = False,
    meta: dict[str, Any] | None = None,
) -> LLMResponse:
    """Turn a ``chat.completion`` object (as a dict) into an LLMResponse, recording its usage
    in ``ledger`` under ``model`` (the requested model, which carries the price)."""
    info = dict(meta or {})
    usage = data.get("usage") or {}
    prompt_tokens = int(usage.get("prompt_tokens") or 0)
    completion_tokens = int(usage.get("completion_tokens") or 0)
    cost = ledger.record(model, prompt_tokens, completion_tokens, batch=batch) if ledger else 0.0
    answered = str(data.get("model") or model)
    choices = data.get("choices") or []
    base = {
        "model": answered,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "cost_usd": cost,
    }
    if not choices:
        return LLMResponse(text="", error="the answer has no choices", meta=info, **base)
    choice = choices[0] or {}
    message = choice.get("message") or {}
    finish = choice.get("finish_reason")
    info["finish_reason"] = finish
    if finish == "length":
        info["truncated"] = True
    if message.get("refusal"):
        return LLMResponse(
            text="", error=f"the model refused: {message['refusal']}", meta=info, **base
        )
    content = message.get("content")
    if content is None:
        return LLMResponse(text="", error="the answer has no content", meta=info, **base)
    text = str(content)
    return LLMResponse(text=text, parsed=extract_json(text), meta=info, **base)


def _error_text(exc: BaseException) -> str:
    message = getattr(exc, "message", None) or str(exc)
    return " ".join(str(message).split())[:500]


def _format_unsupported(exc: openai.APIStatusError) -> bool:
    """A 400 that says the server does not support the response_format we sent (not a bad
    schema: that is the caller's bug and must surface, not silently degrade)."""
    if exc.status_code not in (400, 422):
        return False
    blob = f"{exc.message} {json.dumps(exc.body, default=str)}".lower()
    if "invalid schema" in blob:
        return False
    return any(word in blob for word in ("response_format", "json_schema", "json_object"))


class _RateLimiter:
    """Spaces request starts at least 60/rpm seconds apart (per complete_many call)."""

    def __init__(self, requests_per_minute: float, sleep: Callable[[float], Awaitable[None]]):
        self.interval = 60.0 / requests_per_minute
        self._sleep = sleep
        self._lock = asyncio.Lock()
        self._next_at = 0.0

    async def wait(self) -> None:
        async with self._lock:
            now = time.monotonic()
            if now < self._next_at:
                await self._sleep(self._next_at - now)
                now = self._next_at
            self._next_at = now + self.interval


class OpenAIBackend:
    """Chat completions over the OpenAI API or any OpenAI-compatible server.

    ``sleep`` (sync or async callable) replaces ``asyncio.sleep`` for backoff and rate
    limiting, so tests can record waits without waiting. ``ledger`` accounts tokens and cost
    and enforces ``max_cost_usd``; one is made when none is given.
    """

    backend_id = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_concurrency: int = 4,
        requests_per_minute: float | None = None,
        max_retries: int = 5,
        timeout_s: float = 60.0,
        structured_outputs: StructuredOutputs = "auto",
        strict_schema: bool = True,
        max_tokens_param: str = "max_tokens",
        ledger: CostLedger | None = None,
        sleep: Sleep | None = None,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 60.0,
        seed: int | None = None,
        backend_id: str = "openai",
        trust_base_url: bool = False,
    ) -> None:
        if not model:
            raise ConfigError("the OpenAI backend needs a model name (e.g. 'gpt-4o-mini')")
        if max_concurrency < 1:
            raise ConfigError(f"max_concurrency must be >= 1, got {max_concurrency}")
        if requests_per_minute is not None and requests_per_minute <= 0:
            raise ConfigError(f"requests_per_minute must be > 0, got {requests_per_minute}")
        if max_retries < 0:
            raise ConfigError(f"max_retries must be >= 0, got {max_retries}")
        if structured_outputs not in ("auto", "on", "off"):
            raise ConfigError(
                f"structured_outputs must be 'auto', 'on' or 'off', got {structured_outputs!r}"
            )
        if max_tokens_param not in ("max_tokens", "max_completion_tokens"):
            raise ConfigError(
                "max_tokens_param must be 'max_tokens' or 'max_completion_tokens', "
                f"got {max_tokens_param!r}"
            )
        self.model = model
        # Cache keys and item provenance say which kind of server answered ("llamacpp", ...).
        self.backend_id = backend_id
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self._api_key = api_key
        self.trust_base_url = trust_base_url
        self._identity: EndpointIdentity | None = None
        # The model ids the server listed when asked (None: not asked, or it did not answer).
        self.served_models: list[str] | None = None
        self.max_concurrency = max_concurrency
        self.requests_per_minute = requests_per_minute
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self.structured_outputs: StructuredOutputs = structured_outputs
        self.strict_schema = strict_schema
        self.max_tokens_param = max_tokens_param
        self.ledger = ledger if ledger is not None else CostLedger(default_model=model)
        self._sleep: Sleep = sleep if sleep is not None else asyncio.sleep
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self._rng = random.Random(seed)
        self._state_lock = threading.Lock()
        # Index into FORMATS: what this server is known to accept for schema requests.
        self._format_level = 0 if structured_outputs != "off" else FORMATS.index("text")
        # Counters for run records and tests.
        self.requests_sent = 0
        self.retries = 0
        self.max_in_flight = 0
        self._in_flight = 0

    # -- configuration helpers --------------------------------------------------------------

    @property
    def response_format(self) -> str:
        """How schema requests are sent now: "json_schema", "json_object" or "text"."""
        return FORMATS[self._format_level]

    def request_body(self, request: LLMRequest) -> dict[str, Any]:
        """The chat completion body this backend would send for ``request`` right now."""
        return chat_body(
            self.model,
            request,
            response_format=self.response_format,
            strict=self.strict_schema,
            max_tokens_param=self.max_tokens_param,
        )

    def api_key(self) -> str:
        """The key to send (raises ConfigError for OpenAI's endpoint without one); a real key
        is withheld from servers other than OpenAI's over https unless ``trust_base_url``."""
        return resolve_api_key(self._api_key, self.base_url, trusted=self.trust_base_url)

    def endpoint_identity(self) -> EndpointIdentity:
        """This server's ``host:port`` and the model it serves, from ``GET /models`` (asked
        once): the configured name when the server lists it, the one model a single-model
        server (llama.cpp, vLLM) lists otherwise, else the configured name (also when the
        server does not answer: its address alone keeps it apart from other servers)."""
        if self._identity is None:
            served = self.model
            try:
                client = self.make_sync_client(max_retries=0)
                try:
                    ids = [
                        m.id
                        for m in client.with_options(
                            timeout=min(self.timeout_s, 10.0)
                        ).models.list()
                    ]
                finally:
                    client.close()
                self.served_models = ids
                if self.model not in ids and len(ids) == 1:
                    served = str(ids[0])
            except ConfigError:
                raise
            except Exception as exc:  # any failure: fall back to the configured name
                log.info("could not list the models of %s: %s", self.base_url, exc)
            self._identity = EndpointIdentity(
                self.backend_id, endpoint_address(self.base_url), served
            )
        return self._identity

    def make_async_client(self) -> openai.AsyncOpenAI:
        """An AsyncOpenAI client with the client's own retries off (ours count and back off)."""
        import openai

        return openai.AsyncOpenAI(
            api_key=self.api_key(),
            base_url=self.base_url,
            max_retries=0,
            timeout=self.timeout_s,
        )

    def make_sync_client(self, *, max_retries: int | None = None) -> openai.OpenAI:
        """A synchronous client for the same endpoint (the Batch API runner uses it)."""
        import openai

        return openai.OpenAI(
            api_key=self.api_key(),
            base_url=self.base_url,
            max_retries=self.max_retries if max_retries is None else max_retries,
            timeout=self.timeout_s,
        )

    def estimate(self, requests: Sequence[LLMRequest]) -> tuple[int, int, float]:
        """Dry run: worst-case (prompt_tokens, completion_tokens, usd), nothing is sent."""
        return self.ledger.estimate(requests, self.model)

    # -- sending ---------------------------------------------------------------------------

    def complete_many(
        self, requests: list[LLMRequest], *, on_response: OnResponse | None = None
    ) -> list[LLMResponse]:
        """Answer every request in order (see the module docstring for the policy). Works from
        sync code and from inside a running event loop (it then runs in a worker thread)."""
        if not requests:
            return []
        work = self.acomplete_many(requests, on_response=on_response)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(work)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="openai-backend") as pool:
            return pool.submit(asyncio.run, work).result()

    async def acomplete_many(
        self, requests: Sequence[LLMRequest], *, on_response: OnResponse | None = None
    ) -> list[LLMResponse]:
        """The async form of :meth:`complete_many`."""
        if not requests:
            return []
        if self.ledger.max_cost_usd is not None and self.ledger.price_for(self.model) is None:
            raise ConfigError(
                f"max_cost_usd is set but no price is known for model {self.model!r}; "
                "add it to the LLM prices in the config"
            )
        client = self.make_async_client()
        semaphore = asyncio.Semaphore(self.max_concurrency)
        limiter = (
            _RateLimiter(self.requests_per_minute, self._async_sleep)
            if self.requests_per_minute
            else None
        )
        stopped: list[BudgetExceededError] = []
        try:

            async def one(index: int, request: LLMRequest) -> LLMResponse | None:
                result = await self._complete_one(client, semaphore, limiter, stopped, request)
                if result is not None and on_response is not None:
                    on_response(index, result)
                return result

            results = await asyncio.gather(*(one(i, r) for i, r in enumerate(requests)))
        finally:
            await client.close()
        if stopped:
            raise BudgetExceededError(str(stopped[0]), responses=list(results))
        return [r for r in results if r is not None]

    async def _async_sleep(self, seconds: float) -> None:
        result = self._sleep(seconds)
        if inspect.isawaitable(result):
            await result

    def _backoff(self, attempt: int) -> float:
        delay = min(self.backoff_max_s, self.backoff_base_s * (2**attempt))
        # "Equal jitter": at least half the delay, so clients that failed together spread out.
        return delay * (0.5 + 0.5 * self._rng.random())

    def _downgrade_from(self, level: int) -> bool:
        """Move past format ``level`` if still current; False when nothing is left to try."""
        with self._state_lock:
            if self._format_level == level and level < len(FORMATS) - 1:
                self._format_level = level + 1
                log.warning(
                    "server %s does not support response_format %r; using %r from now on",
                    self.base_url or OPENAI_BASE_URL,
                    FORMATS[level],
                    FORMATS[level + 1],
                )
            return self._format_level > level

    async def _complete_one(
        self,
        client: openai.AsyncOpenAI,
        semaphore: asyncio.Semaphore,
        limiter: _RateLimiter | None,
        stopped: list[BudgetExceededError],
        request: LLMRequest,
    ) -> LLMResponse | None:
        import openai

        async with semaphore:
            attempt = 0
            while True:
                if stopped:
                    return None  # the budget ran out: send nothing more
                level = self._format_level
                body = self.request_body(request)
                try:
                    reserved = self.ledger.reserve_request(self.model, request)
                except BudgetExceededError as exc:
                    stopped.append(exc)
                    return None
                try:
                    if limiter is not None:
                        await limiter.wait()
                    self.requests_sent += 1
                    self._in_flight += 1
                    self.max_in_flight = max(self.max_in_flight, self._in_flight)
                    try:
                        completion = await client.chat.completions.create(**body)
                    finally:
                        self._in_flight -= 1
                except openai.APIStatusError as exc:
                    status = exc.status_code
                    if (
                        request.json_schema is not None
                        and self.structured_outputs == "auto"
                        and FORMATS[level] != "text"
                        and _format_unsupported(exc)
                        and self._downgrade_from(level)
                    ):
                        continue  # same request in the next format; not a retry
                    retryable = status in RETRYABLE_STATUS or status >= 500
                    if not retryable or attempt >= self.max_retries:
                        return self._failure(exc, attempt + 1, status=status)
                    wait = retry_after_seconds(exc.response.headers)
                    wait = min(wait, MAX_RETRY_AFTER_S) if wait is not None else None
                    await self._retry_wait(attempt, wait, f"HTTP {status}")
                    attempt += 1
                    continue
                except (openai.APIConnectionError, openai.APITimeoutError) as exc:
                    if attempt >= self.max_retries:
                        return self._failure(exc, attempt + 1)
                    await self._retry_wait(attempt, None, type(exc).__name__)
                    attempt += 1
                    continue
                except Exception as exc:  # a malformed answer must not sink the whole call
                    log.warning("OpenAI request failed unexpectedly: %r", exc)
                    return self._failure(exc, attempt + 1)
                finally:
                    self.ledger.release(reserved)
                data = completion.model_dump() if hasattr(completion, "model_dump") else {}
                if not isinstance(data, dict) or not data:
                    return self._failure(
                        ValueError(f"unexpected answer: {str(completion)[:200]}"), attempt + 1
                    )
                return response_from_completion(
                    data,
                    model=self.model,
                    ledger=self.ledger,
                    meta={"attempts": attempt + 1, "response_format": FORMATS[level]},
                )

    async def _retry_wait(self, attempt: int, retry_after: float | None, why: str) -> None:
        delay = retry_after if retry_after is not None else self._backoff(attempt)
        self.retries += 1
        log.info("retrying after %s in %.2fs (attempt %d)", why, delay, attempt + 1)
        await self._async_sleep(delay)

    def _failure(
        self, exc: BaseException, attempts: int, *, status: int | None = None
    ) -> LLMResponse:
        prefix = f"HTTP {status}: " if status is not None else f"{type(exc).__name__}: "
        if attempts > 1:
            prefix = f"gave up after {attempts} attempts: {prefix}"
        import openai

        transport = isinstance(exc, (openai.APIConnectionError, openai.APITimeoutError))
        busy = status is not None and (status in RETRYABLE_STATUS or status >= 500)
        return LLMResponse(
            text="",
            model=self.model,
            error=prefix + _error_text(exc),
            meta={"attempts": attempts, "status": status, UNANSWERED: transport or busy},
        )
