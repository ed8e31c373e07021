"""Candidate sentence pairs for the `changed` gold set, from every wikisnap pair of dates.

For every new sentence whose text is not in the old revision of its article, the most similar
old sentence of that revision (MiniLM cosine) is its candidate counterpart. A pair is kept when
that cosine is in [0.6, 0.985) (the similarity band where GrowOVER's rules look for changes) or
when it reaches 0.985 but the numbers, dates or names differ (pairs the fact guard refuses to
call unchanged). Each pair carries the sentences around it (for whoever reads it) and the label
the current default labeling gives the new sentence.

    .venv/bin/python -m benchmarks.changed_candidates --out /tmp/candidates.jsonl [--pairing]

``--pairing`` writes the low-similarity pairs instead (gold set ``pairing``): a new sentence
whose best old match is below 0.6, and the deleted old sentence of the same gap (between the
same unchanged neighbours) most similar to it (at least 0.3) that shares a capitalised name
with it and holds a value of a kind the new one holds, with another value.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipeline.config import load_config  # noqa: E402
from pipeline.facts import fact_differences, sentence_values  # noqa: E402
from pipeline.labeling.stage import label_snapshots, make_labeler  # noqa: E402
from pipeline.layout import read_labels, read_snapshot_table  # noqa: E402
from pipeline.models.embedder import cosine_matrix  # noqa: E402
from pipeline.text import SentenceSplitter  # noqa: E402
from tests.conftest import WIKISNAP, WIKISNAP_DATES, build_wikisnap_snapshots  # noqa: E402

LOW, HIGH = 0.6, 0.985
PAIRING_LOW = 0.3


def _sentences(workdir: Path, date: str) -> dict[int, list[str]]:
    table = read_snapshot_table(workdir, date, "sentences", columns=["page_id", "sent_idx", "text"])
    pages: dict[int, list[tuple[int, str]]] = {}
    for page, idx, text in zip(*(table[c].to_pylist() for c in table.column_names), strict=True):
        pages.setdefault(page, []).append((idx, text))
    return {p: [t for _, t in sorted(rows)] for p, rows in pages.items()}


_OPENERS = frozenset(
    [
        "The",
        "A",
        "An",
        "In",
        "On",
        "At",
        "It",
        "He",
        "She",
        "They",
        "This",
        "As",
        "By",
        "For",
        "Its",
        "His",
        "Her",
        "After",
        "Before",
        "During",
        "Since",
        "From",
        "With",
        "However",
        "Following",
    ]
)


def _names(text: str) -> set[str]:
    return {w for w in re.findall(r"\b[A-Z][\w.&-]+", text) if w not in _OPENERS}


def _values(text: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for v in sentence_values(text):
        out.setdefault(v.kind, set()).add(v.norm)
    return out


def low_similarity_pairs(olds: list[str], news: list[str], sims: np.ndarray, fresh: list[int]):
    """(old index, new index, cosine) of each ``--pairing`` pair of one article."""
    new_texts = set(news)
    first_old: dict[str, int] = {}
    for i, text in enumerate(olds):
        first_old.setdefault(text, i)
    anchors = [(first_old[t], j) for j, t in enumerate(news) if t in first_old]
    for row, j in enumerate(fresh):
        if float(sims[row].max()) >= LOW:
            continue
        lo = max([a for a, b in anchors if b < j], default=-1)
        hi = min([a for a, b in anchors if b > j and a > lo], default=len(olds))
        new_values, new_names = _values(news[j]), _names(news[j])
        best: tuple[int, float] | None = None
        for i in range(lo + 1, hi):
            if olds[i] in new_texts or not _names(olds[i]) & new_names:
                continue
            old_values = _values(olds[i])
            if not any(k in new_values and old_values[k] != new_values[k] for k in old_values):
                continue
            cosine = float(sims[row, i])
            if cosine >= PAIRING_LOW and (best is None or cosine > best[1]):
                best = (i, cosine)
        if best is not None:
            yield best[0], j, best[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workdir", type=Path, help="keep snapshots and labels here")
    parser.add_argument("--pairing", action="store_true", help="the low-similarity pairs")
    args = parser.parse_args()
    manifest = json.loads((WIKISNAP / "MANIFEST.json").read_text())
    meta = {int(a["page_id"]): a for a in manifest["articles"]}
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="changed_candidates_"))
    build_wikisnap_snapshots(workdir, WIKISNAP_DATES, tuple(sorted(meta)), SentenceSplitter())
    cfg = load_config(profile="offline")
    labeler = make_labeler(cfg, workdir)
    embedder = labeler.embedder
    rows = []
    for old, new in zip(WIKISNAP_DATES, WIKISNAP_DATES[1:], strict=False):
        label_snapshots(workdir, old, new, labeler)
        labels = {
            (r["page_id"], r["new_idx"]): r
            for r in read_labels(workdir, old, new).to_pylist()
            if r["new_idx"] is not None
        }
        before, after = _sentences(workdir, old), _sentences(workdir, new)
        for page in sorted(set(before) & set(after)):
            olds, news = before[page], after[page]
            kept = set(olds)
            fresh = [j for j, text in enumerate(news) if text not in kept]
            if not fresh:
                continue
            sims = cosine_matrix(embedder.embed([news[j] for j in fresh]), embedder.embed(olds))
            if args.pairing:
                found = list(low_similarity_pairs(olds, news, sims, fresh))
            else:
                best = [(int(np.argmax(sims[row])), j) for row, j in enumerate(fresh)]
                found = [(i, j, float(sims[row, i])) for row, (i, j) in enumerate(best)]
            for i, j, cosine in found:
                if not args.pairing and cosine < LOW:
                    continue
                if cosine >= HIGH:
                    old_facts, new_facts = labeler.facts.extract_many([olds[i], news[j]])
                    if not fact_differences(olds[i], news[j], old_facts, new_facts):
                        continue
                current = labels.get((page, j), {})
                rows.append(
                    {
                        "id": f"{page}:{old}:{new}:{j}",
                        "page_id": page,
                        "title": meta[page]["title"],
                        "category": meta[page]["category"],
                        "old_date": old,
                        "new_date": new,
                        "old_idx": i,
                        "new_idx": j,
                        "old": olds[i],
                        "new": news[j],
                        "cosine": round(cosine, 4),
                        "old_context": olds[max(0, i - 2) : i + 3],
                        "new_context": news[max(0, j - 2) : j + 3],
                        "current_label": current.get("label"),
                        "current_rule": current.get("rule"),
                    }
                )
    args.out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    print(f"candidates={len(rows)} workdir={workdir} out={args.out}")


if __name__ == "__main__":
    main()
