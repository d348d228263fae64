"""What S3 clients ask of a bucket or an object before (or besides) their real work:
each answered in S3's own shape, never a 500 and never an error in the log."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.gateway.conftest import MakeUser, Repo


def _error(call: Callable[[], Any]) -> tuple[int, str]:
    with pytest.raises(ClientError) as exc:
        call()
    response = exc.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], str(response["Error"]["Code"])


def _logged_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name.startswith("lakefs_core.gateway") and r.levelno >= logging.ERROR]


def test_create_bucket_that_exists_is_already_owned(repo: Repo,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    """rclone and ``aws s3 mb`` create the bucket first: an existing repository answers
    409 BucketAlreadyOwnedByYou (taken as "there already"), a new one 501."""
    caplog.set_level(logging.WARNING, logger="lakefs_core.gateway")
    assert _error(lambda: repo.s3.create_bucket(Bucket=repo.name)) == (
        409, "BucketAlreadyOwnedByYou")
    assert _error(lambda: repo.s3.create_bucket(Bucket="no-such-repo")) == (
        501, "NotImplemented")
    assert _error(lambda: repo.s3.put_bucket_tagging(
        Bucket=repo.name, Tagging={"TagSet": [{"Key": "k", "Value": "v"}]})) == (
        501, "NotImplemented")
    assert _logged_errors(caplog) == []


def test_create_bucket_needs_read_access(repo: Repo, make_user: MakeUser) -> None:
    key, secret = make_user("nobody", "AuthManageOwnCredentials")
    assert _error(lambda: repo.client(key, secret).create_bucket(Bucket=repo.name)) == (
        403, "AccessDenied")


def test_configuration_probes_answer_as_s3(repo: Repo, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="lakefs_core.gateway")
    s3, bucket = repo.s3, repo.name
    s3.put_object(Bucket=bucket, Key="main/x", Body=b"x")
    assert s3.get_object_tagging(Bucket=bucket, Key="main/x")["TagSet"] == []
    assert s3.delete_object_tagging(Bucket=bucket, Key="main/x")[
        "ResponseMetadata"]["HTTPStatusCode"] == 204
    assert _error(lambda: s3.get_object_tagging(Bucket=bucket, Key="main/missing")) == (
        404, "NoSuchKey")
    for acl in (s3.get_object_acl(Bucket=bucket, Key="main/x"), s3.get_bucket_acl(Bucket=bucket)):
        assert [g["Permission"] for g in acl["Grants"]] == ["FULL_CONTROL"]
        assert acl["Owner"]["ID"]
    for call, code in (
            (s3.get_bucket_policy, "NoSuchBucketPolicy"),
            (s3.get_bucket_cors, "NoSuchCORSConfiguration"),
            (s3.get_bucket_lifecycle_configuration, "NoSuchLifecycleConfiguration"),
            (s3.get_bucket_tagging, "NoSuchTagSet"),
            (s3.get_bucket_website, "NoSuchWebsiteConfiguration"),
            (s3.get_bucket_encryption, "ServerSideEncryptionConfigurationNotFoundError"),
            (s3.get_object_lock_configuration, "ObjectLockConfigurationNotFoundError"),
            (s3.get_public_access_block, "NoSuchPublicAccessBlockConfiguration")):
        assert _error(lambda call=call: call(Bucket=bucket)) == (404, code)
    assert "LoggingEnabled" not in s3.get_bucket_logging(Bucket=bucket)
    assert s3.get_bucket_request_payment(Bucket=bucket)["Payer"] == "BucketOwner"
    s3.get_bucket_notification_configuration(Bucket=bucket)
    assert s3.delete_bucket_cors(Bucket=bucket)["ResponseMetadata"]["HTTPStatusCode"] == 204
    # nothing fits: 501 in S3's XML
    for call in (lambda: s3.put_object_tagging(Bucket=bucket, Key="main/x",
                                               Tagging={"TagSet": []}),
                 lambda: s3.list_object_versions(Bucket=bucket),
                 lambda: s3.get_object_retention(Bucket=bucket, Key="main/x"),
                 lambda: s3.delete_bucket(Bucket=bucket)):
        assert _error(call) == (501, "NotImplemented")
    # a repository that is not there is still NoSuchBucket
    assert _error(lambda: s3.get_bucket_policy(Bucket="no-such-repo")) == (404, "NoSuchBucket")
    assert _logged_errors(caplog) == []
