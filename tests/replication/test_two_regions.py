"""Two regions end to end in one process: create, sense, validate, promote, delete."""

from __future__ import annotations

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


def test_mirror_follows_source(tmp_path: Path, mirrors_database: dict[str, Any]) -> None:
    with two_regions(tmp_path, mirrors_database) as (east, west):
        create_source(east)
        upload(east, "src", "main", "data/a.csv", b"a,b\n1,2\n")
        c1 = commit(east, "src", "main", "first")
        mirror = create_mirror(east)
        assert mirror["state"] == "creating" and mirror["region"] == "west"
        checker = MirrorChecker(east.graveler, "src", west.graveler, "src-mirror")
        wait_for(lambda: mirror_head(west, "src-mirror", "main") == c1, 30,
                 what="first promotion", check=checker.check)
        # the same commit id reads the same bytes in both regions
        with west.client() as c:
            r = c.get(f"/api/v1/repositories/src-mirror/refs/{c1}/objects",
                      params={"path": "data/a.csv"})
            assert r.status_code == 200 and r.content == b"a,b\n1,2\n"
            # I4: nobody writes to a mirror
            w = c.post("/api/v1/repositories/src-mirror/branches/main/objects",
                       params={"path": "x"}, content=b"x")
            assert w.status_code == 403, w.text
            b = c.post("/api/v1/repositories/src-mirror/branches",
                       json={"name": "new", "source": "main"})
            assert b.status_code == 403
        # a new branch and a second commit follow
        with east.client() as c:
            assert c.post("/api/v1/repositories/src/branches",
                          json={"name": "dev", "source": "main"}).status_code == 201
        upload(east, "src", "dev", "data/b.csv", b"3,4\n")
        c2 = commit(east, "src", "dev", "second")
        wait_for(lambda: mirror_head(west, "src-mirror", "dev") == c2, 30,
                 what="dev promotion", check=checker.check)
        # status through either region's server proxy
        with west.client() as c:
            st = c.get(f"{MIRRORS}/src/mirrors/{mirror['id']}/status")
            assert st.status_code == 200, st.text
            rows = {b["branch"]: b for b in st.json()["branches"]}
            wait_for(lambda: rows["dev"]["mirror_head"] == c2 or _refresh(c, mirror, rows),
                     10, what="status")
            assert rows["main"]["source_head"] == rows["main"]["mirror_head"] == c1
        # both regions keep each branch's recent lag, sampled every second
        for region in (east, west):
            with region.client() as c:
                wait_for(lambda c=c: _lag_samples(c, mirror) >= 3, 20, what="lag history")
                lag = c.get(f"{MIRRORS}/src/mirrors/{mirror['id']}/lag").json()
                assert lag["interval_seconds"] == 1 and lag["window_seconds"] == 600
                history = {b["branch"]: b["samples"] for b in lag["branches"]}
                assert set(history) == {"main", "dev"}
                times = [t for t, _ in history["main"]]
                assert times == sorted(times) and all(v >= 0 for _, v in history["main"])
        with west.client("nobody-key", "nobody-secret") as c:
            assert c.get(f"{MIRRORS}/src/mirrors/{mirror['id']}/lag").status_code == 401
        # deletion removes the mirror repository in the destination
        with east.client() as c:
            assert c.delete(f"{MIRRORS}/src/mirrors/{mirror['id']}").status_code == 204
        wait_for(lambda: _state(east, mirror["id"]) == "deleted", 30, what="deleted")
        with west.client() as c:
            assert c.get("/api/v1/repositories/src-mirror").status_code == 404
        assert checker.checks > 0


def _refresh(c: httpx.Client, mirror: dict[str, Any], rows: dict[str, Any]) -> bool:
    st = c.get(f"{MIRRORS}/src/mirrors/{mirror['id']}/status").json()
    rows.update({b["branch"]: b for b in st["branches"]})
    return False


def _lag_samples(c: httpx.Client, mirror: dict[str, Any]) -> int:
    """The fewest samples any branch of the mirror has."""
    lag = c.get(f"{MIRRORS}/src/mirrors/{mirror['id']}/lag")
    assert lag.status_code == 200, lag.text
    branches = lag.json()["branches"]
    return min((len(b["samples"]) for b in branches), default=0)


def _state(region: Region, mirror_id: str) -> str:
    with region.client() as c:
        r = c.get(f"{MIRRORS}/src/mirrors/{mirror_id}")
        return str(r.json()["state"]) if r.status_code == 200 else f"http {r.status_code}"
