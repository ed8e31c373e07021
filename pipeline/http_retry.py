"""The one ``Retry-After`` rule for every HTTP client of the pipeline (dumps, Action API, LLM)."""

from __future__ import annotations

import email.utils
import re
from collections.abc import Mapping
from datetime import UTC, datetime

__all__ = ["retry_after_seconds"]

# Integer or decimal seconds; no sign, exponent, "inf" or "nan" (those are garbage here).
_SECONDS_RE = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")


def _number(value: str) -> float | None:
    value = value.strip()
    return float(value) if _SECONDS_RE.fullmatch(value) else None


def _seconds(value: str | None) -> float | None:
    if not value or not value.strip():
        return None
    seconds = _number(value)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def retry_after_seconds(value: str | Mapping[str, str] | None) -> float | None:
    """Seconds a server asks to wait before the next try, or None when it asks nothing usable.

    ``value`` is one ``Retry-After`` value, or a response's headers: there ``retry-after-ms``
    (milliseconds, sent by OpenAI-compatible servers) wins over ``retry-after``. A value is
    integer or decimal seconds, or an HTTP-date (one in the past gives 0.0); a negative number
    or anything else gives None. Callers apply their own cap."""
    if value is None or isinstance(value, str):
        return _seconds(value)
    millis = value.get("retry-after-ms")
    if millis:
        ms = _number(millis)
        if ms is not None:
            return ms / 1000.0
    return _seconds(value.get("retry-after"))
