"""Durations as lakeFS writes them (``1m``, ``20s``, ``1h30m``, ``500ms``).
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated

from pydantic import (
    BeforeValidator,
    PlainSerializer,
)

# --- durations ------------------------------------------------------------------------
_DURATION_UNITS: dict[str, float] = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_NUMBER = re.compile(r"\d+\.?\d*|\.\d+")


def parse_duration(value: object) -> timedelta:
    """Parse a Go-style duration (``20s``, ``1m``, ``1h30m``, ``500ms``) into a timedelta.

    A plain number (int, float or numeric string) is taken as seconds. Negative
    durations are refused.

    Raises:
        ValueError: the value is not a duration.
    """
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool):
        raise ValueError("a duration is expected, such as '20s', '1m' or '1h30m'")
    elif isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        if _NUMBER.fullmatch(text):
            seconds = float(text)
        else:
            pos = 0
            seconds = 0.0
            for match in _DURATION_PART.finditer(text):
                if match.start() != pos:
                    break
                seconds += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
                pos = match.end()
            if pos == 0 or pos != len(text):
                raise ValueError(
                    f"invalid duration {value!r}: expected a number with a unit "
                    "(ns, us, ms, s, m, h), such as '20s', '1m' or '1h30m'"
                )
    else:
        raise ValueError("a duration is expected, such as '20s', '1m' or '1h30m'")
    if seconds < 0:
        raise ValueError(f"duration must not be negative, got {value!r}")
    return timedelta(seconds=seconds)


def format_duration(value: timedelta) -> str:
    """Format a timedelta the way :func:`parse_duration` reads it (``1h30m``, ``500ms``)."""
    micros = round(value.total_seconds() * 1_000_000)
    if micros == 0:
        return "0s"
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    if micros < 1_000_000:
        if micros % 1000 == 0:
            return f"{sign}{micros // 1000}ms"
        return f"{sign}{micros}us"
    hours, rest = divmod(micros, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    seconds, fraction = divmod(rest, 1_000_000)
    text = ""
    if hours:
        text += f"{hours}h"
    if minutes:
        text += f"{minutes}m"
    if fraction:
        text += f"{seconds}.{fraction:06d}".rstrip("0") + "s"
    elif seconds:
        text += f"{seconds}s"
    return sign + text


#: A timedelta read from ``20s``/``1m``/``1h30m``/``500ms`` (or a number of seconds),
#: written back in the same form when dumped as JSON.
Duration = Annotated[
    timedelta,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str, when_used="json"),
]
