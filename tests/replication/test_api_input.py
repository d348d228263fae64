"""The mirrors API refuses input it cannot act on, before any row is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET
from lakefs_testing.regions import MIRRORS, create_source, two_regions
from lakefs_testing.servers import send_long_header


@pytest.mark.parametrize("namespace", [
    "local://../../etc", "local:///etc", "local://a//b", "nothing", "local://a\tb",
])
def test_a_bad_mirror_namespace_is_400(tmp_path: Path, sqlite_mirrors: dict[str, Any],
                                       namespace: str) -> None:
    with two_regions(tmp_path, sqlite_mirrors, sidecars=True) as (east, _west):
        create_source(east)
        with east.client() as c:
            r = c.post(f"{MIRRORS}/src/mirrors", json={
                "name": "src-mirror", "region": "west", "storage_namespace": namespace})
            assert r.status_code == 400, r.text
            assert c.get(f"{MIRRORS}/src/mirrors").json()["results"] == []


def test_a_namespace_that_is_no_valid_text_is_400_at_the_sidecar_itself(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    """The server's front gate refuses such JSON before proxying; the sidecar's own port
    refuses the namespace."""
    body = b'{"name": "src-mirror", "region": "west", "storage_namespace": "local://m\\ud800"}'
    with two_regions(tmp_path, sqlite_mirrors, sidecars=True) as (east, _west):
        create_source(east)
        sidecar = httpx.Client(base_url=east.sidecars[0].url, auth=(ADMIN_KEY, ADMIN_SECRET))
        with sidecar, east.client() as c:
            for client in (sidecar, c):
                r = client.post(f"{MIRRORS}/src/mirrors", content=body,
                                headers={"content-type": "application/json"})
                assert r.status_code == 400, r.text
            assert c.get(f"{MIRRORS}/src/mirrors").json()["results"] == []


def test_the_sidecar_refuses_an_oversized_request_head(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, sidecars=True) as (east, _west):
        port = east.sidecars[0].port
        assert send_long_header(port, 1 << 20).startswith(b"HTTP/1.1 431 ")
        assert send_long_header(port, 8 << 10).startswith(b"HTTP/1.1 2")
