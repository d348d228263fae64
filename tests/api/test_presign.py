"""The pre-signed data path, as lakeFS's clients use it: the ``lakefs`` SDK and
lakefs-spec with ``pre_sign=True`` read and write through URLs to the store (S3 on
moto), the pre-signed multipart upload, RBAC and read-only refusals, and the local
store, which cannot pre-sign."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import boto3
import httpx
import lakefs
import lakefs_sdk
import pytest
from lakefs.client import Client
from lakefs_spec import LakeFSFileSystem

from lakefs_testing.live_server import LiveServer, live_server

MIB = 1 << 20
REPO = "presigned"


@pytest.fixture(scope="module")
def bucket(moto_endpoint: str) -> str:
    name = f"presign-{os.getpid()}"
    boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1").create_bucket(
        Bucket=name)
    return name


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory, moto_endpoint: str,
        bucket: str) -> Iterator[LiveServer]:
    env = {"LAKEFS_BLOCKSTORE_TYPE": "s3", "LAKEFS_BLOCKSTORE_S3_ENDPOINT": moto_endpoint,
           "LAKEFS_BLOCKSTORE_S3_FORCE_PATH_STYLE": "true",
           "LAKEFS_BLOCKSTORE_S3_REGION": "us-east-1",
           "LAKEFS_BLOCKSTORE_S3_PRE_SIGNED_EXPIRY": "10m",
           "LAKEFS_BLOCKSTORE_S3_CREDENTIALS_ACCESS_KEY_ID": "testing",
           "LAKEFS_BLOCKSTORE_S3_CREDENTIALS_SECRET_ACCESS_KEY": "testing"}
    with live_server(str(tmp_path_factory.mktemp("presign")), env) as s:
        yield s


@pytest.fixture(scope="module")
def client(srv: LiveServer) -> Client:
    return Client(host=srv.endpoint, username=srv.access_key_id,
                  password=srv.secret_access_key)


@pytest.fixture(scope="module")
def repo(client: Client, bucket: str) -> lakefs.Repository:
    return lakefs.Repository(REPO, client=client).create(
        storage_namespace=f"s3://{bucket}/{REPO}")


def _objects(srv: LiveServer, http: httpx.Client, path: str, **params: object
             ) -> httpx.Response:
    return http.get(f"/repositories/{REPO}/refs/main/objects",
                    params={"path": path, **params}, follow_redirects=False)


def test_config_reports_what_the_store_can_presign(srv: LiveServer) -> None:
    with srv.client() as http:
        config = http.get("/config").json()
    for storage in (config["storage_config"], *config["storage_config_list"]):
        assert (storage["pre_sign_support"], storage["pre_sign_support_ui"],
                storage["pre_sign_multipart_upload"]) == (True, False, True)


def test_sdk_reads_and_writes_through_the_store(srv: LiveServer, repo: lakefs.Repository,
                                                moto_endpoint: str) -> None:
    main = repo.branch("main")
    data = os.urandom(3 * MIB)
    obj = main.object("direct/data.bin")
    obj.upload(data, pre_sign=True, content_type="application/x-test", metadata={"k": "v"})
    assert obj.reader(pre_sign=True).read() == data
    with obj.reader(pre_sign=True) as reader:
        reader.seek(MIB)
        assert reader.read(10) == data[MIB:MIB + 10]
    stat = obj.stat(pre_sign=True)
    assert stat.physical_address.startswith(moto_endpoint) and stat.physical_address_expiry
    assert (stat.content_type, stat.metadata) == ("application/x-test", {"k": "v"})
    assert httpx.get(stat.physical_address).content == data

    with srv.client() as http:
        redirect = _objects(srv, http, "direct/data.bin", presign="true")
        assert redirect.status_code == 302
        location = redirect.headers["location"]
        assert location.startswith(moto_endpoint) and "X-Amz-Signature=" in location
        assert httpx.get(location).content == data
        etag = f'"{stat.checksum}"'
        assert http.get(f"/repositories/{REPO}/refs/main/objects",
                        params={"path": "direct/data.bin", "presign": "true"},
                        headers={"If-None-Match": etag}).status_code == 304
        listing = http.get(f"/repositories/{REPO}/refs/main/objects/ls",
                           params={"prefix": "direct/", "presign": "true"}).json()["results"]
        assert [o["path"] for o in listing] == ["direct/data.bin"]
        assert listing[0]["physical_address"].startswith(moto_endpoint)
        assert listing[0]["physical_address_expiry"] == pytest.approx(
            stat.physical_address_expiry, abs=120)
    commit = main.commit("through the store").get_commit().id
    assert repo.ref(commit).object("direct/data.bin").reader(pre_sign=True).read() == data


def test_lakefs_spec_with_presign(srv: LiveServer, repo: lakefs.Repository) -> None:
    fs = LakeFSFileSystem(host=srv.endpoint, username=srv.access_key_id,
                          password=srv.secret_access_key, pre_sign=True)
    fs.pipe(f"lakefs://{REPO}/main/spec/a.txt", b"written by lakefs-spec")
    assert fs.cat(f"lakefs://{REPO}/main/spec/a.txt") == b"written by lakefs-spec"
    with fs.open(f"lakefs://{REPO}/main/spec/b.txt", "wb") as f:
        f.write(b"b" * 1000)
    with fs.open(f"lakefs://{REPO}/main/spec/b.txt", "rb") as f:
        assert f.read() == b"b" * 1000
    assert repo.branch("main").object("spec/a.txt").reader().read() == b"written by lakefs-spec"


def test_presigned_multipart_upload(srv: LiveServer, client: Client, repo: lakefs.Repository,
                                    bucket: str) -> None:
    api = client.sdk_client.experimental_api
    upload = api.create_presign_multipart_upload(REPO, "main", "mpu/big.bin", parts=2)
    assert upload.physical_address.startswith(f"s3://{bucket}/{REPO}/data/")
    assert upload.presigned_urls is not None and len(upload.presigned_urls) == 2
    pieces = [os.urandom(5 * MIB), b"the tail"]
    parts = []
    for number, (url, piece) in enumerate(zip(upload.presigned_urls, pieces, strict=True), 1):
        resp = httpx.put(url, content=piece)
        assert resp.status_code == 200, resp.text
        parts.append(lakefs_sdk.UploadPart(part_number=number, etag=resp.headers["etag"]))
    stats = api.complete_presign_multipart_upload(
        REPO, "main", upload.upload_id, "mpu/big.bin",
        lakefs_sdk.CompletePresignMultipartUpload(
            physical_address=upload.physical_address, parts=parts,
            user_metadata={"parts": "2"}, content_type="application/x-big"))
    assert stats.size_bytes == 5 * MIB + 8 and stats.checksum.endswith("-2")
    obj = repo.branch("main").object("mpu/big.bin")
    assert obj.reader(pre_sign=True).read() == b"".join(pieces)
    assert obj.stat().metadata == {"parts": "2"}

    other = api.create_presign_multipart_upload(REPO, "main", "mpu/aborted.bin")
    assert other.presigned_urls is None
    api.abort_presign_multipart_upload(
        REPO, "main", other.upload_id, "mpu/aborted.bin",
        lakefs_sdk.AbortPresignMultipartUpload(physical_address=other.physical_address))
    assert not repo.branch("main").object("mpu/aborted.bin").exists()

    with srv.client() as http:
        base = f"/repositories/{REPO}/branches/main/staging/pmpu"
        too_many = http.post(base, params={"path": "x", "parts": 10_001})
        assert too_many.status_code == 400
        assert too_many.json()["message"] == "parts can be between 0 and 10000"
        no_parts = http.put(f"{base}/{other.upload_id}", params={"path": "x"},
                            json={"physical_address": other.physical_address, "parts": []})
        assert (no_parts.status_code, no_parts.json()["message"]) == (400, "parts are required")
        outside = http.put(f"{base}/{other.upload_id}", params={"path": "x"},
                           json={"physical_address": f"s3://{bucket}/elsewhere/x",
                                 "parts": [{"part_number": 1, "etag": "e"}]})
        assert outside.status_code == 400 and "storage namespace" in outside.json()["message"]
        unknown = http.request("DELETE", f"{base}/no-such-upload", params={"path": "x"},
                               json={"physical_address": other.physical_address})
        assert unknown.status_code == 404


def _user(srv: LiveServer, client: Client, name: str, actions: list[str]) -> httpx.Client:
    auth = client.sdk_client.auth_api
    auth.create_policy(lakefs_sdk.Policy(id=f"{name}-policy", statement=[
        lakefs_sdk.Statement(effect="allow", action=actions, resource="*")]))
    auth.create_user(lakefs_sdk.UserCreation(id=name))
    auth.attach_policy_to_user(name, f"{name}-policy")
    key = auth.create_credentials(name)
    return srv.client(key.access_key_id, key.secret_access_key)


BAD_ADDRESS = (400, "bad address token (expired or invalid)")


@pytest.mark.parametrize("presign", [True, False])
def test_linking_takes_only_addresses_handed_out(srv: LiveServer, client: Client,
                                                 repo: lakefs.Repository, presign: bool) -> None:
    """A user who may list and write ``drop/`` cannot link (and then read) another
    object's data through its physical address from a listing."""
    main = repo.branch("main")
    main.object(f"vault/{presign}.bin").upload(b"confidential", pre_sign=presign)
    backing = f"/repositories/{REPO}/branches/main/staging/backing"
    name = f"dropper-{str(presign).lower()}"
    with _user(srv, client, name, ["fs:ListObjects", "fs:ReadRepository", "fs:WriteObject",
                                   "fs:ReadObject"]) as user:
        listed = user.get(f"/repositories/{REPO}/refs/main/objects/ls",
                          params={"prefix": f"vault/{presign}"}).json()["results"]
        stolen = listed[0]["physical_address"]
        assert stolen.startswith(f"s3://{repo.properties.storage_namespace.split('//')[1]}")
        body = {"staging": {"physical_address": stolen}, "checksum": "c", "size_bytes": 12}
        resp = user.put(backing, params={"path": f"drop/{presign}.bin"}, json=body)
        assert (resp.status_code, resp.json()["message"]) == BAD_ADDRESS
        assert not main.object(f"drop/{presign}.bin").exists()
        # the handed-out way works, once
        location = user.get(backing, params={"path": f"drop/{presign}.bin",
                                             "presign": str(presign).lower()}).json()
        if presign:
            assert httpx.put(location["presigned_url"], content=b"mine").status_code == 200
        else:
            srv.services.blockstores.for_storage_id("").put(location["physical_address"],
                                                            b"mine")
        body = {"staging": {"physical_address": location["physical_address"]},
                "checksum": "c", "size_bytes": 4}
        assert user.put(backing, params={"path": f"drop/{presign}.bin"},
                        json=body).status_code == 200
        again = user.put(backing, params={"path": f"drop/again-{presign}.bin"}, json=body)
        assert (again.status_code, again.json()["message"]) == BAD_ADDRESS
    assert main.object(f"drop/{presign}.bin").reader().read() == b"mine"
    assert not main.object(f"drop/again-{presign}.bin").exists()


def test_multipart_complete_takes_only_its_own_address(srv: LiveServer, client: Client,
                                                       repo: lakefs.Repository) -> None:
    api = client.sdk_client.experimental_api
    main = repo.branch("main")
    main.object("vault/mpu.bin").upload(b"confidential")
    stolen = main.object("vault/mpu.bin").stat().physical_address
    upload = api.create_presign_multipart_upload(REPO, "main", "mpu/mine.bin", parts=1)
    assert upload.presigned_urls is not None
    etag = httpx.put(upload.presigned_urls[0], content=b"part").headers["etag"]
    base = f"/repositories/{REPO}/branches/main/staging/pmpu/{upload.upload_id}"
    complete = {"physical_address": stolen, "parts": [{"part_number": 1, "etag": etag}]}
    with srv.client() as http:
        resp = http.put(base, params={"path": "mpu/stolen.bin"}, json=complete)
        assert (resp.status_code, resp.json()["message"]) == BAD_ADDRESS
        assert not main.object("mpu/stolen.bin").exists()
        complete["physical_address"] = upload.physical_address
        assert http.put(base, params={"path": "mpu/mine.bin"},
                        json=complete).status_code == 200
        again = http.put(base, params={"path": "mpu/again.bin"}, json=complete)
        assert (again.status_code, again.json()["message"]) == BAD_ADDRESS
    assert main.object("mpu/mine.bin").reader().read() == b"part"
    assert not main.object("mpu/again.bin").exists()


def test_rbac_gives_no_url_without_the_permission(srv: LiveServer, client: Client,
                                                   repo: lakefs.Repository) -> None:
    repo.branch("main").object("rbac/secret.txt").upload(b"secret", pre_sign=True)
    with _user(srv, client, "lister", ["fs:ListObjects", "fs:ReadRepository"]) as lister:
        for params in ({"presign": "true"}, {}):
            refused = _objects(srv, lister, "rbac/secret.txt", **params)
            assert refused.status_code == 403 and "location" not in refused.headers
        stat = lister.get(f"/repositories/{REPO}/refs/main/objects/stat",
                          params={"path": "rbac/secret.txt", "presign": "true"})
        assert stat.status_code == 403 and "X-Amz" not in stat.text
        listing = lister.get(f"/repositories/{REPO}/refs/main/objects/ls",
                             params={"prefix": "rbac/", "presign": "true"})
        assert listing.status_code == 200
        [entry] = listing.json()["results"]
        assert entry["physical_address"].startswith("s3://")
        assert "physical_address_expiry" not in entry
    with _user(srv, client, "reader", ["fs:Read*", "fs:List*"]) as reader:
        backing = reader.get(f"/repositories/{REPO}/branches/main/staging/backing",
                             params={"path": "rbac/new.txt", "presign": "true"})
        assert backing.status_code == 403 and "presigned_url" not in backing.text
        pmpu = reader.post(f"/repositories/{REPO}/branches/main/staging/pmpu",
                           params={"path": "rbac/new.txt", "parts": 1})
        assert pmpu.status_code == 403 and "X-Amz" not in pmpu.text
        assert _objects(srv, reader, "rbac/secret.txt", presign="true").status_code == 302
        upload = client.sdk_client.experimental_api.create_presign_multipart_upload(
            REPO, "main", "rbac/new.txt")
        parts = f"/repositories/{REPO}/branches/main/staging/pmpu/{upload.upload_id}/parts"
        part = reader.put(f"{parts}/1", params={"path": "rbac/new.txt"},
                          json={"physical_address": upload.physical_address})
        assert part.status_code == 403 and "X-Amz" not in part.text
    copy = {"physical_address": upload.physical_address,
            "copy_source": {"repository": REPO, "ref": "main", "path": "rbac/secret.txt"}}
    # a copy reads its source: writing the upload is not enough
    with _user(srv, client, "writer", ["fs:WriteObject"]) as writer:
        refused = writer.put(f"{parts}/1/copy", params={"path": "rbac/new.txt"}, json=copy)
        assert refused.status_code == 403
    with _user(srv, client, "copier", ["fs:WriteObject", "fs:ReadObject"]) as copier:
        assert copier.put(f"{parts}/1/copy", params={"path": "rbac/new.txt"},
                          json=copy).status_code == 204
    client.sdk_client.experimental_api.abort_presign_multipart_upload(
        REPO, "main", upload.upload_id, "rbac/new.txt",
        lakefs_sdk.AbortPresignMultipartUpload(physical_address=upload.physical_address))


def test_read_only_repository_gives_no_upload_url(srv: LiveServer,
                                                  repo: lakefs.Repository) -> None:
    srv.services.graveler.set_read_only(REPO, True)
    try:
        with srv.client() as http:
            backing = http.get(f"/repositories/{REPO}/branches/main/staging/backing",
                               params={"path": "ro.txt", "presign": "true"})
            assert backing.status_code == 403 and "presigned_url" not in backing.text
            pmpu = http.post(f"/repositories/{REPO}/branches/main/staging/pmpu",
                             params={"path": "ro.txt", "parts": 1})
            assert pmpu.status_code == 403
            assert _objects(srv, http, "direct/data.bin", presign="true").status_code == 302
    finally:
        srv.services.graveler.set_read_only(REPO, False)


def test_local_store_answers_presign_as_lakefs(tmp_path: Path) -> None:
    with live_server(str(tmp_path / "local")) as local, local.client() as http:
        config = http.get("/config").json()["storage_config"]
        assert (config["pre_sign_support"], config["pre_sign_support_ui"],
                config["pre_sign_multipart_upload"]) == (False, False, False)
        sdk = Client(host=local.endpoint, username=local.access_key_id,
                     password=local.secret_access_key)
        repo = lakefs.Repository("local-repo", client=sdk).create(
            storage_namespace="local://local-repo")
        obj = repo.branch("main").object("a.txt")
        obj.upload(b"through the server")  # the SDK asks /config: no pre-signing here
        assert obj.reader().read() == b"through the server"
        base = "/repositories/local-repo"
        for resp in (
            http.get(f"{base}/refs/main/objects", params={"path": "a.txt", "presign": "true"}),
            http.get(f"{base}/refs/main/objects/stat",
                     params={"path": "a.txt", "presign": "true"}),
            http.get(f"{base}/refs/main/objects/ls", params={"presign": "true"}),
            http.get(f"{base}/branches/main/staging/backing",
                     params={"path": "b.txt", "presign": "true"}),
        ):
            assert resp.status_code == 400
            assert resp.json()["message"] == "local adapter: operation not supported"
        pmpu = http.post(f"{base}/branches/main/staging/pmpu", params={"path": "b.txt"})
        part = http.put(f"{base}/branches/main/staging/pmpu/u/parts/1",
                        params={"path": "b.txt"},
                        json={"physical_address": "local://local-repo/data/x"})
        for resp in (pmpu, part):
            assert resp.status_code == 501
            assert resp.json()["message"] == "presign multipart upload API is not supported"
        with pytest.raises(lakefs_sdk.ApiException) as refused:
            obj.upload(b"forced", pre_sign=True)
        assert refused.value.status == 400
        assert obj.reader().read() == b"through the server"


def test_each_store_of_a_multi_store_server_presigns_by_its_own_config(
        tmp_path: Path, moto_endpoint: str, bucket: str) -> None:
    s3_store = {"id": "s3-store", "type": "s3", "s3": {
        "endpoint": moto_endpoint, "force_path_style": True, "region": "us-east-1",
        "pre_signed_expiry": "2m", "disable_pre_signed_ui": False,
        "credentials": {"access_key_id": "testing", "secret_access_key": "testing"}}}
    disk = {"id": "disk", "type": "local", "backward_compatible": True}
    env = {"LAKEFS_BLOCKSTORES_SIGNING_SECRET_KEY": "sign",
           "LAKEFS_BLOCKSTORES_STORES": json.dumps([disk, s3_store])}
    with live_server(str(tmp_path / "multi"), env) as multi, multi.client() as http:
        config = http.get("/config").json()
        flags = {c["blockstore_id"]: (c["pre_sign_support"], c["pre_sign_support_ui"],
                                      c["pre_sign_multipart_upload"])
                 for c in config["storage_config_list"]}
        assert flags == {"disk": (False, False, False), "s3-store": (True, True, True)}
        assert config["storage_config"]["blockstore_id"] == "disk"
        for name, namespace, store in (("on-s3", f"s3://{bucket}/multi", "s3-store"),
                                       ("on-disk", "local://on-disk", "disk")):
            created = http.post("/repositories", json={
                "name": name, "storage_namespace": namespace, "storage_id": store})
            assert created.status_code == 201, created.text
        sdk = Client(host=multi.endpoint, username=multi.access_key_id,
                     password=multi.secret_access_key)
        for name in ("on-s3", "on-disk"):
            # pre_sign unset: the SDK asks the repository's store
            lakefs.Repository(name, client=sdk).branch("main").object("x").upload(b"x" * 10)
        stat = http.get("/repositories/on-s3/refs/main/objects/stat",
                        params={"path": "x", "presign": "true"}).json()
        assert "X-Amz-Expires=120" in stat["physical_address"]
        assert httpx.get(stat["physical_address"]).content == b"x" * 10
        refused = http.get("/repositories/on-disk/refs/main/objects/stat",
                           params={"path": "x", "presign": "true"})
        assert refused.status_code == 400


def test_multipart_upload_parts_signed_one_by_one_and_copied(
        srv: LiveServer, client: Client, repo: lakefs.Repository) -> None:
    api = client.sdk_client.experimental_api
    main = repo.branch("main")
    source = os.urandom(6 * MIB)
    main.object("mpu/source.bin").upload(source)
    upload = api.create_presign_multipart_upload(REPO, "main", "mpu/joined.bin")
    # part 1: a byte range of a lakeFS object, copied by the store
    copied = api.upload_part_copy_with_http_info(
        REPO, "main", upload.upload_id, "mpu/joined.bin", 1,
        lakefs_sdk.UploadPartCopyFrom(
            physical_address=upload.physical_address,
            copy_source=lakefs_sdk.CopyPartSource(repository=REPO, ref="main",
                                                  path="mpu/source.bin",
                                                  range=f"bytes=0-{5 * MIB - 1}")))
    assert copied.status_code == 204
    # part 2: a URL signed for it alone
    url = api.upload_part(REPO, "main", upload.upload_id, "mpu/joined.bin", 2,
                          lakefs_sdk.UploadPartFrom(
                              physical_address=upload.physical_address)).presigned_url
    put = httpx.put(url, content=b"tail")
    assert put.status_code == 200, put.text
    parts = [lakefs_sdk.UploadPart(part_number=1, etag=copied.headers["ETag"]),
             lakefs_sdk.UploadPart(part_number=2, etag=put.headers["etag"])]
    api.complete_presign_multipart_upload(
        REPO, "main", upload.upload_id, "mpu/joined.bin",
        lakefs_sdk.CompletePresignMultipartUpload(physical_address=upload.physical_address,
                                                  parts=parts))
    assert main.object("mpu/joined.bin").reader().read() == source[:5 * MIB] + b"tail"

    other = api.create_presign_multipart_upload(REPO, "main", "mpu/bad.bin")
    base = f"/repositories/{REPO}/branches/main/staging/pmpu/{other.upload_id}/parts"
    copy = {"physical_address": other.physical_address,
            "copy_source": {"repository": REPO, "ref": "main", "path": "mpu/source.bin"}}
    with srv.client() as http:
        assert http.put(f"{base}/0", params={"path": "mpu/bad.bin"},
                        json={"physical_address": other.physical_address}).status_code == 400
        assert http.put(f"{base}/10001/copy", params={"path": "mpu/bad.bin"},
                        json=copy).status_code == 400
        outside = http.put(f"{base}/1", params={"path": "mpu/bad.bin"},
                           json={"physical_address": "s3://elsewhere/x"})
        assert outside.status_code == 400 and "storage namespace" in outside.json()["message"]
        bad_range = http.put(f"{base}/1/copy", params={"path": "mpu/bad.bin"},
                             json={**copy, "copy_source": {**copy["copy_source"],
                                                           "range": "bytes=9-1"}})
        assert bad_range.status_code == 400 and "range" in bad_range.json()["message"]
        missing = http.put(f"{base}/1/copy", params={"path": "mpu/bad.bin"},
                           json={**copy, "copy_source": {**copy["copy_source"],
                                                         "path": "mpu/none"}})
        assert missing.status_code == 404
    api.abort_presign_multipart_upload(
        REPO, "main", other.upload_id, "mpu/bad.bin",
        lakefs_sdk.AbortPresignMultipartUpload(physical_address=other.physical_address))
