"""Fixtures shared by the API tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lakefs_testing.live_server import LiveServer, live_server


@pytest.fixture
def s3_server(tmp_path: Path, moto_endpoint: str, unique_name: str) -> Iterator[LiveServer]:
    """A live server on an S3 blockstore (moto), with a bucket named unique_name."""
    import boto3

    env = {"LAKEFS_BLOCKSTORE_TYPE": "s3", "LAKEFS_BLOCKSTORE_S3_ENDPOINT": moto_endpoint,
           "LAKEFS_BLOCKSTORE_S3_FORCE_PATH_STYLE": "true",
           "LAKEFS_BLOCKSTORE_S3_REGION": "us-east-1",
           "LAKEFS_BLOCKSTORE_S3_CREDENTIALS_ACCESS_KEY_ID": "testing",
           "LAKEFS_BLOCKSTORE_S3_CREDENTIALS_SECRET_ACCESS_KEY": "testing"}
    boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1").create_bucket(
        Bucket=unique_name)
    with live_server(str(tmp_path / "s3-server"), env) as s:
        s.services.config.storage_config.default_namespace_prefix = f"s3://{unique_name}/"
        yield s
