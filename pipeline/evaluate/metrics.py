"""Scores of model answers: pure functions, no I/O.

- QA: SQuAD-style exact match and token F1 after :func:`normalize` (lowercase, Unicode
  punctuation and the articles a / an / the removed, whitespace collapsed), the best over the
  gold answers.
- List answers (temporal QA): ``any`` = the best score over the gold items; ``all`` = the
  fraction of gold items found in the prediction (F1) and 1 only when all are found (EM).
- Dialogue: corpus BLEU (sacrebleu, default 13a tokenization) of the expert replies of a group.
- Outdated answers: a prediction for a changed question that matches the previous answer
  rather than the current one.
- Retrieval: evidence recall@k, whether a retrieved passage holds the item's evidence text.
- Timelines (OAKS): accuracy per interval, an answer counting as right when it holds the gold.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize(text: str | None) -> str:
    """SQuAD normalization: lowercase, punctuation and articles removed, single spaces."""
    lowered = (text or "").lower()
    no_punct = "".join(" " if unicodedata.category(c).startswith("P") else c for c in lowered)
    return " ".join(_ARTICLES.sub(" ", no_punct).split())


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when prediction and gold are equal after normalization, else 0.0."""
    return float(normalize(prediction) == normalize(gold))


def token_f1(prediction: str, gold: str) -> float:
    """Harmonic mean of token precision and recall after normalization (1.0 for two empties)."""
    pred, ref = normalize(prediction).split(), normalize(gold).split()
    if not pred or not ref:
        return float(pred == ref)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def best_em_f1(prediction: str, golds: Iterable[str]) -> tuple[float, float]:
    """(EM, F1), each the maximum over the gold answers (0, 0 when there is none)."""
    golds = [g for g in golds if g is not None]
    if not golds:
        return 0.0, 0.0
    return (
        max(exact_match(prediction, g) for g in golds),
        max(token_f1(prediction, g) for g in golds),
    )


def contains_answer(prediction: str, gold: str) -> bool:
    """Whether the normalized gold occurs as a whole-token span of the normalized prediction."""
    g = normalize(gold)
    return bool(g) and f" {g} " in f" {normalize(prediction)} "


def list_em_f1(prediction: str, golds: Sequence[str], mode: str) -> tuple[float, float]:
    """Score a prediction against a list answer. ``any``: the best (EM, F1) over the items;
    ``all``: F1 = the fraction of gold items found in the prediction, EM = 1 when all are."""
    if mode == "any":
        return best_em_f1(prediction, golds)
    if mode != "all":
        raise ValueError(f"answer_mode {mode!r}: expected 'all' or 'any'")
    if not golds:
        return 0.0, 0.0
    found = sum(contains_answer(prediction, g) for g in golds) / len(golds)
    return float(found == 1.0), found


def is_outdated(prediction: str, current: str, previous: str) -> bool:
    """Whether a prediction gives the previous answer of a changed question instead of the
    current one: closer to the previous answer (token F1) and equal to it or holding it."""
    if not previous or normalize(previous) == normalize(current):
        return False
    closer = token_f1(prediction, previous) > token_f1(prediction, current)
    return closer and (
        exact_match(prediction, previous) == 1.0 or contains_answer(prediction, previous)
    )


def outdated_rate(rows: Iterable[tuple[str, str, str]]) -> float | None:
    """Fraction of ``(prediction, current, previous)`` rows that are outdated (None: no rows)."""
    flags = [is_outdated(p, c, prev) for p, c, prev in rows]
    return sum(flags) / len(flags) if flags else None


def corpus_bleu(predictions: Sequence[str], references: Sequence[str]) -> float | None:
    """sacrebleu corpus BLEU (0-100) of predictions against one reference each (None: empty)."""
    if not predictions:
        return None
    import sacrebleu

    if len(predictions) != len(references):
        raise ValueError("one reference per prediction")
    return float(sacrebleu.corpus_bleu(list(predictions), [list(references)]).score)


def _squash(text: str) -> str:
    return " ".join(text.split())


def evidence_in_passage(evidence: str, sentences: Sequence[str]) -> bool:
    """Whether a passage (its sentences, in order) holds the evidence text: as one span, or
    sentence by sentence (evidence made of two sentences of the paragraph that are apart)."""
    rest = _squash(evidence)
    if not rest:
        return False
    if rest in _squash(" ".join(sentences)):
        return True
    for sentence in sentences:
        s = _squash(sentence)
        if s and s in rest:
            rest = rest.replace(s, " ", 1)
    return not rest.strip()


def evidence_recall(evidence: Sequence[str], passages: Sequence[Sequence[str]]) -> float:
    """Fraction of the evidence texts held by at least one of the retrieved passages (each
    given as its sentences); 0.0 when nothing was retrieved or there is no evidence."""
    pieces = [e for e in evidence if e and e.strip()]
    if not pieces:
        return 0.0
    found = sum(any(evidence_in_passage(e, p) for p in passages) for e in pieces)
    return found / len(pieces)


def interval_correct(prediction: str, gold: str) -> bool:
    """A timeline answer is right when it equals the interval's answer or holds it."""
    return exact_match(prediction, gold) == 1.0 or contains_answer(prediction, gold)


def mean(values: Iterable[float]) -> float | None:
    """The arithmetic mean, or None for no values."""
    items = list(values)
    return sum(items) / len(items) if items else None
