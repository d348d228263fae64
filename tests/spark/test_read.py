"""Reading with format("lakefs"): commits, branches, tags, formats, partitions, errors."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from tests.live_server import LiveServer
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
