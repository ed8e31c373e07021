"""Sentence labeling: unchanged / changed / new / deleted between two revisions of an article.

The method is GrowOVER's (§3.2, Algorithm 3):

1. **Unchanged by similarity.** A new sentence whose embedding similarity to an old sentence
   exceeds ``unchanged_threshold`` (0.99) is unchanged.
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

**Fact guard** (default on; off with ``faithful=True``): a pair that *similarity* (not exact
text) would call unchanged, sentence or span, whose numbers / dates / entities differ is not
unchanged: it goes on to the NLI / changed path with reason ``fact_mismatch`` and keeps its
old sentence as counterpart.
"""

from __future__ import annotations

import bisect
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from pipeline.facts import FactExtractor, Facts, fact_differences
from pipeline.models.embedder import Embedder
from pipeline.models.nli import NLIClassifier, NLIResult

log = logging.getLogger(__name__)

UNCHANGED, CHANGED, NEW, DELETED, UNLABELED = "unchanged", "changed", "new", "deleted", "unlabeled"
LABELS = (UNCHANGED, CHANGED, NEW, DELETED, UNLABELED)


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
    faithful: bool = False  # True = GrowOVER's rule exactly, without the fact guard


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
    ) -> None:
        self.embedder = embedder
        self.nli = nli
        self.checker = checker
        self.settings = settings or AlignSettings()
        self.facts = facts or FactExtractor()
        self.naive = naive
        self._fact_cache: dict[str, Facts] = {}

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
            elif not self.naive and old.hashes == new.hashes:
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

    def _fact_diff(self, old_text: str, new_text: str) -> str | None:
        """The facts that differ between two texts ("; "-joined), or None."""
        if old_text == new_text:
            return None
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
                if s > self.settings.unchanged_threshold:
                    found.append((w, j, olds[int(best[row])], s))
        if not self.settings.faithful:
            # One batched NER pass for every pair the guard will look at.
            self._facts_of([t for w, j, i, _ in found for t in (w.old.texts[i], w.new.texts[j])])
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
            if s > st.unchanged_threshold:
                scored.append((s, (osp[1] - osp[0]) + (nsp[1] - nsp[0]), w, osp, nsp, otext, ntext))
        # Best pairs first; among equals prefer the larger spans (they explain more sentences).
        scored.sort(key=lambda x: (-x[0], -x[1]))
        if not st.faithful:
            self._facts_of([t for *_, otext, ntext in scored for t in (otext, ntext)])
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
            # The offline rule compares facts of each sentence with its most similar old one.
            self._facts_of(
                [
                    t
                    for w, j, cand, sims in plans
                    if len(cand) and sims.max() > self.settings.changed_min_similarity
                    for t in (w.old.texts[cand[int(sims.argmax())]], w.new.texts[j])
                ]
            )
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
                if float(sims[k]) > st.changed_min_similarity:
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
            if max_sim < st.new_max_similarity:
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
            if max_sim > st.changed_min_similarity
            else None
        )
        if max_sim >= st.new_max_similarity:
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
