"""How often a sentence labeled `unchanged` was edited so that a QA answer no longer fits it
(the ledger's ``answer_no_longer_fits``), on all 36 wikisnap articles over the four date pairs.

Builds the snapshots and offline labels in a scratch workdir, then, for every `unchanged` pair
of one old sentence and one new sentence whose texts differ, takes the answer spans
answer-first QA could offer from the old sentence and the quadruples the parse reads off it,
and asks :func:`~pipeline.carried_items.qa_misfit` / ``fact_misfit`` of each; the real
dialogue turns of the item gold set whose sentence is such an old sentence are asked
``turn_misfit``. Prints the counts and writes every retirement to
``<workdir>/edit_misfits.jsonl`` for reading.

    .venv/bin/python -m benchmarks.bench_edits [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.item_gold import read_gold  # noqa: E402
from pipeline.carried_items import fact_misfit, qa_misfit, turn_misfit  # noqa: E402
from pipeline.config import load_config  # noqa: E402
from pipeline.generate.answer_spans import answer_spans  # noqa: E402
from pipeline.generate.quadruple_parse import facts_of  # noqa: E402
from pipeline.labeling.stage import label_snapshots, make_labeler  # noqa: E402
from pipeline.layout import read_labels, sentence_texts  # noqa: E402
from pipeline.models.embedder import PACKAGED_MINILM, load_embedder  # noqa: E402
from pipeline.syntax import parse  # noqa: E402
from pipeline.text import SentenceSplitter  # noqa: E402
from tests.conftest import WIKISNAP, WIKISNAP_DATES, build_wikisnap_snapshots  # noqa: E402


def edited_pairs(workdir: Path, old: str, new: str) -> list[tuple[int, str, str]]:
    """(page, old text, new text) of the `unchanged` one-to-one pairs whose text changed."""
    rows = [
        r
        for r in read_labels(workdir, old, new).to_pylist()
        if r["label"] == "unchanged" and r["new_idx"] is not None and len(r["old_idx"]) == 1
    ]
    pages = {r["page_id"] for r in rows}
    before, after = sentence_texts(workdir, old, pages), sentence_texts(workdir, new, pages)
    pairs = []
    for r in rows:
        o, n = before[(r["page_id"], r["old_idx"][0])], after[(r["page_id"], r["new_idx"])]
        if o != n:
            pairs.append((r["page_id"], o, n))
    return pairs


def gold_turns() -> dict[tuple[str, int, str], list[tuple[str, dict]]]:
    """The item gold set's dialogue turns by (snapshot, page, evidence sentence), each with
    its article title: real replies the model wrote on these articles."""
    turns: dict[tuple[str, int, str], list[tuple[str, dict]]] = {}
    for rec in read_gold():
        if rec["kind"] != "dialogue":
            continue
        for turn in rec["turns"]:
            key = (rec["snapshot"], rec["page_id"], turn["evidence_text"])
            turns.setdefault(key, []).append((rec["title"], turn))
    return turns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench_edits_"))
    manifest = json.loads((WIKISNAP / "MANIFEST.json").read_text())
    pages = tuple(int(a["page_id"]) for a in manifest["articles"])
    if not (workdir / "snapshots").exists():
        build_wikisnap_snapshots(workdir, WIKISNAP_DATES, pages, SentenceSplitter())
    labeler = make_labeler(
        load_config(profile="offline"), workdir, embedder=load_embedder(PACKAGED_MINILM)
    )
    counts: Counter[str] = Counter()
    turns = gold_turns()
    with (workdir / "edit_misfits.jsonl").open("w") as out:
        for old, new in zip(WIKISNAP_DATES, WIKISNAP_DATES[1:], strict=False):
            label_snapshots(workdir, old, new, labeler)
            for page, before, after in edited_pairs(workdir, old, new):
                counts["edited pairs"] += 1
                for title, turn in turns.get((old, page, before), []):
                    counts["gold dialogue turns"] += 1
                    why = turn_misfit(turn["expert"], title, before, after)
                    if why:
                        counts["turns that no longer fit"] += 1
                        record = {"pair": f"{old}->{new}", "page_id": page, "why": why,
                                  "user": turn["user"], "expert": turn["expert"],
                                  "gold": turn["gold"]["verdict"],
                                  "old": before, "new": after}  # fmt: skip
                        out.write(json.dumps(record, ensure_ascii=False) + "\n")
                for span in answer_spans([0], [before], ""):
                    counts["answer spans"] += 1
                    why = qa_misfit("", span.text, before, after)
                    if why:
                        counts["no longer fit"] += 1
                        counts["  gone from the sentence" if "no longer" in why else
                               "  now one of a list / range / name"] += 1  # fmt: skip
                        record = {"pair": f"{old}->{new}", "page_id": page, "answer": span.text,
                                  "why": why, "old": before, "new": after}  # fmt: skip
                        out.write(json.dumps(record, ensure_ascii=False) + "\n")
                for fact in facts_of(parse(before)):
                    counts["parsed quadruples"] += 1
                    why = fact_misfit(fact.timestamp, before, after)
                    if why:
                        counts["quadruples that no longer fit"] += 1
                        quad = [fact.subject, fact.relation, fact.object, fact.timestamp]
                        record = {"pair": f"{old}->{new}", "page_id": page, "fact": quad,
                                  "why": why, "old": before, "new": after}  # fmt: skip
                        out.write(json.dumps(record, ensure_ascii=False) + "\n")
    for key, n in counts.items():
        print(f"{key}: {n}")
    print(f"retirements: {workdir / 'edit_misfits.jsonl'}")


if __name__ == "__main__":
    main()
