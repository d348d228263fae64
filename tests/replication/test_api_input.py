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


def test_a_user_sees_only_the_mirrors_of_repositories_it_may_read(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, sidecars=True) as (east, _west):
        create_source(east)
        with east.client() as admin:
            assert admin.post("/api/v1/repositories", json={
                "name": "other", "storage_namespace": "local://other"}).status_code == 201
            r = admin.post(f"{MIRRORS}/src/mirrors", json={
                "name": "src-mirror", "region": "west", "storage_namespace": "local://m"})
            assert r.status_code == 201, r.text
            mirror = r.json()["id"]
        # fs:ListRepositories on everything, and a writer of another repository
        key, secret = east.server.repo_writer("other-writer", "other")
        with east.client() as admin:
            assert admin.post("/api/v1/auth/policies", json={"id": "list-all", "statement": [
                {"effect": "allow", "action": ["fs:ListRepositories"], "resource": "*"}],
            }).status_code == 201
            assert admin.put("/api/v1/auth/users/other-writer/policies/list-all"
                             ).status_code == 201
        with east.client(key, secret) as stranger:
            for path in ("", f"/{mirror}", f"/{mirror}/status", f"/{mirror}/lag"):
                r = stranger.get(f"{MIRRORS}/src/mirrors{path}")
                assert r.status_code == 403, (path, r.text)
                assert "local://m" not in r.text
            assert stranger.get(f"{MIRRORS}/other/mirrors").json()["results"] == []
        key, secret = east.server.repo_writer("src-reader", "src")
        with east.client(key, secret) as reader:
            listed = reader.get(f"{MIRRORS}/src/mirrors").json()["results"]
            assert [m["storage_namespace"] for m in listed] == ["local://m"]


def test_the_regions_a_mirror_may_go_to_are_listed_and_no_other_is_accepted(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, sidecars=True) as (east, west):
        create_source(east)
        with east.client() as c, west.client() as w:
            assert c.get("/service/replication/v1/regions").json() == {
                "region": "east", "destinations": ["west"]}
            assert w.get("/service/replication/v1/regions").json() == {
                "region": "west", "destinations": ["east"]}
            messages = []
            for region in ("nowhere", "east"):
                r = c.post(f"{MIRRORS}/src/mirrors", json={
                    "name": "src", "region": region, "storage_namespace": "local://m"})
                assert r.status_code == 400, r.text
                messages.append(r.json()["message"])
            assert "unknown region 'nowhere'" in messages[0] and "'west'" in messages[0]
            assert messages[1] == ("region 'east' is this region: a mirror must be in "
                                   "another region")
            assert c.get(f"{MIRRORS}/src/mirrors").json()["results"] == []
        anonymous = httpx.Client(base_url=east.server.endpoint)
        with anonymous:
            assert anonymous.get("/service/replication/v1/regions").status_code == 401
