"""The shipped item gold set: complete, split by article, and re-scored without a model the
way ``bench_items --gold`` does."""

from __future__ import annotations

import json

import pytest

from benchmarks.item_gold import (
    ANSWERS_PATH,
    GOLD_PAGES,
    GOLD_PATH,
    ReplayBackend,
    read_gold,
    report_gold,
    score_gold,
    temporal_spec,
)
from pipeline.config import load_config
from pipeline.generate.validator import ItemValidator

pytestmark = pytest.mark.slow  # spaCy on every candidate

VERDICTS = {"RIGHT", "WEAK", "WRONG"}


def test_every_record_is_read_and_on_a_gold_article() -> None:
    records = list(read_gold())
    assert records
    for rec in records:
        assert GOLD_PAGES[rec["page_id"]] == rec["split"]
        golds = [t["gold"] for t in rec["turns"]] if rec["kind"] == "dialogue" else [rec["gold"]]
        for gold in golds:
            assert gold["verdict"] in VERDICTS
            assert gold["verdict"] == "RIGHT" or gold["failure"]
            assert len(gold["readers"]) == 2  # two independent readings


# Checks written after the candidates were drawn: they may reject what generation kept.
CHECKS_SINCE = frozenset(
    {"question_side_unstated", "question_actor_swapped", "answer_part_of_range", "question_cut_off",
     "answer_part_of_name", "answer_part_of_list", "question_drops_date", "answer_lacks_year",
     "turn_drops_date", "turn_open_question", "answer_abbreviates_question"}
)  # fmt: skip


def test_rescoring_matches_what_generation_decided() -> None:
    """Candidates made by today's code are kept by today's checks exactly when generation kept
    them (where no later step decided: duplicates, the round trip, the dialogue cut)."""
    records = [r for r in read_gold(GOLD_PATH) if r.get("generated_by") in ("after", "after-2")]
    replay = ReplayBackend(json.loads(ANSWERS_PATH.read_text()))
    validator = ItemValidator.from_config(load_config(profile="offline").generation)
    units = score_gold(records, validator, replay)
    lines: list[str] = []
    figures = report_gold(units, lines.append)
    assert figures["qa"]["kept"] > 0 and any("question_premise_unstated" in x for x in lines)
    by_cid = {r["cid"]: r for r in records}
    for unit in units:
        outcome = by_cid[unit.cid]["outcome"]
        if unit.kind == "qa" and outcome not in ("duplicate", "duplicate_candidate"):
            if outcome == "answer_check_failed":
                assert "answer_check_failed" in unit.failed
            elif outcome == "kept" and not unit.kept:  # only a check added after they were made
                assert set(unit.failed) <= CHECKS_SINCE, (unit.cid, unit.failed)
            else:
                assert unit.kept == (outcome == "kept"), (unit.cid, outcome, unit.failed)


def test_parsed_quadruples_and_their_questions_rescore_as_generation_decided() -> None:
    """The checks today keep exactly the parsed quadruples and the temporal questions built on
    them that generation kept (duplicates aside), and the report counts them apart from what
    the LLM wrote."""
    records = [r for r in read_gold(GOLD_PATH) if r.get("generated_by") == "parse"]
    assert {r["kind"] for r in records} == {"quadruple", "temporal"}
    assert {r["split"] for r in records} == {"dev", "test"}
    validator = ItemValidator.from_config(load_config(profile="offline").generation)
    units = score_gold(records, validator, ReplayBackend({}))
    lines: list[str] = []
    figures = report_gold(units, lines.append)
    assert set(figures) == {"quadruple (parse)", "temporal (parse)"}
    by_cid = {r["cid"]: r for r in records}
    for unit in units:
        outcome = by_cid[unit.cid]["outcome"]
        if outcome not in ("duplicate", "duplicate_candidate"):
            assert unit.kept == (outcome == "kept"), (unit.cid, outcome, unit.failed)


def test_templated_questions_are_what_the_template_writes_today() -> None:
    """The gold's templated temporal questions are exactly today's templates of their facts,
    and re-scoring keeps the ones generation kept; the report counts them apart."""
    from pipeline.temporal.templates import template_question

    records = [r for r in read_gold(GOLD_PATH) if r.get("generated_by") == "parse+template"]
    assert {r["split"] for r in records} == {"dev", "test"}
    for rec in records:
        assert template_question(temporal_spec(rec)) == rec["question"], rec["cid"]
    validator = ItemValidator.from_config(load_config(profile="offline").generation)
    units = score_gold(records, validator, ReplayBackend({}))
    assert set(report_gold(units, [].append)) == {"temporal (parse+template)"}
    by_cid = {r["cid"]: r for r in records}
    for unit in units:
        assert unit.kept == (by_cid[unit.cid]["outcome"] == "kept"), unit.cid
