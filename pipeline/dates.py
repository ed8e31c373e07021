"""English month names, shared by everything that reads or writes dates in text, and the
reading of a written date ("5 March 2024", "March 2024", "2024-3-5") as ISO.

Fixed here rather than taken from :mod:`calendar`, whose names follow the process locale.
"""

from __future__ import annotations

import re
from datetime import date

MONTH_NAMES = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
# Full names, three-letter abbreviations and "Sept", lower-case -> month number.
MONTH_NUMBERS: dict[str, int] = (
    {m.lower(): i for i, m in enumerate(MONTH_NAMES, 1)}
    | {m[:3].lower(): i for i, m in enumerate(MONTH_NAMES, 1)}
    | {"sept": 9}
)

_MONTH = r"([a-z]+)\.?"
_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?:[t ].*)?$"), "ymd"),
    (re.compile(r"^(\d{4})[-/.](\d{1,2})$"), "ym"),
    (re.compile(r"^(\d{4})$"), "y"),
    (re.compile(rf"^(\d{{1,2}})(?:st|nd|rd|th)? {_MONTH},? (\d{{4}})$"), "dmy"),
    (re.compile(rf"^{_MONTH} (\d{{1,2}})(?:st|nd|rd|th)?,? (\d{{4}})$"), "mdy"),
    (re.compile(rf"^{_MONTH},? (\d{{4}})$"), "my"),
]


def _iso(year: int, month: int | None = None, day: int | None = None) -> str | None:
    try:
        date(year, month or 1, day or 1)
    except ValueError:
        return None
    if month is None:
        return f"{year:04d}"
    return f"{year:04d}-{month:02d}" if day is None else f"{year:04d}-{month:02d}-{day:02d}"


def iso_date(text: str) -> str | None:
    """ISO ``YYYY`` / ``YYYY-MM`` / ``YYYY-MM-DD``, at the precision written, of a date that is
    the whole of ``text`` ("2024-3-5", "5 March 2024", "March 5, 2024", "Sept. 2024",
    "2024"); None for anything else, an impossible date included ("31 February 2024")."""
    text = " ".join(text.strip().lower().split())
    for pattern, shape in _PATTERNS:
        m = pattern.match(text)
        if not m:
            continue
        g = m.groups()
        out: str | None = None
        if shape == "ymd":
            out = _iso(int(g[0]), int(g[1]), int(g[2]))
        elif shape == "ym":
            out = _iso(int(g[0]), int(g[1]))
        elif shape == "y":
            out = _iso(int(g[0]))
        elif shape == "dmy" and g[1] in MONTH_NUMBERS:
            out = _iso(int(g[2]), MONTH_NUMBERS[g[1]], int(g[0]))
        elif shape == "mdy" and g[0] in MONTH_NUMBERS:
            out = _iso(int(g[2]), MONTH_NUMBERS[g[0]], int(g[1]))
        elif shape == "my" and g[0] in MONTH_NUMBERS:
            out = _iso(int(g[1]), MONTH_NUMBERS[g[0]])
        if out is not None:
            return out
    return None
