"""Objects on top of the engine: data upload, physical addresses, reads and copies.

The REST API and the S3 gateway both go through :class:`Catalog`, so that object
data lands under ``<namespace>/data/`` with a relative address the same way from
either door, and reads resolve addresses the same way.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta

from lakefs_core.block.base import BlockStore, PresignedURL, PresignMode, join_address
from lakefs_core.errors import (
    LinkAddressError,
    NotFoundError,
    ReadOnlyRepositoryError,
    ValidationError,
)
from lakefs_core.graveler.graveler import Graveler
from lakefs_core.graveler.importing import (
    ImportPath,
    ImportPathType,
    check_import_paths,
    check_outside_namespaces,
)
from lakefs_core.graveler.model import AddressType, Branch, Entry, Repository

DATA_PREFIX = "data"
#: where symlink manifests are written under a storage namespace (lakeFS's prefix)
SYMLINKS_PREFIX = "symlinks"
#: the name of a directory's manifest
SYMLINK_FILE = "symlink.txt"
DEFAULT_CONTENT_TYPE = "application/octet-stream"
#: bytes per store request when a byte range is streamed
RANGE_CHUNK = 8 << 20
#: whole objects up to this size are read with one request
SMALL_OBJECT = 1 << 20
#: new data addresses in a row that share their first part
ADDRESSES_PER_PREFIX = 1000


@dataclass(frozen=True, slots=True)
class ObjectContent:
    """An opened object: its entry and a stream of (possibly a range of) its bytes."""

    entry: Entry
    chunks: Iterator[bytes]
    first: int
    last: int  # inclusive; -1 for an empty object


class Catalog:
    """Object-level operations for the API and the gateway."""

    def __init__(self, graveler: Graveler, *,
                 link_address_expiry: timedelta = timedelta(hours=6),
                 clock: Callable[[], float] = time.time) -> None:
        self.graveler = graveler
        self.link_address_expiry = link_address_expiry
        #: the time that handed-out link addresses expire by (replaceable in tests)
        self.clock = clock
        self._prefix_lock = threading.Lock()
        self._prefix = ""
        self._prefix_uses = 0

    def store_of(self, repo: Repository) -> BlockStore:
        return self.graveler.store_for(repo.storage_id)

    @staticmethod
    def physical_address(repo: Repository, entry: Entry) -> str:
        if entry.address_type is AddressType.FULL:
            return entry.address
        return join_address(repo.storage_namespace, entry.address)

    def presign_read(self, repo: Repository, entry: Entry) -> PresignedURL:
        """A pre-signed URL that reads the entry's data straight from the store.

        Raises:
            OperationNotSupportedError: the repository's store cannot pre-sign.
        """
        return self.store_of(repo).presign(self.physical_address(repo, entry), PresignMode.READ)

    def new_data_address(self) -> str:
        """A fresh relative address for object data (never reused).

        Consecutive addresses share their first part (:data:`ADDRESSES_PER_PREFIX` at
        most), so that a local store makes a directory per many objects, not per object,
        and an object store still sees writes spread over many prefixes.
        """
        with self._prefix_lock:
            if self._prefix_uses <= 0:
                self._prefix = uuid.uuid4().hex[:20]
                self._prefix_uses = ADDRESSES_PER_PREFIX
            self._prefix_uses -= 1
            prefix = self._prefix
        # 128 random bits, as a UUID's hex holds, without making the UUID
        return f"{DATA_PREFIX}/{prefix}/{os.urandom(16).hex()}"

    def hand_out_address(self, repo: Repository) -> str:
        """A fresh physical address for a client to write to, recorded so that it can be
        linked once before :attr:`link_address_expiry` passes."""
        address = join_address(repo.storage_namespace, self.new_data_address())
        now = self.clock()
        self.graveler.refstore.put_link_address(
            repo.id, address, expires_at=now + self.link_address_expiry.total_seconds(),
            now=now)
        return address

    def check_address(self, repo: Repository, address: str) -> None:
        """Like :meth:`claim_address`, without taking the record: checked before anything
        is said about what is stored at ``address``.

        Raises:
            LinkAddressError: as :meth:`claim_address`.
        """
        expires_at = self.graveler.refstore.get_link_address(repo.id, address)
        if expires_at is None or expires_at < self.clock():
            raise LinkAddressError()

    def claim_address(self, repo: Repository, address: str) -> None:
        """Take the record of a handed-out address for linking it.

        Raises:
            LinkAddressError: the address was not handed out for the repository, or
                was already linked, or its handout expired.
        """
        expires_at = self.graveler.refstore.take_link_address(repo.id, address)
        if expires_at is None or expires_at < self.clock():
            raise LinkAddressError()

    def write_data(self, repo: Repository, data: bytes | Iterable[bytes],
                   content_type: str = DEFAULT_CONTENT_TYPE,
                   metadata: Mapping[str, str] | None = None) -> Entry:
        """Store object data under the namespace; return its (unstaged) entry."""
        relative = self.new_data_address()
        stat = self.store_of(repo).put(join_address(repo.storage_namespace, relative), data)
        return Entry(address=relative, size=stat.size, etag=stat.etag, mtime=time.time(),
                     address_type=AddressType.RELATIVE,
                     content_type=content_type or DEFAULT_CONTENT_TYPE,
                     metadata=dict(metadata or {}))

    def upload(self, repo_id: str, branch: str, path: str, data: bytes | Iterable[bytes], *,
               content_type: str = DEFAULT_CONTENT_TYPE,
               metadata: Mapping[str, str] | None = None, if_absent: bool = False,
               if_match: str | None = None,
               checked: tuple[Repository, Branch] | None = None) -> Entry:
        """Write data and stage it at ``path`` on ``branch``.

        Checks that writes are allowed (and the write's conditions) before any byte
        is stored, and the conditions again before staging. ``checked``: what
        :meth:`writable` answered for this write a moment ago (with the conditions
        checked), when nothing but the data was read since.
        """
        if checked is None:
            repo, current = self.graveler.check_direct_write(repo_id, branch)
            self.graveler.check_write_conditions(repo, branch, path, if_absent=if_absent,
                                                 if_match=if_match)
        else:
            repo, current = checked
        entry = self.write_data(repo, data, content_type, metadata)
        self.graveler.stage_checked(repo, current, path, entry, if_absent=if_absent,
                                    if_match=if_match)
        return entry

    def link(self, repo_id: str, branch: str, path: str, entry: Entry, *,
             if_absent: bool = False, if_match: str | None = None) -> None:
        """Stage an existing entry (a copy or an already-written physical address)."""
        self.graveler.set_entry(repo_id, branch, path, entry, if_absent=if_absent,
                                if_match=if_match)

    def link_external(self, repo_id: str, branch: str, path: str, address: str, *,
                      size: int, checksum: str, content_type: str,
                      metadata: Mapping[str, str] | None = None,
                      mtime: float | None = None) -> tuple[Repository, Entry]:
        """Stage at ``path`` an object outside every storage namespace, by its full
        address, as an import of that one object would (lakeFS's ``fs stage`` and
        ``ingest``): the store must import from there and the object must be there
        with the declared size.

        Raises:
            ValidationError / ForbiddenError: the store does not import from
                ``address`` (:func:`check_import_paths`), it lies in a namespace, no
                object is there, or its size is not ``size``.
        """
        repo, _ = self.graveler.check_direct_write(repo_id, branch)
        store = self.store_of(repo)
        source = [ImportPath(address, path, ImportPathType.OBJECT)]
        check_import_paths(store, source)
        check_outside_namespaces(self.graveler.all_repositories(), repo.storage_id, source)
        try:
            stat = store.stat(address)
        except NotFoundError:
            raise ValidationError(f"no object at physical address {address!r}") from None
        if stat.size != size:
            raise ValidationError(f"size mismatch: {size} declared, {stat.size} at {address!r}")
        entry = Entry(address=stat.address, size=stat.size, etag=checksum or stat.etag,
                      mtime=stat.mtime if mtime is None else mtime,
                      address_type=AddressType.FULL,
                      content_type=content_type or DEFAULT_CONTENT_TYPE,
                      metadata=dict(metadata or {}))
        self.graveler.set_entry(repo_id, branch, path, entry)
        return repo, entry

    def writable(self, repo_id: str, branch: str) -> tuple[Repository, Branch]:
        """The repository and branch, if the branch exists and may be written directly.

        The one "may I write here" check of every front door.

        Raises:
            ReadOnlyRepositoryError, ProtectedBranchError, BranchNotFoundError.
        """
        return self.graveler.check_direct_write(repo_id, branch)

    def export_symlinks(self, repo_id: str, ref: str, prefix: str = "") -> str:
        """Write Hive-style symlink manifests of the objects of ``ref`` under ``prefix``.

        For each directory holding objects, ``symlinks/<repo>/<ref>/<directory>/
        symlink.txt`` under the storage namespace lists the physical addresses of its
        objects, one a line (objects at the top: ``symlinks/<repo>/<ref>/symlink.txt``),
        so that Hive, Athena, Glue or Trino read the data straight from the store.
        Manifests of directories that no longer hold objects are left as they were;
        directories with an empty, ``.`` or ``..`` segment (``a//b``, ``a/../b``) get no
        manifest, as no store could name it.

        Returns:
            Where the manifests are: ``<namespace>/symlinks``.

        Raises:
            ReadOnlyRepositoryError: a read-only (mirror) repository is never written.
        """
        repo = self.graveler.get_repository(repo_id)
        if repo.read_only:
            raise ReadOnlyRepositoryError(f"repository {repo_id!r} is read-only")
        store = self.store_of(repo)
        root = f"{SYMLINKS_PREFIX}/{repo.id}/{ref}"

        def write(directory: str, addresses: list[str]) -> None:
            key = f"{root}/{directory}/{SYMLINK_FILE}" if directory else f"{root}/{SYMLINK_FILE}"
            store.put(join_address(repo.storage_namespace, key), "\n".join(addresses).encode())

        # Paths are listed in order, so a directory's objects all come while the listing
        # is inside it, but not in one run ("a/b.txt" < "a/b/x" < "a/b0"): the open
        # directories are the chain of ancestors of the current one.
        open_dirs: dict[str, list[str]] = {}
        after = ""
        while True:
            items, more = self.graveler.list_entries(repo_id, ref, prefix=prefix, after=after)
            for item in items:
                if item.entry is None:
                    continue
                directory = item.path.rpartition("/")[0]
                if directory and any(seg in ("", ".", "..") for seg in directory.split("/")):
                    continue
                for done in [d for d in open_dirs if not _within(directory, d)]:
                    write(done, open_dirs.pop(done))
                open_dirs.setdefault(directory, []).append(
                    self.physical_address(repo, item.entry))
            if not more or not items:
                break
            after = items[-1].path
        for directory, addresses in open_dirs.items():
            write(directory, addresses)
        return join_address(repo.storage_namespace, SYMLINKS_PREFIX)

    def stat(self, repo_id: str, ref: str, path: str) -> tuple[Repository, Entry]:
        return self.graveler.stat_entry(repo_id, ref, path)

    def open(self, repo_id: str, ref: str, path: str,
             byte_range: tuple[int, int] | None = None) -> ObjectContent:
        """Open an object for reading (whole, or an inclusive byte range)."""
        repo, entry = self.stat(repo_id, ref, path)
        return self.open_entry(repo, entry, byte_range)

    def open_entry(self, repo: Repository, entry: Entry,
                   byte_range: tuple[int, int] | None = None) -> ObjectContent:
        """Open an entry just read for reading: the one read path of the front doors.

        The bytes stream in chunks of at most :data:`RANGE_CHUNK` (a range too); the
        first chunk is read now, so a missing object fails before an answer starts.
        """
        first, last = byte_range if byte_range is not None else (0, entry.size - 1)
        if last < first:
            return ObjectContent(entry, iter(()), first, last)
        store = self.store_of(repo)
        address = self.physical_address(repo, entry)
        if byte_range is not None:
            chunks = _range_chunks(store, address, first, last)
        elif entry.size <= SMALL_OBJECT:
            chunks = iter([store.get(address)])  # one request, no stream to set up
        else:
            chunks = store.get_stream(address)
        head = next(chunks, b"")
        return ObjectContent(entry, _prefixed(head, chunks), first, last)

    def read(self, repo_id: str, ref: str, path: str) -> bytes:
        return b"".join(self.open(repo_id, ref, path).chunks)

    def copy(self, repo_id: str, src_ref: str, src_path: str, dst_branch: str,
             dst_path: str, *, src_repo_id: str | None = None) -> Entry:
        """Copy an object to ``dst_path`` on ``dst_branch`` (data copied in the store)."""
        dst_repo, _ = self.graveler.check_direct_write(repo_id, dst_branch)
        src_repo, entry = self.stat(src_repo_id or repo_id, src_ref, src_path)
        relative = self.new_data_address()
        dst_store = self.store_of(dst_repo)
        dst_address = join_address(dst_repo.storage_namespace, relative)
        src_address = self.physical_address(src_repo, entry)
        if src_repo.storage_id == dst_repo.storage_id:
            stat = dst_store.copy(src_address, dst_address)
        else:
            stat = dst_store.put(dst_address, self.store_of(src_repo).get_stream(src_address))
        new = Entry(address=relative, size=stat.size, etag=entry.etag or stat.etag,
                    mtime=time.time(), address_type=AddressType.RELATIVE,
                    content_type=entry.content_type, metadata=dict(entry.metadata))
        self.graveler.set_entry(repo_id, dst_branch, dst_path, new)
        return new


def _within(directory: str, ancestor: str) -> bool:
    """Whether ``directory`` is ``ancestor`` or below it ("" is the top)."""
    return not ancestor or directory == ancestor or directory.startswith(ancestor + "/")


def _range_chunks(store: BlockStore, address: str, first: int, last: int) -> Iterator[bytes]:
    """Bytes ``first..last`` of an object, one store request per :data:`RANGE_CHUNK`."""
    pos = first
    while pos <= last:
        end = min(pos + RANGE_CHUNK - 1, last)
        chunk = store.get(address, (pos, end))
        if not chunk:
            return
        yield chunk
        pos += len(chunk)


def _prefixed(head: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    if head:
        yield head
    yield from rest
