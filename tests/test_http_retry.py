"""The one Retry-After rule shared by the dump client, the Action API client and the LLM backend."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from pipeline.http_retry import retry_after_seconds

PAST = "Wed, 21 Oct 2015 07:28:00 GMT"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # one Retry-After value: integer or decimal seconds, or an HTTP-date
        ("7", 7.0),
        (" 3 ", 3.0),
        ("0", 0.0),
        ("1.5", 1.5),
        (".5", 0.5),
        (PAST, 0.0),
        ("Wed, 21 Oct 2015 07:28:00 -0000", 0.0),
        # negative or garbage: nothing usable
        ("-5", None),
        ("-1.5", None),
        ("+5", None),
        ("1e3", None),
        ("inf", None),
        ("nan", None),
        ("soon", None),
        ("", None),
        ("  ", None),
        (None, None),
        # response headers: retry-after-ms wins over retry-after
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "1500", "retry-after": "30"}, 1.5),
        ({"retry-after-ms": "soon", "retry-after": "2"}, 2.0),
        ({"retry-after-ms": "-5", "retry-after": "2"}, 2.0),
        ({"retry-after-ms": "-5"}, None),
        ({"retry-after": PAST}, 0.0),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_rule(value: str | Mapping[str, str] | None, expected: float | None) -> None:
    assert retry_after_seconds(value) == expected


def test_retry_after_future_http_date() -> None:
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 <= (retry_after_seconds(later) or 0) <= 31
    assert 25 <= (retry_after_seconds({"retry-after": later}) or 0) <= 31
