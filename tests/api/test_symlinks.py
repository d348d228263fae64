"""Symlink export (createSymlinkFile) through lakeFS's SDK: Hive-style manifests under
``<namespace>/symlinks`` whose lines are the objects' physical addresses."""

from __future__ import annotations

import lakefs
import pytest
from lakefs_sdk.exceptions import ApiException

from lakefs_testing.live_server import LiveServer
from tests.api.sdk_support import put, sdk_client, viewer_client

OBJECTS = {  # sorted, "tables" objects interleave with its subdirectories
    "tables/t1.txt": "t1 notes",
    "tables/t1/a.parquet": "a",
    "tables/t1/b.parquet": "bb",
    "tables/t1/part=2/c.parquet": "ccc",
    "tables/t10/d.parquet": "dddd",
    "tables/u.csv": "u",
    "top.csv": "top",
    "weird/../x": "no manifest names this directory",
}


def _manifests(server: LiveServer, repo: str, ref: str) -> dict[str, list[bytes]]:
    """Every manifest of ``ref`` (by directory) with the bytes its lines point to."""
    graveler = server.services.graveler
    namespace = graveler.get_repository(repo).storage_namespace
    store = server.services.catalog.store_of(graveler.get_repository(repo))
    root = f"{namespace}/symlinks/{repo}/{ref}/"
    found = {}
    for stat in store.list(root):
        key = stat.address
        assert key.endswith("symlink.txt"), key
        directory = key[len(root):].removesuffix("symlink.txt").rstrip("/")
        lines = store.get(key).decode().split("\n")
        found[directory] = [store.get(address) for address in lines]
    return found


def test_export_writes_a_manifest_per_directory(server: LiveServer) -> None:
    client = sdk_client(server)
    repo = lakefs.Repository("hive", client=client).create(storage_namespace="local://hive")
    main = repo.branch("main")
    for path, data in OBJECTS.items():
        put(main, path, data)
    main.commit("tables")
    internal = client.sdk_client.internal_api

    answer = internal.create_symlink_file("hive", "main")
    assert answer.location == "local://hive/symlinks"
    assert _manifests(server, "hive", "main") == {
        "": [b"top"],
        "tables": [b"t1 notes", b"u"],
        "tables/t1": [b"a", b"bb"],
        "tables/t1/part=2": [b"ccc"],
        "tables/t10": [b"dddd"],
    }

    # only under a location, and staged changes count (as a listing of the branch)
    dev = repo.branch("dev").create("main")
    put(dev, "tables/t1/e.parquet", "eeeee")
    internal.create_symlink_file("hive", "dev", location="tables/t1/")
    assert _manifests(server, "hive", "dev") == {
        "tables/t1": [b"a", b"bb", b"eeeee"],
        "tables/t1/part=2": [b"ccc"],
    }


def test_export_errors_and_permissions(server: LiveServer) -> None:
    client = sdk_client(server)
    repo = lakefs.Repository("guarded", client=client).create(
        storage_namespace="local://guarded")
    put(repo.branch("main"), "t/x", "x")
    internal = client.sdk_client.internal_api
    with pytest.raises(ApiException) as info:
        internal.create_symlink_file("guarded", "nope")
    assert info.value.status == 404
    with viewer_client(server, "symlink-viewer") as viewer:
        assert viewer.post("/repositories/guarded/refs/main/symlink").status_code == 403
    server.services.graveler.set_read_only("guarded", True)
    with pytest.raises(ApiException) as info:
        internal.create_symlink_file("guarded", "main")
    assert info.value.status == 403
    assert _manifests(server, "guarded", "main") == {}
