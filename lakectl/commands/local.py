"""``lakectl local``: a local directory that tracks a lakeFS path.

The directory's ``.lakefs_ref.yaml`` names the path it tracks (``src``) and the commit
its files came from (``at_head``). A file is changed locally when it is not in that
commit, is gone from the directory, or differs from the object in size or modified time
(files are given their object's modified time when written). ``status`` shows the local
changes and the remote ones (the commit against the ref's head), ``commit`` uploads the
local ones and commits, ``pull`` brings the remote ones, ``checkout`` makes the
directory equal to a ref.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import yaml

from lakectl import flags
from lakectl.commands.commits import commit_created_text
from lakectl.commands.fs import (
    download_object,
    no_progress_option,
    parallelism_option,
    path_inside,
    pre_sign_option,
    presign_mode,
    transfer_summary,
    upload_object,
)
from lakectl.output import Fatal, Output, interactive, output_option
from lakectl.progress import Transfers
from lakectl.session import Session, pass_session
from lakectl.uri import LakeFSURI

INDEX_FILE = ".lakefs_ref.yaml"
ADDED, MODIFIED, REMOVED = "added", "modified", "removed"
_DIFF_CHANGE = {"added": ADDED, "changed": MODIFIED, "removed": REMOVED}


@dataclass(frozen=True)
class LocalIndex:
    """What a directory tracks: ``src`` (a path URI) and the commit it is at."""

    root: Path
    src: LakeFSURI
    at_head: str

    @property
    def prefix(self) -> str:
        """The tracked path as an object prefix (``""`` or ending with ``/``)."""
        path = self.src.path_or_empty
        return path if not path or path.endswith("/") else path + "/"

    @classmethod
    def read(cls, s: Session, directory: str) -> LocalIndex:
        root = Path(directory).resolve()
        try:
            doc = yaml.safe_load((root / INDEX_FILE).read_text()) or {}
        except FileNotFoundError:
            raise Fatal(f"directory {root} is not linked to a lakeFS path "
                        f"(no {INDEX_FILE})") from None
        return cls(root, s.path_uri(str(doc.get("src", "")), "src"),
                   str(doc.get("at_head", "")))

    def write(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / INDEX_FILE).write_text(yaml.safe_dump(
            {"src": str(self.src), "at_head": self.at_head}, sort_keys=False))

    def at(self, commit_id: str, ref: str | None = None) -> LocalIndex:
        src = LakeFSURI(self.src.repository, ref or self.src.ref, self.src.path)
        return LocalIndex(self.root, src, commit_id)


def _path_uri(s: Session, text: str) -> LakeFSURI:
    """A path URI, a ref URI standing for the whole ref; the path as a prefix."""
    try:
        u = s.path_uri(text)
    except Fatal:
        u = s.ref_uri(text, "path URI").with_path("")
    path = u.path_or_empty
    return u.with_path(path if not path or path.endswith("/") else path + "/")


def _head(s: Session, u: LakeFSURI) -> str:
    return str(s.json("GET", f"/repositories/{u.repository}/commits/{u.ref}")["id"])


def _remote_objects(s: Session, u: LakeFSURI, commit_id: str,
                    prefix: str) -> dict[str, dict[str, Any]]:
    """The objects under ``prefix`` at a commit, by path relative to the prefix."""
    return {o["path"][len(prefix):]: o for o in s.every(
        f"/repositories/{u.repository}/refs/{commit_id}/objects/ls",
        {"prefix": prefix, "user_metadata": "false"}) if not o["path"].endswith("/")}


def _local_files(root: Path) -> dict[str, os.stat_result]:
    files = {}
    for p in root.rglob("*"):
        rel = p.relative_to(root).as_posix()
        if p.is_file() and rel != INDEX_FILE:
            files[rel] = p.stat()
    return files


def _local_changes(s: Session, index: LocalIndex) -> dict[str, str]:
    remote = _remote_objects(s, index.src, index.at_head, index.prefix)
    local = _local_files(index.root)
    changes = {rel: ADDED for rel in local.keys() - remote.keys()}
    changes.update({rel: REMOVED for rel in remote.keys() - local.keys()})
    for rel in local.keys() & remote.keys():
        o, st = remote[rel], local[rel]
        if st.st_size != o.get("size_bytes") or int(st.st_mtime) != int(o.get("mtime") or 0):
            changes[rel] = MODIFIED
    return dict(sorted(changes.items()))


def _remote_changes(s: Session, index: LocalIndex, to_commit: str) -> dict[str, str]:
    if to_commit == index.at_head:
        return {}
    u = index.src
    diff = s.every(f"/repositories/{u.repository}/refs/{index.at_head}/diff/{to_commit}",
                   {"prefix": index.prefix, "type": "two_dot"})
    return {d["path"][len(index.prefix):]: _DIFF_CHANGE.get(d.get("type", ""), MODIFIED)
            for d in diff if d.get("path_type", "object") == "object"}


def _sync(s: Session, index: LocalIndex, commit_id: str, changes: dict[str, str],
          presigned: bool, bars: Transfers, parallelism: int) -> dict[str, int]:
    """Bring ``changes`` (relative paths) to the directory from ``commit_id``."""
    u = LakeFSURI(index.src.repository, commit_id, None)
    objects = _remote_objects(s, u, commit_id, index.prefix)
    fetch = [rel for rel, change in changes.items() if change != REMOVED]
    gone = [rel for rel, change in changes.items() if change == REMOVED]

    def one(rel: str) -> None:
        dest = path_inside(index.root, rel)
        download_object(s, u, index.prefix + rel, dest, presigned, bars)
        mtime = int(objects[rel].get("mtime") or 0)
        os.utime(dest, (mtime, mtime))

    with ThreadPoolExecutor(max_workers=parallelism) as pool:
        list(pool.map(one, fetch))
    for rel in gone:
        target = path_inside(index.root, rel)
        target.unlink(missing_ok=True)
        for parent in target.parents:  # directories left empty go too
            if parent == index.root or any(parent.iterdir()):
                break
            parent.rmdir()
    return {"downloaded": len(fetch), "removed": len(gone)}


def _directory_argument(f: Any) -> Any:
    return click.argument("directory", metavar="[directory]", required=False, default=".")(f)


@click.group()
def local() -> None:
    """Sync local directories with lakeFS paths"""


@local.command("init")
@click.argument("path_uri", metavar="<path URI>")
@_directory_argument
@click.option("--force", is_flag=True, help="Overwrites if directory already linked to a "
              "lakeFS path")
@pass_session
def init(s: Session, path_uri: str, directory: str, force: bool) -> None:
    """Connect a local directory to a lakeFS remote URI to enable data sync"""
    u = _path_uri(s, path_uri)
    root = Path(directory).resolve()
    if (root / INDEX_FILE).exists() and not force:
        raise Fatal(f"directory '{root}' already linked to a lakeFS path, run command with "
                    "--force to overwrite")
    LocalIndex(root, u, _head(s, u)).write()
    click.echo(f"Successfully linked local directory '{root}' with remote '{u}'")


@local.command("clone")
@click.argument("path_uri", metavar="<path URI>")
@_directory_argument
@no_progress_option
@parallelism_option
@pre_sign_option
@pass_session
def clone(s: Session, path_uri: str, directory: str, no_progress: bool, parallelism: int,
          pre_sign: bool | None) -> None:
    """Clone a path from a lakeFS repository into a new directory."""
    u = _path_uri(s, path_uri)
    root = Path(directory).resolve()
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise Fatal(f"directory '{root}' exists and is not empty")
    index = LocalIndex(root, u, _head(s, u))
    index.write()
    remote = _remote_objects(s, u, index.at_head, index.prefix)
    with Transfers(not no_progress) as bars:
        done = _sync(s, index, index.at_head, dict.fromkeys(remote, ADDED),
                     presign_mode(s, u.repository, pre_sign), bars, parallelism)
    click.echo(f"\nSuccessfully cloned {u} to {root}.")
    click.echo(transfer_summary("Clone", downloaded=done["downloaded"]))


@local.command("list")
@_directory_argument
@pass_session
def list_(s: Session, directory: str) -> None:
    """find and list directories that are synced with lakeFS."""
    root = Path(directory).resolve()
    rows = []
    for found in sorted(root.rglob(INDEX_FILE)):
        index = LocalIndex.read(s, str(found.parent))
        rows.append([os.path.relpath(found.parent, root), str(index.src), index.at_head,
                     _head(s, index.src)])
    Output().table(["Directory", "Remote URI", "Synced Commit", "Head Commit"], rows)


def _status_rows(local_changes: dict[str, str],
                 remote_changes: dict[str, str]) -> list[list[str]]:
    rows = [["local", change, path] for path, change in local_changes.items()]
    return rows + [["remote", change, path] for path, change in remote_changes.items()]


@local.command("status")
@_directory_argument
@click.option("-l", "--local", "local_only", is_flag=True,
              help="Don't compare against remote changes")
@output_option
@pass_session
def status(s: Session, directory: str, local_only: bool, output_format: str) -> None:
    """show modifications (both remote and local) to the directory and the remote location
    it tracks"""
    index = LocalIndex.read(s, directory)
    out = Output(output_format)
    u = index.src
    local_changes = _local_changes(s, index)
    head = index.at_head if local_only else _head(s, u)
    remote_changes = _remote_changes(s, index, head)
    rows = _status_rows(local_changes, remote_changes)
    if out.json:
        out.dump({"local": local_changes, "remote": remote_changes})
        return
    if interactive():
        out.echo(f"\ndiff 'local://{index.root}' <--> "
                 f"'{LakeFSURI(u.repository, index.at_head, index.prefix)}'...")
        if not local_only:
            out.echo(f"diff '{LakeFSURI(u.repository, index.at_head, index.prefix)}' <--> "
                     f"'{u}'...\n")
    if not rows:
        out.echo("\nNo diff found.")
        return
    out.table(["SOURCE", "CHANGE", "PATH"], rows)


@local.command("commit")
@_directory_argument
@flags.commit_options(empty_message_default=False)
@click.option("--force", is_flag=True,
              help="Commit changes even if remote branch includes uncommitted changes")
@no_progress_option
@parallelism_option
@pre_sign_option
@pass_session
def commit(s: Session, directory: str, message: str, meta: tuple[str, ...],
           allow_empty_message: bool, force: bool, no_progress: bool, parallelism: int,
           pre_sign: bool | None) -> None:
    """Commit changes from local directory to the lakeFS branch it tracks."""
    index = LocalIndex.read(s, directory)
    u = s.branch_uri(str(LakeFSURI(index.src.repository, index.src.ref)), "branch")
    body = {"message": flags.commit_message(message, allow_empty_message),
            "metadata": flags.key_values(meta)}
    head = _head(s, u)
    if _remote_changes(s, index, head):
        raise Fatal(f"Local copy is not at the latest commit of '{u}' ({head}), run "
                    f"'lakectl local pull' first")
    staged = list(s.every(f"/repositories/{u.repository}/branches/{u.ref}/diff",
                          {"prefix": index.prefix}))
    if staged and not force:
        raise Fatal(f"Branch {u.ref} contains uncommitted changes. Either reset the branch "
                    "or use --force to include them in the commit")
    changes = _local_changes(s, index)
    presigned = presign_mode(s, u.repository, pre_sign)
    branch_objects = f"/repositories/{u.repository}/branches/{u.ref}/objects"

    def one(item: tuple[str, str]) -> None:
        rel, change = item
        if change == REMOVED:
            s.call("DELETE", branch_objects, ok=(204,), params={"path": index.prefix + rel})
            return
        path = index.root / rel
        with path.open("rb") as f:
            upload_object(s, u, index.prefix + rel, f, os.fstat(f.fileno()).st_size, "",
                          presigned, bars)

    with Transfers(not no_progress) as bars, ThreadPoolExecutor(parallelism) as pool:
        list(pool.map(one, changes.items()))
    created = s.json("POST", f"/repositories/{u.repository}/branches/{u.ref}/commits",
                     ok=(201,), json=body)
    new_index = index.at(created["id"])
    # the files now match the committed objects: give them their modified times
    committed = _remote_objects(s, u, created["id"], index.prefix)
    for rel, change in changes.items():
        if change != REMOVED and rel in committed:
            mtime = int(committed[rel].get("mtime") or 0)
            os.utime(index.root / rel, (mtime, mtime))
    new_index.write()
    counts = {k: sum(1 for c in changes.values() if c == v) for k, v in
              (("uploaded", ADDED), ("modified", MODIFIED), ("removed", REMOVED))}
    click.echo(transfer_summary("Upload", **counts))
    click.echo(commit_created_text(u.ref, created))


def _conflicts(local_changes: dict[str, str], remote_changes: dict[str, str]) -> list[str]:
    return sorted(local_changes.keys() & remote_changes.keys())


@local.command("pull")
@_directory_argument
@click.option("--force", is_flag=True, help="Reset any uncommitted local change")
@no_progress_option
@parallelism_option
@pre_sign_option
@pass_session
def pull(s: Session, directory: str, force: bool, no_progress: bool, parallelism: int,
         pre_sign: bool | None) -> None:
    """Fetch latest changes from lakeFS."""
    index = LocalIndex.read(s, directory)
    head = _head(s, index.src)
    remote_changes = _remote_changes(s, index, head)
    local_changes = _local_changes(s, index)
    if not force and (clash := _conflicts(local_changes, remote_changes)):
        raise Fatal("Local changes conflict with remote changes (use --force to overwrite "
                    "them): " + ", ".join(clash))
    if force:  # the local changes go too
        remote_changes = {**_invert(local_changes), **remote_changes}
    with Transfers(not no_progress) as bars:
        done = _sync(s, index, head, remote_changes,
                     presign_mode(s, index.src.repository, pre_sign), bars, parallelism)
    index.at(head).write()
    click.echo(f"\nSuccessfully synced changes!\n\nPull Summary:\n\n"
               f"Downloaded: {done['downloaded']}\nRemoved: {done['removed']}"
               if any(done.values()) else "\nNo changes")


def _invert(local_changes: dict[str, str]) -> dict[str, str]:
    """What to fetch to undo local changes: added files go, others come back."""
    return {rel: REMOVED if change == ADDED else MODIFIED
            for rel, change in local_changes.items()}


@local.command("checkout")
@_directory_argument
@click.option("-r", "--ref", default="", help="Checkout the given reference")
@flags.yes
@no_progress_option
@parallelism_option
@pre_sign_option
@pass_session
def checkout(s: Session, directory: str, ref: str, assume_yes: bool, no_progress: bool,
             parallelism: int, pre_sign: bool | None) -> None:
    """Sync local directory with the remote state."""
    index = LocalIndex.read(s, directory)
    target = ref or index.src.ref
    flags.confirm(assume_yes, f"This operation will overwrite any local changes with the "
                  f"content of {target}. Are you sure", "Checkout aborted")
    head = _head(s, LakeFSURI(index.src.repository, target))
    changes = {**_invert(_local_changes(s, index)), **_remote_changes(s, index, head)}
    with Transfers(not no_progress) as bars:
        done = _sync(s, index, head, changes,
                     presign_mode(s, index.src.repository, pre_sign), bars, parallelism)
    index.at(head, target).write()
    click.echo(f"\nCheckout Summary:\n\nDownloaded: {done['downloaded']}\n"
               f"Removed: {done['removed']}")
