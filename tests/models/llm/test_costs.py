"""CostLedger: prices, estimates, the hard budget, the run record."""

from __future__ import annotations

import pytest

from pipeline.errors import ConfigError, WikidriftError
from pipeline.models.llm.base import LLMRequest
from pipeline.models.llm.costs import (
    DEFAULT_PRICES,
    BudgetExceededError,
    CostLedger,
    ModelPrice,
    estimate_prompt_tokens,
)


def _request(content: str = "x" * 400, max_tokens: int = 100) -> LLMRequest:
    return LLMRequest(
        messages=({"role": "user", "content": content},),
        prompt_hash="p1",
        purpose="qa_new",
        max_tokens=max_tokens,
    )


def test_builtin_table_has_the_paper_era_models() -> None:
    for name in ("gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "gpt-4-1106-preview"):
        assert name in DEFAULT_PRICES
    assert DEFAULT_PRICES["gpt-4o-mini"] == ModelPrice(0.15, 0.60)


def test_dated_snapshots_priced_by_longest_prefix() -> None:
    ledger = CostLedger()
    assert ledger.price_for("gpt-4o-mini-2024-07-18") == DEFAULT_PRICES["gpt-4o-mini"]
    assert ledger.price_for("gpt-4o-2024-08-06") == DEFAULT_PRICES["gpt-4o"]
    assert ledger.price_for("gpt-4.1-mini-2025-04-14") == DEFAULT_PRICES["gpt-4.1-mini"]
    assert ledger.price_for("my-local-model") is None
    assert ledger.cost("my-local-model", 1000, 1000) == 0.0


def test_cost_and_batch_discount() -> None:
    ledger = CostLedger()
    # 1M prompt + 1M completion tokens of gpt-4o = 2.50 + 10.00
    assert ledger.cost("gpt-4o", 1_000_000, 1_000_000) == pytest.approx(12.5)
    assert ledger.cost("gpt-4o", 1_000_000, 1_000_000, batch=True) == pytest.approx(6.25)


def test_config_overrides_prices() -> None:
    ledger = CostLedger(
        prices={"gpt-4o": (1.0, 2.0), "local": {"input_per_1m": 0.5, "output_per_1m": 0.5}}
    )
    assert ledger.cost("gpt-4o", 1_000_000, 0) == pytest.approx(1.0)
    assert ledger.cost("local", 2_000_000, 0) == pytest.approx(1.0)
    assert ledger.price_for("gpt-4o-mini") == DEFAULT_PRICES["gpt-4o-mini"]  # others kept


def test_estimate_uses_chars_per_token_and_max_tokens() -> None:
    request = _request("x" * 400, max_tokens=100)
    # 400 chars of content + "user" (4) -> 101 tokens + 4 per message + 3 for the reply
    assert estimate_prompt_tokens(request) == 101 + 4 + 3
    ledger = CostLedger(default_model="gpt-4o-mini")
    prompt, completion, usd = ledger.estimate([request, request])
    assert (prompt, completion) == (2 * 108, 200)
    assert usd == pytest.approx((216 * 0.15 + 200 * 0.60) / 1e6)
    assert ledger.estimate([request], batch=True)[2] == pytest.approx(usd / 4)
    assert ledger.spent_usd == 0.0  # a dry run records nothing


def test_schema_counts_towards_the_estimate() -> None:
    plain = _request()
    with_schema = LLMRequest(
        messages=plain.messages,
        prompt_hash="p1",
        purpose="qa_new",
        json_schema={"type": "object", "properties": {"answer": {"type": "string"}}},
    )
    assert estimate_prompt_tokens(with_schema) > estimate_prompt_tokens(plain)


def test_estimate_needs_a_model() -> None:
    with pytest.raises(ConfigError):
        CostLedger().estimate([_request()])


def test_budget_refuses_before_overspending() -> None:
    ledger = CostLedger(max_cost_usd=0.001, default_model="gpt-4o")
    request = _request("x" * 400, max_tokens=50)  # worst case 108*2.5 + 50*10 = 770e-6 USD
    reserved = ledger.reserve_request("gpt-4o", request)
    assert reserved == pytest.approx(770e-6)
    with pytest.raises(BudgetExceededError) as info:
        ledger.reserve_request("gpt-4o", request)  # 770 + 770 > 1000 while in flight
    assert "$0.0010" in str(info.value) and "in flight" in str(info.value)
    assert isinstance(info.value, WikidriftError)
    ledger.release(reserved)
    ledger.record("gpt-4o", 100, 20)  # real cost 450e-6
    assert ledger.spent_usd == pytest.approx(450e-6)
    with pytest.raises(BudgetExceededError, match=r"\$0\.0004 spent"):
        ledger.reserve_request("gpt-4o", request)  # 450 + 770 > 1000
    assert ledger.refused == 2


def test_budget_with_unknown_price_is_a_config_error() -> None:
    ledger = CostLedger(max_cost_usd=1.0)
    with pytest.raises(ConfigError, match="no price known"):
        ledger.reserve_request("mystery-model", _request())


def test_to_dict_totals() -> None:
    ledger = CostLedger(max_cost_usd=5.0)
    ledger.record("gpt-4o-mini", 1000, 100)
    ledger.record("gpt-4o-mini", 2000, 200, batch=True)
    ledger.record("gpt-4o", 10, 10)
    record = ledger.to_dict()
    assert record["requests"] == 3
    assert record["prompt_tokens"] == 3010
    assert record["completion_tokens"] == 310
    assert record["per_model"]["gpt-4o-mini"]["requests"] == 2
    expected = (1000 * 0.15 + 100 * 0.6) / 1e6 + (2000 * 0.15 + 200 * 0.6) / 2e6
    assert record["per_model"]["gpt-4o-mini"]["cost_usd"] == pytest.approx(expected)
    assert record["max_cost_usd"] == 5.0
    assert "prices_as_of" in record


def test_bad_settings_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        CostLedger(max_cost_usd=-1)
    with pytest.raises(ConfigError):
        CostLedger(chars_per_token=0)
