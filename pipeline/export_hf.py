"""Export a release as a Hugging Face datasets repository, and optionally push it.

Layout of ``DIR``::

    README.md                   dataset card with YAML ``configs:`` (one config per artifact)
    qa/<split>.parquet          split = "r" + snapshot with "_" (``r2024_06_01``): split names
    dialogue/<split>.parquet    must match ``^\\w+(\\.\\w+)*$``
    quadruples/<split>.parquet
    sentence_labels/<split>.parquet
    temporal_qa/, timelines/, relations/, sources/   (schema v2 / v3 releases; ``sources``:
                                the article revisions quoted, with oldid URL and licence)
    lm_eval/                    lm-evaluation-harness task YAMLs (pipeline.evaluate.lmeval);
                                qa and dialogue rows gain ``bm25_top3`` / ``dense_top3``
    growth.png, manifest.json   copied from the release (the manifest and card redacted
                                again: releases written before redaction existed may hold
                                a contact e-mail, URL credentials or local paths)

``datasets.load_dataset(DIR, "qa")`` loads it offline. ``--push REPO`` uploads the folder
with ``huggingface_hub`` and tags the commit with the release id.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pipeline.errors import WikidriftError
from pipeline.layout import check_release, read_manifest, release_dir
from pipeline.redact import redact_config, redact_text, redact_value
from pipeline.schemas import RELEASE_SCHEMA_VERSION, RELEASE_TABLES, export_configs
from pipeline.stage_folders import RELEASE_MANIFEST
from pipeline.storage import write_json_atomic, write_text_atomic

if TYPE_CHECKING:
    from pipeline.config import EvaluateConfig
    from pipeline.models.embedder import Embedder

CONFIGS = export_configs(RELEASE_SCHEMA_VERSION)


def split_name(snapshot: str) -> str:
    """A valid datasets split name for a snapshot date: ``2024-06-01`` -> ``r2024_06_01``."""
    return "r" + snapshot.replace("-", "_")


def _configs(manifest: Any) -> list[str]:
    """The configs of a release (schema v1 releases have no temporal tables)."""
    return list(export_configs(manifest.schema_version))


def _card(manifest: Any, release_card: str, configs: list[str]) -> str:
    split = split_name(manifest.snapshot)
    lines = ["---", "configs:"]
    for name in configs:
        lines += [f"- config_name: {name}"]
        if name == "qa":
            lines += ["  default: true"]
        lines += ["  data_files:", f"  - split: {split}", f"    path: {name}/{split}.parquet"]
    lines += [
        "license: cc-by-sa-4.0",
        "language:",
        "- en",
        "task_categories:",
        "- question-answering",
        "- text-generation",
        "tags:",
        "- wikipedia",
        "- temporal",
        "- knowledge-update",
        "- growover",
        "---",
        "",
    ]
    usage = (
        "\n## Configs\n\n"
        + "\n".join(f"- `{n}`: {RELEASE_TABLES[n].description}" for n in configs)
        + f"\n\n```python\nfrom datasets import load_dataset\n"
        f'qa = load_dataset("<repo or folder>", "qa", split="{split}")\n```\n'
    )
    return "\n".join(lines) + release_card + usage


def export_hf(
    workdir: str | Path,
    snapshot: str,
    out: str | Path,
    *,
    embedder: Embedder | None = None,
    item_filter: dict[str, Any] | None = None,
) -> Path:
    """Write the Hugging Face layout of the release of ``snapshot`` into ``out`` (which must be
    empty or not exist), with the harness files (:func:`add_harness_files`; ``embedder``:
    the dense retriever's, default the release's own; ``item_filter``: the lm-eval tasks'
    item filter, the data stays whole); returns ``out``."""
    manifest = check_release(workdir, snapshot)
    src = release_dir(workdir, snapshot)
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise WikidriftError(f"{out} is not empty; export into a new or empty folder")
    out.mkdir(parents=True, exist_ok=True)
    split = split_name(snapshot)
    configs = _configs(manifest)
    for name in configs:
        (out / name).mkdir(exist_ok=True)
        shutil.copyfile(src / f"{name}.parquet", out / name / f"{split}.parquet")
    shutil.copyfile(src / "growth.png", out / "growth.png")
    write_json_atomic(out / RELEASE_MANIFEST, public_manifest(src / RELEASE_MANIFEST))
    card = _card(manifest, (src / "README.md").read_text(), configs)
    write_text_atomic(out / "README.md", redact_text(card))
    add_harness_files(Path(workdir), snapshot, out, configs, embedder, item_filter)
    return out


def release_retrieval(workdir: Path, snapshot: str) -> EvaluateConfig:
    """The ``[evaluate]`` settings the release was built with (the defaults for releases
    written before the section existed), its ``retriever_embedder`` filled in with the
    labeling embedder when empty."""
    from pipeline.config import EvaluateConfig
    from pipeline.models.embedder import PACKAGED_MINILM

    config = read_manifest(workdir, snapshot).config
    stored = config.get("evaluate") or {}
    settings = EvaluateConfig(
        **{k: v for k, v in stored.items() if k in EvaluateConfig.model_fields}
    )
    if not settings.retriever_embedder:
        embedder = config.get("models", {}).get("embedder") or PACKAGED_MINILM
        settings = settings.model_copy(update={"retriever_embedder": embedder})
    return settings


def add_harness_files(
    workdir: Path,
    snapshot: str,
    out: Path,
    configs: list[str],
    embedder: Embedder | None,
    item_filter: dict[str, Any] | None = None,
) -> list[str]:
    """Precomputed top-3 passages (``bm25_top3``, ``dense_top3``) on the exported ``qa`` and
    ``dialogue`` rows, lm-evaluation-harness task YAMLs in ``out/lm_eval`` and a card section
    on them (see :mod:`pipeline.evaluate.lmeval`); ``embedder`` (default: the release's
    retriever embedder, uncached: an export only reads the workdir) makes ``dense_top3``;
    ``item_filter`` (:meth:`pipeline.evaluate.harness.ItemFilter.record`) restricts the tasks
    to the items it keeps. Returns the task names."""
    from pipeline.evaluate.lmeval import (
        LM_EVAL_CARD,
        add_retrieval_columns,
        filter_note,
        write_lm_eval_tasks,
    )
    from pipeline.models.embedder import load_embedder

    split = split_name(snapshot)
    files = {name: out / name / f"{split}.parquet" for name in configs}
    settings = release_retrieval(workdir, snapshot)
    embedder = embedder or load_embedder(settings.retriever_embedder)
    add_retrieval_columns(workdir, snapshot, files, embedder, settings)
    tasks = write_lm_eval_tasks(out, split, configs, item_filter)
    card = out / "README.md"
    listed = ", ".join(f"`{t}`" for t in tasks)
    section = LM_EVAL_CARD.format(tasks=listed, embedder=embedder.model_id)
    section += filter_note(item_filter)
    write_text_atomic(card, card.read_text() + section)
    return tasks


def public_manifest(path: Path) -> dict[str, Any]:
    """A release's ``manifest.json`` with its config and models redacted (a no-op for
    releases that were written redacted)."""
    data = json.loads(path.read_text())
    if isinstance(data.get("config"), dict):
        data["config"] = redact_config(data["config"])
    if "models" in data:
        data["models"] = redact_value(data["models"])
    return data


class HubApi(Protocol):
    """The part of ``huggingface_hub.HfApi`` the push uses (injectable for tests)."""

    def create_repo(self, repo_id: str, **kwargs: Any) -> Any: ...

    def upload_folder(self, **kwargs: Any) -> Any: ...

    def create_tag(self, repo_id: str, **kwargs: Any) -> Any: ...


def push_to_hub(folder: str | Path, repo_id: str, *, api: HubApi | None = None) -> str:
    """Upload an exported folder to a dataset repo and tag the commit with the release id.
    Needs a Hugging Face token (``HF_TOKEN`` or ``huggingface-cli login``)."""
    folder = Path(folder)
    release_id = json.loads((folder / RELEASE_MANIFEST).read_text())["release_id"]
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    api.create_repo(repo_id, repo_type="dataset", exist_ok=True)
    commit = api.upload_folder(
        repo_id=repo_id,
        repo_type="dataset",
        folder_path=str(folder),
        commit_message=f"wikidrift release {release_id}",
    )
    revision = getattr(commit, "oid", None)
    api.create_tag(
        repo_id,
        repo_type="dataset",
        tag=release_id,
        revision=revision,
        tag_message=f"wikidrift release {release_id}",
    )
    return release_id
