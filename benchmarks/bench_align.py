"""Labeling benchmark on all 36 wikisnap articles (offline models, CPU).

Prints, for one pair of dates, the fast path against the reference-style ``--naive`` mode:
``new_sentences_per_s`` of each, their ratio, embeddings computed per new sentence, and the
share of identical labels, and the tokens each mode sent to the model (both modes are
compute-bound on the same model, so their token ratio bounds the speed ratio). Then, for
every consecutive pair of the five dates, how many similarity matches the fact guard refused
(issue 8), with the refused pairs written to ``<workdir>/fact_guard_flips.jsonl`` for review.

    .venv/bin/python -m benchmarks.bench_align [--old 2024-01-01 --new 2024-06-01]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.embedding_floor import TokenCountingEmbedder  # noqa: E402
from pipeline.config import load_config  # noqa: E402
from pipeline.labeling.stage import label_snapshots, make_labeler  # noqa: E402
from pipeline.layout import read_labels, read_snapshot_table  # noqa: E402
from pipeline.models.embedder import load_embedder  # noqa: E402
from pipeline.text import SentenceSplitter  # noqa: E402
from tests.conftest import WIKISNAP_DATES, build_wikisnap_snapshots  # noqa: E402


def _all_page_ids(wikisnap: Path) -> tuple[int, ...]:
    manifest = json.loads((wikisnap / "MANIFEST.json").read_text())
    return tuple(int(a["page_id"]) for a in manifest["articles"])


def _fresh_copy(src: Path, dst: Path) -> Path:
    """The snapshots only: no labels and no embedding cache (a cold start)."""
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src / "snapshots", dst / "snapshots")
    return dst


def _run(workdir: Path, old: str, new: str, embedder, *, naive: bool) -> tuple[float, dict]:
    cfg = load_config(profile="offline")
    labeler = make_labeler(cfg, workdir, embedder=embedder, naive=naive)
    labeler.facts.extract_many(["Warm up the NER model in Paris."])  # keep load time out
    before, mark = embedder.texts_embedded, embedder.mark()
    t0 = time.perf_counter()
    summary = label_snapshots(workdir, old, new, labeler)
    elapsed = time.perf_counter() - t0
    return elapsed, {
        "summary": summary,
        "embedded": embedder.texts_embedded - before,
        "tokens": embedder.tokens_since(mark),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--wikisnap", type=Path, default=REPO / "tests" / "data" / "wikisnap")
    parser.add_argument("--old", default="2024-01-01")
    parser.add_argument("--new", default="2024-06-01")
    parser.add_argument("--workdir", type=Path, help="keep snapshots here between runs")
    args = parser.parse_args()

    base = args.workdir or Path(tempfile.mkdtemp(prefix="bench_align_"))
    snaps = base / "snapshots_only"
    build_wikisnap_snapshots(
        snaps, WIKISNAP_DATES, _all_page_ids(args.wikisnap), SentenceSplitter()
    )
    embedder = TokenCountingEmbedder(load_embedder("packaged:all-MiniLM-L6-v2"))
    embedder.embed(["warm up"])

    n_new = read_snapshot_table(snaps, args.new, "sentences").num_rows
    fast_dir = _fresh_copy(snaps, base / "fast")
    t_fast, fast = _run(fast_dir, args.old, args.new, embedder, naive=False)
    naive_dir = _fresh_copy(snaps, base / "naive")
    t_naive, naive = _run(naive_dir, args.old, args.new, embedder, naive=True)
    t_warm, warm = _run(fast_dir, args.old, args.new, embedder, naive=False)  # skipped: done
    fast_rows = read_labels(fast_dir, args.old, args.new).to_pylist()
    naive_rows = read_labels(naive_dir, args.old, args.new).to_pylist()
    naive_by_key = {(r["page_id"], r["new_idx"]): r["label"] for r in naive_rows}
    keyed = [r for r in fast_rows if r["new_idx"] is not None]
    same = sum(1 for r in keyed if naive_by_key[(r["page_id"], r["new_idx"])] == r["label"])
    exact = [r for r in keyed if r["rule"] == "exact"]
    exact_same = sum(1 for r in exact if naive_by_key[(r["page_id"], r["new_idx"])] == r["label"])

    print(f"pair={args.old}->{args.new} articles={len(_all_page_ids(args.wikisnap))}")
    print(f"new_sentences={n_new}")
    print(f"fast_seconds={t_fast:.2f}")
    print(f"naive_seconds={t_naive:.2f}")
    print(f"fast_new_sentences_per_s={n_new / t_fast:.1f}")
    print(f"naive_new_sentences_per_s={n_new / t_naive:.1f}")
    print(f"speedup_ratio={t_naive / t_fast:.1f}")
    print(f"fast_embeddings_per_new_sentence={fast['embedded'] / n_new:.3f}")
    print(f"naive_embeddings_per_new_sentence={naive['embedded'] / n_new:.3f}")
    print(f"fast_tokens_embedded={fast['tokens']}")
    print(f"naive_tokens_embedded={naive['tokens']}")
    print(f"token_ratio={naive['tokens'] / max(1, fast['tokens']):.1f}")
    print(f"identical_label_share={same / len(keyed):.4f}")
    print(f"identical_labels_on_exact_matches={exact_same}/{len(exact)}")
    print(f"rerun_same_inputs_seconds={t_warm:.2f} embedded={warm['embedded']}")
    print(f"fast_counts={json.dumps(fast['summary'].counts, sort_keys=True)}")
    print(f"naive_counts={json.dumps(naive['summary'].counts, sort_keys=True)}")

    flips_file = base / "fact_guard_flips.jsonl"
    with flips_file.open("w") as out:
        for old, new in zip(WIKISNAP_DATES, WIKISNAP_DATES[1:], strict=False):
            _, run = _run(fast_dir, old, new, embedder, naive=False)
            summary = run["summary"]
            print(f"fact_guard_flips {old}->{new}={summary.fact_guard_flips}")
            flips = json.loads(
                (fast_dir / "labels" / f"{old}__{new}" / "fact_guard_flips.json").read_text()
            )
            for f in flips:
                out.write(json.dumps({"pair": f"{old}->{new}", **f}, ensure_ascii=False) + "\n")
    print(f"fact_guard_flips_file={flips_file}")


if __name__ == "__main__":
    main()
