"""Import routes: start a zero-copy import into a branch, its status, its cancellation.

Shaped like lakeFS's ``importStart``, ``importStatus`` and ``importCancel``, with the
permissions lakeFS requires: writing objects and committing on the branch,
``fs:ImportFromStorage`` on every source (as a namespace ARN) and ``fs:WriteObject``
on every destination to start; reading the branch for the status;
``fs:ImportCancel`` on the branch to cancel.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Response
from pydantic import BaseModel, Field

from lakefs_core.api.routes.commits import CommitCreation, CommitModel, commit_model
from lakefs_core.api.security import Ctx, authenticated, branch_arn, namespace_arn, object_arn
from lakefs_core.auth import rbac
from lakefs_core.graveler.importing import ImportPath, ImportPathType

router = APIRouter()

ImportIdQuery = Annotated[str, Query(description="Unique identifier of the import process")]


class ImportLocation(BaseModel):
    """lakeFS's ImportLocation."""

    type: Literal["common_prefix", "object"] = Field(
        description="Path type, can either be 'common_prefix' or 'object'")
    path: str = Field(description="A source location to a 'common_prefix' or to a single "
                                  "object. Must match the blockstore type.")
    destination: str = Field(description="Destination for the imported objects on the "
                                         "branch (the object's path, or a prefix)")


class ImportCreation(BaseModel):
    """lakeFS's ImportCreation."""

    paths: list[ImportLocation]
    commit: CommitCreation
    force: bool | None = False


class ImportCreationResponse(BaseModel):
    id: str = Field(description="The id of the import process")


class ErrorModel(BaseModel):
    message: str


class ImportStatusModel(BaseModel):
    """lakeFS's ImportStatus."""

    completed: bool
    update_time: datetime
    ingested_objects: int | None = Field(default=None,
                                         description="Number of objects processed so far")
    metarange_id: str | None = None
    commit: CommitModel | None = None
    error: ErrorModel | None = None


@router.post("/repositories/{repository}/branches/{branch}/import", status_code=202,
             response_model=ImportCreationResponse, tags=["import"])
def import_start(repository: str, branch: str, body: ImportCreation,
                 ctx: Ctx = Depends(authenticated)) -> ImportCreationResponse:
    """Start importing objects from the object store into the branch (zero-copy)."""
    ctx.check_requirement(rbac.all_of(
        rbac.Permission(rbac.WRITE_OBJECT, branch_arn(repository, branch)),
        rbac.Permission(rbac.CREATE_COMMIT, branch_arn(repository, branch)),
        *(req for p in body.paths for req in (
            rbac.Permission(rbac.IMPORT_FROM_STORAGE, namespace_arn(p.path)),
            rbac.Permission(rbac.WRITE_OBJECT, object_arn(repository, p.destination))))))
    paths = [ImportPath(p.path, p.destination, ImportPathType(p.type)) for p in body.paths]
    import_id = ctx.services.imports.start(
        repository, branch, paths, message=body.commit.message, committer=ctx.user.username,
        metadata=body.commit.metadata or {})
    return ImportCreationResponse(id=import_id)


@router.get("/repositories/{repository}/branches/{branch}/import",
            response_model=ImportStatusModel, response_model_exclude_none=True,
            tags=["import"])
def import_status(repository: str, branch: str, id: ImportIdQuery,  # noqa: A002 - lakeFS's name
                  ctx: Ctx = Depends(authenticated)) -> ImportStatusModel:
    """An import's progress, and its commit or error once it ended."""
    ctx.check(rbac.READ_BRANCH, branch_arn(repository, branch))
    state = ctx.services.imports.status(repository, branch, id)
    commit = None
    if state.commit_id:
        commit = commit_model(ctx.services.graveler.get_commit(repository, state.commit_id))
    return ImportStatusModel(
        completed=state.completed,
        update_time=datetime.fromtimestamp(state.updated_at, UTC),
        ingested_objects=state.ingested,
        metarange_id=state.metarange_id or None,
        commit=commit,
        error=ErrorModel(message=state.error) if state.error else None)


@router.delete("/repositories/{repository}/branches/{branch}/import", status_code=204,
               tags=["import"])
def import_cancel(repository: str, branch: str, id: ImportIdQuery,  # noqa: A002 - lakeFS's name
                  ctx: Ctx = Depends(authenticated)) -> Response:
    """Cancel a running import: it stops and its branch stays as it was."""
    ctx.check(rbac.IMPORT_CANCEL, branch_arn(repository, branch))
    ctx.services.imports.cancel(repository, branch, id)
    return Response(status_code=204)
