"""polars (its own object-store client) with storage options only: Parquet written to
and read from the gateway, a glob (a listing), and a read by commit id.

Usage: python polars_cloud.py ENDPOINT KEY SECRET REPO PHASE
PHASE is ``write`` (writes and reads ``main``) or a commit id to read.
"""

from __future__ import annotations

import sys

import polars as pl


def main(endpoint: str, key: str, secret: str, repo: str, phase: str) -> None:
    options = {"aws_endpoint_url": endpoint, "aws_access_key_id": key,
               "aws_secret_access_key": secret, "aws_region": "us-east-1",
               "aws_allow_http": "true"}
    root = f"s3://{repo}"
    frame = pl.DataFrame({"id": range(500_000), "text": [f"row {i}" for i in range(500_000)]})
    if phase == "write":
        for n in range(3):
            frame.slice(n * 100_000, 100_000).write_parquet(
                f"{root}/main/pl/part-{n}.parquet", storage_options=options)
        # a file big enough to be sent in parts
        frame.write_parquet(f"{root}/main/pl-big/all.parquet", storage_options=options)
        lazy = pl.scan_parquet(f"{root}/main/pl/*.parquet", storage_options=options)
        assert lazy.select(pl.len()).collect().item() == 300_000
        assert lazy.filter(pl.col("id") == 123_456).collect()["text"].to_list() == [
            "row 123456"]
        big = pl.read_parquet(f"{root}/main/pl-big/all.parquet", storage_options=options)
        assert big.equals(frame)
    else:
        read = pl.scan_parquet(f"{root}/{phase}/pl/*.parquet", storage_options=options)
        assert read.select(pl.col("id").sum()).collect().item() == sum(range(300_000))
    print("ok")


if __name__ == "__main__":
    main(*sys.argv[1:6])
