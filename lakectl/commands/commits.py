"""``lakectl commit``, ``log``, ``diff``, ``merge``, ``cherry-pick``, ``show commit`` and
``find-merge-base``."""

from __future__ import annotations

from typing import Any

import click

from lakectl import flags
from lakectl.output import Fatal, Output, date, interactive, output_option
from lakectl.session import INTERNAL_PAGE_SIZE, Session, pass_session
from lakefs_core.client import ApiError

DIFF_ACTIONS = {"added": "+ added", "removed": "- removed", "changed": "~ modified",
                "conflict": "* conflict", "prefix_changed": "~ modified"}


@click.command("commit")
@click.argument("branch_uri", metavar="<branch URI>")
@flags.commit_options(empty_message_default=False)
@click.option("--allow-empty-commit", is_flag=True, help="allow a commit with no changes")
@output_option
@pass_session
def commit(s: Session, branch_uri: str, message: str, meta: tuple[str, ...],
           allow_empty_message: bool, allow_empty_commit: bool, output_format: str) -> None:
    """Commit changes on a given branch"""
    u = s.branch_uri(branch_uri)
    body = {"message": flags.commit_message(message, allow_empty_message),
            "metadata": flags.key_values(meta), "allow_empty": allow_empty_commit}
    out = Output(output_format)
    if not out.json:
        out.echo(f"Branch: {u}")
    created = s.json("POST", f"/repositories/{u.repository}/branches/{u.ref}/commits",
                     ok=(201,), json=body)
    out.show(created, lambda c: commit_created_text(u.ref, c))


def commit_created_text(branch: str, c: dict[str, Any]) -> str:
    return (f'Commit for branch "{branch}" completed.\n\n'
            f"ID: {c['id']}\n"
            f"Message: {c['message']}\n"
            f"Timestamp: {date(c.get('creation_date'))}\n"
            f"Parents: {', '.join(c.get('parents') or [])}\n")


def commit_text(c: dict[str, Any], show_meta_range_id: bool) -> str:
    lines = ["", f"ID:            {c['id']}"]
    if c.get("committer"):
        lines.append(f"Author:        {c['committer']}")
    lines.append(f"Date:          {date(c.get('creation_date'))}")
    if show_meta_range_id:
        lines.append(f"Meta Range ID: {c.get('meta_range_id', '')}")
    parents = c.get("parents") or []
    if len(parents) > 1:
        lines.append(f"Merge:         {', '.join(parents)}")
    lines += ["", f"\t{c.get('message', '')}", "\t"]
    lines += [f"\t\t{k} = {v}" for k, v in sorted((c.get("metadata") or {}).items())]
    return "\n".join(lines)


def _dot(commits: list[dict[str, Any]]) -> str:
    lines = ["digraph {", '  rankdir="BT"']
    for c in commits:
        label = c.get("message", "").replace('"', '\\"')
        lines.append(f'  "{c["id"]}" [shape=note label="{c["id"][:8]}\\n{label}"]')
        lines += [f'  "{c["id"]}" -> "{p}" [dir="forward"]' for p in c.get("parents") or []]
    lines.append("}")
    return "\n".join(lines)


@click.command("log")
@click.argument("ref_uri", metavar="<ref URI>")
@click.option("--amount", type=int, default=0,
              help="number of results to return. By default, all results are returned")
@click.option("--after", default="", help="show results after this value (used for pagination)")
@click.option("--limit", is_flag=True, help="limit result just to amount. By default, returns "
              "whether more items are available.")
@click.option("--dot", is_flag=True, help="return results in a dotgraph format")
@click.option("--first-parent", is_flag=True,
              help="follow only the first parent commit upon seeing a merge commit")
@click.option("--no-merges", is_flag=True, help="skip merge commits")
@click.option("--objects", multiple=True, help="show results that contains changes to at least "
              "one path in that list of objects. Use comma separator to pass all objects together")
@click.option("--prefixes", multiple=True, help="show results that contains changes to at "
              "least one path in that list of prefixes. Use comma separator to pass all "
              "prefixes together")
@click.option("--show-meta-range-id", is_flag=True, help="also show meta range ID")
@click.option("--since", default="", help="show results since this date-time (RFC3339 format)")
@click.option("--stop-at", default="", help="a Ref to stop at (included in results)")
@output_option
@pass_session
def log(s: Session, ref_uri: str, amount: int, after: str, limit: bool, dot: bool,
        first_parent: bool, no_merges: bool, objects: tuple[str, ...],
        prefixes: tuple[str, ...], show_meta_range_id: bool, since: str, stop_at: str,
        output_format: str) -> None:
    """Show log of commits for a given reference"""
    u = s.ref_uri(ref_uri)
    out = Output(output_format)
    params: dict[str, Any] = {
        "objects": [o for arg in objects for o in arg.split(",") if o],
        "prefixes": [p for arg in prefixes for p in arg.split(",") if p],
        "limit": "true" if limit else None, "first_parent": "true" if first_parent else None,
        "since": since or None, "stop_at": stop_at or None}
    path = f"/repositories/{u.repository}/refs/{u.ref}/commits"
    pagination: dict[str, Any] | None = None
    if amount > 0:  # one page, as asked
        page = s.page(path, params, amount, after)
        commits, pagination = page["results"], page.get("pagination")
    else:
        commits = list(s.every(path, params, INTERNAL_PAGE_SIZE, after))
    if no_merges:
        commits = [c for c in commits if len(c.get("parents") or []) <= 1]
    if out.json:
        out.page(commits, pagination)
    elif dot:
        out.echo(_dot(commits))
    else:
        for c in commits:
            out.echo(commit_text(c, show_meta_range_id))
        if pagination and pagination.get("has_more") and interactive():
            out.echo(f'\nfor more results run with --amount {amount} '
                     f'--after "{pagination.get("next_offset", "")}"')


@click.command("diff")
@click.argument("left", metavar="<ref URI>")
@click.argument("right", metavar="[ref URI]", required=False)
@click.option("--two-way", is_flag=True, help="Use two-way diff: show difference between the "
              "given refs, regardless of a common ancestor.")
@click.option("--prefix", default="", help="Show only changes in the given prefix.")
@output_option
@pass_session
def diff(s: Session, left: str, right: str | None, two_way: bool, prefix: str,
         output_format: str) -> None:
    """Show changes between two commits, or the currently uncommitted changes"""
    out = Output(output_format)
    lu = s.ref_uri(left)
    params: dict[str, Any] = {"prefix": prefix}
    if right is None:  # uncommitted changes of a branch
        path = f"/repositories/{lu.repository}/branches/{lu.ref}/diff"
    else:
        ru = s.ref_uri(right)
        if ru.repository != lu.repository:
            raise Fatal("both references must belong to the same repository")
        path = f"/repositories/{lu.repository}/refs/{lu.ref}/diff/{ru.ref}"
        params["type"] = "two_dot" if two_way else "three_dot"
    changes = list(s.every(path, params))
    if out.json:
        out.page(changes)
        return
    for d in changes:
        out.echo(f"{DIFF_ACTIONS.get(d.get('type', ''), d.get('type', ''))} {d['path']}")


@click.command("merge")
@click.argument("source_ref", metavar="<source ref>")
@click.argument("destination_ref", metavar="<destination ref>")
@click.option("--strategy", default="", help='In case of a merge conflict, this option will '
              'force the merge process to automatically favor changes from the dest branch '
              '("dest-wins") or from the source branch("source-wins"). In case no selection is '
              'made, the merge process will fail in case of a conflict')
@click.option("--force", is_flag=True,
              help="Allow merge into a read-only branch or into a branch with the same content")
@click.option("--allow-empty", is_flag=True,
              help="Allow merge when the branches have the same content")
@click.option("--squash", is_flag=True,
              help="Squash all changes from source into a single commit on destination")
@flags.commit_options(empty_message_default=True)
@output_option
@pass_session
def merge(s: Session, source_ref: str, destination_ref: str, strategy: str, force: bool,
          allow_empty: bool, squash: bool, message: str, meta: tuple[str, ...],
          allow_empty_message: bool, output_format: str) -> None:
    """Merge & commit changes from source branch into destination branch"""
    src = s.ref_uri(source_ref, "source ref")
    dst = s.branch_uri(destination_ref, "destination ref")
    out = Output(output_format)
    if not out.json:
        out.echo(f"Source: {src}")
        out.echo(f"Destination: {dst}")
    if dst.repository != src.repository:
        raise Fatal("both references must belong to the same repository")
    if strategy not in ("", "dest-wins", "source-wins"):
        raise Fatal('Invalid strategy value. Expected "dest-wins" or "source-wins"')
    body: dict[str, Any] = {"message": flags.commit_message(message, allow_empty_message),
                            "metadata": flags.key_values(meta), "force": force,
                            "allow_empty": allow_empty, "squash_merge": squash}
    if strategy:
        body["strategy"] = strategy
    try:
        result = s.json("POST", f"/repositories/{dst.repository}/refs/{src.ref}/merge/{dst.ref}",
                        json=body)
    except ApiError as e:
        if e.status == 409:
            raise Fatal("Conflict found.") from e
        raise
    out.show(result, lambda r: f'Merged "{src.ref}" into "{dst.ref}" to get "{r["reference"]}".')


@click.command("cherry-pick")
@click.argument("commit_ref", metavar="<commit ref>")
@click.argument("branch_uri", metavar="<branch>")
@click.option("-m", "--parent-number", type=int, default=None,
              help="the parent number (starting from 1) of the cherry-picked commit. The "
                   "cherry-pick will apply the change relative to the specified parent.")
@output_option
@pass_session
def cherry_pick(s: Session, commit_ref: str, branch_uri: str, parent_number: int | None,
                output_format: str) -> None:
    """Apply the changes introduced by an existing commit

    Apply the changes from the given commit to the tip of the branch. The changes will be
    added as a new commit.
    """
    ref = s.ref_uri(commit_ref, "ref")
    u = s.branch_uri(branch_uri, "branch")
    out = Output(output_format)
    if not out.json:
        out.echo(f"Branch: {u}")
    if u.repository != ref.repository:
        raise Fatal("Repository mismatch for destination branch and cherry-pick ref")
    if parent_number is not None and parent_number <= 0:
        raise Fatal("parent number must be positive, if specified")
    created = s.json("POST", f"/repositories/{u.repository}/branches/{u.ref}/cherry-pick",
                     ok=(201,), json={"ref": ref.ref, "parent_number": parent_number or 1})
    out.show(created, lambda c: commit_created_text(u.ref, c))


@click.group("show")
def show() -> None:
    """See detailed information about an entity"""


@show.command("commit")
@click.argument("commit_uri", metavar="<commit URI>")
@click.option("--show-meta-range-id", is_flag=True, help="show meta range ID")
@output_option
@pass_session
def show_commit(s: Session, commit_uri: str, show_meta_range_id: bool,
                output_format: str) -> None:
    """See detailed information about a commit"""
    u = s.ref_uri(commit_uri, "commit URI")
    commit = s.json("GET", f"/repositories/{u.repository}/commits/{u.ref}")
    Output(output_format).show(commit, lambda c: commit_text(c, show_meta_range_id))


@click.command("find-merge-base")
@click.argument("source_ref", metavar="<source ref>")
@click.argument("destination_ref", metavar="<destination ref>")
@output_option
@pass_session
def find_merge_base(s: Session, source_ref: str, destination_ref: str,
                    output_format: str) -> None:
    """Find the commits for the merge operation"""
    src = s.ref_uri(source_ref, "source ref")
    dst = s.ref_uri(destination_ref, "destination ref")
    out = Output(output_format)
    if not out.json:
        out.echo(f"Source: {src}\nDestination: {dst}")
    if dst.repository != src.repository:
        raise Fatal("both references must belong to the same repository")
    found = s.json("GET", f"/repositories/{dst.repository}/refs/{src.ref}/merge/{dst.ref}")
    out.show(found, lambda r: f'Found base "{r["base_commit_id"]}" when merging '
                              f'"{r["source_commit_id"]}" into "{r["destination_commit_id"]}".')
