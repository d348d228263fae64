"""``lakectl fs ls|stat|cat|upload|download|rm|presign|stage|update-metadata``.

With ``--pre-sign`` (by default when the repository's store offers it, as the server's
``/config`` says in ``pre_sign_support``) data moves between lakectl and the store
through pre-signed URLs; otherwise it goes through the server.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import sys
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

import click
import httpx

from lakectl import flags
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


def no_progress_option(f: Any) -> Any:
    return click.option("--no-progress", is_flag=True,
                        help="Disable progress bar animation for IO operations")(f)


def parallelism_option(f: Any) -> Any:
    return click.option("-p", "--parallelism", type=click.IntRange(min=1), default=25,
                        show_default=True, help="Max concurrent operations to perform")(f)


PRESIGN_DISABLED = "Pre-signed URL support is currently disabled for this lakeFS server"


def pre_sign_option(f: Any) -> Any:
    return click.option("--pre-sign/--no-pre-sign", default=None,
                        help="Use pre-signed URLs when downloading/uploading data "
                             "(default: when the repository's store supports them)")(f)


def _store_presigns(s: Session, repository: str) -> bool:
    """Whether the store of ``repository`` offers pre-signed URLs (``/config``)."""
    config = s.json("GET", "/config")
    storage_id = s.json("GET", f"/repositories/{repository}").get("storage_id") or ""
    stores = config.get("storage_config_list") or [config.get("storage_config") or {}]
    store = next((c for c in stores if (c.get("blockstore_id") or "") == storage_id),
                 config.get("storage_config") or {})
    return bool(store.get("pre_sign_support"))


def presign_mode(s: Session, repository: str, asked: bool | None) -> bool:
    """``--pre-sign`` as given, else what the store offers; asked for and not offered
    is an error."""
    if asked is False:
        return False
    offered = _store_presigns(s, repository)
    if asked and not offered:
        raise Fatal(PRESIGN_DISABLED)
    return offered


def _direct() -> httpx.Client:
    """A client of the store's pre-signed URLs (they carry their own authorization)."""
    return httpx.Client(timeout=60.0, follow_redirects=True)


def _path_or_ref(s: Session, text: str) -> LakeFSURI:
    """A path URI; a ref URI stands for the whole ref (``lakefs://repo/main``)."""
    try:
        return s.path_uri(text)
    except Fatal:
        return s.ref_uri(text, "path URI").with_path("")


def stat_text(o: dict[str, Any]) -> str:
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


def transfer_summary(operation: str, **counts: int) -> str:
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
@pre_sign_option
@output_option
@pass_session
def stat(s: Session, path_uri: str, pre_sign: bool | None, output_format: str) -> None:
    """View object metadata"""
    u = s.path_uri(path_uri)
    out = Output(output_format)
    o = s.json("GET", f"/repositories/{u.repository}/refs/{u.ref}/objects/stat",
               params={"path": u.path_or_empty, "user_metadata": "true",
                       **({"presign": "true"} if pre_sign else {})})
    out.show(o, stat_text)


@fs.command("presign")
@click.argument("path_uri", metavar="<path URI>")
@pass_session
def presign(s: Session, path_uri: str) -> None:
    """return a pre-signed URL for reading the specified object"""
    u = s.path_uri(path_uri)
    if not _store_presigns(s, u.repository):
        raise Fatal(PRESIGN_DISABLED)
    o = s.json("GET", f"/repositories/{u.repository}/refs/{u.ref}/objects/stat",
               params={"path": u.path_or_empty, "user_metadata": "true", "presign": "true"})
    click.echo(o["physical_address"])


@fs.command("cat")
@click.argument("path_uri", metavar="<path URI>")
@pre_sign_option
@pass_session
def cat(s: Session, path_uri: str, pre_sign: bool | None) -> None:
    """Dump content of object to stdout"""
    u = s.path_uri(path_uri)
    stdout = sys.stdout.buffer
    with _object_stream(s, u, u.path_or_empty, presign_mode(s, u.repository, pre_sign)) as resp:
        for chunk in resp.iter_bytes(CHUNK):
            stdout.write(chunk)
    stdout.flush()


@contextlib.contextmanager
def _object_stream(s: Session, u: LakeFSURI, path: str,
                   presigned: bool) -> Iterator[httpx.Response]:
    """The object's data: from the store at its pre-signed URL, or through the server."""
    if not presigned:
        with s.stream("GET", f"/repositories/{u.repository}/refs/{u.ref}/objects",
                      params={"path": path}) as resp:
            yield resp
        return
    o = s.json("GET", f"/repositories/{u.repository}/refs/{u.ref}/objects/stat",
               params={"path": path, "user_metadata": "false", "presign": "true"})
    with _direct() as http, http.stream("GET", o["physical_address"]) as resp:
        if resp.status_code != 200:
            raise Fatal(f"download {path}: the store answered {resp.status_code}")
        yield resp


# --- upload --------------------------------------------------------------------------------
def _read(f: IO[bytes]) -> Iterator[bytes]:
    while chunk := f.read(CHUNK):
        yield chunk


def upload_object(s: Session, u: LakeFSURI, path: str, f: IO[bytes], size: int | None,
                  content_type: str, presigned: bool, bars: Transfers,
                  *overall: Any) -> dict[str, Any]:
    task = bars.bar(f"upload {path}", size)
    headers = {"content-type": content_type or "application/octet-stream"}
    if presigned:
        stats = _upload_presigned(s, u, path, f, size, headers, bars, task, *overall)
        bars.finish(task)
        return stats
    if size is not None:
        headers["content-length"] = str(size)
    with s.stream("POST", f"/repositories/{u.repository}/branches/{u.ref}/objects",
                  ok=(201,), params={"path": path}, headers=headers,
                  content=bars.counted(_read(f), task, *overall)) as resp:
        stats = dict(json.loads(resp.read()))
    bars.finish(task)
    return stats


def _upload_presigned(s: Session, u: LakeFSURI, path: str, f: IO[bytes], size: int | None,
                      headers: dict[str, str], bars: Transfers, *tasks: Any) -> dict[str, Any]:
    """PUT the data to a pre-signed URL of a fresh address, then link it to ``path``."""
    backing = f"/repositories/{u.repository}/branches/{u.ref}/staging/backing"
    location = s.json("GET", backing, params={"path": path, "presign": "true"})
    chunks: Iterable[bytes] = _read(f)
    if size is None:  # stdin: a pre-signed PUT needs its length
        data = f.read()
        size, chunks = len(data), [data]
    content = bars.counted(chunks, *tasks)
    with _direct() as http:
        resp = http.put(location["presigned_url"], content=content,
                        headers={**headers, "content-length": str(size)})
    if resp.status_code not in (200, 201):
        raise Fatal(f"upload {path}: the store answered {resp.status_code}")
    return dict(s.json("PUT", backing, params={"path": path}, json={
        "staging": {"physical_address": location["physical_address"]},
        "checksum": resp.headers.get("etag", "").strip('"'), "size_bytes": size,
        "content_type": headers["content-type"]}))


@fs.command("upload")
@click.argument("path_uri", metavar="<path URI>")
@click.option("-s", "--source", required=True, help='local file to upload, or "-" for stdin')
@click.option("-r", "--recursive", is_flag=True,
              help="recursively copy all files under local source")
@click.option("--content-type", default="", help="MIME type of contents")
@no_progress_option
@parallelism_option
@pre_sign_option
@output_option
@pass_session
def upload(s: Session, path_uri: str, source: str, recursive: bool, content_type: str,
           no_progress: bool, parallelism: int, pre_sign: bool | None,
           output_format: str) -> None:
    """Upload a local file to the specified URI"""
    u = s.path_uri(path_uri)
    out = Output(output_format)
    presigned = presign_mode(s, u.repository, pre_sign)
    if not recursive:
        if u.path_or_empty.endswith("/") or not u.path_or_empty:
            raise Fatal("target path is not a valid URI")
        with Transfers(not no_progress) as bars:
            if source == STDIN:
                stats = upload_object(s, u, u.path_or_empty, sys.stdin.buffer, None,
                                      content_type, presigned, bars)
            else:
                try:
                    f = open(source, "rb")  # noqa: SIM115 - closed below
                except OSError as e:
                    raise Fatal(f"open {source}: {e.strerror}") from None
                with f:
                    stats = upload_object(s, u, u.path_or_empty, f,
                                          os.fstat(f.fileno()).st_size, content_type,
                                          presigned, bars)
        out.show(stats, stat_text)
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
            return upload_object(s, u, prefix + p.relative_to(root).as_posix(), f,
                                 p.stat().st_size, content_type, presigned, bars, overall)

    with Transfers(not no_progress) as bars:
        overall = bars.bar(f"upload {len(files)} files", total)
        with ThreadPoolExecutor(max_workers=parallelism) as pool:
            uploaded = list(pool.map(one, files))
    if out.json:
        out.page(uploaded)
    else:
        out.echo(transfer_summary("Upload", uploaded=len(uploaded)))


# --- download ------------------------------------------------------------------------------
def download_object(s: Session, u: LakeFSURI, path: str, dest: Path, presigned: bool,
                    bars: Transfers, *overall: Any) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    with _object_stream(s, u, path, presigned) as resp:
        size = resp.headers.get("content-length")
        task = bars.bar(f"download {path}", int(size) if size else None)
        with part.open("wb") as f:
            for chunk in bars.counted(resp.iter_bytes(CHUNK), task, *overall):
                f.write(chunk)
    os.replace(part, dest)
    bars.finish(task)


def path_inside(root: Path, relative: str) -> Path:
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
@no_progress_option
@parallelism_option
@pre_sign_option
@pass_session
def download(s: Session, path_uri: str, destination: str, recursive: bool, no_progress: bool,
             parallelism: int, pre_sign: bool | None) -> None:
    """Download object(s) from a given repository path"""
    u = _path_or_ref(s, path_uri)
    presigned = presign_mode(s, u.repository, pre_sign)
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
            download_object(s, u, remote, dest, presigned, bars)
        click.echo(transfer_summary("Download", downloaded=1))
        return

    prefix = remote + "/" if remote and not remote.endswith("/") else remote
    objects = [o for o in _objects_under(s, u, prefix)
               if o["path"] != prefix and not o["path"].endswith("/")]
    if not objects and remote:
        raise Fatal(f"{u}: no such object or prefix")
    root = Path(destination)
    targets = [(o["path"], path_inside(root, o["path"][len(prefix):])) for o in objects]
    total = sum(int(o.get("size_bytes") or 0) for o in objects)
    with Transfers(not no_progress) as bars:
        overall = bars.bar(f"download {len(objects)} files", total)
        with ThreadPoolExecutor(max_workers=parallelism) as pool:
            list(pool.map(lambda t: download_object(s, u, t[0], t[1], presigned, bars,
                                                    overall), targets))
    click.echo(transfer_summary("Download", downloaded=len(objects)))


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


@fs.command("update-metadata")
@click.argument("path_uri", metavar="<path URI>")
@click.option("--metadata", multiple=True,
              help="Metadata to set, in the form key1=value1,key2=value2")
@pass_session
def update_metadata(s: Session, path_uri: str, metadata: tuple[str, ...]) -> None:
    """Update user metadata on the specified URI"""
    u = s.path_uri(path_uri)
    pairs = {}
    for arg in metadata:
        for kv in arg.split(","):
            key, sep, value = kv.partition("=")
            if not sep:
                raise Fatal(f"expected <key>=<value>, got {kv}")
            pairs[key] = value
    s.call("PUT", f"/repositories/{u.repository}/branches/{u.ref}/objects/stat/user_metadata",
           ok=(201, 204), params={"path": u.path_or_empty}, json={"set": pairs})


@fs.command("stage")
@click.argument("path_uri", metavar="<path URI>")
@click.option("--location", required=True,
              help='fully qualified storage location (i.e. "s3://bucket/path/to/object")')
@click.option("--size", type=int, required=True, help="Object size in bytes")
@click.option("--checksum", required=True, help="Object MD5 checksum as a hexadecimal string")
@click.option("--mtime", type=int, default=0,
              help="Object modified time (Unix Epoch in seconds). Defaults to current time")
@click.option("--content-type", default="", help="MIME type of contents")
@click.option("--meta", multiple=True, help="key value pairs in the form of key=value")
@output_option
@pass_session
def stage(s: Session, path_uri: str, location: str, size: int, checksum: str, mtime: int,
          content_type: str, meta: tuple[str, ...], output_format: str) -> None:
    """Link an external object with a path in a repository

    Link an external object with a path in a repository, creating an uncommitted change.
    The object location must be outside the repository's storage namespace.
    """
    u = s.path_uri(path_uri)
    namespace = s.json("GET", f"/repositories/{u.repository}")["storage_namespace"]
    if location.startswith(namespace.rstrip("/") + "/"):
        raise Fatal("The staged object must be outside the repository's storage namespace")
    body: dict[str, Any] = {"physical_address": location, "checksum": checksum,
                            "size_bytes": size, "content_type": content_type}
    if mtime:
        body["mtime"] = mtime
    if meta:
        body["metadata"] = flags.key_values(meta)
    staged = s.json("PUT", f"/repositories/{u.repository}/branches/{u.ref}/objects",
                    ok=(201,), params={"path": u.path_or_empty}, json=body)
    Output(output_format).show(staged, stat_text)
