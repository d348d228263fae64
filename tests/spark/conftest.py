"""One local SparkSession for the Spark tests, and helpers to point the data source at a server.

Workers are Python processes started by the JVM: they need ``PYSPARK_PYTHON`` (this
interpreter, with the project installed) and ``SPARK_LOCAL_IP`` (loopback only).
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakefs_testing.live_server import LiveServer

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_SPARK_DIR = Path(__file__).parent
#: workers run this interpreter (with the project installed) and talk over loopback only
_SPARK_ENV = {"PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
#: pyspark warns at import that it has not been certified with pandas 3 yet
_PYSPARK_WARNINGS = (
    "ignore:PySpark does not yet fully support pandas:FutureWarning",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _SPARK_DIR in Path(str(item.fspath)).parents:
            for spec in _PYSPARK_WARNINGS:
                item.add_marker(pytest.mark.filterwarnings(spec))


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """A local[2] SparkSession with the ``lakefs`` format registered (stopped at the end)."""
    from pyspark.sql import SparkSession

    from lakefs_core.spark import register

    saved = {k: os.environ.get(k) for k in _SPARK_ENV}
    os.environ.update(_SPARK_ENV)
    warehouse = tmp_path_factory.mktemp("spark")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("lakefs-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "1g")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.warehouse.dir", str(warehouse / "warehouse"))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def lakefs_options(server: LiveServer, repository: str, **extra: str) -> dict[str, str]:
    """Options of the ``lakefs`` format for a test server with a local blockstore."""
    blockstore = server.services.config.blockstore
    assert blockstore is not None and blockstore.local is not None
    return {
        "endpoint": server.endpoint,
        "access_key_id": server.access_key_id,
        "secret_access_key": server.secret_access_key,
        "repository": repository,
        "blockstore_root": blockstore.local.path,
        **extra,
    }


def parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def create_repo(server: LiveServer, name: str, namespace: str | None = None) -> None:
    with server.client() as c:
        r = c.post("/repositories", json={"name": name,
                                           "storage_namespace": namespace or f"local://{name}"})
        assert r.status_code == 201, r.text


def upload(server: LiveServer, repo: str, branch: str, path: str, data: bytes) -> None:
    with server.client() as c:
        r = c.post(f"/repositories/{repo}/branches/{branch}/objects", params={"path": path},
                   content=data)
        assert r.status_code == 201, r.text


def commit(server: LiveServer, repo: str, branch: str, message: str = "commit") -> str:
    with server.client() as c:
        r = c.post(f"/repositories/{repo}/branches/{branch}/commits", json={"message": message})
        assert r.status_code == 201, r.text
        return str(r.json()["id"])


def rows(df: Any) -> list[tuple[Any, ...]]:
    """A DataFrame's rows as sorted tuples."""
    return sorted(tuple(r) for r in df.collect())
