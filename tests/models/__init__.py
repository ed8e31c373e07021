"""Tests of pipeline.models: embedders, NLI classifiers and their on-disk caches."""
