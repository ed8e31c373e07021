"""Dump source: remote multistream reads over real HTTP (local server, real wikisnap text) and
local dump / Special:Export files (the real fixtures in tests/data/wikisnap/fixtures)."""

from __future__ import annotations

import bz2
import json
import re
import shutil
import xml.etree.ElementTree as ET
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from pipeline.errors import ConfigError, DumpNotReadyError, IntegrityError, SourceError
from pipeline.records import RawRevision
from pipeline.sources import ArticleSelection
from pipeline.sources.dump_client import DumpClient
from pipeline.sources.dump_index import find_streams, index_path_for, parse_index_line
from pipeline.sources.dumps import (
    DumpSource,
    SelectionReport,
    iter_dump_file,
    mediawiki_sha1,
    parse_dump_url,
)
from tests.conftest import load_wikisnap_revision
from tests.servers.dump_server import (
    BuiltDump,
    DumpServer,
    ServerBehaviour,
    build_multistream_dump,
    wikisnap_revisions,
)

SNAP = "2024-06-01"
UA = "wikidrift-tests/0.1 (https://example.org/wikidrift; tests@example.org)"
SAMPLE = "enwiki-pages-articles-sample.xml.bz2"
EXPORT = "export-multiple-revisions.xml"
# Three articles in three different 4-page streams of the wikisnap dump (ids sorted).
SONY, LISA_SU, LIGO = 1071662, 44063188, 81610
KARPATHY = 58107648


@pytest.fixture(scope="module")
def snap_revisions(wikisnap_dir: Path) -> list[dict[str, Any]]:
    return wikisnap_revisions(wikisnap_dir, SNAP)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, snap_revisions: list[dict]) -> BuiltDump:
    """All 36 wikisnap articles at 2024-06-01 as a real multistream dump, 4 pages per stream."""
    return build_multistream_dump(
        snap_revisions, tmp_path_factory.mktemp("dump"), pages_per_stream=4
    )


def fresh_dump(tmp_path: Path, revisions: list[dict], **kwargs: Any) -> BuiltDump:
    return build_multistream_dump(revisions, tmp_path / "served", pages_per_stream=4, **kwargs)


def client_for(
    server: DumpServer, dump: BuiltDump, cache: Path, sleeps: list[float] | None = None, **kw: Any
) -> DumpClient:
    return DumpClient(
        server.base_url,
        dump.wiki,
        dump.dump_date,
        cache_dir=cache,
        user_agent=UA,
        sleep=(sleeps.append if sleeps is not None else lambda _s: None),
        backoff_s=0.5,
        timeout_s=10,
        **kw,
    )


def read_remote(client: DumpClient, selection: ArticleSelection, **kw: Any) -> list[RawRevision]:
    return list(DumpSource(client=client, **kw).iter_revisions(selection))


def assert_matches_wikisnap(revs: list[RawRevision], page_ids: set[int]) -> None:
    assert {r.page_id for r in revs} == page_ids
    for rev in revs:
        want = load_wikisnap_revision(rev.page_id, SNAP)
        assert rev.title == want["title"]
        assert rev.revision_id == want["revision_id"]
        assert rev.revision_timestamp == want["revision_timestamp"]
        assert rev.wikitext == want["content"]  # byte for byte through bz2 + XML
        assert rev.sha1 == mediawiki_sha1(want["content"])
        assert rev.namespace == 0


# --------------------------------------------------------------------------- remote


def test_selection_fetches_only_its_streams(built: BuiltDump, tmp_path: Path) -> None:
    with DumpServer(built.root) as server, client_for(server, built, tmp_path / "c") as client:
        revs = read_remote(client, ArticleSelection(page_ids=(SONY, LISA_SU, LIGO)))
        data_requests = server.requests_for(built.data.name)
    assert_matches_wikisnap(revs, {SONY, LISA_SU, LIGO})
    assert sorted(r.range for r in data_requests) == sorted(
        built.stream_range(p) for p in (SONY, LISA_SU, LIGO)
    )
    assert all(r.status == 206 for r in data_requests)
    stats = client.stats
    assert stats.range_requests == 3 and stats.streams_read == 3
    assert not stats.full_download_used
    assert stats.range_bytes == sum(r.bytes_sent for r in data_requests)
    # 3 of 9 streams: well under half of the file, and no byte of it outside those streams.
    assert stats.range_bytes < built.size / 2
    assert client.data_size == built.size
    print(f"\nrange bytes {stats.range_bytes} of {built.size}; all HTTP {stats.bytes_fetched}")


def test_select_by_title_normalizes(built: BuiltDump, tmp_path: Path) -> None:
    with DumpServer(built.root) as server, client_for(server, built, tmp_path / "c") as client:
        sel = ArticleSelection(titles=("iPhone 15", "Jack_Smith_(lawyer)", "No such article"))
        revs = read_remote(client, sel)
    assert_matches_wikisnap(revs, {74806347, 72284484})


def test_index_lookup_is_cached_between_runs(built: BuiltDump, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with DumpServer(built.root) as server:
        with client_for(server, built, cache) as first:
            read_remote(first, ArticleSelection(page_ids=(SONY,)))
        assert len(server.requests_for(built.index.name)) == 1
        with client_for(server, built, cache) as second:
            revs = read_remote(second, ArticleSelection(titles=("LIGO",)))
        assert len(server.requests_for(built.index.name)) == 1  # no second download
        assert second.stats.index_downloads == 0
    assert_matches_wikisnap(revs, {LIGO})


def test_interrupted_index_download_resumes(built: BuiltDump, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    body = built.index.read_bytes()
    half = len(body) // 2
    (cache / f"{built.index.name}.part").write_bytes(body[:half])
    with DumpServer(built.root) as server, client_for(server, built, cache) as client:
        revs = read_remote(client, ArticleSelection(page_ids=(LISA_SU,)))
        index_requests = server.requests_for(built.index.name)
    assert [(r.range, r.status) for r in index_requests] == [(f"bytes={half}-", 206)]
    assert client.stats.index_bytes == len(body) - half
    assert (cache / built.index.name).read_bytes() == body
    assert not (cache / f"{built.index.name}.part").exists()
    assert_matches_wikisnap(revs, {LISA_SU})


def test_server_ignoring_range_falls_back_to_one_full_download(
    built: BuiltDump, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    behaviour = ServerBehaviour(honour_range=False)
    with DumpServer(built.root, behaviour) as server:
        with client_for(server, built, cache) as client:
            revs = read_remote(client, ArticleSelection(page_ids=(SONY, LISA_SU, LIGO)))
        data_requests = server.requests_for(built.data.name)
        # The 200 answer to the first Range request is the download: one request in all.
        assert [r.status for r in data_requests] == [200]
        assert client.stats.full_download_used
        assert client.stats.full_download_bytes == built.size
        assert (cache / built.data.name).read_bytes() == built.data.read_bytes()
        assert_matches_wikisnap(revs, {SONY, LISA_SU, LIGO})

        with client_for(server, built, cache) as again:
            revs = read_remote(again, ArticleSelection(titles=("Antimatter", "Lisa Su")))
        assert len(server.requests_for(built.data.name)) == 1  # reused the verified file
        assert again.stats.range_requests == 0 and again.stats.bytes_fetched < 2000
    assert_matches_wikisnap(revs, {1317, LISA_SU})


def test_full_download_limit(built: BuiltDump, tmp_path: Path) -> None:
    with DumpServer(built.root, ServerBehaviour(honour_range=False)) as server:
        client = client_for(server, built, tmp_path / "c", max_full_download_bytes=1000)
        with client, pytest.raises(SourceError, match="full download"):
            read_remote(client, ArticleSelection(page_ids=(SONY,)))


def test_429_then_200_waits_per_retry_after(built: BuiltDump, tmp_path: Path) -> None:
    sleeps: list[float] = []
    with DumpServer(built.root, ServerBehaviour(fail_first=[429, 503])) as server:
        with client_for(server, built, tmp_path / "c", sleeps) as client:
            revs = read_remote(client, ArticleSelection(page_ids=(LIGO,)))
        statuses = [(r.path.rsplit("/", 1)[-1], r.status) for r in server.requests[:3]]
    assert statuses == [("dumpstatus.json", 429), ("dumpstatus.json", 503)] + [
        ("dumpstatus.json", 200)
    ]
    # 1 s from Retry-After, then exponential backoff (0.5 * 2**1) for the 503 without one.
    assert sleeps == [1.0, 1.0]
    assert client.stats.retries == 2
    assert_matches_wikisnap(revs, {LIGO})


@pytest.mark.parametrize("fault", ["truncate_ranges", "corrupt_ranges"])
def test_broken_stream_raises_integrity_error(built: BuiltDump, tmp_path: Path, fault: str) -> None:
    sleeps: list[float] = []
    behaviour = ServerBehaviour(**{fault: True})
    offset = built.page_offsets[LIGO]
    with DumpServer(built.root, behaviour) as server:
        client = client_for(server, built, tmp_path / "c", sleeps, max_retries=2)
        with client, pytest.raises(IntegrityError) as err:
            read_remote(client, ArticleSelection(page_ids=(LIGO,)))
    message = str(err.value)
    assert built.data.name in message and f"offset {offset}" in message
    assert message.startswith(f"{server.base_url}/enwiki/20240601/")
    # A dropped connection is retried (it may be transient); corrupt bytes are not.
    assert len(sleeps) == (2 if fault == "truncate_ranges" else 0)


def test_unfinished_dump_is_refused(built: BuiltDump, tmp_path: Path) -> None:
    with DumpServer(built.root, ServerBehaviour(job_status="in-progress")) as server:
        client = client_for(server, built, tmp_path / "c")
        with client, pytest.raises(DumpNotReadyError, match="articlesmultistreamdump.*in-progress"):
            read_remote(client, ArticleSelection(page_ids=(SONY,)))
        assert server.requests_for(built.index.name) == []


def test_index_sha1_mismatch(tmp_path: Path, snap_revisions: list[dict]) -> None:
    dump = fresh_dump(tmp_path, snap_revisions[:8])
    status = json.loads(dump.dumpstatus.read_text())
    status["jobs"]["articlesmultistreamdump"]["files"][dump.index.name]["sha1"] = "0" * 40
    dump.dumpstatus.write_text(json.dumps(status))
    cache = tmp_path / "cache"
    with (
        DumpServer(dump.root) as server,
        client_for(server, dump, cache) as client,
        pytest.raises(IntegrityError, match=r"index\.txt\.bz2.*sha1"),
    ):
        read_remote(client, ArticleSelection(page_ids=(SONY,)))
    assert not any(cache.iterdir())  # neither the bad index nor a lookup was kept


def test_split_parts_used_while_recombine_runs(tmp_path: Path, snap_revisions: list[dict]) -> None:
    dump = fresh_dump(tmp_path, snap_revisions, split_parts=3, recombine_status="in-progress")
    with DumpServer(dump.root) as server, client_for(server, dump, tmp_path / "c") as client:
        revs = read_remote(client, ArticleSelection(page_ids=(SONY, LIGO, 72883)))
        paths = {r.path.rsplit("/", 1)[-1] for r in server.requests if r.range}
    assert client.status().job == "articlesmultistreamdump"
    assert paths and all(re.search(r"multistream\d\.xml-p\d+p\d+\.bz2$", p) for p in paths)
    assert_matches_wikisnap(revs, {SONY, LIGO, 72883})


def test_snapshot_date_of_a_remote_dump(built: BuiltDump, tmp_path: Path) -> None:
    with DumpServer(built.root) as server, client_for(server, built, tmp_path / "c") as client:
        source = DumpSource(client=client)
        assert source.dump_date == date(2024, 6, 1)
        with pytest.raises(SourceError, match="cannot give"):
            list(source.iter_revisions(ArticleSelection(page_ids=(SONY,)), date(2025, 1, 1)))
        # Sony Music's dump revision is from 2024-05-18: not current on 2024-05-01.
        sel = ArticleSelection(page_ids=(SONY, KARPATHY))
        revs = list(source.iter_revisions(sel, date(2024, 5, 1)))
        assert [r.page_id for r in revs] == [KARPATHY]  # last edited 2024-03-01
        assert source.report.after_cutoff == ["Sony Music"]


# --------------------------------------------------------------------------- local files


def fixture_pages(wikisnap_dir: Path) -> list[dict[str, Any]]:
    """The sample dump's pages, read independently with ElementTree (no code under test)."""
    with bz2.open(wikisnap_dir / "fixtures" / SAMPLE) as fh:
        root = ET.parse(fh).getroot()
    ns = {"m": "http://www.mediawiki.org/xml/export-0.10/"}
    pages = []
    for page in root.findall("m:page", ns):
        rev = page.find("m:revision", ns)
        assert rev is not None
        redirect = page.find("m:redirect", ns)
        pages.append(
            {
                "title": page.findtext("m:title", namespaces=ns),
                "ns": int(page.findtext("m:ns", namespaces=ns) or 0),
                "page_id": int(page.findtext("m:id", namespaces=ns) or 0),
                "redirect": redirect.get("title") if redirect is not None else None,
                "revision_id": int(rev.findtext("m:id", namespaces=ns) or 0),
                "revision_timestamp": rev.findtext("m:timestamp", namespaces=ns),
                "content": rev.findtext("m:text", namespaces=ns) or "",
                "sha1": rev.findtext("m:sha1", namespaces=ns),
            }
        )
    return pages


def test_real_sample_dump_yields_articles_only(wikisnap_dir: Path) -> None:
    pages = fixture_pages(wikisnap_dir)
    assert len(pages) == 206 and sum(p["redirect"] is not None for p in pages) == 100
    articles = [p for p in pages if p["redirect"] is None and p["ns"] == 0]
    assert len(articles) == 106
    report = SelectionReport()
    revs = list(
        iter_dump_file(wikisnap_dir / "fixtures" / SAMPLE, ArticleSelection(), None, report=report)
    )
    assert len(revs) == 106
    assert [(r.page_id, r.title) for r in revs] == [(p["page_id"], p["title"]) for p in articles]
    for rev, page in zip(revs, articles, strict=True):
        assert rev.revision_id == page["revision_id"]
        assert rev.wikitext == page["content"]
        assert rev.sha1 == page["sha1"] == mediawiki_sha1(rev.wikitext)  # real base-36 sha1
    # 99 main-namespace redirects; the project-namespace redirect counts as "not an article".
    assert len(report.skipped_redirects) == 99
    assert report.skipped_namespace == ["Wikipedia:Adding Wikipedia articles to Nupedia"]


def test_sample_dump_selection_follows_redirects(wikisnap_dir: Path) -> None:
    report = SelectionReport()
    sel = ArticleSelection(titles=("AynRand", "anarchism"), page_ids=(25,))
    revs = list(iter_dump_file(wikisnap_dir / "fixtures" / SAMPLE, sel, None, report=report))
    assert [(r.page_id, r.title) for r in revs] == [
        (12, "Anarchism"),
        (25, "Autism"),
        (339, "Ayn Rand"),
    ]
    assert report.redirects_followed == {"AynRand": "Ayn Rand"}
    no_follow = list(
        iter_dump_file(wikisnap_dir / "fixtures" / SAMPLE, sel, None, follow_redirects=False)
    )
    assert [r.page_id for r in no_follow] == [12, 25]


def test_text_not_matching_its_sha1_is_refused(wikisnap_dir: Path, tmp_path: Path) -> None:
    xml = bz2.decompress((wikisnap_dir / "fixtures" / SAMPLE).read_bytes()).decode("utf-8")
    altered = xml.replace("'''Anarchism''' is", "'''Anarchism''' was", 1)
    assert altered != xml
    path = tmp_path / "altered.xml"
    path.write_text(altered, encoding="utf-8")
    sel = ArticleSelection(page_ids=(12, 25))
    with pytest.raises(IntegrityError, match=r"'Anarchism' \(page 12, revision \d+\).*sha1"):
        list(iter_dump_file(path, sel, None))
    revs = list(iter_dump_file(path, sel, None, verify_sha1=False))
    assert [r.page_id for r in revs] == [12, 25]


@pytest.mark.parametrize(
    ("at", "revision_id"),
    [
        (None, 188924),
        (datetime(2002, 2, 25, 15, 43, 10, tzinfo=UTC), None),  # before the first revision
        (datetime(2002, 2, 25, 15, 43, 11, tzinfo=UTC), 185185),  # "at or before" is inclusive
        (datetime(2002, 8, 31, 3, 0, tzinfo=UTC), 185241),
        (datetime(2002, 8, 31, 4, 0, tzinfo=UTC), 185408),
        (datetime(2002, 8, 31, 6, 0, tzinfo=UTC), 188924),
    ],
)
def test_special_export_history_picks_revision_at_cutoff(
    wikisnap_dir: Path, at: datetime | None, revision_id: int | None
) -> None:
    path = wikisnap_dir / "fixtures" / EXPORT
    revs = list(iter_dump_file(path, ArticleSelection(titles=("Pear",)), None, at=at))
    assert [r.revision_id for r in revs] == ([revision_id] if revision_id else [])
    if revs:
        assert revs[0].title == "Pear" and revs[0].page_id == 24278 and revs[0].namespace == 0
        assert revs[0].sha1 is None  # schema 0.3 carries no sha1


def test_special_export_snapshot_dates(wikisnap_dir: Path) -> None:
    path = wikisnap_dir / "fixtures" / EXPORT
    by_date = {
        d: [r.revision_id for r in iter_dump_file(path, ArticleSelection(), d)]
        for d in (date(2002, 2, 25), date(2002, 8, 31), date(2002, 9, 1))
    }
    assert by_date == {
        date(2002, 2, 25): [],
        date(2002, 8, 31): [185185],
        date(2002, 9, 1): [188924],
    }


def test_truncated_local_files_raise(wikisnap_dir: Path, tmp_path: Path) -> None:
    raw = (wikisnap_dir / "fixtures" / SAMPLE).read_bytes()
    cut = tmp_path / SAMPLE
    cut.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(IntegrityError, match=rf"{re.escape(str(cut))}: .*near byte \d+ of"):
        list(iter_dump_file(cut, ArticleSelection(), None))

    text = (wikisnap_dir / "fixtures" / EXPORT).read_bytes()
    cut_xml = tmp_path / EXPORT
    cut_xml.write_bytes(text[: len(text) - 300])
    with pytest.raises(IntegrityError, match=re.escape(str(cut_xml))):
        list(iter_dump_file(cut_xml, ArticleSelection(), None))


def test_local_multistream_with_index_matches_remote(built: BuiltDump, tmp_path: Path) -> None:
    sel = ArticleSelection(page_ids=(SONY, LISA_SU), titles=("LIGO",))
    with DumpServer(built.root) as server, client_for(server, built, tmp_path / "c") as client:
        remote = read_remote(client, sel)
    assert index_path_for(built.data) == built.index
    local = list(iter_dump_file(built.data, sel, date(2024, 6, 1)))
    assert local == remote
    assert_matches_wikisnap(local, {SONY, LISA_SU, LIGO})
    # Whole-file read (no index) gives the same pages.
    assert list(iter_dump_file(built.data, sel, date(2024, 6, 1), use_index=False)) == remote


def test_local_index_reads_only_selected_streams(built: BuiltDump, tmp_path: Path) -> None:
    # Corrupt a stream nobody selected: the indexed read never touches it, a full scan does.
    copy = tmp_path / built.data.name
    data = bytearray(built.data.read_bytes())
    victim = built.page_offsets[1317]  # Antimatter's stream
    data[victim + 200 : victim + 216] = bytes(16)
    copy.write_bytes(bytes(data))
    shutil.copy(built.index, tmp_path / built.index.name)
    sel = ArticleSelection(page_ids=(SONY,))
    assert [r.page_id for r in iter_dump_file(copy, sel, None)] == [SONY]
    with pytest.raises(IntegrityError, match=str(copy)):
        list(iter_dump_file(copy, sel, None, use_index=False))
    with pytest.raises(IntegrityError, match=rf"offset {victim}\b"):
        list(iter_dump_file(copy, ArticleSelection(page_ids=(1317,)), None))


def test_real_sample_as_multistream_remote_and_local(wikisnap_dir: Path, tmp_path: Path) -> None:
    """The real sample pages (redirects, a project-namespace page with a colon) re-packed as a
    multistream dump of 100 pages per stream, like enwiki's."""
    dump = build_multistream_dump(fixture_pages(wikisnap_dir), tmp_path / "served", "enwiki")
    assert len(dump.stream_offsets) == 3
    colon_title = "Wikipedia:Adding Wikipedia articles to Nupedia"
    sel = ArticleSelection(titles=("AynRand", colon_title), page_ids=(12,))
    with DumpServer(dump.root) as server, client_for(server, dump, tmp_path / "c") as client:
        source = DumpSource(client=client)
        remote = list(source.iter_revisions(sel))
    assert [(r.page_id, r.title) for r in remote] == [(12, "Anarchism"), (339, "Ayn Rand")]
    assert source.report.redirects_followed == {"AynRand": "Ayn Rand"}
    assert source.report.skipped_namespace == [colon_title]
    assert list(iter_dump_file(dump.data, sel, None)) == remote


# --------------------------------------------------------------------------- small parts


def test_parse_index_line_keeps_colons_and_unescapes() -> None:
    entry = parse_index_line("653:724:Wikipedia:Adding Wikipedia articles to Nupedia\n")
    assert (entry.offset, entry.page_id, entry.title) == (
        653,
        724,
        "Wikipedia:Adding Wikipedia articles to Nupedia",
    )
    assert parse_index_line("10:3:AT&amp;T: &quot;x&quot;").title == 'AT&T: "x"'
    with pytest.raises(ValueError):
        parse_index_line("garbage")


def test_find_streams_ends_at_next_offset() -> None:
    lines = ["600:10:A", "600:12:B", "9000:13:C", "9000:14:D", "15000:15:E"]
    lookup = find_streams(map(parse_index_line, lines), ArticleSelection(("d", "E"), (12,)))
    assert [(s.offset, s.end, s.page_ids) for s in lookup.spans] == [
        (600, 9000, (12,)),
        (9000, 15000, (14,)),
        (15000, None, (15,)),
    ]


def test_index_path_for_combined_and_parts(tmp_path: Path) -> None:
    combined = tmp_path / "enwiki-20240601-pages-articles-multistream.xml.bz2"
    part = tmp_path / "enwiki-20240601-pages-articles-multistream3.xml-p1p41242.bz2"
    assert index_path_for(combined) == tmp_path / (
        "enwiki-20240601-pages-articles-multistream-index.txt.bz2"
    )
    assert index_path_for(part) == tmp_path / (
        "enwiki-20240601-pages-articles-multistream-index3.txt-p1p41242.bz2"
    )
    assert index_path_for(tmp_path / "export.xml") is None


def test_input_mapping(tmp_path: Path, wikisnap_dir: Path) -> None:
    assert parse_dump_url("https://dumps.wikimedia.org/enwiki/20240601/") == (
        "https://dumps.wikimedia.org",
        "enwiki",
        "20240601",
    )
    assert parse_dump_url(
        "https://mirror.example/pub/wikimedia/dewiki/20240701/dumpstatus.json"
    ) == (
        "https://mirror.example/pub/wikimedia",
        "dewiki",
        "20240701",
    )
    with pytest.raises(ConfigError, match="dated"):
        parse_dump_url("https://dumps.wikimedia.org/enwiki/latest/")
    remote = DumpSource.from_input(
        "https://dumps.wikimedia.org/enwiki/20240601/", cache_dir=tmp_path, user_agent=UA
    )
    assert remote.client is not None and remote.client.dir_url == (
        "https://dumps.wikimedia.org/enwiki/20240601"
    )
    assert remote.dump_date == date(2024, 6, 1)
    remote.close()
    local = DumpSource.from_input(
        str(wikisnap_dir / "fixtures" / EXPORT), cache_dir=tmp_path, user_agent=UA
    )
    assert local.path == wikisnap_dir / "fixtures" / EXPORT and local.dump_date is None
    as_file_url = DumpSource.from_input(
        (wikisnap_dir / "fixtures" / EXPORT).as_uri(), cache_dir=tmp_path, user_agent=UA
    )
    assert as_file_url.path == local.path
    with pytest.raises(ConfigError, match="not found"):
        DumpSource.from_input(str(tmp_path / "nope.xml.bz2"), cache_dir=tmp_path, user_agent=UA)
    with pytest.raises(ConfigError, match="YYYYMMDD"):
        DumpClient(wiki="enwiki", dump_date="2024-06-01", cache_dir=tmp_path, user_agent=UA)
