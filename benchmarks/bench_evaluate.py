"""Speed of the evaluation harness: corpus building and retrieval, then a whole evaluation.

Part 1, retrieval: the corpus of ``--release`` in ``--workdir`` (or, with ``--articles N``,
of N wikisnap articles at all five wikisnap dates, built in a temp workdir), BM25 and dense
(the configured embedder) index time and search time per query, for queries taken from the
corpus's own sentences. Part 2 (unless ``--no-model``): ``evaluate_release`` with the
configured LLM (or ``--model URL`` for an OpenAI-compatible server) and ``--retriever``:
items/s, model calls, cache hits, wall time. A second identical run is answered from the
LLM call cache.

    .venv/bin/python -m benchmarks.bench_evaluate [--workdir work] [--release 2025-01-01]
        [--articles 12] [--retriever bm25] [--kinds qa,dialogue] [--no-model]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipeline.config import Config, load_config  # noqa: E402
from pipeline.evaluate.corpus import build_corpus  # noqa: E402
from pipeline.evaluate.harness import evaluate_release  # noqa: E402
from pipeline.evaluate.retrievers import make_retriever  # noqa: E402
from pipeline.runtime import llm_from_config, retrieval_embedder  # noqa: E402
from tests.conftest import WIKISNAP, WIKISNAP_DATES, build_wikisnap_snapshots  # noqa: E402


def figure(name: str, value: float, unit: str = "") -> None:
    """One figure per line."""
    shown = str(value) if isinstance(value, int) else f"{value:.3f}"
    print(f"{name}: {shown}{(' ' + unit) if unit else ''}")


def bench_retrieval(workdir: Path, release: str, cfg: Config, queries_n: int) -> None:
    """Corpus, index and search figures for the corpus of ``release``, with the retrievers
    ``wikidrift evaluate`` builds from ``cfg``."""
    start = time.perf_counter()
    passages = build_corpus(workdir, release)
    figure("corpus_build_s", time.perf_counter() - start, "s")
    figure("passages", len(passages))
    figure("passages_current", sum(p.current for p in passages))
    sentences = [s for p in passages for s in p.sentences if len(s) > 40]
    queries = random.Random(0).sample(sentences, min(queries_n, len(sentences)))
    embedder = retrieval_embedder(cfg)
    for name in ("bm25", "dense", "temporal"):
        start = time.perf_counter()
        retriever = make_retriever(name, passages, embedder=embedder, settings=cfg.evaluate)
        assert retriever is not None
        figure(f"{name}_index_s", time.perf_counter() - start, "s")
        start = time.perf_counter()
        hits = retriever.search(queries, 3)
        figure(f"{name}_ms_per_query", 1000 * (time.perf_counter() - start) / len(queries), "ms")
        own = sum(
            any(q in h.passage.text for h in hit[:1]) for q, hit in zip(queries, hits, strict=True)
        )
        figure(f"{name}_top1_own_paragraph", own / len(queries))


def bench_model(
    workdir: Path, release: str, model: str | None, retriever: str, kinds: list[str]
) -> None:
    """Two identical evaluations: the first calls the model, the second reads the cache."""
    llm: dict[str, object] = {"batch_api": False}
    if model:
        llm |= {"backend": "openai", "base_url": model}
    cfg = load_config(
        REPO / "data" / "wikidrift.toml", overrides={"workdir": str(workdir), "llm": llm}
    )
    setup = llm_from_config(cfg, workdir)
    embedder = retrieval_embedder(cfg) if retriever in ("dense", "temporal") else None
    for label in ("first", "again"):
        run = evaluate_release(
            workdir,
            release,
            backend=setup.backend,
            retriever=retriever,
            embedder=embedder,
            kinds=kinds,
            settings=cfg.evaluate,
        )
        items = len(run.predictions)
        figure(f"{label}_items", items)
        figure(f"{label}_wall_s", run.seconds, "s")
        figure(f"{label}_items_per_s", items / run.seconds if run.seconds else 0.0, "items/s")
        figure(f"{label}_model_calls", run.model_calls)
        figure(f"{label}_cache_hits", run.cache_hits)
        if run.retrieval_ms_per_query is not None:
            figure(f"{label}_retrieval_ms_per_query", run.retrieval_ms_per_query, "ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=REPO / "work")
    parser.add_argument("--release", default="2025-01-01")
    parser.add_argument("--articles", type=int, default=0, help="build N wikisnap articles instead")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--retriever", default="bm25", choices=["none", "bm25", "dense", "temporal"]
    )
    parser.add_argument("--kinds", default="qa,dialogue")
    parser.add_argument("--model", help="URL of an OpenAI-compatible server (default: configured)")
    parser.add_argument("--no-model", action="store_true", help="retrieval figures only")
    args = parser.parse_args()
    cfg = load_config(REPO / "data" / "wikidrift.toml")
    if args.articles:
        import json

        from pipeline.text import SentenceSplitter

        manifest = json.loads((WIKISNAP / "MANIFEST.json").read_text())
        ids = tuple(int(a["page_id"]) for a in manifest["articles"][: args.articles])
        with tempfile.TemporaryDirectory(prefix="bench_evaluate_") as tmp:
            start = time.perf_counter()
            build_wikisnap_snapshots(Path(tmp), WIKISNAP_DATES, ids, SentenceSplitter())
            figure("snapshots_build_s", time.perf_counter() - start, "s")
            bench_retrieval(Path(tmp), WIKISNAP_DATES[-1], cfg, args.queries)
        return
    bench_retrieval(args.workdir, args.release, cfg, args.queries)
    if not args.no_model:
        kinds = [k for k in args.kinds.split(",") if k]
        bench_model(args.workdir, args.release, args.model, args.retriever, kinds)


if __name__ == "__main__":
    main()
