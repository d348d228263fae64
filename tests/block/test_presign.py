"""Pre-signed URLs: plain HTTP clients read and write objects with them, part URLs make
a multipart upload, and the URLs stop working when they expire.

moto accepts any signature and ignores expiry, so the signature and the expiry are
checked against a real verifier: this server's own S3 gateway, with a store that
signs with the gateway user's keys. Azure's SAS URLs are checked by Azurite, which
verifies their signature, permissions and expiry.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from unittest import mock
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from botocore.auth import S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from lakefs_core.block import LocalBlockStore, S3BlockStore, S3Config, S3Credentials
from lakefs_core.block.azure import AzureBlobStore
from lakefs_core.block.base import PresignMode, PresignSupport
from lakefs_core.block.config import AzureConfig
from lakefs_core.block.s3_requests import S3ObjectRequests, uri_encode_key
from lakefs_core.errors import NotFoundError, OperationNotSupportedError, ValidationError
from lakefs_testing.azurite import AZURITE_ACCOUNT, AZURITE_KEY, AzuriteServer
from lakefs_testing.live_server import LiveServer, live_server

MIB = 1 << 20


@pytest.fixture
def bucket(s3_blockstore: S3BlockStore, unique_name: str) -> str:
    s3_blockstore.client.create_bucket(Bucket=unique_name)
    return unique_name


@pytest.mark.parametrize("key", ["plain/key.bin", "with space/and+plus=equals&amp;",
                                 "unicode/zürich-東京.txt", "percent%20literal/~(x)!*'"])
@pytest.mark.parametrize("token", [None, "session/token+x"])
def test_signature_is_botocores(key: str, token: str | None) -> None:
    """The URL botocore would pre-sign for the same request, signature included."""
    now = datetime(2026, 11, 22, 4, 5, 6, tzinfo=UTC)
    credentials = Credentials("AKIDEXAMPLE", "secret/key+x", token)
    ours = S3ObjectRequests("http://s3.example:9000", "eu-west-1", credentials,
                            path_style=True).presign("GET", "bucket", key, 900, now)
    request = AWSRequest(method="GET",
                         url=f"http://s3.example:9000/bucket/{uri_encode_key(key)}")
    with mock.patch("botocore.auth.get_current_datetime", return_value=now.replace(tzinfo=None)):
        S3SigV4QueryAuth(credentials, "s3", "eu-west-1", expires=900).add_auth(request)
    assert parse_qs(urlsplit(ours).query) == parse_qs(urlsplit(request.url).query)
    assert urlsplit(ours).path == urlsplit(request.url).path


def test_get_and_put_urls_work_with_plain_http(s3_blockstore: S3BlockStore,
                                               bucket: str) -> None:
    address = f"s3://{bucket}/data/a b+c.bin"  # a key that needs encoding
    before = time.time()
    put = s3_blockstore.presign(address, PresignMode.WRITE)
    assert "X-Amz-Signature=" in put.url and "X-Amz-Expires=900" in put.url
    assert before + 899 <= put.expiry <= time.time() + 900
    resp = httpx.put(put.url, content=b"written by the client")
    assert resp.status_code == 200, resp.text
    assert s3_blockstore.get(address) == b"written by the client"

    get = s3_blockstore.presign(address, PresignMode.READ)
    resp = httpx.get(get.url)
    assert (resp.status_code, resp.content) == (200, b"written by the client")
    ranged = httpx.get(get.url, headers={"Range": "bytes=8-9"})
    assert (ranged.status_code, ranged.content) == (206, b"by")


def test_part_urls_make_a_multipart_upload(s3_blockstore: S3BlockStore, bucket: str) -> None:
    address = f"s3://{bucket}/data/big"
    upload_id = s3_blockstore.create_multipart_upload(address)
    pieces = [b"a" * (5 * MIB), b"tail"]
    parts = []
    for number, piece in enumerate(pieces, start=1):
        url = s3_blockstore.presign_upload_part(address, upload_id, number).url
        resp = httpx.put(url, content=piece)
        assert resp.status_code == 200, resp.text
        parts.append((number, resp.headers["etag"]))
    stat = s3_blockstore.complete_multipart_upload(address, upload_id, parts)
    assert stat.size == 5 * MIB + 4 and stat.etag.endswith("-2")
    assert s3_blockstore.get(address, (5 * MIB, 5 * MIB + 3)) == b"tail"

    with pytest.raises(ValidationError):
        s3_blockstore.presign_upload_part(address, upload_id, 10_001)
    second = s3_blockstore.create_multipart_upload(f"{address}-2")
    with pytest.raises(ValidationError, match="InvalidPart"):
        s3_blockstore.complete_multipart_upload(f"{address}-2", second, [(1, '"0123"')])
    s3_blockstore.abort_multipart_upload(f"{address}-2", second)
    assert "Uploads" not in s3_blockstore.client.list_multipart_uploads(Bucket=bucket)
    with pytest.raises(NotFoundError):
        s3_blockstore.abort_multipart_upload(f"{address}-2", "no-such-upload")


def test_disabled_or_local_stores_do_not_presign(moto_endpoint: str, tmp_path: Path,
                                                  bucket: str) -> None:
    local = LocalBlockStore(str(tmp_path / "block"))
    assert local.presign_support() == PresignSupport()
    with pytest.raises(OperationNotSupportedError, match="local adapter"):
        local.presign("local://ns/data/x", PresignMode.READ)
    with pytest.raises(OperationNotSupportedError):
        local.create_multipart_upload("local://ns/data/x")

    store = S3BlockStore(S3Config(endpoint=moto_endpoint, force_path_style=True,
                                  credentials=S3Credentials(access_key_id="testing",
                                                            secret_access_key="testing"),
                                  disable_pre_signed_multipart=True))
    try:
        assert store.presign_support() == PresignSupport(pre_sign_support=True)
        with pytest.raises(OperationNotSupportedError):
            store.create_multipart_upload(f"s3://{bucket}/x")
    finally:
        store.close()
    store = S3BlockStore(S3Config(endpoint=moto_endpoint, disable_pre_signed=True,
                                  disable_pre_signed_ui=False))
    try:
        assert store.presign_support() == PresignSupport()
        with pytest.raises(OperationNotSupportedError):
            store.presign(f"s3://{bucket}/x", PresignMode.READ)
    finally:
        store.close()


# --- against a verifier: the S3 gateway ---------------------------------------------------
@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(str(tmp_path_factory.mktemp("gateway"))) as srv, srv.client() as http:
        created = http.post("/repositories", json={
            "name": "signed", "storage_namespace": "local://signed", "default_branch": "main"})
        assert created.status_code == 201, created.text
        uploaded = http.post("/repositories/signed/branches/main/objects",
                             params={"path": "dir/file.txt"}, content=b"verified")
        assert uploaded.status_code == 201, uploaded.text
        yield srv


def _gateway_store(srv: LiveServer, expiry: str) -> S3BlockStore:
    return S3BlockStore(S3Config(
        endpoint=srv.endpoint, force_path_style=True, pre_signed_expiry=expiry,
        credentials=S3Credentials(access_key_id=srv.access_key_id,
                                  secret_access_key=srv.secret_access_key)))


def test_urls_carry_a_valid_signature_and_expire(gateway: LiveServer) -> None:
    store, short_lived = _gateway_store(gateway, "10m"), _gateway_store(gateway, "1s")
    try:
        read = store.presign("s3://signed/main/dir/file.txt", PresignMode.READ)
        resp = httpx.get(read.url)
        assert (resp.status_code, resp.content) == (200, b"verified")
        tampered = httpx.get(read.url.replace("file.txt", "other.txt"))
        assert tampered.status_code == 403 and b"SignatureDoesNotMatch" in tampered.content
        write = store.presign("s3://signed/main/dir/new.txt", PresignMode.WRITE)
        assert httpx.put(write.url, content=b"through a URL").status_code == 200

        read = short_lived.presign("s3://signed/main/dir/file.txt", PresignMode.READ)
        write = short_lived.presign("s3://signed/main/dir/new.txt", PresignMode.WRITE)
        time.sleep(max(0.0, read.expiry + 1.1 - time.time()))
        expired = httpx.get(read.url)
        assert expired.status_code == 403 and b"expired" in expired.content
        assert httpx.put(write.url, content=b"too late").status_code == 403
    finally:
        store.close()
        short_lived.close()
    with gateway.client() as http:
        got = http.get("/repositories/signed/refs/main/objects",
                       params={"path": "dir/new.txt"})
        assert got.content == b"through a URL"


# --- Azure: SAS URLs, checked by Azurite ----------------------------------------------------
def _azure_store(azurite_server: AzuriteServer, **options: object) -> AzureBlobStore:
    return AzureBlobStore(AzureConfig.model_validate({
        "storage_account": AZURITE_ACCOUNT, "storage_access_key": AZURITE_KEY,
        "test_endpoint_url": azurite_server.endpoint, **options}))


_BLOCK_BLOB = {"x-ms-blob-type": "BlockBlob"}  # what Azure clients send with a PUT


def test_azure_sas_urls_work_with_plain_http(azure_blockstore: AzureBlobStore,
                                             unique_name: str) -> None:
    azure_blockstore.service.create_container(unique_name)
    address = f"{azure_blockstore.base}{unique_name}/data/a b+c ü.bin"  # needs encoding
    before = time.time()
    put = azure_blockstore.presign(address, PresignMode.WRITE)
    assert "sig=" in put.url and "sp=cw" in put.url
    assert before + 899 <= put.expiry <= time.time() + 900
    resp = httpx.put(put.url, content=b"written by the client", headers=_BLOCK_BLOB)
    assert resp.status_code == 201, resp.text
    stat = azure_blockstore.stat(address)
    # the lakeFS SDK links the object with the Content-MD5 Azure answers: the same etag
    assert stat.etag == base64.b64decode(resp.headers["content-md5"]).hex()
    assert azure_blockstore.get(address) == b"written by the client"

    get = azure_blockstore.presign(address, PresignMode.READ)
    resp = httpx.get(get.url)
    assert (resp.status_code, resp.content) == (200, b"written by the client")
    ranged = httpx.get(get.url, headers={"Range": "bytes=8-9"})
    assert (ranged.status_code, ranged.content) == (206, b"by")

    # each URL does only what it was signed for, on its own blob
    assert httpx.put(get.url, content=b"x", headers=_BLOCK_BLOB).status_code == 403
    assert httpx.get(put.url).status_code == 403
    other = get.url.replace("/data/", "/other/", 1)
    assert httpx.get(other).status_code == 403
    assert httpx.get(get.url.split("?", 1)[0]).status_code in (403, 404)  # no signature


def test_azure_sas_urls_expire(azurite_server: AzuriteServer, unique_name: str) -> None:
    store = _azure_store(azurite_server, pre_signed_expiry="1s")
    try:
        store.service.create_container(unique_name)
        address = f"{store.base}{unique_name}/object"
        store.put(address, b"short-lived")
        read = store.presign(address, PresignMode.READ)
        write = store.presign(address, PresignMode.WRITE)
        time.sleep(max(0.0, read.expiry + 1.1 - time.time()))
        assert httpx.get(read.url).status_code == 403
        assert httpx.put(write.url, content=b"too late", headers=_BLOCK_BLOB).status_code == 403
        assert store.get(address) == b"short-lived"
    finally:
        store.close()


def test_azure_presign_support_follows_the_configuration(azurite_server: AzuriteServer
                                                         ) -> None:
    store = _azure_store(azurite_server)
    assert store.presign_support() == PresignSupport(pre_sign_support=True)
    store.close()
    store = _azure_store(azurite_server, disable_pre_signed_ui=False)
    assert store.presign_support() == PresignSupport(pre_sign_support=True,
                                                     pre_sign_support_ui=True)
    store.close()
    store = _azure_store(azurite_server, disable_pre_signed=True, disable_pre_signed_ui=False)
    try:
        assert store.presign_support() == PresignSupport()
        with pytest.raises(OperationNotSupportedError, match="azure adapter"):
            store.presign(f"{store.base}cont/x", PresignMode.READ)
        # pre-signed multipart uploads are S3's: Azure offers none (as lakeFS)
        with pytest.raises(OperationNotSupportedError):
            store.create_multipart_upload(f"{store.base}cont/x")
    finally:
        store.close()
