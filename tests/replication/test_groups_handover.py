"""Detach, switchover and failback of a whole mirror group between two live regions: one
command each, the members at one cut throughout (replication.group_handover)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from lakectl import lakectl
from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET
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
from tests.lakectl.test_mirror import ok, runner
from tests.replication.test_groups import REPOS, group_status, heads_of, served_pairs

GROUPS = "/service/replication/v1/groups"


@dataclass
class Pipeline:
    """``features`` and ``labels`` in east, mirrored into west under their names and
    grouped as ``pipeline``."""

    east: Region
    west: Region
    mirrors: dict[str, str]  # repository -> mirror id
    group_id: str

    def write(self, region: Region, step: str) -> dict[str, str]:
        """One run of the pipeline in ``region``: features, then labels; their heads."""
        heads = {}
        for repo in REPOS:
            upload(region, repo, "main", f"{step}.txt", f"{repo} {step}".encode())
            heads[repo] = commit(region, repo, "main", f"{repo} {step}")
        return heads

    def served(self, region: Region) -> dict[str, str | None]:
        return {repo: mirror_head(region, repo, "main") for repo in REPOS}


def start_pipeline(east: Region, west: Region) -> Pipeline:
    for repo in REPOS:
        create_source(east, repo)
    with east.client() as c:
        mirrors = {}
        for repo in REPOS:
            r = c.post(f"{MIRRORS}/{repo}/mirrors",
                       json={"region": "west", "storage_namespace": f"local://{repo}"})
            assert r.status_code == 201, r.text
            mirrors[repo] = r.json()["id"]
        r = c.post(GROUPS, json={"name": "pipeline", "region": "west", "members": [
            {"mirror_id": mirrors[repo]} for repo in REPOS]})
        assert r.status_code == 201, r.text
    p = Pipeline(east, west, mirrors, r.json()["id"])
    first = p.write(east, "v0")
    wait_for(lambda: p.served(west) == first, 60, what="the pipeline's first run mirrored")
    return p


@contextmanager
def _replicators(east: Region, west: Region, hold: dict[str, bool]
                 ) -> Iterator[dict[str, FaultyReplicator]]:
    """Object replication east -> west for both repositories (``hold["features"]`` holds
    features' copies back), and west -> east, started on demand."""
    crr = {}
    for i, repo in enumerate(REPOS):
        crr[repo] = FaultyReplicator(east.blockstore_root / repo, west.blockstore_root / repo,
                                     seed=i, drop=0.0,
                                     hold=lambda _rel, repo=repo: hold.get(repo, False))
        crr[f"{repo} back"] = FaultyReplicator(west.blockstore_root / repo,
                                               east.blockstore_root / repo, seed=10 + i,
                                               drop=0.0)
        crr[repo].start()
    try:
        yield crr
    finally:
        for r in crr.values():
            r.stop()


def _writable(region: Region, repo: str) -> bool:
    return not region.graveler.get_repository(repo).read_only


def _groups(region: Region) -> list[dict[str, Any]]:
    with region.client() as c:
        r = c.get(GROUPS)
        assert r.status_code == 200, r.text
        return list(r.json()["results"])


def test_a_group_detaches_at_the_cut_it_serves(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, mode="native", interval="1s") as (east, west):
        hold = {"features": False}
        with _replicators(east, west, hold):
            p = start_pipeline(east, west)
            served = p.served(west)
            # the next run's labels are complete in west, its features never arrive
            hold["features"] = True
            newer = p.write(east, "v1")

            def waits_for_features() -> bool:
                waiting = group_status(west, p.group_id)["waiting"]
                return waiting is not None and heads_of(waiting["cut"]).get(
                    p.mirrors["labels"]) == newer["labels"]

            wait_for(waits_for_features, 30, what="the newer cut waits for features")
            # a member is detached with its group, never on its own
            with west.client() as c:
                r = c.post(f"{MIRRORS}/labels/mirrors/{p.mirrors['labels']}/detach")
                assert r.status_code == 400, r.text
                assert f"member of group {p.group_id}" in r.json()["message"]
                assert f"groups/{p.group_id}/detach" in r.json()["message"]
            with east.client() as c:  # detach runs where the members' repositories are
                assert c.post(f"{GROUPS}/{p.group_id}/detach").status_code == 400

            out = ok(runner(west, tmp_path), "mirror", "group", "detach", p.group_id, "-y",
                     "-o", "json")
            result = json.loads(out.stdout)
            assert [ph["phase"] for ph in result["phases"]] == ["detach", "total"]
            assert {m["state"] for m in result["detached"]} == {"detached"}
            # every member at the cut served, labels not at its newer commit
            cut = heads_of(result["cut"])
            assert cut == {p.mirrors[repo]: served[repo] for repo in REPOS}
            assert p.served(west) == served
            for repo in REPOS:
                assert _writable(west, repo)
            status = group_status(west, p.group_id)
            assert status["state"] == "detached"
            assert status["current"] is False and status["waiting"] is None
            assert heads_of(status["served_cut"]) == cut
            assert {m["state"] for m in status["members"]} == {"detached"}
            assert "State: detached" in ok(runner(west, tmp_path), "mirror", "group",
                                           "status", p.group_id).stdout
            # the detached repositories take writes; replication leaves them alone
            hold["features"] = False
            mine = p.write(west, "written in west")
            assert p.served(west) == mine
            refused = runner(west, tmp_path).invoke(
                lakectl, ["mirror", "group", "detach", p.group_id, "-y"])
            assert refused.exit_code != 0 and "is detached already" in \
                refused.output


def test_a_group_detach_that_stopped_half_way_is_finished_by_running_it_again(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, interval="1s") as (east, west):
        p = start_pipeline(east, west)
        served = p.served(west)
        sidecar = west.sidecars[0].sidecar
        # the first member detached, then the request was lost
        sidecar.detach(sidecar.table.get_mirror(sidecar.org, p.mirrors["features"]))
        status = group_status(west, p.group_id)
        assert status["state"] == "mixed" and not status["current"]
        assert {m["mirror_id"]: m["state"] for m in status["members"]} == {
            p.mirrors["features"]: "detached", p.mirrors["labels"]: "active"}
        with west.client() as c:
            r = c.post(f"{GROUPS}/{p.group_id}/detach")
            assert r.status_code == 200, r.text
        assert heads_of(r.json()["cut"]) == {p.mirrors[repo]: served[repo] for repo in REPOS}
        assert {m["state"] for m in r.json()["detached"]} == {"detached"}
        assert group_status(west, p.group_id)["state"] == "detached"


def test_a_group_switches_over_and_back_at_one_cut(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, interval="1s") as (east, west):
        p = start_pipeline(east, west)
        last = p.write(east, "v1")  # may not have reached west yet
        # one command, sent to the source region: forwarded to the destination
        out = ok(runner(east, tmp_path), "mirror", "group", "switchover", p.group_id,
                 "--timeout", "60s", "-y", "-o", "json")
        result = json.loads(out.stdout)
        assert [ph["phase"] for ph in result["phases"]] == [
            "freeze sources", "catch up", "detach", "reverse group", "total"]
        assert heads_of(result["cut"]) == {p.mirrors[repo]: last[repo] for repo in REPOS}
        # west serves every commit east made, writable under the same names
        assert p.served(west) == last
        for repo in REPOS:
            assert _writable(west, repo) and not _writable(east, repo)
        # the reverse group: same name, west to east, of the reverse mirrors
        reverse = result["group"]
        assert (reverse["name"], reverse["source_region"], reverse["region"]) == (
            "pipeline", "west", "east")
        back = {m["name"]: m for m in result["mirrors"]}
        assert set(back) == set(REPOS)
        assert all((m["source_region"], m["region"]) == ("west", "east") for m in back.values())
        assert {m["mirror_id"] for m in reverse["members"]} == {m["id"] for m in back.values()}
        assert [g["id"] for g in _groups(west)] == [reverse["id"]]  # the old one retired

        # east follows west as a group: both new commits at once, never a mixed pair
        with served_pairs(east) as seen:
            run = p.write(west, "v2 in west")
            wait_for(lambda: p.served(east) == run, 60, what="east follows west")
        # a cut may fall between the pipeline's two commits; none has labels ahead
        assert seen[0] == (last["features"], last["labels"])
        assert seen[-1] == (run["features"], run["labels"])
        assert set(seen) <= {seen[0], seen[-1], (run["features"], last["labels"])}
        wait_for(lambda: group_status(east, reverse["id"])["current"], 30, what="current")

        # and back, in east (the reverse group's destination), through the API
        with east.client() as c:
            r = c.post(f"{GROUPS}/{reverse['id']}/switchover", json={"timeout_seconds": 60},
                       timeout=120)
        assert r.status_code == 200, r.text
        again = r.json()["group"]
        assert (again["name"], again["source_region"], again["region"]) == (
            "pipeline", "east", "west")
        for repo in REPOS:
            assert _writable(east, repo) and not _writable(west, repo)
        final = p.write(east, "v3 in east again")
        wait_for(lambda: p.served(west) == final, 60, what="west follows east again")
        for heads in (last, run, final):
            for repo in REPOS:
                for region in (east, west):
                    assert region.graveler.get_commit(repo, heads[repo])


def test_a_group_switchover_that_cannot_catch_up_changes_nothing(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, mode="native", interval="1s") as (east, west):
        hold = {"features": False}
        with _replicators(east, west, hold):
            p = start_pipeline(east, west)
            hold["features"] = True  # the next run's features never arrive
            newer = p.write(east, "v1")
            with west.client() as c:
                r = c.post(f"{GROUPS}/{p.group_id}/switchover", json={"timeout_seconds": 2},
                           timeout=60)
            assert r.status_code == 409, r.text
            message = r.json()["message"]
            assert f"group {p.group_id} did not catch up" in message
            assert "features: branch main: mirror at" in message
            assert f"source at {newer['features']}" in message
            assert "the sources are writable again" in message
            # both sides as they were: sources writable, mirrors active and grouped
            for repo in REPOS:
                assert _writable(east, repo) and not _writable(west, repo)
            assert [g["id"] for g in _groups(west)] == [p.group_id]
            assert {m["state"] for m in group_status(west, p.group_id)["members"]} == {
                "active"}
            hold["features"] = False
            wait_for(lambda: p.served(west) == newer, 60, what="the group follows on")


def test_a_group_fails_back_keeping_what_east_made_alone(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, mode="native", interval="1s") as (east, west):
        hold = {"features": False, "labels": False}
        with _replicators(east, west, hold) as crr:
            p = start_pipeline(east, west)
            # the disaster: east's last run never reaches west
            hold.update(features=True, labels=True)
            lost = p.write(east, "east only")
            # failover: the group detached in west, which takes the next run
            with west.client() as c:
                r = c.post(f"{GROUPS}/{p.group_id}/detach")
                assert r.status_code == 200, r.text
            mine = p.write(west, "west after the failover")

            # east is back; its objects arrive, west's go to east
            hold.update(features=False, labels=False)
            for repo in REPOS:
                crr[f"{repo} back"].start()
            with served_pairs(east) as seen:
                with east.client() as c:  # asked in east: forwarded to west
                    r = c.post(f"{GROUPS}/{p.group_id}/failback",
                               json={"timeout_seconds": 60}, timeout=120)
                assert r.status_code == 200, r.text
                result = r.json()
                wait_for(lambda: p.served(east) == mine, 60, what="east follows west")
            assert [ph["phase"] for ph in result["phases"]] == [
                "freeze old sources", "keep diverged heads", "reverse group", "total"]
            # each repository's head east made alone is kept on a failover branch in west
            kept = {k["mirror_id"]: k for k in result["kept"] if k["ref"] == "main"}
            for repo in REPOS:
                k = kept[p.mirrors[repo]]
                assert k["commit_id"] == lost[repo] and k["branch"].startswith("failover-")
                assert mirror_head(west, repo, k["branch"]) == lost[repo]
                with west.client() as c:
                    r = c.get(f"/api/v1/repositories/{repo}/refs/{k['branch']}/objects",
                              params={"path": "east only.txt"})
                    assert r.status_code == 200 and r.content == f"{repo} east only".encode()
                assert not _writable(east, repo)
            # east's members left east's own run for west's together
            assert seen[0] == (lost["features"], lost["labels"])
            assert seen[-1] == (mine["features"], mine["labels"])
            assert len(seen) == 2, seen
            reverse = result["group"]
            assert (reverse["name"], reverse["source_region"], reverse["region"]) == (
                "pipeline", "west", "east")
            wait_for(lambda: group_status(east, reverse["id"])["current"], 30, what="current")


def test_group_handovers_need_the_rights_on_every_member(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, interval="1s") as (east, west):
        p = start_pipeline(east, west)
        auth = west.server.services.auth
        auth.create_user("reader")
        cred = auth.create_credentials("reader")
        auth.attach_policy_to_user("reader", "FSReadAll")
        with httpx.Client(base_url=west.server.endpoint, timeout=30,
                          auth=(cred.access_key_id, cred.secret)) as c:
            for action in ("detach", "switchover", "failback"):
                r = c.post(f"{GROUPS}/{p.group_id}/{action}")
                assert r.status_code == 403, r.text
            # the internal steps take the replication user's key
            r = c.post(f"/service/replication/v1/internal/groups/{p.group_id}/retire")
            assert r.status_code == 401, r.text
        with west.client(ADMIN_KEY, ADMIN_SECRET) as c:
            r = c.post(f"{GROUPS}/{p.group_id}/failback")
            assert r.status_code == 400 and "needs every member mirror detached" in \
                r.json()["message"], r.text
        with east.client(ADMIN_KEY, ADMIN_SECRET) as c:
            # the replication user may not retire a group whose members still follow
            r = c.post(f"/service/replication/v1/internal/groups/{p.group_id}/retire")
            assert r.status_code == 400 and "not detached" in r.json()["message"], r.text
        assert [g["id"] for g in _groups(west)] == [p.group_id]
