"""Options of the data source and jobs, and file packing (no SparkSession needed)."""

from __future__ import annotations

import pytest

from lakefs_core.block.config import BlockstoreType
from lakefs_core.errors import ValidationError
from lakefs_core.spark.formats import FileFormat, FormatOptions
from lakefs_core.spark.listing import DataFile, pack_files
from lakefs_core.spark.options import ServerOptions, StorageOptions


def test_server_options_fall_back_to_lakectl_environment() -> None:
    env = {"LAKECTL_SERVER_ENDPOINT_URL": "http://lakefs:8000/api/v1",
           "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": "AKIA",
           "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": "s3cr3t"}
    from_env = ServerOptions.from_options({}, env)
    assert from_env == ServerOptions("http://lakefs:8000", "AKIA", "s3cr3t")
    assert "s3cr3t" not in repr(from_env)
    # options win over the environment; Spark may hand them over lower-cased
    given = ServerOptions.from_options({"Endpoint": "http://other:1/", "access_key_id": "K",
                                        "secret_access_key": "S"}, env)
    assert given == ServerOptions("http://other:1", "K", "S")
    with pytest.raises(ValidationError, match="endpoint"):
        ServerOptions.from_options({}, {})
    with pytest.raises(ValidationError, match="LAKECTL_CREDENTIALS_ACCESS_KEY_ID"):
        ServerOptions.from_options({"endpoint": "http://x"}, {})


def test_storage_options_build_the_store_of_the_namespace() -> None:
    local = StorageOptions.from_options({"blockstore_root": "/data/block"})
    cfg = local.blockstore_config("local://repo")
    assert cfg.type is BlockstoreType.LOCAL and cfg.local is not None
    assert cfg.local.path == "/data/block"
    s3 = StorageOptions.from_options({"s3_endpoint": "http://minio:9000", "s3_region": "eu-1",
                                      "s3_access_key_id": "k", "s3_secret_access_key": "s"})
    cfg = s3.blockstore_config("s3://bucket/prefix")
    assert cfg.type is BlockstoreType.S3 and cfg.s3 is not None
    assert (cfg.s3.endpoint, cfg.s3.region, cfg.s3.force_path_style) == (
        "http://minio:9000", "eu-1", True)
    assert cfg.s3.credentials is not None and cfg.s3.credentials.access_key_id == "k"
    assert "'s'" not in repr(s3)
    dest = StorageOptions.from_options({"dest_blockstore_root": "/b", "blockstore_root": "/a"},
                                       prefix="dest_")
    assert dest.blockstore_root == "/b"
    with pytest.raises(ValidationError, match="blockstore_root"):
        StorageOptions().blockstore_config("local://repo")
    with pytest.raises(ValidationError, match="unsupported scheme"):
        local.blockstore_config("ftp://host/dir")
    with pytest.raises(ValidationError, match="true or false"):
        StorageOptions.from_options({"s3_force_path_style": "maybe"})


def test_storage_options_for_azure_and_cloud_storage() -> None:
    azure = StorageOptions.from_options({"azure_storage_access_key": "a2V5"})
    # Azure's own form: the account is the host's first label
    cfg = azure.blockstore_config("https://analytics.blob.core.windows.net/box/repo")
    assert cfg.type is BlockstoreType.AZURE and cfg.azure is not None
    assert (cfg.azure.storage_account, cfg.azure.test_endpoint_url) == ("analytics", None)
    assert cfg.azure.storage_access_key == "a2V5" and "a2V5" not in repr(azure)
    # an emulator's path-style form: the endpoint, then the account
    cfg = azure.blockstore_config("http://127.0.0.1:10000/devstoreaccount1/box/repo")
    assert cfg.azure is not None
    assert (cfg.azure.storage_account, cfg.azure.test_endpoint_url) == (
        "devstoreaccount1", "http://127.0.0.1:10000")
    # two accounts are two stores; two containers of one account are one
    assert azure.store_key("https://a.blob.core.windows.net/x/1") == azure.store_key(
        "https://a.blob.core.windows.net/y/2") != azure.store_key(
        "https://b.blob.core.windows.net/x/1")
    china = StorageOptions.from_options({"azure_storage_access_key": "k",
                                         "azure_domain": "blob.core.chinacloudapi.cn"})
    cfg = china.blockstore_config("https://acct.blob.core.chinacloudapi.cn/box")
    assert cfg.azure is not None and cfg.azure.storage_account == "acct"
    assert cfg.azure.test_endpoint_url is None
    with pytest.raises(ValidationError, match="azure_storage_access_key"):
        StorageOptions().blockstore_config("https://acct.blob.core.windows.net/box")
    gs = StorageOptions.from_options({"gs_endpoint": "http://127.0.0.1:9023",
                                      "gs_anonymous": "true"})
    cfg = gs.blockstore_config("gs://bucket/repo")
    assert cfg.type is BlockstoreType.GS and cfg.gs is not None
    assert (cfg.gs.endpoint, cfg.gs.anonymous) == ("http://127.0.0.1:9023", True)


def test_format_options() -> None:
    assert FormatOptions.from_options({}) == FormatOptions()
    csv = FormatOptions.from_options({"format": "CSV", "header": "false", "sep": ";"})
    assert (csv.format, csv.header, csv.delimiter) == (FileFormat.CSV, False, ";")
    with pytest.raises(ValidationError, match="format"):
        FormatOptions.from_options({"format": "orc"})
    with pytest.raises(ValidationError, match="one character"):
        FormatOptions.from_options({"delimiter": "::"})
    with pytest.raises(ValidationError, match="at least 1"):
        FormatOptions.from_options({"batch_rows": "0"})


def test_files_pack_in_order_into_partitions() -> None:
    files = [DataFile(f"p{i}", f"local://r/data/{i}", size, "") for i, size in
             enumerate([10, 10, 10, 50, 5, 5])]
    groups = pack_files(files, 25)
    assert [[f.path for f in g] for g in groups] == [["p0", "p1"], ["p2"], ["p3"], ["p4", "p5"]]
    assert pack_files([], 25) == []
