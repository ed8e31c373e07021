"""VectorCache / ResultCache: round trips, isolation, torn rows, two writer processes, speed."""

from __future__ import annotations

import multiprocessing
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pipeline.models.vector_cache import _MAX_CHUNK, ResultCache, VectorCache, text_key


def _vector(key: str, dim: int) -> np.ndarray:
    """A vector that is a pure function of its key, so any process can check it."""
    seed = int(text_key(key)[:8], 16)
    return np.random.default_rng(seed).standard_normal(dim).astype(np.float32)


def _writer(path: str, worker: int, batches: int, per_batch: int, dim: int) -> None:
    cache = VectorCache(Path(path))
    for batch in range(batches):
        # Half the keys are private to this worker, half shared with the other one, so the two
        # processes really contend for the same rows.
        keys = [f"w{worker}-{batch}-{i}" for i in range(per_batch // 2)]
        keys += [f"shared-{batch}-{i}" for i in range(per_batch // 2)]
        cache.put_many("model-a", {key: _vector(key, dim) for key in keys})
        got = cache.get_many("model-a", keys)
        assert set(got) == set(keys)
    cache.close()


def test_round_trip_and_missing_keys(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path / "cache" / "vectors.sqlite")
    items = {f"k{i}": _vector(f"k{i}", 384) for i in range(10)}
    cache.put_many("m", items)
    got = cache.get_many("m", [*items, "absent"])
    assert set(got) == set(items)
    for key, vector in items.items():
        assert got[key].dtype == np.float32
        np.testing.assert_array_equal(got[key], vector)
    assert cache.count("m") == 10
    assert cache.get_many("m", []) == {}


def test_namespaces_are_isolated_and_replace_works(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path / "v.sqlite")
    cache.put_many("model-a", {"same-key": np.ones(4, np.float32)})
    cache.put_many("model-b", {"same-key": np.full(8, 2.0, np.float32)})
    assert cache.get_many("model-a", ["same-key"])["same-key"].tolist() == [1.0] * 4
    assert cache.get_many("model-b", ["same-key"])["same-key"].tolist() == [2.0] * 8
    assert cache.get_many("model-c", ["same-key"]) == {}
    cache.put_many("model-a", {"same-key": np.zeros(4, np.float32)})
    assert cache.get_many("model-a", ["same-key"])["same-key"].tolist() == [0.0] * 4
    assert (cache.count("model-a"), cache.count("model-b"), cache.count("model-c")) == (1, 1, 0)


def test_survives_reopen_and_uses_wal(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    with VectorCache(path) as first:
        first.put_many("m", {"a": np.arange(3, dtype=np.float32)})
    second = VectorCache(path)
    np.testing.assert_array_equal(second.get_many("m", ["a"])["a"], [0, 1, 2])
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_torn_row_is_never_returned(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    cache = VectorCache(path)
    cache.put_many("m", {"good": np.ones(16, np.float32)})
    with sqlite3.connect(path) as conn:
        # 15 floats where the row claims 16: what a torn or foreign write would leave.
        conn.execute(
            "INSERT INTO vectors (namespace, key, dim, vec) VALUES (?, ?, ?, ?)",
            ("m", "torn", 16, np.ones(15, np.float32).tobytes()),
        )
    got = cache.get_many("m", ["good", "torn"])
    assert list(got) == ["good"]
    cache.put_many("m", {"torn": np.ones(16, np.float32)})  # a recompute heals it
    assert cache.get_many("m", ["torn"])["torn"].shape == (16,)


def test_put_many_rejects_bad_vectors(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path / "v.sqlite")
    with pytest.raises(ValueError, match="1-D"):
        cache.put_many("m", {"x": np.ones((2, 2), np.float32)})
    with pytest.raises(ValueError, match="NaN"):
        cache.put_many("m", {"x": np.array([1.0, np.nan], np.float32)})
    # The failed batch left nothing behind.
    assert cache.count("m") == 0


def test_two_processes_write_concurrently(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    VectorCache(path).close()
    batches, per_batch, dim = 40, 20, 64
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=_writer, args=(str(path), w, batches, per_batch, dim)) for w in (0, 1)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
    assert [proc.exitcode for proc in procs] == [0, 0]

    cache = VectorCache(path)
    expected = [f"w{w}-{b}-{i}" for w in (0, 1) for b in range(batches) for i in range(10)]
    expected += [f"shared-{b}-{i}" for b in range(batches) for i in range(10)]
    got = cache.get_many("model-a", expected)
    assert cache.count("model-a") == len(expected) == len(got)
    for key in expected:
        np.testing.assert_array_equal(got[key], _vector(key, dim))
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


_FORK_SCRIPT = """
import multiprocessing, sys
import numpy as np
from pipeline.models.vector_cache import VectorCache

def child(cache):
    cache.put_many("m", {"from-child": np.full(4, 7.0, np.float32)})
    assert set(cache.get_many("m", ["from-parent", "from-child"])) == {"from-parent", "from-child"}

cache = VectorCache(sys.argv[1])
cache.put_many("m", {"from-parent": np.ones(4, np.float32)})
proc = multiprocessing.get_context("fork").Process(target=child, args=(cache,))
proc.start()
proc.join(60)
assert proc.exitcode == 0, proc.exitcode
# The parent's own connection still works after the child wrote through its own one.
assert cache.get_many("m", ["from-child"])["from-child"].tolist() == [7.0] * 4
assert cache.count("m") == 2
"""


@pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="needs the fork start method"
)
def test_cache_object_inherited_through_fork_reopens(tmp_path: Path) -> None:
    # Forked from a fresh interpreter: a test process that already runs servers and thread
    # pools (Prefect, Dask) is no place to fork from, whatever the cache does.
    result = subprocess.run(
        [sys.executable, "-c", _FORK_SCRIPT, str(tmp_path / "v.sqlite")],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]


def test_many_key_lookup_is_batched(tmp_path: Path) -> None:
    """50k keys go to SQLite in a few chunked statements, not one query per key (the speed
    itself, about 0.15 s here, is measured by benchmarks.bench_vector_cache)."""
    cache = VectorCache(tmp_path / "big.sqlite")
    rng = np.random.default_rng(0)
    keys = [text_key(f"sentence number {i}") for i in range(50_000)]
    vectors = rng.standard_normal((len(keys), 64)).astype(np.float32)
    cache.put_many("m", dict(zip(keys, vectors, strict=True)))
    wanted = keys[::2] + [text_key(f"unknown {i}") for i in range(25_000)]
    statements: list[str] = []
    cache._connection().set_trace_callback(statements.append)
    got = cache.get_many("m", wanted)
    assert len(got) == 25_000
    np.testing.assert_array_equal(got[keys[10]], vectors[10])
    np.testing.assert_array_equal(got[keys[49_998]], vectors[49_998])
    selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert 1 <= len(selects) <= 50_000 // _MAX_CHUNK + 1, len(selects)


def test_result_cache_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite"
    cache = ResultCache(path)
    value = {"entailment": 0.125, "neutral": 0.5, "contradiction": 0.375}
    cache.put_many("nli-a", {"p:h": value, "p:h2": {"entailment": 1.0}})
    cache.put_many("nli-b", {"p:h": {"other": True}})
    reopened = ResultCache(path)
    assert reopened.get_many("nli-a", ["p:h", "missing"]) == {"p:h": value}
    assert reopened.get_many("nli-b", ["p:h"]) == {"p:h": {"other": True}}
    assert (reopened.count("nli-a"), reopened.count("nli-b")) == (2, 1)
    with pytest.raises(ValueError):
        cache.put_many("nli-a", {"bad": float("nan")})


def test_vector_and_result_cache_share_a_file(tmp_path: Path) -> None:
    path = tmp_path / "models.sqlite"
    vectors, results = VectorCache(path), ResultCache(path)
    vectors.put_many("m", {"k": np.ones(2, np.float32)})
    results.put_many("m", {"k": [1, 2]})
    assert vectors.count("m") == results.count("m") == 1


def test_text_key_normalizes_whitespace_and_unicode() -> None:
    composed, decomposed = "Caf\u00e9 opened.", "Cafe\u0301 opened."
    assert text_key(composed) == text_key(decomposed)
    assert text_key("A  b\n c ") == text_key("A b c")
    assert text_key("A b c") != text_key("A b d")
    assert len(text_key("x")) == 32
