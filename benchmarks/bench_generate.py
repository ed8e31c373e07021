"""Generation benchmark with the offline model (SmolLM2-135M-Instruct through transformers, on
the CPU): items/s and LLM calls per kept item on a few wikisnap articles (initial generation:
selected paragraphs -> QA, dialogue, quadruples). Prints one figure per line.

    .venv/bin/python -m benchmarks.bench_generate [--articles 2]
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipeline.config import load_config  # noqa: E402
from pipeline.generate.stage import generate_items  # noqa: E402
from pipeline.runtime import base_embedder, cached_embedder, llm_from_config  # noqa: E402
from pipeline.text import SentenceSplitter  # noqa: E402
from tests.conftest import build_wikisnap_snapshots  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--wikisnap", type=Path, default=REPO.parent / "shared" / "wikisnap")
    parser.add_argument("--articles", type=int, default=2)
    parser.add_argument("--date", default="2024-06-01")
    args = parser.parse_args()

    manifest = json.loads((args.wikisnap / "MANIFEST.json").read_text())
    page_ids = tuple(int(a["page_id"]) for a in manifest["articles"][: args.articles])
    workdir = Path(tempfile.mkdtemp(prefix="bench_generate_"))
    build_wikisnap_snapshots(workdir, [args.date], page_ids, SentenceSplitter())
    cfg = load_config(profile="offline", overrides={"workdir": str(workdir)})
    llm = llm_from_config(cfg, workdir)
    embedder = cached_embedder(base_embedder(cfg), workdir)
    t0 = time.perf_counter()
    llm.backend.backend.load()  # the transformers backend behind the call cache
    load_s = time.perf_counter() - t0
    generate = functools.partial(
        generate_items,
        workdir,
        args.date,
        previous=None,
        backend=llm.backend,
        embedder=embedder,
        cfg=cfg.generation,
    )
    t1 = time.perf_counter()
    summary = generate()
    elapsed = time.perf_counter() - t1
    kept = summary.kept
    calls = summary.llm["requests"]
    print(f"model={cfg.llm.local_model} loaded_from={llm.backend.backend.loaded_from}")
    print(f"model_load_seconds={load_s:.1f}")
    print(f"articles={len(page_ids)}")
    print(f"llm_requests={calls}")
    print(f"completion_tokens={summary.llm['completion_tokens']}")
    print(
        f"kept_items={kept} (qa={summary.counts['qa']['total']} "
        f"dialogue_turns={summary.counts['dialogue']['total']} "
        f"quadruples={summary.counts['quadruples']['total']})"
    )
    print(f"rejected={sum(summary.rejects.values())}")
    print(f"rejects_by_reason={json.dumps(summary.rejects, sort_keys=True)}")
    print(f"generation_seconds={elapsed:.1f}")
    print(f"items_per_s={kept / elapsed:.3f}")
    print(f"seconds_per_llm_call={elapsed / max(1, calls):.2f}")
    print(f"calls_per_kept_item={calls / kept:.2f}" if kept else "calls_per_kept_item=inf")
    t2 = time.perf_counter()
    again = generate()  # same inputs: skipped
    print(f"rerun_seconds={time.perf_counter() - t2:.2f} skipped={again.skipped}")


if __name__ == "__main__":
    main()
