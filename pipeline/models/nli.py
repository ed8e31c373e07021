"""Natural language inference for sentence labeling (GrowOVER §3.2: premise = old sentence).

`HFNLIClassifier` runs any Hugging Face sequence-classification NLI model
(`roberta-large-mnli` in the paper profile), mapping its output classes to
entailment/neutral/contradiction by the names in `config.id2label`. `CachedNLIClassifier`
keeps probabilities per (model id, premise hash, hypothesis hash) in a `ResultCache`;
`ScriptedNLIClassifier` is a deterministic stand-in for tests of the labeling logic.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from pipeline.errors import ConfigError, WikidriftError
from pipeline.models.batching import block_namespace, cache_namespace, filled, fixed_shape_blocks
from pipeline.models.device import (
    model_load_error,
    require_materialized,
    resolve_device,
    serialized_model_load,
)
from pipeline.models.vector_cache import ResultCache, text_key

log = logging.getLogger(__name__)

NLI_LABELS = ("entailment", "neutral", "contradiction")


@dataclass(frozen=True, slots=True)
class NLIResult:
    """Class probabilities for one (premise, hypothesis) pair."""

    entailment: float
    neutral: float
    contradiction: float

    @property
    def label(self) -> str:
        """The most probable class name (ties resolve in the order of NLI_LABELS)."""
        probs = (self.entailment, self.neutral, self.contradiction)
        return NLI_LABELS[int(np.argmax(probs))]

    @classmethod
    def certain(cls, label: str) -> NLIResult:
        """A one-hot result for `label` (entailment, neutral or contradiction)."""
        name = label.strip().lower()
        if name not in NLI_LABELS:
            raise ValueError(f"unknown NLI label {label!r}; expected one of {NLI_LABELS}")
        return cls(*(1.0 if name == known else 0.0 for known in NLI_LABELS))

    def as_dict(self) -> dict[str, float]:
        """{"entailment": p, "neutral": p, "contradiction": p}."""
        return {name: float(getattr(self, name)) for name in NLI_LABELS}


@runtime_checkable
class NLIClassifier(Protocol):
    """Classifies (premise, hypothesis) pairs; `pairs_classified` counts real model work."""

    model_id: str
    pairs_classified: int

    def classify(self, pairs: Sequence[tuple[str, str]]) -> list[NLIResult]:
        """One result per pair, in input order."""
        ...


def _as_pairs(pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    out = []
    for pair in pairs:
        if len(pair) != 2 or not all(isinstance(side, str) for side in pair):
            raise TypeError(f"classify() takes (premise, hypothesis) string pairs, got {pair!r}")
        out.append((pair[0], pair[1]))
    return out


def map_nli_labels(id2label: Mapping[int, str]) -> tuple[int, int, int]:
    """Model output indices of (entailment, neutral, contradiction), matched by name."""
    by_name: dict[str, int] = {}
    for index, name in id2label.items():
        by_name.setdefault(str(name).strip().lower(), int(index))
    if len(id2label) != 3 or any(name not in by_name for name in NLI_LABELS):
        raise WikidriftError(
            f"cannot map NLI labels {dict(id2label)} to {NLI_LABELS} (expected exactly these "
            "three names, any case); pass label_map={0: 'contradiction', 1: 'neutral', "
            "2: 'entailment'} with the model's real order"
        )
    entail, neutral, contra = (by_name[name] for name in NLI_LABELS)
    return entail, neutral, contra


class HFNLIClassifier:
    """A Hugging Face sequence-classification NLI model, loaded on first use."""

    def __init__(
        self,
        name_or_path: str | Path,
        *,
        device: str = "auto",
        batch_size: int = 32,
        max_length: int = 256,
        label_map: Mapping[int, str] | None = None,
        model_id: str | None = None,
    ) -> None:
        if batch_size < 1 or max_length < 4:
            raise ConfigError(f"bad batch_size={batch_size} or max_length={max_length}")
        self.name_or_path = str(name_or_path)
        # max_length only changes results for very long pairs, but then it does: keep it in
        # the cache namespace when it is not the default.
        default_id = self.name_or_path + (f"?max_length={max_length}" if max_length != 256 else "")
        self.model_id = model_id or default_id
        self.device = device
        self.batch_size = batch_size
        self.max_length = max_length
        self.label_map = dict(label_map) if label_map is not None else None
        if self.label_map is not None:
            map_nli_labels(self.label_map)  # a bad override fails at construction
        self.pairs_classified = 0
        self._tokenizer: Any = None
        self._model: Any = None
        self._device = "cpu"
        self._columns: tuple[int, int, int] | None = None

    def load(self) -> None:
        """Load tokenizer and model now (idempotent); raises WikidriftError on failure."""
        if self._model is not None:
            return
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        device = resolve_device(self.device)
        try:
            with serialized_model_load():
                tokenizer = AutoTokenizer.from_pretrained(self.name_or_path)
                model = AutoModelForSequenceClassification.from_pretrained(self.name_or_path)
        except Exception as exc:
            raise model_load_error("NLI model", self.name_or_path, exc) from exc
        require_materialized(model, "NLI model", self.name_or_path)
        id2label = self.label_map if self.label_map is not None else model.config.id2label
        try:
            columns = map_nli_labels(id2label)
        except WikidriftError as exc:
            raise WikidriftError(f"NLI model {self.name_or_path!r}: {exc}") from None
        if sorted(columns) != list(range(model.config.num_labels)):
            raise WikidriftError(
                f"label_map {id2label} does not match the {model.config.num_labels} outputs "
                f"of NLI model {self.name_or_path!r}"
            )
        model = model.to(device=device, dtype=torch.float32).eval()
        self._tokenizer, self._model, self._device = tokenizer, model, device
        self._columns = columns
        log.info("loaded NLI model %s on %s", self.name_or_path, device)

    @property
    def cache_namespace(self) -> str:
        """Cache namespace of this model's results: model, device kind and block rows."""
        return block_namespace(self.model_id, resolve_device(self.device), self.batch_size)

    def classify(self, pairs: Sequence[tuple[str, str]]) -> list[NLIResult]:
        """Softmax probabilities per (premise, hypothesis) pair, in input order; each pair's
        result depends on the pair only (fixed-shape batches, :mod:`pipeline.models.batching`)."""
        items = _as_pairs(pairs)
        if not items:
            return []
        self.load()
        assert self._columns is not None
        import torch

        probs = np.empty((len(items), 3), dtype=np.float64)
        premises, hypotheses = [p for p, _ in items], [h for _, h in items]
        counts = [
            len(ids)
            for ids in self._tokenizer(
                premises, hypotheses, truncation=True, max_length=self.max_length
            )["input_ids"]
        ]
        # Fixed-shape blocks: a pair's probabilities do not depend on the pairs beside it.
        with torch.inference_mode():
            for block, length in fixed_shape_blocks(counts, self.batch_size, self.max_length):
                rows = filled(block, self.batch_size)
                batch = self._tokenizer(
                    [premises[i] for i in rows],
                    [hypotheses[i] for i in rows],
                    padding="max_length",
                    truncation=True,
                    max_length=length,
                    return_tensors="pt",
                )
                batch = {name: tensor.to(self._device) for name, tensor in batch.items()}
                logits = self._model(**batch, return_dict=True).logits.float()
                probs[block] = (
                    torch.softmax(logits[: len(block)], dim=-1)
                    .cpu()
                    .numpy()[:, list(self._columns)]
                )
        self.pairs_classified += len(items)
        return [NLIResult(float(e), float(n), float(c)) for e, n, c in probs]


class CachedNLIClassifier:
    """Wraps a classifier with a ResultCache keyed by (model id, premise hash, hypothesis hash).

    Identical pairs within one call are classified once; `hits`/`misses` count distinct pairs,
    `pairs_classified` counts pairs actually sent to the wrapped model.
    """

    def __init__(self, classifier: NLIClassifier, cache: ResultCache) -> None:
        self.classifier = classifier
        self.cache = cache
        self.model_id = classifier.model_id
        self.cache_namespace = cache_namespace(classifier)
        self.pairs_classified = 0
        self.hits = 0
        self.misses = 0

    def classify(self, pairs: Sequence[tuple[str, str]]) -> list[NLIResult]:
        """Results per pair in input order; only pairs missing from the cache reach the model."""
        items = _as_pairs(pairs)
        if not items:
            return []
        keys = [f"{text_key(p)}:{text_key(h)}" for p, h in items]
        first_pair: dict[str, tuple[str, str]] = {}
        for key, pair in zip(keys, items, strict=True):
            first_pair.setdefault(key, pair)
        found: dict[str, NLIResult] = {}
        for key, value in self.cache.get_many(self.cache_namespace, first_pair).items():
            try:
                found[key] = NLIResult(**{name: float(value[name]) for name in NLI_LABELS})
            except (KeyError, TypeError, ValueError):
                continue  # a malformed row is recomputed and overwritten
        missing = [key for key in first_pair if key not in found]
        if missing:
            fresh = self.classifier.classify([first_pair[key] for key in missing])
            if len(fresh) != len(missing):
                raise WikidriftError(
                    f"NLI model {self.model_id!r} returned {len(fresh)} results "
                    f"for {len(missing)} pairs"
                )
            new = dict(zip(missing, fresh, strict=True))
            self.cache.put_many(self.cache_namespace, {k: r.as_dict() for k, r in new.items()})
            found.update(new)
            self.pairs_classified += len(missing)
        self.hits += len(first_pair) - len(missing)
        self.misses += len(missing)
        return [found[key] for key in keys]


NLIRule = Callable[[str, str], NLIResult | str]


class ScriptedNLIClassifier:
    """A deterministic NLIClassifier for tests: answers from a rule instead of a model.

    `rule` is either a callable `(premise, hypothesis) -> NLIResult | label` or a mapping of
    exact (premise, hypothesis) pairs to results/labels, with `default` for other pairs.
    Every pair asked is appended to `seen`.
    """

    def __init__(
        self,
        rule: NLIRule | Mapping[tuple[str, str], NLIResult | str],
        *,
        default: NLIResult | str = "neutral",
        model_id: str = "scripted-nli",
    ) -> None:
        self.model_id = model_id
        self.pairs_classified = 0
        self.seen: list[tuple[str, str]] = []
        self._default = self._result(default)
        if callable(rule):
            self._rule: NLIRule = rule
        else:
            table = {tuple(pair): self._result(value) for pair, value in rule.items()}
            self._rule = lambda premise, hypothesis: table.get((premise, hypothesis), self._default)

    @staticmethod
    def _result(value: NLIResult | str) -> NLIResult:
        return value if isinstance(value, NLIResult) else NLIResult.certain(value)

    def classify(self, pairs: Sequence[tuple[str, str]]) -> list[NLIResult]:
        """Results from the rule, in input order."""
        items = _as_pairs(pairs)
        self.seen.extend(items)
        self.pairs_classified += len(items)
        return [self._result(self._rule(premise, hypothesis)) for premise, hypothesis in items]


def load_nli(
    spec: str | None,
    *,
    device: str = "auto",
    batch_size: int = 32,
    max_length: int = 256,
) -> NLIClassifier | None:
    """Build the NLI classifier for a config spec; None, "" or "none" -> None (no NLI step)."""
    text = (spec or "").strip()
    if text.lower() in ("", "none"):
        return None
    # An optional "hf:" prefix mirrors the embedder specs.
    if text.lower().startswith("hf:"):
        text = text[3:].strip()
        if not text:
            raise ConfigError(f"NLI spec has no model name: {spec!r}")
    return HFNLIClassifier(text, device=device, batch_size=batch_size, max_length=max_length)
