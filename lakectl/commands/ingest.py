"""``lakectl ingest --from <object store URI> --to <lakeFS path URI>`` (deprecated in
lakeFS for ``lakectl import``).

lakectl walks the source itself, with the machine's own access to the store, and
stages each object it finds at ``<path>/<key relative to the source>`` on the branch
by its full address (``PUT .../branches/{branch}/objects``), without copying data and
without committing. The server stages only what it could import: a store that imports
from the source, outside every repository's storage namespace.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import click

from lakectl.output import Fatal, human_bytes
from lakectl.session import Session, pass_session

LOCAL = "local://"
S3 = "s3://"
#: at most one "so far" line a second, as lakectl
PROGRESS_EVERY = 1.0


@dataclass(frozen=True)
class ObjectStoreEntry:
    """One object found under the source prefix."""

    full_key: str
    relative_key: str
    address: str
    etag: str
    mtime: float
    size: int

    def __str__(self) -> str:
        when = datetime.fromtimestamp(self.mtime, UTC).isoformat()
        return (f"ObjectStoreEntry: {{Address:{self.address}, RelativeKey:{self.relative_key}, "
                f"ETag:{self.etag}, Size:{self.size}, Mtime:{when}}}")


def _md5(path: str) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _key_base(prefix: str) -> str:
    """The part of a source prefix that relative keys start after: up to its last
    ``/``."""
    return prefix[:prefix.rfind("/") + 1]


def _walk_local(source: str) -> Iterator[ObjectStoreEntry]:
    root = source[len(LOCAL):]
    if not os.path.isabs(root):
        raise Fatal(f"error walking object store: {source}: a local path must be absolute")
    if os.path.isdir(root):
        root = root.rstrip("/") + "/"
    base = _key_base(root)
    found = [root] if os.path.isfile(root) else []
    for directory, _, files in os.walk(root):
        found += [os.path.join(directory, name) for name in files]
    for path in sorted(found):
        st = os.stat(path)
        yield ObjectStoreEntry(full_key=path, relative_key=path[len(base):],
                               address=LOCAL + path, etag=_md5(path), mtime=st.st_mtime,
                               size=st.st_size)


def _walk_s3(source: str) -> Iterator[ObjectStoreEntry]:
    import boto3

    bucket, _, prefix = source[len(S3):].partition("/")
    base = _key_base(prefix)
    pages = boto3.client("s3").get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=prefix)
    for page in pages:
        for o in page.get("Contents", []):
            key = o["Key"]
            yield ObjectStoreEntry(full_key=key, relative_key=key[len(base):],
                                   address=f"{S3}{bucket}/{key}", etag=o["ETag"].strip('"'),
                                   mtime=o["LastModified"].timestamp(), size=o["Size"])


def walk(source: str) -> Iterator[ObjectStoreEntry]:
    """The objects under ``source``, in key order."""
    if source.startswith(LOCAL):
        return _walk_local(source)
    if source.startswith(S3):
        return _walk_s3(source)
    scheme = source.split("://", 1)[0] if "://" in source else source
    raise Fatal(f"error walking object store: no storage adapter found for: {scheme}")


@click.command("ingest")
@click.option("--from", "source", required=True, help='prefix to read from (e.g. '
              '"s3://bucket/sub/path/"). must not be in a storage namespace')
@click.option("--to", "to", required=True, help='lakeFS path to load objects into (e.g. '
              '"lakefs://repo/branch/sub/path/")')
@click.option("--dry-run", is_flag=True, help="only print the paths to be ingested")
@click.option("-v", "--verbose", is_flag=True,
              help="print stats for each individual object staged")
@click.option("-C", "--concurrency", type=click.IntRange(min=1), default=64, show_default=True,
              help="max concurrent API calls to make to the lakeFS server")
@pass_session
def ingest(s: Session, source: str, to: str, dry_run: bool, verbose: bool,
           concurrency: int) -> None:
    """Ingest objects from an external source into a lakeFS branch (without actually
    copying them)"""
    from lakectl.commands.fs import stat_text

    u = s.path_uri(to, "to")
    path = u.path_or_empty
    if not path.endswith("/"):
        path += "/"
    if path == "/":
        path = ""
    entries = walk(source)
    if dry_run:
        for e in entries:
            click.echo(str(e))
        return
    url = f"/repositories/{u.repository}/branches/{u.ref}/objects"

    def stage(e: ObjectStoreEntry) -> dict[str, Any]:
        return dict(s.json("PUT", url, ok=(201,), params={"path": path + e.relative_key},
                           json={"physical_address": e.address, "checksum": e.etag,
                                 "size_bytes": e.size, "mtime": int(e.mtime)}))

    objects = total = 0
    shown = time.monotonic()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        for staged in pool.map(stage, entries):
            objects += 1
            total += int(staged.get("size_bytes") or 0)
            if verbose:
                click.echo("Staged " + stat_text(staged) + "\n")
            elif time.monotonic() - shown > PROGRESS_EVERY:
                click.echo(f"Staged {objects} objects so far...\r", nl=False)
                shown = time.monotonic()
    if not verbose:
        click.echo()
    click.echo(f"\nStaged {objects} external objects (total of {human_bytes(total)})")
