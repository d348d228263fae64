"""``lakectl identity`` (who lakectl acts as) and ``lakectl usage summary`` (the
installation's usage report)."""

from __future__ import annotations

import click

from lakectl.output import Output, date, output_option
from lakectl.session import Session, pass_session


@click.command("identity")
@output_option
@pass_session
def identity(s: Session, output_format: str) -> None:
    """Show identity info

    Show the info of the configured user in lakectl.
    """
    user = s.json("GET", "/user")["user"]
    Output(output_format).show(user, lambda u: (
        f"User ID:          {u['id']}\n"
        f"Email:            {u.get('email') or ''}\n"
        f"Creation Date:    {date(u.get('creation_date'))}"))


@click.group("usage")
def usage() -> None:
    """Usage reports from lakeFS"""


@usage.command("summary")
@output_option
@pass_session
def usage_summary(s: Session, output_format: str) -> None:
    """Summary reports from lakeFS"""
    summary = s.json("GET", "/usage-report/summary")
    out = Output(output_format)
    if out.json:
        out.dump(summary)
        return
    out.echo(f"Usage report for installation ID: {summary['installation_id']}\n")
    out.table(["Year", "Month", "Usage"],
              [[r["year"], r["month"], r["count"]] for r in summary.get("reports") or []])
