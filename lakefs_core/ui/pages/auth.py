"""The administration area, as lakeFS's: users, groups, policies and credentials.

Every page and form acts through the auth API as the signed-in user, so what a user
may do here is what the API allows: a refused page shows the API's 403, a refused
form comes back with its message.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Form
from fastapi.responses import Response

from lakefs_core.ui.context import ApiError, Page, page, redirect, url
from lakefs_core.ui.pages.common import act, q

router = APIRouter()
PageDep = Annotated[Page, Depends(page)]
FormStr = Annotated[str, Form()]

#: a listing page's length
PAGE_SIZE = 100
#: at most this many names are offered to pick from (a user, a group, a policy)
CHOICES = 1000

POLICY_EXAMPLE = json.dumps({"statement": [{
    "effect": "allow", "action": ["fs:ReadObject", "fs:ListObjects"],
    "resource": "arn:lakefs:fs:::repository/*"}]}, indent=2)


async def _section(p: Page, path: str, params: dict[str, Any] | None = None
                   ) -> tuple[list[dict[str, Any]], str]:
    """The results of a listing (at most :data:`CHOICES`) and "", or none and the API's
    refusal: a page shows the parts its user may read."""
    try:
        return await p.all_pages(path, params, limit=CHOICES), ""
    except ApiError as e:
        if e.status == 401:
            raise
        return [], e.message


async def _names(p: Page, path: str) -> list[str]:
    """The ids a listing gives, to pick from (none when the user may not list them)."""
    return [str(r["id"]) for r in (await _section(p, path))[0]]


async def _list_page(p: Page, template: str, path: str, prefix: str, after: str,
                     **context: Any) -> Response:
    """A listing page; refused, the page says why (answering 403), under the message a
    refused form came back with."""
    try:
        listing = await p.api("GET", path, params={
            "prefix": prefix, "after": after, "amount": PAGE_SIZE})
    except ApiError as e:
        if e.status == 401:
            raise
        return p.render(template, e.status, rows=[], pagination={}, prefix=prefix,
                        refusal=e.message, **context)
    return p.render(template, rows=listing["results"], pagination=listing["pagination"],
                    prefix=prefix, refusal="", **context)


async def _create(p: Page, kind: str, collection: str, body: dict[str, Any]) -> Response:
    """Create a user or group (``kind``) and go to its page; refused, back to the list."""
    name = str(body["id"])
    try:
        await p.api("POST", f"/auth/{collection}", json=body)
    except ApiError as e:
        if e.status == 401:
            raise
        return redirect(url(f"/auth/{collection}"),
                        error=f"cannot create {kind} {name}: {e.message}")
    return redirect(url(f"/auth/{collection}/{q(name)}"), notice=f"{kind} {name} created")


@router.get("/auth")
async def home() -> Response:
    return redirect(url("/auth/users"))


# --- users --------------------------------------------------------------------------
@router.get("/auth/users")
async def users(p: PageDep, prefix: str = "", after: str = "") -> Response:
    return await _list_page(p, "auth_users.html", "/auth/users", prefix, after, tab="users")


@router.post("/auth/users")
async def create_user(p: PageDep, csrf: FormStr, id: FormStr) -> Response:  # noqa: A002
    p.check_form(csrf)
    return await _create(p, "user", "users", {"id": id.strip()})


@router.post("/auth/users/{user}/delete")
async def delete_user(p: PageDep, user: str, csrf: FormStr) -> Response:
    p.check_form(csrf)
    return await act(p, url("/auth/users"), "DELETE", f"/auth/users/{q(user)}",
                     f"user {user} deleted")


@router.get("/auth/users/{user}")
async def user_page(p: PageDep, user: str) -> Response:
    record = await p.api("GET", f"/auth/users/{q(user)}")
    base = f"/auth/users/{q(user)}"
    groups, groups_error = await _section(p, f"{base}/groups")
    policies, policies_error = await _section(p, f"{base}/policies")
    effective, _ = await _section(p, f"{base}/policies", {"effective": "true"})
    credentials, credentials_error = await _section(p, f"{base}/credentials")
    return p.render("auth_user.html", tab="users", user=record, groups=groups,
                    groups_error=groups_error, policies=policies,
                    policies_error=policies_error,
                    inherited=[x for x in effective
                               if x["id"] not in {y["id"] for y in policies}],
                    credentials=credentials, credentials_error=credentials_error,
                    all_groups=await _names(p, "/auth/groups"),
                    all_policies=await _names(p, "/auth/policies"))


@router.post("/auth/users/{user}/groups")
async def join_group(p: PageDep, user: str, csrf: FormStr, group: FormStr) -> Response:
    p.check_form(csrf)
    return await act(p, url(f"/auth/users/{q(user)}"), "PUT",
                     f"/auth/groups/{q(group.strip())}/members/{q(user)}",
                     f"{user} added to group {group.strip()}")


@router.post("/auth/users/{user}/groups/remove")
async def leave_group(p: PageDep, user: str, csrf: FormStr, group: FormStr) -> Response:
    p.check_form(csrf)
    return await act(p, url(f"/auth/users/{q(user)}"), "DELETE",
                     f"/auth/groups/{q(group)}/members/{q(user)}",
                     f"{user} removed from group {group}")


@router.post("/auth/users/{user}/policies")
async def attach_to_user(p: PageDep, user: str, csrf: FormStr, policy: FormStr) -> Response:
    p.check_form(csrf)
    return await act(p, url(f"/auth/users/{q(user)}"), "PUT",
                     f"/auth/users/{q(user)}/policies/{q(policy.strip())}",
                     f"policy {policy.strip()} attached to {user}")


@router.post("/auth/users/{user}/policies/detach")
async def detach_from_user(p: PageDep, user: str, csrf: FormStr, policy: FormStr) -> Response:
    p.check_form(csrf)
    return await act(p, url(f"/auth/users/{q(user)}"), "DELETE",
                     f"/auth/users/{q(user)}/policies/{q(policy)}",
                     f"policy {policy} detached from {user}")


# --- credentials ----------------------------------------------------------------------
#: where a credentials form goes back to: the user's page, or the signed-in user's own
#: credentials page
Back = Literal["user", "own"]


def _credentials_back(p: Page, user: str, back: str) -> str:
    return url("/auth/credentials") if back == "own" and user == p.session.username \
        else url(f"/auth/users/{q(user)}")


@router.get("/auth/credentials")
async def own_credentials(p: PageDep) -> Response:
    """The signed-in user's access keys (what lakeFS's own-credentials policy allows
    without reading any user)."""
    me = p.session.username
    credentials, error = await _section(p, f"/auth/users/{q(me)}/credentials")
    return p.render("auth_credentials.html", tab="credentials", user={"id": me},
                    credentials=credentials, credentials_error=error)


@router.post("/auth/users/{user}/credentials")
async def create_credentials(p: PageDep, user: str, csrf: FormStr,
                             back: Annotated[Back, Form()] = "user") -> Response:
    """New credentials: the page shows the secret this once (it is in no address, so in
    no history nor log)."""
    p.check_form(csrf)
    where = _credentials_back(p, user, back)
    try:
        made = await p.api("POST", f"/auth/users/{q(user)}/credentials")
    except ApiError as e:
        if e.status == 401:
            raise
        return redirect(where, error=f"cannot create credentials: {e.message}")
    resp = p.render("auth_new_credentials.html", tab="credentials" if back == "own" else "users",
                    user={"id": user}, created=made, back=where)
    resp.headers["cache-control"] = "no-store"
    return resp


@router.post("/auth/users/{user}/credentials/delete")
async def revoke_credentials(p: PageDep, user: str, csrf: FormStr, access_key_id: FormStr,
                             back: Annotated[Back, Form()] = "user") -> Response:
    """Revoke an access key: a session signed in with it ends at its next page."""
    p.check_form(csrf)
    return await act(p, _credentials_back(p, user, back), "DELETE",
                     f"/auth/users/{q(user)}/credentials/{q(access_key_id)}",
                     f"access key {access_key_id} revoked")


# --- groups ---------------------------------------------------------------------------
@router.get("/auth/groups")
async def groups(p: PageDep, prefix: str = "", after: str = "") -> Response:
    return await _list_page(p, "auth_groups.html", "/auth/groups", prefix, after,
                            tab="groups")


@router.post("/auth/groups")
async def create_group(p: PageDep, csrf: FormStr, id: FormStr,  # noqa: A002
                       description: FormStr = "") -> Response:
    p.check_form(csrf)
    return await _create(p, "group", "groups", {"id": id.strip(),
                                                "description": description.strip() or None})


@router.post("/auth/groups/{group}/delete")
async def delete_group(p: PageDep, group: str, csrf: FormStr) -> Response:
    p.check_form(csrf)
    return await act(p, url("/auth/groups"), "DELETE", f"/auth/groups/{q(group)}",
                     f"group {group} deleted")


@router.get("/auth/groups/{group}")
async def group_page(p: PageDep, group: str) -> Response:
    record = await p.api("GET", f"/auth/groups/{q(group)}")
    members, members_error = await _section(p, f"/auth/groups/{q(group)}/members")
    policies, policies_error = await _section(p, f"/auth/groups/{q(group)}/policies")
    return p.render("auth_group.html", tab="groups", group=record, members=members,
                    members_error=members_error, policies=policies,
                    policies_error=policies_error,
                    all_users=await _names(p, "/auth/users"),
                    all_policies=await _names(p, "/auth/policies"))


@router.post("/auth/groups/{group}/members")
async def add_member(p: PageDep, group: str, csrf: FormStr, user: FormStr) -> Response:
    p.check_form(csrf)
    return await act(p, url(f"/auth/groups/{q(group)}"), "PUT",
                     f"/auth/groups/{q(group)}/members/{q(user.strip())}",
                     f"{user.strip()} added to group {group}")


@router.post("/auth/groups/{group}/members/remove")
async def remove_member(p: PageDep, group: str, csrf: FormStr, user: FormStr) -> Response:
    p.check_form(csrf)
    return await act(p, url(f"/auth/groups/{q(group)}"), "DELETE",
                     f"/auth/groups/{q(group)}/members/{q(user)}",
                     f"{user} removed from group {group}")


@router.post("/auth/groups/{group}/policies")
async def attach_to_group(p: PageDep, group: str, csrf: FormStr, policy: FormStr) -> Response:
    p.check_form(csrf)
    return await act(p, url(f"/auth/groups/{q(group)}"), "PUT",
                     f"/auth/groups/{q(group)}/policies/{q(policy.strip())}",
                     f"policy {policy.strip()} attached to group {group}")


@router.post("/auth/groups/{group}/policies/detach")
async def detach_from_group(p: PageDep, group: str, csrf: FormStr,
                            policy: FormStr) -> Response:
    p.check_form(csrf)
    return await act(p, url(f"/auth/groups/{q(group)}"), "DELETE",
                     f"/auth/groups/{q(group)}/policies/{q(policy)}",
                     f"policy {policy} detached from group {group}")


# --- policies -------------------------------------------------------------------------
def statements(document: str) -> list[Any]:
    """A policy's statements from the document typed in: ``{"statement": [...]}`` (as
    lakeFS shows a policy) or the list of statements alone.

    Raises:
        ValueError: not JSON, or neither shape (the message says which).
    """
    try:
        parsed = json.loads(document)
    except ValueError as e:
        raise ValueError(f"the policy is not JSON: {e}") from None
    if isinstance(parsed, dict) and isinstance(parsed.get("statement"), list):
        return list(parsed["statement"])
    if isinstance(parsed, list):
        return parsed
    raise ValueError('a policy is {"statement": [...]}, a list of statements')


async def _save_policy(p: Page, method: str, path: str, name: str, document: str,
                       back: str, done: str) -> Response:
    try:
        body = {"id": name, "statement": statements(document)}
        await p.api(method, path, json=body)
    except ValueError as e:
        return redirect(back, error=str(e))
    except ApiError as e:
        if e.status == 401:
            raise
        return redirect(back, error=f"policy {name} not saved: {e.message}")
    return redirect(url(f"/auth/policies/{q(name)}"), notice=done)


@router.get("/auth/policies")
async def policies(p: PageDep, prefix: str = "", after: str = "") -> Response:
    return await _list_page(p, "auth_policies.html", "/auth/policies", prefix, after,
                            tab="policies", example=POLICY_EXAMPLE)


@router.post("/auth/policies")
async def create_policy(p: PageDep, csrf: FormStr, id: FormStr,  # noqa: A002
                        document: FormStr) -> Response:
    p.check_form(csrf)
    name = id.strip()
    return await _save_policy(p, "POST", "/auth/policies", name, document,
                              url("/auth/policies"), f"policy {name} created")


@router.get("/auth/policies/{policy}")
async def policy_page(p: PageDep, policy: str) -> Response:
    record = await p.api("GET", f"/auth/policies/{q(policy)}")
    document = json.dumps({"statement": [{k: v for k, v in st.items() if v is not None}
                                         for st in record["statement"]]}, indent=2)
    return p.render("auth_policy.html", tab="policies", policy=record, document=document)


@router.post("/auth/policies/{policy}")
async def update_policy(p: PageDep, policy: str, csrf: FormStr, document: FormStr) -> Response:
    p.check_form(csrf)
    return await _save_policy(p, "PUT", f"/auth/policies/{q(policy)}", policy, document,
                              url(f"/auth/policies/{q(policy)}"), f"policy {policy} saved")


@router.post("/auth/policies/{policy}/delete")
async def delete_policy(p: PageDep, policy: str, csrf: FormStr) -> Response:
    p.check_form(csrf)
    return await act(p, url("/auth/policies"), "DELETE", f"/auth/policies/{q(policy)}",
                     f"policy {policy} deleted")
