"""Sentence labeling: unchanged / changed / new / deleted between two revisions of an article.

The method is GrowOVER's (§3.2, Algorithm 3):

1. **Unchanged by similarity.** A new sentence whose embedding similarity to an old sentence,
   rounded to two decimals as GrowOVER's code rounds it, reaches ``unchanged_threshold``
   (0.99) is unchanged. (All thresholds compare rounded similarities: >= 0.6, <= 0.7.)
2. **Span matching.** Anchored unchanged pairs cut both revisions into gaps. Inside a gap,
   consecutive spans of up to ``max_span`` old sentences are compared (joined text) with spans
   of up to ``max_span`` new sentences; a span pair above the threshold makes all its
   sentences unchanged (one sentence split in two, two merged into one). Then re-gap.
3. **NLI inside gaps**, old sentence as premise, new as hypothesis: entailed by any old
   sentence -> unchanged; else contradicted by an old sentence with similarity >
   ``changed_min_similarity`` (0.6) and confirmed by the LLM contradiction check -> changed;
   else all neutral and max similarity < ``new_max_similarity`` (0.7) -> new; otherwise
   ``unlabeled`` with the reason.
4. Old sentences matched by nothing are deleted. A page missing from the old snapshot is all
   new; a page missing from the new snapshot is all deleted.

**Fast paths** (same answers on every sentence they decide):

- a page whose revision did not change (same sentence hashes) is all unchanged, no model call;
- a new sentence whose normalized text equals an old one (hash) is unchanged without a model
  (its similarity would be 1.0 > 0.99);
- only sentences left after exact matching are embedded; similarity anchors are searched
  among old sentences not matched exactly; span and NLI work happen only inside gaps; span
  pairs whose joined lengths differ by more than ``span_length_ratio`` or that share fewer
  than ``span_min_word_overlap`` of their words (a 0.99-similar pair never does) are not
  embedded;
- all embedding, NLI and LLM requests of a batch of pages go to the models together.

``naive=True`` runs the reference way (every sentence of both revisions embedded, all pairs
compared, no exact-match or identical-revision shortcut, no span pruning) so benchmarks can
compare; it gives the same labels up to pathological duplicates.

**Without an NLI model** (``offline`` profile) step 3 uses a documented substitute: the most
similar old sentence in the gap is the counterpart, and "contradiction" becomes "states
different numbers, dates or named entities" (:mod:`pipeline.facts`):

- similarity >= ``new_max_similarity`` (0.7) and different facts -> ``changed``
  (rule ``fact_change``); same facts -> ``unlabeled`` (``similar_without_fact_change``: most
  likely a rewording, which NLI would call entailment);
- similarity in (``changed_min_similarity``, ``new_max_similarity``) with different facts ->
  ``unlabeled`` (``fact_change_low_similarity``: a new statement as often as a changed one);
- otherwise (similarity < 0.7, no conflicting facts) -> ``new`` (rule ``low_similarity``).

Every row records its ``rule`` and the model(s) that ``decided`` it.

**Faithful mode** (``faithful=True``) replaces steps 1-2 with GrowOVER's published matcher,
decision for decision (mutual best matches on rounded similarities, its gaps and span
enumeration, quirks included; README "Paper versus code"), then its gaps go to step 3.

**Fact guard** (default on; off with ``faithful=True``): a pair that *similarity* (not exact
text) would call unchanged, sentence or span, whose numbers / dates / entities differ is not
unchanged: it goes on to the NLI / changed path with reason ``fact_mismatch`` and keeps its
old sentence as counterpart.

Why one long module: :class:`SentenceLabeler` is one procedure (the steps above) whose steps
read and write the same per-page state; GrowOVER's own matcher, which faithful mode adopts, is
:mod:`pipeline.labeling.growover_matcher`, and the update rules are
:mod:`pipeline.labeling.changes`.
"""

from __future__ import annotations

import bisect
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from pipeline.facts import (
    FactExtractor,
    Facts,
    extract_facts,
    fact_differences,
    name_words,
)
from pipeline.labeling.changes import (
    DIFFERENT,
    ELABORATION,
    UPDATE,
    JudgeQuestion,
    PairClass,
    UpdateJudge,
    classify_pair,
    judge_question,
    label_of,
    one_name,
)
from pipeline.labeling.growover_matcher import (
    GrowoverMatch,
    Match,
    growover_apply_spans,
    growover_chunks,
    growover_sentence_step,
    growover_span_plan,
    may_reach_growover_threshold,
    round2,
)
from pipeline.models.embedder import Embedder
from pipeline.models.nli import NLIClassifier, NLIResult
from pipeline.schemas import CHANGED, DELETED, NEW, UNCHANGED, UNLABELED
from pipeline.slots import compare_slots
from pipeline.update_classifier import UpdateClassifier, pair_features

log = logging.getLogger(__name__)


class ContradictionChecker(Protocol):
    """The LLM double-check of a candidate changed pair (GrowOVER asks GPT-4)."""

    model_id: str

    def check(self, pairs: Sequence[tuple[str, str]]) -> list[bool | None]:
        """For each (old, new) pair: True = they contradict, False = they do not, None = the
        model gave no usable answer."""
        ...


@dataclass(frozen=True)
class AlignSettings:
    """Thresholds and switches of the labeling method (defaults = GrowOVER's)."""

    unchanged_threshold: float = 0.99
    changed_min_similarity: float = 0.6
    new_max_similarity: float = 0.7
    max_span: int = 5
    span_length_ratio: float = 1.3
    span_min_word_overlap: float = 0.7
    faithful: bool = False  # True = GrowOVER's code's decisions exactly, no fact guard


@dataclass
class PageSentences:
    """The sentences of one article in one snapshot."""

    page_id: int
    title: str
    revision_id: int
    texts: list[str]
    hashes: list[str]


@dataclass
class SentenceLabel:
    """The label of one new sentence (``new_idx`` set) or one deleted old sentence."""

    page_id: int
    new_idx: int | None
    old_idx: list[int]
    label: str
    rule: str
    decided_by: str
    text: str
    old_text: str | None = None
    similarity: float | None = None
    nli_entailment: float | None = None
    nli_neutral: float | None = None
    nli_contradiction: float | None = None
    verified: bool | None = None
    reason: str | None = None


@dataclass
class LabelingStats:
    """Work done by a labeling run (what the benchmarks and summaries report)."""

    pages: int = 0
    pages_identical: int = 0
    pages_new: int = 0
    pages_deleted: int = 0
    exact_matches: int = 0
    similarity_pairs: int = 0
    span_texts: int = 0
    nli_pairs: int = 0
    llm_checks: int = 0
    judge_questions: int = 0
    fact_guard_flips: int = 0
    flipped_examples: list[tuple[int, str, str, str]] = field(default_factory=list)

    def merge(self, other: LabelingStats) -> None:
        for name, value in vars(other).items():
            if isinstance(value, list):
                getattr(self, name).extend(value)
            else:
                setattr(self, name, getattr(self, name) + value)


@dataclass
class _Block:
    """A matched run: old[old_lo..old_hi] <-> new[new_lo..new_hi] (inclusive)."""

    old_lo: int
    old_hi: int
    new_lo: int
    new_hi: int


@dataclass
class _Decision:
    label: str
    rule: str
    decided_by: str
    old_idx: list[int] = field(default_factory=list)
    similarity: float | None = None
    nli: NLIResult | None = None
    verified: bool | None = None
    reason: str | None = None
    question: JudgeQuestion | None = None  # for the update judge, when it can settle this


@dataclass
class _PageWork:
    old: PageSentences
    new: PageSentences
    decisions: dict[int, _Decision] = field(default_factory=dict)
    old_used: set[int] = field(default_factory=set)
    chain: list[_Block] = field(default_factory=list)
    # new idx -> (old idx, similarity, diffs) for similarity matches the fact guard refused
    guarded: dict[int, tuple[int, float, str]] = field(default_factory=dict)
    gaps: list[tuple[list[int], list[int]]] = field(default_factory=list)

    def unmatched_new(self) -> list[int]:
        return [j for j in range(len(self.new.texts)) if j not in self.decisions]

    def unmatched_old(self) -> list[int]:
        return [i for i in range(len(self.old.texts)) if i not in self.old_used]


def _monotone_chain(points: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Longest chain of (new, old) anchor points increasing in both coordinates (patience
    sorting, O(n log n)): anchors that cross it (moved paragraphs) stay unchanged but do not
    delimit gaps."""
    points = sorted(points)
    tails: list[int] = []  # smallest old idx ending a chain of each length
    tail_at: list[int] = []
    parent: list[int] = [-1] * len(points)
    for k, (_, old) in enumerate(points):
        pos = bisect.bisect_left(tails, old)
        if pos == len(tails):
            tails.append(old)
            tail_at.append(k)
        else:
            tails[pos] = old
            tail_at[pos] = k
        parent[k] = tail_at[pos - 1] if pos else -1
    chain = []
    k = tail_at[-1] if tail_at else -1
    while k != -1:
        chain.append(points[k])
        k = parent[k]
    return chain[::-1]


def _gaps(work: _PageWork) -> list[tuple[list[int], list[int]]]:
    """(old indices, new indices) still unmatched between consecutive chain blocks."""
    blocks = sorted(work.chain, key=lambda b: b.new_lo)
    n_old, n_new = len(work.old.texts), len(work.new.texts)
    bounds = [_Block(-1, -1, -1, -1), *blocks, _Block(n_old, n_old, n_new, n_new)]
    gaps = []
    for prev, nxt in zip(bounds, bounds[1:], strict=False):
        olds = [i for i in range(prev.old_hi + 1, nxt.old_lo) if i not in work.old_used]
        news = [j for j in range(prev.new_hi + 1, nxt.new_lo) if j not in work.decisions]
        if olds or news:
            gaps.append((olds, news))
    return gaps


def _runs(indices: list[int]) -> list[list[int]]:
    """Split sorted indices into runs of consecutive integers."""
    runs: list[list[int]] = []
    for i in indices:
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def _spans(indices: list[int], max_len: int) -> list[tuple[int, int]]:
    """All (lo, hi) spans of 1..max_len consecutive indices inside runs of ``indices``."""
    out = []
    for run in _runs(indices):
        for a in range(len(run)):
            for b in range(a, min(a + max_len, len(run))):
                out.append((run[a], run[b]))
    return out


_WORD = re.compile(r"\w+")


def _tokens(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.casefold()))


def _could_be_same_text(
    a: str, b: str, ta: frozenset[str], tb: frozenset[str], st: AlignSettings
) -> bool:
    """Cheap necessary conditions for a 0.99 embedding similarity: similar length and mostly
    the same words. Span pairs failing them are never embedded."""
    if max(len(a), len(b)) > st.span_length_ratio * max(1, min(len(a), len(b))):
        return False
    if not ta or not tb:
        return False
    return len(ta & tb) / max(len(ta), len(tb)) >= st.span_min_word_overlap


def reaches(similarity: float, threshold: float) -> bool:
    """``round(similarity, 2) >= threshold``: GrowOVER's code for "unchanged" (0.99) and for
    the changed floor (0.6); the paper writes "> 0.99" and "> 0.6" without rounding."""
    return bool(round2(similarity) >= threshold)


def stays_below(similarity: float, threshold: float) -> bool:
    """``round(similarity, 2) <= threshold``: GrowOVER's code for "new" (0.7); the paper
    writes "< 0.7"."""
    return bool(round2(similarity) <= threshold)


class SentenceLabeler:
    """Labels the sentences of new revisions against old ones (see the module docstring)."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        nli: NLIClassifier | None = None,
        checker: ContradictionChecker | None = None,
        settings: AlignSettings | None = None,
        facts: FactExtractor | None = None,
        naive: bool = False,
        judge: UpdateJudge | None = None,
        classifier: UpdateClassifier | None = None,
        classifier_alone: bool = False,
    ) -> None:
        self.embedder = embedder
        self.nli = nli
        self.checker = checker
        self.judge = judge
        # The learned update decision of the default offline path (never in faithful mode):
        # it settles pairs the rules leave unlabeled; ``classifier_alone`` (benchmarks only)
        # lets it label every pair with a counterpart instead of the rules.
        self.classifier = classifier
        self.classifier_alone = classifier_alone
        # Benchmarks and training only: when a list, every pair the offline rule decides is
        # appended as (old, new, features, label the rules gave).
        self.pair_log: list[tuple[str, str, np.ndarray, str]] | None = None
        self.settings = settings or AlignSettings()
        self.facts = facts or FactExtractor()
        self.naive = naive
        self._fact_cache: dict[str, Facts] = {}
        self._regex_cache: dict[str, Facts] = {}
        self._span_cache: dict[str, list[tuple[int, int, str]]] = {}

    # ------------------------------------------------------------------ public
    def label_pages(
        self, pairs: Sequence[tuple[PageSentences | None, PageSentences | None]]
    ) -> tuple[list[SentenceLabel], LabelingStats]:
        """Label a batch of (old, new) page pairs; either side may be None (page created or
        deleted). Model requests of the whole batch are pooled. Rows come page by page: the
        new sentences in order, then the deleted old sentences."""
        stats = LabelingStats(pages=len(pairs))
        slots: list[list[SentenceLabel] | _PageWork] = []
        for old, new in pairs:
            if old is None and new is None:
                raise ValueError("a page pair needs at least one side")
            if old is None:
                assert new is not None
                stats.pages_new += 1
                slots.append(
                    [
                        SentenceLabel(new.page_id, j, [], NEW, "page_new", "rule", t)
                        for j, t in enumerate(new.texts)
                    ]
                )
            elif new is None:
                stats.pages_deleted += 1
                slots.append(
                    [
                        SentenceLabel(old.page_id, None, [i], DELETED, "page_deleted", "rule", t)
                        for i, t in enumerate(old.texts)
                    ]
                )
            elif not (self.naive or self.settings.faithful) and old.hashes == new.hashes:
                # (GrowOVER's matcher can leave a repeated sentence of an unedited article
                # unmatched, so faithful mode runs it on identical revisions too.)
                stats.pages_identical += 1
                slots.append(
                    [
                        SentenceLabel(
                            new.page_id,
                            j,
                            [j],
                            UNCHANGED,
                            "identical_revision",
                            "hash",
                            t,
                            old_text=t,
                            similarity=1.0,
                        )
                        for j, t in enumerate(new.texts)
                    ]
                )
            else:
                slots.append(_PageWork(old, new))
        works = [s for s in slots if isinstance(s, _PageWork)]
        if works:
            self._label_works(works, stats)
        rows: list[SentenceLabel] = []
        for slot in slots:
            rows.extend(self._emit(slot) if isinstance(slot, _PageWork) else slot)
        return rows, stats

    # ------------------------------------------------------------------ stages
    def _label_works(self, works: list[_PageWork], stats: LabelingStats) -> None:
        if self.settings.faithful:
            vectors = self._growover_match(works, stats)
            self._decide_gaps(works, vectors, stats)
            return
        if not self.naive:
            for w in works:
                self._exact_match(w, stats)
                self._rechain(w)
        vectors = self._embed_sentences(works)
        self._similarity_anchors(works, vectors, stats)
        for w in works:
            self._rechain(w)
        self._span_matching(works, stats)
        for w in works:
            w.gaps = _gaps(w)
        self._decide_gaps(works, vectors, stats)

    def _growover_match(
        self, works: list[_PageWork], stats: LabelingStats
    ) -> dict[str, np.ndarray]:
        """GrowOVER's matcher exactly (``faithful``): every sentence of both revisions
        embedded, rounded similarities, mutual best matches, then one pass of span matching
        over the gaps the code computes, then its gaps again for the NLI / offline step."""
        st = self.settings
        texts: dict[str, None] = {}
        for w in works:
            texts.update(dict.fromkeys(w.old.texts))
            texts.update(dict.fromkeys(w.new.texts))
        vectors = self._embed(list(texts))
        matched: list[tuple[_PageWork, GrowoverMatch, list[Match]]] = []
        plans = []
        for w in works:
            if not w.old.texts or not w.new.texts:
                w.gaps = [([], list(range(len(w.new.texts))))] if w.new.texts else []
                continue
            raw = (
                np.stack([vectors[t] for t in w.old.texts]).astype(np.float64)
                @ np.stack([vectors[t] for t in w.new.texts]).astype(np.float64).T
            )
            stats.similarity_pairs += raw.size
            _, new_match, old_match, new_same, old_same = growover_sentence_step(
                raw, st.unchanged_threshold
            )
            result = GrowoverMatch(
                new_same,
                old_same,
                list(new_match),
                ["similarity" if same else None for same in new_same],
                [
                    float(raw[m, j]) if same else None
                    for j, (m, same) in enumerate(zip(new_match, new_same, strict=True))
                ],
            )
            olds_match: list[Match] = list(old_match)
            chunks = growover_chunks(new_same, result.new_match, len(w.old.texts))
            plan = growover_span_plan(w.old.texts, w.new.texts, chunks, st.max_span)
            matched.append((w, result, olds_match))
            plans.append(plan)
        # The code embeds every span of every gap; pairs that cannot be 0.985-similar are
        # left out here (sim -inf): most of the work saved, and on every wikisnap pair no
        # decision changed (tests/labeling/test_growover_parity.py).
        candidates = []
        for plan in plans:
            for _, _, old_texts, new_texts in plan:
                ot = [_tokens(t) for t in old_texts]
                nt = [_tokens(t) for t in new_texts]
                candidates.append(
                    [
                        (r, c)
                        for r, a in enumerate(old_texts)
                        for c, b in enumerate(new_texts)
                        if may_reach_growover_threshold(a, b, ot[r], nt[c])
                    ]
                )
        span_texts = list(
            dict.fromkeys(
                t
                for plan in plans
                for (_, _, old_texts, new_texts) in plan
                for t in (*old_texts, *new_texts)
            )
        )
        wanted = {
            t
            for (_, _, old_texts, new_texts), pairs in zip(
                (c for plan in plans for c in plan), candidates, strict=True
            )
            for r, c in pairs
            for t in (old_texts[r], new_texts[c])
        }
        span_texts = [t for t in span_texts if t in wanted]
        stats.span_texts += len(span_texts)
        span_vecs = self._embed(span_texts)
        gap_pairs = iter(candidates)
        for (w, result, olds_match), plan in zip(matched, plans, strict=True):
            for old_spans, new_spans, old_texts, new_texts in plan:
                sim = np.full((len(old_texts), len(new_texts)), -np.inf)
                for r, c in next(gap_pairs):
                    sim[r, c] = float(
                        span_vecs[old_texts[r]].astype(np.float64)
                        @ span_vecs[new_texts[c]].astype(np.float64)
                    )
                growover_apply_spans(
                    result, olds_match, old_spans, new_spans, round2(sim), st.unchanged_threshold
                )
            self._adopt_growover(w, result)
        return vectors

    def _adopt_growover(self, w: _PageWork, result: GrowoverMatch) -> None:
        """Turn GrowOVER's matcher result into decisions and the gaps left for step 3."""
        n_old = len(w.old.texts)
        for j, same in enumerate(result.new_same):
            if same:
                rule = result.new_rule[j] or "span"
                w.decisions[j] = _Decision(
                    UNCHANGED,
                    rule,
                    self.embedder.model_id,
                    result.old_indices(j, n_old),
                    similarity=result.new_similarity[j],
                )
        w.old_used.update(i for i, same in enumerate(result.old_same) if same)
        w.gaps = []
        seen: set[int] = set()
        for (ns, ne), (os_, oe) in growover_chunks(result.new_same, result.new_match, n_old):
            news = [j for j in range(ns, ne) if j not in w.decisions and j not in seen]
            seen.update(news)
            if not news:
                continue
            if os_ in (oe, n_old):
                w.gaps.append(([], news))  # the code's "new" gap: no old sentence to compare
                continue
            olds = list(range(os_, min(oe, n_old)))
            if not olds:
                # The code skips such a gap (an end-of-article gap whose old stop is the new
                # article's length): its sentences get no label.
                for j in news:
                    w.decisions[j] = _Decision(
                        UNLABELED, "growover_empty_gap", "rule", reason="growover_empty_gap"
                    )
                continue
            w.gaps.append((olds, news))

    @staticmethod
    def _rechain(w: _PageWork) -> None:
        """Recompute the monotone anchor chain and the gaps it leaves."""
        w.chain = [
            _Block(o, o, n, n)
            for n, o in _monotone_chain(
                [(j, d.old_idx[0]) for j, d in w.decisions.items() if len(d.old_idx) == 1]
            )
        ]
        w.gaps = _gaps(w)

    def _exact_match(self, w: _PageWork, stats: LabelingStats) -> None:
        by_hash: dict[str, list[int]] = {}
        for i, h in enumerate(w.old.hashes):
            by_hash.setdefault(h, []).append(i)
        taken: dict[str, int] = {}
        for j, h in enumerate(w.new.hashes):
            olds = by_hash.get(h)
            if not olds:
                continue
            # Duplicated sentences pair up in order; extra copies reuse the last old one.
            n = taken.get(h, 0)
            i = olds[min(n, len(olds) - 1)]
            taken[h] = n + 1
            w.decisions[j] = _Decision(UNCHANGED, "exact", "hash", [i], similarity=1.0)
            w.old_used.add(i)
            stats.exact_matches += 1

    def _embed_sentences(self, works: list[_PageWork]) -> dict[str, np.ndarray]:
        if self.naive:
            # The reference embeds both revisions of each article in full, one article at a
            # time, duplicates included: that is the cost the benchmark compares against.
            vectors: dict[str, np.ndarray] = {}
            for w in works:
                for texts in (w.old.texts, w.new.texts):
                    if texts:
                        vectors.update(zip(texts, self.embedder.embed(texts), strict=True))
            return vectors
        texts: dict[str, None] = {}
        for w in works:
            olds, news = self._needs_vector(w)
            texts.update(dict.fromkeys(w.old.texts[i] for i in olds))
            texts.update(dict.fromkeys(w.new.texts[j] for j in news))
        return self._embed(list(texts))

    def _needs_vector(self, w: _PageWork) -> tuple[list[int], list[int]]:
        """Unmatched sentences that need an embedding. Those in a gap with sentences on both
        sides do (their gap is decided on similarity). One in a one-sided gap (a pure
        insertion or deletion) only does if some unmatched sentence on the other side could
        be its 0.99-similar twin (a moved sentence); otherwise its label needs no model."""
        old_tokens = {i: _tokens(w.old.texts[i]) for i in w.unmatched_old()}
        new_tokens = {j: _tokens(w.new.texts[j]) for j in w.unmatched_new()}
        olds: list[int] = []
        news: list[int] = []
        for gap_olds, gap_news in w.gaps:
            if gap_olds and gap_news:
                olds.extend(gap_olds)
                news.extend(gap_news)
                continue
            for i in gap_olds:
                text, tok = w.old.texts[i], old_tokens[i]
                if any(
                    _could_be_same_text(text, w.new.texts[j], tok, t, self.settings)
                    for j, t in new_tokens.items()
                ):
                    olds.append(i)
            for j in gap_news:
                text, tok = w.new.texts[j], new_tokens[j]
                if any(
                    _could_be_same_text(w.old.texts[i], text, t, tok, self.settings)
                    for i, t in old_tokens.items()
                ):
                    news.append(j)
        return olds, news

    def _embed(self, texts: list[str]) -> dict[str, np.ndarray]:
        if not texts:
            return {}
        matrix = self.embedder.embed(texts)
        return dict(zip(texts, matrix, strict=True))

    def _facts_of(self, texts: list[str]) -> list[Facts]:
        missing = list(dict.fromkeys(t for t in texts if t not in self._fact_cache))
        if missing:
            self._fact_cache.update(zip(missing, self.facts.extract_many(missing), strict=True))
        return [self._fact_cache[t] for t in texts]

    def _regex_diff(self, old_text: str, new_text: str) -> list[str]:
        """Differences in numbers and dates alone (no model)."""
        for t in (old_text, new_text):
            if t not in self._regex_cache:
                self._regex_cache[t] = extract_facts(t)
        return fact_differences(
            old_text, new_text, self._regex_cache[old_text], self._regex_cache[new_text]
        )

    def _needs_ner(self, old_text: str, new_text: str) -> bool:
        """Whether only NER can tell if two texts differ in facts: not when their numbers or
        dates differ already (a difference either way), nor when both use the same content
        words (every entity of one is then still named in the other)."""
        if old_text == new_text or self._regex_diff(old_text, new_text):
            return False
        return set(name_words(old_text)) != set(name_words(new_text))

    def _ner_texts(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """The texts of ``pairs`` that need NER (one batched pass for them all)."""
        return [t for o, n in pairs if self._needs_ner(o, n) for t in (o, n)]

    def _fact_diff(self, old_text: str, new_text: str) -> str | None:
        """The facts that differ between two texts ("; "-joined), or None. NER runs only
        where numbers and dates agree and the words differ (``_needs_ner``)."""
        if old_text == new_text:
            return None
        if not self._needs_ner(old_text, new_text):
            diffs = self._regex_diff(old_text, new_text)
            return "; ".join(diffs) if diffs else None
        f_old, f_new = self._facts_of([old_text, new_text])
        diffs = fact_differences(old_text, new_text, f_old, f_new)
        return "; ".join(diffs) if diffs else None

    def _guard(self, old_text: str, new_text: str) -> str | None:
        """The fact differences that veto a similarity match (never in faithful mode)."""
        return None if self.settings.faithful else self._fact_diff(old_text, new_text)

    def _similarity_anchors(
        self, works: list[_PageWork], vectors: dict[str, np.ndarray], stats: LabelingStats
    ) -> None:
        found: list[tuple[_PageWork, int, int, float]] = []
        for w in works:
            if self.naive:
                news, olds = list(range(len(w.new.texts))), list(range(len(w.old.texts)))
            else:
                news = [j for j in w.unmatched_new() if w.new.texts[j] in vectors]
                olds = [i for i in w.unmatched_old() if w.old.texts[i] in vectors]
            if not news or not olds:
                continue
            a = np.stack([vectors[w.new.texts[j]] for j in news])
            b = np.stack([vectors[w.old.texts[i]] for i in olds])
            sims = a @ b.T
            stats.similarity_pairs += sims.size
            best = sims.argmax(axis=1)
            for row, j in enumerate(news):
                s = float(sims[row, best[row]])
                if reaches(s, self.settings.unchanged_threshold):
                    found.append((w, j, olds[int(best[row])], s))
        if not self.settings.faithful:
            # One batched NER pass for every pair the guard will look at.
            self._facts_of(
                self._ner_texts([(w.old.texts[i], w.new.texts[j]) for w, j, i, _ in found])
            )
        for w, j, i, s in found:
            veto = self._guard(w.old.texts[i], w.new.texts[j])
            if veto:
                w.guarded[j] = (i, s, veto)
                stats.fact_guard_flips += 1
                stats.flipped_examples.append((w.new.page_id, w.old.texts[i], w.new.texts[j], veto))
                continue
            rule = "exact" if self.naive and w.old.texts[i] == w.new.texts[j] else "similarity"
            w.decisions[j] = _Decision(UNCHANGED, rule, self.embedder.model_id, [i], similarity=s)
            w.old_used.add(i)

    def _span_matching(self, works: list[_PageWork], stats: LabelingStats) -> None:
        st = self.settings
        candidates: list[tuple[_PageWork, tuple[int, int], tuple[int, int], str, str]] = []
        for w in works:
            for olds, news in w.gaps:
                if not olds or not news:
                    continue
                old_spans = {
                    sp: " ".join(w.old.texts[sp[0] : sp[1] + 1]) for sp in _spans(olds, st.max_span)
                }
                new_spans = {
                    sp: " ".join(w.new.texts[sp[0] : sp[1] + 1]) for sp in _spans(news, st.max_span)
                }
                old_tokens = {sp: _tokens(t) for sp, t in old_spans.items()}
                new_tokens = {sp: _tokens(t) for sp, t in new_spans.items()}
                for osp, otext in old_spans.items():
                    for nsp, ntext in new_spans.items():
                        if osp[0] == osp[1] and nsp[0] == nsp[1]:
                            continue  # single sentences were compared already
                        if not self.naive and not _could_be_same_text(
                            otext, ntext, old_tokens[osp], new_tokens[nsp], st
                        ):
                            continue
                        candidates.append((w, osp, nsp, otext, ntext))
        if not candidates:
            return
        span_texts = list(dict.fromkeys(t for c in candidates for t in (c[3], c[4])))
        stats.span_texts += len(span_texts)
        vecs = self._embed(span_texts)
        scored = []
        for w, osp, nsp, otext, ntext in candidates:
            s = float(vecs[otext] @ vecs[ntext])
            if reaches(s, st.unchanged_threshold):
                scored.append((s, (osp[1] - osp[0]) + (nsp[1] - nsp[0]), w, osp, nsp, otext, ntext))
        # Best pairs first; among equals prefer the larger spans (they explain more sentences).
        scored.sort(key=lambda x: (-x[0], -x[1]))
        if not st.faithful:
            self._facts_of(self._ner_texts([(otext, ntext) for *_, otext, ntext in scored]))
        for s, _, w, osp, nsp, otext, ntext in scored:
            olds = list(range(osp[0], osp[1] + 1))
            news = list(range(nsp[0], nsp[1] + 1))
            if any(i in w.old_used for i in olds) or any(j in w.decisions for j in news):
                continue
            veto = self._guard(otext, ntext)
            if veto:
                for j in news:
                    w.guarded.setdefault(j, (olds[0], s, veto))
                stats.fact_guard_flips += 1
                stats.flipped_examples.append((w.new.page_id, otext, ntext, veto))
                continue
            for j in news:
                w.decisions[j] = _Decision(UNCHANGED, "span", self.embedder.model_id, olds, s)
            w.old_used.update(olds)
            w.chain.append(_Block(osp[0], osp[1], nsp[0], nsp[1]))

    def _decide_gaps(
        self, works: list[_PageWork], vectors: dict[str, np.ndarray], stats: LabelingStats
    ) -> None:
        plans: list[tuple[_PageWork, int, list[int], np.ndarray]] = []
        nli_pairs: list[tuple[str, str]] = []
        candidates: list[tuple[_PageWork, int, list[int]]] = []
        for w in works:
            for olds, news in w.gaps:
                for j in news:
                    cand = list(olds)
                    if j in w.guarded and w.guarded[j][0] not in cand:
                        cand.append(w.guarded[j][0])
                    candidates.append((w, j, cand))
        # Two-sided gaps were embedded up front; a chain that changed shape after anchoring
        # can still merge gaps, so fetch whatever is missing in one batch.
        missing = {
            t
            for w, j, cand in candidates
            if cand
            for t in [w.new.texts[j], *(w.old.texts[i] for i in cand)]
            if t not in vectors
        }
        vectors.update(self._embed(sorted(missing)))
        for w, j, cand in candidates:
            if cand:
                nv = vectors[w.new.texts[j]]
                sims = np.array([float(vectors[w.old.texts[i]] @ nv) for i in cand])
            else:
                sims = np.zeros(0)
            plans.append((w, j, cand, sims))
            if self.nli is not None:
                nli_pairs.extend((w.old.texts[i], w.new.texts[j]) for i in cand)
        if self.nli is None:
            # The offline rule compares each sentence with its most similar old one: the
            # values and names of both (one batched NER pass).
            counterparts = [
                (
                    w.old.texts[w.guarded[j][0] if j in w.guarded else cand[int(sims.argmax())]],
                    w.new.texts[j],
                )
                for w, j, cand, sims in plans
                if len(cand) and reaches(sims.max(), self.settings.changed_min_similarity)
            ]
            if self.settings.faithful:
                self._facts_of(self._ner_texts(counterparts))
            else:
                self._spans_of([t for pair in counterparts for t in pair])
        nli_results: list[NLIResult] = []
        if self.nli is not None and nli_pairs:
            nli_results = self.nli.classify(nli_pairs)
            stats.nli_pairs += len(nli_pairs)
        # Decide everything that needs no LLM; collect LLM checks.
        pending: list[tuple[_PageWork, int, _Decision]] = []
        cursor = 0
        for w, j, cand, sims in plans:
            results = nli_results[cursor : cursor + len(cand)] if self.nli is not None else []
            cursor += len(results)
            decision = self._decide_one(w, j, cand, sims, results)
            if decision.label == CHANGED and decision.verified is None and self.checker:
                pending.append((w, j, decision))
            else:
                if decision.label == CHANGED and decision.verified is None:
                    decision.verified = False  # no LLM configured: unverified change
                w.decisions[j] = decision
                if decision.label in (UNCHANGED, CHANGED):
                    w.old_used.update(decision.old_idx)
        self._settle_uncertain(works, stats)
        if pending:
            assert self.checker is not None
            verdicts = self.checker.check(
                [(w.old.texts[d.old_idx[0]], w.new.texts[j]) for w, j, d in pending]
            )
            stats.llm_checks += len(pending)
            for (w, j, d), verdict in zip(pending, verdicts, strict=True):
                if verdict is True:
                    d.verified = True
                    d.decided_by += f"+{self.checker.model_id}"
                elif verdict is False:
                    d.label, d.reason = UNLABELED, "llm_says_not_contradictory"
                    d.decided_by += f"+{self.checker.model_id}"
                else:
                    d.verified = False
                    d.reason = "llm_answer_unusable"
                w.decisions[j] = d
                if d.label == CHANGED:
                    w.old_used.update(d.old_idx)

    def _decide_one(
        self,
        w: _PageWork,
        j: int,
        cand: list[int],
        sims: np.ndarray,
        results: list[NLIResult],
    ) -> _Decision:
        st = self.settings
        guard = w.guarded.get(j)
        reason_prefix = "fact_mismatch" if guard else None
        if not cand:
            return _Decision(NEW, "no_old_counterpart", "rule", reason=reason_prefix)
        best = int(sims.argmax())
        max_sim = float(sims[best])
        if self.nli is not None:
            model = self.nli.model_id
            entailed = [k for k, r in enumerate(results) if r.label == "entailment"]
            if entailed and not guard:
                k = max(entailed, key=lambda k: results[k].entailment)
                return _Decision(
                    UNCHANGED, "nli_entailment", model, [cand[k]], float(sims[k]), results[k]
                )
            contradicted = [k for k, r in enumerate(results) if r.label == "contradiction"]
            if entailed and guard:
                # The guard already found different facts: entailment cannot make it unchanged;
                # treat the guarded counterpart as the contradicted sentence.
                contradicted = contradicted or [cand.index(guard[0])]
            if contradicted:
                k = max(contradicted, key=lambda k: float(sims[k]))
                if reaches(float(sims[k]), st.changed_min_similarity):
                    return _Decision(
                        CHANGED,
                        "nli_contradiction",
                        model,
                        [cand[k]],
                        float(sims[k]),
                        results[k],
                        reason=reason_prefix,
                    )
                return _Decision(
                    UNLABELED,
                    "nli_contradiction",
                    model,
                    [cand[k]],
                    float(sims[k]),
                    results[k],
                    reason="contradiction_below_similarity",
                )
            if stays_below(max_sim, st.new_max_similarity):
                return _Decision(NEW, "nli_neutral", model, [], max_sim, results[best])
            return _Decision(
                UNLABELED,
                "nli_neutral",
                model,
                [cand[best]],
                max_sim,
                results[best],
                reason="neutral_but_similar",
            )
        if not st.faithful:
            return self._decide_offline(w, j, cand, sims)
        # Offline substitute for NLI: a similar counterpart stating different facts = changed.
        model = f"{self.embedder.model_id}+{self.facts.model_name}"
        if guard:
            k = cand.index(guard[0])
            return _Decision(
                CHANGED,
                "fact_change",
                model,
                [guard[0]],
                float(sims[k]),
                reason="fact_mismatch: " + guard[2],
            )
        i = cand[best]
        diff = (
            self._fact_diff(w.old.texts[i], w.new.texts[j])
            if reaches(max_sim, st.changed_min_similarity)
            else None
        )
        if not stays_below(max_sim, st.new_max_similarity):
            if diff:
                return _Decision(CHANGED, "fact_change", model, [i], max_sim, reason=diff)
            return _Decision(
                UNLABELED,
                "similar_without_fact_change",
                model,
                [i],
                max_sim,
                reason="similar_without_fact_change",
            )
        if diff:
            # Between the two thresholds, different facts are as likely a new statement as a
            # changed one; without NLI we do not guess.
            return _Decision(
                UNLABELED,
                "fact_change_low_similarity",
                model,
                [i],
                max_sim,
                reason="facts differ but similarity is below new_max_similarity: " + diff,
            )
        return _Decision(NEW, "low_similarity", model, [], max_sim)

    def _decide_offline(self, w: _PageWork, j: int, cand: list[int], sims: np.ndarray) -> _Decision:
        """The default mode without NLI: the counterpart (the guarded match, else the most
        similar old sentence of the gap) and the new sentence are aligned word by word and
        the pair is an update, an elaboration or rewording (unchanged), another statement
        (new), or uncertain (unlabeled, maybe settled by the update judge); see
        :mod:`pipeline.labeling.changes`."""
        st = self.settings
        guard = w.guarded.get(j)
        k = cand.index(guard[0]) if guard else int(sims.argmax())
        i, s = cand[k], float(sims[k])
        model = f"{self.embedder.model_id}+{self.facts.model_name}"
        if not reaches(s, st.changed_min_similarity):
            return _Decision(NEW, "low_similarity", model, [], s)
        old, new = w.old.texts[i], w.new.texts[j]
        slots = compare_slots(old, new, self._span_cache[old], self._span_cache[new])
        verdict = one_name(classify_pair(slots, s), slots, (w.old.texts, w.new.texts))
        label = label_of(verdict, float(round2(s)), st.new_max_similarity)
        rule = verdict.kind if label == UNCHANGED else verdict.rule
        use = self.classifier is not None and (label == UNLABELED or self.classifier_alone)
        if use or self.pair_log is not None:
            x = pair_features(old, new, slots, s, verdict)
            if self.pair_log is not None:
                self.pair_log.append((old, new, x, label))
            if use:
                label, rule, model = self._classify(x, s, label, rule, model)
        keeps = [] if label == NEW else [i]
        question = (
            judge_question(old, new, verdict, slots, self.judge.classes)
            if self.judge and label == UNLABELED
            else None
        )
        return _Decision(
            label, rule, model, keeps, s, reason=verdict.detail or None, question=question
        )

    def _classify(
        self, x: np.ndarray, s: float, label: str, rule: str, model: str
    ) -> tuple[str, str, str]:
        """The (label, rule, decided_by) the update classifier gives a pair: an unlabeled
        pair whose P(UPDATE) reaches the threshold becomes changed (``classifier_update``);
        with ``classifier_alone`` every pair gets the classifier's class (an update changed,
        an elaboration or rewording unchanged, another statement new or unlabeled as
        :func:`pipeline.labeling.changes.label_of` says)."""
        assert self.classifier is not None
        by = f"{model}+{self.classifier.model_id}"
        if self.classifier_alone:
            cls = self.classifier.predict(x)[0]
            kind = {"UPDATE": UPDATE, "DIFFERENT": DIFFERENT}.get(cls, ELABORATION)
            pc = PairClass(kind, "classifier")
            return (
                label_of(pc, float(round2(s)), self.settings.new_max_similarity),
                f"classifier_{cls.lower()}",
                by,
            )
        if self.classifier.is_update(x):
            return CHANGED, "classifier_update", by
        return label, rule, by

    def _settle_uncertain(self, works: list[_PageWork], stats: LabelingStats) -> None:
        """Ask the update judge, in one batch, about every uncertain pair it can settle: a
        confirmed update becomes changed, the rest stays unlabeled."""
        asked = [
            (w, j, d)
            for w in works
            for j, d in w.decisions.items()
            if d.question is not None and d.label == UNLABELED
        ]
        if not asked or self.judge is None:
            return
        verdicts = self.judge.settle([d.question for _, _, d in asked])
        stats.judge_questions += len(asked)
        for (w, _, d), verdict in zip(asked, verdicts, strict=True):
            d.decided_by += f"+{self.judge.model_id}"
            if verdict is True:
                d.label, d.rule, d.verified = CHANGED, "judge_confirmed", True
                w.old_used.update(d.old_idx)
            else:
                d.reason = f"{d.reason}; judge: {'no update' if verdict is False else 'no answer'}"

    def _spans_of(self, texts: list[str]) -> None:
        """Named-entity spans of ``texts`` into the cache (one batched NER pass)."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._span_cache))
        if missing:
            self._span_cache.update(
                zip(missing, self.facts.entity_spans_many(missing), strict=True)
            )

    # ------------------------------------------------------------------ output
    def _emit(self, w: _PageWork) -> list[SentenceLabel]:
        rows = []
        for j, text in enumerate(w.new.texts):
            d = w.decisions.get(j) or _Decision(UNLABELED, "unreached", "rule", reason="unreached")
            old_text = " ".join(w.old.texts[i] for i in d.old_idx) if d.old_idx else None
            r = d.nli
            rows.append(
                SentenceLabel(
                    page_id=w.new.page_id,
                    new_idx=j,
                    old_idx=list(d.old_idx),
                    label=d.label,
                    rule=d.rule,
                    decided_by=d.decided_by,
                    text=text,
                    old_text=old_text,
                    similarity=None if d.similarity is None else round(d.similarity, 6),
                    nli_entailment=None if r is None else round(r.entailment, 6),
                    nli_neutral=None if r is None else round(r.neutral, 6),
                    nli_contradiction=None if r is None else round(r.contradiction, 6),
                    verified=d.verified,
                    reason=d.reason,
                )
            )
        used = set(w.old_used)
        for d in w.decisions.values():
            if d.label in (UNCHANGED, CHANGED):
                used.update(d.old_idx)
        for i, text in enumerate(w.old.texts):
            if i not in used:
                rows.append(
                    SentenceLabel(w.old.page_id, None, [i], DELETED, "unmatched_old", "rule", text)
                )
        return rows
