"""The S3 store's direct GET/PUT requests: signatures, keys, and falling back to boto3.

Signatures are checked three ways: against botocore's signer for the same request,
by the server's own S3 gateway (which verifies SigV4 strictly), and by reading back
through boto3 what the direct requests wrote on moto (and the other way round).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime
from unittest import mock

import boto3
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

from lakefs_core.block import S3BlockStore, S3Config, S3Credentials
from lakefs_core.block.s3_requests import (
    EMPTY_SHA256,
    UNSIGNED_PAYLOAD,
    S3ObjectRequests,
    crc32_base64,
    sign_headers,
    uri_encode_key,
)
from lakefs_core.errors import ObjectNotFoundError
from lakefs_testing.live_server import LiveServer
from lakefs_testing.servers import free_port

#: keys whose encoding differs between careless and careful signers
AWKWARD_KEYS = [
    "plain/key.bin",
    "with space/and+plus=equals&amp;",
    "unicode/zürich-東京.txt",
    "percent%20literal/~tilde/(parens)!*'",
    "colon:semi;comma,at@dollar$",
]

NOW = datetime(2026, 11, 22, 4, 5, 6, tzinfo=UTC)


def _botocore_authorization(method: str, url: str, headers: dict[str, str],
                            body: bytes | None, credentials: Credentials) -> str:
    request = AWSRequest(method=method, url=url, headers=headers, data=body)
    if url.startswith("https:") and body is not None:
        # boto3 leaves the payload unsigned over TLS when a checksum header is present
        request.context["client_config"] = Config(s3={"payload_signing_enabled": False})
    with mock.patch("botocore.auth.get_current_datetime", return_value=NOW.replace(tzinfo=None)):
        S3SigV4Auth(credentials, "s3", "eu-west-1").add_auth(request)
    return str(request.headers["Authorization"])


@pytest.mark.parametrize("key", AWKWARD_KEYS)
@pytest.mark.parametrize(("method", "headers", "body"), [
    ("GET", {}, None),
    ("GET", {"Range": "bytes=5-99"}, None),
    ("PUT", {}, b"some bytes" * 1000),
])
@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("token", [None, "session-token/with+chars"])
def test_signature_is_botocores(key: str, method: str, headers: dict[str, str],
                                body: bytes | None, scheme: str, token: str | None) -> None:
    credentials = Credentials("AKIAEXAMPLE", "secret/with+chars", token)
    path = f"/bucket-name/{uri_encode_key(key)}"
    if body is None:
        payload_hash = EMPTY_SHA256
    elif scheme == "https":
        payload_hash = UNSIGNED_PAYLOAD
        headers = {**headers, "x-amz-checksum-crc32": crc32_base64(body)}
    else:
        payload_hash = hashlib.sha256(body).hexdigest()
    ours = sign_headers(method, "127.0.0.1:9000", path, "", headers, payload_hash,
                        credentials.get_frozen_credentials(), "eu-west-1", NOW)
    theirs = _botocore_authorization(method, f"{scheme}://127.0.0.1:9000{path}", headers,
                                     body, credentials)
    assert ours["authorization"] == theirs


def test_signing_key_cache_follows_the_date() -> None:
    credentials = Credentials("AKIAEXAMPLE", "secret").get_frozen_credentials()
    cache: dict[tuple[str, str], bytes] = {}
    first = sign_headers("GET", "h", "/b/k", "", {}, EMPTY_SHA256, credentials, "us-east-1",
                         NOW, cache)
    later = NOW.replace(day=23)
    cached = sign_headers("GET", "h", "/b/k", "", {}, EMPTY_SHA256, credentials, "us-east-1",
                          later, cache)
    fresh = sign_headers("GET", "h", "/b/k", "", {}, EMPTY_SHA256, credentials, "us-east-1",
                         later)
    assert cached["authorization"] == fresh["authorization"] != first["authorization"]
    assert len(cache) == 1


# --- on the wire: the server's own gateway checks every signature -----------------------
@pytest.fixture
def gateway_requests(server: LiveServer) -> Iterator[S3ObjectRequests]:
    server.services.graveler.create_repository(
        "direct", f"local://{server.port}-direct")
    requests = S3ObjectRequests(
        server.endpoint, "us-east-1",
        Credentials(server.access_key_id, server.secret_access_key), path_style=True)
    yield requests
    requests.close()


@pytest.mark.parametrize("key", AWKWARD_KEYS)
def test_gateway_accepts_direct_requests(gateway_requests: S3ObjectRequests,
                                         server: LiveServer, key: str) -> None:
    body = key.encode() * 100
    etag = gateway_requests.put("direct", f"main/{key}", body)
    assert etag is not None
    assert gateway_requests.get("direct", f"main/{key}") == body
    assert gateway_requests.get("direct", f"main/{key}", 3, 9) == body[3:10]
    response = gateway_requests.open("direct", f"main/{key}")
    assert response is not None
    assert response.read() == body
    response.release_conn()
    # and it is the object the engine has under that path
    assert server.services.catalog.read("direct", "main", key) == body


def test_refused_requests_return_none(server: LiveServer,
                                      gateway_requests: S3ObjectRequests) -> None:
    wrong = S3ObjectRequests(server.endpoint, "us-east-1",
                             Credentials(server.access_key_id, "not-the-secret"),
                             path_style=True)
    try:
        assert wrong.put("direct", "main/x", b"data") is None
        assert gateway_requests.get("direct", "main/missing") is None
        assert gateway_requests.open("direct", "main/missing") is None
    finally:
        wrong.close()
    with pytest.raises(ObjectNotFoundError):
        server.services.catalog.read("direct", "main", "x")


def test_nothing_listening_returns_none() -> None:
    requests = S3ObjectRequests(f"http://127.0.0.1:{free_port()}", "us-east-1",
                                Credentials("a", "b"), path_style=True, timeout=5)
    assert requests.put("bucket", "key", b"x") is None
    assert requests.get("bucket", "key") is None


def test_addressing() -> None:
    aws = S3ObjectRequests("https://s3.eu-west-1.amazonaws.com", "eu-west-1",
                           Credentials("a", "b"), path_style=False)
    assert aws._target("my-bucket", "a b/c") == (
        "my-bucket.s3.eu-west-1.amazonaws.com", "my-bucket.s3.eu-west-1.amazonaws.com",
        "/a%20b/c")
    # names that are not DNS-safe stay in the path, as boto3 does
    assert aws._target("dotted.bucket", "k") == (
        "s3.eu-west-1.amazonaws.com", "s3.eu-west-1.amazonaws.com", "/dotted.bucket/k")
    minio = S3ObjectRequests("http://127.0.0.1:9000/base/", "us-east-1",
                             Credentials("a", "b"), path_style=True)
    assert minio._target("bucket", "k") == ("127.0.0.1", "127.0.0.1:9000", "/base/bucket/k")
    # keys that HTTP stacks could rewrite are left to boto3
    for key in ("a/../b", "./a", "a//b", "a/"):
        assert minio._target("bucket", key) is None


def test_proxied_endpoints_are_left_to_boto3(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    requests = S3ObjectRequests("https://s3.eu-west-1.amazonaws.com", "eu-west-1",
                                Credentials("a", "b"), path_style=False)
    assert not requests.usable


# --- the S3 store on moto: direct requests and boto3 agree ---------------------------------
@pytest.fixture
def moto_store(moto_endpoint: str, unique_name: str) -> Iterator[tuple[S3BlockStore, str]]:
    store = S3BlockStore(S3Config(
        region="us-east-1", endpoint=moto_endpoint, force_path_style=True,
        credentials=S3Credentials(access_key_id="testing", secret_access_key="testing")))
    bucket = f"direct-{unique_name}"
    store.client.create_bucket(Bucket=bucket)
    yield store, bucket
    store.close()


def test_store_sends_direct_requests(moto_store: tuple[S3BlockStore, str]) -> None:
    store, bucket = moto_store
    assert store._lean is not None
    with mock.patch.object(store._client, "put_object") as put, \
            mock.patch.object(store._client, "get_object") as get, \
            mock.patch.object(store._client, "head_object") as head:
        stat = store.put(f"s3://{bucket}/k", b"hello")
        assert store.get(f"s3://{bucket}/k") == b"hello"
        assert store.get(f"s3://{bucket}/k", (1, 3)) == b"ell"
        assert b"".join(store.get_stream(f"s3://{bucket}/k")) == b"hello"
        direct = store.stat(f"s3://{bucket}/k")
        with pytest.raises(ObjectNotFoundError):
            store.stat(f"s3://{bucket}/missing")
    put.assert_not_called()
    get.assert_not_called()
    head.assert_not_called()
    described = store.client.head_object(Bucket=bucket, Key="k")
    assert (direct.size, direct.etag, direct.mtime) == (
        5, stat.etag, described["LastModified"].timestamp())


@pytest.mark.parametrize("key", [*AWKWARD_KEYS, "dots/../in/./key", "double//slash"])
def test_direct_and_boto3_see_the_same_objects(moto_store: tuple[S3BlockStore, str],
                                               moto_endpoint: str, key: str) -> None:
    store, bucket = moto_store
    boto = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1",
                        aws_access_key_id="testing", aws_secret_access_key="testing")
    store.put(f"s3://{bucket}/{key}", b"written directly")
    assert boto.get_object(Bucket=bucket, Key=key)["Body"].read() == b"written directly"
    boto.put_object(Bucket=bucket, Key=key, Body=b"written by boto3")
    assert store.get(f"s3://{bucket}/{key}") == b"written by boto3"
    assert b"".join(store.get_stream(f"s3://{bucket}/{key}")) == b"written by boto3"


def test_failures_fall_back_to_boto3(moto_store: tuple[S3BlockStore, str]) -> None:
    store, bucket = moto_store
    # direct requests that cannot get through: boto3 does the work
    store._lean = S3ObjectRequests(f"http://127.0.0.1:{free_port()}", "us-east-1",
                                   Credentials("testing", "testing"), path_style=True,
                                   timeout=5)
    store.put(f"s3://{bucket}/k", b"still stored")
    assert store.get(f"s3://{bucket}/k") == b"still stored"
    assert b"".join(store.get_stream(f"s3://{bucket}/k")) == b"still stored"


def test_errors_keep_their_meaning(moto_store: tuple[S3BlockStore, str]) -> None:
    store, bucket = moto_store
    with pytest.raises(ObjectNotFoundError):
        store.get(f"s3://{bucket}/missing")
    with pytest.raises(ObjectNotFoundError):
        store.get_stream(f"s3://{bucket}/missing")
    store.put(f"s3://{bucket}/short", b"abc")
    assert store.get(f"s3://{bucket}/short", (10, 20)) == b""  # past the end
    assert store.get(f"s3://{bucket}/short", (1, 20)) == b"bc"


def test_lean_requests_can_be_turned_off(moto_endpoint: str) -> None:
    store = S3BlockStore(S3Config(region="us-east-1", endpoint=moto_endpoint,
                                  force_path_style=True, lean_requests=False,
                                  credentials=S3Credentials(access_key_id="testing",
                                                            secret_access_key="testing")))
    try:
        assert store._lean is None
    finally:
        store.close()
