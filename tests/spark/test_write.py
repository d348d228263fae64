"""Writing with format("lakefs"): one commit per job, overwrite, aborts leave nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakefs_testing.live_server import LiveServer
from tests.spark.conftest import create_repo, lakefs_options, rows

pytestmark = pytest.mark.spark


def _log(server: LiveServer, repo: str, ref: str) -> list[dict]:  # type: ignore[type-arg]
    with server.client() as c:
        r = c.get(f"/repositories/{repo}/refs/{ref}/commits")
        assert r.status_code == 200, r.text
        return list(r.json()["results"])


def _data_files(server: LiveServer, repo: str) -> list[str]:
    blockstore = server.services.config.blockstore
    assert blockstore is not None and blockstore.local is not None
    root = Path(blockstore.local.path) / repo / "data"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()
                  and not p.name.startswith(".")) if root.exists() else []


def test_write_makes_one_commit_and_reads_back(spark: SparkSession, server: LiveServer) -> None:
    create_repo(server, "write-1")
    opts = lakefs_options(server, "write-1", branch="main", commit_message="features v1",
                          commit_metadata='{"pipeline": "etl"}')
    df = spark.range(0, 1000, numPartitions=3).select(
        F.col("id"), (F.col("id") * 2).alias("double"), F.concat(F.lit("k"), F.col("id")
                                                                 .cast("string")).alias("key"))
    before = len(_log(server, "write-1", "main"))
    df.write.format("lakefs").options(**opts).mode("append").save("features")
    log = _log(server, "write-1", "main")
    assert len(log) == before + 1
    head = log[0]
    assert head["message"] == "features v1"
    assert head["metadata"]["pipeline"] == "etl" and head["metadata"]["spark.job_id"]
    with server.client() as c:
        listing = c.get("/repositories/write-1/refs/main/objects/ls",
                        params={"prefix": "features/"}).json()["results"]
        assert len(listing) == 3
        assert all(o["path"].endswith(".parquet") for o in listing)
        # nothing is left uncommitted
        assert c.get("/repositories/write-1/branches/main/diff").json()["results"] == []
    back = spark.read.format("lakefs").options(**lakefs_options(server, "write-1",
                                                                ref=head["id"])).load("features")
    assert rows(back) == [(i, 2 * i, f"k{i}") for i in range(1000)]
    # the files live under the namespace's data/ prefix, one per task
    assert len(_data_files(server, "write-1")) == 3
    # overwrite replaces what was under the path, in one commit
    spark.range(5, numPartitions=1).write.format("lakefs").options(**opts).mode(
        "overwrite").save("features")
    log = _log(server, "write-1", "main")
    assert len(log) == before + 2
    again = spark.read.format("lakefs").options(**lakefs_options(server, "write-1")).load(
        "features")
    assert rows(again) == [(i,) for i in range(5)]
    # a task rolls over to a new file past max_file_bytes
    spark.range(0, 30_000, numPartitions=1).write.format("lakefs").options(
        **opts, max_file_bytes="1").mode("append").save("rolled")
    with server.client() as c:
        listing = c.get("/repositories/write-1/refs/main/objects/ls",
                        params={"prefix": "rolled/"}).json()["results"]
    assert len(listing) >= 2
    assert [p["path"].rsplit("-", 1)[1] for p in listing][:2] == ["000.parquet", "001.parquet"]
    rolled = spark.read.format("lakefs").options(**lakefs_options(server, "write-1")).load(
        "rolled")
    assert rolled.count() == 30_000


def _fail_after_first_file(root: str):  # type: ignore[no-untyped-def]
    """A UDF that lets partition 0 through and fails partition 1 once partition 0's file
    is in the store (so the aborted job has a file to clean up)."""

    def check(value: int) -> int:
        import glob
        import time

        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is not None and ctx.partitionId() == 1:
            for _ in range(600):
                if glob.glob(os.path.join(root, "data", "[0-9a-f]*", "*")):
                    break
                time.sleep(0.1)
            raise RuntimeError("task failed on purpose")
        return value

    return check


def test_failed_job_leaves_nothing(spark: SparkSession, server: LiveServer,
                                   tmp_path: Path) -> None:
    create_repo(server, "write-2")
    opts = lakefs_options(server, "write-2", branch="main")
    root = os.path.join(opts["blockstore_root"], "write-2")
    check = F.udf(_fail_after_first_file(root), "long", useArrow=False)
    df = spark.range(0, 100, numPartitions=2).select(check("id").alias("id"))
    with pytest.raises(Exception, match="task failed on purpose"):
        df.write.format("lakefs").options(**opts).mode("append").save("t")
    assert len(_log(server, "write-2", "main")) == 1  # just "Repository created"
    with server.client() as c:
        assert c.get("/repositories/write-2/branches/main/diff").json()["results"] == []
    assert _data_files(server, "write-2") == []


def test_refused_commit_rolls_back(spark: SparkSession, server: LiveServer) -> None:
    create_repo(server, "write-3")
    with server.client() as c:
        r = c.put("/repositories/write-3/settings/branch_protection",
                  json=[{"pattern": "main"}])
        assert r.status_code == 204, r.text
    opts = lakefs_options(server, "write-3", branch="main")
    with pytest.raises(Exception, match="protected"):
        spark.range(10, numPartitions=2).write.format("lakefs").options(**opts).mode(
            "append").save("t")
    assert len(_log(server, "write-3", "main")) == 1
    with server.client() as c:
        assert c.get("/repositories/write-3/branches/main/diff").json()["results"] == []
    assert _data_files(server, "write-3") == []


def test_write_refuses_bad_targets(spark: SparkSession, server: LiveServer) -> None:
    create_repo(server, "write-4")
    df = spark.range(3)
    with pytest.raises(Exception, match="no-such-branch"):
        df.write.format("lakefs").options(**lakefs_options(
            server, "write-4", branch="no-such-branch")).mode("append").save("t")
    with pytest.raises(Exception, match="commit_metadata"):
        df.write.format("lakefs").options(**lakefs_options(
            server, "write-4", branch="main", commit_metadata="[1]")).mode("append").save("t")
    assert len(_log(server, "write-4", "main")) == 1
