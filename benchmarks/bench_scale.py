"""Scale benchmark: seconds per article and peak memory of `snapshot` and `label` on every
wikisnap date, first month (cold caches) and following months (warm), and what that projects
to for GrowOVER's 12K articles a month. Prints one figure per line.

Each label pair also prints the tokens it sent to the embedding model and what those alone
cost (`embedding_floor`): at the model's measured throughput on real sentences, and at this
machine's measured fp32 matrix-product peak (no kernel beats that without embedding fewer
texts or embedding them less precisely).

    .venv/bin/python -m benchmarks.bench_scale [--wikisnap tests/data/wikisnap] [--faithful]

Run it on an idle machine: under load every figure grows.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.embedding_floor import EmbeddingFloor, TokenCountingEmbedder  # noqa: E402
from pipeline.config import load_config  # noqa: E402
from pipeline.labeling.stage import label_snapshots, make_labeler  # noqa: E402
from pipeline.layout import read_snapshot_table  # noqa: E402
from pipeline.models.embedder import load_embedder  # noqa: E402
from pipeline.snapshot import build_snapshot  # noqa: E402
from pipeline.sources import ArticleSelection  # noqa: E402
from pipeline.sources.local import RevisionsDirSource  # noqa: E402
from pipeline.text import SentenceSplitter  # noqa: E402

PAPER_ARTICLES = 12_000
THROUGHPUT_SAMPLE = 1_000  # real sentences the model's tokens/s is measured on


def _peak_rss_mb() -> float:
    # ru_maxrss is in KiB on Linux: the high-water mark of this process so far.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--wikisnap", type=Path, default=REPO / "tests" / "data" / "wikisnap")
    parser.add_argument("--faithful", action="store_true", help="label in faithful mode")
    args = parser.parse_args()
    manifest = json.loads((args.wikisnap / "MANIFEST.json").read_text())
    dates: list[str] = manifest["dates"]
    ids = tuple(sorted(int(a["page_id"]) for a in manifest["articles"]))
    n = len(ids)
    source = RevisionsDirSource(args.wikisnap)
    splitter = SentenceSplitter()
    cfg = load_config(profile="offline", overrides={"align": {"faithful": args.faithful}})
    print(f"articles={n} dates={len(dates)} faithful={args.faithful}")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        snap_s: list[float] = []
        for d in dates:
            t0 = time.perf_counter()
            build_snapshot(
                source,
                ArticleSelection(page_ids=ids),
                date.fromisoformat(d),
                workdir,
                splitter=splitter,
                source_description=f"revisions-dir:{args.wikisnap}",
            )
            snap_s.append(time.perf_counter() - t0)
            print(
                f"snapshot {d}: s_per_article={snap_s[-1] / n:.3f} peak_rss_mb={_peak_rss_mb():.0f}"
            )
        model = load_embedder(
            cfg.models.embedder, device=cfg.models.device, batch_size=cfg.models.embed_batch_size
        )
        sample = read_snapshot_table(workdir, dates[-1], "sentences").column("text").to_pylist()
        floor = EmbeddingFloor(model, sample[:: max(1, len(sample) // THROUGHPUT_SAMPLE)])
        print(f"embedding_floor: {floor.describe()}")
        counting = TokenCountingEmbedder(model)
        labeler = make_labeler(cfg, workdir, embedder=counting)
        label_s: list[float] = []
        floors: list[tuple[float, float]] = []
        for old, new in zip(dates, dates[1:], strict=False):
            mark = counting.mark()
            t0 = time.perf_counter()
            summary = label_snapshots(workdir, old, new, labeler)
            label_s.append(time.perf_counter() - t0)
            tokens = counting.tokens_since(mark)
            floors.append((floor.at_model_speed(tokens) / n, floor.at_matmul_peak(tokens) / n))
            print(
                f"label {old}->{new}: s_per_article={label_s[-1] / n:.3f} "
                f"peak_rss_mb={_peak_rss_mb():.0f} tokens_embedded={tokens} "
                f"embedding_floor_s_per_article={floors[-1][0]:.3f} "
                f"(at matmul peak {floors[-1][1]:.3f}) {summary.line()}"
            )
    first_snap, later_snap = snap_s[0] / n, sum(snap_s[1:]) / max(1, len(snap_s) - 1) / n
    first_label = label_s[0] / n
    later_label = sum(label_s[1:]) / max(1, len(label_s) - 1) / n
    print(f"snapshot_first_month_s_per_article={first_snap:.3f}")
    print(f"snapshot_following_month_s_per_article={later_snap:.3f}")
    print(f"label_first_pair_s_per_article={first_label:.3f}")
    print(f"label_following_pair_s_per_article={later_label:.3f}")
    following = floors[1:] or floors
    print(
        "label_following_pair_embedding_floor_s_per_article="
        f"{sum(f[0] for f in following) / len(following):.3f}"
    )
    print(
        "label_following_pair_matmul_peak_floor_s_per_article="
        f"{sum(f[1] for f in following) / len(following):.3f}"
    )
    print(f"peak_rss_mb={_peak_rss_mb():.0f}")
    month = (later_snap + later_label) * PAPER_ARTICLES
    print(f"projection_{PAPER_ARTICLES}_articles_following_month_hours={month / 3600:.2f}")
    first = (first_snap + first_label) * PAPER_ARTICLES
    print(f"projection_{PAPER_ARTICLES}_articles_first_month_hours={first / 3600:.2f}")


if __name__ == "__main__":
    main()
