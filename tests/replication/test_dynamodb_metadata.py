"""Mirroring between regions whose servers keep their metadata on DynamoDB (moto): the
sidecars open the same tables from ``refstore_database``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml

from lakefs_core.errors import DatabaseError
from lakefs_core.refstore.dynamodb import DynamoDBRefStore
from lakefs_testing.regions import (
    commit,
    create_mirror,
    create_source,
    dynamodb_database,
    mirror_head,
    replication_config,
    two_regions,
    upload,
)
from lakefs_testing.servers import MOTO_ENV, free_port
from lakefs_testing.waiting import wait_for
from replication.config import load_replication_config
from replication.sidecar import Sidecar
from tests.replication.invariants import MirrorChecker

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_mirroring_with_both_regions_metadata_on_dynamodb(
        tmp_path: Path, sqlite_mirrors: dict[str, Any], moto_endpoint: str,
        unique_name: str) -> None:
    tables = {n: f"meta-{n}-{unique_name}" for n in ("east", "west")}
    databases = {n: dynamodb_database(moto_endpoint, t, tmp_path / f"{n}-auth.db")
                 for n, t in tables.items()}
    try:
        with two_regions(tmp_path, sqlite_mirrors, interval="1s",
                         databases=databases) as (east, west):
            for region in (east, west):
                assert isinstance(region.graveler.refstore, DynamoDBRefStore)
            create_source(east)
            upload(east, "src", "main", "data/a.csv", b"a,b\n1,2\n")
            c1 = commit(east, "src", "main", "first")
            create_mirror(east)
            checker = MirrorChecker(east.graveler, "src", west.graveler, "src-mirror")
            # the west server reads only its DynamoDB table: the sidecar wrote the
            # mirror repository and its commits there, with the source's commit ids
            wait_for(lambda: mirror_head(west, "src-mirror", "main") == c1, 30,
                     what="first promotion", check=checker.check)
            upload(east, "src", "main", "data/b.csv", b"3,4\n")
            c2 = commit(east, "src", "main", "second")
            wait_for(lambda: mirror_head(west, "src-mirror", "main") == c2, 30,
                     what="second promotion", check=checker.check)
            with west.client() as c:
                log = c.get("/api/v1/repositories/src-mirror/refs/main/commits")
                assert log.status_code == 200, log.text
                assert [x["id"] for x in log.json()["results"]][:2] == [c2, c1]
                for ref, path, data in ((c1, "data/a.csv", b"a,b\n1,2\n"),
                                        ("main", "data/b.csv", b"3,4\n")):
                    r = c.get(f"/api/v1/repositories/src-mirror/refs/{ref}/objects",
                              params={"path": path})
                    assert r.status_code == 200 and r.content == data
                w = c.post("/api/v1/repositories/src-mirror/branches/main/objects",
                           params={"path": "x"}, content=b"x")
                assert w.status_code == 403, w.text
            assert checker.checks > 0
    finally:
        client = boto3.client("dynamodb", endpoint_url=moto_endpoint,
                              region_name=MOTO_ENV["AWS_DEFAULT_REGION"],
                              aws_access_key_id=MOTO_ENV["AWS_ACCESS_KEY_ID"],
                              aws_secret_access_key=MOTO_ENV["AWS_SECRET_ACCESS_KEY"])
        for table in tables.values():  # moto keeps tables in memory: drop the test's
            client.delete_table(TableName=table)
        client.close()


def _sidecar_config(tmp_path: Path, database: dict[str, Any],
                    mirrors: dict[str, Any]) -> Path:
    config = replication_config("west", tmp_path, "east", "http://127.0.0.1:9",
                                "http://127.0.0.1:9", free_port(), mirrors, "builtin",
                                tmp_path, "1s", database=database)
    path = tmp_path / "replication.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_sidecar_refuses_a_dynamodb_table_the_server_never_made(
        tmp_path: Path, sqlite_mirrors: dict[str, Any], moto_endpoint: str,
        unique_name: str) -> None:
    """A mistyped table name is an error at start, not an empty table of mirrors that
    the server never reads."""
    database = dynamodb_database(moto_endpoint, f"missing-{unique_name}", tmp_path / "a.db")
    config = load_replication_config(_sidecar_config(tmp_path, database, sqlite_mirrors),
                                     env={})
    with pytest.raises(DatabaseError, match=rf"table 'missing-{unique_name}' at "
                                            rf"{moto_endpoint} does not exist"):
        Sidecar(config)
    with pytest.raises(DatabaseError):  # nothing was created by the attempt
        DynamoDBRefStore(f"missing-{unique_name}", endpoint=moto_endpoint,
                         region=MOTO_ENV["AWS_DEFAULT_REGION"],
                         access_key_id=MOTO_ENV["AWS_ACCESS_KEY_ID"],
                         secret_access_key=MOTO_ENV["AWS_SECRET_ACCESS_KEY"],
                         create_table=False)


def test_the_replication_process_names_an_unreachable_dynamodb_endpoint(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    """``python -m replication run`` over a DynamoDB endpoint nobody listens on: it
    exits at once saying which table it could not reach, no traceback."""
    endpoint = f"http://127.0.0.1:{free_port()}"
    path = _sidecar_config(tmp_path, dynamodb_database(endpoint, "lakefs-meta",
                                                       tmp_path / "a.db"), sqlite_mirrors)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REPLICATION_", "LAKEFS_"))}
    proc = subprocess.run([sys.executable, "-m", "replication", "run", "--config", str(path)],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"error: cannot reach DynamoDB table 'lakefs-meta' at "
                                  f"{endpoint}"), proc.stderr
    assert "Traceback" not in proc.stderr
