"""What a long-running mirror keeps stays bounded: branches come and go, commits pile up.

Memory and rows that only a pending commit needs are dropped once its ref is promoted
(or its source branch is gone); what a pending commit needs is kept. The soak
(``python -m bench.soak``) watches the same over hours.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

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
from replication.mirroring import EARLIER_HEADS, MirrorFollower
from replication.sidecar import Sidecar
from tests.replication.invariants import MirrorChecker


def _series(sidecar: Sidecar, mirror: str) -> set[tuple[str, str]]:
    """The (metric, branch) series the sidecar exports for a mirror."""
    out = set()
    for family in sidecar.metrics.registry.collect():
        for sample in family.samples:
            if sample.labels.get("mirror") == mirror:
                out.add((sample.name, sample.labels.get("branch", "")))
    return out


def _rows(region: Region, table: str) -> int:
    """Rows of a table of the region's refstore."""
    conn = sqlite3.connect(f"file:{region.root / 'metadata.db'}?mode=ro", uri=True)
    try:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        conn.close()


def _follower(west: Region, mirror_id: str) -> MirrorFollower:
    sidecar = west.sidecars[0].sidecar
    return wait_for(lambda: sidecar._followers.get(mirror_id), 30, what="the follower")


def _branch(east: Region, name: str) -> None:
    with east.client() as c:
        r = c.post("/api/v1/repositories/src/branches", json={"name": name, "source": "main"})
        assert r.status_code == 201, r.text


def _delete_branch(east: Region, name: str) -> None:
    with east.client() as c:
        assert c.delete(f"/api/v1/repositories/src/branches/{name}").status_code == 204


def test_state_stays_bounded_while_branches_come_and_go(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, mode="native", interval="1s") as (east, west):
        create_source(east)
        mirror = create_mirror(east)
        checker = MirrorChecker(east.graveler, "src", west.graveler, "src-mirror")
        crr = FaultyReplicator(east.blockstore_root / "src", west.blockstore_root / "src-mirror",
                               seed=3, drop=0.2, duplicate=0.1, max_delay=0.005)
        crr.start()
        sidecar = west.sidecars[0].sidecar
        rounds = 6
        try:
            for n in range(rounds):
                job = f"job-{n}"
                _branch(east, job)
                for i in range(8):
                    upload(east, "src", job, f"job/{n}/part-{i}.bin", f"{n}:{i}".encode() * 50)
                head = commit(east, "src", job, f"job {n}")
                checker.source_moved(job, head)
                upload(east, "src", "main", f"main/{n}.bin", f"main {n}".encode())
                main = commit(east, "src", "main", f"main {n}")
                checker.source_moved("main", main)
                wait_for(lambda h=head, j=job: mirror_head(west, "src-mirror", j) == h, 60,
                         what=f"{job} mirrored", check=checker.check)
                _delete_branch(east, job)
                checker.source_moved(job, None)
                wait_for(lambda j=job: mirror_head(west, "src-mirror", j) is None, 60,
                         what=f"{job} gone from the mirror", check=checker.check)
            wait_for(lambda: mirror_head(west, "src-mirror", "main") == main, 60,
                     what="main mirrored", check=checker.check)
            follower = _follower(west, mirror["id"])
            # caught up: nothing pending, and nothing proven kept for promoted commits
            wait_for(lambda: not follower.refs and follower.validator.proven_count == 0, 30,
                     what="the validator's memory dropped once caught up")
            # the ranges it read sit in the replica's one range cache, and went with it
            shared = sidecar.ctx.range_cache
            assert follower.validator.ranges._ranges is shared
            # and it weighs listing against stat by the times measured on its store
            assert follower.store.times is not None
            assert follower.validator.request_times is follower.store.times
            assert shared._cache.maxsize == sidecar.config.validator.range_cache_size_bytes
            ns = follower.mirror.storage_namespace
            wait_for(lambda: not any(key[0] == ns for key in list(shared._cache)), 30,
                     what="the mirror's ranges dropped from the shared cache")
            # series of the mirror: those of main only, whatever branches came and went
            # (a deleted branch's go in the round that forgets it, which may still run)
            wait_for(lambda: {b for _, b in _series(sidecar, "src-mirror") if b} == {"main"},
                     30, what="the series of main only")
            # progress rows and mirror branches: main only (a deleted branch's row goes
            # in the round after its mirror branch)
            wait_for(lambda: [p.branch for p in sidecar.table.list_branch_progress(
                sidecar.org, mirror["id"])] == ["main"], 30, what="main's progress row only")
            assert [b.name for b in west.graveler.refstore.list_branches("src-mirror")] == [
                "main"]
            # the commits the mirror proved present are history: at most one per head
            # the source had (the first commit, a job and a main commit per round)
            assert _rows(west, "present_commits") <= 2 * rounds + 1
        finally:
            crr.stop()
        # a deleted mirror leaves no series behind
        with east.client() as c:
            r = c.delete(f"{MIRRORS}/src/mirrors/{mirror['id']}")
            assert r.status_code == 204, r.text
        wait_for(lambda: not _series(sidecar, "src-mirror")
                 and mirror["id"] not in sidecar._followers, 30,
                 what="the deleted mirror's series dropped")


def test_pruning_keeps_what_a_pending_commit_needs(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, mode="native", interval="1s") as (east, west):
        create_source(east)
        _branch(east, "other")  # from the first commit: it needs none of main's objects
        mirror = create_mirror(east)
        paths = [f"wait/part-{i}.bin" for i in range(10)]
        for i, path in enumerate(paths):
            upload(east, "src", "main", path, bytes([i]) * (200 + i))
        pending = commit(east, "src", "main", "ten objects, one held back")
        held = east.graveler.get_entry("src", pending, paths[0]).address
        hold = {"on": True}
        crr = FaultyReplicator(east.blockstore_root / "src", west.blockstore_root / "src-mirror",
                               seed=5, drop=0.0, duplicate=0.0, max_delay=0.001,
                               hold=lambda rel: hold["on"] and rel == held)
        crr.start()
        checker = MirrorChecker(east.graveler, "src", west.graveler, "src-mirror")
        checker.source_moved("main", pending)
        try:
            follower = _follower(west, mirror["id"])
            # waiting for the held object alone: every other object was proven (by the
            # first validation, or by a later one if a copy came late)
            wait_for(lambda: "main" in follower.refs and [
                m.key for m in follower.refs["main"].missing] == [paths[0]], 60,
                what="main waiting for its held object alone", check=checker.check)
            # another branch is promoted meanwhile: main still waits
            upload(east, "src", "other", "other.bin", b"other")
            other = commit(east, "src", "other", "other")
            checker.source_moved("other", other)
            wait_for(lambda: mirror_head(west, "src-mirror", "other") == other, 60,
                     what="other promoted", check=checker.check)
            assert mirror_head(west, "src-mirror", "main") != pending
            with west.client() as c:
                r = c.get(f"/api/v1/repositories/src-mirror/refs/{pending}/objects",
                          params={"path": paths[1]})
                assert r.status_code == 404
            # what main's validation proved is still known: no request proves it again
            # (asked of the proofs themselves: the sidecar's own rounds go on meanwhile)
            validator = follower.validator
            for path in paths[1:]:
                entry = east.graveler.get_entry("src", pending, path)
                assert validator.object_address(entry) in validator._proven_objects, path
                assert validator.check_object(path, entry) is None
            hold["on"] = False
            wait_for(lambda: mirror_head(west, "src-mirror", "main") == pending, 60,
                     what="main promoted once the object arrived", check=checker.check)
            with west.client() as c:
                r = c.get(f"/api/v1/repositories/src-mirror/refs/{pending}/objects",
                          params={"path": paths[0]})
                assert r.status_code == 200 and r.content == bytes([0]) * 200
        finally:
            crr.stop()


def test_a_branch_moving_faster_than_its_objects_still_advances(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, mode="native", interval="1s") as (east, west):
        create_source(east)
        mirror = create_mirror(east)
        released: set[str] = set()  # object data is held back until released
        crr = FaultyReplicator(east.blockstore_root / "src", west.blockstore_root / "src-mirror",
                               seed=9, drop=0.0, duplicate=0.0, max_delay=0.001,
                               hold=lambda rel: rel.startswith("data/") and rel not in released)
        checker = MirrorChecker(east.graveler, "src", west.graveler, "src-mirror")
        crr.start()
        heads: list[str] = []
        try:
            follower = _follower(west, mirror["id"])
            # each head waits for its own object when the branch moves on
            for n in range(EARLIER_HEADS + 2):
                upload(east, "src", "main", f"step-{n}.bin", f"step {n}".encode() * 30)
                heads.append(commit(east, "src", "main", f"step {n}"))
                checker.source_moved("main", heads[-1])
                wait_for(lambda h=heads[-1]: "main" in follower.refs
                         and follower.refs["main"].target == h
                         and follower.refs["main"].missing, 60,
                         what=f"head {n} waiting", check=checker.check)
            # objects arrive in the order they were written, slower than the branch
            # moves: the mirror advances through the oldest heads kept waiting
            def release(n: int) -> None:
                released.add(east.graveler.get_entry("src", heads[n], f"step-{n}.bin").address)

            release(0)
            wait_for(lambda: mirror_head(west, "src-mirror", "main") == heads[0], 60,
                     what="the mirror at the oldest head", check=checker.check)
            release(1)
            release(2)
            wait_for(lambda: mirror_head(west, "src-mirror", "main") == heads[2], 60,
                     what="the mirror at the newest complete head", check=checker.check)
            assert follower.refs["main"].target == heads[-1]
            with west.client() as c:
                r = c.get(f"/api/v1/repositories/src-mirror/refs/{heads[-1]}/objects",
                          params={"path": "step-0.bin"})
                assert r.status_code == 404
            for n in range(3, len(heads)):
                release(n)
            wait_for(lambda: mirror_head(west, "src-mirror", "main") == heads[-1], 60,
                     what="the newest head once complete", check=checker.check)
            checker.check()
        finally:
            crr.stop()


def test_a_reading_or_round_begun_before_a_mirror_was_deleted_leaves_nothing_of_it(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    """The sensor reads a region's heads for the mirrors it follows at that moment, and
    a round runs for the mirror it began with: a mirror deleted in between must not get
    its follower and series back from them."""
    from datetime import UTC, datetime

    with two_regions(tmp_path, sqlite_mirrors, mode="native", interval="1s") as (east, west):
        create_source(east)
        mirror = create_mirror(east)
        sidecar = west.sidecars[0].sidecar
        wait_for(lambda: mirror["id"] in sidecar._followers and _series(sidecar, "src-mirror"),
                 60, what="the mirror followed")
        before = sidecar._mirrors[mirror["id"]]  # as a reading or a round began with it
        heads = sidecar.client_for(before.source_region).heads([before.source_repository])
        with east.client() as c:
            r = c.delete(f"{MIRRORS}/src/mirrors/{mirror['id']}")
            assert r.status_code == 204, r.text
        wait_for(lambda: mirror["id"] not in sidecar._followers
                 and not _series(sidecar, "src-mirror"), 30, what="the mirror unfollowed")
        # then the reading confirms what it read, and the round runs
        assert sidecar.quiet(before, heads[before.source_repository],
                              datetime.now(UTC)) is None
        assert sidecar._round(before.id, before) is None
        assert mirror["id"] not in sidecar._followers
        assert not _series(sidecar, "src-mirror")
