"""The labeling engine: GrowOVER's decision rules (scripted NLI) and real wikisnap pairs."""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence

import numpy as np
import pytest

from pipeline.facts import FactExtractor
from pipeline.labeling.align import AlignSettings, PageSentences, SentenceLabeler, _monotone_chain
from pipeline.models.nli import ScriptedNLIClassifier
from pipeline.text import sentence_hash


class VectorTableEmbedder:
    """Embedder with hand-set vectors, so a test fixes each similarity exactly."""

    model_id = "table"

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = {t: v / np.linalg.norm(v) for t, v in vectors.items()}
        self.texts_embedded = 0

    @property
    def dim(self) -> int:
        return 3

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts_embedded += len(texts)
        return np.stack([self.vectors[t] for t in texts]).astype(np.float32)


class Checker:
    model_id = "checker-llm"

    def __init__(self, verdict: bool | None) -> None:
        self.verdict, self.asked = verdict, []

    def check(self, pairs: Sequence[tuple[str, str]]) -> list[bool | None]:
        self.asked.extend(pairs)
        return [self.verdict] * len(pairs)


def page(texts: list[str], revision: int = 1) -> PageSentences:
    return PageSentences(7, "T", revision, texts, [sentence_hash(t) for t in texts])


OLD = ["The club was founded in 1920.", "Its stadium seats ten people.", "It plays in red."]
NEW_MID = "Its stadium holds many fans."


def _vectors(similarity: float) -> dict[str, np.ndarray]:
    angle = np.arccos(similarity)
    return {
        OLD[0]: np.array([0.0, 0.0, 1.0, 0.0]),
        OLD[1]: np.array([1.0, 0.0, 0.0, 0.0]),
        NEW_MID: np.array([np.cos(angle), np.sin(angle), 0.0, 0.0]),
        OLD[2]: np.array([0.0, 0.0, 0.0, 1.0]),
    }


def _label(similarity: float, nli: str | None, checker: Checker | None = None) -> list:
    embedder = VectorTableEmbedder(_vectors(similarity))
    scripted = ScriptedNLIClassifier({(OLD[1], NEW_MID): nli}) if nli else None
    labeler = SentenceLabeler(
        embedder, nli=scripted, checker=checker, facts=FactExtractor(use_ner=False)
    )
    rows, _ = labeler.label_pages([(page(OLD), page([OLD[0], NEW_MID, OLD[2]], 2))])
    return rows


def test_anchors_come_from_exact_matches_and_the_gap_goes_to_nli() -> None:
    rows = _label(0.8, "entailment")
    assert [(r.new_idx, r.label, r.rule) for r in rows] == [
        (0, "unchanged", "exact"),
        (1, "unchanged", "nli_entailment"),
        (2, "unchanged", "exact"),
    ]
    assert rows[1].old_idx == [1] and rows[1].nli_entailment == 1.0
    assert rows[1].decided_by == "scripted-nli" and rows[1].similarity == pytest.approx(0.8)


def test_contradiction_confirmed_by_the_llm_is_changed() -> None:
    checker = Checker(True)
    row = _label(0.8, "contradiction", checker)[1]
    assert (row.label, row.rule, row.verified, row.old_idx) == (
        "changed",
        "nli_contradiction",
        True,
        [1],
    )
    assert row.old_text == OLD[1] and row.decided_by == "scripted-nli+checker-llm"
    assert checker.asked == [(OLD[1], NEW_MID)]


def test_contradiction_rejected_by_the_llm_is_unlabeled() -> None:
    row = _label(0.8, "contradiction", Checker(False))[1]
    assert (row.label, row.reason) == ("unlabeled", "llm_says_not_contradictory")


def test_without_an_llm_a_contradiction_is_an_unverified_change() -> None:
    row = _label(0.8, "contradiction")[1]
    assert (row.label, row.verified) == ("changed", False)


def test_contradiction_below_the_similarity_floor_is_unlabeled() -> None:
    checker = Checker(True)
    row = _label(0.5, "contradiction", checker)[1]
    assert (row.label, row.reason) == ("unlabeled", "contradiction_below_similarity")
    assert checker.asked == []  # the LLM is only asked about plausible changes


def test_neutral_and_dissimilar_is_new_and_the_old_sentence_is_deleted() -> None:
    rows = _label(0.5, "neutral")
    assert (rows[1].label, rows[1].rule) == ("new", "nli_neutral")
    deleted = [r for r in rows if r.label == "deleted"]
    assert [(r.new_idx, r.old_idx, r.text) for r in deleted] == [(None, [1], OLD[1])]


def test_neutral_but_similar_is_unlabeled_with_its_reason() -> None:
    row = _label(0.8, "neutral")[1]
    assert (row.label, row.reason) == ("unlabeled", "neutral_but_similar")


def test_similarity_above_threshold_is_unchanged_without_nli() -> None:
    scripted = ScriptedNLIClassifier({})
    labeler = SentenceLabeler(
        VectorTableEmbedder(_vectors(0.995)), nli=scripted, settings=AlignSettings(faithful=True)
    )
    rows, _ = labeler.label_pages([(page(OLD), page([OLD[0], NEW_MID, OLD[2]], 2))])
    assert (rows[1].label, rows[1].rule) == ("unchanged", "similarity")
    assert scripted.pairs_classified == 0


def test_offline_rule_without_nli() -> None:
    def run(old_mid: str, new_mid: str, sim: float) -> object:
        angle = np.arccos(sim)
        vectors = {
            old_mid: np.array([1.0, 0, 0]),
            new_mid: np.array([np.cos(angle), np.sin(angle), 0]),
        }
        labeler = SentenceLabeler(VectorTableEmbedder(vectors), facts=FactExtractor(use_ner=False))
        old = [OLD[0], old_mid, OLD[2]]
        rows, _ = labeler.label_pages([(page(old), page([OLD[0], new_mid, OLD[2]], 2))])
        return rows[1]

    changed = run("It seats 9,000 people.", "It seats 12,000 people.", 0.9)
    assert (changed.label, changed.rule, changed.verified) == ("changed", "value_replaced", False)
    assert changed.reason == "number '9,000' -> '12,000'" and changed.old_idx == [1]
    reworded = run("It seats 9,000 people.", "The ground seats 9,000 people.", 0.9)
    assert (reworded.label, reworded.rule, reworded.old_idx) == ("unchanged", "rewording", [1])
    added = run("It seats 9,000 people.", "It seats 9,000 people and has a roof.", 0.9)
    assert (added.label, added.rule) == ("unchanged", "elaboration")
    fresh = run("It seats 9,000 people.", "A museum opened.", 0.3)
    assert (fresh.label, fresh.rule) == ("new", "low_similarity")
    other = run("It seats 9,000 people.", "It opened in 1990.", 0.65)
    assert (other.label, other.rule, other.old_idx) == ("new", "other_statement", [])
    done = run("It will seat 9,000 people.", "It seated 9,000 people until 2001.", 0.9)
    assert (done.label, done.rule) == ("changed", "plan_carried_out")
    planned = run("It will seat 9,000 people.", "It opened for 9,000 people.", 0.9)
    assert (planned.label, planned.rule) == ("unlabeled", "planned_to_done")


def test_pages_created_deleted_or_identical_need_no_model() -> None:
    embedder = VectorTableEmbedder({})
    nli = ScriptedNLIClassifier({})
    labeler = SentenceLabeler(embedder, nli=nli)
    rows, stats = labeler.label_pages(
        [(None, page(OLD)), (page(OLD), None), (page(OLD), page(OLD))]
    )
    assert [r.label for r in rows] == ["new"] * 3 + ["deleted"] * 3 + ["unchanged"] * 3
    assert {r.rule for r in rows} == {"page_new", "page_deleted", "identical_revision"}
    assert embedder.texts_embedded == 0 and nli.pairs_classified == 0
    assert (stats.pages_new, stats.pages_deleted, stats.pages_identical) == (1, 1, 1)


def test_monotone_chain_skips_crossing_anchors() -> None:
    # (new, old): a paragraph moved from the end to the start crosses the others.
    points = [(0, 5), (1, 0), (2, 1), (3, 2), (4, 3)]
    assert _monotone_chain(points) == [(1, 0), (2, 1), (3, 2), (4, 3)]
    assert _monotone_chain([]) == []


def test_span_matching_finds_a_sentence_split_in_two() -> None:
    whole = "He dated Sivo for nine years; they broke up in 2012."
    first, second = "He dated Sivo for nine years.", "They broke up in 2012."
    joined = f"{first} {second}"
    vectors = {
        whole: np.array([1.0, 0.0, 0.0]),
        first: np.array([0.0, 1.0, 0.0]),
        second: np.array([0.0, 0.0, 1.0]),
        joined: np.array([1.0, 0.001, 0.0]),
    }
    labeler = SentenceLabeler(VectorTableEmbedder(vectors), facts=FactExtractor(use_ner=False))
    rows, stats = labeler.label_pages(
        [(page([OLD[0], whole, OLD[2]]), page([OLD[0], first, second, OLD[2]], 2))]
    )
    assert [(r.label, r.rule, r.old_idx) for r in rows[1:3]] == [
        ("unchanged", "span", [1]),
        ("unchanged", "span", [1]),
    ]
    assert not [r for r in rows if r.label == "deleted"]
    assert stats.span_texts >= 2


def test_fact_guard_refuses_a_similar_pair_with_a_different_date() -> None:
    old = "All stats are as of March 29, 2022, from the team website."
    new = "All stats are as of May 8, 2024, from the team website."
    vectors = {
        old: np.array([1.0, 0.0, 0.0]),
        new: np.array([1.0, 0.01, 0.0]),
        OLD[0]: np.array([0.0, 0.0, 1.0]),
    }
    for faithful, expected in ((True, "unchanged"), (False, "changed")):
        labeler = SentenceLabeler(
            VectorTableEmbedder(vectors),
            settings=AlignSettings(faithful=faithful),
            facts=FactExtractor(use_ner=False),
        )
        rows, stats = labeler.label_pages([(page([OLD[0], old]), page([OLD[0], new], 2))])
        assert rows[1].label == expected
        assert stats.fact_guard_flips == (0 if faithful else 1)
    assert (rows[1].old_idx, rows[1].rule) == ([1], "value_replaced")
    assert rows[1].reason == "time 'March 29, 2022' -> 'May 8, 2024'"
    # With NLI the guarded pair goes down the contradiction path and keeps its counterpart.
    nli = ScriptedNLIClassifier({}, default="entailment")
    labeler = SentenceLabeler(
        VectorTableEmbedder(vectors), nli=nli, facts=FactExtractor(use_ner=False)
    )
    rows, _ = labeler.label_pages([(page([OLD[0], old]), page([OLD[0], new], 2))])
    assert (rows[1].label, rows[1].old_idx, rows[1].reason) == ("changed", [1], "fact_mismatch")


class SeededEmbedder(VectorTableEmbedder):
    """Hand-set vectors for some texts, a fixed random 64-d vector for any other text (joined
    spans), so a test controls the similarities it cares about and the rest are near 0."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts_embedded += len(texts)
        rows = []
        for t in texts:
            if t in self.vectors:
                v = np.zeros(64)
                v[: len(self.vectors[t])] = self.vectors[t]
            else:
                v = np.random.default_rng(zlib.crc32(t.encode())).normal(size=64)
            rows.append(v / np.linalg.norm(v))
        return np.stack(rows).astype(np.float32)


_FIRST, _LAST = "The club was founded in 1920.", "It plays in red."
_RIVER_OLD, _RIVER_NEW = "The stadium is by the river.", "The stadium lies by the river."


def _river_rows(similarity: float, *, faithful: bool) -> list:
    angle = np.arccos(similarity)
    vectors = {
        _FIRST: np.array([0.0, 0.0, 1.0, 0.0]),
        _RIVER_OLD: np.array([1.0, 0.0, 0.0, 0.0]),
        _RIVER_NEW: np.array([np.cos(angle), np.sin(angle), 0.0, 0.0]),
        _LAST: np.array([0.0, 0.0, 0.0, 1.0]),
    }
    labeler = SentenceLabeler(
        SeededEmbedder(vectors),
        settings=AlignSettings(faithful=faithful),
        facts=FactExtractor(use_ner=False),
    )
    old, new = [_FIRST, _RIVER_OLD, _LAST], [_FIRST, _RIVER_NEW, _LAST]
    rows, _ = labeler.label_pages([(page(old), page(new, 2))])
    return rows


@pytest.mark.parametrize("faithful", [True, False])
def test_similarity_is_rounded_to_two_decimals_like_growover_code(faithful: bool) -> None:
    # GrowOVER's code compares round(similarity, 2) >= 0.99: 0.986 counts, 0.984 does not.
    accepted = _river_rows(0.986, faithful=faithful)[1]
    assert (accepted.label, accepted.rule, accepted.old_idx) == ("unchanged", "similarity", [1])
    refused = _river_rows(0.984, faithful=faithful)[1]
    assert refused.rule != "similarity"
    # Below the threshold the default mode reads the words: "is by" -> "lies by" rewords.
    expected = (
        ("unlabeled", "similar_without_fact_change") if faithful else ("unchanged", "rewording")
    )
    assert (refused.label, refused.rule) == expected


def test_faithful_mode_reproduces_the_empty_top_span_of_growover_code() -> None:
    # An edited first sentence opens a gap at index 0; the code's anchor-led spans then start
    # at index -1 and are empty on both sides, equal, so the edited first sentence (and the
    # last one, through index -1) count as unchanged. The default mode does not do that.
    old = ["Alpha was founded in 1920 in Paris.", _RIVER_OLD, _LAST]
    new = ["Alpha, a club from Lyon, was founded in 1920.", _RIVER_OLD, _LAST]
    vectors = {
        old[0]: np.array([1.0, 0.0, 0.0]),
        new[0]: np.array([0.6, 0.8, 0.0]),
        _RIVER_OLD: np.array([0.0, 0.0, 1.0]),
        _LAST: np.array([0.0, 1.0, 1.0]),
    }
    rows = {}
    for faithful in (True, False):
        labeler = SentenceLabeler(
            SeededEmbedder(vectors),
            settings=AlignSettings(faithful=faithful),
            facts=FactExtractor(use_ner=False),
        )
        rows[faithful], _ = labeler.label_pages([(page(old), page(new, 2))])
    first = rows[True][0]
    assert (first.label, first.rule, first.old_idx) == ("unchanged", "span", [])
    # The default mode pairs the edited sentence with its old version and reads the words.
    assert (rows[False][0].rule, rows[False][0].old_idx) == ("elaboration", [0])
    assert [r.label for r in rows[True][1:3]] == ["unchanged", "unchanged"]


def test_faithful_mode_needs_a_mutual_best_match() -> None:
    # Two old sentences both 0.99-similar to one new sentence: only the first old one (the
    # code's argmax on rounded values) is matched; the other is not "unchanged" to anything.
    a, a2, b = "Alpha beta gamma.", "Alpha beta gamma!", "Delta epsilon."
    vectors = {
        a: np.array([1.0, 0.0, 0.0]),
        a2: np.array([1.0, 0.001, 0.0]),
        b: np.array([0.0, 0.0, 1.0]),
    }
    labeler = SentenceLabeler(
        SeededEmbedder(vectors),
        settings=AlignSettings(faithful=True),
        facts=FactExtractor(use_ner=False),
    )
    rows, _ = labeler.label_pages([(page([a, a2, b]), page([a2, b], 2))])
    assert (rows[0].label, rows[0].old_idx) == ("unchanged", [0])  # the first of the tie
    deleted = [r.old_idx for r in rows if r.label == "deleted"]
    assert deleted == [[1]]


def test_the_update_judge_settles_a_rewritten_pair_through_the_llm_cache(tmp_path) -> None:  # noqa: ANN001
    from pipeline.labeling.changes import UpdateJudge
    from pipeline.models.llm.cache import CachedLLM, LLMCallCache
    from pipeline.models.llm.scripted import ScriptedBackend

    old_mid = (
        "In 2017, he starred as Agent Whiskey in Matthew Vaughn's Kingsman: The Golden Circle "
        "and as mercenary Pero Tovar in The Great Wall, alongside Matt Damon."
    )
    new_mid = (
        "In 2016, he portrayed mercenary Pero Tovar in the fantasy action film The Great Wall, "
        "alongside Matt Damon, and directed by Zhang Yimou."
    )
    angle = np.arccos(0.8)
    vectors = {old_mid: np.array([1.0, 0, 0]), new_mid: np.array([np.cos(angle), np.sin(angle), 0])}
    asked: list[str] = []

    def run(span: str) -> object:
        def answer(request) -> str:  # noqa: ANN001
            asked.append(request.messages[-1]["content"])
            return json.dumps({"span": span})

        cache = LLMCallCache(tmp_path / f"llm-{span}.sqlite")
        judge = UpdateJudge(CachedLLM(ScriptedBackend(answer), cache))
        labeler = SentenceLabeler(VectorTableEmbedder(vectors), judge=judge)
        old = [OLD[0], old_mid, OLD[2]]
        rows, stats = labeler.label_pages([(page(old), page([OLD[0], new_mid, OLD[2]], 2))])
        assert stats.judge_questions == 1
        return rows[1]

    confirmed = run("2016")
    assert (confirmed.label, confirmed.rule, confirmed.old_idx) == (
        "changed",
        "judge_confirmed",
        [1],
    )
    assert "[[2017]]" in asked[0] and "+scripted:" in confirmed.decided_by
    unanswered = run("NONE")
    assert (unanswered.label, unanswered.rule) == ("unlabeled", "value_replaced_loosely")
    assert unanswered.reason.endswith("judge: no answer")
    calls = len(asked)
    assert run("NONE").label == "unlabeled" and len(asked) == calls  # answered from the cache
