"""Hooks run on the source only: a mirror's promotion runs none, and a detached mirror
runs its own actions (the action files came with the mirrored data) from then on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
from lakefs_testing.webhook import WebhookServer


def _action(url: str) -> bytes:
    return f"""name: notify
on:
  pre-commit:
    branches: [main]
  post-commit:
    branches: [main]
hooks:
  - id: tell
    type: webhook
    properties:
      url: "{url}/hook"
""".encode()


def _runs(region: Region, repo: str) -> list[dict[str, Any]]:
    with region.client() as c:
        r = c.get(f"/api/v1/repositories/{repo}/actions/runs")
        assert r.status_code == 200, r.text
        return list(r.json()["results"])


def test_mirrors_run_no_hooks_until_detached(tmp_path: Path,
                                             sqlite_mirrors: dict[str, Any]) -> None:
    with WebhookServer() as hook, \
            two_regions(tmp_path, sqlite_mirrors, interval="1s") as (east, west):
        create_source(east)
        upload(east, "src", "main", "_lakefs_actions/notify.yaml", _action(hook.url))
        upload(east, "src", "main", "data/a", b"a")
        c1 = commit(east, "src", "main", "first")
        mirror = create_mirror(east)
        upload(east, "src", "main", "data/b", b"b")
        c2 = commit(east, "src", "main", "second")
        wait_for(lambda: mirror_head(west, "src-mirror", "main") == c2, 60,
                 what="the mirror at the second commit")
        # the source ran its hooks for both commits, before and after each
        for cid in (c1, c2):
            assert len(hook.payloads(event_type="post-commit", commit_id=cid)) == 1
        assert len(hook.payloads(event_type="pre-commit", repository_id="src")) == 2
        assert len(_runs(east, "src")) == 4
        # the mirror took both commits and ran nothing
        assert hook.payloads(repository_id="src-mirror") == []
        assert _runs(west, "src-mirror") == []

        with west.client() as c:
            r = c.post(f"{MIRRORS}/src/mirrors/{mirror['id']}/detach")
            assert r.status_code == 200, r.text
        # detached: an ordinary repository whose own actions now run on its commits
        upload(west, "src-mirror", "main", "data/c", b"c")
        c3 = commit(west, "src-mirror", "main", "after failover")
        (post,) = hook.payloads(event_type="post-commit", repository_id="src-mirror")
        assert post["commit_id"] == c3 and post["branch_id"] == "main"
        assert len(hook.payloads(event_type="pre-commit", repository_id="src-mirror")) == 1
        runs = _runs(west, "src-mirror")
        assert {r["event_type"] for r in runs} == {"pre-commit", "post-commit"}
        assert all(r["status"] == "completed" for r in runs)
