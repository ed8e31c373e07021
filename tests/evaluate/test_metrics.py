"""Metric functions against hand-computed cases."""

from __future__ import annotations

import pytest

from pipeline.evaluate import metrics as m


def test_normalize_is_squad_style() -> None:
    assert m.normalize("The  Eiffel-Tower, in  Paris!") == "eiffel tower in paris"
    assert m.normalize("An apple a day") == "apple day"
    assert m.normalize("“Théâtre” — an opera") == "théâtre opera"  # Unicode punctuation too


def test_exact_match_and_f1() -> None:
    assert m.exact_match("the Beatles", "Beatles!") == 1.0
    assert m.exact_match("Beatles band", "Beatles") == 0.0
    # prediction "john paul george" vs gold "john lennon": common 1, P = 1/3, R = 1/2, F1 = 0.4
    assert m.token_f1("John, Paul, George", "John Lennon") == pytest.approx(0.4)
    assert m.token_f1("Ringo", "John Lennon") == 0.0
    # each repeated token counts as often as it occurs in both: common 2, P = 2/4, R = 2/2
    assert m.token_f1("New York New York", "New York") == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert m.token_f1("", "") == 1.0 and m.token_f1("x", "") == 0.0


def test_best_over_gold_answers() -> None:
    em, f1 = m.best_em_f1("Barack Obama", ["Obama", "Barack Obama", "B. Obama"])
    assert (em, f1) == (1.0, 1.0)
    em, f1 = m.best_em_f1("President Obama", ["Obama", "Joe Biden"])
    assert em == 0.0 and f1 == pytest.approx(2 / 3)  # P 1/2, R 1 -> 2/3
    assert m.best_em_f1("x", []) == (0.0, 0.0)


def test_list_answers_any_and_all() -> None:
    golds = ["Paris", "Lyon", "Marseille"]
    assert m.list_em_f1("Lyon", golds, "any") == (1.0, 1.0)
    # all: two of three gold items appear as whole tokens -> F1 2/3, EM 0
    em, f1 = m.list_em_f1("Paris; Lyon", golds, "all")
    assert em == 0.0 and f1 == pytest.approx(2 / 3)
    assert m.list_em_f1("Marseille, Lyon and Paris", golds, "all") == (1.0, 1.0)
    assert m.list_em_f1("Parisian food", ["Paris"], "all") == (0.0, 0.0)  # not a whole token
    with pytest.raises(ValueError):
        m.list_em_f1("x", golds, "some")


def test_outdated_answers() -> None:
    assert m.is_outdated("2016", current="2015", previous="2016")
    assert m.is_outdated("in 2016, at Stanford", current="2015", previous="2016")
    assert not m.is_outdated("2015", current="2015", previous="2016")
    assert not m.is_outdated("Paris", current="2015", previous="2016")  # neither
    # both answers present: no closer to the previous one -> not outdated
    assert not m.is_outdated("2015 or 2016", current="2015", previous="2016")
    rows = [("2016", "2015", "2016"), ("2015", "2015", "2016"), ("no idea", "A", "B")]
    assert m.outdated_rate(rows) == pytest.approx(1 / 3)
    assert m.outdated_rate([]) is None


def test_bleu_matches_sacrebleu_by_hand() -> None:
    assert m.corpus_bleu(["the cat sat on the mat"], ["the cat sat on the mat"]) == pytest.approx(
        100.0
    )
    # no 4-gram in common: only sacrebleu's default smoothing keeps the score above 0;
    # a reply with no word in common scores 0.
    partial = m.corpus_bleu(["the cat sat down"], ["the cat sat up"])
    assert 0 < partial < 100
    assert m.corpus_bleu(["zebra"], ["the cat"]) == pytest.approx(0.0)
    assert m.corpus_bleu([], []) is None
    with pytest.raises(ValueError):
        m.corpus_bleu(["a"], [])


def test_bleu_value_by_hand() -> None:
    import math

    # p1 = 4/5, p2 = 3/4, p3 = 2/3, p4 = 1/2; hypothesis 5 tokens, reference 6: BP = e^(1-6/5)
    pred, ref = "a b c d e", "a b c d f g"
    geo = math.exp(sum(math.log(p) for p in (4 / 5, 3 / 4, 2 / 3, 1 / 2)) / 4)
    expected = 100 * math.exp(1 - 6 / 5) * geo
    assert m.corpus_bleu([pred], [ref]) == pytest.approx(expected, abs=1e-6)


def test_evidence_recall_at_k() -> None:
    passage_a = ["Su joined AMD in 2012.", "She became CEO in 2014.", "AMD grew."]
    passage_b = ["Paris is in France."]
    assert m.evidence_in_passage("She became CEO in 2014.", passage_a)
    # two sentences of one paragraph that are not adjacent still count
    assert m.evidence_in_passage("Su joined AMD in 2012. AMD grew.", passage_a)
    assert not m.evidence_in_passage("Su joined AMD in 2012. Paris is in France.", passage_a)
    assert m.evidence_recall(["She became CEO in 2014."], [passage_b, passage_a]) == 1.0
    assert m.evidence_recall(["She became CEO in 2014."], [passage_b]) == 0.0
    assert m.evidence_recall(["Paris is in France.", "Rome is in Italy."], [passage_b]) == 0.5
    assert m.evidence_recall([""], [passage_a]) == 0.0


def test_interval_accuracy() -> None:
    assert m.interval_correct("Sam Altman", "sam altman")
    assert m.interval_correct("It is Sam Altman.", "Sam Altman")
    assert not m.interval_correct("Altman", "Sam Altman")
    assert m.mean([1.0, 0.0, 1.0, 1.0]) == 0.75 and m.mean([]) is None
