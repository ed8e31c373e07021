"""A learned decision beside the update rules: is an (old, new) sentence pair an update?

:func:`pipeline.labeling.changes.classify_pair` decides from the word alignment with hand-set
thresholds; what it cannot settle stays ``unlabeled`` (a value replaced while the words
around it were rewritten too, a status word that changed, a value moved elsewhere). The
:class:`UpdateClassifier` is a small multinomial logistic regression over features of the
pair (:func:`pair_features`): which kinds of values were replaced, added, removed or refined
(:func:`pipeline.slots.compare_slots`), the share of words kept in place, the embedding
similarity, status-word flips (is -> was, will -> did, "currently" gone), the rule's verdict.
It gives the probability of each gold class (UPDATE, ELABORATION, REWORDING, DIFFERENT); on
the labeling path (``align.update_classifier``) a pair the rules leave ``unlabeled`` becomes
``changed`` (rule ``classifier_update``) when P(UPDATE) reaches the stored threshold.

The weights are plain JSON in the repository (``pipeline/data/update_classifier.json``),
written by ``benchmarks/train_update_classifier.py`` (fixed seed; trained on the gold pairs
of the training articles and on synthetic contrastive pairs made from their sentences); the
file's digest is part of :attr:`UpdateClassifier.model_id`, so labels made with other weights
are recomputed. Inference is numpy only.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.errors import WikidriftError
from pipeline.labeling.changes import (
    _ENDED,
    _HAPPENED,
    _NEGATION,
    _ONGOING,
    _PAST,
    _PLANNED,
    _PRESENT,
    PairClass,
    _acronym_swap,
    _content_words,
    distinct_entities,
)
from pipeline.slots import SlotDiff

DEFAULT_WEIGHTS = Path(__file__).resolve().parent / "data" / "update_classifier.json"
CLASSES = ("UPDATE", "ELABORATION", "REWORDING", "DIFFERENT")

# The rules' verdicts the classifier sees (one indicator each); the status rules share one.
_RULES = (
    "value_replaced",
    "entity_replaced",
    "value_replaced_loosely",
    "name_variant",
    "name_swapped",
    "value_moved_and_changed",
    "value_displaced",
    "details_added",
    "same_facts",
    "other_statement",
)
_STATUS_RULES = frozenset(
    [
        "planned_to_done",
        "ended_or_excepted",
        "ongoing_word_gone",
        "negation_changed",
        "present_to_past",
    ]
)
_KINDS = ("time", "number", "entity")
_YEAR = re.compile(r"\b(1[5-9]\d\d|20\d\d)\b")
_CURRENTLY = re.compile(r"\b(currently|presently|at present|now|still)\b", re.I)
_ORDINAL = re.compile(r"\b(\d+(st|nd|rd|th)|first|second|third|fourth|fifth|last|latest)\b", re.I)

FEATURES: tuple[str, ...] = (
    "similarity",
    "kept_old",
    "kept_new",
    "frame",
    *(f"replaced_{k}" for k in _KINDS),
    "replaced_distinct_entity",
    "replaced_related_entity",
    "replaced_swap",
    "replaced_year_later",
    "replaced_year_earlier",
    *(f"removed_{k}" for k in _KINDS),
    *(f"added_{k}" for k in _KINDS),
    "refined",
    "displaced",
    "planned_to_done",
    "ended_came",
    "ongoing_gone",
    "currently_gone",
    "negation_flip",
    "present_to_past",
    "acronym_swap",
    "ordinal_changed",
    "deleted_words",
    "inserted_words",
    "more_words",
    "length_ratio",
    *(f"rule_{r}" for r in _RULES),
    "rule_status",
)


def _years(text: str) -> list[int]:
    return [int(y) for y in _YEAR.findall(text)]


def pair_features(
    old: str, new: str, slots: SlotDiff, similarity: float, verdict: PairClass
) -> np.ndarray:
    """The feature vector (in the order of :data:`FEATURES`) of one pair: ``slots`` is
    :func:`pipeline.slots.compare_slots` of the two sentences, ``similarity`` their embedding
    cosine, ``verdict`` what the rules made of them."""
    gone, came = slots.deleted_words, slots.inserted_words
    rep_years = [
        (_years(r.old), _years(r.new)) for r in slots.replaced if r.kind in ("time", "number")
    ]
    later = any(o and n and max(n) > max(o) for o, n in rep_years)
    earlier = any(o and n and max(n) < max(o) for o, n in rep_years)
    del_words = len(_content_words(gone))
    ins_words = len(_content_words(came))
    old_len = max(len(_content_words(old)), 1)
    new_len = max(len(_content_words(new)), 1)
    rule = verdict.rule
    values: dict[str, float] = {
        "similarity": similarity,
        "kept_old": slots.kept_old,
        "kept_new": slots.kept_new,
        "frame": min(slots.kept_old, slots.kept_new),
        "replaced_distinct_entity": float(any(distinct_entities(r) for r in slots.replaced)),
        # one name written another way ("St. Paul" / "Saint Paul", "Dan" / "Daniel Lin")
        "replaced_related_entity": float(
            any(r.kind == "entity" and not distinct_entities(r) for r in slots.replaced)
        ),
        "replaced_swap": float(any(r.swap for r in slots.replaced)),
        "replaced_year_later": float(later),
        "replaced_year_earlier": float(earlier),
        "refined": min(len(slots.refined), 2) / 2,
        "displaced": min(len(slots.displaced), 2) / 2,
        "planned_to_done": float(
            bool(_PLANNED.search(gone) and not _PLANNED.search(came) and _HAPPENED.search(came))
        ),
        "ended_came": float(bool(_ENDED.search(came))),
        "ongoing_gone": float(bool(_ONGOING.search(gone))),
        "currently_gone": float(bool(_CURRENTLY.search(gone) and not _CURRENTLY.search(came))),
        "negation_flip": float(bool(_NEGATION.search(gone)) != bool(_NEGATION.search(came))),
        "present_to_past": float(bool(_PRESENT.search(gone) and _PAST.search(came))),
        "acronym_swap": float(_acronym_swap(slots)),
        "ordinal_changed": float(bool(_ORDINAL.search(gone) and _ORDINAL.search(came))),
        "deleted_words": math.log1p(del_words),
        "inserted_words": math.log1p(ins_words),
        "more_words": max(-5, min(5, ins_words - del_words)) / 5,
        "length_ratio": math.log(new_len / old_len),
        "rule_status": float(rule in _STATUS_RULES),
    }
    for kind in _KINDS:
        values[f"replaced_{kind}"] = min(sum(r.kind == kind for r in slots.replaced), 2) / 2
        values[f"removed_{kind}"] = min(sum(v.kind == kind for v in slots.removed), 2) / 2
        values[f"added_{kind}"] = min(sum(v.kind == kind for v in slots.added), 2) / 2
    for name in _RULES:
        values[f"rule_{name}"] = float(rule == name)
    return np.array([values[f] for f in FEATURES], dtype=np.float64)


@dataclass(frozen=True)
class UpdateClassifier:
    """Multinomial logistic regression over :func:`pair_features` (standardized), with the
    P(UPDATE) threshold above which an uncertain pair is labeled ``changed``."""

    features: tuple[str, ...]
    classes: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray  # (classes, features)
    intercept: np.ndarray  # (classes,)
    threshold: float
    digest: str

    @property
    def model_id(self) -> str:
        """Names the weights (their file's digest): part of the labeling stage's digest."""
        return f"update_classifier:{self.digest[:16]}"

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        """Class probabilities, one row per feature row of ``x`` (or one row for a vector)."""
        x2 = np.atleast_2d(np.asarray(x, dtype=np.float64))
        z = ((x2 - self.mean) / self.scale) @ self.coef.T + self.intercept
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def update_probability(self, x: np.ndarray) -> np.ndarray:
        """P(UPDATE) of each row of ``x``."""
        return self.probabilities(x)[:, self.classes.index("UPDATE")]

    def is_update(self, x: np.ndarray) -> bool:
        """Whether one pair's P(UPDATE) reaches the threshold."""
        return bool(self.update_probability(x)[0] >= self.threshold)

    def predict(self, x: np.ndarray) -> list[str]:
        """The class of each row: UPDATE when P(UPDATE) reaches the threshold, else the most
        probable of the other classes."""
        p = self.probabilities(x)
        u = self.classes.index("UPDATE")
        out = []
        for row in p:
            if row[u] >= self.threshold:
                out.append("UPDATE")
            else:
                rest = row.copy()
                rest[u] = -1.0
                out.append(self.classes[int(rest.argmax())])
        return out


def classifier_from_dict(data: dict, digest: str = "") -> UpdateClassifier:
    """An :class:`UpdateClassifier` from the stored JSON object (checks its feature list)."""
    features = tuple(data["features"])
    if features != FEATURES:
        raise WikidriftError(
            "update classifier weights were trained on other features; rerun "
            "benchmarks/train_update_classifier.py"
        )
    digest = digest or hashlib.sha256(json.dumps(data, sort_keys=True).encode("utf-8")).hexdigest()
    return UpdateClassifier(
        features=features,
        classes=tuple(data["classes"]),
        mean=np.array(data["mean"], dtype=np.float64),
        scale=np.array(data["scale"], dtype=np.float64),
        coef=np.array(data["coef"], dtype=np.float64),
        intercept=np.array(data["intercept"], dtype=np.float64),
        threshold=float(data["threshold"]),
        digest=digest,
    )


def load_update_classifier(path: str | Path | None = None) -> UpdateClassifier:
    """The classifier whose weights are at ``path`` (default: the packaged weights)."""
    path = Path(path) if path else DEFAULT_WEIGHTS
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise WikidriftError(f"update classifier weights not readable: {path}: {exc}") from exc
    return classifier_from_dict(json.loads(raw), hashlib.sha256(raw).hexdigest())


def features_matrix(rows: Sequence[np.ndarray]) -> np.ndarray:
    """Stack feature vectors (an empty matrix of the right width when there are none)."""
    if not rows:
        return np.zeros((0, len(FEATURES)))
    return np.vstack(rows)
