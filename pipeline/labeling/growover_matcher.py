"""GrowOVER's published sentence matcher, decision for decision (``align.faithful = true``).

``faithful=True`` reproduces the decisions of GrowOVER's published matcher
(dataset/sentence_labeling/tools.py, ``Comparator.label_same``) on our sentence lists, quirks
included; README "Paper versus code" lists each one. A match is an old index (int, -1 = none)
or, after span matching, a list of (start, stop) old slices.
:class:`pipeline.labeling.align.SentenceLabeler` adopts its result and sends what it leaves open
to the NLI step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def round2(values: np.ndarray | float) -> np.ndarray:
    """Similarities rounded to two decimals the way GrowOVER's code rounds every similarity
    matrix (``.round(2)``) before comparing it with a threshold; float64 so the result does
    not depend on how a matrix product was blocked."""
    return np.round(np.asarray(values, dtype=np.float64), 2)


Match = int | list[tuple[int, int]]  # an old index (-1: none), or old (start, stop) slices


def _first_best(sim: np.ndarray, threshold: float) -> list[int]:
    """Per column: the first row holding the column's (rounded) maximum, or -1 when that
    maximum is below ``threshold``. Rounding first makes ties common; the lowest index wins."""
    if sim.shape[0] == 0:
        return [-1] * sim.shape[1]
    best, top = sim.argmax(axis=0), sim.max(axis=0)
    return [int(b) if t >= threshold else -1 for b, t in zip(best, top, strict=True)]


def _match_after(m: Match) -> int:
    """Old index where the gap after a matched new sentence starts (-1: unmatched)."""
    if isinstance(m, list):
        return max(stop for _, stop in m)
    return m + 1 if m != -1 else -1


def _match_before(m: Match) -> int:
    """Old index where the gap before a matched new sentence ends (-1: unmatched)."""
    if isinstance(m, list):
        return min(start for start, _ in m)
    return m


def growover_chunks(
    same: list[bool], match: list[Match], n_old: int
) -> list[tuple[list[int], list[int]]]:
    """GrowOVER's gaps: ([new start, new stop], [old start, old stop]) for each run of new
    sentences not labeled unchanged. A gap is opened by any new sentence whose predecessor has
    a match (even a one-sided best match that did not make it unchanged) and closed by the
    next sentence's match; a gap running to the end of the article gets the new article's last
    index as old stop, as the code does."""
    n_new = len(same)
    new_chunks: list[list[int]] = []
    old_chunks: list[list[int]] = []
    for j in range(n_new):
        if same[j]:
            continue
        start = 0 if j == 0 else _match_after(match[j - 1])
        if start >= n_old:
            new_chunks.append([j, n_new])
            old_chunks.append([n_old, n_old])
            break
        if start != -1:
            new_chunks.append([j, j + 1])
            old_chunks.append([start, -1])
        end = _match_before(match[j + 1]) if j + 1 < n_new else n_new - 1
        if end != -1:
            if not new_chunks:
                raise AssertionError("GrowOVER gap closed before it was opened")
            new_chunks[-1][1] = j + 1
            old_chunks[-1][1] = end
    if old_chunks and old_chunks[-1][1] == -1:
        old_chunks[-1][1] = n_old
    return list(zip(new_chunks, old_chunks, strict=True))


def growover_spans(
    start: int, stop: int, max_len: int, *, capped_prefix: bool
) -> list[tuple[int, int]]:
    """The (slice start, slice stop) spans GrowOVER compares inside a gap [start, stop), in its
    order: spans that begin with the anchor before the gap (``start - 1``, which is -1, an
    empty slice, at the top of an article), then every run of up to ``max_len`` sentences
    that may end on the anchor after the gap; the anchor alone at either end is left out.
    Only the old side caps the anchor-led spans at ``max_len`` (``capped_prefix``): the new
    side's cap in the code reads ``min(ne, ne + max_len)``, i.e. none."""
    last = stop + 1
    lead_stop = min(last, start + max_len) if capped_prefix else last
    spans = [(start - 1, k) for k in range(start, lead_stop)]
    spans += [
        (a, b) for a in range(start, last) for b in range(a + 1, last + 1) if b - a <= max_len
    ]
    return spans[1:-1]


def may_reach_growover_threshold(a: str, b: str, ta: frozenset[str], tb: frozenset[str]) -> bool:
    """Necessary in practice for two texts to round to 0.99 similar: equal (the empty spans at
    the top of an article included), or lengths within 1.5x of each other and half their words
    shared. Looser than the default mode's span filter because rounding accepts 0.985; the
    parity test checks on every wikisnap pair that no pruned pair would have matched."""
    if a == b:
        return True
    if not ta or not tb or max(len(a), len(b)) > 1.5 * min(len(a), len(b)):
        return False
    return len(ta & tb) >= 0.5 * max(len(ta), len(tb))


def _slice_text(texts: list[str], span: tuple[int, int]) -> str:
    # Python slice semantics on purpose: (-1, k) is empty unless k reaches the end.
    return " ".join(texts[span[0] : span[1]])


@dataclass
class GrowoverMatch:
    """What GrowOVER's matcher decided for one article pair."""

    new_same: list[bool]
    old_same: list[bool]
    new_match: list[Match]
    new_rule: list[str | None]  # "similarity" (step 1) or "span", for unchanged sentences
    new_similarity: list[float | None]

    def old_indices(self, j: int, n_old: int) -> list[int]:
        """The old sentence(s) new sentence ``j`` is matched to: its best old sentence, or the
        sentences of the first old span it was matched to (slice semantics)."""
        m = self.new_match[j]
        if isinstance(m, list):
            return list(range(n_old))[m[0][0] : m[0][1]]
        return [] if m == -1 else [m]


def growover_sentence_step(
    raw: np.ndarray, threshold: float
) -> tuple[np.ndarray, list[int], list[int], list[bool], list[bool]]:
    """Step 1 on the (old x new) cosine matrix: the rounded matrix, each side's first best
    match at or above the threshold, and the mutual best matches (unchanged)."""
    sim = round2(raw)
    new_match = _first_best(sim, threshold)
    old_match = _first_best(sim.T, threshold)
    # A -1 match indexes the last element, as in the code; it can never point back.
    new_same = [old_match[m] == j for j, m in enumerate(new_match)]
    old_same = [new_match[m] == i for i, m in enumerate(old_match)]
    return sim, new_match, old_match, new_same, old_same


def growover_span_plan(
    old_texts: list[str],
    new_texts: list[str],
    chunks: list[tuple[list[int], list[int]]],
    max_len: int,
) -> list[tuple[list[tuple[int, int]], list[tuple[int, int]], list[str], list[str]]]:
    """For each gap span matching will look at: old spans, new spans and their texts."""
    plan = []
    for (ns, ne), (os_, oe) in chunks:
        if os_ >= oe:
            continue
        olds = growover_spans(os_, oe, max_len, capped_prefix=True)
        news = growover_spans(ns, ne, max_len, capped_prefix=False)
        plan.append(
            (
                olds,
                news,
                [_slice_text(old_texts, sp) for sp in olds],
                [_slice_text(new_texts, sp) for sp in news],
            )
        )
    return plan


def growover_apply_spans(
    result: GrowoverMatch,
    old_match: list[Match],
    olds: list[tuple[int, int]],
    news: list[tuple[int, int]],
    sim: np.ndarray,
    threshold: float,
) -> None:
    """Span step for one gap: every span pair whose rounded similarity reaches the threshold
    marks all its sentences unchanged (no check for sentences already taken); pairs are taken
    best first, ties in row-major order, which decides the first recorded match."""
    n_old, n_new = len(result.old_same), len(result.new_same)
    rows, cols = np.nonzero(sim >= threshold)
    pairs = sorted(zip(rows.tolist(), cols.tolist(), strict=True), key=lambda rc: -sim[rc])
    for r, c in pairs:
        for i in range(*olds[r]):
            if i >= n_old:
                break
            result.old_same[i] = True
            _add_span(old_match, i, news[c])
        for j in range(*news[c]):
            if j >= n_new:
                break
            if not result.new_same[j]:
                result.new_rule[j] = "span"
                result.new_similarity[j] = float(sim[r, c])
            result.new_same[j] = True
            _add_span(result.new_match, j, olds[r])


def _add_span(match: list[Match], i: int, span: tuple[int, int]) -> None:
    # An unmatched sentence gets a list; a list grows; a one-sided int match stays as it is.
    m = match[i]
    if isinstance(m, list):
        m.append(span)
    elif m == -1:
        match[i] = [span]
