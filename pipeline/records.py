"""Plain records that flow between pipeline stages.

Every snapshot source yields :class:`RawRevision` objects; the text stage turns them into
:class:`Paragraph` lists; the snapshot stage stores articles and sentences as Parquet rows.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RawRevision:
    """One revision of one article as a source delivers it (wikitext, not yet parsed)."""

    page_id: int
    title: str
    revision_id: int
    revision_timestamp: str  # ISO 8601 UTC, e.g. "2023-12-31T18:49:52Z"
    wikitext: str
    sha1: str | None = None  # as the source gives it: hex from the API, base-36 in XML dumps
    namespace: int = 0

    @property
    def wikitext_sha1(self) -> str:
        """Hex sha1 of the wikitext as UTF-8, computed here so every source compares alike."""
        return hashlib.sha1(self.wikitext.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Paragraph:
    """A paragraph of plain text with the title of the section it sits in ("" = lead)."""

    section: str
    text: str
