"""A host that does not resolve fails at once with advice; a resolver outage is retried.

Name resolution is made to fail through ``socket.getaddrinfo`` for one made-up host (whatever
DNS the test machine has), so requests and urllib3 take their real failure path.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
import requests
from prefect.states import Failed

from flows.monthly import worth_retrying
from pipeline.errors import ConfigError, SourceError, UnknownHostError
from pipeline.sources import ArticleSelection
from pipeline.sources.dump_client import DumpClient
from pipeline.sources.dumps import DumpSource
from pipeline.sources.mediawiki_api import MediaWikiClient
from pipeline.sources.network import host_does_not_resolve

HOST = "wikidrift-test.invalid"
UA = "wikidrift-tests/0.1 (https://example.org/wikidrift; tests@example.org)"


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """``resolver["code"]`` is the getaddrinfo error HOST gets; other hosts resolve normally."""
    real = socket.getaddrinfo
    behaviour = {"code": socket.EAI_NONAME, "calls": 0}

    def getaddrinfo(host, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if host == HOST:
            behaviour["calls"] += 1
            raise socket.gaierror(behaviour["code"], "name resolution failed (test)")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield behaviour


def _failure(url: str) -> requests.RequestException:
    with pytest.raises(requests.RequestException) as info:
        requests.get(url, timeout=5)
    return info.value


def test_unknown_name_is_recognized_through_requests(resolver: dict[str, int]) -> None:
    assert host_does_not_resolve(_failure(f"http://{HOST}/w/api.php"))
    resolver["code"] = socket.EAI_AGAIN  # the resolver is down: that may pass
    assert not host_does_not_resolve(_failure(f"http://{HOST}/w/api.php"))
    with socket.socket() as s:  # a port nobody listens on: refused, not unresolvable
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert not host_does_not_resolve(_failure(f"http://127.0.0.1:{port}/"))


def test_api_gives_up_at_once_with_advice(resolver: dict[str, int]) -> None:
    sleeps: list[float] = []
    client = MediaWikiClient(f"http://{HOST}/w/api.php", user_agent=UA, sleep=sleeps.append)
    with (
        client,
        pytest.raises(UnknownHostError, match=rf"cannot resolve host '{HOST}'.*revisions-dir"),
    ):
        client.revision_at("3M", snapshot_date=date(2024, 1, 1))
    assert sleeps == [] and resolver["calls"] == 1


def test_api_retries_a_resolver_outage(resolver: dict[str, int]) -> None:
    resolver["code"] = socket.EAI_AGAIN
    sleeps: list[float] = []
    client = MediaWikiClient(
        f"http://{HOST}/w/api.php", user_agent=UA, sleep=sleeps.append, max_retries=2
    )
    with client, pytest.raises(SourceError, match="after 3 attempts") as info:
        client.revision_at("3M", snapshot_date=date(2024, 1, 1))
    assert not isinstance(info.value, UnknownHostError)
    assert len(sleeps) == 2 and resolver["calls"] == 3


def test_dump_download_gives_up_at_once(resolver: dict[str, int], tmp_path: Path) -> None:
    sleeps: list[float] = []
    client = DumpClient(
        f"http://{HOST}/",
        "enwiki",
        "20240601",
        cache_dir=tmp_path,
        user_agent=UA,
        sleep=sleeps.append,
    )
    with client, pytest.raises(UnknownHostError, match="dump download: cannot resolve"):
        list(DumpSource(client=client).iter_revisions(ArticleSelection(page_ids=(1,))))
    assert sleeps == [] and resolver["calls"] == 1


def test_flow_tasks_do_not_retry_what_cannot_pass() -> None:
    assert not worth_retrying(None, None, Failed(data=UnknownHostError("no such host")))
    assert not worth_retrying(None, None, Failed(data=ConfigError("bad value")))
    assert worth_retrying(None, None, Failed(data=SourceError("HTTP 503 after 7 tries")))
