"""``lakectl gc get-config|set-config|delete-config``: a repository's garbage collection
rules (how many days objects stay reachable after leaving a branch)."""

from __future__ import annotations

from typing import Any

import click

from lakectl import flags
from lakectl.output import Output
from lakectl.session import Session, pass_session


@click.group()
def gc() -> None:
    """Manage the garbage collection policy"""


def _rules_text(rules: dict[str, Any]) -> str:
    lines = [f"Default Retention Days: {rules.get('default_retention_days')}",
             "Branch Rules: " + "".join(
                 f"\n  - Branch: {b.get('branch_id')}\n    Retention Days: "
                 f"{b.get('retention_days')}" for b in rules.get("branches") or [])]
    return "\n".join(lines)


@gc.command("get-config")
@click.argument("repository_uri", metavar="<repository URI>")
@click.option("-p", "--json", "as_json", is_flag=True, help="get rules as JSON")
@pass_session
def get_config(s: Session, repository_uri: str, as_json: bool) -> None:
    """Show the garbage collection policy for this repository"""
    u = s.repository_uri(repository_uri, "repository")
    rules = s.json("GET", f"/repositories/{u.repository}/settings/gc_rules")
    Output("json" if as_json else "text").show(rules, _rules_text)


@gc.command("set-config")
@click.argument("repository_uri", metavar="<repository URI>")
@click.option("-f", "--filename", required=True, help="file containing the GC policy as JSON")
@pass_session
def set_config(s: Session, repository_uri: str, filename: str) -> None:
    """Set garbage collection policy JSON

    Sets the garbage collection policy JSON. Example configuration file:

    \b
    {
      "default_retention_days": 21,
      "branches": [
        {"branch_id": "main", "retention_days": 28},
        {"branch_id": "dev", "retention_days": 14}
      ]
    }
    """
    u = s.repository_uri(repository_uri, "repository")
    rules = flags.read_json_file(filename)
    s.call("PUT", f"/repositories/{u.repository}/settings/gc_rules", ok=(204,), json=rules)


@gc.command("delete-config")
@click.argument("repository_uri", metavar="<repository URI>")
@pass_session
def delete_config(s: Session, repository_uri: str) -> None:
    """Deletes the garbage collection policy for the repository"""
    u = s.repository_uri(repository_uri)
    s.call("DELETE", f"/repositories/{u.repository}/settings/gc_rules", ok=(204,))
