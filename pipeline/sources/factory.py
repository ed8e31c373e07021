"""Build the configured snapshot source and article selection (used by the CLI and flows)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from pipeline.config import Config
from pipeline.errors import ConfigError
from pipeline.sources import SOURCE_KINDS, ArticleSelection, SnapshotSource
from pipeline.sources.limits import SourceLimits
from pipeline.sources.mediawiki_api import (
    MediaWikiApiSource,
    MediaWikiClient,
    current_events_titles,
    read_article_list,
)


def source_limits(cfg: Config) -> SourceLimits:
    """The configured input limits (``[limits]``)."""
    data = cfg.limits.model_dump()
    data["redirect_hosts"] = frozenset(data["redirect_hosts"])
    return SourceLimits(**data)


def api_client(cfg: Config) -> MediaWikiClient:
    """A MediaWiki client with the configured endpoint (``--input`` overrides it)."""
    endpoint = cfg.snapshot.input if cfg.snapshot.source == "api" and cfg.snapshot.input else None
    return MediaWikiClient(
        endpoint or cfg.api.endpoint,
        user_agent=cfg.api.user_agent,
        maxlag=cfg.api.maxlag,
        max_retries=cfg.api.max_retries,
        min_interval_s=cfg.api.min_interval_s,
        timeout_s=cfg.api.timeout_s,
        limits=source_limits(cfg),
    )


def make_source(cfg: Config, workdir: Path, *, snapshot_date: date) -> tuple[SnapshotSource, str]:
    """The configured source and a short description of it, ``<kind>:<input>`` (stored with
    the snapshot: a rebuild compares the kind)."""
    kind = next(k for k in SOURCE_KINDS if k.name == cfg.snapshot.source)  # config-checked
    return kind.build_function()(cfg, workdir, snapshot_date)


def api_source(cfg: Config, workdir: Path, snapshot_date: date) -> tuple[SnapshotSource, str]:
    """The MediaWiki Action API source (``--input``: another endpoint)."""
    client = api_client(cfg)
    return MediaWikiApiSource(client, max_workers=cfg.api.max_workers), f"api:{client.endpoint}"


def resolve_selection(cfg: Config) -> ArticleSelection:
    """The articles to snapshot: Portal:Current events months if configured, else the list
    file, else (``articles = ""``) everything the source holds."""
    ce = cfg.snapshot.current_events
    if ce is not None:
        with api_client(cfg) as client:
            return ArticleSelection(titles=tuple(current_events_titles(client, ce.start, ce.end)))
    if not cfg.snapshot.articles or cfg.snapshot.articles == "all":
        return ArticleSelection()
    path = cfg.resolve_path(cfg.snapshot.articles)
    if not path.exists():
        raise ConfigError(f"snapshot.articles = {cfg.snapshot.articles!r}: no such file")
    return read_article_list(path)
