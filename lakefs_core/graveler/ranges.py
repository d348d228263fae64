"""Ranges and metaranges on a blockstore: read, iterate, apply changes, diff, merge.

Files live at ``<namespace>/_lakefs/<id>`` (see :mod:`.rangefile` for the format);
ids are content hashes (see :mod:`.encoding`), so a file is written once and never
changes. Range boundaries are content-defined (see :mod:`.chunking`), which lets
:meth:`RangeManager.apply`, :meth:`~RangeManager.diff` and
:meth:`~RangeManager.merge` cost O(changes + touched ranges): ranges that a change
does not touch keep their ids and are neither read nor written.

Ranges are held as Arrow tables (cached, with their records and record encodings
made on demand). :meth:`RangeManager.apply` rewrites a touched range column-wise:
the rows no change touches go over as slices of the old range's table and of its
record encodings, the changed rows are merged in by path, and the new range's id is
hashed over the joined encodings. Only changes and matched rows become Python
objects, yet the ranges, ids and files are byte for byte those that adding every
record one by one (:class:`~.chunking.MetarangeBuilder`) would give. One thread per
``apply`` reads the next touched range ahead; two more encode, hash and write
completed ones (Arrow, Parquet and hashlib release the GIL), so storage latency and
that work overlap the merging. A range read for the rewrite is not encoded on its
own: the new range's encodings are made from its joined table, where it is
completed, which moves that work from the one reading thread to the two writing ones.

:meth:`RangeManager.diff` compares two versions of a range (the same first and last
path, as after updates in place) column-wise and makes records of the rows that
differ only; other ranges it walks record by record. It reads the ranges it will
open a few ahead (:data:`DIFF_READ_AHEAD`) on threads shared by every diff.

Where the new ranges are cut depends on which rows are hash boundaries. Hashing
every row of every opened range costs about as much as the rest of the rewrite, so
``apply`` hashes only the changed rows and the last row of each range it opens, and
takes every other row of an opened range to be no boundary. That holds for a range
cut by a builder with this manager's ``raggedness`` and ``max_range_entries`` (it
would have cut after such a row), and every metarange of a namespace is written with
the same options: taking ranges over unread, as ``apply`` always has, relies on that
already. The options are checked once per base metarange, from its descriptors alone
(one hash per range): no range holds more than ``max_range_entries`` rows, and each
but the last ends where this manager cuts (``count == max_range_entries``, or its max
key is a hash boundary). A metarange written with other options fails this at once
unless its cuts happen to be ours; then ``apply`` hashes every row of the ranges it
opens, as a rewrite from scratch would, and builds the same ranges as before.
"""

from __future__ import annotations

import bisect
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from cachetools import LRUCache

from lakefs_core.block.base import BlockStore, join_address
from lakefs_core.errors import (
    MergeConflictError,
    ObjectNotFoundError,
    RangeNotFoundError,
    ValidationError,
)
from lakefs_core.graveler.chunking import TableMetarangeBuilder, is_boundary
from lakefs_core.graveler.encoding import (
    EMPTY_METARANGE_ID,
    binary_array,
    metarange_id,
    record_encoding,
    table_record_encodings,
)
from lakefs_core.graveler.model import (
    Difference,
    DiffType,
    Entry,
    EntryRecord,
    Metarange,
    RangeInfo,
)
from lakefs_core.graveler.rangefile import (
    RANGE_SCHEMA,
    decode_metarange,
    decode_range_table,
    encode_metarange,
    encode_range_table,
    range_table,
    records_of_table,
    whole,
)

#: default mean entries per range: ~8k entries make a range file of a few hundred KiB
DEFAULT_RAGGEDNESS = 8_192
#: default hard cap of entries per range, in multiples of the raggedness. Content-defined
#: range sizes are spread exponentially; the cap cuts the long tail (e^-2, 14% of ranges)
#: and so bounds what one change has to rewrite, at the price of a size-cut range
#: moving when a key before its end is added or removed (the next range follows suit,
#: up to the next content-defined boundary).
MAX_RANGE_FACTOR = 2
#: merge strategies: which side wins a path changed differently on both sides
MERGE_STRATEGIES = (None, "dest-wins", "source-wins")
#: changes that ``apply`` holds in memory at once (they stream in)
CHANGE_BATCH = 65_536
#: from this many added rows in one run on, their encodings are made column-wise
COLUMNAR_CHANGES = 64
#: threads of one ``apply`` that hash and write completed ranges (one more reads ahead)
WRITE_THREADS = 2
#: ranges a diff reads ahead of the one it compares, so that store latency overlaps the
#: comparing; and the threads that read them, shared by every diff of the process
DIFF_READ_AHEAD = 4
DIFF_READ_THREADS = 4
#: default bound on the memory of the parsed ranges a server keeps (lakeFS's default
#: for ``committed.sstable.memory.cache_size_bytes``)
DEFAULT_RANGE_CACHE_BYTES = 200_000_000
#: Python objects of a range's records, per row beyond the table's own bytes (measured:
#: about 620 bytes a row of typical paths, addresses and etags, against 210 in Arrow)
RECORD_OVERHEAD_BYTES = 410


def n_records_bytes(table: pa.Table) -> int:
    """About the memory of a range's records as Python objects."""
    return int(table.nbytes) + RECORD_OVERHEAD_BYTES * int(table.num_rows)

_K = TypeVar("_K")
_V = TypeVar("_V")


@dataclass(frozen=True)
class ApplyResult:
    """The outcome of :meth:`RangeManager.apply`."""

    metarange_id: str
    #: ranges of the new metarange that the old one did not list
    ranges_written: int
    #: ranges of the new metarange taken over from the old one
    ranges_reused: int


@dataclass(frozen=True)
class MergeResult:
    """The outcome of :meth:`RangeManager.merge`."""

    metarange_id: str
    #: changes applied onto the destination
    changes: int


class _LRU(Generic[_K, _V]):
    """A thread-safe LRU map bounded by item count and, optionally, by total weight.

    With ``max_weight``, an item weighs at least ``max_weight / max_items``, so one
    bound on the total weight also bounds the count.
    """

    def __init__(self, max_items: int, max_weight: int | None = None) -> None:
        self._floor = 1 if max_weight is None else max(1, max_weight // max(1, max_items))
        self._weighted = max_weight is not None
        self._cache: LRUCache[_K, tuple[_V, int]] = LRUCache(
            maxsize=max_items if max_weight is None else max_weight,
            getsizeof=lambda item: item[1])
        self._lock = threading.Lock()

    def get(self, key: _K) -> _V | None:
        with self._lock:
            item = self._cache.get(key)
        return None if item is None else item[0]

    def put(self, key: _K, value: _V, weight: int = 1) -> None:
        w = max(weight, self._floor) if self._weighted else 1
        with self._lock:
            if w > self._cache.maxsize:  # larger than the whole cache: not kept
                self._cache.pop(key, None)
                return
            self._cache[key] = (value, w)

    def reweigh(self, key: _K, value: _V, weight: int) -> None:
        """Record that a kept item grew (or shrank) to ``weight``; others may go."""
        if not self._weighted:
            return
        w = max(weight, self._floor)
        with self._lock:
            item = self._cache.get(key)
            if item is None or item[0] is not value or item[1] == w:
                return
            if w > self._cache.maxsize:
                self._cache.pop(key, None)
            else:
                self._cache[key] = (value, w)

    @property
    def weight(self) -> int:
        """The total weight of the items kept (their count when not weighted)."""
        with self._lock:
            return int(self._cache.currsize)

    @property
    def max_weight(self) -> int:
        """The bound on :attr:`weight`."""
        return int(self._cache.maxsize)

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()

    def discard_where(self, drop: Callable[[_K], bool]) -> None:
        """Drop every item whose key ``drop`` accepts."""
        with self._lock:
            for key in [k for k in self._cache if drop(k)]:
                self._cache.pop(key, None)


class RangeCache(_LRU[tuple[str, str], "_Range"]):
    """Parsed ranges kept in memory, keyed by (namespace, range id): one bound for every
    :class:`RangeManager` that shares it (a server's, over all its repositories).

    A range weighs what it holds: its Arrow table, and its records and record encodings
    once they are made (an estimate for the records: Python objects, about three times
    the table). A range that grows is weighed again, so the bound holds after the fact.

    Args:
        max_ranges: most ranges kept.
        max_bytes: most bytes of all ranges kept together (``committed.sstable.memory.
            cache_size_bytes``).
    """

    def __init__(self, max_ranges: int = 256,
                 max_bytes: int = DEFAULT_RANGE_CACHE_BYTES) -> None:
        super().__init__(max_ranges, max(1, max_bytes))

    def put_range(self, key: tuple[str, str], rng: _Range) -> None:
        """Keep a range, weighed again whenever it makes its records or encodings.

        The callback is handed the range rather than holding it: a range that held
        itself (through a closure) would be a reference cycle, and its Arrow buffers
        would outlive their eviction until a full garbage collection, which their
        bytes do not bring on (Python counts objects, not the memory behind them).
        """
        rng.on_growth(lambda grown: self.reweigh(key, grown, grown.nbytes()))
        self.put(key, rng, rng.nbytes())

    def forget_namespace(self, namespace: str) -> None:
        """Drop the ranges of one storage namespace (the others stay)."""
        self.discard_where(lambda key: key[0] == namespace)


@dataclass
class _Index:
    """A metarange with its max keys, for binary search."""

    metarange: Metarange
    max_keys: tuple[str, ...]
    #: whether its ranges are cut as this manager cuts (see the module docstring);
    #: None until checked
    own_cuts: bool | None = None


class _Range:
    """A range: its Arrow table, and its records and record encodings once asked for.

    Immutable in content; the derived forms are computed at most a few times when
    threads race for them, with the same result.
    """

    __slots__ = ("__weakref__", "_encodings", "_grown", "_records", "table")

    def __init__(self, table: pa.Table,
                 encodings: pa.Array | pa.ChunkedArray | None = None) -> None:
        self.table = table
        self._encodings = encodings
        self._records: tuple[EntryRecord, ...] | None = None
        self._grown: Callable[[_Range], None] | None = None

    def __len__(self) -> int:
        return int(self.table.num_rows)

    def on_growth(self, grown: Callable[[_Range], None]) -> None:
        """Call ``grown`` with the range after it makes its records or encodings."""
        self._grown = grown

    def nbytes(self) -> int:
        """About the memory the range holds (exact for Arrow data; records estimated)."""
        n = int(self.table.nbytes)
        if self._encodings is not None:
            n += int(self._encodings.nbytes)
        if self._records is not None:
            n += n_records_bytes(self.table)
        return n

    def records(self) -> tuple[EntryRecord, ...]:
        if self._records is None:
            self._records = tuple(records_of_table(self.table))
            if self._grown is not None:
                self._grown(self)
        return self._records

    @property
    def known_encodings(self) -> pa.Array | pa.ChunkedArray | None:
        """The record encodings if they were made or given already, else None."""
        return self._encodings

    def encodings(self) -> pa.Array | pa.ChunkedArray:
        """The record encodings, one binary item per row (in one or more chunks)."""
        if self._encodings is None:
            self._encodings = table_record_encodings(self.table)
            if self._grown is not None:
                self._grown(self)
        return self._encodings

    def entry(self, i: int) -> Entry | None:
        """The entry of row ``i``, as the records have it."""
        if self._records is not None:
            return self._records[i].entry
        return records_of_table(self.table.slice(i, 1))[0].entry


class TablePaths:
    """The paths of a range table as a sequence of str, for ``bisect``, read one by one
    (cheaper than converting the column when only a few lookups are made)."""

    def __init__(self, table: pa.Table) -> None:
        self._paths = whole(table.column("path"))

    def __len__(self) -> int:
        return len(self._paths)

    def __getitem__(self, i: int) -> str:
        return str(self._paths[i].as_py())


def _path(record: EntryRecord) -> str:
    return record.path


class _KeyFilter:
    """Which paths ``prefix``/``after`` admit, and where scanning can start and stop."""

    def __init__(self, prefix: str, after: str) -> None:
        self.prefix = prefix
        self.after = after

    def first_range(self, index: _Index) -> int:
        """Index of the first range that can hold an admitted path."""
        if self.after >= self.prefix:
            return bisect.bisect_right(index.max_keys, self.after)
        return bisect.bisect_left(index.max_keys, self.prefix)

    def first_record(self, records: Sequence[EntryRecord]) -> int:
        """Index of the first admitted-or-later record of a sorted range."""
        if self.after >= self.prefix:
            return bisect.bisect_right(records, self.after, key=_path)
        return bisect.bisect_left(records, self.prefix, key=_path)

    def admits(self, path: str) -> bool:
        """Whether ``path`` is at or after where scanning starts (see
        :meth:`first_record`); :meth:`past` tells where it stops."""
        return path > self.after if self.after >= self.prefix else path >= self.prefix

    def past(self, path: str) -> bool:
        """True if ``path`` and every path after it are beyond the prefix."""
        return bool(self.prefix) and path > self.prefix and not path.startswith(self.prefix)


_diff_readers: ThreadPoolExecutor | None = None
_diff_readers_lock = threading.Lock()


def _diff_reader_pool() -> ThreadPoolExecutor:
    global _diff_readers
    with _diff_readers_lock:
        if _diff_readers is None:
            _diff_readers = ThreadPoolExecutor(DIFF_READ_THREADS,
                                               thread_name_prefix="diff-read-ahead")
        return _diff_readers


def _forget_diff_readers() -> None:
    """In a forked child: the parent's threads are not there, so a pool made before
    the fork would queue reads that never run; the child makes its own."""
    global _diff_readers, _diff_readers_lock
    _diff_readers, _diff_readers_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_diff_readers)


class _ReadAhead:
    """Reads the ranges that a diff of two metaranges will open, a few ahead of it.

    Those are the ranges of each side whose id the other side lacks (twins are skipped
    unread), opened in order of their first path, up to where the diff's prefix ends.
    Once the diff opens one of them, the next :data:`DIFF_READ_AHEAD` are read on other
    threads into the range cache; a range still being read is waited for rather than
    read twice. A diff that stops early leaves at most that many reads behind
    (:meth:`close` cancels those queued).
    """

    def __init__(self, manager: RangeManager, left: Sequence[RangeInfo],
                 right: Sequence[RangeInfo], past: Callable[[str], bool]) -> None:
        left_ids, right_ids = {r.id for r in left}, {r.id for r in right}
        todo = sorted([r for r in left if r.id not in right_ids and not past(r.min_key)]
                      + [r for r in right if r.id not in left_ids and not past(r.min_key)],
                      key=lambda r: r.min_key)
        self._manager = manager
        self._todo = [r.id for r in todo]
        self._at = {range_id: i for i, range_id in enumerate(self._todo)}
        self._submitted = 0
        self._loading: dict[str, Future[_Range]] = {}

    def range(self, range_id: str) -> _Range:
        """A range, read ahead or now; the next ones are started."""
        loading = self._loading.pop(range_id, None)
        at = self._at.get(range_id)
        if at is not None:
            upto = min(len(self._todo), at + 1 + DIFF_READ_AHEAD)
            start = max(self._submitted, at + 1)
            if start < upto:
                pool = _diff_reader_pool()
                for next_id in self._todo[start:upto]:
                    if next_id not in self._loading:
                        self._loading[next_id] = pool.submit(self._manager._range, next_id)
                self._submitted = upto
        return self._manager._range(range_id) if loading is None else loading.result()

    def close(self) -> None:
        for loading in self._loading.values():
            loading.cancel()
        self._loading.clear()


class _Cursor:
    """Walks one metarange for a diff: either at a range header or inside a range."""

    def __init__(self, reader: _ReadAhead, index: _Index, keys: _KeyFilter) -> None:
        self._reader = reader
        self._keys = keys
        self.ranges = index.metarange.ranges
        self.i = keys.first_range(index)
        self.records: Sequence[EntryRecord] = ()
        self.pos = 0

    @property
    def header(self) -> RangeInfo | None:
        """The next range, unopened, if the cursor is between ranges."""
        if self.pos < len(self.records) or self.i >= len(self.ranges):
            return None
        return self.ranges[self.i]

    @property
    def key(self) -> str | None:
        """The next record's path, or the next range's min key, or None at the end."""
        if self.pos < len(self.records):
            return self.records[self.pos].path
        if self.i < len(self.ranges):
            return self.ranges[self.i].min_key
        return None

    @property
    def record(self) -> EntryRecord:
        return self.records[self.pos]

    def skip_range(self) -> None:
        self.i += 1

    def range(self, info: RangeInfo) -> _Range:
        """A range of this cursor's metarange, read (or cached)."""
        return self._reader.range(info.id)

    def open(self) -> None:
        self.records = self._reader.range(self.ranges[self.i].id).records()
        self.pos = self._keys.first_record(self.records)
        self.i += 1


class RangeManager:
    """Reads and writes the ranges and metaranges of one storage namespace.

    Args:
        store: the blockstore that serves ``namespace``.
        namespace: the repository's storage namespace (``local://...``, ``s3://...``).
        raggedness: mean entries per range (a key ends a range when its hash is 0
            modulo this).
        max_range_entries: hard cap of entries per range (default: 2 x raggedness).
        cache_size: parsed ranges kept in memory (least recently used go first).
        cache_size_bytes: cap on the memory of the cached ranges together.
        cache: a range cache shared with other managers (then ``cache_size`` and
            ``cache_size_bytes`` bound only the manager's own, which it does not use).

    Safe to use from many threads.
    """

    def __init__(
        self,
        store: BlockStore,
        namespace: str,
        *,
        raggedness: int = DEFAULT_RAGGEDNESS,
        max_range_entries: int | None = None,
        cache_size: int = 256,
        cache_size_bytes: int = DEFAULT_RANGE_CACHE_BYTES,
        cache: RangeCache | None = None,
    ) -> None:
        if max_range_entries is None:
            max_range_entries = MAX_RANGE_FACTOR * raggedness
        if raggedness < 1 or max_range_entries < 1:
            raise ValidationError("raggedness and max_range_entries must be positive")
        self.store = store
        self.namespace = namespace
        self.raggedness = raggedness
        self.max_range_entries = max_range_entries
        self._shared_cache = cache is not None
        self._ranges = cache if cache is not None else RangeCache(cache_size, cache_size_bytes)
        self._metaranges: _LRU[str, _Index] = _LRU(max(cache_size, 16))

    def forget_cached(self) -> None:
        """Drop the parsed ranges and metaranges of this namespace kept in memory (of a
        shared cache, only this namespace's)."""
        if self._shared_cache:
            self._ranges.forget_namespace(self.namespace)
        else:
            self._ranges.clear()
        self._metaranges.clear()

    # --- files ------------------------------------------------------------------
    def range_address(self, range_or_metarange_id: str) -> str:
        """The address of a range or metarange file: ``<namespace>/_lakefs/<id>``."""
        return join_address(self.namespace, f"_lakefs/{range_or_metarange_id}")

    def _read_file(self, file_id: str, what: str) -> bytes:
        try:
            return self.store.get(self.range_address(file_id))
        except ObjectNotFoundError as e:
            raise RangeNotFoundError(f"{what} not found: {file_id}") from e

    def _write_once(self, file_id: str, content: Callable[[], bytes]) -> None:
        """Write a file unless it is there already (ids are content hashes)."""
        address = self.range_address(file_id)
        if not self.store.exists(address):
            self.store.put(address, content())

    def _store_range(self, info: RangeInfo, table: pa.Table,
                     encodings: pa.ChunkedArray | None) -> None:
        self._write_once(info.id, lambda: encode_range_table(table))
        key = (self.namespace, info.id)
        if self._ranges.get(key) is None:
            self._ranges.put_range(key, _Range(table, encodings))

    def _range(self, range_id: str) -> _Range:
        key = (self.namespace, range_id)
        rng = self._ranges.get(key)
        if rng is None:
            rng = _Range(decode_range_table(self._read_file(range_id, "range")))
            self._ranges.put_range(key, rng)
        return rng

    def _records(self, range_id: str) -> tuple[EntryRecord, ...]:
        return self._range(range_id).records()

    def read_range(self, range_id: str) -> list[EntryRecord]:
        """The records of a range, sorted by path.

        Raises:
            RangeNotFoundError: no range file with this id.
        """
        return list(self._records(range_id))

    def read_range_table(self, range_id: str) -> tuple[pa.Table, pa.Array | pa.ChunkedArray]:
        """A range as columns: its Arrow table (the columns of the range file, sorted by
        path) and its record encodings (one binary item per row, what its id hashes).

        Raises:
            RangeNotFoundError: no range file with this id.
            StorageError: the file is not a range file.
        """
        rng = self._range(range_id)
        return rng.table, rng.encodings()

    def keep_range(self, range_id: str, table: pa.Table, encodings: pa.Array) -> None:
        """Cache a range read and checked elsewhere (``encodings`` hash to ``range_id``),
        so that the next read of it needs no request."""
        key = (self.namespace, range_id)
        if self._ranges.get(key) is None:
            self._ranges.put_range(key, _Range(table, encodings))

    # --- metaranges ---------------------------------------------------------------
    def _write_metarange(self, ranges: Sequence[RangeInfo]) -> str:
        mr_id = metarange_id(ranges)
        self._write_once(mr_id, lambda: encode_metarange(ranges))
        if self._metaranges.get(mr_id) is None:
            self._metaranges.put(mr_id, _Index(
                Metarange(mr_id, tuple(ranges)), tuple(r.max_key for r in ranges)
            ))
        return mr_id

    def _index(self, mr_id: str) -> _Index:
        index = self._metaranges.get(mr_id)
        if index is None:
            if mr_id == EMPTY_METARANGE_ID:
                ranges: tuple[RangeInfo, ...] = ()
            else:
                ranges = decode_metarange(self._read_file(mr_id, "metarange"))
            index = _Index(Metarange(mr_id, ranges), tuple(r.max_key for r in ranges))
            self._metaranges.put(mr_id, index)
        return index

    def empty_metarange(self) -> str:
        """The id of the metarange with no ranges, writing its file if absent."""
        return self._write_metarange(())

    def get_metarange(self, metarange_id: str) -> Metarange:
        """A metarange by id (the empty metarange is known without reading its file).

        Raises:
            RangeNotFoundError: no metarange file with this id.
        """
        return self._index(metarange_id).metarange

    def new_ranges(self, old_metarange_id: str, new_metarange_id: str) -> list[RangeInfo]:
        """Ranges listed by the new metarange and not by the old one (compared by id)."""
        old_ids = {r.id for r in self.get_metarange(old_metarange_id).ranges}
        return [r for r in self.get_metarange(new_metarange_id).ranges if r.id not in old_ids]

    # --- reading ------------------------------------------------------------------
    def iterate(
        self, metarange_id: str, prefix: str = "", after: str = ""
    ) -> Iterator[EntryRecord]:
        """Records of a metarange by path: those starting with ``prefix`` and after ``after``.

        Ranges wholly before the start are skipped unread, using their min/max keys.

        Raises:
            RangeNotFoundError: the metarange (at call) or a range (while iterating)
                is missing.
        """
        index = self._index(metarange_id)
        return self._iterate(index, _KeyFilter(prefix, after))

    def _iterate(self, index: _Index, keys: _KeyFilter) -> Iterator[EntryRecord]:
        ranges = index.metarange.ranges
        for i in range(keys.first_range(index), len(ranges)):
            if keys.past(ranges[i].min_key):
                return
            records = self._records(ranges[i].id)
            for j in range(keys.first_record(records), len(records)):
                record = records[j]
                if keys.past(record.path):
                    return
                yield record

    def get_entry(self, metarange_id: str, path: str) -> Entry | None:
        """The entry at ``path``, or None. Reads at most one range."""
        index = self._index(metarange_id)
        i = bisect.bisect_left(index.max_keys, path)
        if i == len(index.max_keys) or index.metarange.ranges[i].min_key > path:
            return None
        records = self._records(index.metarange.ranges[i].id)
        j = bisect.bisect_left(records, path, key=_path)
        if j < len(records) and records[j].path == path:
            return records[j].entry
        return None

    # --- writing ------------------------------------------------------------------
    def apply(self, metarange_id: str, changes: Iterable[EntryRecord]) -> ApplyResult:
        """Apply changes to a metarange, writing only the ranges they touch.

        Args:
            metarange_id: the metarange to change.
            changes: records sorted by path with unique paths; ``entry=None``
                deletes the path (deleting a missing path does nothing).

        Returns:
            The new metarange id (the same id if nothing changed) and how many of
            its ranges are new or were taken over unread.

        Raises:
            ValidationError: changes out of order or with a repeated path.
            RangeNotFoundError: the metarange or a range it lists is missing.
        """
        index = self._index(metarange_id)
        with ThreadPoolExecutor(1, thread_name_prefix="range-read") as reader, \
                ThreadPoolExecutor(WRITE_THREADS, thread_name_prefix="range-write") as writer:
            try:
                run = _Apply(self, index, reader, writer)
                changed, new_ranges = run.run(_sorted_changes(changes))
            except BaseException:
                reader.shutdown(wait=True, cancel_futures=True)
                writer.shutdown(wait=True, cancel_futures=True)
                raise
        ranges = index.metarange.ranges
        if not changed:
            return ApplyResult(metarange_id, 0, len(ranges))
        old_ids = {r.id for r in ranges}
        reused = sum(1 for r in new_ranges if r.id in old_ids)
        return ApplyResult(self._write_metarange(new_ranges), len(new_ranges) - reused, reused)

    def _own_cuts(self, index: _Index) -> bool:
        """Whether a metarange's ranges are cut as this manager cuts them (see the
        module docstring): then no row but the last of a range is a hash boundary."""
        if index.own_cuts is None:
            ranges = index.metarange.ranges
            limit = self.max_range_entries
            index.own_cuts = all(r.count <= limit for r in ranges) and all(
                r.count == limit or is_boundary(r.max_key, self.raggedness)
                for r in ranges[:-1])
        return index.own_cuts

    # --- comparing ----------------------------------------------------------------
    def diff(
        self, left_id: str, right_id: str, prefix: str = "", after: str = ""
    ) -> Iterator[Difference]:
        """Paths that differ from the left metarange to the right one, by path.

        ``left`` of each difference is the entry in ``left_id``, ``right`` the one
        in ``right_id``. Ranges with the same id on both sides are skipped unread.

        Raises:
            RangeNotFoundError: a metarange (at call) or a range (while iterating)
                is missing.
        """
        left = self._index(left_id)
        right = self._index(right_id)
        if left_id == right_id:
            return iter(())
        keys = _KeyFilter(prefix, after)
        first_left, first_right = keys.first_range(left), keys.first_range(right)
        reader = _ReadAhead(self, left.metarange.ranges[first_left:],
                            right.metarange.ranges[first_right:], keys.past)
        return self._diff(reader, _Cursor(reader, left, keys), _Cursor(reader, right, keys),
                          keys)

    @staticmethod
    def _diff(reader: _ReadAhead, left: _Cursor, right: _Cursor, keys: _KeyFilter
              ) -> Iterator[Difference]:
        try:
            yield from RangeManager._differences(left, right, keys)
        finally:
            reader.close()

    @staticmethod
    def _differences(left: _Cursor, right: _Cursor, keys: _KeyFilter) -> Iterator[Difference]:
        past = keys.past
        while True:
            lh, rh = left.header, right.header
            if lh is not None and rh is not None and lh.id == rh.id:
                left.skip_range()
                right.skip_range()
                continue
            if (lh is not None and rh is not None and lh.min_key == rh.min_key
                    and lh.max_key == rh.max_key):
                # two versions of one range (same first and last path): compared
                # column-wise, with records made of the rows that differ only
                left.skip_range()
                right.skip_range()
                for difference in _range_differences(left.range(lh), right.range(rh)):
                    if not keys.admits(difference.path):
                        continue
                    if past(difference.path):
                        return
                    yield difference
                continue
            lk, rk = left.key, right.key
            if lk is None and rk is None:
                return
            if past(min(k for k in (lk, rk) if k is not None)):
                return
            # open a range only when its keys are next: an unopened range whose
            # twin comes up on the other side can still be skipped
            if lh is not None and lk is not None and (rk is None or lk <= rk):
                left.open()
                continue
            if rh is not None and rk is not None and (lk is None or rk <= lk):
                right.open()
                continue
            if lh is None and rh is None and lk is not None and rk is not None:
                # both inside a range: compare record runs without the bookkeeping
                lrecs, rrecs = left.records, right.records
                lpos, rpos, lend, rend = left.pos, right.pos, len(lrecs), len(rrecs)
                while lpos < lend and rpos < rend:
                    lrec, rrec = lrecs[lpos], rrecs[rpos]
                    if lrec.path < rrec.path:
                        if past(lrec.path):
                            return
                        yield Difference(lrec.path, DiffType.REMOVED, lrec.entry, None)
                        lpos += 1
                    elif rrec.path < lrec.path:
                        if past(rrec.path):
                            return
                        yield Difference(rrec.path, DiffType.ADDED, None, rrec.entry)
                        rpos += 1
                    else:
                        if lrec.entry != rrec.entry:
                            if past(lrec.path):
                                return
                            yield Difference(lrec.path, DiffType.CHANGED, lrec.entry, rrec.entry)
                        lpos += 1
                        rpos += 1
                left.pos, right.pos = lpos, rpos
            elif rk is None or (lk is not None and lk < rk):
                yield Difference(left.record.path, DiffType.REMOVED, left.record.entry, None)
                left.pos += 1
            else:
                yield Difference(right.record.path, DiffType.ADDED, None, right.record.entry)
                right.pos += 1

    def merge(
        self, base_id: str, source_id: str, dest_id: str, strategy: str | None = None
    ) -> MergeResult:
        """Three-way merge: apply the changes from base to source onto dest.

        A path changed on both sides to different results is a conflict, unless
        ``strategy`` picks a side (``"dest-wins"`` or ``"source-wins"``). The same
        change on both sides is not a conflict: the same object (content, content type
        and user metadata), even when written separately to two physical addresses.

        Returns:
            The merged metarange id (``dest_id`` itself when nothing is to be
            applied; the caller decides whether that is an error) and the number of
            changes applied onto dest.

        Raises:
            MergeConflictError: conflicting paths (in ``paths``) and no strategy.
            ValidationError: an unknown strategy.
        """
        if strategy not in MERGE_STRATEGIES:
            raise ValidationError(
                f"unknown merge strategy {strategy!r}: use 'dest-wins' or 'source-wins'"
            )
        pairs = _join_by_path(self.diff(base_id, source_id), self.diff(base_id, dest_id))
        conflicts: list[str] = []
        applied = 0

        def changes() -> Iterator[EntryRecord]:
            # streamed into apply, so each dest range is read right after the diff
            # read its base twin (a cache hit when unchanged on dest)
            nonlocal applied
            for src, dst in pairs:
                if src is None:
                    continue  # changed on dest only: dest already has it
                if dst is None or strategy == "source-wins":
                    if dst is None or not same_object(dst.right, src.right):
                        applied += 1
                        yield EntryRecord(src.path, src.right)
                elif not same_object(dst.right, src.right) and strategy is None:
                    conflicts.append(src.path)
                    raise _MergeConflict

        try:
            result = self.apply(dest_id, changes())
        except _MergeConflict:
            # the first conflict stopped the apply (ranges it wrote are orphans, which
            # is harmless); list every other conflicting path before raising
            conflicts.extend(
                src.path for src, dst in pairs
                if src is not None and dst is not None
                and not same_object(dst.right, src.right)
            )
            raise MergeConflictError(
                f"conflict: {len(conflicts)} paths changed on both sides", paths=conflicts
            ) from None
        return MergeResult(result.metarange_id if applied else dest_id, applied)


class _Apply:
    """One :meth:`RangeManager.apply`: merges the changes into the ranges they fall in.

    Reads run one range ahead on ``reader`` (the range the next change falls in), and
    completed ranges are encoded, hashed and written on ``writer``, while this thread
    merges the next range. The old rows go to the builder with their encodings only
    when the range already has them (a range cached with them); otherwise the builder
    encodes the new range's table as a whole.
    """

    def __init__(self, manager: RangeManager, index: _Index, reader: Executor,
                 writer: Executor) -> None:
        self.manager = manager
        self.index = index
        self.raggedness = manager.raggedness
        self.own_cuts = manager._own_cuts(index)
        self.reader = reader
        self.builder = TableMetarangeBuilder(manager.raggedness, manager.max_range_entries,
                                             manager._store_range, executor=writer)
        self._loading: dict[str, Future[_Range]] = {}
        self._opened = ""  # the id of the range being rewritten

    def run(self, pending: Iterator[EntryRecord]) -> tuple[bool, list[RangeInfo]]:
        """Apply the changes; whether any had an effect, and the new range list."""
        ranges = self.index.metarange.ranges
        builder = self.builder
        change = next(pending, None)
        self._read_ahead(change)
        changed = False
        i = 0
        while i < len(ranges):
            info = ranges[i]
            # The next range is taken over unread when the builder is at a cut and no
            # pending change falls in it; if changes follow, it must also end where
            # the builder would cut, so that they start a range just as they would
            # in a rewrite from scratch.
            if builder.at_cut and (change is None or (
                    change.path > info.max_key and builder.ends_with_cut(info))):
                builder.reuse(info)
                i += 1
            elif change is not None and change.path < info.min_key:
                batch, change = self._take(change, pending, info.min_key, inclusive=False)
                changed = self._add_changes(batch) or changed
            else:
                range_changed, change = self._rewrite(info, change, pending)
                changed = changed or range_changed
                i += 1
        while change is not None:
            batch, change = self._take(change, pending, None, inclusive=False)
            changed = self._add_changes(batch) or changed
        return changed, builder.finish()

    def _take(
        self, first: EntryRecord, pending: Iterator[EntryRecord], bound: str | None, *,
        inclusive: bool,
    ) -> tuple[list[EntryRecord], EntryRecord | None]:
        batch, change = _take(first, pending, bound, inclusive=inclusive)
        self._read_ahead(change)
        return batch, change

    def _read_ahead(self, change: EntryRecord | None) -> None:
        """Start reading the range that ``change`` falls in, if any."""
        if change is None:
            return
        index = self.index
        i = bisect.bisect_left(index.max_keys, change.path)
        if i == len(index.max_keys):
            return
        info = index.metarange.ranges[i]
        if info.min_key <= change.path and info.id not in self._loading and (
                info.id != self._opened):
            self._loading[info.id] = self.reader.submit(self.manager._range, info.id)

    def _open(self, info: RangeInfo) -> _Range:
        self._opened = info.id
        loading = self._loading.pop(info.id, None)
        return self.manager._range(info.id) if loading is None else loading.result()

    def _add_changes(self, batch: list[EntryRecord]) -> bool:
        """Add changes that no old row lies among; True if any adds a path."""
        present = [c for c in batch if c.entry is not None]
        if present:
            self.builder.add(*self._change_rows(present))
        return bool(present)

    def _change_rows(self, present: list[EntryRecord]) -> tuple[pa.Table, pa.Array, list[int]]:
        """The table, record encodings and hash boundaries of records to add."""
        boundaries = [j for j, r in enumerate(present) if is_boundary(r.path, self.raggedness)]
        if len(present) >= COLUMNAR_CHANGES and not any(
                r.entry is not None and r.entry.metadata for r in present):
            try:
                table = range_table(present)
                return table, table_record_encodings(table), boundaries
            except (pa.ArrowException, ValueError, TypeError, OverflowError):
                pass  # refused below as the per-record encoding refuses it
        encodings = binary_array([record_encoding(r) for r in present])
        return range_table(present), encodings, boundaries

    def _rewrite(
        self, info: RangeInfo, change: EntryRecord | None, pending: Iterator[EntryRecord],
    ) -> tuple[bool, EntryRecord | None]:
        """Feed an old range with the changes that fall in it (paths up to its max key)
        into the builder: untouched rows as slices, changed rows merged in by path.

        Returns whether anything changed and the first change past the range.
        """
        builder = self.builder
        rng = self._open(info)
        table, n = rng.table, len(rng)
        encodings = rng.known_encodings
        if self.own_cuts:
            old_cuts = np.array([n - 1] if is_boundary(info.max_key, self.raggedness) else [],
                                dtype=np.int64)
        else:
            old_cuts = np.flatnonzero([is_boundary(path, self.raggedness)
                                       for path in table.column("path").to_pylist()])

        def old_rows(start: int, end: int) -> None:
            if start < end:
                first, last = np.searchsorted(old_cuts, [start, end])
                builder.add(table.slice(start, end - start),
                            None if encodings is None else encodings.slice(start, end - start),
                            (old_cuts[first:last] - start).tolist())

        changed = False
        pos = 0
        while change is not None and change.path <= info.max_key:
            batch, change = self._take(change, pending, info.max_key, inclusive=True)
            if len(batch) * 16 >= n - pos:  # many lookups: convert the column once
                paths: list[str] | TablePaths = table.column("path").to_pylist()
            else:
                paths = TablePaths(table)
            # where each change goes among the old rows, and which old row it replaces;
            # runs: old rows [start, end), then the added rows up to `present[upto]`
            present: list[EntryRecord] = []
            runs: list[list[int]] = []
            for c in batch:
                at = bisect.bisect_left(paths, c.path, pos, n)
                if at < n and paths[at] == c.path:
                    changed = changed or rng.entry(at) != c.entry
                    skip = 1
                else:
                    changed = changed or c.entry is not None
                    skip = 0
                if at > pos or not runs:
                    runs.append([pos, at, len(present)])
                pos = at + skip
                if c.entry is not None:
                    present.append(c)
                runs[-1][2] = len(present)
            if present:
                c_table, c_encodings, c_cuts = self._change_rows(present)
            done = 0
            for start, end, upto in runs:
                old_rows(start, end)
                if upto > done:
                    builder.add(c_table.slice(done, upto - done),
                                c_encodings.slice(done, upto - done),
                                [j - done for j in c_cuts if done <= j < upto])
                    done = upto
        old_rows(pos, n)
        return changed, change


def numpy_of(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """An Arrow array's values as a NumPy array (copied where Arrow must)."""
    return np.asarray(array.to_numpy(zero_copy_only=False))


#: the columns of a range that make an entry (all but the path)
_ENTRY_COLUMNS = tuple(name for name in RANGE_SCHEMA.names if name != "path")


def _may_differ(left: pa.Table, right: pa.Table) -> np.ndarray:
    """Row i of ``left`` against row i of ``right``: True where any entry column
    differs. Equal columns mean equal entries; unequal ones may still be (metadata
    written in another key order, a NaN mtime), so True rows are compared as entries."""
    differs = np.zeros(left.num_rows, dtype=bool)
    for name in _ENTRY_COLUMNS:
        differs |= numpy_of(pc.not_equal(left.column(name), right.column(name)))
    return differs


def _range_differences(left: _Range, right: _Range) -> Iterator[Difference]:
    """The differences from ``left`` to ``right``, two ranges over the same span of
    paths, in path order.

    Rows are matched by path and compared column-wise; only the rows that may differ
    become records (and are compared as entries, as records elsewhere are).
    """
    ltable, rtable = left.table, right.table
    lpaths, rpaths = ltable.column("path"), rtable.column("path")
    if len(lpaths) == len(rpaths) and lpaths.equals(rpaths):
        # the same paths (the usual case: objects overwritten): row i against row i
        rows = np.flatnonzero(_may_differ(ltable, rtable))
        for lrec, rrec in zip(records_of_table(ltable.take(rows)),
                              records_of_table(rtable.take(rows)), strict=True):
            if lrec.entry != rrec.entry:
                yield Difference(lrec.path, DiffType.CHANGED, lrec.entry, rrec.entry)
        return
    # where each left path is on the right (-1: removed), and each right path on the left
    at = numpy_of(pc.fill_null(pc.index_in(lpaths, value_set=rpaths), -1))
    added = np.flatnonzero(numpy_of(pc.is_null(pc.index_in(rpaths, value_set=lpaths))))
    kept = np.flatnonzero(at >= 0)
    kept = kept[_may_differ(ltable.take(kept), rtable.take(at[kept]))]
    lrows = np.sort(np.concatenate([np.flatnonzero(at < 0), kept]))
    rrows = at[lrows]  # -1 where removed
    lrecs = records_of_table(ltable.take(lrows))
    rrecs = records_of_table(rtable.take(np.concatenate([rrows[rrows >= 0], added])))
    matched = iter(rrecs[:len(rrecs) - len(added)])
    added_recs = rrecs[len(rrecs) - len(added):]
    # both are in path order: merged
    j = 0
    for lrec, r in zip(lrecs, rrows, strict=True):
        while j < len(added_recs) and added_recs[j].path < lrec.path:
            yield Difference(added_recs[j].path, DiffType.ADDED, None, added_recs[j].entry)
            j += 1
        if r < 0:
            yield Difference(lrec.path, DiffType.REMOVED, lrec.entry, None)
        else:
            rrec = next(matched)
            if lrec.entry != rrec.entry:
                yield Difference(lrec.path, DiffType.CHANGED, lrec.entry, rrec.entry)
    for rec in added_recs[j:]:
        yield Difference(rec.path, DiffType.ADDED, None, rec.entry)


def same_object(a: Entry | None, b: Entry | None) -> bool:
    """Whether two entries (None: deleted) are the same object for a merge: the same
    content (ETag and size), content type and user metadata, wherever stored."""
    if a is None or b is None:
        return a is b
    return (a.etag, a.size, a.content_type, a.metadata) == (
        b.etag, b.size, b.content_type, b.metadata)


class _MergeConflict(Exception):
    """Stops a merge's apply at the first conflicting path."""


def _sorted_changes(changes: Iterable[EntryRecord]) -> Iterator[EntryRecord]:
    previous: str | None = None
    for change in changes:
        if previous is not None and change.path <= previous:
            raise ValidationError(
                f"changes must be sorted by path with unique paths: {change.path!r} "
                f"after {previous!r}"
            )
        previous = change.path
        yield change


def _join_by_path(
    a: Iterator[Difference], b: Iterator[Difference]
) -> Iterator[tuple[Difference | None, Difference | None]]:
    """Pairs of differences on the same path from two sorted streams (None when absent)."""
    x, y = next(a, None), next(b, None)
    while x is not None or y is not None:
        if y is None or (x is not None and x.path < y.path):
            yield x, None
            x = next(a, None)
        elif x is None or y.path < x.path:
            yield None, y
            y = next(b, None)
        else:
            yield x, y
            x, y = next(a, None), next(b, None)


def _take(
    first: EntryRecord, pending: Iterator[EntryRecord], bound: str | None, *, inclusive: bool
) -> tuple[list[EntryRecord], EntryRecord | None]:
    """Up to :data:`CHANGE_BATCH` changes from ``first`` on whose paths are below
    ``bound`` (or at it, if ``inclusive``; any path if None); and the change after them."""
    batch: list[EntryRecord] = []
    change: EntryRecord | None = first
    while change is not None and len(batch) < CHANGE_BATCH and (
            bound is None or change.path < bound or (inclusive and change.path == bound)):
        batch.append(change)
        change = next(pending, None)
    return batch, change
