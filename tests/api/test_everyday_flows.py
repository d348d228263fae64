"""The everyday flows of lakeFS's own clients, on each store: the ``lakefs`` SDK and
lakefs-spec upload, read, stat, list, commit, diff, merge, copy and delete, on the
local store and on S3 (moto), through the server and, where the store can pre-sign
(S3), straight to the store with ``pre_sign=True``."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import boto3
import lakefs
import pytest
from lakefs.client import Client
from lakefs_spec import LakeFSFileSystem

from lakefs_testing.live_server import LiveServer, live_server

_names = itertools.count()

#: (store, pre_sign): the local store cannot pre-sign; S3 goes both ways
CASES = [("local", False), ("s3", False), ("s3", True)]


@pytest.fixture(scope="module")
def bucket(moto_endpoint: str) -> str:
    name = f"flows-{os.getpid()}"
    boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1").create_bucket(
        Bucket=name)
    return name


@pytest.fixture(scope="module")
def local_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(str(tmp_path_factory.mktemp("flows-local"))) as s:
        yield s


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory: pytest.TempPathFactory,
              moto_endpoint: str) -> Iterator[LiveServer]:
    env = {"LAKEFS_BLOCKSTORE_TYPE": "s3", "LAKEFS_BLOCKSTORE_S3_ENDPOINT": moto_endpoint,
           "LAKEFS_BLOCKSTORE_S3_FORCE_PATH_STYLE": "true",
           "LAKEFS_BLOCKSTORE_S3_REGION": "us-east-1",
           "LAKEFS_BLOCKSTORE_S3_CREDENTIALS_ACCESS_KEY_ID": "testing",
           "LAKEFS_BLOCKSTORE_S3_CREDENTIALS_SECRET_ACCESS_KEY": "testing"}
    with live_server(str(tmp_path_factory.mktemp("flows-s3")), env) as s:
        yield s


@pytest.fixture(params=CASES, ids=[f"{s}-presign={p}" for s, p in CASES])
def case(request: pytest.FixtureRequest, bucket: str
         ) -> tuple[LiveServer, lakefs.Repository, bool]:
    store, pre_sign = request.param
    server: LiveServer = request.getfixturevalue(f"{store}_server")
    client = Client(host=server.endpoint, username=server.access_key_id,
                    password=server.secret_access_key)
    name = f"flows-{next(_names)}"
    namespace = f"local://{name}" if store == "local" else f"s3://{bucket}/{name}"
    repo = lakefs.Repository(name, client=client).create(storage_namespace=namespace)
    return server, repo, pre_sign


def test_sdk_flow(case: tuple[LiveServer, lakefs.Repository, bool]) -> None:
    _, repo, pre_sign = case
    main = repo.branch("main")
    data = os.urandom(300_000)
    main.object("data/a.bin").upload(data, pre_sign=pre_sign, metadata={"k": "v"})
    with main.object("data/b.txt").writer(mode="w", pre_sign=pre_sign) as f:
        f.write("b text")
    assert main.object("data/a.bin").reader(pre_sign=pre_sign).read() == data
    with main.object("data/a.bin").reader(pre_sign=pre_sign) as reader:
        reader.seek(1000)
        assert reader.read(10) == data[1000:1010]
    stat = main.object("data/a.bin").stat(pre_sign=pre_sign)
    assert (stat.size_bytes, stat.metadata) == (len(data), {"k": "v"})
    assert stat.physical_address.startswith("http") == pre_sign
    assert [o.path for o in main.objects(prefix="data/")] == ["data/a.bin", "data/b.txt"]
    first = main.commit("two objects").get_commit().id

    dev = repo.branch("dev").create(main)
    dev.object("data/c.txt").upload(b"on dev", pre_sign=pre_sign)
    dev.object("data/b.txt").delete()
    dev.commit("add c, remove b")
    diff = {(d.path, d.type) for d in main.diff(dev)}
    assert diff == {("data/c.txt", "added"), ("data/b.txt", "removed")}
    dev.merge_into(main)
    assert [o.path for o in main.objects(prefix="data/")] == ["data/a.bin", "data/c.txt"]
    assert repo.ref(first).object("data/b.txt").reader(pre_sign=pre_sign).read() == b"b text"

    copy = main.object("data/a.bin").copy("dev", "copies/a.bin")
    assert copy.reader(pre_sign=pre_sign).read() == data
    main.object("data/a.bin").delete()
    assert not main.object("data/a.bin").exists()
    assert repo.branch("dev").object("copies/a.bin").stat().size_bytes == len(data)
    main.commit("remove a")
    assert {d.path for d in repo.ref(first).diff(main)} == {"data/a.bin", "data/b.txt",
                                                           "data/c.txt"}


def test_lakefs_spec_flow(case: tuple[LiveServer, lakefs.Repository, bool]) -> None:
    server, repo, pre_sign = case
    fs = LakeFSFileSystem(host=server.endpoint, username=server.access_key_id,
                          password=server.secret_access_key, pre_sign=pre_sign,
                          skip_instance_cache=True)
    root = f"lakefs://{repo.id}/main"
    fs.pipe(f"{root}/spec/a.txt", b"from lakefs-spec")
    with fs.open(f"{root}/spec/b.bin", "wb") as f:
        f.write(b"b" * 70_000)
    assert fs.cat(f"{root}/spec/a.txt") == b"from lakefs-spec"
    with fs.open(f"{root}/spec/b.bin", "rb") as f:
        f.seek(69_990)
        assert f.read() == b"b" * 10
    assert fs.info(f"{root}/spec/b.bin")["size"] == 70_000
    assert sorted(fs.ls(f"{root}/spec/", detail=False)) == [
        f"{repo.id}/main/spec/a.txt", f"{repo.id}/main/spec/b.bin"]
    fs.cp_file(f"{root}/spec/a.txt", f"{root}/spec/copy.txt")
    assert fs.cat(f"{root}/spec/copy.txt") == b"from lakefs-spec"
    fs.rm(f"{root}/spec/b.bin")
    assert not fs.exists(f"{root}/spec/b.bin")
    repo.branch("main").commit("from lakefs-spec")  # a transaction merges into a clean branch

    with fs.transaction(repo.id, "main") as tx:
        fs.pipe(f"lakefs://{repo.id}/{tx.branch.id}/spec/in-tx.txt", b"tx")
        tx.commit(message="from a transaction")
    # the transaction's branch is merged in: its commit is the merge's second parent
    assert [c.message for c in repo.branch("main").log(max_amount=2)] == [
        f"Merge '{tx.branch.id}' into 'main'", "from a transaction"]
    assert fs.cat(f"{root}/spec/in-tx.txt") == b"tx"
    assert sorted(fs.ls(f"{root}/spec/", detail=False)) == [
        f"{repo.id}/main/spec/{name}" for name in ("a.txt", "copy.txt", "in-tx.txt")]
