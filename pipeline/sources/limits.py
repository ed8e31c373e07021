"""Bounds on everything a source reads, so no input can take unbounded memory or time.

The defaults sit well above anything real Wikipedia data reaches (MediaWiki refuses to save
more than 2 MiB of wikitext per page; a multistream bz2 stream holds 100 pages) and far below
what a hostile or broken input would need to exhaust a machine. A page or stream over a limit
is skipped and listed as not delivered (with the reason); the run goes on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MiB = 1 << 20


@dataclass(frozen=True)
class SourceLimits:
    """Per-input limits (the ``[limits]`` config section; see the README)."""

    # Wikitext of one page, UTF-8 bytes (MediaWiki's own cap is 2 MiB).
    max_wikitext_bytes: int = 4 * MiB
    # Decompressed XML of one dump <page> (of one <revision> in a multi-revision file).
    max_page_xml_bytes: int = 32 * MiB
    # Decompressed bytes of one bz2 stream of a multistream dump (100 pages).
    max_stream_bytes: int = 256 * MiB
    # A dump file read whole: past max_stream_bytes inflated, reading stops once the inflated
    # bytes exceed this many times the compressed bytes read (real dumps stay under 20x; a
    # bz2 bomb inflates about a million times, and its time, not memory, was unbounded).
    max_inflation_ratio: int = 1000
    # One HTTP answer after gzip decoding (API answers, dumpstatus.json, one stream's bytes).
    max_response_bytes: int = 64 * MiB
    # Total time of one HTTP request, headers and body.
    max_request_s: float = 300.0
    # Whole-file downloads (index, a dump whose server ignores Range) get
    # max_request_s + size / min_download_bytes_per_s.
    min_download_bytes_per_s: int = 64 * 1024
    # Hosts other than the configured one that redirects may lead to.
    redirect_hosts: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        hosts = frozenset(h.strip().lower() for h in self.redirect_hosts if h.strip())
        object.__setattr__(self, "redirect_hosts", hosts)

    def download_deadline_s(self, size: int | None) -> float:
        """The total time allowed for downloading a whole file of ``size`` bytes."""
        return self.max_request_s + (size or 0) / self.min_download_bytes_per_s


DEFAULT_LIMITS = SourceLimits()
