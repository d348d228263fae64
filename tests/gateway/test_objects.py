"""Object operations through the S3 gateway with boto3: put, get, head, copy, delete."""

from __future__ import annotations

import base64
import hashlib
import zlib
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from botocore.exceptions import ClientError

from lakefs_core.errors import ObjectNotFoundError
from tests.gateway.conftest import MakeUser, Repo, chunk_signatures, s3_client, sign_headers


def _code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return str(exc.value.response["Error"]["Code"])


def test_put_get_head_round_trip(repo: Repo) -> None:
    s3 = repo.s3
    body = b"hello gateway\n" * 100
    put = s3.put_object(Bucket=repo.name, Key="main/dir/hello.txt", Body=body,
                        ContentType="text/plain", Metadata={"Owner": "alice", "k": "v"})
    md5 = hashlib.md5(body).hexdigest()
    assert put["ETag"] == f'"{md5}"'

    got = s3.get_object(Bucket=repo.name, Key="main/dir/hello.txt")
    assert got["Body"].read() == body
    assert got["ETag"] == f'"{md5}"'
    assert got["ContentType"] == "text/plain"
    assert got["ContentLength"] == len(body)
    assert got["Metadata"] == {"owner": "alice", "k": "v"}
    assert abs((datetime.now(UTC) - got["LastModified"]).total_seconds()) < 120

    head = s3.head_object(Bucket=repo.name, Key="main/dir/hello.txt")
    assert head["ETag"] == got["ETag"] and head["ContentLength"] == len(body)
    assert head["LastModified"] == got["LastModified"]
    assert head["Metadata"] == got["Metadata"]

    # the same object through the engine: same bytes, same user metadata
    assert repo.read("main", "dir/hello.txt") == body
    entry = repo.server.services.graveler.get_entry(repo.name, "main", "dir/hello.txt")
    assert entry.etag == md5 and dict(entry.metadata) == {"owner": "alice", "k": "v"}


def test_keys_with_special_characters(repo: Repo) -> None:
    keys = ["main/a b/c+d=e.txt", "main/ünïcødé/файл", "main/x%20y", "main/q?s&t#u"]
    for key in keys:
        repo.s3.put_object(Bucket=repo.name, Key=key, Body=key.encode())
    for key in keys:
        assert repo.s3.get_object(Bucket=repo.name, Key=key)["Body"].read() == key.encode()
        assert repo.read("main", key.split("/", 1)[1]) == key.encode()
    listed = repo.s3.list_objects_v2(Bucket=repo.name, Prefix="main/")
    assert sorted(o["Key"] for o in listed["Contents"]) == sorted(keys)


def test_empty_object(repo: Repo) -> None:
    repo.s3.put_object(Bucket=repo.name, Key="main/empty", Body=b"")
    got = repo.s3.get_object(Bucket=repo.name, Key="main/empty")
    assert got["Body"].read() == b"" and got["ContentLength"] == 0
    assert got["ETag"] == f'"{hashlib.md5(b"").hexdigest()}"'


def test_range_reads(repo: Repo) -> None:
    data = bytes(range(256)) * 40
    repo.s3.put_object(Bucket=repo.name, Key="main/r.bin", Body=data)
    cases = {"bytes=0-9": (0, 9), "bytes=100-": (100, len(data) - 1),
             "bytes=-16": (len(data) - 16, len(data) - 1),
             "bytes=10000-20000": (10000, len(data) - 1)}
    for spec, (first, last) in cases.items():
        got = repo.s3.get_object(Bucket=repo.name, Key="main/r.bin", Range=spec)
        assert got["ResponseMetadata"]["HTTPStatusCode"] == 206
        assert got["Body"].read() == data[first:last + 1]
        assert got["ContentRange"] == f"bytes {first}-{last}/{len(data)}"
        assert got["ContentLength"] == last - first + 1
    head = repo.s3.head_object(Bucket=repo.name, Key="main/r.bin", Range="bytes=1-2")
    assert head["ContentLength"] == 2
    for spec in ("bytes=10240-", "bytes=99999-100000"):
        with pytest.raises(ClientError) as exc:
            repo.s3.get_object(Bucket=repo.name, Key="main/r.bin", Range=spec)
        assert _code(exc) == "InvalidRange"
        assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 416
        assert exc.value.response["ResponseMetadata"]["HTTPHeaders"][
            "content-range"] == f"bytes */{len(data)}"


def test_read_by_commit_and_tag(repo: Repo) -> None:
    repo.s3.put_object(Bucket=repo.name, Key="main/f", Body=b"v1")
    first = repo.commit("v1")
    repo.server.services.graveler.create_tag(repo.name, "v1", first)
    repo.s3.put_object(Bucket=repo.name, Key="main/f", Body=b"v2")
    assert repo.s3.get_object(Bucket=repo.name, Key="main/f")["Body"].read() == b"v2"
    assert repo.s3.get_object(Bucket=repo.name, Key=f"{first}/f")["Body"].read() == b"v1"
    assert repo.s3.get_object(Bucket=repo.name, Key="v1/f")["Body"].read() == b"v1"
    assert repo.s3.get_object(Bucket=repo.name, Key="main@/f")["Body"].read() == b"v1"
    # a tag is not a branch: writing to it fails and the tag still reads v1
    with pytest.raises(ClientError) as exc:
        repo.s3.put_object(Bucket=repo.name, Key="v1/f", Body=b"nope")
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    assert repo.s3.get_object(Bucket=repo.name, Key="v1/f")["Body"].read() == b"v1"


def test_missing_objects_and_buckets(repo: Repo) -> None:
    s3 = repo.s3
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=repo.name, Key="main/nope")
    assert _code(exc) == "NoSuchKey"
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    with pytest.raises(ClientError) as exc:
        s3.head_object(Bucket=repo.name, Key="main/nope")
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket="no-such-repo", Key="main/x")
    assert _code(exc) == "NoSuchBucket"
    with pytest.raises(ClientError) as exc:
        s3.head_bucket(Bucket="no-such-repo")
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=repo.name, Key="no-such-branch/x")
    assert _code(exc) == "NoSuchKey"
    # the error document carries code, message, resource and request id
    url = s3.generate_presigned_url("get_object", Params={"Bucket": repo.name, "Key": "main/x"})
    response = httpx.get(url)
    assert response.status_code == 404
    assert b"<Code>NoSuchKey</Code>" in response.content
    assert f"<Resource>/{repo.name}/main/x</Resource>".encode() in response.content
    assert response.headers["x-amz-request-id"].encode() in response.content


def test_list_and_head_buckets(repo: Repo) -> None:
    names = [b["Name"] for b in repo.s3.list_buckets()["Buckets"]]
    assert repo.name in names
    assert repo.s3.head_bucket(Bucket=repo.name)["ResponseMetadata"]["HTTPStatusCode"] == 200
    location = repo.s3.get_bucket_location(Bucket=repo.name)
    assert location.get("LocationConstraint") is None  # us-east-1
    with pytest.raises(ClientError) as exc:
        repo.s3.create_bucket(Bucket="new-bucket")
    assert _code(exc) == "NotImplemented"


def test_if_none_match_star(repo: Repo) -> None:
    repo.s3.put_object(Bucket=repo.name, Key="main/once", Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError) as exc:
        repo.s3.put_object(Bucket=repo.name, Key="main/once", Body=b"second", IfNoneMatch="*")
    assert _code(exc) == "PreconditionFailed"
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert repo.read("main", "once") == b"first"


def test_if_match_write(repo: Repo) -> None:
    with pytest.raises(ClientError) as exc:
        repo.s3.put_object(Bucket=repo.name, Key="main/cas", Body=b"x", IfMatch='"abc"')
    assert _code(exc) == "PreconditionFailed"
    first = repo.s3.put_object(Bucket=repo.name, Key="main/cas", Body=b"first")
    with pytest.raises(ClientError) as exc:
        repo.s3.put_object(Bucket=repo.name, Key="main/cas", Body=b"lost",
                           IfMatch='"0123456789abcdef0123456789abcdef"')
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert repo.read("main", "cas") == b"first"
    repo.s3.put_object(Bucket=repo.name, Key="main/cas", Body=b"second", IfMatch=first["ETag"])
    assert repo.read("main", "cas") == b"second"


def test_conditional_multipart_completion(repo: Repo) -> None:
    repo.s3.put_object(Bucket=repo.name, Key="main/mp", Body=b"already here")
    upload = repo.s3.create_multipart_upload(Bucket=repo.name, Key="main/mp")["UploadId"]
    part = repo.s3.upload_part(Bucket=repo.name, Key="main/mp", UploadId=upload, PartNumber=1,
                               Body=b"replacement")
    parts = {"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]}
    with pytest.raises(ClientError) as exc:
        repo.s3.complete_multipart_upload(Bucket=repo.name, Key="main/mp", UploadId=upload,
                                          MultipartUpload=parts, IfNoneMatch="*")
    assert _code(exc) == "PreconditionFailed"
    assert repo.read("main", "mp") == b"already here"
    current = repo.s3.head_object(Bucket=repo.name, Key="main/mp")["ETag"]
    repo.s3.complete_multipart_upload(Bucket=repo.name, Key="main/mp", UploadId=upload,
                                      MultipartUpload=parts, IfMatch=current)
    assert repo.read("main", "mp") == b"replacement"


def test_conditional_reads(repo: Repo) -> None:
    put = repo.s3.put_object(Bucket=repo.name, Key="main/c", Body=b"data")
    got = repo.s3.get_object(Bucket=repo.name, Key="main/c", IfMatch=put["ETag"])
    assert got["Body"].read() == b"data"
    with pytest.raises(ClientError) as exc:
        repo.s3.get_object(Bucket=repo.name, Key="main/c", IfMatch='"0000"')
    assert _code(exc) == "PreconditionFailed"
    with pytest.raises(ClientError) as exc:
        repo.s3.get_object(Bucket=repo.name, Key="main/c", IfNoneMatch=put["ETag"])
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 304


def test_copy_within_and_across_repositories(repo: Repo) -> None:
    s3, graveler = repo.s3, repo.server.services.graveler
    s3.put_object(Bucket=repo.name, Key="main/src.txt", Body=b"source bytes",
                  ContentType="text/plain", Metadata={"a": "1"})
    copied = s3.copy_object(Bucket=repo.name, Key="main/copy.txt",
                            CopySource={"Bucket": repo.name, "Key": "main/src.txt"})
    assert copied["CopyObjectResult"]["ETag"] == f'"{hashlib.md5(b"source bytes").hexdigest()}"'
    head = s3.head_object(Bucket=repo.name, Key="main/copy.txt")
    assert head["ContentType"] == "text/plain" and head["Metadata"] == {"a": "1"}
    assert repo.read("main", "copy.txt") == b"source bytes"
    # the copy has its own data object
    src = graveler.get_entry(repo.name, "main", "src.txt")
    dst = graveler.get_entry(repo.name, "main", "copy.txt")
    assert src.address != dst.address

    s3.copy_object(Bucket=repo.name, Key="main/replaced.txt", MetadataDirective="REPLACE",
                   CopySource=f"/{repo.name}/main/src.txt", Metadata={"b": "2"},
                   ContentType="application/json")
    head = s3.head_object(Bucket=repo.name, Key="main/replaced.txt")
    assert head["Metadata"] == {"b": "2"} and head["ContentType"] == "application/json"

    other = f"{repo.name}-other"
    graveler.create_repository(other, f"local://{other}")
    s3.copy_object(Bucket=other, Key="main/in-other.txt",
                   CopySource={"Bucket": repo.name, "Key": "main/src.txt"})
    assert s3.get_object(Bucket=other, Key="main/in-other.txt")["Body"].read() == b"source bytes"

    with pytest.raises(ClientError) as exc:
        s3.copy_object(Bucket=repo.name, Key="main/x",
                       CopySource={"Bucket": repo.name, "Key": "main/missing"})
    assert _code(exc) == "NoSuchKey"


def test_delete_object_and_objects(repo: Repo) -> None:
    s3, graveler = repo.s3, repo.server.services.graveler
    for i in range(5):
        s3.put_object(Bucket=repo.name, Key=f"main/d/{i}", Body=b"x")
    repo.commit("five objects")
    assert s3.delete_object(Bucket=repo.name, Key="main/d/0")[
        "ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(ObjectNotFoundError):
        graveler.get_entry(repo.name, "main", "d/0")
    # deleting what is not there succeeds, as in S3
    s3.delete_object(Bucket=repo.name, Key="main/d/never")

    result = s3.delete_objects(Bucket=repo.name, Delete={"Objects": [
        {"Key": "main/d/1"}, {"Key": "main/d/2"}, {"Key": "main/d/nothing"},
        {"Key": "no-such-branch/d/3"}]})
    assert sorted(d["Key"] for d in result["Deleted"]) == ["main/d/1", "main/d/2",
                                                           "main/d/nothing"]
    assert [(e["Key"], e["Code"]) for e in result["Errors"]] == [
        ("no-such-branch/d/3", "NoSuchKey")]
    quiet = s3.delete_objects(Bucket=repo.name, Delete={
        "Objects": [{"Key": "main/d/3"}], "Quiet": True})
    assert "Deleted" not in quiet and "Errors" not in quiet
    remaining = s3.list_objects_v2(Bucket=repo.name, Prefix="main/d/")["Contents"]
    assert [o["Key"] for o in remaining] == ["main/d/4"]
    # the deletes are staged: the commit still has every object
    assert repo.read("main@", "d/0") == b"x"


def test_virtual_host_addressing(repo: Repo) -> None:
    repo.s3.put_object(Bucket=repo.name, Key="main/vh.txt", Body=b"virtual")
    port = repo.server.port
    client = s3_client(f"http://s3.local.lakefs.io:{port}", repo.server.access_key_id,
                       repo.server.secret_access_key, addressing="virtual")

    def route_to_loopback(request: Any, **_: Any) -> None:
        # keep the virtual host in the (signed) Host header, connect to loopback
        host = urlsplit(request.url).netloc
        assert host == f"{repo.name}.s3.local.lakefs.io:{port}"
        request.headers["Host"] = host
        request.url = request.url.replace(host, f"127.0.0.1:{port}", 1)

    client.meta.events.register_first("before-sign.s3", route_to_loopback)
    assert client.get_object(Bucket=repo.name, Key="main/vh.txt")["Body"].read() == b"virtual"
    client.put_object(Bucket=repo.name, Key="main/vh2.txt", Body=b"two")
    assert repo.read("main", "vh2.txt") == b"two"
    listed = client.list_objects_v2(Bucket=repo.name, Prefix="main/vh")
    assert [o["Key"] for o in listed["Contents"]] == ["main/vh.txt", "main/vh2.txt"]
    presigner = s3_client(f"http://s3.local.lakefs.io:{port}", repo.server.access_key_id,
                          repo.server.secret_access_key, addressing="virtual")
    url = presigner.generate_presigned_url("get_object",
                                           Params={"Bucket": repo.name, "Key": "main/vh.txt"})
    host = urlsplit(url).netloc
    response = httpx.get(url.replace(host, f"127.0.0.1:{port}", 1), headers={"Host": host})
    assert response.status_code == 200 and response.content == b"virtual", (url, response.text)


def test_payload_hash_mismatch_stores_nothing(repo: Repo) -> None:
    path = f"/{repo.name}/main/tampered"
    headers = sign_headers(repo.server, "PUT", path, {}, hashlib.sha256(b"signed").hexdigest(),
                           b"signed")
    response = httpx.put(f"{repo.server.endpoint}{path}", content=b"sent", headers=headers)
    assert response.status_code == 400
    assert b"<Code>XAmzContentSHA256Mismatch</Code>" in response.content
    with pytest.raises(ObjectNotFoundError):
        repo.server.services.graveler.get_entry(repo.name, "main", "tampered")


def test_checksum_headers_are_verified(repo: Repo) -> None:
    body = b"checksummed"
    crc = base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()
    repo.s3.put_object(Bucket=repo.name, Key="main/ok", Body=body, ChecksumCRC32=crc)
    assert repo.read("main", "ok") == body
    path = f"/{repo.name}/main/bad-crc"
    wrong = base64.b64encode(b"\0\0\0\0").decode()
    headers = sign_headers(repo.server, "PUT", path, {"x-amz-checksum-crc32": wrong},
                           hashlib.sha256(body).hexdigest(), body)
    response = httpx.put(f"{repo.server.endpoint}{path}", content=body, headers=headers)
    assert response.status_code == 400 and b"<Code>BadDigest</Code>" in response.content
    md5 = base64.b64encode(hashlib.md5(b"other").digest()).decode()
    with pytest.raises(ClientError) as exc:
        repo.s3.put_object(Bucket=repo.name, Key="main/bad-md5", Body=body, ContentMD5=md5)
    assert _code(exc) == "BadDigest"
    with pytest.raises(ObjectNotFoundError):
        repo.server.services.graveler.get_entry(repo.name, "main", "bad-crc")
    with pytest.raises(ObjectNotFoundError):
        repo.server.services.graveler.get_entry(repo.name, "main", "bad-md5")


def _chunked(chunks: list[bytes], signatures: list[str] | None,
             trailer: str = "") -> bytes:
    out = b""
    for i, chunk in enumerate([*chunks, b""]):
        extension = f";chunk-signature={signatures[i]}" if signatures else ""
        out += f"{len(chunk):x}{extension}\r\n".encode() + chunk
        if chunk or not trailer:
            out += b"\r\n"
    if trailer:
        out += trailer.encode() + b"\r\n\r\n"
    return out


def test_aws_chunked_signed_upload(repo: Repo) -> None:
    chunks = [b"a" * 65536, b"b" * 65536, b"tail"]
    payload = b"".join(chunks)
    path = f"/{repo.name}/main/chunked.bin"
    headers = sign_headers(repo.server, "PUT", path, {
        "Content-Encoding": "aws-chunked",
        "x-amz-decoded-content-length": str(len(payload))},
        "STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
    signatures = chunk_signatures(repo.server.secret_access_key, headers, chunks)
    response = httpx.put(f"{repo.server.endpoint}{path}", headers=headers,
                         content=_chunked(chunks, signatures))
    assert response.status_code == 200, response.text
    assert response.headers["etag"] == f'"{hashlib.md5(payload).hexdigest()}"'
    assert repo.read("main", "chunked.bin") == payload

    # a chunk signed with the wrong chain is refused and nothing is stored
    bad = [signatures[1], signatures[0], *signatures[2:]]
    path = f"/{repo.name}/main/chunked-bad.bin"
    headers = sign_headers(repo.server, "PUT", path, {
        "Content-Encoding": "aws-chunked",
        "x-amz-decoded-content-length": str(len(payload))},
        "STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
    response = httpx.put(f"{repo.server.endpoint}{path}", headers=headers,
                         content=_chunked(chunks, bad))
    assert response.status_code == 403 and b"SignatureDoesNotMatch" in response.content
    with pytest.raises(ObjectNotFoundError):
        repo.server.services.graveler.get_entry(repo.name, "main", "chunked-bad.bin")


def test_aws_chunked_unsigned_trailer_upload(repo: Repo) -> None:
    # what boto3 sends over https: unsigned chunks with a CRC32 trailer
    chunks = [b"hello ", b"trailer"]
    payload = b"".join(chunks)
    crc = base64.b64encode(zlib.crc32(payload).to_bytes(4, "big")).decode()
    for name, trailer_value, status in [("good", crc, 200), ("bad", "AAAAAA==", 400)]:
        path = f"/{repo.name}/main/trailer-{name}"
        headers = sign_headers(repo.server, "PUT", path, {
            "Content-Encoding": "aws-chunked", "x-amz-trailer": "x-amz-checksum-crc32",
            "x-amz-decoded-content-length": str(len(payload))},
            "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
        body = _chunked(chunks, None, trailer=f"x-amz-checksum-crc32:{trailer_value}")
        response = httpx.put(f"{repo.server.endpoint}{path}", headers=headers, content=body)
        assert response.status_code == status, response.text
    assert repo.read("main", "trailer-good") == payload
    with pytest.raises(ObjectNotFoundError):
        repo.server.services.graveler.get_entry(repo.name, "main", "trailer-bad")


def test_a_document_type_declaration_is_refused_in_any_encoding(repo: Repo) -> None:
    repo.s3.put_object(Bucket=repo.name, Key="main/keep", Body=b"kept")
    document = ('<?xml version="1.0" encoding="UTF-16"?>'
                '<!DOCTYPE Delete [<!ENTITY k "main/keep">]>'
                '<Delete><Object><Key>&k;</Key></Object></Delete>')
    for body in (document.encode("utf-16"), document.replace("UTF-16", "UTF-8").encode()):
        path = f"/{repo.name}?delete"
        headers = sign_headers(repo.server, "POST", path, {
            "Content-MD5": base64.b64encode(hashlib.md5(body).digest()).decode()},
            hashlib.sha256(body).hexdigest(), body)
        response = httpx.post(f"{repo.server.endpoint}{path}", content=body, headers=headers)
        assert response.status_code == 400, response.text
        assert b"<Code>MalformedXML</Code>" in response.content
    assert repo.read("main", "keep") == b"kept"


def test_no_object_runs_script_in_the_servers_origin(repo: Repo) -> None:
    """A repository writer's page, opened by a signed-in admin, must not run in the
    origin of the UI: a pre-signed link and the API answer it as data."""
    server = repo.server
    key, secret = server.repo_writer("writer", repo.name)
    writer = s3_client(server.endpoint, key, secret, signature_version="s3v4")
    page = b"<html><script>fetch('/ui/repositories')</script></html>"
    writer.put_object(Bucket=repo.name, Key="main/page.html", Body=page, ContentType="text/html")
    with httpx.Client(base_url=server.api, auth=(key, secret)) as api:
        api.post(f"/repositories/{repo.name}/branches/main/objects", params={"path": "api.svg"},
                 content=b"<svg xmlns='http://www.w3.org/2000/svg'><script>1</script></svg>",
                 headers={"content-type": "image/svg+xml"}).raise_for_status()
        answers = [api.get(f"/repositories/{repo.name}/refs/main/objects",
                           params={"path": path}) for path in ("page.html", "api.svg")]
        answers.append(api.head(f"/repositories/{repo.name}/refs/main/objects",
                                params={"path": "page.html"}))
    for client in (writer, repo.s3):  # SigV4 and SigV2 links
        answers += [method(client.generate_presigned_url(
            operation, Params={"Bucket": repo.name, "Key": "main/page.html"}, ExpiresIn=60))
            for method, operation in ((httpx.get, "get_object"), (httpx.head, "head_object"))]
        # a link that asks for the page inline is still a download, in a sandbox
        answers.append(httpx.get(client.generate_presigned_url(
            "get_object", Params={"Bucket": repo.name, "Key": "main/api.svg",
                                  "ResponseContentDisposition": "inline"}, ExpiresIn=60)))
    for answer in answers:
        assert answer.status_code == 200, answer.text
        assert answer.headers["x-content-type-options"] == "nosniff"
        csp = answer.headers["content-security-policy"]
        assert "sandbox" in csp.split(";")[0] and "default-src 'none'" in csp
        assert answer.headers["content-disposition"].startswith("attachment")
        assert answer.headers["content-type"] in ("text/html", "image/svg+xml")
    # an S3 client signing its headers gets S3's answer: the stored type, no disposition
    got = writer.get_object(Bucket=repo.name, Key="main/page.html")
    assert got["ContentType"] == "text/html" and "ContentDisposition" not in got
    assert got["Body"].read() == page
    plain = httpx.get(writer.generate_presigned_url(
        "get_object", Params={"Bucket": repo.name, "Key": "main/api.svg",
                              "ResponseContentType": "text/plain"}, ExpiresIn=60))
    assert plain.headers["x-content-type-options"] == "nosniff"
    assert "content-disposition" not in plain.headers


def test_directory_markers_are_accepted_and_store_nothing(repo: Repo,
                                                         make_user: MakeUser) -> None:
    """pyarrow writes an empty ``<dir>/`` before a directory's files, the branch root
    (``main/``) included, and again after deleting a directory's contents."""
    s3, bucket = repo.s3, repo.name
    empty_md5 = hashlib.md5(b"").hexdigest()
    for key in ("main/", "main/dir/", "main/dir/sub/"):
        assert s3.put_object(Bucket=bucket, Key=key, Body=b"")["ETag"] == f'"{empty_md5}"'
    assert s3.list_objects_v2(Bucket=bucket, Prefix="main/").get("Contents", []) == []
    s3.put_object(Bucket=bucket, Key="main/dir/file", Body=b"data")
    assert s3.delete_object(Bucket=bucket, Key="main/")[
        "ResponseMetadata"]["HTTPStatusCode"] == 204
    deleted = s3.delete_objects(Bucket=bucket, Delete={"Objects": [
        {"Key": "main/"}, {"Key": "main/dir/"}, {"Key": "main/dir/file"}]})
    assert sorted(d["Key"] for d in deleted["Deleted"]) == ["main/", "main/dir/",
                                                            "main/dir/file"]
    assert deleted.get("Errors", []) == []
    # a marker still needs a writable branch and the right to write
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="no-such-branch/", Body=b"")
    assert _code(exc) == "NoSuchKey"
    key, secret = make_user("reader", "FSReadAll")
    with pytest.raises(ClientError) as exc:
        repo.client(key, secret).put_object(Bucket=bucket, Key="main/", Body=b"")
    assert _code(exc) == "AccessDenied"
    # a non-empty body under a name ending in "/" is still an object
    s3.put_object(Bucket=bucket, Key="main/kept/", Body=b"content")
    assert repo.read("main", "kept/") == b"content"
