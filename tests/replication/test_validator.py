"""CommitValidator on a real local blockstore: what proves a commit present, at what cost."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from lakefs_core.block.base import join_address
from lakefs_core.block.local import LocalBlockStore
from lakefs_core.graveler import Entry, EntryRecord, RangeManager
from lakefs_core.graveler.encoding import EMPTY_METARANGE_ID
from lakefs_core.graveler.presence import CommitValidator, CountingStore, MissingItem, MissingKind
from lakefs_core.graveler.rangefile import encode_range

NS = "local://mirror"


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

    def requests(self, fn: Callable[[], object]) -> int:
        """Store requests made by calling ``fn``."""
        before = self.counting.requests
        fn()
        return self.counting.requests - before


@pytest.fixture
def mirror(tmp_path: Path) -> Mirror:
    raw = LocalBlockStore(str(tmp_path / "store"))
    # small ranges, so a few dozen entries span several of them
    return Mirror(raw, RangeManager(raw, NS, raggedness=4), CountingStore(raw))


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


def test_recheck_stops_at_the_first_still_missing(mirror: Mirror) -> None:
    records = [mirror.put_object(p) for p in paths(12)]
    mr = mirror.commit(EMPTY_METARANGE_ID, records)
    held = [records[2], records[5], records[9]]
    saved = {}
    for r in held:
        assert r.entry is not None
        f = Path(mirror.raw.root, "mirror", r.entry.address)
        saved[r.path] = (f, f.read_bytes())
        f.unlink()
    v = mirror.validator()
    missing = v.validate(mr, None).missing
    assert [m.key for m in missing] == [r.path for r in held]

    def recheck() -> tuple[list[MissingItem], int]:
        out: list[MissingItem] = []
        n = mirror.requests(lambda: out.extend(v.recheck(missing)))
        return out, n

    # nothing arrived: one request, everything still missing, in order
    still, n = recheck()
    assert n == 1 and still == missing
    # a later item arrived first: still one request (stops at the first)
    f, data = saved[held[2].path]
    f.write_bytes(data)
    still, n = recheck()
    assert n == 1 and [m.key for m in still] == [r.path for r in held]
    # the first arrives: it is dropped, the second is the new stop
    f, data = saved[held[0].path]
    f.write_bytes(data)
    still, n = recheck()
    assert n == 2 and [m.key for m in still] == [held[1].path, held[2].path]
    missing = still
    f, data = saved[held[1].path]
    f.write_bytes(data)
    still, n = recheck()
    assert n == 2 and still == []


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

    # a fresh validator and a full validation: every object once
    full = mirror.validator()
    n_full = mirror.requests(lambda: full.validate(target, None))
    assert n_full == 60 + len(mirror.writer.get_metarange(target).ranges) + 1


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
