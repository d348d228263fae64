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
listing grows past what stat would have cost stops and stats its rest. Given the
store's :class:`RequestTimes` (the replication service gives them), a listing page
counts as the stats that take as long as it does on that store, in both choices. A first
validation of a large repository thus costs about one request per thousand objects.
That holds for object stores, whose listings return a page of keys with their sizes
and etags per request (``BlockStore.lists_by_page``); the local store lists by
stat-ing each file it lists, so there every object is proven by stat, which is never
dearer. A first validation starts the listing (or the stats) while it still reads
its ranges.

Ranges, the entries to prove and what the store lists are handled as Arrow columns:
a range is hashed over its record encodings made column-wise, its changes from the
base are the rows whose encodings no base range covering its keys holds, and sizes
and etags are compared as arrays. Only what is missing becomes Python objects.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeAlias, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from cachetools import LRUCache

from lakefs_core.block.base import BlockStore, ObjectStat, join_address
from lakefs_core.errors import ObjectNotFoundError, RangeNotFoundError, StorageError
from lakefs_core.graveler.encoding import (
    EMPTY_METARANGE_ID,
    metarange_id,
    payload_of,
    range_id_of_payload,
    table_record_encodings,
)
from lakefs_core.graveler.model import AddressType, Entry, RangeInfo
from lakefs_core.graveler.rangefile import decode_metarange, decode_range_table, records_of_table
from lakefs_core.graveler.ranges import RangeCache, RangeManager, TablePaths
from lakefs_core.graveler.ranges import numpy_of as _numpy

_T = TypeVar("_T")

#: keys one listing request returns (a ListObjectsV2 page)
LIST_PAGE = 1000
#: store requests one validation makes at once, unless told otherwise
DEFAULT_CONCURRENCY = 16
#: most stats one task of a validation makes in a row
STAT_RUN = 256


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


class RequestTimes:
    """How long a listing page and a stat take on one store, as the validations that use
    it measured them (moving averages). Thread-safe.

    Object stores answer a page of a listing in time that follows the page; a store
    that scans a whole bucket for each page (moto does) makes a page cost as much as
    hundreds of stats once the bucket is large. A validator given these times weighs a
    listing page as that many stats. Both kinds run at the validator's concurrency, so
    both times include the same waiting. A page time older than :attr:`STALE_AFTER` no
    longer counts, so that a store whose listings became cheap is listed again.
    """

    #: weight of the newest measurement in the averages
    ALPHA = 0.3
    #: seconds after which the page time is measured again (by listing)
    STALE_AFTER = 600.0
    #: bounds of the ratio page / stat
    RATIO_RANGE = (0.25, 10_000.0)

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._page: float | None = None
        self._page_at = 0.0
        self._stat: float | None = None

    def _average(self, old: float | None, new: float) -> float:
        return new if old is None else old + self.ALPHA * (new - old)

    def add_pages(self, seconds: float, pages: int) -> None:
        """A listing of ``pages`` pages took ``seconds``."""
        if pages > 0:
            with self._lock:
                self._page = self._average(self._page, seconds / pages)
                self._page_at = self._clock()

    def add_stats(self, seconds: float, stats: int) -> None:
        """``stats`` stats one after the other took ``seconds``."""
        if stats > 0:
            with self._lock:
                self._stat = self._average(self._stat, seconds / stats)

    def page_cost(self) -> float:
        """A listing page in stats: 1 until both were measured (requests count alike)."""
        with self._lock:
            if (self._page is None or not self._stat
                    or self._clock() - self._page_at > self.STALE_AFTER):
                return 1.0
            low, high = self.RATIO_RANGE
            return min(max(self._page / self._stat, low), high)


class CountingStore(BlockStore):
    """A blockstore wrapper that counts requests (for status, metrics and benchmarks).

    Args:
        inner: the store.
        times: where validations through it record how long listing pages and stats
            take, to weigh one against the other (None: they count requests alike).
    """

    def __init__(self, inner: BlockStore, times: RequestTimes | None = None) -> None:
        self.inner = inner
        self.times = times
        self.type = inner.type
        self.scheme = inner.scheme
        self.lists_by_page = inner.lists_by_page
        self.requests = 0
        self._lock = threading.Lock()

    def _count(self, kind: str) -> None:
        """One request of ``kind`` (the method's name: ``get``, ``stat``, ``list``...)."""
        with self._lock:
            self.requests += 1

    def put(self, address: str, data: bytes | Iterable[bytes]) -> ObjectStat:
        self._count("put")
        return self.inner.put(address, data)

    def get(self, address: str, byte_range: tuple[int, int] | None = None) -> bytes:
        self._count("get")
        return self.inner.get(address, byte_range)

    def get_stream(self, address: str, chunk_size: int = 1 << 20) -> Iterator[bytes]:
        self._count("get")
        return self.inner.get_stream(address, chunk_size)

    def stat(self, address: str) -> ObjectStat:
        self._count("stat")
        return self.inner.stat(address)

    def exists(self, address: str) -> bool:
        self._count("exists")
        return self.inner.exists(address)

    def delete(self, address: str) -> None:
        self._count("delete")
        self.inner.delete(address)

    def list(self, prefix: str) -> Iterator[ObjectStat]:
        """Counts one request per page of :data:`LIST_PAGE` keys (the first at once)."""
        self._count("list")
        return self._pages(self.inner.list(prefix))

    def _pages(self, items: Iterator[ObjectStat]) -> Iterator[ObjectStat]:
        for i, item in enumerate(items):
            if i and not i % LIST_PAGE:
                self._count("list")
            yield item

    def copy(self, src: str, dst: str) -> ObjectStat:
        self._count("copy")
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

    def members(self) -> list[str]:
        with self._lock:
            return list(self._items)

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


#: a plain MD5 etag (see :func:`etags_comparable`)
_MD5_PATTERN = "^[0-9a-fA-F]{32}$"
_LARGE_STRING = pa.large_string()

#: what :meth:`CommitValidator.check_objects` proves, per batch: a range table's rows
#: (the columns of a range file), or (path, entry) pairs
ObjectsToCheck: TypeAlias = pa.Table | Sequence[tuple[str, Entry]]


def _strings(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A string column as one array with 64-bit offsets (any number of rows fits)."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    if not chunks:
        return pa.array([], _LARGE_STRING)
    return pa.concat_arrays([c.cast(_LARGE_STRING) for c in chunks])


def _object_addresses(address: pa.Array | pa.ChunkedArray, full: np.ndarray, namespace: str
                      ) -> pa.Array:
    """Where the destination must hold the objects of entries with these addresses
    (``full``: of type full), as :meth:`CommitValidator.object_address` tells."""
    address = _strings(address)
    relative = pc.binary_join_element_wise(  # join_address
        pa.scalar(namespace.rstrip("/") + "/", _LARGE_STRING),
        pc.utf8_ltrim(address, characters="/"), pa.scalar("", _LARGE_STRING))
    return pc.if_else(pa.array(full), address, relative)


def _table_addresses(table: pa.Table, namespace: str) -> pa.Array:
    """:func:`_object_addresses` of a range table's rows."""
    full = _numpy(pc.equal(table.column("address_type"), "full")).astype(bool)
    return _object_addresses(table.column("address"), full, namespace)


def _stat_run(store: BlockStore, addresses: Sequence[str],
              times: RequestTimes | None = None) -> _Listed:
    """Stat objects one after the other: those present (their time goes to ``times``)."""
    found: list[ObjectStat] = []
    started = time.monotonic()
    for address in addresses:
        with contextlib.suppress(ObjectNotFoundError):
            found.append(store.stat(address))
    if times is not None:
        times.add_stats(time.monotonic() - started, len(addresses))
    return _Listed.of(found)


class _Rows:
    """The entries of several batches as columns, in batch order: what to prove."""

    def __init__(self, batches: Sequence[tuple[int, ObjectsToCheck]], namespace: str) -> None:
        self.tables: list[pa.Table] = []
        self.pairs: list[Sequence[tuple[str, Entry]] | None] = []
        counts: list[int] = []
        for count, objects in batches:
            counts.append(count)
            if isinstance(objects, pa.Table):
                self.tables.append(objects)
                self.pairs.append(None)
            else:
                self.tables.append(pa.table({
                    "path": pa.array([p for p, _ in objects], pa.string()),
                    "address": pa.array([e.address for _, e in objects], pa.string()),
                    "address_type": pa.array([str(e.address_type) for _, e in objects],
                                             pa.string()),
                    "size": pa.array([e.size for _, e in objects], pa.int64()),
                    "etag": pa.array([e.etag for _, e in objects], pa.string())}))
                self.pairs.append(objects)
        lengths = np.array([t.num_rows for t in self.tables], dtype=np.int64)
        #: where each batch's rows start
        self.starts = np.concatenate(([0], np.cumsum(lengths)))
        #: per batch: whether it is dense (more changed entries than listing pages)
        self.dense = lengths * LIST_PAGE >= np.array(counts, dtype=np.int64)
        self.batch = np.repeat(np.arange(len(self.tables)), lengths)

        def chunks(name: str, type: pa.DataType) -> pa.ChunkedArray:
            return pa.chunked_array(
                [c for t in self.tables for c in t.column(name).chunks], type)

        def column(name: str) -> pa.Array:
            return _strings(chunks(name, pa.string()))

        self.full = _numpy(pc.equal(column("address_type"), "full")).astype(bool)
        self.addresses = _object_addresses(column("address"), self.full, namespace)
        self.sizes = _numpy(chunks("size", pa.int64())).astype(np.int64)
        self.etags = column("etag")

    def __len__(self) -> int:
        return len(self.batch)

    def where(self, row: int) -> tuple[int, int]:
        """(batch, index in the batch) of a row."""
        b = int(self.batch[row])
        return b, row - int(self.starts[b])

    def entry(self, row: int) -> tuple[str, Entry]:
        """The path and entry of a row."""
        b, i = self.where(row)
        pairs = self.pairs[b]
        if pairs is not None:
            return pairs[i]
        record = records_of_table(self.tables[b].slice(i, 1))[0]
        assert record.entry is not None
        return record.path, record.entry


@dataclass
class _Listed:
    """Objects listed (or stat'ed), as columns."""

    addresses: pa.Array
    sizes: np.ndarray
    etags: pa.Array

    @classmethod
    def of(cls, objects: Iterable[ObjectStat]) -> _Listed:
        addresses: list[str] = []
        sizes: list[int] = []
        etags: list[str] = []
        for obj in objects:
            addresses.append(obj.address)
            sizes.append(obj.size)
            etags.append(obj.etag)
        return cls(pa.array(addresses, _LARGE_STRING), np.array(sizes, dtype=np.int64),
                   pa.array(etags, _LARGE_STRING))

    @classmethod
    def concat(cls, parts: Sequence[_Listed]) -> _Listed:
        if not parts:
            return cls.of(())
        return cls(pa.concat_arrays([p.addresses for p in parts]),
                   np.concatenate([p.sizes for p in parts]),
                   pa.concat_arrays([p.etags for p in parts]))

    def __len__(self) -> int:
        return len(self.addresses)

    def find(self, addresses: pa.Array) -> np.ndarray:
        """Per address, the index of the listed object there, or -1."""
        if not len(self):
            return np.full(len(addresses), -1, dtype=np.int64)
        found = pc.index_in(addresses, value_set=self.addresses)
        return _numpy(found.fill_null(-1)).astype(np.int64)


def _md5s(etags: pa.Array) -> np.ndarray:
    return _numpy(pc.match_substring_regex(etags, _MD5_PATTERN)).astype(bool)


def _multipart(etags: pa.Array) -> np.ndarray:
    return _numpy(pc.match_substring(etags, "-")).astype(bool)


def _nonempty(etags: pa.Array) -> np.ndarray:
    return _numpy(pc.greater(pc.utf8_length(etags), 0)).astype(bool)


class _BaseRanges:
    """The ranges of a proven metarange, for telling which rows of a new range it holds
    as they are.

    A base range is read only when a row of the new range falls within its keys, so
    comparing a run of new ranges against the base costs one read per base range
    that covers their keys (the range manager keeps the ones read last).
    """

    def __init__(self, manager: RangeManager, infos: Sequence[RangeInfo]) -> None:
        self._manager = manager
        self._infos = infos
        self._max_keys = [r.max_key for r in infos]
        #: the id of the range read last (or being read)
        self.loading = ""

    def unchanged(self, table: pa.Table, encodings: pa.Array) -> np.ndarray | None:
        """Per row of a new range, whether the base holds the same record; None when no
        base range holds a row of its keys.

        Equal record encodings are equal records (path and every field of the entry).

        Raises:
            RangeNotFoundError: a base range (``loading``) is missing.
            StorageError: that range cannot be read.
        """
        n = table.num_rows
        if not n or not self._infos:
            return None
        paths = TablePaths(table)
        first, last = paths[0], paths[n - 1]
        covering: list[pa.Array] = []
        for i in range(bisect.bisect_left(self._max_keys, first), len(self._infos)):
            info = self._infos[i]
            if info.min_key > last:
                break
            at = bisect.bisect_left(paths, info.min_key)
            if at == n or paths[at] > info.max_key:
                continue  # no row of the new range falls within its keys
            self.loading = info.id
            base = self._manager.read_range_table(info.id)[1]
            chunks = base.chunks if isinstance(base, pa.ChunkedArray) else [base]
            covering += (c.cast(pa.large_binary()) for c in chunks)
        if not covering:
            return None
        held = pc.is_in(encodings.cast(pa.large_binary()),
                        value_set=pa.concat_arrays(covering))
        return _numpy(held).astype(bool)


class _Prefetch:
    """Listings of the namespace, shard by shard, started while a first validation is
    still reading its ranges (the addresses of the first ones tell the shards)."""

    def __init__(self, store: BlockStore, pool: ThreadPoolExecutor, shards: Sequence[str],
                 limit: int, times: RequestTimes | None = None) -> None:
        self.width = len(shards[0])  # every shard is the shared prefix + one character
        self._futures = {p: pool.submit(self._list, store, p, limit, times) for p in shards}

    @staticmethod
    def _list(store: BlockStore, prefix: str, limit: int,
              times: RequestTimes | None) -> _Listed | None:
        """The shard's objects; None when it holds more than ``limit`` (given up)."""
        started = time.monotonic()
        listing = store.list(prefix)
        taken = _Listed.of(itertools.islice(listing, limit))
        if times is not None:
            times.add_pages(time.monotonic() - started, len(taken) // LIST_PAGE + 1)
        if len(taken) == limit and next(listing, None) is not None:
            return None
        return taken

    def covered(self, addresses: pa.Array) -> tuple[np.ndarray, _Listed]:
        """Which of ``addresses`` a finished listing covers, and what those listed."""
        done = {p: f.result() for p, f in self._futures.items()}
        done_shards = [p for p, listed in done.items() if listed is not None]
        keys = pc.utf8_slice_codeunits(addresses, 0, self.width)
        mask = _numpy(pc.is_in(keys, value_set=pa.array(done_shards, _LARGE_STRING)))
        return mask.astype(bool), _Listed.concat(
            [listed for listed in done.values() if listed is not None])

    def cancel(self) -> None:
        for future in self._futures.values():
            future.cancel()


class _StatAhead:
    """Stats of a first validation's objects, made while it still reads its ranges, on
    a store whose listing would save nothing (see ``BlockStore.lists_by_page``)."""

    def __init__(self, store: BlockStore, pool: ThreadPoolExecutor, concurrency: int) -> None:
        self._store = store
        self._pool = pool
        self._concurrency = concurrency
        self._addresses: list[pa.Array] = []
        self._futures: list[Future[_Listed]] = []

    def add(self, addresses: pa.Array) -> None:
        """Start stat-ing these objects."""
        self._addresses.append(addresses)
        self._futures += (self._pool.submit(_stat_run, self._store, run)
                          for run in _runs(addresses.to_pylist(), self._concurrency))

    def covered(self, addresses: pa.Array) -> tuple[np.ndarray, _Listed]:
        """Which of ``addresses`` were stat'ed, and those found present."""
        stated = (pa.concat_arrays(self._addresses) if self._addresses
                  else pa.array([], _LARGE_STRING))
        mask = _numpy(pc.is_in(addresses, value_set=stated)).astype(bool)
        return mask, _Listed.concat([f.result() for f in self._futures])

    def cancel(self) -> None:
        for future in self._futures:
            future.cancel()


def _runs(addresses: list[str], concurrency: int) -> list[list[str]]:
    """Addresses cut in runs for the tasks of a pool of ``concurrency`` threads: a task
    per run, not per address, since a stat of a local file costs less than the
    bookkeeping of a task."""
    step = max(1, min(STAT_RUN, len(addresses) // concurrency))
    return [addresses[i:i + step] for i in range(0, len(addresses), step)]


class CommitValidator:
    """Validates commits of one mirror against its destination namespace.

    Args:
        store: the destination blockstore (wrap it in :class:`CountingStore` to count).
        namespace: the mirror repository's storage namespace in the destination.
        cache_limit: most ids and addresses remembered per cache.
        concurrency: object requests (stats, listings) made at once.
        range_cache: parsed ranges kept in memory, shared with other validators (one
            bound for all of a process's mirrors); by default a cache of its own.
        request_times: the store's listing-page and stat times, measured and used to
            choose between listing and stat (None: the choice counts requests alike).
    """

    def __init__(self, store: BlockStore, namespace: str, *, cache_limit: int = 1_000_000,
                 concurrency: int = DEFAULT_CONCURRENCY,
                 range_cache: RangeCache | None = None,
                 request_times: RequestTimes | None = None) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.store = store
        self.namespace = namespace
        self.concurrency = concurrency
        self.ranges = RangeManager(store, namespace, cache=range_cache)
        self.request_times = request_times
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

    def _range(self, info: RangeInfo, result: ValidationResult
               ) -> tuple[pa.Table, pa.Array | pa.ChunkedArray] | None:
        """A range of the commit as columns: its table and its record encodings."""
        if info.id in self._proven_files:
            try:
                return self.ranges.read_range_table(info.id)
            except (RangeNotFoundError, StorageError):
                pass  # proven once, gone now: read afresh below and report it
        result.ranges_checked += 1
        content, reason = self._read_range(info.id)
        if content is None:
            result.missing.append(MissingItem(MissingKind.RANGE, info.id,
                                              self.ranges.range_address(info.id), None,
                                              reason))
        return content

    def _read_range(self, range_id: str) -> tuple[tuple[pa.Table, pa.Array] | None, str]:
        """Read a range file and check its hash: ((table, encodings), "") or (None, why).

        The hash is the proof that the file in the destination is the range (not a
        copy cut short, nor another file under its name). It is taken over the record
        encodings made column-wise, the bytes the range id was hashed over, and only
        once per range and process: a range found to hash to its id is remembered
        (``_proven_files``; files are immutable), and its table kept by the range
        manager, so reading it again needs no check. Reads go to the store, not
        through the range manager's cache, so a file that was corrupt when first
        read is read afresh next time.
        """
        try:
            data = self.store.get(self.ranges.range_address(range_id))
        except ObjectNotFoundError:
            return None, "missing"
        try:
            table = decode_range_table(data)
            encodings = table_record_encodings(table)
        except StorageError as e:
            return None, f"unreadable: {e}"
        if range_id_of_payload(payload_of(encodings)) != range_id:
            return None, "content does not match its id"
        self._proven_files.add(range_id)
        self.ranges.keep_range(range_id, table, encodings)
        return (table, encodings), ""

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
        base_ranges = _BaseRanges(self.ranges, bases)
        referenced = sum(r.count for r in targets)
        #: per new range read: its id, entry count and changed rows
        batches: list[tuple[str, int, pa.Table]] = []
        #: a first validation lists the namespace while it reads the ranges
        sample: list[pa.Table] | None = [] if not bases and self.store.lists_by_page else None
        prefetch: _Prefetch | _StatAhead | None = None
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            if not bases and not self.store.lists_by_page:
                prefetch = _StatAhead(self.store, pool, self.concurrency)
            try:
                for info in targets:
                    if info.id in known or info.id in self._complete:
                        continue
                    content = self._range(info, result)
                    if content is None:
                        continue
                    table, encodings = content
                    try:
                        held = base_ranges.unchanged(table, encodings)
                    except (RangeNotFoundError, StorageError):
                        gone = base_ranges.loading
                        result.missing.append(MissingItem(
                            MissingKind.RANGE, gone, self.ranges.range_address(gone), None,
                            "base range disappeared"))
                        return result
                    # rows the base holds as they are are present with it
                    changed = table if held is None else table.filter(pa.array(~held))
                    batches.append((info.id, table.num_rows, changed))
                    if isinstance(prefetch, _StatAhead):
                        prefetch.add(_table_addresses(changed, self.namespace))
                    if sample is not None:
                        sample.append(changed)
                        prefetch = self._prefetch(sample, referenced, pool)
                        if prefetch is not None:
                            sample = None
                found = self.check_objects([(n, c) for _, n, c in batches],
                                           referenced=referenced, prefetch=prefetch,
                                           pool=pool)
            finally:
                if prefetch is not None:
                    prefetch.cancel()
        for (rid, _, changed), missing in zip(batches, found, strict=True):
            result.objects_checked += changed.num_rows
            result.missing.extend(missing)
            if not missing:
                self._complete.add(rid)
        if not result.missing:
            self._complete.add(target_mr)
        return result

    def _page_cost(self) -> float:
        """How many stats one listing page weighs on this store (1 until measured)."""
        return 1.0 if self.request_times is None else self.request_times.page_cost()

    def _prefetch(self, sample: list[pa.Table], referenced: int, pool: ThreadPoolExecutor
                  ) -> _Prefetch | None:
        """Start listing the namespace once ``sample`` (the entries of the first ranges
        of a first validation) shows its shards, if listing beats stats."""
        prefix = self.namespace.rstrip("/") + "/"
        addresses = _Rows([(t.num_rows, t) for t in sample], self.namespace).addresses
        under = addresses.filter(pc.starts_with(addresses, prefix))
        if len(under) < min(256, max(2, referenced // 2)):
            return None  # too few yet to tell the shards
        bounds = pc.min_max(under)
        common = os.path.commonprefix([bounds["min"].as_py(), bounds["max"].as_py()])
        common = common[:common.rfind("/") + 1]  # the directory they share
        if len(common) < len(prefix):
            return None
        longer = under.filter(pc.greater(pc.utf8_length(under), len(common)))
        shards = sorted(pc.unique(pc.utf8_slice_codeunits(longer, 0, len(common) + 1))
                        .to_pylist())
        times = self.request_times
        page_cost = self._page_cost()
        if not shards or (len(shards) + referenced // LIST_PAGE) * page_cost >= referenced:
            return None
        # a shard holding far more than its share of the commit is given up
        limit = 2 * referenced // len(shards) + LIST_PAGE
        return _Prefetch(self.store, pool, shards, limit, times)

    # ----------------------------------------------------------------- objects
    def check_objects(self, batches: Sequence[tuple[int, ObjectsToCheck]], *,
                      referenced: int, prefetch: _Prefetch | _StatAhead | None = None,
                      pool: ThreadPoolExecutor | None = None) -> list[list[MissingItem]]:
        """Prove objects present, by listing or by stat; what is missing, per batch.

        Entries and listings are compared as columns (Arrow and numpy), so a batch of a
        range's rows is never turned into Python objects, but for what is missing.
        Objects proven by stat here are remembered one by one; those proven in bulk
        (by a listing, or by ``prefetch``) only where their batch has something
        missing (a complete range is remembered whole by :meth:`validate`, and a first
        validation proves millions).

        Args:
            batches: per range, its entry count and the entries to prove: a table of
                rows of the range (the columns of a range file) or (path, entry) pairs.
            referenced: about how many objects the namespace holds (the entries of the
                commit, say): what a listing of it costs, in keys.
            prefetch: listings (or stats) already under way; the objects they cover
                are judged by them.
            pool: the threads to use (default: a pool of ``concurrency`` threads).

        Returns:
            per batch, its missing objects in the batch's order.
        """
        rows = _Rows(batches, self.namespace)
        failures: list[tuple[int, MissingItem]] = []
        in_bulk: list[np.ndarray] = []
        by_stat: list[np.ndarray] = []
        todo = np.arange(len(rows))
        if len(rows) and len(self._proven_objects):
            todo = todo[~self._proven(rows.addresses)]
        if prefetch is not None and len(todo):
            covered, listed = prefetch.covered(rows.addresses.take(todo))
            judged = todo[covered]
            failed, proven = self._judge(rows, judged,
                                         listed.find(rows.addresses.take(judged)), listed)
            failures += failed
            in_bulk.append(proven)
            todo = todo[~covered]
        # dense batches under the namespace are listed (where a listing saves requests),
        # the rest stat'ed
        prefix = self.namespace.rstrip("/") + "/"
        under = _numpy(pc.starts_with(rows.addresses.take(todo), prefix)).astype(bool)
        listing = rows.dense[rows.batch[todo]] & under & self.store.lists_by_page
        to_list, to_stat = todo[listing], todo[~listing]
        wanted = pc.unique(rows.addresses.take(to_list)).to_pylist()
        shards = self._shards(wanted)
        # a listing costs a request per shard and per page of what the namespace holds,
        # each page weighed as the stats it takes as long as (see RequestTimes)
        times = self.request_times
        page_cost = self._page_cost()
        if (len(shards) + referenced // LIST_PAGE) * page_cost >= len(wanted):
            shards = []
            to_list, to_stat = to_list[:0], todo

        def list_shard(shard: tuple[str, list[str]]) -> _Listed | None:
            """What a shard holds of its addresses; None if its listing grew past what
            stats would cost (then they are stat'ed)."""
            shard_prefix, addresses = shard
            wanted = set(addresses)
            budget = max(1, int(LIST_PAGE * (len(wanted) + 1) / page_cost))
            found: list[ObjectStat] = []
            started = time.monotonic()
            n = 0
            try:
                for n, obj in enumerate(self.store.list(shard_prefix)):
                    if obj.address in wanted:
                        wanted.discard(obj.address)
                        found.append(obj)
                        if not wanted:
                            break
                    elif n >= budget:
                        return None
            finally:
                if times is not None:
                    times.add_pages(time.monotonic() - started, n // LIST_PAGE + 1)
            return _Listed.of(found)

        if len(to_stat) or shards:
            with contextlib.ExitStack() as stack:
                if pool is None:
                    pool = stack.enter_context(ThreadPoolExecutor(self.concurrency))
                if shards:
                    done = dict(zip([p for p, _ in shards], pool.map(list_shard, shards),
                                    strict=True))
                    # a shard is the shared prefix and one more character, or an address
                    # that is the shared prefix itself
                    width = max(len(p) for p, _ in shards)
                    keys = pc.utf8_slice_codeunits(rows.addresses.take(to_list), 0, width)
                    finished = [p for p, listed in done.items() if listed is not None]
                    listed_here = _numpy(pc.is_in(
                        keys, value_set=pa.array(finished, _LARGE_STRING))).astype(bool)
                    judged = to_list[listed_here]
                    listed = _Listed.concat([x for x in done.values() if x is not None])
                    failed, proven = self._judge(
                        rows, judged, listed.find(rows.addresses.take(judged)), listed)
                    failures += failed
                    in_bulk.append(proven)
                    to_stat = np.concatenate([to_stat, to_list[~listed_here]])
                if len(to_stat):
                    addresses = rows.addresses.take(to_stat)
                    runs = _runs(addresses.to_pylist(), self.concurrency)
                    listed = _Listed.concat(list(pool.map(
                        lambda run: _stat_run(self.store, run, times), runs)))
                    failed, proven = self._judge(rows, to_stat, listed.find(addresses), listed)
                    failures += failed
                    by_stat.append(proven)
        out: list[list[MissingItem]] = [[] for _ in batches]
        failures.sort(key=lambda f: f[0])
        for row, item in failures:
            out[int(rows.batch[row])].append(item)
        incomplete = np.array([bool(m) for m in out], dtype=bool)
        remember = [*by_stat, *(p[incomplete[rows.batch[p]]] for p in in_bulk)]
        for proven in remember:
            for address in rows.addresses.take(proven).to_pylist():
                self._proven_objects.add(address)
        return out

    def _proven(self, addresses: pa.Array) -> np.ndarray:
        """Per address, whether it is remembered as proven."""
        if len(addresses) < len(self._proven_objects):
            return np.fromiter((a in self._proven_objects for a in addresses.to_pylist()),
                               dtype=bool, count=len(addresses))
        members = pa.array(self._proven_objects.members(), _LARGE_STRING)
        return _numpy(pc.is_in(addresses, value_set=members)).astype(bool)

    def _judge(self, rows: _Rows, judged: np.ndarray, at: np.ndarray, listed: _Listed
               ) -> tuple[list[tuple[int, MissingItem]], np.ndarray]:
        """Compare rows with the objects a listing or stats found at their addresses
        (``at``: per row, its object's index in ``listed``, or -1 for none), as
        :meth:`_compare` does one: (failed rows and why, rows proven)."""
        failures: list[tuple[int, MissingItem]] = []
        for row in judged[at < 0].tolist():
            path, entry = rows.entry(row)
            failures.append((row, MissingItem(MissingKind.OBJECT, path,
                                              str(rows.addresses[row].as_py()), entry)))
        found = judged[at >= 0]
        index = pa.array(at[at >= 0])
        sizes = listed.sizes[at[at >= 0]]
        etags = listed.etags.take(index)
        want = rows.etags.take(pa.array(found, pa.int64()))
        bad_size = sizes != rows.sizes[found]
        # an imported object keeps its address, where the destination may hold its own
        # data: there the etag the source saw must be the very one; under the mirror's
        # namespace any writer's copy will do, as long as its content digest agrees
        comparable = np.where(
            rows.full[found],
            _nonempty(etags) & _nonempty(want) & (_multipart(etags) == _multipart(want)),
            _md5s(etags) & _md5s(want))
        differ = _numpy(pc.not_equal(etags, want)).astype(bool)
        bad = bad_size | (comparable & differ)
        for k in np.flatnonzero(bad).tolist():
            row = int(found[k])
            path, entry = rows.entry(row)
            reason = (f"size {int(sizes[k])} != {entry.size}" if bad_size[k]
                      else f"etag {etags[k].as_py()} != {entry.etag}")
            failures.append((row, MissingItem(MissingKind.OBJECT, path,
                                              str(rows.addresses[row].as_py()), entry,
                                              reason)))
        return failures, found[~bad]

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

        The stop bounds the requests per round while replication is behind (about one
        request per round when nothing arrived). The items after the stop are not
        looked at in this round, so they come first in the list returned and the stop
        comes last: the next round starts where this one stopped. Arrival order is not
        assumed: an item that arrived is dropped within a few rounds wherever it is in
        the list, and the count of what is still missing comes down with it.
        """
        for i, item in enumerate(missing):
            if item.kind is MissingKind.OBJECT:
                assert item.entry is not None
                again = self.check_object(item.key, item.entry)
            else:
                again = item if not self._file_present(item) else None
            if again is not None:
                return [*missing[i + 1:], again]
        return []

    def _file_present(self, item: MissingItem) -> bool:
        if item.kind is MissingKind.METARANGE:
            return self._read_verified(item.key, decode_metarange, metarange_id)[0] is not None
        return self._read_range(item.key)[0] is not None
