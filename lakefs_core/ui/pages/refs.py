"""Branches, tags, the commit log, a commit with its diff, uncommitted changes with a
commit form, and compare/merge of two refs."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from lakefs_core.auth import rbac
from lakefs_core.ui.context import ApiError, Page, page, redirect, url
from lakefs_core.ui.pages.common import act, branch_names, listing, q, repo_view

router = APIRouter()
PageDep = Annotated[Page, Depends(page)]
FormStr = Annotated[str, Form()]

#: at most this many differences are listed on one page
DIFF_LIMIT = 1000
#: the changes on each side looked at to find conflicts before a merge
CONFLICT_SCAN = 10_000


# --- branches and tags ----------------------------------------------------------------
@router.get("/repositories/{repository}/branches")
async def branches(p: PageDep, repository: str) -> Response:
    view = await repo_view(p, repository, resolve=False)
    rows = await p.all_pages(f"/repositories/{q(repository)}/branches")
    rules: list[str] | None = None  # None: the user may not read them
    try:
        rules = [r["pattern"] for r in await p.api(
            "GET", f"/repositories/{q(repository)}/settings/branch_protection")]
    except ApiError as e:
        if e.status != 403:
            raise
    graveler = p.state.services.graveler
    for row in rows:
        row["protected"] = await run_in_threadpool(graveler.is_protected, repository, row["id"])
    return p.render("branches.html", view=view, tab="branches", branches=rows, rules=rules,
                    can_protect=p.can(rbac.SET_BRANCH_PROTECTION_RULES,
                                      rbac.repository_arn(repository)))


@router.post("/repositories/{repository}/branch_protection")
async def add_protection(p: PageDep, repository: str, csrf: FormStr,
                         pattern: FormStr) -> Response:
    p.check_form(csrf)
    return await act(p, url(f"/repositories/{q(repository)}/branches"), "POST",
                      f"/repositories/{q(repository)}/branch_protection",
                      f"branches matching {pattern.strip()} are protected",
                      json={"pattern": pattern.strip()})


@router.post("/repositories/{repository}/branch_protection/delete")
async def remove_protection(p: PageDep, repository: str, csrf: FormStr,
                            pattern: FormStr) -> Response:
    p.check_form(csrf)
    return await act(p, url(f"/repositories/{q(repository)}/branches"), "DELETE",
                      f"/repositories/{q(repository)}/branch_protection",
                      f"protection rule {pattern} removed", json={"pattern": pattern})


@router.post("/repositories/{repository}/branches")
async def create_branch(p: PageDep, repository: str, csrf: FormStr, name: FormStr,
                        source: FormStr) -> Response:
    p.check_form(csrf)
    return await act(p, url(f"/repositories/{q(repository)}/branches"), "POST",
                      f"/repositories/{q(repository)}/branches",
                      f"branch {name.strip()} created",
                      json={"name": name.strip(), "source": source.strip()})


@router.post("/repositories/{repository}/branches/delete")
async def delete_branch(p: PageDep, repository: str, branch: FormStr, csrf: FormStr) -> Response:
    p.check_form(csrf)
    return await act(p, url(f"/repositories/{q(repository)}/branches"), "DELETE",
                      f"/repositories/{q(repository)}/branches/{q(branch)}",
                      f"branch {branch} deleted")


@router.get("/repositories/{repository}/tags")
async def tags(p: PageDep, repository: str) -> Response:
    view = await repo_view(p, repository, resolve=False)
    rows = await p.all_pages(f"/repositories/{q(repository)}/tags")
    return p.render("tags.html", view=view, tab="tags", tags=rows)


@router.post("/repositories/{repository}/tags")
async def create_tag(p: PageDep, repository: str, csrf: FormStr, name: FormStr,
                     ref: FormStr) -> Response:
    p.check_form(csrf)
    return await act(p, url(f"/repositories/{q(repository)}/tags"), "POST",
                      f"/repositories/{q(repository)}/tags", f"tag {name.strip()} created",
                      json={"id": name.strip(), "ref": ref.strip()})


@router.post("/repositories/{repository}/tags/delete")
async def delete_tag(p: PageDep, repository: str, tag: FormStr, csrf: FormStr) -> Response:
    p.check_form(csrf)
    return await act(p, url(f"/repositories/{q(repository)}/tags"), "DELETE",
                      f"/repositories/{q(repository)}/tags/{q(tag)}", f"tag {tag} deleted")


# --- commits ------------------------------------------------------------------------
@router.get("/repositories/{repository}/commits")
async def commits(p: PageDep, repository: str, ref: str = "", after: str = "") -> Response:
    view = await repo_view(p, repository, ref, resolve=False)
    log = await listing(p, f"/repositories/{q(repository)}/refs/{q(view.ref)}/commits",
                        {"after": after, "amount": 50})
    return p.render("commits.html", view=view, tab="commits", commits=log["results"],
                    pagination=log["pagination"],
                    branches=await branch_names(p, repository))


async def _diff(p: Page, repository: str, left: str, right: str,
                kind: str = "two_dot", limit: int = DIFF_LIMIT
                ) -> tuple[list[dict[str, Any]], bool]:
    results = await p.all_pages(
        f"/repositories/{q(repository)}/refs/{q(left)}/diff/{q(right)}",
        params={"type": kind, "include_right_stats": "true"}, limit=limit + 1)
    return results[:limit], len(results) > limit


@router.get("/repositories/{repository}/commits/{commit_id}")
async def commit(p: PageDep, repository: str, commit_id: str) -> Response:
    view = await repo_view(p, repository, commit_id, resolve=False)
    record = await p.api("GET", f"/repositories/{q(repository)}/commits/{q(commit_id)}")
    parents = record.get("parents") or []
    diff: list[dict[str, Any]] = []
    truncated = False
    if parents:
        diff, truncated = await _diff(p, repository, parents[0], record["id"])
    return p.render("commit.html", view=view, tab="commits", commit=record, diff=diff,
                    truncated=truncated)


# --- uncommitted changes ------------------------------------------------------------
@router.get("/repositories/{repository}/changes")
async def changes(p: PageDep, repository: str, ref: str = "") -> Response:
    view = await repo_view(p, repository, ref)
    staged: list[dict[str, Any]] = []
    if view.ref_commit:  # a branch without a commit (a bare repository's) has no changes
        staged = await p.all_pages(
            f"/repositories/{q(repository)}/branches/{q(view.ref)}/diff", limit=DIFF_LIMIT + 1)
    return p.render("changes.html", view=view, tab="changes", changes=staged[:DIFF_LIMIT],
                    truncated=len(staged) > DIFF_LIMIT,
                    branches=await branch_names(p, repository),
                    can_commit=p.can(rbac.CREATE_COMMIT, rbac.branch_arn(repository, view.ref)))


@router.post("/repositories/{repository}/changes/commit")
async def commit_changes(p: PageDep, repository: str, csrf: FormStr, branch: FormStr,
                         message: FormStr, metadata: FormStr = "") -> Response:
    p.check_form(csrf)
    meta: dict[str, str] = {}
    for line in metadata.splitlines():
        if line.strip():
            key, sep, value = line.partition("=")
            if not sep or not key.strip():
                return redirect(url(f"/repositories/{q(repository)}/changes", ref=branch),
                                error=f"metadata lines are key=value, not {line.strip()!r}")
            meta[key.strip()] = value.strip()
    try:
        made = await p.api("POST", f"/repositories/{q(repository)}/branches/{q(branch)}/commits",
                           json={"message": message, "metadata": meta})
    except ApiError as e:
        if e.status == 401:
            raise
        return redirect(url(f"/repositories/{q(repository)}/changes", ref=branch),
                        error=f"commit failed: {e.message}")
    return redirect(url(f"/repositories/{q(repository)}/commits/{q(made['id'])}"),
                    notice=f"committed {made['id'][:12]} on {branch}")


@router.post("/repositories/{repository}/changes/reset")
async def reset_changes(p: PageDep, repository: str, csrf: FormStr, branch: FormStr) -> Response:
    p.check_form(csrf)
    return await act(p, url(f"/repositories/{q(repository)}/changes", ref=branch), "PUT",
                      f"/repositories/{q(repository)}/branches/{q(branch)}",
                      f"uncommitted changes on {branch} discarded", json={"type": "reset"})


# --- compare and merge --------------------------------------------------------------
async def _merge_bases(p: Page, repository: str, base: str,
                       compare: str) -> dict[str, Any] | None:
    """The merge base of a merge of ``compare`` into ``base`` and the commits it joins;
    None when the refs have no common history."""
    try:
        bases: dict[str, Any] = await p.api(
            "GET", f"/repositories/{q(repository)}/refs/{q(compare)}/merge/{q(base)}")
    except ApiError as e:
        if e.status == 404:
            return None
        raise
    return bases


async def _conflicts(p: Page, repository: str, bases: dict[str, Any] | None) -> list[str]:
    """Paths both refs changed differently since their merge base (what a merge would
    refuse; ``bases``: as :func:`_merge_bases` gives them)."""
    if bases is None:  # no common history: nothing to compare against
        return []
    merge_base = bases["base_commit_id"]
    ours = {d["path"]: d for d in (await _diff(p, repository, merge_base, bases[
        "destination_commit_id"], limit=CONFLICT_SCAN))[0]}
    if not ours:
        return []
    theirs = (await _diff(p, repository, merge_base, bases["source_commit_id"],
                          limit=CONFLICT_SCAN))[0]
    conflicts = []
    for d in theirs:
        mine = ours.get(d["path"])
        if mine is None:
            continue
        if mine["type"] == d["type"] == "removed":
            continue
        mine_sum = (mine.get("right") or {}).get("checksum")
        if mine_sum and mine_sum == (d.get("right") or {}).get("checksum"):
            continue
        conflicts.append(d["path"])
    return conflicts


@router.get("/repositories/{repository}/compare")
async def compare(p: PageDep, repository: str, base: str = "", compare: str = "") -> Response:
    view = await repo_view(p, repository, base, resolve=False)
    names = await branch_names(p, repository)
    diff: list[dict[str, Any]] = []
    truncated = False
    conflicts: list[str] = []
    merge_base = view.ref
    if compare:
        diff, truncated = await _diff(p, repository, view.ref, compare, "three_dot")
        bases = await _merge_bases(p, repository, view.ref, compare)
        conflicts = await _conflicts(p, repository, bases)
        merge_base = bases["base_commit_id"] if bases else view.ref
    return p.render("compare.html", view=view, tab="compare", branches=names, base=view.ref,
                    compare=compare, diff=diff, truncated=truncated, conflicts=conflicts,
                    merge_base=merge_base,
                    can_merge=view.ref in names and p.can(
                        rbac.CREATE_COMMIT, rbac.branch_arn(repository, view.ref)))


@router.post("/repositories/{repository}/compare/merge")
async def merge(p: PageDep, repository: str, csrf: FormStr, base: FormStr, compare: FormStr,
                message: FormStr = "", strategy: FormStr = "") -> Response:
    p.check_form(csrf)
    back = url(f"/repositories/{q(repository)}/compare", base=base, compare=compare)
    body: dict[str, Any] = {"message": message or f"Merge '{compare}' into '{base}'"}
    if strategy in ("dest-wins", "source-wins"):
        body["strategy"] = strategy
    try:
        result = await p.api("POST", f"/repositories/{q(repository)}/refs/{q(compare)}"
                                     f"/merge/{q(base)}", json=body)
    except ApiError as e:
        if e.status == 401:
            raise
        return redirect(back, error=f"merge failed: {e.message}")
    return redirect(url(f"/repositories/{q(repository)}/commits/{q(result['reference'])}"),
                    notice=f"merged {compare} into {base}")
