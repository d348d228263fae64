"""Faults with real processes: the source region lost, kill -9 and restart (I5), racing
replicas, and a mirror deleted while commits are in flight. I1-I4 are checked all along.

The sidecars act as a user with one of seed 003's policies, narrow or broad, in turns.
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
from typing import Any

import pytest

from e2e.api import ApiError, RegionClient, read_metrics
from e2e.cluster import Cluster, ClusterSpec
from e2e.invariants import ApiMirrorChecker
from e2e.processes import ManagedProcess
from e2e.workload import SourceDriver
from lakefs_testing.waiting import wait_for
from tests.e2e.conftest import Start

pytestmark = pytest.mark.e2e


def _mirrored(cluster: Cluster, east: RegionClient, west: RegionClient,
              seed: int) -> tuple[ApiMirrorChecker, SourceDriver, dict[str, Any]]:
    """A source repository with one commit, a mirror of it in west, in sync."""
    checker = ApiMirrorChecker(east, "src", west, "src-mirror")
    src = SourceDriver(east, "src", checker, random.Random(seed))
    src.create_repository(cluster.east.namespace("src"))
    src.write_commit("main", files=4)
    mirror = east.create_mirror("src", "src-mirror", "west", cluster.west.namespace("src-mirror"))
    checker.wait_in_sync(90, "first promotion")
    return checker, src, mirror


def _check_for(checker: ApiMirrorChecker, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        checker.check()
        time.sleep(0.05)


def test_source_region_lost_mid_stream_then_detach(start: Start) -> None:
    """DR: the whole source region dies while commits stream; the destination keeps
    serving a consistent commit, and once detached it takes writes."""
    cluster = start(ClusterSpec(mirrors_db="postgres", storage="s3",
                                replication="builtin-direct", policy="narrow"))
    with cluster.east.client() as east, cluster.west.client() as west:
        checker, src, mirror = _mirrored(cluster, east, west, seed=21)
        for _ in range(4):  # commits stream in; the region dies without waiting for them
            src.write_commit("main", files=3)
            checker.check()
        cluster.kill_region("east")
        _check_for(checker, 4.0)
        head = west.branches("src-mirror")["main"]
        assert head in checker.source_heads["main"]  # I1 (also checked in every round)
        checker.verify_commit(head, "main after the loss")
        checker.probe_read_only()
        assert checker.stats.source_unavailable > 0 and checker.violations == []
        facts = checker.facts(head)
        # failover: detach in the destination region, then write there
        detached = west.detach_mirror("src", mirror["id"])
        assert detached["state"] == "detached" and detached["error"] == ""
        checker.detached = True
        assert west.get_repository("src-mirror")["read_only"] is False
        west.upload("src-mirror", "main", "after-failover.txt", b"written in west")
        new_head = west.commit("src-mirror", "main", "first commit after failover")
        assert west.get_commit("src-mirror", new_head)["parents"] == [head]
        assert west.read_object("src-mirror", new_head, "after-failover.txt") == \
            b"written in west"
        # the last consistent commit still reads as the source wrote it
        path = next(iter(sorted(facts)))
        assert hashlib.sha256(west.read_object("src-mirror", head, path)).hexdigest() == \
            facts[path].sha256


def test_kill_nine_and_restart(start: Start) -> None:
    """I5: sidecars and servers killed at random moments resume without a violation."""
    cluster = start(ClusterSpec(mirrors_db="sqlite", policy="broad"))
    rng = random.Random(5)
    with cluster.east.client() as east, cluster.west.client() as west:
        checker, src, mirror = _mirrored(cluster, east, west, seed=5)
        src.create_branch("dev", "main")
        victims: list[ManagedProcess] = [cluster.west.sidecars[0], cluster.west.server,
                                         cluster.east.sidecars[0]]
        killed: dict[str, int] = {}
        for step in range(7):
            src.write_commit(rng.choice(("main", "dev")), files=2)
            _check_for(checker, rng.random() * 1.5)  # a random moment after the commit
            victim = victims[step % len(victims)] if step < len(victims) else \
                rng.choice(victims)
            victim.kill()
            killed[victim.name] = killed.get(victim.name, 0) + 1
            src.write_commit("main", files=1)  # a move the victim may miss
            _check_for(checker, rng.random())
            victim.start()
            checker.check()
        checker.wait_in_sync(90, "in sync after the restarts")
        checker.probe_read_only()
        # no mirror state was lost: the same mirror, active, progress for every branch
        assert east.get_mirror("src", mirror["id"])["state"] == "active"
        wait_for(lambda: checker.status_caught_up(mirror["id"]), 30, 0.1,
                 what="status view caught up", check=checker.check)
    assert set(killed) == {v.name for v in victims}
    assert checker.violations == [] and checker.stats.mirror_unavailable > 0


def test_two_sidecar_replicas_per_region_race(start: Start) -> None:
    """Replicas share the work through leases: no double promotion, and one replica
    alone carries on when the other stops."""
    cluster = start(ClusterSpec(mirrors_db="postgres", sidecars_per_region=2, policy="narrow"))
    with cluster.east.client() as east, cluster.west.client() as west:
        checker, src, _mirror = _mirrored(cluster, east, west, seed=9)
        for b in ("a", "b"):
            src.create_branch(b, "main")
        for _ in range(3):
            for b in ("main", "a", "b"):
                src.write_commit(b, files=2)
                checker.check()
        checker.wait_in_sync(60, "three branches with two replicas each side")
        # the replica the servers talk to goes away: the other one must carry on
        first, second = cluster.west.sidecars
        before = read_metrics(cluster.west.sidecar_endpoint(1)).get(
            "replication_promotions_total", 0.0)
        first.stop()
        for b in ("main", "a"):
            src.write_commit(b, files=2)
        checker.wait_in_sync(60, "carried on by the second replica")
        after = read_metrics(cluster.west.sidecar_endpoint(1)).get(
            "replication_promotions_total", 0.0)
        assert after >= before + 2
        first.start()
        for b in ("main", "b"):
            src.write_commit(b, files=2)
        checker.wait_in_sync(60, "both replicas again")
        # every promotion is of a distinct (branch, head): nobody promoted twice
        total = sum(read_metrics(cluster.west.sidecar_endpoint(i)).get(
            "replication_promotions_total", 0.0) for i in (0, 1))
        distinct = sum(len(heads) for heads in checker.source_heads.values())
        assert 0 < total <= distinct
        assert second.alive and checker.violations == []


def test_mirror_deleted_while_commits_in_flight(start: Start) -> None:
    cluster = start(ClusterSpec(mirrors_db="dynamodb", policy="broad"))
    with cluster.east.client() as east, cluster.west.client() as west:
        checker, _src, mirror = _mirrored(cluster, east, west, seed=13)
        stop = threading.Event()
        heads: list[str] = []

        def writer() -> None:
            with cluster.east.client() as client:
                driver = SourceDriver(client, "src", None, random.Random(14))
                while not stop.is_set():
                    heads.append(driver.write_commit("main", files=2))

        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        try:
            wait_for(lambda: len(heads) >= 3, 60, what="commits flowing", check=checker.check)
            east.delete_mirror("src", mirror["id"])
            wait_for(lambda: east.get_mirror("src", mirror["id"])["state"] == "deleted",
                     60, what="mirror deleted", check=checker.check)
            n = len(heads)
            wait_for(lambda: len(heads) >= n + 3, 60, what="commits after the deletion",
                     check=checker.check)
        finally:
            stop.set()
            thread.join(timeout=60)
        # gone for good: no late promotion brings the repository back
        _check_for(checker, 3.0)
        with pytest.raises(ApiError) as gone:
            west.get_repository("src-mirror")
        assert gone.value.status == 404
        assert all(p.alive for p in cluster.processes)
        # the same name can be mirrored again, from scratch, and catches up
        again = east.create_mirror("src", "src-mirror", "west",
                                   cluster.west.namespace("src-mirror-2"))
        assert again["id"] != mirror["id"]
        fresh = ApiMirrorChecker(east, "src", west, "src-mirror")
        fresh.wait_in_sync(60, "mirror re-created")
        assert west.branches("src-mirror")["main"] == heads[-1]
        assert checker.violations == [] and fresh.violations == []
