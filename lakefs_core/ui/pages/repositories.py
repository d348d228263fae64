"""Repositories: the list, create, delete."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from lakefs_core.auth import rbac
from lakefs_core.ui.context import ApiError, Page, page, redirect, url
from lakefs_core.ui.pages.common import q

router = APIRouter()
PageDep = Annotated[Page, Depends(page)]


@router.get("/repositories")
async def repositories(p: PageDep, prefix: str = "", after: str = "") -> Response:
    listing = await p.api("GET", "/repositories",
                          params={"prefix": prefix, "after": after, "amount": 100})
    graveler = p.state.services.graveler
    rows = []
    for repo in listing["results"]:
        marking = await run_in_threadpool(graveler.mirror_marking, repo["id"])
        rows.append({"repo": repo, "marking": marking})
    return p.render("repositories.html", rows=rows, prefix=prefix,
                    pagination=listing["pagination"],
                    can_create=p.can(rbac.CREATE_REPOSITORY, rbac.repository_arn("")))


@router.post("/repositories")
async def create_repository(
    p: PageDep, name: Annotated[str, Form()], csrf: Annotated[str, Form()],
    storage_namespace: Annotated[str, Form()] = "",
    default_branch: Annotated[str, Form()] = "main",
) -> Response:
    p.check_form(csrf)
    body = {"name": name.strip(), "storage_namespace": storage_namespace.strip(),
            "default_branch": default_branch.strip() or "main"}
    try:
        await p.api("POST", "/repositories", json=body)
    except ApiError as e:
        if e.status == 401:
            raise
        return redirect(url("/repositories"), error=f"cannot create repository: {e.message}")
    return redirect(url(f"/repositories/{q(body['name'])}/objects"),
                    notice=f"repository {body['name']} created")


@router.post("/repositories/{repository}/delete")
async def delete_repository(p: PageDep, repository: str, csrf: Annotated[str, Form()],
                            confirm: Annotated[str, Form()] = "") -> Response:
    p.check_form(csrf)
    if confirm != repository:
        return redirect(url("/repositories"),
                        error=f"type the repository's name ({repository}) to delete it")
    try:
        await p.api_raw("DELETE", f"/repositories/{q(repository)}")
    except ApiError as e:
        if e.status == 401:
            raise
        return redirect(url("/repositories"), error=f"cannot delete {repository}: {e.message}")
    return redirect(url("/repositories"), notice=f"repository {repository} deleted")


@router.get("/repositories/{repository}")
async def repository_home(repository: str) -> Response:
    return redirect(url(f"/repositories/{q(repository)}/objects"))
