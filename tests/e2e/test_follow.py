"""The mirror follows commits, merges, resets, deletions and re-creations (real processes).

One run per mirrors-table backend, each on a different deployment shape:
- SQLite: SQLite refstores, local storage, the builtin copier reading through the
  source API, the sidecars acting as a user with seed 003's narrow policy (plus the
  builtin copier's object reads);
- PostgreSQL: PostgreSQL refstores, local storage, ``native`` replication done by a
  faulty replicator between the regions' directories, the sidecars acting as the
  admin (the one e2e run that mirrors tags);
- DynamoDB: each server's metadata on DynamoDB too (a table per region, the auth
  store in SQLite beside it, the sidecars opening the same tables), S3 on a moto server
  per region, ``native`` replication done by a faulty replicator between the two
  buckets, the broad policy.

With either documented policy the user may not list tags: branches follow, tags
stay on the source, and the mirror's status says so.
"""

from __future__ import annotations

import random

import pytest

from e2e.api import RegionClient
from e2e.cluster import Cluster, ClusterSpec
from e2e.crr import object_replicator
from e2e.invariants import ApiMirrorChecker, InvariantViolation
from e2e.workload import SourceDriver
from lakefs_testing.waiting import wait_for
from tests.e2e.conftest import Start

pytestmark = pytest.mark.e2e

SPECS = {
    "sqlite": ClusterSpec(mirrors_db="sqlite", policy="narrow"),
    "postgres": ClusterSpec(mirrors_db="postgres", refstore="postgres", replication="native",
                            policy="admin"),
    "dynamodb": ClusterSpec(mirrors_db="dynamodb", refstore="dynamodb", storage="s3",
                            replication="native", policy="broad"),
}


@pytest.mark.parametrize("backend", sorted(SPECS))
def test_mirror_follows_source_operations(start: Start, backend: str) -> None:
    cluster = start(SPECS[backend])
    with cluster.east.client() as east, cluster.west.client() as west:
        checker = ApiMirrorChecker(east, "src", west, "src-mirror")
        src = SourceDriver(east, "src", checker, random.Random(backend))
        src.create_repository(cluster.east.namespace("src"))
        c1 = src.write_commit("main", files=5)
        mirror_ns = cluster.west.namespace("src-mirror")
        mirror = east.create_mirror("src", "src-mirror", "west", mirror_ns)
        assert mirror["state"] == "creating"
        crr = None
        if cluster.spec.replication == "native":
            crr = object_replicator(cluster, cluster.east.namespace("src"), mirror_ns, seed=3,
                                    drop=0.3, duplicate=0.2, max_delay=0.02)
            crr.start(period=0.1)
        try:
            checker.wait_in_sync(90, "first promotion")
            checker.probe_read_only()
            # a branch with two commits, merged back; a tag on the merge
            src.create_branch("dev", "main")
            src.write_commit("dev")
            src.write_commit("dev")
            src.write_commit("main")
            merged = src.merge("dev", "main")
            assert merged is not None
            src.tag("v1", merged)
            checker.wait_in_sync(60, "merge and tag")
            _tags_mirrored(east, west, mirror["id"])
            # reset main backwards, delete dev and re-create it elsewhere, all in a row
            src.reset("main", c1)
            src.delete_branch("dev")
            src.create_branch("dev", c1)
            src.write_commit("dev")
            src.delete_tag("v1")
            checker.wait_in_sync(60, "reset, deletion and re-creation")
            checker.probe_read_only()
            # a burst of commits: intermediate heads may be skipped, never half-served
            for n in range(4):
                src.write_commit("main" if n % 2 else "dev", files=2)
                checker.check()
            checker.wait_in_sync(60, "burst")
        finally:
            if crr is not None:
                crr.stop()
        wait_for(lambda: checker.status_caught_up(mirror["id"]), 30, 0.1,
                 what="status view caught up", check=checker.check)
        heads = east.branches("src")
        assert checker.violations == []
        assert checker.stats.commits_verified >= 5 and checker.stats.write_probes >= 10
        if cluster.spec.storage == "local":
            _tampering_is_caught(cluster, checker, heads["main"])


def _tags_mirrored(east: RegionClient, west: RegionClient, mirror_id: str) -> None:
    """The tag follows, as the admin or a documented policy (which lets the user list
    tags), and the mirror's status has nothing to say."""
    wait_for(lambda: west.tags("src-mirror") == east.tags("src"), 30, 0.1,
             what="the tag mirrored")
    assert not east.mirror_status("src", mirror_id)["mirror"]["error"]


def _tampering_is_caught(cluster: Cluster, checker: ApiMirrorChecker, head: str) -> None:
    """The checker is no rubber stamp: bytes changed under the mirror are an I2 violation."""
    with cluster.west.client() as west:
        stat = next(s for s in west.list_objects("src-mirror", head) if s["size_bytes"])
    address = stat["physical_address"]
    assert address.startswith("local://"), address
    victim = cluster.west.blockstore_root / address.removeprefix("local://")
    victim.write_bytes(b"X" + victim.read_bytes()[1:])
    with pytest.raises(InvariantViolation) as caught:
        checker.verify_commit(head, force=True)
    assert caught.value.invariant == "I2" and stat["path"] in caught.value.detail
