"""The data source reading Azure Blob Storage (Azurite) and Cloud Storage (the GCS
emulator) directly: one server with three stores (``blockstores.stores``), a
repository on each cloud store, read at a commit id by the executors from the store
itself with the ``azure_*`` and ``gs_*`` options."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from pyspark.sql import SparkSession

from lakefs_core.block.azure import AzureBlobStore
from lakefs_core.block.gs import GSBlockStore
from lakefs_testing.azurite import AZURITE_ACCOUNT, AZURITE_KEY, AzuriteServer
from lakefs_testing.gcs import GCSEmulator
from lakefs_testing.live_server import LiveServer, live_server
from tests.spark.conftest import commit, parquet_bytes, rows, upload

pytestmark = pytest.mark.spark

CONTAINER = "spark-clouds"
BUCKET = "spark-clouds"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, azurite_server: AzuriteServer,
           azure_blockstore: AzureBlobStore, gcs_emulator: GCSEmulator,
           gs_blockstore: GSBlockStore) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("spark-clouds")
    azure_blockstore.service.create_container(CONTAINER)
    gs_blockstore.client.create_bucket(BUCKET)
    config = Path(root / "lakefs.yaml")
    config.write_text(yaml.safe_dump({"blockstores": {"stores": [
        {"id": "local", "type": "local", "backward_compatible": True,
         "local": {"path": str(root / "blockstore")}},
        {"id": "blob", "type": "azure", "azure": {
            "storage_account": AZURITE_ACCOUNT, "storage_access_key": AZURITE_KEY,
            "test_endpoint_url": azurite_server.endpoint}},
        {"id": "gcs", "type": "gs", "gs": {"endpoint": gcs_emulator.endpoint,
                                           "anonymous": True}},
    ]}}))
    with live_server(str(root / "data"), {"LAKEFS_CONFIG_FILE": str(config)}) as srv:
        yield srv


def _repository(server: LiveServer, name: str, namespace: str, storage_id: str
                ) -> tuple[str, pa.Table]:
    """A repository on a store with a committed Parquet table; its commit id and data,
    after the branch moved on (so that only the commit id reads the table)."""
    with server.client() as c:
        r = c.post("/repositories", json={"name": name, "storage_namespace": namespace,
                                           "storage_id": storage_id})
        assert r.status_code == 201, r.text
    table = pa.table({"id": list(range(50)), "store": [storage_id] * 50})
    upload(server, name, "main", "t/part-0.parquet", parquet_bytes(table.slice(0, 30)))
    upload(server, name, "main", "t/part-1.parquet", parquet_bytes(table.slice(30)))
    commit_id = commit(server, name, "main", "a table")
    upload(server, name, "main", "t/part-2.parquet", parquet_bytes(table.slice(0, 1)))
    commit(server, name, "main", "more rows")
    return commit_id, table


def _read(spark: SparkSession, server: LiveServer, repository: str, ref: str,
          **storage: str) -> list[tuple[object, ...]]:
    df = spark.read.format("lakefs").options(
        endpoint=server.endpoint, access_key_id=server.access_key_id,
        secret_access_key=server.secret_access_key, repository=repository, ref=ref,
        **storage).load("t")
    return rows(df)


def test_read_a_commit_on_azure_and_on_cloud_storage(
        spark: SparkSession, server: LiveServer, azure_blockstore: AzureBlobStore,
        gcs_emulator: GCSEmulator) -> None:
    azure_ns = f"{azure_blockstore.base}{CONTAINER}/repo"
    on_azure, azure_table = _repository(server, "on-azure", azure_ns, "blob")
    on_gs, gs_table = _repository(server, "on-gs", f"gs://{BUCKET}/repo", "gcs")

    # the emulator's namespace names the endpoint and the account: only the key is given
    got = _read(spark, server, "on-azure", on_azure, azure_storage_access_key=AZURITE_KEY)
    assert got == sorted(zip(azure_table["id"].to_pylist(), azure_table["store"].to_pylist(),
                             strict=True))
    got = _read(spark, server, "on-gs", on_gs, gs_endpoint=gcs_emulator.endpoint,
                gs_anonymous="true")
    assert got == sorted(zip(gs_table["id"].to_pylist(), gs_table["store"].to_pylist(),
                             strict=True))
    # the data came from the stores: the files are there, under each namespace
    assert [b.name for b in azure_blockstore.service.get_container_client(CONTAINER)
            .list_blobs(name_starts_with="repo/data/")]
    # without the store's key the executors cannot read it (nothing via the server)
    with pytest.raises(Exception, match="azure_storage_access_key"):
        _read(spark, server, "on-azure", on_azure)
