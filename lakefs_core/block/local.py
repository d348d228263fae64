"""Local filesystem blockstore: ``local://<name>/<key>`` lives at ``<root>/<name>/<key>``."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator

from lakefs_core.block.base import BlockStore, ObjectStat
from lakefs_core.errors import ObjectNotFoundError, ValidationError

SCHEME = "local://"


class LocalBlockStore(BlockStore):
    """Objects as files under ``root``. Writes go to a temp file and are renamed in.

    The etag is the MD5 of the content (as S3 computes it for single-part objects),
    kept in a sidecar-free way: computed on write, recomputed on stat.
    """

    type = "local"
    scheme = "local"

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
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
        os.makedirs(os.path.dirname(path), exist_ok=True)
        md5 = hashlib.md5()
        size = 0
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                chunks: Iterable[bytes] = [data] if isinstance(data, bytes | bytearray) else data
                for chunk in chunks:
                    f.write(chunk)
                    md5.update(chunk)
                    size += len(chunk)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return ObjectStat(address=address, size=size, etag=md5.hexdigest(),
                          mtime=os.path.getmtime(path))

    def get(self, address: str, byte_range: tuple[int, int] | None = None) -> bytes:
        path = self._path(address)
        try:
            with open(path, "rb") as f:
                if byte_range is None:
                    return f.read()
                first, last = byte_range
                f.seek(first)
                return f.read(max(0, last - first + 1))
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as e:
            raise ObjectNotFoundError(f"object not found: {address}") from e

    def get_stream(self, address: str, chunk_size: int = 1 << 20) -> Iterator[bytes]:
        path = self._path(address)
        try:
            f = open(path, "rb")  # noqa: SIM115 - closed by the generator
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as e:
            raise ObjectNotFoundError(f"object not found: {address}") from e

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
            md5 = hashlib.md5()
            with open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    md5.update(chunk)
        except (FileNotFoundError, NotADirectoryError) as e:
            raise ObjectNotFoundError(f"object not found: {address}") from e
        return ObjectStat(address=address, size=st.st_size, etag=md5.hexdigest(),
                          mtime=st.st_mtime)

    def exists(self, address: str) -> bool:
        return os.path.isfile(self._path(address))

    def delete(self, address: str) -> None:
        try:
            os.unlink(self._path(address))
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            pass

    def list(self, prefix: str) -> Iterator[ObjectStat]:
        if not prefix.startswith(SCHEME):
            raise ValidationError(f"not a local address: {prefix!r}")
        rel = prefix[len(SCHEME):]
        # walk the deepest existing directory that covers the prefix
        base_rel = rel.rsplit("/", 1)[0] if "/" in rel else ""
        base = os.path.join(self.root, *[p for p in base_rel.split("/") if p])
        found: list[str] = []
        for dirpath, _dirs, files in os.walk(base):
            for name in files:
                if name.startswith(".tmp-"):
                    continue
                addr = self._address(os.path.join(dirpath, name))
                if addr.startswith(prefix):
                    found.append(addr)
        for addr in sorted(found):
            path = self._path(addr)
            try:
                st = os.stat(path)
            except FileNotFoundError:
                continue
            yield ObjectStat(address=addr, size=st.st_size, etag="", mtime=st.st_mtime)

    def copy(self, src: str, dst: str) -> ObjectStat:
        src_path = self._path(src)
        if not os.path.isfile(src_path):
            raise ObjectNotFoundError(f"object not found: {src}")
        dst_path = self._path(dst)
        os.makedirs(os.path.dirname(dst_path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(dst_path), prefix=".tmp-")
        os.close(fd)
        shutil.copyfile(src_path, tmp)
        os.replace(tmp, dst_path)
        return self.stat(dst)
