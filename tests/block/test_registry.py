"""Blockstore configuration, the multi-store registry, and namespace validation."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from lakefs_core.block import (
    BlockstoreConfig,
    BlockStores,
    BlockstoresConfig,
    LocalBlockStore,
    S3BlockStore,
    StoreInfo,
    validate_namespace,
)
from lakefs_core.errors import StorageError, StorageNotFoundError, ValidationError

ROOT = Path(__file__).resolve().parents[2]


def multi(tmp_path: Path, moto_endpoint: str, *, compatible: str | None = "disk") -> dict:
    """A ``blockstores`` section shaped like the documented examples: a disk and an S3 store."""
    text = f"""
    blockstores:
      signing:
        secret_key: "some-secret"
      stores:
        - id: "disk"
          description: "Local disk for scratch data"
          type: "local"
          local:
            path: "{tmp_path / 'disk'}"
        - id: "moto-prod"
          description: "S3-compatible storage for production data"
          type: "s3"
          s3:
            force_path_style: true
            endpoint: '{moto_endpoint}'
            discover_bucket_region: false
            credentials:
              access_key_id: "testing"
              secret_access_key: "testing"
    """
    config: dict = yaml.safe_load(textwrap.dedent(text))
    for store in config["blockstores"]["stores"]:
        if store["id"] == compatible:
            store["backward_compatible"] = True
    return config


# --- single store ---------------------------------------------------------------------
def test_single_local_store(tmp_path: Path) -> None:
    stores = BlockStores.from_config({"type": "local", "local": {"path": str(tmp_path / "b")}})
    assert not stores.multi
    assert stores.ids() == [""]
    assert stores.describe() == [StoreInfo(id="", type="local")]
    store = stores.default()
    assert isinstance(store, LocalBlockStore)
    assert store.root == str(tmp_path / "b")
    assert stores.for_storage_id("") is store
    with pytest.raises(StorageNotFoundError, match="'other' is not configured"):
        stores.for_storage_id("other")


def test_single_s3_store_works(moto_endpoint: str, unique_name: str) -> None:
    section = {"type": "s3", "s3": {"endpoint": moto_endpoint, "force_path_style": True,
                                    "credentials": {"access_key_id": "testing",
                                                    "secret_access_key": "testing"}}}
    stores = BlockStores.from_server_config({"blockstore": section})
    store = stores.default()
    assert isinstance(store, S3BlockStore)
    store.client.create_bucket(Bucket=unique_name)
    store.put(f"s3://{unique_name}/k", b"v")
    assert stores.for_address(f"s3://{unique_name}/k").get(f"s3://{unique_name}/k") == b"v"
    stores.close()


def test_type_section_may_be_omitted() -> None:
    config = BlockstoreConfig.model_validate({"type": "s3"})
    assert config.s3 is not None
    assert config.s3.region == "us-east-1"
    assert config.s3.max_pool_connections == 50


def test_wrapping_an_existing_store(tmp_path: Path) -> None:
    store = LocalBlockStore(str(tmp_path))
    stores = BlockStores.single(store)
    assert stores.for_storage_id("") is store
    assert list(stores) == [store]


# --- several stores --------------------------------------------------------------------
def test_multi_store_config(tmp_path: Path, moto_endpoint: str) -> None:
    stores = BlockStores.from_server_config(multi(tmp_path, moto_endpoint))
    assert stores.multi
    assert stores.ids() == ["disk", "moto-prod"]
    assert len(stores) == 2
    assert stores.describe() == [
        StoreInfo(id="disk", type="local", description="Local disk for scratch data",
                  backward_compatible=True),
        StoreInfo(id="moto-prod", type="s3",
                  description="S3-compatible storage for production data"),
    ]
    disk = stores.for_storage_id("disk")
    prod = stores.for_storage_id("moto-prod")
    assert isinstance(disk, LocalBlockStore)
    assert isinstance(prod, S3BlockStore)
    assert prod.config.endpoint == moto_endpoint
    assert prod.config.force_path_style
    assert not prod.config.discover_bucket_region
    # "" means the backward-compatible store
    assert stores.default() is disk
    assert stores.for_storage_id("") is disk
    with pytest.raises(StorageNotFoundError, match="'nope' is not configured.*'disk'"):
        stores.for_storage_id("nope")
    stores.close()


def test_without_backward_compatible_a_storage_id_is_required(
    tmp_path: Path, moto_endpoint: str
) -> None:
    stores = BlockStores.from_server_config(multi(tmp_path, moto_endpoint, compatible=None))
    with pytest.raises(StorageNotFoundError, match="backward_compatible"):
        stores.default()
    with pytest.raises(StorageNotFoundError):
        stores.for_storage_id("")
    assert isinstance(stores.for_storage_id("disk"), LocalBlockStore)
    stores.close()


def test_at_most_one_backward_compatible_store(tmp_path: Path, moto_endpoint: str) -> None:
    config = multi(tmp_path, moto_endpoint)
    for store in config["blockstores"]["stores"]:
        store["backward_compatible"] = True
    with pytest.raises(ValidationError, match="at most one store may be backward_compatible"):
        BlockStores.from_server_config(config)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda stores: stores[1].update(id="disk"), "duplicate store id 'disk'"),
        (lambda stores: stores[1].update(id=""), "non-empty id"),
        (lambda stores: stores[1].update(id="   "), "non-empty id"),
        (lambda stores: stores[1].pop("id"), r"stores\.1\.id: Field required"),
        (lambda stores: stores.clear(), "at least one store"),
        (lambda stores: stores[0].update(type="ipfs"), r"stores\.0\.type"),
    ],
)
def test_invalid_multi_store_sections(
    tmp_path: Path, moto_endpoint: str, mutate: object, message: str
) -> None:
    config = multi(tmp_path, moto_endpoint)
    mutate(config["blockstores"]["stores"])  # type: ignore[operator]
    with pytest.raises(ValidationError, match=message):
        BlockStores.from_server_config(config)


def test_blockstore_and_blockstores_are_exclusive(tmp_path: Path, moto_endpoint: str) -> None:
    config = multi(tmp_path, moto_endpoint)
    config["blockstore"] = {"type": "local", "local": {"path": str(tmp_path)}}
    with pytest.raises(ValidationError, match="mutually exclusive"):
        BlockStores.from_server_config(config)
    with pytest.raises(ValidationError, match="no blockstore configured"):
        BlockStores.from_server_config({})


def test_invalid_single_section() -> None:
    with pytest.raises(ValidationError, match="invalid blockstore configuration: type"):
        BlockStores.from_config({"type": "hdfs"})
    with pytest.raises(ValidationError, match="max_pool_connections"):
        BlockStores.from_config({"type": "s3", "s3": {"max_pool_connections": 0}})


def test_typed_sections_are_accepted(tmp_path: Path, moto_endpoint: str) -> None:
    section = BlockstoresConfig.model_validate(multi(tmp_path, moto_endpoint)["blockstores"])
    assert section.signing is not None and section.signing.secret_key == "some-secret"
    stores = BlockStores.from_config(blockstores=section)
    assert stores.ids() == ["disk", "moto-prod"]
    stores.close()


def test_unimplemented_lakefs_options_are_ignored(tmp_path: Path) -> None:
    stores = BlockStores.from_config({
        "type": "local",
        "local": {"path": str(tmp_path), "import_enabled": True, "some_future_option": 1},
    })
    assert isinstance(stores.default(), LocalBlockStore)


# --- reading absolute addresses ---------------------------------------------------------
def test_for_address_picks_a_store_by_scheme(tmp_path: Path, moto_endpoint: str) -> None:
    config = multi(tmp_path, moto_endpoint)
    config["blockstores"]["stores"].append(
        {"id": "disk2", "type": "local", "local": {"path": str(tmp_path / "disk2")}}
    )
    stores = BlockStores.from_server_config(config)
    disk, disk2 = stores.for_storage_id("disk"), stores.for_storage_id("disk2")
    assert stores.for_address("s3://bucket/key") is stores.for_storage_id("moto-prod")
    assert stores.for_address("local://ns/key") is disk  # the default store first
    assert stores.for_address("local://ns/key", storage_id="disk2") is disk2
    # a hint whose scheme does not match falls back to the scheme's store
    assert stores.for_address("local://ns/key", storage_id="moto-prod") is disk
    with pytest.raises(StorageNotFoundError, match="gs://"):
        stores.for_address("gs://bucket/key")
    with pytest.raises(ValidationError):
        stores.for_address("no-scheme/key")
    stores.close()


# --- lazy driver loading ------------------------------------------------------------------
def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_local_only_server_never_imports_boto3(tmp_path: Path) -> None:
    section = {"type": "local", "local": {"path": str(tmp_path)}}
    result = run_python(f"""
        import sys
        from lakefs_core.block import BlockStores
        stores = BlockStores.from_config({section!r})
        stores.default().put("local://ns/k", b"v")
        print(sorted(m for m in sys.modules if m.startswith(("boto", "lakefs_core.block.s3"))))
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_s3_driver_is_imported_when_chosen() -> None:
    result = run_python("""
        import sys
        from lakefs_core.block import BlockStores
        BlockStores.from_config({"type": "s3"})
        print("lakefs_core.block.s3" in sys.modules, "boto3" in sys.modules)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True True"


def test_missing_driver_says_what_to_install() -> None:
    result = run_python("""
        import sys
        sys.modules["boto3"] = None  # as if boto3 were not installed
        from lakefs_core.block import BlockStores
        from lakefs_core.errors import StorageError
        try:
            BlockStores.from_config({"type": "s3"})
        except StorageError as e:
            print(e)
    """)
    assert result.returncode == 0, result.stderr
    assert "install boto3: pip install boto3" in result.stdout


def test_missing_driver_error_type() -> None:
    """The same failure, in process, through the driver registry entry itself."""
    from lakefs_core.block import BlockstoreDriver

    driver = BlockstoreDriver("lakefs_core.block.no_such_adapter", "from_config", "the extra")
    with pytest.raises(StorageError, match="install the extra"):
        driver.load()


# --- storage namespaces ---------------------------------------------------------------------
GOOD = {
    "local": ["local://ns", "local://ns/", "local://ns/deep/prefix", "local://my-repo_1.x"],
    "s3": ["s3://bucket", "s3://bucket/", "s3://my.bucket-1/repos/example",
           "s3://abc/prefix/with-ü/"],
}
BAD = {
    "local": ["local://", "local:///abs", "local://ns//x", "local://ns/../up", "local://./x",
              "s3://bucket/x", "ns/prefix", "local://ns\\x", "local://ns/\nx", " local://ns"],
    "s3": ["s3://", "s3:///prefix", "s3://ab", "s3://Bucket/x", "s3://bucket_1/x",
           "s3://-bucket", "s3://bucket-", "s3://a..b/x", "s3://192.168.1.10/x",
           "s3://" + "b" * 64, "s3://bucket//x", "s3://bucket/./x", "local://ns",
           "https://bucket.s3.amazonaws.com/x"],
}


@pytest.fixture
def stores_by_type(tmp_path: Path, s3_blockstore: S3BlockStore) -> dict[str, object]:
    return {"local": LocalBlockStore(str(tmp_path)), "s3": s3_blockstore}


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_validate_namespace(kind: str, stores_by_type: dict) -> None:
    store = stores_by_type[kind]
    for namespace in GOOD[kind]:
        assert validate_namespace(store, namespace) == namespace
    for namespace in BAD[kind]:
        with pytest.raises(ValidationError, match="storage namespace"):
            validate_namespace(store, namespace)
