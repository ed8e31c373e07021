"""Sentence labels between two snapshots (GrowOVER's unchanged / changed / new).

- :mod:`pipeline.labeling.stage`: the labeling stage (two snapshots in, ``labels/<old>__<new>/``
  out), its shards, cache and done-marker;
- :mod:`pipeline.labeling.align`: the labeler (SimCSE similarity, NLI, the word alignment's
  decisions, the update judge and classifier), batched per page;
- :mod:`pipeline.labeling.growover_matcher`: the reference method's matching and thresholds, the
  ``--faithful`` decisions exactly;
- :mod:`pipeline.labeling.changes`: the step-3 decisions on a pair (a value replaced, a
  rewording, an elaboration, a status change) and the update judge's question.
"""
