"""Page sizes of the sidecar's own listings: list_mirrors_page_size (the mirrors
table) and list_repositories_page_size (its region's repositories)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from lakefs_core.graveler.model import MirrorMarking
from lakefs_testing.regions import (
    MIRRORS,
    ORG,
    Region,
    create_mirror,
    create_source,
    two_regions,
)
from lakefs_testing.waiting import wait_for
from mirrors_db import open_mirrors_table
from mirrors_db.models import MirrorSpec, MirrorState
from replication.config import load_replication_config
from replication.sidecar import Sidecar
from tests.replication.proxy import recording_proxy
from tests.replication.settings import configure


@contextmanager
def mirrors_table_selects() -> Iterator[list[str]]:
    """The SELECT statements sent to the mirrors table meanwhile (by any engine)."""
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT") and \
                "FROM mirrors_db_mirrors" in statement:
            seen.append(statement)

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", record)


def test_mirrors_of_a_repository_are_listed_by_list_mirrors_page_size(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    """A ref move in the source region reaches every mirror, a page of one at a time."""
    with two_regions(tmp_path, sqlite_mirrors, sidecars=False) as (east, _west):
        configure(east, list_mirrors_page_size=1)
        config = load_replication_config(str(east.config_path), env={})
        with open_mirrors_table(sqlite_mirrors) as table:
            for i in range(3):
                table.create_mirror(MirrorSpec(
                    organization_id=ORG, name=f"m{i}", source_region="east",
                    source_repository="src", destination_region="west",
                    storage_namespace=f"local://m{i}"))
            sidecar = Sidecar(config, table=table)
            try:
                with mirrors_table_selects() as selects:
                    told = sidecar.on_ref_events([{"repository": "src"}], None)
            finally:
                sidecar.stop()
    assert told == 3
    assert len(selects) >= 3  # one mirror a page


@contextmanager
def deleted_mirrors_left_behind(tmp: Path, mirrors: dict[str, Any]
                                ) -> Iterator[tuple[Region, list[str], str]]:
    """Regions whose west holds repositories of deleted mirrors, as a replica acting on a
    stale view of the table leaves them: deleted, then created again. West's sidecar is
    stopped. Yields (west, those repositories, a mirror repository the table lost)."""
    with two_regions(tmp, mirrors, interval="1s") as (east, west):
        ids = {}
        for i in range(4):
            create_source(east, f"src{i}")
            ids[f"src{i}"] = create_mirror(east, f"src{i}", f"src{i}-mirror",
                                           f"local://src{i}-mirror")["id"]
        with west.client() as c:
            assert c.post("/api/v1/repositories", json={
                "name": "plain", "storage_namespace": "local://plain",
                "read_only": True}).status_code == 201
            wait_for(lambda: all(c.get(f"/api/v1/repositories/{s}-mirror").status_code == 200
                                 for s in ids), 30, what="mirror repositories")
            for src, mirror_id in ids.items():
                assert c.delete(f"{MIRRORS}/{src}/mirrors/{mirror_id}").status_code == 204
            wait_for(lambda: all(c.get(f"/api/v1/repositories/{s}-mirror").status_code == 404
                                 for s in ids), 30, what="mirror repositories deleted")
        sidecar = west.sidecars[0].sidecar
        wait_for(lambda: all(sidecar.table.get_mirror(ORG, i).state is MirrorState.DELETED
                             for i in ids.values()), 30, what="mirrors deleted")
        west.stop_sidecars()
        for src, mirror_id in ids.items():  # what a stale replica's mirrors manager does
            sidecar.mirrors.create_repository(f"{src}-mirror", f"local://{src}-mirror", "main",
                                              MirrorMarking(mirror_id, "east", src))
        with open_mirrors_table(mirrors) as table:
            table.delete_mirror(ORG, ids["src0"])
        yield west, [f"src{i}-mirror" for i in (1, 2, 3)], "src0-mirror"


def test_repositories_of_deleted_mirrors_are_found_a_page_at_a_time(
        tmp_path: Path, sqlite_mirrors: dict[str, Any],
        caplog: pytest.LogCaptureFixture) -> None:
    with deleted_mirrors_left_behind(tmp_path, sqlite_mirrors) as (west, left, lost), \
            recording_proxy(west.server.endpoint) as proxy:
        configure(west, list_repositories_page_size=1, regional_endpoint=proxy.url)
        west.start_sidecar()
        with west.client() as c:
            def status(repo: str) -> int:
                return c.get(f"/api/v1/repositories/{repo}").status_code

            wait_for(lambda: all(status(r) == 404 for r in left), 30,
                     what="repositories of deleted mirrors deleted")
            assert status(lost) == 200  # its mirror is unknown to the table: left alone
            assert status("plain") == 200  # read-only, but no mirror's
        listings = proxy.requests("GET", "/api/v1/repositories")
        assert len(listings) >= 5  # five repositories, one a page
        assert {tuple(s.query["amount"]) for s in listings} == {("1",)}
        # the lost one is reported once, not at every listing (one a second here)
        wait_for(lambda: len(proxy.requests("GET", "/api/v1/repositories")) >= 3 * 5, 30,
                 what="three listings")
        west.stop_sidecars()  # before the proxy it sends through stops
        reports = [r for r in caplog.records
                   if r.name == "replication.sidecar" and lost in r.getMessage()]
        assert len(reports) == 1 and "does not know" in reports[0].getMessage()
