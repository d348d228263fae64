"""Replicas say they live (a membership lease each). A replica alone in its region keeps
an idle mirror's lease instead of taking it and letting it go around every commit; once
another replica lives, idle mirrors' leases are let go again, so that whichever replica
hears of a move next takes the mirror."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lakefs_testing.regions import (
    ORG,
    Region,
    create_mirror,
    create_source,
    two_regions,
)
from lakefs_testing.waiting import wait_for
from mirrors_db import open_mirrors_table
from tests.replication.traffic import commit_and_follow


def _lease_requests(region: Region) -> float:
    total = 0.0
    for handle in region.sidecars:
        for metric in handle.sidecar.metrics.table_requests.collect():
            total += sum(s.value for s in metric.samples if s.name.endswith("_total")
                         and s.labels["operation"] in ("acquire_lease", "release_lease"))
    return total


def test_a_lone_replica_keeps_idle_leases_and_lets_them_go_once_another_lives(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, interval="1m") as (east, west):
        create_source(east)
        mirror = create_mirror(east)
        lone = west.sidecars[0].sidecar
        wait_for(lambda: lone.membership.alone(), 30, what="the replica knows it is alone")
        commit_and_follow(east, west, 1, "a")
        before = _lease_requests(west)
        commit_and_follow(east, west, 4, "b")
        # the mirror's lease, taken once, is kept (renewed at most every third of its term)
        assert _lease_requests(west) - before <= 1
        with open_mirrors_table(sqlite_mirrors) as table:
            lease = table.get_lease(ORG, f"west/mirror/{mirror['id']}")
            assert lease is not None and lease.owner == lone.owner
            assert table.get_lease(ORG, f"west/replica/{lone.owner}") is not None

        second = west.start_sidecar().sidecar
        wait_for(lambda: not lone.membership.alone() and not second.membership.alone(), 30,
                 what="each replica hears of the other")
        commit_and_follow(east, west, 1, "c")
        wait_for(lambda: not any(k == mirror["id"] for k in lone._leases)
                 and not any(k == mirror["id"] for k in second._leases), 30,
                 what="the idle mirror's lease let go")
        # a commit that reaches the second replica is followed at once
        second.on_ref_events([{"repository": "src"}], "east")
        commit_and_follow(east, west, 2, "d")

        west.sidecars.pop().stop()  # the second goes: its membership with it
        wait_for(lambda: lone.membership.alone(), 30, what="alone again")
