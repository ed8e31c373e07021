"""The dataset card's timeline figure: the dated facts of a few entities on one time axis."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pyarrow as pa

from pipeline.temporal.questions import Fact, facts_from_rows

ENTITIES = 4
LABEL_CHARS = 28


def _year_fraction(value: str) -> float:
    parts = [int(p) for p in value.split("-")]
    year = parts[0]
    month = parts[1] if len(parts) > 1 else 1
    day = parts[2] if len(parts) > 2 else 1
    return year + (month - 1) / 12 + (day - 1) / 365


def timeline_entities(quadruples: pa.Table, n: int = ENTITIES) -> dict[str, list[Fact]]:
    """The ``n`` subjects with the most dated facts (ties by name), each with its dated
    facts in time order."""
    by_subject: dict[str, list[Fact]] = defaultdict(list)
    for fact in facts_from_rows(quadruples.to_pylist()):
        if fact.dated:
            by_subject[fact.subject].append(fact)
    chosen = sorted(by_subject, key=lambda s: (-len(by_subject[s]), s))[:n]
    return {s: sorted(by_subject[s], key=lambda f: (f.time, f.item_id)) for s in chosen}


def write_timeline_plot(path: Path, quadruples: pa.Table) -> bool:
    """Write the figure to ``path``; False (and no file) when no fact is dated."""
    entities = timeline_entities(quadruples)
    if not entities:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(10, 1.2 + 1.1 * len(entities)))
    for row, facts in enumerate(entities.values()):
        y = len(entities) - row
        for k, fact in enumerate(facts):
            x = _year_fraction(fact.time)
            superseded = fact.status == "superseded"
            if superseded and fact.fact_valid_until:
                ax.plot([x, _year_fraction(fact.fact_valid_until)], [y, y], color="0.6", lw=2)
            ax.plot(x, y, "o", color="tab:gray" if superseded else "tab:blue")
            label = f"{fact.relation} {fact.object}"
            if len(label) > LABEL_CHARS:
                label = label[: LABEL_CHARS - 1] + "…"
            ax.annotate(
                label,
                (x, y),
                xytext=(0, 8 if k % 2 == 0 else -14),
                textcoords="offset points",
                fontsize=7,
                ha="center",
            )
    ax.set_yticks(range(len(entities), 0, -1), [s[:30] for s in entities], fontsize=8)
    ax.set_ylim(0.4, len(entities) + 0.7)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("valid time (year)")
    ax.set_title("Dated facts per entity (grey: superseded)")
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return True
