"""``lakectl repo create|create-bare|list|delete``."""

from __future__ import annotations

import click

from lakectl import flags
from lakectl.output import Output, date, output_option
from lakectl.session import Session, pass_session


@click.group()
def repo() -> None:
    """Manage and explore repos"""


@repo.command("create")
@click.argument("repository_uri", metavar="<repository URI>")
@click.argument("storage_namespace", metavar="<storage namespace>")
@click.option("-d", "--default-branch", default="main", show_default=True,
              help="the default branch of this repository")
@click.option("--sample-data", is_flag=True, help="create sample data in the repository")
@click.option("--storage-id", default="", help="the storage of this repository (multi-store)")
@output_option
@pass_session
def create(s: Session, repository_uri: str, storage_namespace: str, default_branch: str,
           sample_data: bool, storage_id: str, output_format: str) -> None:
    """Create a new repository"""
    u = s.repository_uri(repository_uri, "repository")
    out = Output(output_format)
    body: dict[str, object] = {"name": u.repository, "storage_namespace": storage_namespace,
                               "default_branch": default_branch}
    if sample_data:
        body["sample_data"] = True
    if storage_id:
        body["storage_id"] = storage_id
    created = s.json("POST", "/repositories", ok=(201,), json=body)
    if out.json:
        out.dump(created)
        return
    out.echo(f"Repository: {u}")
    out.echo(f"Repository '{created['id']}' created:\n"
             f"storage namespace: {created['storage_namespace']}\n"
             f"default branch: {created['default_branch']}\n"
             f"timestamp: {created['creation_date']}")


@repo.command("create-bare")
@click.argument("repository_uri", metavar="<repository URI>")
@click.argument("storage_namespace", metavar="<storage namespace>")
@click.option("-d", "--default-branch", default="main", show_default=True,
              help="the default branch name of this repository (will not be created)")
@click.option("--storage-id", default="", help="the storage of this repository (multi-store)")
@output_option
@pass_session
def create_bare(s: Session, repository_uri: str, storage_namespace: str, default_branch: str,
                storage_id: str, output_format: str) -> None:
    """Create a new repository with no initial branch or commit"""
    u = s.repository_uri(repository_uri, "repository")
    out = Output(output_format)
    if not out.json:
        out.echo(f"Repository: {u}")
    body: dict[str, object] = {"name": u.repository, "storage_namespace": storage_namespace,
                               "default_branch": default_branch}
    if storage_id:
        body["storage_id"] = storage_id
    created = s.json("POST", "/repositories", ok=(201,), params={"bare": "true"}, json=body)
    out.show(created, lambda r: f"Repository '{r['id']}' created:\n"
                                f"storage namespace: {r['storage_namespace']}\n"
                                f"default branch: {r['default_branch']}\n"
                                f"timestamp: {r['creation_date']}")


@repo.command("list")
@flags.pagination
@output_option
@pass_session
def list_(s: Session, amount: int, after: str, prefix: str, output_format: str) -> None:
    """List repositories"""
    out = Output(output_format)
    page = s.page("/repositories", {"prefix": prefix}, amount, after)
    out.listing(page, ["Repository", "Creation Date", "Default Ref Name", "Storage ID",
                       "Storage Namespace"],
                lambda r: [r["id"], date(r.get("creation_date")), r.get("default_branch"),
                           r.get("storage_id") or "", r.get("storage_namespace")], amount)


@repo.command("delete")
@click.argument("repository_uri", metavar="<repository URI>")
@flags.yes
@pass_session
def delete(s: Session, repository_uri: str, assume_yes: bool) -> None:
    """Delete existing repository"""
    u = s.repository_uri(repository_uri, "repository")
    click.echo(f"Repository: {u}")
    flags.confirm(assume_yes, f"Are you sure you want to delete repository: {u.repository}",
                  f"Delete Repository '{u.repository}' aborted")
    s.call("DELETE", f"/repositories/{u.repository}", ok=(204,))
    click.echo(f"Repository '{u.repository}' deleted")
