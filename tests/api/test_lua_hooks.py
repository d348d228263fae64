"""Lua hooks on a live server: gates, bounds, and the symlink exporter example."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import boto3
import lakefs
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from lakefs_testing.live_server import LiveServer, live_server
from tests.api.sdk_support import put, sdk_client

EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "actions"


def test_lua_gate_error_timeout_and_engine_calls(tmp_path: Path) -> None:
    env = {"LAKEFS_ACTIONS_LUA_TIMEOUT": "300ms", "LAKEFS_ACTIONS_LUA_NET_HTTP_ENABLED": "true"}
    with live_server(str(tmp_path / "lua"), env) as server:
        client = sdk_client(server)
        actions = client.sdk_client.actions_api
        repo = lakefs.Repository("lua-acts", client=client).create(
            storage_namespace="local://lua-acts")
        main = repo.branch("main")
        put(main, "_lakefs_actions/gate.yaml", """name: needs a job name
on:
  pre-commit:
    branches: [main]
hooks:
  - id: check_metadata
    type: lua
    properties:
      args:
        required: [job_name]
        health: HEALTH
      script: |
        local lakefs = require("lakefs")
        print("health:", require("net/http").request(args.health))
        local code, diff = lakefs.diff_branch(action.repository_id, action.branch_id)
        print("changes:", code, #diff.results)
        local code2, body = lakefs.get_object(action.repository_id, action.branch_id,
                                              "_lakefs_actions/gate.yaml")
        print("gate file:", code2, #body > 0)
        local denied = lakefs.list_objects("other-repo", "main")
        print("other repository:", denied)
        for _, k in ipairs(args.required) do
          if action.commit.metadata[k] == nil then
            error("missing mandatory metadata field: " .. k)
          end
        end
""".replace("HEALTH", f"{server.endpoint}/api/v1/healthcheck"))
        head = main.get_commit().id
        with pytest.raises(lakefs.exceptions.LakeFSException) as info:
            main.commit("no job name")
        assert info.value.status_code == 412
        assert "missing mandatory metadata field: job_name" in str(info.value)
        assert main.get_commit().id == head
        run = actions.list_repository_runs("lua-acts").results[0]
        hook = actions.list_run_hooks("lua-acts", run.run_id).results[0]
        output = actions.get_run_hook_output("lua-acts", run.run_id, hook.hook_run_id)
        text = output.decode() if isinstance(output, bytes) else str(output)
        assert "health:\t204" in text  # net/http, enabled by the config
        assert "changes:\t200\t1" in text
        assert "gate file:\t200\ttrue" in text
        assert "other repository:\t403" in text
        assert "missing mandatory metadata field" in text
        main.commit("with a job name", metadata={"job_name": "etl"})

        # lakefs.update_object_user_metadata replaces an object's user metadata
        put(main, "_lakefs_actions/tagged.yaml", """name: mark on tag
on:
  post-create-tag:
hooks:
  - id: mark
    type: lua
    properties:
      script: |
        local lakefs = require("lakefs")
        local repo, path = action.repository_id, "_lakefs_actions/tagged.yaml"
        print("set:", lakefs.update_object_user_metadata(repo, "main", path,
                                                         {tagged = action.tag_id}))
        print("missing:", lakefs.update_object_user_metadata(repo, "main", "nope", {}))
        print("other:", lakefs.update_object_user_metadata("other", "main", "x", {}))
""")
        main.commit("tag hook", metadata={"job_name": "etl"})
        repo.tag("v1").create("main")
        assert main.object("_lakefs_actions/tagged.yaml").stat().metadata == {"tagged": "v1"}
        run = actions.list_repository_runs("lua-acts").results[0]
        hook = actions.list_run_hooks("lua-acts", run.run_id).results[0]
        out = actions.get_run_hook_output("lua-acts", run.run_id, hook.hook_run_id)
        out = out.decode() if isinstance(out, bytes) else str(out)
        assert (run.event_type, run.status) == ("post-create-tag", "completed"), out
        assert "set:\t201\n" in out and "missing:\t404\t" in out and "other:\t403\t" in out

        # a script that never ends fails its hook after actions.lua.timeout
        put(main, "_lakefs_actions/gate.yaml", """name: spins
on:
  pre-create-branch:
hooks:
  - id: spin
    type: lua
    properties:
      script: |
        while true do pcall(function() while true do end end) end
""")
        main.commit("spin gate", metadata={"job_name": "etl"})
        with pytest.raises(lakefs.exceptions.LakeFSException) as spin:
            repo.branch("never").create(source_reference="main")
        assert spin.value.status_code == 412
        assert "lua hook timed out after 0.3s" in str(spin.value)
        assert "never" not in [b.id for b in repo.branches()]


def test_symlink_exporter_writes_hive_symlinks_after_commit_and_merge(
        s3_server: LiveServer, moto_endpoint: str, unique_name: str) -> None:
    client = sdk_client(s3_server)
    repo = lakefs.Repository("exports", client=client).create(
        storage_namespace=f"s3://{unique_name}/exports")
    main = repo.branch("main")
    action = yaml.safe_load((EXAMPLES / "symlink_export.yaml").read_text())
    action["hooks"][0]["properties"]["args"]["aws"] = {
        "access_key_id": "testing", "secret_access_key": "testing",
        "region": "us-east-1", "endpoint": moto_endpoint}
    put(main, "_lakefs_actions/export.yaml", yaml.safe_dump(action))
    put(main, "scripts/symlink_exporter.lua", (EXAMPLES / "symlink_exporter.lua").read_bytes())
    put(main, "_lakefs_tables/animals.yaml",
        "name: animals\ntype: hive\npath: tables/animals\npartition_columns: [type]\n")
    for path in ("type=cat/part-0.parquet", "type=cat/part-1.parquet",
                 "type=dog/part-0.parquet", "_SUCCESS"):
        put(main, f"tables/animals/{path}", b"data of " + path.encode())
    commit = main.commit("animals").get_commit().id

    run = client.sdk_client.actions_api.list_repository_runs("exports").results[0]
    assert (run.event_type, run.status, run.commit_id) == ("post-commit", "completed", commit)
    s3 = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
    prefix = f"exports/_lakefs/exported/main/{commit[:6]}/animals/"
    listed = s3.list_objects_v2(Bucket=unique_name, Prefix=prefix)
    keys = sorted(o["Key"][len(prefix):] for o in listed.get("Contents", []))
    assert keys == ["type=cat/symlink.txt", "type=dog/symlink.txt"]
    cats = s3.get_object(Bucket=unique_name, Key=prefix + "type=cat/symlink.txt")
    addresses = cats["Body"].read().decode().splitlines()
    expected = [main.object(f"tables/animals/type=cat/part-{i}.parquet").stat()
                .physical_address for i in range(2)]
    assert addresses == expected
    assert all(a.startswith(f"s3://{unique_name}/exports/") for a in addresses)

    # a merge into main exports the merged version (post-merge), new partition included
    feature = repo.branch("more-animals").create(source_reference="main")
    put(feature, "tables/animals/type=bird/part-0.parquet", b"data of a bird")
    feature.commit("birds")  # not on main: no export
    merge = feature.merge_into(main)
    runs = client.sdk_client.actions_api.list_repository_runs("exports").results
    assert [(r.event_type, r.status, r.commit_id) for r in runs] == [
        ("post-merge", "completed", merge), ("post-commit", "completed", commit)]
    prefix = f"exports/_lakefs/exported/main/{merge[:6]}/animals/"
    listed = s3.list_objects_v2(Bucket=unique_name, Prefix=prefix)
    keys = sorted(o["Key"][len(prefix):] for o in listed.get("Contents", []))
    assert keys == ["type=bird/symlink.txt", "type=cat/symlink.txt", "type=dog/symlink.txt"]
    birds = s3.get_object(Bucket=unique_name, Key=prefix + "type=bird/symlink.txt")
    assert birds["Body"].read().decode().splitlines() == [
        main.object("tables/animals/type=bird/part-0.parquet").stat().physical_address]


def _parquet(columns: dict[str, list[Any]]) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table(columns), sink)
    return sink.getvalue()


def test_schema_gate_example_refuses_merges_that_break_the_table(server: LiveServer) -> None:
    client = sdk_client(server)
    repo = lakefs.Repository("gated", client=client).create(storage_namespace="local://gated")
    main = repo.branch("main")
    put(main, "_lakefs_actions/schema_gate.yaml",
        (EXAMPLES / "pre_merge_schema_gate.yaml").read_bytes())
    main.commit("gate")

    bad = repo.branch("bad").create(source_reference="main")
    put(bad, "tables/animals/part-0.parquet", _parquet({"id": [1], "species": ["cat"]}))
    bad.commit("no name column, no _SUCCESS")
    head = main.get_commit().id
    with pytest.raises(lakefs.exceptions.LakeFSException) as info:
        bad.merge_into(main)
    assert info.value.status_code == 412
    assert "missing tables/animals/_SUCCESS" in str(info.value)
    assert "tables/animals/part-0.parquet has no column name" in str(info.value)
    assert main.get_commit().id == head

    put(bad, "tables/animals/_SUCCESS", b"")
    put(bad, "tables/animals/part-0.parquet",
        _parquet({"id": [1], "name": ["tom"], "species": ["cat"]}))
    bad.commit("fixed")
    merged = bad.merge_into(main)
    assert main.get_commit().id == merged
    other = repo.branch("other").create(source_reference="main")
    put(other, "docs/readme.md", b"not the table")
    other.commit("docs")
    other.merge_into(main)  # does not touch the table: passes
