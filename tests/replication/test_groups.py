"""Mirror groups between two live regions: a pipeline commits ``features`` then
``labels``; the DR region serves both new commits at once or neither (I8), where lone
mirrors show the mixed state."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from lakectl import lakectl
from lakefs_testing.regions import (
    Region,
    commit,
    create_mirror,
    create_source,
    mirror_head,
    two_regions,
    upload,
)
from lakefs_testing.replicator import FaultyReplicator
from lakefs_testing.waiting import wait_for
from tests.lakectl.test_mirror import ok, runner

GROUPS = "/service/replication/v1/groups"
REPOS = ("features", "labels")


@contextmanager
def served_pairs(region: Region) -> Iterator[list[tuple[str, str]]]:
    """Every (features, labels) pair of heads the region serves, each pair read at one
    snapshot of its refstore, while the block runs."""
    seen: list[tuple[str, str]] = []
    stop = threading.Event()
    refs = [(repo, "main") for repo in REPOS]

    def read() -> None:
        heads = region.graveler.refstore.get_branches(refs)
        pair = tuple(heads[r].commit_id if r in heads else "" for r in refs)
        if not seen or seen[-1] != pair:
            seen.append((pair[0], pair[1]))

    def watch() -> None:
        while not stop.is_set():
            read()
            time.sleep(0.01)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join()
        read()  # what the block saw last, however slowly the watcher was scheduled


def group_status(region: Region, group_id: str) -> dict[str, Any]:
    with region.client() as c:
        r = c.get(f"{GROUPS}/{group_id}/status")
        assert r.status_code == 200, r.text
        return dict(r.json())


def heads_of(cut: dict[str, Any] | None) -> dict[str, str]:
    return {} if cut is None else {h["mirror_id"]: h["commit_id"] for h in cut["heads"]}


@pytest.mark.parametrize("grouped", [True, False], ids=["group", "lone-mirrors"])
def test_a_group_serves_both_new_commits_at_once_lone_mirrors_a_mixed_state(
        tmp_path: Path, sqlite_mirrors: dict[str, Any], grouped: bool) -> None:
    with two_regions(tmp_path, sqlite_mirrors, mode="native", interval="1s") as (east, west):
        first: dict[str, str] = {}
        for repo in REPOS:
            create_source(east, repo)
            upload(east, repo, "main", "v0", repo.encode())
            first[repo] = commit(east, repo, "main", f"{repo} v0")
        hold = {"on": False}
        crr = [FaultyReplicator(east.blockstore_root / repo, west.blockstore_root / repo,
                                seed=i, drop=0.0,
                                hold=lambda _rel, repo=repo: hold["on"] and repo == "features")
               for i, repo in enumerate(REPOS)]
        for r in crr:
            r.start()
        try:
            mirrors = {repo: create_mirror(east, repo, repo, f"local://{repo}")["id"]
                       for repo in REPOS}
            group_id = ""
            if grouped:
                with east.client() as c:
                    r = c.post(GROUPS, json={"name": "pipeline", "region": "west", "members": [
                        {"mirror_id": mirrors[repo]} for repo in REPOS]})
                    assert r.status_code == 201, r.text
                    group_id = r.json()["id"]
                    assert [m["branch"] for m in r.json()["members"]] == ["main", "main"]
            wait_for(lambda: all(mirror_head(west, repo, "main") == first[repo]
                                 for repo in REPOS), 60, what="first commits mirrored")

            with served_pairs(west) as seen:
                # the pipeline: features first, then labels; features' objects are held back
                hold["on"] = True
                upload(east, "features", "main", "v1", b"new features")
                f1 = commit(east, "features", "main", "features v1")
                upload(east, "labels", "main", "v1", b"new labels")
                l1 = commit(east, "labels", "main", "labels v1")
                if grouped:
                    # labels' commit is complete in west; the cut it belongs to waits for
                    # features' objects only, and west serves the cut before
                    def waits_for_features_only() -> bool:
                        waiting = group_status(west, group_id)["waiting"]
                        return (waiting is not None
                                and heads_of(waiting["cut"]).get(mirrors["labels"]) == l1
                                and mirrors["features"] in waiting["waiting_for"]
                                and mirrors["labels"] not in waiting["waiting_for"])

                    wait_for(waits_for_features_only, 30, what="the cut waits for features")
                    time.sleep(1.5)  # rounds go on: still nothing moves
                    status = group_status(west, group_id)
                    assert heads_of(status["served_cut"]) == {
                        mirrors["features"]: first["features"],
                        mirrors["labels"]: first["labels"]}
                    assert status["current"] is False and status["latest_cut"] >= 2
                    assert (mirror_head(west, "features", "main"),
                            mirror_head(west, "labels", "main")) == (first["features"],
                                                                     first["labels"])
                else:
                    # each mirror on its own: labels moves, features cannot
                    wait_for(lambda: mirror_head(west, "labels", "main") == l1, 30,
                             what="labels mirrored alone")
                    assert mirror_head(west, "features", "main") == first["features"]
                hold["on"] = False
                wait_for(lambda: (mirror_head(west, "features", "main"),
                                  mirror_head(west, "labels", "main")) == (f1, l1), 60,
                         what="both mirrored")
                time.sleep(0.1)
            mixed = (first["features"], l1)
            if grouped:
                # neither new commit until both were complete, then both at once
                assert seen == [(first["features"], first["labels"]), (f1, l1)]
                wait_for(lambda: group_status(west, group_id)["current"], 30, what="current")
                status = group_status(west, group_id)
                assert status["waiting"] is None and status["stale"] is False
                assert heads_of(status["served_cut"]) == {mirrors["features"]: f1,
                                                           mirrors["labels"]: l1}
            else:
                assert mixed in seen  # the DR region served new labels beside old features
        finally:
            for r in crr:
                r.stop()


def test_lakectl_creates_cuts_shows_and_deletes_a_group(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, interval="1s") as (east, west):
        heads = {}
        for repo in REPOS:
            create_source(east, repo)
            upload(east, repo, "main", "v0", repo.encode())
            heads[repo] = commit(east, repo, "main", f"{repo} v0")
        mirrors = {repo: create_mirror(east, repo, repo, f"local://{repo}")["id"]
                   for repo in REPOS}
        e, w = runner(east, tmp_path), runner(west, tmp_path)
        # members must go from this region to the group's region, each in one group
        refused = e.invoke(lakectl, ["mirror", "group", "create", "g", "--region", "east",
                                       "--member", mirrors["features"]])
        assert refused.exit_code != 0 and "not another known region" in refused.output
        created = ok(e, "mirror", "group", "create", "pipeline", "--region", "west",
                     "--member", mirrors["features"], "--member", f"{mirrors['labels']}:main")
        group_id = created.stdout.split("'")[1]
        assert f"Members: {mirrors['features']}:main, {mirrors['labels']}:main" in created.stdout
        again = e.invoke(lakectl, ["mirror", "group", "create", "other", "--region", "west",
                                   "--member", mirrors["labels"]])
        assert again.exit_code != 0 and "in a group already" in again.output
        assert ok(w, "mirror", "group", "list").stdout.split("\t")[:2] == [group_id, "pipeline"]
        # a requested cut with unchanged heads is the last one; a moved head makes a new one
        first = json.loads(ok(e, "mirror", "group", "cut", group_id, "-o", "json").stdout)
        assert first["sequence"] == 1
        upload(east, "labels", "main", "v1", b"1")
        l1 = commit(east, "labels", "main", "labels v1")
        second = json.loads(ok(e, "mirror", "group", "cut", group_id, "-o", "json").stdout)
        assert second["sequence"] >= 2
        assert {h["commit_id"] for h in second["heads"]} == {heads["features"], l1}

        def served() -> dict[str, Any]:
            return dict(json.loads(ok(w, "mirror", "group", "status", group_id,
                                      "-o", "json").stdout))

        wait_for(lambda: served()["current"], 60, what="the group is current")
        assert mirror_head(west, "labels", "main") == l1
        assert "Served Cut:" in ok(w, "mirror", "group", "status", group_id).stdout
        # the group is changed in its source region only
        refused = w.invoke(lakectl, ["mirror", "group", "delete", group_id, "-y"])
        assert refused.exit_code != 0 and "source region" in refused.output
        ok(e, "mirror", "group", "delete", group_id, "-y")
        assert ok(e, "mirror", "group", "list").stdout == ""
        # the mirrors follow their sources on their own again
        upload(east, "features", "main", "v1", b"1")
        f1 = commit(east, "features", "main", "features v1")
        wait_for(lambda: mirror_head(west, "features", "main") == f1, 60,
                 what="features follows alone")
