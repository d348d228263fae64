"""s3fs and pandas with ``client_kwargs`` naming the endpoint: DataFrames written and read,
listings, a ranged read, a multipart write, a server-side copy, deletes, and a read by
commit id.

Usage: python s3fs_pandas.py ENDPOINT KEY SECRET REPO PHASE
PHASE is ``write`` (works on ``main``) or a commit id to read.
"""

from __future__ import annotations

import sys

import pandas as pd
import s3fs


def main(endpoint: str, key: str, secret: str, repo: str, phase: str) -> None:
    options = {"key": key, "secret": secret,
               "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}
    fs = s3fs.S3FileSystem(**options)
    frame = pd.DataFrame({"id": range(10_000), "text": [f"row {i}" for i in range(10_000)]})
    if phase != "write":
        read = pd.read_parquet(f"s3://{repo}/{phase}/pd/frame.parquet", storage_options=options)
        assert read.equals(frame)
        print("ok")
        return
    frame.to_parquet(f"s3://{repo}/main/pd/frame.parquet", storage_options=options)
    frame.to_csv(f"s3://{repo}/main/pd/csv/frame.csv", index=False, storage_options=options)
    assert pd.read_parquet(f"s3://{repo}/main/pd/frame.parquet",
                           storage_options=options).equals(frame)
    assert pd.read_csv(f"s3://{repo}/main/pd/csv/frame.csv",
                       storage_options=options).equals(frame)
    # 12 MiB written in 5 MiB blocks: a multipart upload
    blob = bytes(range(256)) * (48 * 1024)
    with fs.open(f"{repo}/main/pd/blob.bin", "wb", block_size=5 << 20) as out:
        out.write(blob)
    assert fs.cat_file(f"{repo}/main/pd/blob.bin", start=7 << 20, end=(7 << 20) + 64) == (
        blob[7 << 20:(7 << 20) + 64])
    # listings: one level (a delimiter) and all below (none)
    assert sorted(fs.ls(f"{repo}/main/pd", detail=False)) == [
        f"{repo}/main/pd/blob.bin", f"{repo}/main/pd/csv", f"{repo}/main/pd/frame.parquet"]
    assert sorted(fs.find(f"{repo}/main/pd")) == [
        f"{repo}/main/pd/blob.bin", f"{repo}/main/pd/csv/frame.csv",
        f"{repo}/main/pd/frame.parquet"]
    fs.copy(f"{repo}/main/pd/blob.bin", f"{repo}/main/pd/copy.bin")
    assert fs.info(f"{repo}/main/pd/copy.bin")["size"] == len(blob)
    fs.rm(f"{repo}/main/pd/copy.bin")
    fs.rm(f"{repo}/main/pd/csv", recursive=True)
    fs.invalidate_cache()
    assert not fs.exists(f"{repo}/main/pd/copy.bin")
    assert sorted(fs.find(f"{repo}/main/pd")) == [f"{repo}/main/pd/blob.bin",
                                                  f"{repo}/main/pd/frame.parquet"]
    print("ok")


if __name__ == "__main__":
    main(*sys.argv[1:6])
