"""s3cmd (Debian's package) with a path-style configuration and s3cmd's defaults."""

from __future__ import annotations

import boto3

from tests.compat.conftest import TREE, Target, run


def _s3cmd(target: Target, *args: str, check: bool = True) -> bytes:
    config = target.home / "s3cfg"
    host = target.endpoint.removeprefix("http://")
    config.write_text("[default]\n"
                      f"access_key = {target.server.access_key_id}\n"
                      f"secret_key = {target.server.secret_access_key}\n"
                      f"host_base = {host}\nhost_bucket = {host}\n"
                      "use_https = False\n")
    done = run(["s3cmd", "-c", str(config), *args], target.env(), check=check)
    return done.stdout + done.stderr


def test_s3cmd_round_trip(target: Target) -> None:
    bucket = f"s3://{target.repo}"
    local = target.tree()
    # s3cmd's 15 MiB chunks make the 20 MiB file a multipart upload
    out = _s3cmd(target, "put", "--progress", str(local / "big.bin"),
                 f"{bucket}/main/single/big.bin")
    assert b"part 2 of 2" in out
    assert target.read("main", "single/big.bin") == TREE["big.bin"]
    # a directory synced twice: the second sync uploads nothing
    first = _s3cmd(target, "sync", f"{local}/", f"{bucket}/main/tree/")
    assert first.count(b"upload:") == len(TREE)
    assert sorted(target.paths("main", "tree/")) == sorted(f"tree/{n}" for n in TREE)
    again = _s3cmd(target, "sync", f"{local}/", f"{bucket}/main/tree/")
    assert b"upload:" not in again, again.decode()
    # listings with a delimiter and without
    listed = _s3cmd(target, "ls", f"{bucket}/main/tree/")
    assert b"DIR" in listed and f"{bucket}/main/tree/sub/".encode() in listed
    assert f"{bucket}/main/tree/sub/deeper/c.json".encode() not in listed
    recursive = _s3cmd(target, "ls", "--recursive", f"{bucket}/main/tree/")
    assert all(f"{bucket}/main/tree/{n}".encode() in recursive for n in TREE)
    # what s3cmd asks of a bucket and an object
    for info in (_s3cmd(target, "info", bucket),
                 _s3cmd(target, "info", f"{bucket}/main/tree/a.txt")):
        lines = [line.split() for line in info.decode().splitlines()]
        assert ["ACL:", "lakefs:", "FULL_CONTROL"] in lines, info
        assert ["Policy:", "none"] in lines and ["CORS:", "none"] in lines, info
    # server-side copy, delete
    _s3cmd(target, "cp", f"{bucket}/main/tree/a.txt", f"{bucket}/main/copied/a.txt")
    assert target.read("main", "copied/a.txt") == TREE["a.txt"]
    _s3cmd(target, "del", "--recursive", f"{bucket}/main/copied/")
    _s3cmd(target, "del", f"{bucket}/main/single/big.bin")
    assert [p for p in target.paths("main") if not p.startswith("tree/")] == []
    # a commit is read by its id
    commit = target.commit()
    got = target.home / "got.csv"
    _s3cmd(target, "get", f"{bucket}/{commit}/tree/sub/b.csv", str(got))
    assert got.read_bytes() == TREE["sub/b.csv"]


def test_s3cmd_lists_and_aborts_multipart_uploads(target: Target) -> None:
    s3 = boto3.client("s3", endpoint_url=target.endpoint, region_name="us-east-1",
                      aws_access_key_id=target.server.access_key_id,
                      aws_secret_access_key=target.server.secret_access_key)
    upload_id = s3.create_multipart_upload(Bucket=target.repo, Key="main/left/over")["UploadId"]
    listed = _s3cmd(target, "multipart", f"s3://{target.repo}")
    assert upload_id.encode() in listed and b"main/left/over" in listed
    _s3cmd(target, "abortmp", f"s3://{target.repo}/main/left/over", upload_id)
    assert s3.list_multipart_uploads(Bucket=target.repo).get("Uploads", []) == []
