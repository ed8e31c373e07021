"""wikidrift: growing benchmarks of real-world knowledge change from Wikipedia snapshots.

The package carries its data: ``pipeline/prompts`` (prompt templates) and ``pipeline/data``
(default config, paper config, article list, the ``make run`` sample). In the repository they
are links to the top-level ``prompts/`` and ``data/`` folders; a wheel holds copies.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def package_path(*parts: str) -> Path:
    """A file or folder shipped inside the package, found through ``importlib.resources``.
    Wheels install as plain folders, so the resource is a real path that sources and the
    prompt loader can open like any other."""
    return Path(str(resources.files(__name__).joinpath(*parts)))
