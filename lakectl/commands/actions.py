"""``lakectl actions runs list|describe``: the runs of a repository's actions and the
hooks they ran, with each hook's output; ``lakectl actions validate``: an action file
parsed as the server parses it."""

from __future__ import annotations

import sys
from typing import Any

import click

from lakectl import flags
from lakectl.output import Fatal, Output, output_option
from lakectl.session import Session, pass_session
from lakefs_core.actions.action import parse_action
from lakefs_core.errors import ValidationError

RUN_HEADERS = ("Run ID", "Event", "Branch", "Start Time", "End Time", "Commit ID", "Status")
HOOK_HEADERS = ("Hook Run ID", "Hook ID", "Start Time", "End Time", "Action", "Status")
#: hooks fetched per request when ``describe`` shows them all
HOOKS_PAGE = 1000


@click.group()
def actions() -> None:
    """Manage Actions commands"""


@actions.group()
def runs() -> None:
    """Explore runs information"""


@runs.command("list")
@click.argument("repository_uri", metavar="<repository URI>")
@click.option("--branch", default="", help="show results for specific branch")
@click.option("--commit", default="", help="show results for specific commit ID")
@click.option("--amount", type=int, default=flags.DEFAULT_AMOUNT, show_default=True,
              help="how many results to return")
@click.option("--after", default="", help="show results after this value (used for pagination)")
@output_option
@pass_session
def list_(s: Session, repository_uri: str, branch: str, commit: str, amount: int, after: str,
          output_format: str) -> None:
    """List all runs on a repository optional filter by branch or commit"""
    u = s.repository_uri(repository_uri)
    if branch and commit:
        raise Fatal("Can't specify 'commit' and 'branch'")
    params = {"branch": branch or None, "commit": commit or None}
    page = s.page(f"/repositories/{u.repository}/actions/runs",
                  {k: v for k, v in params.items() if v}, amount, after)
    Output(output_format).listing(page, ("Run ID", "Event", "Start Time", "End Time",
                                         "Branch", "Commit ID", "Status"), lambda r: [
        r["run_id"], r["event_type"], r["start_time"], r.get("end_time"), r["branch"],
        r.get("commit_id"), r["status"]], amount)


@runs.command("describe")
@click.argument("repository_uri", metavar="<repository URI>")
@click.argument("run_id", metavar="<run id>")
@click.option("--amount", type=int, default=0,
              help="number of results to return. By default, all results are returned.")
@click.option("--after", default="", help="show results after this value (used for pagination)")
@output_option
@pass_session
def describe(s: Session, repository_uri: str, run_id: str, amount: int, after: str,
             output_format: str) -> None:
    """Show information about the run and all the hooks that were executed as part of
    the run"""
    u = s.repository_uri(repository_uri)
    base = f"/repositories/{u.repository}/actions/runs/{run_id}"
    run = s.json("GET", base)
    hooks: list[dict[str, Any]] = []
    pagination: dict[str, Any] = {}
    while True:
        page = s.page(f"{base}/hooks", {}, amount or HOOKS_PAGE, after)
        hooks.extend(page.get("results", []))
        pagination = page.get("pagination") or {}
        after = pagination.get("next_offset", "")
        if amount or not pagination.get("has_more"):
            break
    out = Output(output_format)
    outputs = {h["hook_run_id"]: s.call("GET", f"{base}/hooks/{h['hook_run_id']}/output").text
               for h in hooks}
    if out.json:
        out.dump({"run": run, "hooks": [{**h, "output": outputs[h["hook_run_id"]]}
                                        for h in hooks]})
        return
    out.echo(f"Repository: {u}")
    out.table(RUN_HEADERS, [[run["run_id"], run["event_type"], run["branch"],
                             run["start_time"], run.get("end_time"), run.get("commit_id"),
                             run["status"]]])
    for h in hooks:
        out.table(HOOK_HEADERS, [[h["hook_run_id"], h["hook_id"], h["start_time"],
                                  h.get("end_time"), h["action"], h["status"]]])
        out.echo(outputs[h["hook_run_id"]], nl=False)
    if amount and pagination.get("has_more"):
        out.echo(f'for more results run with --amount {amount} '
                 f'--after "{pagination.get("next_offset", "")}"')


@actions.command("validate")
@click.argument("path", metavar="<path>")
def validate(path: str) -> None:
    """Validate action file

    Tries to parse the input action file as lakeFS action file.
    """
    try:
        with click.open_file(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise Fatal(f"open {path}: {e.strerror}") from None
    try:
        parse_action(path, data)
    except ValidationError as e:
        raise Fatal(str(e)) from None
    click.echo(f"File validated successfully: '{path}'")


@click.command("cat-hook-output", hidden=True)
@click.argument("repository_uri", metavar="lakefs://<repository>")
@click.argument("run_id", metavar="<run_id>")
@click.argument("hook_run_id", metavar="<run_hook_id>")
@pass_session
def cat_hook_output(s: Session, repository_uri: str, run_id: str, hook_run_id: str) -> None:
    """Cat actions hook output

    \b
    Example:
      lakectl cat-hook-output lakefs://<repository> <run_id> <run_hook_id>
    """
    u = s.repository_uri(repository_uri)
    out = sys.stdout.buffer
    with s.stream("GET", f"/repositories/{u.repository}/actions/runs/{run_id}/hooks/"
                  f"{hook_run_id}/output") as resp:
        for chunk in resp.iter_bytes():
            out.write(chunk)
    out.flush()
