"""RangeManager behaviour, on every blockstore (local files and S3 on moto)."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakefs_core.block.base import BlockStore
from lakefs_core.block.local import LocalBlockStore
from lakefs_core.errors import (
    MergeConflictError,
    RangeNotFoundError,
    StorageError,
    ValidationError,
)
from lakefs_core.graveler import (
    EMPTY_METARANGE_ID,
    AddressType,
    DiffType,
    Entry,
    EntryRecord,
    RangeManager,
    range_id,
)
from lakefs_core.graveler.chunking import is_boundary
from lakefs_core.graveler.rangefile import encode_range
from lakefs_core.graveler.ranges import DIFF_READ_AHEAD, RangeCache
from tests.graveler.support import build, contents, entry, record


@pytest.fixture
def store_ns(blockstore_namespace: tuple[BlockStore, str]) -> tuple[BlockStore, str]:
    return blockstore_namespace


@pytest.fixture
def rm(store_ns: tuple[BlockStore, str]) -> RangeManager:
    store, ns = store_ns
    return RangeManager(store, ns, raggedness=8)


def fresh(rm: RangeManager, **kwargs: int) -> RangeManager:
    """Another manager on the same namespace, with cold caches."""
    params = {"raggedness": rm.raggedness, "max_range_entries": rm.max_range_entries, **kwargs}
    return RangeManager(rm.store, rm.namespace, **params)


def lakefs_files(rm: RangeManager) -> set[str]:
    return {o.address for o in rm.store.list(rm.range_address(""))}


KEYS = [f"data/part={p}/file-{i:03d}.parquet" for p in "abcd" for i in range(30)]


@pytest.fixture
def repo(rm: RangeManager) -> str:
    return build(rm, {k: entry(k) for k in KEYS})


# --- empty and basic apply ----------------------------------------------------------
def test_empty_metarange_is_written_and_readable(rm: RangeManager) -> None:
    mr = rm.empty_metarange()
    assert mr == EMPTY_METARANGE_ID
    assert rm.store.exists(rm.range_address(mr))
    assert fresh(rm).get_metarange(mr).ranges == ()
    assert list(rm.iterate(mr)) == []
    assert rm.get_entry(mr, "x") is None


def test_apply_adds_changes_and_deletes(rm: RangeManager, repo: str) -> None:
    changes = [
        record("data/part=a/file-000.parquet", 1),   # change
        EntryRecord("data/part=a/file-001.parquet", None),  # delete
        record("data/part=a/file-001x.parquet"),     # add
        EntryRecord("data/part=z/missing", None),    # delete of a missing path: no-op
        record("zzz/new"),                            # add after every key
    ]
    result = rm.apply(repo, changes)
    expected = {k: entry(k) for k in KEYS}
    expected["data/part=a/file-000.parquet"] = entry("data/part=a/file-000.parquet", 1)
    del expected["data/part=a/file-001.parquet"]
    expected["data/part=a/file-001x.parquet"] = entry("data/part=a/file-001x.parquet")
    expected["zzz/new"] = entry("zzz/new")
    assert contents(fresh(rm), result.metarange_id) == expected
    # the same state built from scratch has the same id: boundaries depend on keys only
    assert build(fresh(rm), expected) == result.metarange_id
    assert result.ranges_written >= 1 and result.ranges_reused >= 1


def test_apply_without_effect_returns_the_same_id(rm: RangeManager, repo: str) -> None:
    before = lakefs_files(rm)
    same = [record(KEYS[3]), EntryRecord("data/part=b/x", None), EntryRecord("nope", None)]
    result = rm.apply(repo, same)
    assert result.metarange_id == repo and result.ranges_written == 0
    assert rm.apply(repo, []).metarange_id == repo
    assert lakefs_files(rm) == before


def test_deleting_everything_gives_the_empty_metarange(rm: RangeManager, repo: str) -> None:
    result = rm.apply(repo, [EntryRecord(k, None) for k in KEYS])
    assert result.metarange_id == EMPTY_METARANGE_ID
    assert result.ranges_written == result.ranges_reused == 0
    assert rm.get_metarange(result.metarange_id).ranges == ()
    assert rm.store.exists(rm.range_address(EMPTY_METARANGE_ID))


@pytest.mark.parametrize("changes", [
    [record("b"), record("a")],
    [record("a"), EntryRecord("a", None)],
])
def test_apply_refuses_unsorted_or_repeated_paths(
    rm: RangeManager, changes: list[EntryRecord]
) -> None:
    with pytest.raises(ValidationError, match="sorted"):
        rm.apply(rm.empty_metarange(), changes)


def test_ranges_are_cut_by_key_hash_and_size(rm: RangeManager, repo: str) -> None:
    ranges = rm.get_metarange(repo).ranges
    assert len(ranges) > 5
    for info in ranges[:-1]:
        assert is_boundary(info.max_key, rm.raggedness) or info.count == rm.max_range_entries
    for info in ranges:
        keys = [r.path for r in rm.read_range(info.id)]
        assert not any(is_boundary(k, rm.raggedness) for k in keys[:-1])
        assert (info.min_key, info.max_key, info.count) == (keys[0], keys[-1], len(keys))
        assert info.id == range_id(fresh(rm).read_range(info.id))  # as decoded from the file
    capped = fresh(rm, raggedness=10**12, max_range_entries=7)
    mr = build(capped, {k: entry(k) for k in KEYS})
    counts = [r.count for r in capped.get_metarange(mr).ranges]
    assert counts == [7] * (len(KEYS) // 7) + [len(KEYS) % 7]


# --- cost: only touched ranges are read or written ---------------------------------
def test_apply_and_diff_never_read_untouched_ranges(rm: RangeManager, repo: str) -> None:
    key = "data/part=c/file-017.parquet"
    ranges = rm.get_metarange(repo).ranges
    touched = next(r for r in ranges if r.min_key <= key <= r.max_key)
    for info in ranges:
        if info.id != touched.id:
            rm.store.delete(rm.range_address(info.id))
    cold = fresh(rm)
    before = lakefs_files(cold)
    result = cold.apply(repo, [record(key, 1)])
    assert (result.ranges_written, result.ranges_reused) == (1, len(ranges) - 1)
    written = lakefs_files(cold) - before
    new_range = cold.new_ranges(repo, result.metarange_id)
    assert written == {cold.range_address(result.metarange_id),
                       cold.range_address(new_range[0].id)}
    diff = list(fresh(rm).diff(repo, result.metarange_id))
    assert [(d.path, d.type) for d in diff] == [(key, DiffType.CHANGED)]
    assert diff[0].left == entry(key) and diff[0].right == entry(key, 1)


class SlowGets:
    """A blockstore whose reads take ``delay`` seconds, counting reads per address and
    the most that ran at once."""

    def __init__(self, inner: BlockStore, delay: float) -> None:
        self.inner, self.delay = inner, delay
        self.gets: Counter[str] = Counter()
        self.active = self.most = 0
        self._lock = threading.Lock()

    def get(self, address: str, byte_range: tuple[int, int] | None = None) -> bytes:
        with self._lock:
            self.gets[address] += 1
            self.active += 1
            self.most = max(self.most, self.active)
        try:
            time.sleep(self.delay)
            return self.inner.get(address, byte_range)
        finally:
            with self._lock:
                self.active -= 1

    def idle(self) -> None:
        """Wait until no read has run for a while (bounded)."""
        quiet_since = time.monotonic()
        deadline = quiet_since + 10
        while time.monotonic() < deadline:
            if self.active:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since > 5 * self.delay:
                return
            time.sleep(self.delay / 4)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_diff_reads_the_ranges_it_opens_ahead_and_once_each(rm: RangeManager, repo: str) -> None:
    ranges = rm.get_metarange(repo).ranges
    assert len(ranges) > 2 * DIFF_READ_AHEAD
    other = rm.apply(repo, [record(r.max_key, 1) for r in ranges]).metarange_id

    def slow_manager() -> tuple[RangeManager, SlowGets]:
        slow = SlowGets(rm.store, 0.02)
        return RangeManager(cast(BlockStore, slow), rm.namespace,
                            raggedness=rm.raggedness), slow

    cold, slow = slow_manager()
    diff = list(cold.diff(repo, other))
    assert [(d.path, d.type) for d in diff] == [(r.max_key, DiffType.CHANGED) for r in ranges]
    assert set(slow.gets.values()) == {1}  # nothing read twice
    assert len(slow.gets) == 2 + 2 * len(ranges)  # two metaranges, every range of both
    assert slow.most >= 2  # the reads overlapped
    # a diff given up after its first difference reads only a few ranges more
    cold, slow = slow_manager()
    differences = cold.diff(repo, other)
    assert next(differences).path == ranges[0].max_key
    differences.close()
    slow.idle()
    assert len(slow.gets) <= 2 + 2 + DIFF_READ_AHEAD
    # a diff under a prefix reads no range that starts past it
    cold, slow = slow_manager()
    prefix = "data/part=b/"
    assert [d.path for d in cold.diff(repo, other, prefix=prefix)] == [
        r.max_key for r in ranges if r.max_key.startswith(prefix)]
    slow.idle()
    past = [r for r in (*ranges, *rm.get_metarange(other).ranges)
            if r.min_key > prefix and not r.min_key.startswith(prefix)]
    assert past and not {rm.range_address(r.id) for r in past} & set(slow.gets)


def test_apply_reads_the_ranges_it_rewrites_once_and_no_other(
        rm: RangeManager, repo: str) -> None:
    ranges = rm.get_metarange(repo).ranges
    assert len(ranges) > 6
    # every third range gets an update; some changes fall between two ranges (new paths
    # after a range's last one), before ranges that are also touched or not
    updated = ranges[::3]
    changes = [record(r.max_key, 1) for r in updated]
    changes += [record(r.max_key + "~", 2) for r in ranges[1:-1:4]]
    changes.sort(key=lambda c: c.path)
    model = contents(rm, repo) | {c.path: c.entry for c in changes if c.entry is not None}
    slow = SlowGets(rm.store, 0.02)
    cold = RangeManager(cast(BlockStore, slow), rm.namespace, raggedness=rm.raggedness)
    result = cold.apply(repo, changes)
    assert result.metarange_id == build(fresh(rm), model)  # as if written from scratch
    slow.idle()
    assert set(slow.gets.values()) == {1}  # nothing read twice
    kept = {r.id for r in rm.get_metarange(result.metarange_id).ranges}
    rewritten = {r.id for r in ranges} - kept
    assert {r.id for r in updated} <= rewritten
    # the ranges it rewrote (those changes fall in, and those after new rows that do
    # not end where the builder cuts), and no range it took over unread
    assert set(slow.gets) == {rm.range_address(repo)} | {
        rm.range_address(i) for i in rewritten}


def _diff_count(root: str, left: str, right: str) -> None:
    """In a child process: a cold diff with reads ahead; exit status 0 if it is whole."""
    rm = RangeManager(LocalBlockStore(root), "local://fork", raggedness=8)
    os._exit(0 if len(list(rm.diff(left, right))) == len(KEYS) else 1)


def test_a_forked_process_reads_ahead_on_threads_of_its_own(tmp_path: Any) -> None:
    rm = RangeManager(LocalBlockStore(str(tmp_path)), "local://fork", raggedness=8)
    base = build(rm, {k: entry(k) for k in KEYS})
    other = rm.apply(base, [record(k, 1) for k in KEYS]).metarange_id
    assert len(list(fresh(rm).diff(base, other))) == len(KEYS)  # the pool runs here
    child = multiprocessing.get_context("fork").Process(
        target=_diff_count, args=(str(tmp_path), base, other))
    child.start()
    child.join(60)
    if child.is_alive():  # stuck on reads queued to threads that the fork left behind
        child.kill()
        child.join()
    assert child.exitcode == 0


def test_new_ranges_lists_what_a_mirror_must_check(rm: RangeManager, repo: str) -> None:
    result = rm.apply(repo, [record("data/part=a/file-000.parquet", 2), record("zz")])
    new = rm.new_ranges(repo, result.metarange_id)
    old_ids = {r.id for r in rm.get_metarange(repo).ranges}
    assert new and all(r.id not in old_ids for r in new)
    assert len(new) == result.ranges_written
    assert rm.new_ranges(repo, repo) == []
    assert rm.new_ranges(EMPTY_METARANGE_ID, repo) == list(rm.get_metarange(repo).ranges)


# --- reading ------------------------------------------------------------------------
def test_iterate_with_prefix_and_after(rm: RangeManager, repo: str) -> None:
    def paths(prefix: str = "", after: str = "") -> list[str]:
        return [r.path for r in fresh(rm).iterate(repo, prefix=prefix, after=after)]

    assert paths() == KEYS
    assert paths(prefix="data/part=b/") == [k for k in KEYS if k.startswith("data/part=b/")]
    assert paths(after=KEYS[70]) == KEYS[71:]
    assert paths(after="data/part=b/file-0105") == [k for k in KEYS if k > "data/part=b/file-0105"]
    assert paths(prefix="data/part=c/", after="data/part=c/file-027.parquet") == [
        "data/part=c/file-028.parquet", "data/part=c/file-029.parquet"]
    assert paths(prefix="data/part=c/", after="data/part=a/x") == paths(prefix="data/part=c/")
    assert paths(prefix="data/part=c/", after="data/part=d/") == []
    assert paths(prefix="nothing/") == []
    assert paths(prefix="data/part=d/file-029.parquet") == ["data/part=d/file-029.parquet"]


def test_get_entry(rm: RangeManager, repo: str) -> None:
    cold = fresh(rm)
    for key in (KEYS[0], KEYS[77], KEYS[-1]):
        assert cold.get_entry(repo, key) == entry(key)
    for missing in ("", "a", "data/part=a/file-000.parquetx", "zzz"):
        assert cold.get_entry(repo, missing) is None


def test_entries_round_trip_every_field(rm: RangeManager) -> None:
    special = Entry(address="s3://other/imported/ü.bin", size=2**62, etag='"abc-2"',
                    mtime=-1.5e-7, address_type=AddressType.FULL, content_type="text/csv",
                    metadata={"b": "2", "a": "ü", "": ""})
    mr = build(rm, {"p/ü": special, "p/plain": entry("p/plain")})
    assert fresh(rm).get_entry(mr, "p/ü") == special
    assert fresh(rm).get_entry(mr, "p/plain") == entry("p/plain")


def test_missing_files_raise_range_not_found(rm: RangeManager, repo: str) -> None:
    with pytest.raises(RangeNotFoundError, match="f" * 64):
        rm.get_metarange("f" * 64)
    with pytest.raises(RangeNotFoundError):
        rm.iterate("f" * 64)  # raised at call, not at the first next()
    first = rm.get_metarange(repo).ranges[0]
    rm.store.delete(rm.range_address(first.id))
    with pytest.raises(RangeNotFoundError, match=first.id):
        fresh(rm).read_range(first.id)
    with pytest.raises(RangeNotFoundError, match=first.id):
        list(fresh(rm).iterate(repo))


def test_corrupt_files_raise_storage_error(rm: RangeManager) -> None:
    rm.store.put(rm.range_address("c" * 64), b"not parquet")
    with pytest.raises(StorageError):
        rm.read_range("c" * 64)
    with pytest.raises(StorageError):
        rm.get_metarange("c" * 64)


def test_range_cache_is_bounded(rm: RangeManager, repo: str) -> None:
    a, b = rm.get_metarange(repo).ranges[:2]
    cached = fresh(rm, cache_size=1)
    records = cached.read_range(a.id)
    rm.store.delete(rm.range_address(a.id))
    assert cached.read_range(a.id) == records  # served from the cache
    cached.read_range(b.id)  # evicts a
    with pytest.raises(RangeNotFoundError):
        cached.read_range(a.id)


def test_one_range_cache_bounds_every_namespace_sharing_it(rm: RangeManager,
                                                            repo: str) -> None:
    """Managers of several namespaces (a server's repositories) share one bound, and
    a range is cached per namespace: another namespace's copy never answers for it."""
    a, b = rm.get_metarange(repo).ranges[:2]
    cache = RangeCache(max_ranges=1)
    first = RangeManager(rm.store, rm.namespace, raggedness=rm.raggedness, cache=cache)
    other_ns = rm.namespace.rstrip("/") + "-other"
    second = RangeManager(rm.store, other_ns, raggedness=rm.raggedness, cache=cache)
    records = first.read_range(a.id)
    with pytest.raises(RangeNotFoundError):
        second.read_range(a.id)  # not there, whatever the other namespace cached
    rm.store.put(second.range_address(b.id), rm.store.get(rm.range_address(b.id)))
    second.read_range(b.id)  # evicts the first manager's range: one bound for both
    rm.store.delete(rm.range_address(a.id))
    with pytest.raises(RangeNotFoundError):
        first.read_range(a.id)
    assert records
    b_records = second.read_range(b.id)
    rm.store.delete(second.range_address(b.id))
    first.forget_cached()  # drops the first namespace's ranges only
    assert second.read_range(b.id) == b_records  # still served from the shared cache
    second.forget_cached()
    with pytest.raises(RangeNotFoundError):
        second.read_range(b.id)  # its own namespace's ranges were dropped


# --- file format --------------------------------------------------------------------
def _table(rm: RangeManager, file_id: str) -> pa.Table:
    address = rm.range_address(file_id)
    if address.startswith("local://"):
        local_root = rm.store.root  # type: ignore[attr-defined]
        return pq.read_table(f"{local_root}/{address.removeprefix('local://')}")
    return pq.read_table(pa.BufferReader(rm.store.get(address)))


def test_files_are_plain_parquet(rm: RangeManager) -> None:
    meta = {"k2": "v", "k1": "w"}
    mr = build(rm, {"a": entry("a", metadata=meta), "b": entry("b", address_type=AddressType.FULL)})
    info = rm.get_metarange(mr).ranges[0]
    table = _table(rm, info.id)
    assert table.column_names == ["path", "address", "address_type", "size", "etag", "mtime",
                                  "content_type", "metadata"]
    assert table.schema.field("size").type == pa.int64()
    assert table.schema.field("mtime").type == pa.float64()
    rows = table.to_pylist()
    assert [r["path"] for r in rows] == ["a", "b"]
    assert rows[0]["address"] == entry("a").address and rows[0]["size"] == entry("a").size
    assert rows[0]["metadata"] == '{"k1":"w","k2":"v"}'
    assert [r["address_type"] for r in rows] == ["relative", "full"]
    assert table.schema.metadata[b"lakefs_type"] == b"range"

    mtable = _table(rm, mr)
    assert mtable.column_names == ["range_id", "min_key", "max_key", "count", "estimated_size"]
    assert mtable.to_pylist() == [
        {"range_id": r.id, "min_key": r.min_key, "max_key": r.max_key, "count": r.count,
         "estimated_size": r.estimated_size} for r in rm.get_metarange(mr).ranges]


# --- diff ---------------------------------------------------------------------------
def test_diff_reports_added_removed_changed(rm: RangeManager, repo: str) -> None:
    other = rm.apply(repo, [
        record("data/part=a/file-000.parquet", 1),
        EntryRecord("data/part=b/file-010.parquet", None),
        record("data/part=b/file-010a.parquet"),
        record("data/part=e/file-000.parquet"),
    ]).metarange_id
    diff = list(fresh(rm).diff(repo, other))
    assert [(d.path, d.type) for d in diff] == [
        ("data/part=a/file-000.parquet", DiffType.CHANGED),
        ("data/part=b/file-010.parquet", DiffType.REMOVED),
        ("data/part=b/file-010a.parquet", DiffType.ADDED),
        ("data/part=e/file-000.parquet", DiffType.ADDED),
    ]
    assert diff[1].left == entry("data/part=b/file-010.parquet") and diff[1].right is None
    assert diff[2].left is None
    assert [d.path for d in rm.diff(repo, other, prefix="data/part=b/")] == [
        "data/part=b/file-010.parquet", "data/part=b/file-010a.parquet"]
    assert [d.path for d in rm.diff(repo, other, after="data/part=b/file-010.parquet")] == [
        "data/part=b/file-010a.parquet", "data/part=e/file-000.parquet"]
    reverse = list(rm.diff(other, repo))
    assert [d.type for d in reverse] == [DiffType.CHANGED, DiffType.ADDED, DiffType.REMOVED,
                                         DiffType.REMOVED]
    assert list(rm.diff(repo, repo)) == []
    assert len(list(rm.diff(EMPTY_METARANGE_ID, repo))) == len(KEYS)


# --- merge --------------------------------------------------------------------------
def test_merge_applies_source_changes_onto_dest(rm: RangeManager, repo: str) -> None:
    source = rm.apply(repo, [record("data/part=a/file-001.parquet", 1), record("src")])
    dest = rm.apply(repo, [EntryRecord("data/part=d/file-001.parquet", None), record("dst")])
    merged = fresh(rm).merge(repo, source.metarange_id, dest.metarange_id)
    assert merged.changes == 2
    expected = {k: entry(k) for k in KEYS}
    expected["data/part=a/file-001.parquet"] = entry("data/part=a/file-001.parquet", 1)
    del expected["data/part=d/file-001.parquet"]
    expected.update({"src": entry("src"), "dst": entry("dst")})
    assert contents(rm, merged.metarange_id) == expected
    # nothing new on source: dest comes back unchanged
    again = rm.merge(source.metarange_id, source.metarange_id, merged.metarange_id)
    assert again.metarange_id == merged.metarange_id and again.changes == 0


def test_merge_conflicts_and_strategies(rm: RangeManager, repo: str) -> None:
    k1, k2, k3 = KEYS[5], KEYS[40], KEYS[110]
    source = rm.apply(repo, [record(k1, 1), record(k2, 1), record(k3, 7)]).metarange_id
    dest = rm.apply(repo, [record(k1, 2), EntryRecord(k2, None), record(k3, 7)]).metarange_id
    with pytest.raises(MergeConflictError) as info:
        rm.merge(repo, source, dest)
    assert info.value.paths == [k1, k2]  # k3 changed the same way on both sides
    src_wins = rm.merge(repo, source, dest, strategy="source-wins")
    assert src_wins.changes == 2
    assert rm.get_entry(src_wins.metarange_id, k1) == entry(k1, 1)
    assert rm.get_entry(src_wins.metarange_id, k2) == entry(k2, 1)
    dst_wins = rm.merge(repo, source, dest, strategy="dest-wins")
    assert dst_wins.metarange_id == dest and dst_wins.changes == 0
    with pytest.raises(ValidationError, match="strategy"):
        rm.merge(repo, source, dest, strategy="theirs")


def test_merge_of_identical_changes_is_a_no_op(rm: RangeManager, repo: str) -> None:
    changes = [record(KEYS[1], 3), EntryRecord(KEYS[2], None)]
    side = rm.apply(repo, changes).metarange_id
    result = rm.merge(repo, side, side)
    assert result.metarange_id == side and result.changes == 0


def test_replace_mtime_keeps_entry_equal_and_changes_detected(rm: RangeManager) -> None:
    e = entry("a")
    mr = build(rm, {"a": e})
    assert rm.apply(mr, [EntryRecord("a", dataclasses.replace(e))]).metarange_id == mr
    changed = rm.apply(mr, [EntryRecord("a", dataclasses.replace(e, mtime=e.mtime + 1))])
    assert changed.metarange_id != mr


def test_a_range_file_cannot_hold_tombstones() -> None:
    with pytest.raises(ValidationError, match="tombstone"):
        encode_range([record("a"), EntryRecord("b", None)])


def test_one_manager_serves_many_threads(rm: RangeManager, repo: str) -> None:
    def work(n: int) -> tuple[str, list[str]]:
        changes = [record(k, n + 1) for k in KEYS[n::7]]
        result = rm.apply(repo, changes).metarange_id
        return result, [d.path for d in rm.diff(repo, result)]

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(work, range(7)))
    for n, (result, paths) in enumerate(results):
        assert paths == KEYS[n::7]
        assert result == build(fresh(rm), {k: entry(k, n + 1 if k in paths else 0)
                                           for k in KEYS})


def test_the_same_object_written_twice_is_not_a_conflict(rm: RangeManager, repo: str) -> None:
    """Both sides wrote the same bytes (same ETag, type and metadata) to different
    physical addresses: the same change, so no conflict; anything else differing is."""
    k1, k2, k3 = KEYS[3], KEYS[50], KEYS[90]
    same_src = entry(k1, 4, address="data/src-copy", mtime=1.0)
    same_dst = entry(k1, 4, address="data/dst-copy", mtime=2.0)
    retyped = dataclasses.replace(entry(k2, 4), content_type="text/csv")
    relabelled = dataclasses.replace(entry(k3, 4), metadata={"owner": "b"})
    source = rm.apply(repo, [EntryRecord(k1, same_src), EntryRecord(k2, entry(k2, 4)),
                             EntryRecord(k3, entry(k3, 4))]).metarange_id
    dest = rm.apply(repo, [EntryRecord(k1, same_dst), EntryRecord(k2, retyped),
                           EntryRecord(k3, relabelled)]).metarange_id
    with pytest.raises(MergeConflictError) as info:
        rm.merge(repo, source, dest)
    assert info.value.paths == [k2, k3]
    # with only the same object on both sides, dest is the result as it is
    only_same = rm.apply(repo, [EntryRecord(k1, same_dst)]).metarange_id
    source_k1 = rm.apply(repo, [EntryRecord(k1, same_src)]).metarange_id
    result = rm.merge(repo, source_k1, only_same)
    assert (result.metarange_id, result.changes) == (only_same, 0)
    assert rm.get_entry(result.metarange_id, k1) == same_dst
    # source-wins does not rewrite an entry that is the same object
    result = rm.merge(repo, source_k1, only_same, strategy="source-wins")
    assert result.changes == 0


def test_range_cache_bounds_memory_also_after_ranges_make_their_records() -> None:
    """The range cache is bounded by bytes: a range weighs its Arrow table when read,
    and more once it makes its records and encodings, which can push others out."""
    from lakefs_core.graveler.rangefile import range_table
    from lakefs_core.graveler.ranges import _Range, n_records_bytes

    def a_range(tag: str) -> _Range:
        return _Range(range_table([record(f"{tag}/{i:05d}")
                                   for i in range(500)]))

    first, second = a_range("a"), a_range("b")
    table_bytes = first.nbytes()
    assert table_bytes == first.table.nbytes
    with_records = table_bytes + n_records_bytes(second.table)
    # room for both tables, or for one range with its records, never for both
    cache = RangeCache(max_ranges=100, max_bytes=with_records + table_bytes // 2)
    cache.put_range(("ns", "a"), first)
    cache.put_range(("ns", "b"), second)
    assert cache.get(("ns", "a")) is first and cache.get(("ns", "b")) is second
    second.records()  # the records are Python objects: far more than the table
    assert second.nbytes() == with_records > 2 * table_bytes
    assert cache.get(("ns", "a")) is None  # pushed out by the grown range
    assert cache.get(("ns", "b")) is second
    second.encodings()  # now larger than the whole cache: not kept
    assert cache.get(("ns", "b")) is None
    # a range bigger than the bound is never kept, and reads still work without it
    huge = a_range("c")
    huge.records()
    huge.encodings()
    cache.put_range(("ns", "c"), huge)
    assert cache.get(("ns", "c")) is None


def test_a_range_the_cache_lets_go_is_freed_at_once() -> None:
    """A range pushed out of the cache (or dropped with it) goes with its last reference,
    not at some later garbage collection: no reference cycle holds its Arrow buffers,
    whose megabytes would not bring that collection on."""
    import gc
    import weakref

    from lakefs_core.graveler.rangefile import range_table
    from lakefs_core.graveler.ranges import _Range

    def a_range(tag: str) -> _Range:
        return _Range(range_table([record(f"{tag}/{i:05d}") for i in range(200)]))

    was_enabled = gc.isenabled()
    gc.disable()
    try:
        cache = RangeCache(max_ranges=1, max_bytes=50_000_000)
        first = a_range("a")
        cache.put_range(("ns", "a"), first)
        first.encodings()  # grows: the cache weighs it again
        first.records()
        gone = weakref.ref(first)
        del first
        assert gone() is not None  # still kept
        cache.put_range(("ns", "b"), a_range("b"))  # pushes it out
        assert gone() is None
        second = cache.get(("ns", "b"))
        assert second is not None
        second.encodings()
        gone = weakref.ref(second)
        del second
        cache.clear()
        assert gone() is None
    finally:
        if was_enabled:
            gc.enable()
