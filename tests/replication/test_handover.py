"""Switchover and failback between two live regions: one request each, no commit lost,
repository names unchanged (replication.handover)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from lakefs_testing.regions import (
    MIRRORS,
    Region,
    commit,
    create_source,
    mirror_head,
    two_regions,
    upload,
)
from lakefs_testing.replicator import FaultyReplicator
from lakefs_testing.waiting import wait_for


def _mirror_same_name(east: Region) -> dict[str, Any]:
    """A mirror of ``src`` into west under the same name (the documented default)."""
    with east.client() as c:
        r = c.post(f"{MIRRORS}/src/mirrors", json={"region": "west",
                                                   "storage_namespace": "local://src"})
        assert r.status_code == 201, r.text
        mirror = dict(r.json())
    assert mirror["name"] == "src"
    return mirror


def _tag(region: Region, repo: str, tag: str, ref: str) -> None:
    with region.client() as c:
        r = c.post(f"/api/v1/repositories/{repo}/tags", json={"id": tag, "ref": ref})
        assert r.status_code == 201, r.text


def _heads(region: Region, repo: str) -> tuple[dict[str, str], dict[str, str]]:
    g = region.graveler
    branches = {b.name: b.commit_id for b in g.list_branches(repo, amount=1000)}
    tags = {t.name: t.commit_id for t in g.list_tags(repo, amount=1000)}
    return branches, tags


def _active(region: Region, repo: str, mirror_id: str) -> bool:
    with region.client() as c:
        r = c.get(f"{MIRRORS}/{repo}/mirrors/{mirror_id}")
        return r.status_code == 200 and r.json()["state"] == "active"


def _write_refused(region: Region, repo: str) -> bool:
    with region.client() as c:
        r = c.post(f"/api/v1/repositories/{repo}/branches/main/objects",
                   params={"path": "refused"}, content=b"x")
        return r.status_code == 403


def test_switchover_and_back_lose_nothing_and_keep_names(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, interval="1s") as (east, west):
        create_source(east)
        upload(east, "src", "main", "a", b"1")
        c1 = commit(east, "src", "main", "c1")
        _tag(east, "src", "v1", c1)
        mirror = _mirror_same_name(east)
        upload(east, "src", "main", "b", b"2")
        c2 = commit(east, "src", "main", "c2")  # may not have reached west yet
        upload(east, "src", "main", "never-committed", b"staged")
        # one request, sent to the source region: forwarded to the destination
        with east.client() as c:
            r = c.post(f"{MIRRORS}/src/mirrors/{mirror['id']}/switchover",
                       json={"timeout_seconds": 60}, timeout=120)
        assert r.status_code == 200, r.text
        result = r.json()
        assert [p["phase"] for p in result["phases"]] == [
            "freeze source", "catch up", "detach", "reverse mirror", "total"]
        assert result["detached"]["state"] == "detached"
        # what was never committed in east does not travel, and east drops it: a mirror
        # has no uncommitted changes (nor, once the primary again, stale ones)
        assert result["discarded_uncommitted"] == ["main"]
        reverse = result["mirror"]
        assert (reverse["source_region"], reverse["source_repository"], reverse["region"],
                reverse["name"]) == ("west", "src", "east", "src")
        # west serves every commit of the old source, and is writable under its name
        assert _heads(west, "src") == ({"main": c2}, {"v1": c1})
        assert not west.graveler.get_repository("src").read_only
        upload(west, "src", "main", "c", b"3")
        c3 = commit(west, "src", "main", "c3 in west")
        # east, same name, is now west's read-only mirror and follows it
        wait_for(lambda: _active(west, "src", reverse["id"]), 30, what="reverse active")
        wait_for(lambda: mirror_head(east, "src", "main") == c3, 30, what="east follows")
        assert _write_refused(east, "src")
        with east.client() as c:
            r = c.get("/api/v1/repositories/src/refs/main/objects", params={"path": "c"})
            assert r.status_code == 200 and r.content == b"3"
            # a commit east made before the switchover still reads
            assert c.get("/api/v1/repositories/src/refs/v1/objects",
                         params={"path": "a"}).content == b"1"

        # and back: one request in east, the destination of the reverse mirror
        with east.client() as c:
            r = c.post(f"{MIRRORS}/src/mirrors/{reverse['id']}/switchover", timeout=120)
        assert r.status_code == 200, r.text
        back = r.json()["mirror"]
        assert (back["source_region"], back["region"], back["name"]) == ("east", "west", "src")
        assert not east.graveler.get_repository("src").read_only
        assert west.graveler.get_repository("src").read_only
        c4 = commit_after_upload(east, "d", "c4 in east again")
        with east.client() as c:
            r = c.get("/api/v1/repositories/src/refs/main/objects",
                      params={"path": "never-committed"})
            assert r.status_code == 404, r.text
        wait_for(lambda: mirror_head(west, "src", "main") == c4, 30, what="west follows")
        # every commit ever made is in both regions
        for cid in (c1, c2, c3, c4):
            for region in (east, west):
                assert region.graveler.get_commit("src", cid)


def commit_after_upload(region: Region, path: str, message: str) -> str:
    upload(region, "src", "main", path, path.encode())
    return commit(region, "src", "main", message)


def test_a_switchover_that_cannot_catch_up_changes_nothing(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, mode="native", interval="1s") as (east, west):
        create_source(east)
        upload(east, "src", "main", "a", b"1")
        c1 = commit(east, "src", "main", "c1")
        hold = {"on": False}
        crr = FaultyReplicator(east.blockstore_root / "src", west.blockstore_root / "src",
                               seed=1, drop=0.0, hold=lambda rel: hold["on"])
        crr.start()
        try:
            mirror = _mirror_same_name(east)
            wait_for(lambda: mirror_head(west, "src", "main") == c1, 30, what="sync")
            hold["on"] = True  # the next commit's objects never arrive
            upload(east, "src", "main", "b", b"2")
            c2 = commit(east, "src", "main", "c2")
            with west.client() as c:
                r = c.post(f"{MIRRORS}/src/mirrors/{mirror['id']}/switchover",
                           json={"timeout_seconds": 2}, timeout=60)
            assert r.status_code == 409, r.text
            message = r.json()["message"]
            assert "did not catch up" in message and f"source at {c2}" in message
            assert "the source is writable again" in message
            # both sides as they were: the source writable, the mirror active and following
            assert not east.graveler.get_repository("src").read_only
            assert west.graveler.get_repository("src").read_only
            assert _active(west, "src", mirror["id"])
            hold["on"] = False
            wait_for(lambda: mirror_head(west, "src", "main") == c2, 30, what="follows on")
        finally:
            crr.stop()


def test_failback_keeps_every_commit_the_old_source_made(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, mode="native", interval="1s") as (east, west):
        create_source(east)
        upload(east, "src", "main", "a", b"1")
        c1 = commit(east, "src", "main", "c1")
        hold = {"on": False}
        east_to_west = FaultyReplicator(east.blockstore_root / "src",
                                        west.blockstore_root / "src", seed=2, drop=0.0,
                                        hold=lambda rel: hold["on"])
        west_to_east = FaultyReplicator(west.blockstore_root / "src",
                                        east.blockstore_root / "src", seed=3, drop=0.0)
        east_to_west.start()
        try:
            mirror = _mirror_same_name(east)
            wait_for(lambda: mirror_head(west, "src", "main") == c1, 30, what="sync")
            # the disaster: east's last commits never reach west
            hold["on"] = True
            upload(east, "src", "main", "lost?", b"east only")
            c2 = commit(east, "src", "main", "c2, east only")
            with east.client() as c:
                assert c.post("/api/v1/repositories/src/branches",
                              json={"name": "etl", "source": "main"}).status_code == 201
            upload(east, "src", "etl", "more", b"etl")
            c3 = commit(east, "src", "etl", "c3 on a branch west never saw")
            _tag(east, "src", "v2", c2)
            # failover: detach in west, which then takes writes
            with west.client() as c:
                r = c.post(f"{MIRRORS}/src/mirrors/{mirror['id']}/detach")
                assert r.status_code == 200 and r.json()["state"] == "detached", r.text
            upload(west, "src", "main", "w", b"west")
            c4 = commit(west, "src", "main", "c4 in west after the failover")

            # east is back. A failback whose kept commits' pieces cannot arrive refuses,
            # having changed nothing but east being read-only
            with west.client() as c:
                r = c.post(f"{MIRRORS}/src/mirrors/{mirror['id']}/failback",
                           json={"timeout_seconds": 1}, timeout=60)
            assert r.status_code == 409, r.text
            assert "cannot be kept" in r.json()["message"]
            assert east.graveler.get_repository("src").read_only
            assert not any(b.startswith("failover-") for b in _heads(west, "src")[0])
            assert east.graveler.mirror_marking("src") is None

            # with the old source's objects arriving, it keeps each diverged head
            hold["on"] = False
            west_to_east.start()
            with east.client() as c:  # asked in east: forwarded to west
                r = c.post(f"{MIRRORS}/src/mirrors/{mirror['id']}/failback",
                           json={"timeout_seconds": 60}, timeout=120)
            assert r.status_code == 200, r.text
            result = r.json()
            kept = {(k["ref"], k["kind"]): k for k in result["kept"]}
            assert set(kept) == {("main", "branch"), ("etl", "branch"), ("v2", "tag")}
            assert kept[("main", "branch")]["commit_id"] == c2
            assert kept[("etl", "branch")]["commit_id"] == c3
            west_branches, _ = _heads(west, "src")
            for k in kept.values():
                assert k["branch"].startswith("failover-")
                assert west_branches[k["branch"]] == k["commit_id"]
            # the kept commits read in west, and west's own history is untouched
            with west.client() as c:
                r = c.get(f"/api/v1/repositories/src/refs/{kept[('main', 'branch')]['branch']}"
                          "/objects", params={"path": "lost?"})
                assert r.status_code == 200 and r.content == b"east only"
            assert west_branches["main"] == c4
            # east, same name, follows west: its main moves to west's, and the failover
            # branches come along
            reverse = result["mirror"]
            assert (reverse["source_region"], reverse["region"], reverse["name"]) == (
                "west", "east", "src")
            wait_for(lambda: mirror_head(east, "src", "main") == c4
                     and mirror_head(east, "src", kept[("etl", "branch")]["branch"]) == c3,
                     60, what="east follows west")
            assert _write_refused(east, "src")
            for cid in (c1, c2, c3, c4):
                assert west.graveler.get_commit("src", cid)
        finally:
            east_to_west.stop()
            west_to_east.stop()


def test_handover_needs_the_rights_on_both_repositories(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, interval="1s") as (east, west):
        create_source(east)
        mirror = _mirror_same_name(east)
        auth = west.server.services.auth
        auth.create_user("reader")
        cred = auth.create_credentials("reader")
        auth.attach_policy_to_user("reader", "FSReadAll")
        with httpx.Client(base_url=west.server.endpoint, timeout=30,
                          auth=(cred.access_key_id, cred.secret)) as c:
            for action in ("switchover", "failback"):
                r = c.post(f"{MIRRORS}/src/mirrors/{mirror['id']}/{action}")
                assert r.status_code == 403, r.text
        with west.client() as c:
            r = c.post(f"{MIRRORS}/src/mirrors/{mirror['id']}/failback")
            assert r.status_code == 400 and "detached" in r.json()["message"], r.text
            r = c.post(f"{MIRRORS}/src/mirrors/{mirror['id']}/switchover",
                       json={"timeout_seconds": -1})
            assert r.status_code == 400, r.text
        assert not east.graveler.get_repository("src").read_only


def test_no_ref_of_a_detached_mirror_points_at_a_commit_it_cannot_read(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, interval="1s") as (east, west):
        create_source(east)
        for i in range(3):  # the mirror starts at the third: the first two are skipped
            upload(east, "src", "main", f"f{i}", bytes([i]))
            commit(east, "src", "main", f"c{i}")
        head = east.graveler.get_branch("src", "main").commit_id
        skipped = east.graveler.resolve_ref("src", "main~1").commit_id
        mirror = _mirror_same_name(east)
        wait_for(lambda: mirror_head(west, "src", "main") == head, 30, what="sync")
        with west.client() as c:
            assert c.post(f"{MIRRORS}/src/mirrors/{mirror['id']}/detach").status_code == 200
            refused = [
                c.put("/api/v1/repositories/src/branches/main/hard_reset",
                      params={"ref": "main~1"}),
                c.post("/api/v1/repositories/src/branches",
                       json={"name": "old", "source": skipped}),
                c.post("/api/v1/repositories/src/tags", json={"id": "old", "ref": "main~1"}),
            ]
            for r in refused:
                assert r.status_code == 404, r.text
                assert "replication never proved its data present" in r.json()["message"]
            assert west.graveler.get_branch("src", "main").commit_id == head
            # the commit it serves is fine to point at
            assert c.post("/api/v1/repositories/src/tags",
                          json={"id": "kept", "ref": head}).status_code == 201


def test_a_former_mirror_adopted_again_serves_only_what_was_proven(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    """West learns of east's first commits without their data (the mirror starts at the
    third); after a switchover and back, west is a mirror again and must still refuse
    them, not serve commits whose objects it never received."""
    with two_regions(tmp_path, sqlite_mirrors, interval="1s") as (east, west):
        create_source(east)
        for i in range(3):  # one path rewritten: only the last version is needed by c2
            upload(east, "src", "main", "data", f"version {i}".encode())
            commit(east, "src", "main", f"c{i}")
        skipped = east.graveler.resolve_ref("src", "main~2").commit_id
        mirror = _mirror_same_name(east)
        head = east.graveler.get_branch("src", "main").commit_id
        wait_for(lambda: mirror_head(west, "src", "main") == head, 30, what="sync")
        with west.client() as c:
            r = c.post(f"{MIRRORS}/src/mirrors/{mirror['id']}/switchover", timeout=120)
            assert r.status_code == 200, r.text
            reverse = r.json()["mirror"]
            wait_for(lambda: _active(west, "src", reverse["id"]), 30, what="reverse active")
            r = c.post(f"{MIRRORS}/src/mirrors/{reverse['id']}/switchover", timeout=120)
            assert r.status_code == 200, r.text
        assert west.graveler.get_repository("src").read_only  # a mirror again
        with west.client() as c:
            r = c.get(f"/api/v1/repositories/src/refs/{skipped}/objects",
                      params={"path": "data"})
            assert r.status_code == 404, r.text
            assert "replication never proved its data present" in r.json()["message"]
            r = c.get(f"/api/v1/repositories/src/refs/{head}/objects", params={"path": "data"})
            assert r.status_code == 200 and r.content == b"version 2"
        # east, the primary again, still serves its whole history
        with east.client() as c:
            r = c.get(f"/api/v1/repositories/src/refs/{skipped}/objects",
                      params={"path": "data"})
            assert r.status_code == 200 and r.content == b"version 0"


def test_a_detach_wins_over_a_round_that_just_wrote_the_row(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, interval="1s") as (east, west):
        create_source(east)
        mirror = _mirror_same_name(east)
        sidecar = west.sidecars[0].sidecar
        wait_for(lambda: _active(west, "src", mirror["id"]), 30, what="active")
        read = sidecar.table.get_mirror(sidecar.org, mirror["id"])
        # a round records an error on the row after the detach request read it
        sidecar.table.update_mirror(read.with_state(read.state, "source unreadable: gone"))
        detached = sidecar.detach(read)
        assert detached.state.value == "detached"
        assert not west.graveler.get_repository("src").read_only
