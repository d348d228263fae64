"""CommitValidator on a real local blockstore: what proves a commit present, at what cost."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from lakefs_core.block.base import join_address
from lakefs_core.block.local import LocalBlockStore
from lakefs_core.graveler import AddressType, Entry, EntryRecord, RangeManager
from lakefs_core.graveler.encoding import EMPTY_METARANGE_ID
from lakefs_core.graveler.presence import (
    LIST_PAGE,
    CommitValidator,
    CountingStore,
    MissingItem,
    MissingKind,
    RequestTimes,
)
from lakefs_core.graveler.rangefile import encode_range
from lakefs_core.graveler.ranges import RangeCache

NS = "local://mirror"


def object_store_view(inner: LocalBlockStore) -> CountingStore:
    """A counting view of the local store that lists as an object store does (a page
    of keys per request), so that the validator's choice between listing and stat is
    what is looked at. The local store itself stats, which its listing does anyway
    (see ``test_the_local_store_is_stated_not_listed``)."""
    view = CountingStore(inner)
    view.lists_by_page = True
    return view


class CallLog(CountingStore):
    """A counting store that also names each request (a listing: one per page), and
    lists as an object store does (see :func:`object_store_view`)."""

    def __init__(self, inner: LocalBlockStore) -> None:
        super().__init__(inner)
        self.lists_by_page = True
        self.calls: list[str] = []

    def _count(self, kind: str) -> None:
        self.calls.append(kind)
        super()._count(kind)


@dataclass
class Mirror:
    """A destination namespace: the raw store, a writer's range manager, a counting view."""

    raw: LocalBlockStore
    writer: RangeManager
    counting: CountingStore

    def validator(self) -> CommitValidator:
        return CommitValidator(self.counting, NS)

    def put_object(self, path: str, version: int = 0) -> EntryRecord:
        """Write an object and return the entry that references it."""
        data = f"{version}:{path}".encode()
        address = f"data/{hashlib.sha256(data).hexdigest()[:24]}"
        stat = self.raw.put(join_address(NS, address), data)
        return EntryRecord(path, Entry(address=address, size=stat.size, etag=stat.etag,
                                       mtime=1_700_000_000.0))

    def commit(self, base: str, records: list[EntryRecord]) -> str:
        return self.writer.apply(base, records).metarange_id

    def file(self, file_id: str) -> Path:
        return Path(self.raw.root) / "mirror" / "_lakefs" / file_id

    def requests_of(self, log: CallLog, fn: Callable[[], object]) -> list[str]:
        """The store calls ``fn`` makes through ``log`` (a listing page each)."""
        del log.calls[:]
        fn()
        return list(log.calls)

    def requests(self, fn: Callable[[], object]) -> int:
        """Store requests made by calling ``fn``."""
        before = self.counting.requests
        fn()
        return self.counting.requests - before


@pytest.fixture
def mirror(tmp_path: Path) -> Mirror:
    raw = LocalBlockStore(str(tmp_path / "store"))
    # small ranges, so a few dozen entries span several of them
    return Mirror(raw, RangeManager(raw, NS, raggedness=4), object_store_view(raw))


def paths(n: int) -> list[str]:
    return [f"table/part-{i:04d}.parquet" for i in range(n)]


def test_present_commit_is_complete(mirror: Mirror) -> None:
    records = [mirror.put_object(p) for p in paths(40)]
    mr = mirror.commit(EMPTY_METARANGE_ID, records)
    n_ranges = len(mirror.writer.get_metarange(mr).ranges)
    assert n_ranges > 3
    result = mirror.validator().validate(mr, None)
    assert result.complete and result.missing == []
    assert result.objects_checked == 40 and result.ranges_checked == n_ranges
    # the empty metarange needs nothing at all
    v = mirror.validator()
    assert mirror.requests(lambda: v.validate(EMPTY_METARANGE_ID, None)) == 0
    assert v.validate(EMPTY_METARANGE_ID, None).complete


def test_missing_metarange(mirror: Mirror) -> None:
    mr = mirror.commit(EMPTY_METARANGE_ID, [mirror.put_object(p) for p in paths(10)])
    mirror.file(mr).unlink()
    result = mirror.validator().validate(mr, None)
    assert [(m.kind, m.key, m.reason) for m in result.missing] == [
        (MissingKind.METARANGE, mr, "missing")]
    assert result.missing[0].address == join_address(NS, f"_lakefs/{mr}")


def test_missing_range_does_not_hide_the_objects_of_the_others(mirror: Mirror) -> None:
    records = [mirror.put_object(p) for p in paths(40)]
    mr = mirror.commit(EMPTY_METARANGE_ID, records)
    ranges = mirror.writer.get_metarange(mr).ranges
    gone = ranges[1]
    mirror.file(gone.id).unlink()
    # and one object of another range
    last = records[-1]
    assert last.entry is not None
    Path(mirror.raw.root, "mirror", last.entry.address).unlink()
    result = mirror.validator().validate(mr, None)
    assert not result.complete
    kinds = {(m.kind, m.key) for m in result.missing}
    assert kinds == {(MissingKind.RANGE, gone.id), (MissingKind.OBJECT, last.path)}
    assert result.objects_checked == 40 - gone.count


def test_missing_object_wrong_size_and_wrong_etag(mirror: Mirror) -> None:
    records = [mirror.put_object(p) for p in paths(6)]
    mr = mirror.commit(EMPTY_METARANGE_ID, records)
    root = Path(mirror.raw.root, "mirror")
    entries = [r.entry for r in records]
    assert all(e is not None for e in entries)
    missing, short, altered = records[1], records[3], records[4]
    assert missing.entry and short.entry and altered.entry
    (root / missing.entry.address).unlink()
    mirror.raw.put(join_address(NS, short.entry.address), b"x")
    same_size = bytes(reversed((root / altered.entry.address).read_bytes()))
    assert len(same_size) == altered.entry.size
    mirror.raw.put(join_address(NS, altered.entry.address), same_size)
    result = mirror.validator().validate(mr, None)
    by_path = {m.key: m for m in result.missing}
    assert set(by_path) == {missing.path, short.path, altered.path}
    assert all(m.kind is MissingKind.OBJECT for m in result.missing)
    assert by_path[missing.path].reason == "missing"
    assert by_path[missing.path].entry == missing.entry
    assert by_path[short.path].reason == f"size 1 != {short.entry.size}"
    assert by_path[altered.path].reason.startswith("etag ")


def test_corrupt_range_file_is_not_proven_and_is_read_again(mirror: Mirror) -> None:
    records = [mirror.put_object(p) for p in paths(40)]
    mr = mirror.commit(EMPTY_METARANGE_ID, records)
    info = mirror.writer.get_metarange(mr).ranges[0]
    path = mirror.file(info.id)
    good = path.read_bytes()
    v = mirror.validator()

    # garbage bytes
    path.write_bytes(b"PAR1 not really")
    result = v.validate(mr, None)
    assert [(m.kind, m.key) for m in result.missing] == [(MissingKind.RANGE, info.id)]
    assert result.missing[0].reason.startswith("unreadable")
    assert not v.is_proven(info.id)

    # a well-formed range file whose content is not the one its id names
    other = [mirror.put_object("elsewhere/x"), *mirror.writer.read_range(info.id)[1:]]
    path.write_bytes(encode_range(other))
    result = v.validate(mr, None)
    assert [(m.kind, m.reason) for m in result.missing] == [
        (MissingKind.RANGE, "content does not match its id")]
    assert v.recheck(result.missing) == result.missing
    assert not v.is_proven(info.id)

    # the right content arrives: the same validator now proves it (nothing stale kept)
    path.write_bytes(good)
    assert v.recheck(result.missing) == []
    assert v.is_proven(info.id)
    assert v.validate(mr, None).complete


def test_corrupt_metarange_is_not_proven(mirror: Mirror) -> None:
    mr = mirror.commit(EMPTY_METARANGE_ID, [mirror.put_object(p) for p in paths(10)])
    other = mirror.commit(EMPTY_METARANGE_ID, [mirror.put_object(p, 1) for p in paths(10)])
    mirror.file(mr).write_bytes(mirror.file(other).read_bytes())
    result = mirror.validator().validate(mr, None)
    assert [(m.kind, m.key, m.reason) for m in result.missing] == [
        (MissingKind.METARANGE, mr, "content does not match its id")]


def test_base_that_disappeared_is_reported(mirror: Mirror) -> None:
    base = mirror.commit(EMPTY_METARANGE_ID, [mirror.put_object(p) for p in paths(10)])
    target = mirror.commit(base, [mirror.put_object(paths(10)[3], 1)])
    mirror.file(base).unlink()
    result = mirror.validator().validate(target, base)
    assert [(m.kind, m.key, m.reason) for m in result.missing] == [
        (MissingKind.METARANGE, base, "base metarange disappeared")]


def test_recheck_stops_at_the_first_still_missing_and_goes_on_from_there(
        mirror: Mirror) -> None:
    records = [mirror.put_object(p) for p in paths(12)]
    mr = mirror.commit(EMPTY_METARANGE_ID, records)
    held = {n: records[n] for n in (2, 5, 9)}
    saved = {}
    for n, r in held.items():
        assert r.entry is not None
        f = Path(mirror.raw.root, "mirror", r.entry.address)
        saved[n] = (f, f.read_bytes())
        f.unlink()
    v = mirror.validator()
    missing = v.validate(mr, None).missing
    assert [m.key for m in missing] == [held[n].path for n in (2, 5, 9)]

    def arrives(n: int) -> None:
        f, data = saved[n]
        f.write_bytes(data)

    def recheck(items: list[MissingItem]) -> tuple[list[int], int]:
        """One round, as the service runs them: the numbers of the items still missing
        (in the order returned) and the requests it took."""
        out: list[MissingItem] = []
        n = mirror.requests(lambda: out.extend(v.recheck(items)))
        missing[:] = out
        by_path = {r.path: k for k, r in held.items()}
        return [by_path[m.key] for m in out], n

    # nothing arrived: one request, everything still missing; the item it stopped at
    # goes last, so that the next round starts with the next one
    assert recheck(missing) == ([5, 9, 2], 1)
    # a later item arrives first: still one request a round, and it is dropped (and
    # no longer counted) in the round that reaches it
    arrives(9)
    assert recheck(missing) == ([9, 2, 5], 1)
    assert recheck(missing) == ([5, 2], 2)
    # the first arrives: dropped in the round that reaches it; then the last one
    arrives(2)
    assert recheck(missing) == ([2, 5], 1)
    assert recheck(missing) == ([5], 2)
    arrives(5)
    assert recheck(missing) == ([], 1)


def test_incremental_validation_requests_and_caches(mirror: Mirror) -> None:
    """A commit of k changes costs k object stats + its new ranges + the base ranges
    they replace + the two metaranges; what was proven is not asked for again."""
    records = [mirror.put_object(p) for p in paths(60)]
    base = mirror.commit(EMPTY_METARANGE_ID, records)
    changed = [mirror.put_object(paths(60)[i], 1) for i in (7, 8, 41)]
    target = mirror.commit(base, changed)
    new = mirror.writer.new_ranges(base, target)
    base_ranges = mirror.writer.get_metarange(base).ranges
    replaced = [r for r in base_ranges if r.id not in
                {t.id for t in mirror.writer.get_metarange(target).ranges}]
    assert 1 <= len(new) < len(base_ranges)

    v = mirror.validator()
    n = mirror.requests(lambda: v.validate(target, base))
    assert n == len(changed) + len(new) + len(replaced) + 2
    assert n <= len(changed) + 2 * len(new) + 2
    # a proven commit costs nothing the second time, and proven objects are not asked
    assert mirror.requests(lambda: v.validate(target, base)) == 0
    path, entry = changed[0].path, changed[0].entry
    assert entry is not None
    assert mirror.requests(lambda: v.check_object(path, entry)) == 0

    # a third commit on top of the second: only what it changed is looked at again
    third = mirror.commit(target, [mirror.put_object(paths(60)[8], 2)])
    result = v.validate(third, target)
    assert result.complete and result.objects_checked == 1

    # a fresh validator and a full validation: every range once, the objects by
    # listing the namespace (one listing per shard of the namespace, far fewer than 60)
    full = CallLog(mirror.raw)
    n_full = len(mirror.requests_of(full, lambda: CommitValidator(full, NS).validate(target, None)))
    shards = full.calls.count("list")
    assert 1 <= shards <= 16 and "stat" not in full.calls
    assert n_full == shards + len(mirror.writer.get_metarange(target).ranges) + 1


def test_incremental_validation_finds_a_missing_changed_object(mirror: Mirror) -> None:
    base = mirror.commit(EMPTY_METARANGE_ID, [mirror.put_object(p) for p in paths(30)])
    late = mirror.put_object("table/zz-late.parquet", 1)
    assert late.entry is not None
    target = mirror.commit(base, [late])
    Path(mirror.raw.root, "mirror", late.entry.address).unlink()
    v = mirror.validator()
    result = v.validate(target, base)
    assert [(m.kind, m.key) for m in result.missing] == [(MissingKind.OBJECT, late.path)]
    # nothing else is missing: unchanged entries are present with the base
    assert result.objects_checked == 1


def test_deletions_need_no_object_requests(mirror: Mirror) -> None:
    names = paths(60)
    base = mirror.commit(EMPTY_METARANGE_ID, [mirror.put_object(p) for p in names])
    deleted = [names[i] for i in (5, 6, 30, 59)]
    target = mirror.commit(base, [EntryRecord(p, None) for p in deleted])
    new = mirror.writer.new_ranges(base, target)
    v = mirror.validator()
    result = v.validate(target, base)
    n = mirror.counting.requests
    assert result.complete and result.objects_checked == 0
    assert n <= len(deleted) + 2 * len(new) + 2


# ------------------------------------------------------------ listing or stat
def damage(mirror: Mirror, records: list[EntryRecord]) -> dict[str, str]:
    """Remove one object, shorten one, alter one keeping its size: path -> what."""
    missing, short, altered = (r.entry for r in records)
    assert missing and short and altered
    root = Path(mirror.raw.root, "mirror")
    (root / missing.address).unlink()
    mirror.raw.put(join_address(NS, short.address), b"x")
    same_size = bytes(reversed((root / altered.address).read_bytes()))
    assert len(same_size) == altered.size and same_size != (root / altered.address).read_bytes()
    mirror.raw.put(join_address(NS, altered.address), same_size)
    return {records[0].path: "missing", records[1].path: "size", records[2].path: "etag"}


def reasons(missing: list[MissingItem]) -> dict[str, str]:
    assert all(m.kind is MissingKind.OBJECT for m in missing)
    return {m.key: m.reason.split(" ")[0] for m in missing}


def test_dense_change_is_proven_by_listing_and_finds_what_is_wrong(mirror: Mirror) -> None:
    records = [mirror.put_object(p) for p in paths(120)]
    mr = mirror.commit(EMPTY_METARANGE_ID, records)
    want = damage(mirror, [records[3], records[50], records[119]])
    log = CallLog(mirror.raw)
    v = CommitValidator(log, NS, concurrency=4)
    result = v.validate(mr, None)
    assert reasons(result.missing) == want
    assert result.objects_checked == 120
    # no object was asked for alone: the namespace was listed, a few shards of it
    assert "stat" not in log.calls and 1 <= log.calls.count("list") <= 16
    n_ranges = len(mirror.writer.get_metarange(mr).ranges)
    assert log.calls.count("get") == n_ranges + 1


def test_sparse_change_is_proven_by_stat_and_finds_what_is_wrong(mirror: Mirror) -> None:
    names = paths(120)
    base = mirror.commit(EMPTY_METARANGE_ID, [mirror.put_object(p) for p in names])
    changed = [mirror.put_object(names[i], 1) for i in (10, 60, 110)]
    target = mirror.commit(base, changed)
    want = damage(mirror, changed)
    log = CallLog(mirror.raw)
    v = CommitValidator(log, NS)
    assert v.validate(base, None).complete
    del log.calls[:]
    result = v.validate(target, base)
    assert reasons(result.missing) == want and result.objects_checked == 3
    assert log.calls.count("stat") == 3 and "list" not in log.calls


def test_imported_objects_outside_the_namespace_are_checked_in_a_dense_change(
        mirror: Mirror) -> None:
    """Full addresses elsewhere are stat'ed even when the namespace is listed."""
    records = [mirror.put_object(p) for p in paths(60)]
    imported = []
    for i in range(4):
        address = f"local://imports/set/file-{i}.csv"
        stat = mirror.raw.put(address, f"row {i}\n".encode())
        imported.append(EntryRecord(f"table/zz-import-{i}.csv", Entry(
            address=address, size=stat.size, etag=stat.etag, mtime=1_700_000_000.0,
            address_type=AddressType.FULL)))
    mr = mirror.commit(EMPTY_METARANGE_ID, records + imported)
    Path(mirror.raw.root, "imports", "set", "file-2.csv").unlink()
    mirror.raw.put("local://imports/set/file-3.csv", b"other content, other size")
    log = CallLog(mirror.raw)
    result = CommitValidator(log, NS).validate(mr, None)
    assert reasons(result.missing) == {"table/zz-import-2.csv": "missing",
                                       "table/zz-import-3.csv": "size"}
    assert result.missing[0].address == "local://imports/set/file-2.csv"
    assert log.calls.count("stat") == 4 and "list" in log.calls


def test_a_namespace_fuller_than_the_commit_stops_listing_and_stats(mirror: Mirror) -> None:
    """A shard whose listing outgrows what stats would cost stops; its rest is stat'ed."""
    records = []
    # shards a and c hold five objects each, shard b one
    for i, name in enumerate([*(f"a/{k}" for k in range(5)), "b/object",
                              *(f"c/{k}" for k in range(5))]):
        address = f"data/{name}"
        stat = mirror.raw.put(join_address(NS, address), f"object {name}".encode())
        records.append(EntryRecord(f"table/{i:02d}", Entry(
            address=address, size=stat.size, etag=stat.etag, mtime=1_700_000_000.0)))
    # other objects in the namespace (of other commits), listed before shard b's object
    crowd = Path(mirror.raw.root, "mirror", "data", "b")
    for j in range(2 * LIST_PAGE + 50):
        (crowd / f"a-{j:05d}").write_bytes(b"other")
    mr = mirror.commit(EMPTY_METARANGE_ID, records)
    log = CallLog(mirror.raw)
    v = CommitValidator(log, NS)
    found = v.check_objects([(11, [(r.path, r.entry) for r in records if r.entry])],
                            referenced=11)
    assert found == [[]]
    assert log.calls.count("stat") == 1  # shard b's object, after its listing gave up
    assert log.calls.count("list") == 3 + 2  # shards a, c; b's three pages
    # a first validation lists while it reads the ranges; shard b gives up there too
    log = CallLog(mirror.raw)
    assert CommitValidator(log, NS).validate(mr, None).complete
    assert log.calls.count("stat") == 1
    assert log.calls.count("list") == 2 + 2  # shards a, c; b's two pages


def test_dense_change_on_a_base_is_listed_too(mirror: Mirror) -> None:
    """A new partition (a dense range) on top of a proven commit: listed, not stat'ed."""
    base = mirror.commit(EMPTY_METARANGE_ID, [mirror.put_object(p) for p in paths(300)])
    added = [mirror.put_object(f"table/zz-new/part-{i:04d}.parquet") for i in range(150)]
    target = mirror.commit(base, added)
    want = damage(mirror, [added[0], added[70], added[149]])
    log = CallLog(mirror.raw)
    v = CommitValidator(log, NS)
    assert v.validate(base, None).complete
    del log.calls[:]
    result = v.validate(target, base)
    assert reasons(result.missing) == want and result.objects_checked == 150
    # listed; only a range where the partition meets old entries may be sparse
    assert log.calls.count("stat") < 10 and 1 <= log.calls.count("list") <= 16


def test_sparse_ranges_are_stated_while_dense_ones_are_listed(mirror: Mirror) -> None:
    dense = [mirror.put_object(f"dense/{i:03d}") for i in range(40)]
    sparse = [mirror.put_object(f"sparse/{i}") for i in range(2)]
    want = damage(mirror, [dense[5], sparse[1], dense[30]])
    log = CallLog(mirror.raw)
    found = CommitValidator(log, NS).check_objects(
        [(40, [(r.path, r.entry) for r in dense if r.entry]),
         # two changed entries in a range of 5,000: fewer than its listing pages
         (5_000, [(r.path, r.entry) for r in sparse if r.entry])], referenced=5_040)
    assert reasons([m for batch in found for m in batch]) == want
    assert [reasons(batch) for batch in found] == [
        {dense[5].path: "missing", dense[30].path: "etag"}, {sparse[1].path: "size"}]
    assert log.calls.count("stat") == 2 and 1 <= log.calls.count("list") <= 16


def test_the_local_store_is_stated_not_listed(mirror: Mirror) -> None:
    """Listing a local directory stats every file it lists: stats of the objects alone
    prove them at no more cost, with the same checks."""
    records = [mirror.put_object(p) for p in paths(120)]
    imported = mirror.raw.put("local://imports/file.csv", b"row\n")
    records.append(EntryRecord("table/zz-import.csv", Entry(
        address="local://imports/file.csv", size=imported.size, etag=imported.etag,
        mtime=1_700_000_000.0, address_type=AddressType.FULL)))
    mr = mirror.commit(EMPTY_METARANGE_ID, records)
    want = damage(mirror, [records[3], records[50], records[119]])
    mirror.raw.put("local://imports/file.csv", b"other row\n")
    want["table/zz-import.csv"] = "size"
    log = CallLog(mirror.raw)
    log.lists_by_page = mirror.raw.lists_by_page
    assert not log.lists_by_page
    result = CommitValidator(log, NS, concurrency=4).validate(mr, None)
    assert reasons(result.missing) == want and result.objects_checked == 121
    assert "list" not in log.calls and log.calls.count("stat") == 121


def test_an_address_that_prefixes_others_is_a_shard_of_its_own(mirror: Mirror) -> None:
    """Shards ``data/a`` (that object alone) and ``data/ab``: the second gives up (other
    objects crowd it) and its objects are stat'ed, not judged by the first's listing."""
    records = []
    for i, name in enumerate(["data/a", "data/aby", "data/abz"]):
        stat = mirror.raw.put(join_address(NS, name), f"object {name}".encode())
        records.append((f"table/{i:02d}", Entry(address=name, size=stat.size, etag=stat.etag,
                                                mtime=1_700_000_000.0)))
    crowd = Path(mirror.raw.root, "mirror", "data")
    for j in range(3 * LIST_PAGE + 50):
        (crowd / f"ab-{j:05d}").write_bytes(b"other")
    log = CallLog(mirror.raw)
    found = CommitValidator(log, NS).check_objects([(3, records)], referenced=3)
    assert found == [[]]
    assert log.calls.count("stat") == 2


def test_validators_share_one_range_cache_and_each_forgets_its_own(mirror: Mirror) -> None:
    """The validators of a replica's mirrors keep the ranges they read in one cache
    under one bound (``validator.range_cache_size_bytes``); a mirror that caught up
    drops its own namespace's ranges, not those of the others."""
    records = [mirror.put_object(p) for p in paths(40)]
    mr = mirror.commit(EMPTY_METARANGE_ID, records)
    n_ranges = len(mirror.writer.get_metarange(mr).ranges)
    other_ns = "local://mirror-two"
    shutil.copytree(Path(mirror.raw.root) / "mirror", Path(mirror.raw.root) / "mirror-two")
    cache = RangeCache(max_bytes=50_000_000)
    first = CommitValidator(mirror.counting, NS, range_cache=cache)
    second = CommitValidator(mirror.counting, other_ns, range_cache=cache)
    assert first.validate(mr, None).complete and second.validate(mr, None).complete

    def cached(ns: str) -> int:
        return sum(1 for key in list(cache._cache) if key[0] == ns)

    assert cached(NS) == n_ranges and cached(other_ns) == n_ranges
    first.forget_proven()
    assert cached(NS) == 0 and cached(other_ns) == n_ranges
    # the bound is one for both: a cache that holds one range's weight keeps one range
    small = RangeCache(max_ranges=1, max_bytes=50_000_000)
    for ns in (NS, other_ns):
        assert CommitValidator(mirror.counting, ns, range_cache=small).validate(mr, None).complete
    assert len(list(small._cache)) == 1


def test_request_times_weigh_a_listing_page_as_the_stats_it_lasts() -> None:
    now = [0.0]
    times = RequestTimes(clock=lambda: now[0])
    assert times.page_cost() == 1.0  # nothing measured: requests count alike
    times.add_pages(2.0, 1)
    assert times.page_cost() == 1.0  # stats not measured yet
    times.add_stats(0.2, 10)
    assert times.page_cost() == pytest.approx(100.0)  # a page lasts 100 stats
    times.add_pages(0.0, 1)  # a moving average: one fast page moves it part way
    assert 1.0 < times.page_cost() < 100.0
    for _ in range(60):
        times.add_pages(0.001, 1)
    assert times.page_cost() == RequestTimes.RATIO_RANGE[0]  # bounded below
    times.add_pages(1e6, 1)
    assert times.page_cost() <= RequestTimes.RATIO_RANGE[1]  # and above
    now[0] += RequestTimes.STALE_AFTER + 1
    assert times.page_cost() == 1.0  # an old page time no longer counts


def test_a_store_whose_listing_pages_are_slow_is_stated(mirror: Mirror) -> None:
    """A dense change is listed where a page costs about a stat (see the test above),
    and stat'ed where the store's measured times make a page cost a hundred stats, with
    the same findings."""
    records = [mirror.put_object(p) for p in paths(120)]
    mr = mirror.commit(EMPTY_METARANGE_ID, records)
    want = damage(mirror, [records[3], records[50], records[119]])
    times = RequestTimes()
    times.add_pages(1.0, 1)
    times.add_stats(0.01, 1)
    log = CallLog(mirror.raw)
    v = CommitValidator(log, NS, concurrency=4, request_times=times)
    result = v.validate(mr, None)
    assert reasons(result.missing) == want and result.objects_checked == 120
    assert "list" not in log.calls and log.calls.count("stat") == 120
    assert times.page_cost() > 10  # the stats were timed too, and did not undo it
    # where pages cost about what stats do, the same store is listed
    even = RequestTimes()
    even.add_pages(0.01, 1)
    even.add_stats(0.01, 1)
    log = CallLog(mirror.raw)
    result = CommitValidator(log, NS, concurrency=4, request_times=even).validate(mr, None)
    assert reasons(result.missing) == want
    assert "stat" not in log.calls and 1 <= log.calls.count("list") <= 16
