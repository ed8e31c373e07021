"""English month names, shared by everything that reads or writes dates in text.

Fixed here rather than taken from :mod:`calendar`, whose names follow the process locale.
"""

from __future__ import annotations

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
