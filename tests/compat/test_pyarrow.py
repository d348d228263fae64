"""pyarrow's S3FileSystem, default ``write_dataset`` included, against the gateway."""

from __future__ import annotations

from tests.compat.conftest import PYTHON, Target, python_client


def test_pyarrow_dataset_round_trip(target: Target) -> None:
    out = python_client(PYTHON, "pyarrow_dataset.py", target)
    assert out.startswith("ok ")
    sha = out.split()[1]
    assert len(target.paths(sha, "ds/")) == 1
    assert target.paths("main", "blobs/") == []
