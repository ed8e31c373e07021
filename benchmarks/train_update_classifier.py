"""Train the update classifier (``pipeline/data/update_classifier.json``), reproducibly.

    .venv/bin/python -m benchmarks.train_update_classifier [--out FILE] [--workdir W]

Training data, all from the *training articles* of the gold set (every article of
``benchmarks/data/changed_gold.jsonl`` but the frozen test articles of
:data:`benchmarks.bench_changed.TEST_ARTICLES`, which nothing here reads):

- the gold pairs of those articles (their hand-read class);
- synthetic contrastive pairs made from real sentences of the same articles (the wikisnap
  revisions of 2024-01-01, split by the pipeline), VitaminC-style: a year, month, number or
  name replaced by another of its kind (UPDATE), a month added to a year or a short
  sentence of the same article joined on (ELABORATION), a clause dropped, the name put for
  the pronoun or the surname for the full name, an opening phrase moved to the end, a word
  swapped for a synonym (REWORDING); half of the updates and elaborations get a rewording
  on top, so the value is replaced while the words around it change too.

Every pair goes through the real labeler (rules only, one-sentence articles) and its features
are those the labeling path computes (:func:`pipeline.update_classifier.pair_features`);
pairs the rules send to ``new`` for low similarity never reach the classifier and are left
out. The model is a multinomial logistic regression (scikit-learn, lbfgs, fixed seed) on
standardized features; its P(UPDATE) threshold is chosen by cross-validation grouped by
article inside the training data: the lowest threshold at which pairs the rules leave
unlabeled can become changed with changed precision >= ``MIN_PRECISION`` and at most
``MAX_WRONG_SHARE`` of elaborations and of rewordings changed. The stored JSON holds the
weights, the threshold, the training articles and counts, and a digest of the training
features; ``benchmarks/data/update_classifier_features.npz`` holds those features so a test
can refit without models.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipeline.dates import MONTH_NAMES  # noqa: E402
from pipeline.labeling.align import PageSentences, SentenceLabeler  # noqa: E402
from pipeline.schemas import CHANGED, UNLABELED  # noqa: E402
from pipeline.text import sentence_hash  # noqa: E402
from pipeline.update_classifier import (  # noqa: E402
    CLASSES,
    DEFAULT_WEIGHTS,
    FEATURES,
    classifier_from_dict,
)

SEED = 33
# Inverse L2 strength and the weight of a synthetic pair against a gold one: chosen by the
# 4-fold article-grouped CV of the training articles (grid C 0.1 / 0.3 / 1 / 3, weight
# 0.25 / 0.5 / 1: the most recall at changed precision >= 0.9), never on the test articles.
C = 1.0
SYNTHETIC_WEIGHT = 1.0
CV_FOLDS = 4  # the folds of the training articles (benchmarks.bench_changed uses these)
SYNTHETIC_PER_CLASS = 150  # synthetic pairs of each class, at most
SYNTHETIC_DATE = "2024-01-01"
MIN_PRECISION = 0.92
MAX_WRONG_SHARE = 0.03
INNER_FOLDS = 3
THRESHOLDS = tuple(round(0.30 + 0.025 * k, 3) for k in range(28))  # 0.30 .. 0.975
FEATURES_FILE = REPO / "benchmarks" / "data" / "update_classifier_features.npz"


# --------------------------------------------------------------------------- synthetic pairs
_YEAR = re.compile(r"(?<![\d,.])(19[5-9]\d|20[0-2]\d)(?![\d,])")
_NUMBER = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?![\w,]|\.\d)")
_MONTH = re.compile(r"\b(" + "|".join(MONTH_NAMES) + r")\b")
_BARE_YEAR = re.compile(r"\b(in|since|by|until|from) (19[5-9]\d|20[0-2]\d)\b")
_OPENING = re.compile(r"^(In|On|During|After|Before|Since|By|Following) ([^,]{3,40}), (.+)\.$")
_MIDDLE_CLAUSE = re.compile(r", ([^,]{8,80}),")
_PAREN = re.compile(r" \([^()]{3,80}\)")
_SYNONYMS = {
    "approximately": "about",
    "around": "about",
    "began": "started",
    "purchased": "bought",
    "announced": "said",
    "located in": "based in",
    "however,": "but",
    "also ": "",
    "currently ": "",
    "large": "big",
    "received": "was given",
    "released": "launched",
    "several": "a number of",
}
_SWAP_LABELS = ("PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "WORK_OF_ART", "EVENT", "PRODUCT")


def _replace_year(text: str, rng: random.Random) -> str | None:
    found = list(_YEAR.finditer(text))
    if not found:
        return None
    m = rng.choice(found)
    year = int(m[1]) + rng.choice([-3, -2, -1, 1, 1, 2, 2, 3, 4])
    return f"{text[: m.start(1)]}{year}{text[m.end(1) :]}"


def _replace_number(text: str, rng: random.Random) -> str | None:
    found = [m for m in _NUMBER.finditer(text) if not _YEAR.fullmatch(m[1])]
    if not found:
        return None
    m = rng.choice(found)
    raw = m[1].replace(",", "")
    value = float(raw)
    factor = rng.choice([0.5, 0.8, 1.2, 1.5, 2.0, 3.0])
    new = value * factor if value >= 5 else value + rng.choice([1, 2, 3])
    if "." in raw:
        out = f"{new:.{len(raw.split('.')[1])}f}"
    else:
        out = f"{round(new):,}" if "," in m[1] else str(round(new))
    if out == m[1]:
        return None
    return f"{text[: m.start(1)]}{out}{text[m.end(1) :]}"


def _replace_month(text: str, rng: random.Random) -> str | None:
    found = list(_MONTH.finditer(text))
    if not found:
        return None
    m = rng.choice(found)
    other = rng.choice([x for x in MONTH_NAMES if x != m[1]])
    return f"{text[: m.start()]}{other}{text[m.end() :]}"


def _replace_name(
    text: str,
    spans: Sequence[tuple[int, int, str]],
    names: dict[str, list[str]],
    rng: random.Random,
) -> str | None:
    options = []
    for a, b, label in spans:
        if label not in _SWAP_LABELS:
            continue
        words = set(text[a:b].lower().split())
        others = [n for n in names.get(label, []) if not words & set(n.lower().split())]
        if others:
            options.append((a, b, others))
    if not options:
        return None
    a, b, others = rng.choice(options)
    return f"{text[:a]}{rng.choice(others)}{text[b:]}"


def _add_month(text: str, rng: random.Random) -> str | None:
    m = _BARE_YEAR.search(text)
    if not m:
        return None
    return f"{text[: m.start(2)]}{rng.choice(MONTH_NAMES)} {m[2]}{text[m.end(2) :]}"


def _join_detail(text: str, others: Sequence[str], rng: random.Random) -> str | None:
    short = [o for o in others if 6 <= len(o.split()) <= 16 and o.endswith(".") and o != text]
    if not short or not text.endswith("."):
        return None
    detail = rng.choice(short)
    if detail.split()[0] in ("He", "She", "It", "They", "The", "This", "In", "On", "A", "An"):
        detail = detail[0].lower() + detail[1:]
    return f"{text[:-1]}, and {detail}"


def _drop_clause(text: str, rng: random.Random) -> str | None:
    found = list(_PAREN.finditer(text)) + list(_MIDDLE_CLAUSE.finditer(text))
    if not found:
        return None
    m = rng.choice(found)
    keep = "" if m.group().startswith(" (") else ","
    out = f"{text[: m.start()]}{keep}{text[m.end() :]}"
    return out if len(out.split()) >= 6 else None


def _pronoun_or_name(text: str, title: str) -> str | None:
    short = re.sub(r"\s*\(.*\)$", "", title)
    surname = short.split()[-1]
    for pronoun in ("He ", "She "):
        if text.startswith(pronoun):
            return surname + " " + text[len(pronoun) :]
    if text.startswith(short + " ") and len(short.split()) > 1:
        return surname + text[len(short) :]
    if text.startswith("It "):
        return f"{short} {text[3:]}"
    return None


def _move_opening(text: str) -> str | None:
    m = _OPENING.match(text)
    if not m:
        return None
    rest = m[3]
    return f"{rest[0].upper()}{rest[1:]} {m[1].lower()} {m[2]}."


def _synonym(text: str, rng: random.Random) -> str | None:
    found = [w for w in _SYNONYMS if w in text]
    if not found:
        return None
    w = rng.choice(found)
    return text.replace(w, _SYNONYMS[w], 1)


def _reword(text: str, title: str, rng: random.Random) -> str | None:
    ops: list[Callable[[], str | None]] = [
        lambda: _drop_clause(text, rng),
        lambda: _pronoun_or_name(text, title),
        lambda: _move_opening(text),
        lambda: _synonym(text, rng),
    ]
    rng.shuffle(ops)
    for op in ops:
        out = op()
        if out and out != text:
            return out
    return None


def synthetic_pairs(
    sentences: dict[str, list[str]],
    spans: dict[str, list[tuple[int, int, str]]],
    *,
    seed: int = SEED,
    per_class: int = SYNTHETIC_PER_CLASS,
) -> list[dict[str, str]]:
    """Contrastive pairs (title, old, new, gold, how) from the real sentences of each article
    (``sentences``: title -> sentences; ``spans``: sentence -> NER spans), the same for the
    same input and seed."""
    rng = random.Random(seed)
    made: dict[str, list[dict[str, str]]] = {c: [] for c in ("UPDATE", "ELABORATION", "REWORDING")}
    for title in sorted(sentences):
        texts = [t for t in sentences[title] if 8 <= len(t.split()) <= 60]
        names: dict[str, list[str]] = {}
        for t in texts:
            for a, b, label in spans.get(t, []):
                names.setdefault(label, []).append(t[a:b])
        names = {k: sorted(set(v)) for k, v in names.items()}
        for text in texts:
            kind = rng.choice(("UPDATE", "ELABORATION", "REWORDING"))
            how = ""
            out: str | None = None
            if kind == "UPDATE":
                ops = [
                    ("year", lambda t=text: _replace_year(t, rng)),
                    ("number", lambda t=text: _replace_number(t, rng)),
                    ("month", lambda t=text: _replace_month(t, rng)),
                    ("name", lambda t=text, nm=names: _replace_name(t, spans.get(t, []), nm, rng)),
                ]
            elif kind == "ELABORATION":
                ops = [
                    ("month_added", lambda t=text: _add_month(t, rng)),
                    ("detail_joined", lambda t=text, ts=texts: _join_detail(t, ts, rng)),
                ]
            else:
                ops = [("reworded", lambda t=text, ti=title: _reword(t, ti, rng))]
            rng.shuffle(ops)
            for name, op in ops:
                out = op()
                if out and out != text:
                    how = name
                    break
            if not out or out == text:
                continue
            if kind != "REWORDING" and rng.random() < 0.5:
                again = _reword(out, title, rng)
                if again:
                    out, how = again, how + "+reworded"
            made[kind].append({"title": title, "old": text, "new": out, "gold": kind, "how": how})
    pairs: list[dict[str, str]] = []
    for kind in sorted(made):
        rows = made[kind]
        rng.shuffle(rows)
        pairs.extend(rows[:per_class])
    return pairs


def article_sentences(titles: Sequence[str], workdir: Path) -> dict[str, list[str]]:
    """The sentences of the wikisnap articles ``titles`` at :data:`SYNTHETIC_DATE`, split by
    the pipeline (snapshot built under ``workdir``)."""
    from pipeline.layout import read_snapshot_table
    from pipeline.text import SentenceSplitter
    from tests.conftest import WIKISNAP, build_wikisnap_snapshots

    manifest = json.loads((WIKISNAP / "MANIFEST.json").read_text())
    ids = tuple(sorted(int(a["page_id"]) for a in manifest["articles"] if a["title"] in titles))
    target = workdir / "synthetic_snapshot"
    if not (target / "snapshots").exists():
        build_wikisnap_snapshots(target, [SYNTHETIC_DATE], ids, SentenceSplitter())
    arts = read_snapshot_table(target, SYNTHETIC_DATE, "articles").to_pylist()
    title_of = {a["page_id"]: a["title"] for a in arts}
    sents = read_snapshot_table(target, SYNTHETIC_DATE, "sentences")
    out: dict[str, list[str]] = {}
    for pid, text in zip(sents["page_id"].to_pylist(), sents["text"].to_pylist(), strict=True):
        if title_of.get(pid) in titles:
            out.setdefault(title_of[pid], []).append(text)
    return out


# --------------------------------------------------------------------------- features
def run_pairs(labeler: SentenceLabeler, rows: Sequence[dict]) -> list[dict[str, Any]]:
    """Every row (``old``, ``new``, ``title``) as a one-sentence article through ``labeler``;
    for each: its label and rule, and (when the offline rule saw it) its features and the
    label the rules alone gave."""
    pairs = []
    for n, g in enumerate(rows):
        old, new = g["old"], g["new"]
        pairs.append(
            (
                PageSentences(n, g["title"], 1, [old], [sentence_hash(old)]),
                PageSentences(n, g["title"], 2, [new], [sentence_hash(new)]),
            )
        )
    labeler.pair_log = []
    try:
        out, _ = labeler.label_pages(pairs)
        logged = {(o, n): (x, lab) for o, n, x, lab in labeler.pair_log}
    finally:
        labeler.pair_log = None
    by_page = {r.page_id: r for r in out if r.new_idx is not None}
    result = []
    for n, g in enumerate(rows):
        x, rules_label = logged.get((g["old"], g["new"]), (None, None))
        r = by_page[n]
        result.append({"label": r.label, "rule": r.rule, "x": x, "rules_label": rules_label})
    return result


# --------------------------------------------------------------------------- fitting
def fit(x: np.ndarray, y: Sequence[str], weights: np.ndarray, *, seed: int = SEED) -> dict:
    """A multinomial logistic regression on standardized ``x``; the JSON-ready weights."""
    from sklearn.linear_model import LogisticRegression

    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    model = LogisticRegression(C=C, max_iter=5000, random_state=seed, class_weight="balanced")
    model.fit((x - mean) / scale, list(y), sample_weight=weights)
    order = [list(model.classes_).index(c) for c in CLASSES]
    return {
        "features": list(FEATURES),
        "classes": list(CLASSES),
        "mean": [round(float(v), 8) for v in mean],
        "scale": [round(float(v), 8) for v in scale],
        "coef": [[round(float(v), 8) for v in model.coef_[k]] for k in order],
        "intercept": [round(float(model.intercept_[k]), 8) for k in order],
        "threshold": 1.0,
    }


def article_folds(titles: Sequence[str], category: dict[str, str], k: int, seed: int) -> list[set]:
    """``k`` folds of articles, each category spread over the folds (seeded, by title)."""
    rng = random.Random(seed)
    folds: list[set] = [set() for _ in range(k)]
    start = 0
    for cat in sorted(set(category[t] for t in titles)):
        members = sorted(t for t in titles if category[t] == cat)
        rng.shuffle(members)
        for n, t in enumerate(members):
            folds[(start + n) % k].add(t)
        start += len(members)
    return folds


def figures(gold: Sequence[str], changed: Sequence[bool]) -> dict[str, float]:
    """Changed precision and recall, and the shares of elaborations and rewordings changed."""
    tp = sum(g == "UPDATE" and c for g, c in zip(gold, changed, strict=True))
    pred = sum(changed)
    n = Counter(gold)
    wrong = {
        cls: sum(g == cls and c for g, c in zip(gold, changed, strict=True)) / max(n[cls], 1)
        for cls in ("ELABORATION", "REWORDING")
    }
    return {
        "precision": tp / pred if pred else 1.0,
        "recall": tp / max(n["UPDATE"], 1),
        "elaborations_changed": wrong["ELABORATION"],
        "rewordings_changed": wrong["REWORDING"],
    }


def choose_threshold(
    p_update: np.ndarray, gold: Sequence[str], rules_label: Sequence[str]
) -> float:
    """The lowest threshold (the most recall) at which rules + classifier keep changed
    precision >= MIN_PRECISION and elaborations / rewordings changed <= MAX_WRONG_SHARE;
    1.0 (never) when none does."""
    for t in THRESHOLDS:
        changed = [
            lab == CHANGED or (lab == UNLABELED and p >= t)
            for p, lab in zip(p_update, rules_label, strict=True)
        ]
        f = figures(gold, changed)
        if (
            f["precision"] >= MIN_PRECISION
            and f["elaborations_changed"] <= MAX_WRONG_SHARE
            and f["rewordings_changed"] <= MAX_WRONG_SHARE
        ):
            return t
    return 1.0


def train(
    gold: Sequence[dict], synthetic: Sequence[dict], category: dict[str, str], *, seed: int = SEED
) -> dict:
    """Weights and threshold from featurized gold rows and synthetic rows (each a dict with
    ``title``, ``gold``, ``x``, ``rules_label``); the threshold by inner CV grouped by
    article over the gold rows (synthetic rows of the held-out articles left out too)."""
    gold = [g for g in gold if g["x"] is not None]
    synthetic = [s for s in synthetic if s["x"] is not None]
    titles = sorted({g["title"] for g in gold})
    p = np.zeros(len(gold))
    for fold in article_folds(titles, category, INNER_FOLDS, seed):
        fit_rows = [g for g in gold if g["title"] not in fold]
        fit_rows += [s for s in synthetic if s["title"] not in fold]
        weights = _fit_rows(fit_rows, seed)
        model = classifier_from_dict(weights, "inner")
        held = [k for k, g in enumerate(gold) if g["title"] in fold]
        if held:
            p[held] = model.update_probability(np.vstack([gold[k]["x"] for k in held]))
    threshold = choose_threshold(p, [g["gold"] for g in gold], [g["rules_label"] for g in gold])
    weights = _fit_rows([*gold, *synthetic], seed)
    weights["threshold"] = threshold
    return weights


def _fit_rows(rows: Sequence[dict], seed: int) -> dict:
    x = np.vstack([r["x"] for r in rows])
    w = np.array([SYNTHETIC_WEIGHT if r.get("synthetic") else 1.0 for r in rows])
    return fit(x, [r["gold"] for r in rows], w, seed=seed)


def cross_validate(
    gold: Sequence[dict], synthetic: Sequence[dict], category: dict[str, str], *, seed: int = SEED
) -> dict[str, Any]:
    """Out-of-fold decisions on the gold rows, :data:`CV_FOLDS` folds grouped by article,
    each fold's model trained by :func:`train` on the other folds (gold and synthetic rows of
    their articles): per variant ("rules", "rules+classifier", "classifier") the changed
    flags and :func:`figures`, and the out-of-fold P(UPDATE)."""
    gold = [g for g in gold if g["x"] is not None]
    titles = sorted({g["title"] for g in gold})
    p = np.zeros(len(gold))
    combined = [False] * len(gold)
    alone = [False] * len(gold)
    for fold in article_folds(titles, category, CV_FOLDS, seed):
        weights = train(
            [g for g in gold if g["title"] not in fold],
            [s for s in synthetic if s["title"] not in fold],
            category,
            seed=seed,
        )
        model = classifier_from_dict(weights, "cv")
        held = [k for k, g in enumerate(gold) if g["title"] in fold]
        x = np.vstack([gold[k]["x"] for k in held])
        for k, pk, cls in zip(held, model.update_probability(x), model.predict(x), strict=True):
            p[k] = pk
            lab = gold[k]["rules_label"]
            combined[k] = lab == CHANGED or (lab == UNLABELED and pk >= model.threshold)
            alone[k] = cls == "UPDATE"
    classes = [g["gold"] for g in gold]
    variants = {
        "rules": [g["rules_label"] == CHANGED for g in gold],
        "rules+classifier": combined,
        "classifier": alone,
    }
    return {
        "changed": variants,
        "figures": {
            v: {k: round(float(f), 4) for k, f in figures(classes, c).items()} | {"n": int(sum(c))}
            for v, c in variants.items()
        },
        "p_update": p,
    }


# --------------------------------------------------------------------------- the data
def training_data(labeler: SentenceLabeler, gold: Sequence[dict], workdir: Path) -> tuple:
    """Featurized gold rows and synthetic rows of the articles in ``gold``."""
    titles = sorted({g["title"] for g in gold})
    results = run_pairs(labeler, gold)
    gold_rows = [
        {"title": g["title"], "gold": g["gold"], "id": g["id"]} | r
        for g, r in zip(gold, results, strict=True)
    ]
    sentences = article_sentences(titles, workdir)
    texts = sorted({t for ts in sentences.values() for t in ts})
    spans = dict(zip(texts, labeler.facts.entity_spans_many(texts), strict=True))
    made = synthetic_pairs(sentences, spans)
    results = run_pairs(labeler, made)
    synth_rows = [s | r | {"synthetic": True} for s, r in zip(made, results, strict=True)]
    return gold_rows, synth_rows


def rules_labeler(workdir: Path) -> SentenceLabeler:
    """The default offline labeler, rules only (no judge, no classifier)."""
    from pipeline.config import load_config
    from pipeline.labeling.stage import make_labeler

    cfg = load_config(
        profile="offline", overrides={"align": {"update_judge": False, "update_classifier": False}}
    )
    labeler = make_labeler(cfg, workdir)
    labeler.embedder.embed(["warm up"])
    return labeler


def save_features(path: Path, gold_rows: Sequence[dict], synth_rows: Sequence[dict]) -> str:
    """Write the training features (gold and synthetic rows that reached the classifier);
    returns their digest."""
    rows = [r for r in [*gold_rows, *synth_rows] if r["x"] is not None]
    x = np.vstack([r["x"] for r in rows]).round(8)
    arrays = {
        "x": x,
        "gold": np.array([r["gold"] for r in rows]),
        "title": np.array([r["title"] for r in rows]),
        "rules_label": np.array([r["rules_label"] for r in rows]),
        "synthetic": np.array([bool(r.get("synthetic")) for r in rows]),
    }
    np.savez_compressed(path, **arrays)
    return features_digest(arrays)


def features_digest(arrays: dict[str, np.ndarray]) -> str:
    """sha256 over the training arrays (order-sensitive)."""
    h = hashlib.sha256()
    for key in ("x", "gold", "title", "rules_label", "synthetic"):
        h.update(key.encode())
        h.update(np.ascontiguousarray(arrays[key]).tobytes())
    return h.hexdigest()


def rows_from_features(path: Path) -> tuple[list[dict], list[dict]]:
    """Gold and synthetic rows back from :func:`save_features`' file."""
    data = np.load(path)
    gold_rows, synth_rows = [], []
    for k in range(len(data["gold"])):
        row = {
            "x": data["x"][k],
            "gold": str(data["gold"][k]),
            "title": str(data["title"][k]),
            "rules_label": str(data["rules_label"][k]),
            "synthetic": bool(data["synthetic"][k]),
        }
        (synth_rows if row["synthetic"] else gold_rows).append(row)
    return gold_rows, synth_rows


def main() -> None:
    from benchmarks.bench_changed import GOLD, split_by_article

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_WEIGHTS)
    parser.add_argument("--features", type=Path, default=FEATURES_FILE)
    parser.add_argument("--workdir", type=Path, help="keep the caches here")
    parser.add_argument(
        "--from-features", action="store_true", help="refit from --features (no models)"
    )
    args = parser.parse_args()
    gold = [json.loads(line) for line in GOLD.read_text().splitlines() if line.strip()]
    category = {g["title"]: g["category"] for g in gold}
    train_gold, _ = split_by_article(gold)
    if args.from_features:
        gold_rows, synth_rows = rows_from_features(args.features)
    else:
        workdir = args.workdir or Path(tempfile.mkdtemp(prefix="train_update_classifier_"))
        labeler = rules_labeler(workdir)
        gold_rows, synth_rows = training_data(labeler, train_gold, workdir)
        save_features(args.features, gold_rows, synth_rows)
        gold_rows, synth_rows = rows_from_features(args.features)  # exactly what is stored
    weights = train(gold_rows, synth_rows, category)
    cv = cross_validate(gold_rows, synth_rows, category)
    weights["cv"] = {
        "folds": CV_FOLDS,
        "figures": cv["figures"],
        "p_update_digest": hashlib.sha256(np.round(cv["p_update"], 6).tobytes()).hexdigest(),
    }
    data = np.load(args.features)
    weights["training"] = {
        "seed": SEED,
        "C": C,
        "synthetic_weight": SYNTHETIC_WEIGHT,
        "articles": sorted({r["title"] for r in gold_rows}),
        "gold_pairs": dict(sorted(Counter(r["gold"] for r in gold_rows).items())),
        "synthetic_pairs": dict(sorted(Counter(r["gold"] for r in synth_rows).items())),
        "features_digest": features_digest({k: data[k] for k in data.files}),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(weights, indent=1) + "\n")
    print(f"wrote {args.out}: threshold={weights['threshold']} " + json.dumps(weights["training"]))
    print("cv " + json.dumps(weights["cv"]["figures"]))


if __name__ == "__main__":
    main()
