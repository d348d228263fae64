"""What is particular to the Cloud Storage store, against gcp-storage-emulator.

The shared behaviour (put, get, ranges, list, copy, streaming) is in
test_blockstore.py. Here: settings, errors, composed objects, namespaces and V4
signed URLs. The emulator checks no signature, so each URL's signature is verified
here against the public half of the throwaway service-account key that signed it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

import httpx
import pydantic
import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

import lakefs_testing.gcs
from lakefs_core.block import BlockStores, GSConfig, validate_namespace
from lakefs_core.block.base import PresignMode, PresignSupport
from lakefs_core.block.gs import GSBlockStore, _stat
from lakefs_core.errors import (
    NotFoundError,
    ObjectNotFoundError,
    OperationNotSupportedError,
    StorageError,
    ValidationError,
)
from lakefs_testing.gcs import (
    SERVICE_ACCOUNT_EMAIL,
    GCSEmulator,
    start_gcs_emulator,
    throwaway_service_account_key,
)


@pytest.fixture(scope="module")
def signing_key() -> tuple[rsa.RSAPrivateKey, str]:
    return throwaway_service_account_key()


@pytest.fixture(scope="module")
def private_key(signing_key: tuple[rsa.RSAPrivateKey, str]) -> rsa.RSAPrivateKey:
    return signing_key[0]


@pytest.fixture(scope="module")
def key_json(signing_key: tuple[rsa.RSAPrivateKey, str]) -> str:
    return signing_key[1]


@pytest.fixture(scope="module")
def signing_store(gcs_emulator: GCSEmulator, key_json: str) -> Iterator[GSBlockStore]:
    store = GSBlockStore(GSConfig(endpoint=gcs_emulator.endpoint, anonymous=True,
                                  credentials_json=key_json, pre_signed_expiry="10m"))
    yield store
    store.close()


@pytest.fixture
def bucket(gs_blockstore: GSBlockStore, unique_name: str) -> str:
    gs_blockstore.client.create_bucket(unique_name)
    return unique_name


# --- V4 signed URLs ----------------------------------------------------------------------
def verify_v4_signature(url: str, method: str, public_key: rsa.RSAPublicKey) -> dict[str, str]:
    """Check a V4 signed URL as Cloud Storage does; its query parameters.

    Raises:
        InvalidSignature: the signature is not the key's over this request.
    """
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    signature = bytes.fromhex(query.pop("X-Goog-Signature"))
    canonical_query = "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}"
                               for k, v in sorted(query.items()))
    assert query["X-Goog-SignedHeaders"] == "host"
    canonical_request = "\n".join([
        method, parts.path, canonical_query, f"host:{parts.netloc}", "", "host",
        "UNSIGNED-PAYLOAD"])
    scope = query["X-Goog-Credential"].split("/", 1)[1]
    string_to_sign = "\n".join([
        "GOOG4-RSA-SHA256", query["X-Goog-Date"], scope,
        hashlib.sha256(canonical_request.encode()).hexdigest()])
    public_key.verify(signature, string_to_sign.encode(), padding.PKCS1v15(), hashes.SHA256())
    return query


def test_signed_urls_read_and_write_with_plain_http(
        signing_store: GSBlockStore, gs_blockstore: GSBlockStore, bucket: str,
        private_key: rsa.RSAPrivateKey, gcs_emulator: GCSEmulator) -> None:
    assert signing_store.presign_support() == PresignSupport(
        pre_sign_support=True, pre_sign_multipart_upload=True)
    address = f"gs://{bucket}/data/a b+c ü.bin"  # a key that needs encoding
    before = time.time()
    put = signing_store.presign(address, PresignMode.WRITE)
    assert put.url.startswith(f"{gcs_emulator.endpoint}/{bucket}/data/a%20b%2Bc%20%C3%BC.bin?")
    assert before + 599 <= put.expiry <= time.time() + 600
    query = verify_v4_signature(put.url, "PUT", private_key.public_key())
    assert query["X-Goog-Algorithm"] == "GOOG4-RSA-SHA256"
    assert query["X-Goog-Expires"] == "600"
    assert query["X-Goog-Credential"].startswith(SERVICE_ACCOUNT_EMAIL + "/")
    resp = httpx.put(put.url, content=b"written by the client")
    assert resp.status_code == 200, resp.text
    assert gs_blockstore.get(address) == b"written by the client"

    get = signing_store.presign(address, PresignMode.READ)
    verify_v4_signature(get.url, "GET", private_key.public_key())
    resp = httpx.get(get.url)
    assert (resp.status_code, resp.content) == (200, b"written by the client")
    ranged = httpx.get(get.url, headers={"Range": "bytes=8-9"})
    assert (ranged.status_code, ranged.content) == (206, b"by")


def test_signature_binds_method_object_and_key(signing_store: GSBlockStore,
                                               private_key: rsa.RSAPrivateKey) -> None:
    url = signing_store.presign("gs://bucket/data/object", PresignMode.READ).url
    verify_v4_signature(url, "GET", private_key.public_key())
    with pytest.raises(InvalidSignature):
        verify_v4_signature(url, "PUT", private_key.public_key())
    with pytest.raises(InvalidSignature):
        verify_v4_signature(url.replace("/object?", "/other?"), "GET", private_key.public_key())
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(InvalidSignature):
        verify_v4_signature(url, "GET", other_key.public_key())


def test_stores_without_a_key_or_disabled_do_not_presign(
        gs_blockstore: GSBlockStore, gcs_emulator: GCSEmulator, key_json: str) -> None:
    assert gs_blockstore.presign_support() == PresignSupport()
    with pytest.raises(OperationNotSupportedError, match="gs adapter"):
        gs_blockstore.presign("gs://bucket/x", PresignMode.READ)
    disabled = GSBlockStore(GSConfig(endpoint=gcs_emulator.endpoint, anonymous=True,
                                     credentials_json=key_json, disable_pre_signed=True,
                                     disable_pre_signed_ui=False))
    try:
        assert disabled.presign_support() == PresignSupport()
        with pytest.raises(OperationNotSupportedError):
            disabled.presign("gs://bucket/x", PresignMode.WRITE)
        with pytest.raises(OperationNotSupportedError):
            disabled.create_multipart_upload("gs://bucket/x")
    finally:
        disabled.close()


# --- pre-signed multipart uploads (parts composed) --------------------------------------------
def _upload_parts(store: GSBlockStore, address: str, upload_id: str, pieces: list[bytes],
                  public_key: rsa.RSAPublicKey) -> list[tuple[int, str]]:
    """PUT each piece to its part URL; (part number, the ETag Cloud Storage answers:
    the MD5 in quotes; the emulator answers none)."""
    parts = []
    for number, piece in enumerate(pieces, start=1):
        url = store.presign_upload_part(address, upload_id, number).url
        verify_v4_signature(url, "PUT", public_key)
        resp = httpx.put(url, content=piece)
        assert resp.status_code == 200, resp.text
        parts.append((number, f'"{hashlib.md5(piece).hexdigest()}"'))
    return parts


def test_part_urls_make_a_multipart_upload(signing_store: GSBlockStore, bucket: str,
                                           private_key: rsa.RSAPrivateKey) -> None:
    address = f"gs://{bucket}/data/big"
    upload_id = signing_store.create_multipart_upload(address)
    pieces = [os.urandom(300_000), os.urandom(300_000), b"tail"]
    parts = _upload_parts(signing_store, address, upload_id, pieces, private_key.public_key())
    assert not signing_store.exists(address)  # nothing shows before completion
    stat = signing_store.complete_multipart_upload(address, upload_id, parts)
    assert stat.size == 600_004 and stat == signing_store.stat(address)
    assert signing_store.get(address) == b"".join(pieces)
    # the parts and the upload's marker are gone; the upload with them
    assert [o.address for o in signing_store.list(f"gs://{bucket}/")] == [address]
    with pytest.raises(NotFoundError):
        signing_store.complete_multipart_upload(address, upload_id, parts)


def test_many_parts_compose_in_a_tree(signing_store: GSBlockStore, bucket: str,
                                      private_key: rsa.RSAPrivateKey) -> None:
    """70 parts: more than one compose request takes (32), so they are composed in
    two levels."""
    address = f"gs://{bucket}/data/many"
    upload_id = signing_store.create_multipart_upload(address)
    pieces = [f"part {i:03d};".encode() for i in range(70)]
    parts = _upload_parts(signing_store, address, upload_id, pieces, private_key.public_key())
    stat = signing_store.complete_multipart_upload(address, upload_id, parts)
    assert signing_store.get(address) == b"".join(pieces)
    assert stat.size == sum(len(p) for p in pieces)
    assert [o.address for o in signing_store.list(f"gs://{bucket}/")] == [address]


def test_part_copies(signing_store: GSBlockStore, bucket: str) -> None:
    source = f"gs://{bucket}/data/source"
    payload = os.urandom(1000)
    signing_store.put(source, payload)
    address = f"gs://{bucket}/data/copied"
    upload_id = signing_store.create_multipart_upload(address)
    whole = signing_store.upload_part_copy(address, upload_id, 1, source)
    ranged = signing_store.upload_part_copy(address, upload_id, 2, source, (10, 2000))
    assert whole == hashlib.md5(payload).hexdigest()
    assert ranged == hashlib.md5(payload[10:]).hexdigest()
    with pytest.raises(ValidationError, match="starts past the end"):
        signing_store.upload_part_copy(address, upload_id, 3, source, (1000, 1001))
    with pytest.raises(ObjectNotFoundError):
        signing_store.upload_part_copy(address, upload_id, 3, f"gs://{bucket}/missing")
    signing_store.complete_multipart_upload(address, upload_id, [(1, whole), (2, ranged)])
    assert signing_store.get(address) == payload + payload[10:]


def test_bad_completions_and_aborts(signing_store: GSBlockStore, bucket: str,
                                   private_key: rsa.RSAPrivateKey) -> None:
    address = f"gs://{bucket}/data/bad"
    upload_id = signing_store.create_multipart_upload(address)
    parts = _upload_parts(signing_store, address, upload_id, [b"one", b"two"],
                          private_key.public_key())
    for wrong, message in [
            ([(1, '"0123"'), parts[1]], "InvalidPart: part 1"),
            ([parts[0], (3, parts[1][1])], "InvalidPart: part 3"),
            ([parts[1], parts[0]], "InvalidPartOrder"),
            ([parts[0], parts[0]], "InvalidPartOrder"),
            ([], "InvalidPartOrder")]:
        with pytest.raises(ValidationError, match=message):
            signing_store.complete_multipart_upload(address, upload_id, wrong)
    with pytest.raises(ValidationError, match="between 1 and 10000"):
        signing_store.presign_upload_part(address, upload_id, 10_001)
    assert not signing_store.exists(address)
    signing_store.abort_multipart_upload(address, upload_id)
    assert list(signing_store.list(f"gs://{bucket}/")) == []
    for unknown in (upload_id, "no-such-upload", "0" * 32, "../" + upload_id):
        with pytest.raises(NotFoundError):
            signing_store.abort_multipart_upload(address, unknown)
        with pytest.raises(NotFoundError):
            signing_store.complete_multipart_upload(address, unknown, parts)


# --- objects --------------------------------------------------------------------------------
def test_composed_object_etag(gs_blockstore: GSBlockStore) -> None:
    """Cloud Storage gives a composed object no MD5 (the emulator does): its etag is
    its CRC32C and component count, as the resource says."""
    import google_crc32c
    from google.cloud.storage import Blob

    crc = google_crc32c.Checksum(b"aaabbb").digest()
    resource = {"name": "whole", "bucket": "b", "size": "6", "componentCount": 2,
                "crc32c": base64.b64encode(crc).decode(),
                "updated": "2026-11-25T10:00:00.000Z"}
    blob = Blob("whole", gs_blockstore.client.bucket("b"))
    blob._set_properties(resource)  # what a stat or list response sets
    stat = _stat("gs://b/whole", blob)
    assert (stat.size, stat.etag) == (6, f"{crc.hex()}-2")
    assert stat.mtime == datetime(2026, 11, 25, 10, tzinfo=UTC).timestamp()
    resource["md5Hash"] = base64.b64encode(hashlib.md5(b"aaabbb").digest()).decode()
    blob._set_properties(resource)
    assert _stat("gs://b/whole", blob).etag == hashlib.md5(b"aaabbb").hexdigest()


@pytest.mark.parametrize("encryption", [
    {"server_side_encryption_customer_supplied": "11" * 32},
    {"server_side_encryption_kms_key_id": "projects/p/locations/l/keyRings/r/cryptoKeys/k"},
])
def test_server_side_encryption_is_asked_for_on_every_write_and_read(
        gcs_emulator: GCSEmulator, unique_name: str, encryption: dict[str, str]) -> None:
    """The emulator does not encrypt: what is checked is that every request that writes
    or reads object data names the key (Cloud Storage refuses a customer-encrypted
    object to a read without its key)."""
    store = GSBlockStore(GSConfig(endpoint=gcs_emulator.endpoint, anonymous=True,
                                  upload_chunk_size=256 << 10, **encryption))
    requests_seen: list[Any] = []
    store.client._http.hooks["response"].append(
        lambda resp, *args, **kwargs: requests_seen.append(resp.request))
    try:
        store.client.create_bucket(unique_name)
        base = f"gs://{unique_name}"
        store.put(f"{base}/small", b"hello")
        store.put(f"{base}/streamed", (bytes(1000) for _ in range(600)))  # resumable
        store.copy(f"{base}/small", f"{base}/copy")
        assert store.get(f"{base}/copy") == b"hello"
        assert b"".join(store.get_stream(f"{base}/streamed")) == bytes(600_000)
        data_requests = [r for r in requests_seen
                         if "/upload/" in r.url or "/download/" in r.url or "rewriteTo" in r.url]
        assert len(data_requests) >= 6
        for request in data_requests:
            if "server_side_encryption_customer_supplied" in encryption:
                assert request.headers["X-Goog-Encryption-Algorithm"] == "AES256", request.url
                key = base64.b64decode(request.headers["X-Goog-Encryption-Key"])
                assert key == bytes.fromhex("11" * 32)
            elif "/download/" not in request.url:
                assert "projects%2Fp%2Flocations" in request.url or (
                    "projects/p/locations" in request.url), request.url
    finally:
        store.close()


def test_missing_bucket(gs_blockstore: GSBlockStore) -> None:
    with pytest.raises(ObjectNotFoundError):
        gs_blockstore.get("gs://no-such-bucket-x/key")
    with pytest.raises(ObjectNotFoundError):
        gs_blockstore.stat("gs://no-such-bucket-x/key")
    with pytest.raises(StorageError, match="gs put gs://no-such-bucket-x/key: NotFound"):
        gs_blockstore.put("gs://no-such-bucket-x/key", b"x")
    with pytest.raises(StorageError, match="gs list"):
        list(gs_blockstore.list("gs://no-such-bucket-x/"))


# --- settings -------------------------------------------------------------------------------
def test_gs_sections_open_through_the_registry(gcs_emulator: GCSEmulator) -> None:
    stores = BlockStores.from_config({"type": "gs", "gs": {
        "endpoint": gcs_emulator.endpoint, "anonymous": True,
        "s3_endpoint": "https://storage.googleapis.com"}})  # lakeFS's key: accepted
    try:
        store = stores.default()
        assert isinstance(store, GSBlockStore) and store.type == store.scheme == "gs"
        assert stores.describe()[0].type == "gs"
    finally:
        stores.close()


@pytest.mark.parametrize(("section", "message"), [
    ({"upload_chunk_size": 1 << 20 | 1}, "multiple of 256 KiB"),
    ({"upload_chunk_size": 1 << 10}, "upload_chunk_size"),
    ({"pre_signed_expiry": "169h"}, "between 1s and 168h"),
    ({"server_side_encryption_customer_supplied": "abc"}, "64 hex digits"),
    ({"server_side_encryption_customer_supplied": "00" * 32,
      "server_side_encryption_kms_key_id": "projects/p/keys/k"}, "exclusive"),
])
def test_bad_gs_settings(section: dict[str, object], message: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=message):
        GSConfig.model_validate(section)


def test_unreadable_credentials_are_a_storage_error(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="blockstore.gs: cannot load credentials"):
        GSBlockStore(GSConfig(credentials_file=str(tmp_path / "missing.json")))
    with pytest.raises(StorageError, match="blockstore.gs: cannot load credentials"):
        GSBlockStore(GSConfig(credentials_json="{not json"))


@pytest.mark.parametrize("namespace", [
    "gs://bucket", "gs://my-bucket_1/prefix/", "gs://a.b.c/deep/er",
    "gs://" + "a" * 63 + "/x", "gs://" + ".".join(["b" * 60] * 3),
])
def test_valid_gs_namespaces(gs_blockstore: GSBlockStore, namespace: str) -> None:
    assert validate_namespace(gs_blockstore, namespace) == namespace


@pytest.mark.parametrize("namespace", [
    "s3://bucket/x", "gs://", "gs://Bucket", "gs://ab", "gs://-bucket", "gs://" + "a" * 64,
    "gs://192.168.1.1", "gs://google-thing", "gs://bucket/../x",
])
def test_invalid_gs_namespaces(gs_blockstore: GSBlockStore, namespace: str) -> None:
    with pytest.raises(ValidationError):
        validate_namespace(gs_blockstore, namespace)


def test_emulator_that_cannot_start_fails_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lakefs_testing.gcs.sys, "executable", "/bin/false")
    with pytest.raises(RuntimeError, match="did not start.*pip install gcp-storage-emulator"):
        start_gcs_emulator()


def test_range_past_the_end_on_cloud_storage_reads_nothing() -> None:
    """Cloud Storage answers a range that starts past the end with 416 (the emulator
    answers 206 and no bytes): the store reads b"" as the other stores do. A stub of
    the two calls involved, on loopback, gives the 416."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    resource = json.dumps({"name": "k", "bucket": "b", "size": "10", "generation": "1",
                           "md5Hash": base64.b64encode(hashlib.md5(b"0" * 10).digest()
                                                       ).decode()}).encode()

    class Stub(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if "alt=media" in self.path:
                self.send_response(416)
                self.send_header("Content-Range", "bytes */10")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(resource)))
            self.end_headers()
            self.wfile.write(resource)

        def log_message(self, *args: object) -> None:
            pass

    stub = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    thread = threading.Thread(target=stub.serve_forever, daemon=True)
    thread.start()
    store = GSBlockStore(GSConfig(endpoint=f"http://127.0.0.1:{stub.server_port}",
                                  anonymous=True))
    try:
        assert store.get("gs://b/k", (10, 20)) == b""
        assert store.stat("gs://b/k").size == 10
    finally:
        store.close()
        stub.shutdown()
        stub.server_close()
        thread.join()
