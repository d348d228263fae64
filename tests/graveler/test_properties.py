"""Properties of apply, diff and merge over random repositories (local store)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakefs_core.block.local import LocalBlockStore
from lakefs_core.errors import MergeConflictError
from lakefs_core.graveler import (
    DiffType,
    Entry,
    EntryRecord,
    RangeManager,
    metarange_id,
    range_id,
)
from lakefs_core.graveler.ranges import same_object
from tests.graveler.support import build, contents, entries, entry, models, paths

SETTINGS = settings(max_examples=60, deadline=None)
_namespaces = itertools.count()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> LocalBlockStore:
    return LocalBlockStore(str(tmp_path_factory.mktemp("graveler-props")))


Model = dict[str, Entry]
Changes = dict[str, Entry | None]
Managers = Callable[..., RangeManager]


@pytest.fixture(scope="module")
def new_manager(store: LocalBlockStore) -> Iterator[Managers]:
    """Makes managers on fresh namespaces of one store (raggedness 4 by default)."""
    def make(raggedness: int = 4, **kwargs: int) -> RangeManager:
        return RangeManager(store, f"local://props-{next(_namespaces)}",
                            raggedness=raggedness, **kwargs)
    yield make


def as_changes(model: Changes) -> list[EntryRecord]:
    return [EntryRecord(p, model[p]) for p in sorted(model)]


def applied(base: Model, changes: Changes) -> Model:
    out = dict(base)
    for path, e in changes.items():
        if e is None:
            out.pop(path, None)
        else:
            out[path] = e
    return out


optional_entries = st.one_of(st.none(), entries)
changesets = st.dictionaries(paths, optional_entries, max_size=25)


@st.composite
def three_way(draw: st.DrawFn) -> tuple[Model, Changes, Changes]:
    """A base and changes for source and dest, some paths changed on both sides."""
    base = draw(models)
    src, dst = draw(changesets), draw(changesets)
    either = st.one_of(st.sampled_from(sorted(base)), paths) if base else paths
    shared = draw(st.dictionaries(
        either, st.tuples(optional_entries, optional_entries, st.booleans()),
        min_size=1, max_size=6))
    for path, (a, b, same) in shared.items():
        src[path] = a
        dst[path] = a if same else b
    return base, src, dst


# --- apply ----------------------------------------------------------------------------
@SETTINGS
@given(models, changesets)
def test_apply_matches_a_dict_model(new_manager: Managers, model: Model, changes: Changes) -> None:
    rm = new_manager()
    base = build(rm, model)
    result = rm.apply(base, as_changes(changes))
    expected = applied(model, changes)
    assert contents(rm, result.metarange_id) == expected
    # canonical: the same contents built any other way have the same id
    assert result.metarange_id == build(new_manager(), expected)
    assert (result.metarange_id == base) == (expected == model)
    # ids verify from the files alone (what a mirror's validator recomputes)
    cold = RangeManager(rm.store, rm.namespace)
    ranges = cold.get_metarange(result.metarange_id).ranges
    assert metarange_id(ranges) == result.metarange_id
    for info in ranges:
        assert range_id(cold.read_range(info.id)) == info.id


@settings(max_examples=50, deadline=None)
@given(
    st.sets(st.integers(0, 10**6), min_size=1, max_size=600),
    st.sampled_from(["update", "insert", "delete"]),
    st.data(),
)
def test_one_change_touches_at_most_two_ranges(
    new_manager: Managers, numbers: set[int], kind: str, data: st.DataObject
) -> None:
    rm = new_manager(raggedness=10, max_range_entries=10**9)  # no size cuts
    keys = sorted(f"k{n:07d}" for n in numbers)
    base = build(rm, {k: entry(k) for k in keys})
    if kind == "insert":
        key = data.draw(st.integers(0, 10**6).map(lambda n: f"k{n:07d}x"))
        change = EntryRecord(key, entry(key))
    else:
        key = data.draw(st.sampled_from(keys))
        change = EntryRecord(key, entry(key, 1) if kind == "update" else None)
    result = rm.apply(base, [change])
    old_ids = {r.id for r in rm.get_metarange(base).ranges}
    new_ids = {r.id for r in rm.get_metarange(result.metarange_id).ranges}
    assert result.ranges_written <= 2
    assert result.ranges_written == len(new_ids - old_ids)
    assert len(old_ids - new_ids) <= 2
    assert len(old_ids ^ new_ids) <= 3  # a split (1 -> 2) or a merge (2 -> 1) at most
    assert result.ranges_reused == len(new_ids & old_ids)


def test_one_change_in_a_large_repository(new_manager: Managers) -> None:
    rm = new_manager(raggedness=100, max_range_entries=10**9)
    keys = [f"table/part={i // 1000:03d}/f{i:06d}" for i in range(20_000)]
    base = build(rm, {k: entry(k) for k in keys})
    n = len(rm.get_metarange(base).ranges)
    assert n > 100
    for change in (EntryRecord(keys[12_345], entry(keys[12_345], 1)),
                   EntryRecord(keys[777], None),
                   EntryRecord("table/part=007/f007500a", entry("x"))):
        result = rm.apply(base, [change])
        assert result.ranges_written <= 2
        assert result.ranges_reused >= n - 2


# --- diff -----------------------------------------------------------------------------
@SETTINGS
@given(models, models)
def test_diff_then_apply_reproduces_the_target(new_manager: Managers, a: Model, b: Model) -> None:
    rm = new_manager()
    a_id, b_id = build(rm, a), build(rm, b)
    diff = list(rm.diff(a_id, b_id))
    assert [d.path for d in diff] == sorted(set(a) ^ set(b) | {
        p for p in set(a) & set(b) if a[p] != b[p]})
    for d in diff:
        assert (d.left, d.right) == (a.get(d.path), b.get(d.path))
        assert d.type == (DiffType.ADDED if d.left is None else
                          DiffType.REMOVED if d.right is None else DiffType.CHANGED)
    assert rm.apply(a_id, [EntryRecord(d.path, d.right) for d in diff]).metarange_id == b_id
    assert list(rm.diff(a_id, a_id)) == []
    assert list(rm.diff(b_id, build(new_manager(), b))) == []


@settings(max_examples=40, deadline=None)
@given(st.sets(st.integers(0, 999), min_size=40, max_size=300), st.data())
def test_diff_of_rewritten_ranges_is_made_column_wise(
    new_manager: Managers, numbers: set[int], data: st.DataObject
) -> None:
    """A diff compares two versions of a range (the same first and last path) by
    columns: right for updates, inserts and removals, and without making the records
    of the rows that did not change."""
    rm = new_manager(raggedness=16, max_range_entries=10**9)
    keys = sorted(f"k{n:04d}" for n in numbers)
    model = {k: entry(k) for k in keys}
    base = build(rm, model)
    versions = st.integers(1, 3)
    changes: Changes = {
        k: entry(k, v) for k, v in data.draw(st.dictionaries(
            st.sampled_from(keys), versions, min_size=1, max_size=20)).items()}
    updates_only = data.draw(st.booleans())
    if not updates_only:
        changes.update(dict.fromkeys(data.draw(st.sets(st.sampled_from(keys), max_size=10))))
        changes.update({k: entry(k) for k in data.draw(st.sets(
            st.integers(0, 999).map(lambda n: f"k{n:04d}x"), max_size=10))})
    target = applied(model, changes)
    new = rm.apply(base, as_changes(changes)).metarange_id
    cold = RangeManager(rm.store, rm.namespace)
    diff = list(cold.diff(base, new))
    assert [d.path for d in diff] == sorted(
        p for p in set(model) | set(target) if model.get(p) != target.get(p))
    for d in diff:
        assert (d.left, d.right) == (model.get(d.path), target.get(d.path))
        assert d.type == (DiffType.ADDED if d.left is None else
                          DiffType.REMOVED if d.right is None else DiffType.CHANGED)
    if updates_only:  # every range keeps its span: no range became records
        assert all(rng._records is None for rng, _ in cold._ranges._cache.values())


@SETTINGS
@given(models, changesets, st.text(alphabet="ab/", max_size=3), st.text(alphabet="ab/", max_size=4))
def test_diff_and_iterate_honour_prefix_and_after(
    new_manager: Managers, model: Model, changes: Changes, prefix: str, after: str
) -> None:
    rm = new_manager()
    a_id = build(rm, model)
    b_id = rm.apply(a_id, as_changes(changes)).metarange_id
    full = list(rm.diff(a_id, b_id))
    assert list(rm.diff(a_id, b_id, prefix=prefix, after=after)) == [
        d for d in full if d.path.startswith(prefix) and d.path > after]
    assert [r.path for r in rm.iterate(a_id, prefix=prefix, after=after)] == sorted(
        p for p in model if p.startswith(prefix) and p > after)


# --- merge ----------------------------------------------------------------------------
@SETTINGS
@given(models, changesets, changesets)
def test_merge_of_disjoint_changes_contains_both(
    new_manager: Managers, base: Model, src_changes: Changes, dst_changes: Changes
) -> None:
    dst_changes = {p: e for p, e in dst_changes.items() if p not in src_changes}
    rm = new_manager()
    base_id = build(rm, base)
    source = rm.apply(base_id, as_changes(src_changes)).metarange_id
    dest = rm.apply(base_id, as_changes(dst_changes)).metarange_id
    merged = rm.merge(base_id, source, dest)
    expected = applied(applied(base, src_changes), dst_changes)
    assert merged.metarange_id == build(new_manager(), expected)
    effective = [p for p, e in src_changes.items() if base.get(p) != e]
    assert merged.changes == len(effective)
    if not effective:
        assert merged.metarange_id == dest


@SETTINGS
@given(three_way())
def test_merge_conflicts_and_strategies(
    new_manager: Managers, case: tuple[Model, Changes, Changes]
) -> None:
    base, src_changes, dst_changes = case
    rm = new_manager()
    base_id = build(rm, base)
    src_model = applied(base, src_changes)
    dst_model = applied(base, dst_changes)
    source = rm.apply(base_id, as_changes(src_changes)).metarange_id
    dest = rm.apply(base_id, as_changes(dst_changes)).metarange_id
    src_changed = {p for p in set(base) | set(src_model) if base.get(p) != src_model.get(p)}
    dst_changed = {p for p in set(base) | set(dst_model) if base.get(p) != dst_model.get(p)}
    # the same object (content, type, metadata) written on both sides, wherever it is
    # stored, is the same change: no conflict, dest keeps its copy
    conflicts = sorted(p for p in src_changed & dst_changed
                       if not same_object(src_model.get(p), dst_model.get(p)))

    def model_with(winner: Model) -> Model:
        out = dict(dst_model)
        for p in src_changed - dst_changed | set(conflicts if winner is src_model else []):
            if p in src_model:
                out[p] = src_model[p]
            else:
                out.pop(p, None)
        return out

    if conflicts:
        with pytest.raises(MergeConflictError) as info:
            rm.merge(base_id, source, dest)
        assert info.value.paths == conflicts
    else:  # every path changed on both sides was changed the same way
        assert rm.merge(base_id, source, dest).metarange_id == build(
            new_manager(), model_with(dst_model))
    for strategy, winner in (("source-wins", src_model), ("dest-wins", dst_model)):
        merged = rm.merge(base_id, source, dest, strategy=strategy)
        assert contents(rm, merged.metarange_id) == model_with(winner)
