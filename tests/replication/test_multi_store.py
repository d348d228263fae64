"""Mirrors between regions with several stores each (``blockstores.stores``, seed 004).

East keeps its local store as the default and a second store on moto's S3; west keeps
its local store as the default and a second store on Azurite. The source repository
lives on east's S3 store, its mirror on west's Azure store. The sidecars copy
directly store to store (``builtin-direct``) as the narrow policy's user without the
builtin copier's read permission, so nothing can come through the source's API: the
mirror advances only if the copier reads the source repository's own store and writes
the mirror repository's own store, and the validator proves the pieces there.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lakefs_core.block.azure import AzureBlobStore
from lakefs_core.block.base import join_address
from lakefs_core.block.s3 import S3BlockStore
from lakefs_core.graveler.presence import CommitValidator
from lakefs_testing.azurite import AZURITE_ACCOUNT, AZURITE_KEY, AzuriteServer
from lakefs_testing.regions import (
    MIRRORS,
    Region,
    commit,
    create_mirror,
    mirror_head,
    two_regions,
    upload,
)
from lakefs_testing.replication_user import ReplicationUser
from lakefs_testing.servers import MOTO_ENV
from lakefs_testing.waiting import wait_for

BUCKET = "east-second-store"
CONTAINER = "west-second-store"


def _local(root: Path) -> dict[str, Any]:
    return {"id": "local", "type": "local", "backward_compatible": True,
            "local": {"path": str(root / "blockstore")}}


@dataclass
class Setup:
    east: Region
    west: Region
    source_ns: str
    mirror_ns: str
    s3: S3BlockStore
    azure: AzureBlobStore


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, moto_endpoint: str,
          s3_blockstore: S3BlockStore, azurite_server: AzuriteServer,
          azure_blockstore: AzureBlobStore) -> Iterator[Setup]:
    root = tmp_path_factory.mktemp("multi-store")
    s3_blockstore.client.create_bucket(Bucket=BUCKET)
    azure_blockstore.service.create_container(CONTAINER)
    source_ns = f"s3://{BUCKET}/src"
    mirror_ns = f"{azure_blockstore.base}{CONTAINER}/src-mirror"
    stores = {
        "east": {"stores": [_local(root / "regions" / "east"), {
            "id": "lake-s3", "type": "s3", "s3": {
                "region": MOTO_ENV["AWS_DEFAULT_REGION"], "endpoint": moto_endpoint,
                "force_path_style": True,
                "credentials": {"access_key_id": MOTO_ENV["AWS_ACCESS_KEY_ID"],
                                "secret_access_key": MOTO_ENV["AWS_SECRET_ACCESS_KEY"]}}}]},
        "west": {"stores": [_local(root / "regions" / "west"), {
            "id": "blob", "type": "azure", "azure": {
                "storage_account": AZURITE_ACCOUNT, "storage_access_key": AZURITE_KEY,
                "test_endpoint_url": azurite_server.endpoint}}]},
    }
    # no fs:ReadObject on the source's objects: a copy through its API is refused
    user = ReplicationUser.documented("narrow", source="src", mirror="src-mirror",
                                      namespace=mirror_ns, builtin_copier=False)
    mirrors = {"type": "sqlite", "sqlite": {"path": str(root / "mirrors.db")}}
    with two_regions(root / "regions", mirrors, mode="builtin-direct", interval="1s",
                     user=user, stores=stores) as (east, west):
        yield Setup(east, west, source_ns, mirror_ns, s3_blockstore, azure_blockstore)


def _entries(region: Region, repo: str, ref: str) -> dict[str, dict[str, Any]]:
    with region.client() as c:
        r = c.get(f"/api/v1/repositories/{repo}/refs/{ref}/objects/ls",
                  params={"amount": 1000})
        assert r.status_code == 200, r.text
        return {e["path"]: e for e in r.json()["results"]}


def test_mirror_on_a_second_store_follows_from_a_second_store(setup: Setup) -> None:
    east, west = setup.east, setup.west
    with east.client() as c:
        r = c.post("/api/v1/repositories", json={
            "name": "src", "storage_namespace": setup.source_ns, "storage_id": "lake-s3"})
        assert r.status_code == 201, r.text
    data = {f"data/part-{i}.bin": bytes([i]) * (1000 + i) for i in range(4)}
    for path, body in data.items():
        upload(east, "src", "main", path, body)
    first = commit(east, "src", "main", "on the second store")

    mirror = create_mirror(east, namespace=setup.mirror_ns, storage_id="blob")
    assert mirror["storage_id"] == "blob"
    wait_for(lambda: mirror_head(west, "src-mirror", "main") == first, 60, 0.1,
             what="the first commit mirrored")
    data["data/late.bin"] = b"after the mirror"
    upload(east, "src", "main", "data/late.bin", data["data/late.bin"])
    second = commit(east, "src", "main", "after the mirror")
    wait_for(lambda: mirror_head(west, "src-mirror", "main") == second, 60, 0.1,
             what="the second commit mirrored")

    repo = west.graveler.get_repository("src-mirror")
    assert (repo.storage_id, repo.storage_namespace) == ("blob", setup.mirror_ns)
    # the source's objects are on its S3 store, the mirror's on west's Azure store
    source = _entries(east, "src", second)
    mirrored = _entries(west, "src-mirror", second)
    assert sorted(mirrored) == sorted(source) == sorted(data)
    for path, body in data.items():
        assert source[path]["physical_address"].startswith(setup.source_ns + "/")
        assert setup.s3.get(source[path]["physical_address"]) == body
        address = mirrored[path]["physical_address"]
        assert address.startswith(setup.mirror_ns + "/"), address
        assert setup.azure.get(address) == body, path
    # nothing of the mirror went to west's default (local) store
    assert not [p for p in (west.root / "blockstore").rglob("*") if p.is_file()]
    # the proof holds on the mirror's store, from scratch
    metarange = west.graveler.get_commit("src-mirror", second).commit.metarange_id
    assert setup.azure.exists(join_address(setup.mirror_ns, f"_lakefs/{metarange}"))
    result = CommitValidator(setup.azure, setup.mirror_ns).validate(metarange, None)
    assert result.missing == []
    with west.client() as c:
        r = c.get(f"/api/v1/repositories/src-mirror/refs/{first}/objects",
                  params={"path": "data/part-2.bin"})
        assert r.status_code == 200 and r.content == data["data/part-2.bin"]


@pytest.mark.parametrize(("body", "message"), [
    ({"storage_id": "nope", "storage_namespace": "local://other"},
     "storage_id 'nope': region 'west' has no such blockstore (configured ids: blob, local)"),
    ({"storage_id": "blob", "storage_namespace": "local://other"},
     "does not fit the blockstore 'blob' of region 'west' (azure: expected ^https?://)"),
    ({"storage_namespace": "s3://some-bucket/other"},
     "does not fit the default blockstore of region 'west' (local: expected ^local://)"),
])
def test_a_mirror_on_a_store_the_destination_lacks_is_refused(
        setup: Setup, body: dict[str, str], message: str) -> None:
    with setup.east.client() as c:
        if c.get("/api/v1/repositories/src").status_code == 404:
            r = c.post("/api/v1/repositories", json={
                "name": "src", "storage_namespace": setup.source_ns, "storage_id": "lake-s3"})
            assert r.status_code == 201, r.text
        r = c.post(f"{MIRRORS}/src/mirrors",
                   json={"name": "refused-mirror", "region": "west", **body})
        assert r.status_code == 400, r.text
        assert message in r.json()["message"]
        listed = c.get(f"{MIRRORS}/src/mirrors").json()["results"]
        assert "refused-mirror" not in [m["name"] for m in listed]
