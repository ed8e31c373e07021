"""One month of the pipeline on wikisnap, stage by stage: wall time and peak RSS per stage for
36 articles and for 12 (work is streamed per shard, so peak memory should not grow with the
number of articles), then the same month re-run with nothing changed, which must make 0 model
and 0 LLM calls. Offline profile (MiniLM, spaCy); the LLM is the local llama.cpp model with
``--llm local`` or, by default, a local OpenAI-compatible server answering with the scripted
test LLM (the pipeline's own cost is measured, not a model's speed).

Each stage runs in its own process so its peak RSS is its own.

    .venv/bin/python -m benchmarks.bench_month [--articles 36,12] [--llm scripted|local]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

OLD, NEW = "2024-01-01", "2024-06-01"
STAGES = ("snapshot_old", "snapshot", "label", "generate", "release")


def _config(workdir: Path, articles_file: Path, llm_url: str | None, shard: int) -> dict:
    from pipeline.config import load_config

    overrides: dict = {
        "workdir": str(workdir),
        "snapshot": {
            "source": "revisions-dir",
            "input": str(REPO / "tests" / "data" / "wikisnap"),
            "articles": str(articles_file),
            "shard_size": shard,
        },
    }
    if llm_url:
        overrides["llm"] = {"backend": "openai", "base_url": llm_url}
    return load_config(profile="offline", overrides=overrides).model_dump(mode="json")


def run_stage(stage: str, config: dict) -> dict:
    """Run one stage in this process; return what it did (counts of real model work)."""
    from datetime import date

    from pipeline.config import Config
    from pipeline.generate.stage import generate_items
    from pipeline.labeling.stage import label_snapshots, make_labeler
    from pipeline.ledger import update_ledger
    from pipeline.release import build_release, manifest_config
    from pipeline.runtime import base_embedder, cached_embedder, llm_from_config
    from pipeline.snapshot import build_snapshot
    from pipeline.sources.factory import make_source, resolve_selection
    from pipeline.text import SentenceSplitter

    cfg = Config.model_validate(config)
    workdir = Path(cfg.workdir)
    if stage in ("snapshot_old", "snapshot"):
        when = OLD if stage == "snapshot_old" else NEW
        source, description = make_source(cfg, workdir, snapshot_date=date.fromisoformat(when))
        s = build_snapshot(
            source,
            resolve_selection(cfg),
            date.fromisoformat(when),
            workdir,
            splitter=SentenceSplitter(),
            source_description=description,
            shard_size=cfg.snapshot.shard_size,
        )
        return {"articles": s.articles, "parsed": 0 if s.already_done else s.parsed_articles}
    if stage == "label":
        embedder = base_embedder(cfg)
        s = label_snapshots(
            workdir,
            OLD,
            NEW,
            make_labeler(cfg, workdir, embedder=embedder),
            shard_pages=cfg.snapshot.shard_size,
        )
        return {
            "texts_embedded": embedder.texts_embedded,
            "nli_pairs": 0,
            "already": s.already_done,
        }
    if stage == "generate":
        llm = llm_from_config(cfg, workdir)
        base = base_embedder(cfg)
        for snap, prev in ((OLD, None), (NEW, OLD)):
            s = generate_items(
                workdir,
                snap,
                previous=prev,
                backend=llm.backend,
                embedder=cached_embedder(base, workdir),
                cfg=cfg.generation,
                shard_pages=cfg.snapshot.shard_size,
            )
        return {
            "llm_calls": llm.backend.calls_made,
            "texts_embedded": base.texts_embedded,
            "kept": s.kept,
        }
    if stage == "release":
        for snap, prev in ((OLD, None), (NEW, OLD)):
            update_ledger(workdir, snap, prev)
            m = build_release(
                workdir, snap, config=manifest_config(cfg), config_hash=cfg.stable_hash()
            )
        return {"qa": m.counts["qa"]["total"], "already": m.already_done}
    raise ValueError(stage)


def _measure(stage: str, config_file: Path) -> dict:
    """Run a stage in a child process, sampling its RSS; return wall time, peak RSS, result."""
    import psutil

    out = config_file.with_suffix(f".{stage}.json")
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.bench_month",
        "--child",
        stage,
        str(config_file),
        str(out),
    ]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, env=os.environ | {"HF_HUB_OFFLINE": "1"})
    ps = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        try:
            peak = max(peak, ps.memory_info().rss)
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    if proc.returncode != 0:
        raise SystemExit(f"stage {stage} failed with exit code {proc.returncode}")
    return {
        "seconds": time.perf_counter() - started,
        "peak_rss_mb": peak / 2**20,
        "result": json.loads(out.read_text()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--articles", default="36,12")
    parser.add_argument("--llm", choices=["scripted", "local"], default="scripted")
    parser.add_argument("--shard-size", type=int, default=6)
    parser.add_argument(
        "--child", nargs=3, metavar=("STAGE", "CONFIG", "OUT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.child:
        stage, config_file, out = args.child
        result = run_stage(stage, json.loads(Path(config_file).read_text()))
        Path(out).write_text(json.dumps(result))
        return

    os.environ.setdefault("OPENAI_API_KEY", "sk-local-benchmark")
    manifest = json.loads((REPO / "tests" / "data" / "wikisnap" / "MANIFEST.json").read_text())
    titles = [a["title"] for a in manifest["articles"]]
    server = None
    url = None
    if args.llm == "scripted":
        from tests.scripted_llm import openai_responder
        from tests.servers.openai_server import OpenAIServer

        server = OpenAIServer(openai_responder).start()
        url = server.url
    try:
        for n in (int(x) for x in args.articles.split(",")):
            base = Path(tempfile.mkdtemp(prefix=f"bench_month_{n}_"))
            articles = base / "articles.txt"
            articles.write_text("\n".join(titles[:: max(1, len(titles) // n)][:n]) + "\n")
            config_file = base / "config.json"
            config_file.write_text(
                json.dumps(_config(base / "work", articles, url, args.shard_size))
            )
            for label in ("first", "rerun"):
                before = len(server.answered_bodies()) if server else 0
                for stage in STAGES:
                    m = _measure(stage, config_file)
                    print(
                        f"articles={n} run={label} stage={stage} seconds={m['seconds']:.1f} "
                        f"peak_rss_mb={m['peak_rss_mb']:.0f} {json.dumps(m['result'])}"
                    )
                if server:
                    print(
                        f"articles={n} run={label} llm_requests_at_server="
                        f"{len(server.answered_bodies()) - before}"
                    )
    finally:
        if server:
            server.stop()


if __name__ == "__main__":
    main()
