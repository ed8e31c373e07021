"""Fixtures of the annotation server tests (test_store, test_api, test_old_articles,
test_server): a sampled release and a running server over a private copy of it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.annotate.sample import sample_tasks
from pipeline.annotate.server import AnnotationServer
from tests.annotate import RELEASE, copy_release_dir


@pytest.fixture(scope="module")
def sampled_root(released_workdir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An annotations root with 9 tasks of RELEASE, 6 new and its 3 changed (read-only:
    tests copy it)."""
    root = tmp_path_factory.mktemp("annotations")
    sample_tasks(released_workdir, RELEASE, per_label=6, seed=4, annotations_root=root)
    return root


@pytest.fixture
def root(sampled_root: Path, tmp_path: Path) -> Path:
    """A private copy of the sampled annotations root."""
    return copy_release_dir(sampled_root, tmp_path / "ann")


@pytest.fixture
def server(released_workdir: Path, root: Path) -> Iterator[AnnotationServer]:
    """A running server on a free port."""
    with AnnotationServer(released_workdir, RELEASE, annotations_root=root, port=0) as srv:
        yield srv
