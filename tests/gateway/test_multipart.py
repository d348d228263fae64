"""Multipart uploads through the gateway: boto3's calls, state kept in the namespace."""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import pytest
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

from lakefs_core.errors import ObjectNotFoundError
from lakefs_testing.live_server import live_server
from tests.gateway.conftest import Repo, s3_client

MIB = 1 << 20


def _code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return str(exc.value.response["Error"]["Code"])


def _upload_dir(repo: Repo) -> Path:
    """Where the repository's multipart uploads live in the local store."""
    root = repo.server.services.config.blockstore
    assert root is not None and root.local is not None
    return Path(root.local.path) / repo.name / "_lakefs" / "multipart"


def test_multipart_upload_of_20_mib(repo: Repo) -> None:
    s3 = repo.s3
    data = os.urandom(20 * MIB)
    sizes = [8 * MIB, 8 * MIB, 4 * MIB]
    created = s3.create_multipart_upload(Bucket=repo.name, Key="main/big/data.bin",
                                         ContentType="application/x-test",
                                         Metadata={"origin": "multipart"})
    upload_id = created["UploadId"]
    parts, offset = [], 0
    for number, size in enumerate(sizes, start=1):
        chunk = data[offset:offset + size]
        offset += size
        part = s3.upload_part(Bucket=repo.name, Key="main/big/data.bin", UploadId=upload_id,
                              PartNumber=number, Body=chunk)
        assert part["ETag"] == f'"{hashlib.md5(chunk).hexdigest()}"'
        parts.append({"PartNumber": number, "ETag": part["ETag"]})

    listed = s3.list_parts(Bucket=repo.name, Key="main/big/data.bin", UploadId=upload_id)
    assert [(p["PartNumber"], p["Size"], p["ETag"]) for p in listed["Parts"]] == [
        (p["PartNumber"], size, p["ETag"]) for p, size in zip(parts, sizes, strict=True)]
    # the parts wait in the namespace; nothing is visible before completion
    assert len([p for p in _upload_dir(repo).rglob("*") if p.is_file()]) == 4
    with pytest.raises(ObjectNotFoundError):
        repo.server.services.graveler.get_entry(repo.name, "main", "big/data.bin")

    done = s3.complete_multipart_upload(Bucket=repo.name, Key="main/big/data.bin",
                                        UploadId=upload_id, MultipartUpload={"Parts": parts})
    head = s3.head_object(Bucket=repo.name, Key="main/big/data.bin")
    assert head["ETag"] == done["ETag"]
    assert head["ContentLength"] == len(data)
    assert head["ContentType"] == "application/x-test"
    assert head["Metadata"] == {"origin": "multipart"}

    body = s3.get_object(Bucket=repo.name, Key="main/big/data.bin")["Body"]
    digest, total = hashlib.sha256(), 0
    for chunk in body.iter_chunks(MIB):
        digest.update(chunk)
        total += len(chunk)
    assert total == len(data) and digest.digest() == hashlib.sha256(data).digest()
    tail = s3.get_object(Bucket=repo.name, Key="main/big/data.bin",
                         Range=f"bytes={8 * MIB - 10}-{8 * MIB + 9}")["Body"].read()
    assert tail == data[8 * MIB - 10:8 * MIB + 10]
    # the parts and the record are gone; the upload id is no longer known
    assert not any(p.is_file() for p in _upload_dir(repo).rglob("*"))
    with pytest.raises(ClientError) as exc:
        s3.list_parts(Bucket=repo.name, Key="main/big/data.bin", UploadId=upload_id)
    assert _code(exc) == "NoSuchUpload"


def test_boto3_managed_transfer(repo: Repo) -> None:
    data = os.urandom(12 * MIB + 123)
    config = TransferConfig(multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB,
                            max_concurrency=3)
    repo.s3.upload_fileobj(io.BytesIO(data), repo.name, "main/managed.bin", Config=config)
    assert repo.read("main", "managed.bin") == data
    out = io.BytesIO()
    repo.s3.download_fileobj(repo.name, "main/managed.bin", out, Config=config)
    assert out.getvalue() == data


def test_abort_and_bad_completions(repo: Repo) -> None:
    s3 = repo.s3
    key = "main/aborted.bin"
    upload_id = s3.create_multipart_upload(Bucket=repo.name, Key=key)["UploadId"]
    first = s3.upload_part(Bucket=repo.name, Key=key, UploadId=upload_id, PartNumber=1,
                           Body=b"a" * 1024)
    second = s3.upload_part(Bucket=repo.name, Key=key, UploadId=upload_id, PartNumber=2,
                            Body=b"b" * 1024)
    parts = [{"PartNumber": 1, "ETag": first["ETag"]}, {"PartNumber": 2, "ETag": second["ETag"]}]

    with pytest.raises(ClientError) as exc:  # parts but the last must be >= 5 MiB
        s3.complete_multipart_upload(Bucket=repo.name, Key=key, UploadId=upload_id,
                                     MultipartUpload={"Parts": parts})
    assert _code(exc) == "EntityTooSmall"
    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(Bucket=repo.name, Key=key, UploadId=upload_id,
                                     MultipartUpload={"Parts": parts[::-1]})
    assert _code(exc) == "InvalidPartOrder"
    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(Bucket=repo.name, Key=key, UploadId=upload_id,
                                     MultipartUpload={"Parts": [
                                         {"PartNumber": 2, "ETag": first["ETag"]}]})
    assert _code(exc) == "InvalidPart"
    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(Bucket=repo.name, Key=key, UploadId=upload_id,
                                     MultipartUpload={"Parts": [
                                         {"PartNumber": 3, "ETag": first["ETag"]}]})
    assert _code(exc) == "InvalidPart"
    with pytest.raises(ClientError) as exc:  # the upload belongs to another key
        s3.upload_part(Bucket=repo.name, Key="main/other", UploadId=upload_id, PartNumber=1,
                       Body=b"x")
    assert _code(exc) == "NoSuchUpload"
    with pytest.raises(ClientError) as exc:
        s3.upload_part(Bucket=repo.name, Key=key, UploadId=upload_id, PartNumber=10001,
                       Body=b"x")
    assert _code(exc) == "InvalidArgument"

    assert any(p.is_file() for p in _upload_dir(repo).rglob("*"))
    s3.abort_multipart_upload(Bucket=repo.name, Key=key, UploadId=upload_id)
    assert not any(p.is_file() for p in _upload_dir(repo).rglob("*"))
    with pytest.raises(ClientError) as exc:
        s3.upload_part(Bucket=repo.name, Key=key, UploadId=upload_id, PartNumber=3, Body=b"x")
    assert _code(exc) == "NoSuchUpload"
    with pytest.raises(ClientError) as exc:
        s3.abort_multipart_upload(Bucket=repo.name, Key=key, UploadId="../../etc")
    assert _code(exc) == "NoSuchUpload"
    with pytest.raises(ObjectNotFoundError):
        repo.server.services.graveler.get_entry(repo.name, "main", "aborted.bin")


def test_single_part_upload_and_replaced_part(repo: Repo) -> None:
    s3 = repo.s3
    key = "main/small.bin"
    upload_id = s3.create_multipart_upload(Bucket=repo.name, Key=key)["UploadId"]
    s3.upload_part(Bucket=repo.name, Key=key, UploadId=upload_id, PartNumber=1, Body=b"old")
    # sending a part number again replaces the part, as in S3
    part = s3.upload_part(Bucket=repo.name, Key=key, UploadId=upload_id, PartNumber=1,
                          Body=b"new part")
    s3.complete_multipart_upload(Bucket=repo.name, Key=key, UploadId=upload_id,
                                 MultipartUpload={"Parts": [
                                     {"PartNumber": 1, "ETag": part["ETag"]}]})
    assert repo.read("main", "small.bin") == b"new part"


def test_upload_part_copy(repo: Repo) -> None:
    s3 = repo.s3
    source = os.urandom(6 * MIB)
    s3.put_object(Bucket=repo.name, Key="main/source.bin", Body=source)
    key = "main/assembled.bin"
    upload_id = s3.create_multipart_upload(Bucket=repo.name, Key=key)["UploadId"]
    copied = s3.upload_part_copy(Bucket=repo.name, Key=key, UploadId=upload_id, PartNumber=1,
                                 CopySource={"Bucket": repo.name, "Key": "main/source.bin"},
                                 CopySourceRange=f"bytes=0-{5 * MIB - 1}")
    tail = s3.upload_part(Bucket=repo.name, Key=key, UploadId=upload_id, PartNumber=2,
                          Body=b"tail")
    s3.complete_multipart_upload(Bucket=repo.name, Key=key, UploadId=upload_id,
                                 MultipartUpload={"Parts": [
                                     {"PartNumber": 1, "ETag": copied["CopyPartResult"]["ETag"]},
                                     {"PartNumber": 2, "ETag": tail["ETag"]}]})
    assert repo.read("main", "assembled.bin") == source[:5 * MIB] + b"tail"


def test_parts_served_by_two_server_processes(tmp_path: Path) -> None:
    """Two servers over one database and one store share an upload: no process state."""
    data_dir = str(tmp_path / "shared")
    with live_server(data_dir) as first, live_server(data_dir) as second:
        first.services.graveler.create_repository("shared", "local://shared")
        a = s3_client(first.endpoint, first.access_key_id, first.secret_access_key)
        b = s3_client(second.endpoint, second.access_key_id, second.secret_access_key)
        key = "main/split.bin"
        part1, part2 = os.urandom(5 * MIB), os.urandom(MIB)
        upload_id = a.create_multipart_upload(Bucket="shared", Key=key)["UploadId"]
        e1 = a.upload_part(Bucket="shared", Key=key, UploadId=upload_id, PartNumber=1,
                           Body=part1)["ETag"]
        e2 = b.upload_part(Bucket="shared", Key=key, UploadId=upload_id, PartNumber=2,
                           Body=part2)["ETag"]
        listed = a.list_parts(Bucket="shared", Key=key, UploadId=upload_id)
        assert [p["PartNumber"] for p in listed["Parts"]] == [1, 2]
        b.complete_multipart_upload(Bucket="shared", Key=key, UploadId=upload_id,
                                    MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1},
                                                               {"PartNumber": 2, "ETag": e2}]})
        assert a.get_object(Bucket="shared", Key=key)["Body"].read() == part1 + part2


def test_list_multipart_uploads_and_abort(repo: Repo) -> None:
    """What ``rclone cleanup`` and ``aws s3api list-multipart-uploads`` rely on."""
    s3, bucket = repo.s3, repo.name
    repo.server.services.graveler.create_branch(repo.name, "dev", "main")
    ids = {key: s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
           for key in ("main/a/one", "main/a/two", "main/b", "dev/c")}
    s3.upload_part(Bucket=bucket, Key="main/b", UploadId=ids["main/b"], PartNumber=1,
                   Body=b"part")
    listed = s3.list_multipart_uploads(Bucket=bucket)
    assert [(u["Key"], u["UploadId"]) for u in listed["Uploads"]] == sorted(ids.items())
    assert not listed["IsTruncated"]
    assert all(u["Initiated"].year >= 2024 for u in listed["Uploads"])
    below = s3.list_multipart_uploads(Bucket=bucket, Prefix="main/", Delimiter="/")
    assert [u["Key"] for u in below["Uploads"]] == ["main/b"]
    assert [p["Prefix"] for p in below["CommonPrefixes"]] == ["main/a/"]
    # page by page
    seen, markers = [], {}
    while True:
        page = s3.list_multipart_uploads(Bucket=bucket, MaxUploads=1, **markers)
        seen += [u["Key"] for u in page.get("Uploads", [])]
        if not page["IsTruncated"]:
            break
        markers = {"KeyMarker": page["NextKeyMarker"],
                   "UploadIdMarker": page["NextUploadIdMarker"]}
    assert seen == sorted(ids)
    # abort takes the upload (and its parts) away
    s3.abort_multipart_upload(Bucket=bucket, Key="main/b", UploadId=ids["main/b"])
    assert "main/b" not in [u["Key"] for u in s3.list_multipart_uploads(Bucket=bucket)["Uploads"]]
    assert not any(p.is_file() for p in (_upload_dir(repo) / ids["main/b"]).rglob("*"))
    with pytest.raises(ClientError) as exc:
        s3.abort_multipart_upload(Bucket=bucket, Key="main/b", UploadId=ids["main/b"])
    assert _code(exc) == "NoSuchUpload"
