"""What a request may cost the gateway: signing scope, URL lifetime, slow and huge bodies."""

from __future__ import annotations

import hashlib
import http.client
import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from lakefs_core.errors import ObjectNotFoundError
from lakefs_testing.live_server import LiveServer, live_server
from tests.gateway.conftest import REGION, Repo, chunk_signatures, s3_client, sign_headers

MiB = 1 << 20


def _signed_for(server: LiveServer, path: str, *, region: str, service: str) -> dict[str, str]:
    host = f"127.0.0.1:{server.port}"
    request = AWSRequest(method="GET", url=f"http://{host}{path}", headers={"Host": host})
    S3SigV4Auth(Credentials(server.access_key_id, server.secret_access_key), service,
                region).add_auth(request)
    return dict(request.headers.items())


def test_signature_for_another_region_or_service_is_refused(repo: Repo) -> None:
    """A signature is good for this endpoint's region and for S3 only, as S3 answers."""
    server = repo.server
    repo.s3.put_object(Bucket=repo.name, Key="main/a.txt", Body=b"a")
    path = f"/{repo.name}/main/a.txt"
    assert httpx.get(server.endpoint + path,
                     headers=_signed_for(server, path, region=REGION, service="s3")).content == b"a"

    wrong_region = httpx.get(server.endpoint + path, headers=_signed_for(
        server, path, region="eu-west-1", service="s3"))
    assert wrong_region.status_code == 400
    assert b"<Code>AuthorizationHeaderMalformed</Code>" in wrong_region.content
    assert b"the region 'eu-west-1' is wrong; expecting 'us-east-1'" in wrong_region.content
    assert b"<Region>us-east-1</Region>" in wrong_region.content

    wrong_service = httpx.get(server.endpoint + path, headers=_signed_for(
        server, path, region=REGION, service="sts"))
    assert wrong_service.status_code == 400
    assert b"incorrect service 'sts'. This endpoint belongs to 's3'" in wrong_service.content

    # presigned: the same rules, in the query's words
    far = s3_client_in(server, "eu-west-1").generate_presigned_url(
        "get_object", Params={"Bucket": repo.name, "Key": "main/a.txt"}, ExpiresIn=60)
    refused = httpx.get(far)
    assert refused.status_code == 400
    assert b"AuthorizationQueryParametersError" in refused.content
    assert b"Error parsing the X-Amz-Credential parameter; the region" in refused.content


def s3_client_in(server: LiveServer, region: str) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client("s3", endpoint_url=server.endpoint, region_name=region,
                        aws_access_key_id=server.access_key_id,
                        aws_secret_access_key=server.secret_access_key,
                        config=Config(signature_version="s3v4", retries={"max_attempts": 1},
                                      s3={"addressing_style": "path"}))


def test_version_2_presigned_urls_live_at_most_a_week(repo: Repo) -> None:
    repo.s3.put_object(Bucket=repo.name, Key="main/a.txt", Body=b"a")
    v2 = s3_client(repo.server.endpoint, repo.server.access_key_id,
                   repo.server.secret_access_key, signature_version="s3")
    params = {"Bucket": repo.name, "Key": "main/a.txt"}
    day = v2.generate_presigned_url("get_object", Params=params, ExpiresIn=24 * 3600)
    assert "AWSAccessKeyId=" in day and httpx.get(day).content == b"a"
    year = httpx.get(v2.generate_presigned_url("get_object", Params=params,
                                               ExpiresIn=365 * 24 * 3600))
    assert year.status_code == 400
    assert b"AuthorizationQueryParametersError" in year.content
    assert b"7 days" in year.content


def test_a_large_aws_chunk_streams_and_a_bad_signature_stores_nothing(repo: Repo) -> None:
    """A chunk of several MiB is passed on as it arrives (never held whole); when its
    signature turns out wrong at its end, the upload fails and nothing is stored."""
    chunks = [b"a" * (3 * MiB), b"b" * (2 * MiB) + b"end"]
    payload = b"".join(chunks)
    for name, tamper in (("good", False), ("bad", True)):
        path = f"/{repo.name}/main/big-{name}.bin"
        headers = sign_headers(repo.server, "PUT", path, {
            "Content-Encoding": "aws-chunked",
            "x-amz-decoded-content-length": str(len(payload))},
            "STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
        signatures = chunk_signatures(repo.server.secret_access_key, headers, chunks)
        if tamper:
            signatures[1] = "0" * 64
        body = b""
        for chunk, signature in zip([*chunks, b""], signatures, strict=True):
            body += f"{len(chunk):x};chunk-signature={signature}\r\n".encode() + chunk + b"\r\n"
        response = httpx.put(f"{repo.server.endpoint}{path}", headers=headers, content=body,
                             timeout=60)
        if tamper:
            assert response.status_code == 403 and b"SignatureDoesNotMatch" in response.content
            with pytest.raises(ObjectNotFoundError):
                repo.read("main", f"big-{name}.bin")
        else:
            assert response.status_code == 200, response.text
            assert hashlib.sha256(repo.read("main", f"big-{name}.bin")).digest() == \
                hashlib.sha256(payload).digest()


def _presigned_put(server: LiveServer, bucket: str, key: str) -> tuple[str, str]:
    """(path with query, host) of a presigned PUT URL."""
    v4 = s3_client(server.endpoint, server.access_key_id, server.secret_access_key,
                   signature_version="s3v4")
    url = urlsplit(v4.generate_presigned_url("put_object",
                                             Params={"Bucket": bucket, "Key": key},
                                             ExpiresIn=600))
    return f"{url.path}?{url.query}", url.netloc


def test_a_stalled_upload_times_out_and_stores_nothing(tmp_path: Path) -> None:
    with live_server(str(tmp_path), {"LAKEFS_HTTP_REQUEST_BODY_TIMEOUT": "1s"}) as server:
        server.services.graveler.create_repository("slow", "local://slow")
        target, host = _presigned_put(server, "slow", "main/stalled.bin")
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=20)
        try:
            conn.putrequest("PUT", target, skip_host=True, skip_accept_encoding=True)
            conn.putheader("Host", host)
            conn.putheader("Content-Length", "100")
            conn.endheaders()
            conn.send(b"0123456")  # then nothing
            started = time.monotonic()
            response = conn.getresponse()
            text = response.read()
            waited = time.monotonic() - started
        finally:
            conn.close()
        assert response.status == 400, text
        assert b"<Code>RequestTimeout</Code>" in text
        assert response.getheader("connection") == "close"
        assert waited < 15  # answered after the timeout, not when the client gives up
        with pytest.raises(ObjectNotFoundError):
            server.services.catalog.read("slow", "main", "stalled.bin")


def test_a_stranger_body_is_never_read(tmp_path: Path) -> None:
    """A request with a bad signature is refused on its headers: its body is not read."""
    with live_server(str(tmp_path), {"LAKEFS_HTTP_REQUEST_BODY_TIMEOUT": "60s"}) as server:
        server.services.graveler.create_repository("guarded", "local://guarded")
        target, host = _presigned_put(server, "guarded", "main/x.bin")
        forged = re.sub(r"X-Amz-Signature=[0-9a-f]{64}", "X-Amz-Signature=" + "0" * 64,
                        target)
        assert forged != target
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        try:
            conn.putrequest("PUT", forged, skip_host=True, skip_accept_encoding=True)
            conn.putheader("Host", host)
            conn.putheader("Content-Length", str(1 << 30))
            conn.endheaders()  # and no body at all
            response = conn.getresponse()
            text = response.read()
        finally:
            conn.close()
        assert response.status in (400, 403), text
        assert response.getheader("connection") == "close"
