"""Mirrors across clouds (real processes): the source region on one kind of store, the
destination on another, the builtin copier carrying the objects.

- S3 -> Azure: east on moto's S3, west on Azurite; the copier reads through the source
  server's API (``builtin``), as the narrow policy's user.
- Cloud Storage -> S3: east on the GCS emulator, west on moto; the copier reads the
  source bucket directly (``builtin-direct``), as the broad policy's user.

Each writes several objects (one of several MiB, streamed to the store in parts),
overwrites one and deletes one, before and after the mirror exists; the mirror must
reach the source's commit ids, with every object's bytes read back through the
destination's API, its physical addresses in the destination's own store, and I1-I4
checked all along.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from e2e.cluster import Cluster, ClusterSpec, parse_storage, start_cluster
from e2e.invariants import ApiMirrorChecker
from e2e.workload import SourceDriver
from lakefs_testing.waiting import wait_for

pytestmark = pytest.mark.e2e

SPECS = {
    "s3-to-azure": ClusterSpec(storage="s3", west_storage="azure", replication="builtin",
                               policy="narrow"),
    "gs-to-s3": ClusterSpec(storage="gs", west_storage="s3", replication="builtin-direct",
                            policy="broad"),
}
#: larger than one upload block/chunk of every store: written (and copied) in parts
BIG = 9 << 20


@pytest.fixture(scope="module", params=sorted(SPECS))
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Cluster]:
    spec = SPECS[request.param]
    root = tmp_path_factory.mktemp(request.param)
    with start_cluster(root, spec) as running:
        yield running
        for p in running.processes:  # shown by pytest only when a test failed
            print(f"===== {p.name} (started {p.starts}x) =====\n{p.log_tail(15)}")


def _upload(driver: SourceDriver, expected: dict[str, bytes], path: str, data: bytes) -> None:
    driver.client.upload(driver.repo, "main", path, data)
    expected[path] = data


def test_mirror_across_clouds_converges(cluster: Cluster) -> None:
    rng = random.Random(cluster.spec.storage_label)
    with cluster.east.client(timeout=120) as east, cluster.west.client(timeout=120) as west:
        checker = ApiMirrorChecker(east, "src", west, "src-mirror")
        src = SourceDriver(east, "src", checker, rng)
        src.create_repository(cluster.east.namespace("src"))
        expected: dict[str, bytes] = {}
        for i in range(4):
            _upload(src, expected, f"data/part-{i}.bin", rng.randbytes(100 + 900 * i))
        _upload(src, expected, "data/empty", b"")
        _upload(src, expected, "data/big.bin", rng.randbytes(BIG))
        commits = [east.commit("src", "main", "initial objects")]
        checker.source_moved("main", commits[-1])
        _upload(src, expected, "data/part-0.bin", b"overwritten before the mirror")
        east.delete_object("src", "main", "data/part-1.bin")
        del expected["data/part-1.bin"]
        commits.append(east.commit("src", "main", "an overwrite and a delete"))
        checker.source_moved("main", commits[-1])

        mirror = east.create_mirror("src", "src-mirror", "west",
                                    cluster.west.namespace("src-mirror"))
        checker.wait_in_sync(120, "the first promotion")
        # the mirror follows: new objects, an overwrite, a delete
        _upload(src, expected, "data/part-1.bin", b"back again")
        _upload(src, expected, "data/part-2.bin", rng.randbytes(4096))
        east.delete_object("src", "main", "data/part-3.bin")
        del expected["data/part-3.bin"]
        commits.append(east.commit("src", "main", "after the mirror"))
        checker.source_moved("main", commits[-1])
        src.create_branch("dev", "main")
        commits.append(src.write_commit("dev", files=3))
        checker.wait_in_sync(120, "commits after the mirror")

        assert west.branches("src-mirror") == east.branches("src")
        assert west.get_repository("src-mirror")["read_only"] is True
        # ids, records and bytes of every commit the mirror promoted (I1, I2); the
        # first was never a head while the mirror existed: it need not be served
        for commit_id in commits[1:]:
            checker.verify_commit(commit_id, force=True)
        mirror_base = cluster.west.namespace("src-mirror") + "/"
        head = west.branches("src-mirror")["main"]
        listing = {s["path"]: s for s in west.list_objects("src-mirror", head)}
        assert sorted(listing) == sorted(expected)
        for path, data in expected.items():
            assert west.read_object("src-mirror", head, path) == data, path
            # the bytes are the destination store's own copy, not a read of the source's
            assert listing[path]["physical_address"].startswith(mirror_base), listing[path]
        checker.probe_read_only()  # I4: every write to the mirror refused
        wait_for(lambda: checker.status_caught_up(mirror["id"]), 30, 0.1,
                 what="status view caught up", check=checker.check)
        assert checker.violations == [] and checker.stats.objects_compared >= len(expected)


def test_native_replication_is_refused_off_s3() -> None:
    """Native replication stands for S3 bucket replication: another store is refused."""
    for east, west in (("s3", "azure"), ("gs", "gs"), ("azure", "azure")):
        with pytest.raises(ValueError, match="native replication needs S3"):
            ClusterSpec(storage=east, west_storage=west, replication="native")
    assert ClusterSpec(storage="s3", replication="native").storage_label == "s3"
    assert parse_storage("s3,azure") == ("s3", "azure")
    assert parse_storage("gs,gs") == ("gs", None)
    with pytest.raises(ValueError, match="expected a storage"):
        parse_storage("s3,ftp")
