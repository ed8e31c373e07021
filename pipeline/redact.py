"""Strip what is private from values that get published (release manifests, dataset cards,
Hugging Face exports): contact e-mail addresses, credentials in URLs (``user:pass@``, query
strings), the Dask scheduler address, and absolute paths of this machine.

The redacted form is also what the config hash is computed from, so ``wikidrift verify`` can
recompute the hash from a published manifest.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REDACTED = "<redacted>"
LOCAL = "<local>"

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s\"'<>`)\]]+")
# An absolute path in free text: "/a/b", "~/a" or "C:\a", not part of a URL or a word.
_TEXT_PATH = re.compile(r"(?<![\w.:/<>~-])(?:~|[A-Za-z]:)?[/\\](?:[\w.+@-]+[/\\])+[\w.+@-]*")
# Config keys whose value says where this machine keeps files or how it reaches a cluster.
_ADDRESS_KEYS = {("flow", "dask_address")}


def redact_url(url: str) -> str:
    """``url`` without user, password, query string or fragment (they may hold tokens)."""
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc:
        return url
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:  # not a port: keep nothing after the host
        port = None
    netloc = host + (f":{port}" if port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def without_credentials(url: str) -> str:
    """``url`` without ``user:password@`` (the rest kept: messages on this machine's console
    may show paths and queries, never credentials)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    return parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]).geturl()


def strip_credentials(text: str) -> str:
    """Free text with the ``user:password@`` of every URL in it removed."""
    return _URL.sub(lambda m: without_credentials(m.group(0)), text)


def _is_absolute_path(value: str) -> bool:
    return value.startswith(("/", "~", "\\\\")) or bool(re.match(r"^[A-Za-z]:[/\\]", value))


def redact_path(value: str) -> str:
    """An absolute path as ``<local>/<file name>``: the name identifies the file, the folders
    only describe this machine. Relative paths and other values are returned unchanged."""
    if not _is_absolute_path(value):
        return value
    name = re.split(r"[/\\]", value.rstrip("/\\"))[-1]
    return f"{LOCAL}/{name}" if name and name != "~" else LOCAL


def redact_text(text: str) -> str:
    """Free text with e-mail addresses, URL credentials and absolute paths removed."""
    text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    text = _EMAIL.sub(REDACTED, text)
    return _TEXT_PATH.sub(lambda m: redact_path(m.group(0)), text)


def redact_value(value: Any) -> Any:
    """Any JSON-like value with every string redacted (see :func:`redact_text`); a string
    that is one whole path or URL keeps its file name or host."""
    if isinstance(value, dict):
        return {k: redact_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(v) for v in value]
    if not isinstance(value, str):
        return value
    if _is_absolute_path(value):
        return redact_path(value)
    if "://" in value and not any(c.isspace() for c in value):
        return _EMAIL.sub(REDACTED, redact_url(value))
    return redact_text(value)


def redact_config(data: dict[str, Any]) -> dict[str, Any]:
    """A config dump (``Config.model_dump(mode="json")``) fit to publish: every string
    redacted, and the addresses of this machine's services replaced by ``<redacted>``."""
    out = redact_value(data)
    for section, key in _ADDRESS_KEYS:
        if out.get(section, {}).get(key):
            out[section][key] = REDACTED
    return out
