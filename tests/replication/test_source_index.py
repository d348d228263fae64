"""The source region's index of its mirrors and groups, kept by the change feed: a
commit is told to its mirrors' regions and cuts its groups without reading the mirrors
table once per commit."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from lakefs_testing.regions import (
    ORG,
    create_mirror,
    create_source,
    two_regions,
)
from lakefs_testing.waiting import wait_for
from mirrors_db import GroupMember, GroupSpec, MirrorSpec, MirrorState, open_mirrors_table
from replication.source_index import SourceIndex
from tests.replication.traffic import commit_and_follow, table_requests


def test_the_index_follows_the_feed(sqlite_mirrors: dict[str, Any]) -> None:
    with open_mirrors_table(sqlite_mirrors) as table:
        index = SourceIndex(table, ORG, "east", page_size=2)
        assert index.mirrors_of(["src"]) is None and index.groups() is None  # not loaded
        before = table.create_mirror(MirrorSpec(ORG, "old", "east", "src", "west",
                                                "local://old"))
        for i in range(3):  # more than a page
            table.create_mirror(MirrorSpec(ORG, f"n{i}", "east", f"r{i}", "west",
                                           f"local://n{i}"))
        with table.watch(ORG, poll_interval=0.05) as feed:
            index.load()
            assert [m.id for m in index.mirrors_of(["src"]) or []] == [before.id]
            assert len(index.mirrors_of(["r0", "r1", "r2"]) or []) == 3
            assert index.groups() == []

            def pump(until: Any) -> None:
                deadline = time.monotonic() + 10
                while not until():
                    assert time.monotonic() < deadline, "the feed did not tell"
                    event = feed.get(timeout=0.2)
                    if event is not None:
                        index.on_event(event)

            other_source = table.create_mirror(MirrorSpec(ORG, "x", "north", "src", "west",
                                                          "local://x"))
            new = table.create_mirror(MirrorSpec(ORG, "new", "east", "src", "south",
                                                 "local://new"))
            pump(lambda: len(index.mirrors_of(["src"]) or []) == 2)
            assert other_source.id not in {m.id for m in index.mirrors_of(["src"]) or []}
            active = table.update_mirror(new.with_state(MirrorState.ACTIVE))
            pump(lambda: any(m.version == active.version
                             for m in index.mirrors_of(["src"]) or []))
            table.update_mirror(active.with_state(MirrorState.DELETING))
            pump(lambda: [m.id for m in index.mirrors_of(["src"]) or []] == [before.id])

            group = table.create_group(GroupSpec(ORG, "g", "east", "west",
                                                 (GroupMember(before.id, "main"),)))
            table.create_group(GroupSpec(ORG, "elsewhere", "north", "west", ()))
            pump(lambda: [g.id for g in index.groups() or []] == [group.id])
            table.delete_group(ORG, group.id)
            pump(lambda: index.groups() == [])
        index.forget()
        assert index.mirrors_of(["src"]) is None


def test_commits_are_told_without_reading_the_table_per_commit(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, interval="1m") as (east, west):
        create_source(east)
        index = east.sidecars[0].sidecar.source_index
        wait_for(lambda: index.loaded, 30, what="east's index read")
        mirror = create_mirror(east)
        # known at once, not when the feed tells: the mirror's region is told of it next
        assert [m.id for m in index.mirrors_of(["src"]) or []] == [mirror["id"]]
        commit_and_follow(east, west, 1, "first")
        before = table_requests(east)
        commit_and_follow(east, west, 5)  # told by the events: the sensor's period is a minute
        after = table_requests(east)
        for operation in ("list_mirrors_by_source", "list_groups", "get_mirror"):
            assert after.get(operation, 0) == before.get(operation, 0), operation
