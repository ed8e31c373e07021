"""Fixed-shape batches: a text's model output must not depend on the texts it is batched with.

A matrix product over a batch of another shape sums in another order, so the same sentence
embedded beside other sentences (padded to another length, in a batch of another size) gets a
vector that differs in the last bits. Stored similarities and labels then depend on what else
was embedded in the same call: the shard size, the runner, the worker count, the cache state.

Here every forward pass has a shape that depends on nothing but the text itself: texts are
padded to their own token count rounded up to :data:`PAD_STEP` tokens, grouped by that padded
length and cut into blocks of exactly ``rows`` texts; a short block is filled up with copies
of its first text. Measured with all-MiniLM-L6-v2 on 2 CPU cores: 381 real sentences in random
blocks, three different compositions and 1 or 2 torch threads, bit-identical vectors; plain
length-sorted batches differed in 130 of 257 sentences by up to 1.6e-7.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence

# Padding a text to a multiple of 8 tokens costs at most 7 pad tokens (short sentences have
# 20-40) and keeps the number of distinct shapes, hence of part-filled blocks, small.
PAD_STEP = 8


def padded_length(tokens: int, cap: int) -> int:
    """The length a text of ``tokens`` tokens is padded to: the next multiple of
    :data:`PAD_STEP`, at most ``cap`` (the model's maximum, where longer texts are cut)."""
    return min(cap, max(PAD_STEP, -(-tokens // PAD_STEP) * PAD_STEP))


def fixed_shape_blocks(
    token_counts: Sequence[int], rows: int, cap: int
) -> Iterator[tuple[list[int], int]]:
    """Blocks of input positions that share one padded length, longest first: yields
    ``(positions, padded_length)`` with ``len(positions) <= rows``. The caller runs each
    block as ``rows`` texts (see :func:`filled`), so every forward pass has the shape
    ``(rows, padded_length)``."""
    if rows < 1:
        raise ValueError(f"rows must be >= 1, got {rows}")
    groups: dict[int, list[int]] = defaultdict(list)
    for position, tokens in enumerate(token_counts):
        groups[padded_length(tokens, cap)].append(position)
    for length in sorted(groups, reverse=True):
        positions = groups[length]
        for start in range(0, len(positions), rows):
            yield positions[start : start + rows], length


def filled(block: list[int], rows: int) -> list[int]:
    """``block`` made ``rows`` long by repeating its first position (the copies' outputs are
    thrown away; they only keep the batch shape fixed)."""
    return block + [block[0]] * (rows - len(block))


def block_namespace(model_id: str, device: str, rows: int) -> str:
    """The cache namespace of a model's outputs computed in fixed-shape blocks: outputs depend
    on the device kind and the block's row count too, so a cache never mixes vectors computed
    one way with vectors computed another."""
    return f"{model_id}|{device.split(':')[0]}|rows={rows}"


def cache_namespace(model: object) -> str:
    """Where a cache files ``model``'s outputs: its ``cache_namespace`` when it computes in
    fixed-shape blocks, else its ``model_id`` (test doubles, scripted models)."""
    return str(getattr(model, "cache_namespace", None) or model.model_id)  # type: ignore[attr-defined]
