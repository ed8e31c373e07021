"""The embedding cache at the size of a month's labeling: store N vectors, then look up N keys
of which half are cached and half are not (what a label pair asks of it). Target: a 50k-key
lookup under 1 s. Prints the best of three lookups and the SQL statements one lookup runs.

    .venv/bin/python -m benchmarks.bench_vector_cache [--keys 50000] [--dim 384]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

LOOKUP_TARGET_S = 1.0


def main(argv: list[str] | None = None) -> None:
    """Build a cache in a temporary directory and print store and lookup figures."""
    from pipeline.models.vector_cache import VectorCache, text_key

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=50_000)
    parser.add_argument("--dim", type=int, default=384, help="384 = MiniLM's vector size")
    args = parser.parse_args(argv)

    keys = [text_key(f"sentence number {i}") for i in range(args.keys)]
    vectors = np.random.default_rng(0).standard_normal((args.keys, args.dim)).astype(np.float32)
    cached = keys[::2]
    wanted = cached + [text_key(f"unknown {i}") for i in range(args.keys - len(cached))]
    with tempfile.TemporaryDirectory() as tmp:
        cache = VectorCache(Path(tmp) / "vectors.sqlite")
        began = time.perf_counter()
        cache.put_many("bench", dict(zip(keys, vectors, strict=True)))
        put_s = time.perf_counter() - began
        lookups = []
        for _ in range(3):
            began = time.perf_counter()
            found = cache.get_many("bench", wanted)
            lookups.append(time.perf_counter() - began)
        statements: list[str] = []
        cache._connection().set_trace_callback(statements.append)
        cache.get_many("bench", wanted)
        cache.close()
    selects = sum(s.lstrip().upper().startswith("SELECT") for s in statements)
    best = min(lookups)
    print(f"keys: {args.keys} stored, dim {args.dim}")
    print(f"looked_up: {len(wanted)} ({len(cached)} cached)")
    print(f"put_many_s: {put_s:.3f}")
    print(f"get_many_s: best {best:.3f}, all {', '.join(f'{s:.3f}' for s in lookups)}")
    print(f"found: {len(found)}")
    print(f"select_statements: {selects}")
    verdict = "met" if best < LOOKUP_TARGET_S else "MISSED"
    print(f"lookup target < {LOOKUP_TARGET_S:.1f} s: {verdict}")


if __name__ == "__main__":
    main()
