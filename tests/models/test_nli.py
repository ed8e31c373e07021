"""NLI classifiers on real (tiny, randomly initialized) sequence-classification checkpoints."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, BertForSequenceClassification

from pipeline.errors import ConfigError, WikidriftError
from pipeline.models.nli import (
    CachedNLIClassifier,
    HFNLIClassifier,
    NLIClassifier,
    NLIResult,
    ScriptedNLIClassifier,
    load_nli,
)
from pipeline.models.vector_cache import ResultCache
from tests.models.conftest import ID2LABEL, save_tiny_classifier

pytestmark = pytest.mark.slow

PAIRS = [
    ("The bridge opened in 1932.", "The bridge opened in 1932."),
    ("The bridge opened in 1932.", "The bridge opened in 1935."),
    ("Its population was 12,000 in 2010.", "The town hosts a yearly jazz festival in July."),
    ("A.", "B."),
    (
        "The museum, founded in 1870 by a group of merchants and artists, holds over two million "
        "works spanning five thousand years.",
        "The museum holds two million works.",
    ),
]


@pytest.fixture(scope="module")
def tiny_nli(tiny_nli_dir: Path) -> HFNLIClassifier:
    classifier = HFNLIClassifier(tiny_nli_dir, batch_size=2)
    classifier.load()
    return classifier


def _reference_probs(folder: Path, pair: tuple[str, str]) -> np.ndarray:
    """Softmax of one unpadded pair, straight through transformers, in the model's order."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = BertForSequenceClassification.from_pretrained(folder).eval()
    with torch.inference_mode():
        logits = model(**tokenizer(pair[0], pair[1], return_tensors="pt")).logits
    return torch.softmax(logits, dim=-1)[0].numpy()


def test_classify_maps_labels_by_name(tiny_nli: HFNLIClassifier, tiny_nli_dir: Path) -> None:
    results = tiny_nli.classify(PAIRS)
    assert isinstance(tiny_nli, NLIClassifier)
    assert len(results) == len(PAIRS)
    assert tiny_nli.model_id == str(tiny_nli_dir)
    for pair, result in zip(PAIRS, results, strict=True):
        probs = np.array([result.entailment, result.neutral, result.contradiction])
        assert np.all((probs >= 0) & (probs <= 1))
        assert probs.sum() == pytest.approx(1.0, abs=1e-6)
        ref = _reference_probs(tiny_nli_dir, pair)  # index 0 = CONTRADICTION, 2 = ENTAILMENT
        assert result.contradiction == pytest.approx(float(ref[0]), abs=1e-5)
        assert result.neutral == pytest.approx(float(ref[1]), abs=1e-5)
        assert result.entailment == pytest.approx(float(ref[2]), abs=1e-5)
        assert result.label == ID2LABEL[int(np.argmax(ref))].lower()


def test_batch_size_does_not_change_probabilities(
    tiny_nli: HFNLIClassifier, tiny_nli_dir: Path
) -> None:
    small = tiny_nli.classify(PAIRS)
    big = HFNLIClassifier(tiny_nli_dir, batch_size=16).classify(PAIRS)
    for a, b in zip(small, big, strict=True):
        np.testing.assert_allclose(
            list(a.as_dict().values()), list(b.as_dict().values()), atol=1e-5
        )
    before = tiny_nli.pairs_classified
    tiny_nli.classify(PAIRS[:2])
    assert tiny_nli.pairs_classified - before == 2
    assert tiny_nli.classify([]) == []


def test_unnamed_labels_fail_clearly(tmp_path: Path) -> None:
    folder = save_tiny_classifier(tmp_path, None)  # LABEL_0, LABEL_1, LABEL_2
    with pytest.raises(WikidriftError, match="LABEL_0.*label_map"):
        HFNLIClassifier(folder).classify(PAIRS[:1])
    override = {0: "entailment", 1: "neutral", 2: "contradiction"}
    result = HFNLIClassifier(folder, label_map=override).classify(PAIRS[:1])[0]
    ref = _reference_probs(folder, PAIRS[0])
    assert result.entailment == pytest.approx(float(ref[0]), abs=1e-5)
    with pytest.raises(WikidriftError, match="cannot map"):
        HFNLIClassifier(folder, label_map={0: "entailment", 1: "neutral", 2: "neutral"})
    with pytest.raises(WikidriftError, match="cannot map"):
        HFNLIClassifier(folder, label_map={0: "entailment", 1: "neutral"})
    bad_index = {0: "entailment", 1: "neutral", 7: "contradiction"}
    with pytest.raises(WikidriftError, match="does not match the 3 outputs"):
        HFNLIClassifier(folder, label_map=bad_index).classify(PAIRS[:1])


def test_cached_classifier_avoids_recomputation(tiny_nli: HFNLIClassifier, tmp_path: Path) -> None:
    path = tmp_path / "nli.sqlite"
    cached = CachedNLIClassifier(tiny_nli, ResultCache(path))
    start = tiny_nli.pairs_classified
    first = cached.classify([*PAIRS, PAIRS[0]])
    assert tiny_nli.pairs_classified - start == len(PAIRS)  # the repeated pair ran once
    assert (cached.hits, cached.misses) == (0, len(PAIRS))
    assert first[0] == first[-1]

    again = CachedNLIClassifier(tiny_nli, ResultCache(path)).classify(PAIRS[::-1])
    assert tiny_nli.pairs_classified - start == len(PAIRS)
    assert again == first[: len(PAIRS)][::-1]  # JSON round trip keeps floats exact

    swapped = cached.classify([(PAIRS[1][1], PAIRS[1][0])])  # direction matters
    assert tiny_nli.pairs_classified - start == len(PAIRS) + 1
    assert cached.pairs_classified == len(PAIRS) + 1
    assert len(swapped) == 1


def test_scripted_classifier_from_table_and_callable(tmp_path: Path) -> None:
    table = ScriptedNLIClassifier({("a", "b"): "entailment", ("a", "c"): "CONTRADICTION"})
    results = table.classify([("a", "b"), ("a", "c"), ("x", "y")])
    assert [r.label for r in results] == ["entailment", "contradiction", "neutral"]
    assert table.seen == [("a", "b"), ("a", "c"), ("x", "y")]
    assert table.pairs_classified == 3
    assert isinstance(table, NLIClassifier)

    def same_first_word(premise: str, hypothesis: str) -> NLIResult | str:
        return "entailment" if premise.split()[0] == hypothesis.split()[0] else "neutral"

    rule = ScriptedNLIClassifier(same_first_word, model_id="first-word")
    cached = CachedNLIClassifier(rule, ResultCache(tmp_path / "r.sqlite"))
    pairs = [("Paris is big", "Paris grew"), ("Rome is old", "Oslo is cold")]
    assert [r.label for r in cached.classify(pairs)] == ["entailment", "neutral"]
    assert [r.label for r in cached.classify(pairs)] == ["entailment", "neutral"]
    assert rule.pairs_classified == 2 and cached.hits == 2

    custom = ScriptedNLIClassifier({}, default=NLIResult(0.2, 0.3, 0.5))
    assert custom.classify([("p", "h")])[0].label == "contradiction"


def test_nli_result_helpers() -> None:
    assert NLIResult.certain("Neutral") == NLIResult(0.0, 1.0, 0.0)
    assert NLIResult(0.5, 0.2, 0.3).label == "entailment"
    assert NLIResult(0.1, 0.2, 0.7).as_dict() == {
        "entailment": 0.1,
        "neutral": 0.2,
        "contradiction": 0.7,
    }
    with pytest.raises(ValueError):
        NLIResult.certain("maybe")
    with pytest.raises(TypeError):
        ScriptedNLIClassifier({}).classify([("only premise",)])  # type: ignore[list-item]


def test_load_nli_specs(tiny_nli_dir: Path) -> None:
    assert load_nli(None) is None
    assert load_nli("") is None
    assert load_nli(" None ") is None
    classifier = load_nli(str(tiny_nli_dir), batch_size=4)
    assert isinstance(classifier, HFNLIClassifier) and classifier.batch_size == 4
    assert isinstance(load_nli(f"hf:{tiny_nli_dir}"), HFNLIClassifier)
    with pytest.raises(ConfigError):
        load_nli("hf:")
    offline = load_nli("wikidrift-tests/no-such-nli-model")
    assert offline is not None
    with pytest.raises(WikidriftError, match="no-such-nli-model.*HF cache"):
        offline.classify(PAIRS[:1])
