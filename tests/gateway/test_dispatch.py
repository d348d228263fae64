"""Buckets whose names look like API paths are still reachable through the gateway."""

from __future__ import annotations

import httpx

from lakefs_testing.live_server import LiveServer
from tests.gateway.conftest import s3_client


def test_bucket_named_like_api_paths(server: LiveServer) -> None:
    g = server.services.graveler
    for name in ("api", "metrics", "docs-archive"):
        g.create_repository(name, f"local://{name}")
    s3 = s3_client(server.endpoint, server.access_key_id, server.secret_access_key)
    for name in ("api", "metrics", "docs-archive"):
        s3.put_object(Bucket=name, Key="main/hello.txt", Body=b"hi " + name.encode())
        assert s3.get_object(Bucket=name, Key="main/hello.txt")["Body"].read() == (
            b"hi " + name.encode())
    # unsigned requests on API paths still reach the API
    assert httpx.get(f"{server.endpoint}/api/v1/healthcheck").status_code == 204
    assert httpx.get(f"{server.api}/repositories").status_code == 401
