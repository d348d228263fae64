"""``lakectl mirror create|list|status|detach|delete``: the replication API.

Mirrors are addressed by their source repository and id, as the API
(``/service/replication/v1/repositories/{repository}/mirrors/{id}``), which the
server forwards to its replication service.
"""

from __future__ import annotations

from typing import Any

import click

from lakectl import flags
from lakectl.output import Output, date, output_option
from lakectl.session import Session, pass_session

PREFIX = "/service/replication/v1/repositories"


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
@click.option("--name", required=True, help="the mirror repository's name in its region")
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
                         json={"name": name, "region": region,
                               "storage_namespace": storage_namespace,
                               **({"storage_id": storage_id} if storage_id else {})}).json()
    out.show(m, lambda c: f"Mirror '{c['id']}' of {u} created:\n{_mirror_text(c)}")


@mirror.command("list")
@click.argument("repository_uri", metavar="<source repository URI>")
@click.option("--amount", type=int, default=flags.DEFAULT_AMOUNT, show_default=True,
              help="how many results to return")
@click.option("--after", default="", help="show results after this value (used for pagination)")
@output_option
@pass_session
def list_(s: Session, repository_uri: str, amount: int, after: str, output_format: str) -> None:
    """List the mirrors of a repository"""
    u = s.repository_uri(repository_uri)
    out = Output(output_format)
    params: dict[str, Any] = {"amount": amount}
    if after:
        params["after"] = after
    page = s.client.request("GET", f"{PREFIX}/{u.repository}/mirrors", params=params).json()
    out.listing(page, ["Mirror ID", "Name", "Region", "State", "Storage Namespace", "Error"],
                lambda m: [m["id"], m["name"], m.get("region"), m.get("state"),
                           m.get("storage_namespace"), m.get("error") or ""], amount)


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
    out.echo()
    out.table(["Branch", "Source Head", "Mirror Head", "Lag (s)", "Missing Ranges",
               "Missing Objects", "Error"],
              [[b["branch"], b.get("source_head") or "", b.get("mirror_head") or "",
                b.get("lag_seconds", 0), b.get("missing_ranges", 0),
                b.get("missing_objects", 0), b.get("error") or ""]
               for b in st.get("branches", [])])


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
