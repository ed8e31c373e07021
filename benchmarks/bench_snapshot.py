"""Snapshot benchmark: wikitext -> sentences throughput on wikisnap, and what the dump source
fetches compared with the whole dump file. Prints one figure per line.

    .venv/bin/python -m benchmarks.bench_snapshot [--wikisnap tests/data/wikisnap]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipeline.sources import ArticleSelection  # noqa: E402
from pipeline.sources.dumps import DumpSource  # noqa: E402
from pipeline.text import SentenceSplitter, template_artifacts, wikitext_to_paragraphs  # noqa: E402
from tests.servers.dump_server import DumpServer, build_multistream_dump  # noqa: E402


def _revisions(wikisnap: Path) -> list[dict]:
    manifest = json.loads((wikisnap / "MANIFEST.json").read_text())
    return [
        json.loads((wikisnap / art["snapshots"][d]["path"]).read_text())
        for art in manifest["articles"]
        for d in manifest["dates"]
    ]


def bench_text(revisions: list[dict]) -> None:
    """Parse and split every revision; report rates and template artifacts."""
    splitter = SentenceSplitter()
    splitter.split(["Warm up the model."]).__next__()
    t0 = time.perf_counter()
    paragraphs = [wikitext_to_paragraphs(r["content"]) for r in revisions]
    t_parse = time.perf_counter() - t0
    texts = [p.text for paras in paragraphs for p in paras]
    t1 = time.perf_counter()
    sentences = [s for sents in splitter.split(texts) for s in sents]
    t_split = time.perf_counter() - t1
    total = t_parse + t_split
    mb = sum(len(r["content"].encode()) for r in revisions) / 1e6
    print(f"revisions={len(revisions)}")
    print(f"wikitext_mb={mb:.1f}")
    print(f"paragraphs={len(texts)}")
    print(f"sentences={len(sentences)}")
    print(f"parse_articles_per_s={len(revisions) / t_parse:.1f}")
    print(f"split_sentences_per_s={len(sentences) / t_split:.0f}")
    print(f"articles_per_s={len(revisions) / total:.2f}")
    print(f"sentences_per_s={len(sentences) / total:.0f}")
    flagged = [s for s in sentences if template_artifacts(s)]
    empty_parens = sum(1 for s in sentences if any("bracket" in a for a in template_artifacts(s)))
    dangling = sum(1 for s in sentences if any("dangling" in a for a in template_artifacts(s)))
    print(f"sentences_with_empty_parentheses={empty_parens}")
    print(f"sentences_with_dangling_preposition={dangling}")
    print(f"sentences_with_template_artifacts={len(flagged)}")
    for s in flagged[:5]:
        print(f"  artifact: {template_artifacts(s)} in {s[:120]!r}")


def bench_dump(wikisnap: Path, pages_per_stream: int, selected: int) -> None:
    """Build a multistream dump of the 2024-06-01 revisions, serve it over HTTP on 127.0.0.1,
    and fetch a few articles with Range requests."""
    manifest = json.loads((wikisnap / "MANIFEST.json").read_text())
    revs = [
        json.loads((wikisnap / a["snapshots"]["2024-06-01"]["path"]).read_text())
        for a in manifest["articles"]
    ]
    with tempfile.TemporaryDirectory() as tmp:
        built = build_multistream_dump(revs, Path(tmp) / "srv", pages_per_stream=pages_per_stream)
        with DumpServer(built.root) as server:
            source = DumpSource.remote(
                f"{server.base_url}/enwiki/20240601/",
                cache_dir=Path(tmp) / "cache",
                user_agent="wikidrift-bench/0.1 (bench@example.org)",
            )
            ids = tuple(
                int(r["page_id"]) for r in revs[:: max(1, len(revs) // selected)][:selected]
            )
            t0 = time.perf_counter()
            got = list(source.iter_revisions(ArticleSelection(page_ids=ids), date(2024, 6, 1)))
            elapsed = time.perf_counter() - t0
            stats = source.client.stats
            print(f"dump_file_bytes={built.size}")
            print(f"dump_pages={len(revs)} pages_per_stream={pages_per_stream}")
            print(f"dump_articles_selected={len(ids)} fetched={len(got)}")
            print(f"dump_range_requests={stats.range_requests}")
            print(f"dump_bytes_fetched_streams={stats.range_bytes}")
            print(f"dump_bytes_fetched_total={stats.bytes_fetched}")
            print(f"dump_fetched_share_of_file={stats.range_bytes / built.size:.3f}")
            print(f"dump_seconds={elapsed:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--wikisnap", type=Path, default=REPO / "tests" / "data" / "wikisnap")
    parser.add_argument("--pages-per-stream", type=int, default=4)
    parser.add_argument("--select", type=int, default=3)
    args = parser.parse_args()
    bench_text(_revisions(args.wikisnap))
    bench_dump(args.wikisnap, args.pages_per_stream, args.select)


if __name__ == "__main__":
    main()
