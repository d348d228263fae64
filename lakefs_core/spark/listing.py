"""Listing a commit's objects from the object store: metarange, then ranges (no server).

A commit's metarange and ranges are immutable Parquet files under
``<namespace>/_lakefs/``; reading them directly gives the object list of any commit
without one request per page to the server, and the same list in every region.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from lakefs_core.block.base import BlockStore, join_address
from lakefs_core.graveler.model import AddressType, Entry
from lakefs_core.graveler.ranges import RangeManager


@dataclass(frozen=True, slots=True)
class DataFile:
    """One object of a commit, with the address to read it from."""

    path: str
    physical_address: str
    size: int
    etag: str


def physical_address(namespace: str, entry: Entry) -> str:
    """Where an entry's data is: below the namespace, or absolute (imported objects)."""
    if entry.address_type is AddressType.FULL:
        return entry.address
    return join_address(namespace, entry.address)


def _hidden(path: str, prefix: str) -> bool:
    """Spark's convention: names starting with ``_`` or ``.`` below the prefix are not data
    (``_SUCCESS``, ``.crc``, ``_metadata``)."""
    rest = path[len(prefix):]
    return any(part.startswith(("_", ".")) for part in rest.split("/") if part)


def list_commit_files(store: BlockStore, namespace: str, metarange_id: str,
                      path: str = "") -> list[DataFile]:
    """The data files of a commit under ``path``, sorted by path.

    ``path`` names a single object when one is at exactly that path; otherwise it is
    a directory (``path/`` is listed). Hidden names (``_*``, ``.*``) below the
    directory are skipped.

    Raises:
        RangeNotFoundError: the metarange or a range is missing from the store.
    """
    ranges = RangeManager(store, namespace)
    path = path.lstrip("/")
    if path and not path.endswith("/"):
        entry = ranges.get_entry(metarange_id, path)
        if entry is not None:
            return [DataFile(path, physical_address(namespace, entry), entry.size, entry.etag)]
    prefix = path if not path or path.endswith("/") else path + "/"
    return [
        DataFile(rec.path, physical_address(namespace, rec.entry), rec.entry.size,
                 rec.entry.etag)
        for rec in ranges.iterate(metarange_id, prefix=prefix)
        if rec.entry is not None and not _hidden(rec.path, prefix)
    ]


def pack_files(files: Sequence[DataFile], target_bytes: int) -> list[list[DataFile]]:
    """Groups of consecutive files of about ``target_bytes`` each (a big file alone).

    Consecutive grouping keeps the order of rows reproducible: the same commit gives
    the same partitions, in the same order, in every region.
    """
    groups: list[list[DataFile]] = []
    current: list[DataFile] = []
    size = 0
    for f in files:
        if current and size + f.size > target_bytes:
            groups.append(current)
            current, size = [], 0
        current.append(f)
        size += f.size
    if current:
        groups.append(current)
    return groups


def iter_range_ids(ranges: RangeManager, metarange_ids: Sequence[str]) -> Iterator[str]:
    """The distinct range ids of some metaranges, in first-seen order."""
    seen: set[str] = set()
    for mr_id in metarange_ids:
        for info in ranges.get_metarange(mr_id).ranges:
            if info.id not in seen:
                seen.add(info.id)
                yield info.id
