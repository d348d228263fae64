"""``lakectl abuse``: load on a running server, for testing it (hidden, as in lakeFS).

Each subcommand does ``--amount`` operations with ``--parallelism`` workers and then
stops (or stops at Ctrl-C), printing its rate every second and a latency histogram
at the end (:mod:`lakectl.stress`).

Writes differ from lakeFS's where this server asks more: it links only data that is
at the address, so ``random-write`` and ``merge`` upload an empty object where lakeFS's
stage or link an address with nothing written there, and ``link-same-object`` writes
an empty object through a pre-signed URL before linking it (on a store that cannot
pre-sign, each link is refused and counted as an error).
"""

from __future__ import annotations

import random
import re
import secrets
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import click
import httpx

from lakectl.commands.fs import presign_mode
from lakectl.output import Fatal
from lakectl.session import Session, pass_session
from lakectl.stress import run
from lakectl.uri import LakeFSURI

DEFAULT_AMOUNT = 1_000_000
DEFAULT_PARALLELISM = 100
#: lakeFS's checksum of the objects abuse links
CHECKSUM = "00695c7307b0480c7b6bdc873cf05c15"

F = TypeVar("F", bound=Callable[..., Any])


@click.group(hidden=True)
def abuse() -> None:
    """Abuse a running lakeFS instance. See sub commands for more info."""


def amount_option(what: str, default: int = DEFAULT_AMOUNT) -> Callable[[F], F]:
    return click.option("--amount", type=click.IntRange(min=0), default=default,
                        show_default=True, help=f"amount of {what} to do")


def parallelism_option(what: str) -> Callable[[F], F]:
    return click.option("--parallelism", type=click.IntRange(min=1),
                        default=DEFAULT_PARALLELISM, show_default=True,
                        help=f"amount of {what} to do in parallel")


_GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def go_duration(text: str) -> float:
    """Seconds of a Go duration (``2s``, ``500ms``, ``1m30s``, ``0``)."""
    if text == "0":
        return 0.0
    parts = _GO_DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise Fatal(f'invalid argument "{text}" for "--gap" flag: time: invalid duration '
                    f'"{text}"')
    return sum(float(n) * _UNIT[u] for n, u in parts)


def read_lines(path: str) -> list[str]:
    """The lines of ``path`` (``-``: stdin)."""
    try:
        if path == "-":
            return sys.stdin.read().splitlines()
        with open(path) as f:
            return f.read().splitlines()
    except OSError as e:
        raise Fatal(f"open {path}: {e.strerror}") from None


def _keys(path: str, amount: int) -> Iterator[str]:
    keys = read_lines(path)
    click.echo(f"read a total of {len(keys)} keys from key file")
    if not keys:
        raise Fatal("no keys in key file")
    return (random.choice(keys) for _ in range(amount))  # noqa: S311 - not for security


@abuse.command("create-branches")
@click.argument("source_ref", metavar="<source ref URI>")
@click.option("--branch-prefix", default="abuse-", show_default=True,
              help="prefix to create branches under")
@click.option("--clean-only", is_flag=True, help="only clean up past runs")
@amount_option("things")
@parallelism_option("things")
@pass_session
def create_branches(s: Session, source_ref: str, branch_prefix: str, clean_only: bool,
                    amount: int, parallelism: int) -> None:
    """Create a lot of branches very quickly."""
    u = s.ref_uri(source_ref, "source ref")
    click.echo(f"Source ref: {u}")
    base = f"/repositories/{u.repository}/branches"
    old = [b["id"] for b in s.every(base, {"prefix": branch_prefix})]
    run("delete branch", parallelism, old,
        lambda b: s.call("DELETE", f"{base}/{b}", ok=(204,)))
    if clean_only:
        return
    run("create branch", parallelism, (f"{branch_prefix}-{i}" for i in range(amount)),
        lambda b: s.call("POST", base, ok=(201,), json={"name": b, "source": u.ref}))


@abuse.command("random-read")
@click.argument("source_ref", metavar="<source ref URI>")
@click.option("--from-file", default="", help='read keys from this file ("-" for stdin)')
@amount_option("reads")
@parallelism_option("reads")
@pass_session
def random_read(s: Session, source_ref: str, from_file: str, amount: int,
                parallelism: int) -> None:
    """Read keys from a file and generate random reads from the source ref for those keys."""
    u = s.ref_uri(source_ref, "source ref")
    click.echo(f"Source ref: {u}")
    stat = f"/repositories/{u.repository}/refs/{u.ref}/objects/stat"
    run("read", parallelism, _keys(from_file, amount),
        lambda key: s.call("GET", stat, params={"path": key}))


@abuse.command("random-delete")
@click.argument("source_ref", metavar="<source ref URI>")
@click.option("--from-file", default="", help='read keys from this file ("-" for stdin)')
@amount_option("deletes")
@parallelism_option("deletes")
@pass_session
def random_delete(s: Session, source_ref: str, from_file: str, amount: int,
                  parallelism: int) -> None:
    """Delete keys from a file and generate random delete from the source ref for those
    keys."""
    u = s.ref_uri(source_ref, "source ref URI")
    click.echo(f"Source ref: {u}")
    objects = f"/repositories/{u.repository}/branches/{u.ref}/objects"
    run("delete", parallelism, _keys(from_file, amount),
        lambda key: s.call("DELETE", objects, ok=(204,), params={"path": key}))


def _upload_empty(s: Session, u: LakeFSURI, branch: str, path: str) -> None:
    s.call("POST", f"/repositories/{u.repository}/branches/{branch}/objects", ok=(201,),
           params={"path": path}, content=b"",
           headers={"Content-Type": "application/octet-stream"})


@abuse.command("random-write")
@click.argument("source_branch", metavar="<source branch URI>")
@click.option("--prefix", default="abuse/", show_default=True,
              help="prefix to create paths under")
@amount_option("writes")
@parallelism_option("writes")
@pass_session
def random_write(s: Session, source_branch: str, prefix: str, amount: int,
                 parallelism: int) -> None:
    """Generate random writes to the source branch"""
    u = s.branch_uri(source_branch, "source branch")
    click.echo(f"Source branch: {u}")
    s.call("GET", f"/repositories/{u.repository}")
    run("stage object", parallelism, (f"{prefix}file-{i}" for i in range(amount)),
        lambda path: _upload_empty(s, u, u.ref, path))


@abuse.command("commit")
@click.argument("source_ref", metavar="<source ref URI>")
@amount_option("commits", default=DEFAULT_PARALLELISM)
@click.option("--gap", default="2s", show_default=True,
              help="duration to wait between commits")
@pass_session
def commit(s: Session, source_ref: str, amount: int, gap: str) -> None:
    """Commits to the source ref repeatedly"""
    u = s.branch_uri(source_ref, "source ref")
    pause = go_duration(gap)
    click.echo(f"Source branch: {u}")
    s.call("GET", f"/repositories/{u.repository}")
    url = f"/repositories/{u.repository}/branches/{u.ref}/commits"

    def one(message: str) -> None:
        try:
            s.call("POST", url, ok=(201,), json={"message": message})
        finally:
            time.sleep(pause)

    run("commit", 1, (str(i + 1) for i in range(amount)), one)


@abuse.command("list")
@click.argument("source_ref", metavar="<source ref URI>")
@click.option("--prefix", default="abuse/", show_default=True, help="prefix to list under")
@amount_option("lists")
@parallelism_option("lists")
@pass_session
def list_(s: Session, source_ref: str, prefix: str, amount: int, parallelism: int) -> None:
    """List from the source ref"""
    u = s.ref_uri(source_ref, "source ref URI")
    url = f"/repositories/{u.repository}/refs/{u.ref}/objects/ls"
    run("list", parallelism, (str(i + 1) for i in range(amount)),
        lambda _: s.call("GET", url, params={"prefix": prefix}))


@abuse.command("link-same-object")
@click.argument("source_ref", metavar="<source ref URI>")
@amount_option("link object")
@parallelism_option("link object")
@click.option("--key", default="linked-object", show_default=True,
              help="key used for the test")
@pass_session
def link_same_object(s: Session, source_ref: str, amount: int, parallelism: int,
                     key: str) -> None:
    """Link the same object in parallel."""
    u = s.branch_uri(source_ref, "source ref")
    click.echo(f"Source ref: {u}")
    click.echo(f"Object key: {key}")
    presign = presign_mode(s, u.repository, None)
    url = f"/repositories/{u.repository}/branches/{u.ref}/staging/backing"

    def get_and_link(path: str) -> None:
        location = s.json("GET", url, params={"path": path, "presign": presign or None})
        if location.get("presigned_url"):
            httpx.put(location["presigned_url"], content=b"", timeout=60).raise_for_status()
        s.call("PUT", url, params={"path": path}, json={
            "checksum": CHECKSUM, "size_bytes": 0,
            "staging": {"physical_address": location["physical_address"]}})

    run("get-and-link", parallelism, (key for _ in range(amount)), get_and_link)


def _remove_branches(s: Session, repository: str, prefix: str, parallelism: int) -> None:
    """Delete every branch named ``prefix...``; failures are reported, not fatal."""
    base = f"/repositories/{repository}/branches"

    def delete(branch: str) -> None:
        try:
            s.call("DELETE", f"{base}/{branch}", ok=(204,))
        except Exception as e:  # noqa: BLE001 - reported, the cleanup goes on
            click.echo(f"Failed to delete {branch}: {e}")

    with ThreadPoolExecutor(max_workers=parallelism) as pool:
        list(pool.map(delete, [b["id"] for b in s.every(base, {"prefix": prefix})]))


@abuse.command("merge")
@click.argument("branch_uri", metavar="<branch URI>")
@amount_option("merges", default=1000)
@parallelism_option("merges")
@pass_session
def merge(s: Session, branch_uri: str, amount: int, parallelism: int) -> None:
    """Merge non-conflicting objects to the source branch in parallel"""
    u = s.branch_uri(branch_uri)
    click.echo(f"Source branch:  {u}")
    prefix = "merge-" + secrets.token_urlsafe(15).replace("_", "x").replace("-", "x")
    click.echo(f"Branch prefix:  {prefix}")
    s.call("GET", f"/repositories/{u.repository}")
    repo = f"/repositories/{u.repository}"

    def merge_something(name: str) -> None:
        s.call("POST", f"{repo}/branches", ok=(201,), json={"name": name, "source": u.ref})
        _upload_empty(s, u, name, f"object-{name}")
        s.call("POST", f"{repo}/branches/{name}/commits", ok=(201,),
               json={"message": f"commit {name}"})
        s.call("POST", f"{repo}/refs/{name}/merge/{u.ref}", json={})

    try:
        run("merge", parallelism, (f"{prefix}-{i + 1:04d}" for i in range(amount)),
            merge_something)
    finally:
        _remove_branches(s, u.repository, prefix, parallelism)
