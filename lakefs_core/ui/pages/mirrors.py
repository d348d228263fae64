"""Mirrors (the replication service's API, through the server's proxy) and action runs."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from lakefs_core.auth import rbac
from lakefs_core.ui.context import ApiError, Page, page, redirect, url
from lakefs_core.ui.pages.common import q, repo_view

router = APIRouter()
PageDep = Annotated[Page, Depends(page)]
FormStr = Annotated[str, Form()]

#: how the replication service's status starts saying that a mirror's user may not list
#: the source's tags: its branches are mirrored all the same, so the page shows a note
TAGS_NOT_MIRRORED = "tags are not mirrored"


def notes_apart(error: str) -> tuple[str, list[str]]:
    """A mirror's status error without its notes, and the notes.

    The service joins what keeps a mirror from following all of its source with
    ``; ``, the branches' refusals first; that tags are not mirrored comes last, and
    says itself what to add to the user's policy.
    """
    start = error.find(TAGS_NOT_MIRRORED)
    if start < 0:
        return error, []
    return error[:start].removesuffix("; "), [error[start:]]


async def _status(p: Page, source: str, mirror_id: str) -> dict[str, Any]:
    """A mirror's status; on an error, the mirror with the error to show."""
    try:
        status: dict[str, Any] = await p.replication(
            "GET", f"/repositories/{q(source)}/mirrors/{q(mirror_id)}/status")
    except ApiError as e:
        if e.status == 401:
            raise
        return {"mirror": {"id": mirror_id}, "branches": [], "error": e.message, "notes": []}
    status["error"], status["notes"] = notes_apart(str(status.get("error") or ""))
    # current: the source read recently and found equal; never while blind (stale)
    status["caught_up"] = sum(1 for b in status.get("branches", []) if b.get("current"))
    # detach is done where the mirror repository lives: this region, if it has it
    mirror = status.get("mirror", {})
    marking = await run_in_threadpool(p.state.services.graveler.mirror_marking,
                                      str(mirror.get("name", "")))
    status["here"] = marking is not None and marking.mirror_id == mirror_id
    return status


async def _with_lag(p: Page, source: str, status: dict[str, Any]) -> dict[str, Any]:
    """``status`` with each branch's recent lag, as the replication service keeps it (none
    when it cannot say), for the page's charts to start from."""
    status["lag_history"] = {}
    status["lag_window"] = 600
    mirror_id = str(status.get("mirror", {}).get("id", ""))
    if status.get("error") and not status.get("branches"):
        return status
    try:
        lag = await p.replication("GET", f"/repositories/{q(source)}/mirrors/{q(mirror_id)}/lag")
    except ApiError as e:
        if e.status == 401:
            raise
        return status
    status["lag_history"] = {b["branch"]: b["samples"] for b in lag.get("branches", [])}
    status["lag_window"] = max(600, int(lag.get("window_seconds") or 0))
    return status


async def _group_status(p: Page, group_id: str) -> dict[str, Any]:
    """A mirror group's status, with whether this region detaches it (``here``: its
    member repositories are here)."""
    status: dict[str, Any] = await p.replication("GET", f"/groups/{q(group_id)}/status")
    members = status.get("members", [])
    markings = [await run_in_threadpool(p.state.services.graveler.mirror_marking,
                                        str(m.get("repository") or "")) for m in members]
    status["here"] = bool(members) and all(
        marking is not None and marking.mirror_id == m["mirror_id"]
        for marking, m in zip(markings, members, strict=True))
    return status


async def _groups_of(p: Page, repository: str) -> list[dict[str, Any]]:
    """The statuses of the mirror groups of this region with a member mirroring
    ``repository`` or mirrored into it (none when the service cannot say)."""
    statuses = []
    try:
        for g in (await p.replication("GET", "/groups"))["results"]:
            statuses.append(await _group_status(p, g["id"]))
    except ApiError as e:
        if e.status == 401:
            raise
    return [st for st in statuses if any(
        repository in (m.get("repository"), m.get("source_repository"))
        for m in st.get("members", []))]


@router.get("/repositories/{repository}/mirrors")
async def mirrors(p: PageDep, repository: str) -> Response:
    view = await repo_view(p, repository, resolve=False)
    served: dict[str, Any] | None = None
    if view.marking is not None:  # this repository is (or was) a mirror: its own mirror
        source = view.marking.source_repository
        served = await _with_lag(p, source, await _status(p, source, view.marking.mirror_id))
    statuses: list[dict[str, Any]] = []
    error = ""
    try:
        listing = await p.replication("GET", f"/repositories/{q(repository)}/mirrors",
                                      params={"amount": 1000})
        for m in listing["results"]:
            statuses.append(await _with_lag(p, repository,
                                            await _status(p, repository, m["id"])))
    except ApiError as e:
        if e.status == 401:
            raise
        error = e.message
    return p.render("mirrors.html", view=view, tab="mirrors", statuses=statuses,
                    served=served, mirrors_error=error, now=time.time(),
                    groups=await _groups_of(p, repository) if not error else [],
                    regions=await _destinations(p) if not error else [],
                    can_mirror=not view.is_mirror and p.can(
                        rbac.MIRROR_REPOSITORY, rbac.repository_arn(view.id)))


async def _destinations(p: Page) -> list[str]:
    """The regions this region's replication service may create a mirror in."""
    try:
        regions = await p.replication("GET", "/regions")
    except ApiError as e:
        if e.status == 401:
            raise
        return []
    return [str(r) for r in regions.get("destinations", [])]


@router.post("/repositories/{repository}/mirrors")
async def create(p: PageDep, repository: str, csrf: FormStr, region: FormStr,
                 storage_namespace: FormStr, name: FormStr = "",
                 storage_id: FormStr = "") -> Response:
    """Create a mirror of ``repository`` in another region (the mirror repository is
    named as the source unless ``name`` is given)."""
    p.check_form(csrf)
    back = url(f"/repositories/{q(repository)}/mirrors")
    body = {"region": region.strip(), "storage_namespace": storage_namespace.strip(),
            "name": name.strip() or repository}
    if storage_id.strip():
        body["storage_id"] = storage_id.strip()
    try:
        made = await p.replication("POST", f"/repositories/{q(repository)}/mirrors", json=body)
    except ApiError as e:
        if e.status == 401:
            raise
        return redirect(back, error=f"cannot create the mirror: {e.message}")
    return redirect(back, notice=f"mirror {made.get('id', '')} of {repository} created: "
                                 f"repository {made.get('name', body['name'])} in region "
                                 f"{made.get('region', body['region'])}")


@router.get("/repositories/{repository}/mirrors/{mirror_id}/status.json")
async def status_json(p: PageDep, repository: str, mirror_id: str) -> Response:
    """A mirror's status for the page's live refresh (``repository`` is its source)."""
    return JSONResponse(await _status(p, repository, mirror_id))


@router.post("/repositories/{repository}/mirrors/{mirror_id}/detach")
async def detach(p: PageDep, repository: str, mirror_id: str, csrf: FormStr,
                 source: FormStr) -> Response:
    p.check_form(csrf)
    back = url(f"/repositories/{q(repository)}/mirrors")
    try:
        detached = await p.replication(
            "POST", f"/repositories/{q(source)}/mirrors/{q(mirror_id)}/detach")
    except ApiError as e:
        if e.status == 401:
            raise
        return redirect(back, error=f"detach failed: {e.message}")
    return redirect(back, notice=f"mirror {mirror_id} detached: repository "
                                 f"{detached.get('name', '')} is writable")


@router.get("/repositories/{repository}/mirror-groups/{group_id}/status.json")
async def group_status_json(p: PageDep, repository: str, group_id: str) -> Response:
    """A mirror group's status for the page's live refresh."""
    return JSONResponse(await _group_status(p, group_id))


@router.post("/repositories/{repository}/mirror-groups/{group_id}/detach")
async def detach_group(p: PageDep, repository: str, group_id: str, csrf: FormStr) -> Response:
    p.check_form(csrf)
    back = url(f"/repositories/{q(repository)}/mirrors")
    try:
        done = await p.replication("POST", f"/groups/{q(group_id)}/detach")
    except ApiError as e:
        if e.status == 401:
            raise
        return redirect(back, error=f"detach failed: {e.message}")
    cut = done.get("cut")
    return redirect(back, notice=f"group {done['group']['name']} detached at "
                                 + (f"cut {cut['sequence']}: " if cut else "no cut: ")
                                 + ", ".join(m["name"] for m in done.get("detached", []))
                                 + " writable")


@router.get("/repositories/{repository}/actions")
async def runs(p: PageDep, repository: str, branch: str = "", after: str = "") -> Response:
    view = await repo_view(p, repository, resolve=False)
    listing = await p.api("GET", f"/repositories/{q(repository)}/actions/runs",
                          params={"branch": branch, "after": after, "amount": 50})
    return p.render("actions.html", view=view, tab="actions", runs=listing["results"],
                    pagination=listing["pagination"], branch=branch)


@router.get("/repositories/{repository}/actions/{run_id}")
async def run(p: PageDep, repository: str, run_id: str) -> Response:
    view = await repo_view(p, repository, resolve=False)
    base = f"/repositories/{q(repository)}/actions/runs/{q(run_id)}"
    record = await p.api("GET", base)
    hooks = await p.all_pages(f"{base}/hooks")
    for hook in hooks:
        try:
            resp = await p.api_raw("GET", f"{base}/hooks/{q(hook['hook_run_id'])}/output")
            hook["output"] = resp.text
        except ApiError as e:
            if e.status == 401:
                raise
            hook["output"] = f"(no output: {e.message})"
    return p.render("action_run.html", view=view, tab="actions", run=record, hooks=hooks)
