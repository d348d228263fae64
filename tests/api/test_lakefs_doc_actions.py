"""lakeFS's documented Lua hook examples (config/actions/lakefs-docs/), run as they are
printed on a live server; only the placeholders the documents ask to fill are filled."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import lakefs
import pytest
import yaml

from lakefs_testing.live_server import LiveServer
from tests.api.sdk_support import put, sdk_client

DOCS = Path(__file__).resolve().parents[2] / "config" / "actions" / "lakefs-docs"
PLACEHOLDERS = {"<AWS_ACCESS_KEY_ID>": "testing", "<AWS_SECRET_ACCESS_KEY>": "testing",
                "<AWS_REGION>": "us-east-1"}


def _filled(name: str) -> str:
    text = (DOCS / name).read_text()
    for placeholder, value in PLACEHOLDERS.items():
        text = text.replace(placeholder, value)
    return text


def _last_output(client: lakefs.Client, repo: str, event: str) -> tuple[str, str]:
    actions = client.sdk_client.actions_api
    run = next(r for r in actions.list_repository_runs(repo).results if r.event_type == event)
    outputs = []
    for hook in actions.list_run_hooks(repo, run.run_id).results:
        out = actions.get_run_hook_output(repo, run.run_id, hook.hook_run_id)
        outputs.append(out.decode() if isinstance(out, bytes) else str(out))
    return run.status, "".join(outputs)


def test_lua_hook_page_examples(server: LiveServer) -> None:
    client = sdk_client(server)
    repo = lakefs.Repository("docs", client=client).create(storage_namespace="local://docs")
    main = repo.branch("main")
    # docs/howto/hooks/lua.md: the pre-commit check, with its script at script_path
    put(main, "_lakefs_actions/pre_commit_metadata_check.yaml",
        (DOCS / "pre_commit_metadata_check.yaml").read_bytes())
    put(main, "lua_hooks/ensure_metadata_field.lua",
        (DOCS / "lua_hooks/ensure_metadata_field.lua").read_bytes())
    with pytest.raises(lakefs.exceptions.LakeFSException) as missing:
        main.commit("no metadata")
    assert missing.value.status_code == 412
    assert "missing mandatory metadata field: " in str(missing.value)
    with pytest.raises(lakefs.exceptions.LakeFSException) as wrong:
        main.commit("wrong notebook", metadata={"notebook_url": "other.example.com/nb",
                                                "spark_version": "3.5"})
    assert wrong.value.status_code == 412
    assert ("current value for commit metadata field notebook_url does not match pattern: "
            "my-jupyter.example.com/.* - got: other.example.com/nb") in str(wrong.value)
    ok = {"notebook_url": "my-jupyter.example.com/nb/1", "spark_version": "3.5"}
    main.commit("hooks", metadata=ok)

    # docs/howto/hooks/lua.md: print the event as JSON
    put(main, "_lakefs_actions/dump_all.yaml", (DOCS / "dump_all.yaml").read_bytes())
    commit = main.commit("dump events", metadata=ok).get_commit().id
    status, output = _last_output(client, "docs", "post-commit")
    event = json.loads(output)
    assert status == "completed"
    assert event["event_type"] == "post-commit"
    assert (event["repository_id"], event["branch_id"], event["commit_id"]) == (
        "docs", "main", commit)
    assert event["commit"]["metadata"] == ok
    repo.tag("v1").create("main")
    status, output = _last_output(client, "docs", "post-create-tag")
    assert (status, json.loads(output)["tag_id"]) == ("completed", "v1")

    # docs/howto/catalog_exports.md: branch names must be lower case
    put(main, "_lakefs_actions/validate_branch_name.yaml",
        (DOCS / "validate_branch_name.yaml").read_bytes())
    main.commit("branch names", metadata=ok)
    with pytest.raises(lakefs.exceptions.LakeFSException) as upper:
        repo.branch("Feature-1").create(source_reference="main")
    assert upper.value.status_code == 412
    assert "branches must be lower case, invalid branch ID: Feature-1" in str(upper.value)
    repo.branch("feature-1").create(source_reference="main")
    assert {b.id for b in repo.branches()} == {"main", "feature-1"}

    # lakeFS's examples/hooks/dataset_validator.lua (the Lua Hooks page points there)
    # with the action its header declares: hook.fail's message is the hook's error
    put(main, "_lakefs_actions/validate_dataset_fields.yaml",
        (DOCS / "validate_dataset_fields.yaml").read_bytes())
    put(main, "scripts/dataset_validator.lua",
        (DOCS / "scripts/dataset_validator.lua").read_bytes())
    main.commit("dataset validation", metadata=ok)
    data = repo.branch("data-1").create(source_reference="main")
    put(data, "datasets/sales/part-0.csv", "id\n1\n")
    data.commit("sales")
    for metadata, error in (
            (None, "No dataset metadata found for file: datasets/sales/part-0.csv"),
            ("contains_pii: false\napproval_link: https://approve/1\nrank: 1\n"
             "department: finance\n", "datasets/sales/dataset_metadata.yaml: field "
             "'department' should be one of 'hr, it, other'"),
            ("contains_pii: false\napproval_link: ftp://x\nrank: 1\n",
             "field approval_link should match pattern")):
        if metadata is not None:
            put(data, "datasets/sales/dataset_metadata.yaml", metadata)
            data.commit("metadata")
        with pytest.raises(lakefs.exceptions.LakeFSException) as refused:
            data.merge_into(main)
        assert refused.value.status_code == 412
        assert error in str(refused.value)
        assert "lua error" not in str(refused.value)
    put(data, "datasets/sales/dataset_metadata.yaml",
        "contains_pii: false\napproval_link: https://approve/1\nrank: 1\ndepartment: hr\n")
    data.commit("good metadata")
    data.merge_into(main)
    assert main.object("datasets/sales/part-0.csv").exists()


def _animals(main: lakefs.Branch) -> None:
    """The table and data of docs/integrations/glue_metastore.md (CSV example)."""
    put(main, "_lakefs_tables/animals.yaml", (DOCS / "_lakefs_tables/animals.yaml").read_bytes())
    for part, names in (("type=axolotl/weight=10", "jayson\njohn"),
                        ("type=axolotl/weight=12", "mark"),
                        ("type=turtle/weight=12", "mrgreen"),
                        ("type=bear/weight=30", "winnie")):
        put(main, f"tables/animals/{part}/partition.csv", f"name\n{names}\n")


def _symlinks(bucket: str, prefix: str) -> dict[str, list[str]]:
    s3 = boto3.client("s3")
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    return {o["Key"][len(prefix):]: s3.get_object(Bucket=bucket, Key=o["Key"])["Body"]
            .read().decode().splitlines() for o in listed}


def _expected_symlinks(main: lakefs.Branch) -> dict[str, list[str]]:
    return {f"{part}/symlink.txt": [main.object(f"tables/animals/{part}/partition.csv")
                                    .stat().physical_address]
            for part in ("type=axolotl/weight=10", "type=axolotl/weight=12",
                         "type=bear/weight=30", "type=turtle/weight=12")}


@pytest.fixture
def aws_at_moto(monkeypatch: pytest.MonkeyPatch, moto_endpoint: str) -> None:
    """AWS clients made without an endpoint (as the documented scripts make them) reach
    moto, through the SDKs' standard AWS_ENDPOINT_URL."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    glue = boto3.client("glue")
    try:
        glue.create_database(DatabaseInput={"Name": "my-glue-db"})
    except glue.exceptions.AlreadyExistsException:
        pass


def test_glue_catalog_example_exports_symlinks_and_a_glue_table(
        s3_server: LiveServer, unique_name: str, aws_at_moto: None) -> None:
    # docs/integrations/glue_metastore.md: "Single hook with CSV Table"
    client = sdk_client(s3_server)
    repo = lakefs.Repository("catalogs", client=client).create(
        storage_namespace=f"s3://{unique_name}/catalogs")
    main = repo.branch("main")
    _animals(main)
    main.commit("add table data")
    put(main, "scripts/animals_exporter.lua", (DOCS / "scripts/animals_exporter.lua").read_bytes())
    put(main, "_lakefs_actions/animals_glue.yaml", _filled("animals_glue.yaml"))
    commit = main.commit("trigger first export hook").get_commit().id

    status, output = _last_output(client, "catalogs", "post-commit")
    assert status == "completed", output
    prefix = f"catalogs/_lakefs/exported/main/{commit[:6]}/animals/"
    assert f"S3 writing bucket: {unique_name} key: {prefix}type=bear/weight=30/symlink.txt" \
        in output
    assert _symlinks(unique_name, prefix) == _expected_symlinks(main)

    table: dict[str, Any] = boto3.client("glue").get_table(
        DatabaseName="my-glue-db", Name=f"animals_catalogs_main_{commit[:6]}")["Table"]
    assert table["TableType"] == "EXTERNAL_TABLE"
    assert [(k["Name"], k["Type"]) for k in table["PartitionKeys"]] == [
        ("type", "string"), ("weight", "int")]
    assert table["PartitionKeys"][0]["Comment"] == "axolotl, cat, dog, fish etc"
    sd = table["StorageDescriptor"]
    assert [(c["Name"], c["Type"]) for c in sd["Columns"]] == [("name", "string")]
    assert sd["Location"] == f"s3://{unique_name}/{prefix.rstrip('/')}"
    assert sd["InputFormat"] == "org.apache.hadoop.hive.ql.io.SymlinkTextInputFormat"
    assert sd["SerdeInfo"]["SerializationLibrary"] == "org.apache.hadoop.hive.serde2.OpenCSVSerde"
    assert table["Parameters"] == {"classification": "csv", "skip.header.line.count": "1"}


def test_inline_exporter_hooks_example(
        s3_server: LiveServer, unique_name: str, aws_at_moto: None) -> None:
    # docs/integrations/glue_metastore.md: "Multiple Hooks / Inline script"; its
    # table_input is a placeholder, filled with the page's Parquet table input
    client = sdk_client(s3_server)
    repo = lakefs.Repository("inline", client=client).create(
        storage_namespace=f"s3://{unique_name}/inline")
    main = repo.branch("main")
    _animals(main)
    action = yaml.safe_load(_filled("animal_table_exporter.yaml"))
    action["hooks"][1]["properties"]["args"]["catalog"]["table_input"] = {
        "StorageDescriptor": {
            "InputFormat": "org.apache.hadoop.hive.ql.io.SymlinkTextInputFormat",
            "OutputFormat": "org.apache.hadoop.hive.ql.io.IgnoreKeyTextOutputFormat",
            "SerdeInfo": {"SerializationLibrary":
                          "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"}},
        "Parameters": {"classification": "parquet", "EXTERNAL": "TRUE",
                       "parquet.compression": "SNAPPY"}}
    put(main, "_lakefs_actions/animal_table_exporter.yaml", yaml.safe_dump(action))
    commit = main.commit("export").get_commit().id

    status, output = _last_output(client, "inline", "post-commit")
    assert status == "completed", output
    prefix = f"inline/_lakefs/exported/main/{commit[:6]}/animals/"
    assert _symlinks(unique_name, prefix) == _expected_symlinks(main)
    table = boto3.client("glue").get_table(
        DatabaseName="my-glue-db", Name=f"animals_inline_main_{commit[:6]}")["Table"]
    assert table["Parameters"]["classification"] == "parquet"
    assert table["StorageDescriptor"]["Location"] == f"s3://{unique_name}/{prefix.rstrip('/')}"
