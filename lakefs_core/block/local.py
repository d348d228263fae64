"""Local filesystem blockstore: ``local://<name>/<key>`` lives at ``<root>/<name>/<key>``."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from lakefs_core.block.base import BlockStore, ObjectStat
from lakefs_core.block.config import BlockstoreConfig, LocalConfig
from lakefs_core.errors import ObjectNotFoundError, StorageError, ValidationError

SCHEME = "local://"
_TMP_PREFIX = ".tmp-"
#: extended attribute caching "<md5>:<size>:<mtime_ns>" of a file, so stat and list
#: need not re-read it; ignored when stale and skipped where xattrs are unsupported
_ETAG_XATTR = "user.lakefs.etag"
_MISSING = (FileNotFoundError, IsADirectoryError, NotADirectoryError)
_HAS_XATTR = hasattr(os, "setxattr")  # Linux only


class LocalBlockStore(BlockStore):
    """Objects as files under ``root``. Writes go to a temp file and are renamed in.

    The etag is the MD5 of the content (as S3 computes it for single-part objects).
    It is computed while writing and cached in an extended attribute of the file,
    keyed by size and mtime; a file changed behind the store's back, or one on a
    filesystem without user xattrs, is hashed again when asked.

    Args:
        root: the directory that holds every ``local://`` name.
    """

    type = "local"
    scheme = "local"

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(os.path.expanduser(root))
        os.makedirs(self.root, exist_ok=True)

    def _path(self, address: str) -> str:
        if not address.startswith(SCHEME):
            raise ValidationError(f"not a local address: {address!r}")
        rel = address[len(SCHEME):]
        parts = [p for p in rel.split("/") if p]
        if not parts or any(p in (".", "..") for p in parts):
            raise ValidationError(f"invalid local address: {address!r}")
        path = os.path.join(self.root, *parts)
        if rel.endswith("/"):
            path += os.sep
        return path

    def _address(self, path: str) -> str:
        rel = os.path.relpath(path, self.root).replace(os.sep, "/")
        return SCHEME + rel

    def put(self, address: str, data: bytes | Iterable[bytes]) -> ObjectStat:
        path = self._path(address)
        if path.endswith(os.sep):
            raise ValidationError(f"local address names a directory: {address!r}")
        chunks: Iterable[bytes] = (
            [bytes(data)] if isinstance(data, bytes | bytearray | memoryview) else data
        )
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=_TMP_PREFIX)
        except OSError as e:
            raise StorageError(f"local put {address}: {e}") from e
        try:
            with os.fdopen(fd, "wb") as f:
                md5 = _copy_hashing(chunks, f)
            st = os.stat(tmp)
            _cache_etag(tmp, md5, st)
            os.replace(tmp, path)
        except BaseException as e:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            if isinstance(e, OSError):
                raise StorageError(f"local put {address}: {e}") from e
            raise
        return ObjectStat(address=address, size=st.st_size, etag=md5, mtime=st.st_mtime)

    def get(self, address: str, byte_range: tuple[int, int] | None = None) -> bytes:
        if byte_range is not None and (byte_range[0] < 0 or byte_range[1] < byte_range[0]):
            raise ValidationError(f"invalid byte range {byte_range!r}")
        with self._open(address) as f:
            if byte_range is None:
                return f.read()
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
            if not os.path.isfile(path):
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
        if not prefix.startswith(SCHEME):
            raise ValidationError(f"not a local address: {prefix!r}")
        rel = prefix[len(SCHEME):]
        if not rel or any(p in (".", "..") for p in rel.split("/")):
            raise ValidationError(f"invalid local address: {prefix!r}")
        # walk only the deepest directory that covers the prefix
        base_rel = rel.rsplit("/", 1)[0] if "/" in rel else ""
        base = os.path.join(self.root, *[p for p in base_rel.split("/") if p])
        found: list[str] = []
        for dirpath, _dirs, files in os.walk(base):
            for name in files:
                if name.startswith(_TMP_PREFIX):
                    continue
                addr = self._address(os.path.join(dirpath, name))
                if addr.startswith(prefix):
                    found.append(addr)
        for addr in sorted(found):
            path = self._path(addr)
            try:
                st = os.stat(path)
                etag = _etag(path, st)
            except FileNotFoundError:
                continue  # deleted while listing
            yield ObjectStat(address=addr, size=st.st_size, etag=etag, mtime=st.st_mtime)

    def copy(self, src: str, dst: str) -> ObjectStat:
        self._path(dst)  # a bad destination fails before the source is opened
        with self._open(src) as f:
            return self.put(dst, iter(lambda: f.read(1 << 20), b""))

    def _open(self, address: str) -> BinaryIO:
        try:
            return open(self._path(address), "rb")
        except _MISSING as e:
            raise ObjectNotFoundError(f"object not found: {address}") from e


def from_config(config: BlockstoreConfig) -> LocalBlockStore:
    """Build a local store from a ``blockstore`` section of type ``local``."""
    return LocalBlockStore((config.local or LocalConfig()).path)


def _copy_hashing(chunks: Iterable[bytes], out: BinaryIO) -> str:
    md5 = hashlib.md5()
    for chunk in chunks:
        out.write(chunk)
        md5.update(chunk)
    return md5.hexdigest()


def _cache_etag(path: str, etag: str, st: os.stat_result) -> None:
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
