"""Where snapshots come from. Each source is download -> iterate -> extract and yields
:class:`pipeline.records.RawRevision` objects for one snapshot date.

- :mod:`pipeline.sources.mediawiki_api`: the MediaWiki Action API (revision current at a date).
- :mod:`pipeline.sources.dumps`: Wikimedia XML dumps (multistream + index, Range requests) or a
  local dump / Special:Export file.
- :mod:`pipeline.sources.local`: a folder laid out like ``tests/data/wikisnap``.

:data:`SOURCE_KINDS` is the one list of them: the names ``snapshot.source`` and ``--source``
accept, what ``--input`` means for each, which work offline, and the function that builds each
from the config. A builder is named by its module path and imported when it is used, so adding a
source is its module and one line here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from functools import cached_property
from typing import Any, Protocol

from pipeline.records import RawRevision


@dataclass(frozen=True)
class ArticleSelection:
    """Which articles to take. Both empty means every article the source holds."""

    titles: tuple[str, ...] = field(default_factory=tuple)
    page_ids: tuple[int, ...] = field(default_factory=tuple)

    @property
    def is_all(self) -> bool:
        return not self.titles and not self.page_ids

    @cached_property
    def _id_set(self) -> frozenset[int]:
        return frozenset(self.page_ids)

    @cached_property
    def _title_set(self) -> frozenset[str]:
        return frozenset(normalize_title(t) for t in self.titles)

    def matches(self, page_id: int, title: str) -> bool:
        """True when the page is selected (titles compare with MediaWiki's title normalization)."""
        if self.is_all:
            return True
        return page_id in self._id_set or normalize_title(title) in self._title_set


class SnapshotSource(Protocol):
    """Anything that yields the revision of each selected article current at a date."""

    def iter_revisions(
        self, selection: ArticleSelection, snapshot_date: date
    ) -> Iterator[RawRevision]: ...

    def not_delivered(self) -> list[str]:
        """What the last ``iter_revisions`` was asked for but did not yield, with reasons."""
        ...


def normalize_title(title: str) -> str:
    """MediaWiki title normalization for the main namespace: underscores to spaces, collapsed
    whitespace, first letter upper-cased (enwiki is a first-letter-case wiki)."""
    t = " ".join(title.replace("_", " ").split())
    return t[:1].upper() + t[1:]


def snapshot_cutoff(snapshot_date: date) -> datetime:
    """The instant a snapshot date stands for: 00:00:00 UTC of that day. The revision current at
    the snapshot is the latest one saved at or before this instant."""
    return datetime.combine(snapshot_date, time(0, 0), tzinfo=UTC)


def parse_timestamp(ts: str) -> datetime:
    """Parse a MediaWiki ISO 8601 timestamp ("2023-12-31T18:49:52Z") into an aware datetime."""
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


@dataclass(frozen=True)
class SourceKind:
    """One kind of snapshot source."""

    name: str  # ``snapshot.source`` / ``--source``
    input_help: str  # what ``snapshot.input`` / ``--input`` holds for it
    offline: bool  # works from local files (suggested when a host does not resolve)
    builder: str  # "module:function", (cfg, workdir, snapshot_date) -> (source, description)

    def build_function(self) -> Callable[..., tuple[Any, str]]:
        """The function that builds this source from the config."""
        module, _, function = self.builder.partition(":")
        return getattr(importlib.import_module(module), function)


SOURCE_KINDS: tuple[SourceKind, ...] = (
    SourceKind("api", "endpoint URL", False, "pipeline.sources.factory:api_source"),
    SourceKind(
        "dump",
        "dump directory URL or local dump file",
        True,
        "pipeline.sources.dumps:dump_source",
    ),
    SourceKind(
        "revisions-dir",
        "folder with revisions/<page_id>/<date>.json",
        True,
        "pipeline.sources.local:revisions_dir_source",
    ),
)
SOURCE_NAMES: tuple[str, ...] = tuple(k.name for k in SOURCE_KINDS)
