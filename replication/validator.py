"""Proving that a commit is fully present in the destination storage namespace.

For a new source head the validator checks, in the destination namespace:
1. the commit's metarange file (and that it hashes to its id),
2. every range the metarange lists that is not already proven (and its hash),
3. every object referenced by an entry that differs from the *base* commit (a
   commit already proven present, e.g. the mirror branch's current head), with the
   right size (and etag when both etags are comparable).

By induction, base present + every difference present => the new commit is present.
Work therefore grows with the change, not with the repository: requests are at most
``objects changed + ranges new + 2``. Proven range ids and object addresses are
cached (a range id, once present, is present for good: files are immutable).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum

from lakefs_core.block.base import BlockStore, ObjectStat, join_address
from lakefs_core.errors import ObjectNotFoundError, RangeNotFoundError
from lakefs_core.graveler.encoding import EMPTY_METARANGE_ID, metarange_id, range_id
from lakefs_core.graveler.model import AddressType, DiffType, Entry
from lakefs_core.graveler.ranges import RangeManager


class MissingKind(StrEnum):
    METARANGE = "metarange"
    RANGE = "range"
    OBJECT = "object"


@dataclass(frozen=True, slots=True)
class MissingItem:
    """Something a commit needs that is not (correctly) in the destination yet."""

    kind: MissingKind
    #: range/metarange id, or the object's path in the repository
    key: str
    #: the destination address that must hold it
    address: str
    #: for objects: the entry the source commit has
    entry: Entry | None = None
    reason: str = "missing"


@dataclass
class ValidationResult:
    metarange_id: str
    missing: list[MissingItem] = field(default_factory=list)
    ranges_checked: int = 0
    objects_checked: int = 0

    @property
    def complete(self) -> bool:
        return not self.missing


class CountingStore(BlockStore):
    """A blockstore wrapper that counts requests (for status, metrics and benchmarks)."""

    def __init__(self, inner: BlockStore) -> None:
        self.inner = inner
        self.type = inner.type
        self.scheme = inner.scheme
        self.requests = 0
        self._lock = threading.Lock()

    def _count(self) -> None:
        with self._lock:
            self.requests += 1

    def put(self, address: str, data: bytes | Iterable[bytes]) -> ObjectStat:
        self._count()
        return self.inner.put(address, data)

    def get(self, address: str, byte_range: tuple[int, int] | None = None) -> bytes:
        self._count()
        return self.inner.get(address, byte_range)

    def get_stream(self, address: str, chunk_size: int = 1 << 20) -> Iterator[bytes]:
        self._count()
        return self.inner.get_stream(address, chunk_size)

    def stat(self, address: str) -> ObjectStat:
        self._count()
        return self.inner.stat(address)

    def exists(self, address: str) -> bool:
        self._count()
        return self.inner.exists(address)

    def delete(self, address: str) -> None:
        self._count()
        self.inner.delete(address)

    def list(self, prefix: str) -> Iterator[ObjectStat]:
        self._count()
        return self.inner.list(prefix)

    def copy(self, src: str, dst: str) -> ObjectStat:
        self._count()
        return self.inner.copy(src, dst)


class _BoundedSet:
    """A thread-safe set that forgets its oldest members past ``limit``."""

    def __init__(self, limit: int) -> None:
        self._items: OrderedDict[str, None] = OrderedDict()
        self._limit = limit
        self._lock = threading.Lock()

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items

    def add(self, key: str) -> None:
        with self._lock:
            self._items[key] = None
            self._items.move_to_end(key)
            while len(self._items) > self._limit:
                self._items.popitem(last=False)


def etags_comparable(a: str, b: str) -> bool:
    """Multipart etags (``<md5>-<parts>``) depend on part sizes; compare like with like."""
    return bool(a) and bool(b) and (("-" in a) == ("-" in b))


class CommitValidator:
    """Validates commits of one mirror against its destination namespace.

    Args:
        store: the destination blockstore (wrap it in :class:`CountingStore` to count).
        namespace: the mirror repository's storage namespace in the destination.
    """

    def __init__(self, store: BlockStore, namespace: str, *, cache_limit: int = 1_000_000
                 ) -> None:
        self.store = store
        self.namespace = namespace
        self.ranges = RangeManager(store, namespace)
        self._proven_files = _BoundedSet(cache_limit)
        self._proven_objects = _BoundedSet(cache_limit)

    def object_address(self, entry: Entry) -> str:
        if entry.address_type is AddressType.FULL:
            return entry.address
        return join_address(self.namespace, entry.address)

    def is_proven(self, file_id: str) -> bool:
        return file_id == EMPTY_METARANGE_ID or file_id in self._proven_files

    def _load_metarange(self, mr_id: str, result: ValidationResult) -> bool:
        if mr_id == EMPTY_METARANGE_ID:
            return True
        try:
            mr = self.ranges.get_metarange(mr_id)
        except RangeNotFoundError:
            result.missing.append(MissingItem(MissingKind.METARANGE, mr_id,
                                              self.ranges.range_address(mr_id)))
            return False
        if mr_id not in self._proven_files:
            if metarange_id(mr.ranges) != mr_id:
                result.missing.append(MissingItem(MissingKind.METARANGE, mr_id,
                                                  self.ranges.range_address(mr_id), None,
                                                  "content does not match its id"))
                return False
            self._proven_files.add(mr_id)
        return True

    def validate(self, target_mr: str, base_mr: str | None) -> ValidationResult:
        """Check that the metarange ``target_mr`` and everything it needs are present.

        Args:
            target_mr: the metarange of the commit to promote.
            base_mr: the metarange of a commit already proven fully present (None or
                the empty metarange for a first, full validation).
        """
        result = ValidationResult(target_mr)
        base = base_mr or EMPTY_METARANGE_ID
        if not self._load_metarange(target_mr, result):
            return result
        if not self._load_metarange(base, result):
            # the base was proven before; it can only be missing if it was deleted
            result.missing[-1] = MissingItem(MissingKind.METARANGE, base,
                                             self.ranges.range_address(base), None,
                                             "base metarange disappeared")
            return result
        base_ids = {r.id for r in self.ranges.get_metarange(base).ranges}
        for info in self.ranges.get_metarange(target_mr).ranges:
            if info.id in base_ids or info.id in self._proven_files:
                continue
            result.ranges_checked += 1
            try:
                records = self.ranges.read_range(info.id)
            except RangeNotFoundError:
                result.missing.append(MissingItem(MissingKind.RANGE, info.id,
                                                  self.ranges.range_address(info.id)))
                continue
            if range_id(records) != info.id:
                result.missing.append(MissingItem(MissingKind.RANGE, info.id,
                                                  self.ranges.range_address(info.id), None,
                                                  "content does not match its id"))
                continue
            self._proven_files.add(info.id)
        if result.missing:
            return result  # the entries cannot be listed until the ranges are here
        for diff in self.ranges.diff(base, target_mr):
            if diff.type is DiffType.REMOVED or diff.right is None:
                continue
            missing = self.check_object(diff.path, diff.right)
            result.objects_checked += 1
            if missing is not None:
                result.missing.append(missing)
        return result

    def check_object(self, path: str, entry: Entry) -> MissingItem | None:
        """None when the object is present with the right size (and etag)."""
        address = self.object_address(entry)
        if address in self._proven_objects:
            return None
        try:
            stat = self.store.stat(address)
        except ObjectNotFoundError:
            return MissingItem(MissingKind.OBJECT, path, address, entry)
        if stat.size != entry.size:
            return MissingItem(MissingKind.OBJECT, path, address, entry,
                               f"size {stat.size} != {entry.size}")
        if etags_comparable(stat.etag, entry.etag) and stat.etag != entry.etag:
            return MissingItem(MissingKind.OBJECT, path, address, entry,
                               f"etag {stat.etag} != {entry.etag}")
        self._proven_objects.add(address)
        return None

    def recheck(self, missing: list[MissingItem]) -> list[MissingItem]:
        """Re-check missing items in order, stopping at the first still missing.

        Arrival order is not assumed: an item found present is dropped wherever it is
        in the list; the stop only bounds the requests per round while replication
        is behind (about one request per round when nothing arrived).
        """
        still: list[MissingItem] = []
        for i, item in enumerate(missing):
            if item.kind is MissingKind.OBJECT:
                assert item.entry is not None
                again = self.check_object(item.key, item.entry)
            else:
                again = item if not self._file_present(item) else None
            if again is not None:
                still.append(again)
                still.extend(missing[i + 1:])
                break
        return still

    def _file_present(self, item: MissingItem) -> bool:
        try:
            if item.kind is MissingKind.METARANGE:
                mr = self.ranges.get_metarange(item.key)
                ok = metarange_id(mr.ranges) == item.key
            else:
                ok = range_id(self.ranges.read_range(item.key)) == item.key
        except RangeNotFoundError:
            return False
        return ok
