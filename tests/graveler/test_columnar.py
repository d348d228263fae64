"""The column-wise apply against the per-record one it replaced: same ranges, ids, files.

``reference_apply`` is the former ``RangeManager.apply``: every row of a touched
range is decoded into a record, encoded with ``record_encoding``, hashed for its
boundary and added to the per-record ``MetarangeBuilder``; files come from
``encode_range``. It writes nothing, so the files the manager wrote are compared
with the bytes the reference would have written.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakefs_core.block.base import BlockStore
from lakefs_core.block.local import LocalBlockStore
from lakefs_core.errors import StorageError
from lakefs_core.graveler import (
    AddressType,
    Entry,
    EntryRecord,
    RangeInfo,
    RangeManager,
    range_id,
)
from lakefs_core.graveler.chunking import MetarangeBuilder, TableMetarangeBuilder, is_boundary
from lakefs_core.graveler.encoding import (
    EMPTY_METARANGE_ID,
    metarange_id,
    payload_of,
    range_id_of_payload,
    record_encoding,
    table_record_encodings,
)
from lakefs_core.graveler.rangefile import (
    decode_metarange,
    decode_range,
    decode_range_table,
    encode_range,
    encode_range_table,
    range_table,
)
from tests.graveler.support import entries, entry, paths

_namespaces = itertools.count()


@dataclass
class Reference:
    metarange_id: str
    ranges: list[RangeInfo]
    files: dict[str, bytes]
    written: int
    reused: int


def reference_apply(store: BlockStore, rm: RangeManager, base_id: str,
                    changes: Sequence[EntryRecord]) -> Reference:
    """The per-record apply, as ``RangeManager.apply`` was before ranges went columnar."""
    def read(file_id: str) -> bytes:
        return store.get(rm.range_address(file_id))

    ranges = () if base_id == EMPTY_METARANGE_ID else decode_metarange(read(base_id))
    files: dict[str, bytes] = {}
    builder = MetarangeBuilder(rm.raggedness, rm.max_range_entries,
                               lambda info, records: files.setdefault(
                                   info.id, encode_range(records)) and None)
    pending = iter(changes)
    change = next(pending, None)
    old: Sequence[EntryRecord] = ()
    pos = i = 0
    changed = False
    while True:
        if pos >= len(old) and i < len(ranges):
            info = ranges[i]
            if builder.at_cut and (change is None or (
                    change.path > info.max_key and builder.ends_with_cut(info))):
                builder.reuse(info)
                i += 1
                continue
            if change is None or change.path >= info.min_key:
                old, pos = decode_range(read(info.id)), 0
                i += 1
                continue
        record = old[pos] if pos < len(old) else None
        if change is None:
            if record is None:
                break
            builder.add(record)
            pos += 1
        elif record is not None and record.path < change.path:
            builder.add(record)
            pos += 1
        else:
            if record is not None and record.path == change.path:
                pos += 1
                changed = changed or record.entry != change.entry
            else:
                changed = changed or change.entry is not None
            if change.entry is not None:
                builder.add(change)
            change = next(pending, None)
    new_ranges = builder.finish()
    if not changed:
        return Reference(base_id, list(ranges), {}, 0, len(ranges))
    old_ids = {r.id for r in ranges}
    reused = sum(1 for r in new_ranges if r.id in old_ids)
    return Reference(metarange_id(new_ranges), new_ranges, files, len(new_ranges) - reused,
                     reused)


def assert_same_as_reference(rm: RangeManager, base_id: str,
                             changes: Sequence[EntryRecord]) -> str:
    expected = reference_apply(rm.store, rm, base_id, changes)
    result = rm.apply(base_id, changes)
    assert result.metarange_id == expected.metarange_id
    assert (result.ranges_written, result.ranges_reused) == (expected.written, expected.reused)
    assert list(rm.get_metarange(result.metarange_id).ranges) == expected.ranges
    for info in rm.new_ranges(base_id, result.metarange_id):
        assert rm.store.get(rm.range_address(info.id)) == expected.files[info.id]
    return result.metarange_id


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> LocalBlockStore:
    return LocalBlockStore(str(tmp_path_factory.mktemp("graveler-columnar")))


def manager(store: BlockStore, raggedness: int, max_range_entries: int | None,
            namespace: str | None = None) -> RangeManager:
    return RangeManager(store, namespace or f"local://columnar-{next(_namespaces)}",
                        raggedness=raggedness, max_range_entries=max_range_entries)


# --- encodings ----------------------------------------------------------------------
odd_entries = st.builds(
    Entry,
    address=st.text(max_size=12),
    size=st.integers(min_value=-(2**63), max_value=2**63 - 1),
    etag=st.text(max_size=8),
    mtime=st.one_of(st.floats(), st.sampled_from([-0.0, math.nan, -math.nan, math.inf, 7])),
    address_type=st.sampled_from(list(AddressType)),
    content_type=st.text(max_size=6),
    metadata=st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3),
)


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=6), odd_entries, max_size=20))
def test_table_encodings_equal_the_record_encodings(model: dict[str, Entry]) -> None:
    records = [EntryRecord(p, model[p]) for p in sorted(model)]
    table = decode_range_table(encode_range(records))  # as read back from a file
    encodings = table_record_encodings(table)
    read_back = decode_range(encode_range(records))
    assert encodings.to_pylist() == [record_encoding(r) for r in read_back]
    assert bytes(payload_of(encodings)) == b"".join(record_encoding(r) for r in read_back)
    if len(records) >= 2:
        middle = encodings.slice(1, len(records) - 2)
        assert bytes(payload_of(middle)) == b"".join(
            record_encoding(r) for r in read_back[1:-1])
    assert encode_range_table(table) == encode_range(records)
    assert encode_range_table(range_table(records)) == encode_range(records)


def test_range_ids_from_payload_and_records_agree() -> None:
    records = [EntryRecord(f"p/ü{i:02d}", entry(f"p/{i}", metadata={"k": str(i)} if i % 3 else {}))
               for i in range(50)]
    table = decode_range_table(encode_range(records))
    assert range_id_of_payload(payload_of(table_record_encodings(table))) == range_id(records)


def test_corrupt_range_tables_are_refused() -> None:
    good = range_table([EntryRecord("a", entry("a"))])
    bad_type = good.set_column(2, "address_type", pa.array(["elsewhere"]))
    bad_json = good.set_column(7, "metadata", pa.array(["{not json"]))
    with pytest.raises(StorageError, match="address type"):
        decode_range_table(encode_range_table(bad_type))
    with pytest.raises(StorageError, match="metadata"):
        table_record_encodings(decode_range_table(encode_range_table(bad_json)))


# --- apply against the reference ------------------------------------------------------
optional_entries = st.one_of(st.none(), entries, entries.map(
    lambda e: replace(e, metadata={"ü": "v", "a": ""})))
#: (raggedness, max_range_entries): content cuts, frequent size cuts, size cuts only
OPTIONS = [(4, None), (3, 5), (8, 4), (10**12, 6)]


@st.composite
def near(draw: st.DrawFn, keys: list[str]) -> str:
    """A path at a key, or just before or after it (at the edges of its range)."""
    k = draw(st.sampled_from(keys))
    return draw(st.sampled_from([k, k + "0", k[:-1], k[:-1] + "a", k + "\U0001f600"]))


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(OPTIONS), st.dictionaries(paths, entries, max_size=60), st.data())
def test_apply_matches_the_per_record_apply(
    store: LocalBlockStore, options: tuple[int, int | None], model: dict[str, Entry],
    data: st.DataObject,
) -> None:
    rm = manager(store, *options)
    base = assert_same_as_reference(rm, rm.empty_metarange(),
                                    [EntryRecord(p, model[p]) for p in sorted(model)])
    edges = [k for r in rm.get_metarange(base).ranges for k in (r.min_key, r.max_key)]
    changed_paths = data.draw(st.sets(
        st.one_of(paths, near(edges)) if edges else paths, max_size=25))
    changes = [EntryRecord(p, data.draw(optional_entries)) for p in sorted(changed_paths)]
    fresh = manager(store, *options, namespace=rm.namespace)  # cold caches
    after = assert_same_as_reference(fresh, base, changes)
    # and once more on the result, from warm caches (ranges the manager wrote itself)
    more = [EntryRecord(p, None) for p in sorted(data.draw(st.sets(
        st.sampled_from(sorted(model)) if model else paths, max_size=5)))]
    assert_same_as_reference(fresh, after, more)


def keys_of(n: int, width: int = 0) -> list[str]:
    return [f"t/part={i // 100:03d}/é-{i:05d}{'x' * width}" for i in range(n)]


def test_a_metarange_cut_otherwise_is_rewritten_row_by_row(store: LocalBlockStore) -> None:
    """A base cut with other options is not trusted: every opened row is hashed, as the
    per-record apply did, and the results agree."""
    keys = keys_of(400)
    other = manager(store, 10**12, 7)  # size cuts only: no max key needs to be a boundary
    base = other.apply(other.empty_metarange(),
                       [EntryRecord(k, entry(k)) for k in keys]).metarange_id
    rm = manager(store, 4, 8, namespace=other.namespace)
    changes = [EntryRecord(keys[i], entry(keys[i], 1) if i % 2 else None)
               for i in range(3, 400, 37)]
    assert_same_as_reference(rm, base, changes)


def test_dense_and_batched_changes(store: LocalBlockStore,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Changes on every other row, in batches smaller than a range, and a range large
    enough for Parquet to give up dictionary-encoding its paths (over 1 MiB)."""
    monkeypatch.setattr("lakefs_core.graveler.ranges.CHANGE_BATCH", 7)
    keys = keys_of(4_000, width=300)
    rm = manager(store, 10**12, 10**9)
    base = assert_same_as_reference(rm, rm.empty_metarange(),
                                    [EntryRecord(k, entry(k)) for k in keys])
    changes: Iterator[EntryRecord] = (
        EntryRecord(k + suffix, entry(k, 2) if n % 3 else None)
        for n, k in enumerate(keys[::2]) for suffix in ("", "0"))
    assert_same_as_reference(manager(store, 10**12, 10**9, rm.namespace), base, list(changes))
    small = manager(store, 50, 120)
    base = assert_same_as_reference(small, small.empty_metarange(),
                                    [EntryRecord(k, entry(k)) for k in keys[:1500]])
    changes = (EntryRecord(k, entry(k, 3) if n % 4 else None)
               for n, k in enumerate(keys[:1500:2]))
    assert_same_as_reference(manager(store, 50, 120, small.namespace), base, list(changes))


# --- where the encodings are made -----------------------------------------------------
def test_runs_without_encodings_build_the_same_ranges() -> None:
    """The builder encodes a completed range's table itself when a run came without its
    encodings (as an apply passes the rows of a range it read): the same ranges, and
    the sink gets encodings that hash to the range's id either way."""
    records = [EntryRecord(k, entry(k, metadata={"k": k} if i % 5 == 0 else {}))
               for i, k in enumerate(keys_of(300))]
    table = range_table(records)
    encodings = table_record_encodings(table)
    cuts = [i for i, r in enumerate(records) if is_boundary(r.path, 7)]

    def build(runs: Sequence[tuple[int, int, bool]]
              ) -> tuple[list[RangeInfo], list[tuple[RangeInfo, pa.Table, str]]]:
        sunk: list[tuple[RangeInfo, pa.Table, str]] = []

        def sink(info: RangeInfo, t: pa.Table, e: pa.ChunkedArray | None) -> None:
            assert e is not None
            sunk.append((info, t, range_id_of_payload(*(payload_of(c) for c in e.chunks))))

        builder = TableMetarangeBuilder(7, 40, sink)
        for start, end, given_encodings in runs:
            builder.add(table.slice(start, end - start),
                        encodings.slice(start, end - start) if given_encodings else None,
                        [c - start for c in cuts if start <= c < end])
        return builder.finish(), sunk

    expected, expected_sunk = build([(0, 300, True)])
    assert len(expected) > 5
    for runs in ([(0, 300, False)], [(0, 17, True), (17, 170, False), (170, 300, True)],
                 [(0, 1, False), (1, 2, True), (2, 299, True), (299, 300, False)]):
        ranges, sunk = build(runs)
        assert ranges == expected
        assert [info for info, _, _ in sunk] == [info for info, _, _ in expected_sunk]
        assert all(t.equals(et) for (_, t, _), (_, et, _) in zip(sunk, expected_sunk,
                                                                   strict=True))
        assert all(info.id == h for info, _, h in sunk)


def test_a_range_read_for_a_rewrite_is_not_encoded_on_its_own(store: LocalBlockStore) -> None:
    """An apply from cold caches reads the touched range without encoding it: the new
    range is encoded where it is completed, once. From warm caches the kept encodings
    are used, with the same result."""
    keys = keys_of(200)
    rm = manager(store, 10**12, 10**9)  # one range
    base = rm.apply(rm.empty_metarange(), [EntryRecord(k, entry(k)) for k in keys]).metarange_id
    (old,) = rm.get_metarange(base).ranges
    cold = manager(store, 10**12, 10**9, namespace=rm.namespace)
    changes = [EntryRecord(keys[7], entry(keys[7], 1))]
    after = assert_same_as_reference(cold, base, changes)
    (new,) = cold.get_metarange(after).ranges
    assert cold._range(old.id).known_encodings is None
    assert cold._range(new.id).known_encodings is not None
    assert assert_same_as_reference(rm, base, changes) == after  # warm: encodings kept
    assert rm._range(old.id).known_encodings is not None
