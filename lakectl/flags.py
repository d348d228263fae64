"""Flags that several lakectl commands share, with lakectl's names and defaults."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from lakectl.output import Fatal

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_AMOUNT = 100


def pagination(f: F) -> F:
    """``--amount``, ``--after``, ``--prefix`` of lakectl's list commands."""
    f = click.option("--prefix", default="", help="filter results by prefix")(f)
    f = click.option("--after", default="",
                     help="show results after this value (used for pagination)")(f)
    return click.option("--amount", type=int, default=DEFAULT_AMOUNT, show_default=True,
                        help="how many results to return")(f)


_DURATION_PART = re.compile(r"(\d+)([smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> int:
    """Seconds of a duration such as ``90s``, ``30m``, ``1h30m`` or ``7d``.

    Raises:
        Fatal: not such a duration, or zero.
    """
    parts = _DURATION_PART.findall(text)
    if not text or "".join(n + u for n, u in parts) != text:
        raise Fatal(f"invalid duration {text!r}: expected e.g. 90s, 30m, 1h30m or 7d")
    seconds = sum(int(n) * _UNIT_SECONDS[u] for n, u in parts)
    if seconds <= 0:
        raise Fatal(f"invalid duration {text!r}: must be positive")
    return seconds


def yes(f: F) -> F:
    """``-y/--yes``: no confirmation prompt."""
    return click.option("-y", "--yes", "assume_yes", is_flag=True,
                        help="Automatically say yes to all confirmations")(f)


def confirm(assume_yes: bool, question: str, aborted: str) -> None:
    """Ask ``question`` unless ``--yes``; anything but yes (or no terminal) aborts."""
    if assume_yes:
        return
    try:
        if click.confirm(question, default=False, err=True):
            return
    except click.Abort:
        pass
    raise Fatal(aborted)


def commit_options(*, empty_message_default: bool) -> Callable[[F], F]:
    """``-m/--message``, ``--meta key=value`` (repeatable or comma-separated) and
    ``--allow-empty-message``, as lakectl's commit, merge and import."""
    def decorate(f: F) -> F:
        f = click.option("--allow-empty-message", is_flag=False, flag_value=True, type=bool,
                         default=empty_message_default, show_default=True,
                         help="allow an empty commit message")(f)
        f = click.option("--meta", multiple=True,
                         help="key value pair in the form of key=value")(f)
        return click.option("-m", "--message", default="",
                            help="commit message")(f)
    return decorate


def commit_message(message: str, allow_empty: bool) -> str:
    if not message.strip() and not allow_empty:
        raise Fatal("Commit message empty! To commit with empty message pass "
                    "--allow-empty-message flag")
    return message


def key_values(pairs: Sequence[str]) -> dict[str, str]:
    """``key=value`` pairs; each argument may hold several, comma-separated."""
    out: dict[str, str] = {}
    for arg in pairs:
        for pair in arg.split(","):
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise Fatal('invalid key/value pair - should be separated by "="')
            out[key] = value
    return out


def read_json_file(path: str, *, open_prefix: str = "", parse_prefix: str = "") -> Any:
    """The JSON document in the file ``path`` (``-``: stdin), as a flag names it.

    Raises:
        Fatal: the file cannot be read (``open_prefix`` + ``open <path>: <reason>``), or
            is not JSON (``parse_prefix`` + the parser's message).
    """
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path) as f:
                text = f.read()
    except OSError as e:
        raise Fatal(f"{open_prefix}open {path}: {e.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise Fatal(f"{parse_prefix}{e}") from None


__all__ = ["DEFAULT_AMOUNT", "commit_message", "commit_options", "confirm", "key_values",
           "pagination", "read_json_file", "yes"]
