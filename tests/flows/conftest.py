"""One Prefect test harness per session (a temporary server and database), and a local
OpenAI-compatible server answering with the scripted LLM, shared by the flow tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from flows.runner import configure_prefect

configure_prefect()


@pytest.fixture(scope="session")
def prefect_harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Prefect on a temporary home and server for the whole session (startup ~8 s)."""
    os.environ["PREFECT_HOME"] = str(tmp_path_factory.mktemp("prefect_home"))
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=90):
        yield


@pytest.fixture(scope="session")
def llm_server() -> Iterator[object]:
    """A local OpenAI-compatible server whose answers come from tests/scripted_llm.py."""
    from tests.scripted_llm import openai_responder
    from tests.servers.openai_server import OpenAIServer

    with OpenAIServer(openai_responder) as server:
        yield server


def flow_config(workdir: Path, llm_server: object, **sections: dict) -> dict:
    """An offline-profile config for the flows: wikisnap as the source, three articles, the
    scripted OpenAI-compatible server as the LLM."""
    from pipeline.config import load_config
    from tests.conftest import SCRIPTED_GENERATION, SCRIPTED_TEMPORAL, WIKISNAP

    articles = workdir.parent / "articles.txt"
    articles.write_text("Sam Altman\nDenver Nuggets\nSony Music\n")
    # Built-in defaults, not the demo's data/wikidrift.toml (the CLI test's own file has none).
    no_file = workdir.parent / "defaults.toml"
    no_file.write_text("")
    overrides = {
        "workdir": str(workdir),
        "snapshot": {
            "source": "revisions-dir",
            "input": str(WIKISNAP),
            "articles": str(articles),
            "shard_size": 2,
        },
        "llm": {"backend": "openai", "base_url": llm_server.url, "max_concurrency": 2},
        "generation": dict(SCRIPTED_GENERATION),
        "temporal": dict(SCRIPTED_TEMPORAL),
        # The judge's path through the flow is tested (tests marked update_judge keep it).
        "align": {"update_judge": True},
    }
    for name, values in sections.items():
        overrides.setdefault(name, {}).update(values)
    return load_config(no_file, profile="offline", overrides=overrides).model_dump(mode="json")
