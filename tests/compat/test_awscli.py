"""The AWS CLI (``awscli`` from PyPI, installed with the project's boto3) with its
defaults: ``--endpoint-url`` is its only option."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.compat.conftest import TREE, Target, run

AWS = Path(sys.executable).parent / "aws"


def _aws(target: Target, *args: str, check: bool = True) -> tuple[int, bytes]:
    done = run([AWS, "--endpoint-url", target.endpoint, *args], target.env(), check=check)
    return done.returncode, done.stdout + done.stderr


def test_aws_cli_round_trip(target: Target) -> None:
    bucket = f"s3://{target.repo}"
    local = target.tree()
    # as on S3, making a bucket one already has fails, and says so
    code, out = _aws(target, "s3", "mb", bucket, check=False)
    assert code == 1 and b"BucketAlreadyOwnedByYou" in out
    # an empty file beside a multipart one, uploaded on pooled connections: every
    # empty PUT must leave its connection fit for the next UploadPart
    for attempt in range(3):
        _aws(target, "s3", "cp", "--recursive", str(local), f"{bucket}/main/cp{attempt}/")
        for name, data in TREE.items():
            assert target.read("main", f"cp{attempt}/{name}") == data
    # a directory synced twice: the second sync uploads nothing
    _, first = _aws(target, "s3", "sync", str(local), f"{bucket}/main/tree/")
    assert first.count(b"upload:") == len(TREE)
    _, again = _aws(target, "s3", "sync", str(local), f"{bucket}/main/tree/")
    assert b"upload:" not in again, again.decode()
    # listings with a delimiter and without
    _, listed = _aws(target, "s3", "ls", f"{bucket}/main/tree/")
    assert b"PRE sub/" in listed and b"c.json" not in listed
    _, recursive = _aws(target, "s3", "ls", "--recursive", f"{bucket}/main/tree/")
    assert all(f"main/tree/{name}".encode() in recursive for name in TREE)
    # server-side copies (the 20 MiB one part by part), a ranged read, probes, deletes
    _aws(target, "s3", "cp", f"{bucket}/main/tree/big.bin", f"{bucket}/main/copied/big.bin")
    _aws(target, "s3", "cp", f"{bucket}/main/tree/a.txt", f"{bucket}/main/copied/a.txt")
    assert target.read("main", "copied/big.bin") == TREE["big.bin"]
    ranged = target.home / "ranged"
    _aws(target, "s3api", "get-object", "--bucket", target.repo, "--key", "main/tree/big.bin",
         "--range", "bytes=1000-1099", str(ranged))
    assert ranged.read_bytes() == TREE["big.bin"][1000:1100]
    _, tags = _aws(target, "s3api", "get-object-tagging", "--bucket", target.repo,
                   "--key", "main/tree/a.txt")
    assert json.loads(tags)["TagSet"] == []
    _aws(target, "s3", "rm", "--recursive", f"{bucket}/main/copied/")
    for attempt in range(3):
        _aws(target, "s3", "rm", "--recursive", f"{bucket}/main/cp{attempt}/")
    assert [p for p in target.paths("main") if not p.startswith("tree/")] == []
    # uploads in progress are listed and aborted
    _, created = _aws(target, "s3api", "create-multipart-upload", "--bucket", target.repo,
                      "--key", "main/left/over")
    upload_id = json.loads(created)["UploadId"]
    _, uploads = _aws(target, "s3api", "list-multipart-uploads", "--bucket", target.repo)
    assert [u["UploadId"] for u in json.loads(uploads)["Uploads"]] == [upload_id]
    _aws(target, "s3api", "abort-multipart-upload", "--bucket", target.repo,
         "--key", "main/left/over", "--upload-id", upload_id)
    _, uploads = _aws(target, "s3api", "list-multipart-uploads", "--bucket", target.repo)
    assert "Uploads" not in json.loads(uploads or b"{}")
    # a commit is read by its id
    commit = target.commit()
    _, got = _aws(target, "s3", "cp", f"{bucket}/{commit}/tree/sub/b.csv", "-")
    assert got == TREE["sub/b.csv"]
