"""``lakectl branch-protect add|list|delete``."""

from __future__ import annotations

import click

from lakectl.output import Output, output_option
from lakectl.session import Session, pass_session


@click.group("branch-protect")
def branch_protect() -> None:
    """Create and manage branch protection rules

    Define branch protection rules to prevent direct changes. Changes to protected
    branches can only be done by merging from other branches.
    """


def _rules_path(s: Session, repository_uri: str) -> tuple[str, str]:
    repository = s.repository_uri(repository_uri, "repository").repository
    return repository, f"/repositories/{repository}/branch_protection"


@branch_protect.command("list")
@click.argument("repository_uri", metavar="<repository URI>")
@output_option
@pass_session
def list_(s: Session, repository_uri: str, output_format: str) -> None:
    """List all branch protection rules

    Example: lakectl branch-protect list lakefs://<repository>
    """
    _, path = _rules_path(s, repository_uri)
    rules = s.json("GET", path)
    out = Output(output_format)
    if out.json:
        out.page(rules)
        return
    out.table(["Branch Name Pattern"], [[r["pattern"]] for r in rules])


@branch_protect.command("add")
@click.argument("repository_uri", metavar="<repository URI>")
@click.argument("pattern", metavar="<pattern>")
@pass_session
def add(s: Session, repository_uri: str, pattern: str) -> None:
    """Add a branch protection rule for a given branch name pattern

    Example: lakectl branch-protect add lakefs://<repository> 'stable_*'
    """
    repository, path = _rules_path(s, repository_uri)
    s.call("POST", path, ok=(204,), json={"pattern": pattern})
    click.echo(f"Branch protection rule added to '{repository}' repository.")


@branch_protect.command("delete")
@click.argument("repository_uri", metavar="<repository URI>")
@click.argument("pattern", metavar="<pattern>")
@pass_session
def delete(s: Session, repository_uri: str, pattern: str) -> None:
    """Delete a branch protection rule for a given branch name pattern

    Example: lakectl branch-protect delete lakefs://<repository> 'stable_*'
    """
    repository, path = _rules_path(s, repository_uri)
    s.call("DELETE", path, ok=(204,), json={"pattern": pattern})
    click.echo(f"Branch protection rule deleted from '{repository}' repository.")
