"""The web UI in a real browser (headless Chromium), against two live regions.

Each test signs in through the login form, acts as a person would (clicks, forms,
file upload) and fails on any console error, failed request or unexpected error
status; a page refused by permissions must answer 403. Screenshots go to the test's
temporary directory.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from playwright.sync_api import Browser, Page

from lakefs_testing.browser import Watch, sign_in, watched_page
from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET, live_server
from lakefs_testing.regions import (
    MIRRORS,
    Region,
    commit,
    create_mirror,
    create_source,
)
from lakefs_testing.regions import upload as api_upload
from lakefs_testing.replicator import FaultyReplicator
from lakefs_testing.servers import free_port
from lakefs_testing.waiting import wait_for
from lakefs_testing.webhook import WebhookServer
from tests.ui.conftest import MakeUser, post_by_hand

pytestmark = pytest.mark.slow

CSV = b"lake,area_km2,country\nVictoria,59947,Uganda\nBaikal,31722,Russia\nTiticaca,8372,Peru\n"


def test_sign_in_is_required_and_sign_out_ends_the_session(
        browser: Browser, regions: tuple[Region, Region]) -> None:
    east, _ = regions
    endpoint = east.server.endpoint
    with watched_page(browser, expected_statuses={401}) as (page, watch):
        page.goto(f"{endpoint}/ui/repositories")
        assert "/ui/login" in page.url and "next=%2Fui%2Frepositories" in page.url
        page.fill("input[name=access_key_id]", ADMIN_KEY)
        page.fill("input[name=secret_access_key]", "wrong secret")
        page.click("button[type=submit]")
        assert "invalid access key" in page.inner_text("[role=alert]")
        page.fill("input[name=secret_access_key]", ADMIN_SECRET)
        page.click("button[type=submit]")
        assert page.url.endswith("/ui/repositories")
        assert page.inner_text("[data-test=user]") == "admin"
        kept = page.context.cookies()
        assert [c["name"] for c in kept] == ["lakefs_ui_session"]
        page.click("text=Sign out")
        page.wait_for_load_state()  # the login page it leads to, before leaving it
        assert "/ui/login" in page.url
        page.goto(f"{endpoint}/ui/repositories")  # the cookie is gone
        assert "/ui/login" in page.url
        page.context.add_cookies(kept)  # type: ignore[arg-type]  # a copy is refused too
        page.goto(f"{endpoint}/ui/repositories")
        assert "/ui/login" in page.url
    assert watch.problems == []


def test_create_upload_commit_log_diff_and_csv_preview(admin: tuple[Page, Watch],
                                                        tmp_path: Path) -> None:
    page, _ = admin
    page.click("[data-test=create-repo]")
    page.fill("#create-repo input[name=name]", "lakes")
    page.click("#create-repo button[type=submit]")
    assert "repository lakes created" in page.inner_text("[role=status]")

    page.click("[data-test=upload]")
    page.set_input_files("#upload-form input[type=file]", {
        "name": "lakes.csv", "mimeType": "text/csv", "buffer": CSV})
    page.fill("#upload-form input[name=path]", "data/lakes.csv")
    page.click("#upload-form button[type=submit]")
    assert "uploaded data/lakes.csv" in page.inner_text("[role=status]")

    page.click("nav.tabs >> text=Uncommitted changes")
    assert "data/lakes.csv" in page.inner_text("[data-test=diff]")
    page.fill("[data-test=commit-form] input[name=message]", "add the lakes")
    page.click("[data-test=commit]")
    assert page.inner_text("[data-test=commit-message]") == "add the lakes"
    commit_id = page.inner_text("[data-test=commit-id]")
    diff = page.inner_text("[data-test=diff]")
    assert "added" in diff and "data/lakes.csv" in diff

    page.click("nav.tabs >> text=Commits")
    log = page.inner_text("[data-test=commits]")
    assert "add the lakes" in log and commit_id[:12] in log

    page.click("nav.tabs >> text=Objects")
    page.click("a.dir >> text=data/")
    page.click("a.file >> text=lakes.csv")
    table = page.locator("[data-test=preview-table]")
    assert table.locator("th").all_inner_texts() == ["lake", "area_km2", "country"]
    assert table.locator("tbody tr").count() == 3
    assert "Baikal" in table.inner_text()
    page.screenshot(path=str(tmp_path / "csv-preview.png"), full_page=True)


PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")


def test_parquet_json_and_image_previews(admin: tuple[Page, Watch],
                                         regions: tuple[Region, Region]) -> None:
    east, _ = regions
    create_source(east, "previews")
    parquet = io.BytesIO()
    pq.write_table(pa.table({"lake": ["Victoria", "Baikal"], "depth_m": [84, 1642]}), parquet)
    api_upload(east, "previews", "main", "lakes.parquet", parquet.getvalue())
    api_upload(east, "previews", "main", "meta.json", b'{"lakes":2,"units":{"depth":"m"}}')
    api_upload(east, "previews", "main", "dot.png", PNG)
    commit(east, "previews", "main", "files to preview")
    page, _ = admin
    page.goto(f"{east.server.endpoint}/ui/repositories/previews/objects")

    page.click("a.file >> text=lakes.parquet")
    table = page.locator("[data-test=preview-table]")
    assert table.locator("th").all_inner_texts() == ["lake", "depth_m"]
    assert [r.locator("td").all_inner_texts() for r in table.locator("tbody tr").all()] == [
        ["Victoria", "84"], ["Baikal", "1642"]]

    page.go_back()
    page.click("a.file >> text=meta.json")
    assert page.get_attribute("[data-test=preview]", "data-kind") == "json"
    shown = page.inner_text("[data-test=preview] pre")
    assert json.loads(shown) == {"lakes": 2, "units": {"depth": "m"}} and "\n  " in shown

    page.go_back()
    page.click("a.file >> text=dot.png")
    image = page.locator("[data-test=preview] img")
    image.wait_for()
    page.wait_for_function("() => document.querySelector('[data-test=preview] img').complete")
    size = image.evaluate("img => [img.naturalWidth, img.naturalHeight]")
    assert size == [1, 1]  # the browser decoded the object's bytes as the image


def test_deleting_a_repository_asks_for_its_name(admin: tuple[Page, Watch],
                                                 regions: tuple[Region, Region]) -> None:
    east, _ = regions
    create_source(east, "doomed")
    page, _ = admin
    page.goto(f"{east.server.endpoint}/ui/repositories")
    delete = "tr[data-repo=doomed] button.danger"
    prompts: list[str] = []

    def answer(text: str | None) -> None:
        def handle(dialog: Any) -> None:
            prompts.append(dialog.message)
            dialog.dismiss() if text is None else dialog.accept(text)
        page.once("dialog", handle)

    answer(None)  # cancelled: nothing is sent
    page.click(delete)
    assert "Type its name to confirm" in prompts[-1] and "doomed" in prompts[-1]
    assert page.locator("tr[data-repo=doomed]").count() == 1
    answer("doomed-not")  # a wrong name: refused, the repository stays
    page.click(delete)
    assert "type the repository's name (doomed)" in page.inner_text("[role=alert]")
    assert page.locator("tr[data-repo=doomed]").count() == 1
    answer("doomed")
    page.click(delete)
    assert "repository doomed deleted" in page.inner_text("[role=status]")
    assert page.locator("tr[data-repo=doomed]").count() == 0
    with east.client() as c:
        assert c.get("/api/v1/repositories/doomed").status_code == 404


def test_the_mirrors_page_says_when_the_replication_service_is_down(
        browser: Browser, tmp_path: Path) -> None:
    # a server whose replication service does not answer (nothing listens there)
    env = {"LAKEFS_REPLICATION_ENDPOINT": f"http://127.0.0.1:{free_port()}"}
    with live_server(str(tmp_path / "alone"), env) as server:
        with server.client() as c:
            assert c.post("/repositories", json={"name": "lonely"}).status_code == 201
        with watched_page(browser) as (page, watch):
            sign_in(page, server.endpoint, ADMIN_KEY, ADMIN_SECRET)
            response = page.goto(f"{server.endpoint}/ui/repositories/lonely/mirrors")
            assert response is not None and response.status == 200
            banner = page.inner_text(".flash.error")
            assert "Mirrors unavailable" in banner and "replication service" in banner
            assert page.locator("[data-mirror]").count() == 0
            page.click("nav.tabs >> text=Objects")  # the rest of the UI works on
            assert "/ui/repositories/lonely/objects" in page.url
            assert page.locator("[data-test=upload]").count() == 1
        assert watch.problems == []


def test_compare_shows_conflicts_and_merges(admin: tuple[Page, Watch],
                                            regions: tuple[Region, Region]) -> None:
    east, _ = regions
    create_source(east, "merging")
    api_upload(east, "merging", "main", "shared.txt", b"base")
    commit(east, "merging", "main", "base")
    with east.client() as c:
        assert c.post("/api/v1/repositories/merging/branches",
                      json={"name": "feature", "source": "main"}).status_code == 201
    api_upload(east, "merging", "feature", "shared.txt", b"feature")
    api_upload(east, "merging", "feature", "new.txt", b"new")
    commit(east, "merging", "feature", "feature work")
    api_upload(east, "merging", "main", "shared.txt", b"main")
    commit(east, "merging", "main", "main work")

    page, watch = admin
    page.goto(f"{east.server.endpoint}/ui/repositories/merging/compare?base=main&compare=feature")
    assert "shared.txt" in page.inner_text("[data-test=conflicts]")
    assert "new.txt" in page.inner_text("[data-test=diff]")
    page.click("[data-test=merge]")
    assert "conflict" in page.inner_text("[role=alert]")
    page.select_option("[data-test=merge-form] select[name=strategy]", "source-wins")
    page.click("[data-test=merge]")
    assert "merged feature into main" in page.inner_text("[role=status]")
    with east.client() as c:
        got = c.get("/api/v1/repositories/merging/refs/main/objects",
                    params={"path": "shared.txt"})
        assert got.content == b"feature"


def test_branches_tags_and_protection(admin: tuple[Page, Watch],
                                     regions: tuple[Region, Region]) -> None:
    east, _ = regions
    create_source(east, "guarded")
    page, _ = admin
    base = f"{east.server.endpoint}/ui/repositories/guarded"
    page.on("dialog", lambda d: d.accept())
    page.goto(f"{base}/branches")
    page.click("[data-test=create-branch]")
    page.fill("#create-branch input[name=name]", "dev")
    page.click("#create-branch button[type=submit]")
    assert "branch dev created" in page.inner_text("[role=status]")
    assert "dev" in page.inner_text("[data-test=branches]")

    page.fill("[data-test=protect-form] input[name=pattern]", "main")
    page.click("[data-test=protect-form] button[type=submit]")
    assert "main" in page.inner_text("[data-test=protection-rules]")
    protected = page.locator("[data-test=branches] tr", has=page.locator("[data-test=protected]"))
    assert protected.count() == 1 and "main" in protected.inner_text()
    page.goto(f"{base}/objects?ref=main")
    page.click("[data-test=upload]")
    page.set_input_files("#upload-form input[type=file]", {
        "name": "x.txt", "mimeType": "text/plain", "buffer": b"x"})
    page.click("#upload-form button[type=submit]")
    assert "protected" in page.inner_text("[role=alert]")

    page.goto(f"{base}/tags")
    page.click("text=Create tag")
    page.fill("#create-tag input[name=name]", "v1")
    page.click("#create-tag button[type=submit]")
    assert "v1" in page.inner_text("[data-test=tags]")
    page.click("[data-test=tags] button.danger")
    assert "tag v1 deleted" in page.inner_text("[role=status]")

    page.goto(f"{base}/branches")
    page.click("[data-test=branches] tr:has-text('dev') button.danger")
    assert "branch dev deleted" in page.inner_text("[role=status]")
    assert "dev" not in page.inner_text("[data-test=branches]")


def test_a_failing_hook_shows_in_the_runs_and_its_output(admin: tuple[Page, Watch],
                                                         regions: tuple[Region, Region]) -> None:
    east, _ = regions
    create_source(east, "gated")
    webhook = WebhookServer(refusal=b"schema check failed: column area_km2 is negative")
    try:
        api_upload(east, "gated", "main", "_lakefs_actions/gate.yaml", f"""name: gate
on:
  pre-commit:
    branches: [main]
hooks:
  - id: schema_check
    type: webhook
    properties:
      url: "{webhook.url}/fail"
""".encode())
        page, _ = admin
        base = f"{east.server.endpoint}/ui/repositories/gated"
        page.goto(f"{base}/changes")
        page.fill("[data-test=commit-form] input[name=message]", "try it")
        page.click("[data-test=commit]")
        assert "pre-commit hook aborted" in page.inner_text("[role=alert]")
        page.click("nav.tabs >> text=Actions")
        runs = page.inner_text("[data-test=runs]")
        assert "pre-commit" in runs and "failed" in runs
        page.click("[data-test=runs] td.mono a")
        hook = page.inner_text("[data-test=hook]")
        assert "gate / schema_check" in hook and "failed" in hook
        assert "schema check failed: column area_km2 is negative" in hook
    finally:
        webhook.close()


def test_a_viewer_sees_no_write_actions_and_is_refused(browser: Browser,
                                                       regions: tuple[Region, Region],
                                                       make_user: MakeUser) -> None:
    east, _ = regions
    create_source(east, "readable")
    key, secret = make_user(east, "viewer", "FSReadAll")
    endpoint = east.server.endpoint
    with watched_page(browser) as (page, watch):
        sign_in(page, endpoint, key, secret)
        assert page.locator("tr[data-repo=readable]").count() == 1
        assert page.locator("[data-test=create-repo]").count() == 0
        assert page.locator("tr[data-repo=readable] button.danger").count() == 0
        page.goto(f"{endpoint}/ui/repositories/readable/objects")
        assert page.locator("[data-test=upload]").count() == 0
        # a form made by hand (with the session's token) is refused by the API
        post_by_hand(page, "/ui/repositories", {"name": "sneaky"})
        page.wait_for_url("**/ui/repositories?error=*")
        assert "insufficient permissions" in page.inner_text("[role=alert]")
    assert watch.problems == []
    with east.client() as c:
        assert c.get("/api/v1/repositories/sneaky").status_code == 404

    key, secret = make_user(east, "nobody", None)
    with watched_page(browser, expected_statuses={403}) as (page, watch):
        sign_in(page, endpoint, key, secret)
        response = page.goto(f"{endpoint}/ui/repositories/readable/objects")
        assert response is not None and response.status == 403
        assert "Not allowed" in page.inner_text("h1")
    assert watch.problems == []


_PROGRESS = "document.querySelector('[data-test=mirror-progress]').textContent"


def _watch_mirror_catch_up(browser: Browser, east: Region, mirror_id: str, head: str,
                           hold: dict[str, bool], tmp_path: Path) -> None:
    """The source's mirrors page shows the commit pending (an object held back), then,
    refreshing itself, current once the object arrives."""
    def lag_samples() -> int:
        with east.client() as c:
            lag = c.get(f"{MIRRORS}/src/mirrors/{mirror_id}/lag").json()
        return min((len(b["samples"]) for b in lag["branches"]), default=0)

    wait_for(lambda: lag_samples() >= 3, 30, what="the sidecar's lag history")
    with watched_page(browser) as (page, watch):
        sign_in(page, east.server.endpoint, ADMIN_KEY, ADMIN_SECRET)
        page.goto(f"{east.server.endpoint}/ui/repositories/src/mirrors")
        card = page.locator(f"[data-mirror='{mirror_id}']")
        row = card.locator("tr[data-branch=main]")
        # the chart starts from the recent history at once: its samples, then the page's
        points = row.locator("svg[data-chart] polyline").get_attribute("points") or ""
        assert len(points.split()) >= 4, points
        page.wait_for_function(  # the page refreshes itself: no reload
            "() => { const c = document.querySelector("
            "'tr[data-branch=main] [data-field=missing_objects]');"
            " return c !== null && c.textContent === '1'; }", timeout=90_000)
        assert card.locator("[data-test=mirror-progress]").inner_text() == "0/1 branches current"
        assert row.locator("[data-field=pending_commit]").inner_text() == head[:12]
        assert row.locator("[data-field=mirror_head]").inner_text() == "—"
        page.screenshot(path=str(tmp_path / "mirror-pending.png"), full_page=True)
        hold["on"] = False
        page.wait_for_function(f"() => {_PROGRESS} === '1/1 branches current'",
                               timeout=90_000)
        assert row.locator("[data-field=mirror_head]").inner_text() == head[:12]
        # current, with the honest lag: the time since the source was last read equal
        assert re.fullmatch(r"current · \d+\.\d s", row.locator("[data-field=lag]").inner_text())
        assert card.locator("[data-test=mirror-stale]").is_hidden()
        assert row.locator("svg[data-chart] polyline").count() == 1  # the lag chart
        assert card.locator("[data-test=detach]").count() == 0  # detached in west only
        page.screenshot(path=str(tmp_path / "mirrors.png"), full_page=True)
    assert watch.problems == []


def test_mirror_page_goes_current_the_mirror_shows_a_banner_and_detaches(
        browser: Browser, regions: tuple[Region, Region], tmp_path: Path) -> None:
    east, west = regions
    create_source(east, "src")
    api_upload(east, "src", "main", "part-0.csv", CSV)
    api_upload(east, "src", "main", "part-1.csv", CSV + b"Ladoga,17700,Russia\n")
    head = commit(east, "src", "main", "first load")
    held = east.graveler.get_entry("src", head, "part-1.csv").address
    hold = {"on": True}
    crr = FaultyReplicator(east.blockstore_root / "src", west.blockstore_root / "src-west",
                           drop=0, duplicate=0, hold=lambda rel: hold["on"] and rel == held)
    mirror: dict[str, Any] = create_mirror(east, "src", "src-west", "local://src-west")
    crr.start()
    try:
        _watch_mirror_catch_up(browser, east, mirror["id"], head, hold, tmp_path)
    finally:
        crr.stop()

    with watched_page(browser) as (page, watch):
        sign_in(page, west.server.endpoint, ADMIN_KEY, ADMIN_SECRET)
        row = page.locator("tr[data-repo=src-west]")
        assert "mirror" in row.inner_text() and "read-only" in row.inner_text()
        page.click("tr[data-repo=src-west] a")
        banner = page.inner_text("[data-test=mirror-banner]")
        assert "Read-only mirror of src in region east" in banner
        assert page.inner_text("[data-test=served-commit]") == head[:12]
        assert page.locator("[data-test=upload]").count() == 0  # a mirror takes no writes

        page.click("nav.tabs >> text=Mirrors")
        dialogs: list[str] = []
        def dismiss(dialog: Any) -> None:
            dialogs.append(dialog.message)
            dialog.dismiss()
        page.once("dialog", dismiss)
        page.click("[data-test=detach]")  # dismissed: nothing happens
        assert dialogs and "cannot be undone" in dialogs[0]
        assert "mirror" in page.inner_text("[data-test=mirror-banner]").lower()
        page.once("dialog", lambda d: d.accept())
        page.click("[data-test=detach]")
        assert "detached" in page.inner_text("[role=status]")
        assert page.inner_text("[data-test=mirror-banner]").startswith("Detached mirror")
        assert page.inner_text("[data-test=detached-badge]") == "detached mirror"
        page.click("nav.tabs >> text=Objects")
        assert page.locator("[data-test=upload]").count() == 1  # writable now
        page.goto(f"{west.server.endpoint}/ui/repositories")
        assert page.inner_text("tr[data-repo=src-west] [data-test=detached-badge]") == \
            "detached mirror"
    assert watch.problems == []


def test_a_mirror_created_from_the_ui_appears_and_goes_active(
        admin: tuple[Page, Watch], regions: tuple[Region, Region]) -> None:
    east, west = regions
    create_source(east, "made-here")
    page, _ = admin
    page.goto(f"{east.server.endpoint}/ui/repositories/made-here/mirrors")
    assert page.locator("[data-test=no-mirrors]").count() == 1

    page.click("[data-test=create-mirror]")
    # the form offers the regions the replication service may mirror to
    assert page.locator("[data-test=region-select] option").all_inner_texts() == ["west"]
    page.select_option("[data-test=region-select]", "west")
    page.fill("#create-mirror input[name=storage_namespace]", "local://made-here-west")
    page.click("#create-mirror button[type=submit]")
    # the mirror repository is named as its source by default
    assert "repository made-here in region west" in page.inner_text("[role=status]")
    card = page.locator("[data-test=mirror]")
    assert card.count() == 1 and "→ west" in card.inner_text()
    page.wait_for_function(  # the page refreshes itself: no reload
        "() => document.querySelector('[data-test=mirror-state]').textContent === 'active'",
        timeout=60_000)
    marking = west.graveler.mirror_marking("made-here")
    assert marking is not None and marking.source_repository == "made-here"
    page.click("[data-test=create-mirror]")  # a second mirror into the same region
    page.fill("#create-mirror input[name=storage_namespace]", "local://made-here-west")
    page.click("#create-mirror button[type=submit]")  # the service's refusal, shown
    alert = page.inner_text("[role=alert]")
    assert "cannot create the mirror" in alert
