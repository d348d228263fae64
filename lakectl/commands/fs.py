"""``lakectl fs ls|stat|cat|upload|download|rm``."""

from __future__ import annotations

import json
import os
import posixpath
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

import click

from lakectl.output import Fatal, Output, date, human_bytes, output_option
from lakectl.progress import Transfers
from lakectl.session import Session, pass_session
from lakectl.uri import LakeFSURI
from lakefs_core.client import ApiError

CHUNK = 1 << 20
STDIN = "-"
#: paths per bulk delete request (lakeFS's limit)
DELETE_BATCH = 1000


@click.group()
def fs() -> None:
    """View and manipulate objects"""


def _no_progress(f: Any) -> Any:
    return click.option("--no-progress", is_flag=True,
                        help="Disable progress bar animation for IO operations")(f)


def _parallelism(f: Any) -> Any:
    return click.option("-p", "--parallelism", type=click.IntRange(min=1), default=25,
                        show_default=True, help="Max concurrent operations to perform")(f)


def _pre_sign(f: Any) -> Any:
    # accepted for scripts written for lakectl; data always goes through the server here
    return click.option("--pre-sign/--no-pre-sign", default=False, hidden=True)(f)


def _path_or_ref(s: Session, text: str) -> LakeFSURI:
    """A path URI; a ref URI stands for the whole ref (``lakefs://repo/main``)."""
    try:
        return s.path_uri(text)
    except Fatal:
        return s.ref_uri(text, "path URI").with_path("")


def _stat_text(o: dict[str, Any]) -> str:
    lines = [f"Path: {o['path']}",
             f"Modified Time: {date(o.get('mtime'))}",
             f"Size: {o.get('size_bytes', 0)} bytes",
             f"Human Size: {human_bytes(o.get('size_bytes'))}",
             f"Physical Address: {o.get('physical_address', '')}"]
    if o.get("physical_address_expiry"):
        lines.append(f"Physical Address Expires: {date(o['physical_address_expiry'])}")
    lines += [f"Checksum: {o.get('checksum', '')}",
              f"Content-Type: {o.get('content_type', '')}"]
    if o.get("metadata"):
        lines.append("Metadata:")
        lines += [f"\t{k:<18} = {v}" for k, v in sorted(o["metadata"].items())]
    return "\n".join(lines)


def _summary(operation: str, **counts: int) -> str:
    done = [f"{name.capitalize()}: {n}" for name, n in counts.items() if n > 0]
    return f"\n{operation} Summary:\n\n" + ("\n".join(done) if done else "No changes")


def _objects_under(s: Session, u: LakeFSURI, prefix: str) -> Iterator[dict[str, Any]]:
    yield from s.every(f"/repositories/{u.repository}/refs/{u.ref}/objects/ls",
                       {"prefix": prefix, "user_metadata": "false"})


# --- ls, stat, cat -------------------------------------------------------------------------
@fs.command("ls")
@click.argument("path_uri", metavar="<path URI>")
@click.option("-r", "--recursive", is_flag=True,
              help="list all objects under the specified path")
@output_option
@pass_session
def ls(s: Session, path_uri: str, recursive: bool, output_format: str) -> None:
    """List entries under a given tree"""
    u = _path_or_ref(s, path_uri)
    out = Output(output_format)
    prefix = u.path_or_empty
    trim = prefix[:prefix.rfind("/") + 1] if not recursive else ""
    params = {"prefix": prefix, "delimiter": "" if recursive else "/",
              "user_metadata": "false"}
    entries = s.every(f"/repositories/{u.repository}/refs/{u.ref}/objects/ls", params)
    if out.json:
        out.page(list(entries))
        return
    for e in entries:
        name = e["path"].removeprefix(trim)
        if e.get("path_type") == "object":
            out.echo(f"{'object':<12}    {date(e.get('mtime')):<29}    "
                     f"{human_bytes(e.get('size_bytes')):<12}    {name}")
        else:
            out.echo(f"{e.get('path_type', 'common_prefix'):<12}    {'':<44}    {name}")


@fs.command("stat")
@click.argument("path_uri", metavar="<path URI>")
@_pre_sign
@output_option
@pass_session
def stat(s: Session, path_uri: str, pre_sign: bool, output_format: str) -> None:
    """View object metadata"""
    u = s.path_uri(path_uri)
    out = Output(output_format)
    o = s.json("GET", f"/repositories/{u.repository}/refs/{u.ref}/objects/stat",
               params={"path": u.path_or_empty, "user_metadata": "true"})
    out.show(o, _stat_text)


@fs.command("cat")
@click.argument("path_uri", metavar="<path URI>")
@_pre_sign
@pass_session
def cat(s: Session, path_uri: str, pre_sign: bool) -> None:
    """Dump content of object to stdout"""
    u = s.path_uri(path_uri)
    stdout = sys.stdout.buffer
    with s.stream("GET", f"/repositories/{u.repository}/refs/{u.ref}/objects",
                  params={"path": u.path_or_empty}) as resp:
        for chunk in resp.iter_bytes(CHUNK):
            stdout.write(chunk)
    stdout.flush()


# --- upload --------------------------------------------------------------------------------
def _read(f: IO[bytes]) -> Iterator[bytes]:
    while chunk := f.read(CHUNK):
        yield chunk


def _upload(s: Session, u: LakeFSURI, path: str, f: IO[bytes], size: int | None,
            content_type: str, bars: Transfers, *overall: Any) -> dict[str, Any]:
    task = bars.bar(f"upload {path}", size)
    headers = {"content-type": content_type or "application/octet-stream"}
    if size is not None:
        headers["content-length"] = str(size)
    with s.stream("POST", f"/repositories/{u.repository}/branches/{u.ref}/objects",
                  ok=(201,), params={"path": path}, headers=headers,
                  content=bars.counted(_read(f), task, *overall)) as resp:
        stats = dict(json.loads(resp.read()))
    bars.finish(task)
    return stats


@fs.command("upload")
@click.argument("path_uri", metavar="<path URI>")
@click.option("-s", "--source", required=True, help='local file to upload, or "-" for stdin')
@click.option("-r", "--recursive", is_flag=True,
              help="recursively copy all files under local source")
@click.option("--content-type", default="", help="MIME type of contents")
@_no_progress
@_parallelism
@_pre_sign
@output_option
@pass_session
def upload(s: Session, path_uri: str, source: str, recursive: bool, content_type: str,
           no_progress: bool, parallelism: int, pre_sign: bool, output_format: str) -> None:
    """Upload a local file to the specified URI"""
    u = s.path_uri(path_uri)
    out = Output(output_format)
    if not recursive:
        if u.path_or_empty.endswith("/") or not u.path_or_empty:
            raise Fatal("target path is not a valid URI")
        with Transfers(not no_progress) as bars:
            if source == STDIN:
                stats = _upload(s, u, u.path_or_empty, sys.stdin.buffer, None,
                                content_type, bars)
            else:
                try:
                    f = open(source, "rb")  # noqa: SIM115 - closed below
                except OSError as e:
                    raise Fatal(f"open {source}: {e.strerror}") from None
                with f:
                    stats = _upload(s, u, u.path_or_empty, f, os.fstat(f.fileno()).st_size,
                                    content_type, bars)
        out.show(stats, _stat_text)
        return

    root = Path(source)
    if not root.is_dir():
        raise Fatal(f"{source}: not a directory")
    prefix = u.path_or_empty
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    files = sorted(p for p in root.rglob("*") if p.is_file())
    total = sum(p.stat().st_size for p in files)

    def one(p: Path) -> dict[str, Any]:
        with p.open("rb") as f:
            return _upload(s, u, prefix + p.relative_to(root).as_posix(), f,
                           p.stat().st_size, content_type, bars, overall)

    with Transfers(not no_progress) as bars:
        overall = bars.bar(f"upload {len(files)} files", total)
        with ThreadPoolExecutor(max_workers=parallelism) as pool:
            uploaded = list(pool.map(one, files))
    if out.json:
        out.page(uploaded)
    else:
        out.echo(_summary("Upload", uploaded=len(uploaded)))


# --- download ------------------------------------------------------------------------------
def _download(s: Session, u: LakeFSURI, path: str, dest: Path, bars: Transfers,
              *overall: Any) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    with s.stream("GET", f"/repositories/{u.repository}/refs/{u.ref}/objects",
                  params={"path": path}) as resp:
        size = resp.headers.get("content-length")
        task = bars.bar(f"download {path}", int(size) if size else None)
        with part.open("wb") as f:
            for chunk in bars.counted(resp.iter_bytes(CHUNK), task, *overall):
                f.write(chunk)
    os.replace(part, dest)
    bars.finish(task)


def _inside(root: Path, relative: str) -> Path:
    """``root/relative``, refusing an object path that would land outside ``root``."""
    target = (root / relative).resolve()
    if not target.is_relative_to(root.resolve()):
        raise Fatal(f"refusing to download {relative!r}: outside {root}")
    return target


@fs.command("download")
@click.argument("path_uri", metavar="<path URI>")
@click.argument("destination", metavar="[<destination path>]", required=False, default=".")
@click.option("-r", "--recursive", is_flag=True, hidden=True,
              help="recursively download all objects under path (always, for a prefix)")
@_no_progress
@_parallelism
@_pre_sign
@pass_session
def download(s: Session, path_uri: str, destination: str, recursive: bool, no_progress: bool,
             parallelism: int, pre_sign: bool) -> None:
    """Download object(s) from a given repository path"""
    u = _path_or_ref(s, path_uri)
    remote = u.path_or_empty
    single = None
    if remote and not remote.endswith("/"):
        try:
            single = s.json("GET", f"/repositories/{u.repository}/refs/{u.ref}/objects/stat",
                            params={"path": remote, "user_metadata": "false"})
        except ApiError as e:
            if e.status != 404:
                raise
    if single is not None:
        dest = Path(destination)
        if dest.is_dir() or destination.endswith(os.sep):
            dest = dest / posixpath.basename(remote)
        with Transfers(not no_progress) as bars:
            _download(s, u, remote, dest, bars)
        click.echo(_summary("Download", downloaded=1))
        return

    prefix = remote + "/" if remote and not remote.endswith("/") else remote
    objects = [o for o in _objects_under(s, u, prefix)
               if o["path"] != prefix and not o["path"].endswith("/")]
    if not objects and remote:
        raise Fatal(f"{u}: no such object or prefix")
    root = Path(destination)
    targets = [(o["path"], _inside(root, o["path"][len(prefix):])) for o in objects]
    total = sum(int(o.get("size_bytes") or 0) for o in objects)
    with Transfers(not no_progress) as bars:
        overall = bars.bar(f"download {len(objects)} files", total)
        with ThreadPoolExecutor(max_workers=parallelism) as pool:
            list(pool.map(lambda t: _download(s, u, t[0], t[1], bars, overall), targets))
    click.echo(_summary("Download", downloaded=len(objects)))


# --- rm ------------------------------------------------------------------------------------
@fs.command("rm")
@click.argument("path_uri", metavar="<path URI>")
@click.option("-r", "--recursive", is_flag=True,
              help="recursively delete all objects under the specified path")
@click.option("-C", "--concurrency", type=click.IntRange(min=1), default=50, show_default=True,
              help="max concurrent single delete operations to send to the lakeFS server")
@pass_session
def rm(s: Session, path_uri: str, recursive: bool, concurrency: int) -> None:
    """Delete object"""
    u = s.path_uri(path_uri, "path")
    branch_objects = f"/repositories/{u.repository}/branches/{u.ref}/objects"
    if not recursive:
        s.call("DELETE", branch_objects, ok=(204,), params={"path": u.path_or_empty})
        return
    paths = [o["path"] for o in _objects_under(s, u, u.path_or_empty)]
    batches = [paths[i:i + DELETE_BATCH] for i in range(0, len(paths), DELETE_BATCH)]

    def one(batch: list[str]) -> list[dict[str, Any]]:
        body = s.json("POST", f"{branch_objects}/delete", json={"paths": batch})
        return list(body.get("errors") or [])

    with ThreadPoolExecutor(max_workers=min(concurrency, 8)) as pool:
        errors = [e for errs in pool.map(one, batches) for e in errs]
    for e in errors:
        click.echo(f"rm {u.with_path(e.get('path', ''))} - {e.get('message', '')}", err=True)
    if errors:
        raise SystemExit(1)
