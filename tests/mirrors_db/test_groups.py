"""Mirror groups, their cuts and their progress: the same contract on SQLite, PostgreSQL
and DynamoDB."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from mirrors_db import (
    GroupExistsError,
    GroupMember,
    GroupNotFoundError,
    GroupProgress,
    GroupSpec,
    InvalidMirrorArgumentError,
    MirrorsTable,
    RowKind,
    VersionConflictError,
)
from mirrors_db.models import CUTS_KEPT, MAX_GROUP_MEMBERS
from tests.mirrors_db.conftest import ORG, ManualClock

A, B = GroupMember("m-a", "main"), GroupMember("m-b", "main")


def group_spec(name: str = "pipeline", **fields: object) -> GroupSpec:
    values: dict[str, object] = {"organization_id": ORG, "name": name,
                                 "source_region": "east", "destination_region": "west",
                                 "members": (A, B)}
    values.update(fields)
    return GroupSpec(**values)  # type: ignore[arg-type]


def test_create_get_list_update_and_delete_a_group(table: MirrorsTable) -> None:
    group = table.create_group(group_spec())
    assert (group.version, group.last_cut, group.heads_read_at) == (1, 0, None)
    assert table.get_group(ORG, group.id) == group
    other = table.create_group(group_spec("other", members=()))
    assert [g.id for g in table.list_groups(ORG)] == [group.id, other.id]
    with pytest.raises(GroupExistsError):
        table.create_group(group_spec())  # the name is taken
    with pytest.raises(GroupExistsError):
        table.create_group(group_spec("third", id=group.id))
    c = GroupMember("m-c", "dev")
    updated = table.update_group(replace(group, members=(A, B, c)))
    assert updated.version == 2 and table.get_group(ORG, group.id).members == (A, B, c)
    with pytest.raises(VersionConflictError):
        table.update_group(replace(group, members=(A,)))  # read at version 1
    table.delete_group(ORG, group.id)
    with pytest.raises(GroupNotFoundError):
        table.get_group(ORG, group.id)
    with pytest.raises(GroupNotFoundError):
        table.delete_group(ORG, group.id)
    # the name is free again
    table.create_group(group_spec())


def test_members_are_checked(table: MirrorsTable) -> None:
    with pytest.raises(InvalidMirrorArgumentError, match="twice"):
        table.create_group(group_spec(members=(A, A)))
    many = tuple(GroupMember(f"m{i}", "main") for i in range(MAX_GROUP_MEMBERS + 1))
    with pytest.raises(InvalidMirrorArgumentError, match="at most"):
        table.create_group(group_spec(members=many))
    with pytest.raises(InvalidMirrorArgumentError):
        table.create_group(group_spec(name="bad#name"))


def test_cuts_are_numbered_in_order_and_move_the_group(table: MirrorsTable,
                                                       clock: ManualClock) -> None:
    group = table.create_group(group_spec())
    t1 = clock()
    group, first = table.add_cut(group, {A: "a1", B: "b1"}, t1, "moved")
    assert (first.sequence, group.last_cut, group.heads_read_at) == (1, 1, t1)
    clock.advance(1)
    group, second = table.add_cut(group, {A: "a2"}, clock(), "requested")
    assert second.sequence == 2 and second.heads == {A: "a2"}
    assert table.get_group(ORG, group.id) == group
    assert table.list_cuts(ORG, group.id) == [first, second]
    assert table.list_cuts(ORG, group.id, after=1) == [second]
    # a replica that read the group before the last cut loses: it reads the heads again
    stale = replace(group, version=group.version - 1, last_cut=1)
    with pytest.raises(VersionConflictError):
        table.add_cut(stale, {A: "a3"}, clock(), "moved")
    with pytest.raises(InvalidMirrorArgumentError, match="not a member"):
        table.add_cut(group, {GroupMember("m-z", "main"): "z"}, clock(), "moved")
    # the group's heads confirmed later (no new cut)
    confirmed = table.update_group(replace(group, heads_read_at=clock() + timedelta(seconds=5)))
    assert table.get_group(ORG, group.id).heads_read_at == confirmed.heads_read_at
    table.delete_group(ORG, group.id)
    assert table.list_cuts(ORG, group.id) == []


def test_only_the_last_cuts_are_kept(table: MirrorsTable, clock: ManualClock) -> None:
    group = table.create_group(group_spec())
    for i in range(CUTS_KEPT + 3):
        group, _ = table.add_cut(group, {A: f"a{i}"}, clock(), "moved")
    kept = table.list_cuts(ORG, group.id)
    assert [c.sequence for c in kept] == list(range(4, CUTS_KEPT + 4))


def test_group_progress_is_written_by_version(table: MirrorsTable) -> None:
    group = table.create_group(group_spec())
    assert table.get_group_progress(ORG, group.id) is None
    with pytest.raises(GroupNotFoundError):
        table.put_group_progress(GroupProgress(ORG, "no-such-group"))
    stored = table.put_group_progress(GroupProgress(ORG, group.id, waiting_cut=1,
                                                    waiting_for="m-a: 3 objects missing"))
    assert stored.version == 1 and table.get_group_progress(ORG, group.id) == stored
    with pytest.raises(VersionConflictError):
        table.put_group_progress(GroupProgress(ORG, group.id))  # exists already
    served = table.put_group_progress(replace(stored, served_cut=1, waiting_cut=0,
                                              waiting_for=""))
    assert table.get_group_progress(ORG, group.id) == served
    with pytest.raises(VersionConflictError):
        table.put_group_progress(stored)  # stale
    with pytest.raises(VersionConflictError):
        table.delete_group_progress(ORG, group.id, stored.version)
    table.delete_group_progress(ORG, group.id, served.version)
    assert table.get_group_progress(ORG, group.id) is None


def test_the_change_feed_reports_groups_cuts_and_progress(table: MirrorsTable,
                                                          clock: ManualClock) -> None:
    kinds = frozenset({RowKind.GROUP, RowKind.CUT, RowKind.GROUP_PROGRESS})
    with table.watch(ORG, kinds, poll_interval=0.05) as feed:
        group = table.create_group(group_spec())
        group, cut = table.add_cut(group, {A: "a1", B: "b1"}, clock(), "moved")
        table.put_group_progress(GroupProgress(ORG, group.id, served_cut=1))
        table.delete_group(ORG, group.id)
        seen = []
        while len(seen) < 5:
            event = feed.get(timeout=15)
            assert event is not None, f"only {seen}"
            seen.append(event)
    shape = [(e.kind, e.key, e.deleted) for e in seen]
    assert shape[0] == (RowKind.GROUP, (group.id,), False)
    # the cut and the group's move to it are one write: in either order
    assert sorted(shape[1:3]) == sorted([(RowKind.GROUP, (group.id,), False),
                                         (RowKind.CUT, (group.id, "1"), False)])
    assert shape[3:] == [(RowKind.GROUP_PROGRESS, (group.id,), False),
                         (RowKind.GROUP, (group.id,), True)]
    rows = {e.kind: e.row for e in seen[1:3]}
    assert rows[RowKind.CUT] == cut and rows[RowKind.GROUP] == group
