"""rclone (Debian's package), with an s3 remote of provider ``Other`` and rclone's
defaults, against the gateway."""

from __future__ import annotations

import boto3

from tests.compat.conftest import MIB, TREE, Target, run


def _rclone(target: Target, *args: str) -> bytes:
    env = target.env(
        RCLONE_CONFIG=str(target.home / "rclone.conf"),
        RCLONE_CONFIG_LAKEFS_TYPE="s3", RCLONE_CONFIG_LAKEFS_PROVIDER="Other",
        RCLONE_CONFIG_LAKEFS_ENDPOINT=target.endpoint,
        RCLONE_CONFIG_LAKEFS_ACCESS_KEY_ID=target.server.access_key_id,
        RCLONE_CONFIG_LAKEFS_SECRET_ACCESS_KEY=target.server.secret_access_key)
    (target.home / "rclone.conf").touch()
    done = run(["rclone", *args], env)
    return done.stdout + done.stderr


def test_rclone_round_trip(target: Target) -> None:
    remote = f"lakefs:{target.repo}"
    local = target.tree()
    # rclone creates the bucket before it writes: an existing repository is fine
    _rclone(target, "mkdir", f"{remote}/main")
    _rclone(target, "copyto", str(local / "a.txt"), f"{remote}/main/copied/a.txt")
    assert target.read("main", "copied/a.txt") == TREE["a.txt"]
    # a directory synced twice: the second sync transfers nothing; 5 MiB parts make the
    # 20 MiB file a multipart upload (rclone's own cut-off is 200 MiB)
    sync = ["sync", str(local), f"{remote}/main/tree", "-v", "--s3-upload-cutoff", "5M",
            "--s3-chunk-size", "5M"]
    first = _rclone(target, *sync)
    assert b"Copied (new)" in first
    assert sorted(target.paths("main", "tree/")) == sorted(f"tree/{n}" for n in TREE)
    for name, data in TREE.items():
        assert target.read("main", f"tree/{name}") == data
    again = _rclone(target, *sync)
    assert b"Copied" not in again and b"Updated" not in again, again.decode()
    # listings with a delimiter (one level) and without (recursive)
    assert _rclone(target, "lsf", f"{remote}/main/tree").split() == [
        b"a.txt", b"big.bin", b"empty", b"sub/"]
    assert sorted(_rclone(target, "lsf", "-R", "--files-only",
                          f"{remote}/main/tree").split()) == sorted(n.encode() for n in TREE)
    # server-side copy and move, a ranged read, deletes
    _rclone(target, "copyto", f"{remote}/main/tree/sub/b.csv", f"{remote}/main/copied/b.csv")
    _rclone(target, "moveto", f"{remote}/main/copied/b.csv", f"{remote}/main/moved/b.csv")
    assert target.read("main", "moved/b.csv") == TREE["sub/b.csv"]
    assert "copied/b.csv" not in target.paths("main")
    part = _rclone(target, "cat", "--offset", str(3 * MIB), "--count", "100",
                   f"{remote}/main/tree/big.bin")
    assert part == TREE["big.bin"][3 * MIB:3 * MIB + 100]
    _rclone(target, "delete", f"{remote}/main/moved")
    _rclone(target, "deletefile", f"{remote}/main/copied/a.txt")
    assert [p for p in target.paths("main") if not p.startswith("tree/")] == []
    # a commit is read by its id
    commit = target.commit()
    assert _rclone(target, "cat", f"{remote}/{commit}/tree/sub/b.csv") == TREE["sub/b.csv"]


def test_rclone_cleans_up_multipart_uploads(target: Target) -> None:
    s3 = boto3.client("s3", endpoint_url=target.endpoint, region_name="us-east-1",
                      aws_access_key_id=target.server.access_key_id,
                      aws_secret_access_key=target.server.secret_access_key)
    upload = s3.create_multipart_upload(Bucket=target.repo, Key="main/left/over")
    listed = _rclone(target, "backend", "list-multipart-uploads", f"lakefs:{target.repo}")
    assert upload["UploadId"].encode() in listed
    _rclone(target, "backend", "cleanup", f"lakefs:{target.repo}", "-o", "max-age=0s")
    assert s3.list_multipart_uploads(Bucket=target.repo).get("Uploads", []) == []
