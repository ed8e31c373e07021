"""The ``revisions-dir`` source: a folder laid out like ``tests/data/wikisnap``.

``<root>/revisions/<page_id>/<YYYY-MM-DD>.json`` holds one revision as the MediaWiki API returns
it (``title, page_id, revision_id, revision_timestamp, content``). For a snapshot date the source
takes, per article, the latest file dated at or before that date. ``MANIFEST.json`` (optional)
fixes the article order; without it articles come in ascending page id order.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import date
from pathlib import Path

from pipeline.config import Config
from pipeline.errors import ConfigError, SourceError
from pipeline.records import RawRevision
from pipeline.sources import ArticleSelection, normalize_title
from pipeline.sources.factory import source_limits
from pipeline.sources.limits import DEFAULT_LIMITS, SourceLimits

log = logging.getLogger(__name__)


class RevisionsDirSource:
    """Snapshot source over a local folder of per-article revision JSON files."""

    def __init__(self, root: str | Path, *, limits: SourceLimits = DEFAULT_LIMITS) -> None:
        self.root = Path(root)
        self.limits = limits
        self.revisions_dir = self.root / "revisions"
        if not self.revisions_dir.is_dir():
            raise SourceError(
                f"{self.root}: not a revisions folder (expected {self.revisions_dir}/<page_id>/"
                "<date>.json)"
            )
        self.skipped_not_yet_created: list[int] = []
        self.unmatched: list[str] = []
        self.over_limit: list[str] = []

    def _page_ids_in_order(self) -> list[int]:
        manifest = self.root / "MANIFEST.json"
        on_disk = {int(p.name) for p in self.revisions_dir.iterdir() if p.name.isdigit()}
        if manifest.exists():
            if manifest.stat().st_size > self.limits.max_response_bytes:
                raise SourceError(
                    f"{manifest}: over {self.limits.max_response_bytes} bytes; not a manifest "
                    "(limits.max_response_bytes)"
                )
            listed = [int(a["page_id"]) for a in json.loads(manifest.read_text())["articles"]]
            return [pid for pid in listed if pid in on_disk] + sorted(on_disk - set(listed))
        return sorted(on_disk)

    def _file_at(self, page_id: int, snapshot_date: date) -> Path | None:
        candidates = []
        for f in (self.revisions_dir / str(page_id)).glob("*.json"):
            try:
                file_date = date.fromisoformat(f.stem)
            except ValueError:
                continue  # not a dated revision file
            if file_date <= snapshot_date:
                candidates.append((file_date, f))
        return max(candidates)[1] if candidates else None

    def _skip(
        self, page_id: int, wanted_ids: set[int], selection: ArticleSelection, what: str
    ) -> None:
        """Record a page over a limit (only when selected by id or all: an oversize file is not
        read, so its title is unknown)."""
        if selection.is_all or page_id in wanted_ids or selection.titles:
            limit = self.limits.max_wikitext_bytes
            reason = f"page {page_id} ({what}, over the {limit} byte limit: limits."
            self.over_limit.append(reason + "max_wikitext_bytes)")
            log.warning("revisions-dir %s: %s", self.root, self.over_limit[-1])

    def not_delivered(self) -> list[str]:
        """Requested articles the last run did not yield, as "title-or-id (reason)"."""
        return (
            [f"{t} (no such article)" for t in self.unmatched]
            + [f"page {p} (created after the snapshot date)" for p in self.skipped_not_yet_created]
            + list(self.over_limit)
        )

    def iter_revisions(
        self, selection: ArticleSelection, snapshot_date: date
    ) -> Iterator[RawRevision]:
        """Yield the revision of each selected article current at ``snapshot_date``."""
        self.skipped_not_yet_created = []
        self.over_limit = []
        # JSON escapes can make the file up to 6x its text (\uXXXX); more is not a revision.
        max_file = 6 * self.limits.max_wikitext_bytes + 64 * 1024
        wanted_titles = {normalize_title(t): t for t in selection.titles}
        wanted_ids = set(selection.page_ids)
        seen_titles: set[str] = set()
        for page_id in self._page_ids_in_order():
            path = self._file_at(page_id, snapshot_date)
            if path is None:
                if selection.is_all or page_id in wanted_ids:
                    self.skipped_not_yet_created.append(page_id)
                continue
            size = path.stat().st_size
            if size > max_file:
                self._skip(page_id, wanted_ids, selection, f"{path.name} is {size} bytes")
                continue
            try:
                raw = json.loads(path.read_text(encoding="utf-8"))
                rev = RawRevision(
                    page_id=int(raw["page_id"]),
                    title=str(raw["title"]),
                    revision_id=int(raw["revision_id"]),
                    revision_timestamp=str(raw["revision_timestamp"]),
                    wikitext=str(raw["content"]),
                    sha1=raw.get("sha1"),
                )
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise SourceError(f"{path}: unreadable revision file ({exc})") from exc
            if rev.page_id != page_id:
                raise SourceError(f"{path}: page_id {rev.page_id} does not match its folder")
            title_key = normalize_title(rev.title)
            if not (selection.is_all or page_id in wanted_ids or title_key in wanted_titles):
                continue
            seen_titles.add(title_key)
            wikitext_bytes = len(rev.wikitext.encode("utf-8"))
            if wikitext_bytes > self.limits.max_wikitext_bytes:
                self._skip(page_id, {page_id}, selection, f"wikitext {wikitext_bytes} bytes")
                continue
            yield rev
        self.unmatched = [t for k, t in wanted_titles.items() if k not in seen_titles]
        for title in self.unmatched:
            log.warning("revisions-dir %s: no article titled %r", self.root, title)


def revisions_dir_source(
    cfg: Config, workdir: Path, snapshot_date: date
) -> tuple[RevisionsDirSource, str]:
    """The source of ``--source revisions-dir`` (``--input``: the folder)."""
    value = cfg.snapshot.input
    if not value:
        raise ConfigError(
            "snapshot.input = '': the revisions-dir source needs --input FOLDER "
            "(laid out as revisions/<page_id>/<date>.json)"
        )
    return RevisionsDirSource(cfg.resolve_path(value), limits=source_limits(cfg)), (
        f"revisions-dir:{value}"
    )
