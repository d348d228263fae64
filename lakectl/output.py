"""What lakectl prints: tables, key-value blocks, JSON, dates and sizes, errors.

As lakectl: on a terminal a table has headers and a "for more results" hint; piped
(or with ``LAKECTL_INTERACTIVE=false``) it is one tab-separated line per row with no
header, for scripts. ``--output json`` (this command line's addition) prints the
server's own objects. Errors go to stderr as ``<message>`` then ``Error executing
command.``, with exit status 1.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

import click
from rich.console import Console
from rich.table import Table

DEATH_LINE = "Error executing command."
EXIT_ERROR = 1

TEXT = "text"
JSON = "json"


class Fatal(click.ClickException):
    """A command failed: ``message`` goes to stderr, exit status 1 (lakectl's ``Die``)."""

    exit_code = EXIT_ERROR

    def show(self, file: Any = None) -> None:
        stream = file or sys.stderr
        click.echo(f"{self.message}\n{DEATH_LINE}", file=stream)


def interactive() -> bool:
    """lakectl's terminal test: ``LAKECTL_INTERACTIVE`` when set, else stdout is a tty."""
    value = os.environ.get("LAKECTL_INTERACTIVE", "").strip().lower()
    if value:
        return value not in ("0", "f", "false", "no", "off")
    return sys.stdout.isatty()


def date(ts: int | float | None) -> str:
    """A Unix time as Go prints it (``2006-01-02 15:04:05 -0700 MST``), in local time."""
    if ts is None:
        return ""
    return datetime.fromtimestamp(int(ts)).astimezone().strftime("%Y-%m-%d %H:%M:%S %z %Z")


def human_bytes(n: int | None) -> str:
    """Decimal units as lakectl: ``999 B``, ``1.5 kB``, ``2.0 MB``."""
    n = int(n or 0)
    if n < 1000:
        return f"{n} B"
    div, exp = 1000, 0
    m = n // 1000
    while m >= 1000:
        div *= 1000
        exp += 1
        m //= 1000
    return f"{n / div:.1f} {'kMGTPE'[exp]}B"


class Output:
    """Where a command prints, in the format asked for (``text`` or ``json``)."""

    def __init__(self, fmt: str = TEXT) -> None:
        self.format = fmt

    @property
    def json(self) -> bool:
        return self.format == JSON

    def echo(self, text: str = "", nl: bool = True) -> None:
        click.echo(text, nl=nl)

    def dump(self, value: Any) -> None:
        click.echo(json.dumps(value, indent=2, sort_keys=False))

    def page(self, results: Sequence[Any], pagination: dict[str, Any] | None = None) -> None:
        """A listing in JSON: lakeFS's page shape (``results``, ``pagination``)."""
        self.dump({"results": list(results), "pagination": pagination or {
            "has_more": False, "next_offset": "", "results": len(results),
            "max_per_page": len(results)}})

    def show(self, value: Any, text: Callable[[Any], str]) -> None:
        """One object: as JSON, or as ``text(value)``."""
        if self.json:
            self.dump(value)
        else:
            self.echo(text(value))

    def listing(self, page: dict[str, Any], headers: Sequence[str],
                row: Callable[[dict[str, Any]], Sequence[Any]], amount: int) -> None:
        """One page of a listing: as JSON, or as a table of ``row(result)``."""
        if self.json:
            self.page(page["results"], page.get("pagination"))
        else:
            self.table(headers, [row(r) for r in page["results"]], page.get("pagination"),
                       amount)

    def table(self, headers: Sequence[str], rows: Iterable[Sequence[Any]],
              pagination: dict[str, Any] | None = None, amount: int = 0) -> None:
        rows = [["" if c is None else str(c) for c in row] for row in rows]
        if not interactive():
            for row in rows:
                click.echo("\t".join(row))
            return
        table = Table(*headers)
        for row in rows:
            table.add_row(*row)
        Console(file=sys.stdout, soft_wrap=True).print(table)
        if pagination and pagination.get("has_more") and amount > 0:
            click.echo(f'for more results run with --amount {amount} '
                       f'--after "{pagination.get("next_offset", "")}"')


def output_option(f: Any) -> Any:
    """``-o/--output text|json`` on a command."""
    return click.option("-o", "--output", "output_format", type=click.Choice([TEXT, JSON]),
                        default=TEXT, show_default=True,
                        help="output format: text (as lakectl) or json (the server's objects)")(f)


__all__ = ["DEATH_LINE", "EXIT_ERROR", "JSON", "TEXT", "Fatal", "Output", "date",
           "human_bytes", "interactive", "output_option"]
