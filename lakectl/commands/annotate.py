"""``lakectl annotate`` (``blame``): each entry under a path with the latest commit that
changed it."""

from __future__ import annotations

import click

from lakectl.output import date
from lakectl.session import Session, pass_session

MESSAGE_SIZE = 200
ELLIPSIS = "..."


def _short_message(message: str) -> str:
    if len(message) > MESSAGE_SIZE:
        message = message[:MESSAGE_SIZE - len(ELLIPSIS)] + ELLIPSIS
    return message.split("\n", 1)[0]


@click.command("annotate")
@click.argument("path_uri", metavar="<path URI>")
@click.option("-r", "--recursive", is_flag=True,
              help="recursively annotate all entries under a given path or prefix")
@click.option("--first-parent", is_flag=True,
              help="follow only the first parent commit upon seeing a merge commit")
@pass_session
def annotate(s: Session, path_uri: str, recursive: bool, first_parent: bool) -> None:
    """List entries under a given path, annotating each with the latest modifying commit"""
    u = s.path_uri(path_uri, "path")
    base = f"/repositories/{u.repository}/refs/{u.ref}"
    entries = s.every(f"{base}/objects/ls", {"prefix": u.path_or_empty,
                                             "delimiter": "" if recursive else "/",
                                             "user_metadata": "false"})
    for entry in entries:
        kind = "objects" if entry.get("path_type") == "object" else "prefixes"
        found = s.page(f"{base}/commits", {kind: [entry["path"]], "limit": "true",
                                           "first_parent": "true" if first_parent else None},
                       1)["results"]
        c = found[0] if found else {}
        when = date(c["creation_date"]) if c.get("creation_date") else ""
        click.echo(f"{entry['path']:<15} {c.get('committer', ''):<20} "
                   f"{c.get('id', '')[:16]:<20} {when}  "
                   f"{_short_message(c.get('message', ''))}")


#: lakectl's other name of annotate
blame = click.Command("blame", callback=annotate.callback, params=annotate.params,
                      help=annotate.help, hidden=True)
