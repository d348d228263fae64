"""The mirrors_database section, the backend registry, and clear errors at startup."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import boto3
import pytest
import sqlalchemy as sa
import yaml

from lakefs_core.errors import ValidationError
from lakefs_testing.servers import free_port
from mirrors_db import (
    MirrorsDatabaseConfig,
    MirrorsDatabaseConfigError,
    MirrorsDatabaseType,
    MirrorsDatabaseUnavailableError,
    open_mirrors_table,
)
from mirrors_db.sql import postgres_url

SEED_SHAPE = """
mirrors_database:
  type: dynamodb
  dynamodb:
    table_name: lakefs-replication-table
    aws_region: us-east-1
    endpoint: http://127.0.0.1:4566
    aws_secret_access_key: s3cr3t
"""


def test_parses_the_yaml_shape_of_the_replication_config() -> None:
    section = yaml.safe_load(SEED_SHAPE)["mirrors_database"]
    cfg = MirrorsDatabaseConfig.from_mapping(section)
    assert cfg.type is MirrorsDatabaseType.DYNAMODB
    assert cfg.dynamodb is not None
    assert cfg.dynamodb.table_name == "lakefs-replication-table"
    assert cfg.dynamodb.aws_region == "us-east-1"
    assert cfg.dynamodb.endpoint_url == "http://127.0.0.1:4566"
    assert "s3cr3t" not in repr(cfg)
    assert cfg.list_mirrors_page_size == 1000


def test_defaults_to_sqlite_and_accepts_aliases() -> None:
    assert MirrorsDatabaseConfig.from_mapping({}).type is MirrorsDatabaseType.SQLITE
    assert MirrorsDatabaseConfig.from_mapping({"type": "local"}).type is MirrorsDatabaseType.SQLITE
    cfg = MirrorsDatabaseConfig.from_mapping(
        {"type": "PostgreSQL", "postgres": {"connection_string": "postgres://h/db"}})
    assert cfg.type is MirrorsDatabaseType.POSTGRES


@pytest.mark.parametrize("section,fragment", [
    ({"type": "mongodb"}, "unknown mirrors database type 'mongodb'"),
    ({"type": "dynamodb"}, "table_name"),
    ({"type": "postgres"}, "connection_string"),
    ({"type": "dynamodb", "dynamodb": {"table": "x"}}, "mirrors_database.dynamodb.table"),
    ({"list_mirrors_page_size": 0}, "mirrors_database.list_mirrors_page_size"),
])
def test_bad_sections_name_the_problem(section: dict[str, Any], fragment: str) -> None:
    with pytest.raises(MirrorsDatabaseConfigError) as info:
        MirrorsDatabaseConfig.from_mapping(section)
    assert fragment in str(info.value)
    assert isinstance(info.value, ValidationError)


def test_postgres_connection_strings() -> None:
    url = postgres_url("postgres://user:pw@db.example:5433/mirrors?sslmode=require")
    assert (url.drivername, url.host, url.port, url.database) == (
        "postgresql+psycopg", "db.example", 5433, "mirrors")
    assert url.query == {"sslmode": "require"}
    assert postgres_url("postgresql+psycopg://h/db").database == "db"
    for bad in ("mysql://h/db", "host=h dbname=db"):
        with pytest.raises(MirrorsDatabaseConfigError):
            postgres_url(bad)


def test_unreachable_postgres_fails_at_open_without_leaking_the_password() -> None:
    port = free_port()
    with pytest.raises(MirrorsDatabaseUnavailableError) as info:
        open_mirrors_table({"type": "postgres", "postgres": {
            "connection_string": f"postgres://u:hunter2@127.0.0.1:{port}/db",
            "connect_timeout": 2}})
    assert f"127.0.0.1:{port}" in str(info.value)
    assert "hunter2" not in str(info.value)


def test_unreachable_dynamodb_fails_at_open() -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(MirrorsDatabaseUnavailableError, match="mirrors-x"):
        open_mirrors_table({"type": "dynamodb", "dynamodb": {
            "table_name": "mirrors-x", "aws_region": "us-east-1", "endpoint_url": endpoint}})


def test_existing_dynamodb_table_without_streams_is_refused(
    dynamodb_endpoint: str, unique_name: str
) -> None:
    client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=dynamodb_endpoint)
    client.create_table(
        TableName=unique_name, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
    client.close()
    with pytest.raises(MirrorsDatabaseConfigError) as info:
        open_mirrors_table({"type": "dynamodb", "dynamodb": {
            "table_name": unique_name, "aws_region": "us-east-1",
            "endpoint_url": dynamodb_endpoint}})
    message = str(info.value)
    assert "key schema" in message and "Streams" in message and "by_source" in message


def test_dynamodb_table_is_created_with_streams_and_indexes(
    dynamodb_endpoint: str, unique_name: str
) -> None:
    config = {"type": "dynamodb", "dynamodb": {
        "table_name": unique_name, "aws_region": "us-east-1", "endpoint_url": dynamodb_endpoint}}
    open_mirrors_table(config).close()
    client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=dynamodb_endpoint)
    desc = client.describe_table(TableName=unique_name)["Table"]
    client.close()
    assert desc["StreamSpecification"] == {"StreamEnabled": True,
                                           "StreamViewType": "NEW_AND_OLD_IMAGES"}
    assert desc["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    assert [k["AttributeName"] for k in desc["KeySchema"]] == ["organization_id", "row_id"]
    assert {i["IndexName"] for i in desc["GlobalSecondaryIndexes"]} == {"by_source",
                                                                        "by_destination"}
    open_mirrors_table(config).close()  # a second start reuses the table


def test_sql_table_from_another_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE mirrors_db_leases (organization_id TEXT, name TEXT)"))
    engine.dispose()
    with pytest.raises(MirrorsDatabaseConfigError, match="mirrors_db_leases.*'expires_at'"):
        open_mirrors_table({"type": "sqlite", "sqlite": {"path": str(path)}})


def test_sqlite_path_that_cannot_exist_is_refused(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(MirrorsDatabaseConfigError, match="sqlite.path"):
        open_mirrors_table({"type": "sqlite", "sqlite": {"path": str(blocker / "m.db")}})


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120, cwd=Path(__file__).parents[2])


def test_backends_load_lazily() -> None:
    result = run_python("""
        import sys
        import mirrors_db
        loaded = [m for m in ("boto3", "sqlalchemy", "psycopg", "mirrors_db.dynamodb",
                              "mirrors_db.sql") if m in sys.modules]
        print(loaded)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_missing_driver_says_what_to_install() -> None:
    result = run_python("""
        import sys
        sys.modules["boto3"] = None  # as if boto3 were not installed
        from mirrors_db import MirrorsDatabaseConfigError, open_mirrors_table
        try:
            open_mirrors_table({"type": "dynamodb", "dynamodb": {"table_name": "t-1"}})
        except MirrorsDatabaseConfigError as exc:
            print(exc)
    """)
    assert result.returncode == 0, result.stderr
    assert "pip install boto3" in result.stdout
