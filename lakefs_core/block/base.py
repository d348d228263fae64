"""The blockstore interface: one object store, addressed by full URIs.

An address is ``<scheme>://<bucket-or-name>/<key>``: ``local://name/key`` lives
under the local store's root path, ``s3://bucket/key`` in a bucket,
``https://<account>.blob.core.windows.net/<container>/<blob>`` in an Azure container. A repository's
storage namespace is such a URI; objects and ``_lakefs/`` files live below it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True, slots=True)
class ObjectStat:
    """What the store knows of one object."""

    address: str
    size: int
    etag: str
    mtime: float


class PresignMode(StrEnum):
    """What a pre-signed URL lets its holder do: the HTTP method it is signed for."""

    READ = "GET"
    WRITE = "PUT"


@dataclass(frozen=True, slots=True)
class PresignedURL:
    """A URL that reads or writes one object without credentials, until ``expiry``.

    Attributes:
        url: The signed URL (plain HTTP, no other header needed).
        expiry: When it stops working, as a Unix time in seconds.
    """

    url: str
    expiry: int


@dataclass(frozen=True, slots=True)
class PresignSupport:
    """Which pre-signed operations a store offers (lakeFS's ``StorageConfig`` flags)."""

    pre_sign_support: bool = False
    pre_sign_support_ui: bool = False
    pre_sign_multipart_upload: bool = False

    @classmethod
    def from_flags(cls, config: object, *, signer: bool = True,
                   multipart: bool = True) -> PresignSupport:
        """What a store offers from its ``disable_pre_signed*`` settings.

        Args:
            config: the store's settings (``disable_pre_signed``, ``disable_pre_signed_ui``
                and, where the store has it, ``disable_pre_signed_multipart``).
            signer: the store can sign at all (it has the credentials it needs).
            multipart: the store can pre-sign multipart uploads.
        """
        enabled = signer and not getattr(config, "disable_pre_signed", False)
        return cls(
            pre_sign_support=enabled,
            pre_sign_support_ui=enabled and not getattr(config, "disable_pre_signed_ui", True),
            pre_sign_multipart_upload=enabled and multipart and not getattr(
                config, "disable_pre_signed_multipart", False))


def stream_parts(chunks: Iterable[bytes], part_size: Callable[[int], int]
                 ) -> Iterator[tuple[bytes, bool]]:
    """Cut a stream of chunks into the parts of a multipart write: ``(part, is_last)``.

    Part ``i`` (from 0) has ``part_size(i)`` bytes, the last one what remains (at most
    its size; empty only for an empty stream). A part is cut only once the stream has
    gone past it, so ``is_last`` is known when it is yielded, and no more than one
    part and one chunk are held at a time.
    """
    buffer = bytearray()
    count = 0
    for chunk in chunks:
        buffer += chunk
        while len(buffer) > (size := part_size(count)):
            part = bytes(buffer[:size])
            del buffer[:size]
            count += 1
            yield part, False
    yield bytes(buffer), True


def join_address(namespace: str, key: str) -> str:
    """The full address of ``key`` below ``namespace``."""
    return namespace.rstrip("/") + "/" + key.lstrip("/")


def split_bucket_address(address: str, scheme: str, *,
                         key_required: bool = True) -> tuple[str, str]:
    """Split ``<scheme>://bucket/key`` into ``(bucket, key)``.

    Raises:
        ValidationError: not an address of ``scheme``, no bucket, or (if
            ``key_required``) no key.
    """
    from lakefs_core.errors import ValidationError

    prefix = f"{scheme}://"
    if not address.startswith(prefix):
        raise ValidationError(f"not a {scheme}:// address: {address!r}")
    bucket, _, key = address[len(prefix):].partition("/")
    if not bucket:
        raise ValidationError(f"{scheme} address has no bucket: {address!r}")
    if key_required and not key:
        raise ValidationError(f"{scheme} address has no key: {address!r}")
    return bucket, key


def check_byte_range(byte_range: tuple[int, int]) -> tuple[int, int]:
    """``(first, last)`` of an inclusive byte range.

    Raises:
        ValidationError: ``first < 0`` or ``last < first``.
    """
    from lakefs_core.errors import ValidationError

    first, last = byte_range
    if first < 0 or last < first:
        raise ValidationError(f"invalid byte range {byte_range!r}")
    return first, last


class BlockStore(ABC):
    """An object store. Implementations must be safe to use from many threads."""

    #: the blockstore type as lakeFS names it ("local", "s3", "azure")
    type: str
    #: the URI scheme of the addresses this store serves ("local", "s3"; "https" for
    #: Azure, whose addresses are blob URLs)
    scheme: str
    #: whether objects of this store may be imported (zero-copy) into repositories
    import_enabled: bool = True
    #: whether a listing returns a page of objects, with their sizes and etags, per
    #: request (object stores: listing N objects costs about N / 1,000 requests where
    #: stat-ing them costs N); False where listing an object costs what stat-ing it
    #: does (the local store stats each file it lists), so a listing saves nothing
    lists_by_page: bool = True

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

    def check_namespace(self, namespace: str) -> None:
        """Store-specific checks of a well-formed storage namespace (the default: none).

        Raises:
            ValidationError: the namespace cannot hold this store's objects.
        """
        return None

    def check_import_source(self, address: str) -> None:
        """Store-specific checks of an address an import reads: a source, or an object
        found under one (the default: none).

        Raises:
            ValidationError / ForbiddenError: the store does not import from there.
        """
        return None

    # --- pre-signed URLs (clients move the data themselves) ---------------------------
    def presign_support(self) -> PresignSupport:
        """What this store can pre-sign (the default: nothing)."""
        return PresignSupport()

    def presign(self, address: str, mode: PresignMode) -> PresignedURL:
        """A URL, signed with the store's own credentials, that reads (GET) or writes
        (PUT) the object at ``address``.

        Raises:
            OperationNotSupportedError: the store cannot pre-sign.
        """
        raise self._not_supported()

    def create_multipart_upload(self, address: str) -> str:
        """Start a multipart upload to ``address``; its upload id."""
        raise self._not_supported()

    def presign_upload_part(self, address: str, upload_id: str, part_number: int
                            ) -> PresignedURL:
        """A URL that uploads part ``part_number`` (1-based) of an upload with PUT."""
        raise self._not_supported()

    def upload_part_copy(self, address: str, upload_id: str, part_number: int,
                         source: str, byte_range: tuple[int, int] | None = None) -> str:
        """Copy the object at ``source`` (or bytes ``first..last`` of it, inclusive) of
        this store into part ``part_number`` of an upload; the part's ETag."""
        raise self._not_supported()

    def complete_multipart_upload(self, address: str, upload_id: str,
                                  parts: Sequence[tuple[int, str]]) -> ObjectStat:
        """Join the uploaded ``(part number, etag)`` parts into the object at ``address``.

        Raises:
            ValidationError: the parts do not match what was uploaded.
        """
        raise self._not_supported()

    def abort_multipart_upload(self, address: str, upload_id: str) -> None:
        """Discard an unfinished multipart upload and its parts."""
        raise self._not_supported()

    def _not_supported(self) -> Exception:
        from lakefs_core.errors import OperationNotSupportedError

        return OperationNotSupportedError(f"{self.type} adapter: operation not supported")
