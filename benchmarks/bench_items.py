"""Item quality and speed with the real local LLM: generation for real paragraphs and real
changes of wikisnap articles that are NOT in the ``make run`` sample, through the same code
path as ``wikidrift run`` (llama.cpp server, schema-constrained answers, validation).

Part 1, initial generation at ``--old``: ``--paragraphs`` selected paragraphs per article, each
one QA, one dialogue and one quadruple request. Part 2, updates: labels ``--old`` -> ``--new``,
then QA for new sentence groups and changed sentences, dialogues and quadruples for them.

Prints, one figure per line: requests (attempts), kept and reject reasons per purpose, the
share of attempted QA kept, LLM prefill and generation tokens/s, seconds per kept item. Kept
items go to ``--dump`` (JSONL) for reading by eye.

``--gold``: no model, no generation. Every candidate of the item gold set
(``benchmarks/data/item_gold.jsonl``, read by hand) is checked again by today's code, the
model's own checks replayed from the recorded answers; per kind and split it prints the
candidates' gold verdicts, for every check the WRONG / WEAK / RIGHT units it rejects (and those
only it rejects), and the kept units' correctness and yield per article.

    .venv/bin/python -m benchmarks.bench_items [--articles 8] [--paragraphs 2] [--dump items.jsonl]
    .venv/bin/python -m benchmarks.bench_items --gold [--split dev|test|all]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.item_gold import GOLD_PATH  # noqa: E402
from pipeline.config import load_config  # noqa: E402
from pipeline.generate.stage import generate_items  # noqa: E402
from pipeline.labeling.stage import label_snapshots, make_labeler  # noqa: E402
from pipeline.layout import read_generated  # noqa: E402
from pipeline.runtime import base_embedder, cached_embedder, llm_from_config  # noqa: E402
from pipeline.text import SentenceSplitter  # noqa: E402
from tests.conftest import WIKISNAP, build_wikisnap_snapshots  # noqa: E402

SAMPLE_MANIFEST = REPO / "data" / "sample" / "MANIFEST.json"
# Articles whose sentences the prompts' worked examples quote (Lisa Su, Cisco, IEA, Haas F1
# Team): a model could copy an example there, so they would flatter the figures.
PROMPT_EXAMPLE_PAGES = {44063188, 51746, 285292, 42094020}


def bench_page_ids(n: int, skip: int = 0) -> tuple[int, ...]:
    """``n`` wikisnap articles, after the first ``skip``, that are not in the shipped sample
    (nor quoted by a prompt's example), spread over the categories."""
    sample = {a["page_id"] for a in json.loads(SAMPLE_MANIFEST.read_text())["articles"]}
    sample |= PROMPT_EXAMPLE_PAGES
    manifest = json.loads((WIKISNAP / "MANIFEST.json").read_text())
    ids = [int(a["page_id"]) for a in manifest["articles"] if a["page_id"] not in sample]
    # Round-robin over categories so a small N still spans people, products, science ...
    by_cat: dict[str, list[int]] = {}
    for a in manifest["articles"]:
        if int(a["page_id"]) in ids:
            by_cat.setdefault(a["category"], []).append(int(a["page_id"]))
    order = [pid for row in zip(*by_cat.values(), strict=False) for pid in row]
    return tuple(order[skip : skip + n])


def server_metrics(base_url: str) -> dict[str, float]:
    """llama.cpp's Prometheus counters (``llamacpp:*``) as a dict."""
    root = base_url.removesuffix("/v1")
    with urllib.request.urlopen(f"{root}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("llamacpp:"):
            key, _, value = line.partition(" ")
            out[key.removeprefix("llamacpp:")] = float(value)
    return out


def report(label: str, summary, seconds: float) -> int:
    """Print one generation run's figures; return the number of kept items."""
    c = summary.counts
    kept = {
        "qa": c["qa"]["total"],
        "dialogues": c["dialogue"]["dialogues"],
        "quadruples": c["quadruples"]["total"],
    }
    print(f"{label}_requests={json.dumps(summary.requests, sort_keys=True)}")
    print(f"{label}_kept={json.dumps(kept)} dialogue_turns={c['dialogue']['total']}")
    for kind, reasons in summary.rejects_by_kind.items():
        print(f"{label}_rejects_{kind}={json.dumps(reasons, sort_keys=True)}")
    # attempts = first generation requests; qa_check asks valid pairs back, qa_retry re-asks rejects
    qa_attempts = sum(
        v
        for k, v in summary.requests.items()
        if k.startswith("qa_") and k not in ("qa_check", "qa_retry")
    )
    if qa_attempts:
        print(f"{label}_qa_kept_share={kept['qa'] / qa_attempts:.2f} ({kept['qa']}/{qa_attempts})")
    n_kept = sum(kept.values())
    print(f"{label}_seconds={seconds:.1f}")
    if n_kept:
        print(f"{label}_seconds_per_kept_item={seconds / n_kept:.1f} (qa, dialogue, quadruple)")
    return n_kept


def dump(workdir: Path, snapshot: str, path: Path) -> None:
    """Append the kept items of one generation run to ``path`` (one JSON object a line)."""
    with path.open("a") as f:
        for name in ("qa", "dialogue", "quadruples"):
            for row in read_generated(workdir, snapshot, name).to_pylist():
                row.pop("raw_output", None)
                f.write(json.dumps({"kind": name} | row, ensure_ascii=False) + "\n")


def gold(split: str, path: Path) -> None:
    """Score every gold candidate with today's checks (no model: recorded answers replayed)."""
    from benchmarks.item_gold import ReplayBackend, read_gold, report_gold, score_gold
    from pipeline.generate.validator import ItemValidator

    records = [r for r in read_gold(path) if split in ("all", r["split"])]
    answers = json.loads(path.with_suffix(".answers.json").read_text())
    replay = ReplayBackend(answers)
    cfg = load_config(profile="offline")
    units = score_gold(records, ItemValidator.from_config(cfg.generation), replay)
    print(f"gold={path.name} split={split} candidates={len(records)} units={len(units)}")
    report_gold(units)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gold", nargs="?", const=str(GOLD_PATH), help="score the gold set")
    parser.add_argument("--split", default="dev", choices=("dev", "test", "all"))
    parser.add_argument("--articles", type=int, default=8)
    parser.add_argument("--skip", type=int, default=0, help="bench the articles after these")
    parser.add_argument("--paragraphs", type=int, default=2, help="initial paragraphs / article")
    parser.add_argument("--old", default="2024-01-01")
    parser.add_argument("--new", default="2024-06-01")
    parser.add_argument("--model", help="llm.local_model (default: the packaged Qwen 1.5B)")
    parser.add_argument("--workdir", type=Path, help="keep outputs and the LLM cache here")
    parser.add_argument("--dump", type=Path, help="write the kept items here (JSONL)")
    args = parser.parse_args()
    if args.gold:
        gold(args.split, Path(args.gold))
        return

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench_items_"))
    page_ids = bench_page_ids(args.articles, args.skip)
    build_wikisnap_snapshots(workdir, [args.old, args.new], page_ids, SentenceSplitter())
    overrides: dict = {
        "workdir": str(workdir),
        "generation": {"paragraphs_per_article": args.paragraphs},
    }
    if args.model:
        overrides["llm"] = {"local_model": args.model}
    cfg = load_config(profile="offline", overrides=overrides)
    started = time.perf_counter()
    llm = llm_from_config(cfg, workdir)
    url = llm.backend.backend.base_url
    print(f"model={llm.backend.model} server_start_seconds={time.perf_counter() - started:.1f}")
    print(f"articles={len(page_ids)} page_ids={','.join(map(str, page_ids))}")
    embedder = cached_embedder(base_embedder(cfg), workdir)
    if args.dump:
        args.dump.unlink(missing_ok=True)

    before = server_metrics(url)
    t0 = time.perf_counter()
    initial = generate_items(
        workdir, args.old, previous=None, backend=llm.backend, embedder=embedder,
        cfg=cfg.generation,
    )  # fmt: skip
    kept = report("initial", initial, time.perf_counter() - t0)
    labels = label_snapshots(workdir, args.old, args.new, make_labeler(cfg, workdir))
    print(f"labels={json.dumps(labels.counts, sort_keys=True)}")
    t1 = time.perf_counter()
    updates = generate_items(
        workdir, args.new, previous=args.old, backend=llm.backend, embedder=embedder,
        cfg=cfg.generation,
    )  # fmt: skip
    kept += report("update", updates, time.perf_counter() - t1)
    wall = time.perf_counter() - t0
    after = server_metrics(url)
    delta = Counter({k: after.get(k, 0) - before.get(k, 0) for k in after})
    prefill = delta["prompt_tokens_total"]
    cached = delta["prompt_tokens_cached_total"]
    print(f"prompt_tokens={prefill:.0f} cached_prompt_tokens={cached:.0f}")
    if delta["prompt_seconds_total"]:
        print(f"prefill_tokens_per_s={prefill / delta['prompt_seconds_total']:.1f}")
    generated = delta["tokens_predicted_total"]
    print(f"generated_tokens={generated:.0f}")
    if delta["tokens_predicted_seconds_total"]:
        per_slot = generated / delta["tokens_predicted_seconds_total"]
        print(f"generation_tokens_per_s_per_request={per_slot:.1f}")
    print(f"generation_tokens_per_s_all_slots={generated / wall:.1f}")
    print(f"total_seconds={wall:.1f} kept_items={kept}")
    if kept:
        print(f"seconds_per_kept_item={wall / kept:.1f}")
    if args.dump:
        dump(workdir, args.old, args.dump)
        dump(workdir, args.new, args.dump)
        print(f"items={args.dump}")


if __name__ == "__main__":
    main()
