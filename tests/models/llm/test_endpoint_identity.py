"""Secrets and cache keys follow the endpoint (issue 13): the OpenAI key only goes to OpenAI's
API over https or to a trusted base_url; cached answers only come back for the server (and the
model it serves) that gave them. Real HTTP to local servers on 127.0.0.1."""

from __future__ import annotations

import json
import logging
import socket
from pathlib import Path

import pytest

from pipeline.errors import ConfigError
from pipeline.models.llm.base import LLMRequest
from pipeline.models.llm.cache import CachedLLM, LLMCallCache
from pipeline.models.llm.openai_backend import (
    LOCAL_API_KEY,
    OpenAIBackend,
    endpoint_address,
    resolve_api_key,
)
from pipeline.models.llm.scripted import ScriptedBackend
from tests.servers.openai_server import OpenAIServer

SECRET = "sk-proj-secret-0123456789"


def _request(i: int) -> LLMRequest:
    return LLMRequest(
        messages=({"role": "user", "content": f"question {i}"},),
        prompt_hash="tmpl-1",
        purpose="qa_new",
        json_schema={"type": "object"},
    )


def _auth(server: OpenAIServer) -> set[str]:
    return {r.headers.get("authorization", "") for r in server.requests}


def _dead_url() -> str:
    """A local port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


# --------------------------------------------------------------------------- the API key


def test_key_is_withheld_from_plain_http(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    caplog.set_level(logging.WARNING)
    with OpenAIServer() as server:
        backend = OpenAIBackend("gpt-4o-mini", base_url=server.url, max_retries=0)
        [answer] = backend.complete_many([_request(1)])
    assert answer.error is None  # a local server needs no key
    assert _auth(server) == {f"Bearer {LOCAL_API_KEY}"}
    assert not any(SECRET in str(r.headers) for r in server.requests)
    assert "withheld" in caplog.text and "trust_base_url" in caplog.text


def test_explicit_key_is_withheld_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with OpenAIServer() as server:
        backend = OpenAIBackend("gpt-4o-mini", base_url=server.url, api_key=SECRET)
        backend.complete_many([_request(1)])
    assert _auth(server) == {f"Bearer {LOCAL_API_KEY}"}


def test_trusted_base_url_receives_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    with OpenAIServer() as server:
        backend = OpenAIBackend("gpt-4o-mini", base_url=server.url, trust_base_url=True)
        backend.complete_many([_request(1)])
    assert _auth(server) == {f"Bearer {SECRET}"}


@pytest.mark.parametrize(
    ("base_url", "sent"),
    [
        (None, SECRET),  # OpenAI's API
        ("https://api.openai.com/v1", SECRET),
        ("https://example.org/v1", LOCAL_API_KEY),  # https, but not OpenAI: not its key
        ("http://10.0.0.5:8000/v1", LOCAL_API_KEY),
        ("http://user:pw@localhost:8000/v1", LOCAL_API_KEY),
    ],
)
def test_where_the_key_goes(base_url: str | None, sent: str) -> None:
    assert resolve_api_key(SECRET, base_url) == sent
    assert resolve_api_key(SECRET, base_url, trusted=True) == SECRET


def test_openai_over_plain_http_is_refused() -> None:
    with pytest.raises(ConfigError, match="plain http"):
        resolve_api_key(SECRET, "http://api.openai.com/v1")


# --------------------------------------------------------------------------- the cache key


def test_dead_endpoint_is_not_answered_from_another_servers_cache(tmp_path: Path) -> None:
    cache = LLMCallCache(tmp_path / "llm.db")
    requests = [_request(i) for i in range(5)]
    with OpenAIServer() as server:
        first = CachedLLM(OpenAIBackend("gpt-4o-mini", base_url=server.url), cache)
        assert all(r.error is None for r in first.complete_many(requests))
    dead = OpenAIBackend("gpt-4o-mini", base_url=_dead_url(), max_retries=0)
    second = CachedLLM(dead, cache)
    answers = second.complete_many(requests)
    assert second.hits == 0 and second.calls_made == 5
    assert all(a.error is not None and not a.cached for a in answers)


def test_same_server_hits_and_provenance_names_what_answered(tmp_path: Path) -> None:
    cache = LLMCallCache(tmp_path / "llm.db")
    with OpenAIServer() as server:
        # A llama.cpp-like server: one model, whatever name the client asks for.
        server.models = ["qwen2.5-7b-instruct"]
        backend = OpenAIBackend("gpt-4o-mini", base_url=server.url)
        first = CachedLLM(backend, cache)
        [fresh] = first.complete_many([_request(1)])
        again = CachedLLM(OpenAIBackend("gpt-4o-mini", base_url=server.url), cache)
        [hit] = again.complete_many([_request(1)])
        address = endpoint_address(server.url)
        assert again.hits == 1 and hit.cached
        assert first.model == "qwen2.5-7b-instruct"
        assert first.provenance == f"openai:qwen2.5-7b-instruct@{address}"
        assert fresh.meta["endpoint"] == hit.meta["endpoint"] == first.provenance
        key = _request(1).cache_key("openai", "qwen2.5-7b-instruct", address)
        assert first.key(_request(1)) == key and key in cache

        # The same address serving another model is another endpoint.
        server.models = ["llama-3.1-8b"]
        swapped = CachedLLM(OpenAIBackend("gpt-4o-mini", base_url=server.url), cache)
        swapped.complete_many([_request(1)])
        assert swapped.hits == 0 and swapped.model == "llama-3.1-8b"


def test_configured_model_listed_by_the_server_is_kept(tmp_path: Path) -> None:
    with OpenAIServer() as server:
        server.models = ["gpt-4o", "gpt-4o-mini"]
        llm = CachedLLM(
            OpenAIBackend("gpt-4o-mini", base_url=server.url), LLMCallCache(tmp_path / "llm.db")
        )
        assert llm.model == "gpt-4o-mini"


def test_in_process_backends_keep_their_cache_keys(tmp_path: Path) -> None:
    """Caches written before endpoint identities still match for local models."""
    request = LLMRequest(
        messages=({"role": "user", "content": "q"},), prompt_hash="t", purpose="qa_new"
    )
    # The key this request had before issue 13 (computed on the old code).
    old = "2867452ad2d9da9108a0630cfd386d4ab5cea062e2bddbe997d00c5cbd0aa33c"
    llm = CachedLLM(
        ScriptedBackend(lambda r: json.dumps({}), model="m"), LLMCallCache(tmp_path / "llm.db")
    )
    assert request.cache_key("scripted", "m") == old
    assert llm.key(request) == old and llm.provenance == "scripted:m"


def test_trust_base_url_in_the_config_reaches_the_backend(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from pipeline.config import Config
    from pipeline.runtime import llm_from_config

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    for trusted, key in ((False, LOCAL_API_KEY), (True, SECRET)):
        with OpenAIServer() as server:
            cfg = Config.model_validate(
                {"llm": {"backend": "openai", "base_url": server.url, "trust_base_url": trusted}}
            )
            llm_from_config(cfg, tmp_path / str(trusted)).backend.complete_many([_request(1)])
        assert _auth(server) == {f"Bearer {key}"}
