"""The blockstore interface: one object store, addressed by full URIs.

An address is ``<scheme>://<bucket-or-name>/<key>``: ``local://name/key`` lives
under the local store's root path, ``s3://bucket/key`` in a bucket. A repository's
storage namespace is such a URI; objects and ``_lakefs/`` files live below it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ObjectStat:
    """What the store knows of one object."""

    address: str
    size: int
    etag: str
    mtime: float


def join_address(namespace: str, key: str) -> str:
    """The full address of ``key`` below ``namespace``."""
    return namespace.rstrip("/") + "/" + key.lstrip("/")


class BlockStore(ABC):
    """An object store. Implementations must be safe to use from many threads."""

    #: the blockstore type as lakeFS names it ("local", "s3")
    type: str
    #: the URI scheme of the addresses this store serves ("local", "s3")
    scheme: str
    #: whether objects of this store may be imported (zero-copy) into repositories
    import_enabled: bool = True

    @abstractmethod
    def put(self, address: str, data: bytes | Iterable[bytes]) -> ObjectStat:
        """Write an object (whole, atomically: readers never see a partial object).

        An iterable of chunks is streamed: the store never holds the whole object
        in memory.
        """

    @abstractmethod
    def get(self, address: str, byte_range: tuple[int, int] | None = None) -> bytes:
        """Read an object, or the inclusive byte range ``(first, last)`` of it.

        A range reaching past the end is cut at the end; one starting at or past the
        end reads ``b""`` (callers that must answer 416 compare with :meth:`stat`).

        Raises:
            ObjectNotFoundError: nothing at ``address``.
            ValidationError: a malformed address or range (``first < 0``,
                ``last < first``).
        """

    @abstractmethod
    def get_stream(self, address: str, chunk_size: int = 1 << 20) -> Iterator[bytes]:
        """Read an object in chunks (for large objects)."""

    @abstractmethod
    def stat(self, address: str) -> ObjectStat:
        """Size, etag and mtime of an object. Raises ObjectNotFoundError."""

    def exists(self, address: str) -> bool:
        """Whether an object is at ``address``."""
        from lakefs_core.errors import ObjectNotFoundError

        try:
            self.stat(address)
        except ObjectNotFoundError:
            return False
        return True

    @abstractmethod
    def delete(self, address: str) -> None:
        """Delete an object; deleting a missing object is not an error."""

    @abstractmethod
    def list(self, prefix: str) -> Iterator[ObjectStat]:
        """Every object whose address starts with ``prefix``, in address order."""

    @abstractmethod
    def copy(self, src: str, dst: str) -> ObjectStat:
        """Copy an object within this store."""

    def close(self) -> None:
        """Release connections and other resources (the default holds none)."""
        return None
