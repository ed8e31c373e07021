"""Write what an evaluation found: ``results.json``, ``results.md``, ``predictions.jsonl`` in
the run's folder, and the leaderboard of every run of a workdir
(``<workdir>/evaluations/leaderboard.jsonl`` + ``leaderboard.md``, one line per run; a re-run
of the same release, model, retriever, k, kinds, limit and item filter replaces its line),
with a plot of
QA F1 per type across releases once a model and retriever were evaluated on several.

Tables follow GrowOVER's Table 4 / 5 layout: one row per model and retriever, QA F1 and
dialogue BLEU per item type, plus the outdated-answer rate and the evidence recall@k.
"""

from __future__ import annotations

import fcntl
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pipeline.evaluate.harness import TYPES, EvalRun
from pipeline.layout import evaluations_dir
from pipeline.storage import atomic_open, write_json_atomic, write_text_atomic

_RUN_KEY = ("release", "model", "retriever", "k", "kinds", "limit", "filter")


def slug(text: str) -> str:
    """A file-name-safe form of a model or retriever name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "model"


def filter_label(item_filter: dict[str, Any] | None) -> str:
    """How a run's item filter reads in tables: ``all``, ``after 2024-06-01``, ``new,changed``
    or both joined by ``; ``."""
    if not item_filter:
        return "all"
    parts = []
    if item_filter.get("created_after"):
        parts.append(f"after {item_filter['created_after']}")
    if item_filter.get("types"):
        parts.append(",".join(item_filter["types"]))
    return "; ".join(parts) or "all"


def default_out(
    workdir: str | Path,
    release: str,
    model: str,
    retriever: str,
    item_filter: dict[str, Any] | None = None,
) -> Path:
    """``<workdir>/evaluations/<release>/<model-slug>__<retriever>``, plus
    ``__after-<date>`` / ``__types-<t1>-<t2>`` for a filtered run (it never overwrites the
    run on every item)."""
    name = f"{slug(model)}__{retriever}"
    if item_filter and item_filter.get("created_after"):
        name += f"__after-{item_filter['created_after']}"
    if item_filter and item_filter.get("types"):
        name += "__types-" + "-".join(item_filter["types"])
    return evaluations_dir(workdir) / release / name


def scored_model(backend: Any) -> str:
    """The name a run records for the model that answered (results folder, ``model`` field,
    leaderboard): ``backend:model`` as the endpoint reports it, except for an
    OpenAI-compatible server other than OpenAI's: the model id the server itself lists, or,
    when it names none (down, no ``/models``), its URL without credentials; never the
    configured OpenAI model, which did not answer. (``model_spec`` keeps the ``--model``.)"""
    from pipeline.models.llm.openai_backend import OpenAIBackend, is_openai_endpoint
    from pipeline.redact import strip_credentials

    identity = backend.identity
    inner = getattr(backend, "backend", None)
    if (
        isinstance(inner, OpenAIBackend)
        and inner.backend_id == "openai"
        and inner.base_url
        and not is_openai_endpoint(inner.base_url)
    ):
        url = strip_credentials(inner.base_url).rstrip("/")
        return identity.model if identity.model in (inner.served_models or ()) else url
    return f"{identity.backend}:{identity.model}"


def run_record(
    run: EvalRun, *, model: str, model_spec: str, config: dict[str, Any]
) -> dict[str, Any]:
    """The ``results.json`` content of a run (without the per-item predictions)."""
    data = asdict(run)
    data.pop("predictions")
    return {"model": model, "model_spec": model_spec, **data, "config": config}


def _cell(value: Any) -> str:
    return "–" if value is None else f"{value:.1f}"


def _metric(record: dict[str, Any], kind: str, group: str, name: str) -> Any:
    return record["metrics"].get(kind, {}).get(group, {}).get(name)


def results_table(records: list[dict[str, Any]]) -> str:
    """Markdown table, one row per run: QA F1 and dialogue BLEU per type (GrowOVER Table 4 /
    5), the outdated-answer rate on changed QA and the QA evidence recall@k."""
    head = [
        "Release",
        "Model",
        "Retriever",
        "Items",
        *(f"QA F1 {t}" for t in (*TYPES, "all")),
        *(f"Dial. BLEU {t}" for t in (*TYPES, "all")),
        "Outdated %",
        "QA recall@k",
    ]
    lines = ["| " + " | ".join(head) + " |", "|---|---|---|---|" + "---:|" * (len(head) - 4)]
    for r in records:
        retriever = r["retriever"] if r["retriever"] == "none" else f"{r['retriever']} (k={r['k']})"
        cells = [
            r["release"],
            r["model"],
            retriever,
            filter_label(r.get("filter")),
            *(_cell(_metric(r, "qa", t, "f1")) for t in (*TYPES, "all")),
            *(_cell(_metric(r, "dialogue", t, "bleu")) for t in (*TYPES, "all")),
            _cell(r["metrics"].get("qa", {}).get("outdated_rate")),
            _cell(_metric(r, "qa", "all", "recall")),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _details(record: dict[str, Any]) -> str:
    lines = []
    for kind, found in record["metrics"].items():
        lines.append(f"\n### {kind}\n")
        lines.append("| group | n | EM | F1 | BLEU | accuracy | recall@k |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|")
        groups = {g: v for g, v in found.items() if isinstance(v, dict) and "n" in v}
        groups.update({f"category {c}": v for c, v in found.get("by_category", {}).items()})
        for group, v in groups.items():
            cells = [v.get(m) for m in ("em", "f1", "bleu", "accuracy", "recall")]
            lines.append(f"| {group} | {v['n']} | " + " | ".join(_cell(c) for c in cells) + " |")
        if kind == "qa" and found.get("outdated_n"):
            lines.append(
                f"\nOutdated answers on changed QA: {_cell(found['outdated_rate'])}% "
                f"of {found['outdated_n']}"
            )
    return "\n".join(lines)


def results_markdown(record: dict[str, Any]) -> str:
    """``results.md``: the summary row, then every kind per group, then how the run went."""
    skipped = "".join(f"\n- skipped {k}: {why}" for k, why in record["skipped"].items())
    ms = record["retrieval_ms_per_query"]
    retrieval = "–" if ms is None else f"{ms:.2f}"
    return (
        f"# Evaluation of release {record['release_id']}\n\n"
        + results_table([record])
        + _details(record)
        + f"\n\n- model: {record['model']}; retriever: {record['retriever']}; k: {record['k']}"
        + f"\n- items: {filter_label(record.get('filter'))}"
        + f"\n- model calls: {record['model_calls']}; cache hits: {record['cache_hits']}; "
        f"failed: {record['failed']}" + f"\n- retrieval: {retrieval} ms/query; "
        f"wall time: {record['seconds']:.1f} s" + skipped + "\n"
    )


def write_results(out: Path, record: dict[str, Any], predictions: list[dict[str, Any]]) -> None:
    """``results.json``, ``results.md`` and ``predictions.jsonl`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "results.json", record)
    write_text_atomic(out / "results.md", results_markdown(record))
    text = "".join(json.dumps(p, ensure_ascii=False, default=str) + "\n" for p in predictions)
    write_text_atomic(out / "predictions.jsonl", text)


def _key(record: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(json.dumps(record.get(k), sort_keys=True) for k in _RUN_KEY)


def update_leaderboard(workdir: str | Path, record: dict[str, Any]) -> list[dict[str, Any]]:
    """Add ``record`` to the workdir's leaderboard (replacing a run with the same key) and
    rewrite ``leaderboard.md``; returns every run, sorted by release, model, retriever."""
    root = evaluations_dir(workdir)
    root.mkdir(parents=True, exist_ok=True)
    path = root / "leaderboard.jsonl"
    with (root / ".leaderboard.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two evaluations finishing together keep both lines
        runs = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        runs = [r for r in runs if _key(r) != _key(record)] + [record]
        runs.sort(key=lambda r: (r["release"], r["model"], r["retriever"], r["k"], _key(r)[-1]))
        with atomic_open(path, "w") as fh:
            fh.writelines(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in runs)
        write_text_atomic(
            root / "leaderboard.md", "# wikidrift leaderboard\n\n" + results_table(runs)
        )
    return runs


def write_release_plot(
    workdir: str | Path, runs: list[dict[str, Any]], model: str, retriever: str
) -> Path | None:
    """QA F1 per type across releases for one model and retriever (its latest run on every
    item per release), as ``evaluations/plots/<model>__<retriever>.png``; None with fewer than two
    releases."""
    by_release = {
        r["release"]: r
        for r in runs
        if r["model"] == model
        and r["retriever"] == retriever
        and "qa" in r["metrics"]
        and not r.get("filter")  # a filtered run scores other items: not comparable
    }
    if len(by_release) < 2:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    releases = sorted(by_release)
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for group in (*TYPES, "all"):
        values = [_metric(by_release[d], "qa", group, "f1") for d in releases]
        ax.plot(
            releases, [float("nan") if v is None else v for v in values], marker="o", label=group
        )
    ax.set_ylabel("QA F1")
    ax.set_title(f"{model} / {retriever}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = evaluations_dir(workdir) / "plots" / f"{slug(model)}__{retriever}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return path


@dataclass(frozen=True)
class RecordedRun:
    """Where a finished run was written and what it joined."""

    out: Path  # the run's folder (results.json, results.md, predictions.jsonl)
    record: dict[str, Any]  # results.json
    on_leaderboard: bool  # False when model calls failed: the run is not comparable
    plot: Path | None  # the model's QA F1 across releases, once there are two


def record_run(
    workdir: str | Path,
    run: EvalRun,
    *,
    model: str,
    model_spec: str,
    config: dict[str, Any],
    limit: int | None,
    out: Path | None = None,
    per_release: bool = False,
) -> RecordedRun:
    """Write a finished run's results into ``out`` (``out/<release>`` with ``per_release``;
    default: :func:`default_out`) and, when every model call succeeded, put it on the
    leaderboard and redraw the model's plot. A run with failed calls stays off the
    leaderboard: its failed items count as wrong, and the same command run again retries
    them."""
    record = run_record(run, model=model, model_spec=model_spec, config=config)
    record["limit"] = limit
    if out is None:
        out = default_out(workdir, run.release, model, run.retriever, record.get("filter"))
    elif per_release:
        out = out / run.release
    write_results(out, record, run.predictions)
    if run.failed:
        return RecordedRun(out, record, on_leaderboard=False, plot=None)
    runs = update_leaderboard(workdir, record)
    return RecordedRun(out, record, True, write_release_plot(workdir, runs, model, run.retriever))
