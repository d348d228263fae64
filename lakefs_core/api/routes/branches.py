"""Branch routes: create, list, get, delete, reset, hard reset, revert, cherry-pick and the
uncommitted diff."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Response
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel, Field

from lakefs_core.api.routes import (
    AfterQuery,
    AmountQuery,
    Pagination,
    PrefixQuery,
    filtered_page,
    page_size,
    pagination,
)
from lakefs_core.api.routes.commits import CommitModel, commit_model
from lakefs_core.api.routes.refs import DiffList, diff_page
from lakefs_core.api.security import Ctx, authenticated, branch_arn, repo_arn
from lakefs_core.auth import rbac
from lakefs_core.errors import NoChangesError, ValidationError
from lakefs_core.graveler.model import Branch, Difference, DiffType

router = APIRouter()


# --- models ------------------------------------------------------------------------
class RefModel(BaseModel):
    """lakeFS's Ref: a branch or tag name and the commit it points at."""

    id: str
    commit_id: str


class BranchModel(RefModel):
    """A branch as lakeFS's Ref, with its expiry when it has one (this server's
    extension: unix seconds)."""

    expires_at: int | None = None


class RefList(BaseModel):
    pagination: Pagination
    results: list[RefModel]


class BranchCreation(BaseModel):
    name: str
    source: str = Field(description="ref the new branch starts at")
    force: bool | None = False
    hidden: bool | None = Field(default=False, description="leave out of default listings")
    expires_at: int | None = Field(
        default=None, gt=0,
        description="this server's extension: unix time (seconds) after which the branch "
                    "housekeeping deletes the branch, running its delete-branch hooks")


class ResetCreation(BaseModel):
    type: Literal["reset", "object", "common_prefix"] = Field(
        description="reset: every uncommitted change; object: one path; common_prefix: a prefix")
    path: str | None = None
    force: bool | None = False


class CommitOverrides(BaseModel):
    message: str | None = None
    metadata: dict[str, str] | None = None


class RevertCreation(BaseModel):
    ref: str = Field(description="the commit to revert")
    parent_number: int = Field(default=0, ge=0,
                               description="parent (1-based) to diff a merge commit against")
    commit_overrides: CommitOverrides | None = None
    force: bool | None = False
    allow_empty: bool | None = False


class CherryPickCreation(BaseModel):
    ref: str = Field(description="the commit to cherry-pick")
    parent_number: int | None = Field(default=None, ge=0)
    commit_overrides: CommitOverrides | None = None
    force: bool | None = False


def ref_list(refs: list[tuple[str, str]], has_more: bool, max_per_page: int) -> RefList:
    """A page of (name, commit id) pairs as lakeFS's RefList."""
    return RefList(
        pagination=pagination(len(refs), has_more, refs[-1][0] if refs else "", max_per_page),
        results=[RefModel(id=name, commit_id=commit_id) for name, commit_id in refs])


# --- routes ------------------------------------------------------------------------
@router.post("/repositories/{repository}/branches", status_code=201,
             response_class=PlainTextResponse, tags=["branches"])
def create_branch(repository: str, body: BranchCreation,
                  ctx: Ctx = Depends(authenticated)) -> PlainTextResponse:
    """Create a branch at ``source``; the response body is its commit id (text)."""
    ctx.check(rbac.CREATE_BRANCH, branch_arn(repository, body.name))
    branch = ctx.services.graveler.create_branch(repository, body.name, body.source,
                                                 hidden=bool(body.hidden),
                                                 expires_at=body.expires_at,
                                                 user=ctx.user.username)
    return PlainTextResponse(branch.commit_id, status_code=201)


@router.get("/repositories/{repository}/branches", response_model=RefList, tags=["branches"])
def list_branches(
    repository: str,
    prefix: PrefixQuery = "",
    after: AfterQuery = "",
    amount: AmountQuery = 100,
    show_hidden: Annotated[bool, Query(description="include hidden branches")] = False,
    ctx: Ctx = Depends(authenticated),
) -> RefList:
    ctx.check(rbac.LIST_BRANCHES, repo_arn(repository))
    services = ctx.services
    n = page_size(amount)

    def keep(b: Branch) -> bool:
        return show_hidden or not services.graveler.is_branch_hidden(repository, b.name)

    branches, has_more = filtered_page(
        lambda cursor, k: services.graveler.list_branches(repository, prefix=prefix,
                                                          after=cursor, amount=k),
        key=lambda b: b.name, keep=keep, after=after, amount=n, batch=n + 1)
    return ref_list([(b.name, b.commit_id) for b in branches], has_more, n)


@router.get("/repositories/{repository}/branches/{branch}", response_model=BranchModel,
            response_model_exclude_none=True, tags=["branches"])
def get_branch(repository: str, branch: str, ctx: Ctx = Depends(authenticated)) -> BranchModel:
    ctx.check(rbac.READ_BRANCH, branch_arn(repository, branch))
    graveler = ctx.services.graveler
    b = graveler.get_branch(repository, branch)
    return BranchModel(id=b.name, commit_id=b.commit_id,
                       expires_at=graveler.get_branch_expiry(repository, branch))


@router.delete("/repositories/{repository}/branches/{branch}", status_code=204,
               response_class=Response, tags=["branches"])
def delete_branch(
    repository: str,
    branch: str,
    force: Annotated[bool, Query(description="accepted for compatibility")] = False,
    ctx: Ctx = Depends(authenticated),
) -> Response:
    """Delete a branch and its uncommitted changes (not the default branch)."""
    ctx.check(rbac.DELETE_BRANCH, branch_arn(repository, branch))
    ctx.services.graveler.delete_branch(repository, branch, user=ctx.user.username)
    return Response(status_code=204)


@router.put("/repositories/{repository}/branches/{branch}", status_code=204,
            response_class=Response, tags=["branches"])
def reset_branch(repository: str, branch: str, body: ResetCreation,
                 ctx: Ctx = Depends(authenticated)) -> Response:
    """Drop uncommitted changes: all of them, one object's, or those under a prefix."""
    ctx.check(rbac.REVERT_BRANCH, branch_arn(repository, branch))
    graveler = ctx.services.graveler
    if body.type == "reset":
        graveler.reset_branch(repository, branch)
    elif not body.path:
        raise ValidationError(f"path is required for a reset of type {body.type!r}")
    elif body.type == "object":
        graveler.reset_object(repository, branch, body.path)
    else:
        graveler.reset_prefix(repository, branch, body.path)
    return Response(status_code=204)


@router.put("/repositories/{repository}/branches/{branch}/hard_reset", status_code=204,
            response_class=Response, tags=["experimental"])
def hard_reset_branch(
    repository: str,
    branch: str,
    ref: Annotated[str, Query(description="the branch will point at this ref's commit")],
    force: Annotated[bool, Query(description="accepted for compatibility")] = False,
    ctx: Ctx = Depends(authenticated),
) -> Response:
    """Point the branch at ``ref``, dropping its uncommitted changes."""
    ctx.check(rbac.REVERT_BRANCH, branch_arn(repository, branch))
    ctx.services.graveler.hard_reset(repository, branch, ref)
    return Response(status_code=204)


@router.post("/repositories/{repository}/branches/{branch}/revert", status_code=204,
             response_class=Response, tags=["branches"])
def revert_branch(repository: str, branch: str, body: RevertCreation,
                  ctx: Ctx = Depends(authenticated)) -> Response:
    """Commit the inverse of ``ref``'s changes on the branch."""
    ctx.check(rbac.REVERT_BRANCH, branch_arn(repository, branch))
    overrides = body.commit_overrides or CommitOverrides()
    graveler = ctx.services.graveler
    try:
        graveler.revert(repository, branch, body.ref, ctx.user.username,
                        parent_number=body.parent_number, message=overrides.message,
                        metadata=overrides.metadata)
    except NoChangesError:
        if not body.allow_empty:
            raise
        graveler.commit(repository, branch, overrides.message or f"Revert {body.ref}",
                        ctx.user.username, metadata=overrides.metadata, allow_empty=True)
    return Response(status_code=204)


@router.post("/repositories/{repository}/branches/{branch}/cherry-pick", status_code=201,
             response_model=CommitModel, tags=["branches"])
def cherry_pick(repository: str, branch: str, body: CherryPickCreation,
                ctx: Ctx = Depends(authenticated)) -> CommitModel:
    """Apply the changes ``ref`` made to its parent as a new commit on the branch."""
    ctx.check(rbac.CREATE_COMMIT, branch_arn(repository, branch))
    overrides = body.commit_overrides or CommitOverrides()
    rec = ctx.services.graveler.cherry_pick(repository, branch, body.ref, ctx.user.username,
                                            parent_number=body.parent_number or 0,
                                            message=overrides.message,
                                            metadata=overrides.metadata)
    return commit_model(rec)


@router.get("/repositories/{repository}/branches/{branch}/diff", response_model=DiffList,
            tags=["branches"])
def diff_branch(
    repository: str,
    branch: str,
    after: AfterQuery = "",
    amount: AmountQuery = 100,
    prefix: PrefixQuery = "",
    delimiter: Annotated[str, Query(description="group common prefixes by this")] = "",
    ctx: Ctx = Depends(authenticated),
) -> DiffList:
    """The branch's uncommitted changes."""
    ctx.check(rbac.LIST_OBJECTS, repo_arn(repository))
    graveler = ctx.services.graveler

    def fetch(cursor: str, k: int) -> tuple[list[Difference], bool]:
        diffs, more = graveler.diff_uncommitted(repository, branch, prefix=prefix,
                                                after=cursor, amount=k)
        # as lakeFS: a staged removal is a tombstone, with no entry and so size 0
        return [replace(d, left=None) if d.type is DiffType.REMOVED else d
                for d in diffs], more

    return diff_page(fetch, prefix=prefix, delimiter=delimiter, after=after,
                     amount=page_size(amount))
