"""Fixtures of the S3 gateway tests: a repository on the live server and boto3 clients."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

from lakefs_testing.live_server import LiveServer

REGION = "us-east-1"


def s3_client(endpoint: str, key: str, secret: str, *, addressing: str = "path",
              signature_version: str | None = None) -> Any:
    """A boto3 S3 client for the gateway, with the installed boto3's defaults."""
    return boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=secret,
        region_name=REGION,
        config=Config(s3={"addressing_style": addressing}, retries={"max_attempts": 1},
                      signature_version=signature_version))


@dataclass
class Repo:
    """A repository on the live server and a client to reach it through the gateway."""

    server: LiveServer
    name: str
    s3: Any

    def client(self, key: str, secret: str) -> Any:
        return s3_client(self.server.endpoint, key, secret)

    def read(self, ref: str, path: str) -> bytes:
        """An object's bytes, read through the catalog (not the gateway)."""
        return self.server.services.catalog.read(self.name, ref, path)

    def commit(self, message: str = "commit") -> str:
        return self.server.services.graveler.commit(self.name, "main", message, "admin").id


@pytest.fixture
def repo(server: LiveServer, unique_name: str) -> Repo:
    """An empty repository (default branch ``main``) created through the engine."""
    name = f"repo-{unique_name}".lower()
    server.services.graveler.create_repository(name, f"local://{name}")
    return Repo(server, name, s3_client(server.endpoint, server.access_key_id,
                                        server.secret_access_key))


MakeUser = Callable[[str, str], tuple[str, str]]


@pytest.fixture
def make_user(server: LiveServer) -> MakeUser:
    """Create a user with one built-in policy attached; return its key and secret."""

    def make(username: str, policy: str) -> tuple[str, str]:
        auth = server.services.auth
        auth.create_user(username)
        credential = auth.create_credentials(username)
        auth.attach_policy_to_user(username, policy)
        return credential.access_key_id, credential.secret

    return make


# --- hand-made signed requests (for what boto3 does not send over plain http) ----------
def sign_headers(server: LiveServer, method: str, path: str, headers: dict[str, str],
                 payload_hash: str, body: bytes = b"") -> dict[str, str]:
    """Headers of a request signed by botocore, declaring ``payload_hash``."""

    class _Auth(S3SigV4Auth):
        def payload(self, request: AWSRequest) -> str:
            return payload_hash

    host = f"127.0.0.1:{server.port}"
    request = AWSRequest(method=method, url=f"http://{host}{path}", data=body,
                         headers={"Host": host, **headers})
    _Auth(Credentials(server.access_key_id, server.secret_access_key), "s3",
          REGION).add_auth(request)
    return dict(request.headers.items())


def chunk_signatures(secret: str, headers: dict[str, str], chunks: list[bytes]) -> list[str]:
    """The chained ``aws-chunked`` chunk signatures of ``chunks`` (then the final empty
    chunk), computed from the seed signature in ``headers``."""
    authorization = headers["Authorization"]
    seed = authorization.rsplit("Signature=", 1)[1]
    scope = authorization.split("Credential=", 1)[1].split(",", 1)[0].split("/", 1)[1]
    date, region, service, _ = scope.split("/")
    key = hmac.new(f"AWS4{secret}".encode(), date.encode(), hashlib.sha256).digest()
    for part in (region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    previous, signatures = seed, []
    empty = hashlib.sha256(b"").hexdigest()
    for chunk in [*chunks, b""]:
        string_to_sign = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", headers["X-Amz-Date"], scope,
                                    previous, empty, hashlib.sha256(chunk).hexdigest()])
        previous = hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()
        signatures.append(previous)
    return signatures
