"""Local LLM throughput by server setting: the same real generation requests (QA, dialogue,
quadruples for wikisnap paragraphs, built with the real prompts and schemas) answered by the
llama.cpp server with several parallel-slot / CPU-thread settings, no call cache. Prints, per
setting, wall seconds, generated tokens/s over all slots, prefill tokens/s and prompt tokens
served from the prefix cache. Decides ``llm.local_parallel`` / ``llm.local_threads``.

    .venv/bin/python -m benchmarks.bench_llm_slots [--requests 12] [--settings 1x2,2x2,4x2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.bench_items import bench_page_ids, server_metrics  # noqa: E402
from pipeline.config import load_config  # noqa: E402
from pipeline.generate.stage import plan_requests  # noqa: E402
from pipeline.models.embedder import load_embedder  # noqa: E402
from pipeline.models.llm.llamacpp import LlamaCppBackend  # noqa: E402
from pipeline.models.llm.llamacpp_server import LlamaServer, ServerSettings  # noqa: E402
from pipeline.models.llm.packaged import resolve_gguf  # noqa: E402
from pipeline.text import SentenceSplitter  # noqa: E402
from tests.conftest import build_wikisnap_snapshots  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=12, help="requests per setting")
    parser.add_argument("--settings", default="1x2,2x2,4x2,2x1", help="SLOTSxTHREADS,...")
    parser.add_argument("--model", default="packaged:Qwen2.5-Coder-1.5B-Instruct-Q4_K_M")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="bench_llm_slots_"))
    date = "2024-06-01"
    build_wikisnap_snapshots(workdir, [date], bench_page_ids(4), SentenceSplitter())
    cfg = load_config(profile="offline", overrides={"workdir": str(workdir)})
    planned = plan_requests(
        workdir,
        date,
        previous=None,
        embedder=load_embedder(cfg.models.embedder),
        cfg=cfg.generation,
    )
    # Interleave the kinds as the stage sends them: every kind in each measured set.
    by_kind: dict[str, list] = {}
    for r in planned:
        by_kind.setdefault(r.purpose, []).append(r)
    requests = [r for row in zip(*by_kind.values(), strict=False) for r in row][: args.requests]
    path, name = resolve_gguf(args.model)
    print(f"model={name} requests={len(requests)} kinds={sorted(by_kind)}")
    for setting in args.settings.split(","):
        slots, threads = (int(x) for x in setting.split("x"))
        server = LlamaServer(
            ServerSettings(
                str(path), name, parallel=slots, threads=threads, log_path=str(workdir / "s.log")
            )
        )
        server.start()
        try:
            backend = LlamaCppBackend(name, server.base_url, server=server, max_concurrency=slots)
            started = time.perf_counter()
            responses = backend.complete_many(requests)
            wall = time.perf_counter() - started
            m = server_metrics(server.base_url)
        finally:
            server.stop()
        generated = sum(r.completion_tokens for r in responses)
        prefill = m["prompt_tokens_total"] / max(m["prompt_seconds_total"], 1e-9)
        print(
            f"slots={slots} threads={threads} wall_s={wall:.1f} "
            f"generated_tokens={generated} gen_tokens_per_s={generated / wall:.2f} "
            f"prefill_tokens_per_s={prefill:.1f} "
            f"prompt_tokens={m['prompt_tokens_total']:.0f} "
            f"cached_prompt_tokens={m['prompt_tokens_cached_total']:.0f} "
            f"errors={sum(r.error is not None for r in responses)}"
        )


if __name__ == "__main__":
    main()
