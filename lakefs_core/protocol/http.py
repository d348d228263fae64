"""HTTP's rules for object reads and writes, decided once for the API and the gateway.

- ``Range: bytes=...`` against an object's size (one range; suffix and open ranges);
- ETag lists (``"a", W/"b", *``) and the conditional headers of a read (``If-Match``,
  ``If-None-Match``) and of a write (``If-None-Match: *``, ``If-Match: <etag>``);
- which user metadata can travel as headers (the rest is kept, and left out);
- what an answer carrying an object's bytes adds so that a browser runs none of them
  in this server's origin (:func:`object_content_headers`);
- the date form of ``Last-Modified`` (:func:`http_date`).

Each front door turns the outcomes into its own answer (lakeFS's JSON errors, S3's
XML ones).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import Enum

from lakefs_core.errors import RangeNotSatisfiableError, ValidationError

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def http_date(seconds: float) -> str:
    """``Wed, 31 Jan 2024 12:00:00 GMT``, the form of ``Last-Modified`` (RFC 9110's
    IMF-fixdate), as ``email.utils.formatdate(seconds, usegmt=True)`` writes it, at a
    fifth of its cost: every object read sends one."""
    t = time.gmtime(seconds)
    return (f"{_DAYS[t.tm_wday]}, {t.tm_mday:02d} {_MONTHS[t.tm_mon - 1]} {t.tm_year:04d} "
            f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT")


class UnsupportedConditionError(ValidationError):
    """A conditional header this server does not support on that request."""


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """Parse a ``Range: bytes=...`` header against an object size.

    Returns:
        (first, last) inclusive, or None when the header asks for the whole object.

    Raises:
        RangeNotSatisfiableError: the range lies outside the object.
        ValidationError: a header that is not one byte range.
    """
    if not header:
        return None
    unit, _, spec = header.partition("=")
    if unit.strip() != "bytes" or "," in spec or "-" not in spec:
        raise ValidationError(f"unsupported range {header!r}")
    start_s, _, end_s = spec.strip().partition("-")
    try:
        start = int(start_s) if start_s else None
        end = int(end_s) if end_s else None
    except ValueError:
        raise ValidationError(f"invalid range {header!r}") from None
    if start is None and end is None:
        raise ValidationError(f"invalid range {header!r}")
    if start is None:  # a suffix: the last ``end`` bytes
        if end is None or end <= 0:
            raise RangeNotSatisfiableError(f"range {header!r} not satisfiable")
        first, last = max(0, size - end), size - 1
    else:
        first, last = start, size - 1 if end is None else end
    if first < 0 or first >= size or last < first:
        raise RangeNotSatisfiableError(f"range {header!r} not satisfiable for size {size}")
    return first, min(last, size - 1)


def content_range(first: int, last: int, size: int) -> str:
    """The ``Content-Range`` value of a partial answer."""
    return f"bytes {first}-{last}/{size}"


def unsatisfied_range(size: int) -> str:
    """The ``Content-Range`` value of a 416 answer."""
    return f"bytes */{size}"


def quote_etag(etag: str) -> str:
    """An ETag as a header carries it: in double quotes."""
    return etag if etag.startswith('"') else f'"{etag}"'


def etag_listed(header: str | None, etag: str) -> bool:
    """Whether a conditional header's ETag list (or ``*``) names ``etag``.

    Entries may be quoted or not, and weak (``W/"..."``); ETags compare without quotes.
    """
    if not header:
        return False
    candidates = [c.strip().removeprefix("W/").strip('"') for c in header.split(",")]
    return "*" in candidates or etag.strip('"') in candidates


class ReadOutcome(Enum):
    """What a read's conditional headers say to do."""

    PROCEED = "proceed"
    NOT_MODIFIED = "not modified"  # 304
    PRECONDITION_FAILED = "precondition failed"  # 412


def read_outcome(if_match: str | None, if_none_match: str | None, etag: str) -> ReadOutcome:
    """Evaluate ``If-Match`` then ``If-None-Match`` for a GET or HEAD of an object."""
    if if_match is not None and not etag_listed(if_match, etag):
        return ReadOutcome.PRECONDITION_FAILED
    if if_none_match is not None and etag_listed(if_none_match, etag):
        return ReadOutcome.NOT_MODIFIED
    return ReadOutcome.PROCEED


@dataclass(frozen=True)
class WriteConditions:
    """A write's conditions: no object may be there (``If-None-Match: *``), or the one
    there must have one of the ETags of ``if_match`` (``*``: any object)."""

    if_absent: bool = False
    if_match: str | None = None


def write_conditions(if_none_match: str | None, if_match: str | None) -> WriteConditions:
    """The conditions of a write's headers.

    Raises:
        UnsupportedConditionError: ``If-None-Match`` other than ``*``.
        ValidationError: an empty ``If-Match``.
    """
    if if_none_match is not None and if_none_match.strip() != "*":
        raise UnsupportedConditionError("If-None-Match supports only '*'")
    if if_match is not None and not if_match.strip():
        raise ValidationError("If-Match needs an ETag or '*'")
    return WriteConditions(if_none_match is not None, if_match.strip() if if_match else None)


_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
_HEADER_VALUE = re.compile(r"^[^\x00-\x08\x0a-\x1f\x7f]*\Z")


def header_value_safe(value: str) -> bool:
    """Whether a value can be a header's: no control characters but tab."""
    return bool(_HEADER_VALUE.match(value))


def metadata_headers(metadata: Mapping[str, str]) -> Iterator[tuple[str, str]]:
    """The user metadata that can travel as headers, as (lower-case name, value), sorted.

    Metadata whose name is not an HTTP token, or whose value has control characters,
    is left out rather than breaking the answer: every front door returns an object
    whatever metadata was set on it.
    """
    for name, value in sorted(metadata.items()):
        if _TOKEN.match(name) and header_value_safe(value):
            yield name.lower(), value


#: the Content-Security-Policy of every answer carrying an object's bytes: a page among
#: them runs in a sandbox (no script, an origin of its own) and loads nothing
OBJECT_CONTENT_SECURITY_POLICY = "sandbox; default-src 'none'"
#: media types a browser would run or render as a document with script in it
_ACTIVE_TYPES = frozenset({
    "text/html", "application/xhtml+xml", "image/svg+xml", "text/xml", "application/xml",
    "text/xsl", "application/xslt+xml", "text/javascript", "application/javascript",
    "application/x-javascript", "text/ecmascript", "application/ecmascript",
    "application/pdf", "text/vnd.wap.wml", "multipart/x-mixed-replace",
    "application/vnd.wap.xhtml+xml", "text/x-component",
})


def is_active_content(content_type: str) -> bool:
    """Whether a browser could run script in content of ``content_type`` (HTML, XML and
    its dialects, SVG, JavaScript, ...)."""
    media = content_type.partition(";")[0].strip().lower()
    return media in _ACTIVE_TYPES or media.endswith("+xml")


def object_content_headers(content_type: str, disposition: str | None = None, *,
                           attach_active: bool = True) -> dict[str, str]:
    """The headers an answer carrying an object's bytes adds to its own, whoever stored
    the object: ``X-Content-Type-Options: nosniff``, a sandboxing
    Content-Security-Policy and, for active content (:func:`is_active_content`),
    ``Content-Disposition: attachment`` unless ``disposition`` already is one.

    Args:
        content_type: The Content-Type the answer carries (stored or overridden).
        disposition: The Content-Disposition it carries, if any.
        attach_active: Whether active content is made a download (False for a client
            that signs its requests, which no browser does: S3's answer stays S3's).
    """
    headers = {"x-content-type-options": "nosniff",
               "content-security-policy": OBJECT_CONTENT_SECURITY_POLICY}
    if (attach_active and is_active_content(content_type)
            and not (disposition or "").strip().lower().startswith("attachment")):
        headers["content-disposition"] = "attachment"
    return headers
