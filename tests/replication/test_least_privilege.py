"""The sidecars as the documented replication users, never as admin."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import httpx

from lakefs_core.auth.model import Policy
from lakefs_core.client import API_PREFIX, ApiError, RestClient
from lakefs_core.graveler.model import Entry, Tag
from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET, LiveServer
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
from lakefs_testing.replication_user import (
    ReplicationUser,
    broad_replication_policy,
    narrow_replication_policy,
    without_list_tags,
)
from lakefs_testing.replicator import FaultyReplicator
from lakefs_testing.waiting import wait_for
from replication.source import SourceClient
from tests.replication.invariants import MirrorChecker

KEY, SECRET = "AKIAREPLICATIONUSER1", "replication-user-secret-key-for-tests"
LIST_TAGS = "fs:ListTags on arn:lakefs:fs:::repository/src"


def replicator(policy: dict[str, Any]) -> ReplicationUser:
    return ReplicationUser("replicator", KEY, SECRET, (policy,))


def status(region: Region, mirror_id: str) -> dict[str, Any]:
    with region.client() as c:
        r = c.get(f"{MIRRORS}/src/mirrors/{mirror_id}/status")
        assert r.status_code == 200, r.text
        return dict(r.json())


def permission_errors(region: Region, action: str) -> float:
    text = httpx.get(f"{region.sidecars[0].url}/metrics", timeout=10).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith("replication_permission_errors_total{") and f'action="{action}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def follow_with(tmp_path: Path, mirrors_db: dict[str, Any], policy: dict[str, Any], *,
                tags: bool, granted_later: dict[str, Any] | None = None) -> None:
    """Branches follow the source; tags too when the policy lets the user list them (as
    the documented ones do), else they are reported as not mirrored, in the status view
    and a metric."""
    with two_regions(tmp_path, mirrors_db, mode="native", interval="1s",
                     user=replicator(policy)) as (east, west):
        create_source(east)
        upload(east, "src", "main", "a.txt", b"one")
        c1 = commit(east, "src", "main", "first")
        with east.client() as c:
            assert c.post("/api/v1/repositories/src/tags",
                          json={"id": "v1", "ref": c1}).status_code == 201
        crr = FaultyReplicator(east.blockstore_root / "src", west.blockstore_root / "src-mirror",
                               seed=3, drop=0.0, duplicate=0.0, max_delay=0.0)
        mirror = create_mirror(east)
        checker = MirrorChecker(east.graveler, "src", west.graveler, "src-mirror")
        warnings: list[logging.LogRecord] = []
        handler = _Collect(warnings)
        logging.getLogger("replication.mirroring").addHandler(handler)
        crr.start(period=0.05)
        try:
            wait_for(lambda: mirror_head(west, "src-mirror", "main") == c1, 60,
                     what="first promotion", check=checker.check)
            heads = []
            for i in range(3):  # several commits at once: their records come by id or log
                upload(east, "src", "main", f"b{i}.txt", f"two {i}".encode())
                heads.append(commit(east, "src", "main", f"more {i}"))
            checker.source_moved("main", heads[-1])
            wait_for(lambda: mirror_head(west, "src-mirror", "main") == heads[-1], 60,
                     what="later promotion", check=checker.check)
            if tags:
                wait_for(lambda: west.graveler.list_tags("src-mirror") == [Tag("v1", c1)], 60,
                         what="the tag mirrored", check=checker.check)
                assert status(east, mirror["id"])["mirror"]["error"] == ""
                assert status(east, mirror["id"])["mirror"]["state"] == "active"
                assert permission_errors(west, LIST_TAGS) == 0
                assert warnings == []
                checker.check()
                return
            error = wait_for(lambda: status(east, mirror["id"])["mirror"]["error"], 30,
                             what="the tags notice in the status")
            assert "tags are not mirrored" in error and LIST_TAGS in error
            assert status(west, mirror["id"])["mirror"]["error"] == error  # every region
            assert status(east, mirror["id"])["mirror"]["state"] == "active"
            assert west.graveler.list_tags("src-mirror") == []
            assert permission_errors(west, LIST_TAGS) >= 1
            # said once in the log (the status says it on), however many rounds refused
            assert len([w for w in warnings if "fs:ListTags" in w.getMessage()]) == 1
            checker.check()
            assert granted_later is not None
            # the policy is fixed while the source has no tag, so none is to be copied:
            # the sensor's read of the heads now carries the (empty) tags, and the notice
            # goes; a new tag follows
            with east.client() as c:
                assert c.delete("/api/v1/repositories/src/tags/v1").status_code == 204
            for region in (east, west):
                region.server.services.auth.update_policy(Policy.from_dict(granted_later))
            wait_for(lambda: status(east, mirror["id"])["mirror"]["error"] == "", 30,
                     what="the tags notice gone")
            with east.client() as c:
                assert c.post("/api/v1/repositories/src/tags",
                              json={"id": "v2", "ref": c1}).status_code == 201
            wait_for(lambda: west.graveler.list_tags("src-mirror") == [Tag("v2", c1)], 60,
                     what="the tag mirrored once listable", check=checker.check)
            assert len([w for w in warnings if "fs:ListTags" in w.getMessage()]) == 1
            checker.check()
        finally:
            logging.getLogger("replication.mirroring").removeHandler(handler)
            crr.stop()


class _Collect(logging.Handler):
    """Keeps the warnings (and worse) a logger emits."""

    def __init__(self, into: list[logging.LogRecord]) -> None:
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record)


def test_narrow_policy_mirrors_branches_and_tags(tmp_path: Path,
                                                 sqlite_mirrors: dict[str, Any]) -> None:
    follow_with(tmp_path, sqlite_mirrors,
                narrow_replication_policy("src", "src-mirror", "local://src-mirror"), tags=True)


def test_broad_policy_mirrors_branches_and_tags(tmp_path: Path,
                                                sqlite_mirrors: dict[str, Any]) -> None:
    follow_with(tmp_path, sqlite_mirrors, broad_replication_policy(), tags=True)


def test_without_list_tags_branches_follow_and_the_status_says_why(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    policy = narrow_replication_policy("src", "src-mirror", "local://src-mirror")
    follow_with(tmp_path, sqlite_mirrors, without_list_tags(policy), tags=False,
                granted_later=policy)


def test_a_missing_permission_shows_in_the_status(tmp_path: Path,
                                                  sqlite_mirrors: dict[str, Any]) -> None:
    # a policy for another source repository: the user may not list this one's branches
    policy = narrow_replication_policy("other", "src-mirror", "local://src-mirror")
    with two_regions(tmp_path, sqlite_mirrors, mode="native", interval="1s",
                     user=replicator(policy)) as (east, west):
        create_source(east)
        upload(east, "src", "main", "a.txt", b"one")
        commit(east, "src", "main", "first")
        mirror = create_mirror(east)
        needs = "fs:ReadRepository on arn:lakefs:fs:::repository/src"
        error = wait_for(lambda: needs in status(east, mirror["id"])["mirror"]["error"]
                         and status(east, mirror["id"])["mirror"]["error"], 60,
                         what="the missing permission in the status")
        assert "403" in error and "GET /api/v1/repositories/src" in error
        assert status(east, mirror["id"])["mirror"]["state"] == "creating"
        assert permission_errors(west, needs) >= 1


def test_new_commits_by_id_when_the_log_is_forbidden(server: LiveServer) -> None:
    """The narrow policy cannot read a commit log; the records come by id, parents first."""

    graveler = server.services.graveler
    graveler.create_repository("src", "local://src")

    def put(branch: str, path: str) -> str:
        graveler.set_entry("src", branch, path, Entry(f"data/{path}", 1, path, 1.0))
        return graveler.commit("src", branch, path, "alice").id

    base = put("main", "a")
    graveler.create_branch("src", "dev", "main")
    put("dev", "b")
    put("main", "c")
    head = graveler.merge("src", "dev", "main", "alice").id  # a merge: two parents
    auth = server.services.auth
    auth.create_user("narrow")
    auth.create_credentials("narrow", KEY, SECRET)
    auth.create_policy(Policy.from_dict(
        narrow_replication_policy("src", "src-mirror", "local://src-mirror")))
    auth.attach_policy_to_user("narrow", "ReplicationPolicy")
    with RestClient(server.endpoint, KEY, SECRET) as rest:
        try:
            rest.request("GET", f"{API_PREFIX}/repositories/src/refs/{head}/commits")
            raise AssertionError("the narrow policy read a commit log")
        except ApiError as e:
            assert e.status == 403
    known = {base}
    narrow = SourceClient(server.endpoint, KEY, SECRET)
    admin = SourceClient(server.endpoint, ADMIN_KEY, ADMIN_SECRET)
    try:
        by_id = narrow.new_commits("src", head, known.__contains__)
        from_log = admin.new_commits("src", head, known.__contains__)
    finally:
        narrow.close()
        admin.close()
    assert {r.id for r in by_id} == {r.id for r in from_log} and len(by_id) == 3
    assert by_id[-1].id == head
    seen = set(known)
    for rec in by_id:  # every commit after its parents
        assert all(p in seen for p in rec.commit.parents), rec.id
        seen.add(rec.id)


def test_a_copy_the_user_may_not_read_shows_in_the_status(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    """The builtin copier reads objects through the source's API: object ARNs are not
    the repository's, so the seed's narrow policy alone cannot copy. The refusal is not
    retried in silence: the branch's status names the request and the permission, the
    metric counts it; with the object statement added the mirror follows."""
    policy = narrow_replication_policy("src", "src-mirror", "local://src-mirror")
    with two_regions(tmp_path, sqlite_mirrors, mode="builtin", interval="1s",
                     user=replicator(policy)) as (east, west):
        create_source(east)
        upload(east, "src", "main", "a.txt", b"one")
        c1 = commit(east, "src", "main", "first")
        mirror = create_mirror(east)
        needs = "fs:ReadObject on arn:lakefs:fs:::repository/src/object/a.txt"

        def branch_error() -> str:
            branches = status(west, mirror["id"])["branches"]
            return next((b["error"] for b in branches
                         if b["branch"] == "main" and needs in b["error"]), "")

        error = wait_for(branch_error, 60, what="the refused copy in the branch's status")
        assert "permission denied" in error and "403" in error
        assert "GET /api/v1/repositories/src/refs/" in error
        assert mirror_head(west, "src-mirror", "main") != c1
        assert permission_errors(west, needs) >= 1
        # the statement a builtin-copier deployment adds: the mirror follows
        extra = {"action": ["fs:ReadObject"], "effect": "allow",
                 "resource": "arn:lakefs:fs:::repository/src/object/*"}
        granted = {**policy, "statement": [*policy["statement"], extra]}
        with east.client() as c:
            assert c.put(f"/api/v1/auth/policies/{policy['id']}",
                         json=granted).status_code == 200
        wait_for(lambda: mirror_head(west, "src-mirror", "main") == c1, 60,
                 what="promotion once the copier may read")
        assert wait_for(lambda: not any(b["error"] for b in status(west, mirror["id"])["branches"]
                                        if b["branch"] == "main"), 30,
                        what="the error cleared")
