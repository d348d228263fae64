"""``lakectl metastore`` on AWS Glue (moto's, on loopback): tables copied to a branch,
merged, copied all at once, imported, compared, and pointed at symlink manifests a live
server writes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from click.testing import CliRunner

from lakectl import metastore as ms
from lakefs_testing.live_server import LiveServer, live_server
from lakefs_testing.servers import MOTO_ENV
from tests.lakectl.test_live import DEATH, api, environment, fails, ok


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(str(tmp_path_factory.mktemp("lakectl-metastore"))) as srv:
        yield srv


@pytest.fixture
def glue(moto_endpoint: str) -> Any:
    return boto3.client("glue", endpoint_url=moto_endpoint,
                        region_name=MOTO_ENV["AWS_DEFAULT_REGION"])


@pytest.fixture
def cli(server: LiveServer, tmp_path: Path, moto_endpoint: str) -> CliRunner:
    return CliRunner(env=environment(server, tmp_path, **MOTO_ENV,
                                     AWS_ENDPOINT_URL_GLUE=moto_endpoint,
                                     LAKECTL_METASTORE_TYPE="glue"))


def _table(glue: Any, db: str, name: str, location: str, columns: dict[str, str],
           partitions: dict[str, str]) -> None:
    glue.create_table(DatabaseName=db, TableInput={
        "Name": name, "PartitionKeys": [{"Name": "dt", "Type": "string"}],
        "StorageDescriptor": {"Location": location, "Columns": [
            {"Name": k, "Type": v} for k, v in columns.items()]}})
    glue.batch_create_partition(DatabaseName=db, TableName=name, PartitionInputList=[
        {"Values": [v], "StorageDescriptor": {"Location": loc}}
        for v, loc in partitions.items()])


def _locations(glue: Any, db: str, table: str) -> dict[str, str]:
    parts = glue.get_partitions(DatabaseName=db, TableName=table)["Partitions"]
    return {p["Values"][0]: p["StorageDescriptor"]["Location"] for p in parts}


def test_copy_then_merge_then_diff(cli: CliRunner, glue: Any, unique_name: str) -> None:
    db, dev = f"{unique_name}_db".replace("-", "_"), f"{unique_name}_dev".replace("-", "_")
    glue.create_database(DatabaseInput={"Name": db})
    glue.create_database(DatabaseInput={"Name": dev})
    _table(glue, db, "sales", "s3://repo/main/sales", {"id": "int", "amount": "double"},
           {"2024-01": "s3://repo/main/sales/dt=2024-01",
            "2024-02": "s3://repo/main/sales/dt=2024-02"})
    out = ok(cli, "metastore", "copy", "--from-schema", db, "--from-table", "sales",
             "--to-schema", dev, "--to-branch", "dev").stdout
    assert out == f"copy {db}.sales -> {dev}.sales\n"
    copied = glue.get_table(DatabaseName=dev, Name="sales")["Table"]
    assert copied["StorageDescriptor"]["Location"] == "s3://repo/dev/sales"
    assert copied["StorageDescriptor"]["SerdeInfo"]["Name"] == "sales"
    assert _locations(glue, dev, "sales") == {
        "2024-01": "s3://repo/dev/sales/dt=2024-01", "2024-02": "s3://repo/dev/sales/dt=2024-02"}

    # the source changes: a partition added, one dropped, a column added
    glue.delete_partition(DatabaseName=db, TableName="sales", PartitionValues=["2024-01"])
    glue.batch_create_partition(DatabaseName=db, TableName="sales", PartitionInputList=[
        {"Values": ["2024-03"], "StorageDescriptor": {
            "Location": "s3://repo/main/sales/dt=2024-03"}}])
    diff = ok(cli, "metastore", "diff", "--from-schema", db, "--from-table", "sales",
              "--to-schema", dev).stdout
    assert diff == (f"{db}.sales <--> {dev}.sales\nColumns are identical\nPartitions\n"
                    "- 2024-01\n~ 2024-02\n+ 2024-03\n")
    ok(cli, "metastore", "copy", "--from-schema", db, "--from-table", "sales",
       "--to-schema", dev, "--to-branch", "dev")
    assert _locations(glue, dev, "sales") == {
        "2024-02": "s3://repo/dev/sales/dt=2024-02", "2024-03": "s3://repo/dev/sales/dt=2024-03"}
    # one partition alone, to another branch
    ok(cli, "metastore", "copy", "--from-schema", db, "--from-table", "sales",
       "--to-schema", dev, "--to-branch", "fix", "-p", "2024-03")
    assert _locations(glue, dev, "sales")["2024-03"] == "s3://repo/fix/sales/dt=2024-03"
    missing = fails(cli, "metastore", "copy", "--from-schema", db, "--from-table", "nope",
                    "--to-branch", "dev")
    assert "EntityNotFoundException" in missing.stderr


def test_copy_all_and_import_all(cli: CliRunner, glue: Any, unique_name: str) -> None:
    db = f"{unique_name}-src".replace("_", "-")
    glue.create_database(DatabaseInput={"Name": db})
    _table(glue, db, "events", "s3://repo/main/events", {"id": "int"},
           {"a": "s3://repo/main/events/dt=a"})
    _table(glue, db, "users", "s3://bucket/raw/users", {"id": "int"},
           {"b": "s3://bucket/raw/users/dt=b"})
    out = ok(cli, "metastore", "copy-all", "--from-address", "src", "--to-address", "dst",
             "--schema-filter", db, "--table-filter", "ev.*", "--branch", "br").stdout
    normalized = db.replace("-", "_").lower()
    assert out == f"copy src -> dst\ncopy table {db}.events -> {normalized}.events\n"
    assert _locations(glue, normalized, "events") == {"a": "s3://repo/br/events/dt=a"}
    glue.delete_table(DatabaseName=normalized, Name="events")
    out = ok(cli, "metastore", "import-all", "--from-address", "src", "--to-address", "dst",
             "--schema-filter", db, "--table-filter", "users", "--repo", "lake",
             "--branch", "main").stdout
    assert out.endswith(f"copy table {db}.users -> {normalized}.users\n")
    assert glue.get_table(DatabaseName=normalized, Name="users")["Table"][
        "StorageDescriptor"]["Location"] == "s3://lake/main/raw/users"
    same = fails(cli, "metastore", "copy-all", "--to-address", "x", "--from-address", "x",
                 "--branch", "b")
    assert same.stderr == f"from-address must be different than to-address\n{DEATH}\n"


def test_create_symlink(cli: CliRunner, server: LiveServer, glue: Any,
                        unique_name: str) -> None:
    ok(cli, "repo", "create", "lakefs://lake", "local://lake")
    for path in ("tables/t/dt=1/a.parquet", "tables/t/dt=2/b.parquet"):
        api(server, "POST", "/repositories/lake/branches/main/objects", params={"path": path},
            content=b"x")
    db = f"{unique_name}_sym".replace("-", "_")
    glue.create_database(DatabaseInput={"Name": db})
    _table(glue, db, "t", "s3://lake/main/tables/t", {"id": "int"},
           {"1": "s3://lake/main/tables/t/dt=1", "2": "s3://lake/main/tables/t/dt=2"})
    ok(cli, "metastore", "create-symlink", "--repo", "lake", "--branch", "main", "--path",
       "tables/t", "--from-schema", db, "--from-table", "t", "--to-schema", db,
       "--to-table", "t_symlinks")
    prefix = "local://lake/symlinks"
    assert _locations(glue, db, "t_symlinks") == {
        "1": f"{prefix}/lake/main/tables/t/dt=1", "2": f"{prefix}/lake/main/tables/t/dt=2"}


def test_hive_and_unknown_types_refused(cli: CliRunner) -> None:
    hive = fails(cli, "metastore", "copy", "--from-client-type", "hive", "--from-schema", "a",
                 "--from-table", "b", "--to-branch", "c")
    assert hive.stderr.startswith("hive metastore is not supported by this lakectl")
    other = fails(cli, "metastore", "diff", "--from-client-type", "x", "--from-schema", "a",
                  "--from-table", "b")
    assert other.stderr == f"unknown type, expected hive or glue got: x\n{DEATH}\n"


def test_locations() -> None:
    assert ms.replace_branch_name("s3a://repo/main/a/b", "dev") == "s3a://repo/dev/a/b"
    assert ms.symlink_location("s3://repo/main/a", "s3://ns/symlinks") == (
        "s3://ns/symlinks/repo/main/a")
    with pytest.raises(ms.MetastoreError, match="schema://host/path"):
        ms.replace_branch_name("/no/scheme", "dev")
