"""Content-defined range boundaries.

A sorted run of records is cut into ranges after every record whose key hash
(the first 8 bytes of BLAKE2b over the UTF-8 path, as an integer) is 0 modulo the
*raggedness*, or after ``max_range_entries`` records since the last cut. Whether a
cut follows a record depends only on the keys up to it, so the same key set always
splits the same way, and a change to one key moves at most the boundaries next to
it: the ranges before and after keep their ids. (A size cut is the exception: adding
or removing a key before it moves it, and the ranges up to the next hash boundary
with it.)

Two builders apply that rule. :class:`TableMetarangeBuilder` takes runs of rows as
Arrow tables, with their record encodings and the positions of the hash boundaries
among them, and cuts, hashes and writes ranges without a Python object per row: the
range manager uses it. :class:`MetarangeBuilder` takes one record at a time; it is
the rule at its plainest, and both build the same ranges (ids, bounds and files)
from the same records.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from typing import TypeAlias

import pyarrow as pa

from lakefs_core.graveler.encoding import (
    payload_of,
    range_id_of_encodings,
    range_id_of_payload,
    record_encoding,
    table_record_encodings,
)
from lakefs_core.graveler.model import EntryRecord, RangeInfo


def key_hash(path: str) -> int:
    """The 64-bit hash of a path that decides the boundaries."""
    digest = hashlib.blake2b(path.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def is_boundary(path: str, raggedness: int) -> bool:
    """Whether a range ends after ``path`` (unless the size limit cut earlier)."""
    return key_hash(path) % raggedness == 0


#: stores one range (its descriptor and records) and returns nothing
RangeSink = Callable[[RangeInfo, Sequence[EntryRecord]], None]


class MetarangeBuilder:
    """Builds the range list of a new metarange from records and reused ranges.

    Records go in by path order through :meth:`add`; every completed range is
    handed to ``sink`` (which writes its file). Whole ranges of an older metarange
    can be passed through unread with :meth:`reuse`, but only while the builder is
    at a cut (:attr:`at_cut`).
    """

    def __init__(self, raggedness: int, max_range_entries: int, sink: RangeSink) -> None:
        self.raggedness = raggedness
        self.max_range_entries = max_range_entries
        self.ranges: list[RangeInfo] = []
        self._sink = sink
        self._records: list[EntryRecord] = []
        self._encodings: list[bytes] = []

    @property
    def at_cut(self) -> bool:
        """True when no record is waiting for its range to be completed."""
        return not self._records

    def ends_with_cut(self, info: RangeInfo) -> bool:
        """Whether the builder would have cut right after the last key of ``info``."""
        return info.count >= self.max_range_entries or is_boundary(info.max_key, self.raggedness)

    def add(self, record: EntryRecord) -> None:
        """Append a record (its path must follow every path added before)."""
        self._encodings.append(record_encoding(record))
        self._records.append(record)
        if (len(self._records) >= self.max_range_entries
                or is_boundary(record.path, self.raggedness)):
            self._cut()

    def reuse(self, info: RangeInfo) -> None:
        """Pass an existing range through unchanged."""
        if not self.at_cut:
            raise RuntimeError("a range can only be reused at a cut")
        self.ranges.append(info)

    def finish(self) -> list[RangeInfo]:
        """Complete the last range and return every range, in order."""
        if self._records:
            self._cut()
        return self.ranges

    def _cut(self) -> None:
        records, encodings = self._records, self._encodings
        info = RangeInfo(
            id=range_id_of_encodings(encodings),
            min_key=records[0].path,
            max_key=records[-1].path,
            count=len(records),
            estimated_size=sum(len(e) for e in encodings),
        )
        self._sink(info, records)
        self.ranges.append(info)
        self._records, self._encodings = [], []


#: the record encodings of a run of rows: one binary item per row
EncodingRun: TypeAlias = "pa.Array | pa.ChunkedArray"
#: stores one range given as a table with its record encodings (None: not at hand);
#: returns nothing
TableSink = Callable[[RangeInfo, pa.Table, pa.ChunkedArray | None], None]


class TableMetarangeBuilder:
    """Builds the range list of a new metarange from runs of rows and reused ranges.

    Runs go in by path order through :meth:`add`, each an Arrow table with the
    columns of a range file, the encodings of its records (one binary item per row,
    see :func:`~lakefs_core.graveler.encoding.table_record_encodings`) or None when
    they are not at hand, and the positions of the rows whose path is a hash
    boundary. A completed range is hashed over its runs' encodings, or over the
    encodings of its joined table when a run came without them, and handed to
    ``sink`` as one table with contiguous columns. :meth:`reuse` passes whole ranges
    through unread, at a cut only, as with :class:`MetarangeBuilder`.

    With an ``executor``, completed ranges are joined, encoded, hashed and handed to
    ``sink`` there (at most ``in_flight`` at a time), and :meth:`finish` waits for
    them.
    """

    def __init__(self, raggedness: int, max_range_entries: int, sink: TableSink, *,
                 executor: Executor | None = None, in_flight: int = 4) -> None:
        self.raggedness = raggedness
        self.max_range_entries = max_range_entries
        self._ranges: list[RangeInfo | Future[RangeInfo]] = []
        self._sink = sink
        self._executor = executor
        self._in_flight = in_flight
        self._running: deque[Future[RangeInfo]] = deque()
        self._tables: list[pa.Table] = []
        self._encodings: list[EncodingRun | None] = []
        self._count = 0

    @property
    def at_cut(self) -> bool:
        """True when no row is waiting for its range to be completed."""
        return self._count == 0

    def ends_with_cut(self, info: RangeInfo) -> bool:
        """Whether the builder would have cut right after the last key of ``info``."""
        return info.count >= self.max_range_entries or is_boundary(info.max_key, self.raggedness)

    def add(self, table: pa.Table, encodings: EncodingRun | None,
            boundaries: Sequence[int]) -> None:
        """Append a run of rows (its paths must follow every path added before).

        Args:
            table: the rows, sorted by path.
            encodings: the record encoding of each row, or None to have them made
                from the table when the range is completed.
            boundaries: ascending positions (in ``table``) of the rows whose path is a
                hash boundary; no other row may be one.
        """
        n = table.num_rows
        start = 0
        b = 0
        while start < n:
            end = start + self.max_range_entries - self._count  # a size cut before `end`
            while b < len(boundaries) and boundaries[b] < start:
                b += 1
            if b < len(boundaries) and boundaries[b] < end:
                end = boundaries[b] + 1
            if end > n:
                self._pend(table, encodings, start, n)
                return
            self._pend(table, encodings, start, end)
            self._cut()
            start = end

    def reuse(self, info: RangeInfo) -> None:
        """Pass an existing range through unchanged."""
        if not self.at_cut:
            raise RuntimeError("a range can only be reused at a cut")
        self._ranges.append(info)

    def finish(self) -> list[RangeInfo]:
        """Complete the last range and return every range, in order."""
        if self._count:
            self._cut()
        return [r if isinstance(r, RangeInfo) else r.result() for r in self._ranges]

    def _pend(self, table: pa.Table, encodings: EncodingRun | None, start: int,
              end: int) -> None:
        if start == 0 and end == table.num_rows:
            self._tables.append(table)
            self._encodings.append(encodings)
        else:
            self._tables.append(table.slice(start, end - start))
            self._encodings.append(
                None if encodings is None else encodings.slice(start, end - start))
        self._count += end - start

    def _cut(self) -> None:
        tables, encodings = self._tables, self._encodings
        self._tables, self._encodings, self._count = [], [], 0
        if self._executor is None:
            self._ranges.append(self._complete(tables, encodings))
            return
        while len(self._running) >= self._in_flight:
            self._running.popleft().result()
        future = self._executor.submit(self._complete, tables, encodings)
        self._running.append(future)
        self._ranges.append(future)

    def _complete(self, tables: list[pa.Table], encodings: list[EncodingRun | None]
                  ) -> RangeInfo:
        table = (tables[0] if len(tables) == 1 else pa.concat_tables(tables)).combine_chunks()
        runs = ([table_record_encodings(table)] if any(run is None for run in encodings)
                else [run for run in encodings if run is not None])
        chunks = [c for run in runs
                  for c in (run.chunks if isinstance(run, pa.ChunkedArray) else [run])]
        payload = [payload_of(c) for c in chunks]
        paths = table.column("path")
        info = RangeInfo(
            id=range_id_of_payload(*payload),
            min_key=paths[0].as_py(),
            max_key=paths[-1].as_py(),
            count=table.num_rows,
            estimated_size=sum(len(p) for p in payload),
        )
        same_type = all(c.type == chunks[0].type for c in chunks)
        self._sink(info, table, pa.chunked_array(chunks) if same_type else None)
        return info
