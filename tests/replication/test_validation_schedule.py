"""The validator's schedule: run_interval, cooldown_on_missing, cooldown_on_error and
the missing-piece recheck each decide when a waiting commit is validated again.

Objects are copied to the destination by the test itself (the ``native`` mode's
stand-in for bucket replication), so nothing but the sidecar's own schedule can make
it look again: once the commit waits, the source does not move and no event comes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from lakefs_core.graveler.graveler import Graveler
from lakefs_testing.regions import (
    MIRRORS,
    Region,
    commit,
    create_mirror,
    create_source,
    mirror_head,
    two_regions,
    upload,
)
from lakefs_testing.replicator import FaultyReplicator
from lakefs_testing.waiting import wait_for
from replication.mirroring import MirrorContext
from tests.replication.settings import configure, stays_false

#: long enough to never come during a test
NEVER = "1h"
#: how long a test watches for something that must not happen
QUIET = 2.0


@contextmanager
def waiting_regions(tmp: Path, mirrors: dict[str, Any],
                    validator: dict[str, str]) -> Iterator[tuple[Region, Region]]:
    """Two regions whose sidecars sense only on events, on the given validator schedule."""
    with two_regions(tmp, mirrors, mode="native", sidecars=False) as (east, west):
        for region in (east, west):
            configure(region, commit_sensor={"process_branches_duration": NEVER},
                      mirrors_manager={"process_mirrors_interval_duration": NEVER},
                      validator=validator)
            region.start_sidecar()
        yield east, west


def branch_status(west: Region, mirror_id: str) -> dict[str, Any]:
    with west.client() as c:
        r = c.get(f"{MIRRORS}/src/mirrors/{mirror_id}/status")
        assert r.status_code == 200, r.text
        return {b["branch"]: b for b in r.json()["branches"]}.get("main", {})


def replicator(east: Region, west: Region, held: set[str]) -> FaultyReplicator:
    """Copies the source's files to the mirror's namespace, but none of ``held``."""
    return FaultyReplicator(east.blockstore_root / "src", west.blockstore_root / "src-mirror",
                            drop=0, duplicate=0, max_delay=0, hold=lambda rel: rel in held)


def metarange_file(graveler: Graveler, commit_id: str) -> str:
    return f"_lakefs/{graveler.get_commit('src', commit_id).commit.metarange_id}"


def expect_promotion(west: Region, head: str, advances: bool) -> None:
    """The mirror's main reaches ``head`` soon if ``advances``, else stays unpromoted."""
    if advances:
        wait_for(lambda: mirror_head(west, "src-mirror", "main") == head, 30,
                 what="validated again and promoted")
    else:
        assert stays_false(lambda: mirror_head(west, "src-mirror", "main"), QUIET)


@pytest.mark.parametrize(("validator", "advances"), [
    # validation runs come often and the cooldown is short: validated again
    ({"run_interval": "100ms", "cooldown_on_missing": "200ms",
      "missing_recheck_interval": "0s"}, True),
    # no validation run comes: not validated again, though the cooldown is over
    ({"run_interval": NEVER, "cooldown_on_missing": "0s",
      "missing_recheck_interval": "0s"}, False),
    # runs come, but the cooldown is not over: not validated again
    ({"run_interval": "100ms", "cooldown_on_missing": NEVER,
      "missing_recheck_interval": "0s"}, False),
    # neither, but the recheck sees the missing object arrive: validated at once
    ({"run_interval": NEVER, "cooldown_on_missing": NEVER,
      "missing_recheck_interval": "100ms"}, True),
], ids=["runs-after-cooldown", "no-run", "in-cooldown", "recheck"])
def test_a_commit_missing_an_object_is_validated_again_on_schedule(
        tmp_path: Path, sqlite_mirrors: dict[str, Any], validator: dict[str, str],
        advances: bool) -> None:
    with waiting_regions(tmp_path, sqlite_mirrors, validator) as (east, west):
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
        held.clear()
        crr.drain()  # the object is there now; nothing tells the sidecar
        expect_promotion(west, c1, advances)


@pytest.mark.parametrize(("cooldown_on_error", "advances"), [("200ms", True), (NEVER, False)])
def test_a_failed_validation_is_tried_again_after_cooldown_on_error(
        tmp_path: Path, sqlite_mirrors: dict[str, Any], cooldown_on_error: str,
        advances: bool) -> None:
    validator = {"run_interval": "100ms", "cooldown_on_error": cooldown_on_error,
                 "cooldown_on_missing": NEVER, "missing_recheck_interval": "100ms"}
    with waiting_regions(tmp_path, sqlite_mirrors, validator) as (east, west):
        create_source(east)
        upload(east, "src", "main", "a.bin", b"a")
        c1 = commit(east, "src", "main", "one object")
        metarange = metarange_file(east.graveler, c1)
        held = {metarange}
        crr = replicator(east, west, held)
        crr.drain()
        # the destination store fails to read the metarange (a symbolic link loop)
        broken = west.blockstore_root / "src-mirror" / metarange
        os.symlink(broken, broken)
        mirror = create_mirror(east)
        wait_for(lambda: "validation failed" in
                 (branch_status(west, mirror["id"]).get("error") or ""), 30,
                 what="the failed validation in the branch's status")
        broken.unlink()
        held.clear()
        crr.drain()  # the store reads it now; nothing tells the sidecar
        expect_promotion(west, c1, advances)


def test_validation_runs_are_run_interval_apart() -> None:
    ctx = MirrorContext(organization_id="o", table=None, mirrors=None,  # type: ignore[arg-type]
                        metrics=None, source_client=None,  # type: ignore[arg-type]
                        copy_source_store=None, store_for=None,  # type: ignore[arg-type]
                        builtin=None, run_interval=60.0, runs_from=1000.0)
    assert ctx.validation_run_at(900.0) == 1000.0
    assert ctx.validation_run_at(1000.0) == 1000.0
    assert ctx.validation_run_at(1000.5) == 1060.0
    assert ctx.validation_run_at(1060.0) == 1060.0
    assert ctx.validation_run_at(1119.0) == 1120.0
