"""Zero-copy import through the lakefs SDK's ImportManager, on local storage and on S3
(moto): prefixes and single objects, progress, cancellation, errors and permissions."""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import httpx
import lakefs
import lakefs_sdk
import pytest
from lakefs.client import Client
from lakefs.exceptions import ConflictException, ImportManagerException
from lakefs_sdk.exceptions import NotFoundException

from lakefs_testing.live_server import LiveServer, live_server
from tests.api.sdk_support import put, read, sdk_client

_names = itertools.count()
POLL = timedelta(milliseconds=50)


def _name(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


@pytest.fixture(scope="module")
def external(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory outside the blockstore that the local server may import from."""
    return tmp_path_factory.mktemp("external")


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory, external: Path) -> Iterator[LiveServer]:
    env = {"LAKEFS_BLOCKSTORE_LOCAL_IMPORT_ENABLED": "true",
           "LAKEFS_BLOCKSTORE_LOCAL_ALLOWED_EXTERNAL_PREFIXES": json.dumps([str(external)])}
    with live_server(str(tmp_path_factory.mktemp("import-local")), env) as srv:
        srv.services.imports.progress_interval = 0.0
        yield srv


@pytest.fixture(scope="module")
def bucket(moto_endpoint: str) -> str:
    name = f"import-src-{os.getpid()}"
    boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1").create_bucket(
        Bucket=name)
    return name


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory, moto_endpoint: str, bucket: str
       ) -> Iterator[LiveServer]:
    env = {"LAKEFS_BLOCKSTORE_TYPE": "s3", "LAKEFS_BLOCKSTORE_S3_ENDPOINT": moto_endpoint,
           "LAKEFS_BLOCKSTORE_S3_FORCE_PATH_STYLE": "true",
           "LAKEFS_BLOCKSTORE_S3_REGION": "us-east-1",
           "LAKEFS_BLOCKSTORE_S3_CREDENTIALS_ACCESS_KEY_ID": "testing",
           "LAKEFS_BLOCKSTORE_S3_CREDENTIALS_SECRET_ACCESS_KEY": "testing"}
    with live_server(str(tmp_path_factory.mktemp("import-s3")), env) as srv:
        yield srv


def _files(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def _local_repo(srv: LiveServer) -> lakefs.Repository:
    name = _name("imp")
    return lakefs.Repository(name, client=sdk_client(srv)).create(
        storage_namespace=f"local://{name}")


def _listing(ref: lakefs.Reference, prefix: str = "") -> list[str]:
    return [o.path for o in ref.objects(prefix=prefix)]


# --------------------------------------------------------------------------- local
def test_import_prefix_and_object_on_local_storage(local: LiveServer, external: Path) -> None:
    src = external / _name("src")
    _files(src, {"data/a.csv": b"a", "data/b/c.csv": b"cc", "data/b.txt": b"b",
                 "single.bin": b"one object"})
    repo = _local_repo(local)
    main = repo.branch("main")
    put(main, "imported/stale.csv", b"replaced by the import")
    put(main, "kept.txt", b"untouched")
    main.commit("before")

    mgr = main.import_data(commit_message="import it", metadata={"source": "disk"})
    mgr.prefix(f"local://{src}/data/", "imported/").object(f"local://{src}/single.bin",
                                                           "one/object.bin")
    status = mgr.run(poll_interval=POLL)

    assert status.completed and status.error is None
    assert status.ingested_objects == 4
    commit = status.commit
    assert commit is not None and commit.message == "import it"
    assert commit.metadata == {"source": "disk"}
    assert main.get_commit().id == commit.id
    by_id = repo.ref(commit.id)
    assert _listing(by_id) == ["imported/a.csv", "imported/b.txt", "imported/b/c.csv",
                               "kept.txt", "one/object.bin"]
    assert read(by_id, "imported/b/c.csv") == b"cc"
    assert read(by_id, "one/object.bin") == b"one object"
    assert read(by_id, "kept.txt") == b"untouched"
    # zero-copy: the entry points at the file where it was, nothing landed in the namespace
    stat = by_id.object("imported/a.csv").stat()
    assert stat.physical_address == f"local://{src}/data/a.csv"
    namespace = Path(local.services.blockstores.default().root) / repo.id  # type: ignore[attr-defined]
    written = [p.relative_to(namespace).parts[0] for p in namespace.rglob("*") if p.is_file()]
    assert set(written) == {"_lakefs", "data"}  # data: the two files put before the import
    assert len([w for w in written if w == "data"]) == 2
    # the source changing later does not change what a commit lists
    (src / "data" / "new.csv").write_bytes(b"new")
    assert _listing(by_id, "imported/") == ["imported/a.csv", "imported/b.txt",
                                            "imported/b/c.csv"]


def test_a_running_import_shows_progress_and_cancel_leaves_the_branch(
        local: LiveServer, external: Path) -> None:
    src = external / _name("slow")
    _files(src, {f"a/{i:04}": b"x" for i in range(600)})
    # a named pipe after the files: listing blocks on it until the test writes to it
    fifo = src / "b-pipe"
    os.mkfifo(fifo)
    repo = _local_repo(local)
    main = repo.branch("main")
    head = main.get_commit().id
    mgr = main.import_data(commit_message="never lands").prefix(f"local://{src}/", "x/")
    mgr.start()
    api = sdk_client(local).sdk_client.import_api
    deadline = time.monotonic() + 30
    status = api.import_status(repo.id, "main", mgr.import_id)
    while (status.ingested_objects or 0) < 512:
        assert time.monotonic() < deadline, status
        assert not status.completed and status.error is None
        time.sleep(0.02)
        status = api.import_status(repo.id, "main", mgr.import_id)
    assert not status.completed  # blocked on the pipe, 512 of 600 files counted

    mgr.cancel()
    with open(fifo, "wb") as pipe:  # let the listing go on: the import sees the cancel
        pipe.write(b"p")
    deadline = time.monotonic() + 30
    while mgr.import_id in local.services.imports.running():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    final = api.import_status(repo.id, "main", mgr.import_id)
    assert final.error is not None and final.error.message == "Canceled"
    assert not final.completed and final.commit is None
    assert main.get_commit().id == head
    assert _listing(main) == []
    with pytest.raises(ConflictException):
        mgr.cancel()


def test_import_errors(local: LiveServer, external: Path, tmp_path: Path) -> None:
    src = external / _name("err")
    _files(src, {"d/f": b"f"})
    repo = _local_repo(local)
    main = repo.branch("main")
    api = sdk_client(local).sdk_client.import_api

    def start(path: str, destination: str = "dst/", kind: str = "common_prefix",
              branch: str = "main") -> httpx.Response:
        with local.client() as http:
            return http.post(f"/repositories/{repo.id}/branches/{branch}/import", json={
                "paths": [{"type": kind, "path": path, "destination": destination}],
                "commit": {"message": "m"}})

    # refused at start, nothing recorded
    outside = tmp_path / "outside"
    _files(outside, {"f": b"f"})
    assert start(f"local://{outside}/").status_code == 403
    assert start(f"local://{src}/../err/d/").status_code == 400
    assert start("local://relative/d/").status_code == 400
    assert start("s3://bucket/d/").status_code == 400
    assert start(f"local://{src}/d/f", destination="", kind="object").status_code == 400
    assert start(f"local://{src}/d/", kind="directory").status_code == 400
    assert start(f"local://{src}/d/", branch="nope").status_code == 404
    with local.client() as http:  # no paths: an empty commit, as lakeFS makes (202)
        assert http.post(f"/repositories/{repo.id}/branches/main/import",
                         json={"paths": [{"path": "", "destination": "d/"}],
                               "commit": {"message": "m"}}).status_code == 400
    # failing while running: the error is in the status and the branch is unchanged
    head = main.get_commit().id
    for source, kind, expected in [
            (f"local://{src}/missing/", "common_prefix", "import path not found"),
            (f"local://{src}/d/missing", "object", "not found")]:
        mgr = main.import_data(commit_message="m")
        (mgr.prefix if kind == "common_prefix" else mgr.object)(source, "dst/x")
        with pytest.raises(ImportManagerException, match=expected):
            mgr.run(poll_interval=POLL)
    put(main, "uncommitted", b"u")
    mgr = main.import_data(commit_message="m").prefix(f"local://{src}/d/", "dst/")
    with pytest.raises(ImportManagerException, match="dirty branch"):
        mgr.run(poll_interval=POLL)
    assert main.get_commit().id == head
    with pytest.raises(NotFoundException):
        api.import_status(repo.id, "main", "no-such-import")
    repo.branch("other").create("main")
    with pytest.raises(NotFoundException):  # another branch's import is not found here
        api.import_status(repo.id, "other", mgr.import_id)


def test_local_import_is_refused_unless_enabled(server: LiveServer, tmp_path: Path) -> None:
    _files(tmp_path / "src", {"f": b"f"})
    repo = lakefs.Repository("noimport", client=sdk_client(server)).create(
        storage_namespace="local://noimport")
    mgr = repo.branch("main").import_data(commit_message="m").prefix(
        f"local://{tmp_path}/src/", "x/")
    with pytest.raises(lakefs.exceptions.BadRequestException, match="import_enabled"):
        mgr.start()


def test_import_permissions(local: LiveServer, external: Path) -> None:
    src = external / _name("perm")
    _files(src, {"d/f": b"f"})
    repo = _local_repo(local)
    admin = sdk_client(local).sdk_client
    source = f"local://{src}/d/"
    allowed_source = lakefs_sdk.Statement(effect="allow", action=["fs:ImportFromStorage"],
                                          resource=f"arn:lakefs:fs:::namespace/{source}*")
    policy = _name("import-src")
    may_cancel = lakefs_sdk.Statement(effect="allow", action=["fs:ImportCancel"],
                                      resource=f"arn:lakefs:fs:::repository/{repo.id}/branch/*")
    admin.auth_api.create_policy(lakefs_sdk.Policy(id=policy,
                                                   statement=[allowed_source, may_cancel]))
    writes = _name("writes")
    admin.auth_api.create_policy(lakefs_sdk.Policy(id=writes, statement=[lakefs_sdk.Statement(
        effect="allow", action=["fs:WriteObject", "fs:CreateCommit", "fs:Read*", "fs:List*"],
        resource="*")]))

    def user(*policies: str) -> httpx.Client:
        name = _name("user")
        admin.auth_api.create_user(lakefs_sdk.UserCreation(id=name))
        for p in policies:
            admin.auth_api.attach_policy_to_user(name, p)
        key = admin.auth_api.create_credentials(name)
        return httpx.Client(base_url=local.api, auth=(key.access_key_id, key.secret_access_key),
                            timeout=30)

    body: dict[str, Any] = {"paths": [{"type": "common_prefix", "path": source,
                                       "destination": "in/"}], "commit": {"message": "m"}}
    url = f"/repositories/{repo.id}/branches/main/import"
    with user(writes) as writer:  # may write and commit, not import from storage
        assert writer.post(url, json=body).status_code == 403
    with user("FSReadAll", policy) as reader:  # may import from there, not write
        assert reader.post(url, json=body).status_code == 403
    with user(writes, policy) as importer:
        started = importer.post(url, json=body)
        assert started.status_code == 202
        other = {**body, "paths": [{"type": "object", "path": f"local://{src}/e",
                                    "destination": "e"}]}
        assert importer.post(url, json=other).status_code == 403
        import_id = started.json()["id"]
        deadline = time.monotonic() + 30
        while not (status := importer.get(url, params={"id": import_id}).json())["completed"]:
            assert time.monotonic() < deadline and "error" not in status, status
            time.sleep(0.02)
        assert importer.delete(url, params={"id": import_id}).status_code == 409
    assert list(repo.ref("main").objects()) and read(repo.ref("main"), "in/f") == b"f"
    with user("FSReadAll") as viewer:
        assert viewer.get(url, params={"id": import_id}).status_code == 200
        assert viewer.delete(url, params={"id": import_id}).status_code == 403


# --------------------------------------------------------------------------------- S3
def test_import_prefix_and_object_on_s3(s3: LiveServer, moto_endpoint: str, bucket: str
                                        ) -> None:
    client = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
    prefix = _name("raw")
    for i in range(300):
        client.put_object(Bucket=bucket, Key=f"{prefix}/part-{i:04}.parquet",
                          Body=f"row {i}".encode())
    client.put_object(Bucket=bucket, Key=f"{prefix}-extra/readme", Body=b"read me")
    repo = lakefs.Repository(_name("s3imp"), client=Client(
        host=s3.endpoint, username=s3.access_key_id, password=s3.secret_access_key)).create(
        storage_namespace=f"s3://{bucket}/repos/{_name('ns')}")
    main = repo.branch("main")
    status = (main.import_data(commit_message="from s3")
              .prefix(f"s3://{bucket}/{prefix}/", "tables/t/")
              .object(f"s3://{bucket}/{prefix}-extra/readme", "README")
              .run(poll_interval=POLL))
    assert status.completed and status.ingested_objects == 301
    assert status.commit is not None
    by_id = repo.ref(status.commit.id)
    paths = _listing(by_id)
    assert paths[0] == "README" and len(paths) == 301
    assert paths[1:] == [f"tables/t/part-{i:04}.parquet" for i in range(300)]
    assert read(by_id, "tables/t/part-0123.parquet") == b"row 123"
    assert by_id.object("README").stat().physical_address == (
        f"s3://{bucket}/{prefix}-extra/readme")
    keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix="repos/") for o in page.get("Contents", [])]
    assert keys and all("/_lakefs/" in k for k in keys)  # only metadata was written

    missing = (main.import_data(commit_message="m")
               .prefix(f"s3://no-such-bucket-{os.getpid()}/x/", "y/"))
    with pytest.raises(ImportManagerException):
        missing.run(poll_interval=POLL)
    assert main.get_commit().id == status.commit.id

