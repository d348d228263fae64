"""SigV4 verification against requests signed by botocore and AWS's published examples."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import boto3
import httpx
import pytest
from botocore.auth import S3SigV4Auth, S3SigV4QueryAuth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from botocore.utils import percent_encode

from lakefs_core.auth import AuthStore
from lakefs_core.errors import (
    AuthenticationError,
    InvalidAccessKeyIdError,
    MalformedAuthorizationError,
    NotFoundError,
    RequestExpiredError,
    RequestTimeTooSkewedError,
    SignatureMismatchError,
    ValidationError,
)
from lakefs_core.gateway import sigv4

KEY, SECRET = "AKIAJTESTKEY000001Q", "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTEyMw"
HOST = "127.0.0.1:8000"
KEYS = {KEY: SECRET}


def _lookup(key: str) -> str | None:
    return KEYS.get(key)


def _object_path(bucket: str, key: str) -> str:
    # how botocore renders an S3 key into the URL ({Key+} label)
    return f"/{bucket}/{percent_encode(key, safe='/~')}"


def _signed(method: str, path_and_query: str, body: bytes = b"",
            headers: dict[str, str] | None = None, secret: str = SECRET,
            trailer_checksum: bool = False) -> AWSRequest:
    request = AWSRequest(method=method, url=f"http://{HOST}{path_and_query}", data=body,
                         headers={"Host": HOST, **(headers or {})})
    if trailer_checksum:
        # botocore then declares an aws-chunked body with a checksum trailer
        request.context["checksum"] = {
            "request_algorithm": {"in": "trailer", "name": "x-amz-checksum-crc32"}}
    S3SigV4Auth(Credentials(KEY, secret), "s3", "us-east-1").add_auth(request)
    return request


def _presigned(method: str, path_and_query: str, expires: int = 3600,
               secret: str = SECRET) -> AWSRequest:
    request = AWSRequest(method=method, url=f"http://{HOST}{path_and_query}",
                         headers={"Host": HOST})
    S3SigV4QueryAuth(Credentials(KEY, secret), "s3", "us-east-1", expires=expires).add_auth(
        request)
    return request


def _verify(request: AWSRequest, *, method: str | None = None, path: str | None = None,
            query: str | None = None, headers: dict[str, str] | None = None,
            now: datetime | None = None) -> sigv4.SignedRequest:
    url = urlsplit(request.url)
    return sigv4.verify_request(
        method or request.method, url.path if path is None else path,
        url.query if query is None else query,
        dict(request.headers.items()) if headers is None else headers, _lookup, now=now)


# --- AWS's published examples ---------------------------------------------------------------
AWS_KEY, AWS_SECRET = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
AWS_NOW = datetime(2013, 5, 24, 0, 0, 30, tzinfo=UTC)


def _aws_lookup(key: str) -> str | None:
    return {AWS_KEY: AWS_SECRET}.get(key)


def test_aws_example_header_get() -> None:
    headers = {
        "Host": "examplebucket.s3.amazonaws.com",
        "Range": "bytes=0-9",
        "x-amz-content-sha256": sigv4.EMPTY_SHA256,
        "x-amz-date": "20130524T000000Z",
        "Authorization": (
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
            "aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"),
    }
    signed = sigv4.verify_request("GET", "/test.txt", "", headers, _aws_lookup, now=AWS_NOW)
    assert signed.access_key_id == AWS_KEY
    assert signed.payload_digest == sigv4.EMPTY_SHA256
    assert signed.region == "us-east-1" and not signed.presigned
    with pytest.raises(SignatureMismatchError):
        sigv4.verify("GET", "/test.txt", "", headers | {"Range": "bytes=0-10"}, _aws_lookup,
                     now=AWS_NOW)


def test_aws_example_presigned_get() -> None:
    query = ("X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F"
             "20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&"
             "X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature="
             "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404")
    headers = {"Host": "examplebucket.s3.amazonaws.com"}
    signed = sigv4.verify_request("GET", "/test.txt", query, headers, _aws_lookup, now=AWS_NOW)
    assert signed.presigned and signed.payload_hash == sigv4.UNSIGNED_PAYLOAD
    with pytest.raises(RequestExpiredError):
        sigv4.verify("GET", "/test.txt", query, headers, _aws_lookup,
                     now=AWS_NOW + timedelta(days=1))
    with pytest.raises(SignatureMismatchError):
        sigv4.verify("GET", "/test.txt", query.replace("86400", "86401"), headers, _aws_lookup,
                     now=AWS_NOW)


def _aws_chunked_request() -> tuple[dict[str, str], bytes]:
    headers = {
        "Host": "s3.amazonaws.com",
        "x-amz-date": "20130524T000000Z",
        "x-amz-storage-class": "REDUCED_REDUNDANCY",
        "x-amz-content-sha256": sigv4.STREAMING_PAYLOAD,
        "Content-Encoding": "aws-chunked",
        "x-amz-decoded-content-length": "66560",
        "Content-Length": "66824",
        "Authorization": (
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
            "aws4_request,SignedHeaders=content-encoding;content-length;host;"
            "x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;"
            "x-amz-storage-class,Signature="
            "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"),
    }
    body = (
        b"10000;chunk-signature="
        b"ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648\r\n"
        + b"a" * 65536 + b"\r\n"
        b"400;chunk-signature="
        b"0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497\r\n"
        + b"a" * 1024 + b"\r\n"
        b"0;chunk-signature="
        b"b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9\r\n\r\n"
    )
    return headers, body


def test_aws_example_chunked_upload() -> None:
    headers, body = _aws_chunked_request()
    assert len(body) == int(headers["Content-Length"])
    signed = sigv4.verify_request("PUT", "/examplebucket/chunkObject.txt", "", headers,
                                  _aws_lookup, now=AWS_NOW)
    assert signed.streaming and signed.payload_digest is None
    assert sigv4.decode_aws_chunked(body, signed) == b"a" * 66560

    # fed in odd pieces, the decoder passes the payload on as it arrives (a chunk is
    # never held whole) and verifies each chunk's signature as the chunk ends
    decoder = sigv4.AwsChunkedDecoder(signed)
    pieces = [decoder.feed(body[i:i + 777]) for i in range(0, len(body), 777)]
    decoder.finish()
    assert b"".join(pieces) == b"a" * 66560 and decoder.done
    assert decoder.decoded_length == 66560
    assert max(len(p) for p in pieces) <= 777 and sum(1 for p in pieces if p) > 80

    tampered = body.replace(b"a" * 1024, b"a" * 1023 + b"b")
    with pytest.raises(SignatureMismatchError):
        sigv4.decode_aws_chunked(tampered, signed)
    # chunks replayed in another order break the signature chain
    first_end = body.index(b"\r\n400;")
    second_end = body.index(b"\r\n0;")
    swapped = body[first_end + 2:second_end + 2] + body[:first_end + 2] + body[second_end + 2:]
    with pytest.raises(SignatureMismatchError):
        sigv4.decode_aws_chunked(swapped, signed)
    for bad in (b";x=ad80c730", b";chunk-signature=\xc3\xbcd80c730"):
        with pytest.raises(SignatureMismatchError):
            sigv4.decode_aws_chunked(body.replace(b";chunk-signature=ad80c730", bad), signed)
    with pytest.raises(ValidationError):
        sigv4.decode_aws_chunked(body[:-2], signed)
    with pytest.raises(ValidationError):
        sigv4.decode_aws_chunked(body + b"x", signed)


def test_unsigned_trailer_body() -> None:
    request = _signed("PUT", "/repo/main/file", trailer_checksum=True, headers={
        "Content-Encoding": "aws-chunked", "x-amz-trailer": "x-amz-checksum-crc32"})
    signed = _verify(request)
    assert signed.payload_hash == sigv4.STREAMING_UNSIGNED_PAYLOAD_TRAILER
    body = b"5\r\nhello\r\n6\r\n world\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\r\n\r\n"
    decoder = sigv4.AwsChunkedDecoder(signed)
    assert decoder.feed(body) == b"hello world"
    decoder.finish()
    assert decoder.trailers == {"x-amz-checksum-crc32": "DUoRhQ=="}
    with pytest.raises(ValidationError):
        sigv4.decode_aws_chunked(b"zz\r\nhello\r\n", signed)
    with pytest.raises(ValidationError):
        sigv4.AwsChunkedDecoder(_verify(_signed("GET", "/repo/main/file")))


# --- requests signed by botocore ----------------------------------------------------------
S3_KEYS = [
    "plain.txt",
    "dir/sub dir/file with spaces.csv",
    "a+b=c&d?e;f:g@h,i'j(k)*l!m$n~o%p.txt",
    "données/ünïcödé ñ.parquet",
    "double//slash/./dot/../x",
    "tab\tand#hash",
]


@pytest.mark.parametrize("key", S3_KEYS)
def test_header_signed_object_requests(key: str) -> None:
    path = _object_path("repo", f"main/{key}")
    body = b"some bytes"
    put = _signed("PUT", path, body, {"Content-Type": "text/csv", "x-amz-meta-owner": "a  b"})
    signed = _verify(put)
    assert signed.access_key_id == KEY
    assert signed.payload_digest == hashlib.sha256(body).hexdigest()
    assert sigv4.verify("GET", path, "", dict(_signed("GET", path).headers.items()),
                        _lookup) == KEY


@pytest.mark.parametrize("query", [
    {"list-type": "2", "prefix": "main/dir a/", "delimiter": "/"},
    {"list-type": "2", "continuation-token": "a+b/c=d==", "start-after": "main/ü"},
    {"uploads": ""},
    {"partNumber": "3", "uploadId": "x~y_z.w-v"},
])
def test_header_signed_queries(query: dict[str, str]) -> None:
    request = AWSRequest(method="GET", url=f"http://{HOST}/repo", params=query,
                         headers={"Host": HOST})
    S3SigV4Auth(Credentials(KEY, SECRET), "s3", "us-east-1").add_auth(request)
    prepared = request.prepare()
    url = urlsplit(prepared.url)
    assert sigv4.verify("GET", url.path, url.query, dict(prepared.headers.items()),
                        _lookup) == KEY
    # the same, with the query already split into decoded pairs (AWSRequest form-encodes)
    assert sigv4.verify("GET", url.path, parse_qsl(url.query, keep_blank_values=True),
                        dict(prepared.headers.items()), _lookup) == KEY


@pytest.mark.parametrize("change", [
    "method", "path", "query-value", "query-added", "header", "payload-hash", "signature",
    "secret", "path-case",
])
def test_tampered_header_requests_fail(change: str) -> None:
    path = _object_path("repo", "main/data/file.csv")
    request = _signed("PUT", path + "?tagging=a", b"payload", {"Content-Type": "text/csv"})
    headers = dict(request.headers.items())
    kwargs: dict[str, object] = {}
    if change == "method":
        kwargs["method"] = "POST"
    elif change == "path":
        kwargs["path"] = _object_path("repo", "main/data/file2.csv")
    elif change == "query-value":
        kwargs["query"] = "tagging=b"
    elif change == "query-added":
        kwargs["query"] = "tagging=a&versionId=1"
    elif change == "header":
        kwargs["headers"] = headers | {"Content-Type": "text/plain"}
    elif change == "payload-hash":
        kwargs["headers"] = headers | {
            "X-Amz-Content-SHA256": hashlib.sha256(b"other").hexdigest()}
    elif change == "signature":
        auth = headers["Authorization"]
        last = "0" if auth[-1] != "0" else "1"
        kwargs["headers"] = headers | {"Authorization": auth[:-1] + last}
    elif change == "secret":
        request = _signed("PUT", path + "?tagging=a", b"payload", {"Content-Type": "text/csv"},
                          secret=SECRET + "x")
    elif change == "path-case":
        kwargs["path"] = path.replace("data/", "Data/")
    with pytest.raises(SignatureMismatchError):
        _verify(request, **kwargs)  # type: ignore[arg-type]


def test_paths_signed_in_either_encoding() -> None:
    # a client that sends "!" as is but signs the strict encoding
    strict = _signed("GET", "/repo/main/a%21b%2Ac")
    assert _verify(strict, path="/repo/main/a!b*c").access_key_id == KEY
    # a client that signs exactly the bytes it sends, "%2F" inside a segment included
    raw = _signed("GET", "/repo/main/a%2Fb")
    assert _verify(raw).access_key_id == KEY


def test_repeated_and_spaced_header_values() -> None:
    request = _signed("GET", "/repo/main/x", headers={"x-amz-meta-list": "a,   b"})
    pairs = [(k, v) for k, v in request.headers.items()]
    assert sigv4.verify("GET", "/repo/main/x", "", pairs, _lookup) == KEY
    doubled = [*pairs, ("X-Amz-Meta-List", "c")]
    with pytest.raises(SignatureMismatchError):
        sigv4.verify("GET", "/repo/main/x", "", doubled, _lookup)


def test_header_date_must_be_near_the_clock() -> None:
    request = _signed("GET", "/repo/main/x")
    now = datetime.now(UTC)
    _verify(request, now=now + timedelta(minutes=14))
    with pytest.raises(RequestTimeTooSkewedError):
        _verify(request, now=now + timedelta(minutes=16))
    with pytest.raises(RequestTimeTooSkewedError):
        _verify(request, now=now - timedelta(minutes=16))


def test_presigned_requests() -> None:
    path = _object_path("repo", "main/dir/ü file.txt")
    request = _presigned("GET", path + "?response-content-type=text%2Fplain", expires=60)
    signed = _verify(request, headers={"Host": HOST})
    assert signed.presigned and signed.payload_hash == sigv4.UNSIGNED_PAYLOAD
    now = datetime.now(UTC)
    _verify(request, headers={"Host": HOST}, now=now + timedelta(seconds=50))
    with pytest.raises(RequestExpiredError, match="expired"):
        _verify(request, headers={"Host": HOST}, now=now + timedelta(seconds=70))
    with pytest.raises(RequestExpiredError, match="not valid yet"):
        _verify(request, headers={"Host": HOST}, now=now - timedelta(minutes=20))
    # headers that were not signed may vary; the signed query may not
    _verify(request, headers={"Host": HOST, "User-Agent": "curl"})
    url = urlsplit(request.url)
    with pytest.raises(SignatureMismatchError):
        _verify(request, query=url.query.replace("text%2Fplain", "text%2Fhtml"))
    with pytest.raises(SignatureMismatchError):
        _verify(request, headers={"Host": "evil.example.com"})
    with pytest.raises(SignatureMismatchError):
        _verify(_presigned("GET", path, secret="wrong"), headers={"Host": HOST})


@pytest.mark.parametrize("mutate, error", [
    (lambda q: q.replace("X-Amz-Expires=60", "X-Amz-Expires=604801"),
     MalformedAuthorizationError),
    (lambda q: q.replace("X-Amz-Expires=60", "X-Amz-Expires=soon"),
     MalformedAuthorizationError),
    (lambda q: q.replace("AWS4-HMAC-SHA256", "AWS4-HMAC-SHA512"), MalformedAuthorizationError),
    (lambda q: "&".join(p for p in q.split("&") if not p.startswith("X-Amz-Signature=")),
     MalformedAuthorizationError),
    (lambda q: q.replace("aws4_request", "aws5_request"), MalformedAuthorizationError),
    (lambda q: q.replace(KEY, "AKIAUNKNOWN"), InvalidAccessKeyIdError),
])
def test_bad_presigned_queries(mutate: object, error: type[Exception]) -> None:
    request = _presigned("GET", "/repo/main/x", expires=60)
    query = mutate(urlsplit(request.url).query)  # type: ignore[operator]
    with pytest.raises(error):
        _verify(request, query=query, headers={"Host": HOST})


def test_bad_authorization_headers() -> None:
    request = _signed("GET", "/repo/main/x")
    headers = dict(request.headers.items())
    auth = headers["Authorization"]
    cases: list[tuple[dict[str, str], type[AuthenticationError]]] = [
        ({k: v for k, v in headers.items() if k != "Authorization"},
         MalformedAuthorizationError),
        (headers | {"Authorization": "AWS " + KEY + ":c2lnbmF0dXJl"},
         MalformedAuthorizationError),
        (headers | {"Authorization": auth.split(", Signature=")[0]},
         MalformedAuthorizationError),
        (headers | {"Authorization": auth.replace("/us-east-1/", "/")},
         MalformedAuthorizationError),
        (headers | {"X-Amz-Date": "yesterday"}, MalformedAuthorizationError),
        (headers | {"X-Amz-Content-SHA256": "not-a-hash"}, MalformedAuthorizationError),
        (headers | {"Authorization": auth.replace(KEY, "AKIAUNKNOWN")}, InvalidAccessKeyIdError),
        (headers | {"Authorization": auth[:-4] + "ü" * 4}, MalformedAuthorizationError),
        (headers | {"Authorization": auth + "00"}, MalformedAuthorizationError),
        # the scope's day must be the request's day
        (headers | {"Authorization": auth.replace(headers["X-Amz-Date"][:8], "20000101")},
         MalformedAuthorizationError),
    ]
    for bad, error in cases:
        with pytest.raises(error):
            sigv4.verify("GET", "/repo/main/x", "", bad, _lookup)


def test_generic_sigv4_without_payload_hash_header() -> None:
    # non-S3 SigV4 signers sign the body's hash without sending it in a header
    request = AWSRequest(method="PUT", url=f"http://{HOST}/repo/main/x", data=b"data",
                         headers={"Host": HOST})
    SigV4Auth(Credentials(KEY, SECRET), "s3", "us-east-1").add_auth(request)
    headers = dict(request.headers.items())
    assert "X-Amz-Content-SHA256" not in headers
    with pytest.raises(MalformedAuthorizationError):
        sigv4.verify("PUT", "/repo/main/x", "", headers, _lookup)
    assert sigv4.verify("PUT", "/repo/main/x", "", headers, _lookup,
                        payload_sha256=hashlib.sha256(b"data").hexdigest()) == KEY
    with pytest.raises(SignatureMismatchError):
        sigv4.verify("PUT", "/repo/main/x", "", headers, _lookup,
                     payload_sha256=hashlib.sha256(b"other").hexdigest())


def test_lookup_errors_mean_unknown_key() -> None:
    request = _signed("GET", "/repo/main/x")

    def raising(key: str) -> str:
        raise NotFoundError(key)

    with pytest.raises(InvalidAccessKeyIdError):
        sigv4.verify("GET", "/repo/main/x", "", dict(request.headers.items()), raising)


def test_helpers() -> None:
    assert sigv4.parse_query("a=1+2&b=&c&d=%2B%20") == [
        ("a", "1+2"), ("b", ""), ("c", ""), ("d", "+ ")]
    assert sigv4.is_signed({"Authorization": "AWS4-HMAC-SHA256 Credential=x"}, "")
    assert sigv4.is_signed({}, "X-Amz-Algorithm=AWS4-HMAC-SHA256")
    assert not sigv4.is_signed({"Authorization": "Basic eDp5"}, "a=b")


# --- over the wire, from a real boto3 client --------------------------------------------------
class _GatewayStub(BaseHTTPRequestHandler):
    """Answers like an S3 endpoint that only checks signatures."""

    protocol_version = "HTTP/1.1"  # answers "Expect: 100-continue" at once
    lookup: object = None
    seen: list[tuple[str, str, bytes]] = []

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _reply(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None,
               ) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        path, _, query = self.path.partition("?")
        codes = {InvalidAccessKeyIdError: (403, "InvalidAccessKeyId"),
                 SignatureMismatchError: (403, "SignatureDoesNotMatch"),
                 RequestExpiredError: (403, "AccessDenied"),
                 RequestTimeTooSkewedError: (403, "RequestTimeTooSkewed"),
                 MalformedAuthorizationError: (400, "AuthorizationHeaderMalformed")}
        try:
            signed = sigv4.verify_request(self.command, path, query, self.headers.items(),
                                          self.lookup)  # type: ignore[arg-type]
            if signed.streaming:
                body = sigv4.decode_aws_chunked(body, signed)
            elif signed.payload_digest not in (None, hashlib.sha256(body).hexdigest()):
                raise SignatureMismatchError("body does not match x-amz-content-sha256")
        except AuthenticationError as exc:
            status, code = codes[type(exc)]
            self._reply(status, f"<Error><Code>{code}</Code><Message>{exc}</Message>"
                        "</Error>".encode(), {"Content-Type": "application/xml"})
            return
        self.seen.append((self.command, self.path, body))
        if self.command == "DELETE":
            self._reply(204)
        elif self.command == "PUT":
            self._reply(200, headers={"ETag": f'"{hashlib.md5(body).hexdigest()}"'})
        elif "list-type=2" in query:
            self._reply(200, b'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult '
                        b'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>repo</Name>'
                        b"<KeyCount>0</KeyCount><MaxKeys>1000</MaxKeys>"
                        b"<IsTruncated>false</IsTruncated></ListBucketResult>",
                        {"Content-Type": "application/xml"})
        else:
            self._reply(200, b"hello", {"ETag": '"abc"', "Content-Type": "text/plain"})

    do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = _handle


@dataclass
class Gateway:
    endpoint: str
    store: AuthStore
    seen: list[tuple[str, str, bytes]]


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Gateway]:
    store = AuthStore(f"sqlite:///{tmp_path / 'auth.db'}", "gateway-test-key")

    def lookup(key: str) -> str:
        return store.get_credentials(key).secret

    seen: list[tuple[str, str, bytes]] = []
    handler = type("Handler", (_GatewayStub,), {"lookup": staticmethod(lookup), "seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Gateway(f"http://127.0.0.1:{server.server_address[1]}", store, seen)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        store.close()


def _client(endpoint: str, key: str, secret: str) -> Any:
    return boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=secret,
        region_name="us-east-1",
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                      retries={"max_attempts": 1}))


def test_boto3_over_the_wire(gateway: Gateway) -> None:
    cred = gateway.store.setup_admin("admin")
    s3 = _client(gateway.endpoint, cred.access_key_id, cred.secret)
    for key in S3_KEYS:
        s3.put_object(Bucket="repo", Key=f"main/{key}", Body=b"payload " + key.encode())
        assert s3.get_object(Bucket="repo", Key=f"main/{key}", Range="bytes=0-2")[
            "Body"].read() == b"hello"
        s3.head_object(Bucket="repo", Key=f"main/{key}")
    s3.list_objects_v2(Bucket="repo", Prefix="main/dir a/", Delimiter="/",
                       StartAfter="main/ü+=")
    s3.delete_object(Bucket="repo", Key="main/a b")
    puts = [body for method, _, body in gateway.seen if method == "PUT"]
    assert puts == [b"payload " + k.encode() for k in S3_KEYS]
    assert len(gateway.seen) == 3 * len(S3_KEYS) + 2


def test_boto3_presigned_urls_over_the_wire(gateway: Gateway) -> None:
    cred = gateway.store.setup_admin("admin")
    s3 = _client(gateway.endpoint, cred.access_key_id, cred.secret)
    url = s3.generate_presigned_url(
        "get_object", Params={"Bucket": "repo", "Key": "main/dir/ü x+y.txt"}, ExpiresIn=300)
    assert httpx.get(url).status_code == 200
    response = httpx.get(url.replace("X-Amz-Expires=300", "X-Amz-Expires=301"))
    assert response.status_code == 403 and b"SignatureDoesNotMatch" in response.content
    put_url = s3.generate_presigned_url("put_object",
                                        Params={"Bucket": "repo", "Key": "main/up.bin"})
    assert httpx.put(put_url, content=b"presigned body").status_code == 200
    assert gateway.seen[-1][0] == "PUT" and gateway.seen[-1][2] == b"presigned body"
    assert len(gateway.seen) == 2


def test_boto3_with_bad_credentials(gateway: Gateway) -> None:
    cred = gateway.store.setup_admin("admin")
    with pytest.raises(ClientError) as wrong_secret:
        wrong = cred.secret[:-1] + ("y" if cred.secret.endswith("x") else "x")
        _client(gateway.endpoint, cred.access_key_id, wrong).get_object(
            Bucket="repo", Key="main/x")
    assert wrong_secret.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
    with pytest.raises(ClientError) as unknown:
        _client(gateway.endpoint, "AKIAJUNKNOWNKEY0000Q", cred.secret).get_object(
            Bucket="repo", Key="main/x")
    assert unknown.value.response["Error"]["Code"] == "InvalidAccessKeyId"
    gateway.store.delete_credentials("admin", cred.access_key_id)
    with pytest.raises(ClientError) as deleted:
        _client(gateway.endpoint, cred.access_key_id, cred.secret).put_object(
            Bucket="repo", Key="main/x", Body=b"x")
    assert deleted.value.response["Error"]["Code"] == "InvalidAccessKeyId"
    assert gateway.seen == []


def test_date_header_instead_of_x_amz_date() -> None:
    # botocore signs with the Date header when the request has one
    request = _signed("GET", "/repo/main/x", headers={"Date": "Mon, 01 Jan 2001 00:00:00 GMT"})
    headers = dict(request.headers.items())
    assert "X-Amz-Date" not in headers and headers["Date"].endswith("-0000")
    assert _verify(request).access_key_id == KEY
    with pytest.raises(SignatureMismatchError):
        date = datetime.now(UTC) - timedelta(seconds=5)
        _verify(request, headers=headers | {"Date": date.strftime("%a, %d %b %Y %H:%M:%S GMT")})
