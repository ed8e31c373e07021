"""MediaWiki Action API source: real HTTP against the local api.php over the real wikisnap data.

Nothing of requests is mocked; only ``sleep``/``clock`` are injected so waits are recorded, not
slept.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from pipeline.errors import ConfigError, SourceError, WikidriftError
from pipeline.sources import ArticleSelection, parse_timestamp
from pipeline.sources.mediawiki_api import (
    SKIP_INVALID,
    SKIP_MISSING,
    SKIP_NOT_YET_CREATED,
    MediaWikiApiSource,
    MediaWikiClient,
    current_events_titles,
    read_article_list,
)
from tests.conftest import WIKISNAP_DATES, load_wikisnap_revision
from tests.servers.mediawiki_api_server import MediaWikiApiServer, namespace_of

UA = "wikidrift-tests/0.1 (https://example.org/wikidrift; tests@example.org)"


class FakeTime:
    """Injected sleep + clock: sleeping records the wait and advances the clock instantly."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def api_server(wikisnap_dir: Path) -> Iterator[MediaWikiApiServer]:
    with MediaWikiApiServer(wikisnap_dir) as srv:
        yield srv


@pytest.fixture
def srv(api_server: MediaWikiApiServer) -> Iterator[MediaWikiApiServer]:
    """The shared server with a clean request log and no pending failures."""
    api_server.reset()
    yield api_server
    api_server.reset()


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()


@pytest.fixture
def client(srv: MediaWikiApiServer, fake_time: FakeTime) -> Iterator[MediaWikiClient]:
    with make_client(srv, fake_time) as c:
        yield c


def make_client(srv: MediaWikiApiServer, fake_time: FakeTime, **kwargs: Any) -> MediaWikiClient:
    return MediaWikiClient(
        srv.url,
        user_agent=UA,
        sleep=fake_time.sleep,
        clock=fake_time.clock,
        **kwargs,
    )


def articles(manifest: dict) -> list[dict]:
    return list(manifest["articles"])


# -- revisions at snapshot dates --------------------------------------------------------------


@pytest.mark.parametrize("snap", WIKISNAP_DATES)
def test_revision_at_each_wikisnap_date_equals_the_file(
    client: MediaWikiClient, wikisnap_manifest: dict, snap: str
) -> None:
    for article in articles(wikisnap_manifest):
        expected = load_wikisnap_revision(article["page_id"], snap)
        rev = client.revision_at(article["title"], snapshot_date=date.fromisoformat(snap))
        assert rev is not None, article["title"]
        assert rev.page_id == expected["page_id"]
        assert rev.title == expected["title"]
        assert rev.revision_id == expected["revision_id"]
        assert rev.revision_timestamp == expected["revision_timestamp"]
        assert rev.wikitext == expected["content"]  # byte for byte after the JSON round trip
        assert rev.wikitext.encode("utf-8") == expected["content"].encode("utf-8")
        assert rev.sha1 == hashlib.sha1(expected["content"].encode("utf-8")).hexdigest()
        assert rev.sha1 == rev.wikitext_sha1
        assert rev.namespace == 0


def test_revision_at_by_page_id(client: MediaWikiClient, wikisnap_manifest: dict) -> None:
    for article in articles(wikisnap_manifest)[::6]:
        expected = load_wikisnap_revision(article["page_id"], "2024-06-01")
        rev = client.revision_at(page_id=article["page_id"], snapshot_date=date(2024, 6, 1))
        assert rev is not None
        assert (rev.page_id, rev.title, rev.revision_id) == (
            expected["page_id"],
            expected["title"],
            expected["revision_id"],
        )
        assert rev.wikitext == expected["content"]


def test_date_between_two_revisions_picks_the_earlier(
    client: MediaWikiClient, wikisnap_manifest: dict
) -> None:
    checked = 0
    for article in articles(wikisnap_manifest)[:12]:
        snaps = article["snapshots"]
        for older, newer in zip(WIKISNAP_DATES, WIKISNAP_DATES[1:], strict=False):
            older_ts = parse_timestamp(snaps[older]["revision_timestamp"])
            newer_ts = parse_timestamp(snaps[newer]["revision_timestamp"])
            between = older_ts.date() + timedelta(days=2)  # midnight after the older revision
            if not older_ts < parse_timestamp(f"{between}T00:00:00Z") < newer_ts:
                continue
            rev = client.revision_at(article["title"], snapshot_date=between)
            assert rev is not None
            assert rev.revision_id == snaps[older]["revision_id"], (article["title"], between)
            checked += 1
    assert checked >= 20  # the wikisnap dates are months apart: most pairs have a gap


def test_date_before_first_stored_revision_is_none(
    client: MediaWikiClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="pipeline.sources.mediawiki_api"):
        assert client.revision_at("Sony Music", snapshot_date=date(2022, 1, 1)) is None
    assert "no revision at or before" in caplog.text
    lookup = client.lookup_revision_at("Sony Music", snapshot_date=date(2022, 1, 1))
    assert lookup.revision is None and lookup.skip_reason == SKIP_NOT_YET_CREATED


def test_missing_page_is_none(client: MediaWikiClient) -> None:
    lookup = client.lookup_revision_at("No such article xyzzy", snapshot_date=date(2024, 1, 1))
    assert lookup.revision is None and lookup.skip_reason == SKIP_MISSING
    assert client.revision_at(page_id=999_999_999, snapshot_date=date(2024, 1, 1)) is None
    invalid = client.lookup_revision_at("Foo[bar]", snapshot_date=date(2024, 1, 1))
    assert invalid.revision is None and invalid.skip_reason == SKIP_INVALID


def test_revision_at_needs_exactly_one_of_title_and_page_id(client: MediaWikiClient) -> None:
    with pytest.raises(ValueError):
        client.revision_at(snapshot_date=date(2024, 1, 1))
    with pytest.raises(ValueError):
        client.revision_at("Sony Music", page_id=1071662, snapshot_date=date(2024, 1, 1))


@pytest.mark.parametrize(
    ("given", "title"),
    [
        ("Sony_Music", "Sony Music"),
        ("sony_Music", "Sony Music"),
        ("  Sony   Music ", "Sony Music"),
        ("lisa_Su", "Lisa Su"),
        ("iPhone 15", "IPhone 15"),  # enwiki's real title; "iPhone" is only a display title
    ],
)
def test_title_forms_are_normalized(client: MediaWikiClient, given: str, title: str) -> None:
    rev = client.revision_at(given, snapshot_date=date(2024, 1, 1))
    assert rev is not None and rev.title == title


def test_redirect_resolves_to_the_target_page(
    client: MediaWikiClient, srv: MediaWikiApiServer
) -> None:
    rev = client.revision_at("Sony Music Entertainment", snapshot_date=date(2024, 1, 1))
    expected = load_wikisnap_revision(1071662, "2024-01-01")
    assert rev is not None
    assert (rev.page_id, rev.title, rev.revision_id) == (1071662, "Sony Music", 1192857503)
    assert rev.wikitext == expected["content"]
    assert "redirects" in srv.requests[-1].params


def test_hidden_content_raises(client: MediaWikiClient, srv: MediaWikiApiServer) -> None:
    srv.hide_revision_content(1192857503)
    with pytest.raises(SourceError, match="hidden") as err:
        client.revision_at("Sony Music", snapshot_date=date(2024, 1, 1))
    assert "Sony Music" in str(err.value)


# -- the source ---------------------------------------------------------------------------------


def test_source_dedupes_and_counts_skipped(
    client: MediaWikiClient, srv: MediaWikiApiServer
) -> None:
    source = MediaWikiApiSource(client)
    selection = ArticleSelection(
        titles=(
            "Sony Music",
            "Sony Music Entertainment",
            "sony_Music",
            "No such article xyzzy",
            "3M",
        ),
        page_ids=(7664801, 1317),
    )
    got = list(source.iter_revisions(selection, date(2024, 1, 1)))
    assert [r.title for r in got] == ["Sony Music", "3M", "Antimatter"]
    assert source.skipped == {SKIP_MISSING: 1}
    assert source.skipped_requests == [("title 'No such article xyzzy'", SKIP_MISSING)]
    assert source.duplicates == 2  # the redirect, and 3M again by page id
    # 'sony_Music' is the same title as 'Sony Music': never requested twice.
    assert len(srv.requests) == 6


def test_source_counts_not_yet_created(client: MediaWikiClient) -> None:
    source = MediaWikiApiSource(client)
    got = list(source.iter_revisions(ArticleSelection(titles=("3M", "LIGO")), date(2022, 6, 1)))
    assert got == []
    assert source.skipped == {SKIP_NOT_YET_CREATED: 2}


def test_source_rejects_select_all(client: MediaWikiClient) -> None:
    with pytest.raises(ConfigError, match="explicit article list"):
        list(MediaWikiApiSource(client).iter_revisions(ArticleSelection(), date(2024, 1, 1)))
    with pytest.raises(ConfigError):
        MediaWikiApiSource(client, max_workers=0)


def test_parallel_workers_give_the_serial_result_in_order(
    srv: MediaWikiApiServer, wikisnap_manifest: dict
) -> None:
    titles = [a["title"] for a in articles(wikisnap_manifest)]
    titles[5:5] = ["Universal Music", "No such article xyzzy"]  # a duplicate and a missing one
    selection = ArticleSelection(titles=tuple(titles))
    results = {}
    for workers in (1, 4):
        with make_client(srv, FakeTime()) as c:
            source = MediaWikiApiSource(c, max_workers=workers)
            revs = list(source.iter_revisions(selection, date(2023, 6, 1)))
            results[workers] = (
                [(r.page_id, r.revision_id, r.wikitext) for r in revs],
                dict(source.skipped),
                source.duplicates,
            )
    assert results[4] == results[1]
    assert len(results[1][0]) == 36
    assert [pid for pid, _, _ in results[1][0]] == [
        a["page_id"] for a in articles(wikisnap_manifest)
    ]


def test_parallel_source_can_be_abandoned_early(
    client: MediaWikiClient, wikisnap_manifest: dict
) -> None:
    selection = ArticleSelection(titles=tuple(a["title"] for a in articles(wikisnap_manifest)))
    it = MediaWikiApiSource(client, max_workers=3).iter_revisions(selection, date(2024, 1, 1))
    first = [next(it), next(it)]
    it.close()  # cancels what was queued and joins the pool without hanging
    assert [r.title for r in first] == [a["title"] for a in articles(wikisnap_manifest)[:2]]
    assert client.requests_made < 36


# -- retries, politeness, wire format ------------------------------------------------------------


def test_429_then_success_waits_per_retry_after(
    client: MediaWikiClient, srv: MediaWikiApiServer, fake_time: FakeTime
) -> None:
    srv.fail_next(2, 429, retry_after=1)
    rev = client.revision_at("3M", snapshot_date=date(2024, 1, 1))
    assert rev is not None and rev.revision_id == 1191385229
    assert fake_time.sleeps == [1.0, 1.0]
    assert client.requests_made == 3 == len(srv.requests)
    assert client.retries == 2
    assert [r.status for r in srv.requests] == [429, 429, 200]


def test_503_is_retried_with_exponential_backoff(
    client: MediaWikiClient, srv: MediaWikiApiServer, fake_time: FakeTime
) -> None:
    srv.fail_next(3, 503, retry_after=None)
    assert client.revision_at("LIGO", snapshot_date=date(2024, 1, 1)) is not None
    assert len(fake_time.sleeps) == 3
    for n, wait in enumerate(fake_time.sleeps):
        assert 2**n <= wait <= 2**n * 1.25  # base 1 s doubling, at most 25% jitter
    assert client.requests_made == 4


def test_maxlag_error_is_retried_honouring_retry_after(
    client: MediaWikiClient, srv: MediaWikiApiServer, fake_time: FakeTime
) -> None:
    srv.fail_next(2, "maxlag", retry_after=3)
    assert client.revision_at("Cisco", snapshot_date=date(2024, 1, 1)) is not None
    assert fake_time.sleeps == [3.0, 3.0]
    assert [r.status for r in srv.requests] == [200, 200, 200]  # maxlag comes as HTTP 200
    assert all(r.params["maxlag"] == "5" for r in srv.requests)


def test_maxlag_without_retry_after_waits_at_least_five_seconds(
    client: MediaWikiClient, srv: MediaWikiApiServer, fake_time: FakeTime
) -> None:
    srv.fail_next(1, "maxlag", retry_after=None)
    assert client.revision_at("Cisco", snapshot_date=date(2024, 1, 1)) is not None
    assert len(fake_time.sleeps) == 1 and 5.0 <= fake_time.sleeps[0] <= 120.0


@pytest.mark.parametrize("code", ["ratelimited", "readonly"])
def test_transient_api_errors_are_retried(
    client: MediaWikiClient, srv: MediaWikiApiServer, fake_time: FakeTime, code: str
) -> None:
    srv.fail_next(1, code, retry_after=2)
    assert client.revision_at("Cisco", snapshot_date=date(2024, 1, 1)) is not None
    assert fake_time.sleeps == [2.0]


def test_retry_after_is_capped_at_max_backoff(srv: MediaWikiApiServer, fake_time: FakeTime) -> None:
    srv.fail_next(1, 429, retry_after=600)
    with make_client(srv, fake_time, max_backoff_s=10.0) as c:
        assert c.revision_at("3M", snapshot_date=date(2024, 1, 1)) is not None
    assert fake_time.sleeps == [10.0]


def test_dropped_connection_is_retried(
    client: MediaWikiClient, srv: MediaWikiApiServer, fake_time: FakeTime
) -> None:
    srv.fail_next(1, "disconnect", retry_after=None)
    assert client.revision_at("3M", snapshot_date=date(2024, 1, 1)) is not None
    assert len(srv.requests) == 2 and len(fake_time.sleeps) == 1


def test_persistent_500_gives_up_naming_url_and_attempts(
    srv: MediaWikiApiServer, fake_time: FakeTime
) -> None:
    srv.fail_next(10, 500, retry_after=None)
    with make_client(srv, fake_time, max_retries=3) as c, pytest.raises(SourceError) as err:
        c.revision_at("3M", snapshot_date=date(2024, 1, 1))
    message = str(err.value)
    assert srv.url in message and "titles=3M" in message
    assert "4 attempts" in message and "HTTP 500" in message
    assert len(srv.requests) == 4 and len(fake_time.sleeps) == 3


def test_400_is_not_retried(
    client: MediaWikiClient, srv: MediaWikiApiServer, fake_time: FakeTime
) -> None:
    srv.fail_next(1, 400, retry_after=None)
    with pytest.raises(SourceError, match="HTTP 400") as err:
        client.revision_at("3M", snapshot_date=date(2024, 1, 1))
    assert srv.url in str(err.value)
    assert len(srv.requests) == 1 and fake_time.sleeps == []


def test_other_api_errors_are_not_retried(
    client: MediaWikiClient, srv: MediaWikiApiServer, fake_time: FakeTime
) -> None:
    srv.fail_next(1, "badvalue", retry_after=None)
    with pytest.raises(SourceError, match="badvalue") as err:
        client.revision_at("Sony Music", snapshot_date=date(2024, 1, 1))
    assert "Sony Music" in str(err.value)
    # A real server-side refusal too: rvstart may only be used on a single page.
    params = {
        "action": "query",
        "prop": "revisions",
        "titles": "3M|LIGO",
        "rvstart": "2024-01-01T00:00:00Z",
    }
    with pytest.raises(SourceError, match="invalidparammix"):
        client.get(params)
    assert len(srv.requests) == 2 and fake_time.sleeps == []


def test_requests_carry_user_agent_maxlag_and_gzip(
    client: MediaWikiClient, srv: MediaWikiApiServer
) -> None:
    rev = client.revision_at("Sony Music", snapshot_date=date(2024, 1, 1))
    assert (
        rev is not None and rev.wikitext == load_wikisnap_revision(1071662, "2024-01-01")["content"]
    )
    (req,) = srv.requests
    assert req.header("User-Agent") == UA
    assert "gzip" in (req.header("Accept-Encoding") or "")
    assert req.gzipped  # the server really sent gzip, and the client decoded it (content above)
    assert req.params == {
        "action": "query",
        "prop": "revisions",
        "titles": "Sony Music",
        "rvstart": "2024-01-01T00:00:00Z",
        "rvdir": "older",
        "rvlimit": "1",
        "rvslots": "main",
        "rvprop": "ids|timestamp|sha1|content",
        "redirects": "1",
        "format": "json",
        "formatversion": "2",
        "maxlag": "5",
    }
    assert client.requests_made == 1
    assert client.bytes_received == req.body_bytes  # counted on the wire, compressed
    assert client.bytes_decoded > 2 * client.bytes_received  # wikitext compresses well


def test_min_interval_is_enforced(srv: MediaWikiApiServer, fake_time: FakeTime) -> None:
    with make_client(srv, fake_time, min_interval_s=0.5) as c:
        for title in ("3M", "LIGO", "Cisco"):
            assert c.revision_at(title, snapshot_date=date(2024, 1, 1)) is not None
    assert fake_time.sleeps == [0.5, 0.5]


@pytest.mark.parametrize("user_agent", ["", "   ", "wikidrift/0.1", "python-requests/2.32"])
def test_user_agent_without_contact_is_refused(user_agent: str) -> None:
    with pytest.raises(WikidriftError, match="(?i)user.agent"):
        MediaWikiClient("http://127.0.0.1:9/w/api.php", user_agent=user_agent)


@pytest.mark.parametrize(
    "user_agent", ["wikidrift/0.1 (https://github.com/x/wikidrift)", "bot/1.0 (me@example.org)"]
)
def test_user_agent_with_contact_is_accepted(user_agent: str) -> None:
    MediaWikiClient("http://127.0.0.1:9/w/api.php", user_agent=user_agent).close()


# -- article selection ---------------------------------------------------------------------------


def expected_current_events(srv: MediaWikiApiServer, pages: list[str]) -> list[str]:
    seen: dict[str, None] = {}
    for page in pages:
        for title in sorted(srv.current_events.get(page, []), key=lambda t: (namespace_of(t), t)):
            if namespace_of(title) == 0:
                seen.setdefault(title, None)
    return list(seen)


def test_current_events_titles_follow_continuation_and_dedupe(
    client: MediaWikiClient, srv: MediaWikiApiServer, wikisnap_manifest: dict
) -> None:
    months = [f"Portal:Current events/{m} 2023" for m in ("January", "February", "March", "April")]
    got = current_events_titles(client, "2023-01", "2023-04")
    assert got == expected_current_events(srv, months)
    assert len(got) == len(set(got)) == 37  # 36 articles + one redirect title, each once
    assert set(got) >= {a["title"] for a in articles(wikisnap_manifest)}
    assert "Sony Music Entertainment" in got  # as linked; the source resolves redirects later
    assert not any(":" in t and t.startswith(("Portal:", "Wikipedia:")) for t in got)
    assert len(srv.requests) > 4  # more than one answer per month page
    assert any("plcontinue" in r.params for r in srv.requests)
    for r in srv.requests:
        assert r.params["prop"] == "links" and r.params["plnamespace"] == "0"
        assert r.params["pllimit"] == "max"


def test_current_events_titles_hand_written_pages(wikisnap_dir: Path) -> None:
    pages = {
        "Portal:Current events/December 2022": ["LIGO", "Antimatter", "Portal:Current events"],
        "Portal:Current events/January 2023": ["Cisco", "LIGO", "Barclays", "3M", "Dark energy"],
    }
    with MediaWikiApiServer(wikisnap_dir, current_events=pages, links_page_size=2) as srv:
        with MediaWikiClient(srv.url, user_agent=UA) as c:
            got = current_events_titles(c, "2022-11", "2023-01")  # November 2022: no page
        assert got == ["Antimatter", "LIGO", "3M", "Barclays", "Cisco", "Dark energy"]
        titles = [r.params["titles"] for r in srv.requests]
        assert titles[0] == "Portal:Current events/November 2022"
        assert titles.count("Portal:Current events/January 2023") == 3  # 5 links, 2 per answer


@pytest.mark.parametrize(
    ("start", "end"), [("2023-13", "2023-12"), ("2023-1", "2023-02"), ("2023-05", "2023-01")]
)
def test_current_events_titles_bad_months(client: MediaWikiClient, start: str, end: str) -> None:
    with pytest.raises(ConfigError):
        current_events_titles(client, start, end)


def test_read_article_list(tmp_path: Path) -> None:
    path = tmp_path / "articles.txt"
    path.write_text(
        "\ufeff# GrowOVER sample\n"
        "Sony Music\n"
        "\n"
        "   Lisa_Su   \n"
        "1071662\n"
        "id:7664801\n"
        "ID: 1317  # Antimatter\n"
        "Jack Smith (lawyer)  # inline comment\n"
        "Sony Music\n"
        "   # indented comment\n",
        encoding="utf-8",
    )
    selection = read_article_list(path)
    assert selection.titles == ("Sony Music", "Lisa_Su", "Jack Smith (lawyer)")
    assert selection.page_ids == (1071662, 7664801, 1317)


def test_read_article_list_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("Sony Music\nid:abc\n", encoding="utf-8")
    with pytest.raises(WikidriftError, match=r"bad\.txt:2"):
        read_article_list(bad)
    with pytest.raises(WikidriftError, match="not found"):
        read_article_list(tmp_path / "nope.txt")
