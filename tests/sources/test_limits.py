"""Every input bounded (issue 13): bz2 bombs, oversize pages, gzip bombs, dripping servers and
cross-host redirects, against real files and real HTTP servers on 127.0.0.1.

Over a limit, a page or stream is skipped and listed as not delivered; the run goes on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import tracemalloc
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from pipeline.errors import SourceError
from pipeline.sources import ArticleSelection
from pipeline.sources.dump_client import DumpClient
from pipeline.sources.dumps import DumpSource, iter_dump_file
from pipeline.sources.limits import DEFAULT_LIMITS, SourceLimits
from pipeline.sources.local import RevisionsDirSource
from pipeline.sources.mediawiki_api import MediaWikiApiSource, MediaWikiClient
from tests.conftest import REPO_ROOT
from tests.servers.dump_server import (
    BuiltDump,
    DumpServer,
    build_bomb_dump,
    build_multistream_dump,
    wikisnap_revisions,
)
from tests.servers.mediawiki_api_server import MediaWikiApiServer

UA = "wikidrift-tests/0.1 (https://example.org/wikidrift; tests@example.org)"
BOMB_ID, BOMB_TITLE = 5, "Bomb"
# Past the default per-page (32 MiB) and per-stream (256 MiB) limits.
BOMB_BYTES = 300 << 20
MiB = 1 << 20


@pytest.fixture(scope="module")
def three(wikisnap_dir: Path) -> list[dict[str, Any]]:
    """Three real wikisnap articles (2024-06-01)."""
    return wikisnap_revisions(wikisnap_dir, "2024-06-01")[:3]


@pytest.fixture(scope="module")
def bomb(tmp_path_factory: pytest.TempPathFactory, three: list[dict[str, Any]]) -> BuiltDump:
    """A real multistream dump of three articles plus one bz2 stream of a few hundred bytes
    that inflates to 300 MiB (generated here: no binary is committed)."""
    return build_bomb_dump(
        three,
        tmp_path_factory.mktemp("bomb"),
        bomb_page_id=BOMB_ID,
        bomb_title=BOMB_TITLE,
        inflated_bytes=BOMB_BYTES,
    )


def _ids(three: list[dict[str, Any]]) -> set[int]:
    return {int(r["page_id"]) for r in three}


def _selection(three: list[dict[str, Any]]) -> ArticleSelection:
    return ArticleSelection(page_ids=(BOMB_ID, *sorted(_ids(three))))


# --------------------------------------------------------------------------- bz2 bombs


def test_bomb_fixture_is_a_bomb(bomb: BuiltDump) -> None:
    stream = bomb.stream_offsets.index(bomb.page_offsets[BOMB_ID])
    end = bomb.stream_offsets[stream + 1]
    assert end - bomb.page_offsets[BOMB_ID] < 4096  # a few KB inflating to 300 MiB


def test_local_bomb_stream_is_skipped_the_rest_delivered(
    bomb: BuiltDump, three: list[dict[str, Any]]
) -> None:
    source = DumpSource.local(bomb.data)
    tracemalloc.start()
    try:
        revs = list(source.iter_revisions(_selection(three)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert {r.page_id for r in revs} == _ids(three)
    (entry,) = source.not_delivered()
    assert entry.startswith(f"{BOMB_TITLE} (page XML over the ") and "limit" in entry
    assert peak < 100 * MiB, f"peak {peak / MiB:.0f} MiB on a 300 MiB bomb"


def test_local_bomb_without_index_stops_reading_at_it(
    bomb: BuiltDump, three: list[dict[str, Any]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # No index beside it: one streaming pass over the whole file, which a bomb can only be
    # passed by inflating; at 256 MiB (limits.max_stream_bytes) and 1000x, reading stops.
    lone = tmp_path / "dump.xml.bz2"
    lone.symlink_to(bomb.data)
    source = DumpSource.local(lone)
    tracemalloc.start()
    try:
        revs = list(source.iter_revisions(ArticleSelection()))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert {r.page_id for r in revs} == {i for i in _ids(three) if i < BOMB_ID}
    assert "limits.max_inflation_ratio" in caplog.text
    assert peak < 150 * MiB, f"peak {peak / MiB:.0f} MiB on a 300 MiB bomb"


def test_whole_file_read_stops_at_a_bomb_past_its_inflation_bound(
    bomb: BuiltDump, three: list[dict[str, Any]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Without an index a bomb can only be passed by inflating it, which takes time without
    bound: past limits.max_stream_bytes at a bomb's ratio, reading stops with a warning."""
    lone = tmp_path / "dump.xml.bz2"
    lone.symlink_to(bomb.data)
    small = SourceLimits(max_stream_bytes=8 * MiB, max_page_xml_bytes=4 * MiB)
    start = time.monotonic()
    revs = list(iter_dump_file(lone, ArticleSelection(), None, limits=small, verify_sha1=False))
    elapsed = time.monotonic() - start
    # the pages before the bomb arrive; the bomb and what follows it do not
    before = {i for i in _ids(three) if i < BOMB_ID}
    assert {r.page_id for r in revs} == before
    assert "limits.max_inflation_ratio" in caplog.text and "not delivered" in caplog.text
    # 8 MiB inflated of 300
    assert elapsed < 30, f"{elapsed:.1f} s"
    # real dumps stay far below the ratio: the default bound never stops the fixture's pages
    assert SourceLimits().max_inflation_ratio >= 100


def test_a_page_of_many_tiny_revisions_stays_flat(tmp_path: Path) -> None:
    """Each finished revision resets the per-page byte count, so only detaching it from its
    page bounds memory: 10 million tiny revisions (a 230 KB bz2 file) held 1.25 GB before."""
    n = 150_000
    revision = "<revision><id>1</id><timestamp>2024-01-01T00:00:00Z</timestamp><text>x</text>"
    path = tmp_path / "revisions.xml"
    with path.open("w", encoding="utf-8") as fh:
        fh.write("<mediawiki><page><title>Many</title><ns>0</ns><id>7</id>\n")
        for _ in range(n // 1000):
            fh.write(f"{revision}</revision>" * 1000)
        fh.write("</page></mediawiki>\n")
    tracemalloc.start()
    try:
        revs = list(iter_dump_file(path, ArticleSelection(), None, verify_sha1=False))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [r.page_id for r in revs] == [7]
    # Kept in the tree, the cleared revisions alone took over 10 MiB here.
    assert peak < 6 * MiB, f"peak {peak / MiB:.1f} MiB for {n} revisions of one page"


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_bomb_peak_memory_in_a_fresh_process(bomb: BuiltDump, three: list[dict]) -> None:
    """RSS, not only Python allocations: the C decompressor and parser count too."""
    ids = sorted(_ids(three) | {BOMB_ID})
    code = textwrap.dedent(
        f"""
        import json
        from pipeline.sources import ArticleSelection
        from pipeline.sources.dumps import DumpSource
        src = DumpSource.local({str(bomb.data)!r})
        revs = list(src.iter_revisions(ArticleSelection(page_ids={tuple(ids)!r})))
        # VmHWM: this process's own peak (ru_maxrss keeps the parent's across fork + exec).
        hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0]
        rss = int(hwm.split()[1]) * 1024
        print(json.dumps({{"yielded": len(revs), "rss": rss, "skipped": src.not_delivered()}}))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env
    )
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"\npeak RSS reading a 300 MiB bz2 bomb: {result['rss'] / MiB:.0f} MiB")
    assert result["yielded"] == 3 and len(result["skipped"]) == 1
    assert result["rss"] < 400 * MiB


def test_stream_limit_skips_the_stream(bomb: BuiltDump, three: list[dict[str, Any]]) -> None:
    limits = SourceLimits(max_stream_bytes=8 * MiB, max_page_xml_bytes=16 * MiB)
    source = DumpSource.local(bomb.data, limits=limits)
    revs = list(source.iter_revisions(_selection(three)))
    assert {r.page_id for r in revs} == _ids(three)
    (entry,) = source.not_delivered()
    assert "inflates past the 8388608 byte limit" in entry


def test_remote_bomb_stream_is_skipped(
    bomb: BuiltDump, three: list[dict[str, Any]], tmp_path: Path
) -> None:
    with DumpServer(bomb.root) as server:
        client = DumpClient(
            server.base_url, bomb.wiki, bomb.dump_date, cache_dir=tmp_path, user_agent=UA
        )
        with client:
            source = DumpSource(client=client)
            revs = list(source.iter_revisions(_selection(three)))
    assert {r.page_id for r in revs} == _ids(three)
    assert [e.split(" (")[0] for e in source.not_delivered()] == [BOMB_TITLE]


def test_oversize_wikitext_page_is_skipped(
    three: list[dict[str, Any]], tmp_path: Path, wikisnap_dir: Path
) -> None:
    big = dict(three[0], page_id=6, title="Huge", content="x" * (2 * MiB))
    dump = build_multistream_dump([*three, big], tmp_path, pages_per_stream=2)
    limits = SourceLimits(max_wikitext_bytes=1 * MiB)
    source = DumpSource.local(dump.data, limits=limits)
    revs = list(source.iter_revisions(ArticleSelection(page_ids=(6, *_ids(three)))))
    assert {r.page_id for r in revs} == _ids(three)
    (entry,) = source.not_delivered()
    assert entry.startswith("Huge (wikitext of revision") and "max_wikitext_bytes" in entry
    # The same page from a revisions folder: skipped the same way.
    folder = tmp_path / "wikisnap" / "revisions" / "6"
    folder.mkdir(parents=True)
    (folder / "2024-06-01.json").write_text(json.dumps(big))
    local = RevisionsDirSource(tmp_path / "wikisnap", limits=limits)
    assert list(local.iter_revisions(ArticleSelection(), date(2024, 6, 1))) == []
    assert local.not_delivered() == [
        f"page 6 (wikitext {2 * MiB} bytes, over the {MiB} byte limit: limits.max_wikitext_bytes)"
    ]


def test_bomb_snapshot_lists_the_page_as_not_delivered(
    bomb: BuiltDump, three: list[dict[str, Any]], tmp_path: Path, splitter: Any
) -> None:
    from pipeline.snapshot import build_snapshot

    summary = build_snapshot(
        DumpSource.local(bomb.data),
        _selection(three),
        date(2024, 6, 1),
        tmp_path / "work",
        splitter=splitter,
        source_description=f"dump:{bomb.data}",
    )
    assert summary.articles == 3
    assert len(summary.not_delivered) == 1 and summary.not_delivered[0].startswith(
        f"{BOMB_TITLE} ("
    )


def test_index_line_without_end_is_refused(tmp_path: Path, three: list[dict]) -> None:
    import bz2

    dump = build_multistream_dump(three, tmp_path, pages_per_stream=1)
    comp = bz2.BZ2Compressor()
    parts = [comp.compress(b"x" * MiB) for _ in range(64)]  # one 64 MiB "line"
    dump.index.write_bytes(b"".join(parts) + comp.flush())
    with pytest.raises(SourceError, match="over 4096 characters"):
        list(iter_dump_file(dump.data, ArticleSelection(page_ids=(1,)), None))


# --------------------------------------------------------------------------- HTTP


@pytest.fixture(scope="module")
def api_server(wikisnap_dir: Path) -> Iterator[MediaWikiApiServer]:
    with MediaWikiApiServer(wikisnap_dir) as server:
        yield server


@pytest.fixture
def srv(api_server: MediaWikiApiServer) -> Iterator[MediaWikiApiServer]:
    api_server.reset()
    yield api_server
    api_server.reset()


def _client(srv: MediaWikiApiServer, **kwargs: Any) -> MediaWikiClient:
    return MediaWikiClient(srv.url, user_agent=UA, sleep=lambda _s: None, **kwargs)


def test_gzip_bomb_answer_skips_that_page_only(srv: MediaWikiApiServer) -> None:
    srv.misbehave_next(1, "gzip_bomb", decoded_bytes=256 * MiB)
    titles = ("LIGO", "Lisa Su")
    with _client(srv, max_retries=0) as client:
        source = MediaWikiApiSource(client)
        tracemalloc.start()
        try:
            revs = list(source.iter_revisions(ArticleSelection(titles=titles), date(2024, 6, 1)))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert [r.title for r in revs] == ["Lisa Su"]
    assert source.not_delivered() == [
        f"title 'LIGO' (over_limit: API answer over {DEFAULT_LIMITS.max_response_bytes} bytes)"
    ]
    assert srv.requests[0].body_bytes < 1 * MiB  # the bomb really was small on the wire
    # At most the limit (and a copy while growing); the old client held all 256 MiB and more.
    assert peak < 2 * DEFAULT_LIMITS.max_response_bytes + 16 * MiB, f"peak {peak / MiB:.0f} MiB"


def test_oversize_wikitext_from_the_api_is_skipped(srv: MediaWikiApiServer) -> None:
    with _client(srv, limits=SourceLimits(max_wikitext_bytes=2048)) as client:
        source = MediaWikiApiSource(client)
        revs = list(source.iter_revisions(ArticleSelection(titles=("LIGO",)), date(2024, 6, 1)))
    assert revs == []
    (entry,) = source.not_delivered()
    assert entry.startswith("title 'LIGO' (over_limit: wikitext ") and "over 2048" in entry


@pytest.mark.parametrize("kind", ["drip", "drip_body"])
def test_dripping_api_server_cannot_hold_a_request_past_the_deadline(
    srv: MediaWikiApiServer, kind: str
) -> None:
    srv.misbehave_next(1, kind, interval_s=0.5)
    limits = SourceLimits(max_request_s=3.0)
    started = time.monotonic()
    with (
        _client(srv, timeout_s=2, max_retries=0, limits=limits) as client,
        pytest.raises(SourceError, match=r"no complete answer within 3s"),
    ):
        client.revision_at("LIGO", snapshot_date=date(2024, 6, 1))
    took = time.monotonic() - started
    assert took < 5.0, f"the request stayed open {took:.1f}s"


def test_drip_then_retry_recovers(srv: MediaWikiApiServer) -> None:
    srv.misbehave_next(1, "drip_body", interval_s=0.5)
    with _client(srv, timeout_s=2, max_retries=1, limits=SourceLimits(max_request_s=1.5)) as c:
        rev = c.revision_at("LIGO", snapshot_date=date(2024, 6, 1))
    assert rev is not None and rev.title == "LIGO"
    assert c.retries == 1


def _port(url: str) -> int:
    return int(url.split(":")[2].split("/")[0])


def test_redirect_to_another_host_is_refused(srv: MediaWikiApiServer) -> None:
    # "localhost" is another host name for the same server, so any follow-up is recorded.
    other = f"http://localhost:{_port(srv.url)}/w/api.php?action=query"
    srv.misbehave_next(1, "redirect", location=other)
    with (
        _client(srv, max_retries=0) as client,
        pytest.raises(SourceError, match="redirects to http://localhost"),
    ):
        client.revision_at("LIGO", snapshot_date=date(2024, 6, 1))
    hosts = [r.header("Host") for r in srv.requests]
    assert len(hosts) == 1 and hosts[0].startswith("127.0.0.1"), hosts


def test_redirect_to_an_allowed_host_is_followed(srv: MediaWikiApiServer) -> None:
    port = _port(srv.url)
    params = "action=query&titles=LIGO&format=json&formatversion=2"
    srv.misbehave_next(1, "redirect", location=f"http://localhost:{port}/w/api.php?{params}")
    limits = SourceLimits(redirect_hosts=frozenset({"localhost"}))
    with _client(srv, max_retries=0, limits=limits) as client:
        data = client.get({"action": "query", "titles": "LIGO"})
    assert data["query"]["pages"][0]["title"] == "LIGO"
    assert srv.requests[1].header("Host") == f"localhost:{port}"


def test_dump_redirect_to_another_host_is_refused(tmp_path: Path, three: list[dict]) -> None:
    dump = build_multistream_dump(three, tmp_path / "d", pages_per_stream=1)
    with DumpServer(dump.root) as target, DumpServer(dump.root) as first:
        port = target.base_url.rsplit(":", 1)[1]
        first.behaviour.redirect_to = f"http://localhost:{port}"
        client = DumpClient(
            first.base_url, dump.wiki, dump.dump_date, cache_dir=tmp_path / "c", user_agent=UA
        )
        with client, pytest.raises(SourceError, match="redirects to http://localhost"):
            client.status()
        assert target.requests == []  # nothing, User-Agent contact included, went there


def test_dripping_dump_server_cannot_hold_a_range_request(
    tmp_path: Path, three: list[dict]
) -> None:
    dump = build_multistream_dump(three, tmp_path / "d", pages_per_stream=1)
    with DumpServer(dump.root) as server:
        client = DumpClient(
            server.base_url,
            dump.wiki,
            dump.dump_date,
            cache_dir=tmp_path / "c",
            user_agent=UA,
            timeout_s=2,
            max_retries=0,
            sleep=lambda _s: None,
            limits=SourceLimits(max_request_s=2.0),
        )
        with client:
            client.status()
            client._index(client.status().parts[0])  # index fetched at full speed
            server.behaviour.drip_interval_s = 0.2
            started = time.monotonic()
            with pytest.raises(SourceError, match="within 2s"):
                list(client.iter_pages(ArticleSelection(page_ids=(int(three[0]["page_id"]),))))
            took = time.monotonic() - started
    assert took < 4.0, f"the range request stayed open {took:.1f}s"


@pytest.mark.parametrize(
    ("source", "target", "allowed"),
    [
        ("http://a.org/x", "http://a.org/y?z=1", True),
        ("http://a.org/x", "https://a.org/y", True),  # upgrade on the same host
        ("https://a.org/x", "http://a.org/y", False),  # never a downgrade
        ("http://a.org/x", "http://a.org:8080/y", False),  # another port, another server
        ("https://a.org/x", "https://b.org/y", False),
        ("https://a.org/x", "https://B.org/y", True),  # listed in redirect_hosts
        ("https://a.org/x", "ftp://a.org/y", False),
    ],
)
def test_redirect_policy(source: str, target: str, allowed: bool) -> None:
    from pipeline.sources.network import redirect_allowed

    limits = SourceLimits(redirect_hosts=frozenset({"B.org"}) if "B.org" in target else frozenset())
    assert redirect_allowed(source, target, limits.redirect_hosts) is allowed
