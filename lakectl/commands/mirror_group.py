"""``lakectl mirror group create|list|status|cut|detach|switchover|failback|delete``:
mirror groups, whose member branches a destination region advances together, a cut of
the source at a time.

A group is created, cut and deleted in its source region (``/service/replication/v1/
groups``, which the server forwards to its replication service); its status reads in
either region. Detach runs in its destination region; switchover and failback in
either (the source region forwards them).
"""

from __future__ import annotations

from typing import Any

import click

from lakectl import flags
from lakectl.commands.handover import handover_options, phases_text, send_handover
from lakectl.output import Output, date, output_option
from lakectl.session import Session, pass_session

GROUPS = "/service/replication/v1/groups"


@click.group("group")
def group() -> None:
    """Mirror groups: mirrors whose branches another region serves at one cut"""


def _member(text: str) -> dict[str, str]:
    mirror_id, _, branch = text.partition(":")
    return {"mirror_id": mirror_id, **({"branch": branch} if branch else {})}


def _members(g: dict[str, Any]) -> str:
    return ", ".join(f"{m['mirror_id']}:{m['branch']}" for m in g.get("members", []))


def _group_text(g: dict[str, Any]) -> str:
    return "\n".join([f"ID: {g['id']}", f"Name: {g['name']}",
                      f"Source Region: {g.get('source_region', '')}",
                      f"Region: {g.get('region', '')}", f"Members: {_members(g)}",
                      f"Last Cut: {g.get('last_cut', 0)}",
                      f"Creation Date: {date(g.get('creation_date'))}"])


def _heads(cut: dict[str, Any] | None) -> list[list[Any]]:
    return [] if cut is None else [[h["mirror_id"], h["branch"], h["commit_id"]]
                                   for h in cut.get("heads", [])]


@group.command("create")
@click.argument("name")
@click.option("--region", required=True, help="the region the member mirrors go to")
@click.option("--member", "members", multiple=True, metavar="MIRROR_ID[:BRANCH]",
              help="a member mirror and the branch the group moves (default: the source "
                   "repository's default branch); repeatable")
@output_option
@pass_session
def create(s: Session, name: str, region: str, members: tuple[str, ...],
           output_format: str) -> None:
    """Create a mirror group of this region's mirrors into another region"""
    g = s.client.request("POST", GROUPS, ok=(201,), json={
        "name": name, "region": region, "members": [_member(m) for m in members]}).json()
    Output(output_format).show(g, lambda c: f"Group '{c['id']}' created:\n{_group_text(c)}")


@group.command("list")
@output_option
@pass_session
def list_(s: Session, output_format: str) -> None:
    """List the mirror groups of this region (as source or destination)"""
    page = s.client.request("GET", GROUPS).json()
    Output(output_format).listing(
        page, ["Group ID", "Name", "Source Region", "Region", "Members", "Last Cut"],
        lambda g: [g["id"], g["name"], g.get("source_region"), g.get("region"), _members(g),
                   g.get("last_cut", 0)], 0)


@group.command("status")
@click.argument("group_id", metavar="<group id>")
@output_option
@pass_session
def status(s: Session, group_id: str, output_format: str) -> None:
    """Show the cut a group's region serves, what the next one waits for, and its lag"""
    out = Output(output_format)
    st = s.client.request("GET", f"{GROUPS}/{group_id}/status").json()
    if out.json:
        out.dump(st)
        return
    out.echo(_group_text(st["group"]))
    served = st.get("served_cut")
    state = "current" if st.get("current") else "stale" if st.get("stale") else "behind"
    out.echo(f"Served Cut: {served['sequence'] if served else 'none'}"
             + (f" (read at the source {date(served.get('taken_at'))}, promoted "
                f"{date(st.get('served_at'))})" if served else ""))
    out.echo(f"Source Read At: {date(st['group'].get('source_read_at'))}")
    if st.get("state") == "detached":
        out.echo("State: detached (the members are writable at the served cut)")
    else:
        out.echo(f"State: {state}, lag {st.get('lag_seconds', 0)}s")
    if st.get("stale"):
        out.echo(f"Stale: the source did not read the member heads within "
                 f"{st.get('stale_after_seconds', 0):g}s; the group may be behind by up "
                 "to its lag")
    if st.get("error"):
        out.echo(f"Error: {st['error']}")
    out.echo()
    out.table(["Mirror ID", "Branch", "Served Head"], _heads(served))
    waiting = st.get("waiting")
    if waiting:
        out.echo(f"\nWaiting for cut {waiting['cut']['sequence']}: {waiting['waiting_for']}")
        out.table(["Mirror ID", "Branch", "Head"], _heads(waiting["cut"]))


@group.command("cut")
@click.argument("group_id", metavar="<group id>")
@output_option
@pass_session
def cut(s: Session, group_id: str, output_format: str) -> None:
    """Take a cut now: mark the member heads as belonging together"""
    c = s.client.request("POST", f"{GROUPS}/{group_id}/cuts", ok=(201,)).json()
    Output(output_format).show(c, lambda v: f"Cut {v['sequence']} of group '{group_id}':\n"
                               + "\n".join(f"{m}:{b} {h}" for m, b, h in _heads(v)))


def _mirrors_text(r: dict[str, Any]) -> str:
    return "\n".join(f"  '{m['name']}' in {m['region']} follows '{m['source_repository']}' "
                     f"in {m['source_region']} as mirror '{m['id']}'"
                     for m in r.get("mirrors", []))


def _cut_text(r: dict[str, Any]) -> str:
    cut = r.get("cut")
    if cut is None:
        return "no cut served yet"
    return f"cut {cut['sequence']} (read at the source {date(cut.get('taken_at'))})"


@group.command("detach")
@click.argument("group_id", metavar="<group id>")
@flags.yes
@output_option
@pass_session
def detach(s: Session, group_id: str, assume_yes: bool, output_format: str) -> None:
    """Detach every member of a group (failover) at the cut this region serves"""
    flags.confirm(assume_yes, f"Are you sure you want to detach group {group_id}",
                  "Detach group aborted")
    r = s.client.request("POST", f"{GROUPS}/{group_id}/detach", retry=False).json()
    Output(output_format).show(r, lambda v: (
        f"Group '{group_id}' detached at {_cut_text(v)}: "
        + ", ".join(f"repository '{m['name']}'" for m in v["detached"]) + " writable\n"
        + phases_text(v)))


@group.command("switchover")
@handover_options("group_id", "<group id>", "every member to catch up")
def switchover(s: Session, group_id: str, timeout: str, assume_yes: bool,
               output_format: str) -> None:
    """Planned switchover of a whole group: its mirrors become the primaries at one cut,
    their sources a group of read-only mirrors (names unchanged, no commit lost)"""
    r = send_handover(s, f"{GROUPS}/{group_id}", "switchover", timeout, assume_yes,
                  f"Are you sure you want to switch group {group_id} over (its sources "
                  "become read-only)")
    Output(output_format).show(r, lambda v: (
        f"Switched over at {_cut_text(v)}: group '{v['group']['id']}' "
        f"({v['group']['name']}) goes from {v['group']['source_region']} to "
        f"{v['group']['region']}\n" + _mirrors_text(v) + "\n" + phases_text(v)))


@group.command("failback")
@handover_options("group_id", "<group id>", "the pieces of the commits kept")
def failback(s: Session, group_id: str, timeout: str, assume_yes: bool,
             output_format: str) -> None:
    """After a group detach: the old source repositories follow this region as a group,
    their commits that never arrived kept on failover branches"""
    r = send_handover(s, f"{GROUPS}/{group_id}", "failback", timeout, assume_yes,
                  f"Are you sure you want the old sources of group {group_id} to follow "
                  "this region")

    def text(v: dict[str, Any]) -> str:
        kept = [f"  {k['kind']} {k['ref']} of mirror {k['mirror_id']} "
                f"({k['commit_id'][:12]}) kept on branch {k['branch']}"
                for k in v.get("kept", [])]
        return (f"Failed back: group '{v['group']['id']}' ({v['group']['name']}) goes from "
                f"{v['group']['source_region']} to {v['group']['region']}\n"
                + _mirrors_text(v) + "\n"
                + ("Commits of the old sources kept here:\n" + "\n".join(kept) + "\n"
                   if kept else "Nothing of the old sources was missing here\n")
                + phases_text(v))

    Output(output_format).show(r, text)


@group.command("delete")
@click.argument("group_id", metavar="<group id>")
@flags.yes
@pass_session
def delete(s: Session, group_id: str, assume_yes: bool) -> None:
    """Delete a mirror group (its mirrors stay, and follow their sources on their own)"""
    flags.confirm(assume_yes, f"Are you sure you want to delete group {group_id}",
                  "Delete group aborted")
    s.client.request("DELETE", f"{GROUPS}/{group_id}", ok=(204,))
    click.echo(f"Group '{group_id}' deleted")
