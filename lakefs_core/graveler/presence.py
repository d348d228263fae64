"""Proving that a commit is fully present in a storage namespace (a mirror's, say).

For a new source head the validator checks, in the destination namespace:
1. the commit's metarange file (and that it hashes to its id),
2. every range the metarange lists that the *base* does not (and its hash), where
   the base is a commit already proven fully present, e.g. the mirror branch's
   current head,
3. every object referenced by an entry of such a range that differs from the base,
   with the right size (and etag when both are MD5s of the content: see
   :func:`etags_comparable`).

By induction, base present + every difference present => the new commit is present.
Work therefore grows with the change, not with the repository. Each new range is
read once, and compared in the same pass with the base ranges that cover its keys,
each read once, so requests are at most ``changes + 2 x new ranges + 2`` (the two
metaranges; a deleted boundary key can make one new range cover two base ranges,
but a deletion needs no object request). Proven files, objects and fully present
ranges are cached: a range id, once present, is present for good (files are
immutable).

Objects are proven one of two ways, with the same proof (present, same size, same
etag when comparable):

- *stat*: one request per object;
- *listing*: the namespace is listed, one request per page of :data:`LIST_PAGE` keys,
  and each listed key is compared with the entry that names it.

A range is *dense* when more of its entries changed than the listing pages its
entries account for (one in :data:`LIST_PAGE`): a change spread thinner is cheaper
to stat wherever the rest of the commit stands. The
changed entries of dense ranges whose objects are under the namespace (relative
addresses) are proven by listing when there are enough of them to pay for the
listing (about one request per :data:`LIST_PAGE` objects the commit references),
the others (sparse ranges, imported objects with full addresses elsewhere) by stat.
The namespace is listed in shards (one per next character after the prefix the
addresses share), at once up to the validator's ``concurrency``, and a shard whose
listing grows past what stat would have cost stops and stats its rest. A first
validation of a large repository thus costs about one request per thousand objects.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeVar

from cachetools import LRUCache

from lakefs_core.block.base import BlockStore, ObjectStat, join_address
from lakefs_core.errors import ObjectNotFoundError, RangeNotFoundError, StorageError
from lakefs_core.graveler.encoding import EMPTY_METARANGE_ID, metarange_id, range_id
from lakefs_core.graveler.model import AddressType, Entry, EntryRecord, RangeInfo
from lakefs_core.graveler.rangefile import decode_metarange, decode_range
from lakefs_core.graveler.ranges import RangeManager

_T = TypeVar("_T")

#: keys one listing request returns (a ListObjectsV2 page)
LIST_PAGE = 1000
#: store requests one validation makes at once, unless told otherwise
DEFAULT_CONCURRENCY = 16


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
        """Counts one request per page of :data:`LIST_PAGE` keys (the first at once)."""
        self._count()
        return self._pages(self.inner.list(prefix))

    def _pages(self, items: Iterator[ObjectStat]) -> Iterator[ObjectStat]:
        for i, item in enumerate(items):
            if i and not i % LIST_PAGE:
                self._count()
            yield item

    def copy(self, src: str, dst: str) -> ObjectStat:
        self._count()
        return self.inner.copy(src, dst)


class _BoundedSet:
    """A thread-safe set that forgets its least recently added members past ``limit``."""

    def __init__(self, limit: int) -> None:
        self._items: LRUCache[str, bool] = LRUCache(maxsize=limit)
        self._lock = threading.Lock()

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items

    def add(self, key: str) -> None:
        with self._lock:
            self._items[key] = True

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


def etags_comparable(a: str, b: str) -> bool:
    """Whether any two copies of the same bytes carrying these etags have equal ones.

    Only a plain MD5 of the content (what S3 gives a single-request write, and what
    local, Azure and Cloud Storage objects written here report) depends on the bytes
    alone. An S3 multipart etag (``<md5 of the parts' md5s>-<parts>``) depends on the
    part sizes, a Cloud Storage composite one (``<crc32c>-<components>``) on the
    components, Azure's own ETag (a blob written without an MD5) on nothing but the
    write: a correct copy written another way (by the builtin copier, or in a store of
    another kind) has another etag, so these prove nothing against it.
    """
    return _is_md5(a) and _is_md5(b)


def _is_md5(etag: str) -> bool:
    return len(etag) == 32 and all(c in "0123456789abcdef" for c in etag.lower())


def _same_write_etags(a: str, b: str) -> bool:
    """Like with like: multipart with multipart (an imported object's own etag, which
    S3 replication keeps), plain with plain."""
    return bool(a) and bool(b) and (("-" in a) == ("-" in b))


def _path(record: EntryRecord) -> str:
    return record.path


class _ForwardLookup:
    """Entries of a proven metarange, looked up by non-decreasing path.

    Each range is read at most once per lookup object (the one under the cursor is
    kept), so comparing a run of new ranges against the base costs one read per
    base range that covers their keys.
    """

    def __init__(self, ranges: RangeManager, infos: Sequence[RangeInfo]) -> None:
        self._manager = ranges
        self._infos = infos
        self._max_keys = [r.max_key for r in infos]
        self._index = -1
        #: the id of the range read last (or being read)
        self.loading = ""
        self._records: Sequence[EntryRecord] = ()
        self._pos = 0

    def get(self, path: str) -> Entry | None:
        """The entry at ``path`` (not before any path asked before), or None.

        Raises:
            RangeNotFoundError: the range that would hold ``path`` (``loading``) is
                missing.
            StorageError: that range cannot be read.
        """
        i = bisect.bisect_left(self._max_keys, path, lo=max(self._index, 0))
        if i == len(self._infos) or self._infos[i].min_key > path:
            return None
        if i != self._index:
            self.loading = self._infos[i].id
            self._records = self._manager.read_range(self.loading)
            self._index, self._pos = i, 0
        records = self._records
        pos = bisect.bisect_left(records, path, lo=self._pos, key=_path)
        self._pos = pos
        if pos < len(records) and records[pos].path == path:
            return records[pos].entry
        return None


class _Prefetch:
    """Listings of the namespace, shard by shard, started while a first validation is
    still reading its ranges (the addresses of the first ones tell the shards)."""

    def __init__(self, store: BlockStore, pool: ThreadPoolExecutor, shards: Sequence[str],
                 limit: int) -> None:
        self.width = len(shards[0])  # every shard is the shared prefix + one character
        self._futures = {p: pool.submit(self._list, store, p, limit) for p in shards}

    @staticmethod
    def _list(store: BlockStore, prefix: str, limit: int) -> dict[str, ObjectStat] | None:
        """The shard's objects; None when it holds more than ``limit`` (given up)."""
        out: dict[str, ObjectStat] = {}
        for n, obj in enumerate(store.list(prefix)):
            if n >= limit:
                return None
            out[obj.address] = obj
        return out

    def lookup(self, address: str) -> tuple[bool, ObjectStat | None]:
        """(whether a finished listing covers ``address``, what it listed there)."""
        future = self._futures.get(address[:self.width])
        listing = None if future is None else future.result()
        if listing is None:
            return False, None
        return True, listing.get(address)

    def cancel(self) -> None:
        for future in self._futures.values():
            future.cancel()


class CommitValidator:
    """Validates commits of one mirror against its destination namespace.

    Args:
        store: the destination blockstore (wrap it in :class:`CountingStore` to count).
        namespace: the mirror repository's storage namespace in the destination.
        cache_limit: most ids and addresses remembered per cache.
        concurrency: object requests (stats, listings) made at once.
    """

    def __init__(self, store: BlockStore, namespace: str, *, cache_limit: int = 1_000_000,
                 concurrency: int = DEFAULT_CONCURRENCY) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.store = store
        self.namespace = namespace
        self.concurrency = concurrency
        self.ranges = RangeManager(store, namespace)
        #: range and metarange files read and found to hash to their ids
        self._proven_files = _BoundedSet(cache_limit)
        #: object addresses found with the right size and etag
        self._proven_objects = _BoundedSet(cache_limit)
        #: ranges (and metaranges) whose every object is present too
        self._complete = _BoundedSet(cache_limit)

    def object_address(self, entry: Entry) -> str:
        """Where the destination must hold the object of ``entry``."""
        if entry.address_type is AddressType.FULL:
            return entry.address
        return join_address(self.namespace, entry.address)

    def forget_proven(self) -> None:
        """Forget every file, object and range proven so far.

        For when every commit validated has been promoted: the next validations start
        from those commits (their base), so they would not look at what was proven
        for them again (they read the base's few changed ranges afresh). Nothing here
        is needed for correctness; this bounds the memory of a long-running validator
        by what its pending commits need.
        """
        for cache in (self._proven_files, self._proven_objects, self._complete):
            cache.clear()
        self.ranges.forget_cached()

    @property
    def proven_count(self) -> int:
        """Files, objects and ranges remembered as proven (all three caches)."""
        return len(self._proven_files) + len(self._proven_objects) + len(self._complete)

    def is_proven(self, file_id: str) -> bool:
        """Whether a range or metarange file was found present and intact."""
        return file_id == EMPTY_METARANGE_ID or file_id in self._proven_files

    # ------------------------------------------------------------------ files
    def _read_verified(self, file_id: str, decode: Callable[[bytes], Sequence[_T]],
                       digest: Callable[[Sequence[_T]], str]) -> tuple[Sequence[_T] | None, str]:
        """Read a range or metarange file and check its hash: (content, "") or (None, why).

        Reads go to the store, not through the range manager's cache, so a file
        that was corrupt when first read is read afresh next time.
        """
        try:
            data = self.store.get(self.ranges.range_address(file_id))
        except ObjectNotFoundError:
            return None, "missing"
        try:
            content = decode(data)
        except StorageError as e:
            return None, f"unreadable: {e}"
        if digest(content) != file_id:
            return None, "content does not match its id"
        self._proven_files.add(file_id)
        return content, ""

    def _metarange(self, mr_id: str, result: ValidationResult, *, base: bool = False
                   ) -> Sequence[RangeInfo] | None:
        if mr_id == EMPTY_METARANGE_ID:
            return ()
        content: Sequence[RangeInfo] | None = None
        if mr_id in self._proven_files:
            try:
                content = self.ranges.get_metarange(mr_id).ranges
            except (RangeNotFoundError, StorageError):
                pass  # proven once, gone now: read afresh below and report it
        reason = ""
        if content is None:
            content, reason = self._read_verified(mr_id, decode_metarange, metarange_id)
        if content is not None:
            return content
        if base:
            # the base was proven before; it can only be missing if it was deleted
            reason = "base metarange " + ("disappeared" if reason == "missing" else reason)
        result.missing.append(MissingItem(MissingKind.METARANGE, mr_id,
                                          self.ranges.range_address(mr_id), None, reason))
        return None

    def _range(self, info: RangeInfo, result: ValidationResult) -> Sequence[EntryRecord] | None:
        if info.id in self._proven_files:
            try:
                return self.ranges.read_range(info.id)
            except (RangeNotFoundError, StorageError):
                pass  # proven once, gone now: read afresh below and report it
        result.ranges_checked += 1
        content, reason = self._read_verified(info.id, decode_range, range_id)
        if content is None:
            result.missing.append(MissingItem(MissingKind.RANGE, info.id,
                                              self.ranges.range_address(info.id), None,
                                              reason))
        return content

    # -------------------------------------------------------------- validation
    def validate(self, target_mr: str, base_mr: str | None) -> ValidationResult:
        """Check that the metarange ``target_mr`` and everything it needs are present.

        Missing ranges do not stop the check: the objects of the ranges that are
        present are checked too, so one round reports (and a copier can fetch)
        as much as is known.

        Args:
            target_mr: the metarange of the commit to promote.
            base_mr: the metarange of a commit already proven fully present (None or
                the empty metarange for a first, full validation).
        """
        result = ValidationResult(target_mr)
        if target_mr in self._complete:
            return result
        targets = self._metarange(target_mr, result)
        if targets is None:
            return result
        bases = self._metarange(base_mr or EMPTY_METARANGE_ID, result, base=True)
        if bases is None:
            return result
        known = {r.id for r in bases}
        base_entries = _ForwardLookup(self.ranges, bases)
        referenced = sum(r.count for r in targets)
        #: per new range read: its id, entry count and changed (path, entry) pairs
        batches: list[tuple[str, int, list[tuple[str, Entry]]]] = []
        #: a first validation lists the namespace while it reads the ranges
        sample: list[str] | None = [] if not bases else None
        prefetch: _Prefetch | None = None
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            for info in targets:
                if info.id in known or info.id in self._complete:
                    continue
                records = self._range(info, result)
                if records is None:
                    continue
                changed: list[tuple[str, Entry]] = []
                for record in records:
                    entry = record.entry
                    if entry is None:
                        continue
                    try:
                        if base_entries.get(record.path) == entry:
                            continue  # present with the base
                    except (RangeNotFoundError, StorageError):
                        gone = base_entries.loading
                        result.missing.append(MissingItem(
                            MissingKind.RANGE, gone, self.ranges.range_address(gone), None,
                            "base range disappeared"))
                        return result
                    changed.append((record.path, entry))
                batches.append((info.id, len(records), changed))
                if sample is not None:
                    sample += (self.object_address(e) for _, e in changed)
                    prefetch = self._prefetch(sample, referenced, pool)
                    if prefetch is not None:
                        sample = None
            try:
                found = self.check_objects([(n, c) for _, n, c in batches],
                                           referenced=referenced, prefetch=prefetch,
                                           pool=pool)
            finally:
                if prefetch is not None:
                    prefetch.cancel()
        for (rid, _, changed), missing in zip(batches, found, strict=True):
            result.objects_checked += len(changed)
            result.missing.extend(missing)
            if not missing:
                self._complete.add(rid)
        if not result.missing:
            self._complete.add(target_mr)
        return result

    def _prefetch(self, sample: list[str], referenced: int, pool: ThreadPoolExecutor
                  ) -> _Prefetch | None:
        """Start listing the namespace once ``sample`` (addresses of the first ranges
        of a first validation) shows its shards, if listing beats stats."""
        prefix = self.namespace.rstrip("/") + "/"
        under = [a for a in sample if a.startswith(prefix)]
        if len(under) < min(256, max(2, referenced // 2)):
            return None  # too few yet to tell the shards
        common = os.path.commonprefix([min(under), max(under)])
        common = common[:common.rfind("/") + 1]  # the directory they share
        if len(common) < len(prefix):
            return None
        shards = sorted({a[:len(common) + 1] for a in under if len(a) > len(common)})
        if not shards or len(shards) + referenced // LIST_PAGE >= referenced:
            return None
        # a shard holding far more than its share of the commit is given up
        limit = 2 * referenced // len(shards) + LIST_PAGE
        return _Prefetch(self.store, pool, shards, limit)

    # ----------------------------------------------------------------- objects
    def check_objects(self, batches: Sequence[tuple[int, Sequence[tuple[str, Entry]]]], *,
                      referenced: int, prefetch: _Prefetch | None = None,
                      pool: ThreadPoolExecutor | None = None) -> list[list[MissingItem]]:
        """Prove objects present, by listing or by stat; what is missing, per batch.

        Args:
            batches: per range, its entry count and the (path, entry) pairs to prove.
            referenced: about how many objects the namespace holds (the entries of the
                commit, say): what a listing of it costs, in keys.
            prefetch: listings already under way; the objects they cover are judged
                by them.
            pool: the threads to use (default: a pool of ``concurrency`` threads).

        Returns:
            per batch, its missing objects in the batch's order.
        """
        found: list[list[MissingItem | None]] = [[None] * len(c) for _, c in batches]
        prefix = self.namespace.rstrip("/") + "/"
        #: address -> (batch, index) of the entries to prove by listing
        listed: dict[str, list[tuple[int, int]]] = {}
        stats: list[tuple[int, int]] = []
        for b, (count, changed) in enumerate(batches):
            dense = len(changed) * LIST_PAGE >= count
            for i, (_, entry) in enumerate(changed):
                address = self.object_address(entry)
                if address in self._proven_objects:
                    continue
                if prefetch is not None:
                    covered, listed_stat = prefetch.lookup(address)
                    if covered:
                        path = changed[i][0]
                        found[b][i] = (
                            MissingItem(MissingKind.OBJECT, path, address, entry)
                            if listed_stat is None else self._compare(path, entry, listed_stat))
                        continue
                if dense and address.startswith(prefix):
                    listed.setdefault(address, []).append((b, i))
                else:
                    stats.append((b, i))
        shards = self._shards(listed)
        # a listing costs a request per shard and per page of what the namespace holds
        if len(shards) + referenced // LIST_PAGE >= len(listed):
            shards = []
            stats.extend(where for places in listed.values() for where in places)
            listed = {}

        def stat(where: tuple[int, int]) -> None:
            b, i = where
            path, entry = batches[b][1][i]
            found[b][i] = self.check_object(path, entry)

        def list_shard(shard: tuple[str, list[str]]) -> list[tuple[int, int]]:
            """Prove a shard's addresses by listing; the places still to stat."""
            shard_prefix, addresses = shard
            wanted = set(addresses)
            budget = LIST_PAGE * (len(wanted) + 1)  # past it, stats are cheaper
            for n, obj in enumerate(self.store.list(shard_prefix)):
                if obj.address in wanted:
                    wanted.discard(obj.address)
                    for b, i in listed[obj.address]:
                        path, entry = batches[b][1][i]
                        found[b][i] = self._compare(path, entry, obj)
                    if not wanted:
                        break
                elif n >= budget:
                    return [w for a in wanted for w in listed[a]]
            for address in wanted:
                for b, i in listed[address]:
                    path, entry = batches[b][1][i]
                    found[b][i] = MissingItem(MissingKind.OBJECT, path, address, entry)
            return []

        if stats or shards:
            with contextlib.ExitStack() as stack:
                if pool is None:
                    pool = stack.enter_context(ThreadPoolExecutor(self.concurrency))
                rest = [w for more in pool.map(list_shard, shards) for w in more]
                for _ in pool.map(stat, stats + rest):
                    pass
        return [[m for m in batch if m is not None] for batch in found]

    def _shards(self, addresses: Iterable[str]) -> list[tuple[str, list[str]]]:
        """Listing prefixes covering ``addresses``: the prefix they share plus one more
        character each, so shards can be listed at once."""
        ordered = sorted(addresses)
        if not ordered:
            return []
        common = os.path.commonprefix([ordered[0], ordered[-1]])
        shards: dict[str, list[str]] = {}
        for address in ordered:
            shards.setdefault(address[:len(common) + 1], []).append(address)
        return list(shards.items())

    def check_object(self, path: str, entry: Entry) -> MissingItem | None:
        """None when the object is present with the right size (and etag)."""
        address = self.object_address(entry)
        if address in self._proven_objects:
            return None
        try:
            stat = self.store.stat(address)
        except ObjectNotFoundError:
            return MissingItem(MissingKind.OBJECT, path, address, entry)
        return self._compare(path, entry, stat)

    def _compare(self, path: str, entry: Entry, stat: ObjectStat) -> MissingItem | None:
        """None when ``stat`` (from a stat or a listing) proves the entry's object."""
        address = stat.address
        if stat.size != entry.size:
            return MissingItem(MissingKind.OBJECT, path, address, entry,
                               f"size {stat.size} != {entry.size}")
        # an imported object keeps its address, where the destination may hold its own
        # data: there the etag the source saw must be the very one; under the mirror's
        # namespace any writer's copy will do, as long as its content digest agrees
        comparable = (_same_write_etags if entry.address_type is AddressType.FULL
                      else etags_comparable)
        if comparable(stat.etag, entry.etag) and stat.etag != entry.etag:
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
        if item.kind is MissingKind.METARANGE:
            return self._read_verified(item.key, decode_metarange, metarange_id)[0] is not None
        return self._read_verified(item.key, decode_range, range_id)[0] is not None
