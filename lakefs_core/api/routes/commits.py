"""Commit routes: commit a branch, get a commit, write a commit record, and the log of a
ref."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response
from pydantic import BaseModel, Field

from lakefs_core.api.routes import AfterQuery, AmountQuery, Pagination, page_size, pagination
from lakefs_core.api.security import Ctx, authenticated, branch_arn, repo_arn, user_arn
from lakefs_core.auth import rbac
from lakefs_core.errors import ValidationError
from lakefs_core.graveler.model import Commit, CommitRecord

router = APIRouter()

#: the commit record version of every commit here (lakeFS's: merge parents are
#: destination first)
COMMIT_VERSION = 1

#: commits fetched from the engine per step when the log filters by date or stop point
_LOG_BATCH = 200

#: the metadata key of a commit record naming the user who wrote it, when its
#: committer is someone else (see :func:`create_commit_record`)
WRITTEN_BY = "lakefs.io/written_by"


class CommitModel(BaseModel):
    """lakeFS's Commit."""

    id: str
    parents: list[str]
    committer: str
    message: str
    creation_date: int = Field(description="Unix epoch in seconds")
    meta_range_id: str
    metadata: dict[str, str]
    generation: int
    version: int = COMMIT_VERSION


class CommitList(BaseModel):
    pagination: Pagination
    results: list[CommitModel]


class CommitCreation(BaseModel):
    """lakeFS's CommitCreation."""

    message: str
    metadata: dict[str, str] | None = None
    date: int | None = Field(default=None, description="creation date override (epoch seconds)")
    allow_empty: bool | None = False
    force: bool | None = False


class CommitRecordCreation(BaseModel):
    """lakeFS's CommitRecordCreation: a commit record written as given."""

    commit_id: str
    version: int = Field(ge=0, le=1, description="commit record version (1)")
    committer: str
    message: str
    metarange_id: str
    creation_date: int = Field(ge=0, description="Unix epoch in seconds")
    parents: list[str]
    metadata: dict[str, str] | None = None
    generation: int
    force: bool | None = Field(default=False, description="accepted, has no effect")


def commit_model(rec: CommitRecord) -> CommitModel:
    """The API shape of a commit record."""
    c = rec.commit
    return CommitModel(id=rec.id, parents=list(c.parents), committer=c.committer,
                       message=c.message, creation_date=c.creation_date,
                       meta_range_id=c.metarange_id, metadata=dict(c.metadata),
                       generation=c.generation)


@router.post("/repositories/{repository}/branches/{branch}/commits", status_code=201,
             response_model=CommitModel, tags=["commits"])
def commit(
    repository: str,
    branch: str,
    body: CommitCreation,
    source_metarange: Annotated[str | None, Query(
        description="commit this metarange instead of the uncommitted changes "
                    "(the branch must have none)")] = None,
    ctx: Ctx = Depends(authenticated),
) -> CommitModel:
    """Commit the branch's uncommitted changes (400 "no changes" when there are none)."""
    ctx.check(rbac.CREATE_COMMIT, branch_arn(repository, branch))
    if body.date is not None and body.date < 0:
        raise ValidationError("date must not be negative")
    if source_metarange is not None:
        return commit_model(ctx.services.graveler.commit_metarange(
            repository, branch, source_metarange, body.message, ctx.user.username,
            metadata=body.metadata or {}, allow_empty=bool(body.allow_empty),
            creation_date=body.date))
    rec = ctx.services.graveler.commit(
        repository, branch, body.message, ctx.user.username, metadata=body.metadata or {},
        allow_empty=bool(body.allow_empty), creation_date=body.date)
    return commit_model(rec)


@router.post("/repositories/{repository}/commits", status_code=204, response_class=Response,
             tags=["internal"])
def create_commit_record(repository: str, body: CommitRecordCreation,
                         ctx: Ctx = Depends(authenticated)) -> Response:
    """Write a commit record (moving no ref), for tools that copy history.

    The record must hash to ``commit_id`` (ids are content hashes here), its parents and
    metarange must exist, and its generation be above its parents'. 409 when the commit
    exists. Only version 1 records (lakeFS's current) are taken. ``force`` is lakeFS's
    override of read-only repositories, which this server never grants.

    A record may name any committer and date, as lakeFS's does; but one naming another
    committer must name its writer too, in its metadata (:data:`WRITTEN_BY`), unless the
    writer may create that committer's credentials (and so could write as them
    anyway). The key is part of the record, so of its id: it cannot be dropped later.
    """
    ctx.check(rbac.CREATE_COMMIT, repo_arn(repository))
    if body.version != COMMIT_VERSION:
        raise ValidationError(f"commit record version {body.version} is not supported")
    metadata = dict(body.metadata or {})
    _check_writer_named(ctx, body.committer, metadata)
    ctx.services.graveler.create_commit_record(
        repository, body.commit_id,
        Commit(parents=tuple(body.parents), metarange_id=body.metarange_id,
               message=body.message, committer=body.committer,
               creation_date=body.creation_date, metadata=metadata,
               generation=body.generation))
    return Response(status_code=204)


def _check_writer_named(ctx: Ctx, committer: str, metadata: dict[str, str]) -> None:
    """Refuse a record that names another committer, or another writer, unless its
    metadata names the authenticated user as writer or that user may create the
    credentials of each user the record names.

    Raises:
        ValidationError: the record's writer is not named where it must be.
    """
    writer = ctx.user.username
    named = {committer, metadata.get(WRITTEN_BY, writer)} - {writer}
    if all(ctx.allowed(rbac.CREATE_CREDENTIALS, user_arn(user)) for user in named):
        return
    if metadata.get(WRITTEN_BY) != writer:
        raise ValidationError(
            f"a commit record of committer {committer!r} written by {writer!r} must name "
            f"its writer in its metadata ({WRITTEN_BY}: {writer}), which the commit id "
            "covers")


@router.get("/repositories/{repository}/commits/{commitId:path}", response_model=CommitModel,
            tags=["commits"])
def get_commit(repository: str, commitId: str,  # noqa: N803 - lakeFS's parameter name
               ctx: Ctx = Depends(authenticated)) -> CommitModel:
    """A commit, by id or by any ref expression (a branch gives its head)."""
    ctx.check(rbac.READ_COMMIT, repo_arn(repository))
    graveler = ctx.services.graveler
    return commit_model(graveler.get_commit(repository,
                                            graveler.resolve_ref(repository, commitId).commit_id))


@router.get("/repositories/{repository}/refs/{ref:path}/commits", response_model=CommitList,
            tags=["refs"])
def log_commits(
    repository: str,
    ref: str,
    after: AfterQuery = "",
    amount: AmountQuery = 100,
    objects: Annotated[list[str] | None, Query(description="only commits changing these")] = None,
    prefixes: Annotated[list[str] | None,
                        Query(description="only commits changing paths under these")] = None,
    limit: Annotated[bool, Query(description="return at most amount commits, no next page")
                     ] = False,
    first_parent: Annotated[bool, Query(description="follow only first parents")] = False,
    since: Annotated[datetime | None, Query(description="stop at commits older than this")
                     ] = None,
    stop_at: Annotated[str | None, Query(description="stop at this ref's commit (included)")
                       ] = None,
    ctx: Ctx = Depends(authenticated),
) -> CommitList:
    """Commits reachable from ``ref``, newest first."""
    ctx.check(rbac.READ_BRANCH, branch_arn(repository, ref))
    graveler = ctx.services.graveler
    n = page_size(amount)

    def fetch(cursor: str, k: int, only_k: bool = False) -> tuple[list[CommitRecord], bool]:
        return graveler.log(repository, ref, amount=k, after=cursor, limit=only_k,
                            first_parent=first_parent, objects=objects or (),
                            prefixes=prefixes or ())

    if since is None and not stop_at:
        commits, has_more = fetch(after, n, limit)
    else:
        stop_id = graveler.resolve_ref(repository, stop_at).commit_id if stop_at else None
        min_date = since.timestamp() if since is not None else None
        commits, has_more = [], False
        cursor, done = after, False
        while not done and len(commits) <= n:
            batch, more = fetch(cursor, _LOG_BATCH)
            for rec in batch:
                if min_date is not None and rec.commit.creation_date < min_date:
                    done = True
                    break
                commits.append(rec)
                if rec.id == stop_id:
                    done = True
                    break
            if not more or not batch:
                done = True
            else:
                cursor = batch[-1].id
        has_more = len(commits) > n and not limit
        commits = commits[:n]
    return CommitList(
        pagination=pagination(len(commits), has_more, commits[-1].id if commits else "", n),
        results=[commit_model(c) for c in commits])
