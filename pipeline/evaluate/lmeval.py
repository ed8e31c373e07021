"""What the Hugging Face export carries for evaluation harnesses.

- ``bm25_top3`` / ``dense_top3`` on every ``qa`` and ``dialogue`` row: the three best passages
  of the release corpus (:mod:`pipeline.evaluate.corpus`) for the question (QA) or the user
  turn (dialogue), best first, each ``{passage_id, title, snapshot, text, score}``
  (``snapshot`` = the latest snapshot holding the text). BM25 is bm25s; dense uses the
  release's ``evaluate.retriever_embedder`` (else its ``models.embedder``) and prefixes.
- ``lm_eval/``: lm-evaluation-harness task YAMLs, one per config (``wikidrift_qa``,
  ``wikidrift_dialogue``, ``wikidrift_temporal_qa``, ``wikidrift_timelines``) and, for QA and
  dialogue, one per retriever (``wikidrift_qa_bm25``, ``wikidrift_qa_dense``, ...), plus
  ``wikidrift_docs.py`` (dialogue turns with their history). The tasks read the export's
  Parquet files by paths relative to the export folder (``dataset_path: parquet`` with
  ``data_files``): run ``lm_eval`` from that folder (a local export or a downloaded copy
  alike), so no local path is written into a folder that may be pushed. An export with an
  item filter (``--created-after``, ``--types``, as in ``wikidrift evaluate``) writes it
  into its ``wikidrift_docs.py`` and every task filters its documents through it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from pipeline.config import EvaluateConfig
from pipeline.evaluate.corpus import build_corpus
from pipeline.evaluate.retrievers import Hit, Retriever, make_retriever
from pipeline.models.embedder import Embedder
from pipeline.storage import atomic_open

EXPORT_K = 3
TASKS_DIR = "lm_eval"
DOCS_MODULE = "wikidrift_docs"
PASSAGES_TYPE = pa.list_(
    pa.struct(
        [
            ("passage_id", pa.string()),
            ("title", pa.string()),
            ("snapshot", pa.string()),
            ("text", pa.string()),
            ("score", pa.float32()),
        ]
    )
)
# The column each config's rows are retrieved for.
QUERY_COLUMNS = {"qa": "question", "dialogue": "user"}
_PASSAGES = (
    "{% for p in COLUMN %}[{{ loop.index }}] {{ p.title }} ({{ p.snapshot }}): {{ p.text }}\n"
    "{% endfor %}"
)
_TEXT = {
    "qa": "Question: {{ question }}\nShort answer:",
    "dialogue": "{{ history }}User: {{ user }}\nAssistant:",
    "temporal_qa": "Question: {{ question }}\nShort answer (several separated by '; '):",
    "timelines": "As of {{ interval_start }}: {{ question }}\nShort answer:",
}
_TARGET = {
    "qa": "{{ answer }}",
    "dialogue": "{{ expert }}",
    "temporal_qa": "{{ answer | join('; ') }}",
    "timelines": "{{ answer }}",
}
# SQuAD-like exact match with lm-eval's built-in options: case, punctuation, articles, spaces.
_EXACT_MATCH = {
    "metric": "exact_match",
    "aggregation": "mean",
    "higher_is_better": True,
    "ignore_case": True,
    "ignore_punctuation": True,
    "regexes_to_ignore": [r"(?i)\b(?:a|an|the)\b", r"\s+"],
}


def _passages(hits: list[Hit]) -> list[dict[str, Any]]:
    return [
        {
            "passage_id": h.passage.passage_id,
            "title": h.passage.title,
            "snapshot": h.passage.last_seen,
            "text": h.passage.text,
            "score": h.score,
        }
        for h in hits
    ]


def add_retrieval_columns(
    workdir: str | Path,
    snapshot: str,
    files: dict[str, Path],
    embedder: Embedder,
    settings: EvaluateConfig,
) -> None:
    """Append ``bm25_top3`` and ``dense_top3`` to the exported Parquet ``files`` (config name
    -> path; ``qa`` and ``dialogue`` are used), in place; ``settings`` gives the dense
    embedder's query and passage prefixes."""
    passages = build_corpus(workdir, snapshot)
    retrievers: dict[str, Retriever | None] = {
        "bm25_top3": make_retriever("bm25", passages),
        "dense_top3": make_retriever("dense", passages, embedder=embedder, settings=settings),
    }
    for config, column in QUERY_COLUMNS.items():
        path = files.get(config)
        if path is None:
            continue
        table = pq.read_table(path)
        queries = [q or "" for q in table.column(column).to_pylist()]
        for name, retriever in retrievers.items():
            assert retriever is not None
            hits = retriever.search(queries, EXPORT_K)
            values = pa.array([_passages(h) for h in hits], PASSAGES_TYPE)
            table = table.append_column(pa.field(name, PASSAGES_TYPE), values)
        with atomic_open(path, "wb") as fh:
            pq.write_table(table, fh)


def _task(config: str, split: str, retrieval: str | None) -> dict[str, Any]:
    text = _TEXT[config]
    if retrieval is not None:
        text = _PASSAGES.replace("COLUMN", f"{retrieval}_top3") + text
    dialogue = config == "dialogue"
    return {
        "task": f"wikidrift_{config}" + (f"_{retrieval}" if retrieval else ""),
        "dataset_path": "parquet",
        "dataset_kwargs": {"data_files": {split: f"{config}/{split}.parquet"}},
        "test_split": split,
        "output_type": "generate_until",
        "doc_to_text": text,
        "doc_to_target": _TARGET[config],
        "generation_kwargs": {
            "until": ["\n"],
            "do_sample": False,
            "max_gen_toks": 96 if dialogue else 32,
        },
        "metric_list": [{"metric": "bleu", "aggregation": "bleu", "higher_is_better": True}]
        if dialogue
        else [_EXACT_MATCH],
        "metadata": {"version": 1.0},
    }


def _docs_module(item_filter: dict[str, Any] | None) -> str:
    """``wikidrift_docs.py`` with the export's item filter written into its constants."""
    text = Path(__file__).with_name("lm_eval_docs.py").read_text(encoding="utf-8")
    if not item_filter:
        return text
    types = tuple(item_filter["types"]) if item_filter.get("types") else None
    for name, value in (("CREATED_AFTER", item_filter.get("created_after")), ("TYPES", types)):
        line = next(x for x in text.splitlines() if x.startswith(f"{name}: "))
        text = text.replace(line, f"{line.split('=')[0]}= {value!r}", 1)
    return text


def write_lm_eval_tasks(
    out: str | Path, split: str, configs: list[str], item_filter: dict[str, Any] | None = None
) -> list[str]:
    """Task YAMLs for the configs of an export in ``out`` (those of ``qa``, ``dialogue``,
    ``temporal_qa``, ``timelines`` it has) into ``out/lm_eval``; returns the task names.
    ``item_filter`` (:meth:`pipeline.evaluate.harness.ItemFilter.record`) makes every task
    keep only the rows it keeps (no timeline task with a type filter: intervals have none)."""
    folder = Path(out) / TASKS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_open(folder / f"{DOCS_MODULE}.py", "w") as fh:
        fh.write(_docs_module(item_filter))
    names = []
    for config in (c for c in _TEXT if c in configs):
        if config == "timelines" and item_filter and item_filter.get("types"):
            continue
        variants = [None, "bm25", "dense"] if config in QUERY_COLUMNS else [None]
        for retrieval in variants:
            task = _task(config, split, retrieval)
            text = yaml.safe_dump(task, sort_keys=False, allow_unicode=True)
            if config == "dialogue" or item_filter:  # a tag safe_dump cannot write
                text += f"process_docs: !function {DOCS_MODULE}.{config}_docs\n"
            with atomic_open(folder / f"{task['task']}.yaml", "w") as fh:
                fh.write(text)
            names.append(task["task"])
    return names


LM_EVAL_CARD = """
## Evaluating with lm-evaluation-harness

`qa` and `dialogue` rows carry `bm25_top3` and `dense_top3`: the three best passages of the
release's retrieval corpus (paragraphs of this snapshot and of the earlier ones, each with the
latest snapshot date holding it); `dense_top3` by `{embedder}`. `lm_eval/` holds one task
per config ({tasks}). From this folder:

```bash
lm_eval --model hf --model_args pretrained=MODEL --include_path lm_eval --tasks wikidrift_qa_bm25
```
"""


def filter_note(item_filter: dict[str, Any] | None) -> str:
    """The card's line on the tasks' item filter ("" without one)."""
    if not item_filter:
        return ""
    parts = []
    if item_filter.get("created_after"):
        parts.append(f"made at a snapshot after {item_filter['created_after']}")
    if item_filter.get("types"):
        parts.append("of type " + ", ".join(item_filter["types"]))
    return (
        "\nThe tasks score only the rows " + " and ".join(parts) + " (`wikidrift_docs.py`: "
        "`CREATED_AFTER`, `TYPES`); the data files hold every row.\n"
    )
