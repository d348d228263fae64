"""One server over stores of different types (``blockstores.stores``): S3 on moto beside
Azure on Azurite, both used through the lakeFS SDK (and the Azure one through the S3
gateway and by a zero-copy import); and the start-up check that no repository is bound
to a store the configuration no longer has.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import lakefs
import pytest
import yaml
from azure.storage.blob import BlobServiceClient
from lakefs_sdk import StagingMetadata

from lakefs_core.errors import OrphanedRepositoriesError
from lakefs_testing.azurite import AZURITE_ACCOUNT, AZURITE_KEY, AzuriteServer
from lakefs_testing.live_server import LiveServer, live_server
from tests.api.sdk_support import sdk_client
from tests.gateway.conftest import s3_client

MIB = 1 << 20


def _azure_store(azurite_server: AzuriteServer, **extra: Any) -> dict[str, Any]:
    return {"id": "azure-analytics", "description": "Azure Blob storage for analytics data",
            "type": "azure", "azure": {
                "storage_account": AZURITE_ACCOUNT, "storage_access_key": AZURITE_KEY,
                "test_endpoint_url": azurite_server.endpoint, **extra}}


def _s3_store(moto_endpoint: str) -> dict[str, Any]:
    return {"id": "s3-prod", "description": "S3 storage for production data", "type": "s3",
            "backward_compatible": True, "s3": {
                "endpoint": moto_endpoint, "force_path_style": True, "region": "us-east-1",
                "credentials": {"access_key_id": "testing", "secret_access_key": "testing"}}}


def _env(*stores: dict[str, Any]) -> dict[str, str]:
    return {"LAKEFS_BLOCKSTORES_SIGNING_SECRET_KEY": "some-secret",
            "LAKEFS_BLOCKSTORES_STORES": json.dumps(list(stores))}


@pytest.fixture
def azure_container(azurite_server: AzuriteServer, unique_name: str) -> Iterator[str]:
    service = BlobServiceClient(azurite_server.account_url, credential={
        "account_name": AZURITE_ACCOUNT, "account_key": AZURITE_KEY})
    service.create_container(unique_name)
    yield unique_name
    service.close()


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory, moto_endpoint: str,
          azurite_server: AzuriteServer) -> Iterator[LiveServer]:
    env = _env(_s3_store(moto_endpoint), _azure_store(azurite_server))
    with live_server(str(tmp_path_factory.mktemp("mixed")), env) as srv:
        yield srv


def test_s3_and_azure_repositories_on_one_server(mixed: LiveServer, azurite_server: AzuriteServer,
                                                 azure_container: str, unique_name: str) -> None:
    bucket = f"mixed-{unique_name}"
    mixed.services.blockstores.store("s3-prod").client.create_bucket(  # type: ignore[attr-defined]
        Bucket=bucket)
    client = sdk_client(mixed)
    config = client.sdk_client.config_api.get_config()
    assert config.storage_config_list is not None
    assert [(c.blockstore_id, c.blockstore_type, c.pre_sign_support)
            for c in config.storage_config_list] == [("s3-prod", "s3", True),
                                                     ("azure-analytics", "azure", True)]
    azure_namespace = f"{azurite_server.account_url}/{azure_container}/repos/analytics"
    repos = {
        "s3-prod": lakefs.Repository(f"prod-{unique_name}", client=client).create(
            storage_namespace=f"s3://{bucket}/repos/prod", storage_id="s3-prod"),
        "azure-analytics": lakefs.Repository(f"analytics-{unique_name}", client=client).create(
            storage_namespace=azure_namespace, storage_id="azure-analytics"),
    }
    big = os.urandom(9 * MIB)  # more than one 8 MiB block: staged and committed
    for store_id, repo in repos.items():
        assert repo.properties.storage_id == store_id
        main = repo.branch("main")
        # lakefs 0.16 gives every store the default store's storage configuration, so
        # for the Azure repository it would pre-sign a PUT without Azure's
        # x-ms-blob-type header: its writes go through the server (pre-signed Azure
        # writes are checked below, as the SDK makes them for an Azure default store)
        pre_sign = None if store_id == "s3-prod" else False
        main.object("data/small.txt").upload(f"on {store_id}".encode(), pre_sign=pre_sign)
        main.object("data/big.bin").upload(big, pre_sign=False)  # streamed by the server
        main.commit(message=f"load on {store_id}")
        head = repo.ref("main")
        assert head.object("data/small.txt").reader(mode="rb").read() == (
            f"on {store_id}".encode())
        assert head.object("data/big.bin").reader(mode="rb", pre_sign=False).read() == big
        stat = head.object("data/small.txt").stat(pre_sign=True)
        assert httpx.get(stat.physical_address).content == f"on {store_id}".encode()
        assert [o.path for o in head.objects(prefix="data/")] == [
            "data/big.bin", "data/small.txt"]

    # a pre-signed write on the Azure store: a SAS URL, the client's PUT, then the link
    analytics = repos["azure-analytics"]
    staging = client.sdk_client.staging_api
    location = staging.get_physical_address(analytics.id, "main", "data/direct.txt",
                                            presign=True)
    put = httpx.put(location.presigned_url, content=b"written with a SAS URL",
                    headers={"x-ms-blob-type": "BlockBlob"})
    assert put.status_code == 201, put.text
    staging.link_physical_address(analytics.id, "main", "data/direct.txt", StagingMetadata(
        staging=location, size_bytes=len(b"written with a SAS URL"),
        checksum=base64.b64decode(put.headers["content-md5"]).hex()))
    direct = analytics.branch("main").object("data/direct.txt")
    assert direct.reader(mode="rb").read() == b"written with a SAS URL"
    analytics.branch("main").commit(message="direct write")

    # the objects are where each repository's store keeps them
    azure = mixed.services.blockstores.store("azure-analytics")
    assert repos["azure-analytics"].branch("main").object("data/big.bin").stat(
        ).physical_address.startswith(azure_namespace + "/")
    azure_sizes = sorted(o.size for o in azure.list(azure_namespace + "/data/"))
    assert azure_sizes == sorted([len(b"on azure-analytics"), 9 * MIB,
                                  len(b"written with a SAS URL")])
    s3 = mixed.services.blockstores.store("s3-prod")
    assert len(list(s3.list(f"s3://{bucket}/repos/prod/data/"))) == 2

    with mixed.client() as http:
        wrong = http.post("/repositories", json={
            "name": f"wrong-{unique_name}", "storage_id": "azure-analytics",
            "storage_namespace": f"s3://{bucket}/elsewhere"})
        assert wrong.status_code == 400, wrong.text
        assert "azure" in wrong.json()["message"]


# --- start-up: repositories on stores that are no longer configured ---------------------
def _refused_start(data: str, env: dict[str, str]) -> OrphanedRepositoriesError:
    with pytest.raises(OrphanedRepositoriesError) as refused, live_server(data, env):
        pytest.fail("the server started")
    return refused.value


def test_a_removed_store_stops_the_server_from_starting(
        tmp_path: Path, moto_endpoint: str, azurite_server: AzuriteServer,
        azure_container: str, unique_name: str, caplog: pytest.LogCaptureFixture) -> None:
    data = str(tmp_path / "data")
    disk = {"id": "disk", "type": "local", "backward_compatible": True}
    namespace = f"{azurite_server.account_url}/{azure_container}/orphan"
    with live_server(data, _env(disk, _azure_store(azurite_server))) as srv, \
            srv.client() as http:
        for body in ({"name": "on-azure", "storage_namespace": namespace,
                      "storage_id": "azure-analytics"},
                     {"name": "on-disk", "storage_namespace": "local://on-disk"}):
            assert http.post("/repositories", json=body).status_code == 201

    # the azure store removed: refused at start, naming the repository and its store
    caplog.set_level(logging.ERROR, logger="lakefs_core")
    refused = _refused_start(data, _env(disk))
    assert refused.repositories == [("on-azure", "azure-analytics")]
    assert "'on-azure' (storage id 'azure-analytics')" in str(refused)
    assert "on-disk" not in str(refused)
    logged = [r for r in caplog.records if getattr(r, "repository", None) == "on-azure"]
    assert [getattr(r, "storage_id", None) for r in logged] == ["azure-analytics"]

    # no store is backward_compatible: repositories made without a storage id are orphans
    refused = _refused_start(data, _env({**disk, "backward_compatible": False},
                                        _azure_store(azurite_server)))
    assert refused.repositories == [("on-disk", "")]

    # both stores back: the server starts and both repositories are there
    with live_server(data, _env(disk, _azure_store(azurite_server))) as srv, \
            srv.client() as http:
        names = [r["id"] for r in http.get("/repositories").json()["results"]]
        assert names == ["on-azure", "on-disk"]

    # the command line says which repositories, and exits 2 without serving
    config = tmp_path / "lakefs.yaml"
    config.write_text(yaml.safe_dump({"data_dir": data, "blockstore": {"type": "local"}}))
    ran = subprocess.run([sys.executable, "-m", "lakefs_core", "run", "--config", str(config)],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert "error: 1 repositories are on storage not in the configuration" in ran.stderr
    assert "'on-azure' (storage id 'azure-analytics')" in ran.stderr
    assert "listening" not in ran.stdout


def test_s3_gateway_writes_an_azure_repository(mixed: LiveServer, azurite_server: AzuriteServer,
                                               azure_container: str, unique_name: str) -> None:
    repo = f"gw-{unique_name}"
    with mixed.client() as http:
        created = http.post("/repositories", json={
            "name": repo, "storage_id": "azure-analytics",
            "storage_namespace": f"{azurite_server.account_url}/{azure_container}/gw"})
        assert created.status_code == 201, created.text
    s3 = s3_client(mixed.endpoint, mixed.access_key_id, mixed.secret_access_key)
    s3.put_object(Bucket=repo, Key="main/one.txt", Body=b"through the gateway")
    head = os.urandom(5 * MIB)
    upload = s3.create_multipart_upload(Bucket=repo, Key="main/joined.bin")["UploadId"]
    parts = [{"PartNumber": n, "ETag": s3.upload_part(
        Bucket=repo, Key="main/joined.bin", UploadId=upload, PartNumber=n, Body=body)["ETag"]}
        for n, body in ((1, head), (2, b"tail"))]
    s3.complete_multipart_upload(Bucket=repo, Key="main/joined.bin", UploadId=upload,
                                 MultipartUpload={"Parts": parts})
    assert s3.get_object(Bucket=repo, Key="main/one.txt")["Body"].read() == (
        b"through the gateway")
    assert s3.get_object(Bucket=repo, Key="main/joined.bin",
                         Range=f"bytes={5 * MIB - 2}-")["Body"].read() == head[-2:] + b"tail"
    listed = s3.list_objects_v2(Bucket=repo, Prefix="main/")["Contents"]
    assert [o["Key"] for o in listed] == ["main/joined.bin", "main/one.txt"]


def test_import_from_azure(mixed: LiveServer, azurite_server: AzuriteServer,
                           azure_container: str, unique_name: str) -> None:
    azure = mixed.services.blockstores.store("azure-analytics")
    source = f"{azurite_server.account_url}/{azure_container}/raw"
    for i in range(12):
        azure.put(f"{source}/part-{i:02}.csv", f"row {i}".encode())
    azure.put(f"{source}-extra/readme", b"read me")
    repo = lakefs.Repository(f"imp-{unique_name}", client=sdk_client(mixed)).create(
        storage_namespace=f"{azurite_server.account_url}/{azure_container}/repo",
        storage_id="azure-analytics")
    status = (repo.branch("main").import_data(commit_message="from azure")
              .prefix(f"{source}/", "tables/t/")
              .object(f"{source}-extra/readme", "README")
              .run(poll_interval=timedelta(milliseconds=100)))
    assert status.completed and status.ingested_objects == 13 and status.commit is not None
    head = repo.ref(status.commit.id)
    assert [o.path for o in head.objects()] == ["README"] + [
        f"tables/t/part-{i:02}.csv" for i in range(12)]
    assert head.object("tables/t/part-07.csv").reader(mode="rb").read() == b"row 7"
    assert head.object("README").stat().physical_address == f"{source}-extra/readme"
