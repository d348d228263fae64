"""``lakectl fs`` on the pre-signed data path (S3 on moto), ``fs presign``, ``stat``,
``update-metadata`` and ``stage``, and quiet exits when the reader of stdout goes away."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from click.testing import CliRunner

from lakefs_testing.live_server import (
    ADMIN_KEY,
    ADMIN_SECRET,
    LiveServer,
    live_server,
    server_process,
)
from tests.lakectl.test_live import api, environment, fails, ok


@pytest.fixture(scope="module")
def bucket(moto_endpoint: str) -> str:
    name = f"lakectl-presign-{os.getpid()}"
    boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1").create_bucket(
        Bucket=name)
    return name


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory: pytest.TempPathFactory, moto_endpoint: str,
              bucket: str) -> Iterator[LiveServer]:
    env = {"LAKEFS_BLOCKSTORE_TYPE": "s3", "LAKEFS_BLOCKSTORE_S3_ENDPOINT": moto_endpoint,
           "LAKEFS_BLOCKSTORE_S3_FORCE_PATH_STYLE": "true",
           "LAKEFS_BLOCKSTORE_S3_REGION": "us-east-1",
           "LAKEFS_BLOCKSTORE_S3_CREDENTIALS_ACCESS_KEY_ID": "testing",
           "LAKEFS_BLOCKSTORE_S3_CREDENTIALS_SECRET_ACCESS_KEY": "testing"}
    with live_server(str(tmp_path_factory.mktemp("lakectl-s3")), env) as srv:
        yield srv


@pytest.fixture(scope="module")
def local_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(str(tmp_path_factory.mktemp("lakectl-local"))) as srv:
        yield srv


def test_pre_signed_upload_and_download(s3_server: LiveServer, bucket: str,
                                        moto_endpoint: str, tmp_path: Path) -> None:
    cli = CliRunner(env=environment(s3_server, tmp_path))
    ok(cli, "repo", "create", "lakefs://signed", f"s3://{bucket}/signed")
    data = os.urandom(300_000)
    (tmp_path / "blob").write_bytes(data)
    ok(cli, "fs", "upload", "lakefs://signed/main/blob", "-s", str(tmp_path / "blob"),
       "--pre-sign", "--no-progress")
    ok(cli, "fs", "upload", "lakefs://signed/main/piped", "-s", "-", "--pre-sign",
       "--no-progress", input=b"from stdin")
    stat = api(s3_server, "GET", "/repositories/signed/refs/main/objects/stat",
               params={"path": "blob"}).json()
    assert stat["size_bytes"] == len(data)
    # the bytes went to the store at the address the server handed out
    s3 = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
    key = stat["physical_address"].removeprefix(f"s3://{bucket}/")
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == data

    url = ok(cli, "fs", "presign", "lakefs://signed/main/blob").stdout.strip()
    assert url.startswith(moto_endpoint) and "Signature=" in url
    assert "Physical Address: http" in ok(cli, "fs", "stat", "lakefs://signed/main/blob",
                                          "--pre-sign").stdout
    ok(cli, "fs", "download", "lakefs://signed/main/blob", str(tmp_path / "back"),
       "--pre-sign", "--no-progress")
    assert (tmp_path / "back").read_bytes() == data
    assert ok(cli, "fs", "cat", "--pre-sign", "lakefs://signed/main/piped").stdout == (
        "from stdin")
    # by default too, since the store offers pre-signed URLs
    ok(cli, "fs", "download", "lakefs://signed/main/", str(tmp_path / "all"), "--no-progress")
    assert (tmp_path / "all" / "blob").read_bytes() == data


def test_without_pre_signed_urls(local_server: LiveServer, tmp_path: Path) -> None:
    cli = CliRunner(env=environment(local_server, tmp_path))
    ok(cli, "repo", "create", "lakefs://plain", "local://plain")
    disabled = "Pre-signed URL support is currently disabled for this lakeFS server"
    assert fails(cli, "fs", "upload", "lakefs://plain/main/x", "-s", "-", "--pre-sign",
                 "--no-progress").stderr.startswith(disabled)
    ok(cli, "fs", "upload", "lakefs://plain/main/x", "-s", "-", "--no-progress", input="x")
    assert fails(cli, "fs", "presign", "lakefs://plain/main/x").stderr.startswith(disabled)
    assert ok(cli, "fs", "cat", "lakefs://plain/main/x").stdout == "x"


def test_stat_update_metadata_and_stage(local_server: LiveServer, tmp_path: Path) -> None:
    cli = CliRunner(env=environment(local_server, tmp_path))
    ok(cli, "repo", "create", "lakefs://meta", "local://meta")
    ok(cli, "fs", "upload", "lakefs://meta/main/m.csv", "-s", "-", "--no-progress",
       "--content-type", "text/csv", input="a,b\n")
    ok(cli, "fs", "update-metadata", "lakefs://meta/main/m.csv",
       "--metadata", "owner=data,stage=raw", "--metadata", "team=x")
    out = ok(cli, "fs", "stat", "lakefs://meta/main/m.csv").stdout
    assert "Path: m.csv\n" in out and "Size: 4 bytes\n" in out
    assert "Content-Type: text/csv\n" in out
    assert "Metadata:\n\towner              = data\n\tstage              = raw\n" in out
    assert "expected <key>=<value>" in fails(cli, "fs", "update-metadata",
                                             "lakefs://meta/main/m.csv",
                                             "--metadata", "nokey").stderr
    inside = fails(cli, "fs", "stage", "lakefs://meta/main/s", "--location",
                   "local://meta/data/x", "--size", "1", "--checksum", "abc")
    assert inside.stderr.startswith(
        "The staged object must be outside the repository's storage namespace\n")


def test_broken_pipe_exits_quietly(tmp_path: Path) -> None:
    """``lakectl ... | head`` exits 0 with nothing on stderr once head has read enough. The
    server runs in its own process: the download it serves is cut short."""
    with server_process(tmp_path / "data") as srv:
        env = {**os.environ, "HOME": str(tmp_path), "LAKECTL_INTERACTIVE": "false",
               "LAKECTL_SERVER_ENDPOINT_URL": srv.endpoint,
               "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": ADMIN_KEY,
               "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": ADMIN_SECRET}
        cli = CliRunner(env=env)
        ok(cli, "repo", "create", "lakefs://piped", "local://piped")
        ok(cli, "fs", "upload", "lakefs://piped/main/big", "-s", "-", "--no-progress",
           input=os.urandom(4 << 20))
        for i in range(3):
            ok(cli, "fs", "upload", f"lakefs://piped/main/f{i}", "-s", "-", "--no-progress",
               input="x")
        lakectl_cmd = f"{sys.executable} -m lakectl"
        for command in ("fs cat lakefs://piped/main/big | head -c 10",
                        "fs ls lakefs://piped/main/ | head -n 1",
                        "log lakefs://piped/main | head -n 1"):
            run = subprocess.run(["bash", "-c", f"{lakectl_cmd} {command}; "
                                  "echo rc=${PIPESTATUS[0]} >&2"],
                                 env=env, capture_output=True, timeout=120, check=False)
            assert run.stderr.decode().strip() == "rc=0", (command, run.stderr)
            assert run.stdout
