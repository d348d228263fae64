"""Local filesystem blockstore: ``local://<name>/<key>`` lives at ``<root>/<name>/<key>``.

``local:///<absolute path>`` (an empty name) is a file anywhere on the machine, as
lakeFS's local adapter names imported files: readable only under the root or under
one of ``blockstore.local.allowed_external_prefixes``, both as written and once
symbolic links are followed. Imports read only under the allowed prefixes, never
under the root, where the repositories' own objects and metadata are.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import itertools
import os
import struct
import sys
import threading
from collections.abc import Iterable, Iterator
from stat import S_ISREG
from typing import BinaryIO

from lakefs_core.block.base import BlockStore, ObjectStat
from lakefs_core.block.config import BlockstoreConfig, LocalConfig
from lakefs_core.errors import ForbiddenError, ObjectNotFoundError, StorageError, ValidationError

SCHEME = "local://"
#: addresses of files named by absolute path (imported files)
EXTERNAL_SCHEME = SCHEME + "/"
_TMP_PREFIX = ".tmp-"
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
_TMP_SEQUENCE = itertools.count()
#: extended attribute caching "<md5>:<size>:<mtime_ns>" of a file, so stat and list
#: need not re-read it; ignored when stale and skipped where xattrs are unsupported
_ETAG_XATTR = "user.lakefs.etag"
_MISSING = (FileNotFoundError, IsADirectoryError, NotADirectoryError)
_HAS_XATTR = hasattr(os, "setxattr")  # Linux only
#: a file without a name in a directory (Linux: O_TMPFILE), named once written
_UNNAMED_FLAGS = (os.O_WRONLY | getattr(os, "O_TMPFILE", 0) | getattr(os, "O_CLOEXEC", 0)
                  if hasattr(os, "O_TMPFILE") else 0)
#: what opening such a file fails with where the filesystem does not make them
_NO_UNNAMED = (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL)
_anchor_lock = threading.Lock()
_anchor: list[int] = []
#: Linux's FS_IOC_GETFLAGS and FS_IOC_SETFLAGS, and FS_TOPDIR_FL: "the top of a directory
#: hierarchy", whose subdirectories ext4 spreads over the disk as it does the root's
_GET_FLAGS, _SET_FLAGS, _TOP_FLAG = 0x80086601, 0x40086602, 0x00020000
_MARKS_TOPS = sys.platform.startswith("linux")


class LocalBlockStore(BlockStore):
    """Objects as files under ``root``, each written whole before it has its name.

    Where the filesystem makes files without a name (Linux, ``O_TMPFILE``: ext4, XFS,
    tmpfs...), an object is written into one and then linked at its name: on ext4 that
    costs a third less than writing a named temporary file and renaming it, which the
    store does elsewhere, and a write cut short leaves no file behind.

    The etag is the MD5 of the content (as S3 computes it for single-part objects).
    It is computed while writing and cached in an extended attribute of the file,
    keyed by size and mtime; a file changed behind the store's back, or one on a
    filesystem without user xattrs, is hashed again when asked.

    Args:
        root: the directory that holds every ``local://`` name.
        allowed_external_prefixes: filesystem paths outside ``root`` whose files
            ``local:///<absolute path>`` addresses may name.
        import_enabled: whether data may be imported from this store (zero-copy).
    """

    type = "local"
    scheme = "local"
    #: a listing stats (and reads the etag of) every file it lists
    lists_by_page = False

    def __init__(self, root: str, *, allowed_external_prefixes: Iterable[str] = (),
                 import_enabled: bool = False) -> None:
        self.root = os.path.abspath(os.path.expanduser(root))
        self._root_dir = os.path.join(self.root, "")
        self.allowed_external_prefixes = tuple(allowed_external_prefixes)
        self.import_enabled = import_enabled
        _make_directories(self.root)
        # where the root and the prefixes are once symbolic links are followed
        self._real_root = os.path.realpath(self.root)
        self._real_prefixes = tuple(os.path.realpath(p) for p in self.allowed_external_prefixes)
        #: whether objects are written as unnamed files, named once whole (see put)
        self._unnamed = _names_unnamed_files(self.root)

    def external_path(self, address: str, *, resolved: bool = True) -> str | None:
        """The filesystem path of a ``local:///<absolute path>`` address; None for others.

        Args:
            address: the address.
            resolved: check where the path leads once symbolic links are followed,
                too, and not only where it is written.

        Raises:
            ValidationError: the path is not absolute and normalised.
            ForbiddenError: the path is neither under the root nor under an allowed
                external prefix.
        """
        if not address.startswith(EXTERNAL_SCHEME):
            return None
        path = address[len(SCHEME):]
        trimmed = path.rstrip("/") or "/"
        if os.path.normpath(trimmed) != trimmed or "\\" in path:
            raise ValidationError(f"invalid local path: {address!r}")
        if not self._allowed(path):
            raise ForbiddenError(
                f"{path} is not under blockstore.local.path or "
                "blockstore.local.allowed_external_prefixes")
        if resolved and not self._resolves_allowed(path):
            raise _link_out(path)
        return path

    def check_import_source(self, address: str) -> None:
        """Refuse importing from ``address`` unless it is under an allowed external
        prefix, as written and once symbolic links are followed, and outside the root.

        Raises:
            ValidationError: not a ``local:///`` path, a path under the root (the
                repositories' storage), or one that a symbolic link takes out of the
                allowed prefixes.
            ForbiddenError: a path outside the root and the allowed prefixes.
        """
        path = self.external_path(address, resolved=False)
        if path is None:
            raise ValidationError(
                f"import path {address!r}: a local path must be absolute "
                f"({EXTERNAL_SCHEME}absolute/path)")
        real = os.path.realpath(path)
        if (_under(path, self.root) or _under(real, self._real_root)
                or _under(self._real_root, real)):
            raise ValidationError(
                f"import path {address!r} reaches the blockstore's own storage "
                "(blockstore.local.path), where repositories keep their objects: "
                "import from blockstore.local.allowed_external_prefixes")
        if not any(_under(real, p) for p in self._real_prefixes):
            raise ValidationError(
                f"import path {address!r} follows a symbolic link out of "
                "blockstore.local.allowed_external_prefixes")

    def _allowed(self, path: str) -> bool:
        return any(_under(path, p) for p in (self.root, *self.allowed_external_prefixes))

    def _resolves_allowed(self, path: str) -> bool:
        real = os.path.realpath(path)
        return any(_under(real, p) for p in (self._real_root, *self._real_prefixes))

    def _path(self, address: str) -> str:
        if not address.startswith(SCHEME):
            raise ValidationError(f"not a local address: {address!r}")
        external = self.external_path(address)
        if external is not None:
            return external
        rel = address[len(SCHEME):]
        parts = [p for p in rel.split("/") if p]
        if not parts or "." in parts or ".." in parts:
            raise ValidationError(f"invalid local address: {address!r}")
        path = self._root_dir + "/".join(parts)  # os.path.join, without its cost per stat
        if rel.endswith("/"):
            path += os.sep
        return path

    def put(self, address: str, data: bytes | Iterable[bytes]) -> ObjectStat:
        path = self._path(address)
        if path.endswith(os.sep):
            raise ValidationError(f"local address names a directory: {address!r}")
        chunks: Iterable[bytes] = (
            [bytes(data)] if isinstance(data, bytes | bytearray | memoryview) else data
        )
        directory, _, name = path.rpartition(os.sep)
        fd = self._open_unnamed(address, directory) if self._unnamed else None
        if fd is not None:
            return self._put_unnamed(address, path, directory, name, fd, chunks)
        tmp = _tmp_name(directory, name)
        try:
            try:
                fd = os.open(tmp, _TMP_FLAGS, 0o600)
            except FileNotFoundError:  # the first object in its directory
                _make_directories(directory)
                fd = os.open(tmp, _TMP_FLAGS, 0o600)
        except OSError as e:
            raise StorageError(f"local put {address}: {e}") from e
        try:
            try:  # plain writes: a file object would ask whether the file is a terminal
                md5 = _write_hashing(chunks, fd)
                st = os.fstat(fd)
                _cache_etag(fd, md5, st)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except BaseException as e:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            if isinstance(e, OSError):
                raise StorageError(f"local put {address}: {e}") from e
            raise
        return ObjectStat(address=address, size=st.st_size, etag=md5, mtime=st.st_mtime)

    def _open_unnamed(self, address: str, directory: str) -> int | None:
        """A file without a name in ``directory`` (made if missing), open for writing;
        None where the filesystem makes no such files (then the store names them)."""
        try:
            try:
                return os.open(directory, _UNNAMED_FLAGS, 0o600)
            except FileNotFoundError:  # the first object in its directory
                _make_directories(directory)
                return os.open(directory, _UNNAMED_FLAGS, 0o600)
        except OSError as e:
            if e.errno in _NO_UNNAMED:
                return None
            raise StorageError(f"local put {address}: {e}") from e

    def _put_unnamed(self, address: str, path: str, directory: str, name: str, fd: int,
                     chunks: Iterable[bytes]) -> ObjectStat:
        """Write into the unnamed file ``fd``, then give it its name: the file appears
        whole at ``path`` or not at all, and a write cut short leaves nothing behind.
        Over an existing file, the new one takes a temporary name and is renamed over
        it, as a replacement is made atomically."""
        try:
            try:
                md5 = _write_hashing(chunks, fd)
                st = os.fstat(fd)
                _cache_etag(fd, md5, st)
                source = f"/proc/self/fd/{fd}"
                try:
                    _link(source, path)
                except FileExistsError:
                    tmp = _tmp_name(directory, name)
                    _link(source, tmp)
                    try:
                        os.replace(tmp, path)
                    except BaseException:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(tmp)
                        raise
            finally:
                os.close(fd)
        except OSError as e:
            raise StorageError(f"local put {address}: {e}") from e
        return ObjectStat(address=address, size=st.st_size, etag=md5, mtime=st.st_mtime)

    def get(self, address: str, byte_range: tuple[int, int] | None = None) -> bytes:
        if byte_range is not None and (byte_range[0] < 0 or byte_range[1] < byte_range[0]):
            raise ValidationError(f"invalid byte range {byte_range!r}")
        if byte_range is None:
            return self._read_whole(address)
        with self._open(address) as f:
            first, last = byte_range
            f.seek(first)
            return f.read(last - first + 1)

    def get_stream(self, address: str, chunk_size: int = 1 << 20) -> Iterator[bytes]:
        f = self._open(address)

        def chunks() -> Iterator[bytes]:
            with f:
                while chunk := f.read(chunk_size):
                    yield chunk

        return chunks()

    def stat(self, address: str) -> ObjectStat:
        path = self._path(address)
        try:
            st = os.stat(path)
            if not S_ISREG(st.st_mode):
                raise FileNotFoundError(path)
            etag = _etag(path, st)
        except _MISSING as e:
            raise ObjectNotFoundError(f"object not found: {address}") from e
        return ObjectStat(address=address, size=st.st_size, etag=etag, mtime=st.st_mtime)

    def exists(self, address: str) -> bool:
        return os.path.isfile(self._path(address))

    def delete(self, address: str) -> None:
        with contextlib.suppress(*_MISSING):
            os.unlink(self._path(address))

    def list(self, prefix: str) -> Iterator[ObjectStat]:
        """Objects under ``prefix`` in address order, streamed: one directory's names
        are held at a time, never the whole listing."""
        if not prefix.startswith(SCHEME):
            raise ValidationError(f"not a local address: {prefix!r}")
        external = self.external_path(prefix)
        if external is not None:
            base_path, name_prefix = external.rsplit("/", 1)
            base_path = base_path or "/"
            base_address = SCHEME + base_path.rstrip("/") + "/"
        else:
            rel = prefix[len(SCHEME):]
            if not rel or any(p in (".", "..") for p in rel.split("/")):
                raise ValidationError(f"invalid local address: {prefix!r}")
            # walk only the deepest directory that covers the prefix
            base_rel, _, name_prefix = rel.rpartition("/")
            base_path = os.path.join(self.root, *[p for p in base_rel.split("/") if p])
            base_address = SCHEME + (base_rel + "/" if base_rel else "")
        # below an allowed directory every file is allowed; beside one, each is checked
        check = external is not None and not self._allowed(base_path)
        for address, path in _walk_sorted(base_path, base_address, name_prefix):
            if check and not self._allowed(path):
                continue
            if external is not None and not self._resolves_allowed(path):
                raise _link_out(path)  # before the file is opened: it may be anything
            try:
                st = os.stat(path)
                etag = _etag(path, st)
            except FileNotFoundError:
                continue  # deleted while listing
            except OSError as e:
                raise StorageError(f"local list {prefix}: {e}") from e
            yield ObjectStat(address=address, size=st.st_size, etag=etag, mtime=st.st_mtime)

    def copy(self, src: str, dst: str) -> ObjectStat:
        self._path(dst)  # a bad destination fails before the source is opened
        with self._open(src) as f:
            return self.put(dst, iter(lambda: f.read(1 << 20), b""))

    def _read_whole(self, address: str) -> bytes:
        """A file's bytes in as few system calls as reading them takes: open, stat, read
        (a file object would also ask whether the file is a terminal, and seek twice)."""
        path = self._path(address)
        try:
            fd = os.open(path, _READ_FLAGS)
        except _MISSING as e:
            raise ObjectNotFoundError(f"object not found: {address}") from e
        try:
            st = os.fstat(fd)
            if not S_ISREG(st.st_mode):
                raise ObjectNotFoundError(f"object not found: {address}")
            data = os.read(fd, st.st_size) if st.st_size else b""
            if len(data) < st.st_size or not st.st_size:  # a short read: the rest, to EOF
                parts = [data]
                while chunk := os.read(fd, 1 << 20):
                    parts.append(chunk)
                data = b"".join(parts)
            return data
        finally:
            os.close(fd)

    def _open(self, address: str) -> BinaryIO:
        try:
            return open(self._path(address), "rb")
        except _MISSING as e:
            raise ObjectNotFoundError(f"object not found: {address}") from e


def from_config(config: BlockstoreConfig) -> LocalBlockStore:
    """Build a local store from a ``blockstore`` section of type ``local``."""
    local = config.local or LocalConfig()
    return LocalBlockStore(local.path, allowed_external_prefixes=local.allowed_external_prefixes,
                           import_enabled=local.import_enabled)


def _link_out(path: str) -> ForbiddenError:
    return ForbiddenError(f"{path} follows a symbolic link out of blockstore.local.path "
                          "and blockstore.local.allowed_external_prefixes")


def _under(path: str, directory: str) -> bool:
    """Whether ``path`` is ``directory`` or below it (a prefix at a path boundary)."""
    directory = directory.rstrip("/")
    return path == directory or path.startswith(directory + "/")


def _walk_sorted(directory: str, address: str, name_prefix: str = ""
                 ) -> Iterator[tuple[str, str]]:
    """(address, path) of the files below ``directory`` whose names start with
    ``name_prefix`` (first level only), in address order: a directory sorts as its
    name followed by ``/``, as its files' addresses do."""
    keyed: list[tuple[str, bool, str]] = []
    try:
        with os.scandir(directory) as it:
            for item in it:
                if not item.name.startswith(name_prefix):
                    continue
                try:
                    is_dir = item.is_dir(follow_symlinks=True)
                except OSError:
                    continue
                if not is_dir and item.name.startswith(_TMP_PREFIX):
                    continue
                keyed.append((item.name + "/" if is_dir else item.name, is_dir, item.path))
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as e:
        raise StorageError(f"local list {address}: {e}") from e
    keyed.sort()
    for name, is_dir, path in keyed:
        if is_dir:
            yield from _walk_sorted(path, address + name)
        else:
            yield address + name, path


def _write_hashing(chunks: Iterable[bytes], fd: int) -> str:
    """Write every chunk to ``fd`` (all of it: a write may take part of a chunk); their
    MD5."""
    md5 = hashlib.md5()
    for chunk in chunks:
        view = memoryview(chunk)
        while view:
            view = view[os.write(fd, view):]
        md5.update(chunk)
    return md5.hexdigest()


def _cache_etag(path: str | int, etag: str, st: os.stat_result) -> None:
    if not _HAS_XATTR:
        return
    try:
        os.setxattr(path, _ETAG_XATTR, f"{etag}:{st.st_size}:{st.st_mtime_ns}".encode())
    except OSError as e:
        if e.errno not in (errno.ENOTSUP, errno.EPERM, errno.EACCES, errno.ENOSPC, errno.E2BIG):
            raise


def _etag(path: str, st: os.stat_result) -> str:
    try:
        if not _HAS_XATTR:
            raise OSError(errno.ENOTSUP, "no xattrs")
        etag, size, mtime_ns = os.getxattr(path, _ETAG_XATTR).decode().split(":")
        if int(size) == st.st_size and int(mtime_ns) == st.st_mtime_ns:
            return etag
    except (OSError, ValueError):
        pass  # no cached value: hash the file below
    md5 = hashlib.md5()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            md5.update(chunk)
    etag = md5.hexdigest()
    with contextlib.suppress(OSError):
        _cache_etag(path, etag, st)
    return etag


def _make_directories(path: str) -> None:
    """Make the directory ``path`` and its missing parents (an existing one is left as it
    is), each marked as the top of a hierarchy where the filesystem keeps the mark.

    The mark matters on ext4. There a new directory goes near its parent, and a file
    into its directory's group of inodes, so every object directory of a store would
    share a few groups. Under a marked directory, new ones are spread over the groups
    with the most room. Where files were deleted by the thousand (a test run, a
    garbage collection), ext4 without a journal skips each recently deleted inode
    when it makes a file, one by one (``recently_deleted`` in its inode allocator):
    measured here, 280-380 us of CPU per 4 KiB file near those inodes against 28 us
    elsewhere. The groups with the fewest directories are also those a mass deletion
    has just emptied, though: the mark spares a store the deletions made elsewhere, not
    those of its own directories."""
    try:
        os.mkdir(path)
    except FileExistsError:
        return
    except FileNotFoundError:
        parent = os.path.dirname(path)
        if parent == path:
            raise
        _make_directories(parent)
        try:
            os.mkdir(path)
        except FileExistsError:  # made meanwhile by another writer
            return
    _mark_top(path)


def _mark_top(path: str) -> None:
    """Mark the directory ``path`` as the top of a hierarchy (``chattr +T``), where the
    filesystem has the mark (ext4, ext3); elsewhere nothing happens."""
    if not _MARKS_TOPS:
        return
    import fcntl  # POSIX only

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
                     | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return
    try:
        (flags,) = struct.unpack("i", fcntl.ioctl(fd, _GET_FLAGS, bytes(4)))
        if not flags & _TOP_FLAG:
            fcntl.ioctl(fd, _SET_FLAGS, struct.pack("i", flags | _TOP_FLAG))
    except OSError:  # a filesystem without flags, or without this one
        pass
    finally:
        os.close(fd)


def _tmp_name(directory: str, name: str) -> str:
    """A temporary name beside ``name`` that no other writer uses (this process, thread
    and write), without the random draws of tempfile.mkstemp, which cost as much as the
    write itself; listings skip it."""
    return (f"{directory}{os.sep}{_TMP_PREFIX}{name[:64]}-{os.getpid()}-"
            f"{threading.get_ident()}-{next(_TMP_SEQUENCE)}")


def _link(source: str, path: str) -> None:
    """Give the file that the link ``source`` (``/proc/self/fd/N``) leads to the name
    ``path``: ``linkat`` following the link. Python's ``os.link`` calls ``link``, which
    does not follow it, unless a directory is named by descriptor: one of ``/`` is, which
    changes nothing for absolute paths."""
    if not _anchor:
        with _anchor_lock:
            if not _anchor:
                _anchor.append(os.open("/", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
                                       | getattr(os, "O_CLOEXEC", 0)))
    os.link(source, path, src_dir_fd=_anchor[0], follow_symlinks=True)


def _names_unnamed_files(root: str) -> bool:
    """Whether a file can be made without a name under ``root`` and named afterwards
    (Linux, a filesystem with ``O_TMPFILE``, ``/proc`` mounted); tried once per store."""
    if not _UNNAMED_FLAGS or not os.path.isdir("/proc/self/fd"):
        return False
    probe = _tmp_name(root, "probe")
    try:
        fd = os.open(root, _UNNAMED_FLAGS, 0o600)
    except OSError:
        return False
    try:
        _link(f"/proc/self/fd/{fd}", probe)
    except OSError:
        return False
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return True
