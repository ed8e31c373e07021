"""Where models run ("auto" = the GPU when there is one) and what to say when one cannot load."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pipeline.errors import ConfigError, WikidriftError

# While a model loads, transformers swaps class attributes for no-ops (PreTrainedModel.tie_weights
# and init_weights, the torch.nn.init functions) and puts the saved ones back afterwards. Two
# loads in different threads can save and restore each other's no-ops, which leaves weight tying
# switched off for the rest of the process (a tied lm_head then stays on the meta device).
# The flows load models from several threads, so every load goes through this one lock.
_MODEL_LOAD_LOCK = threading.RLock()


def resolve_device(device: str = "auto") -> str:
    """Return a concrete torch device string: "auto" -> "cuda" if available, else "cpu"."""
    # torch is imported here so that importing pipeline.models stays cheap for the CLI.
    import torch

    wanted = (device or "auto").strip().lower()
    if wanted == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if wanted.startswith("cuda") and not torch.cuda.is_available():
        # Failing here beats a confusing CUDA error deep inside a forward pass.
        raise ConfigError(f"device {device!r} requested but torch sees no CUDA GPU; use 'auto'")
    return wanted


# On a CPU a batch of 64 padded sentences spills the activations out of the cache: MiniLM embeds
# the same 1,472 real gap sentences in 15 s in batches of 8 and in 23 s in batches of 64
# (2 cores). A GPU wants large batches.
CPU_BATCH_SIZE = 8
GPU_BATCH_SIZE = 64


def auto_batch_size(requested: int, device: str) -> int:
    """``requested``, or for 0 the batch size that runs fastest on the resolved ``device``."""
    if requested:
        return requested
    return CPU_BATCH_SIZE if device == "cpu" else GPU_BATCH_SIZE


def model_load_error(kind: str, name: str, exc: BaseException) -> WikidriftError:
    """A user-facing error for a model that failed to load, with the offline hint first."""
    cause = " ".join(str(exc).split()).rstrip(".")
    return WikidriftError(
        f"could not load {kind} {name!r}: its weights must be downloadable from the Hugging "
        "Face hub or already present in the local HF cache (HF_HOME); with HF_HUB_OFFLINE=1 "
        f"only cached models or local folders load. Cause: {type(exc).__name__}: {cause}"
    )


@contextmanager
def serialized_model_load() -> Iterator[None]:
    """Hold the process-wide lock that every model load in wikidrift runs under."""
    with _MODEL_LOAD_LOCK:
        yield


def require_materialized(model: Any, kind: str, name: str) -> None:
    """Raise when a loaded torch model still has weights on the meta device (never filled in)."""
    empty = [n for n, t in (*model.named_parameters(), *model.named_buffers()) if t.is_meta]
    if empty:
        shown = ", ".join(empty[:5]) + (f" and {len(empty) - 5} more" if len(empty) > 5 else "")
        raise WikidriftError(
            f"{kind} {name!r} loaded with weights that hold no data ({shown}): the checkpoint "
            "lacks them and they were neither tied nor initialized"
        )
