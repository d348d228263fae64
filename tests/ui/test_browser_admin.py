"""The administration area in a real browser: users, groups, policies and access keys
made and removed through the UI; a key made there signs in, and revoking it ends that
session; a user without the auth permissions sees the API's refusal, never an error."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import Browser, Page

from lakefs_testing.browser import Watch, sign_in, watched_page
from lakefs_testing.regions import Region
from tests.ui.conftest import MakeUser, post_by_hand

pytestmark = pytest.mark.slow

READ_ONLY = json.dumps({"statement": [{
    "effect": "allow", "action": ["fs:Read*", "fs:List*"], "resource": "*"}]})


def _accept_dialogs(page: Page) -> None:
    page.on("dialog", lambda d: d.accept())


def _create(page: Page, tab: str, form: str, **fields: str) -> None:
    page.click(f"nav.tabs >> text={tab}")
    page.click(f"[data-test=create-{form}]")
    for name, value in fields.items():
        page.fill(f"#create-{form} [name={name}]", value)
    page.click(f"#create-{form} button[type=submit]")


def test_users_groups_policies_and_keys_made_in_the_ui_sign_in_and_revoking_ends_it(
        browser: Browser, admin: tuple[Page, Watch], regions: tuple[Region, Region]) -> None:
    east, _ = regions
    page, _ = admin
    _accept_dialogs(page)
    page.click("[data-test=admin]")
    _create(page, "Users", "user", id="ada")
    assert "user ada created" in page.inner_text("[role=status]")
    assert page.inner_text("[data-test=user-id]") == "ada"

    _create(page, "Policies", "policy", id="ReadEverything", document=READ_ONLY)
    assert "policy ReadEverything created" in page.inner_text("[role=status]")
    assert json.loads(page.input_value("[data-test=policy-document]")) == json.loads(READ_ONLY)
    _create(page, "Policies", "policy", id="Broken", document="{not json")
    assert "the policy is not JSON" in page.inner_text("[role=alert]")

    _create(page, "Groups", "group", id="lake-readers", description="may read")
    assert "group lake-readers created" in page.inner_text("[role=status]")
    page.fill("[data-test=add-member] input[name=user]", "ada")
    page.click("[data-test=add-member] button[type=submit]")
    assert "ada added to group lake-readers" in page.inner_text("[role=status]")
    assert page.locator("[data-test=members] tr[data-user=ada]").count() == 1
    page.fill("[data-test=attach-policy] input[name=policy]", "ReadEverything")
    page.click("[data-test=attach-policy] button[type=submit]")
    assert page.locator("[data-test=group-policies] tr[data-policy=ReadEverything]").count() == 1

    page.click("[data-test=members] a >> text=ada")  # the user's page, through the group
    assert page.locator("[data-test=user-groups] tr[data-group=lake-readers]").count() == 1
    inherited = page.inner_text("[data-test=user-policies] tr[data-policy=ReadEverything]")
    assert "a group" in inherited
    page.click("[data-test=create-credentials]")
    key = page.inner_text("[data-test=new-key]")
    secret = page.inner_text("[data-test=new-secret]")
    assert key.startswith("AKIA") and len(secret) >= 30
    page.click("[data-test=done]")
    assert page.locator(f"[data-test=credentials] tr[data-key={key}]").count() == 1
    assert secret not in page.content()  # shown once only

    with watched_page(browser, expected_statuses={403}) as (ada, watch):
        sign_in(ada, east.server.endpoint, key, secret)
        assert ada.inner_text("[data-test=user]") == "ada"
        assert ada.locator("[data-test=repositories]").count() == 1  # the policy reads
        with ada.expect_navigation() as went:
            ada.click("[data-test=admin]")  # no auth permission: refused, clearly
        assert went.value is not None and went.value.status == 403
        refusal = ada.inner_text("[data-test=refused]")
        assert "insufficient permissions" in refusal and "policies do not allow" in refusal
        ada.goto(f"{east.server.endpoint}/ui/auth/users/ada")
        assert ada.inner_text("h1") == "Not allowed"
        assert "insufficient permissions" in ada.inner_text("[data-test=error-message]")
        assert "policies do not allow this" in ada.inner_text("[data-test=refusal]")
        ada.goto(f"{east.server.endpoint}/ui/auth/credentials")
        assert "Not allowed" in ada.inner_text("[data-test=refused]")

        page.click(f"[data-test=credentials] tr[data-key={key}] [data-test=revoke]")
        assert f"access key {key} revoked" in page.inner_text("[role=status]")
        ada.goto(f"{east.server.endpoint}/ui/repositories")  # the session ended with its key
        assert "/ui/login" in ada.url
    assert watch.problems == []

    page.click("[data-test=user-groups] tr[data-group=lake-readers] button")
    assert "ada removed from group lake-readers" in page.inner_text("[role=status]")
    page.fill("[data-test=attach-policy] input[name=policy]", "ReadEverything")
    page.click("[data-test=attach-policy] button[type=submit]")
    page.click("[data-test=user-policies] tr[data-policy=ReadEverything] button")
    assert "policy ReadEverything detached from ada" in page.inner_text("[role=status]")
    for tab, row, done in [("Users", "tr[data-user=ada]", "user ada deleted"),
                           ("Groups", "tr[data-group=lake-readers]", "group lake-readers deleted"),
                           ("Policies", "tr[data-policy=ReadEverything]",
                            "policy ReadEverything deleted")]:
        page.click(f"nav.tabs >> text={tab}")
        page.click(f"{row} button.danger")
        assert done in page.inner_text("[role=status]")
        assert page.locator(row).count() == 0
    with east.client() as c:
        assert c.get("/api/v1/auth/users/ada").status_code == 404


def test_a_user_without_auth_permissions_gets_the_apis_refusal_from_forms_too(
        browser: Browser, regions: tuple[Region, Region], make_user: MakeUser) -> None:
    east, _ = regions
    key, secret = make_user(east, "grace", "FSReadAll")
    endpoint = east.server.endpoint
    with watched_page(browser, expected_statuses={403}) as (page, watch):
        sign_in(page, endpoint, key, secret)
        response = page.goto(f"{endpoint}/ui/auth/groups")
        assert response is not None and response.status == 403
        post_by_hand(page, "/ui/auth/users", {"id": "mallory"})  # with the token
        page.wait_for_url("**/ui/auth/users?error=*")
        assert "cannot create user mallory: insufficient permissions" in page.inner_text(
            "[role=alert]")
        assert "insufficient permissions" in page.inner_text("[data-test=refused]")
    assert watch.problems == []
    with east.client() as c:
        assert c.get("/api/v1/auth/users/mallory").status_code == 404
