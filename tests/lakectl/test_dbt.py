"""``lakectl dbt create-branch-schema`` running a real dbt (dbt-core with the DuckDB
adapter, in its own virtualenv: `make compat-clients`) against a live server and
moto's Glue: a branch made for the schema, the schema and its table models copied to
point at the branch, the views rebuilt by dbt in the new schema."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from click.testing import CliRunner

from lakefs_testing.live_server import LiveServer, live_server
from lakefs_testing.servers import MOTO_ENV
from tests.lakectl.test_live import api, environment, fails, ok

#: the virtualenv holding dbt (dbt pins its own dependencies)
DBT_BIN = Path(os.environ.get(
    "LAKEFS_DBT_BIN", Path(__file__).parents[2] / ".venv" / "dbt-client" / "bin"))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(str(tmp_path_factory.mktemp("lakectl-dbt"))) as srv:
        yield srv


def _project(root: Path, schema: str) -> Path:
    """A dbt project on DuckDB: one table model and one view model."""
    (root / "models").mkdir(parents=True)
    (root / "macros").mkdir()
    (root / "dbt_project.yml").write_text(
        "name: pipeline\nversion: '1.0'\nprofile: pipeline\nmodel-paths: [models]\n"
        "macro-paths: [macros]\nflags:\n  send_anonymous_usage_stats: false\n")
    (root / "profiles.yml").write_text(
        "pipeline:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n"
        f"      path: {root / 'warehouse.duckdb'}\n      schema: {schema}\n")
    (root / "models" / "orders.sql").write_text(
        "{{ config(materialized='table') }} select 1 as id, 2.5 as amount")
    (root / "models" / "answers.sql").write_text(
        "{{ config(materialized='view') }} select 42 as answer")
    return root


def test_create_branch_schema_runs_dbt_and_copies_the_schema_to_the_branch(
        server: LiveServer, tmp_path: Path, moto_endpoint: str, unique_name: str) -> None:
    assert (DBT_BIN / "dbt").exists(), f"{DBT_BIN / 'dbt'} is missing: run `make compat-clients`"
    repo = f"dbt-{unique_name}"[:60].lower()
    schema, to_schema = f"{unique_name}_sales".replace("-", "_"), "dev_" + unique_name.replace(
        "-", "_")
    glue: Any = boto3.client("glue", endpoint_url=moto_endpoint,
                             region_name=MOTO_ENV["AWS_DEFAULT_REGION"])
    project = _project(tmp_path / "project", schema)
    cli = CliRunner(env=environment(
        server, tmp_path, **MOTO_ENV, AWS_ENDPOINT_URL_GLUE=moto_endpoint,
        LAKECTL_METASTORE_TYPE="glue", DBT_PROFILES_DIR=str(project),
        DBT_SEND_ANONYMOUS_USAGE_STATS="false",
        PATH=f"{DBT_BIN}{os.pathsep}{os.environ.get('PATH', '')}"))
    ok(cli, "repo", "create", f"lakefs://{repo}", f"local://{repo}")
    glue.create_database(DatabaseInput={"Name": schema,
                                        "LocationUri": f"s3://{repo}/main/{schema}"})
    glue.create_table(DatabaseName=schema, TableInput={
        "Name": "orders", "StorageDescriptor": {
            "Location": f"s3://{repo}/main/{schema}/orders",
            "Columns": [{"Name": "id", "Type": "int"}, {"Name": "amount", "Type": "double"}]}})

    # the project must use lakectl's schema macro first
    refused = fails(cli, "dbt", "create-branch-schema", "--branch", "dev",
                    "--project-root", str(project))
    assert "generate-schema-macro" in refused.stderr
    ok(cli, "dbt", "generate-schema-macro", "--project-root", str(project))

    out = ok(cli, "dbt", "create-branch-schema", "--branch", "dev", "--to-schema", to_schema,
             "--create-branch", "--project-root", str(project)).stdout
    assert f"dbt debug succeeded with schemaOutput: {schema}\n" in out
    assert "branch dev created from main\n" in out
    assert f"copied {schema}.orders -> {to_schema}.orders\n" in out
    assert out.endswith(f"views created\ncreate-branch-schema done!\nyour new schema is "
                        f"{to_schema}\nyou can now edit your dbt profile and run dbt on "
                        "branch dev\n")
    # the branch exists on the server, from main
    branch = api(server, "GET", f"/repositories/{repo}/branches/dev").json()
    main = api(server, "GET", f"/repositories/{repo}/branches/main").json()
    assert branch["commit_id"] == main["commit_id"]
    # the schema and its table point at the branch
    copied = glue.get_database(Name=to_schema)["Database"]
    assert copied["LocationUri"] == f"s3://{repo}/dev/{schema}"
    table = glue.get_table(DatabaseName=to_schema, Name="orders")["Table"]
    assert table["StorageDescriptor"]["Location"] == f"s3://{repo}/dev/{schema}/orders"
    # dbt built the views in the new schema (read with dbt's own DuckDB: its file format)
    read = subprocess.run(
        [str(DBT_BIN / "python"), "-c", "import duckdb, sys; print(duckdb.connect(sys.argv[1], "
         "read_only=True).execute(sys.argv[2]).fetchall())", str(project / "warehouse.duckdb"),
         f"select answer from {to_schema}.answers"],
        capture_output=True, text=True, timeout=60, check=True)
    assert read.stdout == "[(42,)]\n"

    # again: the schema exists; asked to go on with it, it does
    more = ok(cli, "dbt", "create-branch-schema", "--branch", "dev", "--to-schema", to_schema,
              "--continue-on-schema-exists", "--skip-views", "--project-root", str(project))
    assert f"schema {to_schema} already exists, proceeding with existing schema" in more.stdout
    assert "skipping views\n" in more.stdout
