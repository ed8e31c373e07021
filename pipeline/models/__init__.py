"""Models behind sentence labeling: embedders (SimCSE-style), NLI classifiers, their caches.

Importing this package is cheap: torch, transformers and sentence-transformers load only when
a model is first used.
"""

from pipeline.models.device import resolve_device
from pipeline.models.embedder import (
    PACKAGED_MINILM,
    CachedEmbedder,
    Embedder,
    SentenceTransformerEmbedder,
    SimCSEEmbedder,
    cosine_matrix,
    load_embedder,
)
from pipeline.models.nli import (
    NLI_LABELS,
    CachedNLIClassifier,
    HFNLIClassifier,
    NLIClassifier,
    NLIResult,
    ScriptedNLIClassifier,
    load_nli,
)
from pipeline.models.vector_cache import ResultCache, VectorCache, text_key

__all__ = [
    "NLI_LABELS",
    "PACKAGED_MINILM",
    "CachedEmbedder",
    "CachedNLIClassifier",
    "Embedder",
    "HFNLIClassifier",
    "NLIClassifier",
    "NLIResult",
    "ResultCache",
    "ScriptedNLIClassifier",
    "SentenceTransformerEmbedder",
    "SimCSEEmbedder",
    "VectorCache",
    "cosine_matrix",
    "load_embedder",
    "load_nli",
    "resolve_device",
    "text_key",
]
