"""What the pages of one repository share: the repository, its mirror marking, refs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from lakefs_core.graveler.model import MirrorMarking
from lakefs_core.ui.context import ApiError, Page, redirect


def q(value: str) -> str:
    """One path segment of an API address."""
    return quote(value, safe="")


async def act(p: Page, back: str, method: str, path: str, done: str, **kwargs: Any) -> Response:
    """Call the API for a form and go back to ``back`` with what happened (the API's
    refusal as the error shown there)."""
    try:
        await p.api_raw(method, path, **kwargs)
    except ApiError as e:
        if e.status == 401:
            raise
        return redirect(back, error=e.message)
    return redirect(back, notice=done)


@dataclass
class RepoView:
    """A repository as its pages show it."""

    repo: dict[str, Any]
    marking: MirrorMarking | None
    #: the ref the page is about (a branch, tag or commit id)
    ref: str
    #: the commit ``ref`` resolves to, when the page looked it up
    ref_commit: str = ""

    @property
    def id(self) -> str:
        return str(self.repo["id"])

    @property
    def is_mirror(self) -> bool:
        return self.marking is not None and not self.marking.detached


async def repo_view(p: Page, repository: str, ref: str = "", *,
                    resolve: bool = True) -> RepoView:
    """The repository (through the API: 404 and 403 as it answers), its marking and the
    commit ``ref`` (by default the default branch) points at."""
    repo = await p.api("GET", f"/repositories/{q(repository)}")
    marking = await run_in_threadpool(p.state.services.graveler.mirror_marking, repo["id"])
    ref = ref or repo["default_branch"]
    view = RepoView(repo, marking, ref)
    if resolve:
        view.ref_commit = await resolve_ref(p, repository, ref)
    return view


async def resolve_ref(p: Page, repository: str, ref: str) -> str:
    """The commit id of a ref ("" when the ref has no commit yet: a bare repository)."""
    page = await listing(p, f"/repositories/{q(repository)}/refs/{q(ref)}/commits",
                         {"amount": 1})
    results = page.get("results") or []
    return str(results[0]["id"]) if results else ""


EMPTY: dict[str, Any] = {"results": [], "pagination": {"has_more": False, "next_offset": ""}}


async def listing(p: Page, path: str, params: dict[str, Any]) -> dict[str, Any]:
    """A listing of the API; empty for a branch that has no commit yet (a bare
    repository's), which the API answers with 404."""
    try:
        page: dict[str, Any] = await p.api("GET", path, params=params)
    except ApiError as e:
        if e.status == 404 and "has no commit" in e.message:
            return EMPTY
        raise
    return page


async def branch_names(p: Page, repository: str) -> list[str]:
    return [b["id"] for b in await p.all_pages(f"/repositories/{q(repository)}/branches")]
