"""The server starts, answers probes, and demands credentials."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from lakefs_core.server import create_app
from lakefs_testing.live_server import LiveServer, live_server


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


def test_metrics_are_served_to_the_allowed_networks_only(tmp_path: Path) -> None:
    """``/metrics`` names repositories and hooks: loopback only by default."""
    with live_server(str(tmp_path / "default")) as srv:
        local = httpx.get(f"{srv.endpoint}/metrics")
        assert local.status_code == 200
        app = create_app(srv.services)

        async def from_elsewhere() -> httpx.Response:
            transport = httpx.ASGITransport(app=app, client=("203.0.113.7", 4321))
            async with httpx.AsyncClient(transport=transport, base_url="http://lakefs") as c:
                return await c.get("/metrics")

        outside = asyncio.run(from_elsewhere())
        assert outside.status_code == 403 and "allowed_networks" in outside.json()["message"]
    env = {"LAKEFS_METRICS_ALLOWED_NETWORKS": "127.0.0.1/32"}
    with live_server(str(tmp_path / "narrowed"), env) as srv:
        assert httpx.get(f"{srv.endpoint}/metrics").status_code == 200
        with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2")) as other:
            refused = other.get(f"{srv.endpoint}/metrics")
            assert refused.status_code == 403 and "# HELP" not in refused.text
