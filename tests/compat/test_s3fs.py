"""s3fs and pandas (in their own virtualenv: see ``S3FS_PYTHON``) against the gateway."""

from __future__ import annotations

from tests.compat.conftest import S3FS_PYTHON, Target, python_client


def test_s3fs_pandas_round_trip(target: Target) -> None:
    assert S3FS_PYTHON.exists(), f"{S3FS_PYTHON} is missing: run `make compat-clients`"
    assert python_client(S3FS_PYTHON, "s3fs_pandas.py", target, "write").strip() == "ok"
    assert sorted(target.paths("main", "pd/")) == ["pd/blob.bin", "pd/frame.parquet"]
    sha = target.commit()
    assert python_client(S3FS_PYTHON, "s3fs_pandas.py", target, sha).strip() == "ok"
