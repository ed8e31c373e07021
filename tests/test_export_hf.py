"""Hugging Face export: the folder loads with `datasets` offline; the push is thin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipeline.errors import WikidriftError
from pipeline.export_hf import CONFIGS, export_hf, push_to_hub, split_name
from pipeline.layout import read_manifest, read_release_table
from tests.conftest import STAGE_DATES
from wikidrift.cli import main

B = STAGE_DATES[1]


def test_split_names_are_valid() -> None:
    import re

    assert split_name("2024-06-01") == "r2024_06_01"
    assert re.fullmatch(r"\w+(\.\w+)*", split_name("2024-06-01"))


def test_export_loads_with_datasets(
    released_workdir: Path, tmp_path: Path, cached_offline_embedder
) -> None:
    from datasets import load_dataset

    out = export_hf(released_workdir, B, tmp_path / "hf", embedder=cached_offline_embedder)
    card = (out / "README.md").read_text()
    assert card.startswith("---\nconfigs:\n")
    for name in CONFIGS:
        assert f"- config_name: {name}" in card
        assert (out / name / f"{split_name(B)}.parquet").exists()
    cache = tmp_path / "hf_cache"  # fresh cache: datasets does not notice rewritten files
    for name in CONFIGS:
        ds = load_dataset(str(out), name, cache_dir=str(cache))
        assert list(ds) == [split_name(B)]
        expected = read_release_table(released_workdir, B, name)
        assert ds[split_name(B)].num_rows == expected.num_rows
    qa = load_dataset(str(out), "qa", split=split_name(B), cache_dir=str(cache))
    assert set(qa.column_names) >= {"question", "answer", "evidence_sent_idx", "type"}
    default = load_dataset(str(out), split=split_name(B), cache_dir=str(cache))
    assert default.num_rows == qa.num_rows  # qa is the default config
    with pytest.raises(WikidriftError, match="not empty"):
        export_hf(released_workdir, B, out)


class RecordingHub:
    """Stands in for huggingface_hub.HfApi: records the calls a push makes."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def create_repo(self, repo_id: str, **kwargs: Any) -> None:
        self.calls.append(("create_repo", repo_id, kwargs))

    def upload_folder(self, **kwargs: Any) -> Any:
        self.calls.append(("upload_folder", kwargs))
        return type("Commit", (), {"oid": "abc123"})()

    def create_tag(self, repo_id: str, **kwargs: Any) -> None:
        self.calls.append(("create_tag", repo_id, kwargs))


def test_push_uploads_the_folder_and_tags_the_release(
    released_workdir: Path, tmp_path: Path, cached_offline_embedder
) -> None:
    out = export_hf(released_workdir, B, tmp_path / "hf", embedder=cached_offline_embedder)
    hub = RecordingHub()
    tag = push_to_hub(out, "me/wikidrift", api=hub)
    assert tag == read_manifest(released_workdir, B).release_id
    names = [c[0] for c in hub.calls]
    assert names == ["create_repo", "upload_folder", "create_tag"]
    upload = hub.calls[1][1]
    assert upload["folder_path"] == str(out) and upload["repo_type"] == "dataset"
    assert hub.calls[2][2]["tag"] == tag and hub.calls[2][2]["revision"] == "abc123"


@pytest.mark.usefixtures("exports_share_the_session_embedder")
def test_cli_export_hf(released_workdir: Path, tmp_path: Path, capsys) -> None:
    code = main(
        [
            "export-hf",
            "--release",
            B,
            "--workdir",
            str(released_workdir),
            "--out",
            str(tmp_path / "x"),
        ]
    )
    assert code == 0 and "exported" in capsys.readouterr().out


def test_export_redacts_a_release_written_before_redaction(
    released_workdir: Path, tmp_path: Path, cached_offline_embedder
) -> None:
    import json

    from pipeline.layout import release_dir
    from pipeline.storage import write_json_atomic
    from tests.conftest import copy_workdir, reseal_release

    workdir = copy_workdir(released_workdir, tmp_path / "w")
    src = release_dir(workdir, B)
    manifest = json.loads((src / "manifest.json").read_text())
    manifest["config"]["api"]["user_agent"] = "bench/1 (carol@example.org)"
    manifest["config"]["llm"]["base_url"] = "https://carol:s3cret@llm.example/v1"
    manifest["config"]["flow"]["dask_address"] = "tcp://192.0.2.5:8786"
    manifest["models"]["generator"] = "/home/carol/models/q.gguf"
    write_json_atomic(src / "manifest.json", manifest)
    card = (src / "README.md").read_text()
    (src / "README.md").write_text(card + "\nModel: /home/carol/models/q.gguf\n")
    reseal_release(workdir, B)
    manifest = json.loads((src / "manifest.json").read_text())
    out = export_hf(workdir, B, tmp_path / "hf", embedder=cached_offline_embedder)
    for name in ("manifest.json", "README.md"):
        text = (out / name).read_text()
        for secret in ("carol", "s3cret", "192.0.2.5"):
            assert secret not in text, (name, secret)
    exported = json.loads((out / "manifest.json").read_text())
    assert exported["config"]["llm"]["base_url"] == "https://llm.example/v1"
    assert exported["models"]["generator"] == "<local>/q.gguf"
    assert exported["files"] == manifest["files"]


def test_export_carries_top3_passages(released_workdir: Path, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from pipeline.evaluate.corpus import build_corpus

    out = export_hf(released_workdir, B, tmp_path / "hf")
    corpus = {p.passage_id: p for p in build_corpus(released_workdir, B)}
    for config in ("qa", "dialogue"):
        table = pq.read_table(out / config / f"{split_name(B)}.parquet")
        assert table.num_rows == read_release_table(released_workdir, B, config).num_rows
        for column in ("bm25_top3", "dense_top3"):
            lists = table.column(column).to_pylist()
            assert all(1 <= len(hits) <= 3 for hits in lists), column
            for hits in lists:
                scores = [h["score"] for h in hits]
                assert scores == sorted(scores, reverse=True)
                for h in hits:
                    passage = corpus[h["passage_id"]]
                    assert h["text"] == passage.text and h["snapshot"] == passage.last_seen
    qa = pq.read_table(out / "qa" / f"{split_name(B)}.parquet").to_pylist()
    # the scripted questions are generic, yet BM25's top 3 often holds the evidence
    found = sum(
        any(r["evidence_text"] in h["text"] for h in r["bm25_top3"])
        for r in qa
        if r["evidence_text"]
    )
    assert found >= 0.4 * len(qa)
    card = (out / "README.md").read_text()
    assert "## Evaluating with lm-evaluation-harness" in card
    # the release's own retriever embedder (offline: the labeling one) made dense_top3
    assert "`dense_top3` by `packaged:all-MiniLM-L6-v2`" in card


def test_lm_eval_task_yamls(
    released_workdir: Path, tmp_path: Path, monkeypatch, cached_offline_embedder
) -> None:
    """The task YAMLs hold the keys and values lm-evaluation-harness's task config needs, and
    load and run with it (an oracle model: every QA answer right, every dialogue reply wrong)."""
    import yaml

    out = export_hf(released_workdir, B, tmp_path / "hf", embedder=cached_offline_embedder)
    folder = out / "lm_eval"
    names = sorted(p.stem for p in folder.glob("*.yaml"))
    configs = ("qa", "dialogue", "temporal_qa", "timelines")
    expected = ["wikidrift_" + c for c in configs if (out / c).is_dir()]
    expected += [f"wikidrift_{c}_{r}" for c in ("qa", "dialogue") for r in ("bm25", "dense")]
    assert names == sorted(expected)
    loader = type("Loader", (yaml.SafeLoader,), {})
    loader.add_constructor("!function", lambda ld, node: ("function", ld.construct_scalar(node)))
    for name in names:
        task = yaml.load((folder / f"{name}.yaml").read_text(), Loader=loader)
        assert task["task"] == name and task["output_type"] == "generate_until"
        assert task["test_split"] == split_name(B) and task["dataset_path"] == "parquet"
        (data,) = task["dataset_kwargs"]["data_files"].values()
        assert (out / data).exists() and not Path(data).is_absolute()
        assert {"doc_to_text", "doc_to_target", "generation_kwargs", "metric_list"} <= set(task)
    import lm_eval
    from lm_eval.api.model import LM
    from lm_eval.tasks import TaskManager

    qa_rows = read_release_table(released_workdir, B, "qa").to_pylist()

    class Oracle(LM):
        """Answers each QA prompt with its gold answer, anything else with 'no idea'."""

        def generate_until(self, requests, disable_tqdm: bool = False):  # noqa: ANN001
            out = []
            for request in requests:
                prompt = request.arguments[0]
                hit = [r["answer"] for r in qa_rows if f"Question: {r['question']}\n" in prompt]
                out.append(hit[-1] if hit else "no idea")
            return out

        def loglikelihood(self, requests, disable_tqdm: bool = False):  # noqa: ANN001
            raise NotImplementedError

        def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):  # noqa: ANN001
            raise NotImplementedError

    monkeypatch.chdir(out)  # the tasks read the export by paths relative to it
    results = lm_eval.simple_evaluate(
        model=Oracle(),
        tasks=["wikidrift_qa_bm25", "wikidrift_dialogue"],
        task_manager=TaskManager(include_path="lm_eval", include_defaults=False),
    )
    qa = results["results"]["wikidrift_qa_bm25"]
    assert qa["exact_match,none"] == pytest.approx(1.0)
    dialogue_turns = [
        r for r in read_release_table(released_workdir, B, "dialogue").to_pylist() if r["evaluate"]
    ]
    assert results["n-samples"]["wikidrift_dialogue"]["effective"] == len(dialogue_turns)
    assert results["results"]["wikidrift_dialogue"]["bleu,none"] < 5


def test_export_has_the_sources_config_and_filtered_lm_eval_tasks(
    released_workdir: Path, tmp_path: Path, monkeypatch, cached_offline_embedder
) -> None:
    """``sources`` is a config of the export; an export with an item filter writes it into
    ``wikidrift_docs.py`` and its tasks score only the rows it keeps (as ``evaluate``)."""
    import lm_eval
    from lm_eval.api.model import LM
    from lm_eval.tasks import TaskManager

    c = STAGE_DATES[2]
    cutoff = STAGE_DATES[0]
    out = export_hf(
        released_workdir,
        c,
        tmp_path / "hf",
        item_filter={"created_after": cutoff, "types": ["new", "changed"]},
        embedder=cached_offline_embedder,
    )
    card = (out / "README.md").read_text()
    assert "- config_name: sources" in card and (out / "sources").is_dir()
    assert f"made at a snapshot after {cutoff} and of type new, changed" in card
    docs = (out / "lm_eval" / "wikidrift_docs.py").read_text()
    assert f"CREATED_AFTER: str | None = {cutoff!r}" in docs
    assert "TYPES: tuple[str, ...] | None = ('new', 'changed')" in docs
    tasks = {p.stem for p in (out / "lm_eval").glob("*.yaml")}
    assert "wikidrift_qa" in tasks and "wikidrift_timelines" not in tasks  # no type there
    assert (
        "process_docs: !function wikidrift_docs.qa_docs"
        in (out / "lm_eval" / "wikidrift_qa.yaml").read_text()
    )
    qa = read_release_table(released_workdir, c, "qa").to_pylist()
    kept = [r for r in qa if r["created_snapshot"] > cutoff and r["type"] in ("new", "changed")]
    assert kept and len(kept) < len(qa)

    class Echo(LM):
        def generate_until(self, requests, disable_tqdm: bool = False):  # noqa: ANN001
            return ["x" for _ in requests]

        def loglikelihood(self, requests, disable_tqdm: bool = False):  # noqa: ANN001
            raise NotImplementedError

        def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):  # noqa: ANN001
            raise NotImplementedError

    monkeypatch.chdir(out)
    results = lm_eval.simple_evaluate(
        model=Echo(),
        tasks=["wikidrift_qa"],
        task_manager=TaskManager(include_path="lm_eval", include_defaults=False),
    )
    assert results["n-samples"]["wikidrift_qa"]["effective"] == len(kept)
