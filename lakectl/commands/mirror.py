"""``lakectl mirror create|list|status|detach|switchover|failback|delete`` (and ``mirror
group``, :mod:`lakectl.commands.mirror_group`): the replication API.

Mirrors are addressed by a repository and their id, as the API
(``/service/replication/v1/repositories/{repository}/mirrors/{id}``), which the
server forwards to its replication service: the source repository, or in the
mirror's own region the mirror repository's name, so that every step of a failover
works from the surviving region. ``mirror list`` without a repository lists every
mirror of the region.
"""

from __future__ import annotations

from typing import Any

import click

from lakectl import flags
from lakectl.commands import mirror_group
from lakectl.commands.handover import handover_options, phases_text, send_handover
from lakectl.output import Output, date, output_option
from lakectl.session import Session, pass_session

PREFIX = "/service/replication/v1/repositories"
MIRRORS = "/service/replication/v1/mirrors"


@click.group()
def mirror() -> None:
    """Create, follow and remove read-only mirrors of a repository in other regions"""


def _mirror_text(m: dict[str, Any]) -> str:
    lines = [f"ID: {m['id']}",
             f"Name: {m['name']}",
             f"Source: {m.get('source_region', '')} lakefs://{m.get('source_repository', '')}",
             f"Region: {m.get('region', '')}",
             f"Storage Namespace: {m.get('storage_namespace', '')}",
             *([f"Storage ID: {m['storage_id']}"] if m.get("storage_id") else []),
             f"State: {m.get('state', '')}",
             f"Creation Date: {date(m.get('creation_date'))}"]
    if m.get("error"):
        lines.append(f"Error: {m['error']}")
    return "\n".join(lines)


@mirror.command("create")
@click.argument("repository_uri", metavar="<source repository URI>")
@click.option("--name", default="",
              help="the mirror repository's name in its region (default: the source "
                   "repository's name)")
@click.option("--region", required=True, help="the region to mirror to")
@click.option("--storage-namespace", required=True,
              help="the mirror's storage namespace in that region")
@click.option("--storage-id", default="",
              help="the blockstore of that region holding the mirror (multi-store; "
                   "its default store when unset)")
@output_option
@pass_session
def create(s: Session, repository_uri: str, name: str, region: str, storage_namespace: str,
           storage_id: str, output_format: str) -> None:
    """Create a mirror of a repository in another region"""
    u = s.repository_uri(repository_uri)
    out = Output(output_format)
    m = s.client.request("POST", f"{PREFIX}/{u.repository}/mirrors", ok=(201,),
                         json={**({"name": name} if name else {}), "region": region,
                               "storage_namespace": storage_namespace,
                               **({"storage_id": storage_id} if storage_id else {})}).json()
    out.show(m, lambda c: f"Mirror '{c['id']}' of {u} created:\n{_mirror_text(c)}")


@mirror.command("list")
@click.argument("repository_uri", metavar="[repository URI]", required=False)
@click.option("--amount", type=int, default=flags.DEFAULT_AMOUNT, show_default=True,
              help="how many results to return")
@click.option("--after", default="", help="show results after this value (used for pagination)")
@output_option
@pass_session
def list_(s: Session, repository_uri: str | None, amount: int, after: str,
          output_format: str) -> None:
    """List the mirrors of a repository, or without one every mirror of the region"""
    out = Output(output_format)
    params: dict[str, Any] = {"amount": amount}
    if after:
        params["after"] = after
    if repository_uri:
        u = s.repository_uri(repository_uri)
        page = s.client.request("GET", f"{PREFIX}/{u.repository}/mirrors",
                                params=params).json()
        out.listing(page, ["Mirror ID", "Name", "Source", "Region", "State",
                           "Storage Namespace", "Error"],
                    lambda m: [m["id"], m["name"], _source(m), m.get("region"),
                               m.get("state"), m.get("storage_namespace"),
                               m.get("error") or ""], amount)
        return
    page = s.client.request("GET", MIRRORS, params=params).json()
    out.listing(page, ["Mirror ID", "Name", "Source", "Region", "State", "Current",
                       "Lag (s)", "Confirmed"],
                lambda m: [m["id"], m["name"], _source(m), m.get("region"), m.get("state"),
                           _current(m.get("branches", [])), _max_lag(m.get("branches", [])),
                           _confirmed(m.get("branches", []))], amount)


def _source(m: dict[str, Any]) -> str:
    return f"{m.get('source_region', '')}/{m.get('source_repository', '')}"


def _current(branches: list[dict[str, Any]]) -> str:
    stale = any(b.get("stale") for b in branches)
    current = sum(1 for b in branches if b.get("current"))
    return f"{current}/{len(branches)}" + (" (source not read)" if stale else "")


def _max_lag(branches: list[dict[str, Any]]) -> str:
    return f"{max((b.get('lag_seconds') or 0 for b in branches), default=0):.1f}"


def _confirmed(branches: list[dict[str, Any]]) -> str:
    """The oldest last confirmation of the branches: what the lag counts from."""
    times = [b.get("source_confirmed_at") for b in branches]
    if not times or None in times:
        return "never"
    return date(min(t for t in times if t is not None))


@mirror.command("status")
@click.argument("repository_uri", metavar="<source repository URI>")
@click.argument("mirror_id", metavar="<mirror id>")
@output_option
@pass_session
def status(s: Session, repository_uri: str, mirror_id: str, output_format: str) -> None:
    """Show a mirror and how far each of its branches has come"""
    u = s.repository_uri(repository_uri)
    out = Output(output_format)
    st = s.client.request("GET", f"{PREFIX}/{u.repository}/mirrors/{mirror_id}/status").json()
    if out.json:
        out.dump(st)
        return
    out.echo(_mirror_text(st["mirror"]))
    if st.get("error") and st["error"] != st["mirror"].get("error"):
        out.echo(f"Error: {st['error']}")
    if st.get("stale"):
        out.echo(f"Stale: the source was not read within {st.get('stale_after_seconds', 0):g}s "
                 "or could not be read; the mirror may be behind by up to its lag")
    out.echo()
    out.table(["Branch", "Source Head", "Mirror Head", "Current", "Lag (s)",
               "Source Confirmed", "Missing Ranges", "Missing Objects", "Error"],
              [[b["branch"], b.get("source_head") or "", b.get("mirror_head") or "",
                "yes" if b.get("current") else "stale" if b.get("stale") else "no",
                b.get("lag_seconds", 0), date(b.get("source_confirmed_at")),
                b.get("missing_ranges", 0), b.get("missing_objects", 0),
                b.get("error") or moved_by(b)]
               for b in st.get("branches", [])])


def moved_by(branch: dict[str, Any]) -> str:
    """For a branch a mirror group moves: which group, at which cut."""
    g = branch.get("group")
    return f"moved by group {g['name']} (cut {g['cut']})" if g else ""


@mirror.command("detach")
@click.argument("repository_uri", metavar="<source repository URI>")
@click.argument("mirror_id", metavar="<mirror id>")
@flags.yes
@output_option
@pass_session
def detach(s: Session, repository_uri: str, mirror_id: str, assume_yes: bool,
           output_format: str) -> None:
    """Detach a mirror (failover): its repository becomes writable and stops following"""
    u = s.repository_uri(repository_uri)
    flags.confirm(assume_yes, f"Are you sure you want to detach mirror {mirror_id}",
                  "Detach mirror aborted")
    m = s.client.request("POST", f"{PREFIX}/{u.repository}/mirrors/{mirror_id}/detach").json()
    Output(output_format).show(
        m, lambda d: f"Mirror '{mirror_id}' detached: repository '{d['name']}' is writable")


def _handover(s: Session, repository_uri: str, mirror_id: str, action: str, timeout: str,
              assume_yes: bool, question: str) -> dict[str, Any]:
    u = s.repository_uri(repository_uri)
    return send_handover(s, f"{PREFIX}/{u.repository}/mirrors/{mirror_id}", action, timeout,
                         assume_yes, question)


def _handover_options(waits_for: str) -> Any:
    def decorate(f: Any) -> Any:
        f = handover_options("mirror_id", "<mirror id>", waits_for)(f)
        return click.argument("repository_uri", metavar="<repository URI>")(f)
    return decorate


@mirror.command("switchover")
@_handover_options("the mirror to catch up")
def switchover(s: Session, repository_uri: str, mirror_id: str, timeout: str,
               assume_yes: bool, output_format: str) -> None:
    """Planned switchover: the mirror becomes the primary, its source the read-only mirror
    (names unchanged, no commit lost)"""
    result = _handover(s, repository_uri, mirror_id, "switchover", timeout, assume_yes,
                       f"Are you sure you want to switch over to mirror {mirror_id} "
                       "(its source becomes read-only)")
    m = result["mirror"]
    Output(output_format).show(result, lambda r: (
        f"Switched over: repository '{m['source_repository']}' in {m['source_region']} is "
        f"the primary; '{m['name']}' in {m['region']} follows it as mirror '{m['id']}'\n"
        + phases_text(r)))


@mirror.command("failback")
@_handover_options("the pieces of the commits kept")
def failback(s: Session, repository_uri: str, mirror_id: str, timeout: str,
             assume_yes: bool, output_format: str) -> None:
    """After a failover: the old source repository follows the detached mirror's, its
    commits that never arrived kept on failover branches"""
    result = _handover(s, repository_uri, mirror_id, "failback", timeout, assume_yes,
                       f"Are you sure you want the old source of mirror {mirror_id} to "
                       "follow this region")
    m = result["mirror"]

    def text(r: dict[str, Any]) -> str:
        kept = [f"  {k['kind']} {k['ref']} ({k['commit_id'][:12]}) kept on branch "
                f"{k['branch']}" for k in r.get("kept", [])]
        return (f"Failed back: repository '{m['name']}' in {m['region']} follows "
                f"'{m['source_repository']}' in {m['source_region']} as mirror '{m['id']}'\n"
                + ("Commits of the old source kept here:\n" + "\n".join(kept) + "\n"
                   if kept else "Nothing of the old source was missing here\n")
                + phases_text(r))

    Output(output_format).show(result, text)


@mirror.command("delete")
@click.argument("repository_uri", metavar="<source repository URI>")
@click.argument("mirror_id", metavar="<mirror id>")
@flags.yes
@pass_session
def delete(s: Session, repository_uri: str, mirror_id: str, assume_yes: bool) -> None:
    """Delete a mirror (and its repository, unless it was detached)"""
    u = s.repository_uri(repository_uri)
    flags.confirm(assume_yes, f"Are you sure you want to delete mirror {mirror_id}",
                  "Delete mirror aborted")
    s.client.request("DELETE", f"{PREFIX}/{u.repository}/mirrors/{mirror_id}", ok=(204,))
    click.echo(f"Mirror '{mirror_id}' deleted")


mirror.add_command(mirror_group.group)
