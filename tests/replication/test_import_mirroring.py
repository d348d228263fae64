"""Mirroring a repository with imported data: imported objects keep their absolute
addresses, so the destination must hold each at the same address; a commit whose
imported object is missing there is never promoted, and is once the object arrives."""

from __future__ import annotations

import time
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
from tests.replication.invariants import MirrorChecker


def _import(east: Region, source: str, destination: str) -> str:
    with east.client() as c:
        url = "/api/v1/repositories/src/branches/main/import"
        started = c.post(url, json={"paths": [{"type": "common_prefix", "path": source,
                                               "destination": destination}],
                                    "commit": {"message": "import landing"}})
        assert started.status_code == 202, started.text
        import_id = started.json()["id"]
        status = wait_for(lambda: (s := c.get(url, params={"id": import_id}).json())
                          .get("completed") and s, 30, what="import")
        return str(status["commit"]["id"])


def test_an_imported_commit_is_mirrored_only_once_its_objects_are_in_the_destination(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    landing = tmp_path / "landing"
    (landing / "day=1").mkdir(parents=True)
    files = {f"day=1/part-{i}.csv": f"row {i}\n".encode() for i in range(20)}
    for rel, data in files.items():
        (landing / rel).write_bytes(data)
    with two_regions(tmp_path / "regions", sqlite_mirrors,
                     external_prefixes=(str(landing),)) as (east, west):
        create_source(east)
        upload(east, "src", "main", "README", b"written through the server")
        commit(east, "src", "main", "first")
        imported = _import(east, f"local://{landing}/", "tables/events/")
        # one imported object is gone from where every region reads it
        gone = landing / "day=1/part-7.csv"
        gone.unlink()
        mirror = create_mirror(east)
        checker = MirrorChecker(east.graveler, "src", west.graveler, "src-mirror")

        def missing_objects() -> int:
            with west.client() as c:
                st = c.get(f"{MIRRORS}/src/mirrors/{mirror['id']}/status").json()
            return sum(b.get("missing_objects") or 0 for b in st.get("branches", []))

        # validated, found missing (the copier cannot fetch it either), not promoted
        wait_for(lambda: missing_objects() == 1, 30, what="missing object reported",
                 check=checker.check)
        end = time.monotonic() + 2  # more validation rounds and copy attempts
        while time.monotonic() < end:
            checker.check()
            assert mirror_head(west, "src-mirror", "main") != imported
            time.sleep(0.1)
        # the object arrives (as a replication of the landing location would bring it)
        gone.write_bytes(files["day=1/part-7.csv"])
        wait_for(lambda: mirror_head(west, "src-mirror", "main") == imported, 30,
                 what="promotion of the imported commit", check=checker.check)
        checker.verify_commit(imported)
        with west.client() as c:
            r = c.get(f"/api/v1/repositories/src-mirror/refs/{imported}/objects/stat",
                      params={"path": "tables/events/day=1/part-3.csv"})
            assert r.status_code == 200, r.text
            assert r.json()["physical_address"] == f"local://{landing}/day=1/part-3.csv"
            body = c.get(f"/api/v1/repositories/src-mirror/refs/{imported}/objects",
                         params={"path": "tables/events/day=1/part-7.csv"})
            assert body.status_code == 200 and body.content == b"row 7\n"
        # nothing of the landing location was copied into the mirror's namespace
        mirror_ns = west.blockstore_root / "src-mirror"
        copied = {p.read_bytes() for p in mirror_ns.rglob("*") if p.is_file()}
        assert not copied & set(files.values())
