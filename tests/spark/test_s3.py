"""The data source on an S3 blockstore (moto): tasks read and write the bucket directly."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakefs_testing.live_server import LiveServer, live_server
from lakefs_testing.servers import MOTO_ENV
from tests.spark.conftest import create_repo, rows

pytestmark = pytest.mark.spark


@pytest.fixture
def s3_server(tmp_path: Path, moto_endpoint: str) -> Iterator[LiveServer]:
    env = {
        "LAKEFS_BLOCKSTORE_TYPE": "s3",
        "LAKEFS_BLOCKSTORE_S3_ENDPOINT": moto_endpoint,
        "LAKEFS_BLOCKSTORE_S3_FORCE_PATH_STYLE": "true",
        "LAKEFS_BLOCKSTORE_S3_REGION": MOTO_ENV["AWS_DEFAULT_REGION"],
        "LAKEFS_BLOCKSTORE_S3_CREDENTIALS_ACCESS_KEY_ID": MOTO_ENV["AWS_ACCESS_KEY_ID"],
        "LAKEFS_BLOCKSTORE_S3_CREDENTIALS_SECRET_ACCESS_KEY": MOTO_ENV["AWS_SECRET_ACCESS_KEY"],
    }
    with live_server(str(tmp_path / "server"), env) as srv:
        yield srv


def test_write_and_read_on_s3(spark: SparkSession, s3_server: LiveServer, moto_endpoint: str,
                              unique_name: str) -> None:
    bucket = f"spark-{unique_name}"
    s3 = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
    s3.create_bucket(Bucket=bucket)
    create_repo(s3_server, "on-s3", f"s3://{bucket}/repo")
    opts = {
        "endpoint": s3_server.endpoint, "repository": "on-s3",
        "access_key_id": s3_server.access_key_id,
        "secret_access_key": s3_server.secret_access_key,
        "s3_endpoint": moto_endpoint, "s3_region": "us-east-1",
        "s3_access_key_id": MOTO_ENV["AWS_ACCESS_KEY_ID"],
        "s3_secret_access_key": MOTO_ENV["AWS_SECRET_ACCESS_KEY"],
    }
    df = spark.range(0, 500, numPartitions=2).select(
        "id", (F.col("id") % 7).alias("bucket"))
    df.write.format("lakefs").options(**opts, branch="main").mode("append").save("events")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="repo/data/")
            .get("Contents", [])]
    assert len(keys) == 2 and not any(k.startswith("repo/data/spark-") for k in keys)
    back = spark.read.format("lakefs").options(**opts, ref="main").load("events")
    assert rows(back) == [(i, i % 7) for i in range(500)]
    assert back.rdd.getNumPartitions() == 1  # two small files pack into one task
