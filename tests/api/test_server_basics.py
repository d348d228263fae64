"""The server starts, answers probes, and demands credentials."""

from __future__ import annotations

import httpx
import pytest

from lakefs_testing.live_server import LiveServer


def test_health_and_auth(server: LiveServer) -> None:
    assert httpx.get(f"{server.endpoint}/_health").status_code == 204
    anon = httpx.get(f"{server.api}/repositories")
    assert anon.status_code == 401
    assert anon.json()["message"]
    bad = httpx.get(f"{server.api}/repositories", auth=(server.access_key_id, "wrong"))
    assert bad.status_code == 401


@pytest.mark.parametrize("path", [
    "..%2F..%2Fmetrics", "v1%2F..%2F..%2Fmetrics", "v1/..%2F..%2F_health", "%2E%2E/metrics",
    "v2/anything", "metrics", "v1//repositories",
])
def test_the_replication_proxy_stays_in_the_replication_api(server: LiveServer,
                                                            path: str) -> None:
    url = httpx.URL(f"{server.endpoint}/service/replication/").copy_with(
        raw_path=f"/service/replication/{path}".encode())
    assert httpx.get(url).status_code == 404


def test_an_unreachable_sidecar_is_a_502_that_names_no_address(server: LiveServer) -> None:
    # no sidecar runs beside this server
    r = httpx.get(f"{server.endpoint}/service/replication/v1/repositories/x/mirrors")
    assert r.status_code == 502
    assert r.json()["message"] == "replication service unreachable"
