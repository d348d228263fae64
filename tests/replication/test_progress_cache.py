"""A sidecar keeps its mirrors' progress rows from the change feed: a mirror's round
does not read them from the table each time, and what the feed tells, or the sidecar
writes, is what the next round sees."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from lakefs_testing.regions import (
    ORG,
    Region,
    commit,
    create_mirror,
    create_source,
    mirror_head,
    two_regions,
    upload,
)
from lakefs_testing.waiting import wait_for
from mirrors_db import MirrorBranch, MirrorSpec, MirrorsTable, RowKind, open_mirrors_table
from replication.progress_cache import ProgressCache


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


def _table_requests(region: Region) -> dict[str, float]:
    r = httpx.get(region.sidecars[0].url + "/metrics", timeout=10)
    assert r.status_code == 200
    return {s.labels["operation"]: s.value
            for f in text_string_to_metric_families(r.text) for s in f.samples
            if s.name == "replication_mirrors_table_requests_total"}


def test_rounds_do_not_read_the_progress_rows_per_commit(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, interval="1m") as (east, west):
        create_source(east)
        upload(east, "src", "main", "a", b"0")
        c0 = commit(east, "src", "main", "c0")
        create_mirror(east)
        wait_for(lambda: mirror_head(west, "src-mirror", "main") == c0, 30, what="c0")
        before = _table_requests(west)
        for i in range(1, 6):
            upload(east, "src", "main", f"k{i}", str(i).encode())
            ci = commit(east, "src", "main", f"c{i}")
            wait_for(lambda ci=ci: mirror_head(west, "src-mirror", "main") == ci, 30,
                     what=f"c{i}")
        after = _table_requests(west)
        assert after.get("put_branch_progress", 0) > before.get("put_branch_progress", 0)
        for operation in ("list_branch_progress", "get_branch_progress"):
            assert after.get(operation, 0) == before.get(operation, 0), operation
