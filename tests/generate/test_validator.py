"""The item validator: the limits it takes from the config, every kind's good items kept."""

from __future__ import annotations

from pipeline.config import GenerationConfig
from pipeline.generate.validator import ItemValidator
from tests.generate.test_dialogue import dialogue
from tests.generate.test_qa import changed, qa
from tests.generate.test_quadruples import quad

V = ItemValidator()


def test_good_items_pass_every_check() -> None:
    for verdict in (
        V.score_qa(qa(), n_sentences=20, allowed=[12, 13]),
        V.score_qa(changed(), n_sentences=20, allowed=[1]),
        V.score_dialogue(dialogue(), n_sentences=20, allowed=[10, 11]),
        V.score_dialogue(dialogue(4), n_sentences=20, allowed=[10, 11]),
        V.score_quadruple(quad(), n_sentences=20, allowed=[13]),
        V.score_quadruple(quad(timestamp=None), n_sentences=20),
    ):
        assert verdict.keep, verdict.detail
        assert verdict.reason is None and verdict.detail == ""


def test_limits_come_from_the_config() -> None:
    v = ItemValidator.from_config(
        GenerationConfig(answer_max_words=2, dialogue_min_turns=2, dialogue_max_turns=2)
    )
    assert v.score_qa(qa(), n_sentences=20).reason == "answer_too_long"  # 3 words
    assert v.score_dialogue(dialogue(2), n_sentences=20).keep


def test_the_grammar_check_follows_the_config() -> None:
    assert ItemValidator.from_config(GenerationConfig()).grammar is not None
    off = GenerationConfig(quadruple_grammar_check=False)
    assert ItemValidator.from_config(off).grammar is None
    assert (
        ItemValidator.from_config(off)
        .score_quadruple(quad(relation="confirmed"), n_sentences=20)
        .keep
    )
