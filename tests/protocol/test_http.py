"""HTTP's rules for object reads and writes (one module for the API and the gateway)."""

from __future__ import annotations

import email.utils

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakefs_core.errors import RangeNotSatisfiableError, ValidationError
from lakefs_core.protocol.http import (
    ReadOutcome,
    UnsupportedConditionError,
    WriteConditions,
    content_range,
    etag_listed,
    http_date,
    parse_range,
    quote_etag,
    read_outcome,
    unsatisfied_range,
    write_conditions,
)


@pytest.mark.parametrize(("header", "size", "expected"), [
    (None, 10, None),
    ("", 10, None),
    ("bytes=0-0", 10, (0, 0)),
    ("bytes=2-5", 10, (2, 5)),
    ("bytes=2-", 10, (2, 9)),
    ("bytes=8-100", 10, (8, 9)),  # the end is cut to the object
    ("bytes=-3", 10, (7, 9)),  # suffix
    ("bytes=-30", 10, (0, 9)),  # a suffix longer than the object: all of it
])
def test_ranges(header: str | None, size: int, expected: tuple[int, int] | None) -> None:
    assert parse_range(header, size) == expected


@pytest.mark.parametrize(("header", "size"), [
    ("bytes=10-", 10), ("bytes=10-12", 10), ("bytes=5-2", 10), ("bytes=-0", 10),
    ("bytes=0-", 0),
])
def test_unsatisfiable_ranges(header: str, size: int) -> None:
    with pytest.raises(RangeNotSatisfiableError):
        parse_range(header, size)


@pytest.mark.parametrize("header", [
    "items=0-1", "bytes=0-1,3-4", "bytes=a-b", "bytes=5", "bytes=-"])
def test_malformed_ranges(header: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_range(header, 10)
    assert not isinstance(caught.value, RangeNotSatisfiableError)


def test_range_headers() -> None:
    assert content_range(2, 5, 10) == "bytes 2-5/10"
    assert unsatisfied_range(10) == "bytes */10"
    assert quote_etag("abc") == '"abc"' and quote_etag('"abc"') == '"abc"'


@pytest.mark.parametrize(("header", "listed"), [
    ('"abc"', True), ("abc", True), ('W/"abc"', True), ('"x", "abc"', True), ("*", True),
    ('"x"', False), ("", False), (None, False), ('"ab"', False),
])
def test_etag_lists(header: str | None, listed: bool) -> None:
    assert etag_listed(header, "abc") is listed
    assert etag_listed(header, '"abc"') is listed  # the object's ETag quoted or not


@pytest.mark.parametrize(("if_match", "if_none_match", "outcome"), [
    (None, None, ReadOutcome.PROCEED),
    ('"abc"', None, ReadOutcome.PROCEED),
    ('"x"', None, ReadOutcome.PRECONDITION_FAILED),
    (None, '"abc"', ReadOutcome.NOT_MODIFIED),
    (None, "*", ReadOutcome.NOT_MODIFIED),
    (None, '"x"', ReadOutcome.PROCEED),
    ('"x"', '"abc"', ReadOutcome.PRECONDITION_FAILED),  # If-Match is evaluated first
])
def test_read_conditions(if_match: str | None, if_none_match: str | None,
                         outcome: ReadOutcome) -> None:
    assert read_outcome(if_match, if_none_match, "abc") is outcome


def test_write_conditions() -> None:
    assert write_conditions(None, None) == WriteConditions()
    assert write_conditions("*", None) == WriteConditions(if_absent=True)
    assert write_conditions(None, ' "abc" ') == WriteConditions(if_match='"abc"')
    with pytest.raises(UnsupportedConditionError):
        write_conditions('"abc"', None)
    with pytest.raises(ValidationError):
        write_conditions(None, "  ")


def test_http_date_is_the_imf_fixdate() -> None:
    assert http_date(0) == "Thu, 01 Jan 1970 00:00:00 GMT"
    assert http_date(1706702400.999) == "Wed, 31 Jan 2024 12:00:00 GMT"  # seconds cut
    assert http_date(951782400) == "Tue, 29 Feb 2000 00:00:00 GMT"


@given(st.floats(min_value=0, max_value=253402300799, allow_nan=False))
def test_http_date_writes_what_formatdate_writes(seconds: float) -> None:
    assert http_date(seconds) == email.utils.formatdate(seconds, usegmt=True)
