"""Gateway authentication and refusals: signatures, keys, policies, read-only
repositories and protected branches. A refused write changes nothing."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from lakefs_core.auth.throttle import FREE_PAIR_FAILURES
from lakefs_core.errors import ObjectNotFoundError
from lakefs_testing.live_server import LiveServer
from tests.gateway.conftest import MakeUser, Repo, s3_client, sign_headers


def _refused(call: Callable[[], Any]) -> tuple[int, str]:
    with pytest.raises(ClientError) as exc:
        call()
    response = exc.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], str(response["Error"]["Code"])


def _writes(s3: Any, bucket: str, branch: str = "main") -> dict[str, Callable[[], Any]]:
    """Every write the gateway serves, aimed at ``branch``."""
    return {
        "put": lambda: s3.put_object(Bucket=bucket, Key=f"{branch}/new", Body=b"new"),
        "copy": lambda: s3.copy_object(Bucket=bucket, Key=f"{branch}/copied",
                                       CopySource={"Bucket": bucket, "Key": "main/existing"}),
        "delete": lambda: s3.delete_object(Bucket=bucket, Key=f"{branch}/existing"),
        "multipart": lambda: s3.create_multipart_upload(Bucket=bucket, Key=f"{branch}/mp"),
    }


def _state(repo: Repo) -> list[tuple[str, str]]:
    graveler = repo.server.services.graveler
    return [(r.path, r.entry.etag if r.entry else "")
            for r in graveler.iterate_entries(repo.name, "main")]


def test_presigned_get_with_httpx(repo: Repo) -> None:
    repo.s3.put_object(Bucket=repo.name, Key="main/shared/report.csv", Body=b"a,b\n1,2\n")
    v4 = s3_client(repo.server.endpoint, repo.server.access_key_id,
                   repo.server.secret_access_key, signature_version="s3v4")
    for client in (repo.s3, v4):  # boto3's default (SigV2) and SigV4 presigned URLs
        url = client.generate_presigned_url(
            "get_object", Params={"Bucket": repo.name, "Key": "main/shared/report.csv"},
            ExpiresIn=300)
        assert ("X-Amz-Algorithm=AWS4-HMAC-SHA256" in url) == (client is v4)
        response = httpx.get(url)
        assert response.status_code == 200, response.text
        assert response.content == b"a,b\n1,2\n"
        ranged = httpx.get(url, headers={"Range": "bytes=4-"})
        assert ranged.status_code == 206 and ranged.content == b"1,2\n"
        tampered = url.replace("report.csv", "other.csv")
        response = httpx.get(tampered)
        assert response.status_code == 403
        assert b"<Code>SignatureDoesNotMatch</Code>" in response.content


def test_expired_presigned_url(repo: Repo) -> None:
    repo.s3.put_object(Bucket=repo.name, Key="main/x", Body=b"x")
    # Expires = int(now + 0): already past when the request arrives
    url = repo.s3.generate_presigned_url("get_object",
                                         Params={"Bucket": repo.name, "Key": "main/x"},
                                         ExpiresIn=0)
    response = httpx.get(url)
    assert response.status_code == 403 and b"<Code>AccessDenied</Code>" in response.content


def test_bad_signature_unknown_key_and_anonymous(repo: Repo) -> None:
    endpoint = repo.server.endpoint
    wrong = s3_client(endpoint, repo.server.access_key_id, "not-the-secret")
    assert _refused(lambda: wrong.list_buckets()) == (403, "SignatureDoesNotMatch")
    assert _refused(lambda: wrong.put_object(Bucket=repo.name, Key="main/x", Body=b"x")) == (
        403, "SignatureDoesNotMatch")
    unknown = s3_client(endpoint, "AKIAIOSFODNN7UNKNOWN", "whatever")
    assert _refused(lambda: unknown.get_object(Bucket=repo.name, Key="main/x")) == (
        403, "InvalidAccessKeyId")
    anonymous = httpx.get(f"{endpoint}/{repo.name}/main/x")
    assert anonymous.status_code == 403 and b"<Code>AccessDenied</Code>" in anonymous.content
    assert _state(repo) == []


def test_read_only_user(repo: Repo, make_user: MakeUser) -> None:
    repo.s3.put_object(Bucket=repo.name, Key="main/existing", Body=b"data")
    before = _state(repo)
    key, secret = make_user("reader", "FSReadAll")
    reader = repo.client(key, secret)
    assert reader.get_object(Bucket=repo.name, Key="main/existing")["Body"].read() == b"data"
    assert reader.head_object(Bucket=repo.name, Key="main/existing")["ContentLength"] == 4
    assert [o["Key"] for o in reader.list_objects_v2(Bucket=repo.name,
                                                     Prefix="main/")["Contents"]] == [
        "main/existing"]
    assert repo.name in [b["Name"] for b in reader.list_buckets()["Buckets"]]
    for name, write in _writes(reader, repo.name).items():
        assert _refused(write) == (403, "AccessDenied"), name
    result = reader.delete_objects(Bucket=repo.name,
                                   Delete={"Objects": [{"Key": "main/existing"}]})
    assert [(e["Key"], e["Code"]) for e in result["Errors"]] == [("main/existing",
                                                                 "AccessDenied")]
    assert _state(repo) == before


def test_user_without_policies_reads_nothing(repo: Repo, make_user: MakeUser) -> None:
    repo.s3.put_object(Bucket=repo.name, Key="main/existing", Body=b"data")
    auth = repo.server.services.auth
    auth.create_user("nobody")
    credential = auth.create_credentials("nobody")
    nobody = repo.client(credential.access_key_id, credential.secret)
    assert _refused(lambda: nobody.get_object(Bucket=repo.name, Key="main/existing")) == (
        403, "AccessDenied")
    assert _refused(lambda: nobody.list_objects_v2(Bucket=repo.name, Prefix="main/")) == (
        403, "AccessDenied")
    assert _refused(lambda: nobody.list_buckets()) == (403, "AccessDenied")
    writer_key, writer_secret = make_user("writer", "FSReadWriteAll")
    writer = repo.client(writer_key, writer_secret)
    writer.put_object(Bucket=repo.name, Key="main/by-writer", Body=b"w")
    assert repo.read("main", "by-writer") == b"w"


def test_read_only_repository_refuses_writes(repo: Repo) -> None:
    repo.s3.put_object(Bucket=repo.name, Key="main/existing", Body=b"data")
    repo.commit("existing")
    graveler = repo.server.services.graveler
    graveler.set_read_only(repo.name, True)
    before = _state(repo)
    for name, write in _writes(repo.s3, repo.name).items():
        assert _refused(write) == (403, "AccessDenied"), name
    result = repo.s3.delete_objects(Bucket=repo.name,
                                    Delete={"Objects": [{"Key": "main/existing"}]})
    assert [e["Code"] for e in result["Errors"]] == ["AccessDenied"]
    # reads still work
    assert repo.s3.get_object(Bucket=repo.name, Key="main/existing")["Body"].read() == b"data"
    assert _state(repo) == before
    graveler.set_read_only(repo.name, False)
    repo.s3.put_object(Bucket=repo.name, Key="main/new", Body=b"now writable")
    assert repo.read("main", "new") == b"now writable"


def test_protected_branch_refuses_writes(repo: Repo) -> None:
    s3, graveler = repo.s3, repo.server.services.graveler
    s3.put_object(Bucket=repo.name, Key="main/existing", Body=b"data")
    repo.commit("existing")
    graveler.create_branch(repo.name, "dev", "main")
    graveler.set_branch_protection_rules(repo.name, ["main"])
    before = _state(repo)
    for name, write in _writes(s3, repo.name).items():
        status, code = _refused(write)
        assert (status, code) == (403, "AccessDenied"), name
    with pytest.raises(ObjectNotFoundError):
        graveler.get_entry(repo.name, "main", "new")
    assert _state(repo) == before
    # an unprotected branch of the same repository takes writes
    for write in _writes(s3, repo.name, "dev").values():
        write()
    assert repo.read("dev", "new") == b"new"
    assert repo.read("dev", "copied") == b"data"


def test_multipart_completion_refused_after_protection(repo: Repo) -> None:
    s3, graveler = repo.s3, repo.server.services.graveler
    upload_id = s3.create_multipart_upload(Bucket=repo.name, Key="main/late")["UploadId"]
    etag = s3.upload_part(Bucket=repo.name, Key="main/late", UploadId=upload_id,
                          PartNumber=1, Body=b"part")["ETag"]
    graveler.set_branch_protection_rules(repo.name, ["main"])
    assert _refused(lambda: s3.complete_multipart_upload(
        Bucket=repo.name, Key="main/late", UploadId=upload_id,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})) == (403, "AccessDenied")
    with pytest.raises(ObjectNotFoundError):
        graveler.get_entry(repo.name, "main", "late")


def test_signature_version_2_clients(repo: Repo) -> None:
    v2 = s3_client(repo.server.endpoint, repo.server.access_key_id,
                   repo.server.secret_access_key, signature_version="s3")
    v2.put_object(Bucket=repo.name, Key="main/v2/a b.txt", Body=b"signed with v2",
                  ContentType="text/plain", Metadata={"m": "1"})
    assert repo.read("main", "v2/a b.txt") == b"signed with v2"
    got = v2.get_object(Bucket=repo.name, Key="main/v2/a b.txt", Range="bytes=0-5")
    assert got["Body"].read() == b"signed"
    listed = v2.list_objects_v2(Bucket=repo.name, Prefix="main/v2/")
    assert [o["Key"] for o in listed["Contents"]] == ["main/v2/a b.txt"]
    v2.delete_objects(Bucket=repo.name, Delete={"Objects": [{"Key": "main/v2/a b.txt"}]})
    with pytest.raises(ObjectNotFoundError):
        repo.server.services.graveler.get_entry(repo.name, "main", "v2/a b.txt")
    wrong = s3_client(repo.server.endpoint, repo.server.access_key_id, "wrong-secret",
                      signature_version="s3")
    assert _refused(lambda: wrong.put_object(Bucket=repo.name, Key="main/v2/x", Body=b"x")) == (
        403, "SignatureDoesNotMatch")
    unknown = s3_client(repo.server.endpoint, "AKIAIOSFODNN7UNKNOWN", "whatever",
                        signature_version="s3")
    assert _refused(lambda: unknown.list_buckets()) == (403, "InvalidAccessKeyId")


def test_new_grant_applies_at_once(repo: Repo) -> None:
    auth = repo.server.services.auth
    auth.create_user("late")
    credential = auth.create_credentials("late")
    late = repo.client(credential.access_key_id, credential.secret)
    assert _refused(lambda: late.put_object(Bucket=repo.name, Key="main/late",
                                            Body=b"x")) == (403, "AccessDenied")
    auth.attach_policy_to_user("late", "FSReadWriteAll")
    late.put_object(Bucket=repo.name, Key="main/late", Body=b"granted")
    assert repo.read("main", "late") == b"granted"


def test_unsigned_amz_headers_are_refused(repo: Repo, server: LiveServer,
                                          unique_name: str) -> None:
    """An x-amz-* header the signature does not cover could come from anyone: a
    presigned PUT must not become a copy of another repository's object."""
    other = f"other-{unique_name}".lower()
    server.services.graveler.create_repository(other, f"local://{other}")
    repo.s3.put_object(Bucket=other, Key="main/secret.txt", Body=b"not yours")
    v4 = s3_client(server.endpoint, server.access_key_id, server.secret_access_key,
                   signature_version="s3v4")
    url = v4.generate_presigned_url(
        "put_object", Params={"Bucket": repo.name, "Key": "main/upload.txt"}, ExpiresIn=300)
    assert "X-Amz-Signature=" in url
    sneaky = httpx.put(url, content=b"",
                       headers={"x-amz-copy-source": f"/{other}/main/secret.txt"})
    assert sneaky.status_code == 403, sneaky.text
    assert b"HeadersNotSigned" in sneaky.content or b"not signed" in sneaky.content
    with pytest.raises(ObjectNotFoundError):  # nothing was written
        repo.read("main", "upload.txt")
    assert httpx.put(url, content=b"plain").status_code == 200  # the URL itself works
    assert repo.read("main", "upload.txt") == b"plain"
    # the header form: a header added after signing is refused too
    headers = sign_headers(server, "PUT", f"/{repo.name}/main/h.txt", {},
                           hashlib.sha256(b"h").hexdigest(), b"h")
    added = httpx.put(f"{server.endpoint}/{repo.name}/main/h.txt", content=b"h",
                      headers={**headers, "x-amz-meta-added": "later"})
    assert added.status_code == 403, added.text
    ok = httpx.put(f"{server.endpoint}/{repo.name}/main/h.txt", content=b"h", headers=headers)
    assert ok.status_code == 200, ok.text


def test_failed_signatures_slow_the_guesser_down_not_the_owner(repo: Repo) -> None:
    with repo.server.patient_sign_in_throttle():
        server = repo.server
        key, secret = server.repo_writer("guessed-s3", repo.name)
        guesser = s3_client(server.endpoint, key, "guess", signature_version="s3v4")
        for _ in range(FREE_PAIR_FAILURES + 1):
            refused = _refused(lambda: guesser.list_objects_v2(Bucket=repo.name, Prefix="main/"))
            assert refused == (403, "SignatureDoesNotMatch")
        right = s3_client(server.endpoint, key, secret, signature_version="s3v4")
        with pytest.raises(ClientError) as exc:
            right.list_objects_v2(Bucket=repo.name, Prefix="main/")
        response = exc.value.response
        assert (response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]) == (
            503, "SlowDown")
        assert 0 < int(response["ResponseMetadata"]["HTTPHeaders"]["retry-after"]) <= 300
        # the owner, from another address, is served
        url = right.generate_presigned_url(
            "list_objects_v2", Params={"Bucket": repo.name, "Prefix": "main/"}, ExpiresIn=60)
        assert httpx.get(url).status_code == 503
        with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2")) as owner:
            assert owner.get(url).status_code == 200
