"""The benchmarks' sorted index for moto's listings answers exactly as moto does."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.s3.models import S3Backend

from bench.moto_index import index_listings


@pytest.fixture
def s3() -> Iterator[Any]:
    plain = S3Backend.list_objects_v2
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1", aws_access_key_id="testing",
                              aws_secret_access_key="testing")
        client.create_bucket(Bucket="bench-index")
        rng = random.Random(3)
        names = {f"{rng.choice(['a/', 'a/b/', 'ab', 'data/', ''])}{rng.getrandbits(24):06x}"
                 for _ in range(600)}
        for name in sorted(names):
            client.put_object(Bucket="bench-index", Key=name, Body=b"x")
        client.delete_object(Bucket="bench-index", Key=sorted(names)[7])
        yield client
    S3Backend.list_objects_v2 = plain  # type: ignore[method-assign]


def listings(client: Any) -> list[Any]:
    """Pages of several listings, the way clients page (tokens followed to the end)."""
    out: list[Any] = []
    for kwargs in ({}, {"Prefix": "a/"}, {"Prefix": "a/b/", "MaxKeys": 7},
                   {"Prefix": "data/", "MaxKeys": 40}, {"Prefix": "zz"},
                   {"StartAfter": "a/b/8"}, {"Prefix": "ab", "StartAfter": "ab4", "MaxKeys": 20},
                   {"MaxKeys": 0}, {"Prefix": "a/", "Delimiter": "/", "MaxKeys": 3}):
        args = {"Bucket": "bench-index", **kwargs}
        while True:
            page = client.list_objects_v2(**args)
            page.pop("ResponseMetadata")
            out.append(page)
            if not page.get("IsTruncated"):
                break
            args = {**args, "ContinuationToken": page["NextContinuationToken"]}
            args.pop("StartAfter", None)
    return out


def test_indexed_listings_answer_as_moto_does(s3: Any) -> None:
    plain = listings(s3)
    index_listings()
    indexed = listings(s3)
    assert len(indexed) > 20
    assert indexed == plain
    # a key added after the index was built is listed
    s3.put_object(Bucket="bench-index", Key="a/0-new", Body=b"y")
    assert "a/0-new" in [o["Key"] for o in s3.list_objects_v2(Bucket="bench-index", Prefix="a/0")
                         .get("Contents", [])]
