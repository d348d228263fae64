"""The mirrors page in a real browser (headless Chromium) when the replication user may
not list the source's tags: the branches are mirrored, and the page says, as a note
and not as an error, that the tags are not and what the user's policy lacks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser

from lakefs_core.ui.pages.mirrors import notes_apart
from lakefs_testing.browser import sign_in, watched_page
from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET
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
    narrow_replication_policy,
    without_list_tags,
)
from lakefs_testing.replicator import FaultyReplicator
from lakefs_testing.waiting import wait_for

KEY, SECRET = "AKIAREPLICATIONNOTES", "replication-user-secret-for-the-notes-test"
LIST_TAGS = "fs:ListTags on arn:lakefs:fs:::repository/src"


def _status_error(region: Region, mirror_id: str) -> str:
    with region.client() as c:
        r = c.get(f"{MIRRORS}/src/mirrors/{mirror_id}/status")
        assert r.status_code == 200, r.text
        return str(r.json()["error"])


TAGS_NOTICE = ("tags are not mirrored: the replication user may not list them; add "
               f"{LIST_TAGS} to its policy")


def test_the_notice_about_tags_is_set_apart_from_the_errors() -> None:
    refused = ("branch 'dev': GET /api/v1/repositories/src/commits/abc needs "
               "fs:ReadCommit on arn:lakefs:fs:::repository/src")
    assert notes_apart(TAGS_NOTICE) == ("", [TAGS_NOTICE])
    assert notes_apart(f"{refused}; {TAGS_NOTICE}") == (refused, [TAGS_NOTICE])
    assert notes_apart(refused) == (refused, [])
    assert notes_apart("") == ("", [])


@pytest.mark.slow
def test_a_mirror_whose_user_may_not_list_tags_shows_a_note(browser: Browser,
                                                            tmp_path: Path) -> None:
    mirrors = {"type": "sqlite", "sqlite": {"path": str(tmp_path / "mirrors.db")}}
    policy = without_list_tags(
        narrow_replication_policy("src", "src-mirror", "local://src-mirror"))
    user = ReplicationUser("replicator", KEY, SECRET, (policy,))
    with two_regions(tmp_path, mirrors, mode="native", interval="1s",
                     user=user) as (east, west):
        create_source(east)
        upload(east, "src", "main", "a.csv", b"lake,area\nVictoria,59947\n")
        head = commit(east, "src", "main", "first")
        with east.client() as c:
            assert c.post("/api/v1/repositories/src/tags",
                          json={"id": "v1", "ref": head}).status_code == 201
        crr = FaultyReplicator(east.blockstore_root / "src", west.blockstore_root / "src-mirror",
                               drop=0, duplicate=0)
        mirror: dict[str, Any] = create_mirror(east)
        crr.start()
        try:
            wait_for(lambda: mirror_head(west, "src-mirror", "main") == head, 60,
                     what="the branch mirrored")
            # the status API says why the tags are left out, naming the permission
            error = wait_for(lambda: _status_error(east, mirror["id"]), 30,
                             what="the tags notice in the status")
            assert error == TAGS_NOTICE
            assert west.graveler.list_tags("src-mirror") == []
            with watched_page(browser) as (page, watch):
                sign_in(page, east.server.endpoint, ADMIN_KEY, ADMIN_SECRET)
                page.goto(f"{east.server.endpoint}/ui/repositories/src/mirrors")
                card = page.locator(f"[data-mirror='{mirror['id']}']")
                note = card.locator("[data-test=mirror-note]")
                assert note.count() == 1
                assert note.get_attribute("role") == "note"
                assert note.inner_text() == f"Note: {TAGS_NOTICE}."
                assert page.locator(".flash.error, [role=alert]").count() == 0
                assert card.locator("[data-test=mirror-progress]").inner_text() == (
                    "1/1 branches current")
                page.screenshot(path=str(tmp_path / "mirror-note.png"), full_page=True)
            assert watch.problems == []
        finally:
            crr.stop()
