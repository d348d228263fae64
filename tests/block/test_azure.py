"""What only the Azure blockstore does: blob URLs as addresses, its configuration, the
Content-MD5 etag, errors of a missing container, and Azurite found or clearly missing.

The shared behaviour (put/get/range/list/copy/streaming) is in test_blockstore.py.
"""

from __future__ import annotations

import hashlib
import os

import pytest

from lakefs_core.block import BlockStores, validate_namespace
from lakefs_core.block.azure import AzureBlobStore
from lakefs_core.block.config import AzureConfig, BlockstoreConfig
from lakefs_core.errors import ObjectNotFoundError, StorageError, ValidationError
from lakefs_testing import azurite
from lakefs_testing.azurite import AZURITE_ACCOUNT, AZURITE_KEY, AzuriteServer


@pytest.fixture
def container(azure_blockstore: AzureBlobStore, unique_name: str) -> str:
    azure_blockstore.service.create_container(unique_name)
    return unique_name


def test_addresses_are_blob_urls_of_the_account(azure_blockstore: AzureBlobStore,
                                                azurite_server: AzuriteServer) -> None:
    assert azure_blockstore.base == f"{azurite_server.endpoint}/{AZURITE_ACCOUNT}/"
    assert azure_blockstore.scheme == "http"
    assert azure_blockstore.split(f"{azure_blockstore.base}cont/a/b c.txt") == (
        "cont", "a/b c.txt")
    for bad in (f"{azurite_server.endpoint}/otheraccount/cont/key",
                f"{azure_blockstore.base}cont", f"{azure_blockstore.base}/key",
                "https://devstoreaccount1.blob.core.windows.net/cont/key"):
        with pytest.raises(ValidationError):
            azure_blockstore.split(bad)


def test_public_cloud_addresses() -> None:
    store = AzureBlobStore(AzureConfig(storage_account="analytics", storage_access_key="a2V5"))
    try:
        assert (store.scheme, store.base) == ("https", "https://analytics.blob.core.windows.net/")
        namespace = "https://analytics.blob.core.windows.net/data-lake/repos/one"
        assert validate_namespace(store, namespace) == namespace
        for bad in ("https://other.blob.core.windows.net/data-lake/x",
                    "https://analytics.blob.core.windows.net/Upper/x",
                    "https://analytics.blob.core.windows.net/a--b/x",
                    "https://analytics.blob.core.windows.net/ab/x",
                    "s3://bucket/x"):
            with pytest.raises(ValidationError):
                validate_namespace(store, bad)
    finally:
        store.close()
    china = AzureBlobStore(AzureConfig(storage_account="analytics", storage_access_key="a2V5",
                                       domain="blob.core.chinacloudapi.cn"))
    assert china.base == "https://analytics.blob.core.chinacloudapi.cn/"
    china.close()


def test_configuration_as_lakefs_names_it() -> None:
    config = BlockstoreConfig.model_validate({"type": "azure", "azure": {
        "storage_account": "analytics", "storage_access_key": "a2V5",
        "auth_method": "access-key", "pre_signed_expiry": "1h", "try_timeout": "30s",
        "disable_pre_signed_ui": False, "china_cloud": False}})
    assert config.azure is not None
    assert config.azure.pre_signed_expiry.total_seconds() == 3600
    assert config.azure.try_timeout.total_seconds() == 30
    stores = BlockStores.from_config(blockstore=config)
    try:
        assert stores.describe()[0].type == "azure"
        assert stores.default().presign_support().pre_sign_support_ui
    finally:
        stores.close()
    for bad in ({"storage_account": "Not_Valid"}, {"pre_signed_expiry": "8d"},
                {"test_endpoint_url": "ftp://host"}, {"try_timeout": "0s"},
                {"upload_block_size": 1024}):
        with pytest.raises(ValidationError):
            BlockStores.from_config(blockstore={"type": "azure", "azure": bad})
    with pytest.raises(StorageError, match="storage_account is required"):
        BlockStores.from_config(blockstore={"type": "azure"})
    with pytest.raises(StorageError, match="storage_access_key is required"):
        BlockStores.from_config(blockstore={"type": "azure",
                                            "azure": {"storage_account": "analytics"}})


def test_etag_is_the_content_md5_unless_the_blob_has_none(azure_blockstore: AzureBlobStore,
                                                          container: str) -> None:
    address = f"{azure_blockstore.base}{container}/written-by-others"
    blob = azure_blockstore.service.get_blob_client(container, "written-by-others")
    blob.upload_blob(iter([b"no ", b"md5"]))  # staged and committed: no Content-MD5
    etag = blob.get_blob_properties().etag.strip('"')
    assert azure_blockstore.stat(address).etag == etag
    assert [o.etag for o in azure_blockstore.list(address)] == [etag]


def test_missing_container(azure_blockstore: AzureBlobStore) -> None:
    address = f"{azure_blockstore.base}no-such-container/key"
    with pytest.raises(ObjectNotFoundError):
        azure_blockstore.get(address)
    with pytest.raises(ObjectNotFoundError):
        azure_blockstore.stat(address)
    assert not azure_blockstore.exists(address)
    azure_blockstore.delete(address)  # nothing to delete
    with pytest.raises(StorageError, match="ContainerNotFound"):
        azure_blockstore.put(address, b"x")
    with pytest.raises(StorageError, match="ContainerNotFound"):
        list(azure_blockstore.list(address))


def test_copy_into_a_missing_container_is_a_storage_error(azure_blockstore: AzureBlobStore,
                                                          container: str) -> None:
    src = f"{azure_blockstore.base}{container}/src"
    azure_blockstore.put(src, b"data")
    with pytest.raises(StorageError) as raised:
        azure_blockstore.copy(src, f"{azure_blockstore.base}no-such-container/dst")
    assert not isinstance(raised.value, ObjectNotFoundError)


def test_unreachable_endpoint_is_a_storage_error() -> None:
    from lakefs_testing.servers import free_port

    store = AzureBlobStore(AzureConfig(
        storage_account=AZURITE_ACCOUNT, storage_access_key=AZURITE_KEY, max_retries=0,
        test_endpoint_url=f"http://127.0.0.1:{free_port()}"))
    try:
        with pytest.raises(StorageError):
            store.get(f"{store.base}cont/key")
        with pytest.raises(StorageError):
            store.put(f"{store.base}cont/key", b"x")
    finally:
        store.close()


def test_missing_azurite_fails_with_how_to_install(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: object) -> None:
    monkeypatch.setenv("AZURITE_BLOB", "")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(azurite, "_INSTALLED", azurite.Path(str(tmp_path), "azurite-blob"))
    with pytest.raises(RuntimeError, match="Azurite .* not found.*make azurite"):
        azurite.start_azurite()


def test_objects_larger_than_a_block_are_staged_with_their_md5(
        azurite_server: AzuriteServer, unique_name: str) -> None:
    store = AzureBlobStore(AzureConfig(
        storage_account=AZURITE_ACCOUNT, storage_access_key=AZURITE_KEY,
        test_endpoint_url=azurite_server.endpoint, upload_block_size=1 << 20))
    try:
        store.service.create_container(unique_name)
        payload = os.urandom((5 << 20) // 2)
        for name, data in (("bytes", payload), ("chunks", [payload[:7], payload[7:]])):
            address = f"{store.base}{unique_name}/{name}"
            written = store.put(address, data)
            blocks = store.service.get_blob_client(unique_name, name).get_block_list()[0]
            assert [b.size for b in blocks] == [1 << 20, 1 << 20, (1 << 19)]
            assert written.etag == store.stat(address).etag == hashlib.md5(payload).hexdigest()
            assert store.get(address) == payload
    finally:
        store.close()
