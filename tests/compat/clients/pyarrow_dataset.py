"""pyarrow's S3FileSystem with its defaults: write_dataset, listings, a ranged read, a
copy, delete_dir, and a read by commit id.

Usage: python pyarrow_dataset.py ENDPOINT KEY SECRET REPO
"""

from __future__ import annotations

import base64
import json
import sys
import urllib.request

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyarrow import fs


def commit(endpoint: str, key: str, secret: str, repo: str) -> str:
    """Commit ``main`` through the lakeFS API; the commit id."""
    request = urllib.request.Request(
        f"{endpoint}/api/v1/repositories/{repo}/branches/main/commits",
        data=json.dumps({"message": "pyarrow"}).encode(), method="POST",
        headers={"content-type": "application/json", "authorization": "Basic " +
                 base64.b64encode(f"{key}:{secret}".encode()).decode()})
    with urllib.request.urlopen(request) as response:
        return str(json.load(response)["id"])


def main(endpoint: str, key: str, secret: str, repo: str) -> None:
    host = endpoint.removeprefix("http://")
    s3 = fs.S3FileSystem(access_key=key, secret_key=secret, endpoint_override=host,
                         scheme="http", region="us-east-1")
    table = pa.table({"id": list(range(100_000)), "part": [i % 3 for i in range(100_000)],
                      "text": [f"row {i}" for i in range(100_000)]})
    # default options: pyarrow first writes directory markers (the branch root's too)
    ds.write_dataset(table, f"{repo}/main/ds", format="parquet", filesystem=s3)
    ds.write_dataset(table, f"{repo}/main/parted", format="parquet", filesystem=s3,
                     partitioning=["part"])
    assert ds.dataset(f"{repo}/main/ds", filesystem=s3).to_table().num_rows == 100_000
    parted = ds.dataset(f"{repo}/main/parted", filesystem=s3, partitioning=["part"])
    assert parted.to_table().num_rows == 100_000
    # listings: one level (with a delimiter) and recursive (without)
    top = s3.get_file_info(fs.FileSelector(f"{repo}/main/parted"))
    assert sorted(i.base_name for i in top) == ["0", "1", "2"], top
    assert all(i.type == fs.FileType.Directory for i in top)
    every = s3.get_file_info(fs.FileSelector(f"{repo}/main", recursive=True))
    files = sorted(i.path for i in every if i.type == fs.FileType.File)
    assert len(files) == 4, files
    # a 20 MiB stream is a multipart upload
    blob = bytes(range(256)) * (80 * 1024)
    with s3.open_output_stream(f"{repo}/main/blobs/big.bin") as out:
        out.write(blob)
    with s3.open_input_file(f"{repo}/main/blobs/big.bin") as stream:
        assert stream.size() == len(blob)
        assert stream.read_at(100, 5 << 20) == blob[5 << 20:(5 << 20) + 100]
    s3.copy_file(f"{repo}/main/blobs/big.bin", f"{repo}/main/blobs/copy.bin")
    assert s3.get_file_info(f"{repo}/main/blobs/copy.bin").size == len(blob)
    sha = commit(endpoint, key, secret, repo)
    # a top-level folder is deleted whole, then a nested one
    s3.delete_dir(f"{repo}/main/blobs")
    s3.delete_dir(f"{repo}/main/parted/1")
    s3.delete_dir_contents(f"{repo}/main/ds")
    left = s3.get_file_info(fs.FileSelector(f"{repo}/main", recursive=True))
    assert sorted(i.path for i in left if i.type == fs.FileType.File) == sorted(
        p for p in files if "/parted/" in p and "/parted/1/" not in p)
    # the commit still has everything, read by its id
    assert pq.read_table(f"{repo}/{sha}/ds", filesystem=s3).num_rows == 100_000
    assert s3.get_file_info(f"{repo}/{sha}/blobs/copy.bin").size == len(blob)
    print("ok", sha)


if __name__ == "__main__":
    main(*sys.argv[1:5])
