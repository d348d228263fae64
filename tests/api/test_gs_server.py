"""A server on Cloud Storage (gcp-storage-emulator), driven by the ``lakefs`` SDK:
a repository on ``gs://``, uploads, commits, reads, diffs, and the pre-signed data
path with V4 URLs signed by a service-account key."""

from __future__ import annotations

import os
from collections.abc import Iterator

import lakefs
import pytest
from lakefs.client import Client

from lakefs_core.block.gs import GSBlockStore
from lakefs_testing.gcs import GCSEmulator, throwaway_service_account_key
from lakefs_testing.live_server import LiveServer, live_server

MIB = 1 << 20


@pytest.fixture(scope="module")
def bucket(gs_blockstore: GSBlockStore) -> str:
    name = f"gs-server-{os.getpid()}"
    gs_blockstore.client.create_bucket(name)
    return name


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory, gcs_emulator: GCSEmulator,
        bucket: str) -> Iterator[LiveServer]:
    _, key_json = throwaway_service_account_key()
    env = {"LAKEFS_BLOCKSTORE_TYPE": "gs", "LAKEFS_BLOCKSTORE_GS_ENDPOINT": gcs_emulator.endpoint,
           "LAKEFS_BLOCKSTORE_GS_ANONYMOUS": "true",
           "LAKEFS_BLOCKSTORE_GS_CREDENTIALS_JSON": key_json,
           # small chunks: a 3 MiB upload goes as a resumable upload
           "LAKEFS_BLOCKSTORE_GS_UPLOAD_CHUNK_SIZE": str(MIB)}
    with live_server(str(tmp_path_factory.mktemp("gs-server")), env) as s:
        yield s


@pytest.fixture(scope="module")
def repo(srv: LiveServer, bucket: str) -> lakefs.Repository:
    client = Client(host=srv.endpoint, username=srv.access_key_id,
                    password=srv.secret_access_key)
    return lakefs.Repository("on-gcs", client=client).create(
        storage_namespace=f"gs://{bucket}/repos/on-gcs")


def test_config_names_the_gs_store(srv: LiveServer) -> None:
    with srv.client() as http:
        storage = http.get("/config").json()["storage_config"]
    assert storage["blockstore_type"] == "gs"
    assert storage["blockstore_namespace_example"] == "gs://example-bucket/"
    assert (storage["pre_sign_support"], storage["pre_sign_support_ui"],
            storage["pre_sign_multipart_upload"]) == (True, False, True)


def test_upload_commit_read_diff(repo: lakefs.Repository, gs_blockstore: GSBlockStore,
                                 bucket: str) -> None:
    main = repo.branch("main")
    big = os.urandom(3 * MIB + 7)
    main.object("data/big.bin").upload(big)
    main.object("data/small.txt").upload(b"small")
    first = main.commit(message="first load")
    assert main.object("data/big.bin").reader().read() == big

    dev = repo.branch("dev").create(source_reference="main")
    dev.object("data/small.txt").upload(b"changed")
    dev.object("data/new.txt").upload(b"new")
    dev.object("data/big.bin").delete()
    dev.commit(message="change on dev")
    assert {(d.path, d.type) for d in main.diff(dev)} == {
        ("data/small.txt", "changed"), ("data/new.txt", "added"), ("data/big.bin", "removed")}
    # reads by commit id keep the first version
    assert repo.ref(first.get_commit().id).object("data/small.txt").reader().read() == b"small"
    assert dev.object("data/small.txt").reader().read() == b"changed"

    # object data and the commit's ranges live in the bucket, below the namespace
    namespace = f"gs://{bucket}/repos/on-gcs/"
    stored = [o for o in gs_blockstore.list(namespace)]
    assert stored and all(o.address.startswith(namespace) for o in stored)
    assert any(o.size == len(big) for o in stored)
    assert any("/_lakefs/" in o.address for o in stored)


def test_presigned_upload_and_read(repo: lakefs.Repository, gs_blockstore: GSBlockStore,
                                   bucket: str) -> None:
    main = repo.branch("main")
    data = os.urandom(MIB)
    obj = main.object("direct/data.bin")
    obj.upload(data, pre_sign=True, content_type="application/x-test")
    stat = obj.stat(pre_sign=True)
    assert stat.size_bytes == len(data)
    assert stat.physical_address.startswith(f"{gs_blockstore.config.endpoint}/{bucket}/")
    assert "X-Goog-Signature=" in stat.physical_address
    assert obj.reader(pre_sign=True).read() == data
    main.commit(message="pre-signed")
    assert obj.reader().read() == data


def test_s3_gateway_multipart_upload(srv: LiveServer, repo: lakefs.Repository) -> None:
    """boto3 through the S3 gateway onto a gs-backed repository: a multipart upload
    (the gateway streams the parts into one store object), a ranged read, a listing."""
    import boto3
    from botocore.config import Config

    s3 = boto3.client("s3", endpoint_url=srv.endpoint, region_name="us-east-1",
                      aws_access_key_id=srv.access_key_id,
                      aws_secret_access_key=srv.secret_access_key,
                      config=Config(s3={"addressing_style": "path"}))
    parts = [os.urandom(5 * MIB), b"tail"]
    upload = s3.create_multipart_upload(Bucket=repo.id, Key="main/gw/big.bin")
    etags = [s3.upload_part(Bucket=repo.id, Key="main/gw/big.bin", PartNumber=n,
                            UploadId=upload["UploadId"], Body=body)["ETag"]
             for n, body in enumerate(parts, start=1)]
    s3.complete_multipart_upload(
        Bucket=repo.id, Key="main/gw/big.bin", UploadId=upload["UploadId"],
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e}
                                   for n, e in enumerate(etags, start=1)]})
    got = s3.get_object(Bucket=repo.id, Key="main/gw/big.bin", Range=f"bytes={5 * MIB}-")
    assert got["Body"].read() == b"tail"
    assert s3.get_object(Bucket=repo.id, Key="main/gw/big.bin")["Body"].read() == b"".join(parts)
    listed = s3.list_objects_v2(Bucket=repo.id, Prefix="main/gw/")["Contents"]
    assert [(o["Key"], o["Size"]) for o in listed] == [("main/gw/big.bin", 5 * MIB + 4)]


def test_presigned_multipart_upload(srv: LiveServer, repo: lakefs.Repository) -> None:
    """lakeFS's pre-signed multipart API: part URLs, parts PUT by the client, completion
    (the parts composed into one object), then an ordinary read."""
    import hashlib

    import httpx

    pieces = [os.urandom(MIB), b"end"]
    base = f"/repositories/{repo.id}/branches/main/staging/pmpu"
    with srv.client() as http:
        created = http.post(base, params={"path": "mpu/obj.bin", "parts": 2})
        assert created.status_code == 201, created.text
        upload = created.json()
        for url, piece in zip(upload["presigned_urls"], pieces, strict=True):
            assert httpx.put(url, content=piece).status_code == 200
        # the ETag Cloud Storage answers a part PUT with (the emulator answers none)
        parts = [{"part_number": n, "etag": f'"{hashlib.md5(p).hexdigest()}"'}
                 for n, p in enumerate(pieces, start=1)]
        done = http.put(f"{base}/{upload['upload_id']}", params={"path": "mpu/obj.bin"},
                        json={"physical_address": upload["physical_address"], "parts": parts})
        assert done.status_code == 200, done.text
        assert done.json()["size_bytes"] == MIB + 3
    assert repo.branch("main").object("mpu/obj.bin").reader().read() == b"".join(pieces)
