"""A real browser for the web UI: headless Chromium from the system, driven by Playwright.

Playwright's own browser download is not used: the tests and the screenshot script
run Debian's ``chromium`` package (``make`` installs it when missing). Without it they
fail with :class:`BrowserMissing`, saying what to install; they never skip.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, Page, Response

#: where Debian's chromium package puts the browser (LAKEFS_TEST_CHROMIUM overrides)
CHROMIUM = os.environ.get("LAKEFS_TEST_CHROMIUM", "/usr/bin/chromium")


class BrowserMissing(RuntimeError):
    """No browser to test the UI with, and how to get one."""


def chromium_path() -> str:
    if not os.access(CHROMIUM, os.X_OK):
        raise BrowserMissing(
            f"headless Chromium not found at {CHROMIUM}: install Debian's browser with "
            "`apt-get install -y chromium chromium-driver` (`make test` does this as root), "
            "or point LAKEFS_TEST_CHROMIUM at a Chromium binary")
    return CHROMIUM


@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    """The system's Chromium, headless, under Playwright."""
    path = chromium_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:
        raise BrowserMissing("the UI tests need Playwright: pip install -e '.[dev]'") from e
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=path, headless=True,
                                     args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Watch:
    """What went wrong in a page: console errors, failed requests, 5xx answers."""

    #: statuses a test expects (such as the 403 of a refused page): not problems
    expected_statuses: set[int] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)

    def attach(self, page: Page) -> None:
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.problems.append(f"page error: {exc}"))
        page.on("requestfailed", lambda req: self.problems.append(
            f"request failed: {req.method} {req.url} ({req.failure})"))
        page.on("response", self._response)

    def _console(self, message: ConsoleMessage) -> None:
        if message.type != "error":
            return
        text = message.text
        if any(f"status of {s}" in text for s in self.expected_statuses):
            return
        self.problems.append(f"console error: {text}")

    def _response(self, response: Response) -> None:
        if response.status >= 400 and response.status not in self.expected_statuses:
            self.problems.append(f"{response.status} for {response.request.method} "
                                 f"{response.url}")


@contextlib.contextmanager
def watched_page(browser: Browser, *, expected_statuses: set[int] | None = None,
                 viewport: tuple[int, int] = (1280, 800)) -> Iterator[tuple[Page, Watch]]:
    """A fresh browser context (no cookies) and page, watched for problems."""
    context: BrowserContext = browser.new_context(
        viewport={"width": viewport[0], "height": viewport[1]})
    page = context.new_page()
    watch = Watch(set(expected_statuses or ()))
    watch.attach(page)
    try:
        yield page, watch
    finally:
        context.close()


def sign_in(page: Page, endpoint: str, key: str, secret: str) -> None:
    """Sign in through the login form."""
    page.goto(f"{endpoint}/ui/login")
    page.fill("input[name=access_key_id]", key)
    page.fill("input[name=secret_access_key]", secret)
    page.click("button[type=submit]")
    page.wait_for_load_state()
