"""A sidecar keeps its mirrors' progress rows from the change feed: a mirror's round
does not read them from the table each time, and what the feed tells, or the sidecar
writes, is what the next round sees."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from lakefs_testing.regions import (
    ORG,
    create_mirror,
    create_source,
    two_regions,
)
from mirrors_db import (
    MirrorBranch,
    MirrorSpec,
    MirrorsTable,
    MirrorState,
    RowKind,
    open_mirrors_table,
)
from replication.progress_cache import ProgressCache
from tests.replication.traffic import commit_and_follow, table_requests


class CountedTable:
    """The table, its reads of progress rows counted."""

    def __init__(self, table: MirrorsTable) -> None:
        self.table = table
        self.reads = 0

    def list_branch_progress(self, org: str, mirror_id: str) -> list[MirrorBranch]:
        self.reads += 1
        return self.table.list_branch_progress(org, mirror_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.table, name)


def test_rows_are_read_once_then_kept_by_the_feed_and_own_writes(
        sqlite_mirrors: dict[str, Any]) -> None:
    with open_mirrors_table(sqlite_mirrors) as table:
        m = table.create_mirror(MirrorSpec(ORG, "m", "east", "src", "west", "local://m"))
        main = table.put_branch_progress(MirrorBranch(ORG, m.id, "main", source_head="c1"))
        counted = CountedTable(table)
        cache = ProgressCache(counted, ORG, page_size=100)  # type: ignore[arg-type]

        assert cache.rows(m.id) == [main] and cache.rows(m.id) == [main]
        assert counted.reads == 2  # the feed is closed: every read goes to the table

        with table.watch(ORG, frozenset({RowKind.BRANCH}), poll_interval=0.05) as feed:
            cache.feed_opened()
            assert cache.rows(m.id) == [main] and cache.rows(m.id) == [main]
            assert counted.reads == 3  # read once, then kept

            # another writer's change reaches the cache through the feed
            theirs = table.put_branch_progress(replace(main, source_head="c2"))
            deadline = time.monotonic() + 10
            while cache.rows(m.id) != [theirs]:
                assert time.monotonic() < deadline, "the feed did not tell"
                event = feed.get(timeout=0.2)
                if event is not None:
                    cache.changed(event)
            # an own write is seen at once; an older version told later does not undo it
            ours = table.put_branch_progress(replace(theirs, source_head="c3"))
            cache.stored(ours)
            cache.stored(theirs)
            assert cache.rows(m.id) == [ours]
            dev = table.put_branch_progress(MirrorBranch(ORG, m.id, "dev"))
            cache.stored(dev)
            assert cache.rows(m.id) == [dev, ours]
            table.delete_branch_progress(ORG, m.id, "dev", dev.version)
            cache.removed(m.id, "dev")
            assert cache.rows(m.id) == [ours]
            assert counted.reads == 3

            # a refused write: the rows are read again
            cache.conflicted(m.id)
            assert cache.rows(m.id) == [ours] and counted.reads == 4

            # all of them at once: one listing of the organization's rows
            assert cache.read_all([m.id, "other"]) == {m.id: [ours], "other": []}
            assert cache.rows("other") == [] and counted.reads == 4
        cache.feed_closed()
        assert cache.rows(m.id) == [ours] and counted.reads == 5


def test_rounds_do_not_read_the_progress_rows_per_commit(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, interval="1m") as (east, west):
        create_source(east)
        create_mirror(east)
        commit_and_follow(east, west, 1, "first")
        before = table_requests(west)
        commit_and_follow(east, west, 5)
        after = table_requests(west)
        assert after.get("put_branch_progress", 0) > before.get("put_branch_progress", 0)
        for operation in ("list_branch_progress", "get_branch_progress"):
            assert after.get(operation, 0) == before.get(operation, 0), operation


def test_many_new_mirrors_are_sampled_from_one_listing(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    """Mirrors created in bulk: the lag history reads their rows in one listing of the
    organization's rows, not one read each."""
    with two_regions(tmp_path, sqlite_mirrors, interval="1m") as (_east, west):
        sidecar = west.sidecars[0].sidecar
        sidecar.views.sample_lag()  # the rows of the mirrors so far (none) are kept
        with open_mirrors_table(sqlite_mirrors) as table:
            for i in range(40):  # mirrors of west's repositories into another region
                m = table.create_mirror(MirrorSpec(ORG, f"m{i}", "west", f"r{i}", "north",
                                                   f"local://m{i}"))
                table.update_mirror(m.with_state(MirrorState.ACTIVE, ""))
                table.put_branch_progress(MirrorBranch(ORG, m.id, "main", source_head="c1"))
        before = table_requests(west)
        assert sidecar.views.sample_lag() == 40
        after = table_requests(west)
        assert after.get("list_branch_progress", 0) - before.get("list_branch_progress", 0) < 5
        assert after.get("list_all_branch_progress", 0) > before.get(
            "list_all_branch_progress", 0)
        assert sidecar.progress.unkept([f"x{i}" for i in range(3)]) == 3
