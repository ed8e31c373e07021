"""How right is `changed`? The default labeling path on the hand-labeled gold pairs.

Every gold pair (``benchmarks/data/changed_gold.jsonl``: an old sentence, the revised one, and
its class read by hand: UPDATE, ELABORATION, REWORDING or DIFFERENT) becomes a one-sentence
article at two dates and goes through the real labeler (MiniLM similarity, the fact guard,
the word alignment of :mod:`pipeline.labeling.changes` and, unless ``--judge none``, the update
judge), all pairs in one batch. Prints the confusion matrix of gold class against label, the changed
precision and recall, the shares of elaborations and rewordings labeled changed, of
rewordings labeled unchanged and of updates labeled unchanged, the judge's calls, and the
seconds (in all, per article pair).

    .venv/bin/python -m benchmarks.bench_changed [--judge none|local|openai:MODEL|URL]
        [--judge-only] [--set SET] [--split dev|test] [--gold FILE] [--workdir W]

``--set`` keeps one drawing of the gold set (``random``, ``enriched``, ``enriched2``,
``random2``, ``rest``, ``pairing``: benchmarks/data/CHANGED_GOLD.md).

``--judge-only`` measures the judge alone: every pair the judge can ask about goes to it,
even those the alignment settles by itself. ``--split test`` keeps the newest date pair
(2024-06-01 -> 2025-01-01), which no rule was tuned on; ``dev`` the three older pairs.
``--articles OLD:NEW`` times the labeling of all 36 wikisnap articles between two dates with
and without the judge (seconds per article, judge calls, how many labels the judge changed);
with ``--classifier`` also with the update classifier on.

``--in-context`` labels all 36 wikisnap articles over their four date pairs, as a run would
(real gaps and counterparts; the pairs of a gold row may differ from the labeler's own), and
scores each gold pair by the label its new sentence got, for the training and the test
articles apart (``--judge none`` for the rules alone).

``--grouped`` measures generalization to unseen articles (issue 33): the gold set is split BY
ARTICLE into the frozen test articles (:data:`TEST_ARTICLES`, 12 of 36, two per category,
drawn once with ``random.Random(33)`` and never tuned on) and the 24 training articles, which
are cross-validated in :data:`CV_FOLDS` folds grouped by article (no article in two folds,
one article of each category per fold). For each variant (rules only; rules + the update
classifier; the classifier alone) it prints the confusion matrix and figures on the CV folds
(each fold labeled by a classifier trained, with ``benchmarks/train_update_classifier.py``,
on the other folds' gold pairs and synthetic pairs of their articles) and on the test
articles (the packaged weights, trained on all training articles).

    .venv/bin/python -m benchmarks.bench_changed --grouped [--judge none] [--workdir W]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipeline.config import load_config  # noqa: E402
from pipeline.labeling.align import PageSentences  # noqa: E402
from pipeline.labeling.stage import make_labeler  # noqa: E402
from pipeline.schemas import CHANGED, NEW, UNCHANGED, UNLABELED  # noqa: E402
from pipeline.text import sentence_hash  # noqa: E402

GOLD = REPO / "benchmarks" / "data" / "changed_gold.jsonl"
CLASSES = ("UPDATE", "ELABORATION", "REWORDING", "DIFFERENT")
LABELS = (CHANGED, UNCHANGED, NEW, UNLABELED)
TEST_PAIR = ("2024-06-01", "2025-01-01")
# The frozen test articles (issue 33): two per category, drawn once by
# random.Random(33).sample(sorted titles of the category, 2), categories in sorted order.
# Fixed forever; nothing (rules, features, thresholds, hyperparameters) is tuned on them.
TEST_ARTICLES = (
    "Barclays",
    "Universal Music Group",
    "Arvind Krishna",
    "Sam Altman",
    "Jack Smith (lawyer)",
    "Letitia James",
    "Radeon RX 7000 series",
    "Tesla Model Y",
    "Dark energy",
    "Liquid biopsy",
    "Miami Dolphins",
    "UEFA Champions League",
)
CV_FOLDS = 4


def split_by_article(gold: list[dict]) -> tuple[list[dict], list[dict]]:
    """(training pairs, frozen test pairs): the pairs of :data:`TEST_ARTICLES` are the test."""
    test = set(TEST_ARTICLES)
    return [g for g in gold if g["title"] not in test], [g for g in gold if g["title"] in test]


def _judge_overrides(spec: str) -> dict[str, Any]:
    if spec == "none":
        return {"align": {"update_judge": False}}
    if spec == "local":
        llm: dict[str, Any] = {"backend": "local"}
    elif spec.startswith("openai:"):
        llm = {"backend": "openai", "openai_model": spec.split(":", 1)[1]}
    elif spec.startswith(("http://", "https://")):
        llm = {"backend": "openai", "base_url": spec}
    else:
        raise SystemExit(f"--judge {spec!r}: none, local, openai:MODEL or a server URL")
    return {"align": {"update_judge": True}, "llm": {**llm, "batch_api": False}}


def _select(gold: list[dict], which_set: str | None, split: str | None) -> list[dict]:
    rows = [g for g in gold if which_set is None or g["set"] == which_set]
    if split is not None:
        rows = [
            g for g in rows if ((g["old_date"], g["new_date"]) == TEST_PAIR) == (split == "test")
        ]
    return rows


def label_gold(
    gold: list[dict], judge: str, workdir: Path, *, judge_only: bool, classifier: bool = False
) -> dict:
    """Run the labeler over every gold pair; returns labels, rules, judge calls, seconds."""
    from pipeline.runtime import judge_from_config, llm_from_config

    overrides = _judge_overrides(judge)
    overrides["align"]["update_classifier"] = classifier
    cfg = load_config(profile="offline", overrides=overrides)
    llm = llm_from_config(cfg, workdir)
    labeler = make_labeler(cfg, workdir, judge=judge_from_config(cfg, llm))
    if judge_only:
        return _judge_alone(gold, labeler)
    pairs = []
    for n, g in enumerate(gold):
        old, new = g["old"], g["new"]
        pairs.append(
            (
                PageSentences(n, g["title"], 1, [old], [sentence_hash(old)]),
                PageSentences(n, g["title"], 2, [new], [sentence_hash(new)]),
            )
        )
    labeler.embedder.embed(["warm up"])
    labeler.facts.entity_spans_many(["Warm up the NER model in Paris."])
    started = time.perf_counter()
    rows, stats = labeler.label_pages(pairs)
    seconds = time.perf_counter() - started
    by_page = {r.page_id: r for r in rows if r.new_idx is not None}
    return {
        "labels": [by_page[n].label for n in range(len(gold))],
        "rules": [by_page[n].rule for n in range(len(gold))],
        "judge_questions": stats.judge_questions,
        "seconds": seconds,
    }


def _judge_alone(gold: list[dict], labeler: Any) -> dict:
    """Changed when the judge says so, for every pair of every askable class
    (:data:`pipeline.labeling.changes.ASKABLE_CLASSES`: a value replaced, however closely the
    sentences match, a value moved and changed, a plan carried out); the other labels as the
    alignment gives them. ``asked`` holds (gold index, pair class, verdict) for the per-class
    table."""
    from pipeline.labeling.changes import (
        ASKABLE_CLASSES,
        ELABORATION,
        REWORDING,
        UNCERTAIN,
        UPDATE,
        PairClass,
        classify_pair,
        judge_question,
    )
    from pipeline.models.embedder import cosine_matrix
    from pipeline.slots import compare_slots

    if labeler.judge is None:
        raise SystemExit("--judge-only needs a judge (--judge local|openai:MODEL|URL)")
    started = time.perf_counter()
    texts = sorted({t for g in gold for t in (g["old"], g["new"])})
    spans = dict(zip(texts, labeler.facts.entity_spans_many(texts), strict=True))
    vectors = dict(zip(texts, labeler.embedder.embed(texts), strict=True))
    labels, rules, questions = [], [], []
    for g in gold:
        old, new = g["old"], g["new"]
        similarity = float(cosine_matrix(vectors[old], vectors[new])[0, 0])
        slots = compare_slots(old, new, spans[old], spans[new])
        verdict = classify_pair(slots, similarity)
        if verdict.kind == UPDATE:
            loose = "value_replaced_loosely" if slots.replaced else "planned_to_done"
            verdict = PairClass(UNCERTAIN, loose, verdict.detail)
        question = judge_question(old, new, verdict, slots, ASKABLE_CLASSES)
        questions.append(question)
        if verdict.kind in (ELABORATION, REWORDING):
            labels.append(UNCHANGED)
        elif verdict.kind == UNCERTAIN:
            labels.append(UNLABELED)
        else:
            labels.append(NEW if similarity <= 0.705 else UNLABELED)
        rules.append(verdict.rule)
    asked = [k for k, q in enumerate(questions) if q is not None]
    verdicts = labeler.judge.settle([questions[k] for k in asked])
    for k, verdict in zip(asked, verdicts, strict=True):
        if verdict is True:
            labels[k], rules[k] = CHANGED, "judge_confirmed"
    return {
        "labels": labels,
        "rules": rules,
        "judge_questions": len(asked),
        "asked": [(k, questions[k].pair_class, v) for k, v in zip(asked, verdicts, strict=True)],
        "seconds": time.perf_counter() - started,
    }


def judge_by_class(gold: list[dict], asked: list[tuple[int, str, bool | None]]) -> list[str]:
    """The judge's calls per class of uncertain pair, on the training and on the test
    articles: how often it was asked, how often it said "update" and was right (precision),
    how many gold updates it found and missed, how often it gave no usable answer."""
    lines = [
        "class                              split  asked  update(right)  precision  "
        "no_update(missed)  no_answer"
    ]
    for cls in sorted({c for _, c, _ in asked}):
        for split, in_test in (("train", False), ("test", True)):
            rows = [
                (gold[k]["gold"], v)
                for k, c, v in asked
                if c == cls and (gold[k]["title"] in TEST_ARTICLES) == in_test
            ]
            if not rows:
                continue
            yes = [g for g, v in rows if v is True]
            no = [g for g, v in rows if v is False]
            right = yes.count("UPDATE")
            precision = f"{right / len(yes):.2f}" if yes else "n/a"
            lines.append(
                f"{cls:34s} {split:5s} {len(rows):6d} {len(yes):6d}({right:3d})     "
                f"{precision:>9s} {len(no):8d}({no.count('UPDATE'):3d})       "
                f"{sum(v is None for _, v in rows):6d}"
            )
    return lines


def report(gold: list[dict], result: dict) -> list[str]:
    """The figures, one per line."""
    conf: Counter[tuple[str, str]] = Counter(
        (g["gold"], label) for g, label in zip(gold, result["labels"], strict=True)
    )
    n = Counter(g["gold"] for g in gold)
    lines = ["gold \\ label".ljust(13) + "".join(label.rjust(11) for label in LABELS)]
    for c in CLASSES:
        lines.append(c.ljust(13) + "".join(str(conf[(c, lab)]).rjust(11) for lab in LABELS))
    tp = conf[("UPDATE", CHANGED)]
    predicted = sum(conf[(c, CHANGED)] for c in CLASSES)
    articles = len({(g["title"], g["old_date"], g["new_date"]) for g in gold})

    def share(c: str, lab: str) -> str:
        return f"{conf[(c, lab)] / n[c]:.3f}" if n[c] else "n/a"

    lines += [
        f"pairs={len(gold)} updates={n['UPDATE']} elaborations={n['ELABORATION']} "
        f"rewordings={n['REWORDING']} different={n['DIFFERENT']}",
        f"changed_precision={tp / predicted:.3f} ({tp}/{predicted})"
        if predicted
        else "changed_precision=n/a (nothing labeled changed)",
        f"changed_recall={tp / n['UPDATE']:.3f} ({tp}/{n['UPDATE']})" if n["UPDATE"] else "",
        f"elaborations_changed={share('ELABORATION', CHANGED)}",
        f"rewordings_changed={share('REWORDING', CHANGED)}",
        f"rewordings_unchanged={share('REWORDING', UNCHANGED)}",
        f"updates_unchanged={share('UPDATE', UNCHANGED)}",
        f"different_new={share('DIFFERENT', NEW)}",
        f"judge_calls={result['judge_questions']}",
        f"seconds={result['seconds']:.2f}",
        f"seconds_per_article_pair={result['seconds'] / max(articles, 1):.3f} ({articles} pairs)",
    ]
    rules = Counter(result["rules"])
    lines.append("rules=" + json.dumps(dict(sorted(rules.items()))))
    return [line for line in lines if line]


VARIANTS = ("rules", "rules+classifier", "classifier")


def grouped_evaluation(gold: list[dict], judge: str, workdir: Path) -> list[str]:
    """Each variant's figures on the article-grouped CV folds of the training articles and on
    the frozen test articles (see the module docstring); one line per figure."""
    from benchmarks.train_update_classifier import (
        SEED,
        article_folds,
        run_pairs,
        train,
        training_data,
    )
    from pipeline.runtime import judge_from_config, llm_from_config
    from pipeline.update_classifier import classifier_from_dict, load_update_classifier

    overrides = _judge_overrides(judge)
    overrides["align"]["update_classifier"] = False
    cfg = load_config(profile="offline", overrides=overrides)
    labeler = make_labeler(
        cfg, workdir, judge=judge_from_config(cfg, llm_from_config(cfg, workdir))
    )
    labeler.embedder.embed(["warm up"])
    category = {g["title"]: g["category"] for g in gold}
    train_gold, test_gold = split_by_article(gold)
    gold_rows, synth_rows = training_data(labeler, train_gold, workdir)

    def run(rows: list[dict], model: Any, variant: str) -> dict:
        labeler.classifier = None if variant == "rules" else model
        labeler.classifier_alone = variant == "classifier"
        asked = labeler.judge.calls if labeler.judge else 0
        started = time.perf_counter()
        out = run_pairs(labeler, rows)
        labeler.classifier, labeler.classifier_alone = None, False
        return {
            "labels": [r["label"] for r in out],
            "rules": [r["rule"] for r in out],
            "judge_questions": (labeler.judge.calls if labeler.judge else 0) - asked,
            "seconds": time.perf_counter() - started,
        }

    cv: dict[str, dict] = {v: {"labels": [], "rules": [], "judge_questions": 0} for v in VARIANTS}
    cv_gold: list[dict] = []
    cv_seconds = 0.0
    titles = sorted({g["title"] for g in train_gold})
    for fold in article_folds(titles, category, CV_FOLDS, SEED):
        weights = train(
            [r for r in gold_rows if r["title"] not in fold],
            [r for r in synth_rows if r["title"] not in fold],
            category,
        )
        model = classifier_from_dict(weights)
        held = [g for g in train_gold if g["title"] in fold]
        cv_gold.extend(held)
        for v in VARIANTS:
            result = run(held, model, v)
            cv_seconds += result["seconds"]
            for key in ("labels", "rules"):
                cv[v][key].extend(result[key])
            cv[v]["judge_questions"] += result["judge_questions"]
    packaged = load_update_classifier()
    lines = [
        f"test articles ({len(TEST_ARTICLES)}): {', '.join(TEST_ARTICLES)}",
        f"cv: {CV_FOLDS} folds over {len(titles)} training articles; "
        f"packaged weights {packaged.model_id} threshold={packaged.threshold}",
    ]
    for v in VARIANTS:
        lines += [f"== {v}: CV (training articles, grouped folds)"]
        lines += report(cv_gold, cv[v] | {"seconds": 0.0})[:-2]
    for v in VARIANTS:
        lines += [f"== {v}: TEST (frozen test articles, packaged weights)"]
        lines += report(test_gold, run(test_gold, packaged, v))
    return lines


def in_context(gold: list[dict], judge: str, workdir: Path) -> list[str]:
    """Every gold pair's new sentence as the labeler labels it inside its article: all 36
    wikisnap articles labeled over their four date pairs (real gaps, real counterparts, the
    configured judge), each gold pair scored by the label of its new sentence; figures for the
    training articles, the frozen test articles and all, and the seconds per article pair."""
    from pipeline.labeling.stage import label_snapshots
    from pipeline.layout import read_labels
    from pipeline.runtime import judge_from_config, llm_from_config
    from pipeline.text import SentenceSplitter
    from tests.conftest import WIKISNAP, WIKISNAP_DATES, build_wikisnap_snapshots

    manifest = json.loads((WIKISNAP / "MANIFEST.json").read_text())
    page_ids = tuple(sorted(int(a["page_id"]) for a in manifest["articles"]))
    if not (workdir / "snapshots").is_dir():
        build_wikisnap_snapshots(workdir, WIKISNAP_DATES, page_ids, SentenceSplitter())
    shutil.rmtree(workdir / "labels", ignore_errors=True)
    cfg = load_config(profile="offline", overrides=_judge_overrides(judge))
    labeler = make_labeler(
        cfg, workdir, judge=judge_from_config(cfg, llm_from_config(cfg, workdir))
    )
    labeler.embedder.embed(["warm up"])
    labeler.facts.entity_spans_many(["Warm up the NER model in Paris."])
    by_id: dict[str, tuple[str, str]] = {}
    seconds = 0.0
    for old, new in zip(WIKISNAP_DATES, WIKISNAP_DATES[1:], strict=False):
        started = time.perf_counter()
        label_snapshots(workdir, old, new, labeler)
        seconds += time.perf_counter() - started
        for r in read_labels(workdir, old, new).to_pylist():
            if r["new_idx"] is not None:
                by_id[f"{r['page_id']}:{old}:{new}:{r['new_idx']}"] = (r["label"], r["rule"])
    calls = labeler.judge.calls if labeler.judge else 0
    lines = []
    for name, rows in (
        ("training articles", [g for g in gold if g["title"] not in TEST_ARTICLES]),
        ("test articles", [g for g in gold if g["title"] in TEST_ARTICLES]),
        ("all articles", gold),
    ):
        labels = [by_id[g["id"]] for g in rows]
        result = {
            "labels": [label for label, _ in labels],
            "rules": [rule for _, rule in labels],
            "judge_questions": calls,
            "seconds": seconds,
        }
        lines += [f"== in context: {name}"] + report(rows, result)[:-3]
    per_pair = seconds / (len(page_ids) * (len(WIKISNAP_DATES) - 1))
    lines.append(
        f"seconds={seconds:.1f} seconds_per_article_pair={per_pair:.3f} judge_calls={calls}"
    )
    return lines


def time_articles(
    old: str, new: str, judge: str, workdir: Path, *, classifier: bool = False
) -> list[str]:
    """Label every wikisnap article ``old`` -> ``new`` without and with the judge; one line
    each: seconds per article, judge calls, changed labels."""
    from pipeline.labeling.stage import label_snapshots
    from pipeline.layout import read_labels
    from pipeline.runtime import judge_from_config, llm_from_config
    from pipeline.text import SentenceSplitter
    from tests.conftest import WIKISNAP, build_wikisnap_snapshots

    manifest = json.loads((WIKISNAP / "MANIFEST.json").read_text())
    page_ids = tuple(sorted(int(a["page_id"]) for a in manifest["articles"]))
    snapshots = workdir / "snapshots_only"
    build_wikisnap_snapshots(snapshots, [old, new], page_ids, SentenceSplitter())
    lines = []
    runs = [("none", False), (judge, False)]
    if classifier:
        runs += [("none", True)] + ([(judge, True)] if judge != "none" else [])
    for spec, with_classifier in dict.fromkeys(runs):
        # A fresh copy each: no embedding, NER or LLM answer cached from the other run.
        name = spec.replace("/", "_").replace(":", "_")
        run_dir = workdir / f"judge-{name}{'-classifier' if with_classifier else ''}"
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.copytree(snapshots / "snapshots", run_dir / "snapshots")
        overrides = _judge_overrides(spec)
        overrides["align"]["update_classifier"] = with_classifier
        cfg = load_config(profile="offline", overrides=overrides)
        judge_model = judge_from_config(cfg, llm_from_config(cfg, run_dir))
        labeler = make_labeler(cfg, run_dir, judge=judge_model)
        labeler.embedder.embed(["warm up"])  # model loading stays out of the time
        labeler.facts.entity_spans_many(["Warm up the NER model in Paris."])
        started = time.perf_counter()
        summary = label_snapshots(run_dir, old, new, labeler)
        seconds = time.perf_counter() - started
        rules = Counter(read_labels(run_dir, old, new)["rule"].to_pylist())
        lines.append(
            f"articles judge={spec} classifier={'on' if with_classifier else 'off'} "
            f"seconds_per_article={seconds / len(page_ids):.3f} "
            f"judge_calls={summary.model_calls.get('judge_questions', 0)} "
            f"changed={summary.counts['changed']} judge_confirmed={rules['judge_confirmed']} "
            f"classifier_update={rules['classifier_update']}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gold", type=Path, default=GOLD)
    parser.add_argument("--judge", default="local")
    parser.add_argument("--judge-only", action="store_true")
    parser.add_argument(
        "--set",
        dest="which_set",
        choices=["random", "enriched", "enriched2", "random2", "rest", "pairing"],
    )
    parser.add_argument("--split", choices=["dev", "test"])
    parser.add_argument("--workdir", type=Path, help="keep the caches (LLM answers) here")
    parser.add_argument("--dump", type=Path, help="write each pair with its label here (JSONL)")
    parser.add_argument("--articles", metavar="OLD:NEW", help="time whole articles instead")
    parser.add_argument(
        "--classifier", action="store_true", help="with the update classifier on (align)"
    )
    parser.add_argument(
        "--grouped", action="store_true", help="article-grouped CV and frozen test split"
    )
    parser.add_argument(
        "--in-context", action="store_true", help="label the gold pairs inside their articles"
    )
    args = parser.parse_args()
    if args.articles:
        old, _, new = args.articles.partition(":")
        workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench_changed_articles_"))
        lines = time_articles(old, new, args.judge, workdir, classifier=args.classifier)
        print("\n".join(lines))
        return
    gold = _select(
        [json.loads(line) for line in args.gold.read_text().splitlines() if line.strip()],
        args.which_set,
        args.split,
    )
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench_changed_"))
    if args.grouped:
        print("\n".join(grouped_evaluation(gold, args.judge, workdir)))
        return
    if args.in_context:
        print("\n".join(in_context(gold, args.judge, workdir)))
        return
    result = label_gold(
        gold, args.judge, workdir, judge_only=args.judge_only, classifier=args.classifier
    )
    print("\n".join(report(gold, result)))
    if "asked" in result:
        print("\n".join(judge_by_class(gold, result["asked"])))
    if args.dump:
        with args.dump.open("w") as fh:
            for g, label, rule in zip(gold, result["labels"], result["rules"], strict=True):
                fh.write(json.dumps(g | {"label": label, "rule": rule}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    try:
        main()
    finally:
        from pipeline.models.llm.llamacpp_server import stop_shared_servers

        stop_shared_servers()
