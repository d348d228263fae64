"""Resets, deletions, tags, replicas racing, restarts, RBAC, detach and the fast path."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import httpx

from lakefs_testing.regions import (
    MIRRORS,
    Region,
    commit,
    create_mirror,
    create_source,
    mirror_head,
    two_regions,
    upload,
)
from lakefs_testing.waiting import wait_for
from tests.replication.invariants import MirrorChecker


def _tag_head(region: Region, repo: str, tag: str) -> str | None:
    try:
        return region.graveler.get_tag(repo, tag).commit_id
    except Exception:  # noqa: BLE001
        return None


def _has_branch(region: Region, repo: str, branch: str) -> bool:
    return mirror_head(region, repo, branch) is not None


def test_resets_deletes_and_tags(tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, interval="1s") as (east, west):
        create_source(east)
        upload(east, "src", "main", "a", b"1")
        c1 = commit(east, "src", "main", "c1")
        upload(east, "src", "main", "b", b"2")
        c2 = commit(east, "src", "main", "c2")
        with east.client() as c:
            assert c.post("/api/v1/repositories/src/branches",
                          json={"name": "feature", "source": "main"}).status_code == 201
            assert c.post("/api/v1/repositories/src/tags",
                          json={"id": "v1", "ref": c1}).status_code == 201
        create_mirror(east)
        checker = MirrorChecker(east.graveler, "src", west.graveler, "src-mirror")
        wait_for(lambda: mirror_head(west, "src-mirror", "main") == c2
                 and _has_branch(west, "src-mirror", "feature")
                 and _tag_head(west, "src-mirror", "v1") == c1, 30, what="initial sync",
                 check=checker.check)
        # reading the tagged commit on the mirror works
        with west.client() as c:
            r = c.get("/api/v1/repositories/src-mirror/refs/v1/objects", params={"path": "a"})
            assert r.status_code == 200 and r.content == b"1"
        # reset the source branch backwards: the mirror follows (I3 allows it)
        east.graveler.hard_reset("src", "main", c1)
        checker.source_moved("main", c1, reset=True)
        wait_for(lambda: mirror_head(west, "src-mirror", "main") == c1, 30,
                 what="reset followed", check=checker.check)
        # delete a branch and a tag on the source
        east.graveler.delete_branch("src", "feature")
        east.graveler.delete_tag("src", "v1")
        wait_for(lambda: not _has_branch(west, "src-mirror", "feature")
                 and _tag_head(west, "src-mirror", "v1") is None, 30,
                 what="deletions followed", check=checker.check)


def test_two_replicas_and_restarts(tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    """Two replicas in the destination race; replicas are killed and restarted (I5)."""
    rng = random.Random(5)
    with two_regions(tmp_path, sqlite_mirrors, interval="1s") as (east, west):
        west.start_sidecar()  # a second replica in the destination region
        create_source(east)
        create_mirror(east)
        checker = MirrorChecker(east.graveler, "src", west.graveler, "src-mirror")
        wait_for(lambda: west.graveler.refstore.list_repositories(prefix="src-mirror"), 30,
                 what="mirror repository", check=checker.check)
        promotions_before = 0
        head = ""
        for step in range(6):
            upload(east, "src", "main", f"step-{step}", bytes([step]) * 10)
            head = commit(east, "src", "main", f"step {step}")
            checker.source_moved("main", head)
            if step % 2 == 1:
                # kill one destination replica at a random moment and start a new one
                victim = west.sidecars.pop(rng.randrange(len(west.sidecars)))
                victim.stop()
                west.start_sidecar()
            wait_for(lambda h=head: mirror_head(west, "src-mirror", "main") == h, 45,
                     what=f"step {step}", check=checker.check)
        total = 0
        for handle in west.sidecars:
            total += int(sum(s.value for m in handle.sidecar.metrics.promotions.collect()
                             for s in m.samples if s.name.endswith("_total")))
        assert total >= promotions_before
        checker.check()


def test_rbac_and_bad_requests(tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, interval="1s") as (east, west):
        create_source(east)
        auth = east.server.services.auth
        auth.create_user("reader")
        cred = auth.create_credentials("reader")
        auth.attach_policy_to_user("reader", "FSReadAll")
        body = {"name": "mir1", "region": "west", "storage_namespace": "local://mir1"}
        with httpx.Client(base_url=east.server.endpoint, timeout=30) as anon:
            assert anon.post(f"{MIRRORS}/src/mirrors", json=body).status_code == 401
        with east.client(cred.access_key_id, cred.secret) as c:
            r = c.post(f"{MIRRORS}/src/mirrors", json=body)
            assert r.status_code == 403, r.text
            assert c.get(f"{MIRRORS}/src/mirrors").status_code == 200  # ReadRepository
        with east.client() as c:
            assert c.get(f"{MIRRORS}/src/mirrors").json()["results"] == []  # nothing made
            for bad, code in [({**body, "region": "mars"}, 400),
                              ({**body, "region": "east"}, 400),
                              ({**body, "name": "Bad_Name"}, 400),
                              ({**body, "storage_namespace": "nope"}, 400)]:
                r = c.post(f"{MIRRORS}/src/mirrors", json=bad)
                assert r.status_code == code, (bad, r.text)
                assert r.json()["message"]
            assert c.post(f"{MIRRORS}/nosuchrepo/mirrors", json=body).status_code == 404
            assert c.post(f"{MIRRORS}/src/mirrors", json=body).status_code == 201
            dup = c.post(f"{MIRRORS}/src/mirrors", json={**body, "storage_namespace": "local://x"})
            assert dup.status_code == 409, dup.text
            same_ns = c.post(f"{MIRRORS}/src/mirrors", json={**body, "name": "mir2"})
            assert same_ns.status_code == 409, same_ns.text
            assert c.get(f"{MIRRORS}/src/mirrors/nope").status_code == 404
        assert west.server  # the destination took no part in the refusals


def test_detach_after_source_loss(tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, interval="1s") as (east, west):
        create_source(east)
        upload(east, "src", "main", "a", b"kept")
        c1 = commit(east, "src", "main", "c1")
        mirror = create_mirror(east)
        wait_for(lambda: mirror_head(west, "src-mirror", "main") == c1, 30, what="sync")
        east.stop_sidecars()  # the source region's services are gone
        with west.client() as c:
            r = c.post(f"{MIRRORS}/src/mirrors/{mirror['id']}/detach")
            assert r.status_code == 200, r.text
            # now an ordinary writable repository at its last consistent commit
            assert c.post("/api/v1/repositories/src-mirror/branches/main/objects",
                          params={"path": "new"}, content=b"n").status_code == 201
            assert c.post("/api/v1/repositories/src-mirror/branches/main/commits",
                          json={"message": "after failover"}).status_code == 201
            r = c.get("/api/v1/repositories/src-mirror/refs/main/objects", params={"path": "a"})
            assert r.content == b"kept"
            # deleting the (detached) mirror record leaves the repository alone
            assert c.delete(f"{MIRRORS}/src/mirrors/{mirror['id']}").status_code == 204
        west.sidecars[0].sidecar.reconcile()
        assert west.graveler.get_repository("src-mirror").read_only is False
        # failback: the source region returns and the detached repository, now an
        # ordinary one, is mirrored back into it
        east.start_sidecar()
        with west.client() as c:
            r = c.post(f"{MIRRORS}/src-mirror/mirrors", json={
                "name": "src-back", "region": "east", "storage_namespace": "local://src-back"})
            assert r.status_code == 201, r.text
        head = mirror_head(west, "src-mirror", "main")
        wait_for(lambda: mirror_head(east, "src-back", "main") == head, 30, what="failback")
        with east.client() as c:
            r = c.get("/api/v1/repositories/src-back/refs/main/objects", params={"path": "new"})
            assert r.status_code == 200 and r.content == b"n"
            # a mirror that still follows its source cannot itself be mirrored
            r = c.post(f"{MIRRORS}/src-back/mirrors", json={
                "name": "src-again", "region": "west", "storage_namespace": "local://again"})
            assert r.status_code == 400 and "is itself a mirror" in r.text


def test_events_beat_the_polling_interval(tmp_path: Path,
                                          sqlite_mirrors: dict[str, Any]) -> None:
    """With the default 1 minute intervals, a commit still reaches the mirror at once."""
    with two_regions(tmp_path, sqlite_mirrors, interval="1m") as (east, west):
        create_source(east)
        create_mirror(east)
        wait_for(lambda: west.graveler.refstore.list_repositories(prefix="src-mirror"), 20,
                 what="mirror created (woken by the change feed)")
        for n in range(3):
            upload(east, "src", "main", f"f{n}", b"x")
            head = commit(east, "src", "main", f"c{n}")
            wait_for(lambda h=head: mirror_head(west, "src-mirror", "main") == h, 20,
                     what=f"commit {n} promoted well before the 1m poll")
