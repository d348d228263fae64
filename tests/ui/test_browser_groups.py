"""The mirrors page shows mirror groups, in a real browser (headless Chromium): the cut
served, its source time, what the next cut waits for and the group's lag, refreshed in
place; the group is detached from its destination region with one click."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser

from lakefs_testing.browser import sign_in, watched_page
from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET
from lakefs_testing.regions import Region, commit, create_mirror, create_source
from lakefs_testing.regions import upload as api_upload
from lakefs_testing.replicator import FaultyReplicator
from lakefs_testing.waiting import wait_for

pytestmark = pytest.mark.slow

REPOS = ("ui-features", "ui-labels")
GROUPS = "/service/replication/v1/groups"


def _served(west: Region) -> dict[str, str | None]:
    heads: dict[str, str | None] = {}
    for repo in REPOS:
        try:
            heads[repo] = west.graveler.get_branch(repo, "main").commit_id
        except Exception:  # noqa: BLE001 - not created yet
            heads[repo] = None
    return heads


def _run(east: Region, step: str) -> dict[str, str]:
    heads = {}
    for repo in REPOS:
        api_upload(east, repo, "main", f"{step}.csv", f"{repo},{step}\n".encode())
        heads[repo] = commit(east, repo, "main", f"{repo} {step}")
    return heads


def test_the_mirrors_page_shows_a_group_waiting_then_current_and_detaches_it(
        browser: Browser, regions: tuple[Region, Region], tmp_path: Path) -> None:
    east, west = regions
    hold = {"on": False}
    crr = [FaultyReplicator(east.blockstore_root / repo, west.blockstore_root / repo,
                            drop=0, duplicate=0,
                            hold=lambda _rel, repo=repo: hold["on"] and repo == REPOS[0])
           for repo in REPOS]
    for r in crr:
        r.start()
    try:
        mirrors: dict[str, Any] = {}
        for repo in REPOS:
            create_source(east, repo)
            mirrors[repo] = create_mirror(east, repo, repo, f"local://{repo}")["id"]
        with east.client() as c:
            r = c.post(GROUPS, json={"name": "ui-pipeline", "region": "west", "members": [
                {"mirror_id": mirrors[repo]} for repo in REPOS]})
            assert r.status_code == 201, r.text
            group_id = r.json()["id"]
        first = _run(east, "v0")
        wait_for(lambda: _served(west) == first, 60, what="the first run mirrored")
        hold["on"] = True  # the next run's features never arrive, until released
        newer = _run(east, "v1")

        with watched_page(browser) as (page, watch):
            sign_in(page, east.server.endpoint, ADMIN_KEY, ADMIN_SECRET)
            page.goto(f"{east.server.endpoint}/ui/repositories/{REPOS[1]}/mirrors")
            card = page.locator(f"[data-group='{group_id}']")
            assert card.locator("h3").inner_text().startswith("Group ui-pipeline")
            page.wait_for_function(  # the page refreshes itself: no reload
                "([id, held]) => document.querySelector("
                "`[data-group='${id}'] [data-test=group-waiting]`).textContent.includes(held)",
                arg=[group_id, mirrors[REPOS[0]]], timeout=90_000)
            waiting = card.locator("[data-test=group-waiting]").inner_text()
            assert re.match(r"Next: cut \d+ waits for ", waiting) and mirrors[REPOS[0]] in waiting
            assert card.locator("[data-test=group-current]").inner_text() == "behind"
            labels = card.locator(f"tr[data-member='{mirrors[REPOS[1]]}/main']")
            assert labels.locator("[data-field=waiting_head]").inner_text() == \
                newer[REPOS[1]][:12]
            assert labels.locator("[data-field=served_head]").inner_text() == \
                first[REPOS[1]][:12]
            assert card.locator("[data-field=served_taken_at]").inner_text().endswith("UTC")
            # the member mirror's own card: its branch is the group's
            mirror_row = page.locator(f"[data-mirror='{mirrors[REPOS[1]]}'] tr[data-branch=main]")
            assert mirror_row.locator("[data-field=error]").inner_text().startswith(
                "moved by group ui-pipeline (cut ")
            page.screenshot(path=str(tmp_path / "group-waiting.png"), full_page=True)

            hold["on"] = False
            page.wait_for_function(
                "(id) => document.querySelector(`[data-group='${id}'] "
                "[data-test=group-current]`).textContent === 'current'", arg=group_id,
                timeout=90_000)
            assert card.locator("[data-test=group-waiting]").inner_text() == \
                "No newer cut waits."
            assert labels.locator("[data-field=served_head]").inner_text() == \
                newer[REPOS[1]][:12]
            assert re.fullmatch(r"current · \d+\.\d s",
                                card.locator("[data-field=group_lag]").inner_text())
            assert card.locator("[data-test=group-stale]").is_hidden()
            assert card.locator("[data-test=detach-group]").count() == 0  # west's to do
            page.screenshot(path=str(tmp_path / "group-current.png"), full_page=True)
        assert watch.problems == []
        assert _served(west) == newer

        # in west, where the members' repositories are: detach the group with one click
        with watched_page(browser) as (page, watch):
            sign_in(page, west.server.endpoint, ADMIN_KEY, ADMIN_SECRET)
            page.goto(f"{west.server.endpoint}/ui/repositories/{REPOS[0]}/mirrors")
            page.once("dialog", lambda d: d.accept())
            page.click(f"[data-group='{group_id}'] [data-test=detach-group]")
            notice = page.inner_text("[role=status]")
            assert "group ui-pipeline detached at cut" in notice
            card = page.locator(f"[data-group='{group_id}']")
            assert card.locator("[data-test=group-state]").inner_text() == "detached"
            assert card.locator("[data-test=group-waiting]").inner_text().startswith(
                "Detached")
        assert watch.problems == []
        for repo in REPOS:
            assert not west.graveler.get_repository(repo).read_only
        assert _served(west) == newer
    finally:
        for r in crr:
            r.stop()
