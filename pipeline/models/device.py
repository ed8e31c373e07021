"""Where models run ("auto" = the GPU when there is one) and what to say when one cannot load."""

from __future__ import annotations

from pipeline.errors import ConfigError, WikidriftError


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


def model_load_error(kind: str, name: str, exc: BaseException) -> WikidriftError:
    """A user-facing error for a model that failed to load, with the offline hint first."""
    cause = " ".join(str(exc).split()).rstrip(".")
    return WikidriftError(
        f"could not load {kind} {name!r}: its weights must be downloadable from the Hugging "
        "Face hub or already present in the local HF cache (HF_HOME); with HF_HUB_OFFLINE=1 "
        f"only cached models or local folders load. Cause: {type(exc).__name__}: {cause}"
    )
