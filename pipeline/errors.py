"""Exceptions that carry a message fit to show a user (the CLI prints them without a traceback)."""

from __future__ import annotations

from pathlib import Path


class WikidriftError(Exception):
    """Base class: something the user can act on (bad input, bad config, unreachable source).
    ``path`` names the file the error is about, if any: for a file of a stage folder the CLI
    adds the command that (re)builds it (:func:`pipeline.stage_folders.rebuild_advice`)."""

    # How the command that writes ``path`` helps: "rebuild" it, "build" it, or "" (no advice).
    remedy = ""

    def __init__(self, *args: object, path: str | Path | None = None) -> None:
        super().__init__(*args)
        self.path = Path(path) if path is not None else None


class ConfigError(WikidriftError):
    """A config value is missing or not allowed; the message names the key and the value."""


class SourceError(WikidriftError):
    """A snapshot source failed; the message names the article, URL or byte offset involved."""


class DumpNotReadyError(SourceError):
    """The requested dump has not finished (dumpstatus.json says so)."""


class IntegrityError(SourceError):
    """Downloaded bytes do not match the checksum the server published, or a stream is truncated."""


class UnknownHostError(SourceError):
    """A source's host name does not resolve (no network, or a wrong URL): retrying cannot help."""


class DamagedFileError(WikidriftError):
    """A stage's file is unreadable, or not the bytes its stage recorded."""

    remedy = "rebuild"


class MissingFileError(WikidriftError):
    """A file a stage reads does not exist (the stage that writes it has not run)."""

    remedy = "build"


class NewerWorkdirError(WikidriftError):
    """The workdir, or one of its tables, was written by a newer wikidrift."""
