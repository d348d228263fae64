"""The data-quality gate example (examples/quality_gate) as lakeFS's pre-merge webhook:
the service runs as its command line says, on loopback, against a live server."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import lakefs
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakefs_testing.live_server import LiveServer
from lakefs_testing.servers import free_port
from lakefs_testing.waiting import wait_for
from tests.api.sdk_support import put, sdk_client

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "quality_gate"


def _parquet(columns: dict[str, Any]) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table(columns), sink)
    return sink.getvalue()


def _answers(url: str) -> bool:
    try:
        return httpx.post(url, json={}).status_code == 400
    except httpx.TransportError:
        return False


@pytest.fixture
def gate(server: LiveServer) -> Iterator[str]:
    """``python -m examples.quality_gate`` on a free loopback port; its URL."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT),
           "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": server.access_key_id,
           "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": server.secret_access_key}
    proc = subprocess.Popen(
        [sys.executable, "-m", "examples.quality_gate", "--port", str(port),
         "--lakefs", server.endpoint, "--schema", str(EXAMPLE / "schema.json"),
         "--table", "tables/plants/"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: proc.poll() is not None or _answers(url), timeout=30,
                 what="the quality gate to listen")
        if proc.poll() is not None:
            raise AssertionError(f"the quality gate exited: {proc.communicate()[1].decode()}")
        yield url
    finally:
        proc.terminate()
        proc.communicate(timeout=10)  # closes its stderr pipe


def test_quality_gate_passes_a_good_merge_and_refuses_a_breaking_one(
        server: LiveServer, gate: str) -> None:
    client = sdk_client(server)
    repo = lakefs.Repository("quality", client=client).create(
        storage_namespace="local://quality")
    main = repo.branch("main")
    action = (EXAMPLE / "action.yaml").read_text().replace("http://127.0.0.1:8090", gate)
    assert action != (EXAMPLE / "action.yaml").read_text()
    put(main, "_lakefs_actions/quality_gate.yaml", action)
    put(main, "tables/plants/p0.parquet", _parquet({"genus": ["rosa"], "height": [1.5]}))
    main.commit("gate and plants")

    good = repo.branch("good").create(source_reference="main")
    put(good, "tables/animals/part-0.parquet",  # the schema file's columns, and one more
        _parquet({"id": pa.array([1], pa.int64()), "name": ["tom"], "age": [3]}))
    put(good, "tables/plants/p1.parquet", _parquet({"genus": ["ficus"], "height": [2.0]}))
    put(good, "docs/notes.parquet", _parquet({"anything": [1]}))  # no watched table
    good.commit("good data")
    merged = good.merge_into(main)
    assert main.get_commit().id == merged
    runs = client.sdk_client.actions_api.list_repository_runs("quality").results
    hooks = client.sdk_client.actions_api.list_run_hooks("quality", runs[0].run_id).results
    output = client.sdk_client.actions_api.get_run_hook_output(
        "quality", runs[0].run_id, hooks[0].hook_run_id)
    text = output.decode() if isinstance(output, bytes) else str(output)
    assert "schema check passed: 2 Parquet files checked" in text

    bad = repo.branch("bad").create(source_reference="main")
    put(bad, "tables/animals/part-1.parquet", _parquet({"id": ["x"], "species": ["cat"]}))
    put(bad, "tables/plants/p2.parquet", _parquet({"genus": ["abies"], "height": [3]}))
    bad.commit("breaking data")
    with pytest.raises(lakefs.exceptions.LakeFSException) as info:
        bad.merge_into(main)
    assert info.value.status_code == 412
    message = str(info.value)
    assert "pre-merge hook aborted" in message
    assert "schema check failed" in message
    assert "tables/animals/part-1.parquet: column 'id' is string, expected int64" in message
    assert "tables/animals/part-1.parquet: column 'name' (string) is missing" in message
    assert "tables/plants/p2.parquet: column 'height' is int64, expected double" in message
    assert main.get_commit().id == merged  # nothing merged

    # the service refuses what is not a pre-merge event, with a clear message
    wrong = httpx.post(f"{gate}/pre-merge", json={
        "event_type": "pre-commit", "repository_id": "quality", "branch_id": "main",
        "source_ref": "main"})
    assert wrong.status_code == 400 and "expected a pre-merge event" in wrong.text
