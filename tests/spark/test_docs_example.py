"""The Spark example of docs/CLIENTS.md runs as written against a live server."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from lakefs_testing.live_server import LiveServer, live_server

pytestmark = pytest.mark.spark

PAGE = Path(__file__).resolve().parents[2] / "docs" / "CLIENTS.md"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(str(tmp_path_factory.mktemp("docs-spark"))) as s:
        yield s


def test_the_spark_example_reads_and_commits(spark: SparkSession, server: LiveServer) -> None:
    with server.client() as c:
        assert c.post("/repositories", json={
            "name": "sales", "storage_namespace": "local://sales"}).status_code == 201
        for name, rows in (("a.csv", "id,amount\n1,10\n2,5\n"), ("b.csv", "id,amount\n1,3\n")):
            assert c.post("/repositories/sales/branches/main/objects",
                          params={"path": f"raw/{name}"}, content=rows).status_code == 201
        assert c.post("/repositories/sales/branches/main/commits",
                      json={"message": "raw"}).status_code == 201
        assert c.post("/repositories/sales/branches",
                      json={"name": "etl", "source": "main"}).status_code == 201
    blocks = [b for _, b in re.findall(r"^```(\w*)\n(.*?)^```", PAGE.read_text(), re.M | re.S)
              if "pyspark" in b]
    assert len(blocks) == 1
    root = server.services.config.blockstore.local.path  # type: ignore[union-attr]
    code = (blocks[0].replace("http://127.0.0.1:8000", server.endpoint)
            .replace("/home/me/.local/share/lakefs-mirror/blockstore", root)
            .replace("AKIAIOSFOLQUICKSTART", server.access_key_id)
            .replace("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", server.secret_access_key))
    namespace: dict[str, Any] = {}
    exec(compile(code, str(PAGE), "exec"), namespace)  # noqa: S102
    assert namespace["raw"].count() == 3
    with server.client() as c:
        head = c.get("/repositories/sales/branches/etl").json()["commit_id"]
        log = c.get(f"/repositories/sales/commits/{head}").json()
        listed = c.get("/repositories/sales/refs/etl/objects/ls",
                       params={"prefix": "tables/counts/"}).json()["results"]
    assert log["message"] == "counts"
    assert listed and all(o["path"].endswith(".parquet") for o in listed)
