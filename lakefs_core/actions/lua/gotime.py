"""Go's time layouts (``2006-01-02T15:04:05-07:00``), which lakeFS's Lua ``time``
module takes for ``format`` and ``parse``: the reference time's parts stand for the
value's parts, everything else is literal text."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

#: the layout lakeFS's ``format_iso`` and ``parse_iso`` use
ISO_LAYOUT = "2006-01-02T15:04:05-07:00"

_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
# longest first where one token starts another
_TOKENS = ["January", "Jan", "Monday", "Mon", "MST", "2006", "002", "01", "02", "03",
           "04", "05", "06", "15", "1", "2", "_2", "3", "4", "5", "PM", "pm",
           "-07:00:00", "-070000", "-07:00", "-0700", "-07",
           "Z07:00:00", "Z070000", "Z07:00", "Z0700", "Z07"]
_FRACTION = re.compile(r"[.,](0+|9+)(?!\d)")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _chunks(layout: str) -> list[str]:
    """The layout as tokens and literal characters."""
    out: list[str] = []
    i = 0
    while i < len(layout):
        m = _FRACTION.match(layout, i)
        if m:
            out.append(m.group(0))
            i = m.end()
            continue
        token = next((t for t in _TOKENS if layout.startswith(t, i)), None)
        out.append(token or layout[i])
        i += len(token) if token else 1
    return out


def zone(name: str) -> tzinfo:
    """A time zone by IANA name; "" and "UTC" are UTC. Raises ValueError."""
    if name in ("", "UTC"):
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name}") from None


def _offset(dt: datetime, token: str) -> str:
    off = dt.utcoffset() or timedelta(0)
    if token.startswith("Z") and not off:
        return "Z"
    sign = "-" if off < timedelta(0) else "+"
    total = abs(int(off.total_seconds()))
    h, m, s = total // 3600, total // 60 % 60, total % 60
    body = token.lstrip("Z-")
    if body == "07":
        return f"{sign}{h:02d}"
    if body == "0700":
        return f"{sign}{h:02d}{m:02d}"
    if body == "07:00":
        return f"{sign}{h:02d}:{m:02d}"
    if body == "070000":
        return f"{sign}{h:02d}{m:02d}{s:02d}"
    return f"{sign}{h:02d}:{m:02d}:{s:02d}"


def _format_token(dt: datetime, token: str) -> str:  # noqa: PLR0911, PLR0912 - a table
    hour12 = dt.hour % 12 or 12
    simple = {
        "January": _MONTHS[dt.month - 1], "Jan": _MONTHS[dt.month - 1][:3],
        "Monday": _DAYS[dt.weekday()], "Mon": _DAYS[dt.weekday()][:3],
        "2006": f"{dt.year:04d}", "06": f"{dt.year % 100:02d}", "01": f"{dt.month:02d}",
        "1": str(dt.month), "02": f"{dt.day:02d}", "_2": f"{dt.day:2d}", "2": str(dt.day),
        "002": f"{dt.timetuple().tm_yday:03d}", "15": f"{dt.hour:02d}",
        "03": f"{hour12:02d}", "3": str(hour12), "04": f"{dt.minute:02d}",
        "4": str(dt.minute), "05": f"{dt.second:02d}", "5": str(dt.second),
        "PM": "PM" if dt.hour >= 12 else "AM", "pm": "pm" if dt.hour >= 12 else "am",
        "MST": dt.tzname() or "UTC",
    }
    if token in simple:
        return simple[token]
    if token.startswith(("-07", "Z07")):
        return _offset(dt, token)
    if _FRACTION.fullmatch(token):
        digits = f"{dt.microsecond:06d}000"[:len(token) - 1]
        if token[1] == "9":
            digits = digits.rstrip("0")
            return token[0] + digits if digits else ""
        return token[0] + digits
    return token


def format_time(ns: int, layout: str, zone_name: str) -> str:
    """Go's ``time.Unix(ns / 1e9, 0).In(zone).Format(layout)`` (whole seconds)."""
    dt = datetime.fromtimestamp(ns // 1_000_000_000, zone(zone_name))
    return "".join(_format_token(dt, c) for c in _chunks(layout))


_NUM = {"2006": r"(\d{4})", "06": r"(\d{2})", "01": r"(\d{2})", "1": r"(\d{1,2})",
        "02": r"(\d{2})", "_2": r" ?(\d{1,2})", "2": r"(\d{1,2})", "002": r"(\d{3})",
        "15": r"(\d{2})", "03": r"(\d{2})", "3": r"(\d{1,2})", "04": r"(\d{2})",
        "4": r"(\d{1,2})", "05": r"(\d{2})", "5": r"(\d{1,2})"}


def _pattern(token: str) -> str:
    if token in _NUM:
        # Go accepts a fractional second right after the seconds even when the layout
        # has none
        return _NUM[token] + (r"(?:[.,](\d+))?" if token in ("05", "5") else "")
    if token in ("January", "Jan", "Monday", "Mon"):
        names = _MONTHS if token.startswith("J") else _DAYS
        return "(" + "|".join(n if len(token) > 3 else n[:3] for n in names) + ")"
    if token in ("PM", "pm"):
        return "(AM|PM|am|pm)"
    if token == "MST":
        return r"([A-Z]{3,5}|[+-]\d{2,4})"
    if token.startswith(("-07", "Z07")):
        return r"(Z|[+-]\d{2}(?::?\d{2}){0,2})" if token[0] == "Z" else \
            r"([+-]\d{2}(?::?\d{2}){0,2})"
    if _FRACTION.fullmatch(token):
        return r"[.,](\d+)" if token[1] == "0" else r"(?:[.,](\d+))?"
    return re.escape(token)


def parse_time(layout: str, value: str) -> int:  # noqa: PLR0912 - one branch a field
    """Go's ``time.Parse(layout, value)`` as nanoseconds since the epoch (UTC unless
    the value gives an offset). Raises ValueError."""
    chunks = _chunks(layout)
    m = re.fullmatch("".join(_pattern(c) for c in chunks), value)
    if m is None:
        raise ValueError(f'parsing time "{value}" as "{layout}": cannot parse')
    groups = iter(m.groups())
    year, month, day, hour, minute, second, nanos = 1, 1, 1, 0, 0, 0, 0
    yday, pm, offset = 0, None, timedelta(0)
    for c in chunks:
        if _pattern(c) == re.escape(c) and c not in _NUM:
            continue
        v = next(groups)
        if c in ("05", "5"):
            second = int(v)
            frac = next(groups)
            nanos = int((frac or "0")[:9].ljust(9, "0"))
        elif c == "2006":
            year = int(v)
        elif c == "06":
            year = 2000 + int(v) if int(v) < 69 else 1900 + int(v)
        elif c in ("01", "1"):
            month = int(v)
        elif c in ("January", "Jan"):
            month = [n[:len(v)] for n in _MONTHS].index(v) + 1
        elif c in ("02", "_2", "2"):
            day = int(v)
        elif c == "002":
            yday = int(v)
        elif c in ("15", "03", "3"):
            hour = int(v)
        elif c in ("04", "4"):
            minute = int(v)
        elif c in ("PM", "pm"):
            pm = v.upper() == "PM"
        elif c.startswith(("-07", "Z07")) and v != "Z":
            digits = v[1:].replace(":", "").ljust(6, "0")
            offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:4]),
                               seconds=int(digits[4:6])) * (-1 if v[0] == "-" else 1)
        elif _FRACTION.fullmatch(c) and v:
            nanos = int(v[:9].ljust(9, "0"))
    if pm is not None:
        hour = hour % 12 + (12 if pm else 0)
    try:
        tz = timezone(offset)
        dt = (datetime(year, 1, 1, hour, minute, second, tzinfo=tz) + timedelta(days=yday - 1)
              if yday else datetime(year, month, day, hour, minute, second, tzinfo=tz))
    except ValueError as exc:
        raise ValueError(f'parsing time "{value}": {exc}') from None
    return (dt - _EPOCH) // timedelta(seconds=1) * 1_000_000_000 + nanos
