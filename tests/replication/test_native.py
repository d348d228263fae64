"""Native object replication (simulated with faults): order and completeness never assumed."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from lakefs_testing.regions import (
    MIRRORS,
    commit,
    create_mirror,
    create_source,
    mirror_head,
    two_regions,
    upload,
)
from lakefs_testing.replicator import FaultyReplicator
from lakefs_testing.waiting import wait_for
from tests.replication.invariants import MirrorChecker


def test_missing_object_blocks_promotion_until_it_arrives(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, mode="native", interval="1s") as (east, west):
        create_source(east)
        for i in range(20):
            upload(east, "src", "main", f"part-{i:03d}.bin", bytes([i]) * (100 + i))
        c1 = commit(east, "src", "main", "twenty objects")
        held = east.graveler.get_entry("src", c1, "part-007.bin").address
        hold = {"on": True}
        crr = FaultyReplicator(east.blockstore_root / "src", west.blockstore_root / "src-mirror",
                               seed=7, hold=lambda rel: hold["on"] and rel == held)
        mirror = create_mirror(east)
        checker = MirrorChecker(east.graveler, "src", west.graveler, "src-mirror")
        crr.start()
        try:
            wait_for(lambda: crr.pending() == [held], 30, what="everything but one object",
                     check=checker.check)
            # the sidecar has had time to look; the commit must not be promoted
            def status() -> dict[str, Any]:
                with west.client() as c:
                    r = c.get(f"{MIRRORS}/src/mirrors/{mirror['id']}/status")
                    return {b["branch"]: b for b in r.json()["branches"]}
            # the object copied late at first validation is dropped by a recheck
            row = wait_for(lambda: status().get("main", {}).get("missing_objects") == 1 and
                           status()["main"], 30, what="missing object reported",
                           check=checker.check,
                           state=lambda: (status().get("main"), crr.pending()))
            assert row["mirror_head"] is None and row["pending_commit"] == c1
            assert mirror_head(west, "src-mirror", "main") is None
            with west.client() as c:
                r = c.get(f"/api/v1/repositories/src-mirror/refs/{c1}/objects",
                          params={"path": "part-001.bin"})
                assert r.status_code == 404
                assert "not fully replicated" in r.json()["message"] or \
                    "not found" in r.json()["message"]
            hold["on"] = False
            wait_for(lambda: mirror_head(west, "src-mirror", "main") == c1, 30,
                     what="promotion after arrival", check=checker.check)
            # many commits in a row while copies arrive late, duplicated, out of order
            heads = []
            for n in range(5):
                upload(east, "src", "main", f"batch-{n}/x.bin", f"batch {n}".encode())
                upload(east, "src", "main", f"part-{n:03d}.bin", f"changed {n}".encode())
                heads.append(commit(east, "src", "main", f"batch {n}"))
                checker.source_moved("main", heads[-1])
                time.sleep(0.1)
            wait_for(lambda: mirror_head(west, "src-mirror", "main") == heads[-1], 60,
                     what="last batch promoted", check=checker.check)
            checker.check()
        finally:
            crr.stop()
