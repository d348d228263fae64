"""The data source against a mirror in another region, backfill of a new mirror, and the
reproducible-training example: the same commit id gives the same rows and the same model."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakefs_core.errors import ReadOnlyRepositoryError
from lakefs_core.spark.backfill import StoreLocation, backfill_commit
from lakefs_core.spark.examples import reproducible_training as example
from lakefs_core.spark.gc import GarbageCollector
from lakefs_core.spark.options import ServerOptions, StorageOptions
from lakefs_testing.regions import Region, two_regions
from lakefs_testing.waiting import wait_for
from tests.spark.conftest import lakefs_options, rows

pytestmark = pytest.mark.spark

MIRRORS = "/service/replication/v1/repositories"


@pytest.fixture(scope="module")
def regions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Region, Region]]:
    tmp = tmp_path_factory.mktemp("regions")
    mirrors_db = {"type": "sqlite", "sqlite": {"path": str(tmp / "mirrors.db")}}
    with two_regions(tmp, mirrors_db, interval="1s") as pair:
        yield pair


def _create_repo(region: Region, name: str) -> None:
    with region.client() as c:
        r = c.post("/api/v1/repositories", json={"name": name,
                                                 "storage_namespace": f"local://{name}"})
        assert r.status_code == 201, r.text


def _create_mirror(east: Region, repo: str, name: str) -> None:
    with east.client() as c:
        r = c.post(f"{MIRRORS}/{repo}/mirrors",
                   json={"name": name, "region": "west", "storage_namespace": f"local://{name}"})
        assert r.status_code == 201, r.text


def _mirror_head(west: Region, repo: str, branch: str = "main") -> str | None:
    try:
        return west.graveler.get_branch(repo, branch).commit_id or None
    except Exception:  # noqa: BLE001 - the mirror repository is not there yet
        return None


def test_backfilled_mirror_reads_the_same_commit(spark: SparkSession,
                                                 regions: tuple[Region, Region]) -> None:
    east, west = regions
    _create_repo(east, "sales")
    east_opts = lakefs_options(east.server, "sales")
    df = spark.range(0, 3000, numPartitions=3).select(
        "id", (F.col("id") % 13).alias("store"), (F.col("id") * 1.25).alias("amount"))
    df.write.format("lakefs").options(**east_opts, branch="main").mode("append").save("orders")
    with east.client() as c:
        c1 = c.get("/api/v1/repositories/sales/branches/main").json()["commit_id"]
    # fill the new mirror's namespace in the west store before the mirror exists
    west_store = StoreLocation(StorageOptions(blockstore_root=str(west.blockstore_root)),
                               "local://sales-mirror")
    report = backfill_commit(spark, ServerOptions.from_options(east_opts), "sales", c1,
                             StorageOptions.from_options(east_opts), west_store, copy=True)
    assert report.complete and report.objects_copied == 3
    _create_mirror(east, "sales", "sales-mirror")
    wait_for(lambda: _mirror_head(west, "sales-mirror") == c1, 60, what="mirror promotion")
    # the same commit id reads the same rows in the west, from the west store
    west_opts = lakefs_options(west.server, "sales-mirror", ref=c1)
    in_west = spark.read.format("lakefs").options(**west_opts).load("orders")
    in_east = spark.read.format("lakefs").options(**east_opts, ref=c1).load("orders")
    assert rows(in_west) == rows(in_east) == [(i, i % 13, i * 1.25) for i in range(3000)]
    # the mirror is read-only: writing to it is refused before any task runs, and so is
    # garbage collection (a mirror loses objects only when its source does)
    with pytest.raises(Exception, match="read-only"):
        df.write.format("lakefs").options(**lakefs_options(
            west.server, "sales-mirror", branch="main")).mode("append").save("x")
    west_gc = GarbageCollector(spark, ServerOptions.from_options(west_opts),
                               StorageOptions.from_options(west_opts))
    with pytest.raises(ReadOnlyRepositoryError):
        west_gc.run("sales-mirror", dry_run=False, min_age_seconds=0)


def test_reproducible_training_in_two_regions(spark: SparkSession,
                                              regions: tuple[Region, Region],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    east, west = regions
    _create_repo(east, "churn")
    _create_mirror(east, "churn", "churn-mirror")
    source = [f"{k}={v}" for k, v in lakefs_options(east.server, "churn").items()]
    mirror = [f"{k}={v}" for k, v in lakefs_options(west.server, "churn-mirror").items()]
    argv = [*(f"--source-option={o}" for o in source),
            *(f"--mirror-option={o}" for o in mirror),
            "--rows", "5000", "--mirror-timeout", "60"]
    assert example.main(argv, spark=spark) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["identical"] is True
    a, b = report["source"], report["mirror"]
    assert a["commit_id"] == b["commit_id"] == report["commit_id"]
    assert a["rows"] == b["rows"] == 5000
    assert a["checksum"] == b["checksum"]
    assert a["coefficients"] == b["coefficients"] and a["intercept"] == b["intercept"]
    assert len(a["coefficients"]) == len(example.FEATURE_COLUMNS)
    # the model learned the planted signal: older customers churn less, visitors more
    age, _income, visits, premium = a["coefficients"]
    assert age < 0 < visits and premium < 0
    # the merge commit is on the source's main and records where the features came from
    with east.client() as c:
        log = c.get("/api/v1/repositories/churn/refs/main/commits").json()["results"]
        assert log[0]["id"] == report["commit_id"]
        etl = next(x for x in log if x["message"] == "feature table")
        assert etl["metadata"]["raw_commit"] == log[-2]["id"]
    # the checksum covers every row: one row less changes it
    other = spark.read.format("lakefs").options(**lakefs_options(
        east.server, "churn", ref=report["commit_id"])).load("features").limit(4999)
    assert example.row_checksum(other)[1] != a["checksum"]
