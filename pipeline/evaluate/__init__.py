"""Evaluation harness: score models on a release, per item type and per release.

- :mod:`pipeline.evaluate.corpus`: the retrieval corpus (paragraphs of the release's snapshot
  and of every earlier one, each with its dates).
- :mod:`pipeline.evaluate.retrievers`: BM25, dense and temporal retrievers.
- :mod:`pipeline.evaluate.metrics`: EM, F1, list answers, BLEU, outdated-answer rate,
  evidence recall@k, interval accuracy (pure functions).
- :mod:`pipeline.evaluate.harness`: items -> retrieval -> model calls (cached) -> scores.
- :mod:`pipeline.evaluate.report`: ``results.json`` / ``results.md``, leaderboard, plot.
- :mod:`pipeline.evaluate.lmeval`: lm-evaluation-harness task YAMLs for the HF export.
"""

from pipeline.evaluate.harness import EVALUATED_TABLES, EvalRun, ItemFilter, evaluate_release
from pipeline.evaluate.retrievers import RETRIEVERS

__all__ = ["EVALUATED_TABLES", "RETRIEVERS", "EvalRun", "ItemFilter", "evaluate_release"]
