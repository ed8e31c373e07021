"""What LLM calls cost, and a hard budget that stops a run *before* it overspends.

Prices are USD per 1M tokens. The built-in table was taken from OpenAI's API pricing page
(platform.openai.com/docs/pricing) as reproduced by pricing pages checked in March-June 2026;
prices change, so the config can override any entry (``CostLedger(prices={...})``). A dated
snapshot name ("gpt-4o-2024-08-06") is priced as its family by longest matching prefix.
Requests sent through the Batch API are billed at 50%.

Before a request is sent its cost is estimated pessimistically: prompt tokens from the text
length (:data:`CHARS_PER_TOKEN` characters per token, OpenAI's rule of thumb for English, plus
a few tokens of chat formatting per message; no tokenizer ships offline) and completion tokens
= ``max_tokens`` (the worst case). With ``max_cost_usd`` set, a request is refused with
:class:`BudgetExceededError` when spent + in-flight reservations + its estimate would pass the
budget; after the call the reservation is replaced by the real cost from the ``usage`` block.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pipeline.errors import ConfigError, WikidriftError
from pipeline.models.llm.base import LLMRequest, LLMResponse

CHARS_PER_TOKEN = 4.0
# Chat formatting overhead (role markers, separators) per message and for the reply priming,
# as counted by OpenAI's cookbook for gpt-4-class models.
TOKENS_PER_MESSAGE = 4
TOKENS_PER_REPLY = 3
BATCH_DISCOUNT = 0.5
PRICES_AS_OF = "2026-06 (OpenAI API pricing page)"


@dataclass(frozen=True)
class ModelPrice:
    """USD per 1M input (prompt) and output (completion) tokens."""

    input_per_1m: float
    output_per_1m: float


DEFAULT_PRICES: dict[str, ModelPrice] = {
    "gpt-4o": ModelPrice(2.50, 10.00),
    "gpt-4o-mini": ModelPrice(0.15, 0.60),
    "gpt-4.1": ModelPrice(2.00, 8.00),
    "gpt-4.1-mini": ModelPrice(0.40, 1.60),
    "gpt-4.1-nano": ModelPrice(0.10, 0.40),
    "gpt-4-turbo": ModelPrice(10.00, 30.00),
    "gpt-4-1106-preview": ModelPrice(10.00, 30.00),
    "gpt-4-0125-preview": ModelPrice(10.00, 30.00),
    "gpt-4": ModelPrice(30.00, 60.00),
}


class BudgetExceededError(WikidriftError):
    """Sending the next request could pass ``max_cost_usd``. ``responses`` holds what the
    interrupted ``complete_many`` call did get (None where nothing was sent), so a caching
    wrapper can keep the answers already paid for."""

    def __init__(self, message: str, *, responses: list[LLMResponse | None] | None = None) -> None:
        super().__init__(message)
        self.responses: list[LLMResponse | None] = responses or []


def _as_price(value: ModelPrice | Mapping[str, float] | tuple[float, float]) -> ModelPrice:
    if isinstance(value, ModelPrice):
        return value
    if isinstance(value, Mapping):
        return ModelPrice(float(value["input_per_1m"]), float(value["output_per_1m"]))
    inp, out = value
    return ModelPrice(float(inp), float(out))


def estimate_prompt_tokens(request: LLMRequest, chars_per_token: float = CHARS_PER_TOKEN) -> int:
    """Rough prompt size of one request: text length / chars_per_token plus chat overhead
    (a JSON schema sent as ``response_format`` is billed as input too)."""
    chars = sum(len(m.get("content") or "") + len(m.get("role") or "") for m in request.messages)
    if request.json_schema:
        chars += len(json.dumps(request.json_schema, separators=(",", ":")))
    text_tokens = math.ceil(chars / chars_per_token)
    return text_tokens + TOKENS_PER_MESSAGE * len(request.messages) + TOKENS_PER_REPLY


class CostLedger:
    """Tokens and USD per model for one run, with an optional hard budget (thread-safe)."""

    def __init__(
        self,
        max_cost_usd: float | None = None,
        *,
        prices: Mapping[str, ModelPrice | Mapping[str, float] | tuple[float, float]] | None = None,
        default_model: str | None = None,
        chars_per_token: float = CHARS_PER_TOKEN,
    ) -> None:
        if max_cost_usd is not None and max_cost_usd < 0:
            raise ConfigError(f"max_cost_usd must be >= 0, got {max_cost_usd!r}")
        if chars_per_token <= 0:
            raise ConfigError(f"chars_per_token must be > 0, got {chars_per_token!r}")
        self.max_cost_usd = max_cost_usd
        self.default_model = default_model
        self.chars_per_token = chars_per_token
        self.prices: dict[str, ModelPrice] = dict(DEFAULT_PRICES)
        for name, price in (prices or {}).items():
            self.prices[name] = _as_price(price)
        self._lock = threading.Lock()
        self._reserved = 0.0
        self._spent = 0.0
        self._per_model: dict[str, dict[str, float]] = {}
        self.refused = 0

    # -- prices ----------------------------------------------------------------------------

    def price_for(self, model: str) -> ModelPrice | None:
        """The price of ``model``: exact name, else the longest table name it starts with."""
        if model in self.prices:
            return self.prices[model]
        best = ""
        for name in self.prices:
            if model.startswith(name + "-") and len(name) > len(best):
                best = name
        return self.prices[best] if best else None

    def _require_price(self, model: str) -> ModelPrice:
        price = self.price_for(model)
        if price is None:
            raise ConfigError(
                f"no price known for model {model!r}, so its cost cannot be estimated or "
                f"capped; add it to the LLM prices in the config (known: {sorted(self.prices)})"
            )
        return price

    def cost(
        self, model: str, prompt_tokens: int, completion_tokens: int, *, batch: bool = False
    ) -> float:
        """USD for the given token counts (0.0 for a model with no price, e.g. a local one)."""
        price = self.price_for(model)
        if price is None:
            return 0.0
        usd = (prompt_tokens * price.input_per_1m + completion_tokens * price.output_per_1m) / 1e6
        return usd * BATCH_DISCOUNT if batch else usd

    # -- estimates -------------------------------------------------------------------------

    def _model(self, model: str | None) -> str:
        chosen = model or self.default_model
        if not chosen:
            raise ConfigError("CostLedger.estimate needs a model (or default_model)")
        return chosen

    def estimate_request(
        self, request: LLMRequest, model: str | None = None, *, batch: bool = False
    ) -> tuple[int, int, float]:
        """Worst-case (prompt_tokens, completion_tokens, usd) of one request."""
        name = self._model(model)
        prompt = estimate_prompt_tokens(request, self.chars_per_token)
        completion = int(request.max_tokens)
        return prompt, completion, self.cost(name, prompt, completion, batch=batch)

    def estimate(
        self, requests: Iterable[LLMRequest], model: str | None = None, *, batch: bool = False
    ) -> tuple[int, int, float]:
        """Worst-case (prompt_tokens, completion_tokens, usd) of sending all ``requests``
        (a dry run: nothing is sent, nothing is recorded)."""
        name = self._model(model)
        prompt = completion = 0
        usd = 0.0
        for request in requests:
            p, c, u = self.estimate_request(request, name, batch=batch)
            prompt += p
            completion += c
            usd += u
        return prompt, completion, usd

    # -- budget ----------------------------------------------------------------------------

    @property
    def spent_usd(self) -> float:
        """USD recorded so far (real usage, not estimates)."""
        with self._lock:
            return self._spent

    @property
    def reserved_usd(self) -> float:
        """USD reserved by requests in flight."""
        with self._lock:
            return self._reserved

    def reserve(self, usd: float, *, what: str = "the next request") -> None:
        """Hold ``usd`` for a request about to be sent, or raise BudgetExceededError if spent +
        reserved + usd would pass ``max_cost_usd``. Pair with :meth:`release`."""
        with self._lock:
            if self.max_cost_usd is not None:
                committed = self._spent + self._reserved
                if committed + usd > self.max_cost_usd + 1e-12:
                    self.refused += 1
                    raise BudgetExceededError(
                        f"LLM budget of ${self.max_cost_usd:.4f} would be exceeded: "
                        f"${self._spent:.4f} spent, ${self._reserved:.4f} in flight, and "
                        f"{what} was asked to cost up to ${usd:.4f} (worst case). Raise "
                        "max_cost_usd or re-run: answers already paid for are cached."
                    )
            self._reserved += usd

    def check_budget(self, model: str, requests: Iterable[LLMRequest], *, batch: bool) -> float:
        """Reserve the worst-case cost of all ``requests`` at once (a batch is all or nothing);
        returns the reserved USD. Needs a known price when a budget is set."""
        if self.max_cost_usd is not None:
            self._require_price(model)
        items = list(requests)
        usd = self.estimate(items, model, batch=batch)[2]
        self.reserve(usd, what=f"a batch of {len(items)} requests")
        return usd

    def reserve_request(self, model: str, request: LLMRequest, *, batch: bool = False) -> float:
        """Reserve one request's worst-case cost; returns the USD reserved."""
        if self.max_cost_usd is not None:
            self._require_price(model)
        usd = self.estimate_request(request, model, batch=batch)[2]
        self.reserve(usd)
        return usd

    def release(self, usd: float) -> None:
        """Give back a reservation (the request finished or was never sent)."""
        with self._lock:
            self._reserved = max(0.0, self._reserved - usd)

    def record(
        self, model: str, prompt_tokens: int, completion_tokens: int, *, batch: bool = False
    ) -> float:
        """Add one answered request's real usage; returns its USD cost."""
        usd = self.cost(model, prompt_tokens, completion_tokens, batch=batch)
        with self._lock:
            row = self._per_model.setdefault(
                model,
                {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0},
            )
            row["requests"] += 1
            row["prompt_tokens"] += prompt_tokens
            row["completion_tokens"] += completion_tokens
            row["cost_usd"] += usd
            self._spent += usd
        return usd

    def to_dict(self) -> dict[str, Any]:
        """Totals for the run record: per model and overall, with the budget and price date."""
        with self._lock:
            per_model = {name: dict(row) for name, row in sorted(self._per_model.items())}
            spent = self._spent
        return {
            "max_cost_usd": self.max_cost_usd,
            "spent_usd": round(spent, 8),
            "requests": int(sum(row["requests"] for row in per_model.values())),
            "prompt_tokens": int(sum(row["prompt_tokens"] for row in per_model.values())),
            "completion_tokens": int(sum(row["completion_tokens"] for row in per_model.values())),
            "refused_requests": self.refused,
            "per_model": per_model,
            "prices_as_of": PRICES_AS_OF,
            "chars_per_token": self.chars_per_token,
        }
