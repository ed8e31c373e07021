"""Attribution: which Wikipedia article revisions a release quotes (``sources.parquet``).

Every item row of a release (schema v3 on) names the revision its evidence sentence comes
from (``revision_id``; temporal questions one per quadruple, relations one per end), read from
the stored snapshot's ``articles.parquet``: ``(page_id, revision_id, evidence_sent_idx)``
locates the sentence. ``sources.parquet`` lists each of those revisions once, and those of the
sentence labels (the snapshot's and, for matched or deleted sentences, the previous one's),
with its title, timestamp, ``oldid`` URL and licence: what CC BY-SA asks of a re-publisher.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa

from pipeline.layout import ledger_snapshots, read_snapshot_table
from pipeline.schemas import SOURCES_SCHEMA, WIKIPEDIA_LICENSE

DEFAULT_SITE = "https://en.wikipedia.org"
# The release tables' columns that hold revision ids (a list column: one per quadruple).
REVISION_COLUMNS: dict[str, tuple[str, ...]] = {
    "qa": ("revision_id",),
    "dialogue": ("revision_id",),
    "quadruples": ("revision_id",),
    "temporal_qa": ("revision_ids",),
    "timelines": ("revision_id",),
    "relations": ("source_revision_id", "target_revision_id"),
}


def first_release(created_snapshot: str) -> str:
    """The id of the first release that holds an item made at ``created_snapshot`` (every
    snapshot the ledger reaches gets a release; a later revision of it keeps the id)."""
    return f"wikidrift-{created_snapshot}"


def wiki_site(config: dict[str, Any]) -> str:
    """The wiki a release's articles come from, as ``https://host`` (from a manifest's
    config): the API endpoint's host, the dump's wiki (``dewiki`` -> de.wikipedia.org), else
    English Wikipedia (a revisions folder records no wiki)."""
    snapshot = config.get("snapshot") or {}
    source = snapshot.get("source")
    if source == "api":
        parts = urlsplit(str((config.get("api") or {}).get("endpoint") or ""))
        if parts.scheme in ("http", "https") and parts.hostname:
            return f"https://{parts.hostname}"
    if source == "dump":
        wiki = str((config.get("dump") or {}).get("wiki") or "")
        m = re.fullmatch(r"([a-z][a-z0-9-]*)wiki", wiki)
        if m:
            return f"https://{m.group(1).replace('_', '-')}.wikipedia.org"
    return DEFAULT_SITE


def oldid_url(site: str, revision_id: int) -> str:
    """The permanent URL of one revision: ``<site>/w/index.php?oldid=<revision_id>``."""
    return f"{site}/w/index.php?oldid={revision_id}"


class Revisions:
    """The revision of each article in each stored snapshot of a workdir, read once per
    snapshot from its ``articles.parquet``."""

    def __init__(self, workdir: str | Path) -> None:
        self.workdir = Path(workdir)
        self._by_snapshot: dict[str, dict[int, int]] = {}
        self._meta: dict[int, dict[str, Any]] = {}

    def _load(self, snapshot: str) -> dict[int, int]:
        if snapshot not in self._by_snapshot:
            table = read_snapshot_table(
                self.workdir,
                snapshot,
                "articles",
                columns=["page_id", "title", "revision_id", "revision_timestamp"],
            )
            found = {}
            for row in table.to_pylist():
                found[row["page_id"]] = row["revision_id"]
                self._meta.setdefault(row["revision_id"], row)
            self._by_snapshot[snapshot] = found
        return self._by_snapshot[snapshot]

    def of(self, snapshot: str | None, page_id: int) -> int | None:
        """The revision of page ``page_id`` stored in ``snapshot`` (None: not there)."""
        if snapshot is None:
            return None
        return self._load(snapshot).get(page_id)

    def meta(self, revision_id: int, snapshots: Iterable[str]) -> dict[str, Any] | None:
        """page_id, title, revision_id and revision_timestamp of a revision stored in one of
        ``snapshots``."""
        if revision_id not in self._meta:
            for snap in snapshots:
                self._load(snap)
                if revision_id in self._meta:
                    break
        return self._meta.get(revision_id)


def used_revisions(
    tables: dict[str, pa.Table], revisions: Revisions, snapshot: str, previous: str | None
) -> set[int]:
    """Every revision the rows of a release's tables use: their revision columns, and the
    pages of its sentence labels (this snapshot's sentences; the previous snapshot's where a
    label points at an old sentence)."""
    used: set[int] = set()
    for name, columns in REVISION_COLUMNS.items():
        if name not in tables:
            continue
        for column in columns:
            for value in tables[name][column].to_pylist():
                for rev in value if isinstance(value, list) else [value]:
                    if rev is not None:
                        used.add(rev)
    labels = tables.get("sentence_labels")
    if labels is not None:
        for page, new_idx, old_idx in zip(
            labels["page_id"].to_pylist(),
            labels["new_idx"].to_pylist(),
            labels["old_idx"].to_pylist(),
            strict=True,
        ):
            for snap, used_here in ((snapshot, new_idx is not None), (previous, bool(old_idx))):
                rev = revisions.of(snap, page) if used_here else None
                if rev is not None:
                    used.add(rev)
    return used


def sources_table(
    workdir: str | Path,
    snapshot: str,
    previous: str | None,
    tables: dict[str, pa.Table],
    *,
    site: str = DEFAULT_SITE,
    revisions: Revisions | None = None,
) -> pa.Table:
    """``sources.parquet`` of the release of ``snapshot``: one row per revision its
    ``tables`` use, sorted by page and revision. A revision no stored snapshot up to
    ``snapshot`` holds is an error (the release would quote text it cannot attribute)."""
    revisions = revisions or Revisions(workdir)
    snapshots = [s for s in ledger_snapshots(workdir) if s <= snapshot][::-1]  # newest first
    rows = []
    for rev in sorted(used_revisions(tables, revisions, snapshot, previous)):
        meta = revisions.meta(rev, snapshots)
        if meta is None:
            raise ValueError(f"revision {rev} is in no stored snapshot up to {snapshot}")
        rows.append(
            {
                "page_id": meta["page_id"],
                "title": meta["title"],
                "revision_id": rev,
                "revision_timestamp": meta["revision_timestamp"],
                "url": oldid_url(site, rev),
                "license": WIKIPEDIA_LICENSE,
            }
        )
    rows.sort(key=lambda r: (r["page_id"], r["revision_id"]))
    return pa.Table.from_pylist(rows, schema=SOURCES_SCHEMA)
