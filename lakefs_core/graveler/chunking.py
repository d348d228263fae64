"""Content-defined range boundaries.

A sorted run of records is cut into ranges after every record whose key hash
(the first 8 bytes of BLAKE2b over the UTF-8 path, as an integer) is 0 modulo the
*raggedness*, or after ``max_range_entries`` records since the last cut. Whether a
cut follows a record depends only on the keys up to it, so the same key set always
splits the same way, and a change to one key moves at most the boundaries next to
it: the ranges before and after keep their ids. (A size cut is the exception: adding
or removing a key before it moves it, and the ranges up to the next hash boundary
with it.)
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

from lakefs_core.graveler.encoding import range_id_of_encodings, record_encoding
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
