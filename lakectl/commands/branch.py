"""``lakectl branch create|list|delete|reset|show``."""

from __future__ import annotations

import time

import click

from lakectl import flags, uri
from lakectl.output import Fatal, Output, output_option
from lakectl.session import Session, pass_session


@click.group()
def branch() -> None:
    """Create and manage branches within a repository"""


@branch.command("create")
@click.argument("branch_uri", metavar="<branch URI>")
@click.option("-s", "--source", required=True, help="source branch uri")
@click.option("--ttl", default=None,
              help="delete the branch after this long (e.g. 30m, 1h30m, 7d); "
                   "an extension of this server")
@output_option
@pass_session
def create(s: Session, branch_uri: str, source: str, ttl: str | None,
           output_format: str) -> None:
    """Create a new branch in a repository"""
    u = s.branch_uri(branch_uri, "branch")
    try:
        src = uri.parse(source, s.config.base_uri)
    except uri.URIError as e:
        raise Fatal(f"failed to parse source URI: {e}") from None
    if src.repository != u.repository:
        raise Fatal("source branch must be in the same repository")
    body: dict[str, object] = {"name": u.ref, "source": src.ref}
    if ttl is not None:
        body["expires_at"] = int(time.time()) + flags.parse_duration(ttl)
    out = Output(output_format)
    commit_id = s.call("POST", f"/repositories/{u.repository}/branches", ok=(201,),
                       json=body).text
    if out.json:
        out.dump({"id": u.ref, "commit_id": commit_id,
                  **({"expires_at": body["expires_at"]} if ttl is not None else {})})
        return
    out.echo(f"Source ref: {src}")
    out.echo(f"created branch '{u.ref}' {commit_id}")
    if ttl is not None:
        out.echo(f"expires at {body['expires_at']} (unix seconds)")


@branch.command("list")
@click.argument("repository_uri", metavar="<repository URI>")
@flags.pagination
@output_option
@pass_session
def list_(s: Session, repository_uri: str, amount: int, after: str, prefix: str,
          output_format: str) -> None:
    """List branches in a repository"""
    u = s.repository_uri(repository_uri)
    out = Output(output_format)
    page = s.page(f"/repositories/{u.repository}/branches", {"prefix": prefix}, amount, after)
    out.listing(page, ["Branch", "Commit ID"], lambda b: [b["id"], b["commit_id"]], amount)


@branch.command("show")
@click.argument("branch_uri", metavar="<branch URI>")
@output_option
@pass_session
def show(s: Session, branch_uri: str, output_format: str) -> None:
    """Show branch latest commit reference"""
    u = s.branch_uri(branch_uri)
    out = Output(output_format)
    ref = s.json("GET", f"/repositories/{u.repository}/branches/{u.ref}")
    out.show(ref, lambda r: f"Branch: {u}\nCommit ID: {r['commit_id']}" + (
        f"\nExpires at: {r['expires_at']}" if r.get("expires_at") else ""))


@branch.command("delete")
@click.argument("branch_uri", metavar="<branch URI>")
@flags.yes
@pass_session
def delete(s: Session, branch_uri: str, assume_yes: bool) -> None:
    """Delete a branch in a repository, along with its uncommitted changes (CAREFUL)"""
    flags.confirm(assume_yes, "Are you sure you want to delete branch", "Delete branch aborted")
    u = s.branch_uri(branch_uri)
    click.echo(f"Branch: {u}")
    s.call("DELETE", f"/repositories/{u.repository}/branches/{u.ref}", ok=(204,))


@branch.command("reset")
@click.argument("branch_uri", metavar="<branch URI>")
@click.option("--prefix", default="", help="prefix of the objects to be reset")
@click.option("--object", "object_", default="", help="path to object to be reset")
@flags.yes
@pass_session
def reset(s: Session, branch_uri: str, prefix: str, object_: str, assume_yes: bool) -> None:
    """Reset uncommitted changes - all of them, or by path"""
    u = s.branch_uri(branch_uri, "branch")
    click.echo(f"Branch: {u}")
    if prefix:
        question = f"Are you sure you want to reset all uncommitted changes from path: {prefix}"
        body = {"type": "common_prefix", "path": prefix}
    elif object_:
        question = f"Are you sure you want to reset all uncommitted changes for object: {object_}"
        body = {"type": "object", "path": object_}
    else:
        question = "Are you sure you want to reset all uncommitted changes"
        body = {"type": "reset"}
    flags.confirm(assume_yes, question, "Reset aborted")
    s.call("PUT", f"/repositories/{u.repository}/branches/{u.ref}", ok=(204,), json=body)


@branch.command("revert")
@click.argument("branch_uri", metavar="<branch URI>")
@click.argument("commits", metavar="<commit ref to revert> [<more commits>...]", nargs=-1,
                required=True)
@click.option("-m", "--parent-number", type=int, default=None,
              help="the parent number (starting from 1) of the mainline. The revert will "
                   "reverse the change relative to the specified parent.")
@flags.yes
@pass_session
def revert(s: Session, branch_uri: str, commits: tuple[str, ...], parent_number: int | None,
           assume_yes: bool) -> None:
    """Given a commit, record a new commit to reverse the effect of this commit

    The commits will be reverted in left-to-right order.
    """
    u = s.branch_uri(branch_uri, "branch")
    click.echo(f"Branch: {u}")
    if parent_number is not None and parent_number <= 0:
        raise Fatal("parent number must be non-negative, if specified")
    flags.confirm(assume_yes, "Are you sure you want to revert the effect of commits "
                  + " ".join(commits), "Revert aborted")
    for commit_ref in commits:
        s.call("POST", f"/repositories/{u.repository}/branches/{u.ref}/revert", ok=(204,),
               json={"ref": commit_ref, "parent_number": parent_number or 0})
        click.echo(f"commit {commit_ref} successfully reverted")
