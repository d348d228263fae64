"""A sensor confirms idle mirrors in pages of its reading, not in each branch's row:
confirming a thousand idle mirrors costs a few writes a period, not a thousand. Every
view shows the confirmation as if the branch's row carried it (design I6)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from lakefs_testing.regions import (
    ORG,
    commit,
    create_mirror,
    create_source,
    mirror_head,
    two_regions,
    upload,
)
from lakefs_testing.waiting import wait_for
from mirrors_db import Mirror, MirrorBranch, MirrorState, SensorReading, open_mirrors_table
from replication.freshness import Confirmations, branch_freshness
from replication.lag_history import branch_lag
from tests.replication.test_honest_rpo import _main, _status

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def _row(**fields: Any) -> MirrorBranch:
    values: dict[str, Any] = {"organization_id": "org", "mirror_id": "m1", "branch": "main",
                              "source_head": "c1", "promoted_commit": "c1",
                              "source_seen_at": T0, "source_confirmed_at": T0, "version": 3}
    values.update(fields)
    return MirrorBranch(**values)


def test_a_reading_confirms_only_the_branches_it_lists_and_never_moves_a_row_back() -> None:
    later, earlier = T0 + timedelta(seconds=60), T0 - timedelta(seconds=60)
    confirmations = Confirmations([
        SensorReading("org", "west", "east", 0, later, {"m1": ("main",), "m2": ("dev",)}),
        SensorReading("org", "west", "east", 1, earlier, {"m1": ("dev",)}),
        # an older page listing the same branch: the later reading counts
        SensorReading("org", "west", "east", 2, earlier, {"m1": ("main",)}),
    ])
    main = confirmations.apply(_row())
    assert (main.source_seen_at, main.source_confirmed_at) == (later, later)
    assert branch_lag(main, later.timestamp() + 5) == 5
    # not listed: unchanged; listed with an earlier reading than the row's own: unchanged
    assert confirmations.apply(_row(branch="other")) == _row(branch="other")
    assert confirmations.apply(_row(branch="dev")) == _row(branch="dev")
    # a row written since (a new head pending) keeps its own state and newer times
    pending = _row(source_head="c2", pending_commit="c2", source_head_seen_at=later,
                   source_seen_at=later + timedelta(seconds=1))
    moved = confirmations.apply(pending)
    assert moved.source_seen_at == later + timedelta(seconds=1)
    assert moved.source_confirmed_at == later
    fresh = branch_freshness_of(moved, later.timestamp() + 10)
    assert not fresh.current and fresh.lag_seconds >= 10


def branch_freshness_of(row: MirrorBranch, now: float) -> Any:
    mirror = Mirror("org", "m1", "src-mirror", "east", "src", "west", "local://x",
                    MirrorState.ACTIVE, "", T0, T0, 2)
    return branch_freshness(mirror, row, now, stale_after=120)


def test_an_idle_mirror_is_confirmed_by_readings_and_its_row_is_left_alone(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, interval="1s") as (east, west):
        create_source(east)
        upload(east, "src", "main", "a", b"1")
        c1 = commit(east, "src", "main", "c1")
        mirror = create_mirror(east)
        wait_for(lambda: mirror_head(west, "src-mirror", "main") == c1
                 and _main(_status(west, mirror["id"]))["current"], 30, what="current")
        with open_mirrors_table(sqlite_mirrors) as table:
            def readings() -> list[SensorReading]:
                return [r for r in table.list_sensor_readings(ORG, "west")
                        if mirror["id"] in r.confirmed]

            wait_for(lambda: bool(readings()), 30, what="a reading that confirms the mirror")
            row = table.get_branch_progress(ORG, mirror["id"], "main")
            first = max(r.read_at for r in readings())
            time.sleep(3.5)  # a few of the sensor's periods
            later = max(r.read_at for r in readings())
            assert later > first
            assert readings()[0].confirmed[mirror["id"]] == ("main",)
            # the row was not written again: the readings carry its confirmation
            assert table.get_branch_progress(ORG, mirror["id"], "main") == row

        # every region's status shows the reading's confirmation, current and fresh
        for region in (east, west):
            main = _main(_status(region, mirror["id"]))
            assert main["current"] and not main["stale"]
            assert main["source_confirmed_at"] >= int(later.timestamp())
            assert main["lag_seconds"] < 3
            assert (row.source_confirmed_at is not None
                    and main["source_confirmed_at"] > row.source_confirmed_at.timestamp())

        # a new commit is followed as before: its row is written, then confirmed again
        upload(east, "src", "main", "b", b"2")
        c2 = commit(east, "src", "main", "c2")
        wait_for(lambda: _main(_status(west, mirror["id"]))["mirror_head"] == c2
                 and _main(_status(west, mirror["id"]))["current"], 30, what="c2 current")
