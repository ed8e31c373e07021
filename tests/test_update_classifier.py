"""The update classifier (pipeline.update_classifier): its features on real gold pairs, the
packaged weights, their reproducible training, and the config switch on the labeling path."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.bench_changed import TEST_ARTICLES
from benchmarks.train_update_classifier import (
    FEATURES_FILE,
    cross_validate,
    features_digest,
    rows_from_features,
    synthetic_pairs,
    train,
)
from pipeline.config import load_config
from pipeline.errors import WikidriftError
from pipeline.labeling.align import PageSentences
from pipeline.labeling.changes import classify_pair
from pipeline.labeling.stage import make_labeler, plan_labels
from pipeline.schemas import CHANGED, UNLABELED
from pipeline.slots import compare_slots
from pipeline.text import sentence_hash
from pipeline.update_classifier import (
    DEFAULT_WEIGHTS,
    FEATURES,
    classifier_from_dict,
    load_update_classifier,
    pair_features,
)
from tests.conftest import REPO_ROOT

GOLD = REPO_ROOT / "benchmarks" / "data" / "changed_gold.jsonl"
# Real gold pairs of training articles: a count replaced (11 -> 13 countries) and a plan
# carried out ("will include iOS 17" -> "launched with iOS 17").
COUNT_REPLACED = "285292:2023-06-01:2024-01-01:48"
PLAN_CARRIED_OUT = "74806347:2023-06-01:2024-01-01:23"


def _gold(pair_id: str) -> dict:
    for line in GOLD.read_text().splitlines():
        row = json.loads(line)
        if row["id"] == pair_id:
            return row
    raise KeyError(pair_id)


def _features(row: dict, similarity: float = 0.9) -> dict[str, float]:
    slots = compare_slots(row["old"], row["new"])
    verdict = classify_pair(slots, similarity)
    x = pair_features(row["old"], row["new"], slots, similarity, verdict)
    assert x.shape == (len(FEATURES),)
    return dict(zip(FEATURES, x.tolist(), strict=True))


def test_features_of_a_replaced_count() -> None:
    f = _features(_gold(COUNT_REPLACED))
    assert f["replaced_number"] == 0.5 and f["replaced_time"] == 0.0
    assert f["rule_value_replaced"] == 1.0 and f["rule_status"] == 0.0
    assert f["planned_to_done"] == 0.0 and f["similarity"] == 0.9
    assert f["kept_old"] > 0.8


def test_features_of_a_plan_carried_out() -> None:
    f = _features(_gold(PLAN_CARRIED_OUT))
    assert f["planned_to_done"] == 1.0 and f["rule_status"] == 1.0
    assert f["replaced_number"] == f["replaced_time"] == f["replaced_entity"] == 0.0
    assert f["rule_value_replaced"] == 0.0


def test_packaged_weights_load_and_name_their_digest() -> None:
    model = load_update_classifier()
    digest = hashlib.sha256(DEFAULT_WEIGHTS.read_bytes()).hexdigest()
    assert model.model_id == f"update_classifier:{digest[:16]}"
    assert model.features == FEATURES and 0 < model.threshold <= 1
    p = model.probabilities(np.zeros((3, len(FEATURES))))
    assert p.shape == (3, 4) and np.allclose(p.sum(axis=1), 1.0)


def test_weights_of_other_features_are_refused(tmp_path: Path) -> None:
    data = json.loads(DEFAULT_WEIGHTS.read_text())
    data["features"] = data["features"][:-1]
    path = tmp_path / "w.json"
    path.write_text(json.dumps(data))
    with pytest.raises(WikidriftError, match="other features"):
        load_update_classifier(path)


def test_training_is_reproducible_and_gives_the_recorded_cv_figures() -> None:
    """Refit from the stored training features: the same weights, the same threshold, and
    the cross-validation figures the weights file records; no test article trained on."""
    stored = json.loads(DEFAULT_WEIGHTS.read_text())
    data = np.load(FEATURES_FILE)
    assert (
        features_digest({k: data[k] for k in data.files}) == (stored["training"]["features_digest"])
    )
    gold_rows, synth_rows = rows_from_features(FEATURES_FILE)
    assert not {r["title"] for r in [*gold_rows, *synth_rows]} & set(TEST_ARTICLES)
    category = {
        json.loads(line)["title"]: json.loads(line)["category"]
        for line in GOLD.read_text().splitlines()
    }
    weights = train(gold_rows, synth_rows, category)
    assert weights["threshold"] == stored["threshold"]
    assert np.allclose(weights["coef"], stored["coef"], atol=1e-5)
    assert np.allclose(weights["intercept"], stored["intercept"], atol=1e-5)
    cv = cross_validate(gold_rows, synth_rows, category)
    assert cv["figures"] == stored["cv"]["figures"]
    # The packaged model's decisions on the stored rows come back the same.
    model = load_update_classifier()
    refit = classifier_from_dict(weights)
    x = np.vstack([r["x"] for r in gold_rows])
    assert model.predict(x) == refit.predict(x)


def test_synthetic_pairs_are_deterministic_and_contrastive() -> None:
    sentences = {
        "Sony Music": [
            "Sony bought the company in 1991 and renamed it SME the same year.",
            "In 2019, the label signed 25 new artists across its regional divisions.",
            "The company is headquartered in New York City and employs 8,000 people.",
            "He said the label would expand its operations in Asia during 2020.",
        ]
    }
    a = synthetic_pairs(sentences, {}, seed=1)
    b = synthetic_pairs(sentences, {}, seed=1)
    assert a == b and a
    for pair in a:
        assert pair["old"] in sentences["Sony Music"] and pair["new"] != pair["old"]
        assert pair["gold"] in ("UPDATE", "ELABORATION", "REWORDING")


def _label(labeler, row: dict) -> tuple[str, str]:
    old, new = row["old"], row["new"]
    pages = (
        PageSentences(1, row["title"], 1, [old], [sentence_hash(old)]),
        PageSentences(1, row["title"], 2, [new], [sentence_hash(new)]),
    )
    rows, _ = labeler.label_pages([pages])
    (label,) = [r for r in rows if r.new_idx is not None]
    return label.label, label.rule


def test_the_config_switch_changes_labels_and_the_digest(
    tmp_path: Path, offline_embedder, stage_workdir: Path
) -> None:
    row = _gold(PLAN_CARRIED_OUT)
    on = make_labeler(
        load_config(profile="offline", overrides={"align": {"update_classifier": True}}),
        tmp_path / "on",
        embedder=offline_embedder,
    )
    off = make_labeler(
        load_config(profile="offline", overrides={"align": {"update_classifier": False}}),
        tmp_path / "off",
        embedder=offline_embedder,
    )
    assert on.classifier is not None and off.classifier is None
    assert _label(off, row) == (UNLABELED, "planned_to_done")
    # The packaged weights' threshold may be 1.0 (no threshold met the precision bar in
    # training); at a reachable one the unlabeled pair becomes the classifier's update.
    on.classifier = dataclasses.replace(on.classifier, threshold=0.0)
    assert _label(on, row) == (CHANGED, "classifier_update")
    job_on = plan_labels(stage_workdir, "2024-01-01", "2024-06-01", on)
    job_off = plan_labels(stage_workdir, "2024-01-01", "2024-06-01", off)
    assert job_on.models["update_classifier"] == on.classifier.model_id
    assert "update_classifier" not in job_off.models
    assert job_on.inputs_digest != job_off.inputs_digest


def test_faithful_mode_never_uses_the_classifier(tmp_path: Path, offline_embedder) -> None:
    cfg = load_config(
        profile="offline", overrides={"align": {"update_classifier": True, "faithful": True}}
    )
    assert make_labeler(cfg, tmp_path, embedder=offline_embedder).classifier is None
