"""Refs dump and restore routes: lakeFS's tasks (``dump``, ``restore``) and its older
synchronous ``refs/dump`` and ``refs/restore``.

A dump writes the repository's commits, tags and branches to its storage namespace
(see :mod:`lakefs_core.graveler.dump`); a restore loads one into a bare repository.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, BackgroundTasks, Depends, Query, Response
from pydantic import BaseModel, Field

from lakefs_core.api.security import Ctx, authenticated, repo_arn
from lakefs_core.auth import rbac
from lakefs_core.graveler.dump import RefsDumpService
from lakefs_core.graveler.model import RefsDump, RepositoryTask, TaskKind

router = APIRouter()


class RefsDumpModel(BaseModel):
    """lakeFS's RefsDump."""

    commits_meta_range_id: str
    tags_meta_range_id: str
    branches_meta_range_id: str


class RefsRestore(RefsDumpModel):
    """lakeFS's RefsRestore (``force`` is accepted; a restore needs a bare repository)."""

    force: bool | None = False


class TaskInfo(BaseModel):
    id: str = Field(description="ID of the task")


class RepositoryRestoreStatus(BaseModel):
    """lakeFS's RepositoryRestoreStatus."""

    id: str
    done: bool
    update_time: datetime
    error: str | None = None


class RepositoryDumpStatus(RepositoryRestoreStatus):
    """lakeFS's RepositoryDumpStatus: the dump's metaranges once done."""

    refs: RefsDumpModel | None = None


TaskIdQuery = Annotated[str, Query(description="the task's id, as its submission returned it")]


def _dump_permission(repository: str) -> rbac.Requirement:
    arn = repo_arn(repository)
    return rbac.all_of(rbac.Permission(rbac.LIST_TAGS, arn),
                       rbac.Permission(rbac.LIST_BRANCHES, arn),
                       rbac.Permission(rbac.LIST_COMMITS, arn))


def _restore_permission(repository: str) -> rbac.Requirement:
    arn = repo_arn(repository)
    return rbac.all_of(rbac.Permission(rbac.CREATE_TAG, arn),
                       rbac.Permission(rbac.CREATE_BRANCH, arn),
                       rbac.Permission(rbac.CREATE_COMMIT, arn))


def _refs_model(refs: RefsDump) -> RefsDumpModel:
    return RefsDumpModel(commits_meta_range_id=refs.commits_metarange_id,
                         tags_meta_range_id=refs.tags_metarange_id,
                         branches_meta_range_id=refs.branches_metarange_id)


def _refs(body: RefsDumpModel) -> RefsDump:
    return RefsDump(commits_metarange_id=body.commits_meta_range_id,
                    tags_metarange_id=body.tags_meta_range_id,
                    branches_metarange_id=body.branches_meta_range_id)


def _updated(task: RepositoryTask) -> datetime:
    return datetime.fromtimestamp(task.update_time, UTC)


def _submit(ctx: Ctx, repository: str, kind: TaskKind, refs: RefsDump | None,
            background: BackgroundTasks) -> TaskInfo:
    service = RefsDumpService(ctx.services.graveler)
    task = service.submit(repository, kind, refs)
    background.add_task(service.run, repository, task)
    return TaskInfo(id=task.id)


# --- tasks ------------------------------------------------------------------------------
@router.post("/repositories/{repository}/dump", status_code=202, response_model=TaskInfo,
             tags=["repositories"])
def dump_submit(repository: str, background: BackgroundTasks,
                ctx: Ctx = Depends(authenticated)) -> TaskInfo:
    """Start writing the repository's commits, tags and branches to its namespace."""
    ctx.check_requirement(_dump_permission(repository))
    return _submit(ctx, repository, TaskKind.DUMP, None, background)


@router.get("/repositories/{repository}/dump", response_model=RepositoryDumpStatus,
            response_model_exclude_none=True, tags=["repositories"])
def dump_status(repository: str, task_id: TaskIdQuery,
                ctx: Ctx = Depends(authenticated)) -> RepositoryDumpStatus:
    ctx.check_requirement(_dump_permission(repository))
    task = RefsDumpService(ctx.services.graveler).status(repository, task_id, TaskKind.DUMP)
    refs = _refs_model(task.refs) if task.done and task.refs and not task.error else None
    return RepositoryDumpStatus(id=task.id, done=task.done, update_time=_updated(task),
                                error=task.error or None, refs=refs)


@router.post("/repositories/{repository}/restore", status_code=202, response_model=TaskInfo,
             tags=["repositories"])
def restore_submit(repository: str, body: RefsRestore, background: BackgroundTasks,
                   ctx: Ctx = Depends(authenticated)) -> TaskInfo:
    """Start loading a dump into the (bare) repository; 400 if it has refs already."""
    ctx.check_requirement(_restore_permission(repository))
    return _submit(ctx, repository, TaskKind.RESTORE, _refs(body), background)


@router.get("/repositories/{repository}/restore", response_model=RepositoryRestoreStatus,
            response_model_exclude_none=True, tags=["repositories"])
def restore_status(repository: str, task_id: TaskIdQuery,
                   ctx: Ctx = Depends(authenticated)) -> RepositoryRestoreStatus:
    ctx.check_requirement(_restore_permission(repository))
    task = RefsDumpService(ctx.services.graveler).status(repository, task_id,
                                                         TaskKind.RESTORE)
    return RepositoryRestoreStatus(id=task.id, done=task.done, update_time=_updated(task),
                                   error=task.error or None)


# --- synchronous (older) ----------------------------------------------------------------
@router.put("/repositories/{repository}/refs/dump", status_code=201,
            response_model=RefsDumpModel, tags=["internal"])
def dump_refs(repository: str, ctx: Ctx = Depends(authenticated)) -> RefsDumpModel:
    """Dump the repository's refs now and return where they are."""
    ctx.check_requirement(_dump_permission(repository))
    return _refs_model(RefsDumpService(ctx.services.graveler).dump(repository))


@router.put("/repositories/{repository}/refs/restore", status_code=200,
            response_class=Response, tags=["internal"])
def restore_refs(repository: str, body: RefsRestore,
                 ctx: Ctx = Depends(authenticated)) -> Response:
    """Load a dump into the (bare) repository now."""
    ctx.check_requirement(_restore_permission(repository))
    RefsDumpService(ctx.services.graveler).restore(repository, _refs(body))
    return Response(status_code=200)
