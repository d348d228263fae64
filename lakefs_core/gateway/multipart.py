"""Multipart uploads, kept entirely in the repository's storage namespace.

An upload is a small JSON record and its parts, all under
``<namespace>/_lakefs/multipart/<upload_id>/``: ``upload.json`` (target branch and
path, content type, user metadata) and ``part-<NNNNN>`` per part number. No server
process holds any of it, so the parts of one upload may be sent to any number of
processes behind a balancer. Re-sending a part number replaces the part, as in S3.

Completing an upload streams the parts, in order, into one new data object (never
holding a part whole in memory) and returns its entry for the caller to stage;
the upload's objects are then removed.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from lakefs_core.block.base import ObjectStat, join_address
from lakefs_core.catalog import Catalog
from lakefs_core.errors import ObjectNotFoundError
from lakefs_core.gateway.errors import S3Error
from lakefs_core.gateway.xml import PartInfo
from lakefs_core.graveler.model import Entry, Repository

MULTIPART_PREFIX = "_lakefs/multipart"
#: every part but the last must be at least this large (as S3 requires)
MIN_PART_SIZE = 5 << 20
MAX_PART_NUMBER = 10_000
_RECORD = "upload.json"
_PART_PREFIX = "part-"
_UPLOAD_ID = re.compile(r"^[0-9a-f]{32}\Z")
_MD5 = re.compile(r"^[0-9a-f]{32}\Z")


@dataclass(frozen=True)
class MultipartUpload:
    """An upload in progress: where the object goes and how it is described."""

    upload_id: str
    branch: str
    path: str
    content_type: str
    metadata: Mapping[str, str] = field(default_factory=dict)
    initiated: float = 0.0
    initiator: str = ""


def check_part_number(value: str | int) -> int:
    """A part number (1 to 10,000).

    Raises:
        S3Error: ``InvalidArgument`` otherwise.
    """
    try:
        number = int(value)
    except ValueError:
        number = 0
    if not 1 <= number <= MAX_PART_NUMBER:
        raise S3Error("InvalidArgument",
                      f"Part number must be an integer between 1 and {MAX_PART_NUMBER}")
    return number


class MultipartUploads:
    """Multipart upload records and parts of the repositories of one catalog."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def _address(self, repo: Repository, upload_id: str, name: str = "") -> str:
        return join_address(repo.storage_namespace, f"{MULTIPART_PREFIX}/{upload_id}/{name}")

    def _part_address(self, repo: Repository, upload_id: str, number: int) -> str:
        return self._address(repo, upload_id, f"{_PART_PREFIX}{number:05d}")

    def create(self, repo: Repository, branch: str, path: str, *, content_type: str,
               metadata: Mapping[str, str], initiator: str) -> MultipartUpload:
        """Start an upload to ``path`` on ``branch``."""
        upload = MultipartUpload(upload_id=uuid.uuid4().hex, branch=branch, path=path,
                                 content_type=content_type, metadata=dict(metadata),
                                 initiated=time.time(), initiator=initiator)
        self.catalog.store_of(repo).put(self._address(repo, upload.upload_id, _RECORD),
                                        json.dumps(asdict(upload)).encode())
        return upload

    def get(self, repo: Repository, upload_id: str, branch: str, path: str) -> MultipartUpload:
        """The upload ``upload_id``, which must target ``path`` on ``branch``.

        Raises:
            S3Error: ``NoSuchUpload``.
        """
        missing = S3Error("NoSuchUpload",
                          "The specified upload does not exist. The upload ID may be invalid, "
                          "or the upload may have been aborted or completed.", 404)
        if not _UPLOAD_ID.match(upload_id):
            raise missing
        try:
            raw = self.catalog.store_of(repo).get(self._address(repo, upload_id, _RECORD))
        except ObjectNotFoundError:
            raise missing from None
        upload = MultipartUpload(**json.loads(raw))
        if upload.branch != branch or upload.path != path:
            raise missing
        return upload

    def in_progress(self, repo: Repository) -> list[MultipartUpload]:
        """Every upload in progress in ``repo``, by key (``<branch>/<path>``), then by
        upload id."""
        store = self.catalog.store_of(repo)
        prefix = join_address(repo.storage_namespace, f"{MULTIPART_PREFIX}/")
        uploads: list[MultipartUpload] = []
        for stat in store.list(prefix):
            upload_id, _, name = stat.address[len(prefix):].partition("/")
            if name != _RECORD or not _UPLOAD_ID.match(upload_id):
                continue
            try:
                uploads.append(MultipartUpload(**json.loads(store.get(stat.address))))
            except ObjectNotFoundError:
                continue  # completed or aborted meanwhile
        return sorted(uploads, key=lambda u: (f"{u.branch}/{u.path}", u.upload_id))

    def put_part(self, repo: Repository, upload: MultipartUpload, number: int,
                 data: Iterator[bytes]) -> ObjectStat:
        """Store (or replace) part ``number`` from a stream of bytes."""
        return self.catalog.store_of(repo).put(
            self._part_address(repo, upload.upload_id, number), data)

    def list_parts(self, repo: Repository, upload: MultipartUpload) -> list[PartInfo]:
        """The uploaded parts, by part number."""
        parts: list[PartInfo] = []
        prefix = self._address(repo, upload.upload_id, _PART_PREFIX)
        for stat in self.catalog.store_of(repo).list(prefix):
            number = stat.address[len(prefix):]
            if number.isdigit():
                parts.append(PartInfo(int(number), stat.etag, stat.size, stat.mtime))
        return sorted(parts, key=lambda p: p.number)

    def complete(self, repo: Repository, upload: MultipartUpload,
                 requested: Sequence[tuple[int, str]]) -> Entry:
        """Concatenate the requested parts into one data object; return its entry.

        The entry is not staged: the caller links it to the upload's path.

        Raises:
            S3Error: ``InvalidPartOrder``, ``InvalidPart`` (missing, or its ETag is
                not the part's) or ``EntityTooSmall`` (a part but the last < 5 MiB).
        """
        numbers = [number for number, _ in requested]
        if any(b <= a for a, b in zip(numbers, numbers[1:], strict=False)):
            raise S3Error("InvalidPartOrder",
                          "The list of parts was not in ascending order. Parts must be "
                          "ordered by part number.")
        store = self.catalog.store_of(repo)
        addresses: list[str] = []
        for index, (number, etag) in enumerate(requested):
            address = self._part_address(repo, upload.upload_id, check_part_number(number))
            try:
                stat = store.stat(address)
            except ObjectNotFoundError:
                raise S3Error("InvalidPart", f"part {number} was not uploaded") from None
            # a part stored whole has its MD5 as etag; one the store itself split does not
            if _MD5.match(stat.etag) and stat.etag != etag.lower():
                raise S3Error("InvalidPart", f"part {number}: ETag {etag!r} does not match")
            if index < len(requested) - 1 and stat.size < MIN_PART_SIZE:
                raise S3Error("EntityTooSmall",
                              f"part {number} is {stat.size} bytes; every part but the last "
                              f"must be at least {MIN_PART_SIZE} bytes")
            addresses.append(address)

        def concatenated() -> Iterator[bytes]:
            for address in addresses:
                yield from store.get_stream(address)

        return self.catalog.write_data(repo, concatenated(), upload.content_type,
                                       upload.metadata)

    def remove(self, repo: Repository, upload: MultipartUpload) -> None:
        """Delete the upload's record and parts (abort, or clean-up after completion)."""
        store = self.catalog.store_of(repo)
        # the record goes first: the upload is gone even if a part delete fails
        store.delete(self._address(repo, upload.upload_id, _RECORD))
        for stat in list(store.list(self._address(repo, upload.upload_id))):
            store.delete(stat.address)
