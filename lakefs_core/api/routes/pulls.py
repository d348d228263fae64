"""Pull request routes: create, list (by status, paged), get, update and merge.

Shapes are lakeFS's (``PullRequest``, ``PullRequestsList``, ``PullRequestBasic``,
``MergeResult``); dates are ISO 8601 date-times. Listing by ``status``: ``open``,
``closed`` (closed and merged ones), or ``all`` (the default). Merging an open pull
request merges its source branch into its destination like ``mergeIntoBranch`` (400
"no changes", 409 on conflict) and marks it merged with the merge commit's id.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Response
from pydantic import BaseModel, Field

from lakefs_core.api.routes import (
    AfterQuery,
    AmountQuery,
    Pagination,
    PrefixQuery,
    page_size,
    pagination,
)
from lakefs_core.api.routes.refs import MergeResult
from lakefs_core.api.security import Ctx, authenticated, branch_arn, repo_arn
from lakefs_core.auth import rbac
from lakefs_core.graveler.model import PullRequest, PullRequestStatus

router = APIRouter(tags=["pulls"])

#: which stored statuses a ``status`` filter of the listing selects
_LISTED: dict[str, frozenset[PullRequestStatus] | None] = {
    "open": frozenset({PullRequestStatus.OPEN}),
    "closed": frozenset({PullRequestStatus.CLOSED, PullRequestStatus.MERGED}),
    "all": None,
}


class PullRequestModel(BaseModel):
    """lakeFS's PullRequest."""

    id: str
    status: str
    title: str
    description: str
    creation_date: datetime
    author: str
    source_branch: str
    destination_branch: str
    merged_commit_id: str | None = None
    closed_date: datetime | None = None


class PullRequestsList(BaseModel):
    pagination: Pagination
    results: list[PullRequestModel]


class PullRequestCreation(BaseModel):
    title: str
    description: str | None = None
    source_branch: str
    destination_branch: str


class PullRequestCreationResponse(BaseModel):
    id: str = Field(description="ID of the pull request")


class PullRequestBasic(BaseModel):
    """lakeFS's PullRequestBasic: the fields an update may change."""

    status: Literal["open", "closed", "merged"] | None = None
    title: str | None = None
    description: str | None = None


def _date(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def pull_request_model(pr: PullRequest) -> PullRequestModel:
    created = _date(pr.creation_date)
    assert created is not None
    return PullRequestModel(
        id=pr.id, status=pr.status.value, title=pr.title, description=pr.description,
        creation_date=created, author=pr.author, source_branch=pr.source_branch,
        destination_branch=pr.destination_branch, merged_commit_id=pr.merged_commit_id,
        closed_date=_date(pr.closed_date))


@router.post("/repositories/{repository}/pulls", status_code=201,
             response_model=PullRequestCreationResponse)
def create_pull_request(repository: str, body: PullRequestCreation,
                        ctx: Ctx = Depends(authenticated)) -> PullRequestCreationResponse:
    """Open a pull request; both branches must exist and differ."""
    ctx.check(rbac.CREATE_PULL_REQUEST, repo_arn(repository))
    pr = ctx.services.graveler.create_pull_request(
        repository, title=body.title, description=body.description or "",
        source_branch=body.source_branch, destination_branch=body.destination_branch,
        author=ctx.user.username)
    return PullRequestCreationResponse(id=pr.id)


@router.get("/repositories/{repository}/pulls", response_model=PullRequestsList)
def list_pull_requests(
    repository: str,
    prefix: PrefixQuery = "",
    after: AfterQuery = "",
    amount: AmountQuery = 100,
    status: Annotated[Literal["open", "closed", "all"],
                      Query(description="open, closed (or merged), or all")] = "all",
    ctx: Ctx = Depends(authenticated),
) -> PullRequestsList:
    """Pull requests in creation order."""
    ctx.check(rbac.LIST_PULL_REQUESTS, repo_arn(repository))
    n = page_size(amount)
    found = ctx.services.graveler.list_pull_requests(
        repository, prefix=prefix, after=after, amount=n + 1, statuses=_LISTED[status])
    page = found[:n]
    return PullRequestsList(
        pagination=pagination(len(page), len(found) > n, page[-1].id if page else "", n),
        results=[pull_request_model(pr) for pr in page])


@router.get("/repositories/{repository}/pulls/{pull_request}",
            response_model=PullRequestModel)
def get_pull_request(repository: str, pull_request: str,
                     ctx: Ctx = Depends(authenticated)) -> PullRequestModel:
    ctx.check(rbac.READ_PULL_REQUEST, repo_arn(repository))
    return pull_request_model(ctx.services.graveler.get_pull_request(repository, pull_request))


@router.patch("/repositories/{repository}/pulls/{pull_request}", status_code=204,
              response_class=Response)
def update_pull_request(repository: str, pull_request: str, body: PullRequestBasic,
                        ctx: Ctx = Depends(authenticated)) -> Response:
    """Change the title, the description, or the status (open or closed)."""
    ctx.check(rbac.WRITE_PULL_REQUEST, repo_arn(repository))
    ctx.services.graveler.update_pull_request(
        repository, pull_request, title=body.title, description=body.description,
        status=PullRequestStatus(body.status) if body.status is not None else None)
    return Response(status_code=204)


@router.put("/repositories/{repository}/pulls/{pull_request}/merge",
            response_model=MergeResult)
def merge_pull_request(repository: str, pull_request: str,
                       ctx: Ctx = Depends(authenticated)) -> MergeResult:
    """Merge an open pull request (a merge commit on its destination branch)."""
    ctx.check(rbac.WRITE_PULL_REQUEST, repo_arn(repository))
    graveler = ctx.services.graveler
    pr = graveler.get_pull_request(repository, pull_request)
    ctx.check(rbac.CREATE_COMMIT, branch_arn(repository, pr.destination_branch))
    merged = graveler.merge_pull_request(repository, pull_request, ctx.user.username)
    return MergeResult(reference=merged.id)
