"""A commit waiting for pieces is rechecked without reading its source or the mirrors
table again: a recheck round looks only at what was missing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lakefs_testing.regions import (
    Region,
    commit,
    create_mirror,
    create_source,
    mirror_head,
    two_regions,
    upload,
)
from lakefs_testing.waiting import wait_for
from replication.metrics import ReplicationMetrics
from replication.sidecar import Sidecar
from tests.replication.settings import configure
from tests.replication.test_validation_schedule import NEVER, branch_status, replicator


@contextmanager
def waiting_regions(tmp: Path, mirrors: dict[str, Any]) -> Iterator[tuple[Region, Region]]:
    """Two regions whose sidecars sense only on events and recheck missing pieces every
    100 ms (no validation run, no lag history: nothing else reads the table)."""
    with two_regions(tmp, mirrors, mode="native", sidecars=False) as (east, west):
        for region in (east, west):
            configure(region, commit_sensor={"process_branches_duration": NEVER},
                      mirrors_manager={"process_mirrors_interval_duration": NEVER},
                      validator={"run_interval": NEVER, "cooldown_on_missing": NEVER,
                                 "missing_recheck_interval": "100ms"},
                      lag_history={"interval": "0s"})
            region.start_sidecar()
        yield east, west


def total(metrics: ReplicationMetrics, name: str) -> float:
    """A metric's samples summed over their labels."""
    return sum(s.value for family in metrics.registry.collect() for s in family.samples
               if s.name == name)


#: the mirrors table's operations the sidecar runs on clocks of its own, whatever a round
#: does: lease renewals (a third of the lease's term) and the listing of its mirrors
LEASE_OPERATIONS = frozenset({"acquire_lease", "release_lease", "list_mirrors_by_destination"})


def requests(sidecar: Sidecar) -> tuple[float, dict[str, float]]:
    """(source requests, mirrors-table requests by operation but the leases') the sidecar
    made so far."""
    table: dict[str, float] = {}
    for family in sidecar.metrics.registry.collect():
        for s in family.samples:
            operation = s.labels.get("operation", "")
            if (s.name == "replication_mirrors_table_requests_total"
                    and operation not in LEASE_OPERATIONS):
                table[operation] = table.get(operation, 0.0) + s.value
    return total(sidecar.metrics, "replication_source_requests"), table


def test_rechecks_of_a_waiting_commit_read_neither_the_source_nor_the_table(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with waiting_regions(tmp_path, sqlite_mirrors) as (east, west):
        create_source(east)
        for i in range(3):
            upload(east, "src", "main", f"part-{i}.bin", bytes([i]) * (40 + i))
        c1 = commit(east, "src", "main", "three objects")
        held = {east.graveler.get_entry("src", c1, "part-1.bin").address}
        crr = replicator(east, west, held)
        crr.drain()
        mirror = create_mirror(east)
        wait_for(lambda: branch_status(west, mirror["id"]).get("missing_objects") == 1, 30,
                 what="the validation that finds the object missing")
        sidecar = west.sidecars[0].sidecar

        def rechecks(n: int) -> None:
            checked = total(sidecar.metrics, "replication_validation_requests_total")
            wait_for(lambda: total(sidecar.metrics, "replication_validation_requests_total")
                     >= checked + n, 30, what=f"{n} recheck(s)")

        rechecks(1)  # the round that found it missing is over: rechecks follow
        before = requests(sidecar)
        rechecks(3)
        assert requests(sidecar) == before  # nothing read but the destination store
        held.clear()
        released = time.time()
        crr.drain()  # the object is there now; nothing tells the sidecar
        wait_for(lambda: mirror_head(west, "src-mirror", "main") == c1, 30,
                 what="promoted after the recheck found the object")
        status = wait_for(lambda: (s := branch_status(west, mirror["id"]))
                          .get("mirror_head") == c1 and s, 30, what="the promotion recorded")
        assert status["source_head"] == c1
        # the promotion confirms the source's head as of the round that read it, before
        # the rechecks: never a later time, at which the source was not read
        assert status["source_confirmed_at"] is not None
        assert status["source_confirmed_at"] <= released
