"""``lakectl tag create|list|delete|show``."""

from __future__ import annotations

import click

from lakectl import flags, uri
from lakectl.output import Fatal, Output, output_option
from lakectl.session import Session, pass_session


@click.group()
def tag() -> None:
    """Create and manage tags within a repository"""


@tag.command("create")
@click.argument("tag_uri", metavar="<tag URI>")
@click.argument("commit_uri", metavar="<commit URI>")
@click.option("-f", "--force", is_flag=True, help="override the tag if it exists")
@output_option
@pass_session
def create(s: Session, tag_uri: str, commit_uri: str, force: bool, output_format: str) -> None:
    """Create a new tag in a repository"""
    u = s.ref_uri(tag_uri, "tag URI")
    if commit_uri.startswith(uri.SCHEME):
        target = s.ref_uri(commit_uri, "commit URI")
        if target.repository != u.repository:
            raise Fatal("both references must belong to the same repository")
        commit_ref = target.ref
    else:  # lakectl's earlier form: a bare commit ref
        commit_ref = commit_uri
    out = Output(output_format)
    created = s.json("POST", f"/repositories/{u.repository}/tags", ok=(201,),
                     json={"id": u.ref, "ref": commit_ref, "force": force})
    out.show(created, lambda t: f"Created tag '{u.ref}' ({t['commit_id']})")


@tag.command("list")
@click.argument("repository_uri", metavar="<repository URI>")
@flags.pagination
@output_option
@pass_session
def list_(s: Session, repository_uri: str, amount: int, after: str, prefix: str,
          output_format: str) -> None:
    """List tags in a repository"""
    u = s.repository_uri(repository_uri)
    out = Output(output_format)
    page = s.page(f"/repositories/{u.repository}/tags", {"prefix": prefix}, amount, after)
    out.listing(page, ["Tag", "Commit ID"], lambda t: [t["id"], t["commit_id"]], amount)


@tag.command("show")
@click.argument("tag_uri", metavar="<tag URI>")
@output_option
@pass_session
def show(s: Session, tag_uri: str, output_format: str) -> None:
    """Show tag's commit reference"""
    u = s.ref_uri(tag_uri, "tag URI")
    out = Output(output_format)
    ref = s.json("GET", f"/repositories/{u.repository}/tags/{u.ref}")
    out.show(ref, lambda r: f"{r['id']} {r['commit_id']}")


@tag.command("delete")
@click.argument("tag_uri", metavar="<tag URI>")
@flags.yes
@pass_session
def delete(s: Session, tag_uri: str, assume_yes: bool) -> None:
    """Delete a tag from a repository"""
    u = s.ref_uri(tag_uri, "tag URI")
    flags.confirm(assume_yes, "Are you sure you want to delete tag", "Delete tag aborted")
    s.call("DELETE", f"/repositories/{u.repository}/tags/{u.ref}", ok=(204,))
