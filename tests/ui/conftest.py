"""What the browser tests of the web UI share: one pair of live regions and one headless
Chromium for the whole run (each test uses repositories and users of its own), a page
signed in as the admin, users made with the auth service, and forms sent by hand."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page

from lakefs_testing.browser import Watch, chromium, sign_in, watched_page
from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET
from lakefs_testing.regions import Region, two_regions

#: makes a user in a region, with a policy attached if given: its key id and secret
MakeUser = Callable[[Region, str, "str | None"], tuple[str, str]]


def post_by_hand(page: Page, action: str, fields: dict[str, str]) -> None:
    """Submit a form the page does not offer, with the session's token, as a user could
    by hand (the API is what must refuse it)."""
    csrf = page.get_attribute("form[action='/ui/logout'] input[name=csrf]", "value")
    page.evaluate("""([action, fields]) => {
        const f = document.createElement('form');
        f.method = 'post'; f.action = action;
        for (const [k, v] of Object.entries(fields)) {
            const i = document.createElement('input'); i.name = k; i.value = v;
            f.appendChild(i);
        }
        document.body.appendChild(f); f.submit();
    }""", [action, {"csrf": csrf or "", **fields}])


@pytest.fixture(scope="package")
def regions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Region, Region]]:
    tmp = tmp_path_factory.mktemp("ui")
    mirrors = {"type": "sqlite", "sqlite": {"path": str(tmp / "mirrors.db")}}
    # native object replication: the test copies objects itself, so it can hold one back
    with two_regions(tmp, mirrors, mode="native", interval="1s") as pair:
        yield pair


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    with chromium() as b:  # BrowserMissing (a failure) when Chromium is not installed
        yield b


@pytest.fixture
def admin(browser: Browser, regions: tuple[Region, Region],
          tmp_path: Path) -> Iterator[tuple[Page, Watch]]:
    east, _ = regions
    with watched_page(browser) as (page, watch):
        sign_in(page, east.server.endpoint, ADMIN_KEY, ADMIN_SECRET)
        yield page, watch
        page.screenshot(path=str(tmp_path / "last.png"), full_page=True)
    assert watch.problems == []


@pytest.fixture
def make_user() -> MakeUser:
    def make(region: Region, name: str, policy: str | None) -> tuple[str, str]:
        auth = region.server.services.auth
        auth.create_user(name)
        if policy:
            auth.attach_policy_to_user(name, policy)
        cred = auth.create_credentials(name)
        return cred.access_key_id, cred.secret
    return make
