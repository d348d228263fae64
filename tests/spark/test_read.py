"""Reading with format("lakefs"): commits, branches, tags, formats, partitions, errors."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from lakefs_testing.live_server import LiveServer
from tests.spark.conftest import commit, create_repo, lakefs_options, parquet_bytes, rows, upload

pytestmark = pytest.mark.spark


def _table(start: int, n: int) -> pa.Table:
    return pa.table({"id": list(range(start, start + n)),
                     "name": [f"n{i}" for i in range(start, start + n)],
                     "score": [i * 0.5 for i in range(start, start + n)]})


def test_read_pins_the_commit_while_the_branch_moves(spark: SparkSession,
                                                     server: LiveServer) -> None:
    create_repo(server, "read-1")
    for i in range(3):
        upload(server, "read-1", "main", f"tbl/part-{i}.parquet", parquet_bytes(_table(i * 10, 10)))
    upload(server, "read-1", "main", "tbl/_SUCCESS", b"")
    upload(server, "read-1", "main", "other/x.parquet", parquet_bytes(_table(100, 5)))
    c1 = commit(server, "read-1", "main")
    opts = lakefs_options(server, "read-1", ref="main", partition_bytes="1")
    df = spark.read.format("lakefs").options(**opts).load("tbl")
    assert df.columns == ["id", "name", "score"]
    assert df.rdd.getNumPartitions() == 3
    first = rows(df)
    assert first == [(i, f"n{i}", i * 0.5) for i in range(30)]
    # the branch moves on: the planned DataFrame still reads the commit it resolved
    upload(server, "read-1", "main", "tbl/part-9.parquet", parquet_bytes(_table(900, 4)))
    commit(server, "read-1", "main")
    assert rows(df) == first
    again = spark.read.format("lakefs").options(**opts).load("tbl")
    assert again.count() == 34
    by_id = spark.read.format("lakefs").options(**{**opts, "ref": c1}).load("tbl/")
    assert rows(by_id) == first


def test_csv_json_and_tags(spark: SparkSession, server: LiveServer) -> None:
    create_repo(server, "read-2")
    upload(server, "read-2", "main", "csv/a.csv", b"id,city,temp\n1,Oslo,3.5\n2,Rome,17.25\n")
    upload(server, "read-2", "main", "csv/b.csv", b"id,city,temp\n3,Lima,19.0\n")
    lines = [json.dumps({"id": i, "tags": f"t{i}", "ok": i % 2 == 0}) for i in range(4)]
    upload(server, "read-2", "main", "json/part.json", ("\n".join(lines) + "\n").encode())
    stamps = pa.array([1_700_000_000_123_456_789, None], pa.timestamp("ns", tz="UTC"))
    upload(server, "read-2", "main", "ts/t.parquet",
           parquet_bytes(pa.table({"at": stamps, "n": [1, 2]})))
    c1 = commit(server, "read-2", "main")
    with server.client() as c:
        assert c.post("/repositories/read-2/tags", json={"id": "v1", "ref": c1}).status_code == 201
    upload(server, "read-2", "main", "csv/c.csv", b"id,city,temp\n4,Kyiv,1.0\n")
    commit(server, "read-2", "main")
    opts = lakefs_options(server, "read-2", ref="v1")
    csv = spark.read.format("lakefs").options(**opts, format="csv").load("csv")
    assert [(f.name, f.dataType.simpleString()) for f in csv.schema.fields] == [
        ("id", "bigint"), ("city", "string"), ("temp", "double")]
    assert rows(csv) == [(1, "Oslo", 3.5), (2, "Rome", 17.25), (3, "Lima", 19.0)]
    js = spark.read.format("lakefs").options(**opts, format="json").load("json/part.json")
    assert rows(js.select("id", "tags", "ok")) == [(i, f"t{i}", i % 2 == 0) for i in range(4)]
    ts = spark.read.format("lakefs").options(**opts).load("ts")
    assert ts.schema.simpleString() == "struct<at:timestamp,n:bigint>"
    # nanoseconds are cut to Spark's microseconds
    assert rows(ts.selectExpr("n", "unix_micros(at)")) == [(1, 1_700_000_000_123_456),
                                                          (2, None)]
    # a given schema reads an empty path as empty, and selects/nulls columns by name
    empty = spark.read.format("lakefs").options(**opts).schema("id long").load("nothing")
    assert empty.count() == 0
    narrow = spark.read.format("lakefs").options(**opts, format="csv").schema(
        "city string, missing int").load("csv")
    assert rows(narrow) == [("Lima", None), ("Oslo", None), ("Rome", None)]


def test_bad_reads_fail_clearly(spark: SparkSession, server: LiveServer) -> None:
    create_repo(server, "read-3")
    opts = lakefs_options(server, "read-3")
    with pytest.raises(Exception, match="no data files"):
        spark.read.format("lakefs").options(**opts).load("nothing")
    with pytest.raises(Exception, match="no-such-ref"):
        spark.read.format("lakefs").options(**opts, ref="no-such-ref").load("x")
    with pytest.raises(Exception, match="blockstore_root"):
        spark.read.format("lakefs").options(**{**opts, "blockstore_root": ""}).load("x")
    with pytest.raises(Exception, match="format"):
        spark.read.format("lakefs").options(**opts, format="avro").schema("a int").load(
            "x").count()
    with pytest.raises(Exception, match="401|credentials"):
        spark.read.format("lakefs").options(**{**opts, "secret_access_key": "wrong"}).load("x")
